/* Batched multiply-accumulate of the CUDA backend (internal): the
 * per-thread body (tsafe_mac_thread) and the batching of a
 * tsafe_backend_mul_acc call into launches (tsafe_mac_next), shared by the
 * kernel (mac.cu) and the host emulation.
 *
 * One launch covers many jobs and all their terms: a block is 1024
 * consecutive words of one row (polynomial p, limb i) of one job's
 * accumulator; its threads load the accumulator once, add a[k] (*) w[k] for
 * every term k of the job (two 16-byte vectors per operand and term) and
 * store once. The jobs and terms of a launch travel in the kernel's
 * parameter block (by value, __grid_constant__ on the device), so a launch
 * needs no device-side work table, no copy and no scratch, and is captured
 * into a CUDA graph like any other launch. The parameter block holds at
 * most TSAFE_MAC_MAX_JOBS jobs and TSAFE_MAC_MAX_TERMS terms (4 KiB, the
 * portable kernel-parameter limit); a larger call becomes several launches
 * in order, a job with more terms than fit is continued in the next launch
 * (its accumulator then holds the partial sum, fully reduced, so the result
 * is the same word for word).
 *
 * Order: the CPU backend runs the jobs one after another. Jobs in one
 * launch run concurrently, so a job that reads (as a term) the accumulator
 * of an earlier job of the call, or whose accumulator an earlier job
 * reads, starts a new launch: the CPU's order is kept.
 *
 * Assign jobs (tsafe_backend_mac.assign) start their first launch from 0
 * instead of loading the accumulator; one without terms is a launch that
 * zeroes it.
 *
 * Arithmetic: each product reduced (Barrett, ts_mul_mod) and added mod q,
 * fully reduced at every step, as the CPU's add_mod(acc, mul_shoup(a, w)):
 * the values are canonical residues, so the words are identical. */
#ifndef TSAFE_CUDA_MAC_CUH
#define TSAFE_CUDA_MAC_CUH

#include "modarith.cuh"
#include "tensafe/backend_impl.h"

#define TSAFE_MAC_THREADS 256
#define TSAFE_MAC_CHUNK_LOG 10 /* words per block = 256 threads x 4 */
#define TSAFE_MAC_MAX_JOBS 32
#define TSAFE_MAC_MAX_TERMS 160

typedef struct tsafe_mac_job_desc {
    uint64_t *acc;
    uint32_t blk_begin;  /* first block of the job in its launch */
    uint32_t term_begin; /* its terms: terms[term_begin .. + n_terms) */
    uint32_t n_terms;
    uint16_t n_limbs;    /* L (the accumulator's, and every operand's) */
    uint16_t assign;     /* 1: start from 0, not from the accumulator (the
                            job's first launch of an assign job) */
} tsafe_mac_job_desc;

typedef struct tsafe_mac_term_desc {
    const uint64_t *a;
    const uint64_t *w;
} tsafe_mac_term_desc;

/* The parameter block of one launch. */
typedef struct tsafe_mac_args {
    const tsafe_cuda_prime *primes;
    uint32_t log_n;
    uint32_t n_jobs;
    uint32_t n_terms;
    uint32_t blocks;
    uint8_t a_bcast[TSAFE_MAC_MAX_TERMS]; /* a[k] has one polynomial, P > 1 */
    uint8_t w_bcast[TSAFE_MAC_MAX_TERMS];
    tsafe_mac_job_desc jobs[TSAFE_MAC_MAX_JOBS];
    tsafe_mac_term_desc terms[TSAFE_MAC_MAX_TERMS];
} tsafe_mac_args;

static_assert(sizeof(tsafe_mac_args) <= 4096 - 64,
              "mul_acc launch parameters beyond the 4 KiB kernel limit");

/* Where a call's batching stands: next job, and how many of its terms
 * earlier launches took. */
typedef struct tsafe_mac_cursor {
    size_t job;
    size_t term;
} tsafe_mac_cursor;

/* Thread t of block blk. The block's job: the last one whose first block
 * is <= blk (binary search over the parameter block; uniform per block). */
TSAFE_HD void tsafe_mac_thread(const tsafe_mac_args &g, uint64_t blk,
                               uint32_t t)
{
    uint32_t lo = 0, hi = g.n_jobs - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (g.jobs[mid].blk_begin <= blk)
            lo = mid;
        else
            hi = mid - 1;
    }
    const tsafe_mac_job_desc &J = g.jobs[lo];
    uint32_t log_chunks = g.log_n - TSAFE_MAC_CHUNK_LOG;
    uint64_t local = blk - J.blk_begin;
    uint64_t row = local >> log_chunks; /* p * L + limb */
    uint32_t limb = (uint32_t)(row % J.n_limbs);
    uint64_t base = (local & ((1ull << log_chunks) - 1)) << TSAFE_MAC_CHUNK_LOG;
    uint64_t in0 = base + 2 * (uint64_t)t;
    uint64_t in1 = in0 + 2 * TSAFE_MAC_THREADS;
    uint64_t off = row << g.log_n;             /* this polynomial's row */
    uint64_t boff = (uint64_t)limb << g.log_n; /* polynomial 0's row */
    const tsafe_cuda_prime p = g.primes[limb];
    uint64_t *acc = J.acc + off;
    ulonglong2 s0, s1;
    if (J.assign) { /* acc = the sum: its old words are not read */
        s0.x = s0.y = s1.x = s1.y = 0;
    } else {
        s0 = ts_ld16(acc + in0);
        s1 = ts_ld16(acc + in1);
    }
    for (uint32_t k = J.term_begin; k < J.term_begin + J.n_terms; k++) {
        const uint64_t *a = g.terms[k].a + (g.a_bcast[k] ? boff : off);
        const uint64_t *w = g.terms[k].w + (g.w_bcast[k] ? boff : off);
        ulonglong2 x0 = ts_ld16(a + in0), x1 = ts_ld16(a + in1);
        ulonglong2 y0 = ts_ldg16(w + in0), y1 = ts_ldg16(w + in1);
        s0.x = ts_add_mod(s0.x, ts_mul_mod(x0.x, y0.x, p), p.q);
        s0.y = ts_add_mod(s0.y, ts_mul_mod(x0.y, y0.y, p), p.q);
        s1.x = ts_add_mod(s1.x, ts_mul_mod(x1.x, y1.x, p), p.q);
        s1.y = ts_add_mod(s1.y, ts_mul_mod(x1.y, y1.y, p), p.q);
    }
    ts_st16(acc + in0, s0);
    ts_st16(acc + in1, s1);
}

/* Whether job m must not run in the same launch as the jobs already in g:
 * it reads an accumulator written there, or writes one read (or written)
 * there. Buffers are distinct allocations: equal memory = same buffer. */
static inline int tsafe_mac_conflict(const tsafe_backend_mac *m,
                                     const tsafe_mac_args *g)
{
    const void *acc = m->acc->mem;
    for (uint32_t j = 0; j < g->n_jobs; j++) {
        if (g->jobs[j].acc == acc)
            return 1;
        for (size_t k = 0; k < m->n_terms; k++)
            if (m->a[k]->mem == g->jobs[j].acc || m->w[k]->mem == g->jobs[j].acc)
                return 1;
    }
    for (uint32_t k = 0; k < g->n_terms; k++)
        if (g->terms[k].a == acc || g->terms[k].w == acc)
            return 1;
    return 0;
}

/* The next launch of a mul_acc call: as many jobs (from c on) and terms as
 * the parameter block holds. g->n_jobs == 0: nothing left. Shapes are
 * checked again here (the emulation is called without the dispatcher):
 * TSAFE_E_RANGE for limbs beyond max_limbs or operands that are neither
 * P nor 1 polynomials or of another limb count, and for a single job
 * beyond one launch (2^31 - 1 blocks). Host only. */
static inline tsafe_status tsafe_mac_next(const tsafe_backend_mac *jobs,
                                          size_t n_jobs, tsafe_mac_cursor *c,
                                          uint32_t log_n, uint32_t max_limbs,
                                          const tsafe_cuda_prime *primes,
                                          tsafe_mac_args *g)
{
    g->primes = primes;
    g->log_n = log_n;
    g->n_jobs = g->n_terms = g->blocks = 0;
    if (log_n < TSAFE_MAC_CHUNK_LOG || log_n - TSAFE_MAC_CHUNK_LOG > 31)
        return TSAFE_E_UNSUPPORTED;
    uint32_t log_chunks = log_n - TSAFE_MAC_CHUNK_LOG;
    while (c->job < n_jobs) {
        const tsafe_backend_mac *m = &jobs[c->job];
        /* an assign job without terms still runs once: it zeroes acc */
        int zero_job = m->assign && m->n_terms == 0;
        if (c->term >= m->n_terms && !zero_job) { /* done, or a job without terms */
            c->job++;
            c->term = 0;
            continue;
        }
        if (g->n_jobs == TSAFE_MAC_MAX_JOBS || g->n_terms == TSAFE_MAC_MAX_TERMS)
            break;
        size_t P = m->acc->n_polys;
        uint32_t L = m->acc->n_limbs;
        if (L == 0 || L > max_limbs || L > 0xffff || P == 0)
            return TSAFE_E_RANGE;
        uint64_t rows = (uint64_t)P * L;
        if (rows / L != P || (rows << log_chunks) >> log_chunks != rows)
            return TSAFE_E_RANGE;
        uint64_t blocks = rows << log_chunks;
        if (blocks > 0x7fffffffull - g->blocks) {
            if (g->n_jobs == 0)
                return TSAFE_E_RANGE; /* one job beyond a launch */
            break;
        }
        if (g->n_jobs > 0 && tsafe_mac_conflict(m, g))
            break;
        size_t take = m->n_terms - c->term;
        if (take > TSAFE_MAC_MAX_TERMS - g->n_terms)
            take = TSAFE_MAC_MAX_TERMS - g->n_terms;
        tsafe_mac_job_desc *J = &g->jobs[g->n_jobs];
        J->acc = (uint64_t *)m->acc->mem;
        J->blk_begin = g->blocks;
        J->term_begin = g->n_terms;
        J->n_terms = (uint32_t)take;
        J->n_limbs = (uint16_t)L;
        J->assign = (uint16_t)(m->assign && c->term == 0);
        for (size_t k = c->term; k < c->term + take; k++) {
            const tsafe_buffer *A = m->a[k], *W = m->w[k];
            if (A->n_limbs != L || W->n_limbs != L ||
                (A->n_polys != P && A->n_polys != 1) ||
                (W->n_polys != P && W->n_polys != 1))
                return TSAFE_E_RANGE;
            uint32_t t = g->n_terms++;
            g->terms[t].a = (const uint64_t *)A->mem;
            g->terms[t].w = (const uint64_t *)W->mem;
            g->a_bcast[t] = A->n_polys != P;
            g->w_bcast[t] = W->n_polys != P;
        }
        g->blocks += (uint32_t)blocks;
        g->n_jobs++;
        c->term += take;
        if (c->term < m->n_terms)
            break; /* the rest of this job's terms: next launch */
        c->job++;
        c->term = 0;
    }
    return TSAFE_OK;
}

#endif
