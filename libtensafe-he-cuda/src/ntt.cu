/* Batched NTT kernels (see ntt.cuh for the scheme). One launch per pass
 * covers every polynomial and limb of the batch. */
#include "cuda_internal.cuh"

template <bool FWD>
__global__ void __maxnreg__(64)
    tsafe_ntt_pass_kernel(tsafe_ntt_args a)
{
    extern __shared__ uint64_t sm[];
    tsafe_ntt_block b;
    tsafe_ntt_block_setup(a, blockIdx.x, b);
    const uint32_t tile = 1u << (a.S + a.log_cols);
    const uint32_t half = tile >> 1;
    for (uint32_t e = threadIdx.x; e < tile; e += blockDim.x)
        tsafe_ntt_load(a, b, sm, e);
    __syncthreads();
    if (FWD) {
        for (uint32_t s = a.s0; s < a.s0 + a.S; s++) {
            for (uint32_t bf = threadIdx.x; bf < half; bf += blockDim.x)
                tsafe_ntt_fwd_butterfly(a, b, sm, s, bf);
            __syncthreads();
        }
    } else {
        for (uint32_t s = a.s0 + a.S; s-- > a.s0;) {
            for (uint32_t bf = threadIdx.x; bf < half; bf += blockDim.x)
                tsafe_ntt_inv_butterfly(a, b, sm, s, bf);
            __syncthreads();
        }
    }
    for (uint32_t e = threadIdx.x; e < tile; e += blockDim.x)
        tsafe_ntt_store<FWD>(a, b, sm, e);
}

tsafe_status tsafe_cuda_ntt_setup(tsafe_cuda_backend *cb)
{
    int optin = 0;
    cudaError_t e = cudaDeviceGetAttribute(
        &optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, cb->device);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaDeviceGetAttribute(smem optin)");
    uint32_t fused = 0;
    while (fused < TSAFE_NTT_FUSED_LOG_MAX &&
           ((size_t)sizeof(uint64_t) << (fused + 1)) <= (size_t)optin)
        fused++;
    if (!tsafe_ntt_plan_build(cb->tables.log_n, fused, &cb->plan))
        return tsafe_cuda_fail_msg(TSAFE_E_UNSUPPORTED,
                                   "NTT of 2^%u needs more than two passes with "
                                   "%d bytes of shared memory per block",
                                   cb->tables.log_n, optin);
    /* The limit is a property of the kernel on this device, shared by every
     * backend on it: always raise it to the device-wide fused tile (which
     * bounds every pass tile), never to this plan's size, so that a backend
     * with a smaller N cannot lower it under another backend's feet. */
    size_t smem = sizeof(uint64_t) << fused;
    for (uint32_t i = 0; i < cb->plan.n_passes; i++)
        if (cb->plan.pass[i].smem_bytes > smem)
            return tsafe_cuda_fail_msg(TSAFE_E_UNSUPPORTED,
                                       "NTT tile of %zu bytes above the "
                                       "%zu-byte limit",
                                       cb->plan.pass[i].smem_bytes, smem);
    e = cudaFuncSetAttribute(tsafe_ntt_pass_kernel<true>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(tsafe_ntt_pass_kernel<false>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)smem);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaFuncSetAttribute(NTT shared memory)");
    return TSAFE_OK;
}

tsafe_status tsafe_cuda_ntt_launch(tsafe_cuda_backend *cb, int forward,
                                   const uint64_t *src, uint64_t src_stride,
                                   uint64_t *dst, uint64_t dst_stride,
                                   size_t n_polys, uint32_t n_limbs,
                                   uint32_t prime_base, const tsafe_ntt_epi *epi)
{
    const tsafe_ntt_plan *pl = &cb->plan;
    if (n_polys == 0 || n_limbs == 0)
        return TSAFE_OK;
    uint64_t rows = (uint64_t)n_polys * n_limbs;
    for (uint32_t step = 0; step < pl->n_passes; step++) {
        /* inverse runs the passes in reverse order */
        uint32_t pi = forward ? step : pl->n_passes - 1 - step;
        const tsafe_ntt_pass *p = &pl->pass[pi];
        uint64_t blocks = tsafe_ntt_pass_blocks(pl, p, rows);
        if (blocks > 0x7fffffffull)
            return tsafe_cuda_fail_msg(TSAFE_E_RANGE,
                                       "NTT batch of %llu limbs too large for "
                                       "one launch",
                                       (unsigned long long)rows);
        tsafe_ntt_args a;
        tsafe_ntt_args_fill(&a, pl, forward, step, src, src_stride, dst,
                            dst_stride, n_limbs, prime_base,
                            forward ? cb->d_tw_fwd : cb->d_tw_inv, cb->d_primes,
                            epi);
        tsafe_cuda_launch_prepare();
        if (forward)
            tsafe_ntt_pass_kernel<true>
                <<<(unsigned)blocks, p->threads, p->smem_bytes, cb->stream>>>(a);
        else
            tsafe_ntt_pass_kernel<false>
                <<<(unsigned)blocks, p->threads, p->smem_bytes, cb->stream>>>(a);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return tsafe_cuda_fail(e, forward ? "NTT forward launch"
                                              : "NTT inverse launch");
    }
    return TSAFE_OK;
}
