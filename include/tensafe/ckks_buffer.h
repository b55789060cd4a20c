/* CKKS objects in backend buffers: the few moves a server path needs to do
 * its ring work on a tsafe_backend (tensafe/backend.h) and still hand out
 * ordinary ciphertext bytes and decryptions.
 *
 * Layout (backend.h): a ciphertext at level l is a buffer of 2 polynomials
 * (c0, then c1) of l + 1 limbs; a plaintext is 1 polynomial of l + 1 limbs;
 * NTT form. A buffer carries no scale: the caller keeps it (the product of
 * the factors' scales, divided by q_l at each rescale from level l, exactly
 * as tsafe_ckks_mul_plain / tsafe_ckks_rescale compute it).
 *
 * Every call checks that the buffer's backend serves ctx's ring (created
 * for ctx, or a context with the same parameters): TSAFE_E_PARAMS_MISMATCH
 * otherwise. On backends whose buffers live in host memory (the CPU
 * backend) the words are read and written in place; on others they go
 * through tsafe_buffer_upload / tsafe_buffer_download and a temporary host
 * array.
 *
 * Thread safety: as the backend's (one thread at a time per backend);
 * contexts, plaintexts and ciphertexts passed as sources are only read.
 * Ownership: nothing is kept; every argument is borrowed for the call. */
#ifndef TENSAFE_CKKS_BUFFER_H
#define TENSAFE_CKKS_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/backend.h"
#include "tensafe/ckks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limbs 0..level of ct (c0 then c1) into dst, which must have 2
 * polynomials and exactly level + 1 limbs (TSAFE_E_RANGE otherwise) and
 * must not be an operand buffer (TSAFE_E_ARG). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_to_buffer(
    const tsafe_context *ctx, const tsafe_ciphertext *ct, tsafe_buffer *dst);

/* Limbs 0..level of pt into dst (1 polynomial, level + 1 limbs), typically
 * an operand buffer (tsafe_buffer_alloc_operand) for tsafe_backend_mul_acc:
 * upload it once and keep it. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_plaintext_to_buffer(
    const tsafe_context *ctx, const tsafe_plaintext *pt, tsafe_buffer *dst);

/* pt as an operand buffer on b (1 polynomial, level + 1 limbs), for
 * tsafe_backend_mul_acc. On this library's CPU backend a prepared
 * plaintext (Shoup quotients made for multiplication) is borrowed: no copy
 * and no recomputation, so pt must outlive the buffer and not change while
 * it is used. Otherwise a copy (tsafe_buffer_alloc_operand + upload). Free
 * with tsafe_buffer_free. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_plaintext_operand(
    const tsafe_context *ctx, const tsafe_plaintext *pt, tsafe_backend *b,
    tsafe_buffer **out);

/* Serialize the ciphertext held in src (2 polynomials, level = limbs - 1,
 * NTT form) with the given scale: the same bytes tsafe_ciphertext_serialize
 * writes for an unseeded ciphertext with those limbs and that scale. buf of
 * cap bytes; *written gets the size (also when TSAFE_E_BUFFER_SMALL);
 * TSAFE_E_SCALE when the scale is not serializable. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_serialize_buffer(
    const tsafe_context *ctx, const tsafe_buffer *src, double scale, uint8_t *buf,
    size_t cap, size_t *written);

/* tsafe_ckks_decrypt_coeffs_strided of the ciphertext held in src (2
 * polynomials, level = limbs - 1) at the given scale: count = N / stride
 * coefficients into out. The intermediate sums are wiped. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_decrypt_coeffs_strided_buffer(
    const tsafe_context *ctx, const tsafe_secret_key *sk, const tsafe_buffer *src,
    double scale, size_t stride, double *out, size_t count);

#ifdef __cplusplus
}
#endif
#endif
