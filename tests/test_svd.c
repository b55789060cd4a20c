/* SVD rank reduction vs a reference: dW formed explicitly in double and
 * its singular values from a full LAPACKE_dgesvd. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <lapacke.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_svd.h"

static uint64_t rng_state;

static uint64_t rnd64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rnd_unit(void)
{
    return ((double)(rnd64() >> 11) + 0.5) * 0x1p-53;
}

static double rnd_gauss(void)
{
    return sqrt(-2.0 * log(rnd_unit())) * cos(6.283185307179586 * rnd_unit());
}

static size_t rnd_range(size_t lo, size_t hi)
{
    return lo + (size_t)(rnd64() % (hi - lo + 1));
}

/* dW = B A in double (plain triple loop). */
static double *form_dw(const float *a, const float *b, size_t r, size_t in,
                       size_t out)
{
    double *w = calloc(out * in, sizeof *w);
    assert_non_null(w);
    for (size_t i = 0; i < out; i++)
        for (size_t t = 0; t < r; t++) {
            double bv = b[i * r + t];
            for (size_t j = 0; j < in; j++)
                w[i * in + j] += bv * a[t * in + j];
        }
    return w;
}

/* All min(out, in) singular values of dW, descending. */
static double *ref_singular_values(const double *w, size_t out, size_t in)
{
    size_t m = out < in ? out : in;
    double *copy = malloc(out * in * sizeof *copy);
    double *s = malloc(m * sizeof *s);
    double *superb = malloc((m + 1) * sizeof *superb);
    assert_true(copy && s && superb);
    memcpy(copy, w, out * in * sizeof *copy);
    lapack_int info = LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', (lapack_int)out,
                                     (lapack_int)in, copy, (lapack_int)in, s,
                                     NULL, 1, NULL, 1, superb);
    assert_int_equal(info, 0);
    free(copy);
    free(superb);
    return s;
}

static double frob(const double *w, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += w[i] * w[i];
    return sqrt(s);
}

/* Adapter with r = 32 whose product is rank 16 plus small noise:
 * B = [B0 | eta * N], so B A = B0 A[0:16] + eta * N A[16:32]. */
static void make_adapter(size_t r, size_t in, size_t out, size_t signal_rank,
                         double eta, float **a_out, float **b_out)
{
    float *a = malloc(r * in * sizeof *a), *b = malloc(out * r * sizeof *b);
    assert_true(a && b);
    for (size_t i = 0; i < r * in; i++)
        a[i] = (float)(rnd_gauss() / sqrt((double)in));
    for (size_t i = 0; i < out; i++)
        for (size_t t = 0; t < r; t++)
            b[i * r + t] = (float)(t < signal_rank ? rnd_gauss() * (1.0 + t % 5)
                                                   : eta * rnd_gauss());
    *a_out = a;
    *b_out = b;
}

static void check_case(size_t in, size_t out, size_t r, size_t k, double eta)
{
    float *a, *b;
    const size_t signal = 16 < r ? 16 : r;
    make_adapter(r, in, out, signal, eta, &a, &b);
    double *w = form_dw(a, b, r, in, out);
    size_t mfull = out < in ? out : in;
    double *sref = ref_singular_values(w, out, in);
    double total = 0.0, tail = 0.0;
    for (size_t i = 0; i < mfull; i++) {
        total += sref[i] * sref[i];
        if (i >= k)
            tail += sref[i] * sref[i];
    }

    /* the noise part alone, for the "error at the noise level" claim */
    float *bn = calloc(out * r, sizeof *bn);
    assert_non_null(bn);
    for (size_t i = 0; i < out; i++)
        for (size_t t = signal; t < r; t++)
            bn[i * r + t] = b[i * r + t];
    double *wn = form_dw(a, bn, r, in, out);
    double noise_rel = frob(wn, out * in) / sqrt(total);

    tsafe_svd_options opt = {0};
    opt.select = TSAFE_SVD_FIXED_RANK;
    opt.rank = k;
    tsafe_svd_result *res = NULL;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_OK);
    assert_int_equal(res->rank, k);
    size_t m = res->n_singular;
    size_t mexp = r < mfull ? r : mfull;
    assert_int_equal(m, mexp);
    for (size_t i = 0; i < m; i++)
        assert_true(fabs(res->singular_values[i] - sref[i]) <= 1e-10 * sref[0]);
    for (size_t i = m; i < mfull; i++) /* reference: the rest is roundoff */
        assert_true(sref[i] <= 1e-10 * sref[0]);

    double ref_energy = 1.0 - tail / total, ref_err = sqrt(tail / total);
    assert_true(fabs(res->energy_retained - ref_energy) <= 1e-10);
    assert_true(fabs(res->rel_frobenius_error - ref_err) <= 1e-8 * ref_err + 1e-12);

    /* the factors really approximate dW that well */
    double *w2 = form_dw(res->A, res->B, k, in, out);
    for (size_t i = 0; i < out * in; i++)
        w2[i] -= w[i];
    double actual = frob(w2, out * in) / sqrt(total);
    print_message("in=%zu out=%zu r=%zu k=%zu: reported rel err %.6e, "
                  "reference %.6e, actual (float factors) %.6e, noise part "
                  "%.6e, energy %.9f\n", in, out, r, k, res->rel_frobenius_error,
                  ref_err, actual, noise_rel, res->energy_retained);
    assert_true(fabs(actual - ref_err) <= 2e-6 + 1e-3 * ref_err);
    if (k == signal && r > signal) {
        /* Eckart-Young: no worse than dropping the noise columns, and the
         * noise is mostly outside the signal subspaces */
        assert_true(ref_err <= noise_rel * (1 + 1e-9));
        assert_true(ref_err >= 0.2 * noise_rel);
    }
    free(w2);
    tsafe_svd_result_free(res);
    free(wn);
    free(bn);
    free(sref);
    free(w);
    free(a);
    free(b);
}

static void test_rank16_plus_noise(void **state)
{
    (void)state;
    for (int t = 0; t < 3; t++) {
        size_t in = rnd_range(64, 256), out = rnd_range(64, 256);
        double eta = 1e-3 * (1.0 + 9.0 * rnd_unit());
        check_case(in, out, 32, 16, eta);
    }
    check_case(256, 64, 32, 16, 1e-2);
}

static void test_other_ranks_and_shapes(void **state)
{
    (void)state;
    check_case(96, 80, 32, 32, 1e-3); /* keep everything: exact */
    check_case(96, 80, 32, 5, 1e-3);  /* cut into the signal */
    check_case(40, 20, 32, 12, 1e-2); /* out < r: thin QR is 20 x 32 */
    check_case(20, 40, 32, 20, 1e-2); /* in < r */
    check_case(70, 90, 8, 3, 0.0);    /* r below the signal rank */
}

static void test_energy_selection(void **state)
{
    (void)state;
    const size_t in = 128, out = 96, r = 32;
    float *a, *b;
    make_adapter(r, in, out, 16, 5e-3, &a, &b);
    double *w = form_dw(a, b, r, in, out);
    double *sref = ref_singular_values(w, out, in);
    double total = 0.0, cum[33] = {0};
    for (size_t i = 0; i < out; i++)
        total += sref[i] * sref[i];
    for (size_t i = 0; i < r; i++)
        cum[i + 1] = cum[i] + sref[i] * sref[i];
    for (int trial = 0; trial < 40; trial++) {
        size_t k = trial < 8 ? (size_t)(trial * 4 + 1) : rnd_range(1, 31);
        if (k > 31)
            k = 31;
        /* a target strictly between the energies of k-1 and k triplets */
        double lo = cum[k - 1] / total, hi = cum[k] / total;
        double frac = 0.05 + 0.9 * rnd_unit();
        double target = lo + frac * (hi - lo);
        if (hi - lo < 1e-9)
            continue; /* not separable in double: skip */
        tsafe_svd_options opt = {0};
        opt.select = TSAFE_SVD_ENERGY;
        opt.energy = target;
        tsafe_svd_result *res = NULL;
        assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_OK);
        assert_int_equal(res->rank, k);
        assert_true(res->energy_retained >= target);
        assert_true(fabs(res->energy_retained - hi) < 1e-10);
        tsafe_svd_result_free(res);
    }
    /* the knee: 99.9% of the energy sits in the 16 signal directions */
    tsafe_svd_options opt = {0};
    opt.select = TSAFE_SVD_ENERGY;
    opt.energy = 0.999;
    tsafe_svd_result *res = NULL;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_OK);
    print_message("energy 0.999 -> k = %zu (retained %.8f)\n", res->rank,
                  res->energy_retained);
    assert_true(res->rank <= 16);
    tsafe_svd_result_free(res);
    opt.energy = 1.0;
    opt.max_rank = 7;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_OK);
    assert_int_equal(res->rank, 7);
    tsafe_svd_result_free(res);
    free(sref);
    free(w);
    free(a);
    free(b);
}

static void test_errors(void **state)
{
    (void)state;
    const size_t in = 64, out = 64, r = 32;
    float *a, *b;
    make_adapter(r, in, out, 16, 1e-3, &a, &b);
    tsafe_svd_options opt = {0};
    tsafe_svd_result *res = (tsafe_svd_result *)&res;
    opt.select = TSAFE_SVD_FIXED_RANK;
    opt.rank = 33;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_E_RANGE);
    assert_null(res);
    opt.rank = 0;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_E_ARG);
    opt.rank = 20;
    assert_int_equal(tsafe_svd_reduce(a, b, r, 16, out, &opt, &res), TSAFE_E_RANGE);
    opt.select = TSAFE_SVD_ENERGY;
    opt.energy = 0.0;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_E_ARG);
    opt.energy = 1.5;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_E_ARG);
    opt.energy = NAN;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_E_ARG);
    opt.select = (tsafe_svd_select)9;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_E_ARG);
    opt.select = TSAFE_SVD_FIXED_RANK;
    opt.rank = 4;
    a[17] = NAN;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res),
                     TSAFE_E_VALUE_RANGE);
    a[17] = 0.0f;
    assert_int_equal(tsafe_svd_reduce(NULL, b, r, in, out, &opt, &res), TSAFE_E_NULL);
    assert_int_equal(tsafe_svd_reduce(a, b, 0, in, out, &opt, &res), TSAFE_E_ARG);

    /* dW = 0: energy mode keeps one (zero) direction, error 0 */
    memset(b, 0, out * r * sizeof *b);
    opt.select = TSAFE_SVD_ENERGY;
    opt.energy = 0.9;
    assert_int_equal(tsafe_svd_reduce(a, b, r, in, out, &opt, &res), TSAFE_OK);
    assert_int_equal(res->rank, 1);
    assert_true(res->rel_frobenius_error == 0.0 && res->energy_retained == 1.0);
    tsafe_svd_result_free(res);
    tsafe_svd_result_free(NULL);
    free(a);
    free(b);
}

/* OpenBLAS (linked by the Makefile) threads its kernels with its own,
 * uninstrumented pool, which ThreadSanitizer reports as races inside
 * libopenblas; the sizes here are small, one thread is enough. */
void openblas_set_num_threads(int num_threads);

int main(void)
{
    openblas_set_num_threads(1);
    if (sodium_init() < 0)
        return 1;
    uint64_t seed;
    randombytes_buf(&seed, sizeof seed);
    const char *env = getenv("TSAFE_TEST_SEED");
    if (env)
        seed = strtoull(env, NULL, 0);
    rng_state = seed;
    printf("test_svd seed: 0x%016llx (set TSAFE_TEST_SEED to replay)\n",
           (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank16_plus_noise),
        cmocka_unit_test(test_other_ranks_and_shapes),
        cmocka_unit_test(test_energy_selection),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
