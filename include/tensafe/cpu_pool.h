/* A pool of worker threads for CPU work that splits into independent
 * tasks: the CPU backend's batched products and NTTs when a backend is
 * created with one (tsafe_backend_cpu_factory_pool), and a server host's
 * batch of sessions (tsafe_session_server_work_batch).
 *
 * The threads are created once, at create, and wait on a condition
 * variable between batches (no spinning); free joins them.
 *
 * Thread safety: a pool is shared by any number of threads. One batch
 * runs on it at a time: a run() from another thread while one runs, and
 * a run() from inside a task (of any pool), run their tasks in line on
 * the calling thread. A run() never waits for the pool, so a caller may
 * hold locks, nesting never deadlocks, and the workers never take more
 * than the pool's threads.
 * Ownership: the pool must outlive every backend and call that uses it. */
#ifndef TENSAFE_CPU_POOL_H
#define TENSAFE_CPU_POOL_H

#include <stddef.h>

#include "tensafe/export.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_CPU_POOL_MAX_THREADS 256u

typedef struct tsafe_cpu_pool tsafe_cpu_pool;

/* A pool running batches on `threads` threads, the caller of run()
 * included (threads - 1 workers are started). 0: one per online core.
 * TSAFE_E_RANGE above TSAFE_CPU_POOL_MAX_THREADS. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_cpu_pool_create(unsigned threads,
                                                              tsafe_cpu_pool **out);
/* Stops and joins the workers; NULL is a no-op. No run() may be active. */
TSAFE_API void tsafe_cpu_pool_free(tsafe_cpu_pool *pool);
/* The thread count (the caller included); 1 for NULL. */
TSAFE_API unsigned tsafe_cpu_pool_threads(const tsafe_cpu_pool *pool);
/* The threads a run() from this thread would use now: the pool's count,
 * or 1 inside a task (nested runs go in line) and for NULL. Lets a caller
 * skip setting up per-thread state that a nested call would not use. */
TSAFE_API unsigned tsafe_cpu_pool_available(const tsafe_cpu_pool *pool);
/* Calls fn(arg, i) once for every i in [0, n), spread over the pool's
 * threads, and returns when all are done. The calls may run in any order
 * and at the same time: they must not depend on each other. pool NULL,
 * one thread, a call from inside a task or while another thread's batch
 * runs: in order here. */
TSAFE_API void tsafe_cpu_pool_run(tsafe_cpu_pool *pool, size_t n,
                                  void (*fn)(void *arg, size_t i), void *arg);

#ifdef __cplusplus
}
#endif
#endif
