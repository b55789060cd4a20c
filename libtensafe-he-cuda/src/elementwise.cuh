/* Element-wise kernels of the CUDA backend (internal): the whole per-thread
 * body (tsafe_ew_thread: index, 16-byte loads, modular op, 16-byte stores)
 * and the grid geometry, shared by the kernel (elementwise.cu) and the
 * host emulation. A "row" is one limb of one polynomial (N words, prime =
 * limb index). */
#ifndef TSAFE_CUDA_ELEMENTWISE_CUH
#define TSAFE_CUDA_ELEMENTWISE_CUH

#include "modarith.cuh"
#include "tensafe/backend.h"

#define TSAFE_EW_THREADS 256
#define TSAFE_EW_PER_THREAD 4 /* two 16-byte accesses */
#define TSAFE_EW_CHUNK_LOG 10 /* words per block = 256 * 4 */

/* Geometry of the element-wise kernel: block `blk`, thread `t`, vector
 * v (0 or 1) -> offset of the 16-byte pair (2 words) in a and out, and in
 * b; limb of the row. */
TSAFE_HD void tsafe_ew_index(uint64_t blk, uint32_t t, uint32_t v,
                             uint32_t log_n, uint32_t n_limbs, int broadcast,
                             uint64_t &off, uint64_t &boff, uint32_t &limb)
{
    uint32_t log_chunks = log_n - TSAFE_EW_CHUNK_LOG;
    uint64_t row = blk >> log_chunks;
    uint64_t chunk = blk & ((1ull << log_chunks) - 1);
    limb = (uint32_t)(row % n_limbs);
    uint64_t brow = broadcast ? limb : row;
    uint64_t in_chunk = (chunk << TSAFE_EW_CHUNK_LOG) +
                        2 * ((uint64_t)t + v * TSAFE_EW_THREADS);
    off = (row << log_n) + in_chunk;
    boff = (brow << log_n) + in_chunk;
}

template <int OP>
TSAFE_HD uint64_t tsafe_ew_apply(uint64_t x, uint64_t y,
                                 const tsafe_cuda_prime &p)
{
    if (OP == TSAFE_OP_ADD)
        return ts_add_mod(x, y, p.q);
    if (OP == TSAFE_OP_SUB)
        return ts_sub_mod(x, y, p.q);
    return ts_mul_mod(x, y, p);
}

typedef struct tsafe_ew_args {
    uint64_t *out;
    const uint64_t *a;
    const uint64_t *b;
    uint32_t log_n;
    uint32_t n_limbs;
    int broadcast; /* b has one polynomial, used for every polynomial of a */
    const tsafe_cuda_prime *primes;
} tsafe_ew_args;

/* Arguments and number of blocks (of TSAFE_EW_THREADS threads) for
 * out = a OP b over n_polys x n_limbs rows; 0 blocks for an empty batch,
 * TSAFE_E_RANGE beyond one launch (2^31 - 1 blocks). N >= 2^10 words
 * (TSAFE_MIN_LOG_N), so a row is a whole number of blocks. */
static inline tsafe_status tsafe_ew_setup(uint64_t *out, const uint64_t *a,
                                          const uint64_t *b, size_t n_polys,
                                          size_t b_polys, uint32_t n_limbs,
                                          uint32_t log_n,
                                          const tsafe_cuda_prime *primes,
                                          tsafe_ew_args *g, uint64_t *blocks)
{
    uint64_t rows = (uint64_t)n_polys * n_limbs;
    if (log_n < TSAFE_EW_CHUNK_LOG || log_n - TSAFE_EW_CHUNK_LOG > 31)
        return TSAFE_E_UNSUPPORTED;
    if (n_limbs && rows / n_limbs != n_polys)
        return TSAFE_E_RANGE;
    *blocks = rows << (log_n - TSAFE_EW_CHUNK_LOG);
    if ((*blocks >> (log_n - TSAFE_EW_CHUNK_LOG)) != rows ||
        *blocks > 0x7fffffffull)
        return TSAFE_E_RANGE;
    g->out = out;
    g->a = a;
    g->b = b;
    g->log_n = log_n;
    g->n_limbs = n_limbs;
    g->broadcast = b_polys == 1 && n_polys != 1;
    g->primes = primes;
    return TSAFE_OK;
}

/* Thread t of block blk: two 16-byte vectors per operand, all loads in
 * flight before the first store (in place, out == a, is safe: a thread
 * writes only what it read). */
template <int OP>
TSAFE_HD void tsafe_ew_thread(const tsafe_ew_args &g, uint64_t blk, uint32_t t)
{
    uint64_t off0, boff0, off1, boff1;
    uint32_t limb;
    tsafe_ew_index(blk, t, 0, g.log_n, g.n_limbs, g.broadcast, off0, boff0,
                   limb);
    tsafe_ew_index(blk, t, 1, g.log_n, g.n_limbs, g.broadcast, off1, boff1,
                   limb);
    const tsafe_cuda_prime p = g.primes[limb];
    ulonglong2 x0 = ts_ld16(g.a + off0);
    ulonglong2 x1 = ts_ld16(g.a + off1);
    ulonglong2 y0 = ts_ld16(g.b + boff0);
    ulonglong2 y1 = ts_ld16(g.b + boff1);
    x0.x = tsafe_ew_apply<OP>(x0.x, y0.x, p);
    x0.y = tsafe_ew_apply<OP>(x0.y, y0.y, p);
    x1.x = tsafe_ew_apply<OP>(x1.x, y1.x, p);
    x1.y = tsafe_ew_apply<OP>(x1.y, y1.y, p);
    ts_st16(g.out + off0, x0);
    ts_st16(g.out + off1, x1);
}

#endif
