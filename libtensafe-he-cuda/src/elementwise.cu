/* Batched element-wise add / sub / mul over n_polys x n_limbs rows, with b
 * broadcast when it has one polynomial. One block = 1024 consecutive words
 * of one row; each thread moves two 16-byte vectors per operand. */
#include "cuda_internal.cuh"
#include "elementwise.cuh"

template <int OP>
__global__ void __launch_bounds__(TSAFE_EW_THREADS)
    tsafe_ew_kernel(uint64_t *out, const uint64_t *a, const uint64_t *b,
                    uint32_t log_n, uint32_t n_limbs, int broadcast,
                    const tsafe_cuda_prime *primes)
{
    uint64_t off0, boff0, off1, boff1;
    uint32_t limb;
    tsafe_ew_index(blockIdx.x, threadIdx.x, 0, log_n, n_limbs, broadcast, off0,
                   boff0, limb);
    tsafe_ew_index(blockIdx.x, threadIdx.x, 1, log_n, n_limbs, broadcast, off1,
                   boff1, limb);
    const tsafe_cuda_prime p = primes[limb];
    /* two independent 16-byte loads per operand in flight */
    ulonglong2 x0 = *reinterpret_cast<const ulonglong2 *>(a + off0);
    ulonglong2 x1 = *reinterpret_cast<const ulonglong2 *>(a + off1);
    ulonglong2 y0 = *reinterpret_cast<const ulonglong2 *>(b + boff0);
    ulonglong2 y1 = *reinterpret_cast<const ulonglong2 *>(b + boff1);
    x0.x = tsafe_ew_apply<OP>(x0.x, y0.x, p);
    x0.y = tsafe_ew_apply<OP>(x0.y, y0.y, p);
    x1.x = tsafe_ew_apply<OP>(x1.x, y1.x, p);
    x1.y = tsafe_ew_apply<OP>(x1.y, y1.y, p);
    *reinterpret_cast<ulonglong2 *>(out + off0) = x0;
    *reinterpret_cast<ulonglong2 *>(out + off1) = x1;
}

tsafe_status tsafe_cuda_elementwise_launch(tsafe_cuda_backend *cb, int op,
                                           uint64_t *out, const uint64_t *a,
                                           const uint64_t *b, size_t n_polys,
                                           size_t b_polys, uint32_t n_limbs)
{
    uint32_t log_n = cb->tables.log_n;
    if (n_polys == 0 || n_limbs == 0)
        return TSAFE_OK;
    uint64_t blocks = ((uint64_t)n_polys * n_limbs)
                      << (log_n - TSAFE_EW_CHUNK_LOG);
    if (blocks > 0x7fffffffull)
        return tsafe_cuda_fail_msg(TSAFE_E_RANGE,
                                   "element-wise batch too large for one launch");
    int bc = b_polys == 1 && n_polys != 1;
    dim3 g((unsigned)blocks), t(TSAFE_EW_THREADS);
    tsafe_cuda_launch_prepare();
    switch (op) {
    case TSAFE_OP_ADD:
        tsafe_ew_kernel<TSAFE_OP_ADD><<<g, t, 0, cb->stream>>>(
            out, a, b, log_n, n_limbs, bc, cb->d_primes);
        break;
    case TSAFE_OP_SUB:
        tsafe_ew_kernel<TSAFE_OP_SUB><<<g, t, 0, cb->stream>>>(
            out, a, b, log_n, n_limbs, bc, cb->d_primes);
        break;
    case TSAFE_OP_MUL:
        tsafe_ew_kernel<TSAFE_OP_MUL><<<g, t, 0, cb->stream>>>(
            out, a, b, log_n, n_limbs, bc, cb->d_primes);
        break;
    default:
        return tsafe_cuda_fail_msg(TSAFE_E_ARG, "unknown element-wise op %d", op);
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TSAFE_OK
                            : tsafe_cuda_fail(e, "element-wise launch");
}
