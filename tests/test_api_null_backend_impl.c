/* NULL and out-of-range arguments to every function of tensafe/backend_impl.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_context_psi)
{
    assert_int_equal(tsafe_context_psi(NULL, 0), 0);
    assert_int_equal(tsafe_context_psi(f->ctx, 2), 0);
    assert_int_equal(tsafe_context_psi(f->ctx, UINT32_MAX), 0);
}

CHECK_FN(tsafe_context_log_n)
{
    assert_int_equal(tsafe_context_log_n(NULL), 0);
    assert_int_equal(tsafe_context_log_n(f->ctx), 10);
}

CHECK_FN(tsafe_backend_init)
{
    static const struct tsafe_backend_i empty = {0};
    tsafe_backend *b = NULL;
    ERR(tsafe_backend_init(NULL, TSAFE_BACKEND_API_VERSION, f->be->iface, NULL, f->ctx));
    ERR(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, NULL, NULL, f->ctx));
    ERR(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION + 1, f->be->iface, NULL, f->ctx));
    ERR(tsafe_backend_init(&b, -1, f->be->iface, NULL, f->ctx));
    ERR(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, f->be->iface, NULL, NULL));
    ERR(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, &empty, NULL, f->ctx));
    assert_null(b);
}

CHECK_FN(tsafe_backend_init_bfv)
{
    tsafe_backend *b = NULL;
    ERR(tsafe_backend_init_bfv(&b, TSAFE_BACKEND_API_VERSION, f->be->iface, NULL, NULL));
    ERR(tsafe_backend_init_bfv(NULL, TSAFE_BACKEND_API_VERSION, f->be->iface, NULL, NULL));
    assert_null(b);
}

CHECK_FN(tsafe_backend_log_n)
{
    assert_int_equal(tsafe_backend_log_n(NULL), 0);
    assert_int_equal(tsafe_backend_log_n(f->be), 10);
}

CHECK_FN(tsafe_backend_prime)
{
    assert_int_equal(tsafe_backend_prime(NULL, 0), 0);
    assert_int_equal(tsafe_backend_prime(f->be, 0), tsafe_context_prime(f->ctx, 0));
    assert_int_equal(tsafe_backend_prime(f->be, UINT32_MAX), 0);
}

CHECK_FN(tsafe_backend_psi)
{
    assert_int_equal(tsafe_backend_psi(NULL, 0), 0);
    assert_int_equal(tsafe_backend_psi(f->be, 0), tsafe_context_psi(f->ctx, 0));
    assert_int_equal(tsafe_backend_psi(f->be, UINT32_MAX), 0);
}

static const api_case k_backend_impl[] = {
    ENTRY(tsafe_context_psi), ENTRY(tsafe_context_log_n), ENTRY(tsafe_backend_init),
    ENTRY(tsafe_backend_init_bfv), ENTRY(tsafe_backend_log_n), ENTRY(tsafe_backend_prime),
    ENTRY(tsafe_backend_psi),
};

int main(void)
{
    static const api_table tables[] = {TABLE("backend_impl.h", k_backend_impl)};
    return api_null_run("api_null_backend_impl", tables, sizeof tables / sizeof tables[0], 0);
}
