/* CKKS objects in backend buffers (tensafe/ckks_buffer.h): host-memory
 * backends are read and written in place, others through a temporary
 * host array and upload / download. */
#include <stdlib.h>
#include <string.h>

#include "tensafe/backend_impl.h"
#include "tensafe/ckks_buffer.h"
#include "ckks_internal.h"
#include "keys_internal.h"
#include "tsafe_check.h"
#include "../backend/backend_internal.h"

/* The buffer's backend serves ctx's data primes. */
static int serves(const tsafe_context *ctx, const tsafe_buffer *buf)
{
    return buf->backend->he && tsafe_same_context(ctx, buf->backend->he);
}

tsafe_status tsafe_ciphertext_to_buffer(const tsafe_context *ctx,
                                        const tsafe_ciphertext *ct, tsafe_buffer *dst)
{
    TSAFE_REQUIRE(ctx && ct && dst, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, ct->ctx) && serves(ctx, dst),
                  TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(ct->valid, TSAFE_E_STATE);
    TSAFE_REQUIRE(!dst->operand, TSAFE_E_ARG);
    TSAFE_REQUIRE(dst->n_polys == 2 && dst->n_limbs == ct->level + 1, TSAFE_E_RANGE);
    size_t words = (size_t)dst->n_limbs * ctx->n;
    uint64_t *w = tsafe_buffer_host_words(dst);
    if (w) {
        memcpy(w, ct->c0, words * sizeof *w);
        memcpy(w + words, ct->c1, words * sizeof *w);
        return TSAFE_OK;
    }
    uint64_t *tmp = malloc(2 * words * sizeof *tmp);
    TSAFE_REQUIRE(tmp, TSAFE_E_NOMEM);
    memcpy(tmp, ct->c0, words * sizeof *tmp);
    memcpy(tmp + words, ct->c1, words * sizeof *tmp);
    tsafe_status st = tsafe_buffer_upload(dst, tmp, 2 * words);
    free(tmp);
    return st;
}

tsafe_status tsafe_plaintext_to_buffer(const tsafe_context *ctx,
                                       const tsafe_plaintext *pt, tsafe_buffer *dst)
{
    TSAFE_REQUIRE(ctx && pt && dst, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx) && serves(ctx, dst),
                  TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(pt->valid, TSAFE_E_STATE);
    TSAFE_REQUIRE(dst->n_polys == 1 && dst->n_limbs == pt->level + 1, TSAFE_E_RANGE);
    /* the limbs are contiguous: upload straight from the plaintext */
    return tsafe_buffer_upload(dst, pt->data, (size_t)dst->n_limbs * ctx->n);
}

tsafe_status tsafe_plaintext_operand(const tsafe_context *ctx, const tsafe_plaintext *pt,
                                     tsafe_backend *b, tsafe_buffer **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(ctx && pt && b, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx) && b->he &&
                      tsafe_same_context(ctx, b->he),
                  TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(pt->valid, TSAFE_E_STATE);
    uint32_t limbs = pt->level + 1;
    if (pt->shoup && tsafe_backend_is_core_cpu(b)) /* limb i at i N in both */
        return tsafe_cpu_operand_borrow(b, pt->data, pt->shoup, 1, limbs, out);
    tsafe_buffer *buf;
    tsafe_status st = tsafe_buffer_alloc_operand(b, 1, limbs, &buf);
    if (st == TSAFE_OK && (st = tsafe_plaintext_to_buffer(ctx, pt, buf)) != TSAFE_OK)
        tsafe_buffer_free(buf);
    if (st == TSAFE_OK)
        *out = buf;
    return st;
}

/* src's words in host memory: in place, or downloaded into *tmp (which
 * the caller frees). */
static tsafe_status read_words(const tsafe_buffer *src, const uint64_t **w, uint64_t **tmp)
{
    *tmp = NULL;
    *w = tsafe_buffer_host_words((tsafe_buffer *)src); /* only read */
    if (*w)
        return TSAFE_OK;
    size_t words = tsafe_buffer_words(src);
    TSAFE_REQUIRE(!src->operand, TSAFE_E_ARG);
    *tmp = malloc(words * sizeof **tmp);
    TSAFE_REQUIRE(*tmp, TSAFE_E_NOMEM);
    tsafe_status st = tsafe_buffer_download(src, *tmp, words);
    if (st != TSAFE_OK) {
        free(*tmp);
        *tmp = NULL;
        return st;
    }
    *w = *tmp;
    return TSAFE_OK;
}

static tsafe_status check_ct_buffer(const tsafe_context *ctx, const tsafe_buffer *src)
{
    TSAFE_REQUIRE(serves(ctx, src), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(!src->operand, TSAFE_E_ARG);
    TSAFE_REQUIRE(src->n_polys == 2 && src->n_limbs <= ctx->n_data, TSAFE_E_RANGE);
    return TSAFE_OK;
}

tsafe_status tsafe_ciphertext_serialize_buffer(const tsafe_context *ctx,
                                               const tsafe_buffer *src, double scale,
                                               uint8_t *buf, size_t cap, size_t *written)
{
    TSAFE_REQUIRE(written, TSAFE_E_NULL);
    *written = 0;
    TSAFE_REQUIRE(ctx && src, TSAFE_E_NULL);
    tsafe_status st;
    if ((st = check_ct_buffer(ctx, src)) != TSAFE_OK)
        return st;
    uint32_t level = src->n_limbs - 1;
    size_t need;
    if ((st = tsafe_ciphertext_serialized_size_at(ctx, level, &need)) != TSAFE_OK)
        return st;
    *written = need;
    TSAFE_REQUIRE(buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(cap >= need, TSAFE_E_BUFFER_SMALL);
    const uint64_t *w;
    uint64_t *tmp;
    if ((st = read_words(src, &w, &tmp)) != TSAFE_OK)
        return st;
    size_t words = (size_t)src->n_limbs * ctx->n;
    st = tsafe_ciphertext_serialize_words(ctx, w, w + words, level, scale, buf, need);
    free(tmp);
    return st;
}

tsafe_status tsafe_ckks_decrypt_coeffs_strided_buffer(const tsafe_context *ctx,
                                                      const tsafe_secret_key *sk,
                                                      const tsafe_buffer *src, double scale,
                                                      size_t stride, double *out,
                                                      size_t count)
{
    TSAFE_REQUIRE(ctx && sk && src && out, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, sk->ctx), TSAFE_E_PARAMS_MISMATCH);
    tsafe_status st;
    if ((st = check_ct_buffer(ctx, src)) != TSAFE_OK ||
        (st = tsafe_decrypt_strided_check(ctx, stride, count)) != TSAFE_OK)
        return st;
    const uint64_t *w;
    uint64_t *tmp;
    if ((st = read_words(src, &w, &tmp)) != TSAFE_OK)
        return st;
    size_t words = (size_t)src->n_limbs * ctx->n;
    st = tsafe_decrypt_strided_words(ctx, sk, w, w + words, src->n_limbs - 1, scale, stride,
                                     out);
    free(tmp);
    return st;
}
