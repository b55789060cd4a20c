/* Seed-expandable randomness (internal).
 *
 * Every random value in the core comes from a 32-byte seed: drawn from the
 * OS CSPRNG (libsodium randombytes_buf) in production, or given by a test to
 * reproduce a key or ciphertext bit for bit. The seed is expanded with
 * ChaCha20, the original 64-bit-nonce variant (libsodium's
 * crypto_stream_chacha20 stream, computed by OpenSSL's EVP ChaCha20 when a
 * per-thread context can be had; the nonce is a domain/stream label).
 * Thread-safe: a tsafe_prng is one thread's at a time; the OpenSSL context
 * is per thread. Sub-seeds for independent purposes are derived with
 * keyed BLAKE2b so that revealing one (e.g. the seed of a ciphertext's `a`)
 * reveals nothing about another (its error). State is wiped on clear. */
#ifndef TSAFE_PRNG_H
#define TSAFE_PRNG_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"
#include "cpu.h"  /* the AVX-512 samplers run only after tsafe_cpu_has_avx512_sampling() */
#include "init.h" /* tsafe_sodium_ready */

typedef struct tsafe_prng {
    uint8_t key[32];
    uint8_t nonce[8];
    uint64_t block;       /* next ChaCha20 block counter */
    uint8_t buf[4096];
    size_t len;           /* bytes of buf filled (4096 but after a reserve) */
    size_t pos;           /* bytes of buf consumed */
    size_t next;          /* the next refill's size, 0: the whole buf */
} tsafe_prng;


/* Fresh 32-byte seed from the OS CSPRNG. */
tsafe_status tsafe_seed_fresh(uint8_t seed[32]);

/* out = BLAKE2b-256(key = seed, message = label). */
void tsafe_seed_derive(uint8_t out[32], const uint8_t seed[32],
                       const char *label);

void tsafe_prng_init(tsafe_prng *p, const uint8_t seed[32], uint64_t stream);
void tsafe_prng_clear(tsafe_prng *p);
/* The stream's position: bytes consumed since init. */
uint64_t tsafe_prng_offset(const tsafe_prng *p);
/* Continue at byte offset off of the stream (as if the bytes before it
 * had been consumed): a reader that leaves a span to someone else (the
 * sealing's e1, expanded on a device from the key and its offset). */
void tsafe_prng_seek(tsafe_prng *p, uint64_t off);
/* The next refill (the first after init, or the one a seek makes) fetches
 * only `bytes` of keystream, rounded up to 64 (0 or > 4096: a whole
 * buffer): a reader that knows it needs little (a sealing's lean draws,
 * about 1 KB of the stream's first 4 and 0.2 KB past e1) spares the rest
 * of the ChaCha20. The stream is the same; later refills are whole. */
void tsafe_prng_reserve(tsafe_prng *p, size_t bytes);
void tsafe_prng_bytes(tsafe_prng *p, uint8_t *out, size_t len);
uint64_t tsafe_prng_u64(tsafe_prng *p);

/* Uniform in [0, q) by rejection on the low bit_length(q) bits. */
void tsafe_prng_uniform_mod(tsafe_prng *p, uint64_t q, uint64_t *out,
                            size_t n);
/* The same distributions drawing fewer stream bytes (the exact sealed
 * protocol's format): each candidate is the next ceil(bits/8) bytes, little
 * endian, masked to bit_length(q) bits; each binomial sample the next 6
 * bytes (42 bits used). The CKKS formats keep the 8-byte draws above. */
void tsafe_prng_uniform_mod_tight(tsafe_prng *p, uint64_t q, uint64_t *out,
                                  size_t n);
void tsafe_prng_cbd_tight(tsafe_prng *p, int8_t *out, size_t n);
/* The tight samplers' AVX-512 kernels (prng_avx512.c), eight candidates a
 * step from avail buffered stream bytes at src, stopping while fewer than 8
 * values remain to draw or fewer than 8 candidates are buffered: uniform
 * returns the values accepted into out (<= n) and the bytes consumed in
 * *used; cbd21 returns the samples written (6 bytes each). Call only when
 * tsafe_cpu_has_avx512_sampling() (cpu.h). */
size_t tsafe_uniform_tight_avx512(const uint8_t *src, size_t avail, uint64_t q,
                                  unsigned nb, uint64_t *out, size_t n, size_t *used);
size_t tsafe_cbd21_avx512(const uint8_t *src, size_t avail, int8_t *out, size_t n);
/* Uniform ternary {-1, 0, 1} (rejection on bytes >= 243, 5 trits a byte). */
void tsafe_prng_ternary(tsafe_prng *p, int8_t *out, size_t n);
/* Centred binomial with k = 21 (sigma = sqrt(10.5) ~ 3.24). */
void tsafe_prng_cbd(tsafe_prng *p, int8_t *out, size_t n);

#endif
