/* DP: analytic Gaussian calibration vs an independent long-double
 * bisection, clipping, noise statistics, composition, budget exhaustion. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_dp.h"

static uint64_t g_seed;
static uint64_t rng_state;

static uint64_t rnd64(void)
{
    /* splitmix64: test inputs only (the library draws from libsodium) */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rnd_unit(void)
{
    return (double)(rnd64() >> 11) * 0x1p-53;
}

/* ------------------------------------------------ long-double reference */

static long double phi_ld(long double x)
{
    return 0.5L * erfcl(-x / sqrtl(2.0L));
}

/* The privacy-loss form of Balle & Wang's condition, computed directly. */
static long double ref_delta(long double eps, long double mu)
{
    long double a = mu / 2 - eps / mu, b = -mu / 2 - eps / mu;
    return phi_ld(a) - expl(eps) * phi_ld(b);
}

static long double ref_sigma(long double eps, long double delta,
                             long double sens)
{
    long double lo = sens * 1e-4L, hi = sens * 1e5L; /* lo infeasible */
    assert_true(ref_delta(eps, sens / lo) > delta);
    assert_true(ref_delta(eps, sens / hi) <= delta);
    for (int i = 0; i < 200; i++) {
        long double mid = sqrtl(lo * hi);
        if (ref_delta(eps, sens / mid) > delta)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* RDP of T Gaussian releases, improved conversion, brute-force grid. */
static long double ref_rdp_eps(long double rho, long double delta)
{
    long double best = INFINITY;
    const int steps = 160000;
    for (int i = 0; i <= steps; i++) {
        long double am1 = powl(10.0L, -7.0L + 16.0L * i / steps);
        long double a = 1 + am1;
        long double v = a * rho + logl(am1 / a) - (logl(delta) + logl(a)) / am1;
        if (v < best)
            best = v;
    }
    return best > 0 ? best : 0;
}

static long double ref_gdp_eps(long double mu, long double delta)
{
    if (ref_delta(0, mu) <= delta)
        return 0;
    long double lo = 0, hi = 1;
    while (ref_delta(hi, mu) > delta)
        hi *= 2;
    for (int i = 0; i < 200; i++) {
        long double mid = (lo + hi) / 2;
        if (ref_delta(mid, mu) > delta)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* ------------------------------------------------------------------ tests */

static void test_sigma_vs_reference(void **state)
{
    (void)state;
    const double epss[] = {0.1, 0.5, 1.0, 2.0, 8.0};
    const double deltas[] = {1e-5, 1e-8};
    double sens_list[3] = {1.0, 0.37, 0.0};
    sens_list[2] = 0.05 + 20.0 * rnd_unit(); /* fresh per run */
    double worst = 0.0;
    for (size_t ie = 0; ie < 5; ie++)
        for (size_t id = 0; id < 2; id++)
            for (size_t is = 0; is < 3; is++) {
                double eps = epss[ie], delta = deltas[id], sens = sens_list[is];
                double sigma = 0.0;
                assert_int_equal(tsafe_dp_sigma_analytic(eps, delta, sens, &sigma),
                                 TSAFE_OK);
                long double ref = ref_sigma(eps, delta, sens);
                double rel = (double)fabsl((sigma - ref) / ref);
                if (rel > worst)
                    worst = rel;
                if (rel > 1e-9)
                    print_message("eps=%g delta=%g sens=%g sigma=%.17g ref=%.17Lg\n",
                                  eps, delta, sens, sigma, ref);
                assert_true(rel <= 1e-9);
                /* feasible, and tight: 1e-9 less noise violates delta */
                assert_true(ref_delta(eps, sens / (long double)sigma) <= delta);
                assert_true(ref_delta(eps, sens / ((long double)sigma * (1 - 1e-9L))) >
                            delta);
                if (eps < 1.0) {
                    double classical = sqrt(2.0 * log(1.25 / delta)) * sens / eps;
                    assert_true(sigma < classical);
                }
            }
    print_message("sigma: worst relative deviation from the long-double "
                  "bisection %.3g\n", worst);
}

static void test_sigma_bad_args(void **state)
{
    (void)state;
    double s;
    assert_int_equal(tsafe_dp_sigma_analytic(0.0, 1e-5, 1.0, &s), TSAFE_E_ARG);
    assert_int_equal(tsafe_dp_sigma_analytic(1.0, 0.0, 1.0, &s), TSAFE_E_ARG);
    assert_int_equal(tsafe_dp_sigma_analytic(1.0, 1.0, 1.0, &s), TSAFE_E_ARG);
    assert_int_equal(tsafe_dp_sigma_analytic(1.0, 1e-5, -1.0, &s), TSAFE_E_ARG);
    assert_int_equal(tsafe_dp_sigma_analytic(NAN, 1e-5, 1.0, &s), TSAFE_E_ARG);
    assert_int_equal(tsafe_dp_sigma_analytic(1.0, 1e-5, 1.0, NULL), TSAFE_E_NULL);
}

static void test_gaussian_delta_matches_reference(void **state)
{
    (void)state;
    for (int i = 0; i < 200; i++) {
        double mu = 0.05 + 5.0 * rnd_unit(), eps = 12.0 * rnd_unit();
        double d = -1.0;
        assert_int_equal(tsafe_dp_gaussian_delta(eps, mu, &d), TSAFE_OK);
        long double r = ref_delta(eps, mu);
        if (r > 1e-300L)
            assert_true(fabsl((d - r) / r) < 1e-9L);
    }
}

static double l2(const float *v, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)v[i] * v[i];
    return sqrt(s);
}

static void test_clip(void **state)
{
    (void)state;
    enum { N = 1000 };
    float v[N], w[N];
    for (int trial = 0; trial < 50; trial++) {
        double c = 0.01 + 10.0 * rnd_unit();
        double amp = (trial % 2) ? 100.0 : 0.001;
        for (size_t i = 0; i < N; i++)
            v[i] = (float)(amp * (2.0 * rnd_unit() - 1.0));
        memcpy(w, v, sizeof v);
        double before = l2(v, N), reported = -1.0;
        assert_int_equal(tsafe_dp_clip_l2(v, N, c, &reported), TSAFE_OK);
        assert_true(fabs(reported - before) <= 1e-12 * before);
        double after = l2(v, N);
        assert_true(after <= c);
        if (before > c) {
            assert_true(after >= c * (1.0 - 1e-5));
            double dot = 0.0;
            for (size_t i = 0; i < N; i++)
                dot += (double)v[i] * w[i];
            assert_true(dot / (after * before) > 1.0 - 1e-9);
        } else {
            assert_memory_equal(v, w, sizeof v);
        }
    }
    v[3] = INFINITY;
    memcpy(w, v, sizeof v);
    assert_int_equal(tsafe_dp_clip_l2(v, N, 1.0, NULL), TSAFE_E_VALUE_RANGE);
    assert_memory_equal(v, w, sizeof v);
    assert_int_equal(tsafe_dp_clip_l2(v, N, 0.0, NULL), TSAFE_E_ARG);
}

static void check_normal(const double *x, size_t n, double sigma)
{
    double m = 0.0, s2 = 0.0, in1 = 0.0, m4 = 0.0;
    for (size_t i = 0; i < n; i++)
        m += x[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - m;
        s2 += d * d;
        m4 += d * d * d * d;
        if (fabs(x[i]) <= sigma)
            in1 += 1.0;
    }
    s2 /= (double)(n - 1);
    m4 /= (double)n;
    double sd = sqrt(s2), p1 = in1 / (double)n, kurt = m4 / (s2 * s2);
    print_message("n=%zu sigma=%g: mean %.4g sd %.6g (rel %.2e) P(|x|<=sigma) "
                  "%.5f kurtosis %.4f\n", n, sigma, m, sd, sd / sigma - 1.0, p1,
                  kurt);
    /* 6-sigma bands of the sampling distributions */
    assert_true(fabs(m) < 6.0 * sigma / sqrt((double)n));
    assert_true(fabs(sd / sigma - 1.0) < 6.0 * sqrt(0.5 / (double)n));
    const double p_ref = 0.68268949213708585;
    assert_true(fabs(p1 - p_ref) < 6.0 * sqrt(p_ref * (1 - p_ref) / (double)n));
    assert_true(fabs(kurt - 3.0) < 6.0 * sqrt(24.0 / (double)n));
}

static void test_noise_statistics(void **state)
{
    (void)state;
    enum { N = 400001 }; /* odd: exercises the unpaired tail */
    double *x = malloc(N * sizeof *x);
    float *f = calloc(N, sizeof *f);
    assert_non_null(x);
    assert_non_null(f);
    double sigma = 0.5 + 3.0 * rnd_unit();
    assert_int_equal(tsafe_dp_gaussian_fill(x, N, sigma), TSAFE_OK);
    check_normal(x, N, sigma);
    assert_int_equal(tsafe_dp_add_gaussian_noise(f, N, sigma), TSAFE_OK);
    for (size_t i = 0; i < N; i++)
        x[i] = f[i];
    check_normal(x, N, sigma);
    assert_int_equal(tsafe_dp_gaussian_fill(x, N, -1.0), TSAFE_E_ARG);
    free(x);
    free(f);
}

static void test_composition_monotone(void **state)
{
    (void)state;
    double sens = 2.0, sigma = 2.0 + 8.0 * rnd_unit(), delta = 1e-6;
    double prev_r = 0.0, prev_g = 0.0;
    for (uint64_t t = 1; t <= 64; t++) {
        double er, eg;
        assert_int_equal(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, sens,
                                                sigma, t, delta, &er), TSAFE_OK);
        assert_int_equal(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_GDP, sens,
                                                sigma, t, delta, &eg), TSAFE_OK);
        assert_true(er > prev_r);
        assert_true(eg > prev_g);
        assert_true(eg <= er * (1 + 1e-12)); /* exact curve beats RDP */
        double rho = t * sens * sens / (2.0 * sigma * sigma);
        double classical = rho + 2.0 * sqrt(rho * log(1.0 / delta));
        assert_true(er <= classical);
        prev_r = er;
        prev_g = eg;
        if (t == 1 || t == 16 || t == 64) {
            long double rr = ref_rdp_eps(rho, delta);
            long double rg = ref_gdp_eps(sqrtl((long double)t) * sens / sigma, delta);
            assert_true(fabsl(er - rr) <= 1e-6L * rr);
            assert_true(er <= rr * (1 + 1e-12L)); /* ours minimises better */
            assert_true(fabsl(eg - rg) <= 1e-9L * rg);
        }
    }
    /* one release calibrated to (eps, delta): the exact curve returns eps */
    double s1;
    assert_int_equal(tsafe_dp_sigma_analytic(0.7, 1e-6, 2.0, &s1), TSAFE_OK);
    double e1;
    assert_int_equal(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_GDP, 2.0, s1, 1,
                                            1e-6, &e1), TSAFE_OK);
    assert_true(fabs(e1 - 0.7) < 1e-9);
}

static void budget_case(tsafe_dp_accountant acc)
{
    const double clip = 1.0 + rnd_unit(), sens = 2.0 * clip;
    const double sigma = sens * (1.5 + 3.0 * rnd_unit());
    const double delta_total = 1e-6;
    const uint64_t target = 5 + rnd64() % 56;
    long double e_t, e_t1;
    if (acc == TSAFE_DP_ACCOUNTANT_RDP) {
        long double r1 = (long double)sens * sens / (2.0L * sigma * sigma);
        e_t = ref_rdp_eps(target * r1, delta_total);
        e_t1 = ref_rdp_eps((target + 1) * r1, delta_total);
    } else {
        long double mu1 = (long double)sens / sigma;
        e_t = ref_gdp_eps(sqrtl((long double)target) * mu1, delta_total);
        e_t1 = ref_gdp_eps(sqrtl((long double)target + 1) * mu1, delta_total);
    }
    assert_true(e_t1 > e_t);
    tsafe_dp_params p = {0};
    p.clip_norm = clip;
    p.sigma = sigma;
    p.eps_total = (double)((e_t + e_t1) / 2);
    p.delta_total = delta_total;
    p.accountant = acc;
    print_message("%s: sigma %.4g, budget eps %.6g -> expect %llu releases\n",
                  acc == TSAFE_DP_ACCOUNTANT_RDP ? "RDP" : "GDP", sigma,
                  p.eps_total, (unsigned long long)target);
    tsafe_dp_session *s = NULL;
    assert_int_equal(tsafe_dp_session_create(&p, &s), TSAFE_OK);
    enum { N = 48 };
    float v[N], keep[N];
    for (uint64_t t = 0; t < target; t++) {
        for (size_t i = 0; i < N; i++)
            v[i] = (float)(3.0 * (2.0 * rnd_unit() - 1.0));
        assert_int_equal(tsafe_dp_session_release(s, v, N), TSAFE_OK);
    }
    for (size_t i = 0; i < N; i++)
        v[i] = (float)i;
    memcpy(keep, v, sizeof v);
    assert_int_equal(tsafe_dp_session_release(s, v, N), TSAFE_E_BUDGET);
    assert_memory_equal(v, keep, sizeof v); /* no noise added */
    assert_int_equal(tsafe_dp_session_release(s, v, N), TSAFE_E_BUDGET);
    tsafe_dp_stats st;
    assert_int_equal(tsafe_dp_session_stats(s, &st), TSAFE_OK);
    assert_int_equal(st.releases, target);
    assert_int_equal(st.releases_left, 0);
    assert_int_equal(st.releases_max, target);
    assert_true(st.eps_spent <= p.eps_total);
    assert_true(fabsl(st.eps_spent - e_t) <= 1e-6L * e_t);
    assert_true(st.sigma == sigma && st.sensitivity == sens);
    tsafe_dp_session_free(s);

    uint64_t cnt = 0;
    assert_int_equal(tsafe_dp_max_releases(acc, sens, sigma, p.eps_total,
                                           delta_total, &cnt), TSAFE_OK);
    assert_int_equal(cnt, target);
}

static void test_budget_exhaustion_rdp(void **state)
{
    (void)state;
    budget_case(TSAFE_DP_ACCOUNTANT_RDP);
}

static void test_budget_exhaustion_gdp(void **state)
{
    (void)state;
    budget_case(TSAFE_DP_ACCOUNTANT_GDP);
}

static void test_session_release_noise_and_clip(void **state)
{
    (void)state;
    tsafe_dp_params p = {0};
    p.clip_norm = 1.0;
    p.eps = 1.0;
    p.delta = 1e-5;
    p.eps_total = 1e6; /* effectively unlimited for this test */
    p.delta_total = 1e-5;
    p.accountant = TSAFE_DP_ACCOUNTANT_GDP;
    tsafe_dp_session *s = NULL;
    assert_int_equal(tsafe_dp_session_create(&p, &s), TSAFE_OK);
    tsafe_dp_stats st;
    assert_int_equal(tsafe_dp_session_stats(s, &st), TSAFE_OK);
    double expect_sigma;
    assert_int_equal(tsafe_dp_sigma_analytic(1.0, 1e-5, 2.0, &expect_sigma),
                     TSAFE_OK);
    assert_true(st.sigma == expect_sigma);
    assert_true(st.sensitivity == 2.0);

    /* a vector far outside the ball: output - C*direction is pure noise */
    enum { N = 4096, REPS = 16 };
    float v[N];
    double *res = malloc((size_t)N * REPS * sizeof *res);
    assert_non_null(res);
    for (int r = 0; r < REPS; r++) {
        for (size_t i = 0; i < N; i++)
            v[i] = 1000.0f;
        assert_int_equal(tsafe_dp_session_release(s, v, N), TSAFE_OK);
        double c = 1.0 / sqrt((double)N); /* clipped coordinate */
        for (size_t i = 0; i < N; i++)
            res[(size_t)r * N + i] = v[i] - c;
    }
    check_normal(res, (size_t)N * REPS, st.sigma);
    assert_int_equal(tsafe_dp_session_stats(s, &st), TSAFE_OK);
    assert_int_equal(st.releases, REPS);
    assert_int_equal(st.clipped, REPS);
    v[0] = NAN;
    assert_int_equal(tsafe_dp_session_release(s, v, N), TSAFE_E_VALUE_RANGE);
    assert_int_equal(tsafe_dp_session_stats(s, &st), TSAFE_OK);
    assert_int_equal(st.releases, REPS); /* nothing charged */
    free(res);
    tsafe_dp_session_free(s);
    tsafe_dp_session_free(NULL);
}

static void test_session_bad_params(void **state)
{
    (void)state;
    tsafe_dp_session *s = (tsafe_dp_session *)&s;
    tsafe_dp_params p = {0};
    assert_int_equal(tsafe_dp_session_create(&p, &s), TSAFE_E_ARG);
    assert_null(s);
    p.clip_norm = 1.0;
    p.eps = 1.0;
    p.delta = 1e-5;
    p.eps_total = 0.5; /* below one release's cost */
    p.delta_total = 1e-5;
    assert_int_equal(tsafe_dp_session_create(&p, &s), TSAFE_E_BUDGET);
    p.eps_total = 10.0;
    p.accountant = (tsafe_dp_accountant)7;
    assert_int_equal(tsafe_dp_session_create(&p, &s), TSAFE_E_ARG);
    p.accountant = TSAFE_DP_ACCOUNTANT_RDP;
    p.delta_total = 1.5;
    assert_int_equal(tsafe_dp_session_create(&p, &s), TSAFE_E_ARG);
    assert_int_equal(tsafe_dp_session_create(NULL, &s), TSAFE_E_NULL);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    randombytes_buf(&g_seed, sizeof g_seed);
    const char *env = getenv("TSAFE_TEST_SEED");
    if (env)
        g_seed = strtoull(env, NULL, 0);
    rng_state = g_seed;
    printf("test_dp seed: 0x%016llx (set TSAFE_TEST_SEED to replay)\n",
           (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigma_vs_reference),
        cmocka_unit_test(test_sigma_bad_args),
        cmocka_unit_test(test_gaussian_delta_matches_reference),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_noise_statistics),
        cmocka_unit_test(test_composition_monotone),
        cmocka_unit_test(test_budget_exhaustion_rdp),
        cmocka_unit_test(test_budget_exhaustion_gdp),
        cmocka_unit_test(test_session_release_noise_and_clip),
        cmocka_unit_test(test_session_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
