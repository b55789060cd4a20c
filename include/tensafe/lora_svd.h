/* SVD rank reduction of a LoRA adapter (libtensafe-lora).
 *
 * For A (r x in) and B (out x r), row-major float, computes the best
 * rank-k approximation of dW = B * A in Frobenius norm (Eckart-Young)
 * WITHOUT forming dW: thin QR of B and of A^T, SVD of the small core
 * R_B R_A^T (at most r x r), keep the k largest singular triplets. All the
 * arithmetic is in double (LAPACKE + CBLAS from OpenBLAS); the outputs are
 * float factors A' (k x in) and B' (out x k) with the singular values split
 * evenly: B' = Q_B U_k S_k^(1/2), A' = S_k^(1/2) V_k^T Q_A^T.
 *
 * Scaling: B' A' approximates B A itself. An adapter whose runtime scale is
 * s = alpha / r keeps the same dW only if its scale stays s, i.e. write
 * alpha' = s * k (or alpha' = s * sqrt(k) with rsLoRA) in the reduced
 * adapter's config.
 *
 * Thread safety: no shared state; calls may run concurrently on different
 * data (OpenBLAS's own threading applies inside a call). */
#ifndef TENSAFE_LORA_SVD_H
#define TENSAFE_LORA_SVD_H

#include <stddef.h>

#include "tensafe/export.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tsafe_svd_select {
    TSAFE_SVD_FIXED_RANK = 0, /* keep exactly `rank` triplets */
    TSAFE_SVD_ENERGY = 1      /* smallest k with sum_{i<k} s_i^2 >=
                                 energy * sum_i s_i^2 */
} tsafe_svd_select;

/* Plain value struct.
 *  select     how k is chosen.
 *  rank       FIXED_RANK: 1 <= k <= r (k > r -> TSAFE_E_RANGE; k larger
 *             than min(in, out, r) -> TSAFE_E_RANGE as well).
 *  energy     ENERGY: target fraction in (0, 1]; 1 keeps every non-zero
 *             singular value.
 *  max_rank   ENERGY: optional cap on k (0 = none). */
typedef struct tsafe_svd_options {
    tsafe_svd_select select;
    size_t rank;
    double energy;
    size_t max_rank;
} tsafe_svd_options;

/* Result (plain struct, allocated by tsafe_svd_reduce, released with
 * tsafe_svd_result_free which also frees the arrays it points to). */
typedef struct tsafe_svd_result {
    size_t rank;                /* k */
    size_t in_features;         /* columns of A' */
    size_t out_features;        /* rows of B' */
    float *A;                   /* k x in, row-major */
    float *B;                   /* out x k, row-major */
    size_t n_singular;          /* min(in, out, r) */
    double *singular_values;    /* all singular values of B*A, descending */
    double energy_retained;     /* sum_{i<k} s_i^2 / sum_i s_i^2 (1 if dW=0) */
    double rel_frobenius_error; /* ||dW - B'A'||_F / ||dW||_F in exact
                                   arithmetic = sqrt(sum_{i>=k} s_i^2 /
                                   sum_i s_i^2) (0 if dW=0); the float
                                   rounding of A', B' adds ~1e-7 relative */
} tsafe_svd_result;

/* A: r x in_features, B: out_features x r, both row-major float, borrowed.
 * Every dimension >= 1 and <= INT_MAX. Non-finite entries ->
 * TSAFE_E_VALUE_RANGE. LAPACK non-convergence -> TSAFE_E_VALUE_RANGE.
 * On success *out is owned by the caller (tsafe_svd_result_free). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_svd_reduce(const float *A, const float *B, size_t r, size_t in_features,
                 size_t out_features, const tsafe_svd_options *opt,
                 tsafe_svd_result **out);

/* NULL is a no-op. */
TSAFE_API void tsafe_svd_result_free(tsafe_svd_result *res);

#ifdef __cplusplus
}
#endif
#endif
