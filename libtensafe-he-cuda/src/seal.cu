/* The seal_batch slot on the device (seal.cuh has the layout, bodies and
 * stage order): every job of a call in one upload, a fixed sequence of
 * launches over all jobs (the body kernels, two NTT calls, the switches,
 * the gather) and one download, in chunks of jobs whose workspace fits
 * TSAFE_SEAL_WS_BUDGET. The workspace and a pinned host area (both ways'
 * copies go straight from and to it) stay with the backend for the next
 * call; the workspace's secret part (r, the stream keys, e1, the additions
 * and NTT(r)) is zeroed on the stream after each chunk, the host area's
 * once the stream is done. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "profile.cuh"
#include "seal.cuh"

#define TSAFE_SEAL_WS_BUDGET (1ull << 27) /* words per chunk: 1 GiB */

__global__ void __launch_bounds__(TSAFE_SEAL_THREADS)
    tsafe_seal_kernel(tsafe_seal_args g, int stage)
{
    uint64_t x = (uint64_t)blockIdx.x * TSAFE_SEAL_THREADS + threadIdx.x;
    tsafe_seal_body(g, stage, x);
}

namespace {
struct cuda_exec {
    tsafe_cuda_backend *cb;
    tsafe_status body(const tsafe_seal_args &g, int stage)
    {
        uint64_t blocks;
        if (tsafe_seal_blocks(g, stage, &blocks) != TSAFE_OK)
            return tsafe_cuda_fail_msg(TSAFE_E_RANGE, "seal batch stage too large");
        if (blocks == 0)
            return TSAFE_OK;
        tsafe_cuda_launch_prepare();
        tsafe_seal_kernel<<<(unsigned)blocks, TSAFE_SEAL_THREADS, 0, cb->stream>>>(g, stage);
        cudaError_t e = cudaGetLastError();
        return e == cudaSuccess ? TSAFE_OK : tsafe_cuda_fail(e, "seal batch launch");
    }
    tsafe_status ntt(int forward, uint64_t *data, uint64_t polys, uint32_t limbs)
    {
        uint64_t stride = (uint64_t)limbs * cb->tables.n;
        return tsafe_cuda_ntt_launch(cb, forward, data, stride, data, stride, polys, limbs, 0,
                                     NULL);
    }
    tsafe_status mod_switch(uint64_t *out, const uint64_t *in, uint64_t polys, uint32_t l_in)
    {
        return tsafe_cuda_mod_switch_launch(cb, out, in, polys, l_in);
    }
};
} // namespace

/* The workspace of at least words, kept for later calls. */
static tsafe_status workspace(tsafe_cuda_backend *cb, uint64_t words)
{
    if (cb->seal_ws_words >= words)
        return TSAFE_OK;
    if (cb->seal_ws)
        (void)tsafe_cuda_pool_free(&cb->pool, cb->seal_ws);
    cb->seal_ws = NULL;
    cb->seal_ws_words = 0;
    tsafe_status st = tsafe_cuda_pool_alloc(&cb->pool, words * sizeof(uint64_t), 1,
                                            (void **)&cb->seal_ws);
    if (st != TSAFE_OK)
        return st == TSAFE_E_NOMEM ? tsafe_cuda_fail_msg(st, "seal batch workspace of %llu words",
                                                         (unsigned long long)words)
                                   : st;
    cb->seal_ws_words = words;
    return TSAFE_OK;
}

/* The pinned host area of at least words (upload area, then the out
 * area), kept for later calls: copies go straight between it and the
 * device (no staging copy, no fresh pages to fault in per call). */
static tsafe_status host_area(tsafe_cuda_backend *cb, uint64_t words)
{
    if (cb->seal_host_words >= words)
        return TSAFE_OK;
    if (cb->seal_host)
        tsafe_cuda_ignore(cudaFreeHost(cb->seal_host));
    cb->seal_host = NULL;
    cb->seal_host_words = 0;
    cudaError_t e = cudaHostAlloc((void **)&cb->seal_host, words * sizeof(uint64_t),
                                  cudaHostAllocDefault);
    if (e != cudaSuccess) {
        cb->seal_host = NULL;
        return tsafe_cuda_fail(e, "cudaHostAlloc(seal batch host area)");
    }
    cb->seal_host_words = words;
    return TSAFE_OK;
}

/* One chunk's device work on the stream: the upload out of the pinned
 * area, the stages, the draws zeroed, the download into the out area. */
static tsafe_status seal_enqueue(tsafe_cuda_backend *cb, const tsafe_seal_layout &y,
                                 const tsafe_seal_args &g, uint64_t *host, uint64_t *out)
{
    tsafe_status st = TSAFE_OK;
    cudaError_t e = cudaMemcpyAsync(cb->seal_ws, host, y.upload_words * sizeof *host,
                                    cudaMemcpyHostToDevice, cb->stream);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "seal batch upload");
    cuda_exec x = {cb};
    if ((st = tsafe_seal_stages(x, g, y, cb->seal_ws)) != TSAFE_OK)
        return st;
    if ((e = cudaMemsetAsync(cb->seal_ws, 0, y.w_off * sizeof(uint64_t), cb->stream)) !=
        cudaSuccess)
        return tsafe_cuda_fail(e, "seal batch: zero the draws");
    if ((e = cudaMemcpyAsync(out, cb->seal_ws + y.out_off, y.out_words * sizeof *out,
                             cudaMemcpyDeviceToHost, cb->stream)) != cudaSuccess)
        return tsafe_cuda_fail(e, "seal batch download");
    return TSAFE_OK;
}

/* Seal chunks as graph replays unless TSAFE_CUDA_SEAL_GRAPH=0 (read once). */
static int graphs_wanted(void)
{
    static int on = -1;
    return tsafe_cuda_env_flag(&on, "TSAFE_CUDA_SEAL_GRAPH", 1);
}

/* The chunk's work as a replay of the graph of its shape (J, R) and areas,
 * captured on first use (seal_enqueue under a stream capture: the copies,
 * the memset and every launch become nodes; the per-job data travels in
 * the uploaded area, so one graph serves every call of that shape). 1 when
 * launched; 0 when no graph is available (the caller launches directly);
 * a capture that fails turns graphs off for this backend. */
static int seal_graph_launch(tsafe_cuda_backend *cb, const tsafe_seal_layout &y,
                             const tsafe_seal_args &g, uint64_t *host, uint64_t *out,
                             size_t J, uint64_t R, const uint64_t *pk)
{
    if (cb->seal_graph_off || !graphs_wanted())
        return 0;
    int hit = -1, victim = 0;
    for (int k = 0; k < TSAFE_CUDA_SEAL_GRAPHS; k++) {
        if (cb->seal_graph[k].exec && cb->seal_graph[k].J == J && cb->seal_graph[k].R == R &&
            cb->seal_graph[k].pk == pk && cb->seal_graph[k].ws == cb->seal_ws &&
            cb->seal_graph[k].host == host)
            hit = k;
        if (cb->seal_graph[k].used < cb->seal_graph[victim].used)
            victim = k;
    }
    if (hit < 0) {
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        cudaError_t e = cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeRelaxed);
        tsafe_status st = e == cudaSuccess ? seal_enqueue(cb, y, g, host, out) : TSAFE_E_DEVICE;
        if (e == cudaSuccess) {
            e = cudaStreamEndCapture(cb->stream, &graph);
            if (e == cudaSuccess && st == TSAFE_OK)
                e = cudaGraphInstantiate(&exec, graph, 0);
            if (graph)
                tsafe_cuda_ignore(cudaGraphDestroy(graph));
        }
        if (e != cudaSuccess || st != TSAFE_OK || !exec) {
            tsafe_cuda_ignore(e);
            (void)cudaGetLastError();
            cb->seal_graph_off = 1;
            return 0;
        }
        if (cb->seal_graph[victim].exec)
            tsafe_cuda_ignore(cudaGraphExecDestroy(cb->seal_graph[victim].exec));
        cb->seal_graph[victim].J = J;
        cb->seal_graph[victim].R = R;
        cb->seal_graph[victim].pk = pk;
        cb->seal_graph[victim].ws = cb->seal_ws;
        cb->seal_graph[victim].host = host;
        cb->seal_graph[victim].exec = exec;
        hit = victim;
    }
    cb->seal_graph[hit].used = ++cb->seal_graph_clock;
    cudaError_t e = cudaGraphLaunch(cb->seal_graph[hit].exec, cb->stream);
    if (e != cudaSuccess) {
        tsafe_cuda_ignore(e);
        cb->seal_graph_off = 1;
        return 0;
    }
    return 1;
}

/* Jobs [0, J) of one chunk: pack, upload, run, zero the secrets, download;
 * returns after the stream is done with the host area, whose secret part
 * (r, the stream keys, the masked additions) is then wiped. */
static tsafe_status seal_chunk(tsafe_cuda_backend *cb, const uint64_t *pk,
                               const tsafe_backend_seal_job *jobs, size_t J, uint64_t R)
{
    uint32_t L = cb->tables.n_primes, log_n = cb->tables.log_n;
    tsafe_seal_layout y;
    tsafe_seal_layout_make(J, R, L, log_n, &y);
    tsafe_status st = workspace(cb, y.total_words);
    if (st == TSAFE_OK)
        st = host_area(cb, y.upload_words + y.out_words);
    if (st != TSAFE_OK)
        return st;
    uint64_t *host = cb->seal_host, *out = host + y.upload_words;
    {
        tsafe_cuda_prof_scope ps(TSAFE_PROF_SEAL_PACK, J);
        tsafe_seal_pack(jobs, J, L, log_n, y, host);
    }
    tsafe_cuda_prof_scope pq(TSAFE_PROF_SEAL_QUEUE, J);
    tsafe_seal_args g = tsafe_seal_args_make(y, cb->seal_ws, cb->d_primes, L, log_n, J, R, pk);
    if (!seal_graph_launch(cb, y, g, host, out, J, R, pk))
        st = seal_enqueue(cb, y, g, host, out);
    pq.stop();
    /* always: the upload may be in flight when a later step failed */
    cudaError_t e;
    {
        tsafe_cuda_prof_scope pw(TSAFE_PROF_SEAL_WAIT, J);
        e = cudaStreamSynchronize(cb->stream);
    }
    if (e != cudaSuccess && st == TSAFE_OK)
        st = tsafe_cuda_fail(e, "seal batch (queued work failed)");
    explicit_bzero(host, y.upload_words * sizeof *host);
    if (st == TSAFE_OK) {
        tsafe_cuda_prof_scope pu(TSAFE_PROF_SEAL_UNPACK, J);
        tsafe_seal_unpack(out, jobs, J, log_n);
    }
    return st;
}

tsafe_status tsafe_cuda_seal_batch_launch(tsafe_backend *b, const void *pk,
                                          const tsafe_backend_seal_job *jobs, size_t n)
{
    tsafe_cuda_backend *cb = (tsafe_cuda_backend *)b->ctx;
    tsafe_status st = tsafe_cuda_refuse_in_capture(cb, "seal batch");
    if (st != TSAFE_OK)
        return st;
    uint32_t L = cb->tables.n_primes; /* a BFV ring: every limb */
    if (L < 1 || L > TSAFE_SEAL_MAX_LIMBS || cb->tables.ckks)
        return tsafe_cuda_fail_msg(TSAFE_E_UNSUPPORTED, "seal batch needs a BFV ring");
    tsafe_cuda_device_guard dg(cb->device);
    if (dg.err != cudaSuccess)
        return tsafe_cuda_fail(dg.err, "cudaSetDevice");
    /* tests: TSAFE_CUDA_SEAL_MAX_JOBS caps a chunk (several chunks from a
     * small call) */
    const char *cap_env = getenv("TSAFE_CUDA_SEAL_MAX_JOBS");
    size_t cap = cap_env ? strtoull(cap_env, NULL, 10) : 0;
    size_t first = 0;
    while (first < n && st == TSAFE_OK) { /* greedy chunks within the budget */
        size_t J = 0;
        uint64_t R = 0;
        tsafe_seal_layout y;
        do {
            R += jobs[first + J].n_reads;
            J++;
            tsafe_seal_layout_make(J + 1, R + cb->tables.n, L, cb->tables.log_n, &y);
        } while (first + J < n && y.total_words <= TSAFE_SEAL_WS_BUDGET && (!cap || J < cap));
        st = seal_chunk(cb, (const uint64_t *)pk, jobs + first, J, R);
        first += J;
    }
    return st;
}
