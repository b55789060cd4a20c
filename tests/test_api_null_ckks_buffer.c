/* NULL and out-of-range arguments to every function of tensafe/ckks_buffer.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_ciphertext_to_buffer)
{
    ERR(tsafe_ciphertext_to_buffer(NULL, f->ct, f->buf));
    ERR(tsafe_ciphertext_to_buffer(f->ctx, NULL, f->buf));
    ERR(tsafe_ciphertext_to_buffer(f->ctx, f->ct, NULL));
    IS(TSAFE_E_RANGE, tsafe_ciphertext_to_buffer(f->ctx, f->ct, f->buf1)); /* limbs */
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_ciphertext_to_buffer(f->ctx2, f->ct, f->buf));
    OK(tsafe_ciphertext_to_buffer(f->ctx, f->ct, f->buf));
}

CHECK_FN(tsafe_plaintext_to_buffer)
{
    tsafe_buffer *o = NULL;
    assert_int_equal(tsafe_buffer_alloc_operand(f->be, 1, 2, &o), TSAFE_OK);
    ERR(tsafe_plaintext_to_buffer(NULL, f->pt, o));
    ERR(tsafe_plaintext_to_buffer(f->ctx, NULL, o));
    ERR(tsafe_plaintext_to_buffer(f->ctx, f->pt, NULL));
    IS(TSAFE_E_RANGE, tsafe_plaintext_to_buffer(f->ctx, f->pt0, o)); /* level 0: 1 limb */
    IS(TSAFE_E_RANGE, tsafe_plaintext_to_buffer(f->ctx, f->pt, f->buf)); /* 2 polys */
    OK(tsafe_plaintext_to_buffer(f->ctx, f->pt, o));
    tsafe_buffer_free(o);
}

CHECK_FN(tsafe_plaintext_operand)
{
    tsafe_buffer *o = (tsafe_buffer *)1;
    IS(TSAFE_E_NULL, tsafe_plaintext_operand(f->ctx, f->pt, f->be, NULL));
    ERR(tsafe_plaintext_operand(NULL, f->pt, f->be, &o));
    assert_null(o);
    ERR(tsafe_plaintext_operand(f->ctx, NULL, f->be, &o));
    ERR(tsafe_plaintext_operand(f->ctx, f->pt, NULL, &o));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_plaintext_operand(f->ctx2, f->pt, f->be, &o));
    OK(tsafe_plaintext_operand(f->ctx, f->pt, f->be, &o)); /* not prepared: a copy */
    assert_int_equal(tsafe_buffer_limbs(o), tsafe_plaintext_level(f->pt) + 1);
    tsafe_buffer_free(o);
    tsafe_plaintext *prep = NULL;
    OK(tsafe_plaintext_create(f->ctx, &prep));
    OK(tsafe_ckks_encode(f->ctx, (double[2]){1, 2}, 2, tsafe_plaintext_scale(f->pt),
                         tsafe_plaintext_level(f->pt), prep));
    OK(tsafe_plaintext_prepare_mul(f->ctx, prep));
    OK(tsafe_plaintext_operand(f->ctx, prep, f->be, &o));
    /* borrowed from the plaintext on the CPU backend: never written */
    uint64_t *zeros = calloc(tsafe_buffer_words(o), sizeof *zeros);
    assert_non_null(zeros);
    IS(TSAFE_E_ARG, tsafe_buffer_upload(o, zeros, tsafe_buffer_words(o)));
    free(zeros);
    tsafe_buffer_free(o);
    tsafe_plaintext_free(prep);
}

CHECK_FN(tsafe_ciphertext_serialize_buffer)
{
    uint8_t small[8];
    size_t w = 1;
    ERR(tsafe_ciphertext_serialize_buffer(f->ctx, f->buf, 0x1p20, small, 8, NULL));
    ERR(tsafe_ciphertext_serialize_buffer(NULL, f->buf, 0x1p20, small, 8, &w));
    assert_int_equal(w, 0);
    ERR(tsafe_ciphertext_serialize_buffer(f->ctx, NULL, 0x1p20, small, 8, &w));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_ciphertext_serialize_buffer(f->ctx, f->buf, 0x1p20, small, 8, &w));
    size_t need = 0;
    OK(tsafe_ciphertext_serialized_size_at(f->ctx, 1, &need));
    assert_int_equal(w, need); /* the (unseeded) size at level 1 */
    IS(TSAFE_E_NULL, tsafe_ciphertext_serialize_buffer(f->ctx, f->buf, 0x1p20, NULL, 0, &w));
    uint8_t *big = malloc(need);
    assert_non_null(big);
    IS(TSAFE_E_SCALE, tsafe_ciphertext_serialize_buffer(f->ctx, f->buf, NAN, big, need, &w));
    IS(TSAFE_E_PARAMS_MISMATCH,
       tsafe_ciphertext_serialize_buffer(f->ctx2, f->buf, 0x1p20, big, need, &w));
    free(big);
}

CHECK_FN(tsafe_ckks_decrypt_coeffs_strided_buffer)
{
    double out[4];
    size_t stride = 1024 / 4;
    ERR(tsafe_ckks_decrypt_coeffs_strided_buffer(NULL, f->sk, f->buf, 1.0, stride, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, NULL, f->buf, 1.0, stride, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, f->sk, NULL, 1.0, stride, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, f->sk, f->buf, 1.0, stride, NULL, 4));
    IS(TSAFE_E_RANGE, tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, f->sk, f->buf, 1.0,
                                                                stride, out, 5));
    IS(TSAFE_E_ARG, tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, f->sk, f->buf, 1.0, 3, out,
                                                              4));
}

static const api_case k_ckks_buffer[] = {
    ENTRY(tsafe_ciphertext_to_buffer), ENTRY(tsafe_plaintext_to_buffer),
    ENTRY(tsafe_plaintext_operand),
    ENTRY(tsafe_ciphertext_serialize_buffer), ENTRY(tsafe_ckks_decrypt_coeffs_strided_buffer),
};

int main(void)
{
    static const api_table tables[] = {TABLE("ckks_buffer.h", k_ckks_buffer)};
    return api_null_run("api_null_ckks_buffer", tables, sizeof tables / sizeof tables[0], 0);
}
