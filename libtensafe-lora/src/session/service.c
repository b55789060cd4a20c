/* What a server serves (lora_session.h): the modules' sites on the plans
 * of their input widths, the hello every session sends first, and in
 * plain ZeRo-MOAI the CKKS server the sites were built on. Immutable once
 * made, so any number of sessions on any threads share it. */
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"
#include "tsafe_check.h"

static int sealed_protocol(tsafe_session_protocol p)
{
    return p == TSAFE_SESSION_SEALED || p == TSAFE_SESSION_SEALED_PRIVATE;
}

/* The announced shapes and widths; the hello version. */
static tsafe_status service_shapes(tsafe_session_service *s, const tsafe_session_module *m,
                                   size_t n)
{
    session_hello *h = &s->hello;
    if (!(h->mod = calloc(n, sizeof *h->mod)))
        return TSAFE_E_NOMEM;
    h->n = n;
    for (size_t i = 0; i < n; i++) {
        size_t len = m[i].name ? strlen(m[i].name) : 0;
        if (!len || len > TSAFE_SESSION_MAX_NAME || !m[i].A || !m[i].B)
            return m[i].name && m[i].A && m[i].B ? TSAFE_E_ARG : TSAFE_E_NULL;
        for (size_t k = 0; k < len; k++)
            if (m[i].name[k] < 0x20 || m[i].name[k] > 0x7e)
                return TSAFE_E_ARG;
        memcpy(h->mod[i].name, m[i].name, len + 1);
        h->mod[i].d_in = m[i].d_in;
        h->mod[i].rank = m[i].rank;
        h->mod[i].d_out = m[i].d_out;
        if (!m[i].d_in || !m[i].rank || !m[i].d_out)
            return TSAFE_E_ARG;
        h->total_out += m[i].d_out;
    }
    if (!tsafe_sess_session_widths(h))
        return TSAFE_E_RANGE;
    h->protocol = s->opts.protocol;
    if (!sealed_protocol(s->opts.protocol))
        h->version = 1;
    else
        h->version = s->opts.per_query || h->n_widths > 1 ? 3 : 2;
    return h->version == 1 && h->n_widths > 1 ? TSAFE_E_SHAPE : TSAFE_OK;
}

/* A backend the sealed rings cannot use is refused now, not per client. */
static tsafe_status probe_backend(const tsafe_session_service *s)
{
    tsafe_sealed_server *probe = NULL;
    tsafe_status st = tsafe_sealed_server_create(&s->plan[0], &probe);
    if (st == TSAFE_OK && s->opts.backend)
        st = tsafe_sealed_server_use_backend(probe, s->opts.backend);
    tsafe_sealed_server_free(probe);
    return st;
}

static tsafe_status service_sealed(tsafe_session_service *s, const tsafe_session_module *m)
{
    const session_hello *h = &s->hello;
    tsafe_status st;
    for (uint32_t w = 0; w < h->n_widths; w++)
        if ((st = tsafe_sess_session_width_plan(h, w, &s->opts.sealed, &s->plan[w])) != TSAFE_OK)
            return st;
    if (!(s->ssite = calloc(h->n, sizeof *s->ssite)))
        return TSAFE_E_NOMEM;
    for (size_t i = 0; i < h->n; i++)
        if ((st = tsafe_sealed_site_create(&s->plan[h->mod_width[i]], m[i].A, m[i].B, m[i].rank,
                                           m[i].d_out, m[i].scale, &s->ssite[i])) != TSAFE_OK)
            return st;
    return probe_backend(s);
}

static tsafe_status service_plain(tsafe_session_service *s, const tsafe_session_module *m)
{
    const tsafe_lora_plan *plan = s->opts.plain_plan;
    tsafe_status st;
    if ((st = tsafe_lora_server_create(plan, &s->plain)) != TSAFE_OK)
        return st;
    if (s->opts.backend &&
        (st = tsafe_lora_server_use_backend(s->plain, s->opts.backend)) != TSAFE_OK)
        return st;
    if (!(s->psite = calloc(s->hello.n, sizeof *s->psite)))
        return TSAFE_E_NOMEM;
    for (size_t i = 0; i < s->hello.n; i++) {
        tsafe_lora_plan p = *plan; /* narrowed to the module's rank */
        p.rank = m[i].rank;
        p.n_batches = (p.rank + p.cols - 1) / p.cols;
        if ((st = tsafe_lora_site_create(tsafe_lora_server_context(s->plain), &p, m[i].A,
                                          m[i].B, m[i].d_out, m[i].scale, &s->psite[i])) !=
            TSAFE_OK)
            return st;
    }
    s->hello.plan = *plan;
    return tsafe_lora_server_response_size(s->plain, (const tsafe_lora_site *const *)s->psite,
                                           s->hello.n, &s->plain_resp);
}

tsafe_status tsafe_session_service_create(const tsafe_session_service_opts *opts,
                                          const tsafe_session_module *modules, size_t n,
                                          tsafe_session_service **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(opts && modules, TSAFE_E_NULL);
    TSAFE_REQUIRE(n >= 1 && n <= TSAFE_SESSION_MAX_MODULES, TSAFE_E_RANGE);
    TSAFE_REQUIRE(sealed_protocol(opts->protocol) ||
                      opts->protocol == TSAFE_SESSION_PLAIN_ZERO_MOAI, TSAFE_E_ARG);
    TSAFE_REQUIRE(sealed_protocol(opts->protocol) || opts->plain_plan, TSAFE_E_NULL);
    size_t id_len = opts->adapter_id ? strlen(opts->adapter_id) : 0;
    TSAFE_REQUIRE(!id_len || tsafe_sess_adapter_id_ok(opts->adapter_id, id_len), TSAFE_E_ARG);
    tsafe_session_service *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    s->opts = *opts;
    memcpy(s->adapter_id, opts->adapter_id ? opts->adapter_id : "", id_len + 1);
    s->opts.adapter_id = s->adapter_id;
    s->opts.plain_plan = NULL; /* copied into hello.plan */
    if (opts->pool && !opts->backend) { /* the CPU backend on the pool */
        tsafe_status ps = tsafe_backend_cpu_factory_pool(opts->pool, &s->pooled);
        if (ps != TSAFE_OK) {
            free(s);
            return ps;
        }
        s->opts.backend = &s->pooled;
    }
    pthread_mutex_init(&s->plain_lock, NULL);
    tsafe_status st = service_shapes(s, modules, n);
    if (st == TSAFE_OK) {
        if (sealed_protocol(opts->protocol))
            st = service_sealed(s, modules);
        else {
            s->opts.plain_plan = opts->plain_plan;
            st = service_plain(s, modules);
            s->opts.plain_plan = NULL;
        }
    }
    tsafe_wbuf w = {0};
    if (st == TSAFE_OK && (st = tsafe_sess_session_hello_encode(&s->hello, &w)) == TSAFE_OK) {
        s->hello_bytes = w.buf;
        s->hello_len = w.len;
    } else
        free(w.buf);
    if (st != TSAFE_OK) {
        tsafe_session_service_free(s);
        return st;
    }
    *out = s;
    return TSAFE_OK;
}

void tsafe_session_service_free(tsafe_session_service *s)
{
    if (!s)
        return;
    for (size_t i = 0; s->ssite && i < s->hello.n; i++)
        tsafe_sealed_site_free(s->ssite[i]);
    for (size_t i = 0; s->psite && i < s->hello.n; i++)
        tsafe_lora_site_free(s->psite[i]);
    free(s->ssite);
    free(s->psite);
    tsafe_lora_server_free(s->plain);
    tsafe_sess_session_hello_free(&s->hello);
    free(s->hello_bytes);
    pthread_mutex_destroy(&s->plain_lock);
    free(s);
}

size_t tsafe_session_service_widths(const tsafe_session_service *s)
{
    return s ? s->hello.n_widths : 0;
}

tsafe_status tsafe_session_service_plan(const tsafe_session_service *s, size_t w,
                                        tsafe_sealed_plan *plan, size_t *n_modules)
{
    TSAFE_REQUIRE(s && plan && n_modules, TSAFE_E_NULL);
    TSAFE_REQUIRE(sealed_protocol(s->opts.protocol), TSAFE_E_STATE);
    TSAFE_REQUIRE(w < s->hello.n_widths, TSAFE_E_RANGE);
    *plan = s->plan[w];
    size_t k = 0;
    for (size_t i = 0; i < s->hello.n; i++)
        k += s->hello.mod_width[i] == w;
    *n_modules = k;
    return TSAFE_OK;
}

uint32_t tsafe_session_service_hello_version(const tsafe_session_service *s)
{
    return s ? s->hello.version : 0;
}
