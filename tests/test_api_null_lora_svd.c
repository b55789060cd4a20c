/* NULL and out-of-range arguments to every function of tensafe/lora_svd.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_svd_reduce)
{
    float A[2 * 3] = {1, 2, 3, 4, 5, 6}, B[3 * 2] = {1, 0, 0, 1, 1, 1};
    tsafe_svd_options o = {TSAFE_SVD_FIXED_RANK, 1, 0.0, 0}, bad;
    tsafe_svd_result *r = NULL;
    ERR(tsafe_svd_reduce(NULL, B, 2, 3, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, NULL, 2, 3, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, B, 2, 3, 3, NULL, &r));
    ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &o, NULL));
    ERR(tsafe_svd_reduce(A, B, 0, 3, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, B, 2, 0, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, B, 2, 3, 0, &o, &r));
    ERR(tsafe_svd_reduce(A, B, (size_t)INT_MAX + 1, 3, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, B, 2, SIZE_MAX, 3, &o, &r));
    bad = o; bad.rank = 0; ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad = o; bad.rank = 3; IS(TSAFE_E_RANGE, tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad = o; bad.select = (tsafe_svd_select)9; ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad = o; bad.select = TSAFE_SVD_ENERGY; bad.energy = 0.0;
    ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad.energy = 1.5; ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad.energy = NAN; ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    A[0] = NAN;
    IS(TSAFE_E_VALUE_RANGE, tsafe_svd_reduce(A, B, 2, 3, 3, &o, &r));
    assert_null(r);
}

CHECK_FN(tsafe_svd_result_free)
{
    tsafe_svd_result_free(NULL);
}

static const api_case k_lora_svd[] = {ENTRY(tsafe_svd_reduce), ENTRY(tsafe_svd_result_free)};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_svd.h", k_lora_svd)};
    return api_null_run("api_null_lora_svd", tables, sizeof tables / sizeof tables[0], 0);
}
