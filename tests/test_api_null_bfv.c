/* NULL and out-of-range arguments to every function of tensafe/bfv.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_bfv_context_create)
{
    (void)f;
    tsafe_bfv_context *c = NULL;
    tsafe_bfv_params p = {12, 49, 60, 37, 0}, bad = p;
    IS(TSAFE_E_NULL, tsafe_bfv_context_create(NULL, &c));
    IS(TSAFE_E_NULL, tsafe_bfv_context_create(&p, NULL));
    bad.log_n = 20;
    POISON(c);
    IS(TSAFE_E_PARAMS, tsafe_bfv_context_create(&bad, &c));
    assert_null(c);
    bad = p;
    bad.t_bits = 48;
    POISON(c);
    IS(TSAFE_E_PARAMS, tsafe_bfv_context_create(&bad, &c));
    assert_null(c);
    bad = p;
    bad.flags = 0x80;
    POISON(c);
    ERR(tsafe_bfv_context_create(&bad, &c));
    assert_null(c);
    bad = p;
    bad.gap_bits = 62;
    POISON(c);
    IS(TSAFE_E_PARAMS, tsafe_bfv_context_create(&bad, &c));
    assert_null(c);
}

CHECK_FN(tsafe_bfv_context_free) { (void)f; tsafe_bfv_context_free(NULL); }

CHECK_FN(tsafe_bfv_context_n)
{
    (void)f;
    sealed_world();
    assert_int_equal(tsafe_bfv_context_n(NULL), 0);
    assert_int_equal(tsafe_bfv_context_n(S.c), 4096);
}

CHECK_FN(tsafe_bfv_context_limbs)
{
    sealed_world();
    assert_int_equal(tsafe_bfv_context_limbs(NULL), 0);
    assert_int_equal(tsafe_bfv_context_limbs(S.c), 3); /* 49 + 30 + 30 bits */
}

CHECK_FN(tsafe_bfv_context_prime)
{
    (void)f;
    sealed_world();
    assert_true(tsafe_bfv_context_prime(NULL, 0) == 0);
    assert_true(tsafe_bfv_context_prime(S.c, tsafe_bfv_context_limbs(S.c)) == 0);
    assert_true(tsafe_bfv_context_prime(S.c, 1) != 0);
}

CHECK_FN(tsafe_bfv_context_log2_q)
{
    (void)f;
    sealed_world();
    assert_true(tsafe_bfv_context_log2_q(NULL) == 0.0);
    assert_true(tsafe_bfv_context_log2_q(S.c) <= 109.0);
}

CHECK_FN(tsafe_bfv_context_params)
{
    (void)f;
    sealed_world();
    assert_null(tsafe_bfv_context_params(NULL));
    assert_int_equal(tsafe_bfv_context_params(S.c)->log_n, 12);
}

CHECK_FN(tsafe_bfv_context_fingerprint)
{
    (void)f;
    uint8_t fp[32];
    sealed_world();
    memset(fp, 0xA5, sizeof fp);
    tsafe_bfv_context_fingerprint(NULL, fp); /* no-op */
    for (size_t i = 0; i < sizeof fp; i++)
        assert_int_equal(fp[i], 0xA5);
    tsafe_bfv_context_fingerprint(S.c, NULL);
}

CHECK_FN(tsafe_bfv_secret_key_generate)
{
    (void)f;
    tsafe_bfv_secret_key *k = NULL;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_secret_key_generate(NULL, NULL, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_secret_key_generate(S.c, NULL, NULL));
    assert_null(k);
}

CHECK_FN(tsafe_bfv_secret_key_free) { (void)f; tsafe_bfv_secret_key_free(NULL); }

CHECK_FN(tsafe_bfv_public_key_generate)
{
    (void)f;
    tsafe_bfv_public_key *k = NULL;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_generate(NULL, S.sk, NULL, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_generate(S.c, NULL, NULL, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_generate(S.c, S.sk, NULL, NULL));
    assert_null(k);
}

CHECK_FN(tsafe_bfv_public_key_free) { (void)f; tsafe_bfv_public_key_free(NULL); }

CHECK_FN(tsafe_bfv_public_key_bytes)
{
    (void)f;
    assert_int_equal(tsafe_bfv_public_key_bytes(NULL), 0);
}

CHECK_FN(tsafe_bfv_public_key_write)
{
    (void)f;
    uint8_t b[16];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_write(NULL, S.pk, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_write(S.c, NULL, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_write(S.c, S.pk, NULL, 0));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_bfv_public_key_write(S.c, S.pk, b, sizeof b));
}

CHECK_FN(tsafe_bfv_public_key_read)
{
    (void)f;
    uint8_t b[64] = {0};
    tsafe_bfv_public_key *k = NULL;
    sealed_world();
    size_t need = tsafe_bfv_public_key_bytes(S.c);
    uint8_t *big = malloc(need + 1);
    assert_non_null(big);
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_read(NULL, b, sizeof b, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_read(S.c, NULL, sizeof b, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_read(S.c, b, sizeof b, NULL));
    POISON(k);
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_public_key_read(S.c, b, sizeof b, &k));
    assert_null(k);
    OK(tsafe_bfv_public_key_write(S.c, S.pk, big, need + 1));
    POISON(k);
    IS(TSAFE_E_FORMAT, tsafe_bfv_public_key_read(S.c, big, need + 1, &k)); /* trailing byte */
    assert_null(k);
    memset(big + TSAFE_BFV_SEED_BYTES, 0xFF, 8); /* first residue above q0 */
    POISON(k);
    IS(TSAFE_E_FORMAT, tsafe_bfv_public_key_read(S.c, big, need, &k));
    assert_null(k);
    free(big);
}

CHECK_FN(tsafe_bfv_ct_create)
{
    (void)f;
    tsafe_bfv_ct *ct = NULL;
    IS(TSAFE_E_NULL, tsafe_bfv_ct_create(NULL, &ct));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_create(NULL, NULL));
    assert_null(ct);
}

CHECK_FN(tsafe_bfv_ct_free) { (void)f; tsafe_bfv_ct_free(NULL); }

CHECK_FN(tsafe_bfv_encrypt)
{
    (void)f;
    int64_t m[2] = {0, (int64_t)1 << 40};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt(NULL, S.sk, m, 1, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt(S.c, NULL, m, 1, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt(S.c, S.sk, NULL, 1, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt(S.c, S.sk, m, 1, NULL, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_encrypt(S.c, S.sk, m, 5000, NULL, S.ct));
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_encrypt(S.c, S.sk, m, 2, NULL, S.ct));
    OK(tsafe_bfv_encrypt(S.c, S.sk, m, 1, NULL, S.ct)); /* leave it valid */
}

CHECK_FN(tsafe_bfv_encrypt_frac)
{
    (void)f;
    /* at 24 fractional bits 2^40 fits (t 2^24 / 2 is above it) */
    int64_t m[2] = {0, (int64_t)1 << 62};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt_frac(NULL, S.sk, m, 1, 4, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt_frac(S.c, NULL, m, 1, 4, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt_frac(S.c, S.sk, NULL, 1, 4, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt_frac(S.c, S.sk, m, 1, 4, NULL, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_encrypt_frac(S.c, S.sk, m, 5000, 4, NULL, S.ct));
    IS(TSAFE_E_RANGE, tsafe_bfv_encrypt_frac(S.c, S.sk, m, 1, TSAFE_BFV_MAX_FRAC_BITS + 1,
                                             NULL, S.ct));
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_encrypt_frac(S.c, S.sk, m, 2, 4, NULL, S.ct));
    OK(tsafe_bfv_encrypt_frac(S.c, S.sk, m, 1, 4, NULL, S.ct)); /* leave it valid */
}

CHECK_FN(tsafe_bfv_ct_bytes)
{
    (void)f;
    assert_int_equal(tsafe_bfv_ct_bytes(NULL), 0);
}

CHECK_FN(tsafe_bfv_ct_write)
{
    (void)f;
    uint8_t b[16];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_ct_write(NULL, S.ct, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_write(S.c, NULL, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_write(S.c, S.ct, NULL, 0));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_bfv_ct_write(S.c, S.ct, b, sizeof b));
}

CHECK_FN(tsafe_bfv_ct_read)
{
    (void)f;
    uint8_t b[64] = {0};
    tsafe_bfv_ct *tmp;
    sealed_world();
    OK(tsafe_bfv_ct_create(S.c, &tmp));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read(NULL, b, sizeof b, tmp));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read(S.c, NULL, sizeof b, tmp));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read(S.c, b, sizeof b, NULL));
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_ct_read(S.c, b, sizeof b, tmp));
    size_t need = tsafe_bfv_ct_bytes(S.c);
    uint8_t *big = malloc(need + 1), small[8];
    assert_non_null(big);
    OK(tsafe_bfv_ct_write(S.c, S.ct, big, need + 1));
    big[need] = 0;
    IS(TSAFE_E_FORMAT, tsafe_bfv_ct_read(S.c, big, need + 1, tmp)); /* trailing byte */
    OK(tsafe_bfv_ct_read(S.c, big, need, tmp));
    /* a refused read leaves the ciphertext unusable, neither half-read nor
     * holding the previous message: wrong length, then a bad residue */
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_ct_read(S.c, big, need - 1, tmp));
    IS(TSAFE_E_STATE, tsafe_bfv_ct_write(S.c, tmp, small, sizeof small));
    OK(tsafe_bfv_ct_read(S.c, big, need, tmp));
    memset(big + TSAFE_BFV_SEED_BYTES, 0xFF, 8); /* first residue above q0 */
    IS(TSAFE_E_FORMAT, tsafe_bfv_ct_read(S.c, big, need, tmp));
    IS(TSAFE_E_STATE, tsafe_bfv_ct_write(S.c, tmp, small, sizeof small));
    free(big);
    tsafe_bfv_ct_free(tmp);
}

CHECK_FN(tsafe_bfv_plain_create)
{
    (void)f;
    tsafe_bfv_plain *pt = NULL;
    int64_t big = (int64_t)1 << 41;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_plain_create(NULL, &big, 1, &pt));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_create(S.c, NULL, 1, &pt));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_create(S.c, &big, 1, NULL));
    POISON(pt);
    IS(TSAFE_E_RANGE, tsafe_bfv_plain_create(S.c, &big, 5000, &pt));
    assert_null(pt);
    POISON(pt);
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_plain_create(S.c, &big, 1, &pt));
    assert_null(pt);
}

CHECK_FN(tsafe_bfv_plain_free) { (void)f; tsafe_bfv_plain_free(NULL); }

CHECK_FN(tsafe_bfv_acc_create)
{
    (void)f;
    tsafe_bfv_acc *a = NULL;
    IS(TSAFE_E_NULL, tsafe_bfv_acc_create(NULL, &a));
    assert_null(a);
}

CHECK_FN(tsafe_bfv_acc_free) { (void)f; tsafe_bfv_acc_free(NULL); }
CHECK_FN(tsafe_bfv_acc_zero) { (void)f; tsafe_bfv_acc_zero(NULL); }

CHECK_FN(tsafe_bfv_acc_mul_add)
{
    (void)f;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_acc_mul_add(NULL, S.ct, S.pt));
    IS(TSAFE_E_NULL, tsafe_bfv_acc_mul_add(S.acc, NULL, S.pt));
    IS(TSAFE_E_NULL, tsafe_bfv_acc_mul_add(S.acc, S.ct, NULL));
}

CHECK_FN(tsafe_bfv_sealed_create)
{
    (void)f;
    tsafe_bfv_sealed *r = NULL;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_create(NULL, 1, &r));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_create(S.c, 1, NULL));
    POISON(r);
    IS(TSAFE_E_RANGE, tsafe_bfv_sealed_create(S.c, 5000, &r));
    assert_null(r);
}

CHECK_FN(tsafe_bfv_sealed_free) { (void)f; tsafe_bfv_sealed_free(NULL); }

CHECK_FN(tsafe_bfv_sealed_bytes)
{
    (void)f;
    sealed_world();
    assert_int_equal(tsafe_bfv_sealed_bytes(NULL, 1), 0);
    assert_int_equal(tsafe_bfv_sealed_bytes(S.c, 5000), 0);
}

CHECK_FN(tsafe_bfv_seal)
{
    (void)f;
    uint32_t pos[2] = {7, 4096}, twice[2] = {7, 7};
    uint64_t mask[2] = {0, (uint64_t)1 << 40};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_seal(NULL, S.acc, S.pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal(S.c, NULL, S.pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal(S.c, S.acc, NULL, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal(S.c, S.acc, S.pk, NULL, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal(S.c, S.acc, S.pk, pos, NULL, 1, 20, NULL, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal(S.c, S.acc, S.pk, pos, NULL, 2, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal(S.c, S.acc, S.pk, pos, NULL, 9, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal(S.c, S.acc, S.pk, pos, NULL, 1, 101, NULL, S.res));
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_seal(S.c, S.acc, S.pk, twice, mask, 2, 20, NULL, S.res));
    IS(TSAFE_E_ARG, tsafe_bfv_seal(S.c, S.acc, S.pk, twice, NULL, 2, 20, NULL, S.res));
}

CHECK_FN(tsafe_bfv_sealed_write)
{
    (void)f;
    uint8_t b[8];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_write(NULL, S.res, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_write(S.c, NULL, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_write(S.c, S.res, NULL, 0));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_bfv_sealed_write(S.c, S.res, b, sizeof b));
}

CHECK_FN(tsafe_bfv_sealed_read)
{
    (void)f;
    uint8_t b[8] = {0};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_read(NULL, b, sizeof b, 1, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_read(S.c, NULL, sizeof b, 1, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_read(S.c, b, sizeof b, 1, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_sealed_read(S.c, b, sizeof b, 9, S.res));
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_sealed_read(S.c, b, sizeof b, 1, S.res));
    size_t need = tsafe_bfv_sealed_bytes(S.c, 1);
    uint8_t *ff = malloc(need + 1);
    assert_non_null(ff);
    memset(ff, 0xFF, need + 1); /* every residue above q0 */
    IS(TSAFE_E_FORMAT, tsafe_bfv_sealed_read(S.c, ff, need + 1, 1, S.res));
    IS(TSAFE_E_FORMAT, tsafe_bfv_sealed_read(S.c, ff, need, 1, S.res));
    free(ff);
}

CHECK_FN(tsafe_bfv_sealed_c1) { (void)f; assert_null(tsafe_bfv_sealed_c1(NULL)); }
CHECK_FN(tsafe_bfv_sealed_c0) { (void)f; assert_null(tsafe_bfv_sealed_c0(NULL)); }

CHECK_FN(tsafe_bfv_decrypt_reads)
{
    (void)f;
    uint32_t pos[1] = {5000};
    uint64_t m[1];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(NULL, S.sk, S.res, pos, 0, m));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(S.c, NULL, S.res, pos, 0, m));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(S.c, S.sk, NULL, pos, 0, m));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(S.c, S.sk, S.res, NULL, 1, m));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(S.c, S.sk, S.res, pos, 0, NULL));
    ERR(tsafe_bfv_decrypt_reads(S.c, S.sk, S.res, pos, 1, m)); /* count != reads */
}

CHECK_FN(tsafe_bfv_decrypt_noise)
{
    (void)f;
    uint32_t pos[1] = {1};
    double e[1];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_noise(NULL, S.sk, S.res, pos, 0, e));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_noise(S.c, S.sk, S.res, pos, 1, NULL));
    ERR(tsafe_bfv_decrypt_noise(S.c, S.sk, S.res, pos, 7, e));
}

static const api_case k_bfv[] = {
    ENTRY(tsafe_bfv_context_create), ENTRY(tsafe_bfv_context_free), ENTRY(tsafe_bfv_context_n),
    ENTRY(tsafe_bfv_context_prime), ENTRY(tsafe_bfv_context_log2_q),
    ENTRY(tsafe_bfv_context_limbs),
    ENTRY(tsafe_bfv_context_params), ENTRY(tsafe_bfv_context_fingerprint),
    ENTRY(tsafe_bfv_secret_key_generate), ENTRY(tsafe_bfv_secret_key_free),
    ENTRY(tsafe_bfv_public_key_generate), ENTRY(tsafe_bfv_public_key_free),
    ENTRY(tsafe_bfv_public_key_bytes), ENTRY(tsafe_bfv_public_key_write),
    ENTRY(tsafe_bfv_public_key_read), ENTRY(tsafe_bfv_ct_create), ENTRY(tsafe_bfv_ct_free),
    ENTRY(tsafe_bfv_encrypt), ENTRY(tsafe_bfv_encrypt_frac), ENTRY(tsafe_bfv_ct_bytes), ENTRY(tsafe_bfv_ct_write),
    ENTRY(tsafe_bfv_ct_read), ENTRY(tsafe_bfv_plain_create), ENTRY(tsafe_bfv_plain_free),
    ENTRY(tsafe_bfv_acc_create), ENTRY(tsafe_bfv_acc_free), ENTRY(tsafe_bfv_acc_zero),
    ENTRY(tsafe_bfv_acc_mul_add), ENTRY(tsafe_bfv_sealed_create), ENTRY(tsafe_bfv_sealed_free),
    ENTRY(tsafe_bfv_sealed_bytes), ENTRY(tsafe_bfv_seal), ENTRY(tsafe_bfv_sealed_write),
    ENTRY(tsafe_bfv_sealed_read), ENTRY(tsafe_bfv_sealed_c1), ENTRY(tsafe_bfv_sealed_c0),
    ENTRY(tsafe_bfv_decrypt_reads), ENTRY(tsafe_bfv_decrypt_noise),
};

int main(void)
{
    static const api_table tables[] = {TABLE("bfv.h", k_bfv)};
    return api_null_run("api_null_bfv", tables, sizeof tables / sizeof tables[0], 0);
}
