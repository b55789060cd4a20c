/* tsafe_session_server_work_batch: the pending steps of many server
 * sessions in one call. Each session's step runs whole on one thread of
 * the pool (a session is one thread's at a time), so its bytes are those
 * of work(); the ring work inside a step goes to the session's backend,
 * which with a pooled CPU factory (tsafe_backend_cpu_factory_pool) shares
 * the same pool: a step run from a pool thread keeps its jobs in line, a
 * lone session's step spreads its jobs over the pool. */
#include <stdlib.h>

#include "server_internal.h"
#include "tsafe_check.h"

typedef struct {
    tsafe_session_server **todo;
} batch_run;

static void run_one(void *arg, size_t i)
{
    batch_run *b = arg;
    tsafe_status st = tsafe_session_server_work(b->todo[i]);
    (void)st; /* kept by the session: status(), wants() FAILED */
}

static int ptr_cmp(const void *x, const void *y)
{
    const void *a = *(const void *const *)x, *b = *(const void *const *)y;
    return a < b ? -1 : a > b;
}

/* The sessions with a step to run, each once (TSAFE_E_ARG for a session
 * given twice: it would run on two threads at once). */
static tsafe_status pending(tsafe_session_server *const *s, size_t n,
                            tsafe_session_server **todo, size_t *count)
{
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        TSAFE_REQUIRE(s[i], TSAFE_E_NULL);
        todo[i] = s[i];
    }
    qsort(todo, n, sizeof *todo, ptr_cmp);
    for (size_t i = 1; i < n; i++)
        TSAFE_REQUIRE(todo[i] != todo[i - 1], TSAFE_E_ARG);
    for (size_t i = 0; i < n; i++) /* in the caller's order */
        if (s[i]->work != WORK_NONE && !s[i]->end.failed)
            todo[(*count)++] = s[i];
    return TSAFE_OK;
}

tsafe_status tsafe_session_server_work_batch(tsafe_session_server *const *s, size_t n,
                                             tsafe_cpu_pool *pool)
{
    TSAFE_REQUIRE(s || n == 0, TSAFE_E_NULL);
    if (n == 0)
        return TSAFE_OK;
    TSAFE_REQUIRE(n <= SIZE_MAX / sizeof(tsafe_session_server *), TSAFE_E_SIZE_OVERFLOW);
    tsafe_session_server **todo = malloc(n * sizeof *todo);
    TSAFE_REQUIRE(todo, TSAFE_E_NOMEM);
    size_t count = 0;
    tsafe_status st = pending(s, n, todo, &count);
    if (st == TSAFE_OK) {
        batch_run b = {todo};
        tsafe_cpu_pool_run(pool, count, run_one, &b);
    }
    free(todo);
    return st;
}
