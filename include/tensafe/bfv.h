/* Exact integer (BFV-style) coefficient encryption: the ring machinery of
 * the sealed two-party protocol (tensafe/lora_sealed.h, docs/PROTOCOL.md).
 *
 * Plaintexts are integer polynomials m in Z_t[X]/(X^N+1), t = 2^t_bits.
 * A ciphertext at modulus Q = q0 * (gap primes) satisfies c0 + c1*s = round(Q*m/t) + e;
 * decryption is scale-and-round, so what a client decrypts is an exact
 * integer mod t that carries no encryption noise (unlike CKKS, where the
 * decrypted value is m + e and releasing it leaks e: Li-Micciancio).
 *
 * Coefficient encoding (Cheetah): with x a polynomial holding a chunk of a
 * vector in coefficients 0..n_i-1 and P a plaintext holding rows of a
 * matrix reversed at offsets o*n_i, the product x*P holds the inner
 * products at coefficients o*n_i + n_i - 1 -- no rotations, no evaluation
 * keys. Products with many chunks are summed into an accumulator.
 *
 * The server's finishing step (tsafe_bfv_seal) makes the result safe to
 * hand to the key holder: it adds a fresh public-key encryption of zero
 * (c1 becomes pseudorandom, independent of the plaintexts), adds a mask
 * and a uniform flooding term to the coefficients it will send (the noise
 * that depends on the server's plaintexts is hidden to statistical distance
 * 2^-flood_margin per coefficient), switches to the response modulus q0
 * (dropping the gap primes) and keeps c1 plus only the requested c0 coefficients.
 *
 * Thread safety: contexts and keys are immutable after creation and may be
 * shared; ciphertexts, plaintexts, accumulators and sealed results are
 * per-thread objects. Secret material is wiped on free. */
#ifndef TENSAFE_BFV_H
#define TENSAFE_BFV_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_BFV_SEED_BYTES 32
#define TSAFE_BFV_FINGERPRINT_BYTES 32

/* Flags for tsafe_bfv_params.flags (same value as the CKKS flag). */
#define TSAFE_BFV_INSECURE_FOR_TESTS 0x1u

typedef struct tsafe_bfv_params {
    uint32_t log_n;     /* N = 2^log_n, 11..15 */
    uint32_t resp_bits; /* bits of q0, the response modulus (30..50) */
    uint32_t gap_bits;  /* bits of the gap Q/q0, dropped when switching
                           (30..61; above 50 two primes of half the bits) */
    uint32_t t_bits;    /* plaintext modulus t = 2^t_bits (8..resp_bits-8) */
    uint32_t flags;     /* TSAFE_BFV_INSECURE_FOR_TESTS */
} tsafe_bfv_params;

typedef struct tsafe_bfv_context tsafe_bfv_context;

/* Validate and build (primes generated: the largest below 2^bits with
 * q = 1 mod 2N). TSAFE_E_INSECURE when log2(Q) passes the 128-bit bound
 * of tsafe_params_max_log_q and the test flag is not set; TSAFE_E_PARAMS
 * for sizes out of range. Free with tsafe_bfv_context_free (NULL ok). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_context_create(
    const tsafe_bfv_params *p, tsafe_bfv_context **out);
TSAFE_API void tsafe_bfv_context_free(tsafe_bfv_context *ctx);
TSAFE_API size_t tsafe_bfv_context_n(const tsafe_bfv_context *ctx);
/* Limb i's prime: q0 (i = 0, the response modulus), then the gap primes
 * that the switch drops (one, or two when gap_bits > 50 so that every limb
 * runs the IFMA kernels); 0 for i >= tsafe_bfv_context_limbs. */
TSAFE_API uint64_t tsafe_bfv_context_prime(const tsafe_bfv_context *ctx,
                                           uint32_t i);
/* Number of limbs: 2 or 3 (0 for NULL). */
TSAFE_API uint32_t tsafe_bfv_context_limbs(const tsafe_bfv_context *ctx);
TSAFE_API double tsafe_bfv_context_log2_q(const tsafe_bfv_context *ctx);
TSAFE_API const tsafe_bfv_params *tsafe_bfv_context_params(
    const tsafe_bfv_context *ctx);
/* BLAKE2b-256 over the parameters and the primes. */
TSAFE_API void tsafe_bfv_context_fingerprint(
    const tsafe_bfv_context *ctx, uint8_t out[TSAFE_BFV_FINGERPRINT_BYTES]);

/* ------------------------------------------------------------------ keys */

typedef struct tsafe_bfv_secret_key tsafe_bfv_secret_key;
typedef struct tsafe_bfv_public_key tsafe_bfv_public_key;

/* Uniform ternary secret from seed (32 bytes, tests) or the CSPRNG (NULL).
 * Borrows ctx, which must outlive the key. Wiped on free. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_secret_key_generate(
    const tsafe_bfv_context *ctx, const uint8_t *seed,
    tsafe_bfv_secret_key **out);
TSAFE_API void tsafe_bfv_secret_key_free(tsafe_bfv_secret_key *sk);

/* pk = (-a*s + e, a), a expanded from a public seed. seed as above. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_public_key_generate(
    const tsafe_bfv_context *ctx, const tsafe_bfv_secret_key *sk,
    const uint8_t *seed, tsafe_bfv_public_key **out);
TSAFE_API void tsafe_bfv_public_key_free(tsafe_bfv_public_key *pk);
/* Raw encoding (no header; messages carry the context fingerprint):
 * a's seed then p0 bit-packed per limb. Readers check every coefficient. */
TSAFE_API size_t tsafe_bfv_public_key_bytes(const tsafe_bfv_context *ctx);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_public_key_write(
    const tsafe_bfv_context *ctx, const tsafe_bfv_public_key *pk,
    uint8_t *buf, size_t cap);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_public_key_read(
    const tsafe_bfv_context *ctx, const uint8_t *buf, size_t len,
    tsafe_bfv_public_key **out);

/* ----------------------------------------------------------- ciphertexts */

/* A fresh symmetric ciphertext at modulus Q: c0 in NTT form plus the seed
 * of its c1 (half the bytes). */
typedef struct tsafe_bfv_ct tsafe_bfv_ct;

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_ct_create(
    const tsafe_bfv_context *ctx, tsafe_bfv_ct **out);
TSAFE_API void tsafe_bfv_ct_free(tsafe_bfv_ct *ct);
/* Encrypt m[0..count) (count <= N, the rest zero) under sk. Every m[i]
 * must lie in [-t/2, t/2) (TSAFE_E_VALUE_RANGE otherwise). seed (32 bytes)
 * reproduces the ciphertext in tests; NULL draws from the CSPRNG. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_encrypt(
    const tsafe_bfv_context *ctx, const tsafe_bfv_secret_key *sk,
    const int64_t *m, size_t count, const uint8_t *seed, tsafe_bfv_ct *ct);
/* Encrypt m / 2^frac_bits: the scale is Q / (t 2^frac_bits), i.e. c0 holds
 * round(Q m / (t 2^frac_bits)) + e. A product with an integer plaintext
 * then decrypts to round(product / 2^frac_bits) mod t, give or take the
 * noise: the key holder reads the product's top bits only (the sealed
 * protocol's round 1, docs/PROTOCOL.md). Every m[i] must lie in
 * [-t 2^frac_bits / 2, t 2^frac_bits / 2); frac_bits <= 
 * TSAFE_BFV_MAX_FRAC_BITS (TSAFE_E_RANGE) and t_bits + frac_bits <= 62. */
#define TSAFE_BFV_MAX_FRAC_BITS 24u
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_encrypt_frac(
    const tsafe_bfv_context *ctx, const tsafe_bfv_secret_key *sk,
    const int64_t *m, size_t count, uint32_t frac_bits, const uint8_t *seed,
    tsafe_bfv_ct *ct);
TSAFE_API size_t tsafe_bfv_ct_bytes(const tsafe_bfv_context *ctx);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_ct_write(
    const tsafe_bfv_context *ctx, const tsafe_bfv_ct *ct, uint8_t *buf,
    size_t cap);
/* Reads exactly tsafe_bfv_ct_bytes bytes into ct and expands c1 from the
 * seed (the server's side). TSAFE_E_FORMAT on a coefficient >= q_i. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_ct_read(
    const tsafe_bfv_context *ctx, const uint8_t *buf, size_t len,
    tsafe_bfv_ct *ct);

/* ------------------------------------------------------------ plaintexts */

/* An integer polynomial prepared for multiplication (NTT form, both
 * limbs, Shoup quotients). |coeff| must be below 2^40. */
typedef struct tsafe_bfv_plain tsafe_bfv_plain;

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_plain_create(
    const tsafe_bfv_context *ctx, const int64_t *coeffs, size_t count,
    tsafe_bfv_plain **out);
TSAFE_API void tsafe_bfv_plain_free(tsafe_bfv_plain *pt);

/* ----------------------------------------------------------- accumulator */

typedef struct tsafe_bfv_acc tsafe_bfv_acc;

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_acc_create(
    const tsafe_bfv_context *ctx, tsafe_bfv_acc **out);
TSAFE_API void tsafe_bfv_acc_free(tsafe_bfv_acc *acc);
TSAFE_API void tsafe_bfv_acc_zero(tsafe_bfv_acc *acc);
/* acc += ct * pt (a ciphertext read by tsafe_bfv_ct_read). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_acc_mul_add(
    tsafe_bfv_acc *acc, const tsafe_bfv_ct *ct, const tsafe_bfv_plain *pt);

/* ------------------------------------------------------- sealed results */

/* What the server sends for one accumulator: c1 mod q0 (N values) and the
 * c0 coefficients at the requested positions (mod q0). */
typedef struct tsafe_bfv_sealed tsafe_bfv_sealed;

/* Room for up to max_reads read coefficients. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_sealed_create(
    const tsafe_bfv_context *ctx, size_t max_reads, tsafe_bfv_sealed **out);
TSAFE_API void tsafe_bfv_sealed_free(tsafe_bfv_sealed *r);
TSAFE_API size_t tsafe_bfv_sealed_bytes(const tsafe_bfv_context *ctx,
                                        size_t n_reads);

/* flood_bits for a flood of one whole plaintext step: a uniform integer
 * in [-h, h], h = floor(floor(Q/t)/2). The key holder then decrypts each
 * value to within +-1 (off by one when flood and noise together pass half
 * a step: rarely), and what lies below one step of
 * what it decrypts is uniform whatever noise its own ciphertext carried:
 * a key holder who crafts the noise of the ciphertexts it sends cannot
 * read the server's plaintexts through the flood (the sealed protocols
 * use it; docs/THREAT_MODEL.md, F12). */
#define TSAFE_BFV_FLOOD_STEP 255u

/* Finish acc into r (acc is consumed: zero it before reuse):
 *   + a fresh encryption of zero under pk (ternary r, CBD errors);
 *   + round(Q*mask[k]/t) and a uniform integer in [-2^flood_bits,
 *     2^flood_bits] (or one step, TSAFE_BFV_FLOOD_STEP) at each read
 *     position pos[k] (mask may be NULL);
 *   switch to q0 and keep c1 and the n_reads read coefficients.
 * flood_bits <= 100 or TSAFE_BFV_FLOOD_STEP; the positions must be
 * distinct (TSAFE_E_ARG). seed
 * (32 bytes) reproduces the randomness in tests; NULL draws from the
 * CSPRNG. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_seal(
    const tsafe_bfv_context *ctx, tsafe_bfv_acc *acc,
    const tsafe_bfv_public_key *pk, const uint32_t *pos,
    const uint64_t *mask, size_t n_reads, uint32_t flood_bits,
    const uint8_t *seed, tsafe_bfv_sealed *r);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_sealed_write(
    const tsafe_bfv_context *ctx, const tsafe_bfv_sealed *r, uint8_t *buf,
    size_t cap);
/* Reads a sealed result with n_reads coefficients (exact length). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_sealed_read(
    const tsafe_bfv_context *ctx, const uint8_t *buf, size_t len,
    size_t n_reads, tsafe_bfv_sealed *r);
/* Raw access (attack tests, diagnostics): c1 (N values) and the reads. */
TSAFE_API const uint64_t *tsafe_bfv_sealed_c1(const tsafe_bfv_sealed *r);
TSAFE_API const uint64_t *tsafe_bfv_sealed_c0(const tsafe_bfv_sealed *r);

/* Decrypt the read coefficients: m[k] = round(t * (c0[k] + (c1*s)[pos[k]])
 * / q0) mod t, in [0, t). pos[k] < N. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_decrypt_reads(
    const tsafe_bfv_context *ctx, const tsafe_bfv_secret_key *sk,
    const tsafe_bfv_sealed *r, const uint32_t *pos, size_t n_reads,
    uint64_t *m);
/* The same with the noise: noise[k] = (c0 + c1*s)[pos[k]] - q0*m[k]/t as a
 * double, centred (diagnostics and tests of the noise bound). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_decrypt_noise(
    const tsafe_bfv_context *ctx, const tsafe_bfv_secret_key *sk,
    const tsafe_bfv_sealed *r, const uint32_t *pos, size_t n_reads,
    double *noise);

#ifdef __cplusplus
}
#endif
#endif
