/* Encryption, decryption and evaluation against plaintext arithmetic in
 * double precision; metadata checks; seed reproducibility; strided partial
 * decryption against full decryption.
 *
 * Error bounds used (values in [-1, 1], scale 2^40): fresh encryption
 * 1e-6 absolute; after ct x pt + rescale 1e-5; depth-3 chain 1e-4. These
 * are loose multiples of the noise estimates sigma*sqrt(N)*small/scale. */
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

typedef struct {
    tsafe_context *c;
    tsafe_secret_key *sk;
    tsafe_public_key *pk;
    size_t slots;
} fixture;

static void fx_open(fixture *f, const char *preset)
{
    tsafe_params p;
    memset(f, 0, sizeof *f);
    assert_int_equal(tsafe_params_preset(preset, &p), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&p, &f->c), TSAFE_OK);
    assert_int_equal(tsafe_secret_key_generate(f->c, NULL, &f->sk), TSAFE_OK);
    assert_int_equal(tsafe_public_key_generate(f->c, f->sk, NULL, &f->pk), TSAFE_OK);
    f->slots = tsafe_context_slots(f->c);
}

static void fx_close(fixture *f)
{
    tsafe_public_key_free(f->pk);
    tsafe_secret_key_free(f->sk);
    tsafe_context_free(f->c);
}

static double *rand_vec(size_t n)
{
    double *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = tsafe_test_uniform(-1, 1);
    return v;
}

static tsafe_ciphertext *enc(fixture *f, const double *v, uint32_t level,
                             int public_key)
{
    tsafe_plaintext *pt = NULL;
    tsafe_ciphertext *ct = NULL;
    assert_int_equal(tsafe_plaintext_create(f->c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encode(f->c, v, f->slots, 0x1p40, level, pt), TSAFE_OK);
    assert_int_equal(tsafe_ciphertext_create(f->c, &ct), TSAFE_OK);
    if (public_key)
        assert_int_equal(tsafe_ckks_encrypt_public(f->c, f->pk, pt, NULL, ct), TSAFE_OK);
    else
        assert_int_equal(tsafe_ckks_encrypt_symmetric(f->c, f->sk, pt, NULL, ct), TSAFE_OK);
    tsafe_plaintext_free(pt);
    return ct;
}

static double max_err(fixture *f, const tsafe_ciphertext *ct, const double *want)
{
    tsafe_plaintext *pt = NULL;
    double *got = malloc(f->slots * sizeof *got);
    assert_int_equal(tsafe_plaintext_create(f->c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decrypt(f->c, f->sk, ct, pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decode(f->c, pt, got, f->slots), TSAFE_OK);
    double e = 0;
    for (size_t i = 0; i < f->slots; i++)
        e = fmax(e, fabs(got[i] - want[i]));
    free(got);
    tsafe_plaintext_free(pt);
    return e;
}

static void check_basic(const char *preset)
{
    fixture f;
    fx_open(&f, preset);
    size_t n = f.slots;
    double *x = rand_vec(n), *y = rand_vec(n), *w = rand_vec(n), *want = malloc(n * sizeof *want);
    uint32_t top = tsafe_context_max_level(f.c);
    for (int pk = 0; pk < 2; pk++) {
        tsafe_ciphertext *a = enc(&f, x, top, pk), *b = enc(&f, y, top, pk);
        assert_int_equal(tsafe_ciphertext_is_seeded(a), !pk);
        double e = max_err(&f, a, x);
        print_message("%s %s fresh error %.3g\n", preset, pk ? "pk" : "sk", e);
        assert_true(e < 1e-6);
        tsafe_ciphertext *r = NULL;
        assert_int_equal(tsafe_ciphertext_create(f.c, &r), TSAFE_OK);
        assert_int_equal(tsafe_ckks_add(f.c, a, b, r), TSAFE_OK);
        for (size_t i = 0; i < n; i++) want[i] = x[i] + y[i];
        assert_true(max_err(&f, r, want) < 2e-6);
        assert_int_equal(tsafe_ckks_sub(f.c, a, b, r), TSAFE_OK);
        for (size_t i = 0; i < n; i++) want[i] = x[i] - y[i];
        assert_true(max_err(&f, r, want) < 2e-6);
        assert_int_equal(tsafe_ckks_negate(f.c, a, r), TSAFE_OK);
        for (size_t i = 0; i < n; i++) want[i] = -x[i];
        assert_true(max_err(&f, r, want) < 1e-6);
        /* plaintext add keeps the seed (c1 untouched) */
        tsafe_plaintext *pw = NULL;
        assert_int_equal(tsafe_plaintext_create(f.c, &pw), TSAFE_OK);
        assert_int_equal(tsafe_ckks_encode(f.c, w, n, 0x1p40, top, pw), TSAFE_OK);
        assert_int_equal(tsafe_ckks_add_plain(f.c, a, pw, r), TSAFE_OK);
        for (size_t i = 0; i < n; i++) want[i] = x[i] + w[i];
        assert_true(max_err(&f, r, want) < 1e-6);
        /* ct x pt then rescale: both the Barrett and the Shoup paths */
        for (int prep = 0; prep < 2; prep++) {
            if (prep)
                assert_int_equal(tsafe_plaintext_prepare_mul(f.c, pw), TSAFE_OK);
            assert_int_equal(tsafe_ckks_mul_plain(f.c, a, pw, r), TSAFE_OK);
            assert_true(fabs(tsafe_ciphertext_scale(r) - 0x1p80) < 1.0);
            for (size_t i = 0; i < n; i++) want[i] = x[i] * w[i];
            assert_true(max_err(&f, r, want) < 1e-6);
            if (top > 0) {
                assert_int_equal(tsafe_ckks_rescale(f.c, r, r), TSAFE_OK);
                assert_int_equal(tsafe_ciphertext_level(r), top - 1);
                double q = (double)tsafe_context_prime(f.c, top);
                assert_true(fabs(tsafe_ciphertext_scale(r) - 0x1p80 / q) < 1e-3);
                double er = max_err(&f, r, want);
                print_message("%s ct x pt + rescale error %.3g\n", preset, er);
                assert_true(er < 1e-5);
            }
        }
        /* constant multiply */
        assert_int_equal(tsafe_ckks_mul_const(f.c, a, -3.0, 1.0, r), TSAFE_OK);
        assert_true(tsafe_ciphertext_scale(r) == tsafe_ciphertext_scale(a));
        for (size_t i = 0; i < n; i++) want[i] = -3.0 * x[i];
        assert_true(max_err(&f, r, want) < 4e-6);
        assert_int_equal(tsafe_ckks_mul_const(f.c, a, 0.375, 0x1p20, r), TSAFE_OK);
        for (size_t i = 0; i < n; i++) want[i] = 0.375 * x[i];
        assert_true(max_err(&f, r, want) < 1e-6);
        tsafe_plaintext_free(pw);
        tsafe_ciphertext_free(r);
        tsafe_ciphertext_free(a);
        tsafe_ciphertext_free(b);
    }
    free(x); free(y); free(w); free(want);
    fx_close(&f);
}

static void test_basic_ifma4096(void **s) { (void)s; check_basic("ifma-n4096"); }
static void test_basic_seed16384(void **s) { (void)s; check_basic("seed-n16384"); }

/* x * a * b * c with three rescales at the seeds' N=32768 set. */
static void test_depth3_chain(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f, "seed-n32768");
    size_t n = f.slots;
    uint32_t top = tsafe_context_max_level(f.c);
    assert_int_equal(top, 3);
    double *x = rand_vec(n), *want = malloc(n * sizeof *want);
    memcpy(want, x, n * sizeof *x);
    tsafe_ciphertext *ct = enc(&f, x, top, 0);
    tsafe_plaintext *pt = NULL;
    assert_int_equal(tsafe_plaintext_create(f.c, &pt), TSAFE_OK);
    for (int d = 0; d < 3; d++) {
        double *a = rand_vec(n);
        uint32_t lvl = tsafe_ciphertext_level(ct);
        assert_int_equal(tsafe_ckks_encode(f.c, a, n, 0x1p40, lvl, pt), TSAFE_OK);
        assert_int_equal(tsafe_ckks_mul_plain(f.c, ct, pt, ct), TSAFE_OK);
        assert_int_equal(tsafe_ckks_rescale(f.c, ct, ct), TSAFE_OK);
        assert_int_equal(tsafe_ciphertext_level(ct), lvl - 1);
        for (size_t i = 0; i < n; i++) want[i] *= a[i];
        double e = max_err(&f, ct, want);
        print_message("depth %d error %.3g (scale 2^%.4f)\n", d + 1, e,
                      log2(tsafe_ciphertext_scale(ct)));
        assert_true(e < 1e-4);
        free(a);
    }
    /* no level left */
    tsafe_ciphertext *r = NULL;
    assert_int_equal(tsafe_ciphertext_create(f.c, &r), TSAFE_OK);
    assert_int_equal(tsafe_ckks_rescale(f.c, ct, r), TSAFE_E_LEVEL);
    tsafe_ciphertext_free(r);
    tsafe_plaintext_free(pt);
    tsafe_ciphertext_free(ct);
    free(x); free(want);
    fx_close(&f);
}

static void test_metadata_checks(void **state)
{
    (void)state;
    fixture f, g;
    fx_open(&f, "ifma-n8192");
    fx_open(&g, "ifma-n4096");
    size_t n = f.slots;
    double *x = rand_vec(n);
    tsafe_ciphertext *a = enc(&f, x, 2, 0), *b = enc(&f, x, 1, 0), *r = NULL;
    assert_int_equal(tsafe_ciphertext_create(f.c, &r), TSAFE_OK);
    assert_int_equal(tsafe_ckks_add(f.c, a, b, r), TSAFE_E_LEVEL);
    assert_int_equal(tsafe_ckks_drop_to_level(f.c, a, 1, r), TSAFE_OK);
    assert_int_equal(tsafe_ciphertext_level(r), 1);
    assert_int_equal(tsafe_ciphertext_is_seeded(r), 1);
    assert_true(max_err(&f, r, x) < 1e-6);
    assert_int_equal(tsafe_ckks_add(f.c, r, b, r), TSAFE_OK);
    assert_int_equal(tsafe_ckks_drop_to_level(f.c, b, 2, r), TSAFE_E_LEVEL);
    /* scale mismatch */
    tsafe_plaintext *pt = NULL;
    assert_int_equal(tsafe_plaintext_create(f.c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encode(f.c, x, n, 0x1p30, 2, pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_add_plain(f.c, a, pt, r), TSAFE_E_SCALE);
    assert_int_equal(tsafe_ckks_mul_plain(f.c, a, pt, r), TSAFE_OK);
    assert_int_equal(tsafe_ckks_add(f.c, a, r, r), TSAFE_E_SCALE);
    /* plaintext below the ciphertext's level */
    assert_int_equal(tsafe_ckks_encode(f.c, x, n, 0x1p40, 0, pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_mul_plain(f.c, a, pt, r), TSAFE_E_LEVEL);
    /* objects of another context */
    tsafe_ciphertext *other = enc(&g, x, 0, 0);
    assert_int_equal(tsafe_ckks_add(f.c, a, other, r), TSAFE_E_PARAMS_MISMATCH);
    assert_int_equal(tsafe_ckks_decrypt(f.c, g.sk, a, pt), TSAFE_E_PARAMS_MISMATCH);
    assert_int_equal(tsafe_ckks_encrypt_symmetric(f.c, g.sk, pt, NULL, r),
                     TSAFE_E_PARAMS_MISMATCH);
    /* NULLs and empty objects */
    tsafe_ciphertext *empty = NULL;
    assert_int_equal(tsafe_ciphertext_create(f.c, &empty), TSAFE_OK);
    assert_int_equal(tsafe_ckks_add(f.c, a, empty, r), TSAFE_E_STATE);
    assert_int_equal(tsafe_ckks_add(f.c, a, NULL, r), TSAFE_E_NULL);
    assert_int_equal(tsafe_ckks_add(NULL, a, b, r), TSAFE_E_NULL);
    assert_int_equal(tsafe_ckks_mul_const(f.c, a, NAN, 1.0, r), TSAFE_E_ARG);
    assert_int_equal(tsafe_ckks_mul_const(f.c, a, 1e30, 1.0, r), TSAFE_E_VALUE_RANGE);
    tsafe_ciphertext_free(empty);
    tsafe_ciphertext_free(other);
    tsafe_plaintext_free(pt);
    tsafe_ciphertext_free(a);
    tsafe_ciphertext_free(b);
    tsafe_ciphertext_free(r);
    free(x);
    fx_close(&g);
    fx_close(&f);
}

static size_t ser(const tsafe_context *c, const tsafe_ciphertext *ct, uint8_t **out)
{
    size_t len = 0, w = 0;
    assert_int_equal(tsafe_ciphertext_serialized_size(c, ct, &len), TSAFE_OK);
    *out = malloc(len);
    assert_int_equal(tsafe_ciphertext_serialize(c, ct, *out, len, &w), TSAFE_OK);
    assert_int_equal(w, len);
    return len;
}

static void test_seed_reproducibility(void **state)
{
    (void)state;
    tsafe_params p;
    tsafe_context *c = NULL;
    assert_int_equal(tsafe_params_preset("ifma-n4096", &p), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_OK);
    uint8_t s1[32], s2[32];
    tsafe_test_seed32(s1);
    memcpy(s2, s1, 32);
    s2[0] ^= 1;
    tsafe_secret_key *k1 = NULL, *k1b = NULL, *k2 = NULL;
    assert_int_equal(tsafe_secret_key_generate(c, s1, &k1), TSAFE_OK);
    assert_int_equal(tsafe_secret_key_generate(c, s1, &k1b), TSAFE_OK);
    assert_int_equal(tsafe_secret_key_generate(c, s2, &k2), TSAFE_OK);
    assert_memory_equal(k1->s, k1b->s, c->n);
    assert_memory_not_equal(k1->s, k2->s, c->n);
    tsafe_public_key *p1 = NULL, *p1b = NULL, *p2 = NULL;
    assert_int_equal(tsafe_public_key_generate(c, k1, s1, &p1), TSAFE_OK);
    assert_int_equal(tsafe_public_key_generate(c, k1, s1, &p1b), TSAFE_OK);
    assert_int_equal(tsafe_public_key_generate(c, k1, s2, &p2), TSAFE_OK);
    size_t words = (size_t)(tsafe_context_max_level(c) + 1) * c->n * 8;
    assert_memory_equal(p1->p0, p1b->p0, words);
    assert_memory_not_equal(p1->p0, p2->p0, words);
    double *x = rand_vec(c->slots);
    tsafe_plaintext *pt = NULL;
    assert_int_equal(tsafe_plaintext_create(c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encode(c, x, c->slots, 0x1p40, 1, pt), TSAFE_OK);
    tsafe_ciphertext *ct[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(tsafe_ciphertext_create(c, &ct[i]), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_symmetric(c, k1, pt, s1, ct[0]), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_symmetric(c, k1, pt, s1, ct[1]), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_symmetric(c, k1, pt, s2, ct[2]), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_symmetric(c, k1, pt, NULL, ct[3]), TSAFE_OK);
    uint8_t *b[4];
    size_t len[4];
    for (int i = 0; i < 4; i++)
        len[i] = ser(c, ct[i], &b[i]);
    assert_int_equal(len[0], len[1]);
    assert_memory_equal(b[0], b[1], len[0]);
    assert_memory_not_equal(b[0], b[2], len[0]);
    assert_memory_not_equal(b[0], b[3], len[0]);
    /* the stored `a` seed is not the caller's seed (error stays secret) */
    assert_memory_not_equal(b[0] + len[0] - 32, s1, 32);
    /* the one-pass encode+encrypt is bit-identical to the two-step path */
    double *xi = rand_vec(c->slots);
    assert_int_equal(tsafe_ckks_encode_complex(c, x, xi, c->slots, 0x1p40, 1, pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_symmetric(c, k1, pt, s1, ct[0]), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_values_symmetric(c, k1, x, xi, c->slots, 0x1p40, 1, s1,
                                                         ct[1]), TSAFE_OK);
    assert_memory_equal(ct[0]->c0, ct[1]->c0, words);
    assert_memory_equal(ct[0]->c1, ct[1]->c1, words);
    assert_int_equal(tsafe_ciphertext_is_seeded(ct[1]), 1);
    free(xi);
    /* public-key encryption reproduces too */
    assert_int_equal(tsafe_ckks_encrypt_public(c, p1, pt, s1, ct[0]), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_public(c, p1, pt, s1, ct[1]), TSAFE_OK);
    assert_memory_equal(ct[0]->c0, ct[1]->c0, words);
    assert_memory_equal(ct[0]->c1, ct[1]->c1, words);
    for (int i = 0; i < 4; i++) {
        free(b[i]);
        tsafe_ciphertext_free(ct[i]);
    }
    tsafe_plaintext_free(pt);
    free(x);
    tsafe_public_key_free(p1); tsafe_public_key_free(p1b); tsafe_public_key_free(p2);
    tsafe_secret_key_free(k1); tsafe_secret_key_free(k1b); tsafe_secret_key_free(k2);
    tsafe_context_free(c);
}

/* Strided partial decryption equals the full decryption's coefficients. */
static void test_decrypt_strided(void **state)
{
    (void)state;
    const char *presets[] = {"ifma-n4096", "seed-n16384"};
    for (int pi = 0; pi < 2; pi++) {
        fixture f;
        fx_open(&f, presets[pi]);
        const tsafe_context *c = f.c;
        double *x = rand_vec(f.slots);
        uint32_t top = tsafe_context_max_level(c);
        for (uint32_t level = 0; level <= top; level++) {
            tsafe_ciphertext *ct = enc(&f, x, level, 0);
            tsafe_plaintext *pt = NULL;
            assert_int_equal(tsafe_plaintext_create(c, &pt), TSAFE_OK);
            assert_int_equal(tsafe_ckks_decrypt(c, f.sk, ct, pt), TSAFE_OK);
            uint64_t *coef = malloc((size_t)(level + 1) * c->n * 8);
            memcpy(coef, pt->data, (size_t)(level + 1) * c->n * 8);
            tsafe_poly_intt(c, coef, level);
            size_t strides[] = {c->n / 2, c->n / 16, c->n / 64};
            for (int si = 0; si < 3; si++) {
                size_t S = strides[si], K = c->n / S;
                double *got = malloc(K * sizeof *got);
                assert_int_equal(tsafe_ckks_decrypt_coeffs_strided(c, f.sk, ct, S, got, K),
                                 TSAFE_OK);
                for (size_t k = 0; k < K; k++) {
                    uint64_t res[TSAFE_MAX_PRIMES];
                    for (uint32_t i = 0; i <= level; i++)
                        res[i] = coef[(size_t)i * c->n + k * S];
                    double want = tsafe_crt_to_double(c, res, level) / tsafe_ciphertext_scale(ct);
                    assert_true(fabs(got[k] - want) <= 1e-12 * fmax(1.0, fabs(want)));
                }
                assert_int_equal(tsafe_ckks_decrypt_coeffs_strided(c, f.sk, ct, S, got, K + 1),
                                 TSAFE_E_RANGE);
                free(got);
            }
            double dummy[4];
            assert_int_equal(tsafe_ckks_decrypt_coeffs_strided(c, f.sk, ct, 3, dummy, 4),
                             TSAFE_E_ARG);
            free(coef);
            tsafe_plaintext_free(pt);
            tsafe_ciphertext_free(ct);
        }
        free(x);
        fx_close(&f);
    }
}

int main(void)
{
    tsafe_test_rng_init("ckks_ops");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_ifma4096),
        cmocka_unit_test(test_basic_seed16384),
        cmocka_unit_test(test_depth3_chain),
        cmocka_unit_test(test_metadata_checks),
        cmocka_unit_test(test_seed_reproducibility),
        cmocka_unit_test(test_decrypt_strided),
    };
    return cmocka_run_group_tests_name("ckks_ops", tests, NULL, NULL);
}
