/* The worker pool (tensafe/cpu_pool.h). A batch is (fn, arg, n); tasks are
 * claimed with an atomic counter by the workers and the caller alike, so
 * an uneven batch balances itself. Workers sleep on a condition variable
 * between batches: an idle pool costs nothing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "tensafe/cpu_pool.h"
#include "tsafe_check.h"

struct tsafe_cpu_pool {
    unsigned threads;
    pthread_t *tid;      /* threads - 1 workers */
    unsigned started;
    pthread_mutex_t run; /* one batch at a time (try-locked) */
    pthread_mutex_t m;   /* guards everything below but `next` */
    pthread_cond_t go, done;
    unsigned long gen;   /* batch number: a change wakes the workers */
    int stop;
    void (*fn)(void *, size_t);
    void *arg;
    size_t n;
    atomic_size_t next;  /* the next unclaimed task */
    unsigned busy;       /* workers not yet finished with this batch */
};

/* Set on the threads while they run tasks: a nested run() goes in line. */
static _Thread_local int t_in_task;

static void drain(tsafe_cpu_pool *p, void (*fn)(void *, size_t), void *arg, size_t n)
{
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < n;)
        fn(arg, i);
}

static void *worker(void *vp)
{
    tsafe_cpu_pool *p = vp;
    unsigned long seen = 0;
    t_in_task = 1;
    pthread_mutex_lock(&p->m);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->go, &p->m);
        if (p->stop)
            break;
        seen = p->gen;
        void (*fn)(void *, size_t) = p->fn;
        void *arg = p->arg;
        size_t n = p->n;
        pthread_mutex_unlock(&p->m);
        drain(p, fn, arg, n);
        pthread_mutex_lock(&p->m);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->m);
    return NULL;
}

void tsafe_cpu_pool_free(tsafe_cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->m);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->m);
    for (unsigned i = 0; i < p->started; i++)
        pthread_join(p->tid[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->m);
    pthread_mutex_destroy(&p->run);
    free(p->tid);
    free(p);
}

static unsigned online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return n > (long)TSAFE_CPU_POOL_MAX_THREADS ? TSAFE_CPU_POOL_MAX_THREADS : (unsigned)n;
}

tsafe_status tsafe_cpu_pool_create(unsigned threads, tsafe_cpu_pool **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(threads <= TSAFE_CPU_POOL_MAX_THREADS, TSAFE_E_RANGE);
    tsafe_cpu_pool *p = calloc(1, sizeof *p);
    if (!p)
        return TSAFE_E_NOMEM;
    p->threads = threads ? threads : online_cores();
    pthread_mutex_init(&p->run, NULL);
    pthread_mutex_init(&p->m, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    if (p->threads > 1 && !(p->tid = calloc(p->threads - 1, sizeof *p->tid))) {
        tsafe_cpu_pool_free(p);
        return TSAFE_E_NOMEM;
    }
    for (unsigned i = 0; i + 1 < p->threads; i++) {
        if (pthread_create(&p->tid[i], NULL, worker, p) != 0) {
            tsafe_cpu_pool_free(p);
            return TSAFE_E_NOMEM;
        }
        p->started++;
    }
    *out = p;
    return TSAFE_OK;
}

unsigned tsafe_cpu_pool_threads(const tsafe_cpu_pool *p)
{
    return p ? p->threads : 1;
}

unsigned tsafe_cpu_pool_available(const tsafe_cpu_pool *p)
{
    return p && !t_in_task ? p->started + 1 : 1;
}

void tsafe_cpu_pool_run(tsafe_cpu_pool *p, size_t n, void (*fn)(void *, size_t), void *arg)
{
    if (!fn || n == 0)
        return;
    /* in line: no workers, one task, nested, or the pool busy with
     * another thread's batch (never waiting for it: a caller may hold a
     * lock that a task of that batch needs) */
    if (!p || p->started == 0 || n == 1 || t_in_task || pthread_mutex_trylock(&p->run) != 0) {
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    pthread_mutex_lock(&p->m);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    atomic_store(&p->next, 0);
    p->busy = p->started;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->m);
    t_in_task = 1;
    drain(p, fn, arg, n);
    t_in_task = 0;
    pthread_mutex_lock(&p->m);
    while (p->busy)
        pthread_cond_wait(&p->done, &p->m);
    pthread_mutex_unlock(&p->m);
    pthread_mutex_unlock(&p->run);
}
