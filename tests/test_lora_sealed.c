/* Sealed two-party HE-LoRA: exactness against an independent integer
 * fixed-point reference (sealed: the server's reconstructed u is bit for
 * bit sum_j x_q[j] A_q[i][j]), delta against double precision
 * (sealed-private), plan derivation and checks, sequencing. The attack
 * tests live in test_sealed_attacks.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "tensafe/backend_impl.h"
#include "tensafe/lora_sealed.h"
#include "../libtensafe-lora/src/sealed/sealed_internal.h"
#include "support/tsafe_test_lora.h"
#include "support/tsafe_test_rng.h"
#include "reference/tsafe_ref.h"
#include "../libtensafe-lora/src/dp/dp_internal.h"

typedef struct {
    uint32_t d_in, rank, d_out;
    float *A, *B, *x;
    float scale;
} adapter;

static void adapter_make(adapter *a, uint32_t d_in, uint32_t rank, uint32_t d_out)
{
    a->d_in = d_in;
    a->rank = rank;
    a->d_out = d_out;
    a->A = malloc((size_t)rank * d_in * sizeof *a->A);
    a->B = malloc((size_t)d_out * rank * sizeof *a->B);
    a->x = malloc(d_in * sizeof *a->x);
    for (size_t i = 0; i < (size_t)rank * d_in; i++)
        a->A[i] = tsafe_test_uniform_float(-0.05, 0.05);
    for (size_t i = 0; i < (size_t)d_out * rank; i++)
        a->B[i] = tsafe_test_uniform_float(-0.02, 0.02);
    for (size_t i = 0; i < d_in; i++)
        a->x[i] = tsafe_test_uniform_float(-3, 3);
    a->scale = 2.0f;
}

static void adapter_free(adapter *a)
{
    free(a->A);
    free(a->B);
    free(a->x);
}

/* The fixed-point rules of docs/PROTOCOL.md for sealed mode, written out
 * again: x on the scale ||x||_2 / (x_max sqrt(d_in) - sqrt(d_in)/2 - 1),
 * A on one scale per site. */
static double reference_sx(const tsafe_sealed_plan *p, const adapter *a)
{
    double l2 = 0;
    for (uint32_t j = 0; j < a->d_in; j++)
        l2 += (double)a->x[j] * a->x[j];
    double x2 = (double)((1 << (p->x_bits - 1)) - 1) * sqrt((double)a->d_in);
    return sqrt(l2) / (x2 - sqrt((double)a->d_in) / 2 - 1);
}

static double reference_sa(const tsafe_sealed_plan *p, const adapter *a, int row)
{
    size_t from = row < 0 ? 0 : (size_t)row * a->d_in;
    size_t to = row < 0 ? (size_t)a->rank * a->d_in : from + a->d_in;
    double ma = 0;
    for (size_t i = from; i < to; i++)
        ma = fmax(ma, fabs(a->A[i]));
    return ma / (double)((1 << (p->a_bits - 1)) - 1);
}

static void reference_u(const tsafe_sealed_plan *p, const adapter *a, int64_t *u)
{
    double sx = reference_sx(p, a);
    int per_row = p->mode == TSAFE_SEALED_PRIVATE;
    for (uint32_t i = 0; i < a->rank; i++) {
        double sa = reference_sa(p, a, per_row ? (int)i : -1);
        int64_t acc = 0;
        for (uint32_t j = 0; j < a->d_in; j++)
            acc += (int64_t)lrint(a->x[j] / sx) *
                   (int64_t)lrint(a->A[(size_t)i * a->d_in + j] / sa);
        u[i] = acc;
    }
}

static void reference_delta(const adapter *a, double *delta)
{
    double *u = calloc(a->rank, sizeof *u);
    for (uint32_t i = 0; i < a->rank; i++)
        for (uint32_t j = 0; j < a->d_in; j++)
            u[i] += (double)a->A[(size_t)i * a->d_in + j] * a->x[j];
    for (uint32_t o = 0; o < a->d_out; o++) {
        double acc = 0;
        for (uint32_t i = 0; i < a->rank; i++)
            acc += (double)a->B[(size_t)o * a->rank + i] * u[i];
        delta[o] = a->scale * acc;
    }
    free(u);
}

/* One token through client and server, every message as bytes. */
static void run_token(tsafe_sealed_client *c, tsafe_sealed_server *s,
                      const tsafe_sealed_site *site, const adapter *a, float *delta)
{
    uint8_t *q, *r1, *sh, *r2;
    size_t ql, r1l, shl, r2l;
    assert_int_equal(tsafe_sealed_client_query(c, a->x, &q, &ql, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round1(s, &site, 1, q, ql, &r1, &r1l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_respond(c, r1, r1l, 1, &a->rank, &a->d_out, NULL, 1,
                                                 &sh, &shl, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round2(s, &site, 1, sh, shl, &r2, &r2l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_finish(c, r2, r2l, 1, &a->d_out, &delta, NULL), TSAFE_OK);
    /* the offline half for the next token: the shapes' second tokens seal
     * with prepared encryptions of zero */
    assert_int_equal(tsafe_sealed_server_refill(s, NULL), TSAFE_OK);
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(r1);
    tsafe_lora_bytes_free(sh);
    tsafe_lora_bytes_free(r2);
}

static void open_pair(const tsafe_sealed_plan *p, tsafe_sealed_client **c,
                      tsafe_sealed_server **s)
{
    uint8_t *hello;
    size_t hl;
    assert_int_equal(tsafe_sealed_client_create(p, NULL, c), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(p, s), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_hello(*c, &hello, &hl), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(*s, hello, hl), TSAFE_OK);
    tsafe_lora_bytes_free(hello);
}

/* Frees what a one-site token test held. */
static void close_shape(tsafe_sealed_client *c, tsafe_sealed_server *s,
                        tsafe_sealed_site *site, adapter *a, float *delta, double *want)
{
    free(delta);
    free(want);
    tsafe_sealed_client_free(c);
    tsafe_sealed_server_free(s);
    tsafe_sealed_site_free(site);
    adapter_free(a);
}

/* A random adapter of one shape, its site under a plan derived for that
 * shape, and a client/server pair with an open session. */
static void one_site(tsafe_sealed_mode mode, uint32_t d_in, uint32_t rank, uint32_t d_out,
                     tsafe_sealed_plan *p, adapter *a, tsafe_sealed_site **site,
                     tsafe_sealed_client **c, tsafe_sealed_server **s)
{
    assert_int_equal(tsafe_sealed_plan_derive(mode, d_in, rank, d_out, &(tsafe_sealed_opts){.semi_honest = 1}, p),
                     TSAFE_OK);
    adapter_make(a, d_in, rank, d_out);
    assert_int_equal(tsafe_sealed_site_create(p, a->A, a->B, rank, d_out, a->scale, site),
                     TSAFE_OK);
    open_pair(p, c, s);
}

static void check_shape(tsafe_sealed_mode mode, uint32_t d_in, uint32_t rank, uint32_t d_out)
{
    tsafe_sealed_plan p;
    adapter a;
    tsafe_sealed_site *site;
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    one_site(mode, d_in, rank, d_out, &p, &a, &site, &c, &s);
    float *delta = malloc(d_out * sizeof *delta);
    double *want = malloc(d_out * sizeof *want);
    reference_delta(&a, want);
    for (int tok = 0; tok < 2; tok++) {
        for (uint32_t j = 0; j < d_in; j++)
            a.x[j] = tsafe_test_uniform_float(-3, 3);
        reference_delta(&a, want);
        run_token(c, s, site, &a, delta);
        double err = tsafe_test_rel_l2(delta, want, d_out);
        if (mode == TSAFE_SEALED) {
            int64_t *u = malloc(rank * sizeof *u), *ref = malloc(rank * sizeof *ref);
            assert_int_equal(tsafe_sealed_server_last_u(s, 0, u, rank), TSAFE_OK);
            reference_u(&p, &a, ref);
            for (uint32_t i = 0; i < rank; i++)
                assert_true(u[i] == ref[i]); /* bit for bit */
            free(u);
            free(ref);
        }
        printf("# %s d_in=%u r=%u d_out=%u: rel L2 %.2e (model %.2e)\n",
               mode == TSAFE_SEALED ? "sealed" : "sealed-private", d_in, rank, d_out,
               err, p.expected_rel_error);
        assert_true(err <= 1e-3);
    }
    close_shape(c, s, site, &a, delta, want);
}

static void sealed_exact_shapes(void **state)
{
    (void)state;
    check_shape(TSAFE_SEALED, 2048, 32, 2048);
    check_shape(TSAFE_SEALED, 1536, 8, 256);   /* GQA: d_out != d_in */
    check_shape(TSAFE_SEALED, 1536, 64, 1536);
    check_shape(TSAFE_SEALED, 2048, 16, 512);
}

static void sealed_private_shapes(void **state)
{
    (void)state;
    check_shape(TSAFE_SEALED_PRIVATE, 2048, 32, 2048);
    check_shape(TSAFE_SEALED_PRIVATE, 1536, 8, 256);
    check_shape(TSAFE_SEALED_PRIVATE, 2048, 64, 512);
    check_shape(TSAFE_SEALED_PRIVATE, 1536, 16, 1536);
}

/* Sites of one plan with different shapes in one token: a site with few
 * outputs takes a longer round-2 chunk than the plan's largest site (fewer
 * share ciphertexts), every delta within the bound. */
static void sealed_private_mixed_sites(void **state)
{
    (void)state;
    enum { NS = 3 };
    const uint32_t d_in = 1024, rank[NS] = {32, 8, 32}, d_out[NS] = {512, 256, 4096};
    tsafe_sealed_plan p;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, d_in, 32, 4096, NULL, &p),
                     TSAFE_OK);
    tsafe_sealed_layout big, small;
    tsafe_sealed_layout2(&p, 32, 4096, &big);
    tsafe_sealed_layout2(&p, 32, 512, &small);
    printf("# round-2 chunk: plan %u, d_out 4096 -> %u, d_out 512 -> %u\n", p.chunk2,
           big.chunk, small.chunk);
    assert_int_equal(big.chunk, p.chunk2);
    assert_true(small.chunk > p.chunk2);
    tsafe_sealed_sizes zs, zb;
    assert_int_equal(tsafe_sealed_plan_sizes(&p, 32, 512, &zs), TSAFE_OK);
    assert_int_equal(tsafe_sealed_plan_sizes(&p, 32, 4096, &zb), TSAFE_OK);
    assert_true(zs.share < zb.share);

    adapter a[NS];
    tsafe_sealed_site *site[NS];
    float *delta[NS];
    double *want[NS];
    for (int i = 0; i < NS; i++) {
        adapter_make(&a[i], d_in, rank[i], d_out[i]);
        if (i > 0)
            memcpy(a[i].x, a[0].x, d_in * sizeof *a[0].x); /* one x for all */
        assert_int_equal(tsafe_sealed_site_create(&p, a[i].A, a[i].B, rank[i], d_out[i],
                                                  a[i].scale, &site[i]), TSAFE_OK);
        delta[i] = malloc(d_out[i] * sizeof *delta[i]);
        want[i] = malloc(d_out[i] * sizeof *want[i]);
        reference_delta(&a[i], want[i]);
    }
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    open_pair(&p, &c, &s);
    const tsafe_sealed_site *ss[NS] = {site[0], site[1], site[2]};
    uint8_t *q, *r1, *sh, *r2;
    size_t ql, r1l, shl, r2l;
    assert_int_equal(tsafe_sealed_client_query(c, a[0].x, &q, &ql, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round1(s, ss, NS, q, ql, &r1, &r1l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_respond(c, r1, r1l, NS, rank, d_out, NULL, 1, &sh,
                                                 &shl, NULL), TSAFE_OK);
    size_t want_share = 0;
    for (int i = 0; i < NS; i++) {
        tsafe_sealed_sizes z;
        assert_int_equal(tsafe_sealed_plan_sizes(&p, rank[i], d_out[i], &z), TSAFE_OK);
        want_share += z.share;
    }
    /* + header 8, tag 28, site count 4, per site rank and ciphertext count */
    assert_int_equal(shl, want_share + 8 + 28 + 4 + 8 * NS);
    assert_int_equal(tsafe_sealed_server_round2(s, ss, NS, sh, shl, &r2, &r2l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_finish(c, r2, r2l, NS, d_out, delta, NULL), TSAFE_OK);
    for (int i = 0; i < NS; i++) {
        double err = tsafe_test_rel_l2(delta[i], want[i], d_out[i]);
        printf("# mixed site %d (r=%u d_out=%u): rel L2 %.2e\n", i, rank[i], d_out[i], err);
        assert_true(err <= 1e-3);
        tsafe_sealed_site_free(site[i]);
        adapter_free(&a[i]);
        free(delta[i]);
        free(want[i]);
    }
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(r1);
    tsafe_lora_bytes_free(sh);
    tsafe_lora_bytes_free(r2);
    tsafe_sealed_client_free(c);
    tsafe_sealed_server_free(s);
}

/* One sealed-private token of sites ss through client c and server s;
 * prep: call tsafe_sealed_server_prepare_round2 between the rounds with
 * the sites prep_ss (NULL: do not). */
static void token_sites(tsafe_sealed_client *c, tsafe_sealed_server *s,
                        const tsafe_sealed_site *const *ss, const tsafe_sealed_site *const *prep_ss,
                        int n, const uint32_t *rank, const uint32_t *d_out, const float *x,
                        float **delta)
{
    uint8_t *q, *r1, *sh, *r2;
    size_t ql, r1l, shl, r2l;
    assert_int_equal(tsafe_sealed_client_query(c, x, &q, &ql, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round1(s, ss, (size_t)n, q, ql, &r1, &r1l, NULL),
                     TSAFE_OK);
    if (prep_ss) {
        tsafe_lora_stats st = {0};
        assert_int_equal(tsafe_sealed_server_prepare_round2(s, prep_ss, (size_t)n, &st),
                         TSAFE_OK);
        /* a second call for the same token does nothing */
        assert_int_equal(tsafe_sealed_server_prepare_round2(s, prep_ss, (size_t)n, NULL),
                         TSAFE_OK);
    }
    assert_int_equal(tsafe_sealed_client_respond(c, r1, r1l, (size_t)n, rank, d_out, NULL, 1,
                                                 &sh, &shl, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round2(s, ss, (size_t)n, sh, shl, &r2, &r2l, NULL),
                     TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_finish(c, r2, r2l, (size_t)n, d_out, delta, NULL),
                     TSAFE_OK);
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(r1);
    tsafe_lora_bytes_free(sh);
    tsafe_lora_bytes_free(r2);
}

/* Round 2 "prepared" between the rounds (what tensafe serve calls while
 * the client answers; since plan version 7 there is nothing to prepare,
 * and the call must change nothing) gives the deltas of round 2 done in
 * one go: two servers with the same seed draw the same masks R; the
 * clients' encryptions and the refill between tokens differ, and round 1
 * reads a stochastic rounding (a flood of a whole step, plan version 7),
 * so the two deltas differ by the protocol's rounding of u~ (one unit
 * of a coordinate here and there), well within the plan's error model,
 * and each is within 1e-3 of the reference. Also with the preparation
 * called for other site objects, and the preparation's refusals. */
static void same_within_rounding(const float *a, const float *b, uint32_t n,
                                 const tsafe_sealed_plan *p)
{
    double *ad = malloc(n * sizeof *ad);
    for (uint32_t j = 0; j < n; j++)
        ad[j] = a[j];
    double e = tsafe_test_rel_l2(b, ad, n);
    free(ad);
    assert_true(e <= 2 * p->expected_rel_error);
}

static void prepared_round2_same_deltas(void **state)
{
    (void)state;
    enum { NS = 2 };
    const uint32_t d_in = 1536, rank[NS] = {16, 16}, d_out[NS] = {512, 1536};
    tsafe_sealed_plan p;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, d_in, 16, 1536, NULL, &p),
                     TSAFE_OK);
    adapter a[NS];
    tsafe_sealed_site *site[NS], *twin;
    float *dA[NS], *dB[NS];
    double *want[NS];
    for (int i = 0; i < NS; i++) {
        adapter_make(&a[i], d_in, rank[i], d_out[i]);
        assert_int_equal(tsafe_sealed_site_create(&p, a[i].A, a[i].B, rank[i], d_out[i],
                                                  a[i].scale, &site[i]), TSAFE_OK);
        dA[i] = malloc(d_out[i] * sizeof *dA[i]);
        dB[i] = malloc(d_out[i] * sizeof *dB[i]);
        want[i] = malloc(d_out[i] * sizeof *want[i]);
    }
    assert_int_equal(tsafe_sealed_site_create(&p, a[1].A, a[1].B, rank[1], d_out[1],
                                              a[1].scale, &twin), TSAFE_OK);
    tsafe_sealed_client *cA, *cB;
    tsafe_sealed_server *sA, *sB;
    open_pair(&p, &cA, &sA);
    open_pair(&p, &cB, &sB);
    const tsafe_sealed_site *ss[NS] = {site[0], site[1]}, *other[NS] = {site[0], twin};
    for (int tok = 0; tok < 3; tok++) {
        /* the same seed for both servers at each token (the preparation
         * draws its own seeds, which would shift B's stream) */
        uint8_t seed[32];
        tsafe_test_seed32(seed);
        tsafe_sealed_server_debug_seed(sA, seed);
        tsafe_sealed_server_debug_seed(sB, seed);
        for (uint32_t j = 0; j < d_in; j++)
            a[0].x[j] = tsafe_test_uniform_float(-3, 3);
        memcpy(a[1].x, a[0].x, d_in * sizeof *a[0].x);
        token_sites(cA, sA, ss, NULL, NS, rank, d_out, a[0].x, dA);
        /* token 2: prepared for other objects, so round 2 redoes the work */
        token_sites(cB, sB, ss, tok == 2 ? other : ss, NS, rank, d_out, a[0].x, dB);
        for (int i = 0; i < NS; i++) {
            same_within_rounding(dA[i], dB[i], d_out[i], &p);
            reference_delta(&a[i], want[i]);
            double err = tsafe_test_rel_l2(dB[i], want[i], d_out[i]);
            printf("# prepared round 2, token %d site %d: rel L2 %.2e\n",
                   tok, i, err);
            assert_true(err <= 1e-3);
        }
        /* the offline half between tokens, as tensafe serve does */
        assert_int_equal(tsafe_sealed_server_refill(sB, NULL), TSAFE_OK);
    }
    /* refusals: no round 1 pending; a site of another rank than round 1's */
    assert_int_equal(tsafe_sealed_server_prepare_round2(sB, ss, NS, NULL), TSAFE_E_STATE);
    tsafe_sealed_site *narrow;
    assert_int_equal(tsafe_sealed_site_create(&p, a[0].A, a[0].B, 8, d_out[0], a[0].scale,
                                              &narrow), TSAFE_OK);
    uint8_t *q, *r1;
    size_t ql, r1l;
    assert_int_equal(tsafe_sealed_client_query(cB, a[0].x, &q, &ql, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round1(sB, ss, NS, q, ql, &r1, &r1l, NULL), TSAFE_OK);
    const tsafe_sealed_site *wrong[NS] = {narrow, site[1]};
    assert_int_equal(tsafe_sealed_server_prepare_round2(sB, wrong, NS, NULL), TSAFE_E_RANGE);
    assert_int_equal(tsafe_sealed_server_prepare_round2(sB, ss, 1, NULL), TSAFE_E_RANGE);
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(r1);
    tsafe_sealed_site_free(narrow);
    tsafe_sealed_site_free(twin);
    for (int i = 0; i < NS; i++) {
        tsafe_sealed_site_free(site[i]);
        adapter_free(&a[i]);
        free(dA[i]);
        free(dB[i]);
        free(want[i]);
    }
    tsafe_sealed_client_free(cA);
    tsafe_sealed_client_free(cB);
    tsafe_sealed_server_free(sA);
    tsafe_sealed_server_free(sB);
}

/* A query read by many sites: the planner takes a shorter x chunk (a longer
 * query, fewer response blocks per site) and the bytes of a token with that
 * many sites fall; the option is part of the plan (a server planning for
 * another count is refused), and a token still decrypts exactly. */
static void sites_per_query_split(void **state)
{
    (void)state;
    tsafe_sealed_opts one = {.sites_per_query = 1, .semi_honest = 1},
                      many = {.sites_per_query = 16, .semi_honest = 1};
    tsafe_sealed_plan p1, p16;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED, 2048, 32, 512, &one, &p1), TSAFE_OK);
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED, 2048, 32, 512, &many, &p16),
                     TSAFE_OK);
    assert_true(p16.chunk1 < p1.chunk1);
    tsafe_sealed_sizes z1, z16;
    assert_int_equal(tsafe_sealed_plan_sizes(&p1, 32, 512, &z1), TSAFE_OK);
    assert_int_equal(tsafe_sealed_plan_sizes(&p16, 32, 512, &z16), TSAFE_OK);
    size_t b1 = z1.query + 16 * z1.response1, b16 = z16.query + 16 * z16.response1;
    printf("# 16 sites per query: chunk1 %u -> %u, round-1 bytes %zu -> %zu\n", p1.chunk1,
           p16.chunk1, b1, b16);
    assert_true(b16 < b1);
    assert_int_equal(tsafe_sealed_plan_check(&p16), TSAFE_OK);
    tsafe_sealed_plan forged = p16;
    forged.sites_per_query = 1; /* the split of p16 under another count */
    assert_int_equal(tsafe_sealed_plan_check(&forged), TSAFE_E_PARAMS);
    tsafe_sealed_opts bad = {.sites_per_query = 5000, .semi_honest = 1};
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED, 2048, 32, 512, &bad, &p1),
                     TSAFE_E_RANGE);
    /* a token on the 16-site plan */
    adapter a;
    adapter_make(&a, 2048, 32, 512);
    tsafe_sealed_site *site;
    assert_int_equal(tsafe_sealed_site_create(&p16, a.A, a.B, 32, 512, a.scale, &site), TSAFE_OK);
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    open_pair(&p16, &c, &s);
    float *delta = malloc(512 * sizeof *delta);
    double *want = malloc(512 * sizeof *want);
    int64_t u[32], ref[32];
    reference_delta(&a, want);
    run_token(c, s, site, &a, delta);
    assert_int_equal(tsafe_sealed_server_last_u(s, 0, u, 32), TSAFE_OK);
    reference_u(&p16, &a, ref);
    for (int i = 0; i < 32; i++)
        assert_true(u[i] == ref[i]);
    assert_true(tsafe_test_rel_l2(delta, want, 512) <= 1e-3);
    close_shape(c, s, site, &a, delta, want);
}

/* The exact discrete Gaussian (CKS): empirical pmf against
 * exp(-y^2 / (2 sigma^2)) / Z by chi-square, and mean / variance at a large
 * sigma. */
static void discrete_gaussian_matches_pmf(void **state)
{
    (void)state;
    enum { N = 20000, K = 6 };
    double sigma = 1.5, counts[2 * K + 1] = {0}, z = 0;
    for (int i = 0; i < N; i++) {
        int64_t y;
        assert_int_equal(tsafe_dp_discrete_gaussian(sigma, &y), TSAFE_OK);
        int b = y < -K ? 0 : y > K ? 2 * K : (int)y + K;
        counts[b]++;
    }
    for (int y = -60; y <= 60; y++)
        z += exp(-(double)y * y / (2 * sigma * sigma));
    double chi = 0;
    for (int b = 0; b <= 2 * K; b++) {
        double p = 0;
        if (b == 0 || b == 2 * K) /* tails folded into the edge bins */
            for (int y = K; y <= 60; y++)
                p += exp(-(double)y * y / (2 * sigma * sigma)) / z;
        else
            p = exp(-(double)(b - K) * (b - K) / (2 * sigma * sigma)) / z;
        chi += (counts[b] - N * p) * (counts[b] - N * p) / (N * p);
    }
    /* 12 dof: 53.0 is passed by a correct sampler with probability 4e-7
     * (the 99.99 % point, 39.1, would fail one CI run in a few thousand) */
    printf("# discrete Gaussian sigma 1.5: chi2 %.1f over %d bins (12 dof, 1 - 4e-7: 53.0)\n",
           chi, 2 * K + 1);
    assert_true(chi < 53.0);
    double s1 = 0, s2 = 0, big = 1000.3;
    for (int i = 0; i < 4000; i++) {
        int64_t y;
        assert_int_equal(tsafe_dp_discrete_gaussian(big, &y), TSAFE_OK);
        s1 += (double)y;
        s2 += (double)y * y;
    }
    double mean = s1 / 4000, sd = sqrt(s2 / 4000 - mean * mean);
    assert_true(fabs(mean) < 5 * big / sqrt(4000.0));
    assert_true(fabs(sd / big - 1) < 0.05);
    int64_t y;
    assert_int_equal(tsafe_dp_discrete_gaussian(0, &y), TSAFE_E_ARG);
    assert_int_equal(tsafe_dp_discrete_gaussian(NAN, &y), TSAFE_E_ARG);
}

/* sealed with a DP session: the server sees u + n with n of the session's
 * sigma (in integer units of the client's scales), and the budget refuses
 * the token after the last allowed release before anything is sent. */
static void sealed_dp_noise_and_budget(void **state)
{
    (void)state;
    tsafe_sealed_plan p;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED, 512, 16, 128, &(tsafe_sealed_opts){.semi_honest = 1}, &p),
                     TSAFE_OK);
    adapter a;
    adapter_make(&a, 512, 16, 128);
    tsafe_sealed_site *site;
    assert_int_equal(tsafe_sealed_site_create(&p, a.A, a.B, 16, 128, a.scale, &site), TSAFE_OK);
    tsafe_dp_params dpp = {0};
    dpp.clip_norm = 1.0;
    dpp.sigma = 4.0; /* sensitivity 2C = 2: a few releases fit eps 8 */
    dpp.eps_total = 8;
    dpp.delta_total = 1e-5;
    dpp.accountant = TSAFE_DP_ACCOUNTANT_GDP;
    tsafe_dp_session *dp;
    assert_int_equal(tsafe_dp_session_create(&dpp, &dp), TSAFE_OK);
    tsafe_dp_stats ds;
    assert_int_equal(tsafe_dp_session_stats(dp, &ds), TSAFE_OK);
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    open_pair(&p, &c, &s);
    const tsafe_sealed_site *ss = site;
    double s2 = 0;
    size_t cnt = 0;
    for (uint64_t tok = 0; tok <= ds.releases_max; tok++) {
        uint8_t *q, *r1, *sh, *r2;
        size_t ql, r1l, shl, r2l;
        assert_int_equal(tsafe_sealed_client_query(c, a.x, &q, &ql, NULL), TSAFE_OK);
        assert_int_equal(tsafe_sealed_server_round1(s, &ss, 1, q, ql, &r1, &r1l, NULL), TSAFE_OK);
        tsafe_status st = tsafe_sealed_client_respond(c, r1, r1l, 1, &a.rank, &a.d_out, dp, 0,
                                                      &sh, &shl, NULL);
        tsafe_lora_bytes_free(q);
        tsafe_lora_bytes_free(r1);
        if (tok == ds.releases_max) { /* spent: refused, nothing released */
            assert_int_equal(st, TSAFE_E_BUDGET);
            break;
        }
        assert_int_equal(st, TSAFE_OK);
        float delta[128], *dp_out = delta;
        assert_int_equal(tsafe_sealed_server_round2(s, &ss, 1, sh, shl, &r2, &r2l, NULL), TSAFE_OK);
        assert_int_equal(tsafe_sealed_client_finish(c, r2, r2l, 1, &a.d_out, &dp_out, NULL),
                         TSAFE_OK);
        int64_t u[16], ref[16];
        assert_int_equal(tsafe_sealed_server_last_u(s, 0, u, 16), TSAFE_OK);
        reference_u(&p, &a, ref);
        double unit = reference_sx(&p, &a) * reference_sa(&p, &a, -1); /* s_x * s_A */
        for (int i = 0; i < 16; i++, cnt++) {
            double n = (double)(u[i] - ref[i]) * unit;
            s2 += n * n;
        }
        tsafe_lora_bytes_free(sh);
        tsafe_lora_bytes_free(r2);
    }
    double sd = sqrt(s2 / (double)cnt);
    printf("# sealed DP: %llu releases, noise sd %.4f (session sigma %.4f)\n",
           (unsigned long long)ds.releases_max, sd, ds.sigma);
    assert_true(cnt >= 16 && fabs(sd / ds.sigma - 1) < 0.5);
    tsafe_sealed_client_free(c);
    tsafe_sealed_server_free(s);
    tsafe_sealed_site_free(site);
    tsafe_dp_session_free(dp);
    adapter_free(&a);
}

/* A backend factory whose backends are the CPU backend behind counters:
 * proves the server's products, NTTs and switches go through the vtable. */
static struct tsafe_backend_i g_count_iface;
static const struct tsafe_backend_i *g_cpu_iface;
static unsigned long g_mul_acc, g_mod_switch, g_ntt, g_terms;

static tsafe_status count_mul_acc(tsafe_backend *b, const tsafe_backend_mac *j, size_t n)
{
    g_mul_acc++;
    for (size_t i = 0; i < n; i++)
        g_terms += j[i].n_terms;
    return g_cpu_iface->mul_acc(b, j, n);
}

static tsafe_status count_mod_switch(tsafe_backend *b, void *out, const void *in,
                                     size_t polys, uint32_t limbs)
{
    g_mod_switch++;
    return g_cpu_iface->mod_switch(b, out, in, polys, limbs);
}

static tsafe_status count_ntt(tsafe_backend *b, void *mem, size_t polys, uint32_t limbs)
{
    g_ntt++;
    return g_cpu_iface->ntt_forward(b, mem, polys, limbs);
}

static tsafe_status count_create(void *user, const tsafe_context *ckks,
                                 const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    (void)user;
    assert_null(ckks); /* the sealed server's rings are BFV */
    tsafe_backend *cpu;
    tsafe_status st = tsafe_backend_cpu_create_bfv(bfv, &cpu);
    if (st != TSAFE_OK)
        return st;
    g_cpu_iface = cpu->iface;
    g_count_iface = *cpu->iface;
    g_count_iface.mul_acc = count_mul_acc;
    g_count_iface.mod_switch = count_mod_switch;
    g_count_iface.ntt_forward = count_ntt;
    void *state = cpu->ctx; /* the counting backend takes over the CPU state */
    cpu->ctx = NULL;
    tsafe_backend_free(cpu);
    st = tsafe_backend_init_bfv(out, TSAFE_BACKEND_API_VERSION, &g_count_iface, state, bfv);
    if (st != TSAFE_OK)
        g_cpu_iface->destroy(&(tsafe_backend){.ctx = state});
    return st;
}

static const tsafe_backend_factory k_counting = {"counting-cpu", count_create, NULL};

/* The seal_batch slot (backend_impl.h API 4) by the CPU backend's own
 * operations, one job after another, as the slot defines it: the sealed
 * server then flushes each round in one tsafe_bfv_seal_batch call (a
 * GPU's path) and its bytes must not change. */
static tsafe_status ref_seal_batch(tsafe_backend *b, const void *pk,
                                   const tsafe_backend_seal_job *jobs, size_t n)
{
    size_t N = tsafe_backend_n(b);
    uint32_t L = tsafe_backend_max_limbs(b);
    tsafe_buffer key = {b, (void *)pk, 2, L, 1, 1};
    tsafe_buffer *u = NULL, *sw[4] = {NULL};
    tsafe_status st = tsafe_buffer_alloc(b, 1, L, &u);
    for (uint32_t l = 1; l < L && st == TSAFE_OK; l++)
        st = tsafe_buffer_alloc(b, 2, l, &sw[l]);
    for (size_t j = 0; j < n && st == TSAFE_OK; j++) {
        const tsafe_backend_seal_job *jb = &jobs[j];
        uint64_t *uw = g_cpu_iface->host_words(b, u->mem), *a = jb->acc;
        for (uint32_t i = 0; i < L; i++) {
            uint64_t q = tsafe_backend_prime(b, i);
            for (size_t k = 0; k < N; k++)
                uw[i * N + k] = jb->r[k] < 0 ? q - (uint64_t)(-jb->r[k]) : (uint64_t)jb->r[k];
        }
        tsafe_buffer acc = {b, jb->acc, 2, L, 0, 1};
        const tsafe_buffer *ta[1] = {u}, *tw[1] = {&key};
        tsafe_backend_mac m = {&acc, 1, ta, tw, 0};
        if ((st = tsafe_backend_ntt_forward(b, u)) != TSAFE_OK ||
            (st = tsafe_backend_mul_acc(b, &m, 1)) != TSAFE_OK ||
            (st = tsafe_backend_ntt_inverse(b, &acc)) != TSAFE_OK)
            break;
        int8_t e1[4096]; /* from the job's ChaCha20 stream, as the slot defines */
        assert_true(N <= sizeof e1);
        uint8_t *ks = calloc(6 * N + 64, 1), nonce[8];
        assert_non_null(ks);
        for (int i = 0; i < 8; i++)
            nonce[i] = (uint8_t)(jb->e1_stream >> (8 * i));
        crypto_stream_chacha20_xor_ic(ks, ks, 6 * N + 64, nonce, jb->e1_off / 64, jb->e1_key);
        for (size_t k = 0; k < N; k++) {
            const uint8_t *w = ks + jb->e1_off % 64 + 6 * k;
            uint64_t v = 0;
            for (int i = 0; i < 6; i++)
                v |= (uint64_t)w[i] << (8 * i);
            e1[k] = (int8_t)(__builtin_popcountll(v & 0x1FFFFF) -
                             __builtin_popcountll((v >> 21) & 0x1FFFFF));
        }
        free(ks);
        for (uint32_t i = 0; i < L; i++) {
            uint64_t q = tsafe_backend_prime(b, i);
            for (size_t k = 0; k < N; k++) /* e1 on c1 */
                a[(L + i) * N + k] = (a[(L + i) * N + k] +
                                      (e1[k] < 0 ? q - (uint64_t)(-e1[k]) : (uint64_t)e1[k])) % q;
            for (size_t k = 0; k < jb->n_reads; k++) /* the reads of c0 */
                a[i * N + jb->pos[k]] = (a[i * N + jb->pos[k]] +
                                         jb->add[i * jb->n_reads + k]) % q;
        }
        const tsafe_buffer *from = &acc;
        for (uint32_t l = L - 1; l >= 1 && st == TSAFE_OK; l--) {
            st = tsafe_backend_mod_switch(b, sw[l], from);
            from = sw[l];
        }
        const uint64_t *o = g_cpu_iface->host_words(b, sw[1]->mem);
        memcpy(jb->c1, o + N, N * sizeof *o);
        for (size_t k = 0; k < jb->n_reads; k++)
            jb->c0[k] = o[jb->pos[k]];
    }
    tsafe_buffer_free(u);
    for (uint32_t l = 1; l < L; l++)
        tsafe_buffer_free(sw[l]);
    return st;
}

static struct tsafe_backend_i g_batch_iface;
static unsigned long g_batch_calls;

static tsafe_status count_seal_batch(tsafe_backend *b, const void *pk,
                                     const tsafe_backend_seal_job *jobs, size_t n)
{
    g_batch_calls++;
    return ref_seal_batch(b, pk, jobs, n);
}

/* A backend just made (st, *out) given *iface: a copy of base that tweak
 * edits (the test backends below are the counting one plus slots). */
static tsafe_status retarget(tsafe_status st, tsafe_backend **out, struct tsafe_backend_i *iface,
                             const struct tsafe_backend_i *base,
                             void (*tweak)(struct tsafe_backend_i *))
{
    if (st == TSAFE_OK) {
        *iface = *base;
        tweak(iface);
        (*out)->iface = iface;
    }
    return st;
}

static void add_seal_batch(struct tsafe_backend_i *i)
{
    i->seal_batch = count_seal_batch;
}

static tsafe_status batch_create(void *user, const tsafe_context *ckks,
                                 const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    return retarget(count_create(user, ckks, bfv, out), out, &g_batch_iface, &g_count_iface,
                    add_seal_batch);
}

static const tsafe_backend_factory k_batching = {"batching-cpu", batch_create, NULL};

/* The ct_read slot (API 5) by its definition, written here from
 * libsodium's ChaCha20: c0 copied, c1 limb i the values below q_i among
 * candidates of ceil(bits_i / 8) little-endian bytes masked to bits_i, of
 * the stream of key = seed, nonce = stream + i, counter 0. */
static tsafe_status ref_ct_read(tsafe_backend *b, const tsafe_backend_ct_job *jobs, size_t n,
                                uint64_t stream)
{
    size_t N = tsafe_backend_n(b);
    uint32_t L = tsafe_backend_max_limbs(b);
    for (size_t j = 0; j < n; j++) {
        uint64_t *w = g_cpu_iface->host_words(b, jobs[j].mem);
        memcpy(w, jobs[j].c0, (size_t)L * N * sizeof *w);
        for (uint32_t i = 0; i < L; i++) {
            uint64_t q = tsafe_backend_prime(b, i);
            unsigned bits = 64 - (unsigned)__builtin_clzll(q), nb = (bits + 7) / 8;
            uint8_t nonce[8];
            for (int k = 0; k < 8; k++)
                nonce[k] = (uint8_t)((stream + i) >> (8 * k));
            size_t cap = 4 * N * nb + 64, at = 0;
            uint8_t *ks = calloc(cap, 1);
            assert_non_null(ks);
            crypto_stream_chacha20_xor_ic(ks, ks, cap, nonce, 0, jobs[j].seed);
            for (size_t k = 0; k < N;) {
                assert_true(at + nb <= cap);
                uint64_t v = 0;
                for (unsigned t = 0; t < nb; t++)
                    v |= (uint64_t)ks[at + t] << (8 * t);
                at += nb;
                v &= bits == 64 ? ~0ull : (1ull << bits) - 1;
                if (v < q)
                    w[(size_t)(L + i) * N + k++] = v;
            }
            free(ks);
        }
    }
    return TSAFE_OK;
}

static struct tsafe_backend_i g_device_iface;
static unsigned long g_ct_read_calls;

static tsafe_status count_ct_read(tsafe_backend *b, const tsafe_backend_ct_job *jobs, size_t n,
                                  uint64_t stream)
{
    g_ct_read_calls++;
    return ref_ct_read(b, jobs, n, stream);
}

/* A device-like backend: the batching one with its host words hidden (the
 * server then takes its device paths: uploads, downloads, the ct_read
 * slot for the query and the shares). */
static void hide_host_words(struct tsafe_backend_i *i)
{
    i->host_words = NULL;
    i->ct_read = count_ct_read;
}

static tsafe_status device_create(void *user, const tsafe_context *ckks,
                                  const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    return retarget(batch_create(user, ckks, bfv, out), out, &g_device_iface, &g_batch_iface,
                    hide_host_words);
}

static const tsafe_backend_factory k_device = {"device-like-cpu", device_create, NULL};

/* a and b hold the same bytes (b is freed). */
static void same_bytes(uint8_t *a, size_t al, uint8_t *b, size_t bl)
{
    assert_int_equal(al, bl);
    assert_memory_equal(a, b, al);
    tsafe_lora_bytes_free(b);
}

/* The reference response of round 1 or 2 for two sites: the host
 * reference's, which the CPU server must match byte for byte, or for a
 * checked plan (the reference has no fold) the CPU server's own. */
static void reference_response(int round, int checked, tsafe_ref_sealed *ref,
                               tsafe_sealed_server *cpu, const tsafe_sealed_site *const *sites,
                               const uint8_t *m, size_t ml, uint8_t **r, size_t *rl)
{
    tsafe_status (*server)(tsafe_sealed_server *, const tsafe_sealed_site *const *, size_t,
                           const uint8_t *, size_t, uint8_t **, size_t *, tsafe_lora_stats *) =
        round == 1 ? tsafe_sealed_server_round1 : tsafe_sealed_server_round2;
    if (checked) {
        assert_int_equal(server(cpu, sites, 2, m, ml, r, rl, NULL), TSAFE_OK);
        return;
    }
    uint8_t *o;
    size_t ol;
    assert_int_equal(round == 1 ? tsafe_ref_sealed_round1(ref, sites, 2, m, ml, r, rl)
                                : tsafe_ref_sealed_round2(ref, sites, 2, m, ml, r, rl),
                     TSAFE_OK);
    assert_int_equal(server(cpu, sites, 2, m, ml, &o, &ol, NULL), TSAFE_OK);
    same_bytes(*r, *rl, o, ol);
}

/* Issue 13 / 20: the server's responses through the backend vtable (the
 * default CPU backend and a counting one) are byte-identical to the host
 * reference's direct calls (tests/reference, same messages, same test
 * seed), in both modes, with several sites of different shapes in one
 * token; sealed-private also with round 2 prepared between the rounds. */
static void backend_path_byte_identical(tsafe_sealed_mode mode, int checked)
{
    const uint32_t d_in = 1536, ranks[2] = {16, 8}, d_outs[2] = {1024, 256};
    tsafe_sealed_plan p;
    /* checked shares (sealed-private's default; checked = 0 runs the plan
     * with opts.unchecked_shares): the host reference has no
     * fold, so the backends are compared with the CPU server instead */
    tsafe_sealed_opts so = {.semi_honest = 1, .unchecked_shares = (uint32_t)!checked};
    assert_int_equal(tsafe_sealed_plan_derive(mode, d_in, 16, 1024, &so, &p), TSAFE_OK);
    adapter a[2];
    tsafe_sealed_site *site[2];
    for (int i = 0; i < 2; i++) {
        adapter_make(&a[i], d_in, ranks[i], d_outs[i]);
        assert_int_equal(tsafe_sealed_site_create(&p, a[i].A, a[i].B, ranks[i], d_outs[i],
                                                  a[i].scale, &site[i]),
                         TSAFE_OK);
    }
    memcpy(a[1].x, a[0].x, d_in * sizeof *a[0].x);
    uint8_t seed[32];
    for (int i = 0; i < 32; i++)
        seed[i] = (uint8_t)tsafe_test_below(256);
    tsafe_sealed_client *c;
    tsafe_sealed_server *cpu, *viavt, *batched, *device;
    tsafe_ref_sealed *ref;
    assert_int_equal(tsafe_sealed_client_create(&p, NULL, &c), TSAFE_OK);
    assert_int_equal(tsafe_ref_sealed_create(&p, seed, &ref), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(&p, &cpu), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(&p, &viavt), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(&p, &batched), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(&p, &device), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_use_backend(viavt, &k_counting), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_use_backend(batched, &k_batching), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_use_backend(device, &k_device), TSAFE_OK);
    assert_string_equal(tsafe_sealed_server_backend_name(viavt), "cpu");
    assert_string_equal(tsafe_sealed_server_backend_name(cpu), "cpu");
    uint8_t *hello;
    size_t hl;
    assert_int_equal(tsafe_sealed_client_hello(c, &hello, &hl), TSAFE_OK);
    assert_int_equal(tsafe_ref_sealed_accept(ref, hello, hl), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(cpu, hello, hl), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(viavt, hello, hl), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(batched, hello, hl), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(device, hello, hl), TSAFE_OK);
    tsafe_lora_bytes_free(hello);
    tsafe_sealed_server_debug_seed(cpu, seed);
    tsafe_sealed_server_debug_seed(viavt, seed);
    tsafe_sealed_server_debug_seed(batched, seed);
    tsafe_sealed_server_debug_seed(device, seed);
    g_mul_acc = g_mod_switch = g_ntt = g_batch_calls = g_ct_read_calls = 0;
    const tsafe_sealed_site *sites[2] = {site[0], site[1]};
    float *delta[2] = {malloc(1024 * sizeof(float)), malloc(256 * sizeof(float))};
    double *want = malloc(1024 * sizeof *want);
    for (int tok = 0; tok < 2; tok++) {
        uint8_t *q, *r1, *o, *sh, *r2;
        size_t ql, r1l, ol, shl, r2l;
        assert_int_equal(tsafe_sealed_client_query(c, a[0].x, &q, &ql, NULL), TSAFE_OK);
        reference_response(1, checked, ref, cpu, sites, q, ql, &r1, &r1l);
        assert_int_equal(tsafe_sealed_server_round1(viavt, sites, 2, q, ql, &o, &ol, NULL),
                         TSAFE_OK);
        same_bytes(r1, r1l, o, ol);
        assert_int_equal(tsafe_sealed_server_round1(batched, sites, 2, q, ql, &o, &ol, NULL),
                         TSAFE_OK);
        same_bytes(r1, r1l, o, ol);
        assert_int_equal(tsafe_sealed_server_round1(device, sites, 2, q, ql, &o, &ol, NULL),
                         TSAFE_OK);
        same_bytes(r1, r1l, o, ol);
        if (tok == 1)
            assert_int_equal(tsafe_sealed_server_prepare_round2(cpu, sites, 2, NULL), TSAFE_OK);
        assert_int_equal(tsafe_sealed_client_respond(c, r1, r1l, 2, ranks, d_outs, NULL, 1,
                                                     &sh, &shl, NULL),
                         TSAFE_OK);
        reference_response(2, checked, ref, cpu, sites, sh, shl, &r2, &r2l);
        assert_int_equal(tsafe_sealed_server_round2(viavt, sites, 2, sh, shl, &o, &ol, NULL),
                         TSAFE_OK);
        same_bytes(r2, r2l, o, ol);
        assert_int_equal(tsafe_sealed_server_round2(batched, sites, 2, sh, shl, &o, &ol, NULL),
                         TSAFE_OK);
        same_bytes(r2, r2l, o, ol);
        assert_int_equal(tsafe_sealed_server_round2(device, sites, 2, sh, shl, &o, &ol, NULL),
                         TSAFE_OK);
        same_bytes(r2, r2l, o, ol);
        assert_int_equal(tsafe_sealed_client_finish(c, r2, r2l, 2, d_outs, delta, NULL),
                         TSAFE_OK);
        for (int i = 0; i < 2; i++) {
            reference_delta(&a[i], want);
            assert_true(tsafe_test_rel_l2(delta[i], want, d_outs[i]) <= 1e-3);
        }
        for (uint32_t j = 0; j < d_in; j++)
            a[0].x[j] = a[1].x[j] = tsafe_test_uniform_float(-3, 3);
        tsafe_lora_bytes_free(q);
        tsafe_lora_bytes_free(r1);
        tsafe_lora_bytes_free(sh);
        tsafe_lora_bytes_free(r2);
    }
    /* the responses came from vtable calls: one batched mul_acc per round
     * and token (plus one per sealing), a switch per sealed block */
    printf("# %s: %lu mul_acc, %lu mod_switch, %lu forward NTT calls through the vtable\n",
           mode == TSAFE_SEALED ? "sealed" : "sealed-private", g_mul_acc, g_mod_switch, g_ntt);
    assert_true(g_mul_acc >= 2 && g_mod_switch >= 2 && g_ntt >= 2);
    /* the batching server sealed each round's blocks in one call */
    printf("# %s: %lu seal batch calls\n", mode == TSAFE_SEALED ? "sealed" : "sealed-private",
           g_batch_calls);
    assert_int_equal(g_batch_calls, mode == TSAFE_SEALED ? 4 : 8); /* two servers */
    /* the device-like server read each token's query in one slot call, and
     * sealed-private its round-2 shares (two sites) in one more */
    printf("# %s: %lu ct_read calls\n", mode == TSAFE_SEALED ? "sealed" : "sealed-private",
           g_ct_read_calls);
    assert_int_equal(g_ct_read_calls, mode == TSAFE_SEALED ? 2 : 4);
    free(delta[0]);
    free(delta[1]);
    free(want);
    tsafe_sealed_client_free(c);
    tsafe_ref_sealed_free(ref);
    tsafe_sealed_server_free(cpu);
    tsafe_sealed_server_free(viavt);
    tsafe_sealed_server_free(batched);
    tsafe_sealed_server_free(device);
    for (int i = 0; i < 2; i++) {
        tsafe_sealed_site_free(site[i]);
        adapter_free(&a[i]);
    }
}

/* Round 2's work must not depend on the server's masks R (R with the
 * client's share gives u: a round 2 whose work varied with R would be a
 * timing channel to the client; until plan version 7 the wrap band, a
 * function of R, decided which chunks had work). Tokens with fresh R,
 * one site of rank 8; the products round 2 asks of the backend are the
 * same every time, with and without the preparation call between the
 * rounds. */
static void round2_work_independent_of_masks(void **state)
{
    (void)state;
    const uint32_t d_in = 1536, rank = 8, d_out = 256;
    tsafe_sealed_plan p;
    adapter a;
    tsafe_sealed_site *site;
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    one_site(TSAFE_SEALED_PRIVATE, d_in, rank, d_out, &p, &a, &site, &c, &s);
    assert_int_equal(tsafe_sealed_server_use_backend(s, &k_counting), TSAFE_OK);
    const tsafe_sealed_site *ss[1] = {site};
    tsafe_sealed_layout l1, l2;
    tsafe_sealed_layout1(&p, rank, &l1);
    tsafe_sealed_layout2(&p, rank, d_out, &l2);
    /* per block of round 1: its x chunks; per block of round 2: the share
     * chunks; one term per sealing in both */
    unsigned long want = (unsigned long)l1.n_blocks * (l1.n_chunks + 1) +
                         (unsigned long)l2.n_blocks * (l2.n_chunks + 1);
    if (p.checks) /* checked shares: each block's product times its W, the checked sealing */
        want += l1.n_blocks + 1;
    float *delta = malloc(d_out * sizeof *delta);
    for (int tok = 0; tok < 24; tok++) {
        g_terms = 0;
        token_sites(c, s, ss, (tok & 1) ? ss : NULL, 1, &rank, &d_out, a.x, &delta);
        assert_int_equal(g_terms, want);
    }
    printf("# %lu multiply-accumulate terms in every one of 24 tokens\n", want);
    free(delta);
    tsafe_sealed_client_free(c);
    tsafe_sealed_server_free(s);
    tsafe_sealed_site_free(site);
    adapter_free(&a);
}

static void backend_path_sealed(void **state)
{
    (void)state;
    backend_path_byte_identical(TSAFE_SEALED, 0);
}

static void backend_path_sealed_private(void **state)
{
    (void)state;
    backend_path_byte_identical(TSAFE_SEALED_PRIVATE, 0);
}

/* The same with checked shares: every backend path gives the CPU
 * server's bytes (the device-like path reads W, H and the per-token
 * plaintexts through the vtable too). */
static void backend_path_checked(void **state)
{
    (void)state;
    backend_path_byte_identical(TSAFE_SEALED_PRIVATE, 1);
}

/* Issue 19: sealed mode sends decryptions back in the clear (a malicious
 * server gets a decryption oracle, the client reads s B' from its own
 * noise), so its plan is derived only for a caller that opts in to a
 * semi-honest threat model, and a client refuses a sealed plan whose opt-in
 * was cleared. Sealed-private needs no opt-in and its plan does not depend
 * on it. */
static void sealed_needs_semi_honest(void **state)
{
    (void)state;
    tsafe_sealed_plan p, forged;
    tsafe_sealed_opts none = {0}, semi = {.semi_honest = 1};
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED, 512, 16, 128, NULL, &p),
                     TSAFE_E_INSECURE);
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED, 512, 16, 128, &none, &p),
                     TSAFE_E_INSECURE);
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED, 512, 16, 128, &semi, &p), TSAFE_OK);
    assert_int_equal(p.mode, TSAFE_SEALED);
    assert_int_equal(p.semi_honest, 1);
    assert_int_equal(tsafe_sealed_plan_check(&p), TSAFE_OK);
    forged = p;
    forged.semi_honest = 0;
    tsafe_status st = tsafe_sealed_plan_check(&forged);
    assert_true(st == TSAFE_E_PARAMS || st == TSAFE_E_INSECURE);
    tsafe_sealed_client *c = NULL;
    st = tsafe_sealed_client_create(&forged, NULL, &c);
    assert_true(st == TSAFE_E_PARAMS || st == TSAFE_E_INSECURE);
    assert_null(c);
    /* the honest plan still makes a client */
    assert_int_equal(tsafe_sealed_client_create(&p, NULL, &c), TSAFE_OK);
    tsafe_sealed_client_free(c);
    /* sealed-private: the same plan with or without the flag */
    tsafe_sealed_plan q0, q1;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, 512, 16, 128, NULL, &q0),
                     TSAFE_OK);
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, 512, 16, 128, &semi, &q1),
                     TSAFE_OK);
    assert_int_equal(q0.semi_honest, q1.semi_honest);
    assert_int_equal(q0.chunk1, q1.chunk1);
    assert_int_equal(q0.chunk2, q1.chunk2);
    assert_int_equal(q0.flood1, q1.flood1);
    assert_int_equal(tsafe_sealed_plan_check(&q0), TSAFE_OK);
    assert_int_equal(tsafe_sealed_plan_check(&q1), TSAFE_OK);
}

int main(void)
{
    tsafe_test_rng_init("lora_sealed");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sealed_exact_shapes),
        cmocka_unit_test(sealed_private_shapes),
        cmocka_unit_test(sealed_private_mixed_sites),
        cmocka_unit_test(prepared_round2_same_deltas),
        cmocka_unit_test(sites_per_query_split),
        cmocka_unit_test(backend_path_sealed),
        cmocka_unit_test(backend_path_sealed_private),
        cmocka_unit_test(backend_path_checked),
        cmocka_unit_test(round2_work_independent_of_masks),
        cmocka_unit_test(discrete_gaussian_matches_pmf),
        cmocka_unit_test(sealed_dp_noise_and_budget),
        cmocka_unit_test(sealed_needs_semi_honest),
    };
    return cmocka_run_group_tests_name("lora_sealed", tests, NULL, NULL);
}
