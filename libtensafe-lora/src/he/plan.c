/* The HE-LoRA parameter planner: cheapest secure parameters for depth-one
 * ct x pt at a given shape, with an explicit error model.
 *
 * Error model (absolute error of one u_i, sigma = 3.24 encryption noise):
 *  - encoding rounding: each coefficient is rounded by <= 1/2, a slot's error
 *    has std sqrt(N/12)/scale; summed over h products with |w| <= sqrt(2)A
 *    (resp. |z| <= sqrt(2)X): sqrt(h) sqrt(N/12) sqrt(2) (A/scale_x + X/scale_a)
 *  - encryption noise e * P(A): coefficient std ~ sigma sqrt(2) A scale_a; the
 *    trace read sums N/sqrt(2 cols) of them in quadrature after dividing by
 *    scale_x scale_a: (N / sqrt(2 cols)) sigma sqrt(2) A / scale_x
 * expected_error = |u error| / (X A sqrt(d_in)), a conservative normalisation
 * (real inputs are far from all-maximal, so realised relative L2 errors are
 * typically 10x this). No overflow: decrypted coefficients are bounded by
 * scale_x scale_a 2 X A, which must stay below Q/2 with 3 bits to spare. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu.h"
#include "he_internal.h"

#define NOISE_SIGMA 3.24
#define MARGIN_BITS 3.0
#define MIN_SCALE_BITS 16.0

int tsafe_lora_plan_compatible(const tsafe_lora_plan *a, const tsafe_lora_plan *b)
{
    return a->d_in == b->d_in && a->level == b->level && a->cols == b->cols &&
           a->response_level == b->response_level &&
           a->half == b->half && a->scale_x == b->scale_x &&
           a->scale_a == b->scale_a && a->params.log_n == b->params.log_n;
}

static uint32_t pow2_floor(double v)
{
    uint32_t p = 1;
    while ((double)p * 2 <= v)
        p *= 2;
    return p;
}

/* Packing shape for N: 0 when d_in does not fit. */
static int shape(uint32_t log_n, uint32_t d_in, uint32_t rank,
                 tsafe_lora_plan *p)
{
    size_t slots = (size_t)1 << (log_n - 1);
    p->half = (d_in + 1) / 2;
    if (p->half > slots)
        return 0;
    p->cols = pow2_floor((double)slots / p->half);
    p->n_batches = (rank + p->cols - 1) / p->cols;
    return 1;
}

static double model_error(const tsafe_lora_plan *p, double n)
{
    double X = p->max_abs_x, A = p->max_abs_a;
    double round = sqrt((double)p->half) * sqrt(n / 12.0) * sqrt(2.0) *
                   (A / p->scale_x + X / p->scale_a);
    double noise = n / sqrt(2.0 * p->cols) * NOISE_SIGMA * sqrt(2.0) * A /
                   p->scale_x;
    return sqrt(round * round + noise * noise) / (X * A * sqrt((double)p->d_in));
}

/* Split the scale budget (bits) between x and A; 0 when too small. */
static int choose_scales(tsafe_lora_plan *p, double q_bits)
{
    double X = p->max_abs_x, A = p->max_abs_a;
    double budget = q_bits - 1.0 - MARGIN_BITS - log2(2.0 * X * A);
    double sa = fmin(budget / 2, 52.0 - log2(A) - 1);
    double sx = fmin(budget - sa, 52.0 - log2(X) - 1);
    if (sx < MIN_SCALE_BITS || sa < MIN_SCALE_BITS)
        return 0;
    p->scale_x = ldexp(1.0, (int)floor(sx));
    p->scale_a = ldexp(1.0, (int)floor(sa));
    return 1;
}

static double plan_cost(const tsafe_lora_plan *p, double n, uint32_t limbs,
                        int vector)
{
    double arith = vector ? 0.2 : 1.0; /* measured: IFMA ~5x per element */
    double lg = log2(n);
    double products = (double)p->n_batches * n * limbs * 3.0; /* server 2 + client 1 */
    double encrypt = limbs * n * lg * 0.5 + n * lg;           /* NTTs + FFT */
    return products * arith + encrypt * (vector ? 0.5 : 1.0);
}

static int check_bounds(double max_abs_x, double max_abs_a)
{
    return isfinite(max_abs_x) && isfinite(max_abs_a) && max_abs_x > 0 &&
           max_abs_a > 0 && max_abs_x < 1e12 && max_abs_a < 1e12;
}

/* The plan at ring degree 2^log_n on one modulus chain (prime bits
 * chain[0], and chain[1] when two primes), its cost on this CPU (the
 * vector paths cost about a fifth: IFMA measured ~5x per element, AVX2 on
 * 30-bit primes ~5x and AVX2 + FMA doubles ~3x on the NTT, PERFORMANCE.md
 * §1 and §9: every limb of at most vector_bits bits runs one); 0 when
 * the shape or the scales do not fit or the error model misses target. */
static int plan_candidate(uint32_t log_n, uint32_t maxq, const uint32_t chain[2], uint32_t d_in,
                          uint32_t rank, double max_abs_x, double max_abs_a,
                          double target_error, uint32_t vector_bits, tsafe_lora_plan *p)
{
    memset(p, 0, sizeof *p);
    uint32_t limbs = chain[1] ? 2 : 1;
    if (chain[0] < 20 || (limbs == 2 && chain[1] < 20))
        return 0;
    p->d_in = d_in;
    p->rank = rank;
    p->max_abs_x = max_abs_x;
    p->max_abs_a = max_abs_a;
    if (!shape(log_n, d_in, rank, p))
        return 0;
    double q_bits = 0;
    for (uint32_t i = 0; i < limbs; i++)
        q_bits += chain[i] - 0.01; /* primes sit just below 2^bits */
    if (!choose_scales(p, q_bits))
        return 0;
    double n = (double)(1u << log_n);
    p->expected_error = model_error(p, n);
    if (p->expected_error > target_error)
        return 0;
    int vector = chain[0] <= vector_bits && (limbs == 1 || chain[1] <= vector_bits);
    p->cost = plan_cost(p, n, limbs, vector);
    p->params.log_n = log_n;
    p->params.n_primes = limbs;
    p->params.prime_bits[0] = chain[0];
    p->params.prime_bits[1] = chain[1];
    p->params.scale = p->scale_x;
    p->level = limbs - 1;
    p->log2_q = q_bits;
    p->max_log2_q = maxq;
    snprintf(p->name, sizeof p->name, "auto-n%u-%ux%u", 1u << log_n, limbs, chain[0]);
    return 1;
}

/* Two-party responses: with two primes below 2^50 (IFMA), rescaling a
 * product by the second prime halves its bytes for less CPU than
 * serializing the extra limb, and keeps ample precision when the rescaled
 * scale stays >= 2^30 with the values' headroom below q0/2. */
static void choose_response_level(tsafe_lora_plan *p)
{
    p->response_level = p->level;
    if (p->level == 1 && p->params.prime_bits[1] <= 50) {
        double after = log2(p->scale_x) + log2(p->scale_a) - p->params.prime_bits[1];
        if (after >= 30 && after + log2(2.0 * p->max_abs_x * p->max_abs_a) + MARGIN_BITS + 1 <=
                               p->params.prime_bits[0] - 0.01)
            p->response_level = 0;
    }
}

tsafe_status tsafe_lora_plan_auto(uint32_t d_in, uint32_t rank,
                                  double max_abs_x, double max_abs_a,
                                  double target_error, tsafe_lora_plan *out)
{
    if (!out)
        return TSAFE_E_NULL;
    if (d_in == 0 || rank == 0 || d_in > (1u << 24) || rank > 65536 ||
        !check_bounds(max_abs_x, max_abs_a) || !(target_error > 0))
        return TSAFE_E_ARG;
    /* the primes (just below 2^bits) a vector path takes on this CPU:
     * IFMA or AVX2 + FMA doubles below 2^50, AVX2 alone below 2^30 */
    uint32_t vector_bits = tsafe_ifma_available() || tsafe_cpu_has_avx2_fma() ? 50
                           : tsafe_cpu_has_avx2()                            ? 30
                                                                             : 0;
    tsafe_lora_plan best;
    int found = 0;
    for (uint32_t log_n = 11; log_n <= 15; log_n++) {
        uint32_t maxq = tsafe_params_max_log_q(log_n);
        /* one big prime, or two primes below 2^50 for the IFMA path */
        uint32_t chains[3][2] = {{maxq < 61 ? maxq : 61, 0},
                                 {maxq / 2 < 50 ? maxq / 2 : 50, maxq / 2 < 50 ? maxq / 2 : 50},
                                 {maxq / 2 < 61 ? maxq / 2 : 61, maxq / 2 < 61 ? maxq / 2 : 61}};
        for (int ci = 0; ci < 3; ci++) {
            tsafe_lora_plan p;
            if (!plan_candidate(log_n, maxq, chains[ci], d_in, rank, max_abs_x, max_abs_a,
                                target_error, vector_bits, &p))
                continue;
            if (!found || p.cost < best.cost) {
                best = p;
                found = 1;
            }
        }
    }
    if (!found)
        return TSAFE_E_VALUE_RANGE;
    choose_response_level(&best);
    /* fix the primes so client and server build the same context */
    tsafe_context *ctx = NULL;
    tsafe_status st = tsafe_context_create(&best.params, &ctx);
    if (st != TSAFE_OK)
        return st;
    best.params = *tsafe_context_params(ctx);
    best.log2_q = tsafe_context_log2_q(ctx);
    tsafe_context_free(ctx);
    *out = best;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_plan_preset(const char *preset, uint32_t d_in,
                                    uint32_t rank, double max_abs_x,
                                    double max_abs_a, tsafe_lora_plan *out)
{
    if (!preset || !out)
        return TSAFE_E_NULL;
    if (d_in == 0 || rank == 0 || d_in > (1u << 24) || rank > 65536 ||
        !check_bounds(max_abs_x, max_abs_a))
        return TSAFE_E_ARG;
    tsafe_lora_plan p;
    memset(&p, 0, sizeof p);
    tsafe_status st = tsafe_params_preset(preset, &p.params);
    if (st != TSAFE_OK)
        return st;
    tsafe_context *ctx = NULL;
    if ((st = tsafe_context_create(&p.params, &ctx)) != TSAFE_OK)
        return st;
    p.params = *tsafe_context_params(ctx);
    p.d_in = d_in;
    p.rank = rank;
    p.max_abs_x = max_abs_x;
    p.max_abs_a = max_abs_a;
    if (!shape(p.params.log_n, d_in, rank, &p)) {
        tsafe_context_free(ctx);
        return TSAFE_E_RANGE;
    }
    double base = log2(p.params.scale), need_extra = log2(2.0 * max_abs_x * max_abs_a);
    uint32_t top = tsafe_context_max_level(ctx);
    double q_bits = 0;
    int found = 0;
    for (uint32_t l = 0; l <= top && !found; l++) {
        q_bits += log2((double)tsafe_context_prime(ctx, l));
        if (2 * base + need_extra + MARGIN_BITS + 1.0 <= q_bits &&
            base + log2(max_abs_x) < 52 && base + log2(max_abs_a) < 52) {
            p.level = l;
            p.scale_x = p.scale_a = p.params.scale;
            found = 1;
        }
    }
    if (!found) { /* lower the scale of x at the top level */
        p.level = top;
        p.scale_a = p.params.scale;
        double sx = q_bits - 1.0 - MARGIN_BITS - need_extra - base;
        sx = fmin(sx, 52.0 - log2(max_abs_x) - 1);
        if (sx < MIN_SCALE_BITS) {
            tsafe_context_free(ctx);
            return TSAFE_E_VALUE_RANGE;
        }
        p.scale_x = ldexp(1.0, (int)floor(sx));
    }
    p.response_level = p.level; /* parity with the seeds: no response rescale */
    p.expected_error = model_error(&p, (double)tsafe_context_n(ctx));
    p.log2_q = tsafe_context_log2_q(ctx);
    p.max_log2_q = tsafe_params_max_log_q(p.params.log_n);
    p.cost = plan_cost(&p, (double)tsafe_context_n(ctx), p.level + 1,
                       strcmp(tsafe_context_arith_path(ctx), "scalar") != 0);
    snprintf(p.name, sizeof p.name, "%s", preset);
    tsafe_context_free(ctx);
    *out = p;
    return TSAFE_OK;
}
