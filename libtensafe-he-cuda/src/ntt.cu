/* Batched NTT kernels (see ntt.cuh for the scheme). One launch per pass
 * covers every polynomial and limb of the batch. The kernel is the
 * scaffold only -- block setup and the phases of ntt.cuh with a barrier
 * between them -- so that the host emulation runs the same body. */
#include "cuda_internal.cuh"

template <bool FWD>
__global__ void __maxnreg__(64)
    tsafe_ntt_pass_kernel(tsafe_ntt_args a)
{
    extern __shared__ uint64_t sm[];
    tsafe_ntt_block b;
    tsafe_ntt_block_setup(a, blockIdx.x, b);
    const uint32_t phases = tsafe_ntt_phases(a);
    for (uint32_t ph = 0; ph < phases; ph++) {
        if (ph)
            __syncthreads();
        tsafe_ntt_phase<FWD>(a, b, sm, ph, threadIdx.x, blockDim.x);
    }
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

tsafe_status tsafe_cuda_ntt_run(tsafe_cuda_backend *cb,
                                const tsafe_ntt_call *c)
{
    const tsafe_ntt_plan *pl = &cb->plan;
    if (c->n_polys == 0 || c->n_limbs == 0)
        return TSAFE_OK;
    for (uint32_t step = 0; step < pl->n_passes; step++) {
        tsafe_ntt_args a;
        tsafe_ntt_dims d;
        tsafe_status st = tsafe_ntt_step(pl, c, step, cb->d_tw_fwd,
                                         cb->d_tw_inv, cb->d_primes, &a, &d);
        if (st != TSAFE_OK)
            return tsafe_cuda_fail_msg(st, "NTT batch of %zu x %u limbs too "
                                           "large for one launch",
                                       c->n_polys, c->n_limbs);
        tsafe_cuda_launch_prepare();
        if (c->forward)
            tsafe_ntt_pass_kernel<true>
                <<<(unsigned)d.blocks, d.threads, d.smem_bytes, cb->stream>>>(a);
        else
            tsafe_ntt_pass_kernel<false>
                <<<(unsigned)d.blocks, d.threads, d.smem_bytes, cb->stream>>>(a);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return tsafe_cuda_fail(e, c->forward ? "NTT forward launch"
                                                 : "NTT inverse launch");
    }
    return TSAFE_OK;
}

tsafe_status tsafe_cuda_ntt_launch(tsafe_cuda_backend *cb, int forward,
                                   const uint64_t *src, uint64_t src_stride,
                                   uint64_t *dst, uint64_t dst_stride,
                                   size_t n_polys, uint32_t n_limbs,
                                   uint32_t prime_base, const tsafe_ntt_epi *epi)
{
    tsafe_ntt_call c = {forward, src, src_stride, dst, dst_stride, n_polys,
                        n_limbs, prime_base, epi};
    return tsafe_cuda_ntt_run(cb, &c);
}
