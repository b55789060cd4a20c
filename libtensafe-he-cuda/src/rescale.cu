/* Batched rescale (NTT form in and out), the CPU backend's algorithm in two
 * NTT launches (per pass) with fused epilogues (see rescale.cuh, ntt.cuh):
 *  1. inverse NTT of each polynomial's last limb (prime l), read from `in`;
 *     its last pass writes the rounded, spread values t_i into all l
 *     output limbs -- no scratch buffer, no extra kernel;
 *  2. forward NTT of the l output limbs; its last pass stores
 *     (in_i - t_i) q_l^-1 mod q_i. */
#include "cuda_internal.cuh"

tsafe_status tsafe_cuda_rescale_launch(tsafe_cuda_backend *cb, uint64_t *out,
                                       const uint64_t *in, size_t n_polys,
                                       uint32_t n_limbs_in)
{
    uint64_t n = cb->tables.n;
    if (n_limbs_in < 2 || n_limbs_in > cb->tables.n_primes)
        return tsafe_cuda_fail_msg(TSAFE_E_LEVEL,
                                   "rescale needs 2..%u limbs, got %u",
                                   cb->tables.n_primes, n_limbs_in);
    if (n_polys == 0)
        return TSAFE_OK;
    uint32_t l = n_limbs_in - 1;
    tsafe_ntt_epi spread = {TSAFE_NTT_EPI_RESCALE_SPREAD,
                            cb->d_rescale + l * TSAFE_MAX_PRIMES, NULL, 0};
    tsafe_status st = tsafe_cuda_ntt_launch(cb, 0, in + l * n, (l + 1) * n,
                                            out + (l - 1) * n, l * n, n_polys,
                                            1, l, &spread);
    if (st != TSAFE_OK)
        return st;
    tsafe_ntt_epi finish = {TSAFE_NTT_EPI_RESCALE_FINISH,
                            cb->d_rescale + l * TSAFE_MAX_PRIMES, in,
                            (l + 1) * n};
    return tsafe_cuda_ntt_launch(cb, 1, out, l * n, out, l * n, n_polys, l, 0,
                                 &finish);
}
