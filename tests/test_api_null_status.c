/* NULL and out-of-range arguments to every function of tensafe/status.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

static const int k_codes[] = {0, -1, -2, -47, -92, -93, 1, 42, -1000, INT_MIN, INT_MAX};

CHECK_FN(tsafe_strerror)
{
    for (size_t i = 0; i < sizeof k_codes / sizeof k_codes[0]; i++)
        assert_non_null(tsafe_strerror(k_codes[i]));
}

CHECK_FN(tsafe_status_name)
{
    for (size_t i = 0; i < sizeof k_codes / sizeof k_codes[0]; i++)
        assert_non_null(tsafe_status_name(k_codes[i]));
    assert_string_equal(tsafe_status_name(TSAFE_E_FORMAT), "TSAFE_E_FORMAT");
}

static const api_case k_status[] = {ENTRY(tsafe_strerror), ENTRY(tsafe_status_name)};

int main(void)
{
    static const api_table tables[] = {TABLE("status.h", k_status)};
    return api_null_run("api_null_status", tables, sizeof tables / sizeof tables[0], 1);
}
