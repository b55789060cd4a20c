/* Per-coefficient steps of the rescale, shared by the NTT epilogues and
 * the host emulation (internal). Dropping prime l from x (NTT form):
 *   t   = INTT_l(x_l) + floor(q_l/2) mod q_l         (rounding offset)
 *   t_i = (t mod q_i) - floor(q_l/2) mod q_i, NTT_i  (spread)
 *   out_i = (x_i - t_i) q_l^-1 mod q_i              (finish)
 * exactly the CPU backend's tsafe_poly_rescale. */
#ifndef TSAFE_CUDA_RESCALE_CUH
#define TSAFE_CUDA_RESCALE_CUH

#include "modarith.cuh"

/* t (inverse NTT output of limb l, in [0, q_l)) -> its value for limb i */
TSAFE_HD uint64_t tsafe_rescale_spread(uint64_t t, uint64_t q_l,
                                       const tsafe_cuda_prime &pi,
                                       const tsafe_cuda_rescale_const &rci)
{
    uint64_t r = ts_add_mod(t, q_l >> 1, q_l);
    return ts_sub_mod(ts_reduce_64(r, pi), rci.half_mod, pi.q);
}

TSAFE_HD uint64_t tsafe_rescale_finish(uint64_t in, uint64_t t, uint64_t q,
                                       const tsafe_cuda_rescale_const &rc)
{
    return ts_mul_shoup(ts_sub_mod(in, t, q), rc.qinv, rc.qinv_shoup, q);
}

#endif
