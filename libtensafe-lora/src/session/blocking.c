/* Blocking helpers (lora_session.h): the same state machines driven over
 * send/recv callbacks, for hosts with a thread per connection, the tool
 * and the tests. Writes go first, then work, then reads. */
#include "client_internal.h"
#include "server_internal.h"
#include "tsafe_check.h"

#define CHUNK 65536

typedef struct {
    unsigned (*wants)(const void *);
    void (*output)(void *, const uint8_t **, size_t *);
    void (*sent)(void *, size_t);
    tsafe_status (*feed)(void *, const uint8_t *, size_t, size_t *);
    tsafe_status (*work)(void *);
    void (*abort)(void *, tsafe_status, const char *);
} machine;

static unsigned s_wants(const void *s) { return tsafe_session_server_wants(s); }
static void s_output(void *s, const uint8_t **d, size_t *n) { tsafe_session_server_output(s, d, n); }
static void s_sent(void *s, size_t n) { tsafe_session_server_sent(s, n); }
static tsafe_status s_feed(void *s, const uint8_t *d, size_t n, size_t *u)
{
    return tsafe_session_server_feed(s, d, n, u);
}
static tsafe_status s_work(void *s) { return tsafe_session_server_work(s); }
static void s_abort(void *s, tsafe_status st, const char *w) { tsafe_session_server_abort(s, st, w); }
static unsigned c_wants(const void *c) { return tsafe_session_client_wants(c); }
static void c_output(void *c, const uint8_t **d, size_t *n) { tsafe_session_client_output(c, d, n); }
static void c_sent(void *c, size_t n) { tsafe_session_client_sent(c, n); }
static tsafe_status c_feed(void *c, const uint8_t *d, size_t n, size_t *u)
{
    return tsafe_session_client_feed(c, d, n, u);
}
static void c_abort(void *c, tsafe_status st, const char *w) { tsafe_session_client_abort(c, st, w); }

static const machine k_server = {s_wants, s_output, s_sent, s_feed, s_work, s_abort};
static const machine k_client = {c_wants, c_output, c_sent, c_feed, NULL, c_abort};

/* Sends everything queued. */
static int flush(const machine *m, void *obj, const tsafe_session_transport *t)
{
    for (;;) {
        const uint8_t *d;
        size_t n;
        m->output(obj, &d, &n);
        if (!n)
            return 0;
        long w = t->send(t->user, d, n);
        if (w <= 0) {
            m->abort(obj, TSAFE_E_IO, "send failed (peer gone or timed out)");
            return -1;
        }
        m->sent(obj, (size_t)w);
    }
}

/* Until one of stop's flags (or DONE/FAILED): send what is queued, run
 * a pending step, feed what was read, read. Bytes read past the point
 * where the session stops taking them wait in buf for the next step. */
static unsigned drive(const machine *m, void *obj, const tsafe_session_transport *t,
                      unsigned stop)
{
    uint8_t buf[CHUNK];
    size_t have = 0, off = 0;
    for (;;) {
        unsigned w = m->wants(obj);
        if ((w & TSAFE_SESSION_WANT_WRITE) && flush(m, obj, t) != 0)
            return m->wants(obj); /* the transport is gone: what is queued never goes */
        w = m->wants(obj);
        if (w & (stop | TSAFE_SESSION_DONE | TSAFE_SESSION_FAILED))
            return w;
        if ((w & TSAFE_SESSION_WANT_WORK) && m->work) {
            tsafe_status st = m->work(obj);
            (void)st; /* the session holds it */
        } else if (off < have && (w & TSAFE_SESSION_WANT_READ)) {
            size_t used = 0;
            tsafe_status st = m->feed(obj, buf + off, have - off, &used);
            (void)st;
            off += used;
        } else if (w & TSAFE_SESSION_WANT_READ) {
            long r = t->recv(t->user, buf, sizeof buf);
            if (r <= 0)
                m->abort(obj, TSAFE_E_IO,
                         r == 0 ? "connection closed by peer" : "receive failed (or timed out)");
            have = r > 0 ? (size_t)r : 0;
            off = 0;
        } else {
            return w;
        }
    }
}

tsafe_status tsafe_session_server_run(tsafe_session_server *s, const tsafe_session_transport *t)
{
    TSAFE_REQUIRE(s && t && t->send && t->recv, TSAFE_E_NULL);
    unsigned w = drive(&k_server, s, t, 0);
    return w & TSAFE_SESSION_DONE ? TSAFE_OK : tsafe_session_server_status(s);
}

static tsafe_status client_until_ready(tsafe_session_client *c, const tsafe_session_transport *t)
{
    unsigned w = drive(&k_client, c, t, TSAFE_SESSION_READY);
    if (w & TSAFE_SESSION_FAILED)
        return tsafe_session_client_status(c);
    return w & TSAFE_SESSION_READY ? TSAFE_OK : TSAFE_E_STATE;
}

tsafe_status tsafe_session_client_connect(tsafe_session_client *c,
                                          const tsafe_session_transport *t)
{
    TSAFE_REQUIRE(c && t && t->send && t->recv, TSAFE_E_NULL);
    return client_until_ready(c, t);
}

tsafe_status tsafe_session_client_delta(tsafe_session_client *c,
                                        const tsafe_session_transport *t, const uint32_t *mods,
                                        size_t n, const float *x, float *const *delta)
{
    TSAFE_REQUIRE(c && t && t->send && t->recv, TSAFE_E_NULL);
    tsafe_status st = tsafe_session_client_submit(c, mods, n, x, delta);
    if (st != TSAFE_OK) {
        /* a refused submit (bad arguments) leaves the session as it was;
         * a failed one has queued its ERROR: send it */
        if (tsafe_session_client_wants(c) & TSAFE_SESSION_FAILED)
            (void)drive(&k_client, c, t, 0);
        return st;
    }
    return client_until_ready(c, t);
}

tsafe_status tsafe_session_client_bye(tsafe_session_client *c, const tsafe_session_transport *t)
{
    TSAFE_REQUIRE(c && t && t->send && t->recv, TSAFE_E_NULL);
    if (tsafe_session_client_wants(c) & TSAFE_SESSION_FAILED) {
        (void)drive(&k_client, c, t, 0); /* sends the ERROR still queued */
        return tsafe_session_client_status(c);
    }
    tsafe_status st = tsafe_session_client_close(c);
    if (st != TSAFE_OK)
        return st;
    unsigned w = drive(&k_client, c, t, 0);
    return w & TSAFE_SESSION_DONE ? TSAFE_OK : tsafe_session_client_status(c);
}
