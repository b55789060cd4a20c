/* NULL and out-of-range arguments to every function of tensafe/lora_sealed.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_sealed_plan_derive)
{
    (void)f;
    tsafe_sealed_plan p;
    tsafe_sealed_opts wide = {.x_bits = 24, .a_bits = 24, .b_bits = 24, .semi_honest = 1};
    IS(TSAFE_E_NULL, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 4, 64, NULL, NULL));
    /* sealed mode without the caller's semi-honest opt-in */
    IS(TSAFE_E_INSECURE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 4, 64, NULL, &p));
    IS(TSAFE_E_ARG, tsafe_sealed_plan_derive((tsafe_sealed_mode)7, 64, 4, 64, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 0, 4, 64, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 0, 64, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 4, 0, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 2000, 64, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 4, 64, &wide, &p));
}

CHECK_FN(tsafe_sealed_plan_check)
{
    (void)f;
    tsafe_sealed_plan bad;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_plan_check(NULL));
    OK(tsafe_sealed_plan_check(&S.plan));
    bad = S.plan;
    bad.version = 99;
    IS(TSAFE_E_VERSION, tsafe_sealed_plan_check(&bad));
    bad = S.plan;
    bad.flood1 = 1;
    IS(TSAFE_E_PARAMS, tsafe_sealed_plan_check(&bad));
}

CHECK_FN(tsafe_sealed_plan_sizes)
{
    (void)f;
    tsafe_sealed_sizes z;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_plan_sizes(NULL, 4, 64, &z));
    IS(TSAFE_E_NULL, tsafe_sealed_plan_sizes(&S.plan, 4, 64, NULL));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_sizes(&S.plan, 5, 64, &z));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_sizes(&S.plan, 4, 65, &z));
    OK(tsafe_sealed_plan_sizes(&S.plan, 4, 64, &z));
    assert_true(z.query > 0 && z.response1 > 0 && z.share > 0 && z.response2 > 0);
}

CHECK_FN(tsafe_sealed_site_create)
{
    (void)f;
    tsafe_sealed_site *s = NULL;
    float nan_a[4 * 64];
    sealed_world();
    memcpy(nan_a, S.A, sizeof nan_a);
    nan_a[3] = NAN;
    IS(TSAFE_E_NULL, tsafe_sealed_site_create(NULL, S.A, S.B, 4, 64, 1.0f, &s));
    IS(TSAFE_E_NULL, tsafe_sealed_site_create(&S.plan, NULL, S.B, 4, 64, 1.0f, &s));
    IS(TSAFE_E_NULL, tsafe_sealed_site_create(&S.plan, S.A, NULL, 4, 64, 1.0f, &s));
    IS(TSAFE_E_NULL, tsafe_sealed_site_create(&S.plan, S.A, S.B, 4, 64, 1.0f, NULL));
    POISON(s);
    IS(TSAFE_E_RANGE, tsafe_sealed_site_create(&S.plan, S.A, S.B, 5, 64, 1.0f, &s));
    assert_null(s);
    POISON(s);
    IS(TSAFE_E_RANGE, tsafe_sealed_site_create(&S.plan, S.A, S.B, 4, 65, 1.0f, &s));
    assert_null(s);
    POISON(s);
    IS(TSAFE_E_VALUE_RANGE, tsafe_sealed_site_create(&S.plan, nan_a, S.B, 4, 64, 1.0f, &s));
    assert_null(s);
    POISON(s);
    IS(TSAFE_E_VALUE_RANGE, tsafe_sealed_site_create(&S.plan, S.A, S.B, 4, 64, INFINITY, &s));
    assert_null(s);
}

CHECK_FN(tsafe_sealed_site_free) { (void)f; tsafe_sealed_site_free(NULL); }

CHECK_FN(tsafe_sealed_set_rounding_key)
{
    (void)f;
    /* NULL draws a fresh key (valid); a key repeats one adapter's B_q */
    assert_int_equal(tsafe_sealed_set_rounding_key(NULL), TSAFE_OK);
    uint8_t key[32] = {7};
    assert_int_equal(tsafe_sealed_set_rounding_key(key), TSAFE_OK);
}

CHECK_FN(tsafe_sealed_site_rank)
{
    (void)f;
    sealed_world();
    assert_int_equal(tsafe_sealed_site_rank(NULL), 0);
    assert_int_equal(tsafe_sealed_site_rank(S.site), 4);
}

CHECK_FN(tsafe_sealed_site_d_out)
{
    (void)f;
    sealed_world();
    assert_int_equal(tsafe_sealed_site_d_out(NULL), 0);
    assert_int_equal(tsafe_sealed_site_d_out(S.site), 64);
}

CHECK_FN(tsafe_sealed_client_create)
{
    (void)f;
    tsafe_sealed_client *c = NULL;
    tsafe_sealed_plan bad;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_client_create(NULL, NULL, &c));
    IS(TSAFE_E_NULL, tsafe_sealed_client_create(&S.plan, NULL, NULL));
    bad = S.plan;
    bad.r1.flags = TSAFE_BFV_INSECURE_FOR_TESTS;
    POISON(c);
    IS(TSAFE_E_INSECURE, tsafe_sealed_client_create(&bad, NULL, &c));
    assert_null(c);
}

CHECK_FN(tsafe_sealed_client_free) { (void)f; tsafe_sealed_client_free(NULL); }

CHECK_FN(tsafe_sealed_client_needs_hello)
{
    (void)f;
    assert_int_equal(tsafe_sealed_client_needs_hello(NULL), 0);
}

CHECK_FN(tsafe_sealed_client_failed)
{
    (void)f;
    assert_int_equal(tsafe_sealed_client_failed(NULL), 0);
}

CHECK_FN(tsafe_sealed_client_hello)
{
    (void)f;
    uint8_t *m = NULL;
    size_t n;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_client_hello(NULL, &m, &n));
    IS(TSAFE_E_NULL, tsafe_sealed_client_hello(S.cl, NULL, &n));
    IS(TSAFE_E_NULL, tsafe_sealed_client_hello(S.cl, &m, NULL));
    assert_null(m);
}

CHECK_FN(tsafe_sealed_client_query)
{
    (void)f;
    uint8_t *m = NULL;
    size_t n;
    float bad[64];
    sealed_world();
    memcpy(bad, S.x, sizeof bad);
    bad[0] = NAN;
    IS(TSAFE_E_NULL, tsafe_sealed_client_query(NULL, S.x, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_query(S.cl, NULL, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_query(S.cl, S.x, NULL, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_query(S.cl, S.x, &m, NULL, NULL));
    POISON(m);
    n = 1;
    if (!tsafe_sealed_client_needs_hello(S.cl)) /* after the hello case */
        IS(TSAFE_E_VALUE_RANGE, tsafe_sealed_client_query(S.cl, bad, &m, &n, NULL));
    else
        IS(TSAFE_E_STATE, tsafe_sealed_client_query(S.cl, S.x, &m, &n, NULL));
    assert_null(m);
    assert_int_equal(n, 0);
}

CHECK_FN(tsafe_sealed_client_respond)
{
    (void)f;
    uint8_t b[8] = {0}, *m = NULL;
    size_t n;
    uint32_t r = 4, d = 64, bigr = 5;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(NULL, b, 8, 1, &r, &d, NULL, 1, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, NULL, 8, 1, &r, &d, NULL, 1, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, b, 8, 1, NULL, &d, NULL, 1, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, b, 8, 1, &r, NULL, NULL, 1, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, b, 8, 1, &r, &d, NULL, 1, NULL, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, b, 8, 1, &r, &d, NULL, 1, &m, NULL, NULL));
    /* no query pending */
    POISON(m);
    n = 1;
    IS(TSAFE_E_STATE, tsafe_sealed_client_respond(S.cl, b, 8, 1, &r, &d, NULL, 1, &m, &n, NULL));
    (void)bigr;
    assert_null(m);
    assert_int_equal(n, 0);
}

CHECK_FN(tsafe_sealed_client_finish)
{
    (void)f;
    uint8_t b[8] = {0};
    uint32_t d = 64;
    float out[64], *o = out;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_client_finish(NULL, b, 8, 1, &d, &o, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_finish(S.cl, NULL, 8, 1, &d, &o, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_finish(S.cl, b, 8, 1, NULL, &o, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_finish(S.cl, b, 8, 1, &d, NULL, NULL));
    IS(TSAFE_E_STATE, tsafe_sealed_client_finish(S.cl, b, 8, 1, &d, &o, NULL));
}

CHECK_FN(tsafe_sealed_server_create)
{
    (void)f;
    tsafe_sealed_server *s = NULL;
    tsafe_sealed_plan bad;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_create(NULL, &s));
    IS(TSAFE_E_NULL, tsafe_sealed_server_create(&S.plan, NULL));
    bad = S.plan;
    bad.chunk1 = 1;
    POISON(s);
    IS(TSAFE_E_PARAMS, tsafe_sealed_server_create(&bad, &s));
    assert_null(s);
}

CHECK_FN(tsafe_sealed_server_free) { (void)f; tsafe_sealed_server_free(NULL); }

CHECK_FN(tsafe_sealed_server_accept)
{
    (void)f;
    uint8_t b[8] = {0};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_accept(NULL, b, 8));
    IS(TSAFE_E_NULL, tsafe_sealed_server_accept(S.sv, NULL, 8));
    ERR(tsafe_sealed_server_accept(S.sv, b, 8));
    ERR(tsafe_sealed_server_accept(S.sv, b, 0));
    /* a real hello on a server of its own: accepted once, then a replay;
     * one byte short is truncated, one byte long is refused */
    tsafe_sealed_server *sv;
    uint8_t *h, *h2;
    size_t hn;
    OK(tsafe_sealed_server_create(&S.plan, &sv));
    OK(tsafe_sealed_client_hello(S.cl, &h, &hn));
    h2 = malloc(hn + 1);
    assert_non_null(h2);
    memcpy(h2, h, hn);
    h2[hn] = 0;
    IS(TSAFE_E_TRUNCATED, tsafe_sealed_server_accept(sv, h, hn - 1));
    IS(TSAFE_E_FORMAT, tsafe_sealed_server_accept(sv, h2, hn + 1));
    OK(tsafe_sealed_server_accept(sv, h, hn));
    IS(TSAFE_E_REPLAY, tsafe_sealed_server_accept(sv, h, hn));
    free(h2);
    tsafe_lora_bytes_free(h);
    tsafe_sealed_server_free(sv);
}

CHECK_FN(tsafe_sealed_server_round1)
{
    (void)f;
    uint8_t b[8] = {0}, *m = NULL;
    size_t n;
    const tsafe_sealed_site *ss[1] = {S.site}, *nul[1] = {NULL};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(NULL, ss, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, NULL, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, nul, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, ss, 1, NULL, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, ss, 1, b, 8, NULL, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, ss, 1, b, 8, &m, NULL, NULL));
    POISON(m);
    IS(TSAFE_E_RANGE, tsafe_sealed_server_round1(S.sv, ss, 0, b, 8, &m, &n, NULL));
    assert_null(m);
    POISON(m);
    n = 1;
    IS(TSAFE_E_STATE, tsafe_sealed_server_round1(S.sv, ss, 1, b, 8, &m, &n, NULL)); /* no session */
    assert_null(m);
    assert_int_equal(n, 0);
}

CHECK_FN(tsafe_sealed_server_round2)
{
    (void)f;
    uint8_t b[8] = {0}, *m = NULL;
    size_t n;
    const tsafe_sealed_site *ss[1] = {S.site};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(NULL, ss, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(S.sv, NULL, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(S.sv, ss, 1, NULL, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(S.sv, ss, 1, b, 8, NULL, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(S.sv, ss, 1, b, 8, &m, NULL, NULL));
    POISON(m);
    IS(TSAFE_E_RANGE, tsafe_sealed_server_round2(S.sv, ss, 0, b, 8, &m, &n, NULL));
    assert_null(m);
    POISON(m);
    n = 1;
    IS(TSAFE_E_STATE, tsafe_sealed_server_round2(S.sv, ss, 1, b, 8, &m, &n, NULL));
    assert_null(m);
    assert_int_equal(n, 0);
}

CHECK_FN(tsafe_sealed_server_last_u)
{
    (void)f;
    int64_t u[4];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_last_u(NULL, 0, u, 4));
    IS(TSAFE_E_NULL, tsafe_sealed_server_last_u(S.sv, 0, NULL, 4));
    IS(TSAFE_E_STATE, tsafe_sealed_server_last_u(S.sv, 0, u, 4)); /* sealed-private */
}

CHECK_FN(tsafe_sealed_pair_create)
{
    (void)f;
    tsafe_sealed_pair *p = NULL;
    IS(TSAFE_E_NULL, tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, NULL));
    POISON(p);
    IS(TSAFE_E_ARG, tsafe_sealed_pair_create((tsafe_sealed_mode)9, NULL, NULL, 0, &p));
    assert_null(p);
    /* sealed without a DP session needs the explicit opt-out */
    POISON(p);
    IS(TSAFE_E_ARG, tsafe_sealed_pair_create(TSAFE_SEALED, NULL, NULL, 0, &p));
    assert_null(p);
}

CHECK_FN(tsafe_sealed_pair_free) { (void)f; tsafe_sealed_pair_free(NULL); }

CHECK_FN(tsafe_sealed_pair_prepare)
{
    const tsafe_lora_site *ss[1] = {f->site}, *nul[1] = {NULL};
    tsafe_sealed_pair *p;
    OK(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &p));
    IS(TSAFE_E_NULL, tsafe_sealed_pair_prepare(NULL, ss, 1));
    IS(TSAFE_E_NULL, tsafe_sealed_pair_prepare(p, NULL, 1));
    ERR(tsafe_sealed_pair_prepare(p, nul, 1));
    IS(TSAFE_E_RANGE, tsafe_sealed_pair_prepare(p, ss, 100000));
    tsafe_sealed_pair_free(p);
}

CHECK_FN(tsafe_lora_engine_sealed)
{
    tsafe_sealed_pair *p;
    OK(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &p));
    engine_checks(f, tsafe_lora_engine_sealed(p), 0);
    tsafe_lora_engine e = tsafe_lora_engine_sealed(NULL);
    const tsafe_lora_site *ss[1] = {f->site};
    float *d[1] = {f->delta};
    IS(TSAFE_E_NULL, e.fn(e.user, ss, 1, f->x, d, NULL));
    tsafe_sealed_pair_free(p);
}

CHECK_FN(tsafe_sealed_server_use_backend)
{
    sealed_world();
    static const tsafe_backend_factory broken = {"broken", NULL, NULL};
    IS(TSAFE_E_NULL, tsafe_sealed_server_use_backend(NULL, NULL));
    ERR(tsafe_sealed_server_use_backend(S.sv, &broken));
    assert_string_equal(tsafe_sealed_server_backend_name(S.sv), "cpu"); /* kept */
    OK(tsafe_sealed_server_use_backend(S.sv, NULL));
}

/* NULL server refused; a NULL pool (one thread) is valid */
CHECK_FN(tsafe_sealed_server_use_pool)
{
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_use_pool(NULL, NULL));
    OK(tsafe_sealed_server_use_pool(S.sv, NULL));
}

CHECK_FN(tsafe_sealed_server_refill)
{
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_refill(NULL, NULL));
    OK(tsafe_sealed_server_refill(S.sv, NULL)); /* no session yet: nothing to do */
}

CHECK_FN(tsafe_sealed_server_prepare_round2)
{
    sealed_world();
    const tsafe_sealed_site *sites[1] = {S.site};
    IS(TSAFE_E_NULL, tsafe_sealed_server_prepare_round2(NULL, sites, 1, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_prepare_round2(S.sv, NULL, 1, NULL));
    IS(TSAFE_E_RANGE, tsafe_sealed_server_prepare_round2(S.sv, sites, 0, NULL));
    /* no session, no round 1 pending */
    IS(TSAFE_E_STATE, tsafe_sealed_server_prepare_round2(S.sv, sites, 1, NULL));
}

CHECK_FN(tsafe_sealed_server_backend_name)
{
    sealed_world();
    assert_string_equal(tsafe_sealed_server_backend_name(NULL), "none");
    assert_string_equal(tsafe_sealed_server_backend_name(S.sv), "cpu");
}

CHECK_FN(tsafe_sealed_pair_use_backend)
{
    (void)f;
    IS(TSAFE_E_NULL, tsafe_sealed_pair_use_backend(NULL, NULL));
}

static const api_case k_lora_sealed[] = {
    ENTRY(tsafe_sealed_server_use_backend), ENTRY(tsafe_sealed_server_use_pool),
    ENTRY(tsafe_sealed_server_refill), ENTRY(tsafe_sealed_server_prepare_round2),
    ENTRY(tsafe_sealed_server_backend_name), ENTRY(tsafe_sealed_pair_use_backend),
    ENTRY(tsafe_sealed_plan_derive), ENTRY(tsafe_sealed_plan_check),
    ENTRY(tsafe_sealed_plan_sizes), ENTRY(tsafe_sealed_site_create),
    ENTRY(tsafe_sealed_site_free), ENTRY(tsafe_sealed_set_rounding_key), ENTRY(tsafe_sealed_site_rank), ENTRY(tsafe_sealed_site_d_out),
    ENTRY(tsafe_sealed_client_create), ENTRY(tsafe_sealed_client_free),
    ENTRY(tsafe_sealed_client_hello), ENTRY(tsafe_sealed_client_needs_hello),
    ENTRY(tsafe_sealed_client_failed),
    ENTRY(tsafe_sealed_client_query), ENTRY(tsafe_sealed_client_respond),
    ENTRY(tsafe_sealed_client_finish), ENTRY(tsafe_sealed_server_create),
    ENTRY(tsafe_sealed_server_free), ENTRY(tsafe_sealed_server_accept),
    ENTRY(tsafe_sealed_server_round1), ENTRY(tsafe_sealed_server_round2),
    ENTRY(tsafe_sealed_server_last_u), ENTRY(tsafe_sealed_pair_create),
    ENTRY(tsafe_sealed_pair_free), ENTRY(tsafe_sealed_pair_prepare),
    ENTRY(tsafe_lora_engine_sealed),
};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_sealed.h", k_lora_sealed)};
    return api_null_run("api_null_lora_sealed", tables, sizeof tables / sizeof tables[0], 0);
}
