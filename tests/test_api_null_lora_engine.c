/* NULL and out-of-range arguments to every function of tensafe/lora_engine.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_lora_module_create)
{
    tsafe_lora_module *m = NULL;
    float nan_a[LR * LD];
    memcpy(nan_a, f->A, sizeof nan_a);
    nan_a[3] = NAN;
    IS(TSAFE_E_NULL, tsafe_lora_module_create(NULL, f->B, LR, LD, LD, 1.0f, &m));
    IS(TSAFE_E_NULL, tsafe_lora_module_create(f->A, NULL, LR, LD, LD, 1.0f, &m));
    IS(TSAFE_E_NULL, tsafe_lora_module_create(f->A, f->B, LR, LD, LD, 1.0f, NULL));
    IS(TSAFE_E_ARG, tsafe_lora_module_create(f->A, f->B, 0, LD, LD, 1.0f, &m));
    IS(TSAFE_E_ARG, tsafe_lora_module_create(f->A, f->B, LR, 0, LD, 1.0f, &m));
    IS(TSAFE_E_ARG, tsafe_lora_module_create(f->A, f->B, LR, LD, 0, 1.0f, &m));
    IS(TSAFE_E_VALUE_RANGE, tsafe_lora_module_create(nan_a, f->B, LR, LD, LD, 1.0f, &m));
    IS(TSAFE_E_VALUE_RANGE, tsafe_lora_module_create(f->A, f->B, LR, LD, LD, INFINITY, &m));
    assert_null(m);
    OK(tsafe_lora_module_create(f->A, f->B, LR, LD, LD, 1.0f, &m));
    tsafe_lora_module_free(m);
}

CHECK_FN(tsafe_lora_module_from_info)
{
    tsafe_lora_module *m = NULL;
    tsafe_lora_module_info info = {.rank = LR, .in_dim = LD, .out_dim = LD, .scale = 2.0,
                                   .A = f->A, .B = f->B};
    IS(TSAFE_E_NULL, tsafe_lora_module_from_info(NULL, &m));
    IS(TSAFE_E_NULL, tsafe_lora_module_from_info(&info, NULL));
    info.rank = (size_t)1 << 40;
    IS(TSAFE_E_ARG, tsafe_lora_module_from_info(&info, &m));
    info.rank = LR;
    OK(tsafe_lora_module_from_info(&info, &m));
    assert_true(tsafe_lora_module_scale(m) == 2.0f);
    tsafe_lora_module_free(m);
}

CHECK_FN(tsafe_lora_module_free) { (void)f; tsafe_lora_module_free(NULL); }

/* Every getter answers 0 / NULL for NULL. */
static void module_getters_null(void)
{
    assert_int_equal(tsafe_lora_module_id(NULL), 0);
    assert_int_equal(tsafe_lora_module_rank(NULL), 0);
    assert_int_equal(tsafe_lora_module_d_in(NULL), 0);
    assert_int_equal(tsafe_lora_module_d_out(NULL), 0);
    assert_true(tsafe_lora_module_scale(NULL) == 0.0f);
    assert_null(tsafe_lora_module_A(NULL));
    assert_null(tsafe_lora_module_B(NULL));
}
CHECK_FN(tsafe_lora_module_id) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_rank) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_d_in) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_d_out) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_scale) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_A) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_B) { (void)f; module_getters_null(); }

CHECK_FN(tsafe_lora_site_module)
{
    assert_null(tsafe_lora_site_module(NULL));
    const tsafe_lora_module *m = tsafe_lora_site_module(f->site);
    assert_non_null(m);
    assert_int_equal(tsafe_lora_module_rank(m), LR);
    assert_true(tsafe_lora_module_id(m) != 0);
}

/* A module engine given NULLs / a NULL owner returns an error. */
static void module_engine_checks(fixture *f, tsafe_lora_module_engine e, int null_user_ok)
{
    const tsafe_lora_module *ms[1] = {tsafe_lora_site_module(f->site)}, *nulls[1] = {NULL};
    float *ds[1] = {f->delta}, *nullds[1] = {NULL};
    assert_non_null(e.fn);
    ERR(tsafe_lora_module_engine_run(&e, NULL, 1, f->x, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, nulls, 1, f->x, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, 0, f->x, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, SIZE_MAX, f->x, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, 1, NULL, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, 1, f->x, NULL, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, 1, f->x, nullds, NULL));
    if (!null_user_ok)
        ERR(e.fn(NULL, ms, 1, f->x, ds, NULL));
}

CHECK_FN(tsafe_lora_module_engine_run)
{
    tsafe_lora_module_engine none = {NULL, NULL, NULL};
    const tsafe_lora_module *ms[1] = {tsafe_lora_site_module(f->site)};
    float *ds[1] = {f->delta};
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_run(NULL, ms, 1, f->x, ds, NULL));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_run(&none, ms, 1, f->x, ds, NULL));
}

CHECK_FN(tsafe_lora_module_engine_prepare)
{
    tsafe_lora_module_engine none = {NULL, NULL, NULL}, plain = tsafe_lora_module_engine_plain();
    tsafe_lora_module_engine local = tsafe_lora_module_engine_local(NULL);
    const tsafe_lora_module *ms[1] = {tsafe_lora_site_module(f->site)}, *nulls[1] = {NULL};
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(NULL, ms, 1));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(&none, ms, 1));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(&plain, NULL, 1));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(&plain, nulls, 1));
    IS(TSAFE_E_RANGE, tsafe_lora_module_engine_prepare(&plain, ms, SIZE_MAX));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(&local, ms, 1));
    OK(tsafe_lora_module_engine_prepare(&plain, ms, 1)); /* nothing to prepare */
    local = tsafe_lora_module_engine_local(f->local);
    OK(tsafe_lora_module_engine_prepare(&local, ms, 1));
}

CHECK_FN(tsafe_lora_module_engine_plain)
{
    module_engine_checks(f, tsafe_lora_module_engine_plain(), 1);
}

CHECK_FN(tsafe_lora_module_engine_local)
{
    module_engine_checks(f, tsafe_lora_module_engine_local(NULL), 0);
    module_engine_checks(f, tsafe_lora_module_engine_local(f->local), 0);
}

CHECK_FN(tsafe_lora_module_engine_two_party)
{
    tsafe_lora_pair pair = {f->client, f->server, NULL}, half = {NULL, f->server, NULL};
    module_engine_checks(f, tsafe_lora_module_engine_two_party(NULL), 0);
    module_engine_checks(f, tsafe_lora_module_engine_two_party(&half), 0);
    module_engine_checks(f, tsafe_lora_module_engine_two_party(&pair), 0);
}

CHECK_FN(tsafe_lora_module_engine_sealed)
{
    tsafe_sealed_pair *p;
    OK(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &p));
    module_engine_checks(f, tsafe_lora_module_engine_sealed(NULL), 0);
    module_engine_checks(f, tsafe_lora_module_engine_sealed(p), 0);
    tsafe_sealed_pair_free(p);
}

static const api_case k_lora_engine[] = {
    ENTRY(tsafe_lora_module_create), ENTRY(tsafe_lora_module_from_info),
    ENTRY(tsafe_lora_module_free), ENTRY(tsafe_lora_module_id),
    ENTRY(tsafe_lora_module_rank), ENTRY(tsafe_lora_module_d_in),
    ENTRY(tsafe_lora_module_d_out), ENTRY(tsafe_lora_module_scale),
    ENTRY(tsafe_lora_module_A), ENTRY(tsafe_lora_module_B), ENTRY(tsafe_lora_site_module),
    ENTRY(tsafe_lora_module_engine_run), ENTRY(tsafe_lora_module_engine_prepare),
    ENTRY(tsafe_lora_module_engine_plain),
    ENTRY(tsafe_lora_module_engine_local), ENTRY(tsafe_lora_module_engine_two_party),
    ENTRY(tsafe_lora_module_engine_sealed),
};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_engine.h", k_lora_engine)};
    return api_null_run("api_null_lora_engine", tables, sizeof tables / sizeof tables[0], 0);
}
