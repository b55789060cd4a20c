/* A model of the checked-read fold that docs/MALICIOUS_CLIENT.md proposes
 * against F2 (a malicious client's round-2 share offsets), with the
 * attacks run against it. Not the protocol: its algebra in the clear.
 *
 * Round 1 would also return c checked reads f_e = K u~ (K: c x r, a fresh
 * negacyclic row convolution of round 1's reads by a polynomial W with
 * entries in [-g, g], i.e. one more product of the block's ciphertext);
 * round 2 would apply [B_q - H K | H] (H: d_out x c, fresh, entries in
 * [-h, h]) to the client's (f, f_e), so each output gains
 * H (u~_e - K u~): the reads' rounding for an honest client, a fresh
 * mask over any offset a cheating one adds. Everything below is mod M,
 * round 2's plaintext modulus (t2 = 2^33 today), with the client's
 * choices (x = 0: its honest part is zero) and the server's draws made
 * here; the ring, the masks R (which cancel exactly mod M) and the
 * encryption are left out.
 *
 * What it shows (numbers printed, each asserted):
 *  - without the fold the shift attack reads a column of B_q exactly from
 *    one token (F2 as test_sealed_adversaries runs it on the protocol);
 *  - with it, averaging shifted tokens, and reading one column of H
 *    through offsets of the checked reads, leave a relative error about
 *    rho / sqrt(T) after T tokens (rho = 3: the mask's size over B_q's);
 *  - the fold's cost in precision: the honest output noise's variance
 *    grows by the factor the note's model gives;
 *  - but a linear fold binds the share only as far as the client cannot
 *    guess K: a shift by 2^-1 mod M projects the output on X mod 2, and
 *    there only the parities of K's column count (2^c choices), so B_q
 *    mod 2 recurs about every 2^c tokens and is read -- for M = 2^33 and
 *    for an odd prime M alike (pinned here). B_q mod m costs m^c tokens
 *    a column: c checks give about c bits of security, not c log2(2g+1).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/tsafe_test_rng.h"

#define D_OUT 2048
#define RANK 32
#define ROWS1 32   /* round 1's rows per block at d_in = 2048 (chunk 128) */
#define CHECKS 8
#define G_MAX 31
#define B_RMS 2048.0 /* b_bits 14: rows of B_q at rms b_max / 4 */
#define Z_SD 1.27    /* round 2's smoothing noise at r = 32 */

typedef struct {
    uint64_t M;      /* modulus */
    int64_t h;       /* H's entries in [-h, h] */
    int fold;        /* 0: today's round 2 */
    int64_t *B;      /* D_OUT x RANK */
    int64_t *H;      /* D_OUT x CHECKS, per token */
    int64_t K[CHECKS][RANK];
} model;

static double gauss(void)
{
    double u1 = tsafe_test_uniform(1e-300, 1.0), u2 = tsafe_test_uniform(0.0, 1.0);
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static int64_t uniform_int(int64_t m)
{
    return (int64_t)tsafe_test_below((uint64_t)(2 * m + 1)) - m;
}

/* a mod M as the representative in (-M/2, M/2] */
static int64_t centred(__int128 a, uint64_t M)
{
    __int128 r = a % (__int128)M;
    if (r < 0)
        r += M;
    return r > (__int128)(M / 2) ? (int64_t)(r - M) : (int64_t)r;
}

/* h for rho = 3: c E[H^2] E[G^2] = rho^2 E[b^2] */
static int64_t h_for_rho(double rho)
{
    double eg2 = G_MAX * (G_MAX + 1) / 3.0;
    double eh2 = rho * rho * B_RMS * B_RMS / (CHECKS * eg2);
    return (int64_t)lround((-1 + sqrt(1 + 12 * eh2)) / 2);
}

static void model_init(model *m, uint64_t M, int fold)
{
    memset(m, 0, sizeof *m);
    m->M = M;
    m->fold = fold;
    m->h = h_for_rho(3.0);
    m->B = malloc(D_OUT * RANK * sizeof *m->B);
    m->H = calloc(D_OUT * CHECKS, sizeof *m->H);
    assert_non_null(m->B);
    assert_non_null(m->H);
    for (size_t i = 0; i < (size_t)D_OUT * RANK; i++)
        m->B[i] = lround(B_RMS * gauss());
}

static void model_free(model *m)
{
    free(m->B);
    free(m->H);
}

/* The server's fresh draws of a token: W (hence K, negacyclic over the
 * block's rows: K[c][o] = w[c - o], or -w[c - o + rows] when o > c) and H. */
static void fresh_token(model *m)
{
    int64_t w[ROWS1];
    for (int i = 0; i < ROWS1; i++)
        w[i] = uniform_int(G_MAX);
    for (int c = 0; c < CHECKS; c++)
        for (int o = 0; o < RANK; o++)
            m->K[c][o] = o <= c ? w[c - o] : -w[c - o + ROWS1];
    for (size_t i = 0; m->fold && i < (size_t)D_OUT * CHECKS; i++)
        m->H[i] = uniform_int(m->h);
}

/* Round 2 on the client's inputs (u~, u~_e), after fresh_token: y = B u~
 * + H (u~_e - K u~) + round(B z) mod M, centred. */
static void round2(const model *m, const int64_t *ut, const int64_t *ue, int64_t *y)
{
    double z[RANK];
    for (int k = 0; k < RANK; k++)
        z[k] = Z_SD * gauss();
    __int128 chk[CHECKS];
    for (int c = 0; m->fold && c < CHECKS; c++) {
        chk[c] = ue[c];
        for (int k = 0; k < RANK; k++)
            chk[c] -= (__int128)m->K[c][k] * ut[k];
        chk[c] %= (__int128)m->M;
    }
    for (int o = 0; o < D_OUT; o++) {
        const int64_t *b = m->B + (size_t)o * RANK;
        __int128 acc = 0;
        double bz = 0;
        for (int k = 0; k < RANK; k++) {
            acc += (__int128)b[k] * ut[k];
            bz += (double)b[k] * z[k];
        }
        for (int c = 0; m->fold && c < CHECKS; c++)
            acc += (__int128)m->H[(size_t)o * CHECKS + c] * chk[c];
        y[o] = centred(acc + llround(bz), m->M);
    }
}

static double rel_error(const model *m, int j, const double *est)
{
    double num = 0, den = 0;
    for (int o = 0; o < D_OUT; o++) {
        double b = (double)m->B[(size_t)o * RANK + j];
        num += (est[o] - b) * (est[o] - b);
        den += b * b;
    }
    return sqrt(num / den);
}

static int exact_entries(const model *m, int j, const double *est)
{
    int n = 0;
    for (int o = 0; o < D_OUT; o++)
        n += llround(est[o]) == m->B[(size_t)o * RANK + j];
    return n;
}

/* Shifts D e_j (offsets E of the checked reads) over T tokens, x = 0,
 * averaged: the estimate of column j. */
static void shift_attack(model *m, int j, int64_t D, const int64_t *E, int T, double *est)
{
    int64_t ut[RANK] = {0}, ue[CHECKS] = {0}, y[D_OUT];
    ut[j] = D;
    for (int c = 0; c < CHECKS; c++)
        ue[c] = E ? E[c] : 0;
    memset(est, 0, D_OUT * sizeof *est);
    for (int t = 0; t < T; t++) {
        fresh_token(m);
        round2(m, ut, ue, y);
        for (int o = 0; o < D_OUT; o++)
            est[o] += (double)y[o] / (double)D / T;
    }
}

static void unfolded_shift_reads_column(void **state)
{
    (void)state;
    model m;
    model_init(&m, 1ull << 33, 0);
    double est[D_OUT];
    shift_attack(&m, 5, 1 << 18, NULL, 1, est);
    int n = exact_entries(&m, 5, est);
    printf("# no fold: one shifted token reads %d/%d entries of column 5 exactly\n", n, D_OUT);
    assert_int_equal(n, D_OUT);
    model_free(&m);
}

static void folded_shift_averages_slowly(void **state)
{
    (void)state;
    model m;
    model_init(&m, 1ull << 33, 1);
    double est[D_OUT];
    int T = 2000;
    shift_attack(&m, 5, 1 << 16, NULL, T, est);
    double rel = rel_error(&m, 5, est);
    int n = exact_entries(&m, 5, est);
    printf("# fold (c %d, g %d, h %lld): %d shifted tokens give column 5 to %.3g relative "
           "(rho/sqrt(T) = %.3g), %d/%d entries exact by chance\n",
           CHECKS, G_MAX, (long long)m.h, T, rel, 3.0 / sqrt(T), n, D_OUT);
    assert_true(rel > 0x1p-10 * 16);
    assert_true(rel > 0.5 * 3.0 / sqrt(T) && rel < 2.0 * 3.0 / sqrt(T));
    assert_true(n < D_OUT / 16);
    model_free(&m);
}

/* Offsets E1 e_1 of the checked reads, above the shift's span, read
 * H's first column (one digit fits); the client then fits K_1j by least
 * squares against a delta-level estimate of b_j (2^-10 relative) and
 * removes that part of the mask. */
static void folded_digit_attack_reads_one_column_of_h(void **state)
{
    (void)state;
    model m;
    model_init(&m, 1ull << 33, 1);
    const int j = 7, T = 2000;
    const int64_t D = 1 << 8, E1 = (int64_t)1 << 23;
    int64_t ut[RANK] = {0}, ue[CHECKS] = {0}, y[D_OUT];
    ut[j] = D;
    ue[0] = E1;
    double *bhat = malloc(D_OUT * sizeof *bhat), *est = calloc(D_OUT, sizeof *est);
    assert_non_null(bhat);
    assert_non_null(est);
    for (int o = 0; o < D_OUT; o++)
        bhat[o] = (double)m.B[(size_t)o * RANK + j] + B_RMS * 0x1p-10 * gauss();
    int h_read = 0;
    for (int t = 0; t < T; t++) {
        fresh_token(&m);
        round2(&m, ut, ue, y);
        double sxy = 0, sxx = 0;
        int64_t h1[D_OUT];
        for (int o = 0; o < D_OUT; o++) {
            h1[o] = llround((double)y[o] / (double)E1);
            h_read += h1[o] == m.H[(size_t)o * CHECKS];
            double res = (double)(y[o] - h1[o] * E1) / D - bhat[o];
            sxy += res * h1[o];
            sxx += (double)h1[o] * h1[o];
        }
        int64_t k1 = sxx > 0 ? llround(-sxy / sxx) : 0;
        for (int o = 0; o < D_OUT; o++)
            est[o] += ((double)(y[o] - h1[o] * E1) / D + (double)(h1[o] * k1)) / T;
    }
    double rel = rel_error(&m, j, est);
    printf("# digit attack: H's first column read %.1f %% of the time; %d tokens give "
           "column %d to %.3g relative (rho sqrt(7/8)/sqrt(T) = %.3g)\n",
           100.0 * h_read / ((double)T * D_OUT), T, j, rel, 3.0 * sqrt(7.0 / 8) / sqrt(T));
    assert_true(h_read > 0.9 * T * D_OUT); /* the client does read it */
    assert_true(rel > 0.5 * 3.0 * sqrt(7.0 / 8) / sqrt(T));
    assert_true(rel > 0x1p-10 * 16);
    free(bhat);
    free(est);
    model_free(&m);
}

/* Honest tokens: u~ and u~_e stochastic roundings of v and K v; the
 * output noise's variance with and without the fold. */
static double honest_noise_var(model *m, int T)
{
    double sum = 0;
    int64_t ut[RANK], ue[CHECKS], y[D_OUT];
    double v[RANK];
    for (int t = 0; t < T; t++) {
        fresh_token(m);
        for (int k = 0; k < RANK; k++) {
            v[k] = 4096.0 * gauss();
            double f = floor(v[k]);
            ut[k] = (int64_t)f + (tsafe_test_uniform(0, 1) < v[k] - f);
        }
        for (int c = 0; c < CHECKS; c++) {
            double kv = 0;
            for (int k = 0; k < RANK; k++)
                kv += (double)m->K[c][k] * v[k];
            double f = floor(kv);
            ue[c] = (int64_t)f + (tsafe_test_uniform(0, 1) < kv - f);
        }
        round2(m, ut, ue, y);
        for (int o = 0; o < D_OUT; o++) {
            double ref = 0;
            for (int k = 0; k < RANK; k++)
                ref += (double)m->B[(size_t)o * RANK + k] * v[k];
            sum += ((double)y[o] - ref) * ((double)y[o] - ref);
        }
    }
    return sum / ((double)T * D_OUT);
}

static void fold_precision_cost(void **state)
{
    (void)state;
    model a, b;
    model_init(&a, 1ull << 33, 0);
    model_init(&b, 1ull << 33, 1);
    memcpy(b.B, a.B, (size_t)D_OUT * RANK * sizeof *a.B);
    double v0 = honest_noise_var(&a, 200), v1 = honest_noise_var(&b, 200);
    /* the model: stochastic rounding of a uniform fraction has variance
     * 1/6; B's part r E[b^2] (1/6 + sd^2), the fold's c E[H^2] (1/6 +
     * E[|K_c|^2] / 6) with E[|K_c|^2] = r E[G^2] */
    double eh2 = b.h * (b.h + 1) / 3.0, eg2 = G_MAX * (G_MAX + 1) / 3.0;
    double pred = 1 + CHECKS * eh2 * (1.0 / 6 + RANK * eg2 / 6) /
                          (RANK * B_RMS * B_RMS * (1.0 / 6 + Z_SD * Z_SD));
    printf("# honest output noise variance: fold/no fold %.3f (model %.3f), sd %.0f -> %.0f\n",
           v1 / v0, pred, sqrt(v0), sqrt(v1));
    assert_true(fabs(v1 / v0 - pred) < 0.15 * pred);
    model_free(&a);
    model_free(&b);
}

/* The modular projection: shift D e_j with D = 2^-1 mod M (M/2 for a
 * power of two) and guess the parities of K's column j (2^c choices) as
 * offsets D gamma of the checked reads. The output is D X mod M with X =
 * b_j + H (gamma - K_j) an integer vector: its top bit is X mod 2, which a
 * right guess leaves equal to b_j mod 2 (the same vector each time) and a
 * wrong one makes a fresh pseudo-random vector. The most frequent vector
 * of T tokens; returns its count, *match: whether it is b_j mod 2. */
typedef struct {
    uint64_t hash;
    int t;
} vec_hash;

static int by_hash(const void *a, const void *b)
{
    uint64_t x = ((const vec_hash *)a)->hash, y = ((const vec_hash *)b)->hash;
    return x < y ? -1 : x > y;
}

static int parity_attack(model *m, int j, int T, int *match)
{
    int64_t half = (int64_t)((m->M + 1) / 2);
    int64_t ut[RANK] = {0}, ue[CHECKS], y[D_OUT];
    ut[j] = half;
    uint8_t(*vec)[D_OUT] = malloc((size_t)T * sizeof *vec);
    vec_hash *hs = malloc((size_t)T * sizeof *hs);
    assert_non_null(vec);
    assert_non_null(hs);
    for (int t = 0; t < T; t++) {
        fresh_token(m);
        uint64_t guess = tsafe_test_below(1u << CHECKS), h = 1469598103934665603ull;
        for (int c = 0; c < CHECKS; c++)
            ue[c] = (guess >> c & 1) ? half : 0;
        round2(m, ut, ue, y);
        for (int o = 0; o < D_OUT; o++) {
            vec[t][o] = (uint64_t)llabs(y[o]) > m->M / 4;
            h = (h ^ vec[t][o]) * 1099511628211ull; /* FNV-1a */
        }
        hs[t] = (vec_hash){h, t};
    }
    qsort(hs, (size_t)T, sizeof *hs, by_hash);
    int best = 0, best_t = 0;
    for (int a = 0, b; a < T; a = b) {
        for (b = a; b < T && hs[b].hash == hs[a].hash; b++)
            ;
        if (b - a > best) {
            best = b - a;
            best_t = hs[a].t;
        }
    }
    *match = 1;
    for (int o = 0; o < D_OUT; o++)
        *match &= vec[best_t][o] == (uint8_t)(m->B[(size_t)o * RANK + j] & 1);
    free(vec);
    free(hs);
    return best;
}

static void linear_fold_leaks_parities(void **state)
{
    (void)state;
    model p2, pr;
    model_init(&p2, 1ull << 33, 1);
    model_init(&pr, 8589934583ull, 1); /* the largest prime below 2^33 */
    memcpy(pr.B, p2.B, (size_t)D_OUT * RANK * sizeof *p2.B);
    int T = 16 << CHECKS, match2 = 0, matchp = 0;
    int n2 = parity_attack(&p2, 3, T, &match2), np = parity_attack(&pr, 3, T, &matchp);
    printf("# parity projection, c = %d checks, %d tokens: the commonest top-bit vector "
           "came %d times (M = 2^33) and %d times (M prime); it is B_q mod 2: %s / %s\n",
           CHECKS, T, n2, np, match2 ? "yes" : "no", matchp ? "yes" : "no");
    /* the design's residual leak, pinned: about 2^c tokens per column for
     * B_q mod 2 (m^c for B_q mod m), whatever the modulus */
    assert_true(n2 >= 2 && match2);
    assert_true(np >= 2 && matchp);
    model_free(&p2);
    model_free(&pr);
}

/* GF(2) vectors of D_OUT bits and a reduced basis of their span. */
#define GF2_WORDS (D_OUT / 64)
typedef struct {
    uint64_t v[RANK + 8][GF2_WORDS];
    int lead[RANK + 8];
    int n;
} gf2_basis;

/* Reduces x against the basis; returns the index of its leading bit or
 * -1 when it lies in the span. */
static int gf2_reduce(const gf2_basis *g, uint64_t *x)
{
    for (int i = 0; i < g->n; i++)
        if (x[g->lead[i] / 64] >> (g->lead[i] % 64) & 1)
            for (int w = 0; w < GF2_WORDS; w++)
                x[w] ^= g->v[i][w];
    for (int b = 0; b < D_OUT; b++)
        if (x[b / 64] >> (b % 64) & 1)
            return b;
    return -1;
}

static void gf2_add(gf2_basis *g, const uint64_t *x0)
{
    uint64_t x[GF2_WORDS];
    memcpy(x, x0, sizeof x);
    int lead = gf2_reduce(g, x);
    if (lead < 0 || g->n == RANK + 8)
        return;
    memcpy(g->v[g->n], x, sizeof x);
    g->lead[g->n++] = lead;
}

/* The one-round design of MALICIOUS_CLIENT.md under forged Galois keys:
 * a key switching key whose digit i carries an extra P round(Q/t) 2^32
 * adds 2^32 ([sigma(c1)]_(q_i) mod 2) to every coefficient -- bits the
 * client does not know once the server re-randomises c1, but the output
 * is then B_q (u + 2^32 beta) + B_q z: its top bits are B_q beta mod 2, a
 * fresh vector of the GF(2) span of B_q's columns each token. */
static void forged_galois_keys_leak_span_mod_2(void **state)
{
    (void)state;
    model m;
    model_init(&m, 1ull << 33, 0);
    gf2_basis *g = calloc(1, sizeof *g);
    assert_non_null(g);
    int64_t ut[RANK], y[D_OUT];
    const int T = RANK + 8;
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < RANK; k++) /* u = 0 (x = 0); beta unknown */
            ut[k] = (int64_t)tsafe_test_below(2) << 32;
        round2(&m, ut, NULL, y);
        uint64_t x[GF2_WORDS] = {0};
        for (int o = 0; o < D_OUT; o++)
            x[o / 64] |= (uint64_t)((uint64_t)llabs(y[o]) > m.M / 4) << (o % 64);
        gf2_add(g, x);
    }
    int in_span = 0;
    for (int j = 0; j < RANK; j++) {
        uint64_t x[GF2_WORDS] = {0};
        for (int o = 0; o < D_OUT; o++)
            x[o / 64] |= (uint64_t)(m.B[(size_t)o * RANK + j] & 1) << (o % 64);
        in_span += gf2_reduce(g, x) < 0;
    }
    printf("# forged Galois keys (one-round design), %d tokens: the top bits span %d "
           "dimensions of GF(2)^%d; %d/%d columns of B_q mod 2 lie in that span\n",
           T, g->n, D_OUT, in_span, RANK);
    assert_true(g->n <= RANK);
    assert_int_equal(in_span, RANK);
    free(g);
    model_free(&m);
}

int main(void)
{
    tsafe_test_rng_init("sealed_fold_model");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unfolded_shift_reads_column),
        cmocka_unit_test(folded_shift_averages_slowly),
        cmocka_unit_test(folded_digit_attack_reads_one_column_of_h),
        cmocka_unit_test(fold_precision_cost),
        cmocka_unit_test(linear_fold_leaks_parities),
        cmocka_unit_test(forged_galois_keys_leak_span_mod_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
