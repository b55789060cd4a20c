/* The server session's plain ZeRo-MOAI steps: REQUEST -> products ->
 * RESPONSE, UPRIME -> apply -> DELTA. The response and delta buffers are
 * the session's, reused for every token (responses are megabytes). The
 * CKKS server is the service's: work runs under its lock. */
#include <stdlib.h>
#include <string.h>

#include "server_internal.h"

tsafe_status tsafe_sess_server_plain_open(tsafe_session_server *s)
{
    const session_hello *h = &s->svc->hello;
    size_t total = h->total_out;
    if (!(s->dflat = malloc(total * sizeof *s->dflat)) || !(s->dbytes = malloc(total * 4)) ||
        !(s->resp = malloc(s->svc->plain_resp ? s->svc->plain_resp : 1)))
        return TSAFE_E_NOMEM;
    float *o = s->dflat;
    for (size_t i = 0; i < h->n; i++) {
        s->deltas[i] = o;
        o += h->mod[i].d_out;
    }
    return TSAFE_OK;
}

void tsafe_sess_server_plain_close(tsafe_session_server *s)
{
    free(s->dflat);
    free(s->dbytes);
    free(s->resp);
    s->dflat = NULL;
    s->dbytes = s->resp = NULL;
}

void tsafe_sess_server_plain_frame(tsafe_session_server *s)
{
    int k = s->in.kind;
    if (s->await_second) {
        if (k == TSAFE_FRAME_UPRIME)
            s->work = WORK_APPLY;
        else
            tsafe_sess_server_unexpected(s, "UPRIME");
    } else if (k == TSAFE_FRAME_REQUEST) {
        if (tsafe_sess_server_token_allowed(s))
            s->work = WORK_PROCESS;
    } else {
        tsafe_sess_server_unexpected(s, "REQUEST or BYE");
    }
}

static tsafe_status plain_step(tsafe_session_server *s, server_work w, size_t *out_len)
{
    const tsafe_session_service *svc = s->svc;
    const tsafe_lora_site *const *sites = (const tsafe_lora_site *const *)svc->psite;
    pthread_mutex_t *lock = (pthread_mutex_t *)&svc->plain_lock; /* the one mutable part */
    pthread_mutex_lock(lock);
    tsafe_status st =
        w == WORK_PROCESS
            ? tsafe_lora_server_process_into(svc->plain, sites, svc->hello.n, s->in.body,
                                             s->in.len, s->resp, svc->plain_resp, out_len,
                                             SESSION_HE(s))
            : tsafe_lora_server_apply(svc->plain, sites, svc->hello.n, s->in.body, s->in.len,
                                      s->deltas, SESSION_HE(s));
    pthread_mutex_unlock(lock);
    return st;
}

tsafe_status tsafe_sess_server_plain_work(tsafe_session_server *s)
{
    server_work w = s->work;
    s->work = WORK_NONE;
    size_t out_len = 0;
    tsafe_status st = plain_step(s, w, &out_len);
    tsafe_sess_session_inbox_release(&s->in);
    if (st != TSAFE_OK) {
        tsafe_sess_session_fail(&s->end, &s->out, st, NULL, "request %llu: %s rejected",
                     (unsigned long long)s->stats.tokens + 1,
                     w == WORK_PROCESS ? "ciphertext" : "u' message");
        tsafe_sess_session_outbox_error(&s->out, st, s->end.what);
        return st;
    }
    if (w == WORK_PROCESS) {
        s->await_second = 1;
        st = tsafe_sess_session_outbox_push(&s->out, TSAFE_FRAME_RESPONSE, NULL, 0, s->resp, out_len, NULL);
    } else {
        uint32_t total = s->svc->hello.total_out;
        for (uint32_t i = 0; i < total; i++) {
            uint32_t v;
            memcpy(&v, &s->dflat[i], 4);
            tsafe_store_le32(s->dbytes + 4 * i, v);
        }
        s->await_second = 0;
        s->stats.tokens++;
        st = tsafe_sess_session_outbox_push(&s->out, TSAFE_FRAME_DELTA, NULL, 0, s->dbytes,
                                 (size_t)total * 4, NULL);
    }
    if (st != TSAFE_OK)
        tsafe_sess_session_fail(&s->end, &s->out, st, "server error", "queue the answer");
    return st;
}
