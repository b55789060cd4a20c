/* NULL and out-of-range arguments to every function of tensafe/backend.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_backend_cpu_create)
{
    tsafe_backend *b = NULL;
    ERR(tsafe_backend_cpu_create(NULL, &b));
    ERR(tsafe_backend_cpu_create(f->ctx, NULL));
    assert_null(b);
}

CHECK_FN(tsafe_backend_free)
{
    tsafe_backend_free(NULL);
}

CHECK_FN(tsafe_backend_name)
{
    (void)tsafe_backend_name(NULL);
    assert_non_null(tsafe_backend_name(f->be));
}

CHECK_FN(tsafe_buffer_alloc)
{
    tsafe_buffer *b = NULL;
    ERR(tsafe_buffer_alloc(NULL, 1, 1, &b));
    ERR(tsafe_buffer_alloc(f->be, 1, 1, NULL));
    ERR(tsafe_buffer_alloc(f->be, 0, 1, &b));
    ERR(tsafe_buffer_alloc(f->be, 1, 0, &b));
    ERR(tsafe_buffer_alloc(f->be, 1, 3, &b)); /* more limbs than primes */
    ERR(tsafe_buffer_alloc(f->be, 1, UINT32_MAX, &b));
    ERR(tsafe_buffer_alloc(f->be, SIZE_MAX, 2, &b));
    ERR(tsafe_buffer_alloc(f->be, SIZE_MAX / 1024 + 1, 1, &b));
    assert_null(b);
}

CHECK_FN(tsafe_buffer_free)
{
    tsafe_buffer_free(NULL);
}

CHECK_FN(tsafe_buffer_words)
{
    assert_int_equal(tsafe_buffer_words(NULL), 0);
    assert_int_equal(tsafe_buffer_words(f->buf), 2 * 2 * 1024);
}

CHECK_FN(tsafe_buffer_upload)
{
    size_t n = tsafe_buffer_words(f->buf);
    uint64_t *w = calloc(n + 1, sizeof *w);
    ERR(tsafe_buffer_upload(NULL, w, n));
    ERR(tsafe_buffer_upload(f->buf, NULL, n));
    ERR(tsafe_buffer_upload(f->buf, w, n + 1));
    ERR(tsafe_buffer_upload(f->buf, w, SIZE_MAX));
    free(w);
}

CHECK_FN(tsafe_buffer_download)
{
    size_t n = tsafe_buffer_words(f->buf);
    uint64_t *w = calloc(n + 1, sizeof *w);
    ERR(tsafe_buffer_download(NULL, w, n));
    ERR(tsafe_buffer_download(f->buf, NULL, n));
    ERR(tsafe_buffer_download(f->buf, w, n + 1));
    ERR(tsafe_buffer_download(f->buf, w, SIZE_MAX));
    free(w);
}

CHECK_FN(tsafe_backend_ntt_forward)
{
    ERR(tsafe_backend_ntt_forward(NULL, f->buf));
    ERR(tsafe_backend_ntt_forward(f->be, NULL));
}

CHECK_FN(tsafe_backend_ntt_inverse)
{
    ERR(tsafe_backend_ntt_inverse(NULL, f->buf));
    ERR(tsafe_backend_ntt_inverse(f->be, NULL));
}

CHECK_FN(tsafe_backend_elementwise)
{
    ERR(tsafe_backend_elementwise(NULL, TSAFE_OP_ADD, f->buf, f->buf, f->buf));
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_ADD, NULL, f->buf, f->buf));
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_ADD, f->buf, NULL, f->buf));
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_ADD, f->buf, f->buf, NULL));
    ERR(tsafe_backend_elementwise(f->be, (tsafe_elementwise_op)99, f->buf, f->buf, f->buf));
    ERR(tsafe_backend_elementwise(f->be, (tsafe_elementwise_op)-1, f->buf, f->buf, f->buf));
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_MUL, f->buf, f->buf, f->buf1)); /* limbs */
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_MUL, f->buf1, f->buf, f->buf));
}

CHECK_FN(tsafe_backend_rescale)
{
    ERR(tsafe_backend_rescale(NULL, f->buf1, f->buf));
    ERR(tsafe_backend_rescale(f->be, NULL, f->buf));
    ERR(tsafe_backend_rescale(f->be, f->buf1, NULL));
    ERR(tsafe_backend_rescale(f->be, f->buf, f->buf));  /* same limb count */
    ERR(tsafe_backend_rescale(f->be, f->buf1, f->buf1)); /* one limb in */
}

/* NULL out refused; a NULL pool is one thread */
CHECK_FN(tsafe_backend_cpu_factory_pool)
{
    tsafe_backend_factory fac;
    ERR(tsafe_backend_cpu_factory_pool(NULL, NULL));
    OK(tsafe_backend_cpu_factory_pool(NULL, &fac));
}

CHECK_FN(tsafe_backend_synchronize)
{
    ERR(tsafe_backend_synchronize(NULL));
}

/* NULL refused; the CPU backend has no graphs (UNSUPPORTED, not OK) */
CHECK_FN(tsafe_backend_graph_begin)
{
    ERR(tsafe_backend_graph_begin(NULL));
    assert_int_equal(tsafe_backend_graph_begin(f->be), TSAFE_E_UNSUPPORTED);
}

CHECK_FN(tsafe_backend_graph_end)
{
    ERR(tsafe_backend_graph_end(NULL));
    assert_int_equal(tsafe_backend_graph_end(f->be), TSAFE_E_UNSUPPORTED);
}

CHECK_FN(tsafe_backend_graph_launch)
{
    ERR(tsafe_backend_graph_launch(NULL));
    assert_int_equal(tsafe_backend_graph_launch(f->be), TSAFE_E_UNSUPPORTED);
}

CHECK_FN(tsafe_backend_cpu_create_bfv)
{
    tsafe_backend *b = (tsafe_backend *)1;
    ERR(tsafe_backend_cpu_create_bfv(NULL, &b));
    assert_null(b);
}

CHECK_FN(tsafe_backend_n)
{
    assert_int_equal(tsafe_backend_n(NULL), 0);
    assert_int_equal(tsafe_backend_n(f->be), 1024);
}

CHECK_FN(tsafe_backend_max_limbs)
{
    assert_int_equal(tsafe_backend_max_limbs(NULL), 0);
    assert_true(tsafe_backend_max_limbs(f->be) >= 2);
}

CHECK_FN(tsafe_backend_cpu_factory)
{
    const tsafe_backend_factory *cf = tsafe_backend_cpu_factory();
    assert_non_null(cf);
    assert_non_null(cf->create);
}

CHECK_FN(tsafe_backend_create)
{
    tsafe_backend *b = (tsafe_backend *)1;
    ERR(tsafe_backend_create(NULL, NULL, NULL, NULL));
    ERR(tsafe_backend_create(NULL, NULL, NULL, &b));
    assert_null(b);
    static const tsafe_backend_factory no_create = {"x", NULL, NULL};
    ERR(tsafe_backend_create(&no_create, f->ctx, NULL, &b));
    assert_null(b);
}

CHECK_FN(tsafe_buffer_alloc_operand)
{
    tsafe_buffer *o = (tsafe_buffer *)1;
    ERR(tsafe_buffer_alloc_operand(NULL, 1, 1, &o));
    assert_null(o);
    ERR(tsafe_buffer_alloc_operand(f->be, 1, 1, NULL));
    ERR(tsafe_buffer_alloc_operand(f->be, 0, 1, &o));
    ERR(tsafe_buffer_alloc_operand(f->be, 1, 0, &o));
}

CHECK_FN(tsafe_buffer_polys)
{
    assert_int_equal(tsafe_buffer_polys(NULL), 0);
    assert_true(tsafe_buffer_polys(f->buf) >= 1);
}

CHECK_FN(tsafe_buffer_limbs)
{
    assert_int_equal(tsafe_buffer_limbs(NULL), 0);
    assert_true(tsafe_buffer_limbs(f->buf) >= 1);
}

CHECK_FN(tsafe_buffer_host_words)
{
    assert_null(tsafe_buffer_host_words(NULL));
    assert_non_null(tsafe_buffer_host_words(f->buf)); /* CPU: host memory */
}

CHECK_FN(tsafe_backend_mul_acc)
{
    const tsafe_buffer *a[1] = {f->buf}, *w[1] = {f->buf}; /* w not an operand */
    tsafe_backend_mac job = {f->buf1, 1, a, w, 0};
    ERR(tsafe_backend_mul_acc(NULL, &job, 1));
    ERR(tsafe_backend_mul_acc(f->be, NULL, 1));
    ERR(tsafe_backend_mul_acc(f->be, &job, 1));
    tsafe_backend_mac nulls = {f->buf1, 1, NULL, NULL, 1};
    ERR(tsafe_backend_mul_acc(f->be, &nulls, 1));
    tsafe_backend_mac noacc = {NULL, 0, NULL, NULL, 0};
    ERR(tsafe_backend_mul_acc(f->be, &noacc, 1));
}

CHECK_FN(tsafe_backend_mod_switch)
{
    ERR(tsafe_backend_mod_switch(NULL, f->buf1, f->buf));
    ERR(tsafe_backend_mod_switch(f->be, NULL, f->buf));
    ERR(tsafe_backend_mod_switch(f->be, f->buf1, NULL));
    ERR(tsafe_backend_mod_switch(f->be, f->buf, f->buf));
    ERR(tsafe_backend_mod_switch(f->be, f->buf1, f->buf1));
}

CHECK_FN(tsafe_backend_ntt_read)
{
    uint32_t pos[2] = {0, (uint32_t)tsafe_backend_n(f->be)}; /* the second: N */
    uint64_t out[4];
    ERR(tsafe_backend_ntt_read(NULL, f->buf, 0, pos, 1, out));
    ERR(tsafe_backend_ntt_read(f->be, NULL, 0, pos, 1, out));
    ERR(tsafe_backend_ntt_read(f->be, f->buf, 0, NULL, 1, out));
    ERR(tsafe_backend_ntt_read(f->be, f->buf, 0, pos, 1, NULL));
    ERR(tsafe_backend_ntt_read(f->be, f->buf, 2, pos, 1, out)); /* poly */
    ERR(tsafe_backend_ntt_read(f->be, f->buf, 0, pos, 2, out)); /* position N */
}

static const api_case k_backend[] = {
    ENTRY(tsafe_backend_cpu_create), ENTRY(tsafe_backend_free), ENTRY(tsafe_backend_name),
    ENTRY(tsafe_backend_cpu_create_bfv), ENTRY(tsafe_backend_n), ENTRY(tsafe_backend_max_limbs),
    ENTRY(tsafe_backend_cpu_factory), ENTRY(tsafe_backend_create),
    ENTRY(tsafe_buffer_alloc_operand), ENTRY(tsafe_buffer_polys), ENTRY(tsafe_buffer_limbs),
    ENTRY(tsafe_buffer_host_words), ENTRY(tsafe_backend_mul_acc), ENTRY(tsafe_backend_mod_switch),
    ENTRY(tsafe_buffer_alloc), ENTRY(tsafe_buffer_free), ENTRY(tsafe_buffer_words),
    ENTRY(tsafe_buffer_upload), ENTRY(tsafe_buffer_download), ENTRY(tsafe_backend_ntt_forward),
    ENTRY(tsafe_backend_ntt_inverse), ENTRY(tsafe_backend_elementwise),
    ENTRY(tsafe_backend_rescale), ENTRY(tsafe_backend_synchronize), ENTRY(tsafe_backend_cpu_factory_pool), ENTRY(tsafe_backend_graph_begin),
    ENTRY(tsafe_backend_graph_end), ENTRY(tsafe_backend_graph_launch),
    ENTRY(tsafe_backend_ntt_read),
};

int main(void)
{
    static const api_table tables[] = {TABLE("backend.h", k_backend)};
    return api_null_run("api_null_backend", tables, sizeof tables / sizeof tables[0], 0);
}
