/* Batched element-wise add / sub / mul over n_polys x n_limbs rows, with b
 * broadcast when it has one polynomial. One block = 1024 consecutive words
 * of one row; each thread moves two 16-byte vectors per operand. The
 * kernel is the launch scaffold of tsafe_ew_thread (elementwise.cuh), the
 * body the host emulation runs too. */
#include "cuda_internal.cuh"
#include "elementwise.cuh"

template <int OP>
__global__ void __launch_bounds__(TSAFE_EW_THREADS)
    tsafe_ew_kernel(tsafe_ew_args g)
{
    tsafe_ew_thread<OP>(g, blockIdx.x, threadIdx.x);
}

tsafe_status tsafe_cuda_elementwise_launch(tsafe_cuda_backend *cb, int op,
                                           uint64_t *out, const uint64_t *a,
                                           const uint64_t *b, size_t n_polys,
                                           size_t b_polys, uint32_t n_limbs)
{
    tsafe_ew_args g;
    uint64_t blocks = 0;
    tsafe_status st = tsafe_ew_setup(out, a, b, n_polys, b_polys, n_limbs,
                                     cb->tables.log_n, cb->d_primes, &g,
                                     &blocks);
    if (st != TSAFE_OK)
        return tsafe_cuda_fail_msg(st, "element-wise batch of %zu x %u limbs "
                                       "too large for one launch",
                                   n_polys, n_limbs);
    if (blocks == 0)
        return TSAFE_OK;
    dim3 grid((unsigned)blocks), t(TSAFE_EW_THREADS);
    tsafe_cuda_launch_prepare();
    switch (op) {
    case TSAFE_OP_ADD:
        tsafe_ew_kernel<TSAFE_OP_ADD><<<grid, t, 0, cb->stream>>>(g);
        break;
    case TSAFE_OP_SUB:
        tsafe_ew_kernel<TSAFE_OP_SUB><<<grid, t, 0, cb->stream>>>(g);
        break;
    case TSAFE_OP_MUL:
        tsafe_ew_kernel<TSAFE_OP_MUL><<<grid, t, 0, cb->stream>>>(g);
        break;
    default:
        return tsafe_cuda_fail_msg(TSAFE_E_ARG, "unknown element-wise op %d", op);
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TSAFE_OK
                            : tsafe_cuda_fail(e, "element-wise launch");
}
