/* Expert LoRA on routed experts: a pre-pass computes, per token, the
 * gate/up deltas of every routed expert with one engine call (one
 * encryption of h); the layer's hook adds them, and runs each routed
 * expert's down adapter on its activation. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "tensafe/lora_engine.h"
#include "tensafe/moe_lora.h"
#include "clock.h"

#define MAX_SITES_PER_TOKEN (2 * (TSAFE_MOE_MAX_TOPK + 1))

struct tsafe_moe_lora {
    const tsafe_moe_layer *layer;
    uint32_t n_slots; /* n_experts + 1: the last slot is the shared expert */
    const tsafe_lora_module **mods; /* [n_slots][3]: what the adapters are */
    const tsafe_lora_site **sites;  /* [n_slots][3]: set by set_site only */
    uint64_t *uses;                 /* [n_slots][3] */
};

/* A forward's engine: over modules, or (tsafe_moe_lora_forward) over the
 * CKKS sites given with tsafe_moe_lora_set_site. */
typedef struct moe_engine {
    const tsafe_lora_module_engine *modules;
    const tsafe_lora_engine *sites;
} moe_engine;

static int slot_of(const tsafe_moe_lora *l, int32_t expert)
{
    if (expert == TSAFE_MOE_SHARED)
        return (int)l->n_slots - 1;
    if (expert < 0 || (uint32_t)expert >= l->n_slots - 1)
        return -1;
    return expert;
}

tsafe_status tsafe_moe_lora_create(const tsafe_moe_layer *layer, tsafe_moe_lora **out)
{
    if (!layer || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    const tsafe_moe_config *cfg = tsafe_moe_layer_config(layer);
    tsafe_moe_lora *l = calloc(1, sizeof *l);
    if (!l)
        return TSAFE_E_NOMEM;
    l->layer = layer;
    l->n_slots = cfg->n_experts + 1;
    l->mods = calloc((size_t)l->n_slots * 3, sizeof *l->mods);
    l->sites = calloc((size_t)l->n_slots * 3, sizeof *l->sites);
    l->uses = calloc((size_t)l->n_slots * 3, sizeof *l->uses);
    if (!l->mods || !l->sites || !l->uses) {
        tsafe_moe_lora_free(l);
        return TSAFE_E_NOMEM;
    }
    *out = l;
    return TSAFE_OK;
}

void tsafe_moe_lora_free(tsafe_moe_lora *l)
{
    if (!l)
        return;
    free(l->mods);
    free(l->sites);
    free(l->uses);
    free(l);
}

static uint32_t expert_dim(const tsafe_moe_config *cfg, int32_t expert)
{
    if (expert != TSAFE_MOE_SHARED)
        return cfg->expert_intermediate;
    return cfg->n_experts ? cfg->shared_expert_intermediate : cfg->intermediate_size;
}

/* The slot index of (expert, proj) after the checks of a setter, or a
 * negative status. m: the module to attach (NULL detaches). */
static long checked_slot(const tsafe_moe_lora *l, int32_t expert, tsafe_moe_proj proj,
                         const tsafe_lora_module *m)
{
    int s = slot_of(l, expert);
    if (s < 0 || (unsigned)proj > TSAFE_MOE_PROJ_DOWN)
        return TSAFE_E_RANGE;
    if (m) {
        const tsafe_moe_config *cfg = tsafe_moe_layer_config(l->layer);
        uint32_t inter = expert_dim(cfg, expert);
        int down = proj == TSAFE_MOE_PROJ_DOWN;
        if (inter == 0 || tsafe_lora_module_d_out(m) != (down ? cfg->hidden_size : inter) ||
            tsafe_lora_module_d_in(m) != (down ? inter : cfg->hidden_size))
            return TSAFE_E_SHAPE;
    }
    return (long)s * 3 + proj;
}

tsafe_status tsafe_moe_lora_set_module(tsafe_moe_lora *l, int32_t expert, tsafe_moe_proj proj,
                                       const tsafe_lora_module *module)
{
    if (!l)
        return TSAFE_E_NULL;
    long k = checked_slot(l, expert, proj, module);
    if (k < 0)
        return (tsafe_status)k;
    l->mods[k] = module;
    l->sites[k] = NULL;
    return TSAFE_OK;
}

tsafe_status tsafe_moe_lora_set_site(tsafe_moe_lora *l, int32_t expert, tsafe_moe_proj proj,
                                     const tsafe_lora_site *site)
{
    if (!l)
        return TSAFE_E_NULL;
    const tsafe_lora_module *m = tsafe_lora_site_module(site);
    long k = checked_slot(l, expert, proj, m);
    if (k < 0)
        return (tsafe_status)k;
    l->mods[k] = m;
    l->sites[k] = site;
    return TSAFE_OK;
}

uint64_t tsafe_moe_lora_site_uses(const tsafe_moe_lora *l, int32_t expert, tsafe_moe_proj proj)
{
    if (!l || (unsigned)proj > TSAFE_MOE_PROJ_DOWN)
        return 0;
    int s = slot_of(l, expert);
    return s < 0 ? 0 : l->uses[(size_t)s * 3 + proj];
}

/* Per-forward state shared with the hook. */
typedef struct {
    tsafe_moe_lora *lora;
    moe_engine engine_act;
    const tsafe_moe_route *routes;
    size_t n_tokens;
    uint32_t slots_per_token; /* k + 1 (shared) */
    uint32_t inter_max;
    float *gate_up;           /* [token][slot][2][inter_max] cached deltas */
    unsigned char *have;      /* [token][slot] gate/up deltas present (bit 0/1) */
    float *down;              /* scratch: hidden floats */
    tsafe_moe_lora_stats *stats;
} hook_state;

/* Index of expert e in token t's cache row: its position in the route, or
 * k for the shared expert; -1 if e is not routed for t. */
static int route_pos(const hook_state *hs, size_t t, int32_t expert)
{
    const tsafe_moe_route *r = &hs->routes[t];
    if (expert == TSAFE_MOE_SHARED)
        return (int)hs->slots_per_token - 1;
    for (uint32_t i = 0; i < r->k; i++)
        if ((int32_t)r->expert[i] == expert)
            return (int)i;
    return -1;
}

static float *cache_at(const hook_state *hs, size_t t, int pos, int which)
{
    return hs->gate_up + (((t * hs->slots_per_token + (size_t)pos) * 2 + (size_t)which) *
                          hs->inter_max);
}

/* Slot k's adapter for engine e: 1 present, 0 none, TSAFE_E_STATE for a
 * module without a site on a site engine (set_module, then
 * tsafe_moe_lora_forward). */
static int has_adapter(const tsafe_moe_lora *l, const moe_engine *e, size_t k)
{
    if (!l->mods[k])
        return 0;
    return e->modules || l->sites[k] ? 1 : TSAFE_E_STATE;
}

/* One engine call on the adapters of slots k[0..n). */
static tsafe_status engine_call(const tsafe_moe_lora *l, const moe_engine *e, const size_t *k,
                                size_t n, const float *x, float *const *outs,
                                tsafe_lora_stats *stats)
{
    const tsafe_lora_module *mods[MAX_SITES_PER_TOKEN];
    const tsafe_lora_site *sites[MAX_SITES_PER_TOKEN];
    for (size_t i = 0; i < n; i++) {
        mods[i] = l->mods[k[i]];
        sites[i] = l->sites[k[i]];
    }
    return e->modules ? e->modules->fn(e->modules->user, mods, n, x, outs, stats)
                      : e->sites->fn(e->sites->user, sites, n, x, outs, stats);
}

static tsafe_status hook(void *user, tsafe_moe_hook_stage stage, int32_t expert,
                         const uint32_t *tokens, size_t m, const float *in, size_t in_cols,
                         float *io, size_t io_cols)
{
    hook_state *hs = user;
    int slot = slot_of(hs->lora, expert);
    if (slot < 0)
        return TSAFE_E_RANGE;
    if (stage == TSAFE_MOE_HOOK_GATE_UP) {
        size_t inter = io_cols / 2;
        for (size_t r = 0; r < m; r++) {
            int pos = route_pos(hs, tokens[r], expert);
            if (pos < 0)
                return TSAFE_E_STATE;
            unsigned char have = hs->have[tokens[r] * hs->slots_per_token + (size_t)pos];
            for (int which = 0; which < 2; which++) {
                if (!(have & (1u << which)))
                    continue;
                const float *d = cache_at(hs, tokens[r], pos, which);
                float *dst = io + r * io_cols + (size_t)which * inter;
                for (size_t i = 0; i < inter; i++)
                    dst[i] += d[i];
            }
        }
        return TSAFE_OK;
    }
    size_t k = (size_t)slot * 3 + TSAFE_MOE_PROJ_DOWN;
    int has = has_adapter(hs->lora, &hs->engine_act, k);
    if (has <= 0)
        return has;
    for (size_t r = 0; r < m; r++) {
        float *outs[1] = {hs->down};
        double t0 = tsafe_now_us();
        tsafe_status st = engine_call(hs->lora, &hs->engine_act, &k, 1, in + r * in_cols, outs,
                                      hs->stats ? &hs->stats->he : NULL);
        if (st != TSAFE_OK)
            return st;
        for (size_t i = 0; i < io_cols; i++)
            io[r * io_cols + i] += hs->down[i];
        hs->lora->uses[(size_t)slot * 3 + TSAFE_MOE_PROJ_DOWN]++;
        if (hs->stats) {
            hs->stats->lora_us += tsafe_now_us() - t0;
            hs->stats->engine_calls_act++;
        }
    }
    return TSAFE_OK;
}

/* Pre-pass: token t's gate/up deltas for all its routed experts, one call. */
static tsafe_status gate_up_pass(hook_state *hs, const moe_engine *engine_h, const float *h,
                                 uint32_t d)
{
    size_t ks[MAX_SITES_PER_TOKEN];
    float *outs[MAX_SITES_PER_TOKEN];
    tsafe_moe_lora *l = hs->lora;
    for (size_t t = 0; t < hs->n_tokens; t++) {
        size_t n = 0;
        const tsafe_moe_route *r = &hs->routes[t];
        for (uint32_t pos = 0; pos < hs->slots_per_token; pos++) {
            int32_t expert = pos < r->k ? (int32_t)r->expert[pos] : TSAFE_MOE_SHARED;
            if (pos >= r->k && (pos != hs->slots_per_token - 1 || r->shared_gate == 0.0f))
                continue; /* no shared expert in this layer */
            int slot = slot_of(l, expert);
            int ran = 0;
            for (int which = 0; which < 2; which++) {
                size_t k = (size_t)slot * 3 + (size_t)which;
                int has = has_adapter(l, engine_h, k);
                if (has < 0)
                    return (tsafe_status)has;
                if (!has)
                    continue;
                ks[n] = k;
                outs[n] = cache_at(hs, t, (int)pos, which);
                n++;
                hs->have[t * hs->slots_per_token + pos] |= (unsigned char)(1u << which);
                l->uses[(size_t)slot * 3 + (size_t)which]++;
                ran = 1;
            }
            if (ran && hs->stats)
                hs->stats->expert_runs++;
        }
        if (n == 0)
            continue;
        double t0 = tsafe_now_us();
        tsafe_status st = engine_call(l, engine_h, ks, n, h + t * d, outs,
                                      hs->stats ? &hs->stats->he : NULL);
        if (st != TSAFE_OK)
            return st;
        if (hs->stats) {
            hs->stats->lora_us += tsafe_now_us() - t0;
            hs->stats->engine_calls_h++;
        }
    }
    return TSAFE_OK;
}

static tsafe_status forward(tsafe_moe_layer *layer, tsafe_moe_lora *lora,
                            const moe_engine *engine_h, const moe_engine *engine_act,
                            const float *h, size_t n_tokens, float *out,
                            tsafe_moe_route *routes, tsafe_moe_lora_stats *stats);

tsafe_status tsafe_moe_lora_forward(tsafe_moe_layer *layer, tsafe_moe_lora *lora,
                                    const tsafe_lora_engine *engine_h,
                                    const tsafe_lora_engine *engine_act, const float *h,
                                    size_t n_tokens, float *out, tsafe_moe_route *routes,
                                    tsafe_moe_lora_stats *stats)
{
    if (!engine_h || !engine_act || !engine_h->fn || !engine_act->fn)
        return TSAFE_E_NULL;
    moe_engine eh = {NULL, engine_h}, ea = {NULL, engine_act};
    return forward(layer, lora, &eh, &ea, h, n_tokens, out, routes, stats);
}

tsafe_status tsafe_moe_lora_forward_modules(tsafe_moe_layer *layer, tsafe_moe_lora *lora,
                                            const tsafe_lora_module_engine *engine_h,
                                            const tsafe_lora_module_engine *engine_act,
                                            const float *h, size_t n_tokens, float *out,
                                            tsafe_moe_route *routes,
                                            tsafe_moe_lora_stats *stats)
{
    if (!engine_h || !engine_act || !engine_h->fn || !engine_act->fn)
        return TSAFE_E_NULL;
    moe_engine eh = {engine_h, NULL}, ea = {engine_act, NULL};
    return forward(layer, lora, &eh, &ea, h, n_tokens, out, routes, stats);
}

static tsafe_status forward(tsafe_moe_layer *layer, tsafe_moe_lora *lora,
                            const moe_engine *engine_h, const moe_engine *engine_act,
                            const float *h, size_t n_tokens, float *out,
                            tsafe_moe_route *routes, tsafe_moe_lora_stats *stats)
{
    if (!layer || !lora || !h || !out)
        return TSAFE_E_NULL;
    if (lora->layer != layer)
        return TSAFE_E_ARG;
    if (n_tokens == 0 || n_tokens > 4096)
        return TSAFE_E_RANGE;
    double t0 = tsafe_now_us();
    const tsafe_moe_config *cfg = tsafe_moe_layer_config(layer);
    hook_state hs;
    memset(&hs, 0, sizeof hs);
    hs.lora = lora;
    hs.engine_act = *engine_act;
    hs.n_tokens = n_tokens;
    hs.slots_per_token = cfg->top_k + 1;
    hs.inter_max = expert_dim(cfg, 0) > expert_dim(cfg, TSAFE_MOE_SHARED)
                       ? expert_dim(cfg, 0) : expert_dim(cfg, TSAFE_MOE_SHARED);
    hs.stats = stats;
    tsafe_moe_route *rt = routes ? routes : calloc(n_tokens, sizeof *rt);
    size_t cache = n_tokens * hs.slots_per_token;
    hs.gate_up = calloc(cache * 2 * (size_t)hs.inter_max, sizeof *hs.gate_up);
    hs.have = calloc(cache, 1);
    hs.down = calloc(cfg->hidden_size, sizeof *hs.down);
    tsafe_status st = TSAFE_E_NOMEM;
    if (!rt || !hs.gate_up || !hs.have || !hs.down)
        goto out;
    hs.routes = rt;
    if ((st = tsafe_moe_layer_route(layer, h, n_tokens, rt)) != TSAFE_OK ||
        (st = gate_up_pass(&hs, engine_h, h, cfg->hidden_size)) != TSAFE_OK)
        goto out;
    st = tsafe_moe_layer_forward_hooked(layer, h, n_tokens, out, rt, hook, &hs);
    if (st == TSAFE_OK && stats) {
        stats->tokens += n_tokens;
        stats->total_us += tsafe_now_us() - t0;
    }
out:
    if (rt != routes)
        free(rt);
    /* LoRA deltas decrypted from h (the client's activations): wipe. The
     * plaintext forward's own activations are not: the base model runs in
     * the clear in this process by design (docs/THREAT_MODEL.md). */
    if (hs.gate_up)
        sodium_memzero(hs.gate_up, cache * 2 * (size_t)hs.inter_max * sizeof *hs.gate_up);
    if (hs.down)
        sodium_memzero(hs.down, cfg->hidden_size * sizeof *hs.down);
    free(hs.gate_up);
    free(hs.have);
    free(hs.down);
    return st;
}
