/* Host emulation of the kernels; see emulate.h. What runs here is the
 * kernels' own code: the per-thread bodies (tsafe_ntt_phase,
 * tsafe_ew_thread, tsafe_mac_thread, tsafe_ms_thread) and the launch
 * geometry (tsafe_ntt_step, tsafe_rescale_calls, tsafe_ew_setup,
 * tsafe_mac_next, tsafe_ms_setup, tsafe_seal_stages) are the functions of
 * ntt.cuh / elementwise.cuh / mac.cuh / modswitch.cuh / seal.cuh, compiled
 * here for the host. This
 * file only replaces the launch: a loop over blocks, and over the threads
 * of a block within each barrier interval. No C++ allocation (extern "C"
 * callers): malloc and status codes. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "elementwise.cuh"
#include "emulate.h"
#include "expand.cuh"
#include "mac.cuh"
#include "modswitch.cuh"
#include "ntt.cuh"
#include "seal.cuh"

struct tsafe_cuda_emu {
    tsafe_cuda_tables tables;
    tsafe_ntt_plan plan;
    uint64_t mac_launches; /* mul_acc launches made so far */
};

extern "C" tsafe_status tsafe_cuda_emu_create_ring(const tsafe_backend *ring,
                                                   uint32_t fused_log_max,
                                                   tsafe_cuda_emu **out)
{
    if (!ring || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_cuda_emu *e = (tsafe_cuda_emu *)calloc(1, sizeof(*e));
    if (!e)
        return TSAFE_E_NOMEM;
    tsafe_status st = tsafe_cuda_tables_build(ring, &e->tables);
    if (st == TSAFE_OK &&
        !tsafe_ntt_plan_build(e->tables.log_n, fused_log_max, &e->plan))
        st = TSAFE_E_UNSUPPORTED;
    if (st != TSAFE_OK) {
        tsafe_cuda_emu_free(e);
        return st;
    }
    *out = e;
    return TSAFE_OK;
}

extern "C" tsafe_status tsafe_cuda_emu_create(const tsafe_context *ctx,
                                              uint32_t fused_log_max,
                                              tsafe_cuda_emu **out)
{
    if (!ctx || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    /* the ring's facts as a backend reports them (what the CUDA backend
     * builds its tables from) */
    tsafe_backend *ring = NULL;
    tsafe_status st = tsafe_backend_cpu_create(ctx, &ring);
    if (st == TSAFE_OK)
        st = tsafe_cuda_emu_create_ring(ring, fused_log_max, out);
    tsafe_backend_free(ring);
    return st;
}

extern "C" void tsafe_cuda_emu_free(tsafe_cuda_emu *e)
{
    if (!e)
        return;
    tsafe_cuda_tables_free(&e->tables);
    free(e);
}

extern "C" uint32_t tsafe_cuda_emu_ntt_passes(const tsafe_cuda_emu *e)
{
    return e ? e->plan.n_passes : 0;
}

/* One launch of an NTT pass: blocks x threads, shared memory of exactly
 * the launch's size (poisoned: every slot must be loaded before use). */
template <bool FWD>
static tsafe_status emu_pass(const tsafe_ntt_args &a, const tsafe_ntt_dims &d)
{
    size_t words = d.smem_bytes / sizeof(uint64_t);
    if (((size_t)1 << (a.S + a.log_cols)) > words)
        return TSAFE_E_STATE; /* tile beyond the launch's shared memory */
    uint64_t *sm = (uint64_t *)malloc(d.smem_bytes);
    if (!sm)
        return TSAFE_E_NOMEM;
    const uint32_t phases = tsafe_ntt_phases(a);
    for (uint64_t blk = 0; blk < d.blocks; blk++) {
        tsafe_ntt_block b;
        tsafe_ntt_block_setup(a, blk, b);
        for (size_t e = 0; e < words; e++)
            sm[e] = ~0ull;
        /* the kernel: phase, barrier, phase, ... for all threads at once */
        for (uint32_t ph = 0; ph < phases; ph++)
            for (uint32_t t = 0; t < d.threads; t++)
                tsafe_ntt_phase<FWD>(a, b, sm, ph, t, d.threads);
    }
    free(sm);
    return TSAFE_OK;
}

/* What a device fault would be: a 16-byte access the device cannot make. */
static tsafe_status emu_faults(unsigned long misaligned_before)
{
    return tsafe_emu_misaligned() != misaligned_before ? TSAFE_E_DEVICE : TSAFE_OK;
}

/* The emulated tsafe_cuda_ntt_run. */
static tsafe_status emu_ntt(tsafe_cuda_emu *em, const tsafe_ntt_call *c)
{
    const tsafe_ntt_plan *pl = &em->plan;
    if (c->n_polys == 0 || c->n_limbs == 0)
        return TSAFE_OK;
    unsigned long mis = tsafe_emu_misaligned();
    for (uint32_t step = 0; step < pl->n_passes; step++) {
        tsafe_ntt_args a;
        tsafe_ntt_dims d;
        tsafe_status st = tsafe_ntt_step(pl, c, step, em->tables.tw_fwd,
                                         em->tables.tw_inv, em->tables.primes,
                                         &a, &d);
        if (st == TSAFE_OK)
            st = c->forward ? emu_pass<true>(a, d) : emu_pass<false>(a, d);
        if (st != TSAFE_OK)
            return st;
    }
    return emu_faults(mis);
}

extern "C" tsafe_status tsafe_cuda_emu_ntt(tsafe_cuda_emu *e, int forward,
                                           uint64_t *data, size_t n_polys,
                                           uint32_t n_limbs)
{
    if (!e || !data)
        return TSAFE_E_NULL;
    if (n_limbs == 0 || n_limbs > e->tables.n_primes)
        return TSAFE_E_RANGE;
    uint64_t stride = (uint64_t)n_limbs * e->tables.n;
    tsafe_ntt_call c = {forward, data, stride, data, stride, n_polys, n_limbs,
                        0, NULL};
    return emu_ntt(e, &c);
}

/* The emulated element-wise launch: every (block, thread). */
template <int OP>
static void emu_ew(const tsafe_ew_args &g, uint64_t blocks)
{
    for (uint64_t blk = 0; blk < blocks; blk++)
        for (uint32_t t = 0; t < TSAFE_EW_THREADS; t++)
            tsafe_ew_thread<OP>(g, blk, t);
}

extern "C" tsafe_status tsafe_cuda_emu_elementwise(tsafe_cuda_emu *e, int op,
                                                   uint64_t *out,
                                                   const uint64_t *a,
                                                   const uint64_t *b,
                                                   size_t n_polys,
                                                   size_t b_polys,
                                                   uint32_t n_limbs)
{
    if (!e || !out || !a || !b)
        return TSAFE_E_NULL;
    if (n_limbs == 0 || n_limbs > e->tables.n_primes)
        return TSAFE_E_RANGE;
    if (b_polys != n_polys && b_polys != 1)
        return TSAFE_E_SHAPE;
    tsafe_ew_args g;
    uint64_t blocks = 0;
    tsafe_status st = tsafe_ew_setup(out, a, b, n_polys, b_polys, n_limbs,
                                     e->tables.log_n, e->tables.primes, &g,
                                     &blocks);
    if (st != TSAFE_OK)
        return st;
    unsigned long mis = tsafe_emu_misaligned();
    switch (op) {
    case TSAFE_OP_ADD:
        emu_ew<TSAFE_OP_ADD>(g, blocks);
        break;
    case TSAFE_OP_SUB:
        emu_ew<TSAFE_OP_SUB>(g, blocks);
        break;
    case TSAFE_OP_MUL:
        emu_ew<TSAFE_OP_MUL>(g, blocks);
        break;
    default:
        return TSAFE_E_ARG;
    }
    return emu_faults(mis);
}

extern "C" tsafe_status tsafe_cuda_emu_rescale(tsafe_cuda_emu *e,
                                               uint64_t *out,
                                               const uint64_t *in,
                                               size_t n_polys,
                                               uint32_t n_limbs_in)
{
    if (!e || !out || !in)
        return TSAFE_E_NULL;
    if (n_limbs_in < 2 || n_limbs_in > e->tables.n_primes)
        return TSAFE_E_LEVEL;
    if (out == in)
        return TSAFE_E_ARG;
    size_t n = e->tables.n;
    uint32_t l = n_limbs_in - 1;
    /* poison out: every word must be produced by the steps below */
    for (size_t i = 0; i < n_polys * l * n; i++)
        out[i] = ~0ull;
    if (n_polys == 0)
        return TSAFE_OK;
    /* the calls tsafe_cuda_rescale_launch makes */
    tsafe_ntt_epi epi[2];
    tsafe_ntt_call calls[2];
    tsafe_rescale_calls(n, out, in, n_polys, n_limbs_in, e->tables.rescale, epi,
                        calls);
    tsafe_status st = emu_ntt(e, &calls[0]);
    return st != TSAFE_OK ? st : emu_ntt(e, &calls[1]);
}

/* The emulated tsafe_cuda_mul_acc_launch: the same launches (parameter
 * blocks from tsafe_mac_next), each run block by block, thread by thread.
 * Within a launch the blocks write disjoint words and must read no word
 * another block writes (tsafe_mac_next splits conflicting jobs), so any
 * block order gives the parallel result. The blocks run last to first:
 * in launch order a job reading an earlier job's accumulator in the same
 * launch would still see the CPU's values and hide a batching bug. */
extern "C" tsafe_status tsafe_cuda_emu_mul_acc(tsafe_cuda_emu *e,
                                               const tsafe_backend_mac *jobs,
                                               size_t n_jobs)
{
    if (!e || (!jobs && n_jobs))
        return TSAFE_E_NULL;
    for (size_t j = 0; j < n_jobs; j++) {
        if (!jobs[j].acc || (jobs[j].n_terms && (!jobs[j].a || !jobs[j].w)))
            return TSAFE_E_NULL;
        for (size_t k = 0; k < jobs[j].n_terms; k++)
            if (!jobs[j].a[k] || !jobs[j].w[k])
                return TSAFE_E_NULL;
    }
    unsigned long mis = tsafe_emu_misaligned();
    tsafe_mac_cursor c = {0, 0};
    /* static: a parameter block is 4 KiB; one emulation per thread */
    static thread_local tsafe_mac_args g;
    for (;;) {
        tsafe_status st = tsafe_mac_next(jobs, n_jobs, &c, e->tables.log_n,
                                         e->tables.n_primes, e->tables.primes,
                                         &g);
        if (st != TSAFE_OK)
            return st;
        if (g.n_jobs == 0)
            break;
        e->mac_launches++;
        for (uint64_t blk = g.blocks; blk-- > 0;)
            for (uint32_t t = 0; t < TSAFE_MAC_THREADS; t++)
                tsafe_mac_thread(g, blk, t);
    }
    return emu_faults(mis);
}

extern "C" uint64_t tsafe_cuda_emu_mac_launches(const tsafe_cuda_emu *e)
{
    return e ? e->mac_launches : 0;
}

extern "C" tsafe_status tsafe_cuda_emu_mod_switch(tsafe_cuda_emu *e,
                                                  uint64_t *out,
                                                  const uint64_t *in,
                                                  size_t n_polys,
                                                  uint32_t n_limbs_in)
{
    if (!e || !out || !in)
        return TSAFE_E_NULL;
    if (out == in)
        return TSAFE_E_ARG;
    tsafe_ms_args g;
    uint64_t blocks = 0;
    tsafe_status st = tsafe_ms_setup(out, in, n_polys, n_limbs_in,
                                     e->tables.log_n, e->tables.n_primes,
                                     e->tables.primes, e->tables.rescale, &g,
                                     &blocks);
    if (st != TSAFE_OK)
        return st;
    /* poison out: every word must be produced by the launch */
    for (uint64_t i = 0; i < blocks << TSAFE_MS_CHUNK_LOG; i++)
        out[i] = ~0ull;
    unsigned long mis = tsafe_emu_misaligned();
    for (uint64_t blk = 0; blk < blocks; blk++)
        for (uint32_t t = 0; t < TSAFE_MS_THREADS; t++)
            tsafe_ms_thread(g, blk, t);
    return emu_faults(mis);
}

/* ------------------------------------------------------- seal batch */

namespace {
/* The seal stages on the host: every thread of a body stage in turn (the
 * bodies write disjoint words), the NTTs and switches emulated as above. */
struct emu_exec {
    tsafe_cuda_emu *e;
    tsafe_status body(const tsafe_seal_args &g, int stage)
    {
        uint64_t blocks;
        if (tsafe_seal_blocks(g, stage, &blocks) != TSAFE_OK)
            return TSAFE_E_RANGE;
        for (uint64_t blk = 0; blk < blocks; blk++)
            for (uint32_t t = 0; t < TSAFE_SEAL_THREADS; t++)
                tsafe_seal_body(g, stage, blk * TSAFE_SEAL_THREADS + t);
        return TSAFE_OK;
    }
    tsafe_status ntt(int forward, uint64_t *data, uint64_t polys, uint32_t limbs)
    {
        return tsafe_cuda_emu_ntt(e, forward, data, polys, limbs);
    }
    tsafe_status mod_switch(uint64_t *out, const uint64_t *in, uint64_t polys, uint32_t l_in)
    {
        return tsafe_cuda_emu_mod_switch(e, out, in, polys, l_in);
    }
};
} // namespace

extern "C" tsafe_status tsafe_cuda_emu_seal_batch(tsafe_cuda_emu *e, const uint64_t *pk,
                                                  const tsafe_backend_seal_job *jobs,
                                                  size_t n)
{
    if (!e || !pk || (!jobs && n))
        return TSAFE_E_NULL;
    uint32_t L = e->tables.n_primes, log_n = e->tables.log_n;
    if (L > TSAFE_SEAL_MAX_LIMBS || e->tables.ckks)
        return TSAFE_E_UNSUPPORTED;
    uint64_t R = 0;
    for (size_t j = 0; j < n; j++)
        R += jobs[j].n_reads;
    tsafe_seal_layout y;
    tsafe_seal_layout_make(n, R, L, log_n, &y);
    /* poisoned: every word the stages read must have been written */
    void *mem = NULL;
    if (posix_memalign(&mem, 64, y.total_words * sizeof(uint64_t)) != 0)
        return TSAFE_E_NOMEM;
    uint64_t *ws = (uint64_t *)mem;
    for (uint64_t i = y.upload_words; i < y.total_words; i++)
        ws[i] = ~0ull;
    tsafe_seal_pack(jobs, n, L, log_n, y, ws);
    tsafe_seal_args g = tsafe_seal_args_make(y, ws, e->tables.primes, L, log_n, n, R, pk);
    emu_exec x = {e};
    unsigned long mis = tsafe_emu_misaligned();
    tsafe_status st = tsafe_seal_stages(x, g, y, ws);
    if (st == TSAFE_OK)
        st = emu_faults(mis);
    if (st == TSAFE_OK)
        tsafe_seal_unpack(ws + y.out_off, jobs, n, log_n);
    explicit_bzero(ws, y.total_words * sizeof *ws);
    free(ws);
    return st;
}

extern "C" tsafe_status tsafe_cuda_emu_seal_e1(const uint8_t key[32], uint64_t off,
                                               uint64_t stream, uint32_t log_n, int8_t *e1)
{
    if (!key || !e1)
        return TSAFE_E_NULL;
    if (log_n < 3 || log_n > 17)
        return TSAFE_E_RANGE;
    uint64_t n = 1ull << log_n, kb = TSAFE_SEAL_KB(n);
    uint32_t *ks = (uint32_t *)malloc(kb * 64), k[8];
    if (!ks)
        return TSAFE_E_NOMEM;
    memcpy(k, key, 32);
    tsafe_seal_args g;
    memset(&g, 0, sizeof g);
    g.log_n = log_n;
    g.n_jobs = 1;
    g.key = k;
    g.e1_off = &off;
    g.e1_stream = &stream;
    g.ks = ks;
    g.e1 = e1;
    emu_exec x = {NULL};
    (void)x.body(g, TSAFE_SEAL_KEYSTREAM);
    (void)x.body(g, TSAFE_SEAL_CBD);
    explicit_bzero(ks, kb * 64);
    explicit_bzero(k, sizeof k);
    free(ks);
    return TSAFE_OK;
}

/* The ct_read slot's expansion of one seed (expand.cuh's phases, a
 * block's threads in turn between barriers): limb i of c1 (L x N) from
 * nonce stream + i under prime q[i]. */
extern "C" tsafe_status tsafe_cuda_emu_expand(const uint8_t seed[32], uint64_t stream,
                                              const uint64_t *q, uint32_t L, uint32_t log_n,
                                              uint64_t *c1)
{
    if (!seed || !q || !c1)
        return TSAFE_E_NULL;
    if (log_n < 3 || log_n > 17 || L < 1 || L > TSAFE_EXPAND_MAX_LIMBS)
        return TSAFE_E_RANGE;
    for (uint32_t i = 0; i < L; i++)
        if (q[i] < 2)
            return TSAFE_E_RANGE;
    tsafe_expand_shared *sh = (tsafe_expand_shared *)malloc(sizeof *sh);
    if (!sh)
        return TSAFE_E_NOMEM;
    uint32_t k[8];
    memcpy(k, seed, 32);
    uint64_t n = 1ull << log_n;
    for (uint32_t i = 0; i < L; i++) {
        tsafe_expand_block b = ts_expand_block_make(k, stream + i, q[i], c1 + (uint64_t)i * n, n);
        sh->cand = 0;
        sh->kept = 0;
        while (sh->kept < n) {
            for (uint32_t t = 0; t < TSAFE_EXPAND_THREADS; t++)
                ts_expand_keystream(b, *sh, t);
            for (uint32_t t = 0; t < TSAFE_EXPAND_THREADS; t++)
                ts_expand_candidates(b, *sh, t);
            ts_expand_scan(*sh);
            for (uint32_t t = 0; t < TSAFE_EXPAND_THREADS; t++)
                ts_expand_place(b, *sh, t);
            ts_expand_advance(*sh);
        }
    }
    free(sh);
    return TSAFE_OK;
}
