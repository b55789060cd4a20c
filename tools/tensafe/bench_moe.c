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

int bench_moe(bench_report *r, int quick)
{
    const char *group = "moe (Qwen3.5-35B-A3B layer, per token)";
    tsafe_moe_config cfg;
    tsafe_status st;
    if ((st = tsafe_moe_config_preset("qwen3.5-35b-a3b", &cfg)) != TSAFE_OK)
        return tool_fail("bench moe: config", st);
    int tokens = quick ? 3 : 9;
    tsafe_moe_layer_options lo = {0, TSAFE_MOE_WEIGHTS_LAZY};
    moe_case c;
    memset(&c, 0, sizeof c);
    tsafe_lora_plan ph, pa;
    tsafe_lora_local *lh = NULL, *la = NULL;
    tsafe_lora_pair pairh = {0}, paira = {0};
    tsafe_lora_site **sites_local = NULL, **sites_tp = NULL;
    tsafe_moe_lora *lora_tp = NULL;
    float *hs = det((size_t)tokens * cfg.hidden_size, 2.0, 99);
    c.out = malloc(cfg.hidden_size * sizeof *c.out);
    size_t nslots = ((size_t)cfg.n_experts + 1) * 3;
    sites_local = calloc(nslots, sizeof *sites_local);
    sites_tp = calloc(nslots, sizeof *sites_tp);
    int rc = 1;
    if (!hs || !c.out || !sites_local || !sites_tp) {
        rc = tool_fail("bench moe", TSAFE_E_NOMEM);
        goto out;
    }
    if ((st = tsafe_moe_layer_create_random_ex(&cfg, 7, &lo, &c.layer)) != TSAFE_OK ||
        (st = tsafe_lora_plan_auto(cfg.hidden_size, RANK, 8.0, 0.05, 1e-6, &ph)) != TSAFE_OK ||
        (st = tsafe_lora_plan_auto(cfg.expert_intermediate, RANK, 8.0, 0.05, 1e-6, &pa)) != TSAFE_OK ||
        (st = tsafe_lora_local_create(&ph, NULL, &lh)) != TSAFE_OK ||
        (st = tsafe_lora_local_create(&pa, NULL, &la)) != TSAFE_OK ||
        (st = tsafe_lora_client_create(&ph, NULL, &pairh.client)) != TSAFE_OK ||
        (st = tsafe_lora_server_create(&ph, &pairh.server)) != TSAFE_OK ||
        (st = tsafe_lora_client_create(&pa, NULL, &paira.client)) != TSAFE_OK ||
        (st = tsafe_lora_server_create(&pa, &paira.server)) != TSAFE_OK ||
        (st = tsafe_lora_local_use_backend(lh, bench_backend)) != TSAFE_OK ||
        (st = tsafe_lora_local_use_backend(la, bench_backend)) != TSAFE_OK ||
        (st = tsafe_lora_pair_use_backend(&pairh, bench_backend)) != TSAFE_OK ||
        (st = tsafe_lora_pair_use_backend(&paira, bench_backend)) != TSAFE_OK ||
        (st = tsafe_moe_lora_create(c.layer, &c.lora)) != TSAFE_OK ||
        (st = tsafe_moe_lora_create(c.layer, &lora_tp)) != TSAFE_OK) {
        rc = tool_fail("bench moe: setup", st);
        goto out;
    }
    double plain = 0, local = 0, two = 0;
    char params[96];
    snprintf(params, sizeof params, "256 experts top-8+shared r=%d %s", RANK, ph.name);
    for (int t = 0; t < tokens; t++) {
        tsafe_moe_route route;
        c.h = hs + (size_t)t * cfg.hidden_size;
        if ((st = tsafe_moe_layer_route(c.layer, c.h, 1, &route)) != TSAFE_OK ||
            (st = attach(c.lora, &cfg, &route, tsafe_lora_local_context(lh),
                         tsafe_lora_local_context(la), &ph, &pa, sites_local)) != TSAFE_OK ||
            (st = attach(lora_tp, &cfg, &route, tsafe_lora_server_context(pairh.server),
                         tsafe_lora_server_context(paira.server), &ph, &pa, sites_tp)) != TSAFE_OK) {
            rc = tool_fail("bench moe: sites", st);
            goto out;
        }
        run_plain_layer(&c); /* materialise this token's experts (not timed) */
        plain += bench_median_us(run_plain_layer, &c, 0, quick ? 3 : 7);
        c.eh = tsafe_lora_engine_local(lh);
        c.ea = tsafe_lora_engine_local(la);
        local += bench_median_us(run_lora_layer, &c, 0, quick ? 1 : 3);
        tsafe_moe_lora *keep = c.lora;
        c.lora = lora_tp;
        c.eh = tsafe_lora_engine_two_party(&pairh);
        c.ea = tsafe_lora_engine_two_party(&paira);
        two += bench_median_us(run_lora_layer, &c, 0, quick ? 1 : 3);
        c.lora = keep;
    }
    if (c.failed) {
        rc = tool_fail("bench moe: forward", TSAFE_E_STATE);
        goto out;
    }
    plain /= tokens;
    local /= tokens;
    two /= tokens;
    char note[96];
    bench_report_add(r, group, "plaintext layer (no LoRA)", params, plain, "OpenBLAS, 1 thread");
    snprintf(note, sizeof note, "HE share %.0f%%", 100.0 * (local - plain) / local);
    bench_report_add(r, group, "layer + expert HE-LoRA, local", params, local, note);
    snprintf(note, sizeof note, "HE share %.0f%%", 100.0 * (two - plain) / two);
    bench_report_add(r, group, "layer + expert HE-LoRA, plain ZeRo-MOAI", params, two, note);
    rc = 0;
out:
    if (sites_local)
        for (size_t i = 0; i < nslots; i++)
            tsafe_lora_site_free(sites_local[i]);
    if (sites_tp)
        for (size_t i = 0; i < nslots; i++)
            tsafe_lora_site_free(sites_tp[i]);
    free(sites_local);
    free(sites_tp);
    tsafe_moe_lora_free(c.lora);
    tsafe_moe_lora_free(lora_tp);
    tsafe_lora_local_free(lh);
    tsafe_lora_local_free(la);
    tsafe_lora_client_free(pairh.client);
    tsafe_lora_server_free(pairh.server);
    tsafe_lora_client_free(paira.client);
    tsafe_lora_server_free(paira.server);
    tsafe_moe_layer_free(c.layer);
    free(hs);
    free(c.out);
    return rc;
}
