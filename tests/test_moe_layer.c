/* MoE layer forward vs a double-precision reference:
 *   out = sum_i w_i * down(silu(gate h) * up h) + g * shared(h)
 * with the reference's own routing (double softmax, same tie rule).
 * Tolerance: max |out - ref| <= 1e-4 * max |ref| per token (fp32 BLAS
 * against double loops). Also: generated weights (eager = lazy, stable
 * per expert across overrides), counters, the expert hook, dense MLP. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/moe.h"
#include "tensafe/safetensors.h"
#include "support/tsafe_test_rng.h"
#include "../libtensafe-moe/src/moe_internal.h"

#define TOL 1e-4

/* Weights held by the test, row-major as HF Linear weights. */
typedef struct weights {
    uint32_t d, E, I, Is;
    float *router, *sgate;           /* [E x d], [d] or NULL */
    float **gate, **up, **down;      /* E experts; index E = shared / dense */
} weights;

static void fill(float *v, size_t n, double a)
{
    for (size_t i = 0; i < n; i++)
        v[i] = tsafe_test_uniform_float(-a, a);
}

static float *alloc_f(size_t n)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    return p;
}

static void weights_random(weights *w, uint32_t d, uint32_t E, uint32_t I, uint32_t Is,
                           int gated, double rscale)
{
    memset(w, 0, sizeof *w);
    w->d = d, w->E = E, w->I = I, w->Is = Is;
    w->gate = calloc(E + 1, sizeof(float *));
    w->up = calloc(E + 1, sizeof(float *));
    w->down = calloc(E + 1, sizeof(float *));
    assert_true(w->gate && w->up && w->down);
    if (E > 0) {
        w->router = alloc_f((size_t)E * d);
        fill(w->router, (size_t)E * d, rscale / sqrt((double)d));
    }
    if (gated) {
        w->sgate = alloc_f(d);
        fill(w->sgate, d, 2.0 / sqrt((double)d));
    }
    for (uint32_t e = 0; e <= E; e++) {
        uint32_t n = e < E ? I : Is;
        if (n == 0)
            continue;
        w->gate[e] = alloc_f((size_t)n * d);
        w->up[e] = alloc_f((size_t)n * d);
        w->down[e] = alloc_f((size_t)n * d);
        fill(w->gate[e], (size_t)n * d, 2.0 / sqrt((double)d));
        fill(w->up[e], (size_t)n * d, 2.0 / sqrt((double)d));
        fill(w->down[e], (size_t)n * d, 1.5 / sqrt((double)n));
    }
}

static void weights_free(weights *w)
{
    for (uint32_t e = 0; e <= w->E; e++) {
        free(w->gate[e]);
        free(w->up[e]);
        free(w->down[e]);
    }
    free(w->gate);
    free(w->up);
    free(w->down);
    free(w->router);
    free(w->sgate);
}

static tsafe_moe_layer *layer_from(const tsafe_moe_config *c, const weights *w)
{
    tsafe_moe_layer *L = NULL;
    assert_int_equal(tsafe_moe_layer_create_zero(c, 0, &L), TSAFE_OK);
    if (w->E > 0)
        assert_int_equal(tsafe_moe_layer_set_router(L, w->router, w->sgate), TSAFE_OK);
    for (uint32_t e = 0; e < w->E; e++)
        assert_int_equal(tsafe_moe_layer_set_expert(L, (int32_t)e, w->gate[e], w->up[e],
                                                    w->down[e]),
                         TSAFE_OK);
    if (w->Is > 0)
        assert_int_equal(tsafe_moe_layer_set_expert(L, TSAFE_MOE_SHARED, w->gate[w->E],
                                                    w->up[w->E], w->down[w->E]),
                         TSAFE_OK);
    return L;
}

/* y += scale * down(silu(gate x) * up x) in double; up_delta (optional, I
 * values) is added to up x first (a stand-in for a LoRA delta). */
static void ref_expert(const float *g, const float *u, const float *dn, uint32_t d,
                       uint32_t I, const float *x, double scale, const double *up_delta,
                       double *y)
{
    double *a = malloc(I * sizeof *a);
    assert_non_null(a);
    for (uint32_t j = 0; j < I; j++) {
        double gs = 0.0, us = 0.0;
        const float *gr = g + (size_t)j * d, *ur = u + (size_t)j * d;
        for (uint32_t i = 0; i < d; i++) {
            gs += (double)gr[i] * x[i];
            us += (double)ur[i] * x[i];
        }
        if (up_delta != NULL)
            us += up_delta[j];
        a[j] = gs / (1.0 + exp(-gs)) * us;
    }
    for (uint32_t i = 0; i < d; i++) {
        double s = 0.0;
        const float *dr = dn + (size_t)i * I;
        for (uint32_t j = 0; j < I; j++)
            s += (double)dr[j] * a[j];
        y[i] += scale * s;
    }
    free(a);
}

/* Reference routing (double); returns k experts in idx and their weights. */
static void ref_route(const weights *w, uint32_t k, int norm, const float *x, uint32_t *idx,
                      double *wt, double *gate, double *p)
{
    const uint32_t E = w->E, d = w->d;
    double mx = -INFINITY, sum = 0.0, sel = 0.0;
    for (uint32_t e = 0; e < E; e++) {
        double s = 0.0;
        for (uint32_t i = 0; i < d; i++)
            s += (double)w->router[(size_t)e * d + i] * x[i];
        p[e] = s;
        mx = fmax(mx, s);
    }
    for (uint32_t e = 0; e < E; e++)
        sum += (p[e] = exp(p[e] - mx));
    for (uint32_t e = 0; e < E; e++)
        p[e] /= sum;
    char used[1024] = {0};
    for (uint32_t i = 0; i < k; i++) {
        int b = -1;
        for (uint32_t e = 0; e < E; e++)
            if (!used[e] && (b < 0 || p[e] > p[b]))
                b = (int)e;
        used[b] = 1;
        idx[i] = (uint32_t)b;
        sel += p[b];
    }
    for (uint32_t i = 0; i < k; i++)
        wt[i] = p[idx[i]] / (norm ? sel : 1.0);
    *gate = 0.0;
    if (w->sgate != NULL) {
        double s = 0.0;
        for (uint32_t i = 0; i < d; i++)
            s += (double)w->sgate[i] * x[i];
        *gate = 1.0 / (1.0 + exp(-s));
    } else if (w->Is > 0) {
        *gate = 1.0;
    }
}

/* Reference output of one token. The reference's expert choice must equal
 * the layer's except across near-ties (probabilities within 1e-6): there
 * the layer's choice is used so the outputs stay comparable. */
static void ref_token(const weights *w, uint32_t k, int norm, const float *x,
                      const tsafe_moe_route *got, double *y)
{
    uint32_t idx[TSAFE_MOE_MAX_TOPK];
    double wt[TSAFE_MOE_MAX_TOPK], gate, *p = malloc((w->E + 1) * sizeof *p);
    assert_non_null(p);
    memset(y, 0, w->d * sizeof *y);
    ref_route(w, k, norm, x, idx, wt, &gate, p);
    if (w->E > 0) {
        assert_int_equal(got->k, k);
        double sel = 0.0;
        for (uint32_t i = 0; i < k; i++) {
            if (got->expert[i] != idx[i] && fabs(p[got->expert[i]] - p[idx[i]]) > 1e-6)
                fail_msg("rank %u: expert %u vs reference %u", i, got->expert[i], idx[i]);
            sel += p[got->expert[i]];
        }
        for (uint32_t i = 0; i < k; i++) {
            uint32_t e = got->expert[i];
            double we = p[e] / (norm ? sel : 1.0);
            assert_true(fabs(got->weight[i] - we) <= 1e-6 + 1e-4 * we);
            ref_expert(w->gate[e], w->up[e], w->down[e], w->d, w->I, x, we, NULL, y);
        }
    } else {
        assert_int_equal(got->k, 0);
    }
    assert_true(fabs(got->shared_gate - gate) <= 1e-6 + 1e-4 * gate);
    if (w->Is > 0)
        ref_expert(w->gate[w->E], w->up[w->E], w->down[w->E], w->d, w->Is, x, gate, NULL, y);
    free(p);
}

static void check_close(const float *got, const double *ref, uint32_t d)
{
    double mx = 0.0, err = 0.0;
    for (uint32_t i = 0; i < d; i++) {
        mx = fmax(mx, fabs(ref[i]));
        err = fmax(err, fabs(got[i] - ref[i]));
    }
    if (!(err <= TOL * mx) && !(mx == 0.0 && err == 0.0))
        fail_msg("max error %.3g vs max |ref| %.3g (tolerance %.1g relative)", err, mx, TOL);
}

static tsafe_moe_config make_cfg(uint32_t d, uint32_t E, uint32_t k, uint32_t I, uint32_t Is,
                                 int norm)
{
    tsafe_moe_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test");
    c.hidden_size = d;
    c.n_layers = 1;
    c.n_heads = 1;
    c.n_kv_heads = 1;
    c.n_experts = E;
    c.top_k = k;
    c.expert_intermediate = I;
    c.shared_expert_intermediate = E > 0 ? Is : 0;
    c.shared_expert_gate = Is > 0 && E > 0;
    c.norm_topk_prob = norm;
    c.full_attention_interval = 1;
    c.intermediate_size = E == 0 ? Is : 0;
    return c;
}

/* One configuration with test-held weights: batch forward and token-by-token
 * forward both against the reference; routes from forward equal route(). */
static void run_case(uint32_t d, uint32_t E, uint32_t k, uint32_t I, uint32_t Is, int norm,
                     size_t n)
{
    weights w;
    weights_random(&w, d, E, I, Is, Is > 0 && E > 0, 4.0);
    tsafe_moe_config c = make_cfg(d, E, k, I, Is, norm);
    tsafe_moe_layer *L = layer_from(&c, &w);
    float *h = alloc_f(n * d), *out = alloc_f(n * d);
    double *ref = malloc(d * sizeof *ref);
    tsafe_moe_route *routes = calloc(n, sizeof *routes), *r2 = calloc(n, sizeof *r2);
    assert_true(ref && routes && r2);
    fill(h, n * d, 1.7);
    assert_int_equal(tsafe_moe_layer_forward(L, h, n, out, routes), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_route(L, h, n, r2), TSAFE_OK);
    assert_memory_equal(routes, r2, n * sizeof *routes);
    for (size_t t = 0; t < n; t++) {
        ref_token(&w, k, norm, h + t * d, &routes[t], ref);
        check_close(out + t * d, ref, d);
    }
    /* token by token (GEMV path) */
    for (size_t t = 0; t < n && n > 1; t++) {
        tsafe_moe_route one;
        assert_int_equal(tsafe_moe_layer_forward(L, h + t * d, 1, out, &one), TSAFE_OK);
        ref_token(&w, k, norm, h + t * d, &one, ref);
        check_close(out, ref, d);
    }
    /* counters: hits equal the routed (token, expert) pairs, both passes */
    tsafe_moe_layer_stats st;
    assert_int_equal(tsafe_moe_layer_get_stats(L, &st), TSAFE_OK);
    size_t passes = n > 1 ? 2 : 1;
    assert_int_equal(st.tokens, passes * n);
    assert_int_equal(st.expert_evals, passes * n * k);
    assert_int_equal(st.shared_evals, Is > 0 ? passes * n : 0);
    if (E > 0) {
        uint64_t *hits = calloc(E, sizeof *hits), *want = calloc(E, sizeof *want);
        assert_true(hits && want);
        for (size_t t = 0; t < n; t++)
            for (uint32_t i = 0; i < routes[t].k; i++)
                want[routes[t].expert[i]] += passes;
        assert_int_equal(tsafe_moe_layer_expert_hits(L, hits, E), TSAFE_OK);
        assert_memory_equal(hits, want, E * sizeof *hits);
        assert_int_equal(tsafe_moe_layer_expert_hits(L, hits, E - 1), TSAFE_E_BUFFER_SMALL);
        tsafe_moe_layer_reset_counters(L);
        assert_int_equal(tsafe_moe_layer_expert_hits(L, hits, E), TSAFE_OK);
        for (uint32_t e = 0; e < E; e++)
            assert_int_equal(hits[e], 0);
        free(hits);
        free(want);
    }
    free(h);
    free(out);
    free(ref);
    free(routes);
    free(r2);
    tsafe_moe_layer_free(L);
    weights_free(&w);
}

static void test_forward_small(void **state)
{
    (void)state;
    for (int rep = 0; rep < 25; rep++) {
        uint32_t d = 8u << tsafe_test_below(4);         /* 8..64 */
        uint32_t E = 2u << tsafe_test_below(3);         /* 2..8 */
        uint32_t k = 1 + (uint32_t)tsafe_test_below(E);
        uint32_t I = 4 + (uint32_t)tsafe_test_below(29);
        uint32_t Is = tsafe_test_below(2) ? 4 + (uint32_t)tsafe_test_below(29) : 0;
        int norm = (int)tsafe_test_below(2);
        size_t n = 1 + (size_t)tsafe_test_below(7);
        run_case(d, E, k, I, Is, norm, n);
    }
    run_case(16, 4, 4, 8, 8, 1, 5); /* k = E: every expert */
    run_case(16, 4, 1, 8, 0, 0, 5);
}

static void test_forward_dense(void **state)
{
    (void)state;
    run_case(32, 0, 0, 0, 40, 0, 3); /* Qwen2.5-style dense MLP */
    run_case(48, 0, 0, 0, 96, 0, 1);
    tsafe_moe_config c;
    tsafe_moe_layer *L = NULL;
    assert_int_equal(tsafe_moe_config_preset("qwen2.5-1.5b", &c), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_create_random(&c, 1, 8, &L), TSAFE_E_ARG);
    assert_null(L);
}

/* The real hidden size: d = 2048, expert dim 512, shared expert 512, a
 * reduced 8 experts, top-2..8, renormalisation on and off. */
static void test_forward_real_size(void **state)
{
    (void)state;
    weights w;
    weights_random(&w, 2048, 8, 512, 512, 1, 6.0);
    const size_t n = 3;
    float *h = alloc_f(n * 2048), *out = alloc_f(n * 2048);
    double *ref = malloc(2048 * sizeof *ref);
    assert_non_null(ref);
    fill(h, n * 2048, 1.7);
    static const struct { uint32_t k; int norm; } cases[] = {{2, 1}, {4, 0}, {8, 1}};
    for (size_t ci = 0; ci < 3; ci++) {
        tsafe_moe_config c = make_cfg(2048, 8, cases[ci].k, 512, 512, cases[ci].norm);
        tsafe_moe_layer *L = layer_from(&c, &w);
        tsafe_moe_route routes[3];
        assert_int_equal(tsafe_moe_layer_forward(L, h, n, out, routes), TSAFE_OK);
        for (size_t t = 0; t < n; t++) {
            ref_token(&w, cases[ci].k, cases[ci].norm, h + t * 2048, &routes[t], ref);
            check_close(out + t * 2048, ref, 2048);
        }
        tsafe_moe_layer_free(L);
    }
    free(h);
    free(out);
    free(ref);
    weights_free(&w);
}

/* Weights of a generated layer, read back (internal layout). */
static void weights_of(const tsafe_moe_layer *L, weights *w)
{
    const uint32_t d = L->d, E = L->cfg.n_experts, I = L->inter, Is = L->shared_inter;
    memset(w, 0, sizeof *w);
    w->d = d, w->E = E, w->I = I, w->Is = Is;
    w->router = L->router_w;
    w->sgate = L->shared_gate_w;
    w->gate = calloc(E + 1, sizeof(float *));
    w->up = calloc(E + 1, sizeof(float *));
    w->down = calloc(E + 1, sizeof(float *));
    assert_true(w->gate && w->up && w->down);
    for (uint32_t e = 0; e <= E; e++) {
        const moe_expert *x = e < E ? &L->experts[e] : &L->shared;
        uint32_t n = e < E ? I : Is;
        if (n == 0 || x->gate_up == NULL)
            continue;
        w->gate[e] = x->gate_up;
        w->up[e] = x->gate_up + (size_t)n * d;
        w->down[e] = x->down;
    }
}

static void weights_unref(weights *w)
{
    free(w->gate);
    free(w->up);
    free(w->down);
}

/* The Qwen3.5 preset with 8 generated experts against the reference. */
static void test_generated_layer(void **state)
{
    (void)state;
    tsafe_moe_config c;
    assert_int_equal(tsafe_moe_config_preset("qwen3.5-35b-a3b", &c), TSAFE_OK);
    uint64_t seed = tsafe_test_u64();
    tsafe_moe_layer *A = NULL, *B = NULL, *C = NULL;
    tsafe_moe_layer_options lazy = {8, TSAFE_MOE_WEIGHTS_LAZY};
    assert_int_equal(tsafe_moe_layer_create_random(&c, seed, 8, &A), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_create_random_ex(&c, seed, &lazy, &B), TSAFE_OK);
    const size_t n = 4, d = 2048;
    float *h = alloc_f(n * d), *ya = alloc_f(n * d), *yb = alloc_f(n * d);
    double *ref = malloc(d * sizeof *ref);
    assert_non_null(ref);
    fill(h, n * d, 1.7);
    tsafe_moe_route ra[4], rb[4];

    tsafe_moe_layer_stats sb;
    assert_int_equal(tsafe_moe_layer_get_stats(B, &sb), TSAFE_OK);
    assert_int_equal(sb.experts_materialised, 0);
    assert_int_equal(tsafe_moe_layer_forward(A, h, n, ya, ra), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_forward(B, h, n, yb, rb), TSAFE_OK);
    assert_memory_equal(ra, rb, sizeof ra);
    assert_memory_equal(ya, yb, n * d * sizeof *ya); /* lazy == eager, bit for bit */
    /* lazy materialised exactly the routed experts */
    uint64_t hits[8];
    unsigned distinct = 0;
    assert_int_equal(tsafe_moe_layer_expert_hits(B, hits, 8), TSAFE_OK);
    for (int e = 0; e < 8; e++)
        distinct += hits[e] > 0;
    assert_int_equal(tsafe_moe_layer_get_stats(B, &sb), TSAFE_OK);
    assert_int_equal(sb.experts_materialised, distinct);
    for (int e = 0; e < 8; e++)
        assert_int_equal(B->experts[e].gate_up != NULL, hits[e] > 0);

    weights w;
    weights_of(A, &w);
    /* generated values lie in +-1/sqrt(fan_in) and are not degenerate */
    double s2 = 0.0;
    for (size_t i = 0; i < (size_t)512 * d; i++) {
        assert_true(fabsf(w.gate[0][i]) <= 1.0f / sqrtf(2048.0f));
        s2 += (double)w.gate[0][i] * w.gate[0][i];
    }
    double var = s2 / (512.0 * d), want = 1.0 / (3.0 * 2048.0);
    assert_true(fabs(var - want) < 0.02 * want);
    for (size_t t = 0; t < n; t++) {
        ref_token(&w, c.top_k, c.norm_topk_prob, h + t * d, &ra[t], ref);
        check_close(ya + t * d, ref, (uint32_t)d);
    }
    weights_unref(&w);

    /* expert e has the same weights whatever the override; other seeds differ */
    tsafe_moe_layer_options lazy16 = {16, TSAFE_MOE_WEIGHTS_LAZY};
    assert_int_equal(tsafe_moe_layer_create_random_ex(&c, seed, &lazy16, &C), TSAFE_OK);
    assert_memory_equal(C->router_w, A->router_w, 8 * d * sizeof(float));
    assert_memory_equal(C->shared.gate_up, A->shared.gate_up, 2 * 512 * d * sizeof(float));
    tsafe_moe_layer_free(C);
    assert_int_equal(tsafe_moe_layer_create_random_ex(&c, seed ^ 1, &lazy, &C), TSAFE_OK);
    assert_memory_not_equal(C->router_w, A->router_w, 8 * d * sizeof(float));
    tsafe_moe_layer_free(C);

    free(h);
    free(ya);
    free(yb);
    free(ref);
    tsafe_moe_layer_free(A);
    tsafe_moe_layer_free(B);
}

/* ------------------------------------------------------------ the hook */

typedef struct hook_log {
    uint32_t E, I;
    uint64_t calls[2][65]; /* [stage][expert + 1] */
    uint64_t rows[65];
    double delta;          /* added to every up value of expert 1 */
    int fail;              /* fail on fail_expert */
    int32_t fail_expert;
    int last_expert;
} hook_log;

static tsafe_status hook(void *user, tsafe_moe_hook_stage stage, int32_t expert,
                         const uint32_t *tokens, size_t m, const float *in, size_t in_cols,
                         float *io, size_t io_cols)
{
    hook_log *lg = user;
    assert_true(expert >= -1 && expert < (int32_t)lg->E);
    assert_true(m > 0 && tokens != NULL && in != NULL && io != NULL);
    lg->calls[stage][expert + 1]++;
    if (stage == TSAFE_MOE_HOOK_GATE_UP) {
        /* increasing expert id, shared last */
        if (expert >= 0)
            assert_true(expert > lg->last_expert);
        lg->last_expert = expert < 0 ? 1 << 30 : expert;
        lg->rows[expert + 1] += m;
        if (expert == 1)
            for (size_t r = 0; r < m; r++)
                for (uint32_t j = 0; j < lg->I; j++)
                    io[r * io_cols + lg->I + j] += (float)lg->delta;
    }
    (void)in_cols;
    if (lg->fail && lg->fail_expert == expert)
        return TSAFE_E_ADAPTER;
    return TSAFE_OK;
}

static void test_hook(void **state)
{
    (void)state;
    const uint32_t d = 32, E = 8, k = 2, I = 16, Is = 8;
    const size_t n = 16;
    weights w;
    weights_random(&w, d, E, I, Is, 1, 4.0);
    tsafe_moe_config c = make_cfg(d, E, k, I, Is, 1);
    tsafe_moe_layer *L = layer_from(&c, &w);
    float *h = alloc_f(n * d), *out = alloc_f(n * d);
    double *ref = calloc(d, sizeof *ref), *dl = malloc(I * sizeof *dl);
    tsafe_moe_route routes[16];
    assert_true(ref && dl);
    fill(h, n * d, 1.7);
    hook_log lg;
    memset(&lg, 0, sizeof lg);
    lg.E = E, lg.I = I, lg.delta = 0.25, lg.last_expert = -1;
    for (uint32_t j = 0; j < I; j++)
        dl[j] = lg.delta;
    assert_int_equal(tsafe_moe_layer_forward_hooked(L, h, n, out, routes, hook, &lg), TSAFE_OK);
    uint64_t hits[8];
    assert_int_equal(tsafe_moe_layer_expert_hits(L, hits, E), TSAFE_OK);
    for (uint32_t e = 0; e < E; e++) {
        /* called once per stage for routed experts, never for the others */
        assert_int_equal(lg.calls[0][e + 1], hits[e] > 0);
        assert_int_equal(lg.calls[1][e + 1], hits[e] > 0);
        assert_int_equal(lg.rows[e + 1], hits[e]);
    }
    assert_int_equal(lg.calls[0][0], 1);
    assert_int_equal(lg.rows[0], n);
    /* the up-delta on expert 1 shows in the output as the reference predicts */
    for (size_t t = 0; t < n; t++) {
        memset(ref, 0, d * sizeof *ref);
        const tsafe_moe_route *r = &routes[t];
        for (uint32_t i = 0; i < r->k; i++) {
            uint32_t e = r->expert[i];
            ref_expert(w.gate[e], w.up[e], w.down[e], d, I, h + t * d, r->weight[i],
                       e == 1 ? dl : NULL, ref);
        }
        ref_expert(w.gate[E], w.up[E], w.down[E], d, Is, h + t * d, r->shared_gate, NULL, ref);
        check_close(out + t * d, ref, d);
    }
    /* a failing hook stops the forward, its status comes back, counters stay */
    tsafe_moe_layer_stats before, after;
    assert_int_equal(tsafe_moe_layer_get_stats(L, &before), TSAFE_OK);
    memset(&lg, 0, sizeof lg);
    lg.E = E, lg.I = I, lg.last_expert = -1;
    lg.fail = 1, lg.fail_expert = TSAFE_MOE_SHARED; /* after every routed expert ran */
    assert_int_equal(tsafe_moe_layer_forward_hooked(L, h, n, out, NULL, hook, &lg),
                     TSAFE_E_ADAPTER);
    assert_int_equal(tsafe_moe_layer_get_stats(L, &after), TSAFE_OK);
    assert_memory_equal(&before, &after, sizeof before);
    free(h);
    free(out);
    free(ref);
    free(dl);
    tsafe_moe_layer_free(L);
    weights_free(&w);
}

static void test_forward_args(void **state)
{
    (void)state;
    tsafe_moe_config c = make_cfg(16, 4, 2, 8, 8, 1);
    tsafe_moe_layer *L = NULL;
    assert_int_equal(tsafe_moe_layer_create_random(&c, 7, 0, &L), TSAFE_OK);
    float h[2 * 16] = {0}, out[2 * 16];
    for (int i = 0; i < 32; i++)
        h[i] = (float)i / 32.0f;
    assert_int_equal(tsafe_moe_layer_forward(NULL, h, 1, out, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_moe_layer_forward(L, NULL, 1, out, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_moe_layer_forward(L, h, 1, NULL, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_moe_layer_forward(L, h, 0, NULL, NULL), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_forward(L, h, 2, h + 8, NULL), TSAFE_E_ARG); /* overlap */
    assert_int_equal(tsafe_moe_layer_forward(L, h, 2, out, NULL), TSAFE_OK);
    h[3] = NAN;
    assert_int_equal(tsafe_moe_layer_forward(L, h, 2, out, NULL), TSAFE_E_VALUE_RANGE);
    float g[8 * 16] = {0};
    assert_int_equal(tsafe_moe_layer_set_expert(L, 4, g, g, g), TSAFE_E_RANGE);
    assert_int_equal(tsafe_moe_layer_set_expert(L, -2, g, g, g), TSAFE_E_RANGE);
    assert_int_equal(tsafe_moe_layer_set_expert(L, 0, NULL, g, g), TSAFE_E_NULL);
    assert_int_equal(tsafe_moe_layer_set_expert(L, 3, g, g, g), TSAFE_OK);
    tsafe_moe_layer_options bad = {0, (tsafe_moe_weights_mode)7};
    tsafe_moe_layer *M = NULL;
    assert_int_equal(tsafe_moe_layer_create_random_ex(&c, 1, &bad, &M), TSAFE_E_ARG);
    c.top_k = 9;
    assert_int_equal(tsafe_moe_layer_create_random(&c, 1, 0, &M), TSAFE_E_PARAMS);
    assert_null(M);
    assert_null(tsafe_moe_layer_config(NULL));
    tsafe_moe_layer_free(L);
}

/* ------------------------------------------------------------ safetensors */

static void add_t(tsafe_safetensors_writer *wr, const char *prefix, const char *name,
                  tsafe_dtype dt, uint64_t a, uint64_t b, const float *v)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const uint64_t shape[2] = {a, b};
    assert_int_equal(tsafe_safetensors_writer_add_f32(wr, full, dt, shape, 2, v), TSAFE_OK);
}

/* Serialise w under HF names (per-expert or fused), parse it back. */
static tsafe_safetensors *checkpoint(const weights *w, const char *prefix, int fused,
                                     tsafe_dtype dt, const char *skip)
{
    tsafe_safetensors_writer *wr = NULL;
    assert_int_equal(tsafe_safetensors_writer_create(&wr), TSAFE_OK);
    const uint32_t d = w->d, E = w->E, I = w->I;
    char nm[128];
    if (E > 0) {
        add_t(wr, prefix, "gate.weight", dt, E, d, w->router);
        if (w->sgate)
            add_t(wr, prefix, "shared_expert_gate.weight", dt, 1, d, w->sgate);
        if (fused) {
            size_t n = (size_t)I * d;
            float *gu = alloc_f(E * 2 * n), *dn = alloc_f(E * n);
            for (uint32_t e = 0; e < E; e++) {
                memcpy(gu + e * 2 * n, w->gate[e], n * sizeof(float));
                memcpy(gu + e * 2 * n + n, w->up[e], n * sizeof(float));
                memcpy(dn + e * n, w->down[e], n * sizeof(float));
            }
            char full[256];
            const uint64_t s1[3] = {E, 2ull * I, d}, s2[3] = {E, d, I};
            snprintf(full, sizeof full, "%sexperts.gate_up_proj", prefix);
            assert_int_equal(tsafe_safetensors_writer_add_f32(wr, full, dt, s1, 3, gu), TSAFE_OK);
            snprintf(full, sizeof full, "%sexperts.down_proj", prefix);
            assert_int_equal(tsafe_safetensors_writer_add_f32(wr, full, dt, s2, 3, dn), TSAFE_OK);
            free(gu);
            free(dn);
        } else {
            for (uint32_t e = 0; e < E; e++) {
                snprintf(nm, sizeof nm, "experts.%u.gate_proj.weight", e);
                if (!skip || strcmp(nm, skip))
                    add_t(wr, prefix, nm, dt, I, d, w->gate[e]);
                snprintf(nm, sizeof nm, "experts.%u.up_proj.weight", e);
                add_t(wr, prefix, nm, dt, I, d, w->up[e]);
                snprintf(nm, sizeof nm, "experts.%u.down_proj.weight", e);
                add_t(wr, prefix, nm, dt, d, I, w->down[e]);
            }
        }
    }
    if (w->Is > 0) {
        const char *b = E > 0 ? "shared_expert." : "";
        snprintf(nm, sizeof nm, "%sgate_proj.weight", b);
        add_t(wr, prefix, nm, dt, w->Is, d, w->gate[E]);
        snprintf(nm, sizeof nm, "%sup_proj.weight", b);
        add_t(wr, prefix, nm, dt, w->Is, d, w->up[E]);
        snprintf(nm, sizeof nm, "%sdown_proj.weight", b);
        add_t(wr, prefix, nm, dt, d, w->Is, w->down[E]);
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    assert_int_equal(tsafe_safetensors_writer_serialize(wr, &bytes, &len), TSAFE_OK);
    tsafe_safetensors_writer_free(wr);
    tsafe_safetensors *sf = NULL;
    assert_int_equal(tsafe_safetensors_parse(bytes, len, &sf), TSAFE_OK);
    tsafe_safetensors_bytes_free(bytes);
    return sf;
}

static void test_load_safetensors(void **state)
{
    (void)state;
    const char *prefix = "model.language_model.layers.3.mlp.";
    static const struct { uint32_t E, k, Is; int fused; } cases[] = {
        {6, 2, 8, 0}, {6, 3, 8, 1}, {4, 2, 0, 0}, {0, 0, 24, 0}};
    for (size_t ci = 0; ci < 4; ci++) {
        const uint32_t d = 32, I = 16, E = cases[ci].E;
        weights w;
        weights_random(&w, d, E, E ? I : 0, cases[ci].Is, E > 0 && cases[ci].Is > 0, 4.0);
        tsafe_moe_config c = make_cfg(d, E, cases[ci].k, E ? I : 0, cases[ci].Is, 1);
        tsafe_safetensors *sf = checkpoint(&w, prefix, cases[ci].fused, TSAFE_DTYPE_F32, NULL);
        tsafe_moe_layer *A = layer_from(&c, &w), *B = NULL;
        assert_int_equal(tsafe_moe_layer_create_zero(&c, 0, &B), TSAFE_OK);
        assert_int_equal(tsafe_moe_layer_load_safetensors(B, sf, prefix), TSAFE_OK);
        float h[4 * 32], ya[4 * 32], yb[4 * 32];
        fill(h, 4 * 32, 1.7);
        assert_int_equal(tsafe_moe_layer_forward(A, h, 4, ya, NULL), TSAFE_OK);
        assert_int_equal(tsafe_moe_layer_forward(B, h, 4, yb, NULL), TSAFE_OK);
        assert_memory_equal(ya, yb, sizeof ya); /* F32 round trip is exact */
        tsafe_moe_layer_free(B);
        /* wrong prefix -> missing */
        assert_int_equal(tsafe_moe_layer_create_zero(&c, 0, &B), TSAFE_OK);
        assert_int_equal(tsafe_moe_layer_load_safetensors(B, sf, "model.layers.3.mlp."),
                         TSAFE_E_MISSING_FIELD);
        tsafe_moe_layer_free(B);
        /* a layer of another shape -> shape error */
        tsafe_moe_config c2 = make_cfg(d, E, cases[ci].k, E ? I + 1 : 0,
                                       cases[ci].Is ? cases[ci].Is + 1 : 0, 1);
        assert_int_equal(tsafe_moe_layer_create_zero(&c2, 0, &B), TSAFE_OK);
        assert_int_equal(tsafe_moe_layer_load_safetensors(B, sf, prefix), TSAFE_E_SHAPE);
        tsafe_moe_layer_free(B);
        tsafe_safetensors_free(sf);
        tsafe_moe_layer_free(A);
        weights_free(&w);
    }
    /* BF16 checkpoint; then a missing expert tensor */
    weights w;
    weights_random(&w, 32, 4, 16, 8, 1, 2.0);
    tsafe_moe_config c = make_cfg(32, 4, 2, 16, 8, 1);
    tsafe_safetensors *sf = checkpoint(&w, "", 0, TSAFE_DTYPE_BF16, NULL);
    tsafe_moe_layer *B = NULL;
    assert_int_equal(tsafe_moe_layer_create_zero(&c, 0, &B), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_load_safetensors(B, sf, ""), TSAFE_OK);
    /* the same weights rounded to bf16 here give the same outputs exactly */
    weights r;
    weights_random(&r, 32, 4, 16, 8, 1, 2.0);
#define RND(dst, src, n)                                                     \
    for (size_t i_ = 0; i_ < (n); i_++)                                      \
        (dst)[i_] = tsafe_bf16_to_f32(tsafe_f32_to_bf16((src)[i_]))
    RND(r.router, w.router, 4 * 32);
    RND(r.sgate, w.sgate, 32);
    for (uint32_t e = 0; e <= 4; e++) {
        size_t n = (size_t)(e < 4 ? 16 : 8) * 32;
        RND(r.gate[e], w.gate[e], n);
        RND(r.up[e], w.up[e], n);
        RND(r.down[e], w.down[e], n);
    }
#undef RND
    tsafe_moe_layer *A = layer_from(&c, &r);
    float h[3 * 32], ya[3 * 32], yb[3 * 32];
    fill(h, 3 * 32, 1.7);
    assert_int_equal(tsafe_moe_layer_forward(A, h, 3, ya, NULL), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_forward(B, h, 3, yb, NULL), TSAFE_OK);
    assert_memory_equal(ya, yb, sizeof ya);
    tsafe_moe_layer_free(A);
    weights_free(&r);
    tsafe_moe_layer_free(B);
    tsafe_safetensors_free(sf);
    sf = checkpoint(&w, "", 0, TSAFE_DTYPE_F32, "experts.2.gate_proj.weight");
    assert_int_equal(tsafe_moe_layer_create_zero(&c, 0, &B), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_load_safetensors(B, sf, ""), TSAFE_E_MISSING_FIELD);
    assert_int_equal(tsafe_moe_layer_load_safetensors(B, NULL, ""), TSAFE_E_NULL);
    tsafe_moe_layer_free(B);
    tsafe_safetensors_free(sf);
    weights_free(&w);
}

int main(void)
{
    tsafe_test_rng_init("test_moe_layer");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_small),
        cmocka_unit_test(test_forward_dense),
        cmocka_unit_test(test_forward_real_size),
        cmocka_unit_test(test_generated_layer),
        cmocka_unit_test(test_hook),
        cmocka_unit_test(test_forward_args),
        cmocka_unit_test(test_load_safetensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
