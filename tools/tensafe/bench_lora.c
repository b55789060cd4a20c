/* `tensafe bench lora`: per-token HE-LoRA delta (median over tokens) with
 * its per-stage breakdown, for d=2048 and d=1536 at rank 32, with the seeds'
 * N=16384 preset and the planner's parameters, in local and plain ZeRo-MOAI mode,
 * against the plaintext LoRA time and one NTT of the same context. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "commands.h"
#include "tensafe/lora_two_party.h"
#include "tensafe/lora_sealed.h"

typedef struct {
    const tsafe_lora_plan *plan;
    tsafe_lora_local *local;
    tsafe_lora_client *client;
    tsafe_lora_server *server;
    tsafe_lora_site *site;        /* in the local context */
    tsafe_lora_site *server_site; /* in the server's context */
    uint8_t *resp;                /* response buffer reused by every token */
    size_t resp_cap;
    float *x, *delta, *u;
    tsafe_lora_stats stats;
    int failed;
} lora_case;

static void run_local(void *arg)
{
    lora_case *c = arg;
    const tsafe_lora_site *sites[1] = {c->site};
    float *out[1] = {c->delta};
    if (tsafe_lora_local_delta(c->local, sites, 1, c->x, out, &c->stats) != TSAFE_OK)
        c->failed = 1;
}

static void run_two_party(void *arg)
{
    lora_case *c = arg;
    const tsafe_lora_site *sites[1] = {c->server_site};
    uint32_t ranks[1] = {c->plan->rank};
    float *us[1] = {c->u}, *ds[1] = {c->delta};
    uint8_t *req = NULL, *um = NULL;
    size_t rl, pl, ul;
    if (tsafe_lora_client_encrypt(c->client, c->x, &req, &rl, &c->stats) != TSAFE_OK ||
        tsafe_lora_server_process_into(c->server, sites, 1, req, rl, c->resp, c->resp_cap, &pl,
                                       &c->stats) != TSAFE_OK ||
        tsafe_lora_client_decode(c->client, c->resp, pl, 1, ranks, us, &c->stats) != TSAFE_OK ||
        tsafe_lora_client_release(c->client, 1, ranks, us, NULL, &um, &ul, &c->stats) != TSAFE_OK ||
        tsafe_lora_server_apply(c->server, sites, 1, um, ul, ds, &c->stats) != TSAFE_OK)
        c->failed = 1;
    tsafe_lora_bytes_free(req);
    tsafe_lora_bytes_free(um);
}

static void run_plain(void *arg)
{
    lora_case *c = arg;
    if (tsafe_lora_site_plain_delta(c->site, c->x, c->delta) != TSAFE_OK)
        c->failed = 1;
}

/* One sealed token (one site), every message as bytes. */
typedef struct {
    tsafe_sealed_client *client;
    tsafe_sealed_server *server;
    tsafe_sealed_site *site;
    uint32_t rank, d_out;
    const float *x;
    float *delta;
    tsafe_lora_stats stats;
    int failed;
    int refill; /* prepare the next token's encryptions of zero (offline) */
} sealed_case;

static void run_sealed(void *arg)
{
    sealed_case *c = arg;
    const tsafe_sealed_site *ss[1] = {c->site};
    float *ds[1] = {c->delta};
    uint8_t *m[4] = {NULL, NULL, NULL, NULL};
    size_t l[4];
    if (tsafe_sealed_client_needs_hello(c->client)) {
        uint8_t *h;
        size_t hl;
        if (tsafe_sealed_client_hello(c->client, &h, &hl) != TSAFE_OK ||
            tsafe_sealed_server_accept(c->server, h, hl) != TSAFE_OK)
            c->failed = 1;
        tsafe_lora_bytes_free(h);
    }
    if (tsafe_sealed_client_query(c->client, c->x, &m[0], &l[0], &c->stats) != TSAFE_OK ||
        tsafe_sealed_server_round1(c->server, ss, 1, m[0], l[0], &m[1], &l[1], &c->stats) != TSAFE_OK ||
        tsafe_sealed_client_respond(c->client, m[1], l[1], 1, &c->rank, &c->d_out, NULL, 1, &m[2],
                                    &l[2], &c->stats) != TSAFE_OK ||
        tsafe_sealed_server_round2(c->server, ss, 1, m[2], l[2], &m[3], &l[3], &c->stats) != TSAFE_OK ||
        tsafe_sealed_client_finish(c->client, m[3], l[3], 1, &c->d_out, ds, &c->stats) != TSAFE_OK ||
        (c->refill && tsafe_sealed_server_refill(c->server, &c->stats) != TSAFE_OK))
        c->failed = 1;
    for (int i = 0; i < 4; i++)
        tsafe_lora_bytes_free(m[i]);
}

typedef struct {
    double token, encrypt, rest, server, offline; /* µs, medians per token */
} sealed_medians;

/* Two tokens to open the session, then reps tokens, each stage's time
 * taken per token; -1 when out of memory (a failed token sets c->failed). */
static int sealed_measure(sealed_case *c, int reps, sealed_medians *out)
{
    if (reps < 1)
        reps = 1;
    double *v = malloc(5 * (size_t)reps * sizeof *v);
    if (!v)
        return -1;
    for (int i = 0; i < 2; i++)
        run_sealed(c);
    for (int i = 0; i < reps; i++) {
        memset(&c->stats, 0, sizeof c->stats);
        double t0 = bench_now_us();
        run_sealed(c);
        const tsafe_lora_stats *s = &c->stats;
        v[i] = bench_now_us() - t0;
        v[reps + i] = s->encrypt_us;
        v[2 * reps + i] = s->decrypt_us + s->sums_us;
        v[3 * reps + i] = s->products_us + s->reduce_us + s->bu_us;
        v[4 * reps + i] = s->offline_us;
    }
    out->token = bench_median_of(v, reps);
    out->encrypt = bench_median_of(v + reps, reps);
    out->rest = bench_median_of(v + 2 * reps, reps);
    out->server = bench_median_of(v + 3 * reps, reps);
    out->offline = bench_median_of(v + 4 * reps, reps);
    free(v);
    return 0;
}

/* The plan, client, server (on the bench's backend) and site of one sealed
 * mode for c's rank and d_out; c->delta allocated. */
static tsafe_status sealed_setup(sealed_case *c, tsafe_sealed_mode mode, int unchecked,
                                 const float *A, const float *B, uint32_t d,
                                 tsafe_sealed_plan *plan)
{
    c->delta = malloc(c->d_out * sizeof *c->delta);
    tsafe_status st = c->delta ? TSAFE_OK : TSAFE_E_NOMEM;
    /* sealed mode runs here for its figures only: the opt-in is ours, and
     * its rows say so (semi-honest) */
    tsafe_sealed_opts so = {.semi_honest = mode == TSAFE_SEALED,
                            .unchecked_shares = (uint32_t)unchecked};
    if (st == TSAFE_OK)
        st = tsafe_sealed_plan_derive(mode, d, c->rank, c->d_out, &so, plan);
    if (st == TSAFE_OK)
        st = tsafe_sealed_client_create(plan, NULL, &c->client);
    if (st == TSAFE_OK)
        st = tsafe_sealed_server_create(plan, &c->server);
    if (st == TSAFE_OK)
        st = tsafe_sealed_server_use_backend(c->server, bench_backend);
    if (st == TSAFE_OK)
        st = tsafe_sealed_site_create(plan, A, B, c->rank, c->d_out, 1.0f, &c->site);
    return st;
}

/* The rows' name of a sealed mode (unchecked: opts.unchecked_shares). */
static const char *sealed_name(tsafe_sealed_mode mode, int unchecked)
{
    return mode == TSAFE_SEALED ? "sealed"
           : unchecked          ? "sealed-private unchecked"
                                : "sealed-private";
}

/* The rows of one sealed mode's times: the token (with its ratios), each
 * party's share, and (mz: the server refilled between tokens) the
 * server's online time and the time moved out of it. */
static void sealed_report_times(bench_report *r, const char *group, const char *params,
                                tsafe_sealed_mode mode, int unchecked, const sealed_medians *m,
                                const sealed_medians *mz, double plain, double local,
                                double two)
{
    const char *name = sealed_name(mode, unchecked);
    double t = m->token;
    char label[96], note[160];
    snprintf(label, sizeof label, "HE-LoRA %s (bytes)", name);
    snprintf(note, sizeof note, "%sHE/plain %.1fx, /local %.1fx, /plain-ZeRo-MOAI %.2fx",
             mode == TSAFE_SEALED ? "semi-honest only; " : "", t / plain, t / local, t / two);
    bench_report_add(r, group, label, params, t, note);
    snprintf(label, sizeof label, "  %s: client encrypt x (shared)", name);
    bench_report_add(r, group, label, params, m->encrypt, NULL);
    snprintf(label, sizeof label, "  %s: client rest (decrypt, shares)", name);
    bench_report_add(r, group, label, params, m->rest, NULL);
    snprintf(label, sizeof label, "  %s: server (both rounds)", name);
    bench_report_add(r, group, label, params, m->server, NULL);
    /* the same loop with the server's offline part after every token
     * (tsafe_sealed_server_refill): its online time and the time it moved
     * out, apart */
    snprintf(label, sizeof label, "  %s: server online, zeros prepared", name);
    bench_report_add(r, group, label, params, mz->server,
                     "encryptions of zero prepared between tokens");
    snprintf(label, sizeof label, "  %s: server between tokens", name);
    bench_report_add(r, group, label, params, mz->offline, "tsafe_sealed_server_refill");
}

/* The rows of one sealed mode's message sizes at the plan's shape. */
static void sealed_report_sizes(bench_report *r, const char *group, const char *params,
                                const char *name, const tsafe_sealed_plan *plan,
                                uint32_t rank, uint32_t dout)
{
    tsafe_sealed_sizes z;
    if (tsafe_sealed_plan_sizes(plan, rank, dout, &z) != TSAFE_OK)
        return;
    char label[96];
    snprintf(label, sizeof label, "  %s: bytes query (shared by sites)", name);
    bench_report_add_value(r, group, label, params, (double)z.query, "B");
    snprintf(label, sizeof label, "  %s: bytes response 1", name);
    bench_report_add_value(r, group, label, params, (double)z.response1, "B");
    snprintf(label, sizeof label, "  %s: bytes client share", name);
    bench_report_add_value(r, group, label, params, (double)z.share, "B");
    snprintf(label, sizeof label, "  %s: bytes final", name);
    bench_report_add_value(r, group, label, params, (double)z.response2, "B");
}

/* sealed and sealed-private at the plan's shape: median per token, the
 * client's and the server's share, bytes per message, ratios. */
static int bench_sealed(bench_report *r, const char *group, const char *params,
                        tsafe_sealed_mode mode, int unchecked, const float *A, const float *B,
                        const float *x, uint32_t d, uint32_t rank, uint32_t dout, int reps,
                        double plain, double local, double two)
{
    sealed_case c;
    memset(&c, 0, sizeof c);
    c.rank = rank;
    c.d_out = dout;
    c.x = x;
    tsafe_sealed_plan plan;
    tsafe_status st = sealed_setup(&c, mode, unchecked, A, B, d, &plan);
    int rc = 0;
    if (st != TSAFE_OK) {
        rc = tool_fail("bench lora: sealed setup", st);
        goto out;
    }
    /* medians per token of the whole token and of each party's share (the
     * two first tokens, which open the session and warm the pools, are not
     * counted) */
    sealed_medians m, mz;
    if (sealed_measure(&c, reps, &m) != 0 || (c.refill = 1, sealed_measure(&c, reps, &mz)) != 0) {
        rc = tool_fail("bench lora: sealed run", TSAFE_E_NOMEM);
        goto out;
    }
    c.refill = 0;
    sealed_report_times(r, group, params, mode, unchecked, &m, &mz, plain, local, two);
    sealed_report_sizes(r, group, params, sealed_name(mode, unchecked), &plan, rank, dout);
    if (c.failed)
        rc = tool_fail("bench lora: sealed run", TSAFE_E_STATE);
out:
    tsafe_sealed_site_free(c.site);
    tsafe_sealed_client_free(c.client);
    tsafe_sealed_server_free(c.server);
    free(c.delta);
    return rc;
}

static float *det_floats(size_t n, double amp, uint32_t seed)
{
    float *v = malloc(n * sizeof *v);
    uint64_t s = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (size_t i = 0; v && i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = (float)(amp * ((double)(s >> 11) * 0x1p-53 * 2.0 - 1.0));
    }
    return v;
}

static void add_breakdown(bench_report *r, const char *group, const char *mode,
                          const char *params, const tsafe_lora_stats *s, int tokens)
{
    char name[96];
    const struct { const char *n; double v; } stage[] = {
        {"encrypt", s->encrypt_us}, {"products", s->products_us},
        {"serialize", s->reduce_us}, {"decrypt", s->decrypt_us},
        {"sums", s->sums_us},       {"B*u", s->bu_us}};
    for (size_t i = 0; i < sizeof stage / sizeof stage[0]; i++) {
        if (stage[i].v == 0)
            continue;
        snprintf(name, sizeof name, "  %s: %s (mean)", mode, stage[i].n);
        bench_report_add(r, group, name, params, stage[i].v / tokens, NULL);
    }
    if (s->bytes_up || s->bytes_down) {
        snprintf(name, sizeof name, "  %s: bytes up/token", mode);
        bench_report_add_value(r, group, name, params, (double)s->bytes_up / tokens, "B");
        snprintf(name, sizeof name, "  %s: bytes down/token", mode);
        bench_report_add_value(r, group, name, params, (double)s->bytes_down / tokens, "B");
    }
}

/* One timed call of the per-site rows. */
typedef struct {
    lora_case *c;
    const uint8_t *req; /* plain ZeRo-MOAI: one fixed request */
    size_t req_len;
} per_site_arg;

static void run_serve_once(void *arg)
{
    per_site_arg *o = arg;
    lora_case *c = o->c;
    const tsafe_lora_site *sites[1] = {c->server_site};
    size_t pl;
    if (tsafe_lora_server_process_into(c->server, sites, 1, o->req, o->req_len, c->resp,
                                       c->resp_cap, &pl, &c->stats) != TSAFE_OK)
        c->failed = 1;
}

/* The per-site work on the CPU backend: medians of the whole call and of
 * its ring work (the "products" stage: upload, ct x pt, rescales). Leaves
 * the CPU backend on. (Until issue 20 these rows also timed the core's
 * direct calls; those left the libraries for tests/reference.) */
static int bench_per_site(bench_report *r, const char *group, const char *params,
                          lora_case *c, int server, int reps)
{
    per_site_arg o = {c, NULL, 0};
    uint8_t *req = NULL;
    int rc = 0;
    tsafe_status st = TSAFE_OK;
    if (server) {
        st = tsafe_lora_client_encrypt(c->client, c->x, &req, &o.req_len, NULL);
        o.req = req;
    }
    /* the CPU backend itself: a host's --backend choice must not change
     * what this row measures */
    if (st == TSAFE_OK)
        st = server ? tsafe_lora_server_use_backend(c->server, NULL)
                    : tsafe_lora_local_use_backend(c->local, NULL);
    double *t = malloc(reps * sizeof(double)), *p = malloc(reps * sizeof(double));
    if (st != TSAFE_OK || !t || !p) {
        rc = tool_fail("bench lora: per-site setup", st == TSAFE_OK ? TSAFE_E_NOMEM : st);
        goto out;
    }
    for (int i = -2; i < reps && !c->failed; i++) { /* two untimed: upload, warm caches */
        double p0 = c->stats.products_us, t0 = bench_now_us();
        if (server)
            run_serve_once(&o);
        else
            run_local(c);
        double dt = bench_now_us() - t0;
        if (i >= 0) {
            t[i] = dt;
            p[i] = c->stats.products_us - p0;
        }
    }
    if (c->failed) {
        rc = tool_fail("bench lora: per-site run", TSAFE_E_STATE);
        goto out;
    }
    const char *mode = server ? "plain ZeRo-MOAI server" : "local";
    char label[96];
    snprintf(label, sizeof label, "  %s per site: CPU backend", mode);
    bench_report_add(r, group, label, params, bench_median_of(t, reps),
                     server ? "process_into, one request" : "local_delta, one token");
    snprintf(label, sizeof label, "  %s ring work: CPU backend", mode);
    bench_report_add(r, group, label, params, bench_median_of(p, reps),
                     server ? "ct x pt + rescales" : "ct x pt");
out:
    free(t);
    free(p);
    tsafe_lora_bytes_free(req);
    return rc;
}

static int bench_one(bench_report *r, const tsafe_lora_plan *plan, int quick)
{
    const char *group = "lora (per token, one site)";
    lora_case c;
    memset(&c, 0, sizeof c);
    c.plan = plan;
    uint32_t d = plan->d_in, rank = plan->rank, dout = d;
    float *A = det_floats((size_t)rank * d, 0.05, 1), *B = det_floats((size_t)dout * rank, 0.05, 2);
    c.x = det_floats(d, 1.0, 3);
    c.delta = malloc(dout * sizeof *c.delta);
    c.u = malloc(rank * sizeof *c.u);
    int rc = 1;
    tsafe_status st;
    if (!A || !B || !c.x || !c.delta || !c.u)
        goto out;
    if ((st = tsafe_lora_local_create(plan, NULL, &c.local)) != TSAFE_OK ||
        (st = tsafe_lora_site_create(tsafe_lora_local_context(c.local), plan, A, B, dout, 1.0f,
                                     &c.site)) != TSAFE_OK ||
        (st = tsafe_lora_client_create(plan, NULL, &c.client)) != TSAFE_OK ||
        (st = tsafe_lora_server_create(plan, &c.server)) != TSAFE_OK ||
        (st = tsafe_lora_site_create(tsafe_lora_server_context(c.server), plan, A, B, dout, 1.0f,
                                     &c.server_site)) != TSAFE_OK ||
        (st = tsafe_lora_local_use_backend(c.local, bench_backend)) != TSAFE_OK ||
        (st = tsafe_lora_server_use_backend(c.server, bench_backend)) != TSAFE_OK ||
        (st = tsafe_lora_server_response_size(
             c.server, (const tsafe_lora_site *const *)&c.server_site, 1, &c.resp_cap)) !=
            TSAFE_OK ||
        (st = (c.resp = malloc(c.resp_cap)) ? TSAFE_OK : TSAFE_E_NOMEM) != TSAFE_OK) {
        rc = tool_fail("bench lora: setup", st);
        goto out;
    }
    char params[96], note[96];
    snprintf(params, sizeof params, "%s d=%u r=%u b=%u", plan->name, d, rank, plan->n_batches);
    int reps = quick ? 5 : 41;
    double plain = bench_median_us(run_plain, &c, 3, quick ? 11 : 201);
    bench_report_add(r, group, "plaintext LoRA s*B*(A*x)", params, plain, "OpenBLAS sgemv");

    memset(&c.stats, 0, sizeof c.stats);
    double local = bench_median_us(run_local, &c, 2, reps);
    snprintf(note, sizeof note, "HE/plain %.1fx", local / plain);
    bench_report_add(r, group, "HE-LoRA local (sk in host)", params, local, note);
    add_breakdown(r, group, "local", params, &c.stats, reps + 2);

    memset(&c.stats, 0, sizeof c.stats);
    double two = bench_median_us(run_two_party, &c, 2, reps);
    /* SEAL is measured in the same run by make bench-seal, never quoted */
    snprintf(note, sizeof note, "HE/plain %.1fx (SEAL, same run: make bench-seal)",
             two / plain);
    bench_report_add(r, group, "HE-LoRA plain ZeRo-MOAI (bytes)", params, two, note);
    add_breakdown(r, group, "plain-zero-moai", params, &c.stats, reps + 2);
    rc = c.failed ? tool_fail("bench lora: run", TSAFE_E_STATE) : 0;
    if (!rc)
        rc = bench_per_site(r, group, params, &c, 0, quick ? 7 : 41);
    if (!rc)
        rc = bench_per_site(r, group, params, &c, 1, quick ? 7 : 41);
    /* the sealed modes derive their own parameters: run them once per shape */
    if (!rc && strncmp(plan->name, "auto", 4) == 0) {
        snprintf(params, sizeof params, "sealed d=%u r=%u", d, rank);
        rc = bench_sealed(r, group, params, TSAFE_SEALED, 0, A, B, c.x, d, rank, dout, reps,
                          plain, local, two);
        if (!rc)
            rc = bench_sealed(r, group, params, TSAFE_SEALED_PRIVATE, 0, A, B, c.x, d, rank, dout,
                              reps, plain, local, two);
        if (!rc) /* opts.unchecked_shares: what the fold costs (MALICIOUS_CLIENT.md) */
            rc = bench_sealed(r, group, params, TSAFE_SEALED_PRIVATE, 1, A, B, c.x, d, rank,
                              dout, reps, plain, local, two);
    }
out:
    tsafe_lora_site_free(c.site);
    tsafe_lora_site_free(c.server_site);
    tsafe_lora_local_free(c.local);
    tsafe_lora_client_free(c.client);
    tsafe_lora_server_free(c.server);
    free(A); free(B); free(c.x); free(c.delta); free(c.u); free(c.resp);
    return rc;
}

int bench_lora(bench_report *r, int quick)
{
    static const uint32_t dims[] = {2048, 1536};
    for (int i = 0; i < 2; i++) {
        tsafe_lora_plan seed, planned;
        tsafe_status st;
        if ((st = tsafe_lora_plan_preset("seed-n16384", dims[i], 32, 1.0, 0.05, &seed)) != TSAFE_OK)
            return tool_fail("bench lora: preset", st);
        if ((st = tsafe_lora_plan_auto(dims[i], 32, 1.0, 0.05, 1e-6, &planned)) != TSAFE_OK)
            return tool_fail("bench lora: planner", st);
        int rc = bench_one(r, &seed, quick);
        if (!rc)
            rc = bench_one(r, &planned, quick);
        if (rc)
            return rc;
    }
    return 0;
}

/* Local-mode per-token delta at d=2048 for ranks 8..64 under the seeds'
 * presets and the planner, plus the plaintext time: the data of the
 * "latency vs N and rank" plot. */
int bench_lora_sweep(bench_report *r, int quick)
{
    static const uint32_t ranks[] = {8, 16, 32, 64};
    static const char *sets[] = {"auto", "ifma-n8192", "seed-n16384", "seed-n32768"};
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++)
        for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++) {
            tsafe_lora_plan plan;
            tsafe_status st = !strcmp(sets[si], "auto")
                ? tsafe_lora_plan_auto(2048, ranks[ri], 1.0, 0.05, 1e-6, &plan)
                : tsafe_lora_plan_preset(sets[si], 2048, ranks[ri], 1.0, 0.05, &plan);
            if (st != TSAFE_OK)
                return tool_fail("bench lora-sweep: plan", st);
            lora_case c;
            memset(&c, 0, sizeof c);
            c.plan = &plan;
            float *A = det_floats((size_t)ranks[ri] * 2048, 0.05, 1);
            float *B = det_floats((size_t)2048 * ranks[ri], 0.05, 2);
            c.x = det_floats(2048, 1.0, 3);
            c.delta = malloc(2048 * sizeof *c.delta);
            int ok = A && B && c.x && c.delta &&
                     tsafe_lora_local_create(&plan, NULL, &c.local) == TSAFE_OK &&
                     tsafe_lora_site_create(tsafe_lora_local_context(c.local), &plan, A, B,
                                            2048, 1.0f, &c.site) == TSAFE_OK;
            if (ok) {
                char params[96];
                snprintf(params, sizeof params, "%s N=%u r=%u", plan.name,
                         1u << plan.params.log_n, ranks[ri]);
                double t = bench_median_us(run_local, &c, 1, quick ? 3 : 15);
                bench_report_add(r, "lora sweep (local, d=2048)", sets[si], params, t, NULL);
                if (si == 0) {
                    double p = bench_median_us(run_plain, &c, 3, quick ? 11 : 101);
                    bench_report_add(r, "lora sweep (local, d=2048)", "plaintext", params, p, NULL);
                }
            }
            tsafe_lora_site_free(c.site);
            tsafe_lora_local_free(c.local);
            free(A); free(B); free(c.x); free(c.delta);
            if (!ok || c.failed)
                return tool_fail("bench lora-sweep", TSAFE_E_STATE);
        }
    return 0;
}
