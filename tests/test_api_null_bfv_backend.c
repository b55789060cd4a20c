/* NULL and out-of-range arguments to every function of tensafe/bfv_backend.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_bfv_ct_read_buffer)
{
    sealed_world();
    tsafe_buffer *x = NULL, *ckks_buf = f->buf;
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &x));
    uint8_t bytes[8] = {0};
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffer(NULL, bytes, sizeof bytes, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffer(S.c, NULL, sizeof bytes, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffer(S.c, bytes, sizeof bytes, NULL));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_ct_read_buffer(S.c, bytes, sizeof bytes, ckks_buf));
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_ct_read_buffer(S.c, bytes, sizeof bytes, x));
    tsafe_buffer_free(x);
    OK(tsafe_buffer_alloc(b, 1, tsafe_bfv_context_limbs(S.c), &x)); /* one polynomial */
    IS(TSAFE_E_RANGE, tsafe_bfv_ct_read_buffer(S.c, bytes, sizeof bytes, x));
    tsafe_buffer_free(x);
    tsafe_backend_free(b);
}

/* A CPU backend of the sealed world's ring and two ciphertext buffers. */
static tsafe_backend *two_ct_buffers(tsafe_buffer *x[2])
{
    sealed_world();
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &x[0]));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &x[1]));
    return b;
}

CHECK_FN(tsafe_bfv_ct_read_buffers)
{
    tsafe_buffer *x[2] = {NULL, NULL}, *mixed[2];
    tsafe_backend *b = two_ct_buffers(x);
    uint8_t bytes[16] = {0};
    OK(tsafe_bfv_ct_read_buffers(S.c, NULL, 8, 0, NULL)); /* nothing to read */
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffers(NULL, bytes, 8, 2, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffers(S.c, NULL, 8, 2, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffers(S.c, bytes, 8, 2, NULL));
    mixed[0] = x[0];
    mixed[1] = NULL;
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffers(S.c, bytes, 8, 2, mixed));
    mixed[1] = f->buf; /* a CKKS ring's buffer */
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_ct_read_buffers(S.c, bytes, 8, 2, mixed));
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_ct_read_buffers(S.c, bytes, 8, 2, x));
    tsafe_buffer_free(x[1]);
    OK(tsafe_buffer_alloc(b, 1, tsafe_bfv_context_limbs(S.c), &x[1])); /* one polynomial */
    IS(TSAFE_E_RANGE, tsafe_bfv_ct_read_buffers(S.c, bytes, 8, 2, x));
    tsafe_buffer_free(x[0]);
    tsafe_buffer_free(x[1]);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_ct_read_buffers_at)
{
    tsafe_buffer *x[2] = {NULL, NULL}, *mixed[2];
    tsafe_backend *b = two_ct_buffers(x);
    uint8_t b0[8] = {0}, b1[8] = {0};
    const uint8_t *at[2] = {b0, b1}, *half[2] = {b0, NULL};
    OK(tsafe_bfv_ct_read_buffers_at(S.c, NULL, 8, 0, NULL)); /* nothing to read */
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffers_at(NULL, at, 8, 2, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffers_at(S.c, NULL, 8, 2, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffers_at(S.c, half, 8, 2, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffers_at(S.c, at, 8, 2, NULL));
    mixed[0] = x[0];
    mixed[1] = f->buf; /* a CKKS ring's buffer */
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_ct_read_buffers_at(S.c, at, 8, 2, mixed));
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_ct_read_buffers_at(S.c, at, 8, 2, x));
    tsafe_buffer_free(x[0]);
    tsafe_buffer_free(x[1]);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_plain_operand)
{
    sealed_world();
    tsafe_buffer *o = NULL;
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_operand(S.pt, b, NULL));
    POISON(o);
    IS(TSAFE_E_NULL, tsafe_bfv_plain_operand(NULL, b, &o));
    assert_null(o);
    IS(TSAFE_E_NULL, tsafe_bfv_plain_operand(S.pt, NULL, &o));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_plain_operand(S.pt, f->be, &o)); /* CKKS ring */
    assert_null(o);
    OK(tsafe_bfv_plain_operand(S.pt, b, &o));
    tsafe_buffer_free(o);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_plain_encode_buffer)
{
    sealed_world();
    tsafe_buffer *o = NULL, *plainbuf = NULL;
    tsafe_backend *b = NULL;
    int64_t m[2] = {1, (int64_t)1 << 41};
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_buffer_alloc_operand(b, 1, tsafe_bfv_context_limbs(S.c), &o));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &plainbuf));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_encode_buffer(NULL, m, 1, o));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_encode_buffer(S.c, NULL, 1, o));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_encode_buffer(S.c, m, 1, NULL));
    IS(TSAFE_E_ARG, tsafe_bfv_plain_encode_buffer(S.c, m, 1, plainbuf)); /* 2 polynomials */
    IS(TSAFE_E_RANGE, tsafe_bfv_plain_encode_buffer(S.c, m, 4097, o));
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_plain_encode_buffer(S.c, m, 2, o));
    OK(tsafe_bfv_plain_encode_buffer(S.c, m, 1, o));
    tsafe_buffer_free(plainbuf);
    tsafe_buffer_free(o);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_public_key_operand)
{
    sealed_world();
    tsafe_buffer *o = NULL;
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_operand(S.pk, b, NULL));
    POISON(o);
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_operand(NULL, b, &o));
    assert_null(o);
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_operand(S.pk, NULL, &o));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_public_key_operand(S.pk, f->be, &o));
    OK(tsafe_bfv_public_key_operand(S.pk, b, &o));
    tsafe_buffer_free(o);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_create)
{
    sealed_world();
    tsafe_bfv_sealer *sl = NULL;
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_create(S.c, b, NULL));
    POISON(sl);
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_create(NULL, b, &sl));
    assert_null(sl);
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_create(S.c, NULL, &sl));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_sealer_create(S.c, f->be, &sl));
    assert_null(sl);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_free)
{
    (void)f;
    tsafe_bfv_sealer_free(NULL);
}

CHECK_FN(tsafe_bfv_seal_buffer)
{
    sealed_world();
    tsafe_backend *b = NULL;
    tsafe_bfv_sealer *sl = NULL;
    tsafe_buffer *acc = NULL, *pk = NULL;
    uint32_t pos[2] = {7, 4096}, twice[2] = {7, 7};
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_bfv_sealer_create(S.c, b, &sl));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &acc));
    OK(tsafe_bfv_public_key_operand(S.pk, b, &pk));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(NULL, acc, pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(sl, NULL, pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(sl, acc, NULL, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(sl, acc, pk, NULL, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 1, 20, NULL, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_buffer(sl, pk, acc, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_ARG, tsafe_bfv_seal_buffer(sl, f->buf, pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 2, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 9, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 1, 101, NULL, S.res));
    IS(TSAFE_E_ARG, tsafe_bfv_seal_buffer(sl, acc, pk, twice, NULL, 2, 20, NULL, S.res));
    OK(tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 1, 20, NULL, S.res));
    tsafe_buffer_free(pk);
    tsafe_buffer_free(acc);
    tsafe_bfv_sealer_free(sl);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_seal_batch)
{
    sealed_world();
    tsafe_backend *b = NULL;
    tsafe_bfv_sealer *sl = NULL;
    tsafe_buffer *acc = NULL, *pk = NULL;
    uint32_t pos[2] = {7, 4096};
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_bfv_sealer_create(S.c, b, &sl));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &acc));
    OK(tsafe_bfv_public_key_operand(S.pk, b, &pk));
    tsafe_bfv_seal_item it = {acc, pos, NULL, 1, NULL, S.res};
    IS(TSAFE_E_NULL, tsafe_bfv_seal_batch(NULL, pk, &it, 1, 20));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_batch(sl, NULL, &it, 1, 20));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_batch(sl, pk, NULL, 1, 20));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_batch(sl, acc, &it, 1, 20));
    it.acc = NULL;
    IS(TSAFE_E_NULL, tsafe_bfv_seal_batch(sl, pk, &it, 1, 20));
    it = (tsafe_bfv_seal_item){f->buf, pos, NULL, 1, NULL, S.res};
    IS(TSAFE_E_ARG, tsafe_bfv_seal_batch(sl, pk, &it, 1, 20));
    it = (tsafe_bfv_seal_item){acc, pos, NULL, 2, NULL, S.res};
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_batch(sl, pk, &it, 1, 20));
    it.n_reads = 1;
    OK(tsafe_bfv_seal_batch(sl, pk, &it, 1, 20));
    OK(tsafe_bfv_seal_batch(sl, pk, NULL, 0, 20));
    tsafe_buffer_free(pk);
    tsafe_buffer_free(acc);
    tsafe_bfv_sealer_free(sl);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_batches)
{
    sealed_world();
    tsafe_backend *b = NULL;
    tsafe_bfv_sealer *sl = NULL;
    assert_int_equal(tsafe_bfv_sealer_batches(NULL), 0);
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_bfv_sealer_create(S.c, b, &sl));
    assert_int_equal(tsafe_bfv_sealer_batches(sl), 0); /* the CPU seals one at a time */
    tsafe_bfv_sealer_free(sl);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_prepare)
{
    sealed_world();
    tsafe_backend *b = NULL;
    tsafe_bfv_sealer *sl = NULL;
    tsafe_buffer *pk = NULL, *plain = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_bfv_sealer_create(S.c, b, &sl));
    OK(tsafe_bfv_public_key_operand(S.pk, b, &pk));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &plain));
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_prepare(NULL, pk, 1, NULL));
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_prepare(sl, NULL, 1, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_sealer_prepare(sl, plain, 1, NULL)); /* not an operand */
    IS(TSAFE_E_ARG, tsafe_bfv_sealer_prepare(sl, f->buf, 1, NULL));  /* another backend */
    IS(TSAFE_E_RANGE, tsafe_bfv_sealer_prepare(sl, pk, (size_t)1 << 21, NULL));
    OK(tsafe_bfv_sealer_prepare(sl, pk, 2, NULL));
    assert_int_equal(tsafe_bfv_sealer_ready(sl), 2);
    tsafe_buffer_free(plain);
    tsafe_buffer_free(pk);
    tsafe_bfv_sealer_free(sl);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_ready)
{
    (void)f;
    assert_int_equal(tsafe_bfv_sealer_ready(NULL), 0);
}

CHECK_FN(tsafe_bfv_sealer_drop)
{
    (void)f;
    tsafe_bfv_sealer_drop(NULL);
}

static const api_case k_bfv_backend[] = {
    ENTRY(tsafe_bfv_sealer_prepare), ENTRY(tsafe_bfv_sealer_ready),
    ENTRY(tsafe_bfv_sealer_drop),
    ENTRY(tsafe_bfv_ct_read_buffer), ENTRY(tsafe_bfv_ct_read_buffers),
    ENTRY(tsafe_bfv_ct_read_buffers_at),
    ENTRY(tsafe_bfv_plain_operand),
    ENTRY(tsafe_bfv_plain_encode_buffer), ENTRY(tsafe_bfv_public_key_operand),
    ENTRY(tsafe_bfv_sealer_create), ENTRY(tsafe_bfv_sealer_free), ENTRY(tsafe_bfv_seal_buffer),
    ENTRY(tsafe_bfv_seal_batch), ENTRY(tsafe_bfv_sealer_batches),
};

int main(void)
{
    static const api_table tables[] = {TABLE("bfv_backend.h", k_bfv_backend)};
    return api_null_run("api_null_bfv_backend", tables, sizeof tables / sizeof tables[0], 0);
}
