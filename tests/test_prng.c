/* The protocol's ChaCha20 stream (libtensafe-he-core/src/common/prng.c):
 * the RFC 8439 section 2.3.2 known-answer block, and the samplers against
 * their distributions (chi-square at 1 - 5e-7, so a false alarm is rare and a
 * biased sampler is not): uniform mod q with the 8-byte and the tight
 * draws, the centred binomial (k = 21) both ways, ternary. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "../libtensafe-he-core/src/common/prng.h"
#include "support/tsafe_test_rng.h"

/* RFC 8439 2.3.2: key 00..1f, counter 1, nonce 00:00:00:09:00:00:00:4a:
 * 00:00:00:00. The stream here is the original ChaCha20 (64-bit counter,
 * 64-bit nonce): the same state when the counter's high word carries the
 * first nonce word. */
static void chacha_known_answer(void **state)
{
    (void)state;
    static const uint8_t want[64] = {
        0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f, 0xa3,
        0x20, 0x71, 0xc4, 0xc7, 0xd1, 0xf4, 0xc7, 0x33, 0xc0, 0x68, 0x03, 0x04, 0x22,
        0xaa, 0x9a, 0xc3, 0xd4, 0x6c, 0x4e, 0xd2, 0x82, 0x64, 0x46, 0x07, 0x9f, 0xaa,
        0x09, 0x14, 0xc2, 0xd7, 0x05, 0xd9, 0x8b, 0x02, 0xa2, 0xb5, 0x12, 0x9c, 0xd1,
        0xde, 0x16, 0x4e, 0xb9, 0xcb, 0xd0, 0x83, 0xe8, 0xa2, 0x50, 0x3c, 0x4e};
    uint8_t key[32], got[64];
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)i;
    assert_int_equal(tsafe_sodium_ready(), TSAFE_OK);
    tsafe_prng p;
    tsafe_prng_init(&p, key, 0x4a000000ull); /* nonce bytes 00 00 00 4a 00 00 00 00 */
    p.block = 1 | (0x09000000ull << 32);
    tsafe_prng_bytes(&p, got, sizeof got);
    assert_memory_equal(got, want, sizeof want);
    tsafe_prng_clear(&p);
}

/* The stream comes from OpenSSL's ChaCha20 when it can, libsodium's
 * otherwise: both must give libsodium's 64-bit-nonce stream, at any block
 * counter (the low word wrapping included) and across refills. */
static void openssl_stream_matches_libsodium(void **state)
{
    (void)state;
    assert_int_equal(tsafe_sodium_ready(), TSAFE_OK);
    const uint64_t blocks[] = {0, 1, 0xfffffffdull, 0x123456789aull, 0x7fffffffffffff00ull};
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
        uint8_t key[32], nonce[8];
        for (int i = 0; i < 32; i++)
            key[i] = (uint8_t)tsafe_test_below(256);
        uint64_t stream = tsafe_test_u64();
        for (int i = 0; i < 8; i++)
            nonce[i] = (uint8_t)(stream >> (8 * i));
        enum { LEN = 3 * 4096 + 100 };
        static uint8_t got[LEN], want[LEN];
        tsafe_prng p;
        tsafe_prng_init(&p, key, stream);
        p.block = blocks[b];
        tsafe_prng_bytes(&p, got, 10); /* odd pieces: several refills */
        tsafe_prng_bytes(&p, got + 10, LEN - 10);
        memset(want, 0, sizeof want);
        crypto_stream_chacha20_xor_ic(want, want, LEN, nonce, blocks[b], key);
        assert_memory_equal(got, want, LEN);
        tsafe_prng_clear(&p);
    }
}

static void seeded(tsafe_prng *p, uint64_t stream)
{
    uint8_t seed[32];
    for (int i = 0; i < 32; i++)
        seed[i] = (uint8_t)tsafe_test_below(256);
    tsafe_prng_init(p, seed, stream);
}

/* chi-square of counts against expected, compared with the 1 - 5e-7
 * point of chi-square with dof degrees (Wilson-Hilferty): a CI run with
 * random seeds must not fail one time in a few thousand on chance. */
static void chi_square_ok(const double *count, const double *expect, int bins,
                          const char *what)
{
    double chi = 0;
    for (int b = 0; b < bins; b++)
        chi += (count[b] - expect[b]) * (count[b] - expect[b]) / expect[b];
    double k = bins - 1, z = 4.892; /* 1 - 5e-7 one-sided */
    double crit = k * pow(1 - 2 / (9 * k) + z * sqrt(2 / (9 * k)), 3);
    printf("# %s: chi2 %.1f over %d bins (1 - 5e-7: %.1f)\n", what, chi, bins, crit);
    assert_true(chi < crit);
}

static void check_uniform(uint64_t q, int tight)
{
    enum { BINS = 64, N = 200000 };
    tsafe_prng p;
    seeded(&p, 7);
    uint64_t *v = malloc(N * sizeof *v);
    if (tight)
        tsafe_prng_uniform_mod_tight(&p, q, v, N);
    else
        tsafe_prng_uniform_mod(&p, q, v, N);
    double count[BINS] = {0}, expect[BINS];
    for (int i = 0; i < N; i++) {
        assert_true(v[i] < q);
        count[(int)((double)v[i] / (double)q * BINS)] += 1;
    }
    for (int b = 0; b < BINS; b++)
        expect[b] = (double)N / BINS;
    char what[64];
    snprintf(what, sizeof what, "uniform mod a %d-bit q (%s)", 64 - __builtin_clzll(q),
             tight ? "tight" : "8-byte");
    chi_square_ok(count, expect, BINS, what);
    free(v);
    tsafe_prng_clear(&p);
}

static void uniform_mod_is_uniform(void **state)
{
    (void)state;
    /* primes of the sealed contexts' sizes; one just above a power of two
     * (half the candidates rejected) */
    check_uniform(562949953216513ull, 1); /* a 49-bit prime = 1 mod 8192 */
    check_uniform(1073479681ull, 1);      /* a 30-bit prime = 1 mod 8192 */
    check_uniform((1ull << 40) + 15, 1);
    check_uniform(1073479681ull, 0);
}

static double binom(int k, int n)
{
    double r = 1;
    for (int i = 1; i <= k; i++)
        r = r * (n - k + i) / i;
    return r;
}

static void check_cbd(int tight)
{
    enum { N = 400000 };
    tsafe_prng p;
    seeded(&p, 11);
    int8_t *v = malloc(N);
    if (tight)
        tsafe_prng_cbd_tight(&p, v, N);
    else
        tsafe_prng_cbd(&p, v, N);
    /* a - b of two Binomial(21, 1/2): P(d) = C(42, 21 + d) / 2^42; bins
     * |d| <= 8 each, the tails pooled */
    double count[19] = {0}, expect[19] = {0};
    for (int i = 0; i < N; i++) {
        assert_true(v[i] >= -21 && v[i] <= 21);
        int d = v[i] < -9 ? -9 : v[i] > 9 ? 9 : v[i];
        count[d + 9] += 1;
    }
    for (int d = -21; d <= 21; d++) {
        int b = d < -9 ? -9 : d > 9 ? 9 : d;
        expect[b + 9] += N * binom(21 + d, 42) / ldexp(1.0, 42);
    }
    chi_square_ok(count, expect, 19, tight ? "binomial k=21 (tight)" : "binomial k=21 (8-byte)");
    free(v);
    tsafe_prng_clear(&p);
}

static void binomial_matches_pmf(void **state)
{
    (void)state;
    check_cbd(1);
    check_cbd(0);
}

static void same_position_then_clear(tsafe_prng *a, tsafe_prng *r);

/* The ternary draw against a reference from the raw stream: each byte
 * below 243 gives five trits, least significant first; the bytes it used
 * (the last one whole) are consumed, across refills, for odd lengths. */
static void ternary_matches_stream_reference(void **state)
{
    (void)state;
    const size_t lens[] = {1, 4, 5, 6, 4096, 9001 + (size_t)tsafe_test_below(64)};
    for (size_t c = 0; c < sizeof lens / sizeof *lens; c++) {
        size_t n = lens[c];
        tsafe_prng p, r;
        seeded(&p, 20 + (int)c);
        r = p; /* the same seed and stream */
        int8_t *got = malloc(n), *want = malloc(n);
        assert_true(got && want);
        tsafe_prng_ternary(&p, got, n);
        for (size_t i = 0; i < n;) {
            uint8_t b;
            tsafe_prng_bytes(&r, &b, 1);
            for (unsigned v = b, t = 0; b < 243 && t < 5 && i < n; t++, v /= 3)
                want[i++] = (int8_t)((int)(v % 3) - 1);
        }
        assert_memory_equal(got, want, n);
        same_position_then_clear(&p, &r);
        free(got);
        free(want);
    }
}

static void ternary_is_uniform(void **state)
{
    (void)state;
    enum { N = 300000 };
    tsafe_prng p;
    seeded(&p, 13);
    int8_t *v = malloc(N);
    tsafe_prng_ternary(&p, v, N);
    double count[3] = {0}, expect[3] = {N / 3.0, N / 3.0, N / 3.0};
    for (int i = 0; i < N; i++) {
        assert_true(v[i] >= -1 && v[i] <= 1);
        count[v[i] + 1] += 1;
    }
    chi_square_ok(count, expect, 3, "ternary");
    free(v);
    tsafe_prng_clear(&p);
}

/* The tight draws straddle the 4 KiB buffer refill: same seed, same
 * values however the requests are split. */
static void tight_draws_are_deterministic(void **state)
{
    (void)state;
    uint8_t seed[32] = {1, 2, 3};
    tsafe_prng a, b;
    tsafe_prng_init(&a, seed, 5);
    tsafe_prng_init(&b, seed, 5);
    enum { N = 5000 };
    uint64_t x[N], y[N];
    tsafe_prng_uniform_mod_tight(&a, 562949953216513ull, x, N);
    for (int i = 0; i < N; i += 7)
        tsafe_prng_uniform_mod_tight(&b, 562949953216513ull, y + i, N - i < 7 ? N - i : 7);
    assert_memory_equal(x, y, sizeof x);
    tsafe_prng_clear(&a);
    tsafe_prng_clear(&b);
}

/* Both streams stand at the same byte: the draws consumed what the
 * reference did. */
static void same_position_then_clear(tsafe_prng *a, tsafe_prng *r)
{
    uint8_t x[16], y[16];
    tsafe_prng_bytes(a, x, sizeof x);
    tsafe_prng_bytes(r, y, sizeof y);
    assert_memory_equal(x, y, sizeof x);
    tsafe_prng_clear(a);
    tsafe_prng_clear(r);
}

/* The tight draws against a reference written from the raw stream (each
 * candidate the next ceil(bits/8) bytes, masked, kept if below q; each
 * binomial the next 6 bytes): on an AVX-512 VBMI/VPOPCNTDQ machine this
 * checks the vector kernels, eight at a time, across refills, for every
 * byte width, with frequent and rare rejections; elsewhere the scalar loop. */
/* tsafe_prng_seek / tsafe_prng_offset: a stream read from offset off
 * after a seek equals the bytes at off of one read from the start, for
 * offsets inside the first refill, at and across its 4 KiB boundary and
 * far on; the offset counts the bytes consumed. (The sealing's e1 span is
 * skipped this way and expanded elsewhere from the key and offset.) */
static void seek_matches_sequential(void **state)
{
    (void)state;
    uint8_t key[32], *all = malloc(20000), got[300];
    assert_non_null(all);
    tsafe_test_seed32(key);
    tsafe_prng a;
    tsafe_prng_init(&a, key, 0xBF12);
    assert_int_equal(tsafe_prng_offset(&a), 0);
    tsafe_prng_bytes(&a, all, 20000);
    assert_int_equal(tsafe_prng_offset(&a), 20000);
    static const uint64_t offs[] = {0, 1, 63, 64, 863, 4095, 4096, 4097, 8191, 12345, 19000};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        tsafe_prng b;
        tsafe_prng_init(&b, key, 0xBF12);
        tsafe_prng_u64(&b); /* a read first: seek must not depend on the state */
        tsafe_prng_seek(&b, offs[i]);
        assert_int_equal(tsafe_prng_offset(&b), offs[i]);
        size_t n = 20000 - offs[i] < sizeof got ? 20000 - offs[i] : sizeof got;
        tsafe_prng_bytes(&b, got, n);
        assert_memory_equal(got, all + offs[i], n);
        assert_int_equal(tsafe_prng_offset(&b), offs[i] + n);
        tsafe_prng_clear(&b);
    }
    tsafe_prng_clear(&a);
    free(all);
}

/* tsafe_prng_reserve: a refill of fewer bytes leaves the stream as it
 * was. With every hint size (1 byte to past a whole buffer) before the
 * first refill and before a seek, each sampler then reads the bytes (and
 * the offsets) of an unhinted reader, past the short fill into whole
 * refills; a reserve that fetched other bytes, or a reader that ran past
 * the short fill into stale buffer bytes, fails it. */
static void reserve_keeps_the_stream(void **state)
{
    (void)state;
    uint8_t key[32];
    tsafe_test_seed32(key);
    static const size_t hints[] = {1, 63, 64, 65, 200, 1000, 1024, 4095, 4096, 5000};
    for (size_t h = 0; h < sizeof hints / sizeof hints[0]; h++)
        for (int kind = 0; kind < 4; kind++) {
            tsafe_prng a, b;
            tsafe_prng_init(&a, key, 0xBF13);
            tsafe_prng_init(&b, key, 0xBF13);
            tsafe_prng_reserve(&b, hints[h]);
            if (kind == 3) { /* past a seek, as the lean sealing draws */
                tsafe_prng_seek(&a, 24611);
                tsafe_prng_reserve(&b, hints[h]);
                tsafe_prng_seek(&b, 24611);
            }
            int8_t ta[5000], tb[5000];
            uint64_t ua[700], ub[700];
            switch (kind) {
            case 0:
            case 3:
                tsafe_prng_ternary(&a, ta, 5000);
                tsafe_prng_ternary(&b, tb, 5000);
                assert_memory_equal(ta, tb, 5000);
                break;
            case 1:
                tsafe_prng_uniform_mod_tight(&a, (1ull << 49) - 81, ua, 700);
                tsafe_prng_uniform_mod_tight(&b, (1ull << 49) - 81, ub, 700);
                assert_memory_equal(ua, ub, sizeof ua);
                break;
            default:
                tsafe_prng_cbd_tight(&a, ta, 800);
                tsafe_prng_cbd_tight(&b, tb, 800);
                assert_memory_equal(ta, tb, 800);
                for (int i = 0; i < 300; i++)
                    assert_true(tsafe_prng_u64(&a) == tsafe_prng_u64(&b));
            }
            assert_true(tsafe_prng_offset(&a) == tsafe_prng_offset(&b));
            tsafe_prng_clear(&a);
            tsafe_prng_clear(&b);
        }
}

static void tight_draws_match_stream_reference(void **state)
{
    (void)state;
    enum { N = 3001 };
    static uint64_t got[N];
    static int8_t cb[N];
    uint8_t seed[32];
    for (unsigned bits = 1; bits <= 64; bits++) {
        for (int kind = 0; kind < 2; kind++) {
            uint64_t top = bits == 64 ? ~0ull : (1ull << bits) - 1;
            /* kind 0: q near 2^bits (rare rejections); 1: just over half */
            uint64_t q = kind == 0 ? top - (bits > 8 ? 12345 % (top >> 4) : 0)
                                   : (bits == 1 ? 1 : (1ull << (bits - 1)) + 1);
            for (int i = 0; i < 32; i++)
                seed[i] = (uint8_t)tsafe_test_below(256);
            tsafe_prng a, r;
            tsafe_prng_init(&a, seed, bits);
            tsafe_prng_init(&r, seed, bits);
            tsafe_prng_uniform_mod_tight(&a, q, got, N);
            unsigned nb = (bits + 7) / 8;
            for (size_t i = 0; i < N;) {
                uint8_t b[8] = {0};
                tsafe_prng_bytes(&r, b, nb);
                uint64_t v = 0;
                for (unsigned k = 0; k < 8; k++)
                    v |= (uint64_t)b[k] << (8 * k);
                v &= top;
                if (v < q) {
                    if (got[i] != v)
                        fail_msg("bits %u q %llu: value %zu differs", bits,
                                 (unsigned long long)q, i);
                    i++;
                }
            }
            same_position_then_clear(&a, &r);
        }
    }
    for (int i = 0; i < 32; i++)
        seed[i] = (uint8_t)tsafe_test_below(256);
    tsafe_prng a, r;
    tsafe_prng_init(&a, seed, 77);
    tsafe_prng_init(&r, seed, 77);
    tsafe_prng_cbd_tight(&a, cb, 5);        /* odd offsets into the buffer */
    tsafe_prng_cbd_tight(&a, cb + 5, N - 5);
    for (size_t i = 0; i < N; i++) {
        uint8_t b[6];
        tsafe_prng_bytes(&r, b, 6);
        int lo = 0, hi = 0;
        for (int k = 0; k < 21; k++) {
            lo += (b[k / 8] >> (k % 8)) & 1;
            hi += (b[(k + 21) / 8] >> ((k + 21) % 8)) & 1;
        }
        if (cb[i] != lo - hi)
            fail_msg("binomial %zu: %d, want %d", i, cb[i], lo - hi);
    }
    same_position_then_clear(&a, &r);
    printf("# tight draws: %s kernels\n",
           tsafe_cpu_has_avx512_sampling() ? "AVX-512 (VBMI, VPOPCNTDQ)" : "scalar");
}

int main(void)
{
    tsafe_test_rng_init("prng");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chacha_known_answer),
        cmocka_unit_test(openssl_stream_matches_libsodium),
        cmocka_unit_test(uniform_mod_is_uniform),
        cmocka_unit_test(binomial_matches_pmf),
        cmocka_unit_test(ternary_is_uniform),
        cmocka_unit_test(ternary_matches_stream_reference),
        cmocka_unit_test(tight_draws_are_deterministic),
        cmocka_unit_test(tight_draws_match_stream_reference),
        cmocka_unit_test(seek_matches_sequential),
        cmocka_unit_test(reserve_keeps_the_stream),
    };
    return cmocka_run_group_tests_name("prng", tests, NULL, NULL);
}
