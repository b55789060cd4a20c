/* The CUDA backend: vtable, creation and teardown, the kernels' dispatch
 * and graphs. Devices in device.cu, buffers and transfers in memory.cu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "profile.cuh"

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
    tsafe_cuda_prof_scope ps(TSAFE_PROF_NTT, n_polys);
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
    tsafe_cuda_prof_scope ps(TSAFE_PROF_ELEMENTWISE, n_polys);
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
    tsafe_cuda_prof_scope ps(TSAFE_PROF_MUL_ACC, n_jobs);
    tsafe_cuda_backend *cb = state(b);
    tsafe_cuda_device_guard g(cb->device);
    if (g.err != cudaSuccess)
        return note(cb, tsafe_cuda_fail(g.err, "cudaSetDevice"));
    return note(cb, tsafe_cuda_mul_acc_launch(cb, jobs, n_jobs));
}

static tsafe_status cuda_mod_switch(tsafe_backend *b, void *out, const void *in,
                                    size_t n_polys, uint32_t n_limbs_in)
{
    tsafe_cuda_prof_scope ps(TSAFE_PROF_MOD_SWITCH, n_polys);
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

static tsafe_status cuda_seal_batch(tsafe_backend *b, const void *pk,
                                    const tsafe_backend_seal_job *jobs, size_t n_jobs)
{
    tsafe_cuda_prof_scope ps(TSAFE_PROF_SEAL_BATCH, n_jobs);
    return note(state(b), tsafe_cuda_seal_batch_launch(b, pk, jobs, n_jobs));
}

static tsafe_status cuda_ct_read(tsafe_backend *b, const tsafe_backend_ct_job *jobs, size_t n,
                                 uint64_t stream)
{
    tsafe_cuda_prof_scope ps(TSAFE_PROF_CT_READ, n);
    return note(state(b), tsafe_cuda_ct_read_launch(b, jobs, n, stream));
}

static tsafe_status cuda_synchronize(tsafe_backend *b)
{
    tsafe_cuda_prof_scope ps(TSAFE_PROF_SYNCHRONIZE);
    tsafe_cuda_backend *cb = state(b);
    tsafe_status st = tsafe_cuda_refuse_in_capture(cb, "synchronize");
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
    for (int k = 0; k < TSAFE_CUDA_SEAL_GRAPHS; k++)
        if (cb->seal_graph[k].exec)
            tsafe_cuda_ignore(cudaGraphExecDestroy(cb->seal_graph[k].exec));
    if (cb->seal_ws)
        (void)tsafe_cuda_pool_free(&cb->pool, cb->seal_ws);
    if (cb->seal_host) /* its secret part is wiped after every call */
        tsafe_cuda_ignore(cudaFreeHost(cb->seal_host));
    for (int a = 0; a < TSAFE_CUDA_READ_AREAS; a++) { /* the stream is done */
        if (cb->read[a].ev)
            tsafe_cuda_ignore(cudaEventDestroy(cb->read[a].ev));
        if (cb->read[a].host)
            tsafe_cuda_ignore(cudaFreeHost(cb->read[a].host));
    }
    if (cb->read_dev)
        (void)tsafe_cuda_pool_free(&cb->pool, cb->read_dev);
    tsafe_cuda_memory_teardown(cb);
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
    .buffer_alloc = tsafe_cuda_buffer_alloc,
    .buffer_free = tsafe_cuda_buffer_free,
    .buffer_upload = tsafe_cuda_buffer_upload,
    .buffer_download = tsafe_cuda_buffer_download,
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
    .seal_batch = cuda_seal_batch,
    .ct_read = cuda_ct_read,
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

/* TSAFE_CUDA_SYNC (spin, yield or blocking): how a thread waiting on a
 * device's work waits, set on the device when a backend is created there
 * (the runtime's default, unset: spin while the process has fewer active
 * contexts than cores). Blocking frees the waiting thread's core for
 * other host work at the price of a wake-up per wait. */
static tsafe_status apply_sync_mode(void)
{
    const char *v = getenv("TSAFE_CUDA_SYNC");
    if (!v || !*v)
        return TSAFE_OK;
    unsigned flags;
    if (!strcmp(v, "spin"))
        flags = cudaDeviceScheduleSpin;
    else if (!strcmp(v, "yield"))
        flags = cudaDeviceScheduleYield;
    else if (!strcmp(v, "blocking"))
        flags = cudaDeviceScheduleBlockingSync;
    else
        return tsafe_cuda_fail_msg(TSAFE_E_ARG,
                                   "TSAFE_CUDA_SYNC is '%s': spin, yield or blocking", v);
    cudaError_t e = cudaSetDeviceFlags(flags);
    return e == cudaSuccess ? TSAFE_OK : tsafe_cuda_fail(e, "cudaSetDeviceFlags(TSAFE_CUDA_SYNC)");
}

/* Shared by both constructors: exactly one of ckks / bfv. The handle is
 * made first (it carries the ring facts the tables are built from); after
 * that, a failure frees the handle, whose destroy frees the state. */
static tsafe_status cuda_create(const tsafe_context *ckks,
                                const tsafe_bfv_context *bfv, int device,
                                tsafe_backend **out)
{
    tsafe_status st = tsafe_cuda_check_device(device);
    if (st != TSAFE_OK)
        return st;
    tsafe_cuda_device_guard g(device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    if ((st = apply_sync_mode()) != TSAFE_OK)
        return st;

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
    st = tsafe_cuda_memory_setup(cb);
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
