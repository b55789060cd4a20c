/* SwiGLU experts: storage, deterministic synthetic weights, and
 * y = down(silu(gate x) * up x) through OpenBLAS. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <sodium.h>
#include <sys/mman.h>

#include "bytes.h"
#include "moe_internal.h"

void tsafe_moe_derive_key(uint64_t seed, uint8_t key[32])
{
    static const char tag[] = "tensafe-moe-synthetic-weights-v1";
    uint8_t in[sizeof tag - 1 + 8];
    memcpy(in, tag, sizeof tag - 1);
    tsafe_store_le64(in + sizeof tag - 1, seed);
    crypto_generichash(key, 32, in, sizeof in, NULL, 0);
}

/* ChaCha20 keystream, generated in L1-sized chunks (libsodium's one-shot
 * stream would zero-fill and XOR the whole destination first), each 4-byte
 * little-endian word turned into a float. Chunks continue the block
 * counter, so the values equal one stream over the whole tensor. */
#define MOE_GEN_CHUNK 16384u /* bytes, a multiple of the 64-byte block */

void tsafe_moe_fill_uniform(float *dst, size_t n, float bound, const uint8_t key[32],
                            enum moe_tensor_kind kind, int64_t id)
{
    static const unsigned char zeros[MOE_GEN_CHUNK];
    unsigned char buf[MOE_GEN_CHUNK];
    uint8_t nonce[8];
    uint64_t nv = ((uint64_t)kind << 56) | ((uint64_t)(id + 1) & 0x00FFFFFFFFFFFFFFull);
    tsafe_store_le64(nonce, nv);
    const float scale = bound / 2147483648.0f;
    uint64_t block = 0;
    for (size_t done = 0; done < n;) {
        size_t m = n - done < MOE_GEN_CHUNK / 4 ? n - done : MOE_GEN_CHUNK / 4;
        size_t bytes = (4 * m + 63) & ~(size_t)63;
        crypto_stream_chacha20_xor_ic(buf, zeros, bytes, nonce, block, key);
        block += bytes / 64;
        for (size_t i = 0; i < m; i++) {
            uint32_t u = tsafe_load_le32(buf + 4 * i);
            dst[done + i] = (float)((int64_t)u - 2147483648LL) * scale;
        }
        done += m;
    }
    sodium_memzero(buf, sizeof buf); /* not secret; keeps the stack clean */
}

/* Large weight blocks: 2 MiB aligned and marked for transparent huge pages,
 * which cuts first-touch page faults ~500x (they dominated generating a
 * 3.2 GB layer). Zeroed when zero != 0. */
static float *alloc_floats(size_t n, int zero)
{
    const size_t huge = (size_t)2 << 20;
    size_t bytes = n * sizeof(float);
    void *p = NULL;
    if (bytes >= huge) {
        size_t rounded = (bytes + huge - 1) & ~(huge - 1);
        if (posix_memalign(&p, huge, rounded) != 0)
            return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    } else {
        p = malloc(bytes ? bytes : 1);
        if (p == NULL)
            return NULL;
    }
    if (zero)
        memset(p, 0, bytes);
    return p;
}

tsafe_status tsafe_moe_expert_alloc(moe_expert *e, uint32_t d, uint32_t inter, int zero)
{
    size_t n;
    if (!tsafe_mul_size((size_t)d, (size_t)inter, &n) || n > SIZE_MAX / (2 * sizeof(float)))
        return TSAFE_E_SIZE_OVERFLOW;
    e->gate_up = alloc_floats(2 * n, zero);
    e->down = alloc_floats(n, zero);
    if (e->gate_up == NULL || e->down == NULL) {
        tsafe_moe_expert_release(e);
        return TSAFE_E_NOMEM;
    }
    return TSAFE_OK;
}

void tsafe_moe_expert_release(moe_expert *e)
{
    free(e->gate_up);
    free(e->down);
    e->gate_up = NULL;
    e->down = NULL;
}

void tsafe_moe_expert_generate(moe_expert *e, const uint8_t key[32], int32_t id, uint32_t d,
                               uint32_t inter)
{
    size_t n = (size_t)d * inter;
    float bd = 1.0f / sqrtf((float)d), bi = 1.0f / sqrtf((float)inter);
    tsafe_moe_fill_uniform(e->gate_up, n, bd, key, MOE_T_GATE, id);
    tsafe_moe_fill_uniform(e->gate_up + n, n, bd, key, MOE_T_UP, id);
    tsafe_moe_fill_uniform(e->down, n, bi, key, MOE_T_DOWN, id);
}

static inline float silu(float g)
{
    /* g * sigmoid(g); exp(-g) overflowing to +inf gives -0, the limit */
    return g / (1.0f + expf(-g));
}

/* Y [m x rows] = X [m x cols] . W^T for W [rows x cols]. OpenBLAS's GEMM
 * packs W, which costs about three GEMVs' worth of memory traffic: for
 * one to three tokens separate GEMVs are faster (measured at 1024 x 2048,
 * one thread: m = 2 takes 0.47 ms as GEMVs, 0.85 ms as GEMM). */
#define MOE_GEMV_MAX_M 3

static void mat_xwt(const float *w, int rows, int cols, const float *x, size_t m, float *y)
{
    if (m <= MOE_GEMV_MAX_M) {
        for (size_t r = 0; r < m; r++)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, w, cols,
                        x + r * (size_t)cols, 1, 0.0f, y + r * (size_t)rows, 1);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, rows, cols, 1.0f, x, cols,
                    w, cols, 0.0f, y, rows);
    }
}

tsafe_status tsafe_moe_expert_apply(const moe_expert *e, int32_t id, uint32_t d, uint32_t inter,
                                    const float *x, size_t m, const uint32_t *tokens, float *gu,
                                    float *act, float *y, tsafe_moe_expert_hook hook, void *user)
{
    const int D = (int)d, NI = (int)inter;
    mat_xwt(e->gate_up, 2 * NI, D, x, m, gu);
    if (hook != NULL) {
        tsafe_status st = hook(user, TSAFE_MOE_HOOK_GATE_UP, id, tokens, m, x, d, gu,
                               2 * (size_t)inter);
        if (st != TSAFE_OK)
            return st;
    }
    for (size_t r = 0; r < m; r++) {
        const float *g = gu + r * 2 * (size_t)inter, *u = g + inter;
        float *a = act + r * (size_t)inter;
        for (uint32_t j = 0; j < inter; j++)
            a[j] = silu(g[j]) * u[j];
    }
    mat_xwt(e->down, D, NI, act, m, y);
    if (hook != NULL) {
        tsafe_status st = hook(user, TSAFE_MOE_HOOK_DOWN, id, tokens, m, act, inter, y, d);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}
