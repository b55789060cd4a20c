/* Element-wise kernels of the CUDA backend (internal): per-coefficient
 * functions shared with the host emulation, and the row/chunk geometry.
 * A "row" is one limb of one polynomial (N words, prime = limb index). */
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

#endif
