/* CKKS encoding: against the canonical embedding evaluated directly
 * (O(N^2), long double), and encode->decode precision on every preset. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/ckks.h"
#include "support/tsafe_test_rng.h"
#include "../libtensafe-he-core/src/ckks/ckks_internal.h"

static tsafe_context *make_ctx(uint32_t log_n, uint32_t bits, double scale)
{
    tsafe_params p = {.log_n = log_n, .n_primes = 1, .prime_bits = {bits},
                      .scale = scale, .flags = TSAFE_PARAMS_INSECURE_FOR_TESTS};
    tsafe_context *c = NULL;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_OK);
    return c;
}

/* Plaintext coefficients (centred, level 0) through the internal INTT. */
static void coeffs_of(const tsafe_context *c, const tsafe_plaintext *pt,
                      long double *out)
{
    uint64_t *tmp = malloc(c->n * sizeof *tmp);
    memcpy(tmp, pt->data, c->n * sizeof *tmp);
    tsafe_ntt_inverse(&c->ntt[0], tmp);
    uint64_t q = c->mod[0].q;
    for (size_t k = 0; k < c->n; k++)
        out[k] = tmp[k] > q / 2 ? -(long double)(q - tmp[k]) : (long double)tmp[k];
    free(tmp);
}

static void check_embedding(uint32_t log_n)
{
    double scale = 0x1p40;
    tsafe_context *c = make_ctx(log_n, 61, scale);
    size_t n = c->n, slots = c->slots;
    double *re = malloc(slots * sizeof *re), *im = malloc(slots * sizeof *im);
    for (size_t j = 0; j < slots; j++) {
        re[j] = tsafe_test_uniform(-1, 1);
        im[j] = tsafe_test_uniform(-1, 1);
    }
    tsafe_plaintext *pt = NULL;
    assert_int_equal(tsafe_plaintext_create(c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encode_complex(c, re, im, slots, scale, 0, pt), TSAFE_OK);
    long double *m = malloc(n * sizeof *m);
    coeffs_of(c, pt, m);
    const long double pi = 3.14159265358979323846264338327950288L;
    size_t two_n = 2 * n;
    uint64_t g = 1; /* 5^j mod 2N */
    long double worst = 0;
    for (size_t j = 0; j < slots; j++) {
        long double sr = 0, si = 0;
        for (size_t k = 0; k < n; k++) {
            uint64_t e = (g * k) % two_n; /* zeta^(5^j k) */
            long double a = pi * (long double)e / (long double)n;
            sr += m[k] * cosl(a);
            si += m[k] * sinl(a);
        }
        long double er = fabsl(sr / scale - re[j]), ei = fabsl(si / scale - im[j]);
        if (er > worst) worst = er;
        if (ei > worst) worst = ei;
        g = (g * 5) % two_n;
    }
    /* each coefficient is rounded by at most 1/2: |error| <= N/2 / scale */
    print_message("N=%zu: max |direct embedding - value| = %Lg\n", n, worst);
    assert_true(worst < (long double)n / 2 / scale);
    free(m);
    free(re);
    free(im);
    tsafe_plaintext_free(pt);
    tsafe_context_free(c);
}

static void test_embedding_1024(void **s) { (void)s; check_embedding(10); }
static void test_embedding_2048(void **s) { (void)s; check_embedding(11); }

static void test_roundtrip_presets(void **state)
{
    (void)state;
    for (size_t i = 0; i < tsafe_params_preset_count(); i++) {
        tsafe_params p;
        tsafe_context *c = NULL;
        assert_int_equal(tsafe_params_preset(tsafe_params_preset_name(i), &p), TSAFE_OK);
        assert_int_equal(tsafe_context_create(&p, &c), TSAFE_OK);
        size_t slots = tsafe_context_slots(c);
        double *v = malloc(slots * sizeof *v), *w = malloc(slots * sizeof *w);
        double *vi = malloc(slots * sizeof *vi), *wi = malloc(slots * sizeof *wi);
        for (size_t j = 0; j < slots; j++) {
            v[j] = tsafe_test_uniform(-1, 1);
            vi[j] = tsafe_test_uniform(-1, 1);
        }
        tsafe_plaintext *pt = NULL;
        assert_int_equal(tsafe_plaintext_create(c, &pt), TSAFE_OK);
        for (uint32_t level = 0; level <= tsafe_context_max_level(c); level++) {
            assert_int_equal(tsafe_ckks_encode_complex(c, v, vi, slots, 0x1p40, level, pt),
                             TSAFE_OK);
            assert_int_equal(tsafe_plaintext_level(pt), level);
            assert_int_equal(tsafe_ckks_decode_complex(c, pt, w, wi, slots), TSAFE_OK);
            double worst = 0;
            for (size_t j = 0; j < slots; j++) {
                worst = fmax(worst, fabs(w[j] - v[j]));
                worst = fmax(worst, fabs(wi[j] - vi[j]));
            }
            assert_true(worst < 0x1p-30);
        }
        /* real-only encode leaves imaginary parts at zero */
        assert_int_equal(tsafe_ckks_encode(c, v, slots / 3, 0x1p40, 0, pt), TSAFE_OK);
        assert_int_equal(tsafe_ckks_decode_complex(c, pt, w, wi, slots), TSAFE_OK);
        for (size_t j = 0; j < slots; j++) {
            double want = j < slots / 3 ? v[j] : 0.0;
            assert_true(fabs(w[j] - want) < 0x1p-30);
            assert_true(fabs(wi[j]) < 0x1p-30);
        }
        free(v); free(w); free(vi); free(wi);
        tsafe_plaintext_free(pt);
        tsafe_context_free(c);
    }
}

static void test_encode_errors(void **state)
{
    (void)state;
    tsafe_params p;
    tsafe_context *c = NULL;
    assert_int_equal(tsafe_params_preset("ifma-n4096", &p), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_OK);
    tsafe_plaintext *pt = NULL;
    assert_int_equal(tsafe_plaintext_create(c, &pt), TSAFE_OK);
    double v[4] = {1, 2, 3, 4}, out[4];
    /* not encoded yet */
    assert_int_equal(tsafe_ckks_decode(c, pt, out, 4), TSAFE_E_STATE);
    assert_int_equal(tsafe_ckks_encode(c, v, tsafe_context_slots(c) + 1, 0x1p40, 0, pt),
                     TSAFE_E_RANGE);
    assert_int_equal(tsafe_ckks_encode(c, v, 4, 0x1p40, 2, pt), TSAFE_E_LEVEL);
    assert_int_equal(tsafe_ckks_encode(c, v, 4, 0.5, 0, pt), TSAFE_E_SCALE);
    double huge[1] = {1e30};
    assert_int_equal(tsafe_ckks_encode(c, huge, 1, 0x1p40, 0, pt), TSAFE_E_VALUE_RANGE);
    double bad[1] = {NAN};
    assert_int_equal(tsafe_ckks_encode(c, bad, 1, 0x1p40, 0, pt), TSAFE_E_VALUE_RANGE);
    assert_int_equal(tsafe_ckks_encode(c, NULL, 4, 0x1p40, 0, pt), TSAFE_E_NULL);
    /* a large but representable value takes the wide (GMP) path */
    /* all slots equal: the constant coefficient is 2^70 > 2^63 */
    size_t slots = tsafe_context_slots(c);
    double *big = malloc(slots * sizeof *big);
    for (size_t j = 0; j < slots; j++)
        big[j] = 0x1p30;
    assert_int_equal(tsafe_ckks_encode(c, big, slots, 0x1p40, 1, pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decode(c, pt, out, 4), TSAFE_OK);
    for (int j = 0; j < 4; j++)
        assert_true(fabs(out[j] - 0x1p30) / 0x1p30 < 1e-9);
    free(big);
    tsafe_plaintext_free(pt);
    tsafe_context_free(c);
}

/* The per-thread FFT scratch of this thread is all zeros (or absent). */
static void assert_scratch_wiped(const char *after)
{
    size_t bytes = 0;
    const unsigned char *v = tsafe_encode_scratch_peek_(&bytes);
    size_t nonzero = 0;
    for (size_t i = 0; v && i < bytes; i++)
        nonzero += v[i] != 0;
    if (nonzero)
        print_message("after %s: %zu of %zu scratch bytes not wiped\n", after, nonzero, bytes);
    assert_int_equal(nonzero, 0);
}

/* White-box (issue 12, point 2): encode leaves none of its input slot
 * values in the per-thread FFT scratch -- on success and on both error
 * exits that come after the scratch was written. What this proves: the
 * buffer the encoder keeps between calls holds no copy of x. It says
 * nothing about copies the compiler may keep in registers or on the stack,
 * nor about freed heap blocks. */
static void test_encode_scratch_wiped(void **state)
{
    (void)state;
    tsafe_params p;
    tsafe_context *c = NULL;
    assert_int_equal(tsafe_params_preset("ifma-n4096", &p), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_OK);
    size_t slots = tsafe_context_slots(c);
    double *x = malloc(slots * sizeof *x), out[4];
    assert_non_null(x);
    for (size_t j = 0; j < slots; j++)
        x[j] = tsafe_test_uniform(-1, 1);
    tsafe_plaintext *pt = NULL;
    assert_int_equal(tsafe_plaintext_create(c, &pt), TSAFE_OK);

    assert_int_equal(tsafe_ckks_encode(c, x, slots, 0x1p40, 0, pt), TSAFE_OK);
    size_t bytes = 0;
    assert_non_null(tsafe_encode_scratch_peek_(&bytes)); /* the hook sees a buffer */
    assert_true(bytes >= tsafe_context_n(c) * 16);
    assert_scratch_wiped("encode");

    assert_int_equal(tsafe_ckks_decode(c, pt, out, 4), TSAFE_OK);
    assert_scratch_wiped("decode");

    x[slots - 1] = NAN; /* slots 0..slots-2 are already in the scratch */
    assert_int_equal(tsafe_ckks_encode(c, x, slots, 0x1p40, 0, pt), TSAFE_E_VALUE_RANGE);
    assert_scratch_wiped("encode refusing a NaN");

    x[slots - 1] = 1e30; /* refused after the FFT */
    assert_int_equal(tsafe_ckks_encode(c, x, slots, 0x1p40, 0, pt), TSAFE_E_VALUE_RANGE);
    assert_scratch_wiped("encode refusing a value out of range");

    /* the symmetric encryption path encodes through the same scratch */
    tsafe_secret_key *sk = NULL;
    tsafe_ciphertext *ct = NULL;
    assert_int_equal(tsafe_secret_key_generate(c, NULL, &sk), TSAFE_OK);
    assert_int_equal(tsafe_ciphertext_create(c, &ct), TSAFE_OK);
    x[slots - 1] = 0.5;
    assert_int_equal(tsafe_ckks_encrypt_values_symmetric(c, sk, x, NULL, slots, 0x1p40, 0,
                                                         NULL, ct),
                     TSAFE_OK);
    assert_scratch_wiped("encrypt_values_symmetric");
    tsafe_ciphertext_free(ct);
    tsafe_secret_key_free(sk);
    tsafe_plaintext_free(pt);
    free(x);
    tsafe_context_free(c);
}

int main(void)
{
    tsafe_test_rng_init("encode");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_1024),
        cmocka_unit_test(test_embedding_2048),
        cmocka_unit_test(test_roundtrip_presets),
        cmocka_unit_test(test_encode_errors),
        cmocka_unit_test(test_encode_scratch_wiped),
    };
    return cmocka_run_group_tests_name("encode", tests, NULL, NULL);
}
