/* NULL and out-of-range arguments to every function of tensafe/lora_dp.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

static const double k_bad_doubles[] = {0.0, -1.0, NAN, INFINITY, -INFINITY};

CHECK_FN(tsafe_dp_sigma_analytic)
{
    double s = 0;
    ERR(tsafe_dp_sigma_analytic(1.0, 1e-5, 1.0, NULL));
    for (size_t i = 0; i < 5; i++) {
        ERR(tsafe_dp_sigma_analytic(k_bad_doubles[i], 1e-5, 1.0, &s));
        ERR(tsafe_dp_sigma_analytic(1.0, k_bad_doubles[i], 1.0, &s));
        ERR(tsafe_dp_sigma_analytic(1.0, 1e-5, k_bad_doubles[i], &s));
    }
    ERR(tsafe_dp_sigma_analytic(1.0, 1.0, 1.0, &s));
    ERR(tsafe_dp_sigma_analytic(1.0, 2.0, 1.0, &s));
}

CHECK_FN(tsafe_dp_gaussian_delta)
{
    double d = 0;
    ERR(tsafe_dp_gaussian_delta(1.0, 1.0, NULL));
    ERR(tsafe_dp_gaussian_delta(-1.0, 1.0, &d));
    ERR(tsafe_dp_gaussian_delta(NAN, 1.0, &d));
    ERR(tsafe_dp_gaussian_delta(1.0, 0.0, &d));
    ERR(tsafe_dp_gaussian_delta(1.0, -1.0, &d));
    ERR(tsafe_dp_gaussian_delta(1.0, NAN, &d));
}

CHECK_FN(tsafe_dp_epsilon_spent)
{
    double e = 0;
    ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, 10, 1e-5, NULL));
    ERR(tsafe_dp_epsilon_spent((tsafe_dp_accountant)7, 1.0, 1.0, 10, 1e-5, &e));
    ERR(tsafe_dp_epsilon_spent((tsafe_dp_accountant)-1, 1.0, 1.0, 10, 1e-5, &e));
    for (size_t i = 0; i < 5; i++) {
        ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_GDP, k_bad_doubles[i], 1.0, 10, 1e-5, &e));
        ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, 1.0, k_bad_doubles[i], 10, 1e-5, &e));
        ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, 10, k_bad_doubles[i], &e));
    }
    ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, 10, 1.0, &e));
}

CHECK_FN(tsafe_dp_max_releases)
{
    uint64_t c = 0;
    ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, 1.0, 1e-5, NULL));
    ERR(tsafe_dp_max_releases((tsafe_dp_accountant)7, 1.0, 1.0, 1.0, 1e-5, &c));
    for (size_t i = 0; i < 5; i++) {
        ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_RDP, k_bad_doubles[i], 1.0, 1.0, 1e-5, &c));
        ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_GDP, 1.0, k_bad_doubles[i], 1.0, 1e-5, &c));
        ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, k_bad_doubles[i], 1e-5, &c));
        ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_GDP, 1.0, 1.0, 1.0, k_bad_doubles[i], &c));
    }
}

CHECK_FN(tsafe_dp_clip_l2)
{
    float v[3] = {3, 4, 0};
    double nb;
    ERR(tsafe_dp_clip_l2(NULL, 3, 1.0, &nb));
    for (size_t i = 0; i < 5; i++)
        ERR(tsafe_dp_clip_l2(v, 3, k_bad_doubles[i], &nb));
    v[2] = NAN;
    IS(TSAFE_E_VALUE_RANGE, tsafe_dp_clip_l2(v, 3, 1.0, &nb));
    assert_true(v[0] == 3.0f && v[1] == 4.0f); /* untouched */
    v[2] = INFINITY;
    IS(TSAFE_E_VALUE_RANGE, tsafe_dp_clip_l2(v, 3, 1.0, NULL));
}

CHECK_FN(tsafe_dp_gaussian_fill)
{
    double out[4];
    ERR(tsafe_dp_gaussian_fill(NULL, 4, 1.0));
    ERR(tsafe_dp_gaussian_fill(out, 4, -1.0));
    ERR(tsafe_dp_gaussian_fill(out, 4, NAN));
    ERR(tsafe_dp_gaussian_fill(out, 4, INFINITY));
}

CHECK_FN(tsafe_dp_add_gaussian_noise)
{
    float v[4] = {0};
    ERR(tsafe_dp_add_gaussian_noise(NULL, 4, 1.0));
    ERR(tsafe_dp_add_gaussian_noise(v, 4, -1.0));
    ERR(tsafe_dp_add_gaussian_noise(v, 4, NAN));
    ERR(tsafe_dp_add_gaussian_noise(v, 4, INFINITY));
}

CHECK_FN(tsafe_dp_session_create)
{
    tsafe_dp_session *s = NULL;
    tsafe_dp_params base, p;
    memset(&base, 0, sizeof base);
    base.clip_norm = 1.0;
    base.eps = 1.0;
    base.delta = 1e-6;
    base.eps_total = 10.0;
    base.delta_total = 1e-5;
    ERR(tsafe_dp_session_create(NULL, &s));
    ERR(tsafe_dp_session_create(&base, NULL));
    for (size_t i = 0; i < 5; i++) {
        double b = k_bad_doubles[i];
        p = base; p.clip_norm = b; ERR(tsafe_dp_session_create(&p, &s));
        p = base; p.eps_total = b; ERR(tsafe_dp_session_create(&p, &s));
        p = base; p.delta_total = b; ERR(tsafe_dp_session_create(&p, &s));
        p = base; p.eps = b; ERR(tsafe_dp_session_create(&p, &s));
        p = base; p.delta = b; ERR(tsafe_dp_session_create(&p, &s));
        if (b != 0.0) {
            p = base; p.sensitivity = b; ERR(tsafe_dp_session_create(&p, &s));
            p = base; p.sigma = b; ERR(tsafe_dp_session_create(&p, &s));
        }
    }
    p = base; p.delta_total = 1.0; ERR(tsafe_dp_session_create(&p, &s));
    p = base; p.accountant = (tsafe_dp_accountant)9; ERR(tsafe_dp_session_create(&p, &s));
    p = base; p.eps_total = 1e-9; IS(TSAFE_E_BUDGET, tsafe_dp_session_create(&p, &s));
    assert_null(s);
}

CHECK_FN(tsafe_dp_session_free)
{
    tsafe_dp_session_free(NULL);
}

CHECK_FN(tsafe_dp_session_release)
{
    float v[4] = {1, 2, 3, NAN};
    tsafe_dp_stats before, after;
    OK(tsafe_dp_session_stats(f->dp, &before));
    ERR(tsafe_dp_session_release(NULL, v, 3));
    ERR(tsafe_dp_session_release(f->dp, NULL, 3));
    ERR(tsafe_dp_session_release(f->dp, v, 4)); /* NaN */
    OK(tsafe_dp_session_stats(f->dp, &after));
    assert_true(after.releases == before.releases); /* nothing charged */
}

CHECK_FN(tsafe_dp_session_stats)
{
    tsafe_dp_stats st;
    ERR(tsafe_dp_session_stats(NULL, &st));
    ERR(tsafe_dp_session_stats(f->dp, NULL));
}

static const api_case k_lora_dp[] = {
    ENTRY(tsafe_dp_sigma_analytic), ENTRY(tsafe_dp_gaussian_delta),
    ENTRY(tsafe_dp_epsilon_spent), ENTRY(tsafe_dp_max_releases), ENTRY(tsafe_dp_clip_l2),
    ENTRY(tsafe_dp_gaussian_fill), ENTRY(tsafe_dp_add_gaussian_noise),
    ENTRY(tsafe_dp_session_create), ENTRY(tsafe_dp_session_free),
    ENTRY(tsafe_dp_session_release), ENTRY(tsafe_dp_session_stats),
};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_dp.h", k_lora_dp)};
    return api_null_run("api_null_lora_dp", tables, sizeof tables / sizeof tables[0], 0);
}
