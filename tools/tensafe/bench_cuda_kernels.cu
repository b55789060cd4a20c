/* GPU benchmark behind `tensafe bench cuda` (bench_cuda.h): medians of
 * CUDA-event timings of the backend's kernels on buffers larger than L2, a
 * small per-token pipeline with plain launches vs a graph replay, transfer
 * rates, and the sealed path's ring operations (a batched mul_acc call, the
 * modulus switch) on a CKKS ring and on a BFV ring (cuda_bench_bfv).
 *
 * A white-box benchmark: it times the CUDA library's kernel launchers
 * directly (no dispatcher in between), through the library's private
 * cuda_internal.cuh; the tool links the static libtensafe-he-cuda, where
 * those hidden functions resolve.
 *
 * Reached through extern "C": nothing here may throw (no std containers,
 * whose bad_alloc would terminate the host process); memory comes from
 * malloc and every failure is a status. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "clock.h"
#include "init.h"
#include "../../libtensafe-he-cuda/src/cuda_internal.cuh"

namespace {

struct bench_env {
    tsafe_cuda_backend *cb;
    cudaEvent_t ev0, ev1;
    uint32_t reps, warmup;
};

int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed run of `op` in milliseconds (CUDA events around it). */
template <class F>
tsafe_status time_once(bench_env &env, F &op, float *ms)
{
    cudaStream_t s = env.cb->stream;
    cudaError_t e = cudaEventRecord(env.ev0, s);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaEventRecord(start)");
    tsafe_status st = op();
    if (st != TSAFE_OK)
        return st;
    e = cudaEventRecord(env.ev1, s);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaEventRecord(stop)");
    e = cudaEventSynchronize(env.ev1);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaEventSynchronize(benchmark)");
    e = cudaEventElapsedTime(ms, env.ev0, env.ev1);
    return e == cudaSuccess ? TSAFE_OK
                            : tsafe_cuda_fail(e, "cudaEventElapsedTime");
}

/* Median time in microseconds of `op` (queued on the backend stream). */
template <class F>
tsafe_status time_op(bench_env &env, F op, double *us)
{
    double *t = (double *)calloc(env.reps, sizeof(double));
    if (!t)
        return tsafe_cuda_fail_msg(TSAFE_E_NOMEM, "benchmark: no memory for "
                                                  "%u timings", env.reps);
    tsafe_status st = TSAFE_OK;
    for (uint32_t r = 0; r < env.warmup + env.reps && st == TSAFE_OK; r++) {
        float ms = 0;
        st = time_once(env, op, &ms);
        if (st == TSAFE_OK && r >= env.warmup)
            t[r - env.warmup] = 1e3 * (double)ms;
    }
    if (st == TSAFE_OK) {
        qsort(t, env.reps, sizeof(double), cmp_double);
        *us = t[env.reps / 2];
    }
    free(t);
    return st;
}

void random_limbs(const tsafe_cuda_tables &tb, uint64_t *w, size_t n_polys,
                  uint32_t n_limbs)
{
    randombytes_buf(w, n_polys * n_limbs * tb.n * sizeof(uint64_t));
    for (size_t p = 0; p < n_polys; p++)
        for (uint32_t i = 0; i < n_limbs; i++) {
            uint64_t q = tb.primes[i].q;
            uint64_t *l = w + (p * n_limbs + i) * tb.n;
            for (size_t k = 0; k < tb.n; k++)
                l[k] %= q; /* benchmark data: the slight bias is irrelevant */
        }
}

/* Defaults filled in, ranges checked. */
tsafe_status bench_config(const cuda_bench_config *cfg,
                          cuda_bench_config *c)
{
    memset(c, 0, sizeof(*c));
    if (cfg)
        *c = *cfg;
    if (!c->reps)
        c->reps = 21;
    if (!c->warmup)
        c->warmup = 3;
    if (!c->pipeline_iters)
        c->pipeline_iters = 100;
    if (c->reps > (1u << 20) || c->warmup > (1u << 20))
        return tsafe_cuda_fail_msg(TSAFE_E_RANGE, "benchmark: %u reps, %u "
                                                  "warm-up runs (at most 2^20)",
                                   c->reps, c->warmup);
    return TSAFE_OK;
}

/* Polynomials of L limbs in one big buffer: at least min_bytes, three such
 * buffers within half of the free device memory. */
size_t big_polys(size_t min_bytes, uint32_t L, size_t limb_bytes,
                 size_t free_b)
{
    size_t P = (min_bytes + L * limb_bytes - 1) / (L * limb_bytes);
    if (P < 2)
        P = 2;
    while (P > 2 && 3 * P * L * limb_bytes > free_b / 2)
        P /= 2;
    return P;
}

#define BENCH_MAC_JOBS 16u
#define BENCH_MAC_TERMS 8u

/* mul_acc (one call, BENCH_MAC_JOBS x BENCH_MAC_TERMS: one launch) and the
 * coefficient-form modulus switch of the big buffer `in` (P x L) into
 * out_mem (room for P x (L-1)), on any ring. */
tsafe_status bench_ring_ops(bench_env &env, tsafe_backend *be, uint32_t L,
                            size_t P, const tsafe_buffer *in, void *out_mem,
                            uint64_t *host, cuda_bench_result *out)
{
    tsafe_cuda_backend *cb = env.cb;
    const tsafe_cuda_tables &tb = cb->tables;
    const uint32_t J = BENCH_MAC_JOBS, T = BENCH_MAC_TERMS;
    tsafe_buffer *acc[BENCH_MAC_JOBS] = {0}, *ct[BENCH_MAC_TERMS] = {0},
                 *pt[BENCH_MAC_TERMS] = {0};
    const tsafe_buffer *as[BENCH_MAC_TERMS], *ws[BENCH_MAC_TERMS];
    tsafe_backend_mac jobs[BENCH_MAC_JOBS];
    double us = 0;
    tsafe_status st = TSAFE_OK;
    for (uint32_t j = 0; j < J && st == TSAFE_OK; j++) {
        st = tsafe_buffer_alloc(be, 2, L, &acc[j]);
        jobs[j].acc = acc[j];
        jobs[j].n_terms = T;
        jobs[j].a = as;
        jobs[j].w = ws;
    }
    for (uint32_t k = 0; k < T && st == TSAFE_OK; k++) {
        st = tsafe_buffer_alloc(be, 2, L, &ct[k]);
        if (st == TSAFE_OK) {
            random_limbs(tb, host, 2, L);
            st = tsafe_buffer_upload(ct[k], host, 2 * L * tb.n);
        }
        if (st == TSAFE_OK)
            st = tsafe_buffer_alloc_operand(be, 1, L, &pt[k]);
        if (st == TSAFE_OK) {
            random_limbs(tb, host, 1, L);
            st = tsafe_buffer_upload(pt[k], host, L * tb.n);
        }
        as[k] = ct[k];
        ws[k] = pt[k];
    }
    if (st == TSAFE_OK)
        st = time_op(env, [&] { return tsafe_cuda_mul_acc_launch(cb, jobs, J); },
                     &us);
    if (st == TSAFE_OK) {
        double lw = (double)L * (double)tb.n; /* words per limb row set */
        out->mac_jobs = J;
        out->mac_terms = T;
        out->mac_us = us;
        out->mac_us_per_term_limb = us / ((double)J * T * L);
        out->mac_gbps = (double)J * (4.0 * lw + T * 3.0 * lw) * 8.0 /
                        (us * 1e-6) / 1e9;
    }
    if (st == TSAFE_OK && L >= 2)
        st = time_op(env, [&] {
            return tsafe_cuda_mod_switch_launch(cb, (uint64_t *)out_mem,
                                                (const uint64_t *)in->mem, P, L);
        }, &us);
    if (st == TSAFE_OK && L >= 2)
        out->mod_switch_us_per_poly = us / (double)P;
    for (uint32_t j = 0; j < J; j++)
        tsafe_buffer_free(acc[j]);
    for (uint32_t k = 0; k < T; k++) {
        tsafe_buffer_free(ct[k]);
        tsafe_buffer_free(pt[k]);
    }
    return st;
}

tsafe_status device_info(int device, cuda_bench_result *out)
{
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaGetDeviceProperties");
    snprintf(out->device_name, sizeof(out->device_name), "%s", prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->sm_count = prop.multiProcessorCount;
    out->l2_bytes = (size_t)prop.l2CacheSize;
    return TSAFE_OK;
}

/* Both benches start alike: a zeroed result, the checked configuration,
 * libsodium ready (the inputs are drawn from it). */
tsafe_status bench_start(const cuda_bench_config *cfg, cuda_bench_config *c,
                         cuda_bench_result *out)
{
    memset(out, 0, sizeof(*out));
    tsafe_status st = bench_config(cfg, c);
    if (st != TSAFE_OK)
        return st;
    return tsafe_sodium_ready();
}

/* Device facts, CUDA events, and the size of the big buffers: P
 * polynomials of L limbs (at least cfg->min_buffer_bytes, default 4 x L2)
 * of *words words each buffer. */
tsafe_status size_buffers(bench_env &env, int device, uint32_t L, cuda_bench_config *c,
                          cuda_bench_result *out, size_t *P, size_t *words)
{
    const tsafe_cuda_tables &tb = env.cb->tables;
    size_t free_b = 0, total_b = 0;
    tsafe_status st = TSAFE_OK;
    TSAFE_TRY(device_info(device, out));
    out->log_n = tb.log_n;
    out->n_limbs = L;
    out->reps = c->reps;
    TSAFE_CUDA_TRY(cudaEventCreate(&env.ev0));
    TSAFE_CUDA_TRY(cudaEventCreate(&env.ev1));
    TSAFE_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
    if (!c->min_buffer_bytes)
        c->min_buffer_bytes = out->l2_bytes ? 4 * out->l2_bytes : (256u << 20);
    *P = big_polys(c->min_buffer_bytes, L, tb.n * sizeof(uint64_t), free_b);
    out->n_polys = *P;
    *words = *P * L * tb.n;
    out->buffer_mib = (double)(*words * sizeof(uint64_t)) / (1 << 20);
fail:
    return st;
}

void events_free(bench_env &env)
{
    if (env.ev0)
        tsafe_cuda_ignore(cudaEventDestroy(env.ev0));
    if (env.ev1)
        tsafe_cuda_ignore(cudaEventDestroy(env.ev1));
}

/* Transfer rates (host clock around synchronous completion) with A, then
 * fresh random limbs into B; host keeps A's contents. */
tsafe_status bench_transfers(tsafe_backend *be, const tsafe_cuda_tables &tb, tsafe_buffer *A,
                             tsafe_buffer *B, uint64_t *host, uint64_t *host2, size_t P,
                             uint32_t L, size_t words, cuda_bench_result *out)
{
    tsafe_status st = TSAFE_OK;
    double t0;
    random_limbs(tb, host, P, L);
    TSAFE_TRY(tsafe_backend_synchronize(be));
    t0 = tsafe_now_s();
    /* the vtable slot: without the dispatcher's host-side range check */
    TSAFE_TRY(be->iface->buffer_upload(be, A->mem, host, words));
    TSAFE_TRY(tsafe_backend_synchronize(be));
    out->upload_gbps = (double)(words * 8) / (tsafe_now_s() - t0) / 1e9;
    /* the destination's pages faulted in first: the first GPU run (H100)
     * timed 51 200 first-touch page faults here, not the copy (1.25 GB/s) */
    memset(host2, 0, words * sizeof(uint64_t));
    t0 = tsafe_now_s();
    TSAFE_TRY(tsafe_buffer_download(A, host2, words));
    out->download_gbps = (double)(words * 8) / (tsafe_now_s() - t0) / 1e9;
    TSAFE_CHECK(memcmp(host, host2, words * 8) == 0, TSAFE_E_DEVICE);
    random_limbs(tb, host2, P, L);
    TSAFE_TRY(tsafe_buffer_upload(B, host2, words));
fail:
    return st;
}

/* Correctness spot check (inverse(forward(x)) == x into C), then the
 * batched kernels on the big buffers: NTT both ways, mul, add, rescale. */
tsafe_status bench_kernels(bench_env &env, tsafe_backend *be, tsafe_buffer *A, tsafe_buffer *B,
                           tsafe_buffer *C, const uint64_t *host, uint64_t *host2, size_t P,
                           uint32_t L, size_t words, cuda_bench_result *out)
{
    tsafe_cuda_backend *cb = env.cb;
    uint64_t *a = (uint64_t *)A->mem, *b = (uint64_t *)B->mem, *o = (uint64_t *)C->mem;
    uint64_t stride = (uint64_t)L * cb->tables.n;
    double limbs = (double)(P * L), us = 0;
    tsafe_status st = TSAFE_OK;
    TSAFE_CUDA_TRY(cudaMemcpyAsync(C->mem, A->mem, words * 8, cudaMemcpyDeviceToDevice,
                                   cb->stream));
    TSAFE_TRY(tsafe_backend_ntt_forward(be, C));
    TSAFE_TRY(tsafe_backend_ntt_inverse(be, C));
    TSAFE_TRY(tsafe_buffer_download(C, host2, words));
    out->roundtrip_ok = memcmp(host, host2, words * 8) == 0;
    TSAFE_TRY(time_op(env, [&] {
        return tsafe_cuda_ntt_launch(cb, 1, a, stride, a, stride, P, L, 0, NULL);
    }, &us));
    out->ntt_fwd_us_per_limb = us / limbs;
    out->ntt_fwd_gbps = 2.0 * cb->plan.n_passes * (double)(words * 8) / (us * 1e-6) / 1e9;
    TSAFE_TRY(time_op(env, [&] {
        return tsafe_cuda_ntt_launch(cb, 0, a, stride, a, stride, P, L, 0, NULL);
    }, &us));
    out->ntt_inv_us_per_limb = us / limbs;
    TSAFE_TRY(time_op(env, [&] {
        return tsafe_cuda_elementwise_launch(cb, TSAFE_OP_MUL, o, a, b, P, P, L);
    }, &us));
    out->mul_us_per_limb = us / limbs;
    out->mul_gbps = 3.0 * (double)(words * 8) / (us * 1e-6) / 1e9;
    TSAFE_TRY(time_op(env, [&] {
        return tsafe_cuda_elementwise_launch(cb, TSAFE_OP_ADD, o, a, b, P, P, L);
    }, &us));
    out->add_us_per_limb = us / limbs;
    if (L >= 2) {
        TSAFE_TRY(time_op(env, [&] { return tsafe_cuda_rescale_launch(cb, o, a, P, L); }, &us));
        out->rescale_us_per_poly = us / (double)P;
    }
fail:
    return st;
}

/* The per-token pipeline: ct (2 polys) x n_pt plaintexts, rescale each;
 * iters runs with plain launches, then as one captured graph replayed. */
tsafe_status bench_pipeline(bench_env &env, tsafe_backend *be, uint32_t L, uint64_t *host,
                            uint32_t iters, cuda_bench_result *out)
{
    tsafe_cuda_backend *cb = env.cb;
    const tsafe_cuda_tables &tb = cb->tables;
    const uint32_t n_pt = 8;
    size_t pw = (size_t)L * tb.n; /* words per polynomial */
    tsafe_buffer *ct = NULL, *pts = NULL, *prod = NULL, *res = NULL;
    double us = 0;
    tsafe_status st = TSAFE_OK;
    auto pipeline = [&]() -> tsafe_status {
        tsafe_status s2 = TSAFE_OK;
        for (uint32_t j = 0; j < n_pt && s2 == TSAFE_OK; j++)
            s2 = tsafe_cuda_elementwise_launch(
                cb, TSAFE_OP_MUL, (uint64_t *)prod->mem + 2 * j * pw,
                (const uint64_t *)ct->mem, (const uint64_t *)pts->mem + j * pw, 2, 1, L);
        if (s2 == TSAFE_OK && res)
            s2 = tsafe_cuda_rescale_launch(cb, (uint64_t *)res->mem,
                                           (const uint64_t *)prod->mem, 2 * n_pt, L);
        return s2;
    };
    TSAFE_TRY(tsafe_buffer_alloc(be, 2, L, &ct));
    TSAFE_TRY(tsafe_buffer_alloc(be, n_pt, L, &pts));
    TSAFE_TRY(tsafe_buffer_alloc(be, 2 * n_pt, L, &prod));
    if (L >= 2)
        TSAFE_TRY(tsafe_buffer_alloc(be, 2 * n_pt, L - 1, &res));
    random_limbs(tb, host, 2, L);
    TSAFE_TRY(tsafe_buffer_upload(ct, host, 2 * L * tb.n));
    random_limbs(tb, host, n_pt, L);
    TSAFE_TRY(tsafe_buffer_upload(pts, host, n_pt * L * tb.n));
    TSAFE_TRY(time_op(env, [&] {
        tsafe_status s2 = TSAFE_OK;
        for (uint32_t it = 0; it < iters && s2 == TSAFE_OK; it++)
            s2 = pipeline();
        return s2;
    }, &us));
    out->pipeline_plain_us = us / iters;
    TSAFE_TRY(tsafe_cuda_graph_begin(be));
    st = pipeline();
    {
        tsafe_status s_end = tsafe_cuda_graph_end(be);
        if (st == TSAFE_OK)
            st = s_end;
    }
    if (st != TSAFE_OK)
        goto fail;
    TSAFE_TRY(time_op(env, [&] {
        for (uint32_t it = 0; it < iters; it++) {
            cudaError_t e = cudaGraphLaunch(cb->graph_exec, cb->stream);
            if (e != cudaSuccess)
                return tsafe_cuda_fail(e, "cudaGraphLaunch");
        }
        return TSAFE_OK;
    }, &us));
    out->pipeline_graph_us = us / iters;
fail:
    tsafe_buffer_free(res);
    tsafe_buffer_free(prod);
    tsafe_buffer_free(pts);
    tsafe_buffer_free(ct);
    return st;
}

/* The CKKS bench on its backend: transfers, kernels, ring ops, pipeline
 * over P polynomials of L limbs (P from size_buffers). */
tsafe_status run_ckks(bench_env &env, tsafe_backend *be, int device, uint32_t L,
                      cuda_bench_config *c, cuda_bench_result *out)
{
    tsafe_cuda_backend *cb = env.cb;
    tsafe_buffer *A = NULL, *B = NULL, *C = NULL;
    uint64_t *host = NULL, *host2 = NULL;
    size_t words = 0, P = 0;
    tsafe_status st = TSAFE_OK;
    TSAFE_TRY(size_buffers(env, device, L, c, out, &P, &words));
    out->ntt_passes = cb->plan.n_passes;
    TSAFE_TRY(tsafe_buffer_alloc(be, P, L, &A));
    TSAFE_TRY(tsafe_buffer_alloc(be, P, L, &B));
    TSAFE_TRY(tsafe_buffer_alloc(be, P, L, &C));
    host = (uint64_t *)malloc(words * sizeof(uint64_t));
    host2 = (uint64_t *)malloc(words * sizeof(uint64_t));
    TSAFE_CHECK(host && host2, TSAFE_E_NOMEM);
    TSAFE_TRY(bench_transfers(be, cb->tables, A, B, host, host2, P, L, words, out));
    TSAFE_TRY(bench_kernels(env, be, A, B, C, host, host2, P, L, words, out));
    TSAFE_TRY(bench_ring_ops(env, be, L, P, A, C->mem, host, out));
    TSAFE_TRY(bench_pipeline(env, be, L, host, c->pipeline_iters, out));
fail:
    tsafe_buffer_free(C);
    tsafe_buffer_free(B);
    tsafe_buffer_free(A);
    free(host);
    free(host2);
    return st;
}

/* The BFV bench: the ring ops (mul_acc batch, mod_switch) only. */
tsafe_status run_bfv(bench_env &env, tsafe_backend *be, int device, uint32_t L,
                     cuda_bench_config *c, cuda_bench_result *out)
{
    const tsafe_cuda_tables &tb = env.cb->tables;
    size_t P = 0, words = 0;
    tsafe_buffer *A = NULL, *C = NULL;
    uint64_t *host = NULL;
    tsafe_status st = TSAFE_OK;
    TSAFE_TRY(size_buffers(env, device, L, c, out, &P, &words));
    TSAFE_TRY(tsafe_buffer_alloc(be, P, L, &A));
    TSAFE_TRY(tsafe_buffer_alloc(be, P, L, &C));
    host = (uint64_t *)malloc(words * sizeof(uint64_t));
    TSAFE_CHECK(host, TSAFE_E_NOMEM);
    random_limbs(tb, host, P, L);
    TSAFE_TRY(tsafe_buffer_upload(A, host, words));
    TSAFE_TRY(bench_ring_ops(env, be, L, P, A, C->mem, host, out));
fail:
    tsafe_buffer_free(C);
    tsafe_buffer_free(A);
    free(host);
    return st;
}

typedef tsafe_status (*bench_body)(bench_env &env, tsafe_backend *be, int device, uint32_t L,
                                   cuda_bench_config *c, cuda_bench_result *out);

/* Both benches run alike: bench_start, a CUDA backend for exactly one of
 * ckks / bfv on device (made current for the run), the body on all the
 * ring's limbs (CKKS: every level; BFV: q0, q1), then the events and the
 * backend freed. */
tsafe_status bench_run(const tsafe_context *ckks, const tsafe_bfv_context *bfv, int device,
                       const cuda_bench_config *cfg, cuda_bench_result *out, bench_body body)
{
    cuda_bench_config c;
    tsafe_backend *be = NULL;
    tsafe_status st = bench_start(cfg, &c, out);
    if (st != TSAFE_OK)
        return st;
    st = ckks ? tsafe_backend_cuda_create(ckks, device, &be)
              : tsafe_backend_cuda_create_bfv(bfv, device, &be);
    if (st != TSAFE_OK)
        return st;
    tsafe_cuda_backend *cb = tsafe_cuda_state(be);
    tsafe_cuda_device_guard g(device);
    if (g.err != cudaSuccess) {
        st = tsafe_cuda_fail(g.err, "cudaSetDevice");
        tsafe_backend_free(be);
        return st;
    }
    bench_env env = {cb, NULL, NULL, c.reps, c.warmup};
    uint32_t L = ckks ? tsafe_context_max_level(ckks) + 1 : cb->tables.n_primes;
    st = body(env, be, device, L, &c, out);
    events_free(env);
    tsafe_backend_free(be);
    return st;
}

} // namespace

extern "C" tsafe_status cuda_bench_ckks(
    const tsafe_context *ctx, int device, const cuda_bench_config *cfg,
    cuda_bench_result *out)
{
    if (!ctx || !out)
        return TSAFE_E_NULL;
    return bench_run(ctx, NULL, device, cfg, out, run_ckks);
}

extern "C" tsafe_status cuda_bench_bfv(
    const tsafe_bfv_context *ctx, int device, const cuda_bench_config *cfg,
    cuda_bench_result *out)
{
    if (!ctx || !out)
        return TSAFE_E_NULL;
    return bench_run(NULL, ctx, device, cfg, out, run_bfv);
}
