/* NULL and out-of-range arguments to every function of tensafe/moe.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_moe_config_preset)
{
    tsafe_moe_config c;
    ERR(tsafe_moe_config_preset(NULL, &c));
    ERR(tsafe_moe_config_preset("qwen3-30b-a3b", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_moe_config_preset("no-such-model", &c));
}

CHECK_FN(tsafe_moe_config_preset_count)
{
    assert_true(tsafe_moe_config_preset_count() >= 3);
}

CHECK_FN(tsafe_moe_config_preset_name)
{
    assert_null(tsafe_moe_config_preset_name(tsafe_moe_config_preset_count()));
    assert_null(tsafe_moe_config_preset_name(SIZE_MAX));
}

CHECK_FN(tsafe_moe_config_validate)
{
    tsafe_moe_config c;
    ERR(tsafe_moe_config_validate(NULL));
    OK(tsafe_moe_config_validate(&f->moecfg));
    c = f->moecfg; c.hidden_size = 0; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.top_k = 0; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.top_k = 5; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.n_experts = 64; c.top_k = 33;
    IS(TSAFE_E_UNSUPPORTED, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.n_kv_heads = 3; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.n_heads = 3; c.n_kv_heads = 3; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.shared_expert_intermediate = 0; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.hidden_size = UINT32_MAX; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.n_experts = UINT32_MAX; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; memset(c.name, 'x', sizeof c.name); IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
}

CHECK_FN(tsafe_moe_config_load_json)
{
    tsafe_moe_config c;
    ERR(tsafe_moe_config_load_json(NULL, &c));
    ERR(tsafe_moe_config_load_json("tests", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_moe_config_load_json("/nonexistent/config.json", &c));
    ERR(tsafe_moe_config_load_json("/", &c));
}

CHECK_FN(tsafe_moe_config_parse_json)
{
    tsafe_moe_config c;
    ERR(tsafe_moe_config_parse_json(NULL, 10, &c));
    ERR(tsafe_moe_config_parse_json("{}", 2, NULL));
    ERR(tsafe_moe_config_parse_json("{}", 0, &c));
    IS(TSAFE_E_MISSING_FIELD, tsafe_moe_config_parse_json("{}", 2, &c));
    IS(TSAFE_E_JSON, tsafe_moe_config_parse_json("{", 1, &c));
}

CHECK_FN(tsafe_moe_config_is_full_attention)
{
    tsafe_moe_config c = f->moecfg;
    assert_int_equal(tsafe_moe_config_is_full_attention(NULL, 0), 0);
    c.full_attention_interval = 0; /* invalid: must not divide by zero */
    (void)tsafe_moe_config_is_full_attention(&c, 3);
    c.full_attention_interval = 4;
    (void)tsafe_moe_config_is_full_attention(&c, UINT32_MAX);
}

CHECK_FN(tsafe_moe_layer_create_random)
{
    tsafe_moe_layer *l = NULL;
    tsafe_moe_config c = f->moecfg;
    ERR(tsafe_moe_layer_create_random(NULL, 1, 0, &l));
    ERR(tsafe_moe_layer_create_random(&c, 1, 0, NULL));
    ERR(tsafe_moe_layer_create_random(&c, 1, 1, &l)); /* fewer than top_k */
    c.hidden_size = 0;
    ERR(tsafe_moe_layer_create_random(&c, 1, 0, &l));
    assert_null(l);
}

CHECK_FN(tsafe_moe_layer_create_random_ex)
{
    tsafe_moe_layer *l = NULL;
    tsafe_moe_layer_options o = {0, (tsafe_moe_weights_mode)9};
    ERR(tsafe_moe_layer_create_random_ex(NULL, 1, NULL, &l));
    ERR(tsafe_moe_layer_create_random_ex(&f->moecfg, 1, NULL, NULL));
    ERR(tsafe_moe_layer_create_random_ex(&f->moecfg, 1, &o, &l));
    o.mode = TSAFE_MOE_WEIGHTS_LAZY;
    o.n_experts_override = 1;
    ERR(tsafe_moe_layer_create_random_ex(&f->moecfg, 1, &o, &l));
    assert_null(l);
}

CHECK_FN(tsafe_moe_layer_create_zero)
{
    tsafe_moe_layer *l = NULL;
    ERR(tsafe_moe_layer_create_zero(NULL, 0, &l));
    ERR(tsafe_moe_layer_create_zero(&f->moecfg, 0, NULL));
    ERR(tsafe_moe_layer_create_zero(&f->moecfg, 1, &l));
    assert_null(l);
}

CHECK_FN(tsafe_moe_layer_set_router)
{
    float g[4 * 16] = {0}, s[16] = {0};
    ERR(tsafe_moe_layer_set_router(NULL, g, s));
    ERR(tsafe_moe_layer_set_router(f->layer, NULL, s));
    ERR(tsafe_moe_layer_set_router(f->layer, g, NULL)); /* gated shared expert needs it */
}

CHECK_FN(tsafe_moe_layer_set_expert)
{
    float w[16 * 8] = {0};
    ERR(tsafe_moe_layer_set_expert(NULL, 0, w, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, 4, w, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, -2, w, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, INT32_MAX, w, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, 0, NULL, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, 0, w, NULL, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, 0, w, w, NULL));
}

CHECK_FN(tsafe_moe_layer_load_safetensors)
{
    tsafe_moe_layer *l = NULL;
    ERR(tsafe_moe_layer_load_safetensors(NULL, f->st, "model.layers.0.mlp"));
    OK(tsafe_moe_layer_create_zero(&f->moecfg, 0, &l));
    ERR(tsafe_moe_layer_load_safetensors(l, NULL, "model.layers.0.mlp"));
    ERR(tsafe_moe_layer_load_safetensors(l, f->st, NULL));
    ERR(tsafe_moe_layer_load_safetensors(l, f->st, "model.layers.0.mlp")); /* no tensors */
    char *longp = malloc(5000);
    memset(longp, 'p', 4999);
    longp[4999] = '\0';
    ERR(tsafe_moe_layer_load_safetensors(l, f->st, longp));
    free(longp);
    tsafe_moe_layer_free(l);
}

CHECK_FN(tsafe_moe_layer_free)
{
    tsafe_moe_layer_free(NULL);
}

CHECK_FN(tsafe_moe_layer_config)
{
    assert_null(tsafe_moe_layer_config(NULL));
}

CHECK_FN(tsafe_moe_layer_route)
{
    float h[16] = {0};
    tsafe_moe_route r[1];
    ERR(tsafe_moe_layer_route(NULL, h, 1, r));
    ERR(tsafe_moe_layer_route(f->layer, NULL, 1, r));
    ERR(tsafe_moe_layer_route(f->layer, h, 1, NULL));
    ERR(tsafe_moe_layer_route(f->layer, h, SIZE_MAX, r));
    h[5] = NAN;
    IS(TSAFE_E_VALUE_RANGE, tsafe_moe_layer_route(f->layer, h, 1, r));
}

static tsafe_status failing_hook(void *user, tsafe_moe_hook_stage stage, int32_t expert,
                                 const uint32_t *tokens, size_t m, const float *in,
                                 size_t in_cols, float *io, size_t io_cols)
{
    (void)user; (void)stage; (void)expert; (void)tokens; (void)m; (void)in; (void)in_cols;
    (void)io; (void)io_cols;
    return TSAFE_E_STATE;
}

static void forward_checks(fixture *f, int hooked)
{
    float h[16] = {0}, out[16];
    tsafe_moe_layer_stats before, after;
    OK(tsafe_moe_layer_get_stats(f->layer, &before));
#define FWD(l, hh, n, o) \
    (hooked ? tsafe_moe_layer_forward_hooked(l, hh, n, o, NULL, NULL, NULL) \
            : tsafe_moe_layer_forward(l, hh, n, o, NULL))
    ERR(FWD(NULL, h, 1, out));
    ERR(FWD(f->layer, NULL, 1, out));
    ERR(FWD(f->layer, h, 1, NULL));
    ERR(FWD(f->layer, h, SIZE_MAX, out));
    h[0] = NAN;
    ERR(FWD(f->layer, h, 1, out));
    h[0] = 0;
#undef FWD
    if (hooked)
        IS(TSAFE_E_STATE,
           tsafe_moe_layer_forward_hooked(f->layer, h, 1, out, NULL, failing_hook, NULL));
    OK(tsafe_moe_layer_get_stats(f->layer, &after));
    assert_true(after.tokens == before.tokens); /* failures count nothing */
}

CHECK_FN(tsafe_moe_layer_forward) { forward_checks(f, 0); }
CHECK_FN(tsafe_moe_layer_forward_hooked) { forward_checks(f, 1); }

CHECK_FN(tsafe_moe_layer_get_stats)
{
    tsafe_moe_layer_stats s;
    ERR(tsafe_moe_layer_get_stats(NULL, &s));
    ERR(tsafe_moe_layer_get_stats(f->layer, NULL));
}

CHECK_FN(tsafe_moe_layer_expert_hits)
{
    uint64_t c[4];
    ERR(tsafe_moe_layer_expert_hits(NULL, c, 4));
    ERR(tsafe_moe_layer_expert_hits(f->layer, NULL, 4));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_moe_layer_expert_hits(f->layer, c, 3));
}

CHECK_FN(tsafe_moe_layer_reset_counters)
{
    tsafe_moe_layer_reset_counters(NULL);
}

CHECK_FN(tsafe_stepgate_create_default)
{
    ERR(tsafe_stepgate_create_default(NULL));
}

CHECK_FN(tsafe_stepgate_create_json)
{
    tsafe_stepgate *g = NULL;
    static const char ok[] = "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"x\"]}]}";
    static const char empty_kw[] = "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"\"]}]}";
    ERR(tsafe_stepgate_create_json(NULL, 10, &g));
    ERR(tsafe_stepgate_create_json(ok, strlen(ok), NULL));
    ERR(tsafe_stepgate_create_json(ok, 0, &g));
    ERR(tsafe_stepgate_create_json(ok, strlen(ok) - 1, &g));
    IS(TSAFE_E_MISSING_FIELD, tsafe_stepgate_create_json("{}", 2, &g));
    IS(TSAFE_E_PARAMS,
       tsafe_stepgate_create_json(empty_kw, strlen(empty_kw), &g));
    assert_null(g);
}

CHECK_FN(tsafe_stepgate_load_json)
{
    tsafe_stepgate *g = NULL;
    ERR(tsafe_stepgate_load_json(NULL, &g));
    ERR(tsafe_stepgate_load_json("tests", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_stepgate_load_json("/nonexistent/gate.json", &g));
    ERR(tsafe_stepgate_load_json("/", &g));
    assert_null(g);
}

CHECK_FN(tsafe_stepgate_free)
{
    tsafe_stepgate_free(NULL);
}

CHECK_FN(tsafe_stepgate_domain_count)
{
    assert_int_equal(tsafe_stepgate_domain_count(NULL), 0);
    assert_int_equal(tsafe_stepgate_domain_count(f->gate), 2);
}

CHECK_FN(tsafe_stepgate_domain_name)
{
    assert_null(tsafe_stepgate_domain_name(NULL, 0));
    assert_null(tsafe_stepgate_domain_name(f->gate, 2));
    assert_null(tsafe_stepgate_domain_name(f->gate, -2));
    assert_null(tsafe_stepgate_domain_name(f->gate, INT32_MAX));
    assert_null(tsafe_stepgate_domain_name(f->gate, INT32_MIN));
    assert_string_equal(tsafe_stepgate_domain_name(f->gate, TSAFE_STEPGATE_FALLBACK), "shared");
}

CHECK_FN(tsafe_stepgate_domain_adapter)
{
    assert_null(tsafe_stepgate_domain_adapter(NULL, 0));
    assert_null(tsafe_stepgate_domain_adapter(f->gate, 2));
    assert_null(tsafe_stepgate_domain_adapter(f->gate, -2));
    assert_null(tsafe_stepgate_domain_adapter(f->gate, INT32_MIN));
}

CHECK_FN(tsafe_stepgate_decide_every)
{
    assert_int_equal(tsafe_stepgate_decide_every(NULL), 0);
}

CHECK_FN(tsafe_stepgate_hysteresis)
{
    (void)tsafe_stepgate_hysteresis(NULL);
    assert_int_equal(tsafe_stepgate_hysteresis(f->gate), 1);
}

CHECK_FN(tsafe_stepgate_score)
{
    uint32_t s[2];
    ERR(tsafe_stepgate_score(NULL, "bank", 4, s, 2));
    ERR(tsafe_stepgate_score(f->gate, NULL, 4, s, 2));
    ERR(tsafe_stepgate_score(f->gate, "bank", 4, NULL, 2));
    ERR(tsafe_stepgate_score(f->gate, "bank", 4, s, 1));
    ERR(tsafe_stepgate_score(f->gate, "bank", 4, s, 0));
}

CHECK_FN(tsafe_stepgate_classify)
{
    int32_t d;
    ERR(tsafe_stepgate_classify(NULL, "bank", 4, &d));
    ERR(tsafe_stepgate_classify(f->gate, NULL, 4, &d));
    ERR(tsafe_stepgate_classify(f->gate, "bank", 4, NULL));
}

CHECK_FN(tsafe_stepgate_session_create)
{
    tsafe_stepgate_session *s = NULL;
    ERR(tsafe_stepgate_session_create(NULL, &s));
    ERR(tsafe_stepgate_session_create(f->gate, NULL));
    assert_null(s);
}

CHECK_FN(tsafe_stepgate_session_free)
{
    tsafe_stepgate_session_free(NULL);
}

CHECK_FN(tsafe_stepgate_session_begin)
{
    int32_t d;
    ERR(tsafe_stepgate_session_begin(NULL, "bank", 4, &d));
    ERR(tsafe_stepgate_session_begin(f->gs, NULL, 4, &d));
    if (tsafe_stepgate_session_begin(f->gs, "bank", 4, NULL) != TSAFE_OK) {} /* may be optional */
}

CHECK_FN(tsafe_stepgate_session_step)
{
    int32_t d;
    int sw;
    tsafe_stepgate_session *s;
    OK(tsafe_stepgate_session_create(f->gate, &s));
    IS(TSAFE_E_STATE, tsafe_stepgate_session_step(s, "bank", 4, &d, &sw)); /* before begin */
    OK(tsafe_stepgate_session_begin(s, "hello", 5, &d));
    ERR(tsafe_stepgate_session_step(NULL, "bank", 4, &d, &sw));
    ERR(tsafe_stepgate_session_step(s, NULL, 4, &d, &sw));
    if (tsafe_stepgate_session_step(s, "bank", 4, NULL, &sw) != TSAFE_OK) {} /* may be optional */
    OK(tsafe_stepgate_session_step(s, "bank", 4, &d, NULL)); /* switched is optional */
    tsafe_stepgate_session_free(s);
}

CHECK_FN(tsafe_stepgate_session_domain)
{
    assert_int_equal(tsafe_stepgate_session_domain(NULL), TSAFE_STEPGATE_FALLBACK);
}

static const api_case k_moe[] = {
    ENTRY(tsafe_moe_config_preset), ENTRY(tsafe_moe_config_preset_count),
    ENTRY(tsafe_moe_config_preset_name), ENTRY(tsafe_moe_config_validate),
    ENTRY(tsafe_moe_config_load_json), ENTRY(tsafe_moe_config_parse_json),
    ENTRY(tsafe_moe_config_is_full_attention), ENTRY(tsafe_moe_layer_create_random),
    ENTRY(tsafe_moe_layer_create_random_ex), ENTRY(tsafe_moe_layer_create_zero),
    ENTRY(tsafe_moe_layer_set_router), ENTRY(tsafe_moe_layer_set_expert),
    ENTRY(tsafe_moe_layer_load_safetensors), ENTRY(tsafe_moe_layer_free),
    ENTRY(tsafe_moe_layer_config), ENTRY(tsafe_moe_layer_route),
    ENTRY(tsafe_moe_layer_forward), ENTRY(tsafe_moe_layer_forward_hooked),
    ENTRY(tsafe_moe_layer_get_stats), ENTRY(tsafe_moe_layer_expert_hits),
    ENTRY(tsafe_moe_layer_reset_counters),
    ENTRY(tsafe_stepgate_create_default), ENTRY(tsafe_stepgate_create_json),
    ENTRY(tsafe_stepgate_load_json), ENTRY(tsafe_stepgate_free),
    ENTRY(tsafe_stepgate_domain_count), ENTRY(tsafe_stepgate_domain_name),
    ENTRY(tsafe_stepgate_domain_adapter), ENTRY(tsafe_stepgate_decide_every),
    ENTRY(tsafe_stepgate_hysteresis), ENTRY(tsafe_stepgate_score),
    ENTRY(tsafe_stepgate_classify), ENTRY(tsafe_stepgate_session_create),
    ENTRY(tsafe_stepgate_session_free), ENTRY(tsafe_stepgate_session_begin),
    ENTRY(tsafe_stepgate_session_step), ENTRY(tsafe_stepgate_session_domain),
};

int main(void)
{
    static const api_table tables[] = {TABLE("moe.h", k_moe)};
    return api_null_run("api_null_moe", tables, sizeof tables / sizeof tables[0], 0);
}
