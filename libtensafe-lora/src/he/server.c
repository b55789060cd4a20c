/* Two-party server: holds a context (public data) and reads sites; it has
 * no secret-key field and calls no function that takes one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/ckks_buffer.h"
#include "tensafe/lora_two_party.h"
#include "clock.h"
#include "he_internal.h"
#include "../wire/wire.h"

struct tsafe_lora_server {
    tsafe_context *ctx;
    tsafe_lora_plan plan;
    tsafe_ciphertext *x;
    float *u;
    size_t u_cap;
    uint8_t *resp; /* reused response buffer (tsafe_lora_server_process_scratch) */
    size_t resp_cap;
    tsafe_lora_exec *exec; /* the ring work on a backend */
    tsafe_lora_sitecache modules; /* sites of the module engine */
};

tsafe_status tsafe_lora_server_create(const tsafe_lora_plan *plan,
                                      tsafe_lora_server **out)
{
    if (!plan || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_lora_server *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    s->plan = *plan;
    tsafe_status st;
    st = plan->response_level > plan->level ? TSAFE_E_PARAMS : TSAFE_OK;
    if (st != TSAFE_OK ||
        (st = tsafe_context_create(&plan->params, &s->ctx)) != TSAFE_OK ||
        (st = tsafe_ciphertext_create(s->ctx, &s->x)) != TSAFE_OK ||
        (st = tsafe_lora_exec_create(s->ctx, plan->level, NULL, &s->exec)) != TSAFE_OK) {
        tsafe_lora_server_free(s);
        return st;
    }
    *out = s;
    return TSAFE_OK;
}

void tsafe_lora_server_free(tsafe_lora_server *s)
{
    if (!s)
        return;
    tsafe_lora_exec_free(s->exec); /* before the context it serves */
    tsafe_lora_sitecache_clear(&s->modules);
    tsafe_ciphertext_free(s->x);
    tsafe_context_free(s->ctx);
    free(s->u);
    free(s->resp);
    free(s);
}

const tsafe_context *tsafe_lora_server_context(const tsafe_lora_server *s)
{
    return s ? s->ctx : NULL;
}

tsafe_lora_sitecache *tsafe_lora_server_sitecache_(tsafe_lora_server *s,
                                                   const tsafe_lora_plan **plan)
{
    *plan = &s->plan;
    return &s->modules;
}

tsafe_status tsafe_lora_server_use_backend(tsafe_lora_server *s,
                                           const tsafe_backend_factory *f)
{
    if (!s)
        return TSAFE_E_NULL;
    return tsafe_lora_exec_use_backend(s->exec, f);
}

const char *tsafe_lora_server_backend_name(const tsafe_lora_server *s)
{
    return s ? tsafe_lora_exec_backend_name(s->exec) : "none";
}

tsafe_status tsafe_lora_pair_use_backend(tsafe_lora_pair *p, const tsafe_backend_factory *f)
{
    if (!p || !p->server)
        return TSAFE_E_NULL;
    return tsafe_lora_server_use_backend(p->server, f);
}

static tsafe_status check_sites(const tsafe_lora_server *s,
                                const tsafe_lora_site *const *sites, size_t n)
{
    if (!sites)
        return TSAFE_E_NULL;
    if (n == 0 || n > TSAFE_MSG_MAX_SITES)
        return TSAFE_E_RANGE;
    for (size_t i = 0; i < n; i++) {
        if (!sites[i])
            return TSAFE_E_NULL;
        if (sites[i]->ctx != s->ctx || !tsafe_lora_plan_compatible(&sites[i]->plan, &s->plan))
            return TSAFE_E_PARAMS_MISMATCH;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_lora_server_response_size(const tsafe_lora_server *s,
                                             const tsafe_lora_site *const *sites,
                                             size_t n_sites, size_t *size)
{
    if (!s || !size)
        return TSAFE_E_NULL;
    *size = 0;
    tsafe_status st = check_sites(s, sites, n_sites);
    size_t prod_len;
    if (st != TSAFE_OK ||
        (st = tsafe_ciphertext_serialized_size_at(s->ctx, s->plan.response_level,
                                                  &prod_len)) != TSAFE_OK)
        return st;
    /* bounded: n_sites <= TSAFE_MSG_MAX_SITES, batches and prod_len small */
    size_t total = TSAFE_MSG_HEADER + 4;
    for (size_t i = 0; i < n_sites; i++)
        total += 8 + (size_t)sites[i]->plan.n_batches * (4 + prod_len);
    *size = total;
    return TSAFE_OK;
}

/* Parse the request into s->x and write the response into w, a fixed
 * buffer of exactly the checked response size (sites checked by the
 * caller); running out of room means the size formula and the writer
 * disagree: TSAFE_E_STATE. */
static tsafe_status process(tsafe_lora_server *s, const tsafe_lora_site *const *sites,
                            size_t n_sites, const uint8_t *request, size_t len,
                            tsafe_wbuf *w, tsafe_lora_stats *stats)
{
    tsafe_status st;
    tsafe_rbuf r = {request, len, 0};
    uint32_t clen;
    const uint8_t *blob;
    if ((st = tsafe_rbuf_header(&r, TSAFE_MSG_REQUEST)) != TSAFE_OK)
        return st;
    if (!tsafe_rbuf_u32(&r, &clen) || !(blob = tsafe_rbuf_take(&r, clen)))
        return TSAFE_E_TRUNCATED;
    if (r.pos != len)
        return TSAFE_E_FORMAT;
    tsafe_ciphertext *x = s->x;
    if ((st = tsafe_ciphertext_deserialize_into(s->ctx, blob, clen, x)) != TSAFE_OK)
        return st;
    if (tsafe_ciphertext_level(x) != s->plan.level ||
        tsafe_ciphertext_scale(x) != s->plan.scale_x)
        return TSAFE_E_FORMAT;

    double prod_us = 0, ser_us = 0;
    uint64_t ops = 0;
    size_t job = 0, total = 0, chunk = tsafe_lora_exec_chunk(s->exec);
    for (size_t i = 0; i < n_sites; i++)
        total += sites[i]->plan.n_batches;
    double t_load = tsafe_now_us();
    st = tsafe_lora_exec_load_x(s->exec, x);
    prod_us += tsafe_now_us() - t_load;
    if (st != TSAFE_OK)
        return st;
    tsafe_wbuf_header(w, TSAFE_MSG_RESPONSE);
    tsafe_wbuf_u32(w, (uint32_t)n_sites);
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        const tsafe_lora_site *site = sites[i];
        tsafe_wbuf_u32(w, site->plan.rank);
        tsafe_wbuf_u32(w, site->plan.n_batches);
        for (uint32_t b = 0; b < site->plan.n_batches && st == TSAFE_OK; b++, job++) {
            double t0 = tsafe_now_us();
            const tsafe_buffer *res = NULL;
            double scale = 0;
            /* every batch of the next `chunk` jobs in one backend call */
            if (job % chunk == 0)
                st = tsafe_lora_exec_mul(s->exec, sites, n_sites, job,
                                         total - job < chunk ? total - job : chunk);
            if (st == TSAFE_OK)
                st = tsafe_lora_exec_result(s->exec, job, s->plan.response_level, &res,
                                            &scale);
            double t1 = tsafe_now_us();
            size_t n = 0, wr = 0;
            if (st == TSAFE_OK)
                st = tsafe_ciphertext_serialized_size_at(s->ctx, s->plan.response_level, &n);
            if (st == TSAFE_OK && n > UINT32_MAX)
                st = TSAFE_E_SIZE_OVERFLOW;
            if (st == TSAFE_OK) {
                tsafe_wbuf_u32(w, (uint32_t)n);
                uint8_t *p = tsafe_wbuf_reserve(w, n);
                st = p ? tsafe_ciphertext_serialize_buffer(s->ctx, res, scale, p, n, &wr)
                       : TSAFE_E_STATE;
            }
            prod_us += t1 - t0;
            ser_us += tsafe_now_us() - t1;
            ops++;
        }
    }
    if (st == TSAFE_OK && w->failed)
        st = TSAFE_E_STATE;
    if (st == TSAFE_OK && stats) {
        stats->products_us += prod_us;
        stats->reduce_us += ser_us;
        stats->he_ops += ops;
    }
    return st;
}

/* Response into buf of `need` bytes (the checked response size). */
static tsafe_status process_sized(tsafe_lora_server *s, const tsafe_lora_site *const *sites,
                                  size_t n_sites, const uint8_t *request, size_t len,
                                  uint8_t *buf, size_t need, size_t *out_len,
                                  tsafe_lora_stats *stats)
{
    tsafe_wbuf w = {buf, 0, need, 0, 1};
    tsafe_status st = process(s, sites, n_sites, request, len, &w, stats);
    if (st == TSAFE_OK && w.len != need)
        st = TSAFE_E_STATE; /* the size formula and the writer disagree */
    *out_len = st == TSAFE_OK ? need : 0;
    return st;
}

tsafe_status tsafe_lora_server_process_into(tsafe_lora_server *s,
                                            const tsafe_lora_site *const *sites,
                                            size_t n_sites, const uint8_t *request,
                                            size_t len, uint8_t *buf, size_t cap,
                                            size_t *out_len, tsafe_lora_stats *stats)
{
    if (!s || !request || !out_len)
        return TSAFE_E_NULL;
    *out_len = 0;
    size_t need;
    tsafe_status st = tsafe_lora_server_response_size(s, sites, n_sites, &need);
    if (st != TSAFE_OK)
        return st;
    *out_len = need; /* reported even when the buffer is too small */
    if (!buf)
        return TSAFE_E_NULL;
    if (cap < need)
        return TSAFE_E_BUFFER_SMALL;
    return process_sized(s, sites, n_sites, request, len, buf, need, out_len, stats);
}

tsafe_status tsafe_lora_server_process(tsafe_lora_server *s,
                                       const tsafe_lora_site *const *sites,
                                       size_t n_sites, const uint8_t *request,
                                       size_t len, uint8_t **response,
                                       size_t *out_len, tsafe_lora_stats *stats)
{
    if (!s || !request || !response || !out_len)
        return TSAFE_E_NULL;
    *response = NULL;
    *out_len = 0;
    size_t need;
    tsafe_status st = tsafe_lora_server_response_size(s, sites, n_sites, &need);
    if (st != TSAFE_OK)
        return st;
    uint8_t *buf = malloc(need);
    if (!buf)
        return TSAFE_E_NOMEM;
    size_t n;
    st = process_sized(s, sites, n_sites, request, len, buf, need, &n, stats);
    if (st != TSAFE_OK) {
        free(buf);
        return st;
    }
    *response = buf;
    *out_len = n;
    return TSAFE_OK;
}

const uint8_t *tsafe_lora_server_process_scratch(tsafe_lora_server *s,
                                                 const tsafe_lora_site *const *sites,
                                                 size_t n_sites, const uint8_t *request,
                                                 size_t len, size_t *out_len,
                                                 tsafe_lora_stats *stats, tsafe_status *status)
{
    size_t need;
    tsafe_status st = request && out_len ? tsafe_lora_server_response_size(s, sites, n_sites, &need)
                                         : TSAFE_E_NULL;
    if (st == TSAFE_OK && need > s->resp_cap) {
        uint8_t *nb = malloc(need);
        if (!nb) {
            st = TSAFE_E_NOMEM;
        } else {
            free(s->resp);
            s->resp = nb;
            s->resp_cap = need;
        }
    }
    if (st == TSAFE_OK)
        st = process_sized(s, sites, n_sites, request, len, s->resp, need, out_len, stats);
    *status = st;
    return st == TSAFE_OK ? s->resp : NULL;
}

tsafe_status tsafe_lora_server_apply(tsafe_lora_server *s,
                                     const tsafe_lora_site *const *sites,
                                     size_t n_sites, const uint8_t *msg, size_t len,
                                     float *const *delta, tsafe_lora_stats *stats)
{
    if (!s || !msg || !delta)
        return TSAFE_E_NULL;
    tsafe_status st = check_sites(s, sites, n_sites);
    if (st != TSAFE_OK)
        return st;
    tsafe_rbuf r = {msg, len, 0};
    uint32_t ns;
    if ((st = tsafe_rbuf_header(&r, TSAFE_MSG_U)) != TSAFE_OK)
        return st;
    if (!tsafe_rbuf_u32(&r, &ns))
        return TSAFE_E_TRUNCATED;
    if (ns != n_sites)
        return TSAFE_E_FORMAT;
    uint32_t max_rank = 0;
    for (size_t i = 0; i < n_sites; i++)
        if (!delta[i])
            return TSAFE_E_NULL;
    for (size_t i = 0; i < n_sites; i++)
        if (sites[i]->plan.rank > max_rank)
            max_rank = sites[i]->plan.rank;
    if (s->u_cap < max_rank) {
        float *nu = realloc(s->u, max_rank * sizeof *nu);
        if (!nu)
            return TSAFE_E_NOMEM;
        s->u = nu;
        s->u_cap = max_rank;
    }
    /* validate the whole message before writing any delta */
    size_t start = r.pos;
    for (int pass = 0; pass < 2; pass++) {
        r.pos = start;
        for (size_t i = 0; i < n_sites; i++) {
            uint32_t rank;
            if (!tsafe_rbuf_u32(&r, &rank))
                return TSAFE_E_TRUNCATED;
            if (rank != sites[i]->plan.rank)
                return TSAFE_E_FORMAT;
            for (uint32_t k = 0; k < rank; k++) {
                if (!tsafe_rbuf_f32(&r, &s->u[k]))
                    return TSAFE_E_TRUNCATED;
                if (!isfinite(s->u[k]))
                    return TSAFE_E_FORMAT;
            }
            if (pass == 1) {
                double t0 = tsafe_now_us();
                tsafe_lora_apply_b(sites[i], s->u, delta[i]);
                if (stats)
                    stats->bu_us += tsafe_now_us() - t0;
            }
        }
        if (r.pos != len)
            return TSAFE_E_FORMAT;
    }
    return TSAFE_OK;
}
