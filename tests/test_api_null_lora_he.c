/* NULL and out-of-range arguments to every function of tensafe/lora_he.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_lora_plan_auto)
{
    tsafe_lora_plan p;
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, 0.05, 1e-4, NULL));
    ERR(tsafe_lora_plan_auto(0, LR, 1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, 0, 1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(UINT32_MAX, LR, 1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, UINT32_MAX, 1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, NAN, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, -1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, 0.0, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, INFINITY, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, 0.05, 0.0, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, 0.05, NAN, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1e300, 1e300, 1e-9, &p));
}

CHECK_FN(tsafe_lora_plan_preset)
{
    tsafe_lora_plan p;
    ERR(tsafe_lora_plan_preset(NULL, LD, LR, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", LD, LR, 1.0, 0.05, NULL));
    ERR(tsafe_lora_plan_preset("no-such-preset", LD, LR, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", 0, LR, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", LD, 0, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", UINT32_MAX, UINT32_MAX, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", LD, LR, NAN, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", LD, LR, 1.0, -0.05, &p));
}

CHECK_FN(tsafe_lora_site_create)
{
    tsafe_lora_site *s = NULL;
    const tsafe_context *c = tsafe_lora_server_context(f->server);
    float bigA[LR * LD];
    memcpy(bigA, f->A, sizeof bigA);
    bigA[3] = 1.0f; /* above max_abs_a = 0.05 */
    ERR(tsafe_lora_site_create(NULL, &f->plan, f->A, f->B, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(c, NULL, f->A, f->B, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(c, &f->plan, NULL, f->B, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(c, &f->plan, f->A, NULL, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(c, &f->plan, f->A, f->B, LD, 1.0f, NULL));
    ERR(tsafe_lora_site_create(c, &f->plan, f->A, f->B, 0, 1.0f, &s));
    IS(TSAFE_E_VALUE_RANGE, tsafe_lora_site_create(c, &f->plan, bigA, f->B, LD, 1.0f, &s));
    bigA[3] = NAN;
    ERR(tsafe_lora_site_create(c, &f->plan, bigA, f->B, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(f->ctx, &f->plan, f->A, f->B, LD, 1.0f, &s)); /* other ctx */
    ERR(tsafe_lora_site_create(c, &f->plan, f->A, f->B, LD, NAN, &s));
    /* plans are plain structs: an edited one must not overrun the slots */
    tsafe_lora_plan bad = f->plan;
    bad.cols = 100000;
    ERR(tsafe_lora_site_create(c, &bad, f->A, f->B, LD, 1.0f, &s));
    bad = f->plan;
    bad.half = 100000;
    ERR(tsafe_lora_site_create(c, &bad, f->A, f->B, LD, 1.0f, &s));
    bad = f->plan;
    bad.n_batches = 0;
    ERR(tsafe_lora_site_create(c, &bad, f->A, f->B, LD, 1.0f, &s));
    assert_null(s);
    tsafe_lora_client *cl = NULL;
    uint8_t *req = NULL;
    size_t len = 0;
    bad = f->plan;
    bad.half = 100000;
    if (tsafe_lora_client_create(&bad, NULL, &cl) == TSAFE_OK) {
        ERR(tsafe_lora_client_encrypt(cl, f->x, &req, &len, NULL));
        tsafe_lora_client_free(cl);
    }
    assert_null(req);
}

CHECK_FN(tsafe_lora_site_free)
{
    tsafe_lora_site_free(NULL);
}

CHECK_FN(tsafe_lora_site_d_out)
{
    assert_int_equal(tsafe_lora_site_d_out(NULL), 0);
    assert_int_equal(tsafe_lora_site_d_out(f->site), LD);
}

CHECK_FN(tsafe_lora_site_rank)
{
    assert_int_equal(tsafe_lora_site_rank(NULL), 0);
    assert_int_equal(tsafe_lora_site_rank(f->site), LR);
}

CHECK_FN(tsafe_lora_site_plain_delta)
{
    ERR(tsafe_lora_site_plain_delta(NULL, f->x, f->delta));
    ERR(tsafe_lora_site_plain_delta(f->site, NULL, f->delta));
    ERR(tsafe_lora_site_plain_delta(f->site, f->x, NULL));
}

CHECK_FN(tsafe_lora_local_create)
{
    tsafe_lora_local *l = NULL;
    tsafe_lora_plan bad = f->plan;
    ERR(tsafe_lora_local_create(NULL, NULL, &l));
    ERR(tsafe_lora_local_create(&f->plan, NULL, NULL));
    bad.params.log_n = 0;
    ERR(tsafe_lora_local_create(&bad, NULL, &l));
    bad = f->plan;
    bad.level = 7;
    ERR(tsafe_lora_local_create(&bad, NULL, &l));
    bad = f->plan;
    bad.cols = 0;
    ERR(tsafe_lora_local_create(&bad, NULL, &l));
    assert_null(l);
}

CHECK_FN(tsafe_lora_local_free)
{
    tsafe_lora_local_free(NULL);
}

CHECK_FN(tsafe_lora_local_context)
{
    assert_null(tsafe_lora_local_context(NULL));
    assert_non_null(tsafe_lora_local_context(f->local));
}

static void local_checks(fixture *f, int want_u)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    float buf[LD];
    float *outs[1] = {buf}, *nullouts[1] = {NULL};
    float xbig[LD], xnan[LD];
    memcpy(xbig, f->x, sizeof xbig);
    memcpy(xnan, f->x, sizeof xnan);
    xbig[1] = 1e6f;
    xnan[1] = NAN;
#define LOCAL(l, s, n, x, o) \
    (want_u ? tsafe_lora_local_u(l, s, n, x, o, NULL) : tsafe_lora_local_delta(l, s, n, x, o, NULL))
    ERR(LOCAL(NULL, sites, 1, f->x, outs));
    ERR(LOCAL(f->local, NULL, 1, f->x, outs));
    ERR(LOCAL(f->local, nulls, 1, f->x, outs));
    ERR(LOCAL(f->local, sites, 1, NULL, outs));
    ERR(LOCAL(f->local, sites, 1, f->x, NULL));
    ERR(LOCAL(f->local, sites, 1, f->x, nullouts));
    ERR(LOCAL(f->local, sites, 1, xbig, outs));
    ERR(LOCAL(f->local, sites, 1, xnan, outs));
    ERR(LOCAL(f->local, sites, SIZE_MAX, f->x, outs));
#undef LOCAL
}

CHECK_FN(tsafe_lora_local_delta) { local_checks(f, 0); }
CHECK_FN(tsafe_lora_local_u) { local_checks(f, 1); }


CHECK_FN(tsafe_lora_engine_plain)
{
    engine_checks(f, tsafe_lora_engine_plain(), 1);
}

CHECK_FN(tsafe_lora_engine_local)
{
    engine_checks(f, tsafe_lora_engine_local(NULL), 0);
    engine_checks(f, tsafe_lora_engine_local(f->local), 0);
}


CHECK_FN(tsafe_lora_local_use_backend)
{
    ERR(tsafe_lora_local_use_backend(NULL, NULL));
    IS(TSAFE_E_NO_DEVICE, tsafe_lora_local_use_backend(f->local, &k_failing));
    int before = g_factory_calls;
    OK(tsafe_lora_local_use_backend(f->local, &k_counting));
    assert_int_equal(g_factory_calls, before + 1);
    OK(tsafe_lora_local_use_backend(f->local, NULL)); /* back to CPU */
}

static const api_case k_lora_he[] = {
    ENTRY(tsafe_lora_local_use_backend),
    ENTRY(tsafe_lora_engine_plain), ENTRY(tsafe_lora_engine_local),
    ENTRY(tsafe_lora_plan_auto), ENTRY(tsafe_lora_plan_preset), ENTRY(tsafe_lora_site_create),
    ENTRY(tsafe_lora_site_free), ENTRY(tsafe_lora_site_d_out), ENTRY(tsafe_lora_site_rank),
    ENTRY(tsafe_lora_site_plain_delta), ENTRY(tsafe_lora_local_create),
    ENTRY(tsafe_lora_local_free), ENTRY(tsafe_lora_local_context),
    ENTRY(tsafe_lora_local_delta), ENTRY(tsafe_lora_local_u),
};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_he.h", k_lora_he)};
    return api_null_run("api_null_lora_he", tables, sizeof tables / sizeof tables[0], 0);
}
