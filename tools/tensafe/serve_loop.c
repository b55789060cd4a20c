/* The concurrent server of `tensafe serve` (serve_loop.h). The I/O thread
 * owns every connection and calls a session's feed/output/sent/wants; a
 * session with a step pending goes to the worker pool whole and the I/O
 * thread leaves it alone (no reads, no writes, no deadlines) until the
 * worker hands it back through the wake event. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "clock.h"
#include "net_socket.h"
#include "serve_loop.h"
#include "serve_pool.h"

#define RX_CAP 32768          /* bytes read ahead of the session, per connection */
#define TICK_MS 100           /* deadline checks */
#define REFUSED_LINGER_MS 1000 /* a refused peer's bytes drained before close */
#define SELECT_WAIT_MS 5000    /* several adapters: a client sends SELECT at once */

typedef struct conn conn;
typedef struct server server;

struct conn {
    server *srv;
    int fd;
    unsigned id;
    tsafe_session_server *s; /* NULL: a refused connection, lingering */
    serve_job job;
    int in_worker, closed_by_drain;
    struct event *ev_read, *ev_write;
    uint8_t *rx;
    size_t rx_have, rx_off;
    double t_open, t_active, t_msg, t_wblock; /* ms; 0: not running */
    uint64_t bytes_in, bytes_out, tokens_seen;
    conn *prev, *next;
};

struct server {
    const serve_limits *lim;
    const tsafe_session_service *const *svcs;
    size_t n_svcs;
    struct event_base *base;
    struct event *ev_accept, *ev_tick, *ev_wake, *ev_sigterm, *ev_sigint;
    int lfd, accepting, accept_paused, draining, drain_close; /* close idle sessions */
    serve_pool *pool;
    pthread_mutex_t done_mu; /* the jobs workers handed back */
    serve_job *done;
    conn *live;
    unsigned n_live, n_sessions_live, next_id;
    uint64_t tokens_left; /* UINT64_MAX: no --requests */
    double t_idle_since;
    void (*on_end)(void *, const serve_session_end *);
    void *user;
    serve_totals *tot;
    int rc;
    char *what;
    size_t cap;
};

static void conn_pump(conn *c);

/* --------------------------------------------------------- lifetime */

static void conn_free(conn *c)
{
    server *S = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        S->live = c->next;
    if (c->next)
        c->next->prev = c->prev;
    S->n_live--;
    event_free(c->ev_read);
    event_free(c->ev_write);
    close(c->fd);
    free(c->rx);
    tsafe_session_server_free(c->s);
    free(c);
    if (S->n_live == 0) {
        S->t_idle_since = tsafe_now_ms();
        malloc_trim(0); /* the sessions' pages back to the system between bursts */
    }
}

static void pump_refused(conn *c);

/* A connection whose last frame (an ERROR, or the end of a session) is
 * sent: no more writes, and what the peer still sends is read and dropped
 * until it closes or REFUSED_LINGER_MS pass, so that a close with unread
 * bytes does not reset the connection before the peer read that frame. */
static void linger(conn *c)
{
    shutdown(c->fd, SHUT_WR);
    c->t_open = tsafe_now_ms();
    event_del(c->ev_write);
    pump_refused(c);
}

/* The session ended (DONE or FAILED, its ERROR sent): metering, then
 * close (after a linger when the peer did not end it). */
static void conn_end(conn *c)
{
    server *S = c->srv;
    tsafe_status st = c->s ? tsafe_session_server_status(c->s) : TSAFE_OK;
    if (c->s && c->bytes_in == 0 && !c->closed_by_drain && st == TSAFE_E_IO) {
        S->tot->probes++; /* connected and closed without a byte: a health check */
        S->n_sessions_live--;
    } else if (c->s) {
        tsafe_session_stats ss;
        tsafe_session_server_stats(c->s, &ss);
        serve_session_end e = {c->id, c->s, c->bytes_in, c->bytes_out, tsafe_now_ms() - c->t_open};
        S->tot->sessions++;
        if (c->closed_by_drain)
            S->tot->closed_by_drain++;
        else
            S->tot->failed += tsafe_session_server_status(c->s) != TSAFE_OK;
        S->tot->he_ops += ss.he.he_ops;
        S->n_sessions_live--;
        if (S->on_end)
            S->on_end(S->user, &e);
    }
    if (c->s && st != TSAFE_E_IO) { /* the peer may still be sending: let it read the end */
        tsafe_session_server_free(c->s);
        c->s = NULL;
        linger(c);
        return;
    }
    conn_free(c);
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_pump(arg);
}

static conn *conn_new(server *S, int fd)
{
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->srv = S;
    c->fd = fd;
    c->ev_read = event_new(S->base, fd, EV_READ, on_io, c);
    c->ev_write = event_new(S->base, fd, EV_WRITE, on_io, c);
    c->rx = malloc(RX_CAP);
    if (!c->ev_read || !c->ev_write || !c->rx) {
        event_free(c->ev_read);
        event_free(c->ev_write);
        free(c->rx);
        free(c);
        return NULL;
    }
    c->t_open = c->t_active = tsafe_now_ms();
    c->next = S->live;
    if (S->live)
        S->live->prev = c;
    S->live = c;
    S->n_live++;
    return c;
}

/* ------------------------------------------------------------- pump */

/* Sends what the session queued. 1: progress, 0: blocked or nothing,
 * -1: the socket failed (the session aborted). */
static int pump_write(conn *c)
{
    const uint8_t *d;
    size_t n;
    tsafe_session_server_output(c->s, &d, &n);
    if (!n)
        return 0;
    ssize_t w = send(c->fd, d, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
        tsafe_session_server_sent(c->s, (size_t)w);
        c->bytes_out += (uint64_t)w;
        c->t_active = tsafe_now_ms();
        c->t_wblock = 0;
        return 1;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (!c->t_wblock)
            c->t_wblock = tsafe_now_ms();
        event_add(c->ev_write, NULL);
        return 0;
    }
    tsafe_session_server_abort(c->s, TSAFE_E_IO, "send failed (peer gone)");
    return -1;
}

/* Feeds bytes read ahead, or reads more. 1: progress, 0: nothing now. */
static int pump_read(conn *c)
{
    if (c->rx_off < c->rx_have) {
        size_t used = 0;
        tsafe_status st = tsafe_session_server_feed(c->s, c->rx + c->rx_off,
                                                    c->rx_have - c->rx_off, &used);
        (void)st; /* the session holds it */
        c->rx_off += used;
        size_t part = tsafe_session_server_partial(c->s);
        if (!part)
            c->t_msg = 0;
        else if (!c->t_msg)
            c->t_msg = tsafe_now_ms();
        return used > 0;
    }
    ssize_t r = recv(c->fd, c->rx, RX_CAP, MSG_DONTWAIT);
    if (r > 0) {
        c->rx_have = (size_t)r;
        c->rx_off = 0;
        c->bytes_in += (uint64_t)r;
        c->t_active = tsafe_now_ms();
        return 1;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        event_add(c->ev_read, NULL);
        return 0;
    }
    tsafe_session_server_abort(c->s, TSAFE_E_IO,
                               r == 0 ? "connection closed by peer" : "receive failed");
    return 1;
}

/* A refused connection: its bytes are read and dropped until it closes
 * (so that the ERROR is not lost to a reset), or the tick ends it. */
static void pump_refused(conn *c)
{
    uint8_t sink[4096];
    for (;;) {
        ssize_t r = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r > 0)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            event_add(c->ev_read, NULL);
            return;
        }
        conn_free(c);
        return;
    }
}

static void drain_check(server *S);

/* Moves the session along until it waits for the peer, for a worker or
 * for the socket: writes first, then the step (in the pool), then reads;
 * closes it once it ended and its last frame is out. */
static void conn_pump(conn *c)
{
    server *S = c->srv;
    if (!c->s) {
        pump_refused(c);
        return;
    }
    for (;;) {
        unsigned w = tsafe_session_server_wants(c->s);
        int wr = (w & TSAFE_SESSION_WANT_WRITE) ? pump_write(c) : 0;
        if (wr > 0)
            continue;
        if (wr < 0 || ((w & (TSAFE_SESSION_DONE | TSAFE_SESSION_FAILED)) &&
                       !(w & TSAFE_SESSION_WANT_WRITE))) {
            conn_end(c);
            drain_check(S);
            return;
        }
        if (w & TSAFE_SESSION_WANT_WRITE) /* blocked: the step waits for the socket */
            return;
        if (w & TSAFE_SESSION_WANT_WORK) {
            c->in_worker = 1;
            serve_pool_submit(S->pool, &c->job);
            return;
        }
        if (S->drain_close && !c->closed_by_drain && tsafe_session_server_idle(c->s)) {
            tsafe_session_server_abort(c->s, TSAFE_E_STATE, "server is shutting down");
            c->closed_by_drain = 1;
            continue;
        }
        if (!(w & TSAFE_SESSION_WANT_READ) || !pump_read(c))
            return;
    }
}

/* ------------------------------------------------- workers hand back */

/* Worker thread: queue the job for the I/O thread and wake it. */
static void on_job_done(void *user, serve_job *job)
{
    server *S = user;
    pthread_mutex_lock(&S->done_mu);
    job->next = S->done;
    S->done = job;
    pthread_mutex_unlock(&S->done_mu);
    event_active(S->ev_wake, EV_READ, 0);
}

/* The --requests count: tokens finished since the last look. */
static void count_tokens(server *S, conn *c)
{
    tsafe_session_stats ss;
    tsafe_session_server_stats(c->s, &ss);
    uint64_t k = ss.tokens - c->tokens_seen;
    c->tokens_seen = ss.tokens;
    S->tot->tokens += k;
    if (S->tokens_left == UINT64_MAX)
        return;
    S->tokens_left -= k < S->tokens_left ? k : S->tokens_left;
}

static void begin_drain(server *S, int close_idle);

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server *S = arg;
    pthread_mutex_lock(&S->done_mu);
    serve_job *j = S->done;
    S->done = NULL;
    pthread_mutex_unlock(&S->done_mu);
    while (j) {
        serve_job *next = j->next;
        conn *c = j->owner;
        c->in_worker = 0;
        c->t_active = tsafe_now_ms();
        count_tokens(S, c);
        if (S->tokens_left == 0) /* --requests: the sessions end at their limit */
            begin_drain(S, 0);
        conn_pump(c);
        j = next;
    }
}

/* ------------------------------------------------------------ accept */

static void refuse(server *S, int fd, const char *why)
{
    uint8_t ef[TSAFE_SESSION_ERROR_FRAME];
    size_t n = tsafe_session_error_frame(TSAFE_E_STATE, why, ef, sizeof ef);
    ssize_t w = send(fd, ef, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w; /* a fresh socket's buffer takes it; a peer gone is no matter */
    S->tot->refused++;
    conn *c = conn_new(S, fd);
    if (!c) {
        close(fd);
        return;
    }
    linger(c);
}

static void setup_socket(const serve_limits *lim, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (lim->send_buffer > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &lim->send_buffer, sizeof lim->send_buffer);
}

static void accept_one(server *S, int fd)
{
    const serve_limits *lim = S->lim;
    unsigned max = lim->max_sessions ? lim->max_sessions : 256;
    setup_socket(lim, fd);
    if (S->n_sessions_live >= max) {
        refuse(S, fd, "server busy: too many sessions (--max-sessions), try again later");
        return;
    }
    tsafe_session_limits sl = {.max_frame = lim->max_message,
                               .max_tokens = S->tokens_left == UINT64_MAX ? 0 : S->tokens_left};
    conn *c = conn_new(S, fd);
    if (!c || tsafe_session_server_create_select(S->svcs, S->n_svcs, &sl, &c->s) != TSAFE_OK) {
        if (c)
            conn_free(c);
        else
            close(fd);
        fprintf(stderr, "serve: out of memory for a new session; connection closed\n");
        return;
    }
    c->id = ++S->next_id;
    c->job.s = c->s;
    c->job.owner = c;
    S->n_sessions_live++;
    conn_pump(c);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    (void)what;
    server *S = arg;
    while (S->accepting) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) { /* the tick listens again */
                fprintf(stderr, "serve: accept: %s (raise ulimit -n or lower --max-sessions)\n",
                        strerror(errno));
                event_del(S->ev_accept);
                S->accept_paused = 1;
            }
            return; /* EAGAIN, or retried on the next readiness */
        }
        accept_one(S, fd);
        if (S->lim->once) {
            S->accepting = 0;
            event_del(S->ev_accept);
        }
    }
}

/* ------------------------------------------------- drain and deadlines */

/* Stops accepting (the listening socket closes: new connections are
 * refused by the system) and, with close_idle (a signal), closes every
 * session at its next token boundary; the loop ends once none is left. */
static void begin_drain(server *S, int close_idle)
{
    S->drain_close |= close_idle;
    if (S->draining && !close_idle)
        return;
    S->draining = 1;
    S->accepting = 0;
    event_del(S->ev_accept);
    if (S->lfd >= 0)
        close(S->lfd);
    S->lfd = -1;
    for (conn *c = S->live, *next; c; c = next) {
        next = c->next;
        if (c->s && !c->in_worker)
            conn_pump(c); /* idle sessions get ERROR "shutting down" and close */
    }
    drain_check(S);
}

static void drain_check(server *S)
{
    if (!S->accepting && S->n_live == 0) /* lingering ends within REFUSED_LINGER_MS */
        event_base_loopbreak(S->base);
}

/* Several adapters: how long a peer may take to send its SELECT (the
 * client sends it at once; an old client, which waits for the HELLO, then
 * learns why it gets none). */
static double select_wait_ms(const serve_limits *lim)
{
    double m = lim->message_timeout * 1e3;
    return m > 0 && m < SELECT_WAIT_MS ? m : SELECT_WAIT_MS;
}

/* The host's deadlines of one connection at now (ms): an ERROR (when the
 * socket still takes it) and the close. */
static void conn_deadlines(conn *c, double now)
{
    const serve_limits *lim = c->srv->lim;
    if (!c->s) {
        if (now - c->t_open > REFUSED_LINGER_MS)
            conn_free(c);
        return;
    }
    if (c->in_worker)
        return;
    char why[96];
    why[0] = 0;
    if (lim->message_timeout > 0 && c->t_wblock && now - c->t_wblock > lim->message_timeout * 1e3) {
        tsafe_session_server_abort(c->s, TSAFE_E_IO, "answer not read within --message-timeout");
        conn_end(c); /* the peer reads nothing: no ERROR can reach it */
        return;
    }
    if (lim->message_timeout > 0 && c->t_msg && now - c->t_msg > lim->message_timeout * 1e3)
        snprintf(why, sizeof why, "message not received within %g s (--message-timeout)",
                 lim->message_timeout);
    else if (lim->idle_timeout > 0 && now - c->t_active > lim->idle_timeout * 1e3)
        snprintf(why, sizeof why, "idle for %g s (--idle-timeout)", lim->idle_timeout);
    else if (c->srv->n_svcs > 1 && !tsafe_session_server_adapter_id(c->s)[0] &&
             !tsafe_session_server_partial(c->s) && now - c->t_open > select_wait_ms(lim))
        snprintf(why, sizeof why, "this server serves several adapters: name one "
                                  "(tensafe client --adapter-id ID)");
    if (why[0]) {
        tsafe_session_server_abort(c->s, TSAFE_E_STATE, why);
        event_del(c->ev_read);
        conn_pump(c);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server *S = arg;
    double now = tsafe_now_ms();
    for (conn *c = S->live, *next; c; c = next) {
        next = c->next;
        conn_deadlines(c, now);
    }
    if (S->accept_paused && S->accepting) {
        S->accept_paused = 0;
        event_add(S->ev_accept, NULL);
    }
    double at = S->lim->accept_timeout;
    if (at > 0 && S->accepting && S->n_live == 0 && now - S->t_idle_since > at * 1e3) {
        snprintf(S->what, S->cap, "serve: no client connected within %g s", at);
        S->rc = TSAFE_E_IO;
        event_base_loopbreak(S->base);
    }
    drain_check(S);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    server *S = arg;
    if (!S->draining)
        fprintf(stderr, "serve: %s: draining (%u session%s open)\n",
                sig == SIGTERM ? "SIGTERM" : "SIGINT", S->n_sessions_live,
                S->n_sessions_live == 1 ? "" : "s");
    S->tot->drained = 1;
    begin_drain(S, 1);
}

/* ---------------------------------------------------------------- run */

static int loop_setup(server *S)
{
    static const struct timeval tick = {0, TICK_MS * 1000};
    if (evthread_use_pthreads() != 0 || !(S->base = event_base_new()))
        return -1;
    S->ev_accept = event_new(S->base, S->lfd, EV_READ | EV_PERSIST, on_accept, S);
    S->ev_tick = event_new(S->base, -1, EV_PERSIST, on_tick, S);
    S->ev_wake = event_new(S->base, -1, 0, on_wake, S);
    S->ev_sigterm = evsignal_new(S->base, SIGTERM, on_signal, S);
    S->ev_sigint = evsignal_new(S->base, SIGINT, on_signal, S);
    if (!S->ev_accept || !S->ev_tick || !S->ev_wake || !S->ev_sigterm || !S->ev_sigint ||
        event_add(S->ev_accept, NULL) || event_add(S->ev_tick, &tick) ||
        event_add(S->ev_sigterm, NULL) || event_add(S->ev_sigint, NULL))
        return -1;
    unsigned nw = S->lim->workers;
    if (!nw) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        nw = cores > 0 ? (unsigned)cores : 1;
    }
    S->pool = serve_pool_create(nw, 1, on_job_done, S);
    return S->pool ? 0 : -1;
}

static void loop_teardown(server *S)
{
    while (S->live) /* an accept timeout or a failed start: nothing in the pool */
        conn_free(S->live);
    serve_pool_free(S->pool);
    event_free(S->ev_accept);
    event_free(S->ev_tick);
    event_free(S->ev_wake);
    event_free(S->ev_sigterm);
    event_free(S->ev_sigint);
    if (S->base)
        event_base_free(S->base);
    if (S->lfd >= 0)
        close(S->lfd);
    pthread_mutex_destroy(&S->done_mu);
}

int serve_loop_run(int lfd, const tsafe_session_service *const *svcs, size_t n,
                   const serve_limits *lim, void (*on_end)(void *user, const serve_session_end *e),
                   void *user, serve_totals *tot, char *what, size_t cap)
{
    server S;
    memset(&S, 0, sizeof S);
    memset(tot, 0, sizeof *tot);
    S.lim = lim;
    S.svcs = svcs;
    S.n_svcs = n;
    S.lfd = lfd;
    S.accepting = 1;
    S.tokens_left = lim->requests ? lim->requests : UINT64_MAX;
    S.on_end = on_end;
    S.user = user;
    S.tot = tot;
    S.what = what;
    S.cap = cap;
    S.t_idle_since = tsafe_now_ms();
    pthread_mutex_init(&S.done_mu, NULL);
    signal(SIGPIPE, SIG_IGN);
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    if (loop_setup(&S) != 0) {
        snprintf(what, cap, "serve: could not start the event loop or %u workers", lim->workers);
        S.rc = TSAFE_E_NOMEM;
    } else if (event_base_dispatch(S.base) < 0) {
        snprintf(what, cap, "serve: event loop failed");
        S.rc = TSAFE_E_IO;
    }
    loop_teardown(&S);
    return S.rc;
}
