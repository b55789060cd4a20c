/* Expert LoRA on routed experts: HE (local and two-party) equals the
 * plaintext expert-LoRA result; adapters of non-routed experts are never
 * touched; one encryption of h per token. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_two_party.h"
#include "tensafe/moe_lora.h"
#include "support/tsafe_test_lora.h"
#include "support/tsafe_test_rng.h"


#define N_EXPERTS 8
#define TOKENS 4
#define RANK 8


typedef struct {
    tsafe_moe_config cfg;
    tsafe_moe_layer *layer;
    tsafe_lora_plan plan_h, plan_act;
    float *A[N_EXPERTS + 1][3], *B[N_EXPERTS + 1][3];
} fixture;

static void fx_open(fixture *f)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(tsafe_moe_config_preset("qwen3.5-35b-a3b", &f->cfg), TSAFE_OK);
    f->cfg.top_k = 2;
    assert_int_equal(tsafe_moe_layer_create_random(&f->cfg, 42, N_EXPERTS, &f->layer), TSAFE_OK);
    const tsafe_moe_config *c = tsafe_moe_layer_config(f->layer);
    uint32_t d = c->hidden_size, I = c->expert_intermediate;
    assert_int_equal(c->shared_expert_intermediate, I);
    assert_int_equal(tsafe_lora_plan_auto(d, RANK, 4.0, 0.05, 1e-6, &f->plan_h), TSAFE_OK);
    assert_int_equal(tsafe_lora_plan_auto(I, RANK, 4.0, 0.05, 1e-6, &f->plan_act), TSAFE_OK);
    for (int e = 0; e <= N_EXPERTS; e++)
        for (int p = 0; p < 3; p++) {
            uint32_t din = p == 2 ? I : d, dout = p == 2 ? d : I;
            f->A[e][p] = tsafe_test_rand_floats((size_t)RANK * din, 0.05);
            f->B[e][p] = tsafe_test_rand_floats((size_t)dout * RANK, 0.05);
        }
}

static void fx_close(fixture *f)
{
    for (int e = 0; e <= N_EXPERTS; e++)
        for (int p = 0; p < 3; p++) {
            free(f->A[e][p]);
            free(f->B[e][p]);
        }
    tsafe_moe_layer_free(f->layer);
}

/* Sites on ctx_h / ctx_act for every expert (+ shared) and projection. */
static void make_sites(fixture *f, const tsafe_context *ch, const tsafe_context *ca,
                       tsafe_lora_site *sites[N_EXPERTS + 1][3], tsafe_moe_lora **lora)
{
    const tsafe_moe_config *c = tsafe_moe_layer_config(f->layer);
    assert_int_equal(tsafe_moe_lora_create(f->layer, lora), TSAFE_OK);
    for (int e = 0; e <= N_EXPERTS; e++)
        for (int p = 0; p < 3; p++) {
            uint32_t dout = p == 2 ? c->hidden_size : c->expert_intermediate;
            assert_int_equal(tsafe_lora_site_create(p == 2 ? ca : ch,
                                                    p == 2 ? &f->plan_act : &f->plan_h,
                                                    f->A[e][p], f->B[e][p], dout, 2.0f,
                                                    &sites[e][p]), TSAFE_OK);
            int32_t id = e == N_EXPERTS ? TSAFE_MOE_SHARED : e;
            assert_int_equal(tsafe_moe_lora_set_site(*lora, id, (tsafe_moe_proj)p, sites[e][p]),
                             TSAFE_OK);
        }
}

static void free_sites(tsafe_lora_site *sites[N_EXPERTS + 1][3], tsafe_moe_lora *lora)
{
    for (int e = 0; e <= N_EXPERTS; e++)
        for (int p = 0; p < 3; p++)
            tsafe_lora_site_free(sites[e][p]);
    tsafe_moe_lora_free(lora);
}

static double rel_diff(const float *a, const float *b, const float *base, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (double)(a[i] - b[i]) * (a[i] - b[i]);
        den += (double)(b[i] - base[i]) * (b[i] - base[i]);
    }
    return sqrt(num / den);
}

static void test_expert_lora_modes(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f);
    const tsafe_moe_config *c = tsafe_moe_layer_config(f.layer);
    size_t d = c->hidden_size;
    float *h = tsafe_test_rand_floats(TOKENS * d, 1.0);
    float *base = malloc(TOKENS * d * sizeof *base), *plain = malloc(TOKENS * d * sizeof *plain);
    float *he = malloc(TOKENS * d * sizeof *he);
    tsafe_moe_route routes[TOKENS];
    assert_int_equal(tsafe_moe_layer_forward(f.layer, h, TOKENS, base, routes), TSAFE_OK);

    /* plaintext reference: sites on any context (plain engine ignores HE) */
    tsafe_lora_local *lh = NULL, *la = NULL;
    assert_int_equal(tsafe_lora_local_create(&f.plan_h, NULL, &lh), TSAFE_OK);
    assert_int_equal(tsafe_lora_local_create(&f.plan_act, NULL, &la), TSAFE_OK);
    tsafe_lora_site *sites[N_EXPERTS + 1][3];
    tsafe_moe_lora *lora = NULL;
    make_sites(&f, tsafe_lora_local_context(lh), tsafe_lora_local_context(la), sites, &lora);
    tsafe_lora_engine plain_e = tsafe_lora_engine_plain();
    assert_int_equal(tsafe_moe_lora_forward(f.layer, lora, &plain_e, &plain_e, h, TOKENS, plain,
                                            NULL, NULL), TSAFE_OK);
    /* the reference really differs from the base layer */
    double lora_norm = 0;
    for (size_t i = 0; i < TOKENS * d; i++)
        lora_norm += (double)(plain[i] - base[i]) * (plain[i] - base[i]);
    assert_true(lora_norm > 0);

    /* local HE */
    tsafe_lora_engine eh = tsafe_lora_engine_local(lh), ea = tsafe_lora_engine_local(la);
    tsafe_moe_lora_stats st;
    memset(&st, 0, sizeof st);
    assert_int_equal(tsafe_moe_lora_forward(f.layer, lora, &eh, &ea, h, TOKENS, he, NULL, &st),
                     TSAFE_OK);
    double e_local = rel_diff(he, plain, base, TOKENS * d);
    print_message("expert LoRA local: rel error of the LoRA contribution %.3g\n", e_local);
    assert_true(e_local <= 1e-5);
    assert_int_equal(st.engine_calls_h, TOKENS); /* one encryption of h per token */
    assert_int_equal(st.engine_calls_act, TOKENS * (c->top_k + 1));

    /* adapters of experts no token was routed to were never touched */
    int routed[N_EXPERTS] = {0};
    for (int t = 0; t < TOKENS; t++)
        for (uint32_t i = 0; i < routes[t].k; i++)
            routed[routes[t].expert[i]]++;
    for (int e = 0; e < N_EXPERTS; e++)
        for (int p = 0; p < 3; p++)
            /* reference + local runs: each routed (token, expert) used twice */
            assert_int_equal(tsafe_moe_lora_site_uses(lora, e, (tsafe_moe_proj)p),
                             (uint64_t)(2 * routed[e]));
    assert_int_equal(tsafe_moe_lora_site_uses(lora, TSAFE_MOE_SHARED, TSAFE_MOE_PROJ_DOWN),
                     2 * TOKENS);
    free_sites(sites, lora);

    /* two-party: sites on the servers' contexts */
    tsafe_lora_pair ph = {0}, pa = {0};
    assert_int_equal(tsafe_lora_client_create(&f.plan_h, NULL, &ph.client), TSAFE_OK);
    assert_int_equal(tsafe_lora_server_create(&f.plan_h, &ph.server), TSAFE_OK);
    assert_int_equal(tsafe_lora_client_create(&f.plan_act, NULL, &pa.client), TSAFE_OK);
    assert_int_equal(tsafe_lora_server_create(&f.plan_act, &pa.server), TSAFE_OK);
    make_sites(&f, tsafe_lora_server_context(ph.server), tsafe_lora_server_context(pa.server),
               sites, &lora);
    tsafe_lora_engine th = tsafe_lora_engine_two_party(&ph), ta = tsafe_lora_engine_two_party(&pa);
    memset(&st, 0, sizeof st);
    assert_int_equal(tsafe_moe_lora_forward(f.layer, lora, &th, &ta, h, TOKENS, he, NULL, &st),
                     TSAFE_OK);
    double e_two = rel_diff(he, plain, base, TOKENS * d);
    print_message("expert LoRA two-party: rel error %.3g, bytes up %llu down %llu\n", e_two,
                  (unsigned long long)st.he.bytes_up, (unsigned long long)st.he.bytes_down);
    assert_true(e_two <= 1e-5);
    assert_true(st.he.bytes_up > 0 && st.he.bytes_down > 0);
    free_sites(sites, lora);
    tsafe_lora_client_free(ph.client);
    tsafe_lora_server_free(ph.server);
    tsafe_lora_client_free(pa.client);
    tsafe_lora_server_free(pa.server);
    tsafe_lora_local_free(lh);
    tsafe_lora_local_free(la);
    free(h); free(base); free(plain); free(he);
    fx_close(&f);
}

static void test_expert_lora_errors(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f);
    tsafe_moe_lora *lora = NULL;
    assert_int_equal(tsafe_moe_lora_create(f.layer, &lora), TSAFE_OK);
    assert_int_equal(tsafe_moe_lora_set_site(lora, N_EXPERTS, TSAFE_MOE_PROJ_GATE, NULL),
                     TSAFE_E_RANGE);
    assert_int_equal(tsafe_moe_lora_set_site(lora, 0, (tsafe_moe_proj)7, NULL), TSAFE_E_RANGE);
    /* a site of the wrong output size is refused */
    tsafe_lora_local *lh = NULL;
    assert_int_equal(tsafe_lora_local_create(&f.plan_h, NULL, &lh), TSAFE_OK);
    tsafe_lora_site *wrong = NULL;
    assert_int_equal(tsafe_lora_site_create(tsafe_lora_local_context(lh), &f.plan_h, f.A[0][0],
                                            f.B[0][2], 100, 1.0f, &wrong), TSAFE_OK);
    assert_int_equal(tsafe_moe_lora_set_site(lora, 0, TSAFE_MOE_PROJ_GATE, wrong), TSAFE_E_SHAPE);
    tsafe_lora_engine e = tsafe_lora_engine_plain();
    float h[1] = {0}, out[1];
    assert_int_equal(tsafe_moe_lora_forward(f.layer, lora, &e, NULL, h, 1, out, NULL, NULL),
                     TSAFE_E_NULL);
    assert_int_equal(tsafe_moe_lora_forward(f.layer, lora, &e, &e, h, 0, out, NULL, NULL),
                     TSAFE_E_RANGE);
    tsafe_lora_site_free(wrong);
    tsafe_lora_local_free(lh);
    tsafe_moe_lora_free(lora);
    fx_close(&f);
}

int main(void)
{
    tsafe_test_rng_init("moe_lora");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expert_lora_modes),
        cmocka_unit_test(test_expert_lora_errors),
    };
    return cmocka_run_group_tests_name("moe_lora", tests, NULL, NULL);
}
