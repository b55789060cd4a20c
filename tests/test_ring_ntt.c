/* Negacyclic NTT: products against schoolbook references, round trips,
 * direct evaluation at psi^(2*bitrev(k)+1), and scalar vs IFMA paths bit
 * for bit. Random inputs, fresh seed per run (TSAFE_TEST_SEED=<n> replays
 * one); TSAFE_DISABLE_IFMA=1 exercises the skip path. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../libtensafe-he-core/src/ring/ring.h"
#include "../libtensafe-he-core/src/ring/avx2.h"
#include "support/tsafe_test_rng.h"

/* ------------------------------------------------------------ helpers */

static uint64_t rnd(void)
{
    return tsafe_test_u64();
}

/* Random reduced vector; a few slots forced to the edges 0 and q-1. */
static void fill(uint64_t *a, size_t n, uint64_t q)
{
    for (size_t i = 0; i < n; i++)
        a[i] = rnd() % q;
    a[0] = q - 1;
    a[n - 1] = q - 1;
    a[n / 2] = 0;
}

static uint64_t *alloc_vec(size_t n)
{
    uint64_t *p = malloc(n * sizeof *p);
    assert_non_null(p);
    return p;
}

/* Independent modular helpers: plain 128-bit % (no Barrett, no Shoup). */
static uint64_t mulm(uint64_t a, uint64_t b, uint64_t q)
{
    return (uint64_t)(((tsafe_u128)a * b) % q);
}

static uint64_t powm(uint64_t b, uint64_t e, uint64_t q)
{
    uint64_t r = 1 % q;
    while (e) {
        if (e & 1)
            r = mulm(r, b, q);
        b = mulm(b, b, q);
        e >>= 1;
    }
    return r;
}

/* Negacyclic product coefficient k, O(N): sum_{i+j=k} a_i b_j minus
 * sum_{i+j=k+N} a_i b_j, accumulated in 128 bits and reduced every 32
 * terms (each term < 2^122). */
static uint64_t nega_coeff(const uint64_t *a, const uint64_t *b, size_t n,
                           size_t k, uint64_t q)
{
    tsafe_u128 pos = 0, neg = 0;
    uint64_t p = 0, m = 0;
    for (size_t i = 0; i <= k; i++) {
        pos += (tsafe_u128)a[i] * b[k - i];
        if ((i & 31) == 31) {
            p = (uint64_t)((pos + p) % q);
            pos = 0;
        }
    }
    for (size_t i = k + 1; i < n; i++) {
        neg += (tsafe_u128)a[i] * b[n + k - i];
        if ((i & 31) == 31) {
            m = (uint64_t)((neg + m) % q);
            neg = 0;
        }
    }
    p = (uint64_t)((pos + p) % q);
    m = (uint64_t)((neg + m) % q);
    return p >= m ? p - m : p + q - m;
}

static uint32_t bitrev(uint32_t x, uint32_t bits)
{
    uint32_t r = 0;
    for (uint32_t i = 0; i < bits; i++, x >>= 1)
        r = (r << 1) | (x & 1);
    return r;
}

/* a(x) at x by Horner. */
static uint64_t eval_at(const uint64_t *a, size_t n, uint64_t x, uint64_t q)
{
    uint64_t r = 0;
    for (size_t i = n; i-- > 0;)
        r = (uint64_t)(((tsafe_u128)r * x + a[i]) % q);
    return r;
}

/* --------------------------------------------------- one (N, q) check */

typedef void (*ntt_fn)(const tsafe_ntt_table *, uint64_t *);

/* NTT product vs reference (all coefficients when full, else `spot`
 * random ones), round trip, and direct evaluation of a few slots. */
static void check_ntt(uint32_t log_n, uint64_t q, int allow_ifma, int full,
                      int spot)
{
    const size_t n = (size_t)1 << log_n;
    tsafe_ntt_table t;
    assert_int_equal(tsafe_ntt_table_init(&t, log_n, q, allow_ifma), TSAFE_OK);
    assert_int_equal(t.n, n);
    assert_int_equal(powm(t.psi, n, q), q - 1);
    if (!allow_ifma || q >= ((uint64_t)1 << 50))
        assert_int_equal(t.use_ifma, 0);

    uint64_t *a = alloc_vec(n), *b = alloc_vec(n), *fa = alloc_vec(n);
    uint64_t *fb = alloc_vec(n), *c = alloc_vec(n);
    fill(a, n, q);
    fill(b, n, q);
    memcpy(fa, a, n * sizeof *a);
    memcpy(fb, b, n * sizeof *b);

    tsafe_ntt_forward(&t, fa);
    tsafe_ntt_forward(&t, fb);
    for (size_t k = 0; k < n; k++)
        assert_true(fa[k] < q && fb[k] < q);

    /* Slot k = a(psi^(2*bitrev(k)+1)). */
    for (int s = 0; s < 4; s++) {
        size_t k = s == 0 ? 0 : s == 1 ? n - 1 : (size_t)(rnd() % n);
        uint64_t x = powm(t.psi, 2 * (uint64_t)bitrev((uint32_t)k, log_n) + 1, q);
        assert_int_equal(fa[k], eval_at(a, n, x, q));
    }

    tsafe_vec_mul(c, fa, fb, n, &t.mod);
    tsafe_ntt_inverse(&t, c);
    if (full) {
        for (size_t k = 0; k < n; k++)
            assert_int_equal(c[k], nega_coeff(a, b, n, k, q));
    } else {
        assert_int_equal(c[0], nega_coeff(a, b, n, 0, q));
        assert_int_equal(c[n - 1], nega_coeff(a, b, n, n - 1, q));
        for (int s = 0; s < spot; s++) {
            size_t k = (size_t)(rnd() % n);
            assert_int_equal(c[k], nega_coeff(a, b, n, k, q));
        }
    }

    /* Round trip. */
    tsafe_ntt_inverse(&t, fa);
    assert_memory_equal(fa, a, n * sizeof *a);

    free(a);
    free(b);
    free(fa);
    free(fb);
    free(c);
    tsafe_ntt_table_free(&t);
}

static uint64_t prime_of(uint32_t log_n, uint32_t bits)
{
    uint64_t q;
    assert_int_equal(tsafe_primes_generate(log_n, 1, &bits, &q), TSAFE_OK);
    return q;
}


/* Structured inputs push lazy intermediates onto the exact multiples
 * 0, q, 2q, 3q (e.g. zeros become 2q after one butterfly), where an
 * off-by-one in a final reduction would show. Forward is checked against
 * direct evaluation of every slot, inverse by mapping back. */
static void fill_pattern(uint64_t *a, size_t n, uint64_t q, int pat)
{
    for (size_t i = 0; i < n; i++) {
        switch (pat) {
        case 0: a[i] = 0; break;
        case 1: a[i] = q - 1; break;
        case 2: a[i] = i == 0; break;
        case 3: a[i] = (rnd() & 1) ? q - 1 : 0; break;
        case 4: a[i] = (rnd() % 3 == 0) ? 1 : 0; break;
        default: a[i] = (i & 1) ? q - 1 : 1; break;
        }
    }
}

static void test_ntt_edge_patterns(void **state)
{
    (void)state;
    const uint32_t bits[] = {30, 50, 61};
    for (uint32_t log_n = 2; log_n <= 10; log_n++) {
        const size_t n = (size_t)1 << log_n;
        uint64_t *a = alloc_vec(n), *f = alloc_vec(n), *g = alloc_vec(n);
        for (size_t i = 0; i < 3; i++) {
            uint64_t q = prime_of(log_n, bits[i]);
            for (int allow = 0; allow <= 1; allow++) {
                tsafe_ntt_table t;
                assert_int_equal(tsafe_ntt_table_init(&t, log_n, q, allow),
                                 TSAFE_OK);
                for (int pat = 0; pat < 6; pat++) {
                    fill_pattern(a, n, q, pat);
                    memcpy(f, a, n * sizeof *a);
                    tsafe_ntt_forward(&t, f);
                    for (size_t k = 0; k < n; k++) {
                        uint64_t x = powm(t.psi,
                            2 * (uint64_t)bitrev((uint32_t)k, log_n) + 1, q);
                        assert_int_equal(f[k], eval_at(a, n, x, q));
                    }
                    /* Same pattern as NTT-domain values: inverse, then
                     * forward must give it back. */
                    memcpy(g, a, n * sizeof *a);
                    tsafe_ntt_inverse(&t, g);
                    for (size_t k = 0; k < n; k++)
                        assert_true(g[k] < q);
                    tsafe_ntt_forward(&t, g);
                    assert_memory_equal(g, a, n * sizeof *a);
                }
                tsafe_ntt_table_free(&t);
            }
        }
        free(a);
        free(f);
        free(g);
    }
}

/* ---------------------------------------------------------------- tests */

static void test_ntt_small_n_full(void **state)
{
    (void)state;
    /* Tiny rings exercise every special-cased stage count. */
    const uint32_t bits[] = {30, 50, 61};
    for (uint32_t log_n = 1; log_n <= 9; log_n++)
        for (size_t i = 0; i < 3; i++)
            check_ntt(log_n, prime_of(log_n, bits[i]), 0, 1, 0);
}

static void test_ntt_product_sizes(void **state)
{
    (void)state;
    const uint32_t bits[] = {30, 40, 50, 60, 61};
    for (uint32_t log_n = 10; log_n <= 16; log_n++) {
        for (size_t i = 0; i < 5; i++) {
            uint64_t q = prime_of(log_n, bits[i]);
            /* Full O(N^2) reference up to 2^11 (and one prime at 2^12),
             * O(N) spot checks beyond. */
            int full = log_n <= 11 || (log_n == 12 && i == 4);
            check_ntt(log_n, q, 0, full, 24);
            if (q < ((uint64_t)1 << 50))
                check_ntt(log_n, q, 1, full && log_n <= 10, 24);
        }
    }
}

static void check_preset(uint32_t log_n, const uint32_t *bits, size_t cnt)
{
    uint64_t qs[8];
    assert_int_equal(tsafe_primes_generate(log_n, cnt, bits, qs), TSAFE_OK);
    for (size_t i = 0; i < cnt; i++) {
        check_ntt(log_n, qs[i], 0, 0, 12);
        if (qs[i] < ((uint64_t)1 << 50))
            check_ntt(log_n, qs[i], 1, 0, 12);
    }
}

static void test_ntt_presets(void **state)
{
    (void)state;
    const uint32_t s16[] = {60, 40, 40, 60};
    const uint32_t s32[] = {60, 40, 40, 40, 60};
    const uint32_t p4[] = {50, 50};
    const uint32_t p8[] = {50, 50, 50};
    const uint32_t p16[] = {50, 40, 40, 40, 50};
    check_preset(14, s16, 4);
    check_preset(15, s32, 5);
    check_preset(12, p4, 2);
    check_preset(13, p8, 3);
    check_preset(14, p16, 5);
}

static void test_ntt_table_errors(void **state)
{
    (void)state;
    tsafe_ntt_table t;
    uint64_t q = prime_of(10, 40);
    assert_int_equal(tsafe_ntt_table_init(&t, 0, q, 1), TSAFE_E_ARG);
    assert_int_equal(tsafe_ntt_table_init(&t, 18, q, 1), TSAFE_E_ARG);
    /* q = 1 mod 2^11 but not 1 mod 2^12 for log_n = 11 may hold; pick a
     * prime that is certainly not 1 mod 2N. */
    assert_int_equal(tsafe_ntt_table_init(&t, 10, 1000003, 1), TSAFE_E_ARG);
    assert_int_equal(tsafe_ntt_table_init(&t, 10, 2049ULL * 4097, 1),
                     TSAFE_E_ARG); /* 1 mod 2048, composite */
    assert_int_equal(tsafe_ntt_table_init(&t, 10, (1ULL << 62) + 2049, 1),
                     TSAFE_E_ARG); /* too large */
    assert_int_equal(tsafe_ntt_table_init(NULL, 10, q, 1), TSAFE_E_NULL);
    tsafe_ntt_table_free(NULL);
    assert_int_equal(tsafe_ntt_table_init(&t, 10, q, 0), TSAFE_OK);
    assert_int_equal(t.use_ifma, 0);
    assert_null(t.ifma);
    tsafe_ntt_table_free(&t);
    tsafe_ntt_table_free(&t); /* freed tables are zeroed: idempotent */
}

/* Element-wise ops against plain % references (any path). */
static void test_vec_ops(void **state)
{
    (void)state;
    const uint32_t bits[] = {20, 30, 49, 50, 51, 60, 61};
    const size_t n = 1003; /* odd length exercises vector tails */
    uint64_t *a = alloc_vec(n), *b = alloc_vec(n), *bp = alloc_vec(n);
    uint64_t *o = alloc_vec(n), *acc = alloc_vec(n);
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        uint64_t q = prime_of(10, bits[i]);
        tsafe_modulus m;
        tsafe_modulus_init(&m, q);
        fill(a, n, q);
        fill(b, n, q);
        b[1] = q - 1;
        a[1] = q - 1;
        uint64_t c = rnd() % q;
        tsafe_vec_shoup_precompute(bp, b, n, q);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(bp[k], tsafe_shoup_precompute(b[k], q));

        tsafe_vec_mul_shoup(o, a, b, bp, n, q);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(o[k], mulm(a[k], b[k], q));
        tsafe_vec_mul(o, a, b, n, &m);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(o[k], mulm(a[k], b[k], q));
        fill(acc, n, q);
        memcpy(o, acc, n * sizeof *o);
        tsafe_vec_mul_add(o, a, b, n, &m);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(o[k], (mulm(a[k], b[k], q) + acc[k]) % q);
        tsafe_vec_mul_scalar(o, a, c, n, q);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(o[k], mulm(a[k], c, q));
        tsafe_vec_add(o, a, b, n, q);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(o[k], (uint64_t)(((tsafe_u128)a[k] + b[k]) % q));
        tsafe_vec_sub(o, a, b, n, q);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(o[k], (uint64_t)(((tsafe_u128)a[k] + q - b[k]) % q));
        tsafe_vec_neg(o, a, n, q);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(o[k], (q - a[k]) % q);
        /* In place (out aliases a). */
        memcpy(o, a, n * sizeof *o);
        tsafe_vec_mul_shoup(o, o, b, bp, n, q);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(o[k], mulm(a[k], b[k], q));
    }
    free(a);
    free(b);
    free(bp);
    free(o);
    free(acc);
}

/* One vector NTT path against the scalar loops on input a, bit for bit:
 * forward, inverse back to a, and the inverse of non-NTT data. s and v
 * are scratch of t->n words. */
typedef void (*ntt_fn)(const tsafe_ntt_table *t, uint64_t *a);

static void check_path(const tsafe_ntt_table *t, ntt_fn fwd, ntt_fn inv, const uint64_t *a,
                       uint64_t *s, uint64_t *v)
{
    const size_t n = t->n;
    memcpy(s, a, n * sizeof *a);
    memcpy(v, a, n * sizeof *a);
    tsafe_ntt_forward_scalar(t, s);
    fwd(t, v);
    assert_memory_equal(s, v, n * sizeof *s);
    tsafe_ntt_inverse_scalar(t, s);
    inv(t, v);
    assert_memory_equal(s, v, n * sizeof *s);
    assert_memory_equal(s, a, n * sizeof *s);
    memcpy(s, a, n * sizeof *a);
    memcpy(v, a, n * sizeof *a);
    tsafe_ntt_inverse_scalar(t, s);
    inv(t, v);
    assert_memory_equal(s, v, n * sizeof *s);
}

/* Scalar and IFMA paths, bit for bit. */
static void test_ifma_matches_scalar(void **state)
{
    (void)state;
    if (!tsafe_cpu_has_ifma()) {
        print_message("IFMA not available (CPU or TSAFE_DISABLE_IFMA=1): "
                      "skipping scalar-vs-IFMA comparison\n");
        skip();
    }
    const uint32_t bits[] = {20, 25, 30, 36, 40, 45, 49, 50};
    for (uint32_t log_n = 4; log_n <= 16; log_n++) {
        const size_t n = (size_t)1 << log_n;
        uint64_t *a = alloc_vec(n), *s = alloc_vec(n), *v = alloc_vec(n);
        uint64_t *w = alloc_vec(n), *wp = alloc_vec(n);
        for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
            uint64_t q;
            if (tsafe_primes_generate(log_n, 1, &bits[i], &q) != TSAFE_OK)
                continue; /* no such small prime for this N */
            tsafe_ntt_table t;
            assert_int_equal(tsafe_ntt_table_init(&t, log_n, q, 1), TSAFE_OK);
            assert_int_equal(t.use_ifma, 1);
            assert_non_null(t.ifma);
            for (int rep = 0; rep < (log_n <= 12 ? 3 : 1); rep++) {
                fill(a, n, q);
                check_path(&t, tsafe_ntt_forward_ifma, tsafe_ntt_inverse_ifma, a, s, v);

                fill(w, n, q);
                tsafe_vec_shoup_precompute(wp, w, n, q);
                for (size_t k = 0; k < n; k++)
                    s[k] = tsafe_mul_shoup(a[k], w[k], wp[k], q);
                tsafe_vec_mul_shoup(v, a, w, wp, n, q);
                assert_memory_equal(s, v, n * sizeof *s);
                for (size_t k = 0; k < n; k++)
                    s[k] = tsafe_mul_mod(a[k], w[k], &t.mod);
                tsafe_vec_mul(v, a, w, n, &t.mod);
                assert_memory_equal(s, v, n * sizeof *s);
            }
            tsafe_ntt_table_free(&t);
        }
        free(a);
        free(s);
        free(v);
        free(w);
        free(wp);
    }
}

/* Scalar and AVX2 paths (primes below 2^30), bit for bit; the AVX2 kernels
 * are called directly, so machines that dispatch to IFMA test them too. */
static void test_avx2_matches_scalar(void **state)
{
    (void)state;
    if (!tsafe_cpu_has_avx2()) {
        print_message("AVX2 not available (CPU or TSAFE_DISABLE_AVX2=1): "
                      "skipping scalar-vs-AVX2 comparison\n");
        skip();
    }
    const uint32_t bits[] = {14, 17, 20, 25, 29, 30};
    for (uint32_t log_n = 4; log_n <= 16; log_n++) {
        const size_t n = (size_t)1 << log_n;
        uint64_t *a = alloc_vec(n), *s = alloc_vec(n), *v = alloc_vec(n);
        uint64_t *w = alloc_vec(n), *wp = alloc_vec(n);
        for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
            uint64_t q;
            if (tsafe_primes_generate(log_n, 1, &bits[i], &q) != TSAFE_OK)
                continue; /* no such small prime for this N */
            assert_true(q < TSAFE_AVX2_MAX_Q);
            tsafe_ntt_table t;
            assert_int_equal(tsafe_ntt_table_init(&t, log_n, q, 1), TSAFE_OK);
            /* dispatch: IFMA where the CPU has it, else AVX2 */
            assert_int_equal(t.use_avx2, !t.use_ifma);
            for (int rep = 0; rep < (log_n <= 12 ? 3 : 1); rep++) {
                fill(a, n, q);
                if (rep == 1) /* the largest input everywhere */
                    for (size_t k = 0; k < n; k++)
                        a[k] = q - 1;
                check_path(&t, tsafe_ntt_forward_avx2, tsafe_ntt_inverse_avx2, a, s, v);

                fill(w, n, q);
                tsafe_vec_shoup_precompute(wp, w, n, q);
                for (size_t k = 0; k < n; k++)
                    s[k] = tsafe_mul_shoup(a[k], w[k], wp[k], q);
                assert_int_equal(tsafe_avx2_vec_mul_shoup(v, a, w, wp, n, q), n);
                assert_memory_equal(s, v, n * sizeof *s);
                /* out += a w, then out = b - a w in place (b = out) */
                fill(s, n, q);
                memcpy(v, s, n * sizeof *s);
                for (size_t k = 0; k < n; k++)
                    s[k] = tsafe_add_mod(s[k], tsafe_mul_shoup(a[k], w[k], wp[k], q), q);
                assert_int_equal(tsafe_avx2_vec_mul_shoup_add(v, a, w, wp, n, q), n);
                assert_memory_equal(s, v, n * sizeof *s);
                for (size_t k = 0; k < n; k++)
                    s[k] = tsafe_sub_mod(s[k], tsafe_mul_shoup(a[k], w[k], wp[k], q), q);
                assert_int_equal(tsafe_avx2_vec_sub_mul_shoup(v, v, a, w, wp, n, q), n);
                assert_memory_equal(s, v, n * sizeof *s);
            }
            tsafe_ntt_table_free(&t);
        }
        free(a);
        free(s);
        free(v);
        free(w);
        free(wp);
    }
    /* above 2^30 the table never takes the AVX2 path */
    uint64_t q;
    const uint32_t b31 = 31;
    assert_int_equal(tsafe_primes_generate(12, 1, &b31, &q), TSAFE_OK);
    tsafe_ntt_table t;
    assert_int_equal(tsafe_ntt_table_init(&t, 12, q, 1), TSAFE_OK);
    assert_int_equal(t.use_avx2, 0);
    tsafe_ntt_table_free(&t);
}

/* Scalar and the double-precision AVX2 + FMA path (primes 2^30..2^50), bit
 * for bit; its tables are built here where the dispatch took IFMA. */
static void test_avx2_fp_matches_scalar(void **state)
{
    (void)state;
    if (!tsafe_cpu_has_avx2_fma()) {
        print_message("AVX2 + FMA not available (CPU or TSAFE_DISABLE_AVX2=1): skipping\n");
        skip();
    }
    const uint32_t bits[] = {31, 36, 40, 45, 49, 50};
    for (uint32_t log_n = 4; log_n <= 16; log_n++) {
        const size_t n = (size_t)1 << log_n;
        uint64_t *a = alloc_vec(n), *s = alloc_vec(n), *v = alloc_vec(n);
        for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
            uint64_t q;
            assert_int_equal(tsafe_primes_generate(log_n, 1, &bits[i], &q), TSAFE_OK);
            assert_true(q >= TSAFE_AVX2_MAX_Q && q < TSAFE_AVX2_FP_MAX_Q);
            tsafe_ntt_table t;
            assert_int_equal(tsafe_ntt_table_init(&t, log_n, q, 1), TSAFE_OK);
            assert_int_equal(t.use_avx2_fp, !t.use_ifma);
            if (!t.fp)
                assert_non_null(t.fp = tsafe_ntt_fp_build(&t));
            for (int rep = 0; rep < (log_n <= 12 ? 3 : 1); rep++) {
                fill(a, n, q);
                if (rep == 1)
                    for (size_t k = 0; k < n; k++)
                        a[k] = q - 1;
                check_path(&t, tsafe_ntt_forward_avx2_fp, tsafe_ntt_inverse_avx2_fp, a, s, v);
            }
            tsafe_ntt_table_free(&t);
        }
        free(a);
        free(s);
        free(v);
    }
}

/* ------------------------------------------------------- coset reads */

/* Coset reads of the forward NTT of a known polynomial must give back its
 * coefficients (the reference is the polynomial itself), for the sealed
 * blocks' shapes (reads o*m + m - 1), sparse subsets of a coset, one
 * position, and every kind of modulus (IFMA, scalar, 30 to 60 bits). */
static void check_coset(uint32_t log_n, uint32_t bits, int allow_ifma)
{
    const size_t n = (size_t)1 << log_n;
    uint64_t q = prime_of(log_n, bits);
    tsafe_ntt_table t[2];
    assert_int_equal(tsafe_ntt_table_init(&t[0], log_n, q, allow_ifma), TSAFE_OK);
    assert_int_equal(tsafe_ntt_table_init(&t[1], log_n, prime_of(log_n, 30), allow_ifma),
                     TSAFE_OK);
    tsafe_coset_cache *cc = NULL;
    uint64_t *a = alloc_vec(n), *fa = alloc_vec(n), *scratch = alloc_vec(n);
    uint32_t pos[TSAFE_COSET_MAX_R];
    uint64_t out[TSAFE_COSET_MAX_R];
    for (int trial = 0; trial < 12; trial++) {
        if (trial % 6 == 0) { /* a cache holds 8 shapes: a fresh one now and then */
            tsafe_coset_cache_free(cc);
            assert_int_equal(tsafe_coset_cache_create(t, 2, &cc), TSAFE_OK);
        }
        uint32_t limb = (uint32_t)(trial & 1);
        uint64_t ql = t[limb].mod.q;
        fill(a, n, ql);
        memcpy(fa, a, n * sizeof *a);
        tsafe_ntt_forward(&t[limb], fa);
        /* m from N/64 up to N (trial 0: the smallest allowed) */
        uint32_t lr = log_n < 6 ? log_n : 6;
        uint32_t log_r = trial == 0 ? lr : (uint32_t)(rnd() % (lr + 1));
        uint32_t m = (uint32_t)(n >> log_r), r = 1u << log_r;
        uint32_t c = trial % 3 == 0 ? m - 1 : (uint32_t)(rnd() % m);
        size_t np = 0;
        for (uint32_t l = 0; l < r; l++) /* trial 0..3: every row of the block */
            if (trial < 4 || rnd() % 3 == 0)
                pos[np++] = c + m * l;
        if (np == 0)
            pos[np++] = c + m * (uint32_t)(rnd() % r);
        assert_int_equal(tsafe_coset_read(cc, limb, fa, pos, np, out, scratch), TSAFE_OK);
        for (size_t k = 0; k < np; k++)
            assert_int_equal(out[k], a[pos[k]]);
    }
    /* positions that are no coset of small R, and positions out of range */
    if (n >= 256) {
        pos[0] = 0, pos[1] = 1; /* m = 1: R = N > 64 */
        assert_int_equal(tsafe_coset_read(cc, 0, fa, pos, 2, out, scratch),
                         TSAFE_E_UNSUPPORTED);
    }
    pos[0] = (uint32_t)n;
    assert_int_equal(tsafe_coset_read(cc, 0, fa, pos, 1, out, scratch), TSAFE_E_RANGE);
    assert_int_equal(tsafe_coset_read(cc, 2, fa, pos, 1, out, scratch), TSAFE_E_RANGE);
    free(a);
    free(fa);
    free(scratch);
    tsafe_coset_cache_free(cc);
    tsafe_ntt_table_free(&t[0]);
    tsafe_ntt_table_free(&t[1]);
}

static void test_coset_reads(void **state)
{
    (void)state;
    const uint32_t bits[] = {30, 49, 60};
    for (size_t b = 0; b < 3; b++) {
        check_coset(12, bits[b], 1);
        check_coset(12, bits[b], 0);
        check_coset(5, bits[b], 1);
    }
    check_coset(15, 49, 1);
}

/* A full cache (eight shapes) answers TSAFE_E_UNSUPPORTED for a ninth,
 * and what it holds keeps working. */
static void test_coset_cache_full(void **state)
{
    (void)state;
    const uint32_t log_n = 10;
    const size_t n = (size_t)1 << log_n;
    tsafe_ntt_table t;
    assert_int_equal(tsafe_ntt_table_init(&t, log_n, prime_of(log_n, 49), 1), TSAFE_OK);
    tsafe_coset_cache *cc;
    assert_int_equal(tsafe_coset_cache_create(&t, 1, &cc), TSAFE_OK);
    uint64_t *a = alloc_vec(n), *fa = alloc_vec(n), *scratch = alloc_vec(n), out[1];
    fill(a, n, t.mod.q);
    memcpy(fa, a, n * sizeof *a);
    tsafe_ntt_forward(&t, fa);
    for (uint32_t c = 0; c < 9; c++) { /* one position each: m = N, residue c */
        uint32_t pos = c;
        tsafe_status st = tsafe_coset_read(cc, 0, fa, &pos, 1, out, scratch);
        if (c < 8) {
            assert_int_equal(st, TSAFE_OK);
            assert_int_equal(out[0], a[c]);
        } else
            assert_int_equal(st, TSAFE_E_UNSUPPORTED);
    }
    uint32_t pos = 3;
    assert_int_equal(tsafe_coset_read(cc, 0, fa, &pos, 1, out, scratch), TSAFE_OK);
    assert_int_equal(out[0], a[3]);
    tsafe_coset_cache_free(cc);
    assert_int_equal(tsafe_coset_cache_create(&t, 0, &cc), TSAFE_E_RANGE);
    assert_null(cc);
    tsafe_coset_cache_free(NULL);
    free(a);
    free(fa);
    free(scratch);
    tsafe_ntt_table_free(&t);
}

int main(void)
{
    tsafe_test_rng_init("ring_ntt");
    printf("[ info     ] IFMA %s, AVX2 %s\n",
           tsafe_cpu_has_ifma() ? "available" : "not available",
           tsafe_cpu_has_avx2() ? "available" : "not available");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ntt_small_n_full),
        cmocka_unit_test(test_ntt_product_sizes),
        cmocka_unit_test(test_ntt_presets),
        cmocka_unit_test(test_ntt_edge_patterns),
        cmocka_unit_test(test_ntt_table_errors),
        cmocka_unit_test(test_vec_ops),
        cmocka_unit_test(test_ifma_matches_scalar),
        cmocka_unit_test(test_avx2_matches_scalar),
        cmocka_unit_test(test_avx2_fp_matches_scalar),
        cmocka_unit_test(test_coset_reads),
        cmocka_unit_test(test_coset_cache_full),
    };
    return cmocka_run_group_tests_name("ring_ntt", tests, NULL, NULL);
}
