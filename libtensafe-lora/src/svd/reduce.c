/* Eckart-Young rank reduction of dW = B A through QR + a small core SVD
 * (see tensafe/lora_svd.h). Everything in double. */
#include <cblas.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_svd.h"
#include "tsafe_check.h"

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* malloc(a * b * elem) with overflow check; *p NULL on error. */
static tsafe_status alloc_mat(void **p, size_t a, size_t b, size_t elem)
{
    *p = NULL;
    if (a && b > SIZE_MAX / a)
        return TSAFE_E_SIZE_OVERFLOW;
    size_t n = a * b;
    if (n && elem > SIZE_MAX / n)
        return TSAFE_E_SIZE_OVERFLOW;
    *p = malloc(n * elem > 0 ? n * elem : 1);
    return *p ? TSAFE_OK : TSAFE_E_NOMEM;
}

/* Thin QR of M (rows x cols, row-major, ld = cols) in place: on return the
 * first `kk = min(rows, cols)` columns hold Q (ld cols) and R (kk x cols,
 * upper trapezoidal) is written to r_out. */
static tsafe_status thin_qr(double *m, size_t rows, size_t cols, double *tau,
                            double *r_out)
{
    size_t kk = min_sz(rows, cols);
    lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (lapack_int)rows,
                                     (lapack_int)cols, m, (lapack_int)cols, tau);
    if (info != 0)
        return info < 0 ? TSAFE_E_ARG : TSAFE_E_VALUE_RANGE;
    for (size_t i = 0; i < kk; i++)
        for (size_t j = 0; j < cols; j++)
            r_out[i * cols + j] = j >= i ? m[i * cols + j] : 0.0;
    info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (lapack_int)rows, (lapack_int)kk,
                          (lapack_int)kk, m, (lapack_int)cols, tau);
    if (info != 0)
        return info < 0 ? TSAFE_E_ARG : TSAFE_E_VALUE_RANGE;
    return TSAFE_OK;
}

static tsafe_status choose_rank(const tsafe_svd_options *opt, size_t r,
                                const double *s, size_t m, size_t *k_out)
{
    if (opt->select == TSAFE_SVD_FIXED_RANK) {
        if (opt->rank == 0)
            return TSAFE_E_ARG;
        if (opt->rank > r || opt->rank > m)
            return TSAFE_E_RANGE;
        *k_out = opt->rank;
        return TSAFE_OK;
    }
    if (opt->select != TSAFE_SVD_ENERGY)
        return TSAFE_E_ARG;
    if (!(opt->energy > 0.0) || !(opt->energy <= 1.0))
        return TSAFE_E_ARG;
    double total = 0.0;
    for (size_t i = 0; i < m; i++)
        total += s[i] * s[i];
    size_t k = m;
    if (total == 0.0) {
        k = 1;
    } else if (opt->energy >= 1.0) {
        k = 0;
        while (k < m && s[k] > 0.0)
            k++;
    } else {
        double want = opt->energy * total, cum = 0.0;
        for (size_t i = 0; i < m; i++) {
            cum += s[i] * s[i];
            if (cum >= want) {
                k = i + 1;
                break;
            }
        }
    }
    if (k == 0)
        k = 1;
    if (opt->max_rank && k > opt->max_rank)
        k = opt->max_rank;
    *k_out = k;
    return TSAFE_OK;
}

void tsafe_svd_result_free(tsafe_svd_result *res)
{
    if (!res)
        return;
    free(res->A);
    free(res->B);
    free(res->singular_values);
    free(res);
}

/* A (r x in) transposed into at (in x r) and B (out x r) into bd, in
 * double; TSAFE_E_VALUE_RANGE on a value that is not finite. */
static tsafe_status widen(const float *A, const float *B, size_t r, size_t in, size_t outf,
                          double *bd, double *at)
{
    for (size_t i = 0; i < outf * r; i++) {
        if (!isfinite(B[i]))
            return TSAFE_E_VALUE_RANGE;
        bd[i] = B[i];
    }
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < in; j++) {
            if (!isfinite(A[i * in + j]))
                return TSAFE_E_VALUE_RANGE;
            at[j * r + i] = A[i * in + j];
        }
    return TSAFE_OK;
}

/* Thin SVD of core (p x q, destroyed): singular values s (m), U (p x m),
 * V^T (m x q); superb is LAPACK's scratch (m). */
static tsafe_status svd(double *core, size_t p, size_t q, size_t m, double *s, double *u,
                        double *vt, double *superb)
{
    lapack_int info = LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'S', 'S', (lapack_int)p,
                                     (lapack_int)q, core, (lapack_int)q, s, u, (lapack_int)m,
                                     vt, (lapack_int)q, superb);
    return info == 0 ? TSAFE_OK : info < 0 ? TSAFE_E_ARG : TSAFE_E_VALUE_RANGE;
}

/* The rank-k factors in float, S_k^(1/2) split evenly between them:
 * B' = bo S_k^(1/2), A' = S_k^(1/2) ao. */
static void split_root(const double *bo, const double *ao, const double *s, size_t k,
                       size_t in, size_t outf, tsafe_svd_result *res)
{
    for (size_t j = 0; j < k; j++) {
        double h = sqrt(s[j]);
        for (size_t i = 0; i < outf; i++)
            res->B[i * k + j] = (float)(bo[i * k + j] * h);
        for (size_t i = 0; i < in; i++)
            res->A[j * in + i] = (float)(ao[j * in + i] * h);
    }
}

/* Sizes, the share of the squared singular values the first k keep, and
 * the relative Frobenius error of dropping the rest. */
static void finish(const double *s, size_t m, size_t k, size_t in, size_t outf,
                   tsafe_svd_result *res)
{
    res->rank = k;
    res->in_features = in;
    res->out_features = outf;
    res->n_singular = m;
    double head = 0.0, tail = 0.0;
    for (size_t i = 0; i < m; i++) {
        if (i < k)
            head += s[i] * s[i];
        else
            tail += s[i] * s[i];
    }
    if (head + tail > 0.0) {
        res->energy_retained = head / (head + tail);
        res->rel_frobenius_error = sqrt(tail / (head + tail));
    } else {
        res->energy_retained = 1.0;
        res->rel_frobenius_error = 0.0;
    }
}

tsafe_status tsafe_svd_reduce(const float *A, const float *B, size_t r,
                              size_t in_features, size_t out_features,
                              const tsafe_svd_options *opt,
                              tsafe_svd_result **out)
{
    if (!A || !B || !opt || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (r == 0 || in_features == 0 || out_features == 0)
        return TSAFE_E_ARG;
    if (r > INT_MAX || in_features > INT_MAX || out_features > INT_MAX)
        return TSAFE_E_RANGE;
    if (opt->select == TSAFE_SVD_FIXED_RANK && opt->rank > r)
        return TSAFE_E_RANGE;

    const size_t in = in_features, outf = out_features;
    const size_t p = min_sz(outf, r), q = min_sz(in, r), m = min_sz(p, q);
    tsafe_status st = TSAFE_OK;
    double *bd = NULL, *at = NULL, *rb = NULL, *ra = NULL, *core = NULL;
    double *u = NULL, *vt = NULL, *tau = NULL, *superb = NULL;
    double *bo = NULL, *ao = NULL;
    tsafe_svd_result *res = NULL;

    TSAFE_TRY(alloc_mat((void **)&bd, outf, r, sizeof(double)));
    TSAFE_TRY(alloc_mat((void **)&at, in, r, sizeof(double)));
    TSAFE_TRY(widen(A, B, r, in, outf, bd, at));

    TSAFE_TRY(alloc_mat((void **)&rb, p, r, sizeof(double)));
    TSAFE_TRY(alloc_mat((void **)&ra, q, r, sizeof(double)));
    TSAFE_TRY(alloc_mat((void **)&tau, r, 1, sizeof(double)));
    TSAFE_TRY(thin_qr(bd, outf, r, tau, rb)); /* B = Q_B R_B, Q_B: out x p */
    TSAFE_TRY(thin_qr(at, in, r, tau, ra));   /* A^T = Q_A R_A, Q_A: in x q */

    /* core = R_B R_A^T (p x q) */
    TSAFE_TRY(alloc_mat((void **)&core, p, q, sizeof(double)));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p, (int)q,
                (int)r, 1.0, rb, (int)r, ra, (int)r, 0.0, core, (int)q);

    res = calloc(1, sizeof *res);
    TSAFE_CHECK(res, TSAFE_E_NOMEM);
    TSAFE_TRY(alloc_mat((void **)&res->singular_values, m, 1, sizeof(double)));
    TSAFE_TRY(alloc_mat((void **)&u, p, m, sizeof(double)));
    TSAFE_TRY(alloc_mat((void **)&vt, m, q, sizeof(double)));
    TSAFE_TRY(alloc_mat((void **)&superb, m, 1, sizeof(double)));
    TSAFE_TRY(svd(core, p, q, m, res->singular_values, u, vt, superb));
    const double *s = res->singular_values;

    size_t k = 0;
    TSAFE_TRY(choose_rank(opt, r, s, m, &k));

    /* B' = Q_B U_k S_k^(1/2), A' = S_k^(1/2) V_k^T Q_A^T */
    TSAFE_TRY(alloc_mat((void **)&bo, outf, k, sizeof(double)));
    TSAFE_TRY(alloc_mat((void **)&ao, k, in, sizeof(double)));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)outf, (int)k,
                (int)p, 1.0, bd, (int)r, u, (int)m, 0.0, bo, (int)k);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)k, (int)in,
                (int)q, 1.0, vt, (int)q, at, (int)r, 0.0, ao, (int)in);

    TSAFE_TRY(alloc_mat((void **)&res->B, outf, k, sizeof(float)));
    TSAFE_TRY(alloc_mat((void **)&res->A, k, in, sizeof(float)));
    split_root(bo, ao, s, k, in, outf, res);
    finish(s, m, k, in, outf, res);
    *out = res;
    res = NULL;

fail:
    tsafe_svd_result_free(res);
    free(bd);
    free(at);
    free(rb);
    free(ra);
    free(core);
    free(u);
    free(vt);
    free(tau);
    free(superb);
    free(bo);
    free(ao);
    return st;
}
