/* Compute backends: where batched RNS polynomial work runs (CPU here, CUDA in
 * libtensafe-he-cuda). Users see opaque handles only; backend authors include
 * tensafe/backend_impl.h.
 *
 * Data layout of a backend buffer: `n_polys` polynomials, each `n_limbs`
 * RNS limbs of N uint64_t words (limb i is modulo prime i of the context),
 * polynomial-major: word (p * n_limbs + i) * N + k.
 *
 * Thread safety: a backend and its buffers belong to one thread at a time.
 * Ownership: tsafe_backend_free releases the backend; buffers must be freed
 * before it. The backend borrows its context (which must outlive it). */
#ifndef TENSAFE_BACKEND_H
#define TENSAFE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/ckks.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsafe_backend tsafe_backend;
typedef struct tsafe_buffer tsafe_buffer;

/* The portable CPU backend (scalar / IFMA arithmetic as the context chose). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_cpu_create(
    const tsafe_context *ctx, tsafe_backend **out);
TSAFE_API void tsafe_backend_free(tsafe_backend *b);
TSAFE_API const char *tsafe_backend_name(const tsafe_backend *b);

/* Buffers of n_polys x n_limbs x N words. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_buffer_alloc(
    tsafe_backend *b, size_t n_polys, uint32_t n_limbs, tsafe_buffer **out);
TSAFE_API void tsafe_buffer_free(tsafe_buffer *buf);
TSAFE_API size_t tsafe_buffer_words(const tsafe_buffer *buf);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_buffer_upload(
    tsafe_buffer *dst, const uint64_t *src, size_t words);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_buffer_download(
    const tsafe_buffer *src, uint64_t *dst, size_t words);

/* Batched forward / inverse negacyclic NTT of every polynomial and limb. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_ntt_forward(
    tsafe_backend *b, tsafe_buffer *buf);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_ntt_inverse(
    tsafe_backend *b, tsafe_buffer *buf);

/* Element-wise out = a (op) b mod q_i; shapes must match (b may have one
 * polynomial, then broadcast over a's polynomials). out may alias a. */
typedef enum tsafe_elementwise_op {
    TSAFE_OP_ADD = 0,
    TSAFE_OP_SUB = 1,
    TSAFE_OP_MUL = 2
} tsafe_elementwise_op;
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_elementwise(
    tsafe_backend *b, tsafe_elementwise_op op, tsafe_buffer *out,
    const tsafe_buffer *a, const tsafe_buffer *bb);

/* Rescale (NTT form in, NTT form out): divide by the last limb's prime with
 * rounding; out has one limb fewer. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_rescale(
    tsafe_backend *b, tsafe_buffer *out, const tsafe_buffer *in);

/* Optional: wait for queued work (no-op on synchronous backends). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_synchronize(
    tsafe_backend *b);

#ifdef __cplusplus
}
#endif
#endif
