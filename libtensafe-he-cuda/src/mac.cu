/* Batched multiply-accumulate (tsafe_backend_mul_acc): the launches of
 * tsafe_mac_next (mac.cuh), each a scaffold around tsafe_mac_thread, the
 * body the host emulation runs too. Usually one launch per call. */
#include "cuda_internal.cuh"
#include "mac.cuh"

__global__ void __launch_bounds__(TSAFE_MAC_THREADS)
    tsafe_mac_kernel(const __grid_constant__ tsafe_mac_args g)
{
    tsafe_mac_thread(g, blockIdx.x, threadIdx.x);
}

tsafe_status tsafe_cuda_mul_acc_launch(tsafe_cuda_backend *cb,
                                       const tsafe_backend_mac *jobs,
                                       size_t n_jobs)
{
    tsafe_mac_cursor c = {0, 0};
    tsafe_mac_args g;
    for (;;) {
        tsafe_status st = tsafe_mac_next(jobs, n_jobs, &c, cb->tables.log_n,
                                         cb->tables.n_primes, cb->d_primes, &g);
        if (st != TSAFE_OK)
            return tsafe_cuda_fail_msg(st, "mul_acc: job %zu does not fit a "
                                           "launch (shape or size)",
                                       c.job);
        if (g.n_jobs == 0)
            return TSAFE_OK;
        tsafe_cuda_launch_prepare();
        tsafe_mac_kernel<<<g.blocks, TSAFE_MAC_THREADS, 0, cb->stream>>>(g);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return tsafe_cuda_fail(e, "mul_acc launch");
    }
}
