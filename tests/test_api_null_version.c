/* NULL and out-of-range arguments to every function of tensafe/version.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_version_number)
{
    assert_int_equal(tsafe_version_number(), TSAFE_VERSION_NUMBER);
}

CHECK_FN(tsafe_version_string)
{
    assert_non_null(tsafe_version_string());
}

static const api_case k_version[] = {ENTRY(tsafe_version_number), ENTRY(tsafe_version_string)};

int main(void)
{
    static const api_table tables[] = {TABLE("version.h", k_version)};
    return api_null_run("api_null_version", tables, sizeof tables / sizeof tables[0], 0);
}
