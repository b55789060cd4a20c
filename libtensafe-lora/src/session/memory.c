/* The in-memory transport (lora_session.h, tsafe_session_pump): both ends
 * in one thread, each frame moved from one session's output queue into the
 * other's input without a copy when it can go whole, byte copies
 * otherwise. The sealed pair runs its tokens through it, so the round
 * order of every in-process path is the sessions'. */
#include <string.h>

#include "client_internal.h"
#include "server_internal.h"
#include "tsafe_check.h"

int tsafe_sess_session_move_frame(session_outbox *o, session_inbox *in)
{
    if (!o->count || in->ready || in->hdr_got)
        return 0;
    outbox_frame *f = &o->slot[o->first];
    if (f->off || f->head_len != TSAFE_FRAME_HEADER || !f->free_body)
        return 0;
    in->spare = in->body;
    in->body = f->body;
    in->ext_free = f->free_body;
    in->kind = f->head[5];
    in->len = in->got = (uint32_t)f->body_len;
    in->ready = 1;
    f->free_body = NULL; /* the inbox owns it now */
    size_t n = f->head_len + f->body_len;
    tsafe_sess_session_outbox_sent(o, n);
    return 1;
}

/* Client -> server: one frame moved, or a copy of what the server takes. */
static int client_to_server(tsafe_session_server *s, tsafe_session_client *c)
{
    if (tsafe_sess_session_outbox_empty(&c->out) || !tsafe_sess_session_server_accepting(s))
        return 0;
    size_t before = c->stats.bytes_out;
    if (tsafe_sess_session_move_frame(&c->out, &s->in)) {
        s->stats.bytes_in += c->stats.bytes_out - before;
        tsafe_sess_session_server_took_frame(s);
        if (!s->work)
            tsafe_sess_session_inbox_release(&s->in);
        return 1;
    }
    const uint8_t *d;
    size_t n, used = 0;
    tsafe_sess_session_outbox_peek(&c->out, &d, &n);
    tsafe_status st = tsafe_session_server_feed(s, d, n, &used);
    (void)st; /* the session keeps it */
    tsafe_sess_session_outbox_sent(&c->out, used);
    return used > 0;
}

static int server_to_client(tsafe_session_server *s, tsafe_session_client *c)
{
    unsigned cw = tsafe_session_client_wants(c);
    if (tsafe_sess_session_outbox_empty(&s->out) || (cw & (TSAFE_SESSION_DONE | TSAFE_SESSION_FAILED)))
        return 0;
    size_t before = s->stats.bytes_out;
    if (tsafe_sess_session_move_frame(&s->out, &c->in)) {
        c->stats.bytes_in += s->stats.bytes_out - before;
        tsafe_sess_session_client_took_frame(c);
        return 1;
    }
    const uint8_t *d;
    size_t n, used = 0;
    tsafe_sess_session_outbox_peek(&s->out, &d, &n);
    tsafe_status st = tsafe_session_client_feed(c, d, n, &used);
    (void)st;
    tsafe_sess_session_outbox_sent(&s->out, used);
    return used > 0;
}

tsafe_status tsafe_session_pump(tsafe_session_server *s, tsafe_session_client *c)
{
    TSAFE_REQUIRE(s && c, TSAFE_E_NULL);
    for (int moved = 1; moved;) {
        moved = client_to_server(s, c);
        moved |= server_to_client(s, c);
        /* a round runs at once; the optional round-2 preparation only when
         * nothing else moves: in one thread it would overlap nothing, and
         * the share that arrives first cancels it (the round does it) */
        if (s->work != WORK_NONE && (s->work != WORK_PREPARE || !moved)) {
            tsafe_status st = tsafe_session_server_work(s);
            (void)st;
            moved = 1;
        }
    }
    if (tsafe_session_client_wants(c) & TSAFE_SESSION_FAILED)
        return tsafe_session_client_status(c);
    if (tsafe_session_server_wants(s) & TSAFE_SESSION_FAILED)
        return tsafe_session_server_status(s);
    return TSAFE_OK;
}

/* ----------------------------------------------- the sealed pair's use */

void tsafe_sess_session_service_for_plan(tsafe_session_service *svc, const tsafe_sealed_plan *plan)
{
    memset(svc, 0, sizeof *svc);
    svc->opts.protocol = (tsafe_session_protocol)plan->mode;
    svc->hello.version = 2;
    svc->hello.protocol = plan->mode;
    svc->hello.n_widths = 1;
    svc->hello.width_d_in[0] = plan->d_in;
    svc->plan[0] = *plan;
}

tsafe_status tsafe_sess_session_client_open_plan(const tsafe_sealed_plan *plan, tsafe_dp_session *dp,
                                      int allow_no_dp, tsafe_session_client **out)
{
    tsafe_session_client_opts co = {.protocol = (tsafe_session_protocol)plan->mode,
                                    .dp = dp,
                                    .allow_no_dp = allow_no_dp};
    co.sealed.semi_honest = plan->semi_honest;
    co.sealed.unchecked_shares = plan->checks == 0;
    tsafe_status st = tsafe_session_client_create(&co, NULL, out);
    if (st != TSAFE_OK)
        return st;
    tsafe_session_client *c = *out;
    c->h.version = 2;
    c->h.protocol = plan->mode;
    c->h.n_widths = 1;
    c->h.width_d_in[0] = plan->d_in;
    c->plan[0] = *plan;
    if ((st = tsafe_sealed_client_create(plan, NULL, &c->cl[0])) != TSAFE_OK) {
        tsafe_session_client_free(c);
        *out = NULL;
        return st;
    }
    c->phase = PHASE_READY;
    return TSAFE_OK;
}

tsafe_status tsafe_sess_session_client_submit_shapes(tsafe_session_client *c, size_t n,
                                          const uint32_t *ranks, const uint32_t *d_outs,
                                          const float *x, float *const *delta)
{
    if (c->end.failed)
        return c->end.st;
    TSAFE_REQUIRE(c->phase == PHASE_READY, TSAFE_E_STATE);
    TSAFE_REQUIRE(n >= 1 && n <= TSAFE_SESSION_MAX_MODULES, TSAFE_E_RANGE);
    for (size_t k = 0; k < n; k++) {
        c->ranks[k] = ranks[k];
        c->d_outs[k] = d_outs[k];
        c->delta[k] = delta[k];
    }
    c->n = n;
    c->w = 0;
    return tsafe_sess_client_token_start(c, x);
}

void tsafe_sess_session_client_stats_sink(tsafe_session_client *c, tsafe_lora_stats *sink)
{
    c->he_sink = sink;
}
