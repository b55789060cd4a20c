/* sealed-private's stochastic rounding of B' (site.c): B_q = floor(v + w)
 * per entry, w uniform in [0, 1) from a keyed stream.
 *
 * Why not round to nearest: the client must not tell apart two adapters
 * with the same product (issue 19). The server works on the product's
 * canonical factors, but two factorizations of one product agree only to
 * float rounding, and a deterministic rounding that sits near a boundary
 * then gives B_q entries that differ by one: a client that knows both
 * candidates computes both B_q and sees which lattice the outputs lie on
 * (test_sealed_adversaries F1, 100 % on such seeds). With a secret w the
 * client cannot compute B_q, and the distribution of floor(v + w) moves
 * by at most |v - v'| in statistical distance when v does: a function of
 * the product, continuous in it.
 *
 * The stream's seed is BLAKE2b, keyed with a process-wide secret, of the
 * adapter's bytes: the same adapter gives the same B_q in one process (or,
 * with tsafe_sealed_set_rounding_key, across restarts, so that a client
 * cannot average fresh roundings of one adapter), another factorization
 * of the same product independent ones. */
#include <pthread.h>
#include <string.h>

#include <sodium.h>

#include "bytes.h"
#include "init.h"
#include "sealed_internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t g_key[crypto_generichash_KEYBYTES];
static int g_have_key;

tsafe_status tsafe_sealed_set_rounding_key(const uint8_t *key)
{
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    pthread_mutex_lock(&g_lock);
    if (key)
        memcpy(g_key, key, sizeof g_key);
    else
        randombytes_buf(g_key, sizeof g_key);
    g_have_key = 1;
    pthread_mutex_unlock(&g_lock);
    return TSAFE_OK;
}

void tsafe_sealed_hash_u32(crypto_generichash_state *h, uint32_t v)
{
    uint8_t b[4];
    tsafe_store_le32(b, v);
    crypto_generichash_update(h, b, 4);
}

tsafe_status tsafe_sealed_rounding_offsets(const float *A, const float *B, uint32_t rank,
                                           uint32_t d_in, uint32_t d_out, float scale,
                                           double *w)
{
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    uint8_t seed[randombytes_SEEDBYTES];
    crypto_generichash_state h;
    pthread_mutex_lock(&g_lock);
    if (!g_have_key) {
        randombytes_buf(g_key, sizeof g_key);
        g_have_key = 1;
    }
    crypto_generichash_init(&h, g_key, sizeof g_key, sizeof seed);
    pthread_mutex_unlock(&g_lock);
    crypto_generichash_update(&h, (const unsigned char *)"tsafe-sealed-round-b", 20);
    tsafe_sealed_hash_u32(&h, rank);
    tsafe_sealed_hash_u32(&h, d_in);
    tsafe_sealed_hash_u32(&h, d_out);
    uint32_t sb;
    memcpy(&sb, &scale, 4);
    tsafe_sealed_hash_u32(&h, sb);
    /* the float bytes as stored: every caller is little-endian (the wire
     * formats assume it too) */
    crypto_generichash_update(&h, (const unsigned char *)A, (size_t)rank * d_in * sizeof *A);
    crypto_generichash_update(&h, (const unsigned char *)B, (size_t)d_out * rank * sizeof *B);
    crypto_generichash_final(&h, seed, sizeof seed);
    size_t n = (size_t)d_out * rank;
    uint64_t *u = (uint64_t *)w; /* 8-byte words, converted in place */
    randombytes_buf_deterministic(u, n * sizeof *u, seed);
    sodium_memzero(seed, sizeof seed);
    for (size_t i = 0; i < n; i++)
        w[i] = (double)(u[i] >> 11) * 0x1p-53; /* [0, 1) */
    return TSAFE_OK;
}
