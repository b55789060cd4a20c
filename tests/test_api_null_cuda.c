/* NULL and out-of-range arguments to every function of tensafe/cuda.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

#if defined(TSAFE_WITH_CUDA)
CHECK_FN(tsafe_cuda_device_count)
{
    IS(TSAFE_E_NULL, tsafe_cuda_device_count(NULL));
}

CHECK_FN(tsafe_cuda_device_name)
{
    char buf[64];
    int a, b;
    ERR(tsafe_cuda_device_name(-1, buf, sizeof buf, &a, &b));
    ERR(tsafe_cuda_device_name(INT32_MAX, buf, sizeof buf, &a, &b));
    ERR(tsafe_cuda_device_name(0, NULL, sizeof buf, &a, &b));
    ERR(tsafe_cuda_device_name(0, buf, 0, &a, &b));
}

CHECK_FN(tsafe_cuda_mem_info)
{
    size_t fr, tot;
    ERR(tsafe_cuda_mem_info(-1, &fr, &tot));
    ERR(tsafe_cuda_mem_info(INT32_MAX, &fr, &tot));
    ERR(tsafe_cuda_mem_info(0, NULL, &tot));
    ERR(tsafe_cuda_mem_info(0, &fr, NULL));
}

CHECK_FN(tsafe_backend_cuda_create)
{
    tsafe_backend *b = NULL;
    ERR(tsafe_backend_cuda_create(NULL, 0, &b));
    ERR(tsafe_backend_cuda_create(f->ctx, 0, NULL));
    ERR(tsafe_backend_cuda_create(f->ctx, -1, &b));
    ERR(tsafe_backend_cuda_create(f->ctx, INT32_MAX, &b));
    assert_null(b);
}

CHECK_FN(tsafe_backend_cuda_create_bfv)
{
    tsafe_backend *b = (tsafe_backend *)1;
    ERR(tsafe_backend_cuda_create_bfv(NULL, 0, &b));
    assert_null(b);
    ERR(tsafe_backend_cuda_create_bfv(NULL, 0, NULL));
}

CHECK_FN(tsafe_backend_cuda_factory)
{
    const tsafe_backend_factory *cf = tsafe_backend_cuda_factory();
    assert_non_null(cf);
    assert_non_null(cf->create);
    assert_string_equal(cf->name, "cuda");
    /* neither or both rings: refused before any device is touched */
    tsafe_backend *b = (tsafe_backend *)1;
    ERR(cf->create(cf->user, NULL, NULL, &b));
    assert_null(b);
    ERR(cf->create(cf->user, f->ctx, NULL, NULL));
    ERR(tsafe_backend_create(cf, NULL, NULL, &b));
    assert_null(b);
}

CHECK_FN(tsafe_backend_is_cuda)
{
    assert_int_equal(tsafe_backend_is_cuda(NULL), 0);
    assert_int_equal(tsafe_backend_is_cuda(f->be), 0);
}

CHECK_FN(tsafe_cuda_buffer_device_pointer)
{
    void *p = NULL;
    ERR(tsafe_cuda_buffer_device_pointer(NULL, &p));
    ERR(tsafe_cuda_buffer_device_pointer(f->buf, NULL));
    IS(TSAFE_E_ARG, tsafe_cuda_buffer_device_pointer(f->buf, &p)); /* a CPU buffer */
}

CHECK_FN(tsafe_cuda_graph_begin)
{
    ERR(tsafe_cuda_graph_begin(NULL));
    ERR(tsafe_cuda_graph_begin(f->be));
}

CHECK_FN(tsafe_cuda_graph_end)
{
    ERR(tsafe_cuda_graph_end(NULL));
    ERR(tsafe_cuda_graph_end(f->be));
}

CHECK_FN(tsafe_cuda_graph_launch)
{
    ERR(tsafe_cuda_graph_launch(NULL));
    ERR(tsafe_cuda_graph_launch(f->be));
}

CHECK_FN(tsafe_cuda_last_error)
{
    assert_non_null(tsafe_cuda_last_error());
}

CHECK_FN(tsafe_cuda_profile)
{
    /* NULL rows count only; off (no TSAFE_CUDA_PROFILE) reads nothing */
    assert_int_equal(tsafe_cuda_profile(NULL, 0, 0), 0);
    assert_int_equal(tsafe_cuda_profile(NULL, 5, 1), 0);
}

static const api_case k_cuda[] = {
    ENTRY(tsafe_cuda_device_count), ENTRY(tsafe_cuda_device_name), ENTRY(tsafe_cuda_mem_info),
    ENTRY(tsafe_backend_cuda_create), ENTRY(tsafe_backend_cuda_create_bfv),
    ENTRY(tsafe_backend_cuda_factory), ENTRY(tsafe_backend_is_cuda),
    ENTRY(tsafe_cuda_buffer_device_pointer), ENTRY(tsafe_cuda_graph_begin),
    ENTRY(tsafe_cuda_graph_end), ENTRY(tsafe_cuda_graph_launch), ENTRY(tsafe_cuda_last_error),
    ENTRY(tsafe_cuda_profile),
};
#endif

int main(void)
{
#if defined(TSAFE_WITH_CUDA)
    static const api_table tables[] = {TABLE("cuda.h", k_cuda)};
#else
    static const api_table tables[] = {{"cuda.h", NULL, 0, 1}};
#endif
    return api_null_run("api_null_cuda", tables, sizeof tables / sizeof tables[0], 0);
}
