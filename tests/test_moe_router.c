/* Router vs a double-precision reference: logits W_g h, softmax over all
 * experts, top-k (ties -> lower expert index), optional renormalisation,
 * shared-expert sigmoid gate. Tolerance: each routing weight and gate within
 * 1e-6 + 1e-4 * |reference| (fp32 softmax against double); the selected
 * experts equal the reference's except across near-ties (reference
 * probabilities within 1e-6), which fp32 may order either way. */
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
#include "support/tsafe_test_rng.h"
#include "../libtensafe-moe/src/moe_internal.h"

static tsafe_moe_config small_cfg(uint32_t d, uint32_t E, uint32_t k, int norm,
                                  uint32_t shared)
{
    tsafe_moe_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test-d%u-e%u", d, E);
    c.hidden_size = d;
    c.n_layers = 1;
    c.n_heads = 1;
    c.n_kv_heads = 1;
    c.n_experts = E;
    c.top_k = k;
    c.expert_intermediate = 4;
    c.shared_expert_intermediate = shared;
    c.shared_expert_gate = shared > 0;
    c.norm_topk_prob = norm;
    c.full_attention_interval = 1;
    return c;
}

static void fill(float *v, size_t n, double a)
{
    for (size_t i = 0; i < n; i++)
        v[i] = tsafe_test_uniform_float(-a, a);
}

/* Reference routing in double. */
typedef struct ref_route {
    double p[1024];
    uint32_t idx[TSAFE_MOE_MAX_TOPK];
    double gate;
} ref_route;

static void reference(const float *W, const float *ws, uint32_t E, uint32_t d, uint32_t k,
                      const float *h, ref_route *r)
{
    double mx = -INFINITY, sum = 0.0;
    for (uint32_t e = 0; e < E; e++) {
        double s = 0.0;
        for (uint32_t j = 0; j < d; j++)
            s += (double)W[(size_t)e * d + j] * h[j];
        r->p[e] = s;
        mx = fmax(mx, s);
    }
    for (uint32_t e = 0; e < E; e++)
        sum += (r->p[e] = exp(r->p[e] - mx));
    for (uint32_t e = 0; e < E; e++)
        r->p[e] /= sum;
    /* selection: k passes, strictly greater wins, so ties -> lower index */
    char used[1024] = {0};
    for (uint32_t i = 0; i < k; i++) {
        int best = -1;
        for (uint32_t e = 0; e < E; e++)
            if (!used[e] && (best < 0 || r->p[e] > r->p[best]))
                best = (int)e;
        used[best] = 1;
        r->idx[i] = (uint32_t)best;
    }
    r->gate = 0.0;
    if (ws != NULL) {
        double s = 0.0;
        for (uint32_t j = 0; j < d; j++)
            s += (double)ws[j] * h[j];
        r->gate = 1.0 / (1.0 + exp(-s));
    }
}

static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-6 + 1e-4 * fabs(want);
}

static void check_route(const tsafe_moe_route *got, const ref_route *ref, uint32_t E,
                        uint32_t k, int norm, int has_shared)
{
    assert_int_equal(got->k, k);
    double sel = 0.0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t e = got->expert[i];
        assert_true(e < E);
        for (uint32_t j = 0; j < i; j++)
            assert_true(got->expert[j] != e);
        if (e != ref->idx[i]) {
            /* only a near-tie may reorder */
            if (fabs(ref->p[e] - ref->p[ref->idx[i]]) > 1e-6)
                fail_msg("rank %u: expert %u (p=%.9g) vs reference %u (p=%.9g)", i, e,
                         ref->p[e], ref->idx[i], ref->p[ref->idx[i]]);
        }
        sel += ref->p[e];
    }
    for (uint32_t i = 0; i < k; i++) {
        double want = ref->p[got->expert[i]] / (norm ? sel : 1.0);
        if (!close_to(got->weight[i], want))
            fail_msg("weight %u: %.9g vs %.9g", i, (double)got->weight[i], want);
        if (i > 0)
            assert_true(got->weight[i] <= got->weight[i - 1]);
    }
    if (has_shared) {
        if (!close_to(got->shared_gate, ref->gate))
            fail_msg("gate %.9g vs %.9g", (double)got->shared_gate, ref->gate);
    } else {
        assert_true(got->shared_gate == 0.0f);
    }
}

static void run_case(uint32_t d, uint32_t E, uint32_t k, int norm, int shared, size_t n,
                     double wscale, uint32_t n_override)
{
    tsafe_moe_config c = small_cfg(d, n_override ? 2 * E : E, k, norm, shared ? 8 : 0);
    tsafe_moe_layer *L = NULL;
    assert_int_equal(tsafe_moe_layer_create_zero(&c, n_override, &L), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_config(L)->n_experts, E);
    float *W = malloc((size_t)E * d * sizeof *W), *ws = malloc(d * sizeof *ws);
    float *h = malloc(n * d * sizeof *h);
    tsafe_moe_route *routes = calloc(n, sizeof *routes);
    assert_true(W && ws && h && routes);
    fill(W, (size_t)E * d, wscale / sqrt((double)d));
    fill(ws, d, 2.0 / sqrt((double)d));
    fill(h, n * d, 1.7);
    assert_int_equal(tsafe_moe_layer_set_router(L, W, shared ? ws : NULL), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_route(L, h, n, routes), TSAFE_OK);
    ref_route *ref = malloc(sizeof *ref);
    assert_non_null(ref);
    for (size_t t = 0; t < n; t++) {
        reference(W, shared ? ws : NULL, E, d, k, h + t * d, ref);
        check_route(&routes[t], ref, E, k, norm, shared);
    }
    /* token-by-token routing (GEMV path) agrees with the batch (GEMM path) */
    for (size_t t = 0; t < n && n > 1; t++) {
        tsafe_moe_route one;
        assert_int_equal(tsafe_moe_layer_route(L, h + t * d, 1, &one), TSAFE_OK);
        reference(W, shared ? ws : NULL, E, d, k, h + t * d, ref);
        check_route(&one, ref, E, k, norm, shared);
    }
    free(ref);
    free(W);
    free(ws);
    free(h);
    free(routes);
    tsafe_moe_layer_free(L);
}

static void test_router_small_random(void **state)
{
    (void)state;
    static const uint32_t ds[] = {8, 16, 64, 128};
    static const uint32_t Es[] = {2, 4, 8, 16, 64};
    for (int rep = 0; rep < 40; rep++) {
        uint32_t d = ds[tsafe_test_below(4)], E = Es[tsafe_test_below(5)];
        uint32_t kmax = E < 8 ? E : 8;
        uint32_t k = 1 + (uint32_t)tsafe_test_below(kmax);
        int norm = (int)tsafe_test_below(2), shared = (int)tsafe_test_below(2);
        size_t n = 1 + (size_t)tsafe_test_below(9);
        double scale = tsafe_test_uniform(0.5, 8.0);
        run_case(d, E, k, norm, shared, n, scale, 0);
    }
    /* every k from 1 to E for one small case, both norm settings */
    for (uint32_t k = 1; k <= 8; k++)
        for (int norm = 0; norm < 2; norm++)
            run_case(32, 8, k, norm, 1, 3, 2.0, 0);
}

static void test_router_real_size(void **state)
{
    (void)state;
    /* d = 2048: 8 experts (reduced), top-2..8, and the full 256-expert
     * Qwen3.5 router (router weights only; experts never allocated) */
    for (uint32_t k = 2; k <= 8; k += 2) {
        run_case(2048, 8, k, 1, 1, 4, 4.0, 0);
        run_case(2048, 8, k, 0, 1, 2, 4.0, 0);
    }
    run_case(2048, 8, 4, 1, 0, 3, 4.0, 8); /* override of a 16-expert config */

    tsafe_moe_config c;
    assert_int_equal(tsafe_moe_config_preset("qwen3.5-35b-a3b", &c), TSAFE_OK);
    run_case(c.hidden_size, c.n_experts, c.top_k, c.norm_topk_prob, 1, 5, 4.0, 0);
    assert_int_equal(tsafe_moe_config_preset("qwen3-30b-a3b", &c), TSAFE_OK);
    run_case(c.hidden_size, c.n_experts, c.top_k, 0, 0, 3, 4.0, 0);
}

static void test_router_ties(void **state)
{
    (void)state;
    const uint32_t d = 4, E = 8;
    float W[8 * 4] = {0}, h[4] = {1.0f, 0.5f, -0.25f, 2.0f};
    /* experts 2, 5, 6 share the top logit; 1 and 7 tie below them */
    for (uint32_t j = 0; j < d; j++) {
        W[2 * d + j] = W[5 * d + j] = W[6 * d + j] = 0.5f * h[j];
        W[1 * d + j] = W[7 * d + j] = 0.25f * h[j];
    }
    for (uint32_t k = 1; k <= E; k++) {
        tsafe_moe_config c = small_cfg(d, E, k, 0, 0);
        tsafe_moe_layer *L = NULL;
        tsafe_moe_route r;
        assert_int_equal(tsafe_moe_layer_create_zero(&c, 0, &L), TSAFE_OK);
        assert_int_equal(tsafe_moe_layer_set_router(L, W, NULL), TSAFE_OK);
        assert_int_equal(tsafe_moe_layer_route(L, h, 1, &r), TSAFE_OK);
        static const uint32_t order[8] = {2, 5, 6, 1, 7, 0, 3, 4};
        for (uint32_t i = 0; i < k; i++)
            assert_int_equal(r.expert[i], order[i]);
        for (uint32_t i = 1; i < k && i < 3; i++)
            assert_true(r.weight[i] == r.weight[0]);
        tsafe_moe_layer_free(L);
    }
    /* all-zero router: uniform probabilities, experts 0..k-1 */
    for (int norm = 0; norm < 2; norm++) {
        tsafe_moe_config c = small_cfg(d, E, 3, norm, 0);
        tsafe_moe_layer *L = NULL;
        tsafe_moe_route r;
        assert_int_equal(tsafe_moe_layer_create_zero(&c, 0, &L), TSAFE_OK);
        assert_int_equal(tsafe_moe_layer_route(L, h, 1, &r), TSAFE_OK);
        for (uint32_t i = 0; i < 3; i++) {
            assert_int_equal(r.expert[i], i);
            assert_true(fabs(r.weight[i] - (norm ? 1.0 / 3 : 1.0 / E)) < 1e-7);
        }
        tsafe_moe_layer_free(L);
    }
    /* the internal selection directly, with ties at the cut */
    const float p[10] = {0.1f, 0.3f, 0.1f, 0.3f, 0.05f, 0.3f, 0.0f, 0.1f, 0.05f, 0.0f};
    uint32_t idx[10];
    static const uint32_t want[10] = {1, 3, 5, 0, 2, 7, 4, 8, 6, 9};
    for (uint32_t k = 1; k <= 10; k++) {
        tsafe_moe_topk(p, 10, k, idx);
        for (uint32_t i = 0; i < k; i++)
            assert_int_equal(idx[i], want[i]);
    }
}

static void test_shared_gate_and_errors(void **state)
{
    (void)state;
    const uint32_t d = 4, E = 4;
    tsafe_moe_config c = small_cfg(d, E, 2, 1, 8);
    tsafe_moe_layer *L = NULL;
    float W[16] = {0}, ws[4] = {0}, h[4] = {1, 0, 0, 0};
    assert_int_equal(tsafe_moe_layer_create_zero(&c, 0, &L), TSAFE_OK);
    const double xs[] = {-100.0, -5.0, 0.0, 3.0, 30.0, 100.0};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        ws[0] = (float)xs[i];
        assert_int_equal(tsafe_moe_layer_set_router(L, W, ws), TSAFE_OK);
        tsafe_moe_route r;
        assert_int_equal(tsafe_moe_layer_route(L, h, 1, &r), TSAFE_OK);
        double want = 1.0 / (1.0 + exp(-xs[i]));
        assert_true(fabs(r.shared_gate - want) <= 1e-7 * fmax(1.0, want));
        assert_true(isfinite(r.shared_gate));
    }
    /* the shared gate is required exactly when the config has one */
    assert_int_equal(tsafe_moe_layer_set_router(L, W, NULL), TSAFE_E_ARG);
    /* NaN / Inf input */
    tsafe_moe_route r;
    float bad[4] = {NAN, 0, 0, 0};
    assert_int_equal(tsafe_moe_layer_route(L, bad, 1, &r), TSAFE_E_VALUE_RANGE);
    bad[0] = INFINITY;
    assert_int_equal(tsafe_moe_layer_route(L, bad, 1, &r), TSAFE_E_VALUE_RANGE);
    assert_int_equal(tsafe_moe_layer_route(L, NULL, 1, &r), TSAFE_E_NULL);
    assert_int_equal(tsafe_moe_layer_route(L, h, 0, &r), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_route(NULL, h, 1, &r), TSAFE_E_NULL);
    tsafe_moe_layer_free(L);

    c = small_cfg(d, E, 2, 1, 0);
    assert_int_equal(tsafe_moe_layer_create_zero(&c, 0, &L), TSAFE_OK);
    assert_int_equal(tsafe_moe_layer_set_router(L, W, ws), TSAFE_E_ARG);
    assert_int_equal(tsafe_moe_layer_set_router(L, W, NULL), TSAFE_OK);
    tsafe_moe_layer_free(L);
    /* overrides below top_k, or on a dense model, are refused */
    assert_int_equal(tsafe_moe_layer_create_zero(&c, 1, &L), TSAFE_E_PARAMS);
    assert_null(L);
    tsafe_moe_layer_free(NULL);
}

/* Softmax: max-subtraction keeps huge logits finite. */
static void test_softmax_stability(void **state)
{
    (void)state;
    float v[4] = {1000.0f, 999.0f, -1000.0f, 1000.0f};
    assert_int_equal(tsafe_moe_softmax(v, 4), TSAFE_OK);
    double e1 = exp(-1.0), s = 2.0 + e1;
    assert_true(fabs(v[0] - 1.0 / s) < 1e-7);
    assert_true(fabs(v[1] - e1 / s) < 1e-7);
    assert_true(v[2] == 0.0f);
    assert_true(v[3] == v[0]);
}

int main(void)
{
    tsafe_test_rng_init("test_moe_router");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_small_random),
        cmocka_unit_test(test_router_real_size),
        cmocka_unit_test(test_router_ties),
        cmocka_unit_test(test_shared_gate_and_errors),
        cmocka_unit_test(test_softmax_stability),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
