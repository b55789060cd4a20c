/* The server session (lora_session.h): frames in, frames out, and the
 * order every protocol shares: HELLO first, then tokens until BYE, an
 * ERROR from the peer, a failure or the token limit. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "server_internal.h"
#include "tsafe_check.h"

static int sealed(const tsafe_session_server *s)
{
    return s->svc->opts.protocol != TSAFE_SESSION_PLAIN_ZERO_MOAI;
}

tsafe_status tsafe_sess_server_alloc(const tsafe_session_limits *lim, tsafe_session_server **out)
{
    tsafe_session_server *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    if (lim)
        s->lim = *lim;
    s->max_frame = tsafe_sess_session_max_frame(lim);
    s->out.bytes_out = &s->stats.bytes_out;
    *out = s;
    return TSAFE_OK;
}

tsafe_status tsafe_sess_server_open(tsafe_session_server *s, const tsafe_session_service *svc)
{
    s->svc = svc;
    tsafe_status st = sealed(s) ? tsafe_sess_server_sealed_open(s) : tsafe_sess_server_plain_open(s);
    if (st == TSAFE_OK && svc->hello_len) /* the service's bytes outlive the session */
        st = tsafe_sess_session_outbox_push(&s->out, TSAFE_FRAME_HELLO, NULL, 0, svc->hello_bytes,
                                 svc->hello_len, NULL);
    return st;
}

tsafe_status tsafe_session_server_create(const tsafe_session_service *svc,
                                         const tsafe_session_limits *lim,
                                         tsafe_session_server **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(svc, TSAFE_E_NULL);
    tsafe_session_server *s = NULL;
    tsafe_status st = tsafe_sess_server_alloc(lim, &s);
    if (st == TSAFE_OK) {
        s->select_ok = 1;
        st = tsafe_sess_server_open(s, svc);
    }
    if (st != TSAFE_OK) {
        tsafe_session_server_free(s);
        return st;
    }
    *out = s;
    return TSAFE_OK;
}

void tsafe_session_server_free(tsafe_session_server *s)
{
    if (!s)
        return;
    if (s->svc && sealed(s))
        tsafe_sess_server_sealed_close(s);
    else if (s->svc)
        tsafe_sess_server_plain_close(s);
    tsafe_sess_session_inbox_free(&s->in);
    tsafe_sess_session_outbox_free(&s->out);
    free(s);
}

void tsafe_sess_server_unexpected(tsafe_session_server *s, const char *want)
{
    tsafe_sess_session_fail(&s->end, &s->out, TSAFE_E_FORMAT, NULL, "expected %s, got %s", want,
                 tsafe_frame_kind_name(s->in.kind));
    tsafe_sess_session_outbox_error(&s->out, TSAFE_E_FORMAT, s->end.what);
}

int tsafe_sess_server_token_allowed(tsafe_session_server *s)
{
    if (!s->lim.max_tokens || s->stats.tokens < s->lim.max_tokens)
        return 1;
    /* by design, not a failure of this server */
    tsafe_sess_session_outbox_error(&s->out, TSAFE_E_STATE, "request limit of this server reached");
    s->stats.limit_reached = 1;
    s->end.done = 1;
    return 0;
}

/* A complete frame: BYE and ERROR end the session in every state. */
static void server_frame(tsafe_session_server *s)
{
    if (s->in.kind == TSAFE_FRAME_BYE && !s->await_second) {
        s->end.done = 1;
    } else if (s->in.kind == TSAFE_FRAME_ERROR) {
        char msg[SESSION_WHAT];
        tsafe_status st = tsafe_frame_error_get(s->in.body, s->in.len, msg, sizeof msg);
        tsafe_sess_session_fail(&s->end, &s->out, st, NULL, "client gave up: %s", msg);
    } else if (s->in.kind == TSAFE_FRAME_SELECT) {
        tsafe_sess_server_select(s);
    } else if (!s->svc) {
        tsafe_sess_server_unexpected(s, "SELECT (this server serves several adapters)");
    } else if (sealed(s)) {
        tsafe_sess_server_sealed_frame(s);
    } else {
        tsafe_sess_server_plain_frame(s);
    }
    if (s->in.kind != TSAFE_FRAME_SELECT)
        s->select_ok = 0; /* a SELECT comes first or not at all */
    if (!s->work) /* handled now; a round keeps it until work() */
        tsafe_sess_session_inbox_release(&s->in);
}

int tsafe_sess_session_server_accepting(const tsafe_session_server *s)
{
    /* backpressure: no new frame while a step waits or answers wait to be
     * sent (sealed: up to two, room kept for an ERROR; plain: none, its
     * answers are the session's buffers, rewritten by the next token); the
     * rest of a frame already begun is always taken */
    size_t max_out = s->svc && sealed(s) ? OUTBOX_SLOTS - 1 : 1;
    return !s->end.failed && !s->end.done &&
           (s->work == WORK_NONE || s->work == WORK_PREPARE) &&
           (s->in.hdr_got || s->out.count < max_out);
}

void tsafe_sess_session_server_took_frame(tsafe_session_server *s)
{
    if (s->work == WORK_PREPARE) /* round 2 does what is missing itself */
        s->work = WORK_NONE;
    server_frame(s);
}

void tsafe_sess_session_server_stats_sink(tsafe_session_server *s, tsafe_lora_stats *sink)
{
    s->he_sink = sink;
}

tsafe_status tsafe_session_server_feed(tsafe_session_server *s, const uint8_t *data,
                                       size_t len, size_t *used)
{
    TSAFE_REQUIRE(s && used && (data || !len), TSAFE_E_NULL);
    *used = 0;
    size_t u = 0;
    while (u < len && tsafe_sess_session_server_accepting(s)) {
        size_t k = 0;
        tsafe_status st = tsafe_sess_session_inbox_feed(&s->in, s->max_frame, data + u, len - u, &k,
                                             s->end.what, sizeof s->end.what);
        u += k;
        s->stats.bytes_in += k;
        if (st != TSAFE_OK) {
            char why[SESSION_WHAT];
            memcpy(why, s->end.what, sizeof why);
            tsafe_sess_session_fail(&s->end, &s->out, st, why, "%s", why);
            break;
        }
        if (s->in.ready)
            tsafe_sess_session_server_took_frame(s);
    }
    *used = u;
    return s->end.failed ? s->end.st : TSAFE_OK;
}

void tsafe_session_server_output(tsafe_session_server *s, const uint8_t **data, size_t *len)
{
    if (!s || !data || !len) {
        if (data)
            *data = NULL;
        if (len)
            *len = 0;
        return;
    }
    tsafe_sess_session_outbox_peek(&s->out, data, len);
}

void tsafe_session_server_sent(tsafe_session_server *s, size_t n)
{
    if (s)
        tsafe_sess_session_outbox_sent(&s->out, n);
}

unsigned tsafe_session_server_wants(const tsafe_session_server *s)
{
    if (!s)
        return TSAFE_SESSION_FAILED;
    int w = s->work == WORK_NONE ? 0 : s->work == WORK_PREPARE ? 2 : 1;
    return tsafe_sess_session_wants(&s->end, &s->out, w, 0);
}

tsafe_status tsafe_session_server_work(tsafe_session_server *s)
{
    TSAFE_REQUIRE(s, TSAFE_E_NULL);
    if (s->end.failed)
        return s->end.st;
    if (s->work == WORK_NONE)
        return TSAFE_OK;
    double t0 = tsafe_now_us();
    int ahead = s->work == WORK_PREPARE;
    tsafe_status st = sealed(s) ? tsafe_sess_server_sealed_work(s) : tsafe_sess_server_plain_work(s);
    double dt = tsafe_now_us() - t0;
    if (ahead)
        s->stats.ahead_us += dt;
    else
        s->stats.work_us += dt;
    return st;
}

void tsafe_session_server_abort(tsafe_session_server *s, tsafe_status st, const char *what)
{
    if (!s)
        return;
    const char *w = what ? what : tsafe_strerror(st);
    tsafe_sess_session_fail(&s->end, &s->out, st, st == TSAFE_E_IO ? NULL : w, "%s", w);
}

tsafe_status tsafe_session_server_status(const tsafe_session_server *s)
{
    return !s ? TSAFE_E_NULL : s->end.failed ? s->end.st : TSAFE_OK;
}

const char *tsafe_session_server_what(const tsafe_session_server *s)
{
    return s && s->end.failed ? s->end.what : "";
}

void tsafe_session_server_stats(const tsafe_session_server *s, tsafe_session_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (s)
        *out = s->stats;
}
