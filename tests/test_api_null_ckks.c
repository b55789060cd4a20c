/* NULL and out-of-range arguments to every function of tensafe/ckks.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_params_preset)
{
    tsafe_params p;
    ERR(tsafe_params_preset(NULL, &p));
    ERR(tsafe_params_preset("seed-n16384", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_params_preset("no-such-preset", &p));
    IS(TSAFE_E_NOT_FOUND, tsafe_params_preset("", &p));
}

CHECK_FN(tsafe_params_preset_count)
{
    assert_true(tsafe_params_preset_count() > 0);
}

CHECK_FN(tsafe_params_preset_name)
{
    assert_null(tsafe_params_preset_name(tsafe_params_preset_count()));
    assert_null(tsafe_params_preset_name(SIZE_MAX));
    assert_non_null(tsafe_params_preset_name(0));
}

CHECK_FN(tsafe_params_max_log_q)
{
    assert_int_equal(tsafe_params_max_log_q(0), 0);
    assert_int_equal(tsafe_params_max_log_q(9), 0);
    assert_int_equal(tsafe_params_max_log_q(17), 0);
    assert_int_equal(tsafe_params_max_log_q(UINT32_MAX), 0);
}

CHECK_FN(tsafe_params_serialize)
{
    uint8_t buf[512];
    size_t w = 0;
    tsafe_params p = f->params;
    ERR(tsafe_params_serialize(NULL, buf, sizeof buf, &w));
    ERR(tsafe_params_serialize(&p, buf, sizeof buf, NULL));
    ERR(tsafe_params_serialize(&p, NULL, sizeof buf, &w));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_params_serialize(&p, buf, 1, &w));
    p.n_primes = 0;
    ERR(tsafe_params_serialize(&p, buf, sizeof buf, &w));
    p.n_primes = TSAFE_MAX_PRIMES + 1;
    ERR(tsafe_params_serialize(&p, buf, sizeof buf, &w));
    p.n_primes = UINT32_MAX;
    ERR(tsafe_params_serialize(&p, buf, sizeof buf, &w));
}

CHECK_FN(tsafe_params_deserialize)
{
    uint8_t buf[512];
    size_t w = 0;
    tsafe_params p;
    OK(tsafe_params_serialize(&f->params, buf, sizeof buf, &w));
    ERR(tsafe_params_deserialize(NULL, w, &p));
    ERR(tsafe_params_deserialize(buf, w, NULL));
    ERR(tsafe_params_deserialize(buf, 0, &p));
    ERR(tsafe_params_deserialize(buf, w - 1, &p));
}

CHECK_FN(tsafe_context_create)
{
    tsafe_context *c = NULL;
    ERR(tsafe_context_create(NULL, &c));
    ERR(tsafe_context_create(&f->params, NULL));
    tsafe_params p;
    p = f->params; p.log_n = 9;  ERR(tsafe_context_create(&p, &c));
    p = f->params; p.log_n = 17; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.log_n = UINT32_MAX; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.n_primes = 0; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.n_primes = TSAFE_MAX_PRIMES + 1; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.n_special = 2; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.n_special = 1; p.n_primes = 1; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.scale = NAN; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.scale = 0.0; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.scale = -1.0; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.prime_bits[0] = 0; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.prime_bits[0] = 62; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.prime_bits[1] = UINT32_MAX; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.primes[0] = 4; p.primes[1] = 6; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.primes[0] = 1; p.primes[1] = UINT64_MAX; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.flags = 0; IS(TSAFE_E_INSECURE, tsafe_context_create(&p, &c));
    p = f->params; p.flags = 0x80; ERR(tsafe_context_create(&p, &c));
    assert_null(c);
}

CHECK_FN(tsafe_context_free)
{
    tsafe_context_free(NULL);
}

CHECK_FN(tsafe_context_n)
{
    assert_int_equal(tsafe_context_n(NULL), 0);
    assert_int_equal(tsafe_context_n(f->ctx), 1024);
}

CHECK_FN(tsafe_context_slots)
{
    assert_int_equal(tsafe_context_slots(NULL), 0);
}

CHECK_FN(tsafe_context_max_level)
{
    assert_int_equal(tsafe_context_max_level(NULL), 0);
}

CHECK_FN(tsafe_context_prime)
{
    assert_int_equal(tsafe_context_prime(NULL, 0), 0);
    assert_int_equal(tsafe_context_prime(f->ctx, 2), 0);
    assert_int_equal(tsafe_context_prime(f->ctx, UINT32_MAX), 0);
}

CHECK_FN(tsafe_context_log2_q)
{
    assert_true(tsafe_context_log2_q(NULL) == 0.0);
}

CHECK_FN(tsafe_context_params)
{
    assert_null(tsafe_context_params(NULL));
}

CHECK_FN(tsafe_context_fingerprint)
{
    uint8_t fp[TSAFE_FINGERPRINT_BYTES];
    tsafe_context_fingerprint(NULL, fp);
    tsafe_context_fingerprint(f->ctx, NULL);
}

CHECK_FN(tsafe_context_arith_path)
{
    (void)tsafe_context_arith_path(NULL);
    assert_non_null(tsafe_context_arith_path(f->ctx));
}

CHECK_FN(tsafe_ifma_available)
{
    int a = tsafe_ifma_available();
    assert_true(a == 0 || a == 1);
}

CHECK_FN(tsafe_secret_key_generate)
{
    tsafe_secret_key *sk = NULL;
    ERR(tsafe_secret_key_generate(NULL, NULL, &sk));
    ERR(tsafe_secret_key_generate(f->ctx, NULL, NULL));
    assert_null(sk);
}

CHECK_FN(tsafe_secret_key_free)
{
    tsafe_secret_key_free(NULL);
}

CHECK_FN(tsafe_public_key_generate)
{
    tsafe_public_key *pk = NULL;
    ERR(tsafe_public_key_generate(NULL, f->sk, NULL, &pk));
    ERR(tsafe_public_key_generate(f->ctx, NULL, NULL, &pk));
    ERR(tsafe_public_key_generate(f->ctx, f->sk, NULL, NULL));
    ERR(tsafe_public_key_generate(f->ctx2, f->sk, NULL, &pk)); /* other context */
    assert_null(pk);
}

CHECK_FN(tsafe_public_key_free)
{
    tsafe_public_key_free(NULL);
}

CHECK_FN(tsafe_plaintext_create)
{
    tsafe_plaintext *pt = NULL;
    ERR(tsafe_plaintext_create(NULL, &pt));
    ERR(tsafe_plaintext_create(f->ctx, NULL));
    assert_null(pt);
}

CHECK_FN(tsafe_plaintext_free)
{
    tsafe_plaintext_free(NULL);
}

CHECK_FN(tsafe_plaintext_level)
{
    assert_int_equal(tsafe_plaintext_level(NULL), 0);
}

CHECK_FN(tsafe_plaintext_scale)
{
    (void)tsafe_plaintext_scale(NULL);
}

static void bad_encode(fixture *f, int complex_)
{
    double v[4] = {1, 2, 3, 4}, big[1] = {1e300}, nan_[1] = {NAN};
    size_t slots = tsafe_context_slots(f->ctx);
    tsafe_plaintext *pt;
    OK(tsafe_plaintext_create(f->ctx, &pt));
#define ENC(ctx, vals, n, scale, level, out)                                            \
    (complex_ ? tsafe_ckks_encode_complex(ctx, vals, NULL, n, scale, level, out)        \
              : tsafe_ckks_encode(ctx, vals, n, scale, level, out))
    ERR(ENC(NULL, v, 4, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, NULL, 4, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, v, 4, 0x1p20, 0, NULL));
    ERR(ENC(f->ctx, v, slots + 1, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, v, SIZE_MAX, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, v, 4, 0x1p20, 2, pt));
    ERR(ENC(f->ctx, v, 4, 0x1p20, UINT32_MAX, pt));
    ERR(ENC(f->ctx, v, 4, NAN, 0, pt));
    ERR(ENC(f->ctx, v, 4, 0.0, 0, pt));
    ERR(ENC(f->ctx, v, 4, -0x1p20, 0, pt));
    ERR(ENC(f->ctx, v, 4, INFINITY, 0, pt));
    ERR(ENC(f->ctx, big, 1, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, nan_, 1, 0x1p20, 0, pt));
    ERR(ENC(f->ctx2, v, 4, 0x1p20, 0, pt)); /* plaintext of another context */
#undef ENC
    if (complex_)
        ERR(tsafe_ckks_encode_complex(f->ctx, v, nan_, 1, 0x1p20, 0, pt));
    tsafe_plaintext_free(pt);
}

CHECK_FN(tsafe_ckks_encode) { bad_encode(f, 0); }
CHECK_FN(tsafe_ckks_encode_complex) { bad_encode(f, 1); }

CHECK_FN(tsafe_ckks_decode)
{
    double v[8];
    size_t slots = tsafe_context_slots(f->ctx);
    ERR(tsafe_ckks_decode(NULL, f->pt, v, 8));
    ERR(tsafe_ckks_decode(f->ctx, NULL, v, 8));
    ERR(tsafe_ckks_decode(f->ctx, f->pt, NULL, 8));
    ERR(tsafe_ckks_decode(f->ctx, f->pt, v, slots + 1));
    ERR(tsafe_ckks_decode(f->ctx2, f->pt, v, 8));
}

CHECK_FN(tsafe_ckks_decode_complex)
{
    double re[8], im[8];
    size_t slots = tsafe_context_slots(f->ctx);
    ERR(tsafe_ckks_decode_complex(NULL, f->pt, re, im, 8));
    ERR(tsafe_ckks_decode_complex(f->ctx, NULL, re, im, 8));
    ERR(tsafe_ckks_decode_complex(f->ctx, f->pt, NULL, NULL, 8)); /* one may be NULL */
    ERR(tsafe_ckks_decode_complex(f->ctx, f->pt, re, im, slots + 1));
}

CHECK_FN(tsafe_plaintext_prepare_mul)
{
    ERR(tsafe_plaintext_prepare_mul(NULL, f->pt));
    ERR(tsafe_plaintext_prepare_mul(f->ctx, NULL));
    ERR(tsafe_plaintext_prepare_mul(f->ctx2, f->pt));
}

CHECK_FN(tsafe_ciphertext_create)
{
    tsafe_ciphertext *ct = NULL;
    ERR(tsafe_ciphertext_create(NULL, &ct));
    ERR(tsafe_ciphertext_create(f->ctx, NULL));
    assert_null(ct);
}

CHECK_FN(tsafe_ciphertext_free)
{
    tsafe_ciphertext_free(NULL);
}

CHECK_FN(tsafe_ciphertext_copy)
{
    ERR(tsafe_ciphertext_copy(NULL, f->ct, f->out));
    ERR(tsafe_ciphertext_copy(f->ctx, NULL, f->out));
    ERR(tsafe_ciphertext_copy(f->ctx, f->ct, NULL));
    ERR(tsafe_ciphertext_copy(f->ctx2, f->ct, f->out));
}

CHECK_FN(tsafe_ciphertext_level)
{
    assert_int_equal(tsafe_ciphertext_level(NULL), 0);
}

CHECK_FN(tsafe_ciphertext_scale)
{
    (void)tsafe_ciphertext_scale(NULL);
}

CHECK_FN(tsafe_ciphertext_is_seeded)
{
    assert_int_equal(tsafe_ciphertext_is_seeded(NULL), 0);
}

CHECK_FN(tsafe_ckks_encrypt_symmetric)
{
    ERR(tsafe_ckks_encrypt_symmetric(NULL, f->sk, f->pt, NULL, f->out));
    ERR(tsafe_ckks_encrypt_symmetric(f->ctx, NULL, f->pt, NULL, f->out));
    ERR(tsafe_ckks_encrypt_symmetric(f->ctx, f->sk, NULL, NULL, f->out));
    ERR(tsafe_ckks_encrypt_symmetric(f->ctx, f->sk, f->pt, NULL, NULL));
    ERR(tsafe_ckks_encrypt_symmetric(f->ctx2, f->sk, f->pt, NULL, f->out));
}

CHECK_FN(tsafe_ckks_encrypt_values_symmetric)
{
    double v[4] = {1, 2, 3, 4}, nan_[1] = {NAN};
    size_t slots = tsafe_context_slots(f->ctx);
    ERR(tsafe_ckks_encrypt_values_symmetric(NULL, f->sk, v, NULL, 4, 0x1p20, 0, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, NULL, v, NULL, 4, 0x1p20, 0, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, NULL, NULL, 4, 0x1p20, 0, NULL,
                                            f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, 4, 0x1p20, 0, NULL, NULL));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, slots + 1, 0x1p20, 0, NULL,
                                            f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, 4, 0x1p20, 2, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, 4, NAN, 0, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, 4, 0.5, 0, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, nan_, NULL, 1, 0x1p20, 0, NULL,
                                            f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx2, f->sk, v, NULL, 4, 0x1p20, 0, NULL,
                                            f->out));
}

CHECK_FN(tsafe_ckks_encrypt_public)
{
    ERR(tsafe_ckks_encrypt_public(NULL, f->pk, f->pt, NULL, f->out));
    ERR(tsafe_ckks_encrypt_public(f->ctx, NULL, f->pt, NULL, f->out));
    ERR(tsafe_ckks_encrypt_public(f->ctx, f->pk, NULL, NULL, f->out));
    ERR(tsafe_ckks_encrypt_public(f->ctx, f->pk, f->pt, NULL, NULL));
    ERR(tsafe_ckks_encrypt_public(f->ctx2, f->pk, f->pt, NULL, f->out));
}

CHECK_FN(tsafe_ckks_decrypt)
{
    tsafe_plaintext *pt;
    OK(tsafe_plaintext_create(f->ctx, &pt));
    ERR(tsafe_ckks_decrypt(NULL, f->sk, f->ct, pt));
    ERR(tsafe_ckks_decrypt(f->ctx, NULL, f->ct, pt));
    ERR(tsafe_ckks_decrypt(f->ctx, f->sk, NULL, pt));
    ERR(tsafe_ckks_decrypt(f->ctx, f->sk, f->ct, NULL));
    ERR(tsafe_ckks_decrypt(f->ctx2, f->sk, f->ct, pt));
    tsafe_plaintext_free(pt);
}

CHECK_FN(tsafe_ckks_decrypt_coeffs_strided)
{
    double out[1024];
    size_t n = tsafe_context_n(f->ctx);
    ERR(tsafe_ckks_decrypt_coeffs_strided(NULL, f->sk, f->ct, n / 4, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, NULL, f->ct, n / 4, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, NULL, n / 4, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, n / 4, NULL, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, 0, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, 3, out, n / 3));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, 2 * n, out, 1));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, n / 4, out, 5));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, SIZE_MAX, out, 0));
}

/* binary ops: NULLs, another context, mismatched levels */
#define BINARY_CHECKS(op, b_ok, b_other)                          \
    do {                                                          \
        ERR(op(NULL, f->ct, b_ok, f->out));                       \
        ERR(op(f->ctx, NULL, b_ok, f->out));                      \
        ERR(op(f->ctx, f->ct, NULL, f->out));                     \
        ERR(op(f->ctx, f->ct, b_ok, NULL));                       \
        ERR(op(f->ctx2, f->ct, b_ok, f->out));                    \
        ERR(op(f->ctx, f->ct, b_other, f->out));                  \
    } while (0)

CHECK_FN(tsafe_ckks_add) { BINARY_CHECKS(tsafe_ckks_add, f->ct, f->ct0); }
CHECK_FN(tsafe_ckks_sub) { BINARY_CHECKS(tsafe_ckks_sub, f->ct, f->ct0); }
CHECK_FN(tsafe_ckks_add_plain) { BINARY_CHECKS(tsafe_ckks_add_plain, f->pt, f->pt0); }
CHECK_FN(tsafe_ckks_mul_plain) { BINARY_CHECKS(tsafe_ckks_mul_plain, f->pt, f->pt0); }

CHECK_FN(tsafe_ckks_negate)
{
    ERR(tsafe_ckks_negate(NULL, f->ct, f->out));
    ERR(tsafe_ckks_negate(f->ctx, NULL, f->out));
    ERR(tsafe_ckks_negate(f->ctx, f->ct, NULL));
    ERR(tsafe_ckks_negate(f->ctx2, f->ct, f->out));
}

CHECK_FN(tsafe_ckks_mul_const)
{
    ERR(tsafe_ckks_mul_const(NULL, f->ct, 2.0, 1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, NULL, 2.0, 1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 2.0, 1.0, NULL));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, NAN, 1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, INFINITY, 1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 2.0, NAN, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 2.0, 0.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 2.0, -1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 1e300, 1e300, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx2, f->ct, 2.0, 1.0, f->out));
}

CHECK_FN(tsafe_ckks_rescale)
{
    ERR(tsafe_ckks_rescale(NULL, f->ct, f->out));
    ERR(tsafe_ckks_rescale(f->ctx, NULL, f->out));
    ERR(tsafe_ckks_rescale(f->ctx, f->ct, NULL));
    IS(TSAFE_E_LEVEL, tsafe_ckks_rescale(f->ctx, f->ct0, f->out)); /* level 0 */
    ERR(tsafe_ckks_rescale(f->ctx2, f->ct, f->out));
}

CHECK_FN(tsafe_ckks_drop_to_level)
{
    ERR(tsafe_ckks_drop_to_level(NULL, f->ct, 0, f->out));
    ERR(tsafe_ckks_drop_to_level(f->ctx, NULL, 0, f->out));
    ERR(tsafe_ckks_drop_to_level(f->ctx, f->ct, 0, NULL));
    ERR(tsafe_ckks_drop_to_level(f->ctx, f->ct0, 1, f->out)); /* up */
    ERR(tsafe_ckks_drop_to_level(f->ctx, f->ct, UINT32_MAX, f->out));
    ERR(tsafe_ckks_drop_to_level(f->ctx2, f->ct, 0, f->out));
}

/* serialized_size / serialize / deserialize for one object kind */
#define SER_CHECKS(kind, obj, objtype)                                                    \
    do {                                                                                  \
        size_t n_ = 0, w_ = 0;                                                            \
        ERR(tsafe_##kind##_serialized_size(NULL, obj, &n_));                              \
        ERR(tsafe_##kind##_serialized_size(f->ctx, NULL, &n_));                           \
        ERR(tsafe_##kind##_serialized_size(f->ctx, obj, NULL));                           \
        OK(tsafe_##kind##_serialized_size(f->ctx, obj, &n_));                             \
        uint8_t *b_ = malloc(n_);                                                         \
        assert_non_null(b_);                                                              \
        ERR(tsafe_##kind##_serialize(NULL, obj, b_, n_, &w_));                            \
        ERR(tsafe_##kind##_serialize(f->ctx, NULL, b_, n_, &w_));                         \
        ERR(tsafe_##kind##_serialize(f->ctx, obj, NULL, n_, &w_));                        \
        ERR(tsafe_##kind##_serialize(f->ctx, obj, b_, n_, NULL));                         \
        IS(TSAFE_E_BUFFER_SMALL, tsafe_##kind##_serialize(f->ctx, obj, b_, n_ - 1, &w_)); \
        ERR(tsafe_##kind##_serialize(f->ctx, obj, b_, 0, &w_));                           \
        ERR(tsafe_##kind##_serialize(f->ctx2, obj, b_, n_, &w_));                         \
        OK(tsafe_##kind##_serialize(f->ctx, obj, b_, n_, &w_));                           \
        objtype *o_ = NULL;                                                               \
        ERR(tsafe_##kind##_deserialize(NULL, b_, n_, &o_));                               \
        ERR(tsafe_##kind##_deserialize(f->ctx, NULL, n_, &o_));                           \
        ERR(tsafe_##kind##_deserialize(f->ctx, b_, n_, NULL));                            \
        ERR(tsafe_##kind##_deserialize(f->ctx, b_, 0, &o_));                              \
        ERR(tsafe_##kind##_deserialize(f->ctx, b_, n_ - 1, &o_));                         \
        ERR(tsafe_##kind##_deserialize(f->ctx2, b_, n_, &o_));                            \
        assert_null(o_);                                                                  \
        sodium_memzero(b_, n_);                                                           \
        free(b_);                                                                         \
    } while (0)

CHECK_FN(tsafe_ciphertext_serialized_size) { SER_CHECKS(ciphertext, f->ct, tsafe_ciphertext); }
CHECK_FN(tsafe_ciphertext_serialize) { check_tsafe_ciphertext_serialized_size(f); }
CHECK_FN(tsafe_ciphertext_deserialize) { check_tsafe_ciphertext_serialized_size(f); }

CHECK_FN(tsafe_ciphertext_serialized_size_at)
{
    size_t n = 0;
    uint32_t top = tsafe_context_max_level(f->ctx);
    ERR(tsafe_ciphertext_serialized_size_at(NULL, 0, &n));
    ERR(tsafe_ciphertext_serialized_size_at(f->ctx, 0, NULL));
    IS(TSAFE_E_LEVEL, tsafe_ciphertext_serialized_size_at(f->ctx, top + 1, &n));
    IS(TSAFE_E_LEVEL, tsafe_ciphertext_serialized_size_at(f->ctx, UINT32_MAX, &n));
    OK(tsafe_ciphertext_serialized_size_at(f->ctx, top, &n));
    assert_true(n > 0);
}

CHECK_FN(tsafe_ciphertext_deserialize_into)
{
    ERR(tsafe_ciphertext_deserialize_into(NULL, f->ct_bytes, f->ct_len, f->out));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx, NULL, f->ct_len, f->out));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx, f->ct_bytes, f->ct_len, NULL));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx, f->ct_bytes, 0, f->out));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx, f->ct_bytes, f->ct_len - 1, f->out));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx2, f->ct_bytes, f->ct_len, f->out));
}

CHECK_FN(tsafe_plaintext_serialized_size) { SER_CHECKS(plaintext, f->pt, tsafe_plaintext); }
CHECK_FN(tsafe_plaintext_serialize) { check_tsafe_plaintext_serialized_size(f); }
CHECK_FN(tsafe_plaintext_deserialize) { check_tsafe_plaintext_serialized_size(f); }
CHECK_FN(tsafe_public_key_serialized_size) { SER_CHECKS(public_key, f->pk, tsafe_public_key); }
CHECK_FN(tsafe_public_key_serialize) { check_tsafe_public_key_serialized_size(f); }
CHECK_FN(tsafe_public_key_deserialize) { check_tsafe_public_key_serialized_size(f); }
CHECK_FN(tsafe_secret_key_serialized_size) { SER_CHECKS(secret_key, f->sk, tsafe_secret_key); }
CHECK_FN(tsafe_secret_key_serialize) { check_tsafe_secret_key_serialized_size(f); }
CHECK_FN(tsafe_secret_key_deserialize) { check_tsafe_secret_key_serialized_size(f); }

static const api_case k_ckks[] = {
    ENTRY(tsafe_params_preset), ENTRY(tsafe_params_preset_count),
    ENTRY(tsafe_params_preset_name), ENTRY(tsafe_params_max_log_q),
    ENTRY(tsafe_params_serialize), ENTRY(tsafe_params_deserialize),
    ENTRY(tsafe_context_create), ENTRY(tsafe_context_free), ENTRY(tsafe_context_n),
    ENTRY(tsafe_context_slots), ENTRY(tsafe_context_max_level), ENTRY(tsafe_context_prime),
    ENTRY(tsafe_context_log2_q), ENTRY(tsafe_context_params), ENTRY(tsafe_context_fingerprint),
    ENTRY(tsafe_context_arith_path), ENTRY(tsafe_ifma_available),
    ENTRY(tsafe_secret_key_generate), ENTRY(tsafe_secret_key_free),
    ENTRY(tsafe_public_key_generate), ENTRY(tsafe_public_key_free),
    ENTRY(tsafe_plaintext_create), ENTRY(tsafe_plaintext_free), ENTRY(tsafe_plaintext_level),
    ENTRY(tsafe_plaintext_scale), ENTRY(tsafe_ckks_encode), ENTRY(tsafe_ckks_encode_complex),
    ENTRY(tsafe_ckks_decode), ENTRY(tsafe_ckks_decode_complex),
    ENTRY(tsafe_plaintext_prepare_mul), ENTRY(tsafe_ciphertext_create),
    ENTRY(tsafe_ciphertext_free), ENTRY(tsafe_ciphertext_copy), ENTRY(tsafe_ciphertext_level),
    ENTRY(tsafe_ciphertext_scale), ENTRY(tsafe_ciphertext_is_seeded),
    ENTRY(tsafe_ckks_encrypt_symmetric), ENTRY(tsafe_ckks_encrypt_values_symmetric),
    ENTRY(tsafe_ckks_encrypt_public), ENTRY(tsafe_ckks_decrypt),
    ENTRY(tsafe_ckks_decrypt_coeffs_strided), ENTRY(tsafe_ckks_add), ENTRY(tsafe_ckks_sub),
    ENTRY(tsafe_ckks_negate), ENTRY(tsafe_ckks_add_plain), ENTRY(tsafe_ckks_mul_plain),
    ENTRY(tsafe_ckks_mul_const), ENTRY(tsafe_ckks_rescale), ENTRY(tsafe_ckks_drop_to_level),
    ENTRY(tsafe_ciphertext_serialized_size), ENTRY(tsafe_ciphertext_serialize),
    ENTRY(tsafe_ciphertext_deserialize), ENTRY(tsafe_ciphertext_deserialize_into),
    ENTRY(tsafe_ciphertext_serialized_size_at),
    ENTRY(tsafe_plaintext_serialized_size), ENTRY(tsafe_plaintext_serialize),
    ENTRY(tsafe_plaintext_deserialize), ENTRY(tsafe_public_key_serialized_size),
    ENTRY(tsafe_public_key_serialize), ENTRY(tsafe_public_key_deserialize),
    ENTRY(tsafe_secret_key_serialized_size), ENTRY(tsafe_secret_key_serialize),
    ENTRY(tsafe_secret_key_deserialize),
};

int main(void)
{
    static const api_table tables[] = {TABLE("ckks.h", k_ckks)};
    return api_null_run("api_null_ckks", tables, sizeof tables / sizeof tables[0], 0);
}
