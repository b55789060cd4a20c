/* The client session (lora_session.h): the server's HELLO (checked before
 * anything is sent: the protocol asked for, the hello versions this
 * client speaks, every field, a plan derived here from the public shapes),
 * then tokens on the host's submit, then BYE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "client_internal.h"
#include "tsafe_check.h"

static int sealed_protocol(uint32_t p)
{
    return p == TSAFE_SESSION_SEALED || p == TSAFE_SESSION_SEALED_PRIVATE;
}

tsafe_status tsafe_session_client_create(const tsafe_session_client_opts *opts,
                                         const tsafe_session_limits *lim,
                                         tsafe_session_client **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(opts, TSAFE_E_NULL);
    TSAFE_REQUIRE(sealed_protocol(opts->protocol) ||
                      opts->protocol == TSAFE_SESSION_PLAIN_ZERO_MOAI, TSAFE_E_ARG);
    TSAFE_REQUIRE(!opts->per_query || sealed_protocol(opts->protocol), TSAFE_E_ARG);
    /* sealed mode releases u: DP noise, or the caller's explicit no-DP */
    TSAFE_REQUIRE(opts->protocol != TSAFE_SESSION_SEALED || opts->dp || opts->allow_no_dp,
                  TSAFE_E_ARG);
    TSAFE_REQUIRE(opts->protocol != TSAFE_SESSION_SEALED || opts->sealed.semi_honest,
                  TSAFE_E_INSECURE);
    tsafe_session_client *c = calloc(1, sizeof *c);
    if (!c)
        return TSAFE_E_NOMEM;
    c->opts = *opts;
    c->opts.adapter_id = NULL; /* borrowed until now */
    c->max_frame = tsafe_sess_session_max_frame(lim);
    c->out.bytes_out = &c->stats.bytes_out;
    tsafe_status st = opts->adapter_id ? tsafe_sess_client_select(c, opts->adapter_id) : TSAFE_OK;
    if (st != TSAFE_OK) {
        tsafe_session_client_free(c);
        return st;
    }
    *out = c;
    return TSAFE_OK;
}

void tsafe_session_client_free(tsafe_session_client *c)
{
    if (!c)
        return;
    tsafe_sess_client_keys_free(c);
    tsafe_sess_session_hello_free(&c->h);
    tsafe_sess_session_inbox_free(&c->in);
    tsafe_sess_session_outbox_free(&c->out);
    free(c);
}

void tsafe_sess_client_failed(tsafe_session_client *c, tsafe_status st, const char *step)
{
    char why[SESSION_WHAT - 64];
    snprintf(why, sizeof why, "%.400s", c->end.what);
    const char *peer = st == TSAFE_E_IO || c->in.kind == TSAFE_FRAME_ERROR ? NULL
                                                                           : "client gave up";
    tsafe_sess_session_fail(&c->end, &c->out, st, peer, "%s: %s", step, why[0] ? why : tsafe_strerror(st));
}

/* The mode asked for against the one served, read before anything else
 * in the hello: no silent downgrade. */
static tsafe_status check_served(tsafe_session_client *c, uint32_t version, uint32_t served)
{
    const char *asked = tsafe_session_protocol_name(c->opts.protocol);
    if (served && served != (uint32_t)c->opts.protocol) {
        int downgrade = sealed_protocol(c->opts.protocol) &&
                        served == TSAFE_SESSION_PLAIN_ZERO_MOAI;
        snprintf(c->end.what, sizeof c->end.what,
                 "the server serves --mode %s, this client asked for %s%s",
                 tsafe_session_protocol_name(served), asked,
                 downgrade ? " (plain-zero-moai lets the client read the adapter and gives the "
                             "server a decryption oracle on x: ask for it with --mode "
                             "plain-zero-moai)"
                           : "");
        return TSAFE_E_PARAMS_MISMATCH;
    }
    if (c->opts.per_query && version && version != 3) {
        snprintf(c->end.what, sizeof c->end.what,
                 "the server answers one query for all its modules (hello version %u): serve "
                 "the whole adapter with 'tensafe serve --module all'",
                 version);
        return TSAFE_E_VERSION;
    }
    if (!c->opts.per_query && version == 3) {
        snprintf(c->end.what, sizeof c->end.what,
                 "the server serves modules of several input widths (hello version 3): use "
                 "'tensafe generate --server'");
        return TSAFE_E_VERSION;
    }
    return TSAFE_OK;
}

static const char *refusal(tsafe_status st)
{
    return st == TSAFE_E_PARAMS_MISMATCH ? "client refuses the server's mode"
           : st == TSAFE_E_VERSION       ? "client speaks another hello version"
                                         : "client refuses the server's hello";
}

static void client_hello(tsafe_session_client *c)
{
    uint32_t served = 0;
    uint32_t v = tsafe_sess_session_hello_peek(c->in.body, c->in.len, &served);
    tsafe_status st = check_served(c, v, served);
    if (st == TSAFE_OK &&
        (st = tsafe_sess_session_hello_decode(c->in.body, c->in.len, &c->h, c->end.what,
                                   sizeof c->end.what)) == TSAFE_OK &&
        !served) /* a version this client does not know */
        st = TSAFE_E_VERSION;
    if (st == TSAFE_OK)
        st = tsafe_sess_client_keys(c);
    if (st != TSAFE_OK) {
        char why[SESSION_WHAT - 16];
        snprintf(why, sizeof why, "%.400s", c->end.what);
        tsafe_sess_session_fail(&c->end, &c->out, st, refusal(st), "server hello: %s", why);
        return;
    }
    c->phase = PHASE_READY;
}

void tsafe_sess_session_client_took_frame(tsafe_session_client *c)
{
    int k = c->in.kind;
    if (k == TSAFE_FRAME_ERROR) {
        char msg[TSAFE_FRAME_ERROR_TEXT + 1];
        tsafe_status st = tsafe_frame_error_get(c->in.body, c->in.len, msg, sizeof msg);
        snprintf(c->end.what, sizeof c->end.what, "server refused: %s", msg);
        tsafe_sess_client_failed(c, st, c->phase == PHASE_HELLO ? "server hello" : "receive");
    } else if (c->phase == PHASE_HELLO && k == TSAFE_FRAME_HELLO) {
        client_hello(c);
    } else if ((c->phase == PHASE_FIRST || c->phase == PHASE_SECOND)) {
        tsafe_status st = tsafe_sess_client_token_answer(c);
        (void)st; /* the session holds the failure */
    } else {
        snprintf(c->end.what, sizeof c->end.what, "unexpected %s",
                 tsafe_frame_kind_name(k));
        tsafe_sess_client_failed(c, TSAFE_E_FORMAT, "receive");
    }
    tsafe_sess_session_inbox_release(&c->in);
}

tsafe_status tsafe_session_client_feed(tsafe_session_client *c, const uint8_t *data,
                                       size_t len, size_t *used)
{
    TSAFE_REQUIRE(c && used && (data || !len), TSAFE_E_NULL);
    *used = 0;
    size_t u = 0;
    while (u < len && !c->end.failed && !c->end.done) {
        size_t k = 0;
        c->end.what[0] = 0;
        tsafe_status st = tsafe_sess_session_inbox_feed(&c->in, c->max_frame, data + u, len - u, &k,
                                             c->end.what, sizeof c->end.what);
        u += k;
        c->stats.bytes_in += k;
        if (st != TSAFE_OK) {
            tsafe_sess_client_failed(c, st, "receive");
            break;
        }
        if (c->in.ready)
            tsafe_sess_session_client_took_frame(c);
    }
    *used = u;
    return c->end.failed ? c->end.st : TSAFE_OK;
}

void tsafe_session_client_output(tsafe_session_client *c, const uint8_t **data, size_t *len)
{
    if (!c || !data || !len) {
        if (data)
            *data = NULL;
        if (len)
            *len = 0;
        return;
    }
    tsafe_sess_session_outbox_peek(&c->out, data, len);
}

void tsafe_session_client_sent(tsafe_session_client *c, size_t n)
{
    if (!c)
        return;
    tsafe_sess_session_outbox_sent(&c->out, n);
    if (c->phase == PHASE_BYE && tsafe_sess_session_outbox_empty(&c->out))
        c->end.done = 1;
}

unsigned tsafe_session_client_wants(const tsafe_session_client *c)
{
    if (!c)
        return TSAFE_SESSION_FAILED;
    return tsafe_sess_session_wants(&c->end, &c->out, 0, c->phase == PHASE_READY);
}

size_t tsafe_session_client_modules(const tsafe_session_client *c)
{
    return c && c->phase != PHASE_HELLO ? c->h.n : 0;
}

tsafe_status tsafe_session_client_module(const tsafe_session_client *c, size_t i,
                                         const char **name, uint32_t *d_in, uint32_t *rank,
                                         uint32_t *d_out)
{
    TSAFE_REQUIRE(c && name && d_in && rank && d_out, TSAFE_E_NULL);
    TSAFE_REQUIRE(c->phase != PHASE_HELLO, TSAFE_E_STATE);
    TSAFE_REQUIRE(i < c->h.n, TSAFE_E_RANGE);
    *name = c->h.mod[i].name;
    *d_in = c->h.mod[i].d_in;
    *rank = c->h.mod[i].rank;
    *d_out = c->h.mod[i].d_out;
    return TSAFE_OK;
}

tsafe_status tsafe_session_client_plan(const tsafe_session_client *c, size_t w,
                                       tsafe_sealed_plan *sealed, tsafe_lora_plan *plain)
{
    TSAFE_REQUIRE(c, TSAFE_E_NULL);
    TSAFE_REQUIRE(c->phase != PHASE_HELLO, TSAFE_E_STATE);
    TSAFE_REQUIRE(w < c->h.n_widths, TSAFE_E_RANGE);
    if (sealed_protocol(c->opts.protocol)) {
        TSAFE_REQUIRE(sealed, TSAFE_E_NULL);
        *sealed = c->plan[w];
    } else {
        TSAFE_REQUIRE(plain, TSAFE_E_NULL);
        *plain = c->h.plan;
    }
    return TSAFE_OK;
}

/* The token's modules: all (n 0) or n distinct ones of one width. */
static tsafe_status pick_modules(tsafe_session_client *c, const uint32_t *mods, size_t n)
{
    if (!mods) {
        TSAFE_REQUIRE(n == 0 && !c->opts.per_query, TSAFE_E_ARG);
        n = c->h.n;
    }
    TSAFE_REQUIRE(n >= 1 && n <= c->h.n, TSAFE_E_RANGE);
    uint8_t seen[TSAFE_SESSION_MAX_MODULES] = {0};
    for (size_t k = 0; k < n; k++) {
        uint32_t i = mods ? mods[k] : (uint32_t)k;
        TSAFE_REQUIRE(i < c->h.n && !seen[i], TSAFE_E_ARG);
        TSAFE_REQUIRE(c->h.mod_width[i] == c->h.mod_width[mods ? mods[0] : 0], TSAFE_E_ARG);
        seen[i] = 1;
        c->mods[k] = i;
        c->ranks[k] = c->h.mod[i].rank;
        c->d_outs[k] = c->h.mod[i].d_out;
    }
    /* without per-query selection a token covers every module in order */
    TSAFE_REQUIRE(c->opts.per_query || n == c->h.n, TSAFE_E_ARG);
    for (size_t k = 0; !c->opts.per_query && k < n; k++)
        TSAFE_REQUIRE(c->mods[k] == k, TSAFE_E_ARG);
    c->n = n;
    c->w = c->h.mod_width[c->mods[0]];
    return TSAFE_OK;
}

tsafe_status tsafe_session_client_submit(tsafe_session_client *c, const uint32_t *mods,
                                         size_t n, const float *x, float *const *delta)
{
    TSAFE_REQUIRE(c && x && delta, TSAFE_E_NULL);
    if (c->end.failed)
        return c->end.st;
    TSAFE_REQUIRE(c->phase == PHASE_READY && !c->end.done, TSAFE_E_STATE);
    tsafe_status st = pick_modules(c, mods, n);
    if (st != TSAFE_OK)
        return st;
    for (size_t k = 0; k < c->n; k++) {
        TSAFE_REQUIRE(delta[k], TSAFE_E_NULL);
        c->delta[k] = delta[k];
    }
    c->end.what[0] = 0;
    double t0 = tsafe_now_us();
    st = tsafe_sess_client_token_start(c, x);
    c->stats.work_us += tsafe_now_us() - t0;
    return st;
}

tsafe_status tsafe_session_client_close(tsafe_session_client *c)
{
    TSAFE_REQUIRE(c, TSAFE_E_NULL);
    if (c->end.failed)
        return c->end.st;
    TSAFE_REQUIRE(c->phase == PHASE_READY, TSAFE_E_STATE);
    tsafe_status st = tsafe_sess_session_outbox_push(&c->out, TSAFE_FRAME_BYE, NULL, 0, NULL, 0, NULL);
    if (st == TSAFE_OK)
        c->phase = PHASE_BYE;
    return st;
}

void tsafe_session_client_abort(tsafe_session_client *c, tsafe_status st, const char *what)
{
    if (!c)
        return;
    const char *w = what ? what : tsafe_strerror(st);
    tsafe_sess_session_fail(&c->end, &c->out, st, st == TSAFE_E_IO ? NULL : w, "%s", w);
}

tsafe_status tsafe_session_client_status(const tsafe_session_client *c)
{
    return !c ? TSAFE_E_NULL : c->end.failed ? c->end.st : TSAFE_OK;
}

const char *tsafe_session_client_what(const tsafe_session_client *c)
{
    return c && c->end.failed ? c->end.what : "";
}

void tsafe_session_client_stats(const tsafe_session_client *c, tsafe_session_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (c)
        *out = c->stats;
}
