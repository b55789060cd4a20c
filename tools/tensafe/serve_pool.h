/* The worker pool of `tensafe serve` (serve_loop.c): the server sessions'
 * work() steps (the only HE work) run here, off the I/O thread. A job is
 * a server session handed over whole: while it is in the pool only the
 * worker that took it touches it, so a session is never worked on by two
 * threads at once. Finished jobs come back to the I/O thread through the
 * done callback (called on a worker thread: it must only queue and wake).
 *
 * Batching: a worker takes up to `batch` pending jobs at once and runs
 * them with serve_pool_run_batch, the one place that turns sessions'
 * pending steps into library calls (today one work() per session; a
 * batched library call over many sessions replaces its body). */
#ifndef TENSAFE_TOOL_SERVE_POOL_H
#define TENSAFE_TOOL_SERVE_POOL_H

#include <stddef.h>

#include "tensafe/lora_session.h"

typedef struct serve_job {
    tsafe_session_server *s; /* the session, the worker's while queued */
    double work_ms;          /* wall time of its step, set by the worker */
    struct serve_job *next;  /* the pool's queue */
    void *owner;             /* the I/O thread's connection */
} serve_job;

typedef struct serve_pool serve_pool;

/* n_workers threads (>= 1) taking up to batch (>= 1) jobs per call;
 * done(user, job) for each finished job. NULL when threads could not
 * start. */
serve_pool *serve_pool_create(unsigned n_workers, unsigned batch,
                              void (*done)(void *user, serve_job *job), void *user);
/* Queues a job (I/O thread). */
void serve_pool_submit(serve_pool *p, serve_job *job);
/* Jobs queued or running (any thread). */
size_t serve_pool_busy(serve_pool *p);
/* Finishes the queued and running jobs, joins the workers, frees. */
void serve_pool_free(serve_pool *p);

/* Runs the pending step of each of the n sessions (a worker's batch). */
void serve_pool_run_batch(serve_job *const *jobs, size_t n);

#endif
