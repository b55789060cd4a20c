/* NULL and out-of-range arguments to every function of tensafe/cpu_pool.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

#include "tensafe/cpu_pool.h"

static void count_call(void *arg, size_t i)
{
    (void)i;
    ++*(size_t *)arg;
}

CHECK_FN(tsafe_cpu_pool_create)
{
    tsafe_cpu_pool *p = (tsafe_cpu_pool *)1;
    ERR(tsafe_cpu_pool_create(2, NULL));
    IS(TSAFE_E_RANGE, tsafe_cpu_pool_create(TSAFE_CPU_POOL_MAX_THREADS + 1, &p));
    assert_null(p);
}

CHECK_FN(tsafe_cpu_pool_free)
{
    tsafe_cpu_pool_free(NULL);
}

CHECK_FN(tsafe_cpu_pool_threads)
{
    assert_int_equal(tsafe_cpu_pool_threads(NULL), 1);
}

CHECK_FN(tsafe_cpu_pool_available)
{
    assert_int_equal(tsafe_cpu_pool_available(NULL), 1);
}

/* NULL pool: in order here; n 0 or a NULL fn: nothing runs */
CHECK_FN(tsafe_cpu_pool_run)
{
    size_t calls = 0;
    tsafe_cpu_pool_run(NULL, 3, NULL, NULL);
    tsafe_cpu_pool_run(NULL, 0, count_call, &calls);
    assert_int_equal(calls, 0);
    tsafe_cpu_pool_run(NULL, 3, count_call, &calls);
    assert_int_equal(calls, 3);
}

static const api_case k_cpu_pool[] = {
    ENTRY(tsafe_cpu_pool_create), ENTRY(tsafe_cpu_pool_free), ENTRY(tsafe_cpu_pool_threads),
    ENTRY(tsafe_cpu_pool_available), ENTRY(tsafe_cpu_pool_run)};

int main(void)
{
    static const api_table tables[] = {TABLE("cpu_pool.h", k_cpu_pool)};
    return api_null_run("api_null_cpu_pool", tables, sizeof tables / sizeof tables[0], 0);
}
