/* Modulus switch of the CUDA backend (internal), coefficient form: the
 * per-thread body and the launch geometry, shared by the kernel
 * (modswitch.cu) and the host emulation. Dropping the last prime l of
 * n_limbs_in = l + 1 limbs, for each remaining limb i < l:
 *   out_i = round(x / q_l) mod q_i = (x_i - t_i) q_l^-1 mod q_i,
 *   t_i = ((x_l + h) mod q_l) - h mod q_i,  h = floor(q_l / 2)
 * which is the CPU backend's floor((x + h) / q_l) (h = (q_l - 1)/2 for the
 * odd q_l): the same canonical residue, so the same words. The steps are
 * the rescale's (rescale.cuh, without the NTTs), with its constants. */
#ifndef TSAFE_CUDA_MODSWITCH_CUH
#define TSAFE_CUDA_MODSWITCH_CUH

#include "rescale.cuh"
#include "tensafe/status.h"

#define TSAFE_MS_THREADS 256
#define TSAFE_MS_CHUNK_LOG 10 /* words per block = 256 threads x 4 */

typedef struct tsafe_ms_args {
    uint64_t *out;                      /* n_polys x (n_limbs_in - 1) rows */
    const uint64_t *in;                 /* n_polys x n_limbs_in rows */
    uint32_t log_n;
    uint32_t n_limbs_in;
    const tsafe_cuda_prime *primes;
    const tsafe_cuda_rescale_const *rc; /* the row of the dropped prime */
} tsafe_ms_args;

/* Arguments and blocks for out = switch(in); 0 blocks for no polynomials.
 * rescale: the whole rescale table (row l * TSAFE_MAX_PRIMES). */
static inline tsafe_status tsafe_ms_setup(uint64_t *out, const uint64_t *in,
                                          size_t n_polys, uint32_t n_limbs_in,
                                          uint32_t log_n, uint32_t max_limbs,
                                          const tsafe_cuda_prime *primes,
                                          const tsafe_cuda_rescale_const *rescale,
                                          tsafe_ms_args *g, uint64_t *blocks)
{
    if (n_limbs_in < 2 || n_limbs_in > max_limbs)
        return TSAFE_E_LEVEL;
    if (log_n < TSAFE_MS_CHUNK_LOG || log_n - TSAFE_MS_CHUNK_LOG > 31)
        return TSAFE_E_UNSUPPORTED;
    uint32_t l = n_limbs_in - 1;
    uint64_t rows = (uint64_t)n_polys * l;
    uint32_t log_chunks = log_n - TSAFE_MS_CHUNK_LOG;
    if (rows / l != n_polys || (rows << log_chunks) >> log_chunks != rows)
        return TSAFE_E_RANGE;
    *blocks = rows << log_chunks;
    if (*blocks > 0x7fffffffull)
        return TSAFE_E_RANGE;
    g->out = out;
    g->in = in;
    g->log_n = log_n;
    g->n_limbs_in = n_limbs_in;
    g->primes = primes;
    g->rc = rescale + (size_t)l * TSAFE_MAX_PRIMES;
    return TSAFE_OK;
}

/* Thread t of block blk: output row (p, i), two 16-byte vectors. */
TSAFE_HD void tsafe_ms_thread(const tsafe_ms_args &g, uint64_t blk, uint32_t t)
{
    uint32_t l = g.n_limbs_in - 1;
    uint32_t log_chunks = g.log_n - TSAFE_MS_CHUNK_LOG;
    uint64_t row = blk >> log_chunks; /* p * l + i */
    uint64_t p = row / l;
    uint32_t i = (uint32_t)(row % l);
    uint64_t in0 = (blk & ((1ull << log_chunks) - 1)) << TSAFE_MS_CHUNK_LOG;
    in0 += 2 * (uint64_t)t;
    uint64_t in1 = in0 + 2 * TSAFE_MS_THREADS;
    const uint64_t *xl = g.in + ((p * g.n_limbs_in + l) << g.log_n);
    const uint64_t *xi = g.in + ((p * g.n_limbs_in + i) << g.log_n);
    uint64_t *o = g.out + (row << g.log_n);
    const tsafe_cuda_prime pi = g.primes[i];
    const tsafe_cuda_rescale_const rc = g.rc[i];
    const uint64_t ql = g.primes[l].q;
    ulonglong2 t0 = ts_ld16(xl + in0), t1 = ts_ld16(xl + in1);
    ulonglong2 x0 = ts_ld16(xi + in0), x1 = ts_ld16(xi + in1);
    x0.x = tsafe_rescale_finish(x0.x, tsafe_rescale_spread(t0.x, ql, pi, rc), pi.q, rc);
    x0.y = tsafe_rescale_finish(x0.y, tsafe_rescale_spread(t0.y, ql, pi, rc), pi.q, rc);
    x1.x = tsafe_rescale_finish(x1.x, tsafe_rescale_spread(t1.x, ql, pi, rc), pi.q, rc);
    x1.y = tsafe_rescale_finish(x1.y, tsafe_rescale_spread(t1.y, ql, pi, rc), pi.q, rc);
    ts_st16(o + in0, x0);
    ts_st16(o + in1, x1);
}

#endif
