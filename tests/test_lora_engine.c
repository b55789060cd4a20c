/* Engines over modules (tensafe/lora_engine.h): for the same weights and
 * the same randomness, every module engine (plain, local, plain
 * ZeRo-MOAI, sealed, sealed-private) gives bit for bit the deltas of the
 * site engine it replaces, and both are near the independent double
 * reference; an engine's prepared form is keyed on the module id (a freed
 * module's address reused by another is not confused with it); the sealed
 * engines run from modules alone (no CKKS context anywhere); the MoE layer
 * over modules equals the layer over sites. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_engine.h"
#include "tensafe/moe_lora.h"
#include "support/tsafe_test_lora.h"
#include "support/tsafe_test_rng.h"
#include "support/tsafe_test_stream.h"

#define D_IN 512u
#define RANK 8u
#define N_MOD 3

static const uint32_t k_dout[N_MOD] = {512, 256, 384};

typedef struct weights {
    float *A[N_MOD], *B[N_MOD], *x;
    tsafe_lora_module *m[N_MOD];
} weights;

static void weights_make(weights *w)
{
    for (int i = 0; i < N_MOD; i++) {
        w->A[i] = tsafe_test_rand_floats((size_t)RANK * D_IN, 0.05);
        w->B[i] = tsafe_test_rand_floats((size_t)k_dout[i] * RANK, 0.05);
        assert_int_equal(tsafe_lora_module_create(w->A[i], w->B[i], RANK, D_IN, k_dout[i],
                                                  0.5f, &w->m[i]),
                         TSAFE_OK);
    }
    w->x = tsafe_test_rand_floats(D_IN, 1.0);
}

static void weights_free(weights *w)
{
    for (int i = 0; i < N_MOD; i++) {
        free(w->A[i]);
        free(w->B[i]);
        tsafe_lora_module_free(w->m[i]);
    }
    free(w->x);
}

typedef struct deltas {
    float *d[N_MOD];
} deltas;

static void deltas_make(deltas *d)
{
    for (int i = 0; i < N_MOD; i++)
        assert_non_null(d->d[i] = calloc(k_dout[i], sizeof(float)));
}

static void deltas_free(deltas *d)
{
    for (int i = 0; i < N_MOD; i++)
        free(d->d[i]);
}

/* a and b bitwise equal, and near the double reference of w. */
static void same_and_right(const weights *w, const deltas *a, const deltas *b, double tol)
{
    double *ref = malloc(512 * sizeof *ref);
    for (int i = 0; i < N_MOD; i++) {
        assert_memory_equal(a->d[i], b->d[i], k_dout[i] * sizeof(float));
        tsafe_test_ref_delta(w->A[i], w->B[i], w->x, RANK, D_IN, k_dout[i], 0.5, ref);
        assert_true(tsafe_test_rel_l2(a->d[i], ref, k_dout[i]) < tol);
    }
    free(ref);
}

static void test_plain(void **state)
{
    (void)state;
    weights w;
    weights_make(&w);
    deltas a, b;
    deltas_make(&a);
    deltas_make(&b);
    tsafe_lora_module_engine me = tsafe_lora_module_engine_plain();
    assert_int_equal(tsafe_lora_module_engine_run(&me, (const tsafe_lora_module *const *)w.m,
                                                  N_MOD, w.x, a.d, NULL),
                     TSAFE_OK);
    for (int i = 0; i < N_MOD; i++) {
        tsafe_lora_module_info info = {.rank = RANK, .in_dim = D_IN, .out_dim = k_dout[i],
                                       .scale = 0.5, .A = w.A[i], .B = w.B[i]};
        tsafe_lora_module *m;
        assert_int_equal(tsafe_lora_module_from_info(&info, &m), TSAFE_OK);
        assert_true(tsafe_lora_module_id(m) != tsafe_lora_module_id(w.m[i]));
        const tsafe_lora_module *one[1] = {m};
        assert_int_equal(tsafe_lora_module_engine_run(&me, one, 1, w.x, &b.d[i], NULL), TSAFE_OK);
        tsafe_lora_module_free(m);
    }
    same_and_right(&w, &a, &b, 1e-5);
    deltas_free(&a);
    deltas_free(&b);
    weights_free(&w);
}

/* Local and plain ZeRo-MOAI: the module engine's deltas equal the site
 * engine's on sites built from the same weights, same randomness. */
static void ckks_case(int two_party)
{
    weights w;
    weights_make(&w);
    tsafe_lora_plan plan;
    assert_int_equal(tsafe_lora_plan_auto(D_IN, RANK, 4.0, 0.05, 1e-6, &plan), TSAFE_OK);
    tsafe_lora_local *l = NULL;
    tsafe_lora_pair pair = {0};
    const tsafe_context *ctx;
    if (two_party) {
        assert_int_equal(tsafe_lora_client_create(&plan, NULL, &pair.client), TSAFE_OK);
        assert_int_equal(tsafe_lora_server_create(&plan, &pair.server), TSAFE_OK);
        ctx = tsafe_lora_server_context(pair.server);
    } else {
        assert_int_equal(tsafe_lora_local_create(&plan, NULL, &l), TSAFE_OK);
        ctx = tsafe_lora_local_context(l);
    }
    tsafe_lora_site *site[N_MOD];
    for (int i = 0; i < N_MOD; i++)
        assert_int_equal(tsafe_lora_site_create(ctx, &plan, w.A[i], w.B[i], k_dout[i], 0.5f,
                                                &site[i]),
                         TSAFE_OK);
    tsafe_lora_engine se = two_party ? tsafe_lora_engine_two_party(&pair)
                                     : tsafe_lora_engine_local(l);
    tsafe_lora_module_engine me = two_party ? tsafe_lora_module_engine_two_party(&pair)
                                            : tsafe_lora_module_engine_local(l);
    deltas a, b;
    deltas_make(&a);
    deltas_make(&b);
    for (int token = 0; token < 2; token++) { /* the second reuses the prepared sites */
        tsafe_test_stream_reset(500 + (uint64_t)token);
        assert_int_equal(se.fn(se.user, (const tsafe_lora_site *const *)site, N_MOD, w.x, a.d,
                               NULL),
                         TSAFE_OK);
        tsafe_test_stream_reset(500 + (uint64_t)token);
        assert_int_equal(tsafe_lora_module_engine_run(&me, (const tsafe_lora_module *const *)w.m,
                                                      N_MOD, w.x, b.d, NULL),
                         TSAFE_OK);
        same_and_right(&w, &a, &b, 1e-3);
    }
    /* a module of another rank than the plan's: refused, not rebuilt */
    tsafe_lora_module *odd;
    assert_int_equal(tsafe_lora_module_create(w.A[0], w.B[0], RANK / 2, D_IN, k_dout[0], 1.0f,
                                              &odd),
                     TSAFE_OK);
    const tsafe_lora_module *one[1] = {odd};
    assert_int_equal(tsafe_lora_module_engine_run(&me, one, 1, w.x, b.d, NULL),
                     TSAFE_E_PARAMS_MISMATCH);
    tsafe_lora_module_free(odd);
    for (int i = 0; i < N_MOD; i++)
        tsafe_lora_site_free(site[i]);
    tsafe_lora_local_free(l);
    tsafe_lora_client_free(pair.client);
    tsafe_lora_server_free(pair.server);
    deltas_free(&a);
    deltas_free(&b);
    weights_free(&w);
}

static void test_local(void **state)
{
    (void)state;
    ckks_case(0);
}

static void test_two_party(void **state)
{
    (void)state;
    ckks_case(1);
}

/* Sealed: two pairs, one through the site engine (sites built on a CKKS
 * context), one through the module engine (modules only), from the same
 * randomness: the same deltas, token after token. */
static void sealed_case(tsafe_sealed_mode mode)
{
    weights w;
    weights_make(&w);
    tsafe_lora_plan plan;
    tsafe_context *ctx;
    assert_int_equal(tsafe_lora_plan_auto(D_IN, RANK, 4.0, 0.05, 1e-6, &plan), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&plan.params, &ctx), TSAFE_OK);
    tsafe_lora_site *site[N_MOD];
    for (int i = 0; i < N_MOD; i++)
        assert_int_equal(tsafe_lora_site_create(ctx, &plan, w.A[i], w.B[i], k_dout[i], 0.5f,
                                                &site[i]),
                         TSAFE_OK);
    tsafe_sealed_opts so = {.semi_honest = mode == TSAFE_SEALED};
    tsafe_sealed_pair *ps, *pm;
    assert_int_equal(tsafe_sealed_pair_create(mode, &so, NULL, 1, &ps), TSAFE_OK);
    assert_int_equal(tsafe_sealed_pair_create(mode, &so, NULL, 1, &pm), TSAFE_OK);
    tsafe_lora_engine se = tsafe_lora_engine_sealed(ps);
    tsafe_lora_module_engine me = tsafe_lora_module_engine_sealed(pm);
    deltas a, b;
    deltas_make(&a);
    deltas_make(&b);
    for (int token = 0; token < 2; token++) {
        tsafe_test_stream_reset(900 + (uint64_t)token);
        assert_int_equal(se.fn(se.user, (const tsafe_lora_site *const *)site, N_MOD, w.x, a.d,
                               NULL),
                         TSAFE_OK);
        tsafe_test_stream_reset(900 + (uint64_t)token);
        assert_int_equal(tsafe_lora_module_engine_run(&me, (const tsafe_lora_module *const *)w.m,
                                                      N_MOD, w.x, b.d, NULL),
                         TSAFE_OK);
        same_and_right(&w, &a, &b, 2e-2);
    }
    tsafe_sealed_pair_free(ps);
    tsafe_sealed_pair_free(pm);
    for (int i = 0; i < N_MOD; i++)
        tsafe_lora_site_free(site[i]);
    tsafe_context_free(ctx);
    deltas_free(&a);
    deltas_free(&b);
    weights_free(&w);
}

static void test_sealed(void **state)
{
    (void)state;
    sealed_case(TSAFE_SEALED);
}

static void test_sealed_private(void **state)
{
    (void)state;
    sealed_case(TSAFE_SEALED_PRIVATE);
}

/* A module freed and another created (likely at the same address) with
 * other weights: the engine builds the new one's form, by id. */
static void test_keyed_on_id(void **state)
{
    (void)state;
    weights w;
    weights_make(&w);
    tsafe_sealed_pair *p;
    assert_int_equal(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &p),
                     TSAFE_OK);
    tsafe_lora_module_engine me = tsafe_lora_module_engine_sealed(p);
    float *d = calloc(k_dout[0], sizeof *d);
    double *ref = malloc(k_dout[0] * sizeof *ref);
    for (int round = 0; round < 2; round++) {
        float *B = round ? w.B[1] : w.B[0]; /* 256 rows or more: 256 outputs either way */
        tsafe_lora_module *m;
        assert_int_equal(tsafe_lora_module_create(w.A[round], B, RANK, D_IN, k_dout[0] / 2, 0.5f,
                                                  &m),
                         TSAFE_OK);
        const tsafe_lora_module *one[1] = {m};
        assert_int_equal(tsafe_lora_module_engine_run(&me, one, 1, w.x, &d, NULL), TSAFE_OK);
        tsafe_test_ref_delta(w.A[round], B, w.x, RANK, D_IN, k_dout[0] / 2, 0.5, ref);
        assert_true(tsafe_test_rel_l2(d, ref, k_dout[0] / 2) < 2e-2);
        tsafe_lora_module_free(m);
    }
    free(d);
    free(ref);
    tsafe_sealed_pair_free(p);
    weights_free(&w);
}

#define N_EXPERTS 4
#define TOKENS 2

/* The MoE layer through module engines (set_module, forward_modules)
 * equals the layer through site engines (set_site, forward) for the same
 * weights and randomness: plain and sealed-private. */
static void test_moe_modules(void **state)
{
    (void)state;
    tsafe_moe_config cfg;
    tsafe_moe_layer *layer = NULL;
    assert_int_equal(tsafe_moe_config_preset("qwen3.5-35b-a3b", &cfg), TSAFE_OK);
    cfg.top_k = 2;
    assert_int_equal(tsafe_moe_layer_create_random(&cfg, 7, N_EXPERTS, &layer), TSAFE_OK);
    const tsafe_moe_config *c = tsafe_moe_layer_config(layer);
    uint32_t d = c->hidden_size, I = c->expert_intermediate;
    tsafe_lora_plan ph, pa;
    tsafe_context *ch, *ca;
    assert_int_equal(tsafe_lora_plan_auto(d, RANK, 4.0, 0.05, 1e-6, &ph), TSAFE_OK);
    assert_int_equal(tsafe_lora_plan_auto(I, RANK, 4.0, 0.05, 1e-6, &pa), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&ph.params, &ch), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&pa.params, &ca), TSAFE_OK);
    tsafe_moe_lora *by_site, *by_mod;
    assert_int_equal(tsafe_moe_lora_create(layer, &by_site), TSAFE_OK);
    assert_int_equal(tsafe_moe_lora_create(layer, &by_mod), TSAFE_OK);
    tsafe_lora_site *sites[N_EXPERTS][3];
    tsafe_lora_module *mods[N_EXPERTS][3];
    for (int e = 0; e < N_EXPERTS; e++)
        for (int p = 0; p < 3; p++) {
            uint32_t din = p == 2 ? I : d, dout = p == 2 ? d : I;
            float *A = tsafe_test_rand_floats((size_t)RANK * din, 0.05);
            float *B = tsafe_test_rand_floats((size_t)dout * RANK, 0.05);
            assert_int_equal(tsafe_lora_site_create(p == 2 ? ca : ch, p == 2 ? &pa : &ph, A, B,
                                                    dout, 2.0f, &sites[e][p]),
                             TSAFE_OK);
            assert_int_equal(tsafe_lora_module_create(A, B, RANK, din, dout, 2.0f, &mods[e][p]),
                             TSAFE_OK);
            assert_int_equal(tsafe_moe_lora_set_site(by_site, e, (tsafe_moe_proj)p, sites[e][p]),
                             TSAFE_OK);
            assert_int_equal(tsafe_moe_lora_set_module(by_mod, e, (tsafe_moe_proj)p, mods[e][p]),
                             TSAFE_OK);
            free(A);
            free(B);
        }
    float *h = tsafe_test_rand_floats((size_t)TOKENS * d, 1.0);
    float *o1 = malloc((size_t)TOKENS * d * sizeof *o1), *o2 = malloc((size_t)TOKENS * d * sizeof *o2);
    /* plain */
    tsafe_lora_engine se = tsafe_lora_engine_plain();
    tsafe_lora_module_engine me = tsafe_lora_module_engine_plain();
    assert_int_equal(tsafe_moe_lora_forward(layer, by_site, &se, &se, h, TOKENS, o1, NULL, NULL),
                     TSAFE_OK);
    assert_int_equal(tsafe_moe_lora_forward_modules(layer, by_mod, &me, &me, h, TOKENS, o2,
                                                    NULL, NULL),
                     TSAFE_OK);
    assert_memory_equal(o1, o2, (size_t)TOKENS * d * sizeof *o1);
    /* sealed-private: one pair per engine, the same randomness */
    tsafe_sealed_pair *ps, *pm;
    assert_int_equal(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &ps), TSAFE_OK);
    assert_int_equal(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &pm), TSAFE_OK);
    se = tsafe_lora_engine_sealed(ps);
    me = tsafe_lora_module_engine_sealed(pm);
    tsafe_test_stream_reset(31);
    assert_int_equal(tsafe_moe_lora_forward(layer, by_site, &se, &se, h, TOKENS, o1, NULL, NULL),
                     TSAFE_OK);
    tsafe_test_stream_reset(31);
    assert_int_equal(tsafe_moe_lora_forward_modules(layer, by_mod, &me, &me, h, TOKENS, o2,
                                                    NULL, NULL),
                     TSAFE_OK);
    assert_memory_equal(o1, o2, (size_t)TOKENS * d * sizeof *o1);
    /* a module-only slot is refused by the site forward, not skipped */
    assert_int_equal(tsafe_moe_lora_forward(layer, by_mod, &se, &se, h, TOKENS, o1, NULL, NULL),
                     TSAFE_E_STATE);
    tsafe_sealed_pair_free(ps);
    tsafe_sealed_pair_free(pm);
    for (int e = 0; e < N_EXPERTS; e++)
        for (int p = 0; p < 3; p++) {
            tsafe_lora_site_free(sites[e][p]);
            tsafe_lora_module_free(mods[e][p]);
        }
    tsafe_moe_lora_free(by_site);
    tsafe_moe_lora_free(by_mod);
    tsafe_context_free(ch);
    tsafe_context_free(ca);
    tsafe_moe_layer_free(layer);
    free(h);
    free(o1);
    free(o2);
}

int main(void)
{
    if (tsafe_test_stream_install() != 0) /* before anything calls sodium_init */
        return 1;
    tsafe_test_rng_init("lora_engine");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),          cmocka_unit_test(test_local),
        cmocka_unit_test(test_two_party),      cmocka_unit_test(test_sealed),
        cmocka_unit_test(test_sealed_private), cmocka_unit_test(test_keyed_on_id),
        cmocka_unit_test(test_moe_modules),
    };
    return cmocka_run_group_tests_name("lora_engine", tests, NULL, NULL);
}
