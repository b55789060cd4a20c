/* `tensafe generate`: a llama2.c model (llama2.h) run in plaintext float32
 * with every LoRA site's delta from the SDK, in one of the modes: base (no
 * adapter), --plain (the adapter in clear), local, sealed, sealed-private
 * (in this process: tsafe_lora_local / tsafe_sealed_pair), or against
 * `tensafe serve` over 127.0.0.1 (--server, net_remote.h). Text is
 * streamed as it is produced; --json prints ids, text and the figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "clock.h"
#include "commands.h"
#include "io.h"
#include "llama2.h"
#include "net_remote.h"
#include "spm.h"

#define GEN_MAX_WIDTHS 4

static const char k_generate_help[] =
    "usage: tensafe generate --model FILE --tokenizer FILE [--adapter DIR|PKG [--trusted-key K]]\n"
    "                        [--mode local|sealed|sealed-private | --plain]\n"
    "                        [--no-dp --semi-honest] [--x-bits N] [--a-bits N] [--b-bits N]\n"
    "                        [--unchecked-shares]\n"
    "                        [--server [127.0.0.1:]PORT] [--prompt TEXT] [--tokens N]\n"
    "                        [--temperature T] [--max-abs X] [--json]\n"
    "\n"
    "Generates text with a llama2.c model (float32, run.c layout) and its SentencePiece\n"
    "tokenizer (.model). The base model runs here in plaintext; every LoRA site's delta\n"
    "(q/k/v/o/gate/up/down of each layer the adapter targets; q/k before RoPE) comes\n"
    "from the SDK:\n"
    "  (no adapter)      the base model alone\n"
    "  --plain           the adapter in clear (s B A x in float)\n"
    "  --mode local      CKKS in this process (one key holder: parity, protects nothing)\n"
    "  --mode sealed-private (default with an adapter)  the sealed two-party protocol,\n"
    "                    client and server in this process exchanging the real bytes\n"
    "  --mode sealed     the same, one round cheaper: needs --no-dp here (the server\n"
    "                    learns u = A x of every site) and --semi-honest (it protects\n"
    "                    only against peers that follow the protocol: THREAT_MODEL.md)\n"
    "  --server PORT     the adapter stays with `tensafe serve --module all` on\n"
    "                    127.0.0.1:PORT (sealed or sealed-private); no --adapter here\n"
    "  --prompt TEXT     text after BOS (default: none, BOS only)\n"
    "  --tokens N        tokens to generate (default 64)\n"
    "  --temperature T   0 (default): greedy, ties to the lowest id; T > 0 samples\n"
    "  --max-abs X       local mode: bound on |x| of the CKKS plan (default 64)\n"
    "  --x-bits, --a-bits, --b-bits N  the in-process sealed modes' quantization\n"
    "                    widths of x, A and B (b: sealed-private), 4..20 bits; default\n"
    "                    x 13, A and B chosen by the plan (see tensafe lora --help)\n"
    "  --unchecked-shares  sealed-private without its checked shares (faster; a\n"
    "                    client that tampers with its share would read the adapter:\n"
    "                    docs/MALICIOUS_CLIENT.md); with --server, for a server\n"
    "                    started with it\n"
    "  --json            one JSON object: ids (generated, prompt excluded), text,\n"
    "                    prompt_ids, and the figures (ms per token: HE part and\n"
    "                    total; bytes per token each way; sites, queries, rounds)\n";

typedef enum { GEN_BASE, GEN_PLAIN, GEN_LOCAL, GEN_SEALED, GEN_REMOTE } gen_kind;

/* Where the deltas come from, and what they cost. */
typedef struct {
    gen_kind kind;
    io_mode mode;
    const l2_config *c;
    /* in process */
    tsafe_lora_adapter *ad;
    io_modules *widths[GEN_MAX_WIDTHS];
    size_t n_widths;
    tsafe_lora_local *local[GEN_MAX_WIDTHS];
    tsafe_lora_site **sites; /* per module index of the adapter */
    size_t n_sites;
    tsafe_sealed_pair *pair;
    /* remote */
    net_remote *remote;
    /* [layer * L2_N_PROJ + proj]: site / module index, -1 if not adapted */
    int32_t *slot;
    uint32_t *slot_width;
    float *scratch[3];
    /* figures */
    double he_ms;
    uint64_t sites_run, queries;
    tsafe_lora_stats stats;
    char what[4200];
} gen_lora;

/* "layers.<L>.<...>.<proj>" -> layer and projection; -1 when the name is
 * not one of the seven adapter targets of a layer. */
static int parse_site(const char *name, uint32_t *layer, l2_proj *proj)
{
    unsigned l = 0;
    int n = 0;
    if (sscanf(name, "layers.%u.%n", &l, &n) != 1 || n == 0)
        return -1;
    const char *last = strrchr(name, '.');
    for (int p = 0; p < L2_N_PROJ; p++)
        if (last && !strcmp(last + 1, l2_proj_name((l2_proj)p))) {
            *layer = l;
            *proj = (l2_proj)p;
            return 0;
        }
    return -1;
}

/* Records module i (name, shape) at its slot after checking it against the
 * model. */
static tsafe_status place_module(gen_lora *g, size_t i, const char *name, size_t d_in,
                                 size_t d_out)
{
    uint32_t layer = 0;
    l2_proj p = L2_Q;
    if (parse_site(name, &layer, &p) != 0 || layer >= g->c->n_layers) {
        snprintf(g->what, sizeof g->what,
                 "adapter module '%s' is not a q/k/v/o/gate/up/down projection of one of the "
                 "model's %u layers",
                 name, g->c->n_layers);
        return TSAFE_E_ADAPTER;
    }
    if (d_in != l2_proj_in(g->c, p) || d_out != l2_proj_out(g->c, p)) {
        snprintf(g->what, sizeof g->what,
                 "adapter module '%s' maps %zu -> %zu, the model's %s maps %u -> %u", name, d_in,
                 d_out, l2_proj_name(p), l2_proj_in(g->c, p), l2_proj_out(g->c, p));
        return TSAFE_E_SHAPE;
    }
    int32_t *s = &g->slot[layer * L2_N_PROJ + p];
    if (*s >= 0) {
        snprintf(g->what, sizeof g->what, "two adapter modules for layer %u %s", layer,
                 l2_proj_name(p));
        return TSAFE_E_ADAPTER;
    }
    *s = (int32_t)i;
    return TSAFE_OK;
}

/* The adapter's modules grouped by input width (io_modules each). */
static tsafe_status group_widths(gen_lora *g)
{
    size_t n = tsafe_lora_adapter_module_count(g->ad);
    tsafe_status st;
    if (!(g->sites = calloc(n ? n : 1, sizeof *g->sites)))
        return TSAFE_E_NOMEM;
    g->n_sites = n;
    for (size_t i = 0; i < n; i++) {
        tsafe_lora_module_info mi;
        if ((st = tsafe_lora_adapter_module(g->ad, i, &mi)) != TSAFE_OK ||
            (st = place_module(g, i, mi.name, mi.in_dim, mi.out_dim)) != TSAFE_OK)
            return st;
        size_t w = 0;
        while (w < g->n_widths && g->widths[w]->d_in != mi.in_dim)
            w++;
        if (w == g->n_widths) {
            if (w == GEN_MAX_WIDTHS || !(g->widths[w] = calloc(1, sizeof *g->widths[w])))
                return TSAFE_E_NOMEM;
            g->widths[w]->d_in = (uint32_t)mi.in_dim;
            g->n_widths++;
        }
        io_modules *m = g->widths[w];
        if (m->n == IO_MAX_MODULES)
            return TSAFE_E_RANGE;
        m->info[m->n++] = mi;
        m->max_rank = mi.rank > m->max_rank ? (uint32_t)mi.rank : m->max_rank;
        m->total_out += (uint32_t)mi.out_dim;
        m->max_abs_a = fmax(m->max_abs_a, io_module_max_abs_a(&mi));
        g->slot_width[i] = (uint32_t)w;
    }
    return TSAFE_OK;
}

/* One CKKS context per width (tsafe_lora_local: plain and sealed modes use
 * it only to hold the LoRA sites) and the sites on it. */
static tsafe_status make_sites(gen_lora *g, double max_abs_x)
{
    for (size_t w = 0; w < g->n_widths; w++) {
        io_modules *m = g->widths[w];
        tsafe_lora_plan plan;
        tsafe_lora_site **tmp = calloc(m->n, sizeof *tmp);
        tsafe_status st = tmp ? TSAFE_OK : TSAFE_E_NOMEM;
        if (st == TSAFE_OK)
            st = io_make_plan(NULL, m, max_abs_x, 1e-6, &plan, g->what, sizeof g->what);
        if (st == TSAFE_OK && (st = tsafe_lora_local_create(&plan, NULL, &g->local[w])) != TSAFE_OK)
            snprintf(g->what, sizeof g->what, "HE context for d_in %u", m->d_in);
        if (st == TSAFE_OK)
            st = io_make_sites(tsafe_lora_local_context(g->local[w]), &plan, m, tmp, g->what,
                               sizeof g->what);
        /* back to adapter order: slot[] holds adapter module indices */
        for (size_t k = 0, i = 0; st == TSAFE_OK && i < g->n_sites; i++)
            if (g->slot_width[i] == w)
                g->sites[i] = tmp[k++];
        free(tmp);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

static tsafe_status open_in_process(gen_lora *g, const char *adapter, const char *key,
                                    double max_abs_x, int no_dp,
                                    const tsafe_sealed_opts *widths)
{
    tsafe_status st;
    if ((st = io_load_adapter(adapter, key, &g->ad, g->what, sizeof g->what)) != TSAFE_OK ||
        (st = group_widths(g)) != TSAFE_OK || (st = make_sites(g, max_abs_x)) != TSAFE_OK)
        return st;
    if (g->kind != GEN_SEALED)
        return TSAFE_OK;
    tsafe_sealed_mode sm = g->mode == IO_MODE_SEALED ? TSAFE_SEALED : TSAFE_SEALED_PRIVATE;
    /* check_opts let sealed through only with --semi-honest */
    tsafe_sealed_opts so = *widths; /* --x-bits, --a-bits, --b-bits */
    so.semi_honest = sm == TSAFE_SEALED;
    if ((st = tsafe_sealed_pair_create(sm, &so, NULL, no_dp, &g->pair)) != TSAFE_OK ||
        (st = tsafe_sealed_pair_prepare(g->pair, (const tsafe_lora_site *const *)g->sites,
                                        g->n_sites)) != TSAFE_OK)
        snprintf(g->what, sizeof g->what, "sealed sessions for the adapter's sites");
    return st;
}

static tsafe_status open_remote(gen_lora *g, uint32_t port, int no_dp, int unchecked)
{
    tsafe_status st = net_remote_open(port, 60, g->mode, NULL, no_dp, unchecked, &g->remote,
                                      g->what, sizeof g->what);
    if (st != TSAFE_OK)
        return st;
    for (size_t i = 0; i < net_remote_count(g->remote); i++) {
        uint32_t d_in, rank, d_out;
        const char *name = net_remote_module(g->remote, i, &d_in, &rank, &d_out);
        if ((st = place_module(g, i, name, d_in, d_out)) != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

static void gen_lora_free(gen_lora *g)
{
    tsafe_sealed_pair_free(g->pair);
    for (size_t i = 0; g->sites && i < g->n_sites; i++)
        tsafe_lora_site_free(g->sites[i]);
    free(g->sites);
    for (size_t w = 0; w < g->n_widths; w++) {
        tsafe_lora_local_free(g->local[w]);
        free(g->widths[w]);
    }
    net_remote_close(g->remote);
    tsafe_lora_adapter_free(g->ad);
    free(g->slot);
    free(g->slot_width);
    for (int i = 0; i < 3; i++)
        free(g->scratch[i]);
}

/* The deltas of one group's adapted projections, added to out[]. */
static tsafe_status lora_hook(void *user, uint32_t layer, l2_group grp, const float *x,
                              float *const *out)
{
    gen_lora *g = user;
    l2_proj first;
    uint32_t count, mods[3], n = 0, which[3];
    l2_group_slots(grp, &first, &count);
    for (uint32_t k = 0; k < count; k++) {
        int32_t s = g->slot[layer * L2_N_PROJ + first + k];
        if (s >= 0) {
            mods[n] = (uint32_t)s;
            which[n++] = k;
        }
    }
    if (!n)
        return TSAFE_OK;
    const tsafe_lora_site *sites[3];
    for (uint32_t k = 0; g->kind != GEN_REMOTE && k < n; k++)
        sites[k] = g->sites[mods[k]];
    double t0 = tsafe_now_ms();
    tsafe_status st;
    switch (g->kind) {
    case GEN_PLAIN:
        st = tsafe_lora_engine_plain().fn(NULL, sites, n, x, g->scratch, &g->stats);
        break;
    case GEN_LOCAL:
        st = tsafe_lora_local_delta(g->local[g->slot_width[mods[0]]], sites, n, x, g->scratch,
                                    &g->stats);
        break;
    case GEN_SEALED: {
        tsafe_lora_engine e = tsafe_lora_engine_sealed(g->pair);
        st = e.fn(e.user, sites, n, x, g->scratch, &g->stats);
        break;
    }
    default:
        st = net_remote_delta(g->remote, mods, n, x, g->scratch, &g->stats, g->what,
                              sizeof g->what);
    }
    g->he_ms += tsafe_now_ms() - t0;
    g->sites_run += n;
    g->queries++;
    if (st != TSAFE_OK) {
        if (g->kind != GEN_REMOTE)
            snprintf(g->what, sizeof g->what, "layer %u %s deltas", layer,
                     l2_proj_name(first + which[0]));
        return st;
    }
    for (uint32_t k = 0; k < n; k++) {
        uint32_t d = l2_proj_out(g->c, first + which[k]);
        for (uint32_t i = 0; i < d; i++)
            out[which[k]][i] += g->scratch[k][i];
    }
    return TSAFE_OK;
}

/* ---------------------------------------------------------- decoding */

typedef struct {
    const char *model, *tokenizer, *adapter, *key, *mode_name, *prompt, *server;
    uint32_t tokens;
    double temperature, max_abs;
    int plain, json, no_dp;
    int semi_honest; /* --semi-honest: the opt-in sealed mode needs */
    int checked, unchecked;        /* --checked-shares (the default), --unchecked-shares */
    uint32_t bits[3];              /* --x-bits, --a-bits, --b-bits */
    tsafe_sealed_opts sealed_opts; /* their widths (0: the plan's choice) */
} gen_opts;

/* argmax with ties to the lowest id, or a sample of softmax(logits / T). */
static uint32_t next_token(const float *logits, uint32_t n, double temperature)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    if (!(temperature > 0))
        return best;
    double sum = 0, r = (double)randombytes_uniform(1u << 30) / (double)(1u << 30);
    for (uint32_t i = 0; i < n; i++)
        sum += exp((logits[i] - logits[best]) / temperature);
    double acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        acc += exp((logits[i] - logits[best]) / temperature) / sum;
        if (r < acc)
            return i;
    }
    return best;
}

typedef struct {
    uint32_t *all; /* prompt ids (BOS first) then generated */
    size_t n_prompt, n;
    size_t printed; /* bytes of text already streamed */
    char *text;
    double total_ms;
    uint32_t steps;
} gen_run;

/* Streams the text decoded so far past what was printed. */
static tsafe_status stream(const spm_tok *tok, gen_run *r, int json)
{
    char *t = NULL;
    tsafe_status st = spm_decode(tok, r->all + 1, r->n - 1, &t);
    if (st != TSAFE_OK)
        return st;
    size_t len = strlen(t);
    if (!json && len > r->printed) {
        fputs(t + r->printed, stdout);
        fflush(stdout);
    }
    r->printed = len > r->printed ? len : r->printed;
    free(r->text);
    r->text = t;
    return TSAFE_OK;
}

static tsafe_status generate(const gen_opts *o, const l2_model *m, const spm_tok *tok,
                             gen_lora *g, gen_run *r)
{
    l2_state *s = NULL;
    tsafe_status st = l2_state_create(m, &s);
    const l2_config *c = l2_model_config(m);
    size_t total = r->n_prompt + o->tokens;
    double t0 = tsafe_now_ms();
    for (uint32_t pos = 0; st == TSAFE_OK && r->n < total; pos++) {
        const float *logits = NULL;
        if (pos >= c->seq_len) {
            snprintf(g->what, sizeof g->what, "prompt + tokens above the model's seq_len %u",
                     c->seq_len);
            st = TSAFE_E_RANGE;
            break;
        }
        if ((st = l2_forward(s, r->all[pos], pos, g->kind == GEN_BASE ? NULL : lora_hook, g,
                             &logits)) != TSAFE_OK)
            break;
        r->steps++;
        if (pos + 1 < r->n_prompt)
            continue;
        r->all[r->n++] = next_token(logits, c->vocab_size, o->temperature);
        st = stream(tok, r, o->json);
    }
    r->total_ms = tsafe_now_ms() - t0;
    l2_state_free(s);
    return st;
}

/* ------------------------------------------------------------ report */

static const char *kind_label(const gen_lora *g)
{
    switch (g->kind) {
    case GEN_BASE:
        return "base";
    case GEN_PLAIN:
        return "plain";
    default:
        return io_mode_name(g->mode);
    }
}

static json_t *figures_json(const gen_lora *g, const gen_run *r)
{
    double n = r->steps ? r->steps : 1;
    uint32_t rounds = g->kind == GEN_SEALED || g->kind == GEN_REMOTE ? 2 : 0;
    return json_pack("{s:s, s:b, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "mode", kind_label(g),
                     "over_network", g->kind == GEN_REMOTE, "steps", (json_int_t)r->steps,
                     "ms_per_token_he", g->he_ms / n, "ms_per_token_total", r->total_ms / n,
                     "bytes_up_per_token", (double)g->stats.bytes_up / n,
                     "bytes_down_per_token", (double)g->stats.bytes_down / n, "sites_per_token",
                     (double)g->sites_run / n, "queries_per_token", (double)g->queries / n,
                     "rounds_per_token", (double)(g->queries * rounds) / n);
}

static int report(const gen_opts *o, const gen_lora *g, const gen_run *r)
{
    double n = r->steps ? r->steps : 1;
    if (!o->json) {
        printf("\n[%s%s] %u steps (%zu prompt + %zu generated tokens): %.3f ms/token total, "
               "%.3f ms/token HE-LoRA, %.1f sites/token in %.1f queries, %.1f KiB up and %.1f "
               "KiB down per token\n",
               kind_label(g), g->kind == GEN_REMOTE ? " over 127.0.0.1" : "", r->steps,
               r->n_prompt, r->n - r->n_prompt, r->total_ms / n, g->he_ms / n,
               (double)g->sites_run / n, (double)g->queries / n,
               (double)g->stats.bytes_up / n / 1024.0, (double)g->stats.bytes_down / n / 1024.0);
        return 0;
    }
    json_t *ids = json_array(), *pids = json_array();
    for (size_t i = 0; i < r->n; i++)
        json_array_append_new(i < r->n_prompt ? pids : ids, json_integer(r->all[i]));
    json_t *j = json_pack("{s:s, s:s?, s:s, s:o, s:o, s:s, s:o}", "model", o->model, "adapter",
                          o->adapter, "prompt", o->prompt ? o->prompt : "", "prompt_ids", pids,
                          "ids", ids, "text", r->text ? r->text : "", "figures",
                          figures_json(g, r));
    if (!j)
        return tool_fail("generate: JSON", TSAFE_E_NOMEM);
    char *s = json_dumps(j, JSON_INDENT(1));
    json_decref(j);
    if (!s)
        return tool_fail("generate: JSON", TSAFE_E_NOMEM);
    puts(s);
    free(s);
    return 0;
}

/* ------------------------------------------------------------- main */

static int parse_server(const char *arg, uint32_t *port)
{
    const char *p = arg;
    if (!strncmp(p, "127.0.0.1:", 10))
        p += 10;
    else if (!strncmp(p, "localhost:", 10))
        p += 10;
    char *end = NULL;
    unsigned long v = strtoul(p, &end, 10);
    if (!*p || *end || v == 0 || v > 65535)
        return -1;
    *port = (uint32_t)v;
    return 0;
}

static int check_opts(gen_opts *o, tool_opt *t, gen_lora *g, uint32_t *port)
{
    if (!o->model || !o->tokenizer)
        return tool_usage("generate: --model and --tokenizer are required");
    if (o->tokens == 0 || o->tokens > 65536)
        return tool_usage("generate: --tokens must be 1..65536");
    if (!(o->temperature >= 0) || !(o->max_abs > 0))
        return tool_usage("generate: --temperature must be >= 0 and --max-abs positive");
    int mode_seen = t[4].seen;
    if (o->plain && mode_seen)
        return tool_usage("generate: give --plain or --mode, not both");
    if (io_mode_parse(o->mode_name, &g->mode) || g->mode == IO_MODE_PLAIN_ZERO_MOAI)
        return tool_usage("generate: --mode must be local, sealed or sealed-private, not '%s'",
                          o->mode_name);
    if (o->server) {
        if (parse_server(o->server, port))
            return tool_usage("generate: --server takes PORT or 127.0.0.1:PORT (the server "
                              "listens on 127.0.0.1 only), not '%s'",
                              o->server);
        if (o->adapter || o->plain || g->mode == IO_MODE_LOCAL)
            return tool_usage("generate: with --server the adapter stays with the server: no "
                              "--adapter, --plain or --mode local here");
        g->kind = GEN_REMOTE;
    } else if (!o->adapter) {
        if (o->plain || mode_seen)
            return tool_usage("generate: --plain and --mode need --adapter (or --server)");
        g->kind = GEN_BASE;
    } else {
        g->kind = o->plain ? GEN_PLAIN : g->mode == IO_MODE_LOCAL ? GEN_LOCAL : GEN_SEALED;
    }
    int rc = io_mode_consent("generate",
                             g->kind == GEN_SEALED || g->kind == GEN_REMOTE
                                 ? g->mode
                                 : IO_MODE_SEALED_PRIVATE,
                             o->semi_honest);
    if (rc)
        return rc;
    if ((g->kind == GEN_SEALED || g->kind == GEN_REMOTE) && g->mode == IO_MODE_SEALED &&
        !o->no_dp)
        return tool_usage("generate: --mode sealed releases u = A x of every site to the "
                          "server: give --no-dp to accept that (DP noise: tensafe client)");
    if (o->no_dp && !(g->mode == IO_MODE_SEALED && (g->kind == GEN_SEALED || g->kind == GEN_REMOTE)))
        return tool_usage("generate: --no-dp is for --mode sealed");
    if ((o->checked || o->unchecked) && g->kind != GEN_SEALED && g->kind != GEN_REMOTE)
        return tool_usage("generate: --%s-shares is for a sealed-private run (--adapter or "
                          "--server)",
                          o->checked ? "checked" : "unchecked");
    if ((rc = io_share_checks("generate", g->mode, o->checked, o->unchecked)) != 0)
        return rc;
    o->sealed_opts.unchecked_shares = (uint32_t)o->unchecked;
    const tool_opt *w = &t[14]; /* --x-bits, --a-bits, --b-bits */
    if ((w[0].seen || w[1].seen || w[2].seen) && g->kind != GEN_SEALED)
        return tool_usage("generate: --x-bits, --a-bits and --b-bits set the widths of an "
                          "in-process sealed mode (--adapter); %s",
                          g->kind == GEN_REMOTE ? "with --server both sides derive the plan "
                                                  "with the default widths"
                                                : "this run has no sealed plan");
    return io_sealed_widths("generate", g->mode, w, &o->sealed_opts);
}

static tsafe_status load_inputs(const gen_opts *o, l2_model **m, spm_tok **tok, gen_run *r,
                                char *what, size_t cap)
{
    tsafe_status st;
    if ((st = l2_model_load(o->model, m)) != TSAFE_OK) {
        snprintf(what, cap, "generate: model '%s' (llama2.c float32 format)", o->model);
        return st;
    }
    if ((st = spm_load(o->tokenizer, tok, what, cap)) != TSAFE_OK)
        return st;
    const l2_config *c = l2_model_config(*m);
    if (spm_vocab_size(*tok) != c->vocab_size || spm_bos(*tok) < 0) {
        snprintf(what, cap, "generate: tokenizer has %u pieces (BOS %d), the model %u",
                 spm_vocab_size(*tok), spm_bos(*tok), c->vocab_size);
        return TSAFE_E_SHAPE;
    }
    uint32_t *p = NULL;
    size_t np = 0;
    if (o->prompt && *o->prompt && (st = spm_encode(*tok, o->prompt, &p, &np)) != TSAFE_OK) {
        snprintf(what, cap, "generate: tokenize the prompt");
        return st;
    }
    r->n_prompt = np + 1;
    if (!(r->all = malloc((r->n_prompt + o->tokens) * sizeof *r->all))) {
        free(p);
        return TSAFE_E_NOMEM;
    }
    r->all[0] = (uint32_t)spm_bos(*tok);
    if (np)
        memcpy(r->all + 1, p, np * sizeof *p);
    r->n = r->n_prompt;
    free(p);
    return TSAFE_OK;
}

static tsafe_status gen_lora_open(const gen_opts *o, const l2_config *c, gen_lora *g,
                                  uint32_t port)
{
    size_t slots = (size_t)c->n_layers * L2_N_PROJ;
    g->c = c;
    if (!(g->slot = malloc(slots * sizeof *g->slot)) ||
        !(g->slot_width = calloc(IO_MAX_MODULES * 4, sizeof *g->slot_width)))
        return TSAFE_E_NOMEM;
    for (size_t i = 0; i < slots; i++)
        g->slot[i] = -1;
    for (int i = 0; i < 3; i++)
        if (!(g->scratch[i] = calloc(c->dim > c->hidden_dim ? c->dim : c->hidden_dim,
                                     sizeof(float))))
            return TSAFE_E_NOMEM;
    if (g->kind == GEN_BASE)
        return TSAFE_OK;
    if (g->kind == GEN_REMOTE)
        return open_remote(g, port, o->no_dp, o->unchecked);
    return open_in_process(g, o->adapter, o->key, o->max_abs, o->no_dp, &o->sealed_opts);
}

int cmd_generate(int argc, char **argv)
{
    gen_opts o = {.mode_name = "sealed-private", .tokens = 64, .max_abs = 64};
    tool_opt t[] = {{"--model", OPT_STR, &o.model, 0},
                    {"--tokenizer", OPT_STR, &o.tokenizer, 0},
                    {"--adapter", OPT_STR, &o.adapter, 0},
                    {"--trusted-key", OPT_STR, &o.key, 0},
                    {"--mode", OPT_STR, &o.mode_name, 0},
                    {"--plain", OPT_FLAG, &o.plain, 0},
                    {"--prompt", OPT_STR, &o.prompt, 0},
                    {"--tokens", OPT_U32, &o.tokens, 0},
                    {"--temperature", OPT_DOUBLE, &o.temperature, 0},
                    {"--server", OPT_STR, &o.server, 0},
                    {"--json", OPT_FLAG, &o.json, 0},
                    {"--no-dp", OPT_FLAG, &o.no_dp, 0},
                    {"--max-abs", OPT_DOUBLE, &o.max_abs, 0},
                    {"--semi-honest", OPT_FLAG, &o.semi_honest, 0},
                    {"--x-bits", OPT_U32, &o.bits[0], 0},
                    {"--a-bits", OPT_U32, &o.bits[1], 0},
                    {"--b-bits", OPT_U32, &o.bits[2], 0},
                    {"--checked-shares", OPT_FLAG, &o.checked, 0},
                    {"--unchecked-shares", OPT_FLAG, &o.unchecked, 0}};
    int rc = opts_parse("generate", argc, argv, 1, t, sizeof t / sizeof t[0], NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        fputs(k_generate_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    gen_lora g;
    memset(&g, 0, sizeof g);
    uint32_t port = 0;
    if ((rc = check_opts(&o, t, &g, &port)) != 0)
        return rc;
    l2_model *m = NULL;
    spm_tok *tok = NULL;
    gen_run r;
    memset(&r, 0, sizeof r);
    char what[4400] = "generate";
    tsafe_status st = load_inputs(&o, &m, &tok, &r, what, sizeof what);
    rc = 1;
    if (st != TSAFE_OK) {
        tool_fail(what, st);
        goto out;
    }
    if ((st = gen_lora_open(&o, l2_model_config(m), &g, port)) != TSAFE_OK) {
        snprintf(what, sizeof what, "generate: %s", g.what[0] ? g.what : "adapter");
        tool_fail(what, st);
        goto out;
    }
    if ((st = stream(tok, &r, o.json)) != TSAFE_OK || /* the prompt first */
        (st = generate(&o, m, tok, &g, &r)) != TSAFE_OK) {
        snprintf(what, sizeof what, "generate: step %u: %s", r.steps,
                 g.what[0] ? g.what : "forward");
        tool_fail(what, st);
        goto out;
    }
    rc = report(&o, &g, &r);
out:
    gen_lora_free(&g);
    l2_model_free(m);
    spm_free(tok);
    free(r.all);
    free(r.text);
    return rc;
}
