/* The MoE layer object: router + routed experts + shared expert (or the
 * dense MLP), weights generated from a seed or set by the caller, batched
 * forward grouped by expert, per-expert counters. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "init.h"
#include "moe_internal.h"

#define MOE_MAX_TOKENS (1u << 24) /* per forward call; keeps BLAS ints safe */

static uint64_t expert_bytes(uint32_t d, uint32_t inter)
{
    return 3ull * d * inter * sizeof(float);
}

void tsafe_moe_layer_free(tsafe_moe_layer *L)
{
    if (L == NULL)
        return;
    if (L->experts != NULL)
        for (uint32_t e = 0; e < L->cfg.n_experts; e++)
            tsafe_moe_expert_release(&L->experts[e]);
    tsafe_moe_expert_release(&L->shared);
    free(L->experts);
    free(L->router_w);
    free(L->shared_gate_w);
    free(L->hits);
    sodium_memzero(L->key, sizeof L->key);
    free(L);
}

/* Everything but the routed experts' weights (allocated by the caller). */
static tsafe_status layer_alloc(const tsafe_moe_config *cfg, uint32_t n_experts_override,
                                tsafe_moe_layer **out)
{
    tsafe_status st = TSAFE_OK;
    tsafe_moe_layer *L = NULL;
    size_t n;
    TSAFE_REQUIRE(cfg != NULL && out != NULL, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_TRY(tsafe_moe_config_validate(cfg));
    tsafe_moe_config c = *cfg;
    if (n_experts_override != 0) {
        TSAFE_CHECK(c.n_experts > 0, TSAFE_E_ARG); /* a dense model has no experts */
        TSAFE_CHECK(n_experts_override <= TSAFE_MOE_MAX_EXPERTS, TSAFE_E_PARAMS);
        TSAFE_CHECK(n_experts_override >= c.top_k, TSAFE_E_PARAMS);
        c.n_experts = n_experts_override;
    }
    L = calloc(1, sizeof *L);
    TSAFE_CHECK(L != NULL, TSAFE_E_NOMEM);
    L->cfg = c;
    L->d = c.hidden_size;
    L->inter = c.expert_intermediate;
    if (c.n_experts == 0) {
        L->shared_inter = c.intermediate_size;
        L->shared_kind = 2;
    } else if (c.shared_expert_intermediate > 0) {
        L->shared_inter = c.shared_expert_intermediate;
        L->shared_kind = c.shared_expert_gate ? 1 : 2;
    }
    if (c.n_experts > 0) {
        TSAFE_CHECK(tsafe_mul_size(c.n_experts, L->d, &n), TSAFE_E_SIZE_OVERFLOW);
        L->router_w = calloc(n, sizeof(float));
        L->experts = calloc(c.n_experts, sizeof *L->experts);
        L->hits = calloc(c.n_experts, sizeof *L->hits);
        TSAFE_CHECK(L->router_w && L->experts && L->hits, TSAFE_E_NOMEM);
        L->weight_bytes += (uint64_t)n * sizeof(float);
    }
    if (L->shared_kind == 1) {
        L->shared_gate_w = calloc(L->d, sizeof(float));
        TSAFE_CHECK(L->shared_gate_w != NULL, TSAFE_E_NOMEM);
        L->weight_bytes += (uint64_t)L->d * sizeof(float);
    }
    if (L->shared_kind != 0) {
        TSAFE_TRY(tsafe_moe_expert_alloc(&L->shared, L->d, L->shared_inter, 1));
        L->weight_bytes += expert_bytes(L->d, L->shared_inter);
    }
    *out = L;
    return TSAFE_OK;
fail:
    tsafe_moe_layer_free(L);
    return st;
}

static tsafe_status materialise(tsafe_moe_layer *L, uint32_t e)
{
    if (L->experts[e].gate_up != NULL)
        return TSAFE_OK;
    tsafe_status st = tsafe_moe_expert_alloc(&L->experts[e], L->d, L->inter, !L->generated);
    if (st != TSAFE_OK)
        return st;
    if (L->generated)
        tsafe_moe_expert_generate(&L->experts[e], L->key, (int32_t)e, L->d, L->inter);
    L->materialised++;
    L->weight_bytes += expert_bytes(L->d, L->inter);
    return TSAFE_OK;
}

tsafe_status tsafe_moe_layer_create_random_ex(const tsafe_moe_config *cfg, uint64_t seed,
                                              const tsafe_moe_layer_options *opt,
                                              tsafe_moe_layer **out)
{
    tsafe_status st = TSAFE_OK;
    tsafe_moe_layer *L = NULL;
    tsafe_moe_layer_options o = {0, TSAFE_MOE_WEIGHTS_EAGER};
    TSAFE_REQUIRE(out != NULL, TSAFE_E_NULL);
    *out = NULL;
    if (opt != NULL)
        o = *opt;
    TSAFE_REQUIRE(o.mode == TSAFE_MOE_WEIGHTS_EAGER || o.mode == TSAFE_MOE_WEIGHTS_LAZY,
                TSAFE_E_ARG);
    TSAFE_REQUIRE(tsafe_sodium_ready() == TSAFE_OK, TSAFE_E_CRYPTO);
    TSAFE_TRY(layer_alloc(cfg, o.n_experts_override, &L));
    L->generated = 1;
    L->mode = o.mode;
    tsafe_moe_derive_key(seed, L->key);
    const uint32_t d = L->d;
    for (uint32_t e = 0; e < L->cfg.n_experts; e++)
        tsafe_moe_fill_uniform(L->router_w + (size_t)e * d, d, 1.0f / sqrtf((float)d), L->key,
                               MOE_T_ROUTER, e);
    if (L->shared_kind == 1)
        tsafe_moe_fill_uniform(L->shared_gate_w, d, 1.0f / sqrtf((float)d), L->key,
                               MOE_T_SHARED_GATE, 0);
    if (L->shared_kind != 0)
        tsafe_moe_expert_generate(&L->shared, L->key, TSAFE_MOE_SHARED, d, L->shared_inter);
    if (o.mode == TSAFE_MOE_WEIGHTS_EAGER)
        for (uint32_t e = 0; e < L->cfg.n_experts; e++)
            TSAFE_TRY(materialise(L, e));
    *out = L;
    return TSAFE_OK;
fail:
    tsafe_moe_layer_free(L);
    return st;
}

tsafe_status tsafe_moe_layer_create_random(const tsafe_moe_config *cfg, uint64_t seed,
                                           uint32_t n_experts_override, tsafe_moe_layer **out)
{
    tsafe_moe_layer_options o = {n_experts_override, TSAFE_MOE_WEIGHTS_EAGER};
    return tsafe_moe_layer_create_random_ex(cfg, seed, &o, out);
}

tsafe_status tsafe_moe_layer_create_zero(const tsafe_moe_config *cfg,
                                         uint32_t n_experts_override, tsafe_moe_layer **out)
{
    tsafe_status st = TSAFE_OK;
    tsafe_moe_layer *L = NULL;
    TSAFE_REQUIRE(out != NULL, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_TRY(layer_alloc(cfg, n_experts_override, &L));
    /* experts are allocated (zero) when first set or routed to */
    L->mode = TSAFE_MOE_WEIGHTS_LAZY;
    *out = L;
    return TSAFE_OK;
fail:
    tsafe_moe_layer_free(L);
    return st;
}

tsafe_status tsafe_moe_layer_set_router(tsafe_moe_layer *L, const float *gate_w,
                                        const float *shared_gate_w)
{
    TSAFE_REQUIRE(L != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(L->cfg.n_experts > 0, TSAFE_E_STATE);
    TSAFE_REQUIRE(gate_w != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE((shared_gate_w != NULL) == (L->shared_kind == 1), TSAFE_E_ARG);
    memcpy(L->router_w, gate_w, (size_t)L->cfg.n_experts * L->d * sizeof(float));
    if (shared_gate_w != NULL)
        memcpy(L->shared_gate_w, shared_gate_w, (size_t)L->d * sizeof(float));
    return TSAFE_OK;
}

tsafe_status tsafe_moe_layer_set_expert(tsafe_moe_layer *L, int32_t expert,
                                        const float *gate_proj, const float *up_proj,
                                        const float *down_proj)
{
    TSAFE_REQUIRE(L != NULL && gate_proj != NULL && up_proj != NULL && down_proj != NULL,
                TSAFE_E_NULL);
    moe_expert *x;
    uint32_t inter;
    if (expert == TSAFE_MOE_SHARED) {
        TSAFE_REQUIRE(L->shared_kind != 0, TSAFE_E_RANGE);
        x = &L->shared;
        inter = L->shared_inter;
    } else {
        TSAFE_REQUIRE(expert >= 0 && (uint32_t)expert < L->cfg.n_experts, TSAFE_E_RANGE);
        tsafe_status st = materialise(L, (uint32_t)expert);
        if (st != TSAFE_OK)
            return st;
        x = &L->experts[expert];
        inter = L->inter;
    }
    size_t n = (size_t)L->d * inter;
    memcpy(x->gate_up, gate_proj, n * sizeof(float));
    memcpy(x->gate_up + n, up_proj, n * sizeof(float));
    memcpy(x->down, down_proj, n * sizeof(float));
    return TSAFE_OK;
}

const tsafe_moe_config *tsafe_moe_layer_config(const tsafe_moe_layer *L)
{
    return L != NULL ? &L->cfg : NULL;
}

tsafe_status tsafe_moe_layer_route(const tsafe_moe_layer *L, const float *h, size_t n_tokens,
                                   tsafe_moe_route *routes)
{
    TSAFE_REQUIRE(L != NULL && routes != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(n_tokens == 0 || h != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(n_tokens <= MOE_MAX_TOKENS, TSAFE_E_RANGE);
    if (n_tokens == 0)
        return TSAFE_OK;
    float *logits = NULL;
    if (L->cfg.n_experts > 0) {
        logits = malloc(n_tokens * L->cfg.n_experts * sizeof(float));
        if (logits == NULL)
            return TSAFE_E_NOMEM;
    }
    tsafe_status st = tsafe_moe_route_rows(L, h, n_tokens, logits, routes);
    free(logits);
    return st;
}

/* Scratch for one forward call. */
typedef struct fwd_scratch {
    tsafe_moe_route *routes;
    float *logits;   /* n x E */
    uint32_t *count; /* E + 1 offsets */
    uint32_t *tok;   /* n x k token ids grouped by expert */
    float *w;        /* matching routing weights */
    uint32_t *ident; /* 0..n-1 */
    float *x, *gu, *act, *y;
} fwd_scratch;

static void scratch_free(fwd_scratch *s, tsafe_moe_route *user_routes)
{
    if (s->routes != user_routes)
        free(s->routes);
    free(s->logits);
    free(s->count);
    free(s->tok);
    free(s->w);
    free(s->ident);
    free(s->x);
    free(s->gu);
    free(s->act);
    free(s->y);
}

static tsafe_status scratch_alloc(const tsafe_moe_layer *L, size_t n, fwd_scratch *s,
                                  tsafe_moe_route *user_routes)
{
    const size_t E = L->cfg.n_experts, k = L->cfg.top_k, d = L->d;
    const size_t imax = L->inter > L->shared_inter ? L->inter : L->shared_inter;
    memset(s, 0, sizeof *s);
    s->routes = user_routes != NULL ? user_routes : malloc(n * sizeof *s->routes);
    s->ident = malloc(n * sizeof *s->ident);
    s->y = malloc(n * d * sizeof(float));
    s->gu = malloc(n * 2 * imax * sizeof(float));
    s->act = malloc(n * imax * sizeof(float));
    if (s->routes == NULL || s->ident == NULL || s->y == NULL || s->gu == NULL ||
        s->act == NULL)
        return TSAFE_E_NOMEM;
    if (E > 0) {
        s->logits = malloc(n * E * sizeof(float));
        s->count = calloc(E + 1, sizeof *s->count);
        s->tok = malloc(n * k * sizeof *s->tok);
        s->w = malloc(n * k * sizeof *s->w);
        s->x = malloc(n * d * sizeof(float));
        if (s->logits == NULL || s->count == NULL || s->tok == NULL || s->w == NULL ||
            s->x == NULL)
            return TSAFE_E_NOMEM;
    }
    for (size_t t = 0; t < n; t++)
        s->ident[t] = (uint32_t)t;
    return TSAFE_OK;
}

/* Bucket (token, weight) pairs by expert: count[e]..count[e+1] in tok/w. */
static void group_by_expert(const tsafe_moe_layer *L, size_t n, fwd_scratch *s)
{
    const uint32_t E = L->cfg.n_experts;
    uint32_t *off = s->count;
    memset(off, 0, (E + 1) * sizeof *off);
    for (size_t t = 0; t < n; t++)
        for (uint32_t i = 0; i < s->routes[t].k; i++)
            off[s->routes[t].expert[i] + 1]++;
    for (uint32_t e = 0; e < E; e++)
        off[e + 1] += off[e];
    /* fill using a moving cursor per expert, then restore the offsets */
    for (size_t t = 0; t < n; t++)
        for (uint32_t i = 0; i < s->routes[t].k; i++) {
            uint32_t e = s->routes[t].expert[i];
            s->tok[off[e]] = (uint32_t)t;
            s->w[off[e]] = s->routes[t].weight[i];
            off[e]++;
        }
    for (uint32_t e = E; e > 0; e--)
        off[e] = off[e - 1];
    off[0] = 0;
}

tsafe_status tsafe_moe_layer_forward_hooked(tsafe_moe_layer *L, const float *h,
                                            size_t n_tokens, float *out,
                                            tsafe_moe_route *routes, tsafe_moe_expert_hook hook,
                                            void *user)
{
    tsafe_status st = TSAFE_OK;
    fwd_scratch s;
    size_t nd;
    TSAFE_REQUIRE(L != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(n_tokens == 0 || (h != NULL && out != NULL), TSAFE_E_NULL);
    TSAFE_REQUIRE(n_tokens <= MOE_MAX_TOKENS, TSAFE_E_RANGE);
    if (n_tokens == 0)
        return TSAFE_OK;
    const size_t d = L->d, E = L->cfg.n_experts;
    TSAFE_REQUIRE(tsafe_mul_size(n_tokens, d, &nd), TSAFE_E_SIZE_OVERFLOW);
    uintptr_t ho = (uintptr_t)h, oo = (uintptr_t)out, nb = nd * sizeof(float);
    TSAFE_REQUIRE(oo + nb <= ho || ho + nb <= oo, TSAFE_E_ARG);

    TSAFE_TRY(scratch_alloc(L, n_tokens, &s, routes));
    TSAFE_TRY(tsafe_moe_route_rows(L, h, n_tokens, s.logits, s.routes));
    memset(out, 0, nd * sizeof(float));

    uint64_t evals = 0;
    if (E > 0) {
        group_by_expert(L, n_tokens, &s);
        for (uint32_t e = 0; e < E; e++) {
            uint32_t lo = s.count[e], m = s.count[e + 1] - lo;
            if (m == 0)
                continue;
            TSAFE_TRY(materialise(L, e));
            const uint32_t *tk = s.tok + lo;
            const float *x = h + (size_t)tk[0] * d;
            if (m > 1) {
                for (uint32_t r = 0; r < m; r++)
                    memcpy(s.x + (size_t)r * d, h + (size_t)tk[r] * d, d * sizeof(float));
                x = s.x;
            }
            TSAFE_TRY(tsafe_moe_expert_apply(&L->experts[e], (int32_t)e, L->d, L->inter, x, m, tk,
                                           s.gu, s.act, s.y, hook, user));
            for (uint32_t r = 0; r < m; r++) {
                float wr = s.w[lo + r];
                float *o = out + (size_t)tk[r] * d;
                const float *yr = s.y + (size_t)r * d;
                for (size_t j = 0; j < d; j++)
                    o[j] += wr * yr[j];
            }
            evals += m;
        }
    }
    if (L->shared_kind != 0) {
        TSAFE_TRY(tsafe_moe_expert_apply(&L->shared, TSAFE_MOE_SHARED, L->d, L->shared_inter, h,
                                       n_tokens, s.ident, s.gu, s.act, s.y, hook, user));
        for (size_t t = 0; t < n_tokens; t++) {
            float g = s.routes[t].shared_gate;
            float *o = out + t * d;
            const float *yr = s.y + t * d;
            for (size_t j = 0; j < d; j++)
                o[j] += g * yr[j];
        }
        L->shared_evals += n_tokens;
    }
    for (uint32_t e = 0; e < E; e++)
        L->hits[e] += s.count[e + 1] - s.count[e];
    L->expert_evals += evals;
    L->tokens += n_tokens;
    scratch_free(&s, routes);
    return TSAFE_OK;
fail: /* scratch_alloc zeroed s first: partially allocated is fine */
    scratch_free(&s, routes);
    return st;
}

tsafe_status tsafe_moe_layer_forward(tsafe_moe_layer *L, const float *h, size_t n_tokens,
                                     float *out, tsafe_moe_route *routes)
{
    return tsafe_moe_layer_forward_hooked(L, h, n_tokens, out, routes, NULL, NULL);
}

tsafe_status tsafe_moe_layer_get_stats(const tsafe_moe_layer *L, tsafe_moe_layer_stats *out)
{
    TSAFE_REQUIRE(L != NULL && out != NULL, TSAFE_E_NULL);
    memset(out, 0, sizeof *out); /* padding too: callers may memcmp */
    out->tokens = L->tokens;
    out->expert_evals = L->expert_evals;
    out->shared_evals = L->shared_evals;
    out->experts_materialised = L->materialised;
    out->weight_bytes = L->weight_bytes;
    return TSAFE_OK;
}

tsafe_status tsafe_moe_layer_expert_hits(const tsafe_moe_layer *L, uint64_t *counts, size_t n)
{
    TSAFE_REQUIRE(L != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(n >= L->cfg.n_experts, TSAFE_E_BUFFER_SMALL);
    TSAFE_REQUIRE(L->cfg.n_experts == 0 || counts != NULL, TSAFE_E_NULL);
    if (L->cfg.n_experts > 0)
        memcpy(counts, L->hits, L->cfg.n_experts * sizeof *counts);
    return TSAFE_OK;
}

void tsafe_moe_layer_reset_counters(tsafe_moe_layer *L)
{
    if (L == NULL)
        return;
    if (L->hits != NULL)
        memset(L->hits, 0, L->cfg.n_experts * sizeof *L->hits);
    L->tokens = L->expert_evals = L->shared_evals = 0;
}
