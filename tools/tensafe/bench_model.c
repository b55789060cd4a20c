/* `tensafe bench model`: every HE-LoRA site of one token of a whole model,
 * sealed and sealed-private, on synthetic adapter weights of the model's
 * shapes. One layer is measured group by group (a group = the sites that
 * read the same x and so share one query: q/k/v, o, gate/up, down; MoE:
 * the top-k experts' gate/up share the layer's x, each expert's down has
 * its own) and multiplied by the layer count, as every layer has the same
 * shapes. Client and server times are taken apart (a server and a client
 * session joined in one process, tsafe_session_pump: the real frames, the
 * sessions' round order); rounds are the message round trips (2 per
 * query). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tensafe/tensafe.h"
#include "tensafe/lora_session.h"

#define MB_RANK 16
#define MB_MAX_SITES 16

typedef struct {
    const char *name;
    uint32_t d_in, n_sites, d_out, repeat; /* n_sites of d_out each, repeat queries per layer */
    uint32_t split; /* > 1: d_in above the sealed plans' 4096 is cut into this many column
                       pieces, each its own site and query (delta = sum of the pieces') */
} mb_group;

typedef struct {
    const char *name;
    uint32_t layers;
    mb_group g[4];
    size_t n_groups;
} mb_model;

static const mb_model k_models[] = {
    {"Qwen2.5-1.5B q/k/v/o (112 sites)", 28,
     {{"q,k,v", 1536, 3, 1536, 1, 1}, {"o", 1536, 1, 1536, 1, 1}}, 2},
    {"Qwen2.5-1.5B all 7 (196 sites)", 28,
     {{"q,k,v", 1536, 3, 1536, 1, 1},
      {"o", 1536, 1, 1536, 1, 1},
      {"gate,up", 1536, 2, 8960, 1, 1},
      {"down (3 pieces)", 8960, 1, 1536, 1, 3}},
     4},
    {"Qwen3-30B-A3B top-8 (1344 sites)", 48,
     {{"q,k,v", 2048, 3, 4096, 1, 1},
      {"o", 4096, 1, 2048, 1, 1},
      {"8 x gate,up", 2048, 16, 768, 1, 1},
      {"down (x8)", 768, 1, 2048, 8, 1}},
     4},
};

typedef struct {
    double client_us, server_us;
    double up, down;
} mb_cost;

static float mb_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return ((float)(*s >> 40) / (float)(1u << 24) - 0.5f) * 0.1f;
}

/* The group's service: n_sites synthetic modules (d_in -> d_out, rank
 * MB_RANK) on the plan both sides derive for a query of n_sites sites. */
static tsafe_status mb_service(tsafe_sealed_mode mode, const mb_group *g,
                               tsafe_session_service **out)
{
    size_t na = (size_t)MB_RANK * g->d_in, nb = (size_t)g->d_out * MB_RANK;
    float *w = malloc((na + nb) * g->n_sites * sizeof *w);
    if (!w)
        return TSAFE_E_NOMEM;
    tsafe_session_module mods[MB_MAX_SITES];
    uint64_t seed = 0x5eed;
    for (size_t i = 0; i < g->n_sites; i++) {
        float *A = w + i * (na + nb), *B = A + na;
        for (size_t k = 0; k < na; k++)
            A[k] = mb_rand(&seed);
        for (size_t k = 0; k < nb; k++)
            B[k] = mb_rand(&seed);
        mods[i] = (tsafe_session_module){"site", A, B, g->d_in, MB_RANK, g->d_out, 2.0f};
    }
    /* sealed mode runs here for its figures only: the opt-in is ours, and
     * its rows say so (semi-honest) */
    tsafe_session_service_opts so = {.protocol = (tsafe_session_protocol)mode};
    so.sealed.semi_honest = mode == TSAFE_SEALED;
    tsafe_status st = tsafe_session_service_create(&so, mods, g->n_sites, out);
    free(w);
    return st;
}

/* A server and a client session of svc joined in this process, past the
 * hello. */
static tsafe_status mb_open(const tsafe_session_service *svc, tsafe_sealed_mode mode,
                            tsafe_session_server **s, tsafe_session_client **c)
{
    tsafe_session_client_opts co = {.protocol = (tsafe_session_protocol)mode,
                                    .allow_no_dp = mode == TSAFE_SEALED};
    co.sealed.semi_honest = mode == TSAFE_SEALED;
    tsafe_status st = tsafe_session_server_create(svc, NULL, s);
    if (st == TSAFE_OK)
        st = tsafe_session_client_create(&co, NULL, c);
    if (st == TSAFE_OK)
        st = tsafe_session_pump(*s, *c);
    return st;
}

/* One query of group g (median over reps after a warm-up), through the
 * sessions: each side's time is its own work (the client's crypto, the
 * server's rounds), the bytes are the library messages (the frames less
 * their 12-byte headers, two frames each way). */
static tsafe_status mb_query(tsafe_sealed_mode mode, const mb_group *g, int reps, mb_cost *out)
{
    tsafe_session_service *svc = NULL;
    tsafe_session_server *s = NULL;
    tsafe_session_client *c = NULL;
    float *x = malloc(g->d_in * sizeof *x),
          *dflat = malloc((size_t)g->n_sites * g->d_out * sizeof *dflat);
    float *delta[MB_MAX_SITES];
    double *tc = calloc((size_t)reps, sizeof *tc), *ts = calloc((size_t)reps, sizeof *ts);
    uint64_t seed = 0x5eed5;
    double up = 0, down = 0;
    tsafe_status st = !x || !dflat || !tc || !ts ? TSAFE_E_NOMEM : TSAFE_OK;
    for (size_t i = 0; dflat && i < g->n_sites; i++)
        delta[i] = dflat + i * g->d_out;
    if (st == TSAFE_OK && (st = mb_service(mode, g, &svc)) == TSAFE_OK)
        st = mb_open(svc, mode, &s, &c);
    for (int rep = -1; st == TSAFE_OK && rep < reps; rep++) {
        for (uint32_t k = 0; k < g->d_in; k++)
            x[k] = mb_rand(&seed) * 40.0f;
        tsafe_session_stats c0, s0, c1, s1;
        tsafe_session_client_stats(c, &c0);
        tsafe_session_server_stats(s, &s0);
        if ((st = tsafe_session_client_submit(c, NULL, 0, x, delta)) != TSAFE_OK ||
            (st = tsafe_session_pump(s, c)) != TSAFE_OK)
            break;
        tsafe_session_client_stats(c, &c1);
        tsafe_session_server_stats(s, &s1);
        up = (double)(c1.bytes_out - c0.bytes_out) - 2 * 12;
        down = (double)(s1.bytes_out - s0.bytes_out) - 2 * 12;
        if (rep >= 0) {
            tc[rep] = c1.work_us - c0.work_us;
            ts[rep] = s1.work_us - s0.work_us;
        }
    }
    if (st == TSAFE_OK) {
        out->client_us = bench_median_of(tc, reps);
        out->server_us = bench_median_of(ts, reps);
        out->up = up;
        out->down = down;
    }
    tsafe_session_client_free(c);
    tsafe_session_server_free(s);
    tsafe_session_service_free(svc);
    free(x);
    free(dflat);
    free(tc);
    free(ts);
    return st;
}

int bench_model(bench_report *r, int quick)
{
    const tsafe_sealed_mode modes[] = {TSAFE_SEALED, TSAFE_SEALED_PRIVATE};
    int reps = quick ? 1 : 3;
    for (size_t mi = 0; mi < sizeof k_models / sizeof k_models[0]; mi++) {
        const mb_model *m = &k_models[mi];
        for (int k = 0; k < 2; k++) {
            mb_cost tok = {0, 0, 0, 0};
            double queries = 0, sites = 0;
            for (size_t gi = 0; gi < m->n_groups; gi++) {
                mb_group piece = m->g[gi];
                const mb_group *g = &piece;
                uint32_t split = piece.split > 1 ? piece.split : 1;
                piece.d_in = (piece.d_in + split - 1) / split;
                piece.repeat *= split;
                mb_cost q = {0, 0, 0, 0};
                tsafe_status st = mb_query(modes[k], g, reps, &q);
                if (st != TSAFE_OK) {
                    fprintf(stderr, "tensafe: bench model: %s %s d_in %u: %s\n", m->name,
                            g->name, g->d_in, tsafe_strerror(st));
                    return 1;
                }
                double n = (double)g->repeat * m->layers;
                tok.client_us += q.client_us * n;
                tok.server_us += q.server_us * n;
                tok.up += q.up * n;
                tok.down += q.down * n;
                queries += n;
                sites += n / split * g->n_sites; /* adapter sites, not pieces */
            }
            char params[96], grp[96];
            snprintf(grp, sizeof grp, "model: %s", m->name);
            snprintf(params, sizeof params, "%s, r=%d, %u layers (1 measured)",
                     modes[k] == TSAFE_SEALED ? "sealed (semi-honest)" : "sealed-private", MB_RANK,
                     m->layers);
            bench_report_add_value(r, grp, "client ms/token", params, tok.client_us / 1e3, "ms");
            bench_report_add_value(r, grp, "server ms/token", params, tok.server_us / 1e3, "ms");
            bench_report_add_value(r, grp, "ms/token (both sides, one machine)", params,
                                   (tok.client_us + tok.server_us) / 1e3, "ms");
            bench_report_add_value(r, grp, "bytes up/token", params, tok.up, "B");
            bench_report_add_value(r, grp, "bytes down/token", params, tok.down, "B");
            bench_report_add_value(r, grp, "sites/token", params, sites, "sites");
            bench_report_add_value(r, grp, "rounds/token", params, 2 * queries, "round trips");
        }
    }
    return 0;
}
