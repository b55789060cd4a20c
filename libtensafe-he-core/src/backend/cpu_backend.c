/* The portable CPU backend: host memory, the ring's NTT tables (scalar or
 * IFMA as the context chose), synchronous. Serves a CKKS context's data
 * primes or a BFV context's two primes.
 *
 * An operand buffer is a small header: the values and their Shoup
 * quotients, either in a block of its own or borrowed from the object that
 * already holds them (a prepared plaintext: no copy, no recomputation), so
 * a product by an operand costs what the direct (non-backend) paths pay. */
#include <stdlib.h>
#include <string.h>

#include "tensafe/backend_impl.h"
#include "tensafe/cpu_pool.h"
#include "../ckks/ckks_internal.h"
#include "tsafe_check.h"
#include "alloc.h"
#include "backend_internal.h"

/* Backend-private state: the rescale's scratch (a backend belongs to one
 * thread at a time, so the scratch needs no lock). */
typedef struct cpu_state {
    uint64_t *scratch; /* 2 N: the rescale's and ntt_read's scratch */
    uint64_t *resc;    /* max_limbs N: one rescaled polynomial */
    tsafe_coset_cache *coset; /* ntt_read's tables, made on first use */
    tsafe_cpu_pool *pool;     /* borrowed: independent tasks of a batch */
} cpu_state;

static const char *cpu_name(tsafe_backend *b)
{
    (void)b;
    return "cpu";
}

static void cpu_state_free(cpu_state *s);

static void cpu_destroy(tsafe_backend *b) { cpu_state_free(b->ctx); }

static tsafe_status cpu_alloc(tsafe_backend *b, size_t words, void **mem)
{
    (void)b;
    *mem = tsafe_calloc_aligned(words, sizeof(uint64_t));
    return *mem ? TSAFE_OK : TSAFE_E_NOMEM;
}

static void cpu_free(tsafe_backend *b, void *mem)
{
    (void)b;
    free(mem);
}

static tsafe_status cpu_upload(tsafe_backend *b, void *mem, const uint64_t *src,
                               size_t words)
{
    (void)b;
    memcpy(mem, src, words * sizeof *src);
    return TSAFE_OK;
}

static tsafe_status cpu_download(tsafe_backend *b, const void *mem,
                                 uint64_t *dst, size_t words)
{
    (void)b;
    memcpy(dst, mem, words * sizeof *dst);
    return TSAFE_OK;
}

static uint64_t *cpu_host_words(tsafe_backend *b, void *mem)
{
    (void)b;
    return mem;
}

/* The memory of an operand buffer. */
typedef struct cpu_operand {
    const uint64_t *w;  /* values, limb-major as any buffer */
    const uint64_t *wp; /* their Shoup quotients, the same layout */
    uint64_t *own;      /* the block holding both, or NULL when borrowed */
} cpu_operand;

static tsafe_status cpu_operand_alloc(tsafe_backend *b, size_t words, void **mem)
{
    (void)b;
    TSAFE_REQUIRE(words <= SIZE_MAX / 2 / sizeof(uint64_t), TSAFE_E_SIZE_OVERFLOW);
    cpu_operand *o = calloc(1, sizeof *o);
    if (!o || !(o->own = tsafe_calloc_aligned(2 * words, sizeof *o->own))) {
        free(o);
        return TSAFE_E_NOMEM;
    }
    o->w = o->own;
    o->wp = o->own + words;
    *mem = o;
    return TSAFE_OK;
}

static void cpu_operand_free(tsafe_backend *b, void *mem)
{
    (void)b;
    cpu_operand *o = mem;
    if (o)
        free(o->own);
    free(o);
}

static tsafe_status cpu_operand_upload(tsafe_backend *b, void *mem,
                                       const uint64_t *src, size_t n_polys,
                                       uint32_t n_limbs)
{
    const struct tsafe_ring_view *r = b->ring;
    cpu_operand *o = mem;
    size_t words = n_polys * n_limbs * r->n;
    uint64_t *w = o->own, *wp = o->own + words;
    memcpy(w, src, words * sizeof *src);
    for (size_t p = 0; p < n_polys; p++)
        for (uint32_t i = 0; i < n_limbs; i++) {
            size_t off = (p * n_limbs + i) * r->n;
            tsafe_vec_shoup_precompute(wp + off, w + off, r->n, r->mod[i].q);
        }
    return TSAFE_OK;
}

tsafe_status tsafe_cpu_operand_borrow(tsafe_backend *b, const uint64_t *w,
                                      const uint64_t *wp, size_t n_polys,
                                      uint32_t n_limbs, tsafe_buffer **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(b && w && wp, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_backend_is_core_cpu(b), TSAFE_E_ARG);
    TSAFE_REQUIRE(n_polys > 0 && n_limbs > 0 && n_limbs <= b->ring->n_limbs, TSAFE_E_RANGE);
    cpu_operand *o = calloc(1, sizeof *o);
    tsafe_buffer *buf = calloc(1, sizeof *buf);
    if (!o || !buf) {
        free(o);
        free(buf);
        return TSAFE_E_NOMEM;
    }
    o->w = w;
    o->wp = wp;
    *buf = (tsafe_buffer){b, o, n_polys, n_limbs, 1, 1};
    *out = buf;
    return TSAFE_OK;
}

typedef struct ntt_batch {
    const struct tsafe_ring_view *c;
    uint64_t *w;
    uint32_t n_limbs;
    int inverse;
} ntt_batch;

/* Polynomial p = t / n_limbs, limb t % n_limbs: transforms are independent. */
static void ntt_task(void *arg, size_t t)
{
    const ntt_batch *nb = arg;
    uint32_t i = (uint32_t)(t % nb->n_limbs);
    uint64_t *l = nb->w + t * nb->c->n;
    if (nb->inverse)
        tsafe_ntt_inverse(&nb->c->ntt[i], l);
    else
        tsafe_ntt_forward(&nb->c->ntt[i], l);
}

/* Transforms a pool shares out: fewer cost less than waking it. */
#define POOL_MIN_NTTS 8

static tsafe_status cpu_ntt(tsafe_backend *b, void *mem, size_t n_polys,
                            uint32_t n_limbs, int inverse)
{
    const cpu_state *s = b->ctx;
    ntt_batch nb = {b->ring, mem, n_limbs, inverse};
    size_t n = n_polys * n_limbs;
    if (n >= POOL_MIN_NTTS) {
        tsafe_cpu_pool_run(s->pool, n, ntt_task, &nb);
        return TSAFE_OK;
    }
    for (size_t t = 0; t < n; t++)
        ntt_task(&nb, t);
    return TSAFE_OK;
}

static tsafe_status cpu_ntt_fwd(tsafe_backend *b, void *mem, size_t n_polys,
                                uint32_t n_limbs)
{
    return cpu_ntt(b, mem, n_polys, n_limbs, 0);
}

static tsafe_status cpu_ntt_inv(tsafe_backend *b, void *mem, size_t n_polys,
                                uint32_t n_limbs)
{
    return cpu_ntt(b, mem, n_polys, n_limbs, 1);
}

static tsafe_status cpu_elementwise(tsafe_backend *b, tsafe_elementwise_op op,
                                    void *out, const void *a, const void *bb,
                                    size_t n_polys, size_t b_polys,
                                    uint32_t n_limbs)
{
    const struct tsafe_ring_view *c = b->ring;
    size_t n = c->n;
    for (size_t p = 0; p < n_polys; p++)
        for (uint32_t i = 0; i < n_limbs; i++) {
            size_t off = (p * n_limbs + i) * n;
            size_t boff = ((b_polys == 1 ? 0 : p) * n_limbs + i) * n;
            uint64_t *o = (uint64_t *)out + off;
            const uint64_t *x = (const uint64_t *)a + off;
            const uint64_t *y = (const uint64_t *)bb + boff;
            switch (op) {
            case TSAFE_OP_ADD: tsafe_vec_add(o, x, y, n, c->mod[i].q); break;
            case TSAFE_OP_SUB: tsafe_vec_sub(o, x, y, n, c->mod[i].q); break;
            case TSAFE_OP_MUL: tsafe_vec_mul(o, x, y, n, &c->mod[i]); break;
            }
        }
    return TSAFE_OK;
}

static tsafe_status cpu_rescale(tsafe_backend *b, void *out, const void *in,
                                size_t n_polys, uint32_t n_limbs_in)
{
    const tsafe_context *c = b->he;
    if (!c) /* the exact (BFV) ring switches in coefficient form instead */
        return TSAFE_E_UNSUPPORTED;
    cpu_state *s = b->ctx;
    size_t n = c->n;
    uint32_t level = n_limbs_in - 1;
    for (size_t p = 0; p < n_polys; p++) {
        const uint64_t *src = (const uint64_t *)in + p * n_limbs_in * n;
        tsafe_poly_rescale(c, src, level, s->resc, s->scratch);
        memcpy((uint64_t *)out + p * level * n, s->resc, (size_t)level * n * sizeof *s->resc);
    }
    return TSAFE_OK;
}

/* One limb of acc[0..P) += a (*) w (= when assign), w an operand (values
 * w, quotients wp). a_step / w_step: 0 broadcasts polynomial 0. The ring's
 * fused multiply(-add) kernels, IFMA where they run. */
static void mac_limb(uint64_t *const *acc, size_t P, const uint64_t *a,
                     size_t a_step, const uint64_t *w, const uint64_t *wp,
                     size_t w_step, size_t n, uint64_t q, int assign)
{
    if (P == 2 && w_step == 0 && !assign) { /* a ciphertext times a plaintext */
        tsafe_vec_mul_shoup_add2(acc[0], acc[1], a, a + a_step, w, wp, n, q);
        return;
    }
    for (size_t p = 0; p < P; p++)
        if (assign)
            tsafe_vec_mul_shoup(acc[p], a + p * a_step, w + p * w_step, wp + p * w_step, n, q);
        else
            tsafe_vec_mul_shoup_add(acc[p], a + p * a_step, w + p * w_step, wp + p * w_step, n, q);
}

/* Terms of a ciphertext-times-plaintexts job taken at once by
 * mac_ct_plain (more go in further passes). */
#define MAC_FUSED_TERMS 32

/* Job m's limb i when it is a ciphertext accumulator and every term a
 * two-polynomial ciphertext times a one-polynomial operand (the sealed
 * rounds' products): the terms' sums in one pass over the accumulator
 * (tsafe_vec_mac2_shoup). 0 when the job has another shape. */
static int mac_ct_plain(const struct tsafe_ring_view *r, const tsafe_backend_mac *m,
                        uint64_t *row0, uint64_t *row1, uint32_t i)
{
    size_t n = r->n, K = m->n_terms, o = (size_t)i * n;
    uint32_t L = m->acc->n_limbs;
    if (m->acc->n_polys != 2 || K == 0)
        return 0;
    for (size_t k = 0; k < K; k++)
        if (!m->w[k]->operand || m->w[k]->n_polys != 1 || m->a[k]->n_polys != 2)
            return 0;
    const uint64_t *a0[MAC_FUSED_TERMS], *a1[MAC_FUSED_TERMS], *w[MAC_FUSED_TERMS],
        *wp[MAC_FUSED_TERMS];
    for (size_t k0 = 0; k0 < K; k0 += MAC_FUSED_TERMS) {
        size_t t = K - k0 < MAC_FUSED_TERMS ? K - k0 : MAC_FUSED_TERMS;
        for (size_t k = 0; k < t; k++) {
            const uint64_t *a = m->a[k0 + k]->mem;
            const cpu_operand *op = m->w[k0 + k]->mem;
            a0[k] = a + o;
            a1[k] = a + (size_t)L * n + o;
            w[k] = op->w + o;
            wp[k] = op->wp + o;
        }
        tsafe_vec_mac2_shoup(row0, row1, a0, a1, w, wp, t, n, r->mod[i].q,
                             m->assign && k0 == 0);
    }
    return 1;
}

/* Limb i of job m: acc[.][i] (+)= sum_k a[k] (*) w[k]. Limbs of a job and
 * jobs are independent unless a job reads another's accumulator. */
static void mac_job_limb(const struct tsafe_ring_view *r, const tsafe_backend_mac *m,
                         uint32_t i)
{
    size_t n = r->n, P = m->acc->n_polys;
    uint32_t L = m->acc->n_limbs;
    uint64_t *acc = m->acc->mem;
    uint64_t *rows[16];
    for (size_t p = 0; p < P; p++)
        rows[p] = acc + (p * L + i) * n;
    if (P == 2 && mac_ct_plain(r, m, rows[0], rows[1], i))
        return;
    if (m->assign && m->n_terms == 0)
        for (size_t p = 0; p < P; p++)
            memset(rows[p], 0, n * sizeof *acc);
    for (size_t k = 0; k < m->n_terms; k++) {
        int assign = m->assign && k == 0; /* the first term writes */
        const tsafe_buffer *A = m->a[k], *W = m->w[k];
        const cpu_operand *op = W->operand ? W->mem : NULL;
        const uint64_t *a = A->mem, *w = op ? op->w : W->mem;
        size_t a_step = A->n_polys == 1 ? 0 : (size_t)L * n;
        size_t w_step = W->n_polys == 1 ? 0 : (size_t)L * n;
        size_t o = (size_t)i * n;
        if (!W->operand) { /* used once: Barrett, no quotients to build */
            for (size_t p = 0; p < P; p++) {
                const uint64_t *x = a + p * a_step + o, *y = w + p * w_step + o;
                if (assign)
                    tsafe_vec_mul(rows[p], x, y, n, &r->mod[i]);
                else
                    tsafe_vec_mul_add(rows[p], x, y, n, &r->mod[i]);
            }
            continue;
        }
        mac_limb(rows, P, a + o, a_step, w + o, op->wp + o, w_step, n, r->mod[i].q, assign);
    }
}

/* A batch split into (job, limb) tasks for the pool. */
typedef struct mac_batch {
    const struct tsafe_ring_view *r;
    const tsafe_backend_mac *jobs;
    uint32_t L; /* every job's limbs (a uniform batch) */
} mac_batch;

static void mac_task(void *arg, size_t t)
{
    const mac_batch *mb = arg;
    mac_job_limb(mb->r, &mb->jobs[t / mb->L], (uint32_t)(t % mb->L));
}

typedef struct {
    const uint64_t *lo, *hi;
} mem_range;

static int range_cmp(const void *x, const void *y)
{
    const mem_range *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* 1 when p (words at [lo, hi)) overlaps one of the sorted ranges. */
static int overlaps(const mem_range *acc, size_t n, const uint64_t *lo, const uint64_t *hi)
{
    size_t a = 0, b = n; /* first range with acc.lo >= hi */
    while (a < b) {
        size_t mid = (a + b) / 2;
        if (acc[mid].lo < hi)
            a = mid + 1;
        else
            b = mid;
    }
    return a > 0 && acc[a - 1].hi > lo;
}

static mem_range buffer_range(const struct tsafe_ring_view *r, const tsafe_buffer *b)
{
    const uint64_t *lo = b->mem;
    return (mem_range){lo, lo + b->n_polys * b->n_limbs * r->n};
}

/* 1 when no job reads memory another job writes, no two accumulators
 * overlap and every job has the same limb count: then the (job, limb)
 * tasks may run in any order and at once. Operand terms are never
 * accumulators (the dispatcher refuses them). */
static int jobs_independent(const struct tsafe_ring_view *r, const tsafe_backend_mac *jobs,
                            size_t n_jobs)
{
    mem_range *acc = malloc(n_jobs * sizeof *acc);
    if (!acc)
        return 0;
    int ok = 1;
    for (size_t j = 0; j < n_jobs; j++) {
        acc[j] = buffer_range(r, jobs[j].acc);
        ok &= jobs[j].acc->n_limbs == jobs[0].acc->n_limbs;
    }
    qsort(acc, n_jobs, sizeof *acc, range_cmp);
    for (size_t j = 1; j < n_jobs && ok; j++)
        ok = acc[j - 1].hi <= acc[j].lo;
    for (size_t j = 0; j < n_jobs && ok; j++)
        for (size_t k = 0; k < jobs[j].n_terms && ok; k++) {
            const tsafe_buffer *t[2] = {jobs[j].a[k], jobs[j].w[k]};
            for (int s = 0; s < 2 && ok; s++) {
                if (t[s]->operand)
                    continue;
                mem_range m = buffer_range(r, t[s]);
                ok = !overlaps(acc, n_jobs, m.lo, m.hi);
            }
        }
    free(acc);
    return ok;
}

/* Work below which waking the pool costs more than it saves (words
 * multiplied). */
#define POOL_MIN_WORDS ((size_t)1 << 15)

static tsafe_status cpu_mul_acc(tsafe_backend *b, const tsafe_backend_mac *jobs,
                                size_t n_jobs)
{
    const struct tsafe_ring_view *r = b->ring;
    const cpu_state *s = b->ctx;
    size_t work = 0;
    for (size_t j = 0; j < n_jobs; j++) {
        if (jobs[j].acc->n_polys > 16)
            return TSAFE_E_UNSUPPORTED; /* ciphertexts have 2 polynomials */
        work += (jobs[j].n_terms + 1) * jobs[j].acc->n_polys * jobs[j].acc->n_limbs * r->n;
    }
    uint32_t L = jobs[0].acc->n_limbs;
    if (tsafe_cpu_pool_threads(s->pool) > 1 && n_jobs * L > 1 && work >= POOL_MIN_WORDS &&
        jobs_independent(r, jobs, n_jobs)) {
        mac_batch mb = {r, jobs, L};
        tsafe_cpu_pool_run(s->pool, n_jobs * L, mac_task, &mb);
        return TSAFE_OK;
    }
    for (size_t j = 0; j < n_jobs; j++) /* in order: a job may read an earlier one's acc */
        for (uint32_t i = 0; i < jobs[j].acc->n_limbs; i++)
            mac_job_limb(r, &jobs[j], i);
    return TSAFE_OK;
}

/* round(x / q_last) mod q_i, x given by its residues: floor((x + h)/q_last)
 * with h = (q_last - 1)/2, i.e. ((x + h) - ((x + h) mod q_last)) / q_last. */
static tsafe_status cpu_mod_switch(tsafe_backend *b, void *out, const void *in,
                                   size_t n_polys, uint32_t n_limbs_in)
{
    const struct tsafe_ring_view *r = b->ring;
    size_t n = r->n;
    uint32_t L = n_limbs_in - 1;
    for (uint32_t i = 0; i < L; i++) {
        tsafe_switch_consts k;
        tsafe_switch_consts_init(&k, &r->mod[i], &r->mod[L]);
        for (size_t p = 0; p < n_polys; p++) {
            const uint64_t *xl = (const uint64_t *)in + (p * n_limbs_in + L) * n;
            const uint64_t *xi = (const uint64_t *)in + (p * n_limbs_in + i) * n;
            tsafe_vec_mod_switch((uint64_t *)out + (p * L + i) * n, xi, xl, n, &k);
        }
    }
    return TSAFE_OK;
}

/* A few coefficients from NTT form: coset reads (ring.h) when the
 * positions allow, else the inverse NTT of a copy of the limb. */
static tsafe_status cpu_ntt_read(tsafe_backend *b, const void *mem, uint32_t n_limbs,
                                 const uint32_t *pos, size_t n_pos, uint64_t *out)
{
    const struct tsafe_ring_view *r = b->ring;
    cpu_state *s = b->ctx;
    size_t n = r->n;
    if (!s->coset) {
        tsafe_status st = tsafe_coset_cache_create(r->ntt, r->n_limbs, &s->coset);
        if (st != TSAFE_OK)
            return st;
    }
    for (uint32_t i = 0; i < n_limbs; i++) {
        const uint64_t *x = (const uint64_t *)mem + (size_t)i * n;
        uint64_t *o = out + (size_t)i * n_pos;
        tsafe_status st = tsafe_coset_read(s->coset, i, x, pos, n_pos, o, s->scratch);
        if (st == TSAFE_E_UNSUPPORTED) {
            memcpy(s->scratch, x, n * sizeof *x);
            tsafe_ntt_inverse(&r->ntt[i], s->scratch);
            for (size_t k = 0; k < n_pos; k++)
                o[k] = s->scratch[pos[k]];
        } else if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

static const struct tsafe_backend_i k_cpu_iface = {
    .get_name = cpu_name,
    .destroy = cpu_destroy,
    .buffer_alloc = cpu_alloc,
    .buffer_free = cpu_free,
    .buffer_upload = cpu_upload,
    .buffer_download = cpu_download,
    .ntt_forward = cpu_ntt_fwd,
    .ntt_inverse = cpu_ntt_inv,
    .elementwise = cpu_elementwise,
    .rescale = cpu_rescale,
    .mul_acc = cpu_mul_acc,
    .mod_switch = cpu_mod_switch,
    .synchronize = NULL,
    .operand_alloc = cpu_operand_alloc,
    .operand_upload = cpu_operand_upload,
    .operand_free = cpu_operand_free,
    .host_words = cpu_host_words,
    .ntt_read = cpu_ntt_read,
};

int tsafe_backend_is_core_cpu(const tsafe_backend *b)
{
    return b && b->iface == &k_cpu_iface;
}

static void cpu_state_free(cpu_state *s)
{
    if (s) {
        free(s->scratch);
        free(s->resc);
        tsafe_coset_cache_free(s->coset);
    }
    free(s);
}

static tsafe_status cpu_state_new(size_t n, uint32_t max_limbs, cpu_state **out)
{
    cpu_state *s = calloc(1, sizeof *s);
    if (!s || !(s->scratch = tsafe_calloc_aligned(2 * n, sizeof *s->scratch)) ||
        !(s->resc = tsafe_calloc_aligned((size_t)max_limbs * n, sizeof *s->resc))) {
        cpu_state_free(s);
        return TSAFE_E_NOMEM;
    }
    *out = s;
    return TSAFE_OK;
}

/* A CPU backend over one of the two rings (exactly one of ckks, bfv). */
static tsafe_status cpu_create(const tsafe_context *ckks, const tsafe_bfv_context *bfv,
                               tsafe_cpu_pool *pool, tsafe_backend **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(ckks || bfv, TSAFE_E_NULL);
    cpu_state *s;
    /* the rescale's scratch: the CKKS data limbs (the BFV ring has none) */
    tsafe_status st = ckks ? cpu_state_new(ckks->n, ckks->n_data, &s)
                           : cpu_state_new(tsafe_bfv_context_n(bfv), 1, &s);
    if (st != TSAFE_OK)
        return st;
    s->pool = pool;
    st = ckks ? tsafe_backend_init(out, TSAFE_BACKEND_API_VERSION, &k_cpu_iface, s, ckks)
              : tsafe_backend_init_bfv(out, TSAFE_BACKEND_API_VERSION, &k_cpu_iface, s, bfv);
    if (st != TSAFE_OK)
        cpu_state_free(s);
    return st;
}

tsafe_status tsafe_backend_cpu_create(const tsafe_context *ctx, tsafe_backend **out)
{
    return ctx || !out ? cpu_create(ctx, NULL, NULL, out) : (*out = NULL, TSAFE_E_NULL);
}

tsafe_status tsafe_backend_cpu_create_bfv(const tsafe_bfv_context *ctx, tsafe_backend **out)
{
    return ctx || !out ? cpu_create(NULL, ctx, NULL, out) : (*out = NULL, TSAFE_E_NULL);
}

static tsafe_status cpu_pool_factory_create(void *user, const tsafe_context *ckks,
                                            const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    return cpu_create(ckks, bfv, user, out);
}

tsafe_status tsafe_backend_cpu_factory_pool(tsafe_cpu_pool *pool, tsafe_backend_factory *out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = (tsafe_backend_factory){"cpu", cpu_pool_factory_create, pool};
    return TSAFE_OK;
}
