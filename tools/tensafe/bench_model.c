/* `tensafe bench model`: every HE-LoRA site of one token of a whole model,
 * sealed and sealed-private, on synthetic adapter weights of the model's
 * shapes. One layer is measured group by group (a group = the sites that
 * read the same x and so share one query: q/k/v, o, gate/up, down; MoE:
 * the top-k experts' gate/up share the layer's x, each expert's down has
 * its own) and multiplied by the layer count, as every layer has the same
 * shapes. Client and server times are taken apart (the library calls of
 * each side, in one process, exchanging the real bytes); rounds are the
 * message round trips (2 per query). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tensafe/tensafe.h"

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

/* One query of group g (median over reps after a warm-up). Every site
 * takes d_out outputs (k/v are given q's width: an upper bound). */
static tsafe_status mb_query(tsafe_sealed_mode mode, const mb_group *g, int reps, mb_cost *out)
{
    tsafe_sealed_plan plan;
    /* sealed mode runs here for its figures only: the opt-in is ours, and
     * its rows say so (semi-honest) */
    tsafe_sealed_opts o = {.sites_per_query = g->n_sites, .semi_honest = mode == TSAFE_SEALED};
    tsafe_status st = tsafe_sealed_plan_derive(mode, g->d_in, MB_RANK, g->d_out, &o, &plan);
    if (st != TSAFE_OK)
        return st;
    tsafe_sealed_site *sites[MB_MAX_SITES] = {NULL};
    tsafe_sealed_client *c = NULL;
    tsafe_sealed_server *s = NULL;
    float *A = malloc((size_t)MB_RANK * g->d_in * sizeof *A),
          *B = malloc((size_t)g->d_out * MB_RANK * sizeof *B), *x = malloc(g->d_in * sizeof *x),
          *dflat = malloc((size_t)g->n_sites * g->d_out * sizeof *dflat);
    float *delta[MB_MAX_SITES];
    uint32_t ranks[MB_MAX_SITES], outs[MB_MAX_SITES];
    double *tc = calloc((size_t)reps, sizeof *tc), *ts = calloc((size_t)reps, sizeof *ts);
    uint64_t seed = 0x5eed;
    size_t up = 0, down = 0;
    if (!A || !B || !x || !dflat || !tc || !ts)
        st = TSAFE_E_NOMEM;
    for (size_t i = 0; st == TSAFE_OK && i < g->n_sites; i++) {
        for (size_t k = 0; k < (size_t)MB_RANK * g->d_in; k++)
            A[k] = mb_rand(&seed);
        for (size_t k = 0; k < (size_t)g->d_out * MB_RANK; k++)
            B[k] = mb_rand(&seed);
        st = tsafe_sealed_site_create(&plan, A, B, MB_RANK, g->d_out, 2.0f, &sites[i]);
        delta[i] = dflat + i * g->d_out;
        ranks[i] = MB_RANK;
        outs[i] = g->d_out;
    }
    uint8_t *m1 = NULL, *m2 = NULL;
    size_t l1 = 0, l2 = 0;
    if (st == TSAFE_OK && (st = tsafe_sealed_client_create(&plan, NULL, &c)) == TSAFE_OK &&
        (st = tsafe_sealed_server_create(&plan, &s)) == TSAFE_OK &&
        (st = tsafe_sealed_client_hello(c, &m1, &l1)) == TSAFE_OK)
        st = tsafe_sealed_server_accept(s, m1, l1);
    tsafe_lora_bytes_free(m1);
    m1 = NULL;
    const tsafe_sealed_site *const *ss = (const tsafe_sealed_site *const *)sites;
    for (int rep = -1; st == TSAFE_OK && rep < reps; rep++) {
        for (uint32_t k = 0; k < g->d_in; k++)
            x[k] = mb_rand(&seed) * 40.0f;
        double t0 = bench_now_us(), cl = 0, sv = 0;
        if ((st = tsafe_sealed_client_query(c, x, &m1, &l1, NULL)) != TSAFE_OK)
            break;
        double t1 = bench_now_us();
        cl += t1 - t0;
        up = l1;
        st = tsafe_sealed_server_round1(s, ss, g->n_sites, m1, l1, &m2, &l2, NULL);
        tsafe_lora_bytes_free(m1);
        m1 = NULL;
        double t2 = bench_now_us();
        sv += t2 - t1;
        down = l2;
        if (st == TSAFE_OK)
            st = tsafe_sealed_client_respond(c, m2, l2, g->n_sites, ranks, outs, NULL, 1, &m1,
                                             &l1, NULL);
        tsafe_lora_bytes_free(m2);
        m2 = NULL;
        double t3 = bench_now_us();
        cl += t3 - t2;
        up += l1;
        if (st == TSAFE_OK)
            st = tsafe_sealed_server_round2(s, ss, g->n_sites, m1, l1, &m2, &l2, NULL);
        tsafe_lora_bytes_free(m1);
        m1 = NULL;
        double t4 = bench_now_us();
        sv += t4 - t3;
        down += l2;
        if (st == TSAFE_OK)
            st = tsafe_sealed_client_finish(c, m2, l2, g->n_sites, outs, delta, NULL);
        tsafe_lora_bytes_free(m2);
        m2 = NULL;
        cl += bench_now_us() - t4;
        if (rep >= 0) {
            tc[rep] = cl;
            ts[rep] = sv;
        }
    }
    if (st == TSAFE_OK) {
        out->client_us = bench_median_of(tc, reps);
        out->server_us = bench_median_of(ts, reps);
        out->up = (double)up;
        out->down = (double)down;
    }
    for (size_t i = 0; i < g->n_sites; i++)
        tsafe_sealed_site_free(sites[i]);
    tsafe_sealed_client_free(c);
    tsafe_sealed_server_free(s);
    free(A);
    free(B);
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
