/* `tensafe bench moe`: per-token time of one Qwen3.5-35B-A3B-shaped MoE
 * layer (256 experts, top-8 + gated shared expert, synthetic weights) in
 * plaintext, and with rank-32 HE-LoRA on gate/up/down of the routed experts
 * (local and plain ZeRo-MOAI two-party), with the HE share of the time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "commands.h"
#include "tensafe/lora_two_party.h"
#include "tensafe/moe_lora.h"

#define RANK 32

typedef struct {
    tsafe_moe_layer *layer;
    tsafe_moe_lora *lora;
    tsafe_lora_engine eh, ea;
    const float *h;
    float *out;
    int failed;
} moe_case;

static void run_plain_layer(void *arg)
{
    moe_case *c = arg;
    if (tsafe_moe_layer_forward(c->layer, c->h, 1, c->out, NULL) != TSAFE_OK)
        c->failed = 1;
}

static void run_lora_layer(void *arg)
{
    moe_case *c = arg;
    if (tsafe_moe_lora_forward(c->layer, c->lora, &c->eh, &c->ea, c->h, 1, c->out, NULL,
                               NULL) != TSAFE_OK)
        c->failed = 1;
}

static float *det(size_t n, double amp, uint64_t s)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)(amp * ((double)(s >> 11) * 0x1p-52 - 1.0));
    }
    return v;
}

/* Sites for every expert (and the shared one) routed to by token h. */
static tsafe_status attach(tsafe_moe_lora *lora, const tsafe_moe_config *cfg,
                           const tsafe_moe_route *r, const tsafe_context *ch,
                           const tsafe_context *ca, const tsafe_lora_plan *ph,
                           const tsafe_lora_plan *pa, tsafe_lora_site **sites)
{
    uint32_t d = cfg->hidden_size, I = cfg->expert_intermediate;
    for (uint32_t i = 0; i <= r->k; i++) {
        int32_t e = i < r->k ? (int32_t)r->expert[i] : TSAFE_MOE_SHARED;
        size_t slot = e == TSAFE_MOE_SHARED ? cfg->n_experts : (size_t)e;
        for (int p = 0; p < 3; p++) {
            if (sites[slot * 3 + p])
                continue;
            uint32_t in = p == 2 ? I : d, out = p == 2 ? d : I;
            float *A = det((size_t)RANK * in, 1.0 / sqrt(in), slot * 3 + p + 1);
            float *B = det((size_t)out * RANK, 0.02, slot * 3 + p + 7777);
            tsafe_status st = A && B ? tsafe_lora_site_create(p == 2 ? ca : ch, p == 2 ? pa : ph,
                                                              A, B, out, 2.0f,
                                                              &sites[slot * 3 + p])
                                     : TSAFE_E_NOMEM;
            free(A);
            free(B);
            if (st == TSAFE_OK)
                st = tsafe_moe_lora_set_site(lora, e, (tsafe_moe_proj)p, sites[slot * 3 + p]);
            if (st != TSAFE_OK)
                return st;
        }
    }
    return TSAFE_OK;
}

/* The HE side: a plan, a local engine and a two-party pair for the hidden
 * width (h: gate/up read x of width d) and the expert width (a: down reads
 * the expert's activation), all on the benchmark's backend. */
typedef struct {
    tsafe_lora_plan ph, pa;
    tsafe_lora_local *lh, *la;
    tsafe_lora_pair pairh, paira;
} moe_he;

static tsafe_status he_setup(const tsafe_moe_config *cfg, moe_he *he)
{
    tsafe_status st;
    if ((st = tsafe_lora_plan_auto(cfg->hidden_size, RANK, 8.0, 0.05, 1e-6, &he->ph)) ||
        (st = tsafe_lora_plan_auto(cfg->expert_intermediate, RANK, 8.0, 0.05, 1e-6, &he->pa)) ||
        (st = tsafe_lora_local_create(&he->ph, NULL, &he->lh)) ||
        (st = tsafe_lora_local_create(&he->pa, NULL, &he->la)) ||
        (st = tsafe_lora_client_create(&he->ph, NULL, &he->pairh.client)) ||
        (st = tsafe_lora_server_create(&he->ph, &he->pairh.server)) ||
        (st = tsafe_lora_client_create(&he->pa, NULL, &he->paira.client)) ||
        (st = tsafe_lora_server_create(&he->pa, &he->paira.server)) ||
        (st = tsafe_lora_local_use_backend(he->lh, bench_backend)) ||
        (st = tsafe_lora_local_use_backend(he->la, bench_backend)) ||
        (st = tsafe_lora_pair_use_backend(&he->pairh, bench_backend)) ||
        (st = tsafe_lora_pair_use_backend(&he->paira, bench_backend)))
        return st;
    return TSAFE_OK;
}

static void he_free(moe_he *he)
{
    tsafe_lora_local_free(he->lh);
    tsafe_lora_local_free(he->la);
    tsafe_lora_client_free(he->pairh.client);
    tsafe_lora_server_free(he->pairh.server);
    tsafe_lora_client_free(he->paira.client);
    tsafe_lora_server_free(he->paira.server);
}

/* Per-token sites: one set on the local engines' contexts, one on the
 * two-party servers' (3 projections of each expert and the shared one). */
typedef struct {
    tsafe_moe_lora *lora_tp;
    tsafe_lora_site **local, **tp;
    size_t n;
} moe_sites;

static void sites_free(moe_sites *ms)
{
    for (size_t i = 0; i < ms->n; i++) {
        tsafe_lora_site_free(ms->local ? ms->local[i] : NULL);
        tsafe_lora_site_free(ms->tp ? ms->tp[i] : NULL);
    }
    free(ms->local);
    free(ms->tp);
    tsafe_moe_lora_free(ms->lora_tp);
}

/* Sums over tokens of each configuration's median (µs). */
typedef struct {
    double plain, local, two;
} moe_sums;

/* Token c->h: route it, attach its experts' sites, then time the plain
 * layer (after one untimed run that materialises its experts), the layer
 * with local HE-LoRA and with two-party HE-LoRA. */
static tsafe_status bench_token(moe_case *c, const tsafe_moe_config *cfg, moe_he *he,
                                moe_sites *ms, int quick, moe_sums *sum)
{
    tsafe_moe_route route;
    tsafe_status st;
    if ((st = tsafe_moe_layer_route(c->layer, c->h, 1, &route)) != TSAFE_OK ||
        (st = attach(c->lora, cfg, &route, tsafe_lora_local_context(he->lh),
                     tsafe_lora_local_context(he->la), &he->ph, &he->pa, ms->local)) != TSAFE_OK ||
        (st = attach(ms->lora_tp, cfg, &route, tsafe_lora_server_context(he->pairh.server),
                     tsafe_lora_server_context(he->paira.server), &he->ph, &he->pa,
                     ms->tp)) != TSAFE_OK)
        return st;
    run_plain_layer(c); /* materialise this token's experts (not timed) */
    sum->plain += bench_median_us(run_plain_layer, c, 0, quick ? 3 : 7);
    c->eh = tsafe_lora_engine_local(he->lh);
    c->ea = tsafe_lora_engine_local(he->la);
    sum->local += bench_median_us(run_lora_layer, c, 0, quick ? 1 : 3);
    tsafe_moe_lora *keep = c->lora;
    c->lora = ms->lora_tp;
    c->eh = tsafe_lora_engine_two_party(&he->pairh);
    c->ea = tsafe_lora_engine_two_party(&he->paira);
    sum->two += bench_median_us(run_lora_layer, c, 0, quick ? 1 : 3);
    c->lora = keep;
    return TSAFE_OK;
}

static void report(bench_report *r, const char *params, const moe_sums *sum, int tokens)
{
    const char *group = "moe (Qwen3.5-35B-A3B layer, per token)";
    double plain = sum->plain / tokens, local = sum->local / tokens, two = sum->two / tokens;
    char note[96];
    bench_report_add(r, group, "plaintext layer (no LoRA)", params, plain, "OpenBLAS, 1 thread");
    snprintf(note, sizeof note, "HE share %.0f%%", 100.0 * (local - plain) / local);
    bench_report_add(r, group, "layer + expert HE-LoRA, local", params, local, note);
    snprintf(note, sizeof note, "HE share %.0f%%", 100.0 * (two - plain) / two);
    bench_report_add(r, group, "layer + expert HE-LoRA, plain ZeRo-MOAI", params, two, note);
}

int bench_moe(bench_report *r, int quick)
{
    tsafe_moe_config cfg;
    tsafe_status st;
    if ((st = tsafe_moe_config_preset("qwen3.5-35b-a3b", &cfg)) != TSAFE_OK)
        return tool_fail("bench moe: config", st);
    int tokens = quick ? 3 : 9;
    tsafe_moe_layer_options lo = {0, TSAFE_MOE_WEIGHTS_LAZY};
    moe_case c;
    memset(&c, 0, sizeof c);
    moe_he he;
    memset(&he, 0, sizeof he);
    moe_sites ms = {NULL, NULL, NULL, ((size_t)cfg.n_experts + 1) * 3};
    float *hs = det((size_t)tokens * cfg.hidden_size, 2.0, 99);
    c.out = malloc(cfg.hidden_size * sizeof *c.out);
    ms.local = calloc(ms.n, sizeof *ms.local);
    ms.tp = calloc(ms.n, sizeof *ms.tp);
    int rc = 1;
    if (!hs || !c.out || !ms.local || !ms.tp) {
        rc = tool_fail("bench moe", TSAFE_E_NOMEM);
        goto out;
    }
    if ((st = tsafe_moe_layer_create_random_ex(&cfg, 7, &lo, &c.layer)) != TSAFE_OK ||
        (st = he_setup(&cfg, &he)) != TSAFE_OK ||
        (st = tsafe_moe_lora_create(c.layer, &c.lora)) != TSAFE_OK ||
        (st = tsafe_moe_lora_create(c.layer, &ms.lora_tp)) != TSAFE_OK) {
        rc = tool_fail("bench moe: setup", st);
        goto out;
    }
    moe_sums sum = {0, 0, 0};
    for (int t = 0; t < tokens; t++) {
        c.h = hs + (size_t)t * cfg.hidden_size;
        if ((st = bench_token(&c, &cfg, &he, &ms, quick, &sum)) != TSAFE_OK) {
            rc = tool_fail("bench moe: sites", st);
            goto out;
        }
    }
    if (c.failed) {
        rc = tool_fail("bench moe: forward", TSAFE_E_STATE);
        goto out;
    }
    char params[96];
    snprintf(params, sizeof params, "256 experts top-8+shared r=%d %s", RANK, he.ph.name);
    report(r, params, &sum, tokens);
    rc = 0;
out:
    sites_free(&ms);
    tsafe_moe_lora_free(c.lora);
    he_free(&he);
    tsafe_moe_layer_free(c.layer);
    free(hs);
    free(c.out);
    return rc;
}
