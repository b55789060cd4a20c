/* Batched modulus switch in coefficient form (tsafe_backend_mod_switch):
 * one launch over every output row, the scaffold of tsafe_ms_thread
 * (modswitch.cuh), the body the host emulation runs too. */
#include "cuda_internal.cuh"
#include "modswitch.cuh"

__global__ void __launch_bounds__(TSAFE_MS_THREADS)
    tsafe_ms_kernel(tsafe_ms_args g)
{
    tsafe_ms_thread(g, blockIdx.x, threadIdx.x);
}

tsafe_status tsafe_cuda_mod_switch_launch(tsafe_cuda_backend *cb, uint64_t *out,
                                          const uint64_t *in, size_t n_polys,
                                          uint32_t n_limbs_in)
{
    tsafe_ms_args g;
    uint64_t blocks = 0;
    tsafe_status st = tsafe_ms_setup(out, in, n_polys, n_limbs_in,
                                     cb->tables.log_n, cb->tables.n_primes,
                                     cb->d_primes, cb->d_rescale, &g, &blocks);
    if (st != TSAFE_OK)
        return tsafe_cuda_fail_msg(st, "mod_switch of %zu polys x %u limbs: "
                                       "outside 2..%u limbs or one launch",
                                   n_polys, n_limbs_in, cb->tables.n_primes);
    if (blocks == 0)
        return TSAFE_OK;
    tsafe_cuda_launch_prepare();
    tsafe_ms_kernel<<<(unsigned)blocks, TSAFE_MS_THREADS, 0, cb->stream>>>(g);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TSAFE_OK : tsafe_cuda_fail(e, "mod_switch launch");
}
