/* The ring work of a LoRA server or local object on a compute backend:
 * the sites' plaintexts as operand buffers (uploaded once, cached by site
 * id), the request ciphertext uploaded once, every batch of every site in
 * one tsafe_backend_mul_acc call, rescales through tsafe_backend_rescale.
 * Results stay in backend buffers; the caller serializes or decrypts them
 * from there (tensafe/ckks_buffer.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/ckks_buffer.h"
#include "he_internal.h"

/* Sites whose operands stay cached (least recently used ones dropped). */
#define EXEC_CACHE_SITES 256
/* Accumulators of one mul_acc call: at most this many and this many bytes
 * (larger requests run in chunks, each one call). */
#define EXEC_MAX_JOBS 64
#define EXEC_MAX_ACC_BYTES ((size_t)64 << 20)

typedef struct op_entry {
    uint64_t site_id;
    uint64_t last_use; /* request stamp */
    uint32_t n;        /* batches */
    tsafe_buffer **w;  /* n operand buffers */
} op_entry;

struct tsafe_lora_exec {
    const tsafe_context *ctx;
    tsafe_backend *b;
    uint32_t level; /* of the plan: products have level + 1 limbs */
    tsafe_buffer *x;
    double x_scale;
    tsafe_buffer **acc; /* max_jobs accumulators */
    size_t max_jobs;
    tsafe_buffer **chain; /* chain[l]: l + 1 limbs, rescale outputs (l < level) */
    op_entry *cache;
    size_t n_cache, cache_cap;
    uint64_t stamp;
    /* the current chunk */
    const tsafe_lora_site *const *sites;
    size_t n_sites, first, count;
    tsafe_backend_mac *jobs;
    const tsafe_buffer **terms; /* 2 per job: a then w */
    double *scale;              /* per job: product scale */
};

static void drop_buffers(tsafe_lora_exec *e)
{
    for (size_t i = 0; i < e->n_cache; i++) {
        for (uint32_t k = 0; k < e->cache[i].n; k++)
            tsafe_buffer_free(e->cache[i].w[k]);
        free(e->cache[i].w);
    }
    e->n_cache = 0;
    for (size_t j = 0; j < e->max_jobs; j++) {
        tsafe_buffer_free(e->acc[j]);
        e->acc[j] = NULL;
    }
    for (uint32_t l = 0; l < e->level; l++) {
        tsafe_buffer_free(e->chain[l]);
        e->chain[l] = NULL;
    }
    tsafe_buffer_free(e->x);
    e->x = NULL;
}

void tsafe_lora_exec_free(tsafe_lora_exec *e)
{
    if (!e)
        return;
    drop_buffers(e);
    tsafe_backend_free(e->b);
    free(e->cache);
    free(e->acc);
    free(e->chain);
    free(e->jobs);
    free(e->terms);
    free(e->scale);
    free(e);
}

tsafe_status tsafe_lora_exec_create(const tsafe_context *ctx, uint32_t level,
                                    const tsafe_backend_factory *f, tsafe_lora_exec **out)
{
    *out = NULL;
    tsafe_lora_exec *e = calloc(1, sizeof *e);
    if (!e)
        return TSAFE_E_NOMEM;
    e->ctx = ctx;
    e->level = level;
    size_t acc_bytes = 2 * (size_t)(level + 1) * tsafe_context_n(ctx) * sizeof(uint64_t);
    e->max_jobs = EXEC_MAX_ACC_BYTES / acc_bytes;
    if (e->max_jobs > EXEC_MAX_JOBS)
        e->max_jobs = EXEC_MAX_JOBS;
    if (e->max_jobs == 0)
        e->max_jobs = 1;
    e->cache_cap = EXEC_CACHE_SITES;
    e->acc = calloc(e->max_jobs, sizeof *e->acc);
    e->chain = calloc(level + 1, sizeof *e->chain);
    e->cache = calloc(e->cache_cap, sizeof *e->cache);
    e->jobs = calloc(e->max_jobs, sizeof *e->jobs);
    e->terms = calloc(2 * e->max_jobs, sizeof *e->terms);
    e->scale = calloc(e->max_jobs, sizeof *e->scale);
    tsafe_status st = TSAFE_E_NOMEM;
    if (e->acc && e->chain && e->cache && e->jobs && e->terms && e->scale &&
        (st = tsafe_backend_create(f, ctx, NULL, &e->b)) == TSAFE_OK) {
        *out = e;
        return TSAFE_OK;
    }
    tsafe_lora_exec_free(e);
    return st;
}

tsafe_status tsafe_lora_exec_use_backend(tsafe_lora_exec *e, const tsafe_backend_factory *f)
{
    tsafe_backend *nb;
    tsafe_status st = tsafe_backend_create(f, e->ctx, NULL, &nb);
    if (st != TSAFE_OK)
        return st; /* the old backend stays */
    drop_buffers(e);
    tsafe_backend_free(e->b);
    e->b = nb;
    return TSAFE_OK;
}

const char *tsafe_lora_exec_backend_name(const tsafe_lora_exec *e)
{
    return tsafe_backend_name(e->b);
}

tsafe_status tsafe_lora_exec_load_x(tsafe_lora_exec *e, const tsafe_ciphertext *x)
{
    if (tsafe_ciphertext_level(x) != e->level)
        return TSAFE_E_LEVEL;
    tsafe_status st;
    if (!e->x && (st = tsafe_buffer_alloc(e->b, 2, e->level + 1, &e->x)) != TSAFE_OK)
        return st;
    e->x_scale = tsafe_ciphertext_scale(x);
    e->stamp++;
    return tsafe_ciphertext_to_buffer(e->ctx, x, e->x);
}

/* The operands of a site: cached, or uploaded now (evicting the least
 * recently used entry not in the current request once the cache is full). */
static tsafe_status operands(tsafe_lora_exec *e, const tsafe_lora_site *site, op_entry **out)
{
    for (size_t i = 0; i < e->n_cache; i++)
        if (e->cache[i].site_id == site->id) {
            e->cache[i].last_use = e->stamp;
            *out = &e->cache[i];
            return TSAFE_OK;
        }
    op_entry *slot = NULL;
    if (e->n_cache == e->cache_cap) {
        size_t victim = e->n_cache;
        for (size_t i = 0; i < e->n_cache; i++)
            if (e->cache[i].last_use != e->stamp &&
                (victim == e->n_cache || e->cache[i].last_use < e->cache[victim].last_use))
                victim = i;
        if (victim == e->n_cache) { /* all in use by this request: grow */
            op_entry *nc = realloc(e->cache, 2 * e->cache_cap * sizeof *nc);
            if (!nc)
                return TSAFE_E_NOMEM;
            e->cache = nc;
            e->cache_cap *= 2;
        } else {
            slot = &e->cache[victim];
            for (uint32_t k = 0; k < slot->n; k++)
                tsafe_buffer_free(slot->w[k]);
            free(slot->w);
            *slot = e->cache[--e->n_cache];
        }
    }
    slot = &e->cache[e->n_cache];
    uint32_t n = site->plan.n_batches;
    tsafe_buffer **w = calloc(n, sizeof *w);
    if (!w)
        return TSAFE_E_NOMEM;
    tsafe_status st = TSAFE_OK;
    /* borrowed from the site's prepared plaintexts on the CPU backend */
    for (uint32_t k = 0; k < n && st == TSAFE_OK; k++)
        st = tsafe_plaintext_operand(e->ctx, site->pts[k], e->b, &w[k]);
    if (st != TSAFE_OK) {
        for (uint32_t k = 0; k < n; k++)
            tsafe_buffer_free(w[k]);
        free(w);
        return st;
    }
    slot->site_id = site->id;
    slot->last_use = e->stamp;
    slot->n = n;
    slot->w = w;
    e->n_cache++;
    *out = slot;
    return TSAFE_OK;
}

size_t tsafe_lora_exec_chunk(const tsafe_lora_exec *e) { return e->max_jobs; }

/* Job j of a request: site s, batch b, in site-major order. */
static void locate(const tsafe_lora_site *const *sites, size_t j, size_t *s, uint32_t *b)
{
    size_t i = 0;
    while (j >= sites[i]->plan.n_batches)
        j -= sites[i++]->plan.n_batches;
    *s = i;
    *b = (uint32_t)j;
}

tsafe_status tsafe_lora_exec_mul(tsafe_lora_exec *e, const tsafe_lora_site *const *sites,
                                 size_t n_sites, size_t first, size_t count)
{
    if (count == 0 || count > e->max_jobs || !e->x)
        return TSAFE_E_STATE;
    tsafe_status st;
    size_t s;
    uint32_t b;
    locate(sites, first, &s, &b);
    /* operands first: a later eviction must not free one of this chunk's */
    op_entry *ent = NULL;
    for (size_t j = 0; j < count; j++) {
        if (j == 0 || b == 0)
            if ((st = operands(e, sites[s], &ent)) != TSAFE_OK)
                return st;
        e->terms[2 * j + 1] = ent->w[b];
        double sc = e->x_scale * tsafe_plaintext_scale(sites[s]->pts[b]);
        if (!isfinite(sc))
            return TSAFE_E_SCALE; /* as tsafe_ckks_mul_plain */
        e->scale[j] = sc;
        if (++b == sites[s]->plan.n_batches && s + 1 < n_sites) {
            s++;
            b = 0;
        }
    }
    for (size_t j = 0; j < count; j++) {
        if (!e->acc[j] && (st = tsafe_buffer_alloc(e->b, 2, e->level + 1, &e->acc[j])) != TSAFE_OK)
            return st;
        e->terms[2 * j] = e->x;
        /* assign: the product overwrites the accumulator (no zeroing pass) */
        e->jobs[j] = (tsafe_backend_mac){e->acc[j], 1, &e->terms[2 * j], &e->terms[2 * j + 1], 1};
    }
    e->sites = sites;
    e->n_sites = n_sites;
    e->first = first;
    e->count = count;
    return tsafe_backend_mul_acc(e->b, e->jobs, count);
}

tsafe_status tsafe_lora_exec_result(tsafe_lora_exec *e, size_t j, uint32_t to_level,
                                    const tsafe_buffer **out, double *scale)
{
    if (j < e->first || j - e->first >= e->count || to_level > e->level)
        return TSAFE_E_STATE;
    const tsafe_buffer *cur = e->acc[j - e->first];
    double sc = e->scale[j - e->first];
    tsafe_status st;
    for (uint32_t l = e->level; l > to_level; l--) {
        tsafe_buffer **dst = &e->chain[l - 1];
        if (!*dst && (st = tsafe_buffer_alloc(e->b, 2, l, dst)) != TSAFE_OK)
            return st;
        if ((st = tsafe_backend_rescale(e->b, *dst, cur)) != TSAFE_OK)
            return st;
        sc = sc / (double)tsafe_context_prime(e->ctx, l); /* as tsafe_ckks_rescale */
        cur = *dst;
    }
    *out = cur;
    *scale = sc;
    return TSAFE_OK;
}
