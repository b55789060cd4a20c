#include "prng.h"

#include "bytes.h"

#include <pthread.h>
#include <string.h>

#include <openssl/evp.h>
#include <sodium.h>

tsafe_status tsafe_seed_fresh(uint8_t seed[32])
{
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    randombytes_buf(seed, 32);
    return TSAFE_OK;
}

void tsafe_seed_derive(uint8_t out[32], const uint8_t seed[32],
                       const char *label)
{
    crypto_generichash(out, 32, (const unsigned char *)label, strlen(label),
                       seed, 32);
}

void tsafe_prng_init(tsafe_prng *p, const uint8_t seed[32], uint64_t stream)
{
    memcpy(p->key, seed, 32);
    tsafe_store_le64(p->nonce, stream);
    p->block = 0;
    p->len = p->pos = sizeof p->buf;
    p->next = 0;
}

uint64_t tsafe_prng_offset(const tsafe_prng *p)
{
    /* block is the counter after buf's blocks (0 before the first fill,
     * when pos is sizeof buf) */
    return p->block * 64 + p->pos - p->len;
}

static void refill(tsafe_prng *p);

void tsafe_prng_seek(tsafe_prng *p, uint64_t off)
{
    p->block = off / 64;
    refill(p);
    p->pos = (size_t)(off % 64);
}

void tsafe_prng_clear(tsafe_prng *p)
{
    sodium_memzero(p, sizeof *p);
}

/* The ChaCha20 keystream comes from OpenSSL's EVP ChaCha20 when this thread
 * has a cipher context, from libsodium otherwise: the same stream (OpenSSL's
 * 16-byte IV is the 64-bit little-endian block counter then the 8-byte
 * nonce, the original 64-bit-nonce layout; test_prng compares the two).
 * Why two libraries: the seed expansions are a third of the sealed
 * protocol's time, and OpenSSL's AVX-512 ChaCha20 is 2.8x faster than
 * libsodium's AVX2 one in 4 KiB refills on the development machine
 * (58 vs 164 us per query's worth; docs/PERFORMANCE.md). The context is
 * per thread (created on first use, freed at thread exit) and is re-keyed
 * with zeros after every refill so that no seed stays in it. */
static pthread_key_t g_ctx_key;
static pthread_once_t g_ctx_once = PTHREAD_ONCE_INIT;
static int g_ctx_key_ok;

static void ctx_free(void *c)
{
    EVP_CIPHER_CTX_free(c);
}

static void ctx_key_make(void)
{
    g_ctx_key_ok = pthread_key_create(&g_ctx_key, ctx_free) == 0;
}

static EVP_CIPHER_CTX *thread_ctx(void)
{
    if (pthread_once(&g_ctx_once, ctx_key_make) != 0 || !g_ctx_key_ok)
        return NULL;
    EVP_CIPHER_CTX *c = pthread_getspecific(g_ctx_key);
    if (c)
        return c;
    c = EVP_CIPHER_CTX_new();
    if (!c)
        return NULL;
    if (EVP_EncryptInit_ex(c, EVP_chacha20(), NULL, NULL, NULL) != 1 ||
        pthread_setspecific(g_ctx_key, c) != 0) {
        EVP_CIPHER_CTX_free(c);
        return NULL;
    }
    return c;
}

static int openssl_keystream(const tsafe_prng *p, uint8_t *out, size_t len)
{
    static const uint8_t zeros[sizeof p->buf], zero_key[32], zero_iv[16];
    EVP_CIPHER_CTX *c = thread_ctx();
    if (!c || len > sizeof zeros)
        return 0;
    uint8_t iv[16];
    tsafe_store_le64(iv, p->block);
    memcpy(iv + 8, p->nonce, 8);
    int n = 0;
    int ok = EVP_EncryptInit_ex(c, NULL, NULL, p->key, iv) == 1 &&
             EVP_EncryptUpdate(c, out, &n, zeros, (int)len) == 1 && (size_t)n == len;
    /* leave no key in the context */
    if (EVP_EncryptInit_ex(c, NULL, NULL, zero_key, zero_iv) != 1)
        ok = 0;
    sodium_memzero(iv, sizeof iv);
    return ok;
}

void tsafe_prng_reserve(tsafe_prng *p, size_t bytes)
{
    size_t n = (bytes + 63) / 64 * 64;
    p->next = n == 0 || n > sizeof p->buf ? 0 : n;
}

/* The next p->next bytes of the stream (a hint from tsafe_prng_reserve,
 * used once), else a whole buffer. */
static void refill(tsafe_prng *p)
{
    size_t n = p->next ? p->next : sizeof p->buf;
    p->next = 0;
    if (!openssl_keystream(p, p->buf, n)) {
        memset(p->buf, 0, n);
        crypto_stream_chacha20_xor_ic(p->buf, p->buf, n, p->nonce, p->block, p->key);
    }
    p->block += n / 64;
    p->len = n;
    p->pos = 0;
}

void tsafe_prng_bytes(tsafe_prng *p, uint8_t *out, size_t len)
{
    while (len > 0) {
        if (p->pos == p->len)
            refill(p);
        size_t take = p->len - p->pos;
        if (take > len)
            take = len;
        memcpy(out, p->buf + p->pos, take);
        p->pos += take;
        out += take;
        len -= take;
    }
}

uint64_t tsafe_prng_u64(tsafe_prng *p)
{
    if (p->pos + 8 <= p->len) { /* fast path: whole word buffered */
        uint64_t v = tsafe_load_le64(p->buf + p->pos);
        p->pos += 8;
        return v;
    }
    uint8_t b[8];
    tsafe_prng_bytes(p, b, 8);
    return tsafe_load_le64(b);
}

void tsafe_prng_uniform_mod(tsafe_prng *p, uint64_t q, uint64_t *out,
                            size_t n)
{
    int bits = 64 - __builtin_clzll(q);
    uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
    for (size_t i = 0; i < n;) {
        uint64_t v = tsafe_prng_u64(p) & mask;
        if (v < q)
            out[i++] = v;
    }
}

void tsafe_prng_uniform_mod_tight(tsafe_prng *p, uint64_t q, uint64_t *out,
                                  size_t n)
{
    int bits = 64 - __builtin_clzll(q);
    size_t nb = ((size_t)bits + 7) / 8;
    uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
    int simd = tsafe_cpu_has_avx512_sampling();
    for (size_t i = 0; i < n;) {
        if (simd && n - i >= 8 && p->pos + 8 * nb <= p->len) {
            /* eight candidates a step from the buffered stream */
            size_t used;
            i += tsafe_uniform_tight_avx512(p->buf + p->pos, p->len - p->pos, q,
                                            (unsigned)nb, out + i, n - i, &used);
            p->pos += used;
            continue;
        }
        uint64_t v;
        if (p->pos + 8 <= p->len) { /* an 8-byte load, nb bytes used */
            v = tsafe_load_le64(p->buf + p->pos);
            p->pos += nb;
        } else {
            uint8_t b[8] = {0};
            tsafe_prng_bytes(p, b, nb);
            v = tsafe_load_le64(b);
        }
        v &= mask;
        if (v < q)
            out[i++] = v;
    }
}

/* The five trits of each byte value below 243, least significant first,
 * minus 1 (filled once; the same values as dividing by 3 in turn). */
static int8_t g_trits[243][8];
static pthread_once_t g_trits_once = PTHREAD_ONCE_INIT;

static void trits_fill(void)
{
    for (unsigned v = 0; v < 243; v++)
        for (unsigned t = 0, x = v; t < 5; t++, x /= 3)
            g_trits[v][t] = (int8_t)((int)(x % 3) - 1);
}

void tsafe_prng_ternary(tsafe_prng *p, int8_t *out, size_t n)
{
    pthread_once(&g_trits_once, trits_fill);
    size_t i = 0;
    while (i < n) { /* straight from the buffer: one byte at a time as before */
        if (p->pos == p->len)
            refill(p);
        const uint8_t *b = p->buf + p->pos, *end = p->buf + p->len;
        for (; b < end && i < n; b++) {
            unsigned v = *b;
            if (v >= 243)
                continue;
            if (n - i >= 5) {
                memcpy(out + i, g_trits[v], 5);
                i += 5;
            } else {
                for (unsigned t = 0; i < n; t++)
                    out[i++] = g_trits[v][t];
            }
        }
        p->pos = (size_t)(b - p->buf);
    }
}

/* SWAR popcount: the library is built for baseline x86-64 (no POPCNT). */
static inline int popcount21(uint64_t v)
{
    v = v - ((v >> 1) & 0x5555555555555555ull);
    v = (v & 0x3333333333333333ull) + ((v >> 2) & 0x3333333333333333ull);
    v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((v * 0x0101010101010101ull) >> 56);
}

/* One binomial sample from the low 42 bits of v: popcount of 21 minus 21. */
static inline int8_t cbd21(uint64_t v)
{
    return (int8_t)(popcount21(v & 0x1FFFFFull) - popcount21((v >> 21) & 0x1FFFFFull));
}

void tsafe_prng_cbd(tsafe_prng *p, int8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v = tsafe_prng_u64(p);
        out[i] = cbd21(v);
    }
}

void tsafe_prng_cbd_tight(tsafe_prng *p, int8_t *out, size_t n)
{
    int simd = tsafe_cpu_has_avx512_sampling();
    for (size_t i = 0; i < n; i++) {
        if (simd && n - i >= 8 && p->pos + 48 <= p->len) {
            size_t k = tsafe_cbd21_avx512(p->buf + p->pos, p->len - p->pos,
                                          out + i, n - i);
            p->pos += 6 * k;
            i += k - 1; /* k >= 8 here; the loop adds the last one */
            continue;
        }
        uint64_t v;
        if (p->pos + 8 <= p->len) { /* 6 bytes: the 42 bits used */
            v = tsafe_load_le64(p->buf + p->pos);
            p->pos += 6;
        } else {
            uint8_t b[8] = {0};
            tsafe_prng_bytes(p, b, 6);
            v = tsafe_load_le64(b);
        }
        out[i] = cbd21(v);
    }
}
