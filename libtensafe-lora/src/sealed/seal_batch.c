/* A round's sealings (server_internal.h, seal_batch.c): queued in message
 * order, each with its seed, positions, masks and reserved bytes, then
 * run together. On a backend that seals in batches (a GPU) they are one
 * tsafe_bfv_seal_batch call. Else on one thread they run in order on the
 * server's own sealer; with a pool (tsafe_sealed_server_use_pool) each extra thread
 * seals on a slot of its own (a backend from the server's factory, a
 * sealer, the key, an accumulator it copies the job's words into), so no
 * backend is ever used by two threads. A sealing's result depends only on
 * its accumulator, key, positions, masks and seed, so the bytes are the
 * same whichever thread made them. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "server_internal.h"
#include "tsafe_check.h"

static void slot_free(tsafe_sealed_slot *sl)
{
    tsafe_buffer_free(sl->pk);
    tsafe_buffer_free(sl->acc);
    tsafe_bfv_sealer_free(sl->sealer);
    tsafe_bfv_sealed_free(sl->res);
    tsafe_backend_free(sl->be);
    memset(sl, 0, sizeof *sl);
}

static void wipe_masks(tsafe_sealed_sealq *q)
{
    if (q->mask)
        sodium_memzero(q->mask, q->wcap * sizeof *q->mask);
}

void tsafe_sealed_sealq_discard(tsafe_sealed_sealq *q)
{
    wipe_masks(q);
    q->n = q->words = 0;
}

void tsafe_sealed_sealq_drop_keys(tsafe_sealed_sealq *q)
{
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < TSAFE_SEALED_MAX_SLOTS; i++) {
            tsafe_buffer_free(q->slot[r][i].pk);
            q->slot[r][i].pk = NULL;
        }
}

void tsafe_sealed_sealq_free(tsafe_sealed_sealq *q)
{
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < TSAFE_SEALED_MAX_SLOTS; i++)
            slot_free(&q->slot[r][i]);
        for (size_t i = 0; i < q->n_bres[r]; i++)
            tsafe_bfv_sealed_free(q->bres[r][i]);
        free(q->bres[r]);
    }
    wipe_masks(q);
    free(q->job);
    free(q->pos);
    free(q->mask);
    memset(q, 0, sizeof *q);
}

/* Room for one more job of up to n reads. */
static tsafe_status queue_room(tsafe_sealed_sealq *q, size_t n)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        tsafe_sealed_seal_job *j = realloc(q->job, cap * sizeof *j);
        TSAFE_REQUIRE(j, TSAFE_E_NOMEM);
        q->job = j;
        q->cap = cap;
    }
    if (q->words + n > q->wcap) { /* masks move: the old copy is wiped */
        size_t cap = 2 * (q->words + n);
        uint32_t *p = malloc(cap * sizeof *p);
        uint64_t *m = malloc(cap * sizeof *m);
        if (!p || !m) {
            free(p);
            free(m);
            return TSAFE_E_NOMEM;
        }
        if (q->words) {
            memcpy(p, q->pos, q->words * sizeof *p);
            memcpy(m, q->mask, q->words * sizeof *m);
        }
        wipe_masks(q);
        free(q->pos);
        free(q->mask);
        q->pos = p;
        q->mask = m;
        q->wcap = cap;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_server_seal(tsafe_sealed_server *s, const tsafe_bfv_context *ctx,
                                      tsafe_bfv_sealer *sealer, tsafe_buffer *acc,
                                      const tsafe_buffer *pk, tsafe_bfv_sealed *res,
                                      const tsafe_sealed_layout *l, uint32_t b,
                                      uint32_t flood, tsafe_wbuf *w)
{
    tsafe_sealed_sealq *q = &s->sealq;
    tsafe_status st = queue_room(q, tsafe_bfv_context_n(ctx));
    if (st != TSAFE_OK)
        return st;
    q->ring = ctx == s->c1 ? 1 : 2;
    q->ctx = ctx;
    q->sealer = sealer;
    q->pk = pk;
    q->res = res;
    q->flood = flood;
    tsafe_sealed_seal_job *j = &q->job[q->n];
    j->acc = acc;
    j->host = tsafe_buffer_host_words(acc);
    j->first = q->words;
    j->reads = tsafe_sealed_block_reads(l, b, q->pos + q->words);
    memcpy(q->mask + q->words, s->mask, j->reads * sizeof *q->mask);
    j->seeded = tsafe_sealed_next_seed(&s->draws, j->seed) != NULL;
    uint8_t *p = tsafe_wbuf_reserve(w, tsafe_bfv_sealed_bytes(ctx, j->reads));
    if (!p)
        return TSAFE_E_NOMEM;
    j->off = (size_t)(p - w->buf);
    q->words += j->reads;
    q->n++;
    return TSAFE_OK;
}

uint64_t *tsafe_sealed_sealq_masks(tsafe_sealed_sealq *q, size_t j)
{
    return q->mask + q->job[j].first;
}

/* Slot i of the queue's ring, made (or given the current keys) on first
 * use. */
static tsafe_status slot_ready(tsafe_sealed_server *s, tsafe_sealed_slot *sl)
{
    tsafe_sealed_sealq *q = &s->sealq;
    const tsafe_bfv_context *c = q->ctx;
    tsafe_status st = TSAFE_OK;
    if (!sl->be) {
        if ((st = tsafe_backend_create(s->factory, NULL, c, &sl->be)) != TSAFE_OK ||
            (st = tsafe_bfv_sealer_create(c, sl->be, &sl->sealer)) != TSAFE_OK ||
            (st = tsafe_buffer_alloc(sl->be, 2, tsafe_bfv_context_limbs(c), &sl->acc)) != TSAFE_OK ||
            (st = tsafe_bfv_sealed_create(c, tsafe_bfv_context_n(c), &sl->res)) != TSAFE_OK) {
            slot_free(sl);
            return st;
        }
        if (!tsafe_buffer_host_words(sl->acc)) {
            slot_free(sl);
            return TSAFE_E_UNSUPPORTED;
        }
    }
    if (!sl->pk || sl->key_gen != s->key_gen) {
        tsafe_buffer_free(sl->pk);
        sl->pk = NULL;
        st = tsafe_bfv_public_key_operand(q->ring == 1 ? s->pk1 : s->pk2, sl->be, &sl->pk);
        sl->key_gen = s->key_gen;
    }
    return st;
}

typedef struct {
    tsafe_sealed_server *s;
    uint8_t *out;
    size_t threads;
    tsafe_status *st; /* per job */
} flush_run;

/* Job j on thread t (0: the server's own sealer, else slot t - 1). */
static tsafe_status seal_job(tsafe_sealed_server *s, size_t t, const tsafe_sealed_seal_job *j,
                             uint8_t *out)
{
    tsafe_sealed_sealq *q = &s->sealq;
    tsafe_bfv_sealer *sealer = q->sealer;
    const tsafe_buffer *pk = q->pk;
    tsafe_bfv_sealed *res = q->res;
    tsafe_buffer *acc = j->acc;
    if (t > 0) {
        tsafe_sealed_slot *sl = &q->slot[q->ring - 1][t - 1];
        size_t words = 2 * (size_t)tsafe_bfv_context_limbs(q->ctx) * tsafe_bfv_context_n(q->ctx);
        memcpy(tsafe_buffer_host_words(sl->acc), j->host, words * sizeof *j->host);
        sealer = sl->sealer;
        pk = sl->pk;
        res = sl->res;
        acc = sl->acc;
    }
    tsafe_status st = tsafe_bfv_seal_buffer(sealer, acc, pk, q->pos + j->first,
                                            q->mask + j->first, j->reads, q->flood,
                                            j->seeded ? j->seed : NULL, res);
    size_t need = tsafe_bfv_sealed_bytes(q->ctx, j->reads);
    return st == TSAFE_OK ? tsafe_bfv_sealed_write(q->ctx, res, out + j->off, need) : st;
}

/* Thread t takes jobs t, t + T, ...: sealings of a round cost the same,
 * and a fixed share is what the tests can check. */
static void flush_task(void *arg, size_t t)
{
    flush_run *f = arg;
    for (size_t j = t; j < f->s->sealq.n; j += f->threads)
        f->st[j] = seal_job(f->s, t, &f->s->sealq.job[j], f->out);
}

/* The threads the queue's sealings may use: 1 unless a pool has more for
 * this thread, the sealer has no prepared encryptions of zero (they are
 * taken in order) and the accumulators are host memory (copied to the
 * slots); the slots they need made. */
static size_t flush_threads(tsafe_sealed_server *s)
{
    tsafe_sealed_sealq *q = &s->sealq;
    size_t t = tsafe_cpu_pool_available(s->pool);
    if (t > q->n)
        t = q->n;
    if (t > TSAFE_SEALED_MAX_SLOTS + 1)
        t = TSAFE_SEALED_MAX_SLOTS + 1;
    if (t < 2 || tsafe_bfv_sealer_ready(q->sealer) > 0)
        return 1;
    for (size_t i = 0; i < q->n; i++)
        if (!q->job[i].host)
            return 1;
    for (size_t i = 1; i < t; i++)
        if (slot_ready(s, &q->slot[q->ring - 1][i - 1]) != TSAFE_OK)
            return i; /* as many as could be made */
    return t;
}

/* A result object per queued job of the queue's ring. */
static tsafe_status batch_results(tsafe_sealed_sealq *q)
{
    int r = q->ring - 1;
    if (q->n_bres[r] >= q->n)
        return TSAFE_OK;
    tsafe_bfv_sealed **b = realloc(q->bres[r], q->n * sizeof *b);
    TSAFE_REQUIRE(b, TSAFE_E_NOMEM);
    q->bres[r] = b;
    for (; q->n_bres[r] < q->n; q->n_bres[r]++) {
        tsafe_status st = tsafe_bfv_sealed_create(q->ctx, tsafe_bfv_context_n(q->ctx),
                                                  &b[q->n_bres[r]]);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

/* Every queued job in one tsafe_bfv_seal_batch call (a batching backend:
 * one upload, one pass of kernels, one download for the round), then
 * each result written into its reserved bytes. */
static tsafe_status flush_batched(tsafe_sealed_server *s, uint8_t *out)
{
    tsafe_sealed_sealq *q = &s->sealq;
    tsafe_status st = batch_results(q);
    if (st != TSAFE_OK)
        return st;
    tsafe_bfv_seal_item *it = malloc(q->n * sizeof *it);
    TSAFE_REQUIRE(it, TSAFE_E_NOMEM);
    tsafe_bfv_sealed **res = q->bres[q->ring - 1];
    for (size_t j = 0; j < q->n; j++) {
        const tsafe_sealed_seal_job *jb = &q->job[j];
        it[j] = (tsafe_bfv_seal_item){jb->acc, q->pos + jb->first, q->mask + jb->first,
                                      jb->reads, jb->seeded ? jb->seed : NULL, res[j]};
    }
    st = tsafe_bfv_seal_batch(q->sealer, q->pk, it, q->n, q->flood);
    free(it);
    for (size_t j = 0; j < q->n && st == TSAFE_OK; j++) {
        const tsafe_sealed_seal_job *jb = &q->job[j];
        st = tsafe_bfv_sealed_write(q->ctx, res[j], out + jb->off,
                                    tsafe_bfv_sealed_bytes(q->ctx, jb->reads));
    }
    return st;
}

tsafe_status tsafe_sealed_server_seal_flush(tsafe_sealed_server *s, tsafe_wbuf *w)
{
    tsafe_sealed_sealq *q = &s->sealq;
    tsafe_status st = w->failed ? TSAFE_E_NOMEM : TSAFE_OK;
    size_t n = q->n;
    tsafe_status *js = n && st == TSAFE_OK ? calloc(n, sizeof *js) : NULL;
    if (n && st == TSAFE_OK && !js)
        st = TSAFE_E_NOMEM;
    if (st == TSAFE_OK && n && tsafe_bfv_sealer_batches(q->sealer)) {
        st = flush_batched(s, w->buf);
    } else if (st == TSAFE_OK && n) {
        flush_run f = {s, w->buf, flush_threads(s), js};
        tsafe_cpu_pool_run(s->pool, f.threads, flush_task, &f);
        for (size_t i = 0; i < n && st == TSAFE_OK; i++)
            st = js[i];
    }
    free(js);
    wipe_masks(q);
    q->n = q->words = 0;
    return st;
}
