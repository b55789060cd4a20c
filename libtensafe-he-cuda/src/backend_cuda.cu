/* The CUDA backend: vtable, creation, buffers and transfers, devices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"

namespace {
extern const struct tsafe_backend_i tsafe_cuda_iface; /* defined below */
}

tsafe_cuda_backend *tsafe_cuda_state(const tsafe_backend *b)
{
    if (!b || b->iface != &tsafe_cuda_iface)
        return NULL;
    return (tsafe_cuda_backend *)b->ctx;
}

static tsafe_cuda_backend *state(tsafe_backend *b)
{
    return (tsafe_cuda_backend *)b->ctx;
}

/* ------------------------------------------------------------ devices */

extern "C" TSAFE_API tsafe_status tsafe_cuda_device_count(int *count)
{
    if (!count)
        return TSAFE_E_NULL;
    int c = 0;
    cudaError_t e = cudaGetDeviceCount(&c);
    if (e != cudaSuccess) {
        /* no device is not a failure: keep the message (fail also clears
         * the runtime's last error) and report 0 */
        (void)tsafe_cuda_fail(e, "no CUDA device: cudaGetDeviceCount");
        c = 0;
    }
    *count = c;
    return TSAFE_OK;
}

static tsafe_status check_device(int device)
{
    int count = 0;
    tsafe_status st = tsafe_cuda_device_count(&count);
    if (st != TSAFE_OK)
        return st;
    if (device < 0)
        return tsafe_cuda_fail_msg(TSAFE_E_ARG, "negative device index %d",
                                   device);
    if (device >= count)
        return count == 0 ? TSAFE_E_NO_DEVICE /* message already set */
                          : tsafe_cuda_fail_msg(TSAFE_E_NO_DEVICE,
                                                "device %d requested, %d present",
                                                device, count);
    return TSAFE_OK;
}

extern "C" TSAFE_API tsafe_status tsafe_cuda_device_name(int device, char *buf,
                                                         size_t cap,
                                                         int *cc_major,
                                                         int *cc_minor)
{
    tsafe_status st = check_device(device);
    if (st != TSAFE_OK)
        return st;
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaGetDeviceProperties");
    if (buf && cap) {
        strncpy(buf, prop.name, cap - 1);
        buf[cap - 1] = 0;
    }
    if (cc_major)
        *cc_major = prop.major;
    if (cc_minor)
        *cc_minor = prop.minor;
    return TSAFE_OK;
}

extern "C" TSAFE_API tsafe_status tsafe_cuda_mem_info(int device,
                                                      size_t *free_bytes,
                                                      size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return TSAFE_E_NULL;
    tsafe_status st = check_device(device);
    if (st != TSAFE_OK)
        return st;
    tsafe_cuda_device_guard g(device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    return e == cudaSuccess ? TSAFE_OK : tsafe_cuda_fail(e, "cudaMemGetInfo");
}

/* ------------------------------------------------------------- buffers */

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

static tsafe_status refuse_in_capture(const tsafe_cuda_backend *cb,
                                      const char *what)
{
    if (!cb->capturing)
        return TSAFE_OK;
    return tsafe_cuda_fail_msg(TSAFE_E_STATE,
                               "%s is not allowed while a graph is captured",
                               what);
}

static tsafe_status cuda_buffer_alloc(tsafe_backend *b, size_t words,
                                      void **mem)
{
    tsafe_cuda_backend *cb = state(b);
    tsafe_status st = refuse_in_capture(cb, "buffer allocation");
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

static void cuda_buffer_free(tsafe_backend *b, void *mem)
{
    tsafe_cuda_backend *cb = state(b);
    /* Freed memory is reused only by later work on the same stream; a
     * buffer freed during a capture would be reused under the graph, so
     * it is then kept (leaked into the pool) instead. */
    if (!mem || cb->capturing)
        return;
    (void)tsafe_cuda_pool_free(&cb->pool, mem);
}

static tsafe_status cuda_buffer_upload(tsafe_backend *b, void *mem,
                                       const uint64_t *src, size_t words)
{
    tsafe_cuda_backend *cb = state(b);
    tsafe_status st = refuse_in_capture(cb, "upload");
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

static tsafe_status cuda_buffer_download(tsafe_backend *b, const void *mem,
                                         uint64_t *dst, size_t words)
{
    tsafe_cuda_backend *cb = state(b);
    tsafe_status st = refuse_in_capture(cb, "download");
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

/* --------------------------------------------------------------- ops */

/* Inside a capture the first failure is remembered and reported by
 * graph_end as well. */
static tsafe_status note(tsafe_cuda_backend *cb, tsafe_status st)
{
    if (st != TSAFE_OK && cb->capturing && cb->capture_status == TSAFE_OK)
        cb->capture_status = st;
    return st;
}

static tsafe_status check_limbs(const tsafe_cuda_backend *cb, uint32_t n_limbs)
{
    if (n_limbs == 0 || n_limbs > cb->tables.n_primes)
        return tsafe_cuda_fail_msg(TSAFE_E_RANGE, "%u limbs (context has %u primes)",
                                   n_limbs, cb->tables.n_primes);
    return TSAFE_OK;
}

static tsafe_status cuda_ntt(tsafe_backend *b, void *mem, size_t n_polys,
                             uint32_t n_limbs, int forward)
{
    tsafe_cuda_backend *cb = state(b);
    tsafe_status st = check_limbs(cb, n_limbs);
    if (st != TSAFE_OK)
        return note(cb, st);
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return note(cb, tsafe_cuda_fail(g.err, "cudaSetDevice"));
    uint64_t stride = (uint64_t)n_limbs * cb->tables.n;
    return note(cb, tsafe_cuda_ntt_launch(cb, forward, (uint64_t *)mem, stride,
                                          (uint64_t *)mem, stride, n_polys,
                                          n_limbs, 0, NULL));
}

static tsafe_status cuda_ntt_forward(tsafe_backend *b, void *mem,
                                     size_t n_polys, uint32_t n_limbs)
{
    return cuda_ntt(b, mem, n_polys, n_limbs, 1);
}

static tsafe_status cuda_ntt_inverse(tsafe_backend *b, void *mem,
                                     size_t n_polys, uint32_t n_limbs)
{
    return cuda_ntt(b, mem, n_polys, n_limbs, 0);
}

static tsafe_status cuda_elementwise(tsafe_backend *b, tsafe_elementwise_op op,
                                     void *out, const void *a, const void *bb,
                                     size_t n_polys, size_t b_polys,
                                     uint32_t n_limbs)
{
    tsafe_cuda_backend *cb = state(b);
    tsafe_status st = check_limbs(cb, n_limbs);
    if (st != TSAFE_OK)
        return note(cb, st);
    if (b_polys != n_polys && b_polys != 1)
        return note(cb, tsafe_cuda_fail_msg(TSAFE_E_SHAPE,
                                            "b has %zu polynomials, a has %zu",
                                            b_polys, n_polys));
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return note(cb, tsafe_cuda_fail(g.err, "cudaSetDevice"));
    return note(cb, tsafe_cuda_elementwise_launch(
                        cb, (int)op, (uint64_t *)out, (const uint64_t *)a,
                        (const uint64_t *)bb, n_polys, b_polys, n_limbs));
}

static tsafe_status cuda_rescale(tsafe_backend *b, void *out, const void *in,
                                 size_t n_polys, uint32_t n_limbs_in)
{
    tsafe_cuda_backend *cb = state(b);
    if (!cb->tables.ckks) /* as the CPU backend: BFV switches in coefficient form */
        return note(cb, tsafe_cuda_fail_msg(TSAFE_E_UNSUPPORTED,
                                            "rescale on a BFV ring (use the "
                                            "modulus switch)"));
    if (out == in)
        return note(cb, tsafe_cuda_fail_msg(TSAFE_E_ARG,
                                            "rescale cannot run in place"));
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return note(cb, tsafe_cuda_fail(g.err, "cudaSetDevice"));
    return note(cb, tsafe_cuda_rescale_launch(cb, (uint64_t *)out,
                                              (const uint64_t *)in, n_polys,
                                              n_limbs_in));
}

static tsafe_status cuda_mul_acc(tsafe_backend *b, const tsafe_backend_mac *jobs,
                                 size_t n_jobs)
{
    tsafe_cuda_backend *cb = state(b);
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return note(cb, tsafe_cuda_fail(g.err, "cudaSetDevice"));
    return note(cb, tsafe_cuda_mul_acc_launch(cb, jobs, n_jobs));
}

static tsafe_status cuda_mod_switch(tsafe_backend *b, void *out, const void *in,
                                    size_t n_polys, uint32_t n_limbs_in)
{
    tsafe_cuda_backend *cb = state(b);
    if (out == in)
        return note(cb, tsafe_cuda_fail_msg(TSAFE_E_ARG,
                                            "mod_switch cannot run in place"));
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return note(cb, tsafe_cuda_fail(g.err, "cudaSetDevice"));
    return note(cb, tsafe_cuda_mod_switch_launch(cb, (uint64_t *)out,
                                                 (const uint64_t *)in, n_polys,
                                                 n_limbs_in));
}

static tsafe_status cuda_synchronize(tsafe_backend *b)
{
    tsafe_cuda_backend *cb = state(b);
    tsafe_status st = refuse_in_capture(cb, "synchronize");
    if (st != TSAFE_OK)
        return st;
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    cudaError_t e = cudaStreamSynchronize(cb->stream);
    return e == cudaSuccess ? TSAFE_OK : tsafe_cuda_fail(e, "cudaStreamSynchronize");
}

/* -------------------------------------------------------------- graphs */

/* Whether cb->stream is still being captured; when the query itself fails
 * the capture is assumed open (refusing work is the safe side). */
static int capture_still_open(tsafe_cuda_backend *cb)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(cb->stream, &cs);
    tsafe_cuda_ignore(e);
    return e != cudaSuccess || cs != cudaStreamCaptureStatusNone;
}

static tsafe_status cuda_graph_begin(tsafe_backend *b)
{
    tsafe_cuda_backend *cb = state(b);
    if (cb->capturing)
        return tsafe_cuda_fail_msg(TSAFE_E_STATE, "graph capture already open");
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    /* Relaxed, not ThreadLocal or Global: a backend belongs to one thread
     * at a time but may move between threads, and in the two other modes
     * cudaStreamEndCapture must come from the thread that began the
     * capture. Global would also forbid "unsafe" calls (cudaMalloc, sync
     * copies) on every other thread, so another backend on another thread
     * -- the documented way to run adapters concurrently -- would fail or
     * invalidate this capture. What those modes guard against on our own
     * stream is refused by the backend itself while capturing: buffer
     * allocation (pool growth = cudaMalloc), upload, download and
     * synchronize return TSAFE_E_STATE. */
    cudaError_t e = cudaStreamBeginCapture(cb->stream,
                                           cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaStreamBeginCapture");
    cb->capturing = 1;
    cb->capture_status = TSAFE_OK;
    return TSAFE_OK;
}

static tsafe_status cuda_graph_end(tsafe_backend *b)
{
    tsafe_cuda_backend *cb = state(b);
    if (!cb->capturing)
        return tsafe_cuda_fail_msg(TSAFE_E_STATE, "no graph capture open");
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess) /* nothing ended: the capture stays open */
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(cb->stream, &graph);
    tsafe_status st = cb->capture_status;
    if (e != cudaSuccess) {
        tsafe_status st_end = tsafe_cuda_fail(e, "cudaStreamEndCapture");
        if (st == TSAFE_OK)
            st = st_end;
        else /* keep both: the first failure's status, this message */
            (void)tsafe_cuda_fail_msg(st, "cudaStreamEndCapture failed (%s) "
                                          "after an earlier failure in the "
                                          "capture (%s)",
                                      cudaGetErrorName(e), tsafe_strerror(st));
    }
    /* The stream, not our flag, says whether the capture is over: an
     * invalidated capture ends with the failed call, but a refused one
     * (e.g. a mode/thread mismatch) is still open and must stay marked so
     * that alloc/upload/download/synchronize keep being refused and a
     * later end (or destroy) closes it. */
    cb->capturing = e != cudaSuccess && capture_still_open(cb);
    cudaGraphExec_t exec = NULL;
    if (st == TSAFE_OK) {
        e = cudaGraphInstantiate(&exec, graph, 0);
        if (e != cudaSuccess) {
            exec = NULL;
            st = tsafe_cuda_fail(e, "cudaGraphInstantiate");
        }
    }
    if (graph)
        tsafe_cuda_ignore(cudaGraphDestroy(graph));
    if (st != TSAFE_OK)
        return st; /* the previous graph, if any, stays usable */
    if (cb->graph_exec)
        tsafe_cuda_ignore(cudaGraphExecDestroy(cb->graph_exec));
    cb->graph_exec = exec;
    return TSAFE_OK;
}

static tsafe_status cuda_graph_launch(tsafe_backend *b)
{
    tsafe_cuda_backend *cb = state(b);
    if (cb->capturing || !cb->graph_exec)
        return tsafe_cuda_fail_msg(TSAFE_E_STATE, cb->capturing
                                                      ? "graph launch during capture"
                                                      : "no graph captured");
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    cudaError_t e = cudaGraphLaunch(cb->graph_exec, cb->stream);
    return e == cudaSuccess ? TSAFE_OK : tsafe_cuda_fail(e, "cudaGraphLaunch");
}

static tsafe_cuda_backend *checked(tsafe_backend *b, tsafe_status *st)
{
    tsafe_cuda_backend *cb = tsafe_cuda_state(b);
    *st = cb ? TSAFE_OK
             : tsafe_cuda_fail_msg(b ? TSAFE_E_ARG : TSAFE_E_NULL,
                                   "not a CUDA backend");
    return cb;
}

extern "C" TSAFE_API tsafe_status tsafe_cuda_graph_begin(tsafe_backend *b)
{
    tsafe_status st;
    return checked(b, &st) ? cuda_graph_begin(b) : st;
}

extern "C" TSAFE_API tsafe_status tsafe_cuda_graph_end(tsafe_backend *b)
{
    tsafe_status st;
    return checked(b, &st) ? cuda_graph_end(b) : st;
}

extern "C" TSAFE_API tsafe_status tsafe_cuda_graph_launch(tsafe_backend *b)
{
    tsafe_status st;
    return checked(b, &st) ? cuda_graph_launch(b) : st;
}

extern "C" TSAFE_API int tsafe_backend_is_cuda(const tsafe_backend *b)
{
    return tsafe_cuda_state(b) != NULL;
}

extern "C" TSAFE_API tsafe_status tsafe_cuda_buffer_device_pointer(
    const tsafe_buffer *buf, void **out)
{
    if (!buf || !out)
        return TSAFE_E_NULL;
    if (!tsafe_cuda_state(buf->backend))
        return tsafe_cuda_fail_msg(TSAFE_E_ARG, "buffer of a non-CUDA backend");
    *out = buf->mem;
    return TSAFE_OK;
}

/* --------------------------------------------------- create / destroy */

static const char *cuda_get_name(tsafe_backend *b) { return state(b)->name; }

static void destroy_state(tsafe_cuda_backend *cb)
{
    if (!cb)
        return;
    /* Teardown reports nothing (free has no status); each ignored failure
     * still has its last error cleared so that no later launch on this
     * thread reports it. */
    tsafe_cuda_device_guard g(cb->device);
    tsafe_cuda_ignore(g.err);
    if (cb->capturing) {
        cudaGraph_t graph = NULL;
        cudaError_t e = cudaStreamEndCapture(cb->stream, &graph);
        tsafe_cuda_ignore(e);
        if (e == cudaSuccess && graph)
            tsafe_cuda_ignore(cudaGraphDestroy(graph));
    }
    if (cb->stream)
        tsafe_cuda_ignore(cudaStreamSynchronize(cb->stream));
    if (cb->graph_exec)
        tsafe_cuda_ignore(cudaGraphExecDestroy(cb->graph_exec));
    for (int h = 0; h < 2; h++) {
        if (cb->staging_ev[h])
            tsafe_cuda_ignore(cudaEventDestroy(cb->staging_ev[h]));
        if (cb->staging[h])
            tsafe_cuda_ignore(cudaFreeHost(cb->staging[h]));
    }
    tsafe_cuda_pool_destroy(&cb->pool);
    tsafe_cuda_ignore(cudaFree(cb->d_tw_fwd));
    tsafe_cuda_ignore(cudaFree(cb->d_tw_inv));
    tsafe_cuda_ignore(cudaFree(cb->d_primes));
    tsafe_cuda_ignore(cudaFree(cb->d_rescale));
    if (cb->stream)
        tsafe_cuda_ignore(cudaStreamDestroy(cb->stream));
    tsafe_cuda_tables_free(&cb->tables);
    free(cb);
}

static void cuda_destroy(tsafe_backend *b) { destroy_state(state(b)); }

namespace {
const struct tsafe_backend_i tsafe_cuda_iface = {
    .get_name = cuda_get_name,
    .destroy = cuda_destroy,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_free = cuda_buffer_free,
    .buffer_upload = cuda_buffer_upload,
    .buffer_download = cuda_buffer_download,
    .ntt_forward = cuda_ntt_forward,
    .ntt_inverse = cuda_ntt_inverse,
    .elementwise = cuda_elementwise,
    .rescale = cuda_rescale,
    .mul_acc = cuda_mul_acc,
    .mod_switch = cuda_mod_switch,
    .synchronize = cuda_synchronize,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_launch = cuda_graph_launch,
};
} // namespace

static tsafe_status upload_table(void **dst, const void *src, size_t bytes)
{
    cudaError_t e = cudaMalloc(dst, bytes);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaMalloc(constant tables)");
    e = cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice);
    /* on failure *dst stays set: destroy_state frees it */
    return e == cudaSuccess ? TSAFE_OK
                            : tsafe_cuda_fail(e, "cudaMemcpy(constant tables)");
}

/* Shared by both constructors: exactly one of ckks / bfv. The handle is
 * made first (it carries the ring facts the tables are built from); after
 * that, a failure frees the handle, whose destroy frees the state. */
static tsafe_status cuda_create(const tsafe_context *ckks,
                                const tsafe_bfv_context *bfv, int device,
                                tsafe_backend **out)
{
    tsafe_status st = check_device(device);
    if (st != TSAFE_OK)
        return st;
    tsafe_cuda_device_guard g(device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");

    tsafe_cuda_backend *cb = (tsafe_cuda_backend *)calloc(1, sizeof(*cb));
    if (!cb)
        return TSAFE_E_NOMEM;
    cb->device = device;
    tsafe_backend *be = NULL;
    size_t tw_bytes;
    st = ckks ? tsafe_backend_init(&be, TSAFE_BACKEND_API_VERSION,
                                   &tsafe_cuda_iface, cb, ckks)
              : tsafe_backend_init_bfv(&be, TSAFE_BACKEND_API_VERSION,
                                       &tsafe_cuda_iface, cb, bfv);
    if (st != TSAFE_OK) {
        (void)tsafe_cuda_fail_msg(st, "tsafe_backend_init: %s",
                                  tsafe_strerror(st));
        destroy_state(cb);
        return st;
    }
    {
        cudaDeviceProp prop;
        TSAFE_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
        snprintf(cb->name, sizeof(cb->name), "cuda:%d (sm_%d%d)", device,
                 prop.major, prop.minor);
        if (prop.major < 8) { /* machine code for sm_80 / sm_90 only */
            st = tsafe_cuda_fail_msg(TSAFE_E_NO_DEVICE,
                                     "device %d (%s) has compute capability "
                                     "%d.%d; this build needs 8.0 or newer",
                                     device, prop.name, prop.major, prop.minor);
            goto fail;
        }
    }
    st = tsafe_cuda_tables_build(be, &cb->tables);
    if (st != TSAFE_OK) {
        (void)tsafe_cuda_fail_msg(st, "ring tables: %s", tsafe_strerror(st));
        goto fail;
    }
    TSAFE_CUDA_TRY(cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking));
    st = tsafe_cuda_ntt_setup(cb);
    if (st != TSAFE_OK)
        goto fail;
    tw_bytes = 2 * cb->tables.n * cb->tables.n_primes * sizeof(uint64_t);
    if ((st = upload_table((void **)&cb->d_tw_fwd, cb->tables.tw_fwd, tw_bytes)) ||
        (st = upload_table((void **)&cb->d_tw_inv, cb->tables.tw_inv, tw_bytes)) ||
        (st = upload_table((void **)&cb->d_primes, cb->tables.primes,
                           sizeof(cb->tables.primes))) ||
        (st = upload_table((void **)&cb->d_rescale, cb->tables.rescale,
                           sizeof(cb->tables.rescale))))
        goto fail;
    for (int h = 0; h < 2; h++) {
        TSAFE_CUDA_TRY(cudaHostAlloc((void **)&cb->staging[h],
                                     TSAFE_CUDA_STAGING_WORDS * sizeof(uint64_t),
                                     cudaHostAllocDefault));
        TSAFE_CUDA_TRY(cudaEventCreateWithFlags(&cb->staging_ev[h],
                                                cudaEventDisableTiming));
    }
    st = tsafe_cuda_pool_init(&cb->pool, slab_alloc, slab_free, NULL,
                              TSAFE_CUDA_POOL_INITIAL, TSAFE_CUDA_POOL_INITIAL);
    if (st != TSAFE_OK)
        goto fail;
    *out = be;
    return TSAFE_OK;
fail:
    /* every CUDA failure above went through tsafe_cuda_fail; destroy
     * frees the partly built state */
    tsafe_backend_free(be);
    return st;
}

extern "C" TSAFE_API tsafe_status tsafe_backend_cuda_create(
    const tsafe_context *ctx, int device, tsafe_backend **out)
{
    if (!out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (!ctx)
        return TSAFE_E_NULL;
    return cuda_create(ctx, NULL, device, out);
}

extern "C" TSAFE_API tsafe_status tsafe_backend_cuda_create_bfv(
    const tsafe_bfv_context *ctx, int device, tsafe_backend **out)
{
    if (!out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (!ctx)
        return TSAFE_E_NULL;
    return cuda_create(NULL, ctx, device, out);
}

/* The factory: device 0, for whichever ring the caller asks. */
static tsafe_status cuda_factory_create(void *user, const tsafe_context *ckks,
                                        const tsafe_bfv_context *bfv,
                                        tsafe_backend **out)
{
    (void)user;
    if (!out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (!ckks == !bfv)
        return TSAFE_E_ARG;
    return cuda_create(ckks, bfv, 0, out);
}

static const tsafe_backend_factory k_cuda_factory = {"cuda", cuda_factory_create,
                                                     NULL};

extern "C" TSAFE_API const tsafe_backend_factory *tsafe_backend_cuda_factory(void)
{
    return &k_cuda_factory;
}
