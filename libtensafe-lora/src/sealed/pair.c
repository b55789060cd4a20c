/* In-process sealed pair: a client and a server session per input width
 * that exchange the real frames through the in-memory transport
 * (../session/memory.c), so a token follows the sessions' round order
 * (hello on rotation, query, round 1, share, round 2); the LoRA engine
 * over it. */
#include <stdlib.h>
#include <string.h>

#include "sealed_internal.h"
#include "tsafe_check.h"
#include "../engine/engine_internal.h"
#include "../session/session_internal.h"

#define MAX_LANES 16
#define MAX_CALL_SITES TSAFE_LORA_MAX_CALL_MODULES

typedef struct lane {
    uint32_t d_in;
    tsafe_sealed_plan plan;
    tsafe_session_service svc; /* the plan only: sites come per token */
    tsafe_session_client *client;
    tsafe_session_server *server;
    tsafe_bfv_context *c1, *c2; /* shared by the lane's sites */
} lane;

typedef struct cached_site {
    uint64_t module_id;
    lane *ln;
    tsafe_sealed_site *site;
} cached_site;

struct tsafe_sealed_pair {
    tsafe_sealed_mode mode;
    tsafe_sealed_opts opts;
    int have_opts;
    tsafe_dp_session *dp;
    int allow_no_dp;
    lane lanes[MAX_LANES];
    size_t n_lanes;
    cached_site *cache;
    size_t n_cache, cap_cache;
    const tsafe_backend_factory *factory; /* every server's backends */
};

tsafe_status tsafe_sealed_pair_create(tsafe_sealed_mode mode,
                                      const tsafe_sealed_opts *opts,
                                      tsafe_dp_session *dp, int allow_no_dp,
                                      tsafe_sealed_pair **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(mode == TSAFE_SEALED || mode == TSAFE_SEALED_PRIVATE, TSAFE_E_ARG);
    TSAFE_REQUIRE(mode == TSAFE_SEALED_PRIVATE || dp || allow_no_dp, TSAFE_E_ARG);
    /* sealed mode: the caller's semi-honest opt-in, refused here rather
     * than at the first token (tsafe_sealed_plan_derive) */
    TSAFE_REQUIRE(mode == TSAFE_SEALED_PRIVATE || (opts && opts->semi_honest), TSAFE_E_INSECURE);
    tsafe_sealed_pair *p = calloc(1, sizeof *p);
    if (!p)
        return TSAFE_E_NOMEM;
    p->mode = mode;
    if (opts) {
        p->opts = *opts;
        p->have_opts = 1;
    }
    p->dp = dp;
    p->allow_no_dp = allow_no_dp;
    *out = p;
    return TSAFE_OK;
}

static void lane_close(lane *l)
{
    tsafe_session_client_free(l->client);
    tsafe_session_server_free(l->server);
    l->client = NULL;
    l->server = NULL;
}

static void lane_free_contexts(lane *l)
{
    tsafe_bfv_context_free(l->c1);
    tsafe_bfv_context_free(l->c2);
    l->c1 = l->c2 = NULL;
}

static void drop_cache_of(tsafe_sealed_pair *p, const lane *l)
{
    size_t w = 0;
    for (size_t i = 0; i < p->n_cache; i++) {
        if (p->cache[i].ln == l)
            tsafe_sealed_site_free(p->cache[i].site);
        else
            p->cache[w++] = p->cache[i];
    }
    p->n_cache = w;
}

void tsafe_sealed_pair_free(tsafe_sealed_pair *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_cache; i++)
        tsafe_sealed_site_free(p->cache[i].site);
    free(p->cache);
    for (size_t i = 0; i < p->n_lanes; i++) {
        lane_close(&p->lanes[i]);
        lane_free_contexts(&p->lanes[i]);
    }
    free(p);
}

/* The pair's backend choice on one server. */
static tsafe_status server_backend(const tsafe_sealed_pair *p, tsafe_sealed_server *s)
{
    return p->factory ? tsafe_sealed_server_use_backend(s, p->factory) : TSAFE_OK;
}

tsafe_status tsafe_sealed_pair_use_backend(tsafe_sealed_pair *p,
                                           const tsafe_backend_factory *f)
{
    TSAFE_REQUIRE(p, TSAFE_E_NULL);
    p->factory = f;
    tsafe_status st = TSAFE_OK;
    for (size_t i = 0; i < p->n_lanes && st == TSAFE_OK; i++)
        if (p->lanes[i].server)
            st = tsafe_sealed_server_use_backend(tsafe_sess_session_server_sealed(p->lanes[i].server), f);
    return st;
}

/* A fresh client/server session on the lane's plan (new keys). */
static tsafe_status session_open(const tsafe_sealed_pair *p, lane *l)
{
    tsafe_sess_session_service_for_plan(&l->svc, &l->plan);
    tsafe_status st = tsafe_sess_session_client_open_plan(&l->plan, p->dp, p->allow_no_dp, &l->client);
    if (st == TSAFE_OK)
        st = tsafe_session_server_create(&l->svc, NULL, &l->server);
    if (st == TSAFE_OK)
        st = server_backend(p, tsafe_sess_session_server_sealed(l->server));
    if (st != TSAFE_OK)
        lane_close(l);
    return st;
}

/* (Re)open the lane for d_in with a plan that covers rank and d_out, its
 * round-1 split chosen for calls of n sites (unless the options say). */
static tsafe_status lane_open(tsafe_sealed_pair *p, lane *l, uint32_t d_in,
                              uint32_t rank, uint32_t d_out, size_t n)
{
    drop_cache_of(p, l);
    lane_close(l);
    lane_free_contexts(l);
    l->d_in = d_in;
    tsafe_sealed_opts o;
    memset(&o, 0, sizeof o);
    if (p->have_opts)
        o = p->opts;
    if (!o.sites_per_query)
        o.sites_per_query = (uint32_t)n;
    tsafe_status st = tsafe_sealed_plan_derive(p->mode, d_in, rank, d_out, &o, &l->plan);
    if (st == TSAFE_OK)
        st = tsafe_sealed_contexts(&l->plan, &l->c1, &l->c2);
    return st == TSAFE_OK ? session_open(p, l) : st;
}

static tsafe_status lane_for(tsafe_sealed_pair *p, uint32_t d_in, uint32_t rank,
                             uint32_t d_out, size_t n, lane **out)
{
    lane *l = NULL;
    for (size_t i = 0; i < p->n_lanes; i++)
        if (p->lanes[i].d_in == d_in)
            l = &p->lanes[i];
    if (!l) {
        TSAFE_REQUIRE(p->n_lanes < MAX_LANES, TSAFE_E_RANGE);
        l = &p->lanes[p->n_lanes++];
        memset(l, 0, sizeof *l);
    }
    int fits = l->c1 && rank <= l->plan.rank && d_out <= l->plan.d_out_max;
    tsafe_status st = TSAFE_OK;
    if (fits && !l->client) /* after a failed token: a new session, same plan */
        st = session_open(p, l);
    else if (!fits) { /* a plan covering the old shapes and the new ones */
        uint32_t r = l->c1 && l->plan.rank > rank ? l->plan.rank : rank;
        uint32_t d = l->c1 && l->plan.d_out_max > d_out ? l->plan.d_out_max : d_out;
        st = lane_open(p, l, d_in, r, d, n);
    }
    if (st != TSAFE_OK)
        return st;
    *out = l;
    return TSAFE_OK;
}

static tsafe_status site_for(tsafe_sealed_pair *p, lane *l, const tsafe_lora_module *m,
                             const tsafe_sealed_site **out)
{
    uint64_t id = tsafe_lora_module_id(m);
    for (size_t i = 0; i < p->n_cache; i++)
        if (p->cache[i].module_id == id && p->cache[i].ln == l) {
            *out = p->cache[i].site;
            return TSAFE_OK;
        }
    if (p->n_cache == p->cap_cache) {
        size_t cap = p->cap_cache ? 2 * p->cap_cache : 32;
        cached_site *nc = realloc(p->cache, cap * sizeof *nc);
        if (!nc)
            return TSAFE_E_NOMEM;
        p->cache = nc;
        p->cap_cache = cap;
    }
    tsafe_sealed_site *s;
    tsafe_status st = tsafe_sealed_site_build(&l->plan, l->c1, l->c2, tsafe_lora_module_A(m),
                                              tsafe_lora_module_B(m), tsafe_lora_module_rank(m),
                                              tsafe_lora_module_d_out(m),
                                              tsafe_lora_module_scale(m), &s);
    if (st != TSAFE_OK)
        return st;
    p->cache[p->n_cache++] = (cached_site){id, l, s};
    *out = s;
    return TSAFE_OK;
}

/* Lanes and sealed sites for modules now (see tsafe_sealed_pair_prepare). */
static tsafe_status prepare_modules(tsafe_sealed_pair *p, const tsafe_lora_module *const *m,
                                    size_t n)
{
    /* open each width's lane for the largest shapes first, so that a later
     * module of the same call cannot force a reopen */
    for (size_t i = 0; i < n; i++) {
        uint32_t d_in = tsafe_lora_module_d_in(m[i]), rmax = 0, dmax = 0;
        size_t same = 0;
        for (size_t j = 0; j < n; j++)
            if (tsafe_lora_module_d_in(m[j]) == d_in) {
                uint32_t r = tsafe_lora_module_rank(m[j]), d = tsafe_lora_module_d_out(m[j]);
                rmax = r > rmax ? r : rmax;
                dmax = d > dmax ? d : dmax;
                same++;
            }
        lane *l;
        const tsafe_sealed_site *s;
        tsafe_status st = lane_for(p, d_in, rmax, dmax, same, &l);
        if (st == TSAFE_OK)
            st = site_for(p, l, m[i], &s);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

/* The modules of CKKS sites (the site engine's callers). */
static tsafe_status modules_of(const tsafe_lora_site *const *sites, size_t n,
                               const tsafe_lora_module **m)
{
    TSAFE_REQUIRE(sites, TSAFE_E_NULL);
    TSAFE_REQUIRE(n <= MAX_CALL_SITES, TSAFE_E_RANGE);
    for (size_t i = 0; i < n; i++)
        TSAFE_REQUIRE(m[i] = tsafe_lora_site_module(sites[i]), TSAFE_E_NULL);
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_pair_prepare(tsafe_sealed_pair *p,
                                       const tsafe_lora_site *const *sites, size_t n)
{
    TSAFE_REQUIRE(p, TSAFE_E_NULL);
    const tsafe_lora_module *m[MAX_CALL_SITES];
    tsafe_status st = modules_of(sites, n, m);
    return st == TSAFE_OK ? prepare_modules(p, m, n) : st;
}

static tsafe_status modules_fn(void *user, const tsafe_lora_module *const *modules,
                               size_t n, const float *x, float *const *delta,
                               tsafe_lora_stats *stats)
{
    tsafe_sealed_pair *p = user;
    TSAFE_REQUIRE(p, TSAFE_E_NULL);
    tsafe_status st = tsafe_lora_module_check_call(modules, n, x, delta);
    if (st != TSAFE_OK)
        return st;
    uint32_t ranks[MAX_CALL_SITES], d_outs[MAX_CALL_SITES], rmax = 0, dmax = 0;
    for (size_t i = 0; i < n; i++) {
        ranks[i] = tsafe_lora_module_rank(modules[i]);
        d_outs[i] = tsafe_lora_module_d_out(modules[i]);
        rmax = ranks[i] > rmax ? ranks[i] : rmax;
        dmax = d_outs[i] > dmax ? d_outs[i] : dmax;
    }
    lane *l;
    if ((st = lane_for(p, tsafe_lora_module_d_in(modules[0]), rmax, dmax, n, &l)) != TSAFE_OK)
        return st;
    const tsafe_sealed_site *ss[MAX_CALL_SITES];
    for (size_t i = 0; i < n; i++)
        if ((st = site_for(p, l, modules[i], &ss[i])) != TSAFE_OK)
            return st;
    /* the token through the lane's sessions, counted in the caller's stats */
    tsafe_sess_session_server_token_sites(l->server, ss, n);
    tsafe_sess_session_server_stats_sink(l->server, stats);
    tsafe_sess_session_client_stats_sink(l->client, stats);
    st = tsafe_sess_session_client_submit_shapes(l->client, n, ranks, d_outs, x, delta);
    if (st == TSAFE_OK)
        st = tsafe_session_pump(l->server, l->client);
    if (st == TSAFE_OK && !(tsafe_session_client_wants(l->client) & TSAFE_SESSION_READY))
        st = TSAFE_E_STATE;
    tsafe_sess_session_server_token_sites(l->server, NULL, 0);
    tsafe_sess_session_server_stats_sink(l->server, NULL);
    tsafe_sess_session_client_stats_sink(l->client, NULL);
    if (st != TSAFE_OK)
        lane_close(l); /* a failed token leaves no half-open session */
    return st;
}

static tsafe_status pair_fn(void *user, const tsafe_lora_site *const *sites,
                            size_t n, const float *x, float *const *delta,
                            tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(user && x && delta, TSAFE_E_NULL);
    TSAFE_REQUIRE(n >= 1, TSAFE_E_RANGE);
    const tsafe_lora_module *m[MAX_CALL_SITES];
    tsafe_status st = modules_of(sites, n, m);
    return st == TSAFE_OK ? modules_fn(user, m, n, x, delta, stats) : st;
}

tsafe_lora_engine tsafe_lora_engine_sealed(tsafe_sealed_pair *p)
{
    tsafe_lora_engine e = {pair_fn, p};
    return e;
}

static tsafe_status modules_prepare(void *user, const tsafe_lora_module *const *modules,
                                    size_t n)
{
    TSAFE_REQUIRE(user, TSAFE_E_NULL);
    return prepare_modules(user, modules, n);
}

tsafe_lora_module_engine tsafe_lora_module_engine_sealed(tsafe_sealed_pair *p)
{
    tsafe_lora_module_engine e = {modules_fn, p, modules_prepare};
    return e;
}
