/* The worker pool (tensafe/cpu_pool.h). A batch is (fn, arg, n); tasks are
 * claimed by the workers and the caller alike from one atomic word that
 * holds the batch's number beside the next task index, so a worker that
 * wakes late (the cores busy elsewhere) claims nothing of a batch that
 * ended or of the next one with stale arguments. The caller waits for
 * the tasks to be done, never for idle workers to wake up: on a loaded
 * machine it does the whole batch itself rather than wait for a thread
 * the scheduler has not run. Workers sleep on a condition variable
 * between batches: an idle pool costs nothing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "tensafe/cpu_pool.h"
#include "tsafe_check.h"

#define IDX_BITS 40 /* task index bits of `claim`; the batch number above */
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)

struct tsafe_cpu_pool {
    unsigned threads;
    pthread_t *tid;      /* threads - 1 workers */
    unsigned started;
    pthread_mutex_t run; /* one batch at a time (try-locked) */
    pthread_mutex_t m;   /* guards gen, stop, fn, arg, n; done's signal */
    pthread_cond_t go, done_cv;
    uint64_t gen;        /* batch number: a change wakes the workers */
    int stop;
    void (*fn)(void *, size_t);
    void *arg;
    size_t n;
    _Atomic uint64_t claim; /* gen << IDX_BITS | next unclaimed task */
    atomic_size_t done;     /* tasks of this batch finished */
};

/* Set on the threads while they run tasks: a nested run() goes in line. */
static _Thread_local int t_in_task;

/* Claims and runs tasks of batch gen until none is left. */
static void drain(tsafe_cpu_pool *p, uint64_t gen, void (*fn)(void *, size_t), void *arg,
                  size_t n)
{
    uint64_t v = atomic_load(&p->claim);
    for (;;) {
        if (v >> IDX_BITS != (gen & (UINT64_MAX >> IDX_BITS)) || (v & IDX_MASK) >= n)
            return;
        if (!atomic_compare_exchange_weak(&p->claim, &v, v + 1))
            continue; /* v reloaded */
        fn(arg, (size_t)(v & IDX_MASK));
        if (atomic_fetch_add(&p->done, 1) + 1 == n) {
            pthread_mutex_lock(&p->m);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->m);
        }
        v = atomic_load(&p->claim);
    }
}

static void *worker(void *vp)
{
    tsafe_cpu_pool *p = vp;
    uint64_t seen = 0;
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
        drain(p, seen, fn, arg, n);
        pthread_mutex_lock(&p->m);
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
    pthread_cond_destroy(&p->done_cv);
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
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->claim, 0);
    atomic_init(&p->done, 0);
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
    if (!p || p->started == 0 || n == 1 || n > IDX_MASK || t_in_task ||
        pthread_mutex_trylock(&p->run) != 0) {
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    pthread_mutex_lock(&p->m);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    uint64_t gen = ++p->gen;
    atomic_store(&p->done, 0);
    atomic_store(&p->claim, (gen & (UINT64_MAX >> IDX_BITS)) << IDX_BITS);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->m);
    t_in_task = 1;
    drain(p, gen, fn, arg, n);
    t_in_task = 0;
    pthread_mutex_lock(&p->m); /* the tasks others claimed */
    while (atomic_load(&p->done) < n)
        pthread_cond_wait(&p->done_cv, &p->m);
    pthread_mutex_unlock(&p->m);
    pthread_mutex_unlock(&p->run);
}
