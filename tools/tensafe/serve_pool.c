/* The worker pool of `tensafe serve` (serve_pool.h): a mutex-guarded FIFO
 * of jobs and n threads that take batches from it. */
#include <pthread.h>
#include <stdlib.h>

#include "clock.h"
#include "net_socket.h"
#include "serve_pool.h"

#define POOL_MAX_BATCH 64

struct serve_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_job *head, *tail;
    size_t busy; /* queued + running */
    int stop;
    unsigned n, batch;
    pthread_t *th;
    void (*done)(void *, serve_job *);
    void *user;
};

void serve_pool_run_batch(serve_job *const *jobs, size_t n)
{
    /* one session at a time; the session keeps any failure (wants()
     * then says FAILED and the I/O thread sends its ERROR) */
    for (size_t i = 0; i < n; i++) {
        double t0 = tsafe_now_ms();
        tsafe_status st = tsafe_session_server_work(jobs[i]->s);
        (void)st;
        jobs[i]->work_ms = tsafe_now_ms() - t0;
    }
}

/* Up to p->batch jobs off the queue (lock held); 0 once stopped and empty. */
static size_t take(serve_pool *p, serve_job **out)
{
    while (!p->head && !p->stop)
        pthread_cond_wait(&p->cv, &p->mu);
    size_t n = 0;
    while (p->head && n < p->batch) {
        out[n++] = p->head;
        p->head = p->head->next;
    }
    if (!p->head)
        p->tail = NULL;
    return n;
}

static void *worker(void *arg)
{
    serve_pool *p = arg;
    serve_job *batch[POOL_MAX_BATCH];
    pthread_mutex_lock(&p->mu);
    for (;;) {
        size_t n = take(p, batch);
        if (!n)
            break;
        pthread_mutex_unlock(&p->mu);
        serve_pool_run_batch(batch, n);
        pthread_mutex_lock(&p->mu);
        p->busy -= n;
        pthread_mutex_unlock(&p->mu);
        for (size_t i = 0; i < n; i++) /* after the count: the I/O thread may resubmit */
            p->done(p->user, batch[i]);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

serve_pool *serve_pool_create(unsigned n_workers, unsigned batch,
                              void (*done)(void *user, serve_job *job), void *user)
{
    serve_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->th = calloc(n_workers ? n_workers : 1, sizeof *p->th))) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->batch = batch < 1 ? 1 : batch > POOL_MAX_BATCH ? POOL_MAX_BATCH : batch;
    p->done = done;
    p->user = user;
    for (; p->n < (n_workers ? n_workers : 1); p->n++)
        if (pthread_create(&p->th[p->n], NULL, worker, p) != 0)
            break;
    if (p->n == 0) {
        serve_pool_free(p);
        return NULL;
    }
    return p;
}

void serve_pool_submit(serve_pool *p, serve_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->tail)
        p->tail->next = job;
    else
        p->head = job;
    p->tail = job;
    p->busy++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

size_t serve_pool_busy(serve_pool *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->busy;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void serve_pool_free(serve_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p);
}
