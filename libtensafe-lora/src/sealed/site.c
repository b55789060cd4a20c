/* Sealed sites: an adapter module quantized for a plan, with its
 * coefficient-encoded plaintexts built once (the server's side). */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sealed_internal.h"
#include "tsafe_check.h"
#include "tensafe/lora_svd.h"

static double max_abs(const float *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)v[i]));
    return m;
}

static void free_plains(tsafe_bfv_plain **p, size_t n)
{
    if (!p)
        return;
    for (size_t i = 0; i < n; i++)
        tsafe_bfv_plain_free(p[i]);
    free(p);
}

/* Plaintext of block b of chunk c: row o of the block holds matrix row
 * b*rows + o, its entries for inputs c*chunk + j reversed, so that the
 * product with the chunk puts the inner product at o*chunk + chunk - 1. */
void tsafe_sealed_encode_block(const tsafe_sealed_layout *l, const int64_t *m,
                               uint32_t width, uint32_t c, uint32_t b,
                               int64_t *coeff, size_t n)
{
    memset(coeff, 0, n * sizeof *coeff);
    for (uint32_t o = 0; o < l->rows; o++) {
        uint32_t row = b * l->rows + o;
        if (row >= l->outs)
            break;
        for (uint32_t j = 0; j < l->chunk; j++) {
            uint32_t in = c * l->chunk + j;
            if (in >= width)
                break;
            coeff[(size_t)o * l->chunk + l->chunk - 1 - j] = m[(size_t)row * width + in];
        }
    }
}

static tsafe_status build_plains(const tsafe_bfv_context *ctx,
                                 const tsafe_sealed_layout *l, const int64_t *m,
                                 uint32_t width, tsafe_bfv_plain ***out)
{
    size_t n = tsafe_bfv_context_n(ctx), count = (size_t)l->n_chunks * l->n_blocks;
    tsafe_bfv_plain **p = calloc(count, sizeof *p);
    int64_t *coeff = malloc(n * sizeof *coeff);
    tsafe_status st = TSAFE_OK;
    if (!p || !coeff)
        st = TSAFE_E_NOMEM;
    for (uint32_t c = 0; st == TSAFE_OK && c < l->n_chunks; c++)
        for (uint32_t b = 0; st == TSAFE_OK && b < l->n_blocks; b++) {
            tsafe_sealed_encode_block(l, m, width, c, b, coeff, n);
            st = tsafe_bfv_plain_create(ctx, coeff, n, &p[(size_t)c * l->n_blocks + b]);
        }
    free(coeff);
    if (st != TSAFE_OK) {
        free_plains(p, count);
        return st;
    }
    *out = p;
    return TSAFE_OK;
}

/* sealed: one A scale per site (the client calibrates its DP noise in
 * units of s_x * scale_a; a per-row scale would reveal row maxima), and
 * B' = scale * B * scale_a in floats for round 2 in the clear. */
static void quantize_sealed(tsafe_sealed_site *s, const float *A, const float *B,
                            int64_t *aq)
{
    const tsafe_sealed_plan *p = &s->plan;
    size_t na = (size_t)s->rank * p->d_in;
    double amax = (double)tsafe_sealed_qmax(p->a_bits), am = max_abs(A, na);
    s->scale_a = am > 0 ? am / amax : 1.0;
    for (size_t i = 0; i < na; i++)
        aq[i] = (int64_t)lrint(A[i] / s->scale_a);
    for (uint32_t j = 0; j < s->d_out; j++) /* transposed: rank x d_out */
        for (uint32_t k = 0; k < s->rank; k++)
            s->bprime[(size_t)k * s->d_out + j] =
                (float)((double)s->scale * B[(size_t)j * s->rank + k] * s->scale_a);
}

/* sqrt of the largest eigenvalue of A_q A_q^T (rank x rank, exact in
 * doubles: integer sums below 2^53), i.e. the operator norm of A_q, with a
 * margin for the eigensolver's rounding: an upper bound. */
static tsafe_status op_norm(const int64_t *aq, uint32_t rank, uint32_t d_in, double *out)
{
    double *g = calloc((size_t)rank * rank, sizeof *g), *w = malloc(rank * sizeof *w);
    if (!g || !w) {
        free(g);
        free(w);
        return TSAFE_E_NOMEM;
    }
    for (uint32_t a = 0; a < rank; a++)
        for (uint32_t b = a; b < rank; b++) {
            double acc = 0;
            for (uint32_t j = 0; j < d_in; j++)
                acc += (double)aq[(size_t)a * d_in + j] * (double)aq[(size_t)b * d_in + j];
            g[(size_t)a * rank + b] = g[(size_t)b * rank + a] = acc;
        }
    double trace = 0;
    for (uint32_t a = 0; a < rank; a++)
        trace += g[(size_t)a * rank + a];
    lapack_int info = LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', (lapack_int)rank, g,
                                    (lapack_int)rank, w);
    /* the eigenvalues are exact to ~rank * 2^-52 * trace; on a failure the
     * trace (= ||A_q||_F^2) is itself a bound */
    double lmax = info == 0 ? w[rank - 1] + 1e-12 * rank * trace + 1 : trace;
    *out = sqrt(fmin(lmax, trace));
    free(g);
    free(w);
    return TSAFE_OK;
}

/* sealed-private's grid for a row of root mean square rms, on a width
 * whose largest value is qmax: rms / grid = qmax / RMS_RATIO - slack, so
 * that the quantized row's rms, at most slack more (rounding to nearest
 * adds a vector of L2 norm <= sqrt(n) / 2, B's stochastic rounding one of
 * L2 norm < sqrt(n)), stays within plan.c's qmax / RMS_RATIO. 0 for a
 * zero row.
 *
 * Only the rms is bounded, not the largest entry: every bound of the
 * protocol takes a row through its L2 norm (|u_i| <= ||A_q,i||_2 X2, the
 * error term of a read, ||B_q,j||_2 in the shift) or its L1 norm (the
 * rounding term of a read: ||.||_1 <= sqrt(n) ||.||_2 <= n qmax /
 * RMS_RATIO, within plan.c's n qmax / 2). A row dominated by one large
 * weight (a heavy-tailed adapter's outlier, a one-hot canonical row) thus
 * puts that weight above qmax (up to qmax sqrt(n) / RMS_RATIO) and keeps
 * the grid of the rest of the row as fine as a typical row's; with a
 * max-based grid the rest got sqrt(n) / RMS_RATIO times coarser, and u_i
 * of such a row that much smaller than the others, which in turn made its
 * column of B' dominate the grid of every output row (issue 19: 0.8-4e-3
 * relative error on heavy-tailed adapters, 2-4e-4 now). */
static double row_scale_for(double rms, double qmax, double slack)
{
    /* 1 + 2^-20: the float rounding of rms and of the division */
    return rms > 0 ? rms * (1 + 0x1p-20) / (qmax / TSAFE_SEALED_RMS_RATIO - slack) : 0;
}

/* sealed-private, A: each row i on its own scale row_scale[i] (its rms
 * <= a_max / RMS_RATIO after rounding, which adds at most 1/2 to an rms,
 * and nothing else: see row_scale_for), rounded to nearest into aq. */
static void quantize_a_rows(tsafe_sealed_site *s, const float *A, int64_t *aq)
{
    const tsafe_sealed_plan *p = &s->plan;
    uint32_t d_in = p->d_in;
    double amax = (double)tsafe_sealed_qmax(p->a_bits);
    for (uint32_t i = 0; i < s->rank; i++) {
        const float *row = A + (size_t)i * d_in;
        double ss = 0;
        for (uint32_t j = 0; j < d_in; j++)
            ss += (double)row[j] * row[j];
        double sc = row_scale_for(sqrt(ss / d_in), amax, 0.5);
        if (!(sc > 0))
            sc = 1.0; /* a zero row: A_q = 0 */
        s->row_scale[i] = sc;
        for (uint32_t j = 0; j < d_in; j++)
            aq[(size_t)i * d_in + j] = (int64_t)lrint(row[j] / sc);
    }
}

/* B' = scale * B * diag(row scales), transposed (rank x d_out): round 2
 * folds A's row scales into B, so they never leave the server. */
static tsafe_status fold_row_scales(tsafe_sealed_site *s, const float *B)
{
    uint32_t rank = s->rank, d_out = s->d_out;
    for (uint32_t j = 0; j < d_out; j++)
        for (uint32_t k = 0; k < rank; k++) {
            double v = (double)s->scale * B[(size_t)j * rank + k] * s->row_scale[k];
            TSAFE_REQUIRE(isfinite(v) && fabs(v) < 0x1p120, TSAFE_E_VALUE_RANGE);
            s->bprime[(size_t)k * d_out + j] = (float)v;
        }
    return TSAFE_OK;
}

/* |B_q| <= b_max, and every row's rms <= b_max / RMS_RATIO (plan.c's
 * round-2 noise bound): need[j] is output row j's own grid, scale_b the
 * coarsest, public (a row of small weights, or every row but the one
 * holding an outlier, keeps its bits on scale_b 2^-row_exp[j]). */
static void choose_scale_b(tsafe_sealed_site *s, double *need)
{
    uint32_t rank = s->rank, d_out = s->d_out;
    double bmax = (double)tsafe_sealed_qmax(s->plan.b_bits);
    s->scale_b = 0;
    for (uint32_t j = 0; j < d_out; j++) {
        double acc = 0;
        for (uint32_t k = 0; k < rank; k++) {
            double v = (double)s->bprime[(size_t)k * d_out + j];
            acc += v * v;
        }
        need[j] = row_scale_for(sqrt(acc / rank), bmax, 1.0);
        s->scale_b = fmax(s->scale_b, need[j]);
    }
    if (!(s->scale_b > 0))
        s->scale_b = 1.0;
    /* rounded up to 8 significant bits: the public scale is then the same
     * for every factorization of the product, whose canonical factors
     * agree to float rounding (costs at most 0.4 % of B's grid) */
    int se;
    double sm = frexp(s->scale_b, &se);
    s->scale_b = ldexp(ceil(sm * 256) / 256, se);
}

/* B_q: each output row j on the power-of-two grid scale_b 2^-row_exp[j]
 * nearest above need[j], rounded stochastically with the offsets w
 * (rounding.c): the client cannot compute B_q, and its distribution is
 * continuous in the product. Returns the largest ||B_q,j||_2 bound. */
static double round_b(tsafe_sealed_site *s, const double *need, const double *w)
{
    uint32_t rank = s->rank, d_out = s->d_out;
    double row2 = 0;
    for (uint32_t j = 0; j < d_out; j++) {
        int e = 0;
        if (need[j] > 0) {
            frexp(s->scale_b / need[j], &e); /* ratio in [2^(e-1), 2^e) */
            e = e - 1 < 0 ? 0 : e - 1 > 63 ? 63 : e - 1;
        }
        s->row_exp[j] = (uint8_t)e;
        double grid = ldexp(s->scale_b, -e), acc = 0;
        int64_t any = 0;
        for (uint32_t k = 0; k < rank; k++) {
            double v = (double)s->bprime[(size_t)k * d_out + j] / grid;
            s->bq[(size_t)j * rank + k] = (int64_t)floor(v + w[(size_t)j * rank + k]);
            any |= s->bq[(size_t)j * rank + k];
            acc += v * v;
        }
        /* a zero row (a zero B, A or product row: PEFT's initial B) is
         * marked, and the client writes delta_j = 0 exactly: with round 2
         * flooding a whole step, a read is off by one now and then (when
         * flood and noise together pass half a step) */
        if (!any)
            s->row_exp[j] = TSAFE_SEALED_ROW_ZERO;
        /* ||B_q,j||_2 < ||v||_2 + sqrt(r) (each entry moves by < 1): a
         * bound continuous in the product, so that k (public) is the same
         * for every factorization and every rounding */
        row2 = fmax(row2, sqrt(acc) + sqrt((double)rank));
    }
    return row2;
}

/* The site's shift k: the smallest at least k_min with every output
 * ||B_q,j||_2 (||A_q||_op X2 / 2^k + 3 sqrt(r) + ||z||) below t2/2 (row2:
 * the largest row bound, opn: ||A_q||_op). */
static tsafe_status choose_shift(tsafe_sealed_site *s, double opn, double row2)
{
    const tsafe_sealed_plan *p = &s->plan;
    double x2 = tsafe_sealed_x2(p);
    double t2half = ldexp(1.0, (int)p->r2.t_bits - 1), sr = sqrt((double)s->rank);
    double extra = (3 + TSAFE_SEALED_OUT_NOISE_TAIL * TSAFE_SEALED_OUT_NOISE_SD) * sr;
    uint32_t k = tsafe_sealed_k_min(p);
    while (k < p->trunc_bits && row2 * (ldexp(opn * x2, -(int)k) + extra) * (1 + 0x1p-30) >= t2half)
        k++;
    /* the plan's k covers every site within its bounds (plan.c); a site
     * that would not fit is refused rather than left to wrap */
    if (row2 * (ldexp(opn * x2, -(int)k) + extra) * (1 + 0x1p-30) >= t2half)
        return TSAFE_E_VALUE_RANGE;
    s->trunc_bits = k;
    return TSAFE_OK;
}

/* sealed-private: each row of A on its own scale (the scales never leave
 * the server: round 2 folds them into B'), so a row of small weights is
 * not quantized on the grid of the largest one; B' = scale * B * diag(row
 * scales) = scale_b B_q with |B_q| <= b_max. The client scales x to
 * ||x_q||_2 <= X2 (tsafe_sealed_x2), so by Cauchy-Schwarz |u_i| <=
 * ||A_q,i||_2 X2 and ||u||_2 <= ||A_q||_op X2, and
 * every output |B_q,j (u~ + z)| <= ||B_q,j||_2 (||A_q||_op X2 / 2^k + 2
 * sqrt(r) + ||z||): the site's shift k is the smallest at least k_min
 * that keeps that below t2/2. These bounds hold for every x; for a
 * typical x they are sqrt(d_in) and sqrt(r) looser than the values, not
 * d_in and r as an entrywise bound would be. The client learns scale_b 2^k
 * and k, functions of the product B A only (the factors are canonical:
 * canonical_factors). A zero row or a zero B gives exact zeros. */
static tsafe_status quantize_private(tsafe_sealed_site *s, const float *A, const float *B,
                                     const double *w, int64_t *aq)
{
    const tsafe_sealed_plan *p = &s->plan;
    size_t nb = (size_t)s->d_out * s->rank;
    s->row_scale = malloc(s->rank * sizeof *s->row_scale);
    s->bq = malloc(nb * sizeof *s->bq);
    if (!s->row_scale || !s->bq)
        return TSAFE_E_NOMEM;
    quantize_a_rows(s, A, aq);
    double opn;
    tsafe_status st = op_norm(aq, s->rank, p->d_in, &opn);
    if (st != TSAFE_OK)
        return st;
    if ((st = fold_row_scales(s, B)) != TSAFE_OK)
        return st;
    /* each output row on its own grid scale_b 2^-row_exp[j] */
    double *need = malloc(s->d_out * sizeof *need);
    s->row_exp = malloc(s->d_out);
    if (!need || !s->row_exp) {
        free(need);
        return TSAFE_E_NOMEM;
    }
    choose_scale_b(s, need);
    double row2 = round_b(s, need, w);
    free(need);
    if ((st = choose_shift(s, opn, row2)) != TSAFE_OK)
        return st;
    /* round 1 reads u / 2^K (the query's scale): A_q 2^(K - k) gives this
     * site's u / 2^k (at most 2^LIFT_MAX: tsafe_sealed_k_min) */
    int64_t lift = (int64_t)1 << (p->trunc_bits - s->trunc_bits);
    size_t na = (size_t)s->rank * p->d_in;
    for (size_t i = 0; i < na; i++)
        aq[i] *= lift;
    return TSAFE_OK;
}

/* The adapter's product P = B A in a canonical factorization that depends
 * on P alone (issue 19: two adapters with the same product must not be
 * told apart by the client, and the lattice of the outputs must be a
 * function of P): B_c = Q_B U S^(1/2), A_c = S^(1/2) V^T Q_A^T through
 * QR + core SVD (tsafe_svd_reduce), each triplet's sign fixed so that the
 * largest |entry| of its column of B_c is positive. Balanced factors also
 * quantize better than a lopsided pair. rank > min(d_in, d_out): the extra
 * components are zero. */
static tsafe_status canonical_factors(const float *A, const float *B, uint32_t rank,
                                      uint32_t d_in, uint32_t d_out, float *Ac, float *Bc)
{
    memset(Ac, 0, (size_t)rank * d_in * sizeof *Ac);
    memset(Bc, 0, (size_t)d_out * rank * sizeof *Bc);
    size_t k = rank;
    if (k > d_in)
        k = d_in;
    if (k > d_out)
        k = d_out;
    tsafe_svd_options o = {TSAFE_SVD_FIXED_RANK, k, 1.0, 0};
    tsafe_svd_result *r = NULL;
    tsafe_status st = tsafe_svd_reduce(A, B, rank, d_in, d_out, &o, &r);
    if (st != TSAFE_OK)
        return st;
    for (size_t i = 0; i < r->rank; i++) {
        size_t arg = 0;
        float big = 0;
        for (size_t j = 0; j < d_out; j++)
            if (fabsf(r->B[j * r->rank + i]) > big) {
                big = fabsf(r->B[j * r->rank + i]);
                arg = j;
            }
        float sg = r->B[arg * r->rank + i] < 0 ? -1.0f : 1.0f;
        for (size_t j = 0; j < d_out; j++)
            Bc[j * rank + i] = sg * r->B[j * r->rank + i];
        for (size_t j = 0; j < d_in; j++)
            Ac[i * d_in + j] = sg * r->A[i * d_in + j];
    }
    tsafe_svd_result_free(r);
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_site_create(const tsafe_sealed_plan *plan,
                                      const float *A, const float *B,
                                      uint32_t rank, uint32_t d_out, float scale,
                                      tsafe_sealed_site **out)
{
    return tsafe_sealed_site_build(plan, NULL, NULL, A, B, rank, d_out, scale, out);
}

/* Wipes and frees a site build's secret scratch (each may be NULL). */
static void free_scratch(void *p, size_t bytes)
{
    if (p)
        sodium_memzero(p, bytes);
    free(p);
}

/* The site's quantized factors: aq (A_q, rank x d_in, scratch) and, in
 * sealed-private, s->bq through the canonical factors of the product and
 * B's keyed stochastic rounding. */
static tsafe_status quantize_site(tsafe_sealed_site *s, const float *A, const float *B,
                                  int64_t *aq)
{
    const tsafe_sealed_plan *plan = &s->plan;
    /* sealed mode (semi-honest peers only) keeps the adapter's own factors:
     * its client learns s B' anyway (THREAT_MODEL.md) */
    if (plan->mode != TSAFE_SEALED_PRIVATE) {
        quantize_sealed(s, A, B, aq);
        return TSAFE_OK;
    }
    size_t na = (size_t)s->rank * plan->d_in, nb = (size_t)s->d_out * s->rank;
    float *Ac = malloc(na * sizeof *Ac); /* canonical factors: as secret as A, B */
    float *Bc = malloc(nb * sizeof *Bc);
    double *w = malloc(nb * sizeof *w);  /* B's rounding offsets: as secret */
    tsafe_status st = Ac && Bc && w ? TSAFE_OK : TSAFE_E_NOMEM;
    /* the rounding offsets are seeded by the adapter's own factors:
     * another factorization of the product gets independent ones */
    if (st == TSAFE_OK)
        st = tsafe_sealed_rounding_offsets(A, B, s->rank, plan->d_in, s->d_out, s->scale, w);
    if (st == TSAFE_OK)
        st = canonical_factors(A, B, s->rank, plan->d_in, s->d_out, Ac, Bc);
    if (st == TSAFE_OK)
        st = quantize_private(s, Ac, Bc, w, aq);
    free_scratch(Ac, na * sizeof *Ac);
    free_scratch(Bc, nb * sizeof *Bc);
    free_scratch(w, nb * sizeof *w);
    return st;
}

tsafe_status tsafe_sealed_site_build(const tsafe_sealed_plan *plan,
                                     const tsafe_bfv_context *c1,
                                     const tsafe_bfv_context *c2, const float *A,
                                     const float *B, uint32_t rank, uint32_t d_out,
                                     float scale, tsafe_sealed_site **out)
{
    TSAFE_REQUIRE(plan && A && B && out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(rank >= 1 && rank <= plan->rank && d_out >= 1 &&
                      d_out <= plan->d_out_max, TSAFE_E_RANGE);
    TSAFE_REQUIRE(isfinite(scale), TSAFE_E_VALUE_RANGE);
    size_t na = (size_t)rank * plan->d_in, nb = (size_t)d_out * rank;
    for (size_t i = 0; i < na; i++)
        TSAFE_REQUIRE(isfinite(A[i]), TSAFE_E_VALUE_RANGE);
    for (size_t i = 0; i < nb; i++)
        TSAFE_REQUIRE(isfinite(B[i]), TSAFE_E_VALUE_RANGE);
    tsafe_status st;
    tsafe_sealed_site *s = calloc(1, sizeof *s);
    int64_t *aq = malloc(na * sizeof *aq); /* A_q: as secret as A */
    TSAFE_CHECK(s && aq, TSAFE_E_NOMEM);
    static uint64_t next_id; /* ids start at 1: 0 marks an empty cache entry */
    s->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
    s->plan = *plan;
    s->rank = rank;
    s->d_out = d_out;
    s->scale = scale;
    s->bprime = malloc(nb * sizeof *s->bprime);
    TSAFE_CHECK(s->bprime, TSAFE_E_NOMEM);
    if (c1) { /* borrowed: the caller built them for this plan */
        s->ctx1 = (tsafe_bfv_context *)c1;
        s->ctx2 = (tsafe_bfv_context *)c2;
        s->borrowed_ctx = 1;
    } else {
        TSAFE_TRY(tsafe_sealed_contexts(plan, &s->ctx1, &s->ctx2));
    }
    TSAFE_TRY(quantize_site(s, A, B, aq));
    tsafe_sealed_layout1(plan, rank, &s->l1);
    TSAFE_TRY(build_plains(s->ctx1, &s->l1, aq, plan->d_in, &s->p1));
    if (plan->mode == TSAFE_SEALED_PRIVATE) {
        tsafe_sealed_layout2(plan, rank, d_out, &s->l2);
        /* a checked plan encodes B_q - H K per token (server_round2.c) */
        if (!plan->checks)
            TSAFE_TRY(build_plains(s->ctx2, &s->l2, s->bq, rank, &s->p2));
    }
    free_scratch(aq, na * sizeof *aq);
    *out = s;
    return TSAFE_OK;
fail:
    free_scratch(aq, na * sizeof *aq);
    tsafe_sealed_site_free(s);
    return st;
}

void tsafe_sealed_site_free(tsafe_sealed_site *s)
{
    if (!s)
        return;
    free_plains(s->p1, (size_t)s->l1.n_chunks * s->l1.n_blocks);
    free_plains(s->p2, (size_t)s->l2.n_chunks * s->l2.n_blocks);
    free(s->bprime);
    free(s->bq);
    free(s->row_scale);
    free(s->row_exp);
    if (!s->borrowed_ctx) {
        tsafe_bfv_context_free(s->ctx1);
        tsafe_bfv_context_free(s->ctx2);
    }
    free(s);
}

uint32_t tsafe_sealed_site_rank(const tsafe_sealed_site *s) { return s ? s->rank : 0; }
uint32_t tsafe_sealed_site_d_out(const tsafe_sealed_site *s) { return s ? s->d_out : 0; }
