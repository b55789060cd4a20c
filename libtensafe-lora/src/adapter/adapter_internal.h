/* Internal layout of tsafe_lora_adapter (libtensafe-lora only). */
#ifndef TSAFE_ADAPTER_INTERNAL_H
#define TSAFE_ADAPTER_INTERNAL_H

#include <stddef.h>

#include "tensafe/lora_adapter.h"

typedef struct {
    char *name;
    const char *proj; /* points into name */
    int layer;
    int expert;
    size_t rank, in_dim, out_dim;
    double alpha, scale;
    tsafe_dtype source_dtype;
    float *A, *B;
} tsafe_lora_mod;

struct tsafe_lora_adapter {
    tsafe_lora_config cfg;
    tsafe_lora_mod *m; /* sorted by tsafe_lora_name_cmp */
    size_t n, cap;
    char **targets;
    size_t n_targets;
    tsafe_lora_origin origin; /* path points at origin_path */
    char *origin_path;
};

/* Records an unsigned origin with a copy of path (NULL: none). */
tsafe_status tsafe_lora_adapter_set_unsigned_path(tsafe_lora_adapter *a, const char *path);

/* Natural order: digit runs compared as numbers, the rest bytewise. */
int tsafe_lora_name_cmp(const char *a, const char *b);

/* Inserts a module taking ownership of A and B (malloc'd) on success; on
 * error they are NOT freed. Checks name uniqueness and finiteness. */
tsafe_status tsafe_lora_adapter_insert(tsafe_lora_adapter *a, const char *name,
                                       size_t rank, size_t in_dim,
                                       size_t out_dim, float *A, float *B,
                                       double alpha, tsafe_dtype src);

/* Appends without keeping the order (bulk loading); same ownership rules.
 * tsafe_lora_adapter_finish then sorts and refuses duplicate names
 * (TSAFE_E_ADAPTER). */
tsafe_status tsafe_lora_adapter_append(tsafe_lora_adapter *a, const char *name,
                                       size_t rank, size_t in_dim,
                                       size_t out_dim, float *A, float *B,
                                       double alpha, tsafe_dtype src);
tsafe_status tsafe_lora_adapter_finish(tsafe_lora_adapter *a);

/* Scale for (alpha, rank) under the adapter's use_rslora. */
double tsafe_lora_scale(const tsafe_lora_adapter *a, double alpha, size_t rank);

/* The values a module may hold (A: rank x in_dim, B: out_dim x rank):
 * finite factors and alpha, and a scale and delta weight s*B*A that
 * float32 represents -- |s| <= FLT_MAX and |s| max|B| max|A| rank <=
 * FLT_MAX, a bound on every |dW_ij| -- since anything else gives inf/NaN
 * deltas in every mode. TSAFE_E_VALUE_RANGE with the culprit in err (may
 * be NULL). */
tsafe_status tsafe_lora_check_values(const tsafe_lora_adapter *a, const char *name,
                                     size_t rank, size_t in_dim, size_t out_dim,
                                     const float *A, const float *B, double alpha,
                                     tsafe_error_info *err);

#endif
