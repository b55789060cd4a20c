/* The CUDA backend's memory: buffers from the device pool (slabs of
 * cudaMalloc), and uploads and downloads through two pinned staging halves
 * so that the host copy of one chunk overlaps the device copy of the next. */
#include <string.h>

#include "cuda_internal.cuh"
#include "profile.cuh"

static tsafe_status slab_alloc(void *user, size_t bytes, void **ptr)
{
    (void)user;
    cudaError_t e = cudaMalloc(ptr, bytes);
    return e == cudaSuccess ? TSAFE_OK : tsafe_cuda_fail(e, "cudaMalloc(pool slab)");
}

static void slab_free(void *user, void *ptr)
{
    (void)user;
    tsafe_cuda_ignore(cudaFree(ptr));
}

/* The pinned staging halves and their events, then the device pool. On
 * failure what was made stays in cb for tsafe_cuda_memory_teardown. */
tsafe_status tsafe_cuda_memory_setup(tsafe_cuda_backend *cb)
{
    tsafe_status st = TSAFE_OK;
    for (int h = 0; h < 2; h++) {
        TSAFE_CUDA_TRY(cudaHostAlloc((void **)&cb->staging[h],
                                     TSAFE_CUDA_STAGING_WORDS * sizeof(uint64_t),
                                     cudaHostAllocDefault));
        TSAFE_CUDA_TRY(cudaEventCreateWithFlags(&cb->staging_ev[h],
                                                cudaEventDisableTiming));
    }
    st = tsafe_cuda_pool_init(&cb->pool, slab_alloc, slab_free, NULL,
                              TSAFE_CUDA_POOL_INITIAL, TSAFE_CUDA_POOL_INITIAL);
fail:
    return st;
}

void tsafe_cuda_memory_teardown(tsafe_cuda_backend *cb)
{
    for (int h = 0; h < 2; h++) {
        if (cb->staging_ev[h])
            tsafe_cuda_ignore(cudaEventDestroy(cb->staging_ev[h]));
        if (cb->staging[h])
            tsafe_cuda_ignore(cudaFreeHost(cb->staging[h]));
    }
    tsafe_cuda_pool_destroy(&cb->pool);
}

tsafe_status tsafe_cuda_buffer_alloc(tsafe_backend *b, size_t words, void **mem)
{
    tsafe_cuda_prof_scope ps(TSAFE_PROF_ALLOC, words);
    tsafe_cuda_backend *cb = (tsafe_cuda_backend *)b->ctx;
    tsafe_status st = tsafe_cuda_refuse_in_capture(cb, "buffer allocation");
    if (st != TSAFE_OK)
        return st;
    if (words > SIZE_MAX / sizeof(uint64_t))
        return TSAFE_E_SIZE_OVERFLOW;
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    /* Growth calls cudaMalloc, which is not a stream operation and must
     * never run while the stream is captured (refused above already; the
     * pool refuses it too, with TSAFE_E_STATE, should a path ever reach
     * it during a capture). */
    st = tsafe_cuda_pool_alloc(&cb->pool, words ? words * sizeof(uint64_t) : 1,
                               !cb->capturing, mem);
    if (st == TSAFE_E_STATE)
        return tsafe_cuda_fail_msg(st, "device pool growth during a graph capture");
    if (st == TSAFE_E_NOMEM && !strstr(tsafe_cuda_last_error(), "cudaMalloc"))
        (void)tsafe_cuda_fail_msg(st, "buffer pool bookkeeping: out of memory");
    if (st != TSAFE_OK)
        return st;
    /* zero, as the CPU backend's fresh buffers */
    cudaError_t e = cudaMemsetAsync(*mem, 0, words * sizeof(uint64_t),
                                    cb->stream);
    if (e != cudaSuccess) {
        (void)tsafe_cuda_pool_free(&cb->pool, *mem);
        *mem = NULL;
        return tsafe_cuda_fail(e, "cudaMemsetAsync(new buffer)");
    }
    return TSAFE_OK;
}

void tsafe_cuda_buffer_free(tsafe_backend *b, void *mem)
{
    tsafe_cuda_prof_scope ps(TSAFE_PROF_FREE);
    tsafe_cuda_backend *cb = (tsafe_cuda_backend *)b->ctx;
    /* Freed memory is reused only by later work on the same stream; a
     * buffer freed during a capture would be reused under the graph, so
     * it is then kept (leaked into the pool) instead. */
    if (!mem || cb->capturing)
        return;
    (void)tsafe_cuda_pool_free(&cb->pool, mem);
}

tsafe_status tsafe_cuda_buffer_upload(tsafe_backend *b, void *mem, const uint64_t *src,
                                      size_t words)
{
    tsafe_cuda_prof_scope ps(TSAFE_PROF_UPLOAD, words);
    tsafe_cuda_backend *cb = (tsafe_cuda_backend *)b->ctx;
    tsafe_status st = tsafe_cuda_refuse_in_capture(cb, "upload");
    if (st != TSAFE_OK)
        return st;
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    uint64_t *dst = (uint64_t *)mem;
    while (words) {
        size_t chunk = words < TSAFE_CUDA_STAGING_WORDS ? words
                                                        : TSAFE_CUDA_STAGING_WORDS;
        int h = cb->staging_next;
        cb->staging_next ^= 1;
        /* the previous copy out of this half must be done */
        cudaError_t e = cudaEventSynchronize(cb->staging_ev[h]);
        if (e != cudaSuccess)
            return tsafe_cuda_fail(e, "cudaEventSynchronize(staging)");
        memcpy(cb->staging[h], src, chunk * sizeof(uint64_t));
        e = cudaMemcpyAsync(dst, cb->staging[h], chunk * sizeof(uint64_t),
                            cudaMemcpyHostToDevice, cb->stream);
        if (e != cudaSuccess)
            return tsafe_cuda_fail(e, "cudaMemcpyAsync(upload)");
        e = cudaEventRecord(cb->staging_ev[h], cb->stream);
        if (e != cudaSuccess)
            return tsafe_cuda_fail(e, "cudaEventRecord(upload staging)");
        src += chunk;
        dst += chunk;
        words -= chunk;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_cuda_buffer_download(tsafe_backend *b, const void *mem, uint64_t *dst,
                                        size_t words)
{
    tsafe_cuda_prof_scope ps(TSAFE_PROF_DOWNLOAD, words);
    tsafe_cuda_backend *cb = (tsafe_cuda_backend *)b->ctx;
    tsafe_status st = tsafe_cuda_refuse_in_capture(cb, "download");
    if (st != TSAFE_OK)
        return st;
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    const uint64_t *src = (const uint64_t *)mem;
    const size_t CH = TSAFE_CUDA_STAGING_WORDS;
    size_t n_chunks = (words + CH - 1) / CH;
    int h0 = cb->staging_next;
    /* chunk c goes through staging half (h0 + c) & 1; two in flight, so the
     * device copies chunk c+1 while the host drains chunk c */
    for (size_t c = 0; c < n_chunks + 2; c++) {
        if (c >= 2) { /* drain chunk c-2 */
            size_t d = c - 2;
            if (d >= n_chunks)
                break;
            int h = (int)((h0 + d) & 1);
            cudaError_t e = cudaEventSynchronize(cb->staging_ev[h]);
            if (e != cudaSuccess)
                return tsafe_cuda_fail(e, "download (queued work failed)");
            size_t len = words - d * CH < CH ? words - d * CH : CH;
            memcpy(dst + d * CH, cb->staging[h], len * sizeof(uint64_t));
        }
        if (c < n_chunks) { /* queue chunk c (its half is free now) */
            int h = (int)((h0 + c) & 1);
            size_t len = words - c * CH < CH ? words - c * CH : CH;
            cudaError_t e = cudaEventSynchronize(cb->staging_ev[h]);
            if (e != cudaSuccess)
                return tsafe_cuda_fail(e, "cudaEventSynchronize(staging)");
            e = cudaMemcpyAsync(cb->staging[h], src + c * CH,
                                len * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                cb->stream);
            if (e != cudaSuccess)
                return tsafe_cuda_fail(e, "cudaMemcpyAsync(download)");
            e = cudaEventRecord(cb->staging_ev[h], cb->stream);
            if (e != cudaSuccess)
                return tsafe_cuda_fail(e, "cudaEventRecord(download staging)");
        }
    }
    cb->staging_next = (int)((h0 + n_chunks) & 1);
    /* surface asynchronous faults of earlier work even for empty copies */
    cudaError_t e = cudaStreamSynchronize(cb->stream);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "download (queued work failed)");
    return TSAFE_OK;
}
