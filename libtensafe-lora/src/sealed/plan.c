/* Sealed plan: the client's derivation of every parameter from public
 * shapes and its own widths, with the bounds that make it exact and safe.
 *
 * Bounds (per read coefficient; sigma = sqrt(21/2) for the centred
 * binomial error, 8 sigma tails are below 2^-45):
 *  - product noise B = chunks*chunk*P_max/2 (rounding of round(Q m/t),
 *    non-zero only where m is: half the L1 norm of the plaintext row a
 *    read accumulates, which sealed-private bounds through the row's rms,
 *    L1 <= sqrt(n) L2 <= n P_max / RMS_RATIO, site.c) + 8 sigma P_rms
 *    sqrt(nnz) (error times the plaintexts); it depends on the server's
 *    weights, so it is flooded:
 *  - flood = 2^(ceil log2 B + 40 + ceil log2 reads): statistical distance
 *    at most reads * B / flood <= 2^-40 per site response;
 *  - after the switch Q -> q0 (a division by the gap D = Q/q0, one or two
 *    primes dropped one at a time) the noise is flood/D + B/D + 1/2 + the
 *    switch's rounding of c1 times s, at most 4 sqrt(N) (Hoeffding, 2^-45);
 *    two roundings in a row err by at most 1/2 + 1/(2 q_gap) < 1/2 (1 + 2^-20)
 *    per coefficient, so both rounding terms carry that factor;
 *    decryption is exact while that stays below q0 / (2t).
 * Round 1 needs |u| <= U = x_max a_max d_in (sealed-private: / RMS_RATIO,
 * its rows' rms bound) with 4U <= t (the share
 * reconstruction in round 2 relies on it); round 2 needs |B_q u~| < t2/2
 * with u~ = floor(u / 2^k) - {0,1}. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sealed_internal.h"

#define SIGMA_CBD 3.2403703492039302 /* sqrt(21/2) */
#define RESP_BITS 49u

void tsafe_sealed_layout_make(uint32_t n, uint32_t len, uint32_t chunk,
                              uint32_t outs, tsafe_sealed_layout *l)
{
    l->chunk = chunk;
    l->n_chunks = (len + chunk - 1) / chunk;
    l->rows = n / chunk;
    l->outs = outs;
    l->n_blocks = (outs + l->rows - 1) / l->rows;
}

uint32_t tsafe_sealed_block_reads(const tsafe_sealed_layout *l, uint32_t b,
                                  uint32_t *pos)
{
    uint32_t first = b * l->rows, count = 0;
    for (uint32_t o = 0; o < l->rows && first + o < l->outs; o++) {
        if (pos)
            pos[count] = o * l->chunk + l->chunk - 1;
        count++;
    }
    return count;
}

static size_t ct_bytes(uint32_t log_n, uint32_t b0, uint32_t b1)
{
    size_t n = (size_t)1 << log_n;
    return 32 + (n * b0 + 7) / 8 + (n * b1 + 7) / 8;
}

static size_t sealed_bytes(uint32_t log_n, uint32_t b0, uint32_t reads)
{
    size_t n = (size_t)1 << log_n;
    return (n * b0 + 7) / 8 + ((size_t)reads * b0 + 7) / 8;
}

static uint32_t ceil_log2(double v)
{
    return v <= 1 ? 0 : (uint32_t)ceil(log2(v));
}

/* Noise bound per read (see the top of the file): p_max bounds every
 * plaintext entry (the rounding term), p_rms the root mean square of the
 * entries a read accumulates (the error term: 8 sigma times their L2
 * norm, at most p_rms sqrt(nnz)). */
static double product_noise(uint32_t n_chunks, uint32_t chunk, uint32_t rows,
                            double p_max, double p_rms)
{
    double nnz = (double)n_chunks * chunk * rows;
    return n_chunks * (double)chunk * p_max / 2 + 8 * SIGMA_CBD * p_rms * sqrt(nnz);
}

/* Noise after the switch by the gap (Q/q0), for a flood of 2^flood bits. */
static double switched_noise(uint32_t log_n, double gap, uint32_t flood, double b)
{
    double rounding = (0.5 + 4 * sqrt(ldexp(1.0, (int)log_n))) * (1 + ldexp(1.0, -20));
    return ldexp(1.0, (int)flood) / gap + b / gap + rounding;
}

/* The cheapest split (input bytes + 2 * readers * output bytes: an input
 * of round 1 is shared by the sites that read it) of a product with input
 * len and outs outputs. checks > 0 (round 1 of a checked plan): only
 * chunks that divide N and leave at least `checks` rows a block. */
static uint32_t best_chunk(uint32_t log_n, uint32_t len, uint32_t outs, uint32_t readers,
                           uint32_t checks)
{
    uint32_t n = 1u << log_n, best = 0;
    double best_cost = INFINITY;
    for (uint32_t nc = 1; nc <= 256 && nc <= len; nc++) {
        uint32_t chunk = (len + nc - 1) / nc;
        if (checks) /* the power of two at or above it */
            chunk = 1u << ceil_log2(chunk);
        if (chunk > n || (nc > 1 && (len + chunk - 1) / chunk != nc))
            continue;
        if (checks && n / chunk < checks)
            continue;
        tsafe_sealed_layout l;
        tsafe_sealed_layout_make(n, len, chunk, outs, &l);
        double up = (double)l.n_chunks * ct_bytes(log_n, RESP_BITS, 60);
        double down = (double)l.n_blocks * sealed_bytes(log_n, RESP_BITS, l.rows);
        if (checks) /* a checked result a site */
            down += sealed_bytes(log_n, RESP_BITS, checks);
        double cost = up + 2.0 * readers * down;
        if (cost < best_cost) {
            best_cost = cost;
            best = chunk;
        }
    }
    return best;
}

void tsafe_sealed_layout1(const tsafe_sealed_plan *p, uint32_t rank,
                          tsafe_sealed_layout *l)
{
    tsafe_sealed_layout_make(1u << p->r1.log_n, p->d_in, p->chunk1, rank, l);
}

/* Round 2's chunk for a site with d_out outputs: the cheapest split for
 * that d_out (a site with few outputs takes long chunks: fewer share
 * ciphertexts, a few more response blocks), never shorter than the plan's
 * chunk2, the split for d_out_max. Both sides compute it from public
 * shapes; round2_noise bounds every chunk it can return. */
static uint32_t site_chunk2(const tsafe_sealed_plan *p, uint32_t d_out)
{
    uint32_t c = best_chunk(p->r2.log_n, p->rank + p->checks, d_out, 1, 0);
    return c > p->chunk2 ? c : p->chunk2;
}

void tsafe_sealed_layout_checks(const tsafe_sealed_plan *p, tsafe_sealed_layout *l)
{
    tsafe_sealed_layout_make(1u << p->r1.log_n, p->d_in, p->chunk1, p->checks, l);
}

/* Round 2's inputs: f, then (checked plans) the checked reads. */
void tsafe_sealed_layout2(const tsafe_sealed_plan *p, uint32_t rank,
                          uint32_t d_out, tsafe_sealed_layout *l)
{
    tsafe_sealed_layout_make(1u << p->r2.log_n, rank + p->checks, site_chunk2(p, d_out), d_out,
                             l);
}

double tsafe_sealed_check_w_mean_square(void)
{
    /* E[w^2] for w uniform in [-G, G): (2 sum_1^(G-1) i^2 + G^2) / 2G */
    double g = TSAFE_SEALED_CHECK_G;
    return ((g - 1) * g * (2 * g - 1) / 3 + g * g) / (2 * g);
}

uint32_t tsafe_sealed_check_h_bits(const tsafe_sealed_plan *p)
{
    /* checks E[H^2] E[w^2] = rho^2 (b_max / RMS_RATIO)^2, E[H^2] ~ 4^h / 3 */
    double b_rms = (double)tsafe_sealed_qmax(p->b_bits) / TSAFE_SEALED_RMS_RATIO;
    double h = sqrt(3.0 / (p->checks ? p->checks : 1) / tsafe_sealed_check_w_mean_square()) *
               TSAFE_SEALED_CHECK_RHO * b_rms;
    long e = lround(log2(h));
    return e < 1 ? 1 : (uint32_t)e;
}

void tsafe_sealed_check_matrix(const tsafe_sealed_plan *p, uint32_t rank, const int8_t *w,
                               int32_t *K)
{
    uint32_t rows = p->rows1;
    for (uint32_t c = 0; c < p->checks; c++) /* block b's rows from its own w */
        for (uint32_t j = 0; j < rank; j++)
            K[(size_t)c * rank + j] =
                tsafe_sealed_check_entry(w + (size_t)(j / rows) * rows, rows, c, j % rows);
}

double tsafe_sealed_check_hk_rms(const tsafe_sealed_plan *p)
{
    double h = ldexp(1.0, (int)tsafe_sealed_check_h_bits(p));
    return sqrt(p->checks * (h * h / 3) * tsafe_sealed_check_w_mean_square());
}

/* The fold's noise on an output of round 2, H (u~_e - K u~) for an honest
 * client: its variance for reads rounded with variance e2 each. */
static double fold_var(const tsafe_sealed_plan *p, double e2)
{
    if (!p->checks)
        return 0;
    double h = ldexp(1.0, (int)tsafe_sealed_check_h_bits(p));
    return p->checks * (h * h / 3) * e2 * (1 + p->rank * tsafe_sealed_check_w_mean_square());
}

static double b_max(const tsafe_sealed_plan *p)
{
    return (double)tsafe_sealed_qmax(p->b_bits);
}

/* The largest round-2 noise of any site: sites choose their chunk between
 * chunk2 and rank (site_chunk2), and for a chunk the noise grows with the
 * number of chunks, so the plan's rank bounds every smaller one. */
static double round2_noise(const tsafe_sealed_plan *p)
{
    double worst = 0, pmax = b_max(p), prms = b_max(p) / TSAFE_SEALED_RMS_RATIO;
    uint32_t len = p->rank + p->checks;
    if (p->checks) {
        /* [B_q - H K | H]: the largest entry grows by checks h G at most;
         * the rms that the error term takes by the server's bound on H K
         * (tsafe_sealed_check_fro_bound, per block) and H's largest entry */
        double h = ldexp(1.0, (int)tsafe_sealed_check_h_bits(p));
        pmax += p->checks * h * TSAFE_SEALED_CHECK_G;
        prms += TSAFE_SEALED_CHECK_FRO * tsafe_sealed_check_hk_rms(p) + h;
    }
    for (uint32_t c = p->chunk2; c <= len; c++) {
        tsafe_sealed_layout l;
        tsafe_sealed_layout_make(1u << p->r2.log_n, len, c, p->d_out_max, &l);
        double b = product_noise(l.n_chunks, l.chunk, l.rows, pmax, prms);
        worst = b > worst ? b : worst;
    }
    return worst;
}

uint32_t tsafe_sealed_flood2(const tsafe_sealed_plan *p)
{
    /* the bound uses d_out_max: one flood for every site of the plan */
    return ceil_log2(round2_noise(p)) + 40 + ceil_log2(p->d_out_max);
}

/* q0 and the gap Q / q0 that the switch divides by (one or two primes). */
static tsafe_status primes_of(const tsafe_bfv_params *bp, double *q0, double *gap)
{
    tsafe_bfv_context *c;
    tsafe_status st = tsafe_bfv_context_create(bp, &c);
    if (st != TSAFE_OK)
        return st;
    *q0 = (double)tsafe_bfv_context_prime(c, 0);
    *gap = 1;
    for (uint32_t i = 1; i < tsafe_bfv_context_limbs(c); i++)
        *gap *= (double)tsafe_bfv_context_prime(c, i);
    tsafe_bfv_context_free(c);
    return TSAFE_OK;
}

/* Round 1 (x times A): t1 from the bound U on |u| (*U), the chunk split
 * and the flood, and the primes q0 and Q / q0 (*q0, *q1) that must keep
 * the switched noise below q0 / (2 t1). */
static tsafe_status derive_round1(tsafe_sealed_plan *p, uint32_t log_n, uint32_t gap, double *U,
                                  double *q0, double *q1)
{
    double x_max = (double)tsafe_sealed_qmax(p->x_bits);
    double a_max = (double)tsafe_sealed_qmax(p->a_bits);
    /* |u_i| <= ||A_q,i||_2 X2 (Cauchy-Schwarz, tsafe_sealed_x2): A_q's
     * entries are at most a_max in sealed mode, its rows' rms at most
     * a_max / RMS_RATIO in sealed-private (site.c) */
    double a_l2 = p->mode == TSAFE_SEALED_PRIVATE ? a_max / TSAFE_SEALED_RMS_RATIO : a_max;
    *U = x_max * a_l2 * p->d_in;
    /* sealed: 4U <= t1 (the share reconstruction in round 2);
     * sealed-private reads round 1 at round 2's t (derive_round2 sets it) */
    int priv = p->mode == TSAFE_SEALED_PRIVATE;
    uint32_t t_bits = priv ? 8 : ceil_log2(4 * *U + 9);
    if (t_bits < 8)
        t_bits = 8;
    p->r1 = (tsafe_bfv_params){log_n, RESP_BITS, gap, t_bits, 0};
    p->chunk1 = best_chunk(log_n, p->d_in, p->rank, p->sites_per_query, p->checks);
    if (!p->chunk1)
        return TSAFE_E_VALUE_RANGE;
    tsafe_sealed_layout l1;
    tsafe_sealed_layout1(p, p->rank, &l1);
    p->rows1 = l1.rows;
    p->n_chunks1 = l1.n_chunks;
    double a_rms = p->mode == TSAFE_SEALED_PRIVATE ? a_max / TSAFE_SEALED_RMS_RATIO : a_max;
    double b1 = product_noise(l1.n_chunks, l1.chunk, l1.rows, a_max, a_rms);
    p->flood1 = ceil_log2(b1) + 40 + ceil_log2(p->rank);
    p->log2_sd1 = log2((double)p->rank) + log2(b1) - p->flood1;
    if (t_bits + 8 > RESP_BITS)
        return TSAFE_E_VALUE_RANGE;
    tsafe_status st = primes_of(&p->r1, q0, q1);
    if (st != TSAFE_OK)
        return st == TSAFE_E_INSECURE ? TSAFE_E_VALUE_RANGE : st;
    if (!priv && switched_noise(log_n, *q1, p->flood1, b1) >= *q0 / (2 * ldexp(1.0, (int)t_bits)))
        return TSAFE_E_VALUE_RANGE;
    p->log2_fail = -40;
    return TSAFE_OK;
}

/* sealed-private's round 1 at round 2's t (t2): the query is encrypted at
 * the scale Q / (t2 2^K) (K = trunc_bits), a site's A plaintexts carry
 * 2^(K - k) (k its own shift, at least k_min), so each read is
 * u / 2^k + M (M the mask) in units of t2's step, flooded by a whole step.
 * The read is then within 1 of that value (a stochastic rounding, plus
 * at most one more when the noise below passes half a step), provided
 * the switched noise without the flood stays below half a step. */
static tsafe_status check_round1_private(const tsafe_sealed_plan *p, double q0, double q1)
{
    tsafe_sealed_layout l1;
    tsafe_sealed_layout1(p, p->rank, &l1);
    double lift = ldexp(1.0, (int)(p->trunc_bits - tsafe_sealed_k_min(p)));
    double a_max = (double)tsafe_sealed_qmax(p->a_bits) * lift;
    double b1 = product_noise(l1.n_chunks, l1.chunk, l1.rows, a_max,
                              a_max / TSAFE_SEALED_RMS_RATIO);
    double rounding = (0.5 + 4 * sqrt(ldexp(1.0, (int)p->r1.log_n))) * (1 + ldexp(1.0, -20));
    if (p->checks) /* the checked product: every block's noise times its W (L1 <= rows G) */
        b1 *= (double)l1.n_blocks * l1.rows * TSAFE_SEALED_CHECK_G;
    return b1 / q1 + rounding < q0 / (2 * ldexp(1.0, (int)p->r1.t_bits)) ? TSAFE_OK
                                                                        : TSAFE_E_VALUE_RANGE;
}

/* Round 2's truncation k and t2: the smallest k whose |B_q u~| fits t2
 * within the room the switched noise leaves. The client's shares are
 * values mod t2 (round 1 reads at t2): every one encodes, so no
 * decrypted value can make its round 2 fail. */
static tsafe_status derive_truncation(tsafe_sealed_plan *p, double U, double room)
{
    for (uint32_t k = 0; k <= TSAFE_BFV_MAX_FRAC_BITS; k++) {
        /* per output: ||B_q,j||_2 (||u||_2 / 2^k + 3 sqrt(r) + ||z||_2)
         * (u~ within 1 of u / 2^k: a stochastic rounding, round 1
         * flooding a whole step, and the read's +-1; 3 leaves room),
         * ||B_q,j||_2 <= b_max sqrt(r) / RMS_RATIO, ||u||_2 <= U sqrt(r)
         * (site.c) */
        double dmax = b_max(p) / TSAFE_SEALED_RMS_RATIO * p->rank *
                          (ldexp(U, -(int)k) + 3 +
                           TSAFE_SEALED_OUT_NOISE_TAIL * TSAFE_SEALED_OUT_NOISE_SD) +
                      10 * sqrt(fold_var(p, 1.0)); /* checked plans' fold */
        uint32_t t2 = ceil_log2(2 * dmax + 1);
        if (t2 < 8)
            t2 = 8;
        if (t2 + 8 <= RESP_BITS && ldexp(1.0, (int)t2) < room) {
            p->trunc_bits = k;
            p->r2.t_bits = t2;
            return TSAFE_OK;
        }
    }
    return TSAFE_E_VALUE_RANGE;
}

/* Round 2's share of the squared relative error.
 * Per output, relative to delta_j ~ rms(B'_j) ||u||_2: B's rounding
 * (stochastic, site.c: variance f(1 - f), 1/6 on average) 1/sqrt(6) of a
 * grid of 4 rms / b_max, rounded up to a power of two (an rms factor of
 * sqrt(3 / ln 4) = 1.47 over a uniform log2); u~ = u / 2^k + ({0, 1} -
 * frac) + z, variance 1/6 + sd^2 per coordinate, against a typical |u_i|
 * (random signs) ||A_q,i||_2 ||x_q||_2 / sqrt(d_in) ~ x_max a_max
 * sqrt(d_in) / RMS_RATIO. A site takes its own k (site.c) from its rows of
 * B_q (L2 <= b_max sqrt(r) / RMS_RATIO) and ||A_q||_op, which for the
 * canonical factors' orthogonal rows of equal rms is one row's L2 norm,
 * a_max sqrt(d_in) / RMS_RATIO: the model takes that k. */
static double round2_error2(const tsafe_sealed_plan *p, double x_max, double a_max)
{
    uint32_t d_in = p->d_in, rank = p->rank;
    double bb = b_max(p);
    double ut = x_max * a_max * sqrt((double)d_in) / TSAFE_SEALED_RMS_RATIO;
    double opn = a_max / TSAFE_SEALED_RMS_RATIO * sqrt((double)d_in);
    double row2 = bb / TSAFE_SEALED_RMS_RATIO * sqrt((double)rank);
    double extra = (3 + TSAFE_SEALED_OUT_NOISE_TAIL * TSAFE_SEALED_OUT_NOISE_SD) *
                   sqrt((double)rank);
    uint32_t ks = tsafe_sealed_k_min(p);
    while (ks < p->trunc_bits &&
           row2 * (ldexp(opn * tsafe_sealed_x2(p), -(int)ks) + extra) >=
               ldexp(1.0, (int)p->r2.t_bits - 1))
        ks++;
    double sd = tsafe_sealed_out_noise_sd(rank);
    double eu = ldexp(1.0, (int)ks) / ut * sqrt(1 / 6.0 + sd * sd);
    double eb = 1.47 * TSAFE_SEALED_RMS_RATIO / sqrt(6.0) / bb;
    /* a checked plan's fold, against ||B_q,j||_2 u~'s typical size */
    double ef2 = fold_var(p, 1 / 6.0) / (row2 * row2) * ldexp(1.0, 2 * (int)ks) / (ut * ut);
    return eu * eu + eb * eb + ef2;
}

/* Round 2 of sealed-private (u~ times B): chunk split, flood, truncation
 * and t2, given round 1's bound U and primes. */
static tsafe_status derive_round2(tsafe_sealed_plan *p, uint32_t log_n, uint32_t gap, double U,
                                  double q0, double q1)
{
    p->r2 = (tsafe_bfv_params){log_n, RESP_BITS, gap, 8, 0};
    p->chunk2 = best_chunk(log_n, p->rank + p->checks, p->d_out_max, 1, 0);
    if (!p->chunk2)
        return TSAFE_E_VALUE_RANGE;
    double noise2 = round2_noise(p);
    uint32_t flood2 = tsafe_sealed_flood2(p);
    double room = q0 / (2 * switched_noise(log_n, q1, flood2, noise2));
    tsafe_status st = derive_truncation(p, U, room);
    if (st != TSAFE_OK)
        return st;
    p->log2_sd2 = log2((double)p->d_out_max) + log2(noise2) - flood2;
    p->r1.t_bits = p->r2.t_bits; /* round 1 reads at t2 */
    return check_round1_private(p, q0, q1);
}

static tsafe_status derive_at(tsafe_sealed_mode mode, uint32_t log_n,
                              uint32_t d_in, uint32_t rank, uint32_t d_out_max,
                              const tsafe_sealed_opts *o, tsafe_sealed_plan *p)
{
    memset(p, 0, sizeof *p);
    p->version = TSAFE_SEALED_PLAN_VERSION;
    p->mode = mode;
    p->d_in = d_in;
    p->rank = rank;
    p->d_out_max = d_out_max;
    p->x_bits = o->x_bits;
    p->a_bits = o->a_bits;
    p->b_bits = mode == TSAFE_SEALED_PRIVATE ? o->b_bits : 0;
    p->rotate_after = o->rotate_after;
    p->semi_honest = mode == TSAFE_SEALED ? 1 : 0;
    p->sites_per_query = o->sites_per_query;
    p->checks = mode == TSAFE_SEALED_PRIVATE && !o->unchecked_shares ? TSAFE_SEALED_CHECKS : 0;
    uint32_t max_q = tsafe_params_max_log_q(log_n);
    uint32_t gap = max_q - RESP_BITS > 61 ? 61 : max_q - RESP_BITS;
    double U, q0, q1;
    tsafe_status st = derive_round1(p, log_n, gap, &U, &q0, &q1);
    if (st != TSAFE_OK)
        return st;
    /* quantization error model: a uniform rounding error of half a step
     * against values whose rms is a quarter of their maximum */
    double x_max = (double)tsafe_sealed_qmax(p->x_bits);
    double a_max = (double)tsafe_sealed_qmax(p->a_bits);
    double ex = 4 / sqrt(12.0) / x_max, ea = 4 / sqrt(12.0) / a_max;
    double err2 = ex * ex + ea * ea;
    if (mode == TSAFE_SEALED_PRIVATE) {
        if ((st = derive_round2(p, log_n, gap, U, q0, q1)) != TSAFE_OK)
            return st;
        err2 += round2_error2(p, x_max, a_max);
    }
    p->expected_rel_error = sqrt(err2);
    return TSAFE_OK;
}

static void fill_defaults(tsafe_sealed_mode mode, const tsafe_sealed_opts *in,
                          tsafe_sealed_opts *o)
{
    memset(o, 0, sizeof *o);
    if (in)
        *o = *in;
    if (!o->x_bits)
        o->x_bits = 13;
    if (!o->a_bits) /* chosen per plan (derive) */
        o->a_bits = TSAFE_SEALED_A_BITS_MIN;
    if (!o->b_bits) /* sealed-private: chosen per plan (derive) */
        o->b_bits = TSAFE_SEALED_B_BITS_MIN;
    if (!o->rotate_after)
        o->rotate_after = 4096;
    if (!o->sites_per_query)
        o->sites_per_query = 1;
}

tsafe_status tsafe_sealed_plan_derive(tsafe_sealed_mode mode, uint32_t d_in,
                                      uint32_t rank, uint32_t d_out_max,
                                      const tsafe_sealed_opts *opts,
                                      tsafe_sealed_plan *out)
{
    if (!out)
        return TSAFE_E_NULL;
    memset(out, 0, sizeof *out);
    if (mode != TSAFE_SEALED && mode != TSAFE_SEALED_PRIVATE)
        return TSAFE_E_ARG;
    if (d_in == 0 || d_in > 65536 || rank == 0 || rank > 1024 || d_out_max == 0 ||
        d_out_max > 65536)
        return TSAFE_E_RANGE;
    tsafe_sealed_opts o;
    fill_defaults(mode, opts, &o);
    /* sealed mode releases decryptions: only for callers that accept a
     * semi-honest threat model (issue 19, THREAT_MODEL.md) */
    if (mode == TSAFE_SEALED && !o.semi_honest)
        return TSAFE_E_INSECURE;
    if (o.x_bits < TSAFE_SEALED_WIDTH_MIN || o.x_bits > TSAFE_SEALED_WIDTH_MAX ||
        o.a_bits < TSAFE_SEALED_WIDTH_MIN || o.a_bits > TSAFE_SEALED_WIDTH_MAX ||
        o.b_bits < TSAFE_SEALED_WIDTH_MIN || o.b_bits > TSAFE_SEALED_WIDTH_MAX || o.rotate_after > (1u << 24) ||
        o.sites_per_query > 4096 || o.unchecked_shares > 1)
        return TSAFE_E_RANGE;
    /* Default widths: the plan takes, on the smallest ring that has room
     * (N = 8192 costs about twice as much per token as 4096) for a plan
     * that models the precision target (TSAFE_SEALED_TARGET_REL_ERROR;
     * else the better of both rings), the pair of widths whose plan
     * models the smallest error (expected_rel_error).
     * A bit of A costs round 1 room (sealed: t1 and the flood grow;
     * sealed-private: the product noise below t2's step and the shift)
     * and nothing on the wire; a bit of B halves B's rounding error but
     * costs round 2 a bit of room (the flood grows with B) and every
     * site's shift a bit (B_q u~ must fit t2), doubling the truncation
     * and output-noise error: narrow sites gain from a wide B, large ones
     * (rank, d_out) lose. The plan records the widths it took; explicit
     * widths are taken as they are. */
    int priv = mode == TSAFE_SEALED_PRIVATE;
    int a_free = !opts || !opts->a_bits, b_free = priv && (!opts || !opts->b_bits);
    uint32_t a_lo = a_free ? TSAFE_SEALED_A_BITS_MIN : o.a_bits;
    uint32_t a_hi = a_free ? (priv ? TSAFE_SEALED_A_BITS_MAX : 13) : o.a_bits;
    uint32_t b_lo = b_free ? TSAFE_SEALED_B_BITS_MIN : o.b_bits;
    uint32_t b_hi = b_free ? TSAFE_SEALED_B_BITS_MAX : o.b_bits;
    tsafe_status st = TSAFE_E_VALUE_RANGE;
    int have = 0;
    for (uint32_t log_n = 12; log_n <= 13; log_n++) {
        tsafe_sealed_opts w = o;
        for (w.a_bits = a_hi; w.a_bits >= a_lo; w.a_bits--)
            for (w.b_bits = b_lo; w.b_bits <= b_hi; w.b_bits++) {
                tsafe_sealed_plan cand;
                st = derive_at(mode, log_n, d_in, rank, d_out_max, &w, &cand);
                if (st != TSAFE_OK && st != TSAFE_E_VALUE_RANGE)
                    goto fail;
                /* ties go to the first: the smaller ring, the wider A,
                 * the narrower B */
                if (st == TSAFE_OK &&
                    (!have || cand.expected_rel_error < out->expected_rel_error)) {
                    *out = cand;
                    have = 1;
                }
            }
        /* the larger ring only when the smaller one has no plan or none
         * that models the precision target (the best of both then) */
        if (have && out->expected_rel_error <= TSAFE_SEALED_TARGET_REL_ERROR)
            return TSAFE_OK;
    }
    if (have)
        return TSAFE_OK;
    st = TSAFE_E_VALUE_RANGE;
fail:
    memset(out, 0, sizeof *out);
    return st;
}

tsafe_status tsafe_sealed_plan_check(const tsafe_sealed_plan *plan)
{
    if (!plan)
        return TSAFE_E_NULL;
    if (plan->version != TSAFE_SEALED_PLAN_VERSION)
        return TSAFE_E_VERSION;
    if (plan->r1.flags || plan->r2.flags)
        return TSAFE_E_INSECURE;
    tsafe_sealed_opts o = {.x_bits = plan->x_bits,
                           .a_bits = plan->a_bits,
                           .b_bits = plan->b_bits ? plan->b_bits : 13,
                           .rotate_after = plan->rotate_after,
                           .sites_per_query = plan->sites_per_query,
                           .semi_honest = plan->semi_honest,
                           .unchecked_shares = plan->checks == 0};
    tsafe_sealed_plan mine;
    tsafe_status st = tsafe_sealed_plan_derive((tsafe_sealed_mode)plan->mode, plan->d_in,
                                               plan->rank, plan->d_out_max, &o, &mine);
    if (st != TSAFE_OK)
        return TSAFE_E_PARAMS;
    uint8_t a[32], b[32];
    tsafe_sealed_plan_fingerprint(&mine, a);
    tsafe_sealed_plan_fingerprint(plan, b);
    return sodium_memcmp(a, b, 32) == 0 ? TSAFE_OK : TSAFE_E_PARAMS;
}

static void put_f64(crypto_generichash_state *h, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    tsafe_sealed_hash_u32(h, (uint32_t)v);
    tsafe_sealed_hash_u32(h, (uint32_t)(v >> 32));
}

static void put_bfv(crypto_generichash_state *h, const tsafe_bfv_params *b)
{
    tsafe_sealed_hash_u32(h, b->log_n);
    tsafe_sealed_hash_u32(h, b->resp_bits);
    tsafe_sealed_hash_u32(h, b->gap_bits);
    tsafe_sealed_hash_u32(h, b->t_bits);
    tsafe_sealed_hash_u32(h, b->flags);
}

void tsafe_sealed_plan_fingerprint(const tsafe_sealed_plan *p, uint8_t out[32])
{
    crypto_generichash_state h;
    crypto_generichash_init(&h, (const unsigned char *)"tsafe-sealed-plan", 17, 32);
    uint32_t f[] = {p->version, p->mode, p->d_in, p->rank, p->d_out_max,
                    p->x_bits, p->a_bits, p->b_bits, p->chunk1, p->rows1,
                    p->n_chunks1, p->flood1, p->trunc_bits, p->chunk2,
                    p->rotate_after, p->sites_per_query, p->semi_honest};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        tsafe_sealed_hash_u32(&h, f[i]);
    put_bfv(&h, &p->r1);
    put_bfv(&h, &p->r2);
    put_f64(&h, p->log2_sd1);
    put_f64(&h, p->log2_sd2);
    put_f64(&h, p->log2_fail);
    put_f64(&h, p->expected_rel_error);
    if (p->checks) /* absent from unchecked plans: their fingerprints stay */
        tsafe_sealed_hash_u32(&h, p->checks);
    crypto_generichash_final(&h, out, 32);
}

tsafe_status tsafe_sealed_plan_sizes(const tsafe_sealed_plan *p, uint32_t rank,
                                     uint32_t d_out, tsafe_sealed_sizes *out)
{
    if (!p || !out)
        return TSAFE_E_NULL;
    memset(out, 0, sizeof *out);
    if (rank == 0 || rank > p->rank || d_out == 0 || d_out > p->d_out_max)
        return TSAFE_E_RANGE;
    tsafe_sealed_layout l1;
    tsafe_sealed_layout1(p, rank, &l1);
    const tsafe_bfv_params *b1 = &p->r1;
    out->query = l1.n_chunks * ct_bytes(b1->log_n, b1->resp_bits, b1->gap_bits);
    for (uint32_t b = 0; b < l1.n_blocks; b++)
        out->response1 += sealed_bytes(b1->log_n, b1->resp_bits,
                                       tsafe_sealed_block_reads(&l1, b, NULL));
    if (p->checks) /* one checked result per site */
        out->response1 += sealed_bytes(b1->log_n, b1->resp_bits, p->checks);
    if (p->mode == TSAFE_SEALED_PRIVATE) {
        tsafe_sealed_layout l2;
        tsafe_sealed_layout2(p, rank, d_out, &l2);
        const tsafe_bfv_params *b2 = &p->r2;
        out->share = (size_t)l2.n_chunks * ct_bytes(b2->log_n, b2->resp_bits, b2->gap_bits);
        out->response2 = d_out; /* the rows' exponents */
        for (uint32_t b = 0; b < l2.n_blocks; b++)
            out->response2 += sealed_bytes(b2->log_n, b2->resp_bits,
                                           tsafe_sealed_block_reads(&l2, b, NULL));
    } else {
        out->share = (size_t)rank * 8;
        out->response2 = (size_t)d_out * 4;
    }
    return TSAFE_OK;
}

size_t tsafe_sealed_part_bytes(const tsafe_sealed_plan *p, uint8_t kind,
                               uint32_t rank, uint32_t d_out)
{
    tsafe_sealed_sizes z;
    if (kind == TSAFE_MSG_SEALED_QUERY) {
        rank = p->rank;
        d_out = p->d_out_max;
    }
    if (tsafe_sealed_plan_sizes(p, rank, d_out, &z) != TSAFE_OK)
        return 0;
    const size_t fixed = 64; /* header, tag, counts, per-site fields */
    switch (kind) {
    case TSAFE_MSG_SEALED_QUERY:
        return z.query + fixed;
    case TSAFE_MSG_SEALED_RESPONSE1:
        return z.response1 + fixed;
    case TSAFE_MSG_SEALED_SHARE:
    case TSAFE_MSG_SEALED_SHARE_CT:
        return z.share + fixed;
    default:
        return z.response2 + fixed;
    }
}

tsafe_status tsafe_sealed_contexts(const tsafe_sealed_plan *p,
                                   tsafe_bfv_context **c1, tsafe_bfv_context **c2)
{
    *c1 = *c2 = NULL;
    tsafe_status st = tsafe_bfv_context_create(&p->r1, c1);
    if (st == TSAFE_OK && p->mode == TSAFE_SEALED_PRIVATE)
        st = tsafe_bfv_context_create(&p->r2, c2);
    if (st != TSAFE_OK) {
        tsafe_bfv_context_free(*c1);
        *c1 = NULL;
    }
    return st;
}
