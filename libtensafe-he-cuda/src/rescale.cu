/* Batched rescale (NTT form in and out): the CPU backend's algorithm as
 * the two NTT calls of tsafe_rescale_calls (ntt.cuh), whose last passes
 * carry the rescale steps as epilogues (rescale.cuh). The emulation builds
 * the same calls. */
#include "cuda_internal.cuh"

tsafe_status tsafe_cuda_rescale_launch(tsafe_cuda_backend *cb, uint64_t *out,
                                       const uint64_t *in, size_t n_polys,
                                       uint32_t n_limbs_in)
{
    if (n_limbs_in < 2 || n_limbs_in > cb->tables.n_primes)
        return tsafe_cuda_fail_msg(TSAFE_E_LEVEL,
                                   "rescale needs 2..%u limbs, got %u",
                                   cb->tables.n_primes, n_limbs_in);
    if (n_polys == 0)
        return TSAFE_OK;
    tsafe_ntt_epi epi[2];
    tsafe_ntt_call calls[2];
    tsafe_rescale_calls(cb->tables.n, out, in, n_polys, n_limbs_in,
                        cb->d_rescale, epi, calls);
    tsafe_status st = tsafe_cuda_ntt_run(cb, &calls[0]);
    return st != TSAFE_OK ? st : tsafe_cuda_ntt_run(cb, &calls[1]);
}
