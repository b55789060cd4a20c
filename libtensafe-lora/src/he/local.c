/* Local mode: one process holds the secret key and the adapter sites. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "tensafe/ckks_buffer.h"
#include "clock.h"
#include "he_internal.h"

struct tsafe_lora_local {
    tsafe_context *ctx;
    tsafe_secret_key *sk;
    tsafe_lora_plan plan;
    tsafe_plaintext *pt;
    tsafe_ciphertext *x_ct;
    double *re, *im; /* packed x: wiped by tsafe_lora_encrypt_x */
    double *y;       /* decrypted coefficients: wiped after each token */
    float *u;        /* u = A x of _delta: wiped after each token */
    uint32_t u_cap;
    size_t slots;
    tsafe_lora_exec *exec; /* the ring work on a backend */
    tsafe_lora_sitecache modules; /* sites of the module engine */
};

/* free() for buffers that held plaintext derived from x. */
static void wipe_free(void *p, size_t bytes)
{
    if (p) {
        sodium_memzero(p, bytes);
        free(p);
    }
}

tsafe_status tsafe_lora_local_create(const tsafe_lora_plan *plan,
                                     const uint8_t *seed, tsafe_lora_local **out)
{
    if (!plan || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_lora_local *l = calloc(1, sizeof *l);
    if (!l)
        return TSAFE_E_NOMEM;
    l->plan = *plan;
    tsafe_status st;
    if ((st = tsafe_context_create(&plan->params, &l->ctx)) != TSAFE_OK)
        goto fail;
    st = TSAFE_E_PARAMS_MISMATCH;
    if (plan->level > tsafe_context_max_level(l->ctx) || plan->cols == 0)
        goto fail;
    if ((st = tsafe_secret_key_generate(l->ctx, seed, &l->sk)) != TSAFE_OK ||
        (st = tsafe_plaintext_create(l->ctx, &l->pt)) != TSAFE_OK ||
        (st = tsafe_ciphertext_create(l->ctx, &l->x_ct)) != TSAFE_OK ||
        (st = tsafe_lora_exec_create(l->ctx, plan->level, NULL, &l->exec)) != TSAFE_OK)
        goto fail;
    size_t slots = tsafe_context_slots(l->ctx);
    l->re = calloc(slots, sizeof *l->re);
    l->im = calloc(slots, sizeof *l->im);
    l->y = calloc(2 * (size_t)plan->cols, sizeof *l->y);
    l->slots = slots;
    st = TSAFE_E_NOMEM;
    if (!l->re || !l->im || !l->y)
        goto fail;
    *out = l;
    return TSAFE_OK;
fail:
    tsafe_lora_local_free(l);
    return st;
}

void tsafe_lora_local_free(tsafe_lora_local *l)
{
    if (!l)
        return;
    tsafe_lora_exec_free(l->exec); /* before the context it serves */
    tsafe_lora_sitecache_clear(&l->modules);
    tsafe_ciphertext_free(l->x_ct);
    tsafe_plaintext_free(l->pt);
    tsafe_secret_key_free(l->sk);
    tsafe_context_free(l->ctx);
    wipe_free(l->re, l->slots * sizeof *l->re);
    wipe_free(l->im, l->slots * sizeof *l->im);
    wipe_free(l->y, 2 * (size_t)l->plan.cols * sizeof *l->y);
    wipe_free(l->u, (size_t)l->u_cap * sizeof *l->u);
    free(l);
}

const tsafe_context *tsafe_lora_local_context(const tsafe_lora_local *l)
{
    return l ? l->ctx : NULL;
}

tsafe_lora_sitecache *tsafe_lora_local_sitecache_(tsafe_lora_local *l,
                                                  const tsafe_lora_plan **plan)
{
    *plan = &l->plan;
    return &l->modules;
}

tsafe_status tsafe_lora_local_use_backend(tsafe_lora_local *l, const tsafe_backend_factory *f)
{
    if (!l)
        return TSAFE_E_NULL;
    return tsafe_lora_exec_use_backend(l->exec, f);
}

static tsafe_status check_sites(tsafe_lora_local *l,
                                const tsafe_lora_site *const *sites, size_t n)
{
    if (!sites || n == 0)
        return TSAFE_E_ARG;
    for (size_t s = 0; s < n; s++) {
        if (!sites[s])
            return TSAFE_E_NULL;
        if (sites[s]->ctx != l->ctx ||
            !tsafe_lora_plan_compatible(&sites[s]->plan, &l->plan))
            return TSAFE_E_PARAMS_MISMATCH;
    }
    return TSAFE_OK;
}

/* Shared body of _u and _delta: u_out[s] gets rank values per site. */
static tsafe_status run_sites(tsafe_lora_local *l, const tsafe_lora_site *const *sites,
                        size_t n_sites, const float *x, float *const *u_out,
                        tsafe_lora_stats *stats)
{
    tsafe_status st = check_sites(l, sites, n_sites);
    if (st != TSAFE_OK)
        return st;
    double t0 = tsafe_now_us();
    if ((st = tsafe_lora_encrypt_x(l->ctx, &l->plan, l->sk, x, l->re, l->im,
                                    l->x_ct)) != TSAFE_OK)
        return st;
    double t1 = tsafe_now_us(), prod_us = 0, dec_us = 0, sum_us = 0;
    size_t stride = tsafe_lora_read_stride(l->ctx, &l->plan), K = 2 * l->plan.cols;
    uint64_t ops = 0;
    size_t job = 0, total = 0, chunk = tsafe_lora_exec_chunk(l->exec);
    for (size_t s = 0; s < n_sites; s++)
        total += sites[s]->plan.n_batches;
    double t_load = tsafe_now_us();
    st = tsafe_lora_exec_load_x(l->exec, l->x_ct);
    prod_us += tsafe_now_us() - t_load;
    if (st != TSAFE_OK)
        return st;
    for (size_t s = 0; s < n_sites; s++) {
        const tsafe_lora_site *site = sites[s];
        for (uint32_t b = 0; b < site->plan.n_batches; b++, job++) {
            double a = tsafe_now_us();
            const tsafe_buffer *res = NULL;
            double scale = 0;
            if (job % chunk == 0) /* the next `chunk` jobs in one backend call */
                st = tsafe_lora_exec_mul(l->exec, sites, n_sites, job,
                                         total - job < chunk ? total - job : chunk);
            if (st == TSAFE_OK)
                st = tsafe_lora_exec_result(l->exec, job, l->plan.level, &res, &scale);
            if (st != TSAFE_OK)
                return st;
            double m = tsafe_now_us();
            st = tsafe_ckks_decrypt_coeffs_strided_buffer(l->ctx, l->sk, res, scale, stride,
                                                          l->y, K);
            if (st != TSAFE_OK)
                return st;
            double d = tsafe_now_us();
            tsafe_lora_read_batch(l->ctx, &site->plan, b, l->y, u_out[s]);
            double e = tsafe_now_us();
            prod_us += m - a;
            dec_us += d - m;
            sum_us += e - d;
            ops++;
        }
    }
    if (stats) {
        stats->encrypt_us += t1 - t0;
        stats->products_us += prod_us;
        stats->decrypt_us += dec_us;
        stats->sums_us += sum_us;
        stats->he_ops += ops;
        stats->tokens += 1;
    }
    return TSAFE_OK;
}

static tsafe_status run(tsafe_lora_local *l, const tsafe_lora_site *const *sites,
                        size_t n_sites, const float *x, float *const *u_out,
                        tsafe_lora_stats *stats)
{
    tsafe_status st = run_sites(l, sites, n_sites, x, u_out, stats);
    /* every exit: y held decrypted x_j A_ij sums */
    sodium_memzero(l->y, 2 * (size_t)l->plan.cols * sizeof *l->y);
    return st;
}

tsafe_status tsafe_lora_local_u(tsafe_lora_local *l,
                                const tsafe_lora_site *const *sites, size_t n_sites,
                                const float *x, float *const *u,
                                tsafe_lora_stats *stats)
{
    if (!l || !x || !u || !sites)
        return TSAFE_E_NULL;
    if (n_sites > 1024) /* before reading u[] / sites[] */
        return TSAFE_E_RANGE;
    for (size_t s = 0; s < n_sites; s++)
        if (!u[s])
            return TSAFE_E_NULL;
    return run(l, sites, n_sites, x, u, stats);
}

tsafe_status tsafe_lora_local_delta(tsafe_lora_local *l,
                                    const tsafe_lora_site *const *sites,
                                    size_t n_sites, const float *x,
                                    float *const *delta, tsafe_lora_stats *stats)
{
    if (!l || !x || !delta || !sites)
        return TSAFE_E_NULL;
    if (n_sites > 1024) /* before reading delta[] / sites[] */
        return TSAFE_E_RANGE;
    for (size_t s = 0; s < n_sites; s++)
        if (!delta[s])
            return TSAFE_E_NULL;
    size_t total = 0;
    for (size_t s = 0; s < n_sites; s++) {
        if (!sites[s])
            return TSAFE_E_NULL;
        total += sites[s]->plan.rank;
    }
    if (l->u_cap < total) {
        /* not realloc: it may move the block and leave the old one unwiped */
        float *nu = calloc(total, sizeof *nu);
        if (!nu)
            return TSAFE_E_NOMEM;
        wipe_free(l->u, (size_t)l->u_cap * sizeof *l->u);
        l->u = nu;
        l->u_cap = (uint32_t)total;
    }
    float *u_ptrs[1024] = {NULL}; /* only n_sites used; set to quiet -Wmaybe-uninitialized */
    for (size_t s = 0, off = 0; s < n_sites; off += sites[s]->plan.rank, s++)
        u_ptrs[s] = l->u + off;
    tsafe_status st = run(l, sites, n_sites, x, u_ptrs, stats);
    if (st == TSAFE_OK) {
        double t = tsafe_now_us();
        for (size_t s = 0; s < n_sites; s++)
            tsafe_lora_apply_b(sites[s], u_ptrs[s], delta[s]);
        if (stats)
            stats->bu_us += tsafe_now_us() - t;
    }
    if (l->u) /* u = A x, partly written on error */
        sodium_memzero(l->u, total * sizeof *l->u);
    return st;
}
