/* Parameters and contexts: presets, the 128-bit bound, explicit primes,
 * params encoding and fingerprints. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include <gmp.h>

#include "tensafe/ckks.h"

static void test_presets_build(void **state)
{
    (void)state;
    assert_true(tsafe_params_preset_count() >= 5);
    for (size_t i = 0; i < tsafe_params_preset_count(); i++) {
        tsafe_params p;
        tsafe_context *c = NULL;
        const char *name = tsafe_params_preset_name(i);
        assert_non_null(name);
        assert_int_equal(tsafe_params_preset(name, &p), TSAFE_OK);
        assert_int_equal(tsafe_context_create(&p, &c), TSAFE_OK);
        size_t n = tsafe_context_n(c);
        assert_int_equal(n, (size_t)1 << p.log_n);
        assert_int_equal(tsafe_context_slots(c), n / 2);
        assert_int_equal(tsafe_context_max_level(c), p.n_primes - p.n_special - 1);
        /* every prime: right size, prime by GMP, 1 mod 2N, distinct */
        double lq = 0;
        for (uint32_t j = 0; j < p.n_primes; j++) {
            uint64_t q = tsafe_context_prime(c, j);
            mpz_t z;
            mpz_init_set_ui(z, q);
            assert_true(mpz_probab_prime_p(z, 40) > 0);
            mpz_clear(z);
            assert_int_equal(q % (2 * n), 1);
            assert_true(q < (1ull << p.prime_bits[j]));
            assert_true(q > (1ull << (p.prime_bits[j] - 1)));
            for (uint32_t k = 0; k < j; k++)
                assert_true(tsafe_context_prime(c, k) != q);
            lq += log2((double)q);
        }
        assert_true(fabs(lq - tsafe_context_log2_q(c)) < 1e-9);
        assert_true(lq <= tsafe_params_max_log_q(p.log_n));
        tsafe_context_free(c);
    }
    tsafe_params p;
    assert_int_equal(tsafe_params_preset("no-such-preset", &p), TSAFE_E_NOT_FOUND);
    assert_null(tsafe_params_preset_name(tsafe_params_preset_count()));
}

/* Split `total` bits over as few primes (20..61 bits each) as possible;
 * 0 when TSAFE_MAX_PRIMES primes cannot hold it. */
static uint32_t split_bits(uint32_t total, uint32_t bits[TSAFE_MAX_PRIMES])
{
    uint32_t k = (total + 60) / 61;
    if (k == 0 || k > TSAFE_MAX_PRIMES || total < 20 * k)
        return 0;
    for (uint32_t i = 0; i < k; i++)
        bits[i] = total / k + (i < total % k);
    return k;
}

/* A generated prime of b bits lies in (2^(b-1), 2^b): bits summing to B give
 * log2 Q < B, bits summing to B + k (k primes) give log2 Q > B. */
static tsafe_status create_with_bits(uint32_t log_n, uint32_t total, double *log2_q)
{
    tsafe_params p = {.log_n = log_n, .scale = 0x1p20};
    p.n_primes = split_bits(total, p.prime_bits);
    if (p.n_primes == 0)
        return TSAFE_E_PARAMS;
    tsafe_context *c = NULL;
    tsafe_status st = tsafe_context_create(&p, &c);
    *log2_q = st == TSAFE_OK ? tsafe_context_log2_q(c) : 0;
    tsafe_context_free(c);
    return st;
}

static void test_security_bound(void **state)
{
    (void)state;
    /* Each row and its source are in docs/PARAMETERS.md: the 2018
     * HomomorphicEncryption.org standard up to N = 32768 (ternary secret,
     * 128-bit classical), OpenFHE v1.2.0's table for N = 65536. */
    static const uint32_t table[][2] = {{10, 27},  {11, 54},  {12, 109}, {13, 218},
                                        {14, 438}, {15, 881}, {16, 1747}};
    assert_int_equal(tsafe_params_max_log_q(TSAFE_MIN_LOG_N - 1), 0);
    assert_int_equal(tsafe_params_max_log_q(TSAFE_MAX_LOG_N + 1), 0);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        uint32_t log_n = table[i][0], bound = table[i][1];
        assert_int_equal(tsafe_params_max_log_q(log_n), bound);
        uint32_t bits[TSAFE_MAX_PRIMES];
        uint32_t margin = (bound + 61) / 61; /* >= primes needed for bound + margin */
        uint32_t k_over = split_bits(bound + margin, bits);
        if (k_over == 0) {
            /* N = 65536: 16 primes of at most 61 bits (976) cannot reach
             * the bound, so no parameter set can exceed it today. */
            assert_true(bound > TSAFE_MAX_PRIMES * 61);
            continue;
        }
        assert_true(k_over <= margin);
        double lq = 0;
        /* at most the bound, within a bit per prime of it: accepted */
        assert_int_equal(create_with_bits(log_n, bound, &lq), TSAFE_OK);
        assert_true(lq <= bound && lq > bound - (double)split_bits(bound, bits));
        /* more than the bound: refused */
        assert_int_equal(create_with_bits(log_n, bound + margin, &lq), TSAFE_E_INSECURE);
    }
    /* N=4096 with three 50-bit primes = ~150 bits > 109: refused */
    tsafe_params p = {.log_n = 12, .n_primes = 3, .prime_bits = {50, 50, 50},
                      .scale = 0x1p40};
    tsafe_context *c = NULL;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_INSECURE);
    assert_null(c);
    /* ... unless explicitly marked insecure for tests */
    p.flags = TSAFE_PARAMS_INSECURE_FOR_TESTS;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_OK);
    tsafe_context_free(c);
    /* N=1024 cannot hold even one 30-bit prime securely */
    tsafe_params small = {.log_n = 10, .n_primes = 1, .prime_bits = {30}, .scale = 0x1p20};
    assert_int_equal(tsafe_context_create(&small, &c), TSAFE_E_INSECURE);
}

static void test_bad_params(void **state)
{
    (void)state;
    tsafe_context *c = NULL;
    tsafe_params base = {.log_n = 12, .n_primes = 2, .prime_bits = {50, 50},
                         .scale = 0x1p40};
    tsafe_params p = base;
    p.log_n = 9;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    p = base;
    p.log_n = 17;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    p = base;
    p.n_primes = 0;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    p = base;
    p.prime_bits[1] = 62;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    p = base;
    p.scale = NAN;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    p = base;
    p.n_special = 2;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    /* explicit primes: composite, not 1 mod 2N, duplicate */
    tsafe_context *ok = NULL;
    assert_int_equal(tsafe_context_create(&base, &ok), TSAFE_OK);
    uint64_t good = tsafe_context_prime(ok, 0), two_n = 2 * tsafe_context_n(ok);
    tsafe_context_free(ok);
    uint64_t composite = 0;
    mpz_t z;
    mpz_init(z);
    for (uint64_t m = (1ull << 45) / two_n;; m++) {
        mpz_set_ui(z, m * two_n + 1);
        if (mpz_probab_prime_p(z, 40) == 0) {
            composite = m * two_n + 1;
            break;
        }
    }
    mpz_clear(z);
    p = base;
    p.primes[0] = good;
    p.primes[1] = composite;
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    p.primes[1] = good; /* duplicate */
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    p.primes[1] = (1ull << 61) - 1; /* prime, but not 1 mod 2N */
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    p.primes[1] = 0; /* mixing explicit and generated */
    assert_int_equal(tsafe_context_create(&p, &c), TSAFE_E_PARAMS);
    assert_null(c);
    assert_int_equal(tsafe_context_create(NULL, &c), TSAFE_E_NULL);
    assert_int_equal(tsafe_context_create(&base, NULL), TSAFE_E_NULL);
    tsafe_context_free(NULL);
}

static void test_explicit_primes_same_context(void **state)
{
    (void)state;
    tsafe_params p, q;
    tsafe_context *a = NULL, *b = NULL;
    assert_int_equal(tsafe_params_preset("ifma-n8192", &p), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&p, &a), TSAFE_OK);
    /* the validated params carry explicit primes: rebuilding gives the
     * same fingerprint */
    q = *tsafe_context_params(a);
    assert_int_equal(tsafe_context_create(&q, &b), TSAFE_OK);
    uint8_t fa[32], fb[32];
    tsafe_context_fingerprint(a, fa);
    tsafe_context_fingerprint(b, fb);
    assert_memory_equal(fa, fb, 32);
    tsafe_context_free(b);
    /* a different scale changes the fingerprint */
    q.scale = 0x1p30;
    assert_int_equal(tsafe_context_create(&q, &b), TSAFE_OK);
    tsafe_context_fingerprint(b, fb);
    assert_memory_not_equal(fa, fb, 32);
    tsafe_context_free(b);
    tsafe_context_free(a);
}

static void test_params_serialization(void **state)
{
    (void)state;
    tsafe_params p, r;
    assert_int_equal(tsafe_params_preset("seed-n32768", &p), TSAFE_OK);
    uint8_t buf[512];
    size_t len = 0;
    assert_int_equal(tsafe_params_serialize(&p, buf, sizeof buf, &len), TSAFE_OK);
    assert_int_equal(tsafe_params_deserialize(buf, len, &r), TSAFE_OK);
    assert_int_equal(r.log_n, p.log_n);
    assert_int_equal(r.n_primes, p.n_primes);
    assert_int_equal(r.n_special, p.n_special);
    assert_true(r.scale == p.scale);
    assert_memory_equal(r.prime_bits, p.prime_bits, sizeof p.prime_bits);
    size_t small = 0;
    assert_int_equal(tsafe_params_serialize(&p, buf, 10, &small), TSAFE_E_BUFFER_SMALL);
    assert_int_equal(small, len);
    for (size_t t = 0; t < len; t++)
        assert_int_not_equal(tsafe_params_deserialize(buf, t, &r), TSAFE_OK);
    uint8_t longer[520];
    memcpy(longer, buf, len);
    longer[len] = 0;
    assert_int_equal(tsafe_params_deserialize(longer, len + 1, &r), TSAFE_E_FORMAT);
    /* single-byte corruptions: never a crash; header fields refused */
    for (size_t i = 0; i < len; i++) {
        uint8_t c[512];
        memcpy(c, buf, len);
        c[i] ^= 0xA5;
        tsafe_status st = tsafe_params_deserialize(c, len, &r);
        if (i < 8 || (i >= 8 && i < 12 + 1))
            assert_int_not_equal(st, TSAFE_OK);
        if (st == TSAFE_OK) { /* a valid-looking set must still validate */
            tsafe_context *ctx = NULL;
            if (tsafe_context_create(&r, &ctx) == TSAFE_OK)
                tsafe_context_free(ctx);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_build),
        cmocka_unit_test(test_security_bound),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_explicit_primes_same_context),
        cmocka_unit_test(test_params_serialization),
    };
    return cmocka_run_group_tests_name("ckks_params", tests, NULL, NULL);
}
