/* Delta engines: plaintext, local and in-process two-party behind one
 * function-pointer interface (tsafe_lora_engine). */
#include <stdlib.h>

#include "tensafe/lora_two_party.h"
#include "clock.h"
#include "he_internal.h"
#include "../engine/engine_internal.h"

static tsafe_status plain_fn(void *user, const tsafe_lora_site *const *sites,
                             size_t n, const float *x, float *const *delta,
                             tsafe_lora_stats *stats)
{
    (void)user;
    if (!sites || !x || !delta)
        return TSAFE_E_NULL;
    double t0 = tsafe_now_us();
    for (size_t s = 0; s < n; s++) {
        tsafe_status st = tsafe_lora_site_plain_delta(sites[s], x, delta[s]);
        if (st != TSAFE_OK)
            return st;
    }
    if (stats) {
        stats->bu_us += tsafe_now_us() - t0;
        stats->tokens += 1;
    }
    return TSAFE_OK;
}

tsafe_lora_engine tsafe_lora_engine_plain(void)
{
    tsafe_lora_engine e = {plain_fn, NULL};
    return e;
}

static tsafe_status local_fn(void *user, const tsafe_lora_site *const *sites,
                             size_t n, const float *x, float *const *delta,
                             tsafe_lora_stats *stats)
{
    return tsafe_lora_local_delta(user, sites, n, x, delta, stats);
}

tsafe_lora_engine tsafe_lora_engine_local(tsafe_lora_local *l)
{
    tsafe_lora_engine e = {local_fn, l};
    return e;
}

#define PAIR_MAX_SITES 256

static tsafe_status pair_fn(void *user, const tsafe_lora_site *const *sites,
                            size_t n, const float *x, float *const *delta,
                            tsafe_lora_stats *stats)
{
    tsafe_lora_pair *p = user;
    if (!p || !p->client || !p->server || !sites || !x || !delta)
        return TSAFE_E_NULL;
    if (n == 0 || n > PAIR_MAX_SITES)
        return TSAFE_E_RANGE;
    uint32_t ranks[PAIR_MAX_SITES];
    float *u[PAIR_MAX_SITES];
    size_t total = 0;
    for (size_t s = 0; s < n; s++) {
        if (!sites[s])
            return TSAFE_E_NULL;
        ranks[s] = tsafe_lora_site_rank(sites[s]);
        total += ranks[s];
    }
    float *ubuf = malloc(total * sizeof *ubuf);
    if (!ubuf)
        return TSAFE_E_NOMEM;
    for (size_t s = 0, off = 0; s < n; off += ranks[s], s++)
        u[s] = ubuf + off;
    uint8_t *req = NULL, *umsg = NULL;
    const uint8_t *resp = NULL; /* the server's reused buffer */
    size_t rl = 0, pl = 0, ul = 0;
    tsafe_status st;
    if ((st = tsafe_lora_client_encrypt(p->client, x, &req, &rl, stats)) == TSAFE_OK &&
        (resp = tsafe_lora_server_process_scratch(p->server, sites, n, req, rl, &pl, stats,
                                                  &st)) != NULL &&
        (st = tsafe_lora_client_decode(p->client, resp, pl, n, ranks, u, stats)) == TSAFE_OK &&
        (st = tsafe_lora_client_release(p->client, n, ranks, u, p->dp, &umsg, &ul, stats)) == TSAFE_OK)
        st = tsafe_lora_server_apply(p->server, sites, n, umsg, ul, delta, stats);
    if (st == TSAFE_OK && stats) /* delta travels back to the client */
        for (size_t s = 0; s < n; s++)
            stats->bytes_down += (uint64_t)tsafe_lora_site_d_out(sites[s]) * 4;
    tsafe_lora_bytes_free(req);
    tsafe_lora_bytes_free(umsg);
    free(ubuf);
    return st;
}

tsafe_lora_engine tsafe_lora_engine_two_party(tsafe_lora_pair *pair)
{
    tsafe_lora_engine e = {pair_fn, pair};
    return e;
}

/* ------------------------------------------------------- module engines */

/* sites[i] for modules[i]: the CKKS sites of l (local) or of the pair's
 * server, built on first use. */
static tsafe_status local_sites(tsafe_lora_local *l, const tsafe_lora_module *const *modules,
                                size_t n, const tsafe_lora_site **sites)
{
    const tsafe_lora_plan *plan;
    tsafe_lora_sitecache *c = tsafe_lora_local_sitecache_(l, &plan);
    return tsafe_lora_sitecache_map(c, tsafe_lora_local_context(l), plan, modules, n, sites);
}

static tsafe_status server_sites(tsafe_lora_server *s, const tsafe_lora_module *const *modules,
                                 size_t n, const tsafe_lora_site **sites)
{
    const tsafe_lora_plan *plan;
    tsafe_lora_sitecache *c = tsafe_lora_server_sitecache_(s, &plan);
    return tsafe_lora_sitecache_map(c, tsafe_lora_server_context(s), plan, modules, n, sites);
}

/* The module engines run the site engines' own functions on those sites:
 * the same ring work and the same bytes. */
static tsafe_status module_local_fn(void *user, const tsafe_lora_module *const *modules,
                                    size_t n, const float *x, float *const *delta,
                                    tsafe_lora_stats *stats)
{
    const tsafe_lora_site *sites[TSAFE_LORA_MAX_CALL_MODULES];
    tsafe_status st = user ? tsafe_lora_module_check_call(modules, n, x, delta) : TSAFE_E_NULL;
    if (st == TSAFE_OK)
        st = local_sites(user, modules, n, sites);
    return st == TSAFE_OK ? local_fn(user, sites, n, x, delta, stats) : st;
}

static tsafe_status module_local_prepare(void *user, const tsafe_lora_module *const *modules,
                                         size_t n)
{
    const tsafe_lora_site *sites[TSAFE_LORA_MAX_CALL_MODULES];
    return user ? local_sites(user, modules, n, sites) : TSAFE_E_NULL;
}

tsafe_lora_module_engine tsafe_lora_module_engine_local(tsafe_lora_local *l)
{
    tsafe_lora_module_engine e = {module_local_fn, l, module_local_prepare};
    return e;
}

static tsafe_status module_pair_fn(void *user, const tsafe_lora_module *const *modules,
                                   size_t n, const float *x, float *const *delta,
                                   tsafe_lora_stats *stats)
{
    tsafe_lora_pair *p = user;
    const tsafe_lora_site *sites[TSAFE_LORA_MAX_CALL_MODULES];
    tsafe_status st = p && p->client && p->server
                          ? tsafe_lora_module_check_call(modules, n, x, delta)
                          : TSAFE_E_NULL;
    if (st == TSAFE_OK)
        st = server_sites(p->server, modules, n, sites);
    return st == TSAFE_OK ? pair_fn(p, sites, n, x, delta, stats) : st;
}

static tsafe_status module_pair_prepare(void *user, const tsafe_lora_module *const *modules,
                                        size_t n)
{
    tsafe_lora_pair *p = user;
    const tsafe_lora_site *sites[TSAFE_LORA_MAX_CALL_MODULES];
    return p && p->server ? server_sites(p->server, modules, n, sites) : TSAFE_E_NULL;
}

tsafe_lora_module_engine tsafe_lora_module_engine_two_party(tsafe_lora_pair *pair)
{
    tsafe_lora_module_engine e = {module_pair_fn, pair, module_pair_prepare};
    return e;
}
