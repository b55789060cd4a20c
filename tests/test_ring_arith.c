/* Ring layer arithmetic against GMP: Barrett, Shoup, add/sub/neg, pow,
 * inverse, prime generation and primitive roots. Random inputs, fresh seed
 * per run (TSAFE_TEST_SEED=<n> replays one). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <gmp.h>
#include <stdio.h>
#include <stdlib.h>

#include "../libtensafe-he-core/src/ring/ring.h"
#include "../libtensafe-he-core/src/ring/avx2.h"
#include "support/tsafe_test_rng.h"

/* ------------------------------------------------------------ helpers */

static uint64_t rnd(void)
{
    return tsafe_test_u64();
}

static void mpz_set_u64(mpz_t z, uint64_t v)
{
    mpz_import(z, 1, -1, sizeof v, 0, 0, &v);
}

static void mpz_set_u128(mpz_t z, tsafe_u128 v)
{
    uint64_t w[2] = {(uint64_t)v, (uint64_t)(v >> 64)};
    mpz_import(z, 2, -1, sizeof w[0], 0, 0, w);
}

static uint64_t mpz_get_u64(const mpz_t z)
{
    uint64_t v = 0;
    size_t cnt = 0;
    assert_true(mpz_sizeinbase(z, 2) <= 64);
    mpz_export(&v, &cnt, -1, sizeof v, 0, 0, z);
    return v;
}

/* A random prime of exactly `bits` bits (GMP next prime). */
static uint64_t random_prime(unsigned bits)
{
    mpz_t z;
    mpz_init(z);
    for (;;) {
        uint64_t c = (rnd() >> (64 - bits)) | ((uint64_t)1 << (bits - 1));
        mpz_set_u64(z, c);
        mpz_nextprime(z, z);
        if (mpz_sizeinbase(z, 2) == bits)
            break;
    }
    uint64_t q = mpz_get_u64(z);
    mpz_clear(z);
    return q;
}

/* ------------------------------------------------------------- modulus */

static void check_one_prime(uint64_t q)
{
    tsafe_modulus m;
    tsafe_modulus_init(&m, q);
    mpz_t zq, z, t, u;
    mpz_inits(zq, z, t, u, NULL);
    mpz_set_u64(zq, q);

    /* Barrett constant floor(2^128 / q). */
    mpz_set_ui(z, 1);
    mpz_mul_2exp(z, z, 128);
    mpz_fdiv_q(z, z, zq);
    mpz_set_u128(t, ((tsafe_u128)m.barrett_hi << 64) | m.barrett_lo);
    assert_int_equal(mpz_cmp(z, t), 0);
    assert_int_equal(m.q, q);
    assert_int_equal(m.bits, mpz_sizeinbase(zq, 2));

    const uint64_t edge[] = {0, 1, 2, q - 1, q - 2, q / 2, q / 2 + 1};
    const size_t ne = sizeof edge / sizeof edge[0];
    for (size_t it = 0; it < 400; it++) {
        uint64_t a = it < ne * ne ? edge[it % ne] : tsafe_test_below(q);
        uint64_t b = it < ne * ne ? edge[it / ne] : tsafe_test_below(q);
        mpz_t za, zb;
        mpz_inits(za, zb, NULL);
        mpz_set_u64(za, a);
        mpz_set_u64(zb, b);

        /* mul (Barrett) */
        mpz_mul(z, za, zb);
        mpz_mod(z, z, zq);
        assert_int_equal(tsafe_mul_mod(a, b, &m), mpz_get_u64(z));
        /* add, sub, neg */
        mpz_add(z, za, zb);
        mpz_mod(z, z, zq);
        assert_int_equal(tsafe_add_mod(a, b, q), mpz_get_u64(z));
        mpz_sub(z, za, zb);
        mpz_mod(z, z, zq);
        assert_int_equal(tsafe_sub_mod(a, b, q), mpz_get_u64(z));
        mpz_neg(z, za);
        mpz_mod(z, z, zq);
        assert_int_equal(tsafe_neg_mod(a, q), mpz_get_u64(z));

        /* Shoup: quotient and product for any 64-bit x. */
        uint64_t wp = tsafe_shoup_precompute(b, q);
        mpz_mul_2exp(z, zb, 64);
        mpz_fdiv_q(z, z, zq);
        assert_int_equal(wp, mpz_get_u64(z));
        uint64_t x = (it & 1) ? rnd() : a;
        if (it == 2)
            x = UINT64_MAX;
        mpz_set_u64(t, x);
        mpz_mul(z, t, zb);
        mpz_mod(z, z, zq);
        uint64_t want = mpz_get_u64(z);
        uint64_t lazy = tsafe_mul_shoup_lazy(x, b, wp, q);
        assert_true(lazy < 2 * q);
        assert_int_equal(lazy % q, want);
        assert_int_equal(tsafe_mul_shoup(x, b, wp, q), want);

        /* Barrett on arbitrary x < q * 2^64, including the top. */
        tsafe_u128 xx = ((tsafe_u128)tsafe_test_below(q) << 64) | rnd();
        if (it == 3)
            xx = ((tsafe_u128)q << 64) - 1;
        if (it == 4)
            xx = 0;
        mpz_set_u128(t, xx);
        mpz_mod(z, t, zq);
        assert_int_equal(tsafe_reduce_128(xx, &m), mpz_get_u64(z));

        /* pow */
        uint64_t e = (it % 3 == 0) ? rnd() : tsafe_test_below(1000);
        if (it == 5)
            e = 0;
        mpz_set_u64(t, e);
        mpz_powm(z, za, t, zq);
        assert_int_equal(tsafe_pow_mod(a, e, &m), mpz_get_u64(z));

        /* inverse */
        if (a != 0) {
            assert_true(mpz_invert(z, za, zq) != 0);
            uint64_t inv = tsafe_inv_mod(a, &m);
            assert_int_equal(inv, mpz_get_u64(z));
            assert_int_equal(tsafe_mul_mod(a, inv, &m), 1);
        } else {
            assert_int_equal(tsafe_inv_mod(0, &m), 0);
        }
        mpz_clears(za, zb, NULL);
    }
    mpz_clears(zq, z, t, u, NULL);
}

static void test_modulus_vs_gmp(void **state)
{
    (void)state;
    for (unsigned bits = 20; bits <= 61; bits++) {
        check_one_prime(random_prime(bits));
        check_one_prime(random_prime(bits));
    }
    /* The extremes of the range. */
    check_one_prime(2305843009213693951ULL); /* 2^61 - 1, prime */
    check_one_prime(1048583ULL);             /* smallest 21-bit prime */
}

/* ------------------------------------------------------------- primes */

static int gmp_prime(uint64_t q)
{
    mpz_t z;
    mpz_init(z);
    mpz_set_u64(z, q);
    int r = mpz_probab_prime_p(z, 40) > 0;
    mpz_clear(z);
    return r;
}

static void check_generated(uint32_t log_n, const uint32_t *bits, size_t n)
{
    uint64_t out[16];
    assert_true(n <= 16);
    assert_int_equal(tsafe_primes_generate(log_n, n, bits, out), TSAFE_OK);
    uint64_t two_n = (uint64_t)2 << log_n;
    for (size_t i = 0; i < n; i++) {
        uint64_t q = out[i];
        assert_true(gmp_prime(q));
        assert_int_equal(tsafe_is_prime(q), 1);
        assert_int_equal(q % two_n, 1);
        assert_int_equal(64 - __builtin_clzll(q), bits[i]);
        for (size_t j = 0; j < i; j++) {
            assert_true(out[j] != q);
            if (bits[j] == bits[i])
                assert_true(out[j] > q); /* descending per size */
        }
        /* No larger admissible prime was skipped unless used before. */
        uint64_t top = (uint64_t)1 << bits[i];
        for (uint64_t c = q + two_n; c < top; c += two_n) {
            if (!gmp_prime(c))
                continue;
            int used = 0;
            for (size_t j = 0; j < i; j++)
                used |= out[j] == c;
            assert_true(used);
        }
    }
}

static void test_primes_generate(void **state)
{
    (void)state;
    const uint32_t seed16[] = {60, 40, 40, 60};
    const uint32_t seed32[] = {60, 40, 40, 40, 60};
    const uint32_t p4k[] = {50, 50};
    const uint32_t p8k[] = {50, 50, 50};
    const uint32_t p16k[] = {50, 40, 40, 40, 50};
    const uint32_t mixed[] = {61, 20, 30, 61, 45, 20, 61, 55, 30};
    const uint32_t mixed16[] = {61, 24, 30, 61, 45, 24, 61, 55, 30};
    check_generated(14, seed16, 4);
    check_generated(15, seed32, 5);
    check_generated(12, p4k, 2);
    check_generated(13, p8k, 3);
    check_generated(14, p16k, 5);
    check_generated(16, mixed16, 9);
    check_generated(10, mixed, 9);
    /* A few random lists. */
    for (int r = 0; r < 4; r++) {
        uint32_t b[6];
        for (int i = 0; i < 6; i++)
            b[i] = 28 + (uint32_t)tsafe_test_below(34);
        check_generated(10 + (uint32_t)tsafe_test_below(7), b, 6);
    }

    /* Is-prime spot checks against GMP on random odd numbers. */
    for (int i = 0; i < 2000; i++) {
        uint64_t c = rnd() | 1;
        assert_int_equal(tsafe_is_prime(c), gmp_prime(c));
    }
    assert_int_equal(tsafe_is_prime(0), 0);
    assert_int_equal(tsafe_is_prime(1), 0);
    assert_int_equal(tsafe_is_prime(2), 1);
}

static void test_primes_errors(void **state)
{
    (void)state;
    uint64_t out[8];
    const uint32_t low[] = {19};
    const uint32_t high[] = {62};
    const uint32_t ok[] = {40};
    assert_int_equal(tsafe_primes_generate(10, 1, low, out), TSAFE_E_ARG);
    assert_int_equal(tsafe_primes_generate(10, 1, high, out), TSAFE_E_ARG);
    assert_int_equal(tsafe_primes_generate(0, 1, ok, out), TSAFE_E_ARG);
    assert_int_equal(tsafe_primes_generate(10, 1, NULL, out), TSAFE_E_NULL);
    assert_int_equal(tsafe_primes_generate(10, 1, ok, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_primes_generate(10, 0, NULL, NULL), TSAFE_OK);

    /* 20-bit primes = 1 mod 2^17: count them with GMP, ask for one more. */
    uint32_t b20[8];
    for (int i = 0; i < 8; i++)
        b20[i] = 20;
    size_t avail = 0;
    for (uint64_t c = (1u << 19) + 1; c < (1u << 20); c += 1u << 17)
        avail += gmp_prime(c);
    assert_true(avail < 8);
    if (avail > 0)
        assert_int_equal(tsafe_primes_generate(16, avail, b20, out), TSAFE_OK);
    assert_int_equal(tsafe_primes_generate(16, avail + 1, b20, out),
                     TSAFE_E_NO_PRIME);
}

/* ------------------------------------------------------ primitive root */

static void check_root(uint64_t q, uint32_t log_n, int brute)
{
    uint64_t psi = 0;
    assert_int_equal(tsafe_primitive_2n_root(q, log_n, &psi), TSAFE_OK);
    mpz_t zq, z, e, p;
    mpz_inits(zq, z, e, p, NULL);
    mpz_set_u64(zq, q);
    mpz_set_u64(p, psi);
    mpz_set_u64(e, (uint64_t)1 << log_n);
    mpz_powm(z, p, e, zq); /* psi^N == -1 */
    assert_int_equal(mpz_get_u64(z), q - 1);
    mpz_mul_2exp(e, e, 1);
    mpz_powm(z, p, e, zq); /* psi^2N == 1 */
    assert_int_equal(mpz_get_u64(z), 1);
    if (brute) {
        /* Smallest: no x < psi has x^N == -1 (those are exactly the
         * primitive 2N-th roots). */
        mpz_set_u64(e, (uint64_t)1 << log_n);
        for (uint64_t x = 2; x < psi; x++) {
            mpz_set_u64(p, x);
            mpz_powm(z, p, e, zq);
            assert_true(mpz_get_u64(z) != q - 1);
        }
    }
    mpz_clears(zq, z, e, p, NULL);
}

static void test_primitive_root(void **state)
{
    (void)state;
    const uint32_t b[] = {20, 22, 24, 61, 60, 50, 40, 30};
    for (uint32_t log_n = 1; log_n <= 16; log_n++) {
        for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
            uint64_t q;
            if (b[i] <= log_n + 2)
                continue;
            if (tsafe_primes_generate(log_n, 1, &b[i], &q) != TSAFE_OK)
                continue; /* no 20-bit prime of that shape */
            /* Brute-force minimality where psi is small enough. */
            check_root(q, log_n, b[i] <= 24 && log_n >= 3);
        }
    }
    uint64_t psi;
    assert_int_equal(tsafe_primitive_2n_root(97, 10, &psi), TSAFE_E_ARG);
    assert_int_equal(tsafe_primitive_2n_root(15361 * 3, 10, &psi),
                     TSAFE_E_ARG); /* not 1 mod 2N */
    assert_int_equal(tsafe_primitive_2n_root(2049ULL * 2049, 10, &psi),
                     TSAFE_E_ARG); /* 1 mod 2048 but composite */
    assert_int_equal(tsafe_primitive_2n_root(12289, 12, NULL), TSAFE_E_NULL);
}

/* ------------------------------------------- switch and multiply-add */

/* tsafe_vec_mod_switch (IFMA where the primes allow, scalar otherwise)
 * against GMP: x = CRT(x_i, x_l) in [0, q_i q_l), floor((x + (q_l-1)/2) / q_l)
 * mod q_i. And tsafe_vec_mul_shoup_add against (out + a w) mod q. */
static void check_switch(uint64_t qi, uint64_t ql, size_t n)
{
    tsafe_modulus mi, ml;
    tsafe_modulus_init(&mi, qi);
    tsafe_modulus_init(&ml, ql);
    tsafe_switch_consts k;
    tsafe_switch_consts_init(&k, &mi, &ml);
    uint64_t *xi = malloc(n * 8), *xl = malloc(n * 8), *out = malloc(n * 8);
    uint64_t *w = malloc(n * 8), *wp = malloc(n * 8), *acc = malloc(n * 8), *acc0 = malloc(n * 8);
    for (size_t j = 0; j < n; j++) {
        xi[j] = rnd() % qi;
        xl[j] = rnd() % ql;
        w[j] = rnd() % qi;
        acc[j] = acc0[j] = rnd() % qi;
    }
    xi[0] = 0, xl[0] = 0;                  /* x = 0 */
    xi[1] = qi - 1, xl[1] = ql - 1;        /* x = Q - 1 */
    tsafe_vec_mod_switch(out, xi, xl, n, &k);
    tsafe_vec_shoup_precompute(wp, w, n, qi);
    tsafe_vec_mul_shoup_add(acc, xi, w, wp, n, qi);
    uint64_t *sub = malloc(n * 8), *p0 = malloc(n * 8), *p1 = malloc(n * 8);
    tsafe_vec_sub_mul_shoup(sub, acc0, xi, w, wp, n, qi);
    for (size_t j = 0; j < n; j++) /* a ciphertext's two polynomials */
        p0[j] = acc0[j], p1[j] = (acc0[j] + 1) % qi;
    uint64_t *x2 = malloc(n * 8);
    for (size_t j = 0; j < n; j++)
        x2[j] = xl[j] % qi;
    tsafe_vec_mul_shoup_add2(p0, p1, xi, x2, w, wp, n, qi);
    mpz_t Q, x, t, r, inv;
    mpz_inits(Q, x, t, r, inv, NULL);
    mpz_set_u64(Q, qi);
    mpz_set_u64(t, ql);
    mpz_invert(inv, Q, t); /* qi^-1 mod ql */
    for (size_t j = 0; j < n; j++) {
        /* x = xi + qi * ((xl - xi) qi^-1 mod ql) */
        mpz_set_u64(x, xl[j]);
        mpz_set_u64(r, xi[j]);
        mpz_sub(x, x, r);
        mpz_mul(x, x, inv);
        mpz_mod(x, x, t);
        mpz_mul(x, x, Q);
        mpz_add(x, x, r);
        mpz_add_ui(x, x, (unsigned long)((ql - 1) / 2));
        mpz_fdiv_q(x, x, t);
        mpz_mod(x, x, Q);
        assert_true(out[j] == mpz_get_u64(x));
        tsafe_u128 want = ((tsafe_u128)xi[j] * w[j] + acc0[j]) % qi;
        assert_true(acc[j] == (uint64_t)want);
        tsafe_u128 prod = (tsafe_u128)xi[j] * w[j] % qi;
        assert_true(sub[j] == (uint64_t)((acc0[j] + qi - (uint64_t)prod) % qi));
        assert_true(p0[j] == acc[j]);
        tsafe_u128 want1 = ((tsafe_u128)x2[j] * w[j] + (acc0[j] + 1) % qi) % qi;
        assert_true(p1[j] == (uint64_t)want1);
    }
    mpz_clears(Q, x, t, r, inv, NULL);
    free(sub), free(p0), free(p1), free(x2);
    free(xi), free(xl), free(out), free(w), free(wp), free(acc), free(acc0);
}

static void test_switch_and_mul_add(void **state)
{
    (void)state;
    /* IFMA-sized primes (both below 2^50, both orders), a 60-bit one
     * (scalar), odd lengths for the vector tails */
    check_switch(random_prime(49), random_prime(30), 4096);
    check_switch(random_prime(30), random_prime(31), 1001);
    check_switch(random_prime(30), random_prime(49), 77);
    check_switch(random_prime(49), random_prime(60), 513);
    check_switch(random_prime(60), random_prime(40), 9);
}

/* tsafe_vec_mac2_shoup (IFMA where the prime allows, AVX2 below 2^30
 * without IFMA, scalar otherwise) against GMP: out_p = [out_p +] sum_k
 * a_p[k] w[k] mod q for both polynomials, 1..5 terms, accumulating and
 * assigning; values at 0 and q - 1 included. avx2 = 1 calls the AVX2
 * kernel itself (whatever the CPU would dispatch to), 2 the AVX2 + FMA
 * one in doubles, and checks the coefficients it did: a multiple of 4,
 * the rest left to the caller. */
static void check_mac2_path(uint64_t q, size_t n, size_t terms, int assign, int avx2)
{
    enum { MAXT = 5 };
    uint64_t *buf[4 * MAXT], *out[2], *init[2];
    for (size_t i = 0; i < 4 * terms; i++)
        assert_non_null(buf[i] = malloc(n * 8));
    for (int p = 0; p < 2; p++) {
        assert_non_null(out[p] = malloc(n * 8));
        assert_non_null(init[p] = malloc(n * 8));
    }
    const uint64_t *a0[MAXT], *a1[MAXT], *w[MAXT], *wp[MAXT];
    for (size_t k = 0; k < terms; k++) {
        uint64_t *x0 = buf[4 * k], *x1 = buf[4 * k + 1], *y = buf[4 * k + 2], *yp = buf[4 * k + 3];
        for (size_t j = 0; j < n; j++) {
            x0[j] = j % 7 == 0 ? q - 1 : rnd() % q;
            x1[j] = j % 11 == 0 ? 0 : rnd() % q;
            y[j] = j % 5 == 0 ? q - 1 : rnd() % q;
        }
        tsafe_vec_shoup_precompute(yp, y, n, q);
        a0[k] = x0, a1[k] = x1, w[k] = y, wp[k] = yp;
    }
    for (int p = 0; p < 2; p++)
        for (size_t j = 0; j < n; j++)
            out[p][j] = init[p][j] = rnd() % q;
    size_t done = n;
    if (avx2 == 1) {
        done = tsafe_avx2_vec_mac2_shoup(out[0], out[1], a0, a1, w, wp, terms, n, q, assign);
        assert_int_equal(done, n & ~(size_t)3);
    } else if (avx2 == 2) {
        done = tsafe_avx2_fp_vec_mac2(out[0], out[1], a0, a1, w, terms, n, q, assign);
        assert_int_equal(done, n & ~(size_t)3);
    } else {
        tsafe_vec_mac2_shoup(out[0], out[1], a0, a1, w, wp, terms, n, q, assign);
    }
    mpz_t acc, t, m;
    mpz_inits(acc, t, m, NULL);
    mpz_set_u64(m, q);
    for (int p = 0; p < 2; p++)
        for (size_t j = 0; j < done; j++) {
            mpz_set_u64(acc, assign ? 0 : init[p][j]);
            for (size_t k = 0; k < terms; k++) {
                mpz_set_u64(t, (p ? a1 : a0)[k][j]);
                mpz_mul_ui(t, t, (unsigned long)w[k][j]);
                mpz_add(acc, acc, t);
            }
            mpz_mod(acc, acc, m);
            assert_true(out[p][j] == mpz_get_u64(acc));
        }
    mpz_clears(acc, t, m, NULL);
    for (size_t i = 0; i < 4 * terms; i++)
        free(buf[i]);
    for (int p = 0; p < 2; p++)
        free(out[p]), free(init[p]);
}

static void check_mac2(uint64_t q, size_t n, size_t terms, int assign)
{
    check_mac2_path(q, n, terms, assign, 0);
}

static void test_mac2(void **state)
{
    (void)state;
    check_mac2(random_prime(49), 4096, 4, 0); /* IFMA: the sealed rounds' shape */
    check_mac2(random_prime(49), 4096, 4, 1);
    check_mac2(random_prime(30), 1001, 1, 0); /* vector tail */
    check_mac2(random_prime(45), 77, 5, 1);
    check_mac2(random_prime(60), 513, 3, 0); /* scalar path */
    check_mac2(random_prime(60), 9, 2, 1);
    check_mac2(random_prime(30), 4096, 4, 0); /* AVX2 without IFMA: the gap limbs */
    check_mac2(random_prime(30), 4096, 4, 1);
}

/* The AVX2 kernel itself, on machines that would dispatch to IFMA too. */
static void test_mac2_avx2(void **state)
{
    (void)state;
    if (!tsafe_cpu_has_avx2()) {
        print_message("AVX2 not available (CPU or TSAFE_DISABLE_AVX2=1): skipping\n");
        skip();
    }
    const unsigned bits[] = {8, 17, 29, 30};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        uint64_t q = random_prime(bits[i]);
        assert_true(q < TSAFE_AVX2_MAX_Q);
        check_mac2_path(q, 4096, 4, 0, 1);
        check_mac2_path(q, 4096, 4, 1, 1);
        check_mac2_path(q, 1003, 5, 0, 1);
        check_mac2_path(q, 3, 1, 1, 1); /* nothing for the kernel */
    }
    if (!tsafe_cpu_has_avx2_fma())
        return;
    const unsigned fbits[] = {31, 40, 49, 50};
    for (size_t i = 0; i < sizeof fbits / sizeof fbits[0]; i++) {
        uint64_t q = random_prime(fbits[i]);
        assert_true(q >= TSAFE_AVX2_MAX_Q && q < TSAFE_AVX2_FP_MAX_Q);
        check_mac2_path(q, 4096, 4, 0, 2);
        check_mac2_path(q, 4096, 4, 1, 2);
        check_mac2_path(q, 1003, 5, 0, 2);
    }
}

/* tsafe_vec_mul and tsafe_vec_mul_add (IFMA, AVX2 + FMA doubles below
 * 2^50, scalar) against GMP, values at 0 and q - 1 included; kernel = 1
 * calls the doubles' kernel itself and checks what it did. */
static void check_mul_path(uint64_t q, size_t n, int add, int kernel)
{
    uint64_t *a = malloc(n * 8), *b = malloc(n * 8), *out = malloc(n * 8), *init = malloc(n * 8);
    assert_true(a && b && out && init);
    tsafe_modulus m;
    tsafe_modulus_init(&m, q);
    for (size_t j = 0; j < n; j++) {
        a[j] = j % 7 == 0 ? q - 1 : rnd() % q;
        b[j] = j % 5 == 0 ? q - 1 : j % 13 == 0 ? 0 : rnd() % q;
        out[j] = init[j] = rnd() % q;
    }
    size_t done = n;
    if (kernel) {
        done = tsafe_avx2_fp_vec_mul(out, a, b, n, q, add);
        assert_int_equal(done, n & ~(size_t)3);
    } else if (add) {
        tsafe_vec_mul_add(out, a, b, n, &m);
    } else {
        tsafe_vec_mul(out, a, b, n, &m);
    }
    mpz_t acc, t, mq;
    mpz_inits(acc, t, mq, NULL);
    mpz_set_u64(mq, q);
    for (size_t j = 0; j < done; j++) {
        mpz_set_u64(acc, a[j]);
        mpz_set_u64(t, b[j]);
        mpz_mul(acc, acc, t);
        if (add) {
            mpz_set_u64(t, init[j]);
            mpz_add(acc, acc, t);
        }
        mpz_mod(acc, acc, mq);
        assert_true(out[j] == mpz_get_u64(acc));
    }
    mpz_clears(acc, t, mq, NULL);
    free(a), free(b), free(out), free(init);
}

static void test_mul_plain(void **state)
{
    (void)state;
    const unsigned bits[] = {8, 17, 30, 31, 45, 49, 50, 60};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        uint64_t q = random_prime(bits[i]);
        check_mul_path(q, 4096, 0, 0);
        check_mul_path(q, 4096, 1, 0);
        check_mul_path(q, 1003, 1, 0); /* a tail after the vectors */
        if (q < TSAFE_AVX2_FP_MAX_Q && tsafe_cpu_has_avx2_fma()) {
            check_mul_path(q, 4096, 0, 1);
            check_mul_path(q, 1003, 1, 1);
        }
    }
}

/* tsafe_vec_from_i64_small (IFMA where the prime allows, scalar otherwise)
 * against GMP's v mod q: values on both sides of zero and up to q - 1 in
 * magnitude; a value of magnitude >= q anywhere (start, middle, tail) makes
 * it return -1. */
static void check_from_i64_with(uint64_t q, size_t n, int kernel);
static void check_from_i64(uint64_t q, size_t n)
{
    check_from_i64_with(q, n, 0);
}

/* kernel = 1: the AVX2 kernel itself, on what it converts */
static int from_i64(uint64_t *out, const int64_t *v, size_t n, uint64_t q, int kernel)
{
    if (!kernel)
        return tsafe_vec_from_i64_small(out, v, n, q);
    int bad;
    size_t done = tsafe_avx2_vec_from_i64_small(out, v, n, q, &bad);
    assert_int_equal(done, n & ~(size_t)3);
    if (bad)
        return -1;
    for (size_t k = done; k < n; k++) { /* the tail, as the scalar loop does it */
        uint64_t m = v[k] < 0 ? (uint64_t)0 - (uint64_t)v[k] : (uint64_t)v[k];
        if (m >= q)
            return -1;
        out[k] = v[k] < 0 ? q - m : m;
    }
    return 0;
}

static void check_from_i64_with(uint64_t q, size_t n, int kernel)
{
    int64_t *v = malloc(n * sizeof *v);
    uint64_t *out = malloc(n * sizeof *out);
    mpz_t x, m;
    mpz_inits(x, m, NULL);
    mpz_set_u64(m, q);
    for (size_t j = 0; j < n; j++) {
        uint64_t mag = j % 5 == 0 ? q - 1 : rnd() % (j % 3 ? 2048 : q);
        v[j] = (rnd() & 1) ? -(int64_t)mag : (int64_t)mag;
    }
    assert_int_equal(from_i64(out, v, n, q, kernel), 0);
    for (size_t j = 0; j < n; j++) {
        mpz_set_si(x, (long)v[j]);
        mpz_mod(x, x, m);
        assert_true(out[j] == mpz_get_u64(x));
    }
    size_t at[3] = {0, n / 2, n - 1};
    for (int i = 0; i < 3; i++) {
        int64_t keep = v[at[i]];
        v[at[i]] = (i & 1) ? -(int64_t)q : (int64_t)q;
        assert_int_equal(from_i64(out, v, n, q, kernel), -1);
        v[at[i]] = INT64_MIN; /* |v| is 2^63: no lane may take it for small */
        assert_int_equal(from_i64(out, v, n, q, kernel), -1);
        v[at[i]] = keep;
    }
    mpz_clears(x, m, NULL);
    free(v), free(out);
}

static void test_from_i64_small(void **state)
{
    (void)state;
    check_from_i64(random_prime(30), 4096);
    check_from_i64(random_prime(49), 1001);
    check_from_i64(random_prime(30), 7);
    check_from_i64(random_prime(60), 513); /* scalar path */
    if (tsafe_cpu_has_avx2()) { /* the AVX2 kernel, whatever the CPU would take */
        check_from_i64_with(random_prime(30), 4096, 1);
        check_from_i64_with(random_prime(49), 1001, 1);
        check_from_i64_with(random_prime(60), 513, 1);
        check_from_i64_with(random_prime(62), 9, 1);
    }
}

/* tsafe_vec_from_i8 and tsafe_vec_add_i8 (IFMA, AVX2, scalar) and the
 * AVX2 kernels themselves against GMP: bytes from -128 to 127, x at 0 and
 * q - 1, tails. */
static void check_i8(uint64_t q, size_t n, int kernel)
{
    int8_t *e = malloc(n);
    uint64_t *x = malloc(n * 8), *x0 = malloc(n * 8), *out = malloc(n * 8);
    assert_true(e && x && x0 && out);
    for (size_t j = 0; j < n; j++) {
        e[j] = (int8_t)(j < 256 ? (int)j - 128 : (int)(rnd() % 256) - 128);
        x[j] = x0[j] = j % 7 == 0 ? q - 1 : j % 11 == 0 ? 0 : rnd() % q;
    }
    size_t d1 = n, d2 = n;
    if (kernel) {
        d1 = tsafe_avx2_vec_from_i8(out, e, n, q);
        d2 = tsafe_avx2_vec_add_i8(x, e, n, q);
        assert_int_equal(d1, n & ~(size_t)3);
        assert_int_equal(d2, n & ~(size_t)3);
    } else {
        tsafe_vec_from_i8(out, e, n, q);
        tsafe_vec_add_i8(x, e, n, q);
    }
    mpz_t a, m;
    mpz_inits(a, m, NULL);
    mpz_set_u64(m, q);
    for (size_t j = 0; j < d1; j++) {
        mpz_set_si(a, e[j]);
        mpz_mod(a, a, m);
        assert_true(out[j] == mpz_get_u64(a));
        mpz_set_u64(a, x0[j]);
        if (e[j] >= 0)
            mpz_add_ui(a, a, (unsigned long)e[j]);
        else
            mpz_sub_ui(a, a, (unsigned long)-e[j]);
        mpz_mod(a, a, m);
        assert_true(x[j] == mpz_get_u64(a));
    }
    mpz_clears(a, m, NULL);
    free(e), free(x), free(x0), free(out);
}

static void test_i8(void **state)
{
    (void)state;
    const unsigned bits[] = {9, 30, 49, 60, 61};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        uint64_t q = random_prime(bits[i]);
        check_i8(q, 4096, 0);
        check_i8(q, 1003, 0);
        if (tsafe_cpu_has_avx2()) {
            check_i8(q, 4096, 1);
            check_i8(q, 1003, 1);
        }
    }
}

int main(void)
{
    tsafe_test_rng_init("ring_arith");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modulus_vs_gmp),
        cmocka_unit_test(test_primes_generate),
        cmocka_unit_test(test_primes_errors),
        cmocka_unit_test(test_primitive_root),
        cmocka_unit_test(test_switch_and_mul_add),
        cmocka_unit_test(test_mac2),
        cmocka_unit_test(test_mac2_avx2),
        cmocka_unit_test(test_mul_plain),
        cmocka_unit_test(test_i8),
        cmocka_unit_test(test_from_i64_small),
    };
    return cmocka_run_group_tests_name("ring_arith", tests, NULL, NULL);
}
