/* The server session's sealed rounds (both sealed protocols): SHELLO
 * (re)keys a width's sealed server, QUERY -> round 1 -> RESPONSE1, then
 * the round-2 preparation while the client works, SHARE -> round 2 ->
 * FINAL. Under hello v3 SHELLO and QUERY name their width (and the QUERY
 * its modules); RESPONSE1, SHARE and FINAL are for the last QUERY's. */
#include <string.h>

#include "server_internal.h"

tsafe_status tsafe_sess_server_sealed_open(tsafe_session_server *s)
{
    const tsafe_session_service *svc = s->svc;
    tsafe_status st = TSAFE_OK;
    for (uint32_t w = 0; w < svc->hello.n_widths && st == TSAFE_OK; w++) {
        st = tsafe_sealed_server_create(&svc->plan[w], &s->srv[w]);
        if (st == TSAFE_OK && svc->opts.backend)
            st = tsafe_sealed_server_use_backend(s->srv[w], svc->opts.backend);
        if (st == TSAFE_OK)
            st = tsafe_sealed_server_use_pool(s->srv[w], svc->opts.pool);
    }
    return st;
}

void tsafe_sess_server_sealed_close(tsafe_session_server *s)
{
    for (uint32_t w = 0; w < TSAFE_SESSION_MAX_WIDTHS; w++) {
        tsafe_sealed_server_free(s->srv[w]);
        s->srv[w] = NULL;
    }
}

/* The v3 prefix of SHELLO ("u32 width") or QUERY ("u32 width, u32 n, n
 * distinct module indices of that width"); without v3 width 0 and every
 * module. Returns 0, or -1 with the session failed. */
static int read_prefix(tsafe_session_server *s, int query)
{
    const session_hello *h = &s->svc->hello;
    s->msg_off = 0;
    if (s->token_sites) { /* the sealed pair: sites given per token */
        s->w = 0;
        for (size_t i = 0; i < s->n_token_sites; i++)
            s->sel[i] = s->token_sites[i];
        s->n_sel = query ? s->n_token_sites : s->n_sel;
        return 0;
    }
    if (h->version != 3) {
        s->w = 0;
        for (size_t i = 0; i < h->n; i++)
            s->sel[i] = s->svc->ssite[i];
        s->n_sel = h->n;
        return 0;
    }
    tsafe_rbuf r = {s->in.body, s->in.len, 0};
    uint32_t w = 0, n = 1;
    int ok = tsafe_rbuf_u32(&r, &w) && (!query || tsafe_rbuf_u32(&r, &n));
    if (!ok || w >= h->n_widths || n == 0 || n > h->n) {
        tsafe_sess_session_fail(&s->end, &s->out, TSAFE_E_FORMAT, NULL,
                     "%s: width or module count out of range", query ? "QUERY" : "SHELLO");
        tsafe_sess_session_outbox_error(&s->out, TSAFE_E_FORMAT, s->end.what);
        return -1;
    }
    uint8_t seen[TSAFE_SESSION_MAX_MODULES] = {0};
    for (uint32_t k = 0; query && k < n; k++) {
        uint32_t i = 0;
        if (!tsafe_rbuf_u32(&r, &i) || i >= h->n || h->mod_width[i] != w || seen[i]) {
            tsafe_sess_session_fail(&s->end, &s->out, TSAFE_E_FORMAT, NULL,
                         "QUERY: module %u is not a distinct module of width %u", i, w);
            tsafe_sess_session_outbox_error(&s->out, TSAFE_E_FORMAT, s->end.what);
            return -1;
        }
        seen[i] = 1;
        s->sel[k] = s->svc->ssite[i];
    }
    s->w = w;
    if (query)
        s->n_sel = n;
    s->msg_off = r.pos;
    return 0;
}

static void sealed_hello(tsafe_session_server *s)
{
    if (read_prefix(s, 0) != 0)
        return;
    tsafe_status st = tsafe_sealed_server_accept(s->srv[s->w], s->in.body + s->msg_off,
                                                 s->in.len - s->msg_off);
    if (st != TSAFE_OK) {
        tsafe_sess_session_fail(&s->end, &s->out, st, NULL,
                     "client hello refused (its plan is not this server's %s plan, or the "
                     "message is malformed)",
                     tsafe_session_protocol_name(s->svc->opts.protocol));
        tsafe_sess_session_outbox_error(&s->out, st, s->end.what);
        return;
    }
    s->stats.hellos++;
}

void tsafe_sess_server_sealed_frame(tsafe_session_server *s)
{
    int k = s->in.kind;
    if (s->await_second) {
        if (k == TSAFE_FRAME_SHARE)
            s->work = WORK_ROUND2;
        else
            tsafe_sess_server_unexpected(s, "SHARE");
    } else if (k == TSAFE_FRAME_SHELLO) {
        sealed_hello(s);
    } else if (k == TSAFE_FRAME_QUERY) {
        if (read_prefix(s, 1) == 0 && tsafe_sess_server_token_allowed(s))
            s->work = WORK_ROUND1;
    } else {
        tsafe_sess_server_unexpected(s, "SHELLO, QUERY or BYE");
    }
}

/* One round on the held frame, its answer queued. */
static tsafe_status sealed_round(tsafe_session_server *s, int round)
{
    tsafe_sealed_server *srv = s->srv[s->w];
    const uint8_t *msg = s->in.body + (round == 1 ? s->msg_off : 0);
    size_t len = s->in.len - (round == 1 ? s->msg_off : 0);
    uint8_t *out = NULL;
    size_t out_len = 0;
    tsafe_status st =
        round == 1
            ? tsafe_sealed_server_round1(srv, s->sel, s->n_sel, msg, len, &out, &out_len,
                                         SESSION_HE(s))
            : tsafe_sealed_server_round2(srv, s->sel, s->n_sel, msg, len, &out, &out_len,
                                         SESSION_HE(s));
    tsafe_sess_session_inbox_release(&s->in);
    if (st != TSAFE_OK) {
        tsafe_sess_session_fail(&s->end, &s->out, st, NULL, "token %llu: %s rejected",
                     (unsigned long long)s->stats.tokens + 1, round == 1 ? "query" : "share");
        tsafe_sess_session_outbox_error(&s->out, st, s->end.what);
        return st;
    }
    st = tsafe_sess_session_outbox_push(&s->out, round == 1 ? TSAFE_FRAME_RESPONSE1 : TSAFE_FRAME_FINAL,
                             NULL, 0, out, out_len, tsafe_lora_bytes_free);
    if (st != TSAFE_OK)
        tsafe_sess_session_fail(&s->end, &s->out, st, "server error", "queue the answer");
    return st;
}

tsafe_status tsafe_sess_server_sealed_work(tsafe_session_server *s)
{
    server_work w = s->work;
    s->work = WORK_NONE;
    if (w == WORK_PREPARE) {
        /* optional: a failure costs round 2 time, not the session */
        tsafe_status ps =
            tsafe_sealed_server_prepare_round2(s->srv[s->w], s->sel, s->n_sel, SESSION_HE(s));
        (void)ps;
        return TSAFE_OK;
    }
    tsafe_status st = sealed_round(s, w == WORK_ROUND1 ? 1 : 2);
    if (st != TSAFE_OK)
        return st;
    if (w == WORK_ROUND1) {
        s->await_second = 1;
        if (s->svc->opts.protocol == TSAFE_SESSION_SEALED_PRIVATE)
            s->work = WORK_PREPARE;
    } else {
        s->await_second = 0;
        s->stats.tokens++;
    }
    return TSAFE_OK;
}

tsafe_sealed_server *tsafe_sess_session_server_sealed(tsafe_session_server *s)
{
    return s->srv[0];
}

void tsafe_sess_session_server_token_sites(tsafe_session_server *s, const tsafe_sealed_site *const *sites,
                                size_t n)
{
    s->token_sites = sites;
    s->n_token_sites = n;
}
