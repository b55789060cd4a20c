/* sealed-private on adapters as they come (issue 19, finding 12): every
 * class of weights and inputs a new user meets gives delta within 1e-3
 * relative L2 of a double-precision s B A x, at the default widths (for
 * an x the adapter reads less than half as much as a typical one, 1e-3
 * times that shortfall: the grids follow x's norm, PROTOCOL.md); a zero
 * B (how PEFT initialises every adapter) or a zero A gives delta = 0
 * exactly. The reference is a plain double loop. Weights and inputs are
 * drawn fresh per run (the seed is printed). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_sealed.h"
#include "support/tsafe_test_lora.h"
#include "support/tsafe_test_rng.h"
#include "../libtensafe-lora/src/sealed/sealed_internal.h"

typedef enum { UNIFORM, GAUSSIAN, HEAVY, ZERO, ONE_ENTRY } weights;
typedef enum { X_UNIFORM, X_GAUSSIAN, X_ONE_HOT, X_PEAKED } inputs;

static double gauss(void)
{
    double a = tsafe_test_uniform(1e-300, 1), b = tsafe_test_uniform(0, 1);
    return sqrt(-2 * log(a)) * cos(2 * M_PI * b);
}

/* Heavy tails: Student t with 3 degrees of freedom, plus one outlier 50
 * times the typical size. */
static double heavy(void)
{
    double g = gauss(), c = 0;
    for (int i = 0; i < 3; i++) {
        double h = gauss();
        c += h * h;
    }
    return g / sqrt(c / 3);
}

static void fill(float *m, size_t n, weights w, double size)
{
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        switch (w) {
        case UNIFORM: v = tsafe_test_uniform(-1, 1); break;
        case GAUSSIAN: v = gauss(); break;
        case HEAVY: v = heavy(); break;
        default: v = 0; break;
        }
        m[i] = (float)(size * v);
    }
    if (w == HEAVY)
        m[tsafe_test_below(n)] = (float)(50 * size);
    if (w == ONE_ENTRY)
        m[tsafe_test_below(n)] = (float)size;
}

static void fill_x(float *x, uint32_t d, inputs k)
{
    for (uint32_t j = 0; j < d; j++)
        x[j] = k == X_UNIFORM ? (float)tsafe_test_uniform(-3, 3)
             : k == X_GAUSSIAN ? (float)gauss()
                               : 0.0f;
    if (k == X_ONE_HOT)
        x[tsafe_test_below(d)] = 2.5f;
    if (k == X_PEAKED) { /* a few large activations over small noise */
        for (uint32_t j = 0; j < d; j++)
            x[j] = (float)(0.01 * gauss());
        for (int i = 0; i < 4; i++)
            x[tsafe_test_below(d)] = (float)(20 * gauss());
    }
}

/* White box: the site stays within the bounds the plan's noise, flooding
 * and t were sized for (plan.c): every row of B_q at rms <= b_max / 4
 * (entries may pass b_max), and the site's shift between k_min (its A
 * plaintexts carry 2^(K - k), at most 2^LIFT_MAX) and the plan's K. */
static void check_site_bounds(const tsafe_sealed_plan *p, const tsafe_sealed_site *s)
{
    double bmax = (double)tsafe_sealed_qmax(p->b_bits), worst_b = 0;
    for (uint32_t j = 0; j < s->d_out; j++) {
        double ss = 0;
        for (uint32_t k = 0; k < s->rank; k++) {
            int64_t q = s->bq[(size_t)j * s->rank + k];
            ss += (double)q * (double)q;
        }
        worst_b = fmax(worst_b, sqrt(ss / s->rank) / (bmax / 4));
        /* a zero row of B_q, and only that, is marked (delta_j = 0
         * exactly: round 2's reads are +-1 now and then) */
        assert_int_equal(s->row_exp[j] == TSAFE_SEALED_ROW_ZERO, ss == 0);
    }
    assert_true(worst_b <= 1 && s->trunc_bits <= p->trunc_bits &&
                s->trunc_bits >= tsafe_sealed_k_min(p));
}

/* One site through two tokens; returns the larger relative L2 error, or
 * -1 when the reference is exactly zero and so was every delta. *excess:
 * the largest error beyond the token's bound, 1e-3, or where x is nearly
 * orthogonal to the adapter (||P x|| below half of ||P||_F rms(x), P = s B
 * A: one entry of A and a small x_j, a rank-4 adapter and an unlucky x)
 * 1e-3 times half the typical ||P x|| over the token's: every grid of the
 * protocol is set by x's norm (PROTOCOL.md, "Precision"). */
/* 1: the plans take opts.unchecked_shares (unchecked_shares below; the
 * default plans check their shares) */
static int g_unchecked;

static double run(uint32_t d_in, uint32_t rank, uint32_t d_out, weights wa, weights wb,
                  inputs xi, float scale, double *excess)
{
    float *A = malloc((size_t)rank * d_in * sizeof *A);
    float *B = malloc((size_t)d_out * rank * sizeof *B);
    float *x = malloc(d_in * sizeof *x), *delta = malloc(d_out * sizeof *delta);
    double *want = malloc(d_out * sizeof *want), *u = malloc(rank * sizeof *u);
    assert_true(A && B && x && delta && want && u);
    fill(A, (size_t)rank * d_in, wa, 0.02);
    fill(B, (size_t)d_out * rank, wb, 0.01);
    tsafe_sealed_plan p;
    tsafe_sealed_opts opts = {0};
    opts.unchecked_shares = (uint32_t)g_unchecked;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, d_in, rank, d_out, &opts, &p),
                     TSAFE_OK);
    assert_int_equal(p.checks, g_unchecked ? 0 : TSAFE_SEALED_CHECKS);
    tsafe_sealed_site *site;
    assert_int_equal(tsafe_sealed_site_create(&p, A, B, rank, d_out, scale, &site), TSAFE_OK);
    check_site_bounds(&p, site);
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    uint8_t *m[4];
    size_t l[4];
    assert_int_equal(tsafe_sealed_client_create(&p, NULL, &c), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(&p, &s), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_hello(c, &m[0], &l[0]), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(s, m[0], l[0]), TSAFE_OK);
    tsafe_lora_bytes_free(m[0]);
    const tsafe_sealed_site *ss = site;
    double p_fro = tsafe_test_frobenius(A, B, rank, d_in, d_out, scale), worst = -1;
    *excess = -INFINITY;
    for (int tok = 0; tok < 2; tok++) {
        fill_x(x, d_in, xi);
        assert_int_equal(tsafe_sealed_client_query(c, x, &m[0], &l[0], NULL), TSAFE_OK);
        assert_int_equal(tsafe_sealed_server_round1(s, &ss, 1, m[0], l[0], &m[1], &l[1], NULL),
                         TSAFE_OK);
        assert_int_equal(tsafe_sealed_client_respond(c, m[1], l[1], 1, &rank, &d_out, NULL, 0,
                                                     &m[2], &l[2], NULL), TSAFE_OK);
        assert_int_equal(tsafe_sealed_server_round2(s, &ss, 1, m[2], l[2], &m[3], &l[3], NULL),
                         TSAFE_OK);
        assert_int_equal(tsafe_sealed_client_finish(c, m[3], l[3], 1, &d_out, &delta, NULL),
                         TSAFE_OK);
        for (int i = 0; i < 4; i++)
            tsafe_lora_bytes_free(m[i]);
        for (uint32_t i = 0; i < rank; i++) {
            u[i] = 0;
            for (uint32_t j = 0; j < d_in; j++)
                u[i] += (double)A[(size_t)i * d_in + j] * x[j];
        }
        double num = 0, den = 0;
        for (uint32_t o = 0; o < d_out; o++) {
            double acc = 0;
            for (uint32_t i = 0; i < rank; i++)
                acc += (double)B[(size_t)o * rank + i] * u[i];
            want[o] = scale * acc;
            num += (delta[o] - want[o]) * (delta[o] - want[o]);
            den += want[o] * want[o];
        }
        if (den == 0) {
            assert_true(num == 0); /* zero in, exactly zero out */
            continue;
        }
        double e = sqrt(num / den), ratio = tsafe_test_reach(sqrt(den), p_fro, x, d_in),
               bound = tsafe_test_tol_at(ratio, 1e-3);
        if (ratio < 0.5 || wa == ONE_ENTRY)
            printf("#   ||P x|| / (||P||_F rms(x)) %.3f: rel L2 %.2e, bound %.2e\n", ratio, e, bound);
        worst = fmax(worst, e);
        *excess = fmax(*excess, e - bound);
    }
    tsafe_sealed_client_free(c);
    tsafe_sealed_server_free(s);
    tsafe_sealed_site_free(site);
    free(A);
    free(B);
    free(x);
    free(delta);
    free(want);
    free(u);
    return worst;
}

static const char *wname[] = {"uniform", "gaussian", "heavy+outlier", "zero", "one-entry"};
static const char *xname[] = {"uniform x", "gaussian x", "one-hot x", "peaked x"};

static void check(uint32_t d_in, uint32_t rank, uint32_t d_out, weights wa, weights wb,
                  inputs xi, float scale, const char *what)
{
    double excess;
    double e = run(d_in, rank, d_out, wa, wb, xi, scale, &excess);
    printf("# %-28s A %-13s B %-13s %-10s d_in %4u r %2u d_out %4u: %s %.2e\n", what,
           wname[wa], wname[wb], xname[xi], d_in, rank, d_out, e < 0 ? "delta = 0 exactly," : "rel L2",
           e < 0 ? 0.0 : e);
    /* Every class, heavy tails and a single entry included, within the
     * issue's 1e-3 for an x that the adapter reads at least half as much
     * as a typical one (run): sealed-private bounds rows by their rms
     * only (site.c, row_scale_for), so an outlier no longer coarsens the
     * grid of its row (before: 0.76-4.0e-3 for a heavy-tailed A, 1.7e-3
     * for one entry). */
    assert_true(excess <= 0);
}

static void weight_classes(void **state)
{
    (void)state;
    const weights w[] = {UNIFORM, GAUSSIAN, HEAVY};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            check(1024, 16, 1024, w[a], w[b], X_GAUSSIAN, 2.0f, "weights");
    check(2048, 32, 2048, GAUSSIAN, GAUSSIAN, X_GAUSSIAN, 2.0f, "weights (large)");
}

static void input_classes(void **state)
{
    (void)state;
    for (int xi = X_UNIFORM; xi <= X_PEAKED; xi++) {
        check(1024, 16, 1024, GAUSSIAN, GAUSSIAN, (inputs)xi, 2.0f, "inputs");
        check(1024, 16, 1024, HEAVY, HEAVY, (inputs)xi, 2.0f, "inputs");
    }
}

/* PEFT's scales: alpha / r (rank/alpha patterns give each module its own)
 * and rsLoRA's alpha / sqrt(r); the scale is folded into B's grid. */
static void peft_scales(void **state)
{
    (void)state;
    check(1024, 8, 512, GAUSSIAN, GAUSSIAN, X_GAUSSIAN, 16.0f / 8, "alpha 16 r 8");
    check(1024, 4, 512, GAUSSIAN, GAUSSIAN, X_GAUSSIAN, 32.0f / 4, "pattern: alpha 32 r 4");
    check(1024, 16, 512, GAUSSIAN, GAUSSIAN, X_GAUSSIAN, (float)(16 / sqrt(16.0)), "rsLoRA");
    check(1024, 64, 512, GAUSSIAN, GAUSSIAN, X_GAUSSIAN, 1e-3f, "tiny scale");
}

/* PEFT initialises B to zero: delta is exactly zero (it used to fail with
 * TSAFE_E_VALUE_RANGE for d_in >= 1024), as for a zero A (the canonical
 * factors of a zero product are zero); a single entry of A gives the right
 * delta. */
static void zero_and_sparse(void **state)
{
    (void)state;
    check(1024, 8, 1024, GAUSSIAN, ZERO, X_GAUSSIAN, 2.0f, "PEFT init (B = 0)");
    check(2048, 16, 512, GAUSSIAN, ZERO, X_ONE_HOT, 2.0f, "PEFT init (B = 0)");
    check(1024, 8, 1024, ZERO, GAUSSIAN, X_GAUSSIAN, 2.0f, "zero A");
    check(1024, 8, 1024, ONE_ENTRY, GAUSSIAN, X_GAUSSIAN, 2.0f, "one entry in A");
}

/* Two factorizations of one product, (B, A) and (B M, M^-1 A) with M a
 * random rotation, give sites whose public numbers (shift, scale, row
 * exponents) agree, and whose B_q are two stochastic roundings of one
 * canonical factor (site.c, rounding.c): entries within 1 of each other,
 * differing about as often as two roundings of one adapter under two
 * keys do, and neither differs from the real factor by 1 or more. What a
 * client (or test_sealed_adversaries F2's malicious one) could read of B_q
 * is then a function of the product and the server's secret rounding. */
/* The planner over a grid of shapes (d_in 64..16384, rank 4..256, d_out
 * 256..16384, default widths): every plan is one its client accepts
 * (tsafe_sealed_plan_check re-derives it from the plan's own widths); a
 * plan on N = 8192 only where no width pair gives an N = 4096 plan that
 * models 1e-3 (with pinned widths the planner keeps N = 4096 whenever
 * that plan meets the target, so such a pair would show as one); and the
 * default plan models the smallest error of the pinned-width plans on
 * its ring (of all of them when on N = 8192). */
static void planner_ring_choice(void **state)
{
    (void)state;
    const uint32_t di[] = {64, 1024, 2048, 8192, 16384}, rk[] = {4, 32, 64, 256},
                   dout[] = {256, 4096, 8192, 16384};
    size_t n = 0, large = 0, under = 0, none = 0;
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++) {
                tsafe_sealed_plan p;
                tsafe_status st =
                    tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, di[a], rk[b], dout[c], NULL, &p);
                if (st == TSAFE_E_VALUE_RANGE) {
                    /* no checked plan fits either ring: only where the
                     * unchecked one misses the precision target already
                     * (the fold costs round 2 about a bit of room) */
                    tsafe_sealed_opts u = {.unchecked_shares = 1};
                    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, di[a], rk[b],
                                                              dout[c], &u, &p),
                                     TSAFE_OK);
                    printf("# planner: %u x %u x %u has no checked plan (unchecked models %.2g)\n",
                           di[a], rk[b], dout[c], p.expected_rel_error);
                    assert_true(p.expected_rel_error > 2e-3);
                    none++;
                    continue;
                }
                assert_int_equal(st, TSAFE_OK);
                assert_int_equal(tsafe_sealed_plan_check(&p), TSAFE_OK);
                n++;
                under += p.expected_rel_error <= 1e-3;
                large += p.r1.log_n == 13;
                double best = INFINITY;
                for (uint32_t ab = TSAFE_SEALED_A_BITS_MIN; ab <= TSAFE_SEALED_A_BITS_MAX; ab++)
                    for (uint32_t bb = TSAFE_SEALED_B_BITS_MIN; bb <= TSAFE_SEALED_B_BITS_MAX;
                         bb++) {
                        tsafe_sealed_opts o = {.x_bits = p.x_bits, .a_bits = ab, .b_bits = bb};
                        tsafe_sealed_plan q;
                        if (tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, di[a], rk[b], dout[c],
                                                     &o, &q) != TSAFE_OK)
                            continue;
                        if (p.r1.log_n == 13 || q.r1.log_n == 12)
                            best = fmin(best, q.expected_rel_error);
                        if (p.r1.log_n == 13 && q.r1.log_n == 12)
                            assert_true(q.expected_rel_error > 1e-3);
                    }
                assert_true(p.expected_rel_error == best);
            }
    printf("# planner: %zu shapes, %zu on N = 8192, %zu model <= 1e-3, %zu without a checked "
           "plan\n", n, large, under, none);
    assert_true(large > 0 && large < n);
    assert_true(none <= 2);
}

static void count_off(const tsafe_sealed_site *a, const tsafe_sealed_site *b, size_t n,
                      size_t *off, size_t *big)
{
    *off = *big = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t d = a->bq[i] - b->bq[i];
        *off += d != 0;
        *big += d > 1 || d < -1;
    }
}

static void canonical_sites_depend_on_product_only(void **state)
{
    (void)state;
    enum { DI = 512, R = 8, DO = 256 };
    static float A[R * DI], B[DO * R], A2[R * DI], B2[DO * R];
    fill(A, R * DI, GAUSSIAN, 0.02);
    fill(B, DO * R, GAUSSIAN, 0.01);
    /* M: a product of random Givens rotations (M^-1 = M^T) */
    double M[R][R] = {{0}};
    for (int i = 0; i < R; i++)
        M[i][i] = 1;
    for (int g = 0; g < 64; g++) {
        int a = (int)tsafe_test_below(R), b = (int)((a + 1 + tsafe_test_below(R - 1)) % R);
        double th = tsafe_test_uniform(0, 2 * M_PI), c = cos(th), s = sin(th);
        for (int i = 0; i < R; i++) {
            double x = M[i][a], y = M[i][b];
            M[i][a] = c * x - s * y;
            M[i][b] = s * x + c * y;
        }
    }
    for (int o = 0; o < DO; o++)
        for (int k = 0; k < R; k++) {
            double acc = 0;
            for (int i = 0; i < R; i++)
                acc += (double)B[o * R + i] * M[i][k];
            B2[o * R + k] = (float)acc;
        }
    for (int k = 0; k < R; k++)
        for (int j = 0; j < DI; j++) {
            double acc = 0;
            for (int i = 0; i < R; i++)
                acc += M[i][k] * (double)A[i * DI + j]; /* (M^T A) */
            A2[k * DI + j] = (float)acc;
        }
    tsafe_sealed_plan p;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, DI, R, DO, NULL, &p), TSAFE_OK);
    tsafe_sealed_site *s1, *s2, *s3, *s4;
    assert_int_equal(tsafe_sealed_site_create(&p, A, B, R, DO, 2.0f, &s1), TSAFE_OK);
    assert_int_equal(tsafe_sealed_site_create(&p, A2, B2, R, DO, 2.0f, &s2), TSAFE_OK);
    assert_int_equal(tsafe_sealed_site_create(&p, A, B, R, DO, 2.0f, &s4), TSAFE_OK);
    uint8_t key[32];
    tsafe_test_seed32(key);
    assert_int_equal(tsafe_sealed_set_rounding_key(key), TSAFE_OK);
    assert_int_equal(tsafe_sealed_site_create(&p, A, B, R, DO, 2.0f, &s3), TSAFE_OK);
    size_t n = (size_t)DO * R, off, big, off_key, big_key, off_same, big_same;
    count_off(s1, s2, n, &off, &big);
    count_off(s1, s3, n, &off_key, &big_key);
    count_off(s1, s4, n, &off_same, &big_same);
    int rows_same = memcmp(s1->row_exp, s2->row_exp, DO) == 0 &&
                    memcmp(s1->row_exp, s3->row_exp, DO) == 0;
    printf("# same product, other factors: shift %u/%u, scale %.9g/%.9g, row exponents %s, "
           "B_q entries off by 1: %zu of %zu (same factors, other key: %zu; same key: %zu)\n",
           s1->trunc_bits, s2->trunc_bits, s1->scale_b, s2->scale_b,
           rows_same ? "equal" : "differ", off, n, off_key, off_same);
    assert_int_equal(s1->trunc_bits, s2->trunc_bits);
    assert_int_equal(s1->trunc_bits, s3->trunc_bits);
    assert_true(s1->scale_b == s2->scale_b && s1->scale_b == s3->scale_b);
    assert_true(rows_same);
    assert_int_equal(big + big_key, 0);
    assert_int_equal(off_same, 0); /* one key, one adapter: one rounding */
    /* both counts are binomial-like around sum 2 f (1 - f) (~n / 3): a
     * deterministic rounding would give off ~ 0 and off_key = 0 */
    assert_true(off_key > n / 6 && off > n / 6);
    assert_true(off < 2 * off_key && off_key < 2 * off);
    tsafe_sealed_site_free(s1);
    tsafe_sealed_site_free(s2);
    tsafe_sealed_site_free(s3);
    tsafe_sealed_site_free(s4);
}

/* Unchecked shares (opts.unchecked_shares; the other tests run the
 * default, checked plans, whose fold adds H (u~_e - K u~) to every
 * output): the same classes within 1e-3, zero B still exactly 0. */
static void unchecked_shares(void **state)
{
    (void)state;
    g_unchecked = 1;
    const weights w[] = {UNIFORM, GAUSSIAN, HEAVY};
    for (int i = 0; i < 3; i++)
        check(1024, 16, 1024, w[i], w[i], X_GAUSSIAN, 1.0f, "unchecked shares");
    check(2048, 32, 2048, GAUSSIAN, GAUSSIAN, X_GAUSSIAN, 1.0f, "unchecked shares");
    check(2048, 32, 2048, GAUSSIAN, HEAVY, X_ONE_HOT, 1.0f, "unchecked shares");
    check(1024, 8, 512, GAUSSIAN, ZERO, X_GAUSSIAN, 1.0f, "unchecked shares");
    g_unchecked = 0;
}

int main(void)
{
    tsafe_test_rng_init("sealed_precision");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(weight_classes),
        cmocka_unit_test(input_classes),
        cmocka_unit_test(peft_scales),
        cmocka_unit_test(zero_and_sparse),
        cmocka_unit_test(canonical_sites_depend_on_product_only),
        cmocka_unit_test(planner_ring_choice),
        cmocka_unit_test(unchecked_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
