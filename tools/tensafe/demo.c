/* `tensafe demo`: the main job, end to end.
 *
 * One Qwen3.5-35B-A3B-shaped decoder layer (hidden 2048, 256 experts, top-8
 * + a gated shared expert; synthetic weights generated lazily for the
 * experts actually routed to) and a rank-32 PEFT adapter generated
 * deterministically for q/k/v/o and every expert's gate/up/down, written to
 * a temporary PEFT directory and loaded back through the real loader. Then,
 * for each token, in two-party mode (the client holds the CKKS keys, the
 * server only the adapter; they exchange the real message bytes):
 *   q, k, v deltas share one encryption of the attention input,
 *   o's delta runs on the attention output,
 *   the MoE layer runs with expert LoRA on the routed experts only (one
 *   encryption of h for all gate/up adapters, one per routed expert's down).
 * Everything is checked against the plaintext LoRA computed from the same
 * loaded adapter. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h> /* struct option: opts_getopt runs getopt_long */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bench.h"
#include "commands.h"
#include "io.h"
#include "tensafe/tensafe.h"

#define RANK 32
#define ALPHA 64.0
#define MAX_ABS_X 8.0

enum { MODE_SEALED_PRIVATE = 0, MODE_SEALED, MODE_LOCAL, MODE_PLAIN };
static const char *const k_mode_names[] = {"sealed-private", "sealed", "local",
                                           "plain-zero-moai"};

typedef struct {
    int tokens;
    int json;
    int mode;
    const char *params; /* "auto" or a preset name */
    uint64_t seed;
    const char *backend;                  /* --backend name */
    const tsafe_backend_factory *factory; /* its factory */
    int compare;                          /* also run local and plain ZeRo-MOAI */
    int quiet;                            /* no report (a comparison run) */
    int semi_honest;                      /* --semi-honest: sealed mode's opt-in */
    int checked;                          /* --checked-shares (the default) */
    int unchecked;                        /* --unchecked-shares (sealed-private) */
} demo_opts;

/* What one run measured, for the comparison line. */
typedef struct {
    double he_ms;        /* mean over all tokens */
    double first_ms;     /* token 0: it also opens the sessions */
    double steady_ms;    /* mean over tokens 2..n */
    double plain_ms;     /* plaintext path, mean */
    double mb_per_token; /* bytes both ways */
} demo_result;

/* Deterministic generator for the synthetic adapter and inputs (not secret). */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(float *v, size_t n, double amp, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(amp * ((double)(mix(s) >> 11) * 0x1p-52 - 1.0));
}

static int progress_on(void) { return isatty(2); }

static void progress(const char *fmt, int a, int b)
{
    if (!progress_on())
        return;
    fprintf(stderr, "\r");
    fprintf(stderr, fmt, a, b);
    fflush(stderr);
}

/* ------------------------------------------------------------ adapter */

typedef struct {
    const char *name;
    uint32_t in, out;
} module_shape;

static tsafe_status build_adapter(const tsafe_moe_config *cfg, uint64_t seed,
                                  const char *dir)
{
    tsafe_lora_config lc = {RANK, ALPHA, 0, 0};
    tsafe_lora_adapter *ad = NULL;
    tsafe_status st = tsafe_lora_adapter_create(&lc, &ad);
    if (st != TSAFE_OK)
        return st;
    uint32_t d = cfg->hidden_size, hd = cfg->head_dim ? cfg->head_dim : d / cfg->n_heads;
    uint32_t q_out = cfg->n_heads * hd, kv_out = cfg->n_kv_heads * hd, I = cfg->expert_intermediate;
    const module_shape attn[] = {{"q_proj", d, q_out}, {"k_proj", d, kv_out},
                                 {"v_proj", d, kv_out}, {"o_proj", q_out, d}};
    size_t max_elems = (size_t)RANK * (q_out > d ? q_out : d) * 2;
    float *A = malloc(max_elems * sizeof *A), *B = malloc(max_elems * sizeof *B);
    char name[128];
    uint64_t s = seed;
    if (!A || !B) {
        st = TSAFE_E_NOMEM;
        goto out;
    }
    /* PEFT-like statistics: A ~ kaiming-uniform 1/sqrt(in), trained B small */
    for (size_t i = 0; i < 4 && st == TSAFE_OK; i++) {
        fill(A, (size_t)RANK * attn[i].in, 1.0 / sqrt(attn[i].in), &s);
        fill(B, (size_t)attn[i].out * RANK, 0.02, &s);
        snprintf(name, sizeof name, "layers.0.self_attn.%s", attn[i].name);
        st = tsafe_lora_adapter_add_module(ad, name, RANK, attn[i].in, attn[i].out, A, B, ALPHA);
    }
    static const char *proj[3] = {"gate_proj", "up_proj", "down_proj"};
    for (uint32_t e = 0; e < cfg->n_experts && st == TSAFE_OK; e++)
        for (int p = 0; p < 3 && st == TSAFE_OK; p++) {
            uint32_t in = p == 2 ? I : d, outd = p == 2 ? d : I;
            fill(A, (size_t)RANK * in, 1.0 / sqrt(in), &s);
            fill(B, (size_t)outd * RANK, 0.02, &s);
            snprintf(name, sizeof name, "layers.0.mlp.experts.%u.%s", e, proj[p]);
            st = tsafe_lora_adapter_add_module(ad, name, RANK, in, outd, A, B, ALPHA);
        }
    if (st == TSAFE_OK)
        st = tsafe_lora_adapter_save_peft(ad, dir, TSAFE_DTYPE_BF16);
out:
    free(A);
    free(B);
    tsafe_lora_adapter_free(ad);
    return st;
}

/* -------------------------------------------------------------- state */

typedef struct {
    tsafe_lora_plan plan;      /* CKKS modes only */
    tsafe_lora_pair pair;      /* plain ZeRo-MOAI two-party */
    tsafe_lora_local *local;   /* local mode */
    tsafe_sealed_pair *sealed; /* sealed and sealed-private: no CKKS context */
    tsafe_lora_module_engine engine;
} party;

typedef struct {
    demo_opts o;
    tsafe_moe_config cfg;
    tsafe_moe_layer *layer;
    tsafe_lora_adapter *adapter;
    party h, o_in, act;        /* inputs of size hidden, q_out, expert dim */
    tsafe_lora_module *attn[4];  /* q k v o */
    tsafe_lora_module **expert;  /* [n_experts * 3], made for routed experts */
    tsafe_moe_lora *mlora;
    tsafe_lora_stats attn_stats;
    tsafe_moe_lora_stats moe_stats;
    uint32_t experts_with_sites;
} demo;

static tsafe_status party_open(party *p, int mode, int unchecked, const tsafe_backend_factory *f)
{
    tsafe_status st;
    if (mode == MODE_SEALED || mode == MODE_SEALED_PRIVATE) {
        /* cmd_demo let sealed through only with --semi-honest, and
         * --unchecked-shares only with sealed-private */
        tsafe_sealed_opts so = {.semi_honest = mode == MODE_SEALED,
                                .unchecked_shares = (uint32_t)unchecked};
        /* the demo checks exactness: sealed runs without DP noise here
         * (tensafe client adds it by default) */
        if ((st = tsafe_sealed_pair_create(mode == MODE_SEALED ? TSAFE_SEALED
                                                               : TSAFE_SEALED_PRIVATE,
                                           &so, NULL, 1, &p->sealed)) != TSAFE_OK ||
            (st = tsafe_sealed_pair_use_backend(p->sealed, f)) != TSAFE_OK)
            return st;
        p->engine = tsafe_lora_module_engine_sealed(p->sealed);
        return TSAFE_OK;
    }
    if (mode == MODE_LOCAL) {
        if ((st = tsafe_lora_local_create(&p->plan, NULL, &p->local)) != TSAFE_OK ||
            (st = tsafe_lora_local_use_backend(p->local, f)) != TSAFE_OK)
            return st;
        p->engine = tsafe_lora_module_engine_local(p->local);
        return TSAFE_OK;
    }
    if ((st = tsafe_lora_client_create(&p->plan, NULL, &p->pair.client)) != TSAFE_OK ||
        (st = tsafe_lora_server_create(&p->plan, &p->pair.server)) != TSAFE_OK ||
        (st = tsafe_lora_pair_use_backend(&p->pair, f)) != TSAFE_OK)
        return st;
    p->engine = tsafe_lora_module_engine_two_party(&p->pair);
    return TSAFE_OK;
}

static void party_close(party *p)
{
    tsafe_sealed_pair_free(p->sealed);
    tsafe_lora_client_free(p->pair.client);
    tsafe_lora_server_free(p->pair.server);
    tsafe_lora_local_free(p->local);
}

/* The adapter's module `name`, prepared by p's engine now (its CKKS site
 * or sealed site: adapter load time, not the first token's). */
static tsafe_status module_for(demo *D, party *p, const char *name, tsafe_lora_module **out)
{
    size_t idx;
    tsafe_lora_module_info m;
    tsafe_status st = tsafe_lora_adapter_find(D->adapter, name, &idx);
    if (st == TSAFE_OK)
        st = tsafe_lora_adapter_module(D->adapter, idx, &m);
    if (st == TSAFE_OK)
        st = tsafe_lora_module_from_info(&m, out);
    const tsafe_lora_module *one = *out;
    return st == TSAFE_OK ? tsafe_lora_module_engine_prepare(&p->engine, &one, 1) : st;
}

static double max_abs_a(const tsafe_lora_adapter *ad, size_t in_dim)
{
    double m = 0;
    for (size_t i = 0; i < tsafe_lora_adapter_module_count(ad); i++) {
        tsafe_lora_module_info info;
        if (tsafe_lora_adapter_module(ad, i, &info) != TSAFE_OK || info.in_dim != in_dim)
            continue;
        for (size_t k = 0; k < info.rank * info.in_dim; k++)
            m = fmax(m, fabs(info.A[k]));
    }
    return m;
}

static tsafe_status make_plan(const demo *D, uint32_t d_in, party *p)
{
    double a = max_abs_a(D->adapter, d_in);
    if (!strcmp(D->o.params, "auto"))
        return tsafe_lora_plan_auto(d_in, RANK, MAX_ABS_X, a, 1e-6, &p->plan);
    return tsafe_lora_plan_preset(D->o.params, d_in, RANK, MAX_ABS_X, a, &p->plan);
}

/* The three modules of every expert some token is routed to. */
static tsafe_status expert_modules(demo *D, const tsafe_moe_route *routes, int n_tokens)
{
    static const char *proj[3] = {"gate_proj", "up_proj", "down_proj"};
    char name[128];
    tsafe_status st;
    for (int t = 0; t < n_tokens; t++)
        for (uint32_t i = 0; i < routes[t].k; i++) {
            uint32_t e = routes[t].expert[i];
            if (D->expert[e * 3])
                continue;
            for (int p = 0; p < 3; p++) {
                snprintf(name, sizeof name, "layers.0.mlp.experts.%u.%s", e, proj[p]);
                if ((st = module_for(D, p == 2 ? &D->act : &D->h, name, &D->expert[e * 3 + p])) !=
                        TSAFE_OK ||
                    (st = tsafe_moe_lora_set_module(D->mlora, (int32_t)e, (tsafe_moe_proj)p,
                                                    D->expert[e * 3 + p])) != TSAFE_OK)
                    return st;
            }
            D->experts_with_sites++;
        }
    return TSAFE_OK;
}

/* ---------------------------------------------------------------- run */

typedef struct {
    double he_us, plain_us;
    double first_he_us; /* token 0 alone: it also opens the sessions */
    double err_num, err_den;
} totals;

static void accumulate_err(totals *T, const float *he, const float *plain, const float *base,
                           size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double r = base ? (double)plain[i] - base[i] : plain[i];
        T->err_num += ((double)he[i] - plain[i]) * ((double)he[i] - plain[i]);
        T->err_den += r * r;
    }
}

static tsafe_status run_tokens(demo *D, totals *T)
{
    uint32_t d = D->cfg.hidden_size;
    uint32_t q_out = tsafe_lora_module_d_out(D->attn[0]);
    uint32_t kv_out = tsafe_lora_module_d_out(D->attn[1]);
    int n = D->o.tokens;
    size_t sz_out[4] = {q_out, kv_out, kv_out, d};
    float *x = malloc((size_t)n * d * sizeof *x), *ao = malloc((size_t)n * q_out * sizeof *ao);
    float *dh[4], *dp[4], *moe_he = malloc(d * sizeof(float)), *moe_plain = malloc(d * sizeof(float));
    float *moe_base = malloc(d * sizeof(float));
    tsafe_moe_route *routes = calloc((size_t)n, sizeof *routes);
    tsafe_status st = TSAFE_E_NOMEM;
    for (int i = 0; i < 4; i++) {
        dh[i] = malloc(sz_out[i] * sizeof(float));
        dp[i] = malloc(sz_out[i] * sizeof(float));
    }
    if (!x || !ao || !moe_he || !moe_plain || !moe_base || !routes || !dh[0] || !dh[1] ||
        !dh[2] || !dh[3] || !dp[0] || !dp[1] || !dp[2] || !dp[3])
        goto out;
    uint64_t s = D->o.seed ^ 0x5151;
    fill(x, (size_t)n * d, 2.0, &s);
    fill(ao, (size_t)n * q_out, 2.0, &s);
    /* route every token first: modules exist only for routed experts */
    if ((st = tsafe_moe_layer_route(D->layer, x, (size_t)n, routes)) != TSAFE_OK ||
        (st = expert_modules(D, routes, n)) != TSAFE_OK)
        goto out;
    tsafe_lora_module_engine plain = tsafe_lora_module_engine_plain();
    for (int t = 0; t < n && st == TSAFE_OK; t++) {
        const float *xt = x + (size_t)t * d, *at = ao + (size_t)t * q_out;
        const tsafe_lora_module *qkv[3] = {D->attn[0], D->attn[1], D->attn[2]};
        const tsafe_lora_module *o[1] = {D->attn[3]};
        /* base layer first: it also materialises the routed experts' lazily
         * generated weights, which must not be timed as HE or LoRA work */
        if ((st = tsafe_moe_layer_forward(D->layer, xt, 1, moe_base, NULL)) != TSAFE_OK)
            break;
        double t0 = bench_now_us();
        /* HE path: q,k,v share one encryption; o; MoE with expert LoRA */
        if ((st = tsafe_lora_module_engine_run(&D->h.engine, qkv, 3, xt, dh, &D->attn_stats)) !=
                TSAFE_OK ||
            (st = tsafe_lora_module_engine_run(&D->o_in.engine, o, 1, at, dh + 3,
                                               &D->attn_stats)) != TSAFE_OK ||
            (st = tsafe_moe_lora_forward_modules(D->layer, D->mlora, &D->h.engine, &D->act.engine,
                                                 xt, 1, moe_he, NULL, &D->moe_stats)) != TSAFE_OK)
            break;
        double t1 = bench_now_us();
        /* plaintext path: the same LoRA from the same loaded adapter */
        if ((st = tsafe_lora_module_engine_run(&plain, qkv, 3, xt, dp, NULL)) != TSAFE_OK ||
            (st = tsafe_lora_module_engine_run(&plain, o, 1, at, dp + 3, NULL)) != TSAFE_OK ||
            (st = tsafe_moe_lora_forward_modules(D->layer, D->mlora, &plain, &plain, xt, 1,
                                                 moe_plain, NULL, NULL)) != TSAFE_OK)
            break;
        double t2 = bench_now_us();
        T->he_us += t1 - t0;
        if (t == 0)
            T->first_he_us = t1 - t0;
        T->plain_us += t2 - t1;
        for (int i = 0; i < 4; i++)
            accumulate_err(T, dh[i], dp[i], NULL, sz_out[i]);
        accumulate_err(T, moe_he, moe_plain, moe_base, d);
        progress("tensafe demo: token %d/%d", t + 1, n);
    }
    if (progress_on())
        fprintf(stderr, "\n");
out:
    for (int i = 0; i < 4; i++) {
        free(dh[i]);
        free(dp[i]);
    }
    free(x); free(ao); free(moe_he); free(moe_plain); free(moe_base); free(routes);
    return st;
}

/* ------------------------------------------------------------- report */

static void add_stats(tsafe_lora_stats *a, const tsafe_lora_stats *b)
{
    a->encrypt_us += b->encrypt_us;
    a->products_us += b->products_us;
    a->reduce_us += b->reduce_us;
    a->decrypt_us += b->decrypt_us;
    a->sums_us += b->sums_us;
    a->bu_us += b->bu_us;
    a->bytes_up += b->bytes_up;
    a->bytes_down += b->bytes_down;
    a->he_ops += b->he_ops;
    a->tokens += b->tokens;
}

/* The per-token figures of a run (the report and the comparison). */
static demo_result summarize(const demo *D, const totals *T)
{
    int n = D->o.tokens;
    tsafe_lora_stats all = D->attn_stats;
    add_stats(&all, &D->moe_stats.he);
    demo_result r;
    r.he_ms = T->he_us / n / 1000.0;
    r.first_ms = T->first_he_us / 1000.0;
    r.steady_ms = n > 1 ? (T->he_us - T->first_he_us) / (n - 1) / 1000.0 : r.first_ms;
    r.plain_ms = T->plain_us / n / 1000.0;
    r.mb_per_token = (double)(all.bytes_up + all.bytes_down) / 1e6 / n;
    return r;
}

/* sealed-private's checked shares (--unchecked-shares leaves them out):
 * the header's note, and the JSON value (NULL: no key, other modes). */
static const char *checked_note(const demo *D)
{
    return D->o.mode != MODE_SEALED_PRIVATE ? ""
           : D->o.unchecked                 ? " (unchecked shares: trusted clients only)"
                                            : " (checked shares)";
}

static json_t *checked_json(const demo *D)
{
    return D->o.mode == MODE_SEALED_PRIVATE ? json_boolean(!D->o.unchecked) : NULL;
}

static void report(const demo *D, const totals *T, const demo_result *R, double setup_s)
{
    int n = D->o.tokens;
    tsafe_lora_stats all = D->attn_stats;
    add_stats(&all, &D->moe_stats.he);
    double rel = sqrt(T->err_num / T->err_den);
    double per_token_ms = R->he_ms, plain_ms = R->plain_ms;
    double first_ms = R->first_ms, steady_ms = R->steady_ms;
    const char *mode = k_mode_names[D->o.mode];
    double bound = D->o.mode <= MODE_SEALED ? 1e-3 : 1e-5;
    uint64_t sites = 4 * (uint64_t)n + D->moe_stats.expert_runs * 2 + D->moe_stats.engine_calls_act;
    if (D->o.json) {
        json_t *j = json_pack(
            "{s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:{s:s, s:s, s:s}, s:s, s:I, s:I, s:I, s:I, s:I,"
            " s:{s:f, s:f, s:f, s:f, s:f, s:f}, s:f, s:f, s:f, s:o*}",
            "mode", mode, "tokens", n, "rel_error", rel, "per_token_ms", per_token_ms,
            "plaintext_ms", plain_ms, "tokens_per_s", 1000.0 / per_token_ms,
            "he_over_plain", per_token_ms / plain_ms, "params", "attention_and_gate_up",
            D->h.plan.name, "o_proj", D->o_in.plan.name, "expert_down", D->act.plan.name,
            "model", D->cfg.name, "bytes_up", (json_int_t)all.bytes_up, "bytes_down",
            (json_int_t)all.bytes_down, "he_products", (json_int_t)all.he_ops, "sites_evaluated",
            (json_int_t)sites, "experts_with_adapters_touched", (json_int_t)D->experts_with_sites,
            "stage_ms_per_token", "encrypt", all.encrypt_us / n / 1000, "products",
            all.products_us / n / 1000, "serialize", all.reduce_us / n / 1000, "decrypt",
            all.decrypt_us / n / 1000, "sums", all.sums_us / n / 1000, "B_u",
            all.bu_us / n / 1000, "setup_s", setup_s, "first_token_ms", first_ms,
            "steady_per_token_ms", steady_ms, "checked_shares", checked_json(D));
        char *txt = json_dumps(j, JSON_INDENT(2));
        if (txt)
            puts(txt);
        free(txt);
        json_decref(j);
        return;
    }
    printf("TenSafe-HE demo -- %s layer (hidden %u, %u experts, top-%u + shared), %s mode%s\n",
           D->cfg.name, D->cfg.hidden_size, D->cfg.n_experts, D->cfg.top_k, mode, checked_note(D));
    printf("adapter: rank %d PEFT (BF16), q/k/v/o + gate/up/down of all %u experts, loaded "
           "from a temporary PEFT directory\n", RANK, D->cfg.n_experts);
    if (D->o.mode <= MODE_SEALED) /* the CKKS plans below are not used */
        printf("params: BFV plans the client derives per input width (hidden, attention "
               "output, expert intermediate): tsafe_sealed_plan_derive, default widths\n");
    else
        printf("params: q/k/v + expert gate/up %s | o_proj %s | expert down %s%s\n",
               D->h.plan.name, D->o_in.plan.name, D->act.plan.name,
               D->h.plan.response_level < D->h.plan.level ? " (responses rescaled to 1 limb)"
                                                          : "");
    printf("tokens %d: %llu adapter sites evaluated under HE, %u of %u experts' adapters "
           "touched (routed ones only)\n\n", n, (unsigned long long)sites,
           D->experts_with_sites, D->cfg.n_experts);
    printf("%-28s %12s %8s\n", "stage (per token)", "ms", "share");
    const struct { const char *name; double us; } stage[] = {
        {"encrypt x (client)", all.encrypt_us},    {"ct x pt products (server)", all.products_us},
        {"seal/serialize (server)", all.reduce_us}, {"decrypt + parse (client)", all.decrypt_us},
        {"sums / shares (client)", all.sums_us},   {"B u / round 2 (server)", all.bu_us}};
    double sum = 0;
    for (size_t i = 0; i < 6; i++)
        sum += stage[i].us;
    for (size_t i = 0; i < 6; i++)
        printf("%-28s %12.3f %7.1f%%\n", stage[i].name, stage[i].us / n / 1000,
               100 * stage[i].us / sum);
    printf("%-28s %12.3f   (first token %.1f ms: it opens the sessions; tokens 2-%d: %.1f ms)\n",
           "HE path total", per_token_ms, first_ms, n, steady_ms);
    printf("%-28s %12.3f   (same LoRA in plaintext, incl. the MoE layer)\n", "plaintext path",
           plain_ms);
    printf("\nHE tokens/s: %.1f   HE/plaintext: %.1fx   bytes up %.2f MB, down %.2f MB per token\n",
           1000.0 / per_token_ms, per_token_ms / plain_ms, all.bytes_up / 1e6 / n,
           all.bytes_down / 1e6 / n);
    printf("error vs plaintext LoRA: relative L2 %.3g (%s %.0e)\n", rel,
           rel <= bound ? "ok, <=" : "ABOVE", bound);
    printf("setup (adapter generation, PEFT write + load, keys, plaintext encoding): %.1f s\n",
           setup_s);
    const char *tun = getenv("GLIBC_TUNABLES");
    int thp = tun && (strstr(tun, "glibc.malloc.hugetlb=1") || strstr(tun, "glibc.malloc.hugetlb=2"));
    printf("memory: %s\n",
           thp ? "huge pages for the heap (GLIBC_TUNABLES glibc.malloc.hugetlb)"
               : "4 KiB pages; GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (as `make demo` sets) "
                 "backs the sites' operands with huge pages (README, Performance)");
}

static void remove_dir(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

static int demo_run(const demo_opts *opts, demo_result *r);

/* --compare: the same tokens through local and plain ZeRo-MOAI, and the
 * ratios to the main run's figures m. */
static int compare_modes(const demo_opts *main_o, const demo_result *m)
{
    /* the same tokens through local and plain ZeRo-MOAI, for the ratios */
    static const int others[2] = {MODE_LOCAL, MODE_PLAIN};
    demo_result other[2];
    int ran[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        if (others[k] == main_o->mode)
            continue;
        demo_opts o = *main_o;
        o.mode = others[k];
        o.quiet = 1;
        if (progress_on())
            fprintf(stderr, "tensafe demo: the same tokens in %s mode, for the ratios\n",
                    k_mode_names[o.mode]);
        if (demo_run(&o, &other[k]) != 0)
            return 1;
        ran[k] = 1;
    }
    printf("\nthe same tokens in one run on this machine, ms per token (HE: tokens 2-%d; "
           "plaintext: all):\n", main_o->tokens);
    printf("  %-16s %8.1f   bytes both ways %.2f MB\n", k_mode_names[main_o->mode],
           m->steady_ms, m->mb_per_token);
    for (int k = 0; k < 2; k++)
        if (ran[k])
            printf("  %-16s %8.1f   bytes both ways %.2f MB\n", k_mode_names[others[k]],
                   other[k].steady_ms, other[k].mb_per_token);
    printf("  %-16s %8.1f\n", "plaintext", m->plain_ms);
    printf("  %s / plaintext %.1fx", k_mode_names[main_o->mode], m->steady_ms / m->plain_ms);
    for (int k = 0; k < 2; k++)
        if (ran[k])
            printf(", / %s %.2fx", k_mode_names[others[k]], m->steady_ms / other[k].steady_ms);
    printf("\n");
    return 0;
}

static const char k_demo_help[] =
    "usage: tensafe demo [--tokens N] [--mode MODE [--semi-honest]] [--unchecked-shares]\n"
    "                    [--params auto|PRESET] [--seed S] [--backend cpu|cuda]\n"
    "                    [--compare] [--json]\n"
    "Runs HE-LoRA on q, k, v, o and the routed experts of one\n"
    "Qwen3.5-35B-A3B-shaped layer and compares with plaintext LoRA.\n"
    "MODE: sealed-private (default; the client learns only delta, the server\n"
    "nothing), sealed (the server learns u; run here without DP noise;\n"
    "it protects only against peers that follow the protocol, so it needs\n"
    "--semi-honest: docs/THREAT_MODEL.md),\n"
    "local (one process holds the key: protects nothing), plain-zero-moai\n"
    "(the seeds' two-party algorithm: the client reads the adapter).\n"
    "--unchecked-shares: sealed-private without its checked shares (faster;\n"
    "only for clients that follow the protocol: docs/MALICIOUS_CLIENT.md).\n"
    "--params applies to local and plain-zero-moai (CKKS); the sealed\n"
    "modes derive their own parameters. --backend: where the servers' ring\n"
    "work runs (default cpu; cuda needs a CUDA build and a device).\n"
    "--compare: then run the same tokens in local and plain-zero-moai\n"
    "mode and print the ratios (text output only; make demo does this).\n";

enum {
    D_TOKENS = 256, D_MODE, D_SEMI_HONEST, D_CHECKED, D_UNCHECKED, D_LOCAL, D_PARAMS, D_SEED, D_BACKEND, D_COMPARE,
    D_JSON
};

static const struct option k_demo_long[] = {
    {"tokens", required_argument, NULL, D_TOKENS},
    {"mode", required_argument, NULL, D_MODE},
    {"semi-honest", no_argument, NULL, D_SEMI_HONEST},
    {"checked-shares", no_argument, NULL, D_CHECKED},
    {"unchecked-shares", no_argument, NULL, D_UNCHECKED},
    {"local", no_argument, NULL, D_LOCAL}, /* the old spelling of --mode local */
    {"params", required_argument, NULL, D_PARAMS},
    {"seed", required_argument, NULL, D_SEED},
    {"backend", required_argument, NULL, D_BACKEND},
    {"compare", no_argument, NULL, D_COMPARE},
    {"json", no_argument, NULL, D_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* One option's value into o (0, 2 after a usage line on a bad value). */
static int demo_opt(void *ctx, int c, const char *v)
{
    demo_opts *o = ctx;
    char *end = NULL;
    switch (c) {
    case D_TOKENS: {
        errno = 0;
        long t = strtol(v, &end, 10);
        if (errno || end == v || *end || t < 1 || t > 4096)
            return tool_usage("demo: --tokens must be 1..4096");
        o->tokens = (int)t;
        return 0;
    }
    case D_MODE:
        for (int k = 0; k < 4; k++)
            if (!strcmp(v, k_mode_names[k])) {
                o->mode = k;
                return 0;
            }
        return tool_usage("demo: --mode must be sealed-private, sealed, local or "
                          "plain-zero-moai, not '%s'",
                          v);
    case D_SEMI_HONEST: o->semi_honest = 1; return 0;
    case D_CHECKED: o->checked = 1; return 0;
    case D_UNCHECKED: o->unchecked = 1; return 0;
    case D_LOCAL: o->mode = MODE_LOCAL; return 0;
    case D_PARAMS: o->params = v; return 0;
    case D_SEED:
        /* decimal or 0x hex, the whole of it */
        errno = 0;
        o->seed = isdigit((unsigned char)v[0]) ? strtoull(v, &end, 0) : 0;
        if (!isdigit((unsigned char)v[0]) || errno || *end)
            return tool_usage("demo: --seed must be a non-negative integer, not '%s'", v);
        return 0;
    case D_BACKEND: o->backend = v; return 0;
    case D_COMPARE: o->compare = 1; return 0;
    case D_JSON: o->json = 1; return 0;
    }
    return 2;
}

int cmd_demo(int argc, char **argv)
{
    demo_opts o = {.tokens = 24, .params = "auto", .seed = 2026, .backend = "cpu"};
    int rc = opts_getopt("demo", argc, argv, k_demo_long, demo_opt, &o);
    if (rc == OPTS_HELP) {
        fputs(k_demo_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    rc = io_mode_consent("demo", o.mode == MODE_SEALED ? IO_MODE_SEALED : IO_MODE_SEALED_PRIVATE,
                         o.semi_honest);
    if (!rc)
        rc = io_share_checks("demo",
                             o.mode == MODE_SEALED_PRIVATE ? IO_MODE_SEALED_PRIVATE
                                                           : IO_MODE_SEALED,
                             o.checked, o.unchecked);
    if (rc)
        return rc;
    char bwhat[256];
    tsafe_status bst = io_backend_factory(o.backend, &o.factory, bwhat, sizeof bwhat);
    if (bst != TSAFE_OK)
        return bst == TSAFE_E_ARG ? tool_usage("demo: %s", bwhat) : tool_fail(bwhat, bst);
    demo_result main_r;
    rc = demo_run(&o, &main_r);
    if (rc != 0 || !o.compare || o.json)
        return rc;
    return compare_modes(&o, &main_r);
}

/* The q, k, v, o modules (prepared by their parties' engines), and room
 * for the experts' modules. */
static tsafe_status attention_modules(demo *D)
{
    static const char *attn[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "layers.0.self_attn.%s", attn[i]);
        tsafe_status st = module_for(D, i == 3 ? &D->o_in : &D->h, name, &D->attn[i]);
        if (st != TSAFE_OK)
            return st;
    }
    D->expert = calloc((size_t)D->cfg.n_experts * 3, sizeof *D->expert);
    return D->expert ? TSAFE_OK : TSAFE_E_NOMEM;
}

/* One demo in mode o->mode: adapter, layer, modules, tokens, report
 * (unless quiet); r gets the figures. 0 on success. */
static int demo_run(const demo_opts *opts, demo_result *r)
{
    demo D;
    memset(&D, 0, sizeof D);
    D.o = *opts;
    memset(r, 0, sizeof *r);
    double t0 = bench_now_us();
    tsafe_status st;
    char dir[] = "/tmp/tensafe-demo-XXXXXX";
    int rc = 1;
    if ((st = tsafe_moe_config_preset("qwen3.5-35b-a3b", &D.cfg)) != TSAFE_OK)
        return tool_fail("demo: config", st);
    if (!mkdtemp(dir))
        return tool_fail("demo: temporary directory", TSAFE_E_IO);
    if (progress_on())
        fprintf(stderr, "tensafe demo: generating the adapter into %s\n", dir);
    tsafe_moe_layer_options lo = {0, TSAFE_MOE_WEIGHTS_LAZY};
    if ((st = build_adapter(&D.cfg, D.o.seed, dir)) != TSAFE_OK) {
        rc = tool_fail("demo: writing the PEFT adapter", st);
        goto out;
    }
    if ((st = tsafe_lora_adapter_load_peft(dir, &D.adapter)) != TSAFE_OK) {
        rc = tool_fail("demo: loading the PEFT adapter", st);
        goto out;
    }
    if ((st = tsafe_moe_layer_create_random_ex(&D.cfg, D.o.seed, &lo, &D.layer)) != TSAFE_OK ||
        (st = tsafe_moe_lora_create(D.layer, &D.mlora)) != TSAFE_OK) {
        rc = tool_fail("demo: MoE layer", st);
        goto out;
    }
    uint32_t d = D.cfg.hidden_size;
    uint32_t hd = D.cfg.head_dim ? D.cfg.head_dim : d / D.cfg.n_heads;
    if ((st = make_plan(&D, d, &D.h)) != TSAFE_OK ||
        (st = make_plan(&D, D.cfg.n_heads * hd, &D.o_in)) != TSAFE_OK ||
        (st = make_plan(&D, D.cfg.expert_intermediate, &D.act)) != TSAFE_OK) {
        rc = tool_fail("demo: parameter planning", st);
        goto out;
    }
    if ((st = party_open(&D.h, D.o.mode, D.o.unchecked, D.o.factory)) != TSAFE_OK ||
        (st = party_open(&D.o_in, D.o.mode, D.o.unchecked, D.o.factory)) != TSAFE_OK ||
        (st = party_open(&D.act, D.o.mode, D.o.unchecked, D.o.factory)) != TSAFE_OK) {
        rc = tool_fail("demo: keys, contexts and backends", st);
        goto out;
    }
    if ((st = attention_modules(&D)) != TSAFE_OK) {
        rc = tool_fail("demo: attention adapter modules", st);
        goto out;
    }
    totals T = {0};
    double t_setup = bench_now_us();
    if ((st = run_tokens(&D, &T)) != TSAFE_OK) {
        rc = tool_fail("demo: running tokens", st);
        goto out;
    }
    /* setup = everything before the first token minus the token loop */
    *r = summarize(&D, &T);
    if (!D.o.quiet)
        report(&D, &T, r, (t_setup - t0) / 1e6);
    rc = sqrt(T.err_num / T.err_den) <= (D.o.mode <= MODE_SEALED ? 1e-3 : 1e-5) ? 0 : 1;
out:
    if (D.expert)
        for (uint32_t i = 0; i < D.cfg.n_experts * 3; i++)
            tsafe_lora_module_free(D.expert[i]);
    free(D.expert);
    tsafe_moe_lora_free(D.mlora);
    party_close(&D.h); /* the engines' objects before the modules they prepared */
    party_close(&D.o_in);
    party_close(&D.act);
    for (int i = 0; i < 4; i++)
        tsafe_lora_module_free(D.attn[i]);
    tsafe_moe_layer_free(D.layer);
    tsafe_lora_adapter_free(D.adapter);
    remove_dir(dir);
    return rc;
}
