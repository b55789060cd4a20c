/* `tensafe serve` / `tensafe client`: two-party HE-LoRA (docs/PROTOCOL.md
 * messages) over a localhost TCP socket, in one of three modes:
 *   sealed-private (default)  tensafe/lora_sealed.h, two exact BFV rounds:
 *                             the server learns nothing about x, the client
 *                             only delta;
 *   sealed                    one round: the server learns u = A x plus the
 *                             client's DP noise (--dp-eps, or --no-dp);
 *   plain-zero-moai           the seeds' CKKS protocol (tsafe_lora_client /
 *                             tsafe_lora_server): the client can read A,
 *                             the server gets a decryption oracle. Parity
 *                             only, never a default.
 * The server serves one mode; the client asks for one and refuses a server
 * that serves another (no silent downgrade).
 *
 * The server holds the adapter and never a secret key; the client makes
 * fresh keys (per session, rotated in the sealed modes) and holds x.
 *
 * Framing (all integers little-endian): a 12-byte header
 *   "TSNP"  u8 version = 1  u8 kind  u16 reserved = 0  u32 length
 * then `length` bytes (at most NET_MAX_FRAME). Kinds:
 *   1 HELLO    server -> client, once per connection (below)
 *   6 BYE      client -> server, empty: the session ends
 *   7 ERROR    either way: i32 status, then a short UTF-8 message
 * plain-zero-moai, per row:
 *   2 REQUEST  client -> server, tsafe_lora_client_encrypt bytes
 *   3 RESPONSE server -> client, tsafe_lora_server_process bytes
 *   4 UPRIME   client -> server, tsafe_lora_client_release bytes
 *   5 DELTA    server -> client, sum of d_out float32 (modules in order)
 * sealed / sealed-private, per token (one query for all modules: they share
 * d_in):
 *   8 SHELLO    client -> server, tsafe_sealed_client_hello bytes: before
 *               the first token and again whenever
 *               tsafe_sealed_client_needs_hello (key rotation); no reply
 *               (a refused hello is answered by ERROR instead of RESPONSE1)
 *   9 QUERY     client -> server, tsafe_sealed_client_query bytes
 *  10 RESPONSE1 server -> client, tsafe_sealed_server_round1 bytes
 *  11 SHARE     client -> server, tsafe_sealed_client_respond bytes
 *  12 FINAL     server -> client, tsafe_sealed_server_round2 bytes
 * HELLO version 1 (plain-zero-moai): u32 hello version = 1; u32 n + n bytes
 * of tsafe_params_serialize (explicit primes); u32 level, response_level;
 * f64 scale_x, scale_a; u32 d_in, rank, half, cols, n_batches; f64
 * max_abs_x, max_abs_a, expected_error, cost; u32 n + plan name; then the
 * module list. HELLO version 2 (sealed modes): u32 hello version = 2; u32
 * mode (1 sealed, 2 sealed-private: tsafe_sealed_mode); u32 d_in; then the
 * module list. Module list: u32 n_modules, then per module u32 n + name,
 * u32 rank, u32 d_out. Both sides derive the sealed plan from these public
 * shapes (d_in, the largest rank, the largest d_out) with the default
 * widths; the client's SHELLO carries the plan's fingerprint and the
 * server refuses any other. The client validates every field (lengths
 * against the remaining bytes, ranges, packing against the ring, security
 * bound through context or plan creation) before it uses any.
 *
 * Neither side authenticates the other and nothing is encrypted apart from
 * what the protocol encrypts: the socket is bound to 127.0.0.1 only. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <jansson.h>
#include <sodium.h>

#include "commands.h"
#include "io.h"
#include "net_remote.h"

#define NET_MAX_FRAME ((uint32_t)64 << 20)
#define NET_HEADER 12
#define NET_MAX_NAME 1024u
#define NET_MAX_WIDTHS 8u

enum {
    K_HELLO = 1,
    K_REQUEST,
    K_RESPONSE,
    K_UPRIME,
    K_DELTA,
    K_BYE,
    K_ERROR,
    K_SHELLO,
    K_QUERY,
    K_RESPONSE1,
    K_SHARE,
    K_FINAL
};

static const char *kind_name(int k)
{
    static const char *n[] = {"?",     "HELLO",  "REQUEST", "RESPONSE",  "UPRIME", "DELTA", "BYE",
                              "ERROR", "SHELLO", "QUERY",   "RESPONSE1", "SHARE",  "FINAL"};
    return k >= 1 && k <= K_FINAL ? n[k] : "unknown";
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---------------------------------------------------------------- I/O */

typedef struct {
    int fd;
    uint64_t bytes_in, bytes_out;
    char what[512]; /* description of the last failure */
} conn;

static tsafe_status send_all(conn *c, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR && !g_stop)
            continue;
        if (w <= 0) {
            snprintf(c->what, sizeof c->what, "send: %s",
                     errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : strerror(errno));
            return TSAFE_E_IO;
        }
        p += w;
        n -= (size_t)w;
        c->bytes_out += (uint64_t)w;
    }
    return TSAFE_OK;
}

static tsafe_status recv_all(conn *c, void *buf, size_t n, int at_start)
{
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(c->fd, p + got, n - got, 0);
        if (r < 0 && errno == EINTR && !g_stop)
            continue;
        if (r == 0) {
            snprintf(c->what, sizeof c->what, "connection closed by peer%s",
                     at_start && got == 0 ? "" : " in the middle of a message");
            return TSAFE_E_IO;
        }
        if (r < 0) {
            snprintf(c->what, sizeof c->what, "receive: %s",
                     errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : strerror(errno));
            return TSAFE_E_IO;
        }
        got += (size_t)r;
        c->bytes_in += (uint64_t)r;
    }
    return TSAFE_OK;
}

static tsafe_status send_frame(conn *c, int kind, const void *payload, size_t len)
{
    uint8_t h[NET_HEADER];
    if (len > NET_MAX_FRAME) {
        snprintf(c->what, sizeof c->what, "%s message of %zu bytes is above the %u-byte cap",
                 kind_name(kind), len, NET_MAX_FRAME);
        return TSAFE_E_RANGE;
    }
    memcpy(h, "TSNP", 4);
    h[4] = 1;
    h[5] = (uint8_t)kind;
    h[6] = h[7] = 0;
    io_put_u32le(h + 8, (uint32_t)len);
    tsafe_status st = send_all(c, h, sizeof h);
    return st == TSAFE_OK && len ? send_all(c, payload, len) : st;
}

/* Reads one frame; *buf is malloc'd (len + 1 bytes). */
static tsafe_status recv_frame(conn *c, int *kind, uint8_t **buf, size_t *len)
{
    uint8_t h[NET_HEADER];
    *buf = NULL;
    *len = 0;
    tsafe_status st = recv_all(c, h, sizeof h, 1);
    if (st != TSAFE_OK)
        return st;
    if (memcmp(h, "TSNP", 4) || h[6] || h[7]) {
        snprintf(c->what, sizeof c->what, "peer does not speak the tensafe protocol");
        return TSAFE_E_FORMAT;
    }
    if (h[4] != 1) {
        snprintf(c->what, sizeof c->what, "peer speaks framing version %u, not 1", h[4]);
        return TSAFE_E_VERSION;
    }
    uint32_t n = io_get_u32le(h + 8);
    if (h[5] < K_HELLO || h[5] > K_FINAL) {
        snprintf(c->what, sizeof c->what, "unknown message kind %u", h[5]);
        return TSAFE_E_FORMAT;
    }
    if (n > NET_MAX_FRAME) {
        snprintf(c->what, sizeof c->what, "%s message of %u bytes is above the %u-byte cap",
                 kind_name(h[5]), n, NET_MAX_FRAME);
        return TSAFE_E_RANGE;
    }
    uint8_t *b = malloc((size_t)n + 1);
    if (!b)
        return TSAFE_E_NOMEM;
    if ((st = recv_all(c, b, n, 0)) != TSAFE_OK) {
        free(b);
        return st;
    }
    b[n] = 0;
    *kind = h[5];
    *buf = b;
    *len = n;
    return TSAFE_OK;
}

static void send_error(conn *c, tsafe_status st, const char *msg)
{
    uint8_t b[4 + 400];
    size_t n = strlen(msg);
    if (n > 400)
        n = 400;
    io_put_u32le(b, (uint32_t)(int32_t)st);
    memcpy(b + 4, msg, n);
    (void)send_frame(c, K_ERROR, b, 4 + n);
}

/* An ERROR frame from the peer as status + message (sanitised). */
static tsafe_status peer_error(conn *c, const uint8_t *b, size_t n)
{
    if (n < 4) {
        snprintf(c->what, sizeof c->what, "peer sent a malformed error message");
        return TSAFE_E_FORMAT;
    }
    int32_t s = (int32_t)io_get_u32le(b);
    char msg[401];
    size_t m = n - 4 > 400 ? 400 : n - 4;
    for (size_t i = 0; i < m; i++)
        msg[i] = b[4 + i] >= 0x20 && b[4 + i] < 0x7f ? (char)b[4 + i] : '?';
    msg[m] = 0;
    snprintf(c->what, sizeof c->what, "server refused: %s", msg);
    return s < 0 && s > -1000 ? (tsafe_status)s : TSAFE_E_FORMAT;
}

static void set_timeouts(int fd, double seconds)
{
    struct timeval tv;
    tv.tv_sec = (time_t)seconds;
    tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: blocking calls return EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* -------------------------------------------------------------- hello */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int oom;
} wbuf;

static void w_bytes(wbuf *w, const void *d, size_t n)
{
    if (w->oom)
        return;
    if (w->len + n > w->cap) {
        size_t cap = (w->len + n) * 2 + 64;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->oom = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, d, n);
    w->len += n;
}

static void w_u32(wbuf *w, uint32_t v)
{
    uint8_t b[4];
    io_put_u32le(b, v);
    w_bytes(w, b, 4);
}

static void w_f64(wbuf *w, double v)
{
    uint64_t u;
    uint8_t b[8];
    memcpy(&u, &v, 8);
    io_put_u64le(b, u);
    w_bytes(w, b, 8);
}

static void w_str(wbuf *w, const char *s)
{
    w_u32(w, (uint32_t)strlen(s));
    w_bytes(w, s, strlen(s));
}

typedef struct {
    const uint8_t *p;
    size_t len, off;
    int bad;
} rbuf;

static const uint8_t *r_bytes(rbuf *r, size_t n)
{
    if (r->bad || n > r->len - r->off) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

static uint32_t r_u32(rbuf *r)
{
    const uint8_t *p = r_bytes(r, 4);
    return p ? io_get_u32le(p) : 0;
}

static double r_f64(rbuf *r)
{
    const uint8_t *p = r_bytes(r, 8);
    if (!p)
        return 0;
    uint64_t u = io_get_u64le(p);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* A string of 1..max bytes, printable ASCII, copied into out (max + 1). */
static int r_str(rbuf *r, char *out, size_t max)
{
    uint32_t n = r_u32(r);
    if (r->bad || n == 0 || n > max) {
        r->bad = 1;
        return 0;
    }
    const uint8_t *p = r_bytes(r, n);
    if (!p)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] > 0x7e) {
            r->bad = 1;
            return 0;
        }
    memcpy(out, p, n);
    out[n] = 0;
    return 1;
}

static void modules_encode(const io_modules *m, wbuf *w)
{
    w_u32(w, (uint32_t)m->n);
    for (size_t i = 0; i < m->n; i++) {
        w_str(w, m->info[i].name);
        w_u32(w, (uint32_t)m->info[i].rank);
        w_u32(w, (uint32_t)m->info[i].out_dim);
    }
}

static tsafe_status hello_encode(const tsafe_lora_plan *plan, const io_modules *m, wbuf *w)
{
    uint8_t pb[1024];
    size_t pn = 0;
    tsafe_status st = tsafe_params_serialize(&plan->params, pb, sizeof pb, &pn);
    if (st != TSAFE_OK)
        return st;
    w_u32(w, 1);
    w_u32(w, (uint32_t)pn);
    w_bytes(w, pb, pn);
    w_u32(w, plan->level);
    w_u32(w, plan->response_level);
    w_f64(w, plan->scale_x);
    w_f64(w, plan->scale_a);
    w_u32(w, plan->d_in);
    w_u32(w, plan->rank);
    w_u32(w, plan->half);
    w_u32(w, plan->cols);
    w_u32(w, plan->n_batches);
    w_f64(w, plan->max_abs_x);
    w_f64(w, plan->max_abs_a);
    w_f64(w, plan->expected_error);
    w_f64(w, plan->cost);
    w_str(w, plan->name);
    modules_encode(m, w);
    return w->oom ? TSAFE_E_NOMEM : TSAFE_OK;
}

/* HELLO version 2: the mode and the public shapes the sealed plan is
 * derived from. */
static tsafe_status hello_encode_sealed(tsafe_sealed_mode mode, const io_modules *m, wbuf *w)
{
    w_u32(w, 2);
    w_u32(w, (uint32_t)mode);
    w_u32(w, m->d_in);
    modules_encode(m, w);
    return w->oom ? TSAFE_E_NOMEM : TSAFE_OK;
}

/* HELLO version 3: sealed modes, modules of several input widths; each
 * module carries its own d_in. */
static tsafe_status hello_encode_widths(tsafe_sealed_mode mode, const io_modules *m, wbuf *w)
{
    w_u32(w, 3);
    w_u32(w, (uint32_t)mode);
    w_u32(w, (uint32_t)m->n);
    for (size_t i = 0; i < m->n; i++) {
        w_str(w, m->info[i].name);
        w_u32(w, (uint32_t)m->info[i].in_dim);
        w_u32(w, (uint32_t)m->info[i].rank);
        w_u32(w, (uint32_t)m->info[i].out_dim);
    }
    return w->oom ? TSAFE_E_NOMEM : TSAFE_OK;
}

/* The widths of a module list in order of first appearance (both sides
 * number them so): width_d_in[w], mod_width[i]. 0 when there are more
 * than NET_MAX_WIDTHS. */
static uint32_t widths_of(const uint32_t *d_in, size_t n, uint32_t *width_d_in,
                          uint32_t *mod_width)
{
    uint32_t nw = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t w = 0;
        while (w < nw && width_d_in[w] != d_in[i])
            w++;
        if (w == nw) {
            if (nw == NET_MAX_WIDTHS)
                return 0;
            width_d_in[nw++] = d_in[i];
        }
        mod_width[i] = w;
    }
    return nw;
}

typedef struct {
    uint32_t version;   /* 1 plain-zero-moai, 2 sealed modes, 3 sealed, several widths */
    tsafe_lora_plan plan; /* version 1 */
    uint32_t mode;      /* version 2: tsafe_sealed_mode */
    uint32_t d_in, rank_max, d_out_max;
    size_t n;
    char names[IO_MAX_MODULES][NET_MAX_NAME + 1];
    uint32_t rank[IO_MAX_MODULES];
    uint32_t d_out[IO_MAX_MODULES];
    uint32_t d_in_of[IO_MAX_MODULES]; /* version 3: each module's input width */
    uint32_t total_out;
} hello_info;

static int is_finite_pos(double v, double max) { return isfinite(v) && v > 0 && v <= max; }

/* The module list that ends both hello versions (rank <= max_rank), to the
 * end of the message. */
static tsafe_status modules_decode(rbuf *r, hello_info *h, uint32_t max_rank, char *what,
                                   size_t cap)
{
    uint32_t n = r_u32(r);
    if (r->bad || n == 0 || n > IO_MAX_MODULES) {
        snprintf(what, cap, "server hello: module count");
        return TSAFE_E_FORMAT;
    }
    h->n = n;
    h->rank_max = h->d_out_max = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!r_str(r, h->names[i], NET_MAX_NAME))
            return TSAFE_E_FORMAT;
        h->rank[i] = r_u32(r);
        h->d_out[i] = r_u32(r);
        if (r->bad || h->rank[i] == 0 || h->rank[i] > max_rank || h->d_out[i] == 0 ||
            h->d_out[i] > (1u << 24)) {
            snprintf(what, cap, "server hello: module %u (rank or d_out out of range)", i);
            return TSAFE_E_FORMAT;
        }
        total += h->d_out[i];
        if (h->rank[i] > h->rank_max)
            h->rank_max = h->rank[i];
        if (h->d_out[i] > h->d_out_max)
            h->d_out_max = h->d_out[i];
    }
    if (total * 4 > NET_MAX_FRAME) {
        snprintf(what, cap, "server hello: output of %llu floats per row is above the frame cap",
                 (unsigned long long)total);
        return TSAFE_E_RANGE;
    }
    h->total_out = (uint32_t)total;
    if (r->off != r->len) {
        snprintf(what, cap, "server hello has %zu trailing bytes", r->len - r->off);
        return TSAFE_E_FORMAT;
    }
    return TSAFE_OK;
}

/* Parses and validates a version-1 (plain-zero-moai) HELLO from an
 * untrusted server. */
static tsafe_status hello_decode(const uint8_t *b, size_t len, hello_info *h, char *what,
                                 size_t cap)
{
    rbuf r = {b, len, 0, 0};
    tsafe_lora_plan *p = &h->plan;
    memset(p, 0, sizeof *p);
    snprintf(what, cap, "server hello is malformed");
    if (r_u32(&r) != 1) {
        snprintf(what, cap, "server hello has an unknown version");
        return r.bad ? TSAFE_E_TRUNCATED : TSAFE_E_VERSION;
    }
    uint32_t pn = r_u32(&r);
    const uint8_t *pb = pn <= 4096 ? r_bytes(&r, pn) : NULL;
    if (!pb)
        return TSAFE_E_FORMAT;
    tsafe_status st = tsafe_params_deserialize(pb, pn, &p->params);
    if (st != TSAFE_OK) {
        snprintf(what, cap, "server hello: parameter set");
        return st;
    }
    if (p->params.flags & TSAFE_PARAMS_INSECURE_FOR_TESTS) {
        snprintf(what, cap, "server announced an insecure parameter set");
        return TSAFE_E_INSECURE;
    }
    p->level = r_u32(&r);
    p->response_level = r_u32(&r);
    p->scale_x = r_f64(&r);
    p->scale_a = r_f64(&r);
    p->d_in = r_u32(&r);
    p->rank = r_u32(&r);
    p->half = r_u32(&r);
    p->cols = r_u32(&r);
    p->n_batches = r_u32(&r);
    p->max_abs_x = r_f64(&r);
    p->max_abs_a = r_f64(&r);
    p->expected_error = r_f64(&r);
    p->cost = r_f64(&r);
    char name[NET_MAX_NAME + 1];
    if (!r_str(&r, name, sizeof p->name - 1) || r.bad)
        return TSAFE_E_FORMAT;
    memcpy(p->name, name, strlen(name) + 1); /* r_str capped it below sizeof p->name */
    uint64_t slots = p->params.log_n >= TSAFE_MIN_LOG_N && p->params.log_n <= TSAFE_MAX_LOG_N
                         ? (uint64_t)1 << (p->params.log_n - 1)
                         : 0;
    if (!slots || p->d_in == 0 || p->d_in > (1u << 24) || p->rank == 0 || p->rank > 65536 ||
        p->half != (p->d_in + 1) / 2 || p->cols == 0 || (p->cols & (p->cols - 1)) ||
        (uint64_t)p->cols * p->half > slots ||
        p->n_batches != (p->rank + p->cols - 1) / p->cols ||
        p->response_level > p->level || p->level >= p->params.n_primes ||
        !is_finite_pos(p->scale_x, 0x1p62) || !is_finite_pos(p->scale_a, 0x1p62) ||
        !is_finite_pos(p->max_abs_x, 1e12) || !is_finite_pos(p->max_abs_a, 1e12) ||
        !isfinite(p->expected_error) || !isfinite(p->cost)) {
        snprintf(what, cap, "server hello: plan fields are inconsistent");
        return TSAFE_E_PARAMS;
    }
    double lq = 0;
    for (uint32_t i = 0; i < p->params.n_primes; i++)
        lq += p->params.primes[i] ? log2((double)p->params.primes[i]) : p->params.prime_bits[i];
    p->log2_q = lq;
    p->max_log2_q = tsafe_params_max_log_q(p->params.log_n);
    if ((st = modules_decode(&r, h, p->rank, what, cap)) != TSAFE_OK)
        return st;
    h->d_in = p->d_in;
    return TSAFE_OK;
}

/* Parses and validates a version-2 (sealed) HELLO from an untrusted server;
 * the shapes are then checked once more by plan derivation. */
static tsafe_status hello_decode_sealed(const uint8_t *b, size_t len, hello_info *h,
                                        char *what, size_t cap)
{
    rbuf r = {b, len, 0, 0};
    snprintf(what, cap, "server hello is malformed");
    if (r_u32(&r) != 2)
        return r.bad ? TSAFE_E_TRUNCATED : TSAFE_E_VERSION;
    h->mode = r_u32(&r);
    h->d_in = r_u32(&r);
    if (r.bad)
        return TSAFE_E_TRUNCATED;
    if ((h->mode != TSAFE_SEALED && h->mode != TSAFE_SEALED_PRIVATE) || h->d_in == 0 ||
        h->d_in > (1u << 24)) {
        snprintf(what, cap, "server hello: mode %u or d_in %u out of range", h->mode, h->d_in);
        return TSAFE_E_FORMAT;
    }
    return modules_decode(&r, h, 65536, what, cap);
}

/* Parses and validates a version-3 HELLO (sealed modes, modules of
 * several widths) from an untrusted server. */
static tsafe_status hello_decode_widths(const uint8_t *b, size_t len, hello_info *h, char *what,
                                        size_t cap)
{
    rbuf r = {b, len, 0, 0};
    snprintf(what, cap, "server hello is malformed");
    if (r_u32(&r) != 3)
        return r.bad ? TSAFE_E_TRUNCATED : TSAFE_E_VERSION;
    h->version = 3;
    h->mode = r_u32(&r);
    uint32_t n = r_u32(&r);
    if (r.bad)
        return TSAFE_E_TRUNCATED;
    if ((h->mode != TSAFE_SEALED && h->mode != TSAFE_SEALED_PRIVATE) || n == 0 ||
        n > IO_MAX_MODULES) {
        snprintf(what, cap, "server hello: mode %u or module count %u out of range", h->mode, n);
        return TSAFE_E_FORMAT;
    }
    h->n = n;
    h->rank_max = h->d_out_max = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!r_str(&r, h->names[i], NET_MAX_NAME))
            return TSAFE_E_FORMAT;
        h->d_in_of[i] = r_u32(&r);
        h->rank[i] = r_u32(&r);
        h->d_out[i] = r_u32(&r);
        if (r.bad || h->d_in_of[i] == 0 || h->d_in_of[i] > (1u << 24) || h->rank[i] == 0 ||
            h->rank[i] > 65536 || h->d_out[i] == 0 || h->d_out[i] > (1u << 24)) {
            snprintf(what, cap, "server hello: module %u (d_in, rank or d_out out of range)", i);
            return TSAFE_E_FORMAT;
        }
        total += h->d_out[i];
        h->rank_max = h->rank[i] > h->rank_max ? h->rank[i] : h->rank_max;
        h->d_out_max = h->d_out[i] > h->d_out_max ? h->d_out[i] : h->d_out_max;
    }
    if (r.off != r.len) {
        snprintf(what, cap, "server hello has %zu trailing bytes", r.len - r.off);
        return TSAFE_E_FORMAT;
    }
    h->total_out = (uint32_t)total;
    h->d_in = h->d_in_of[0];
    return TSAFE_OK;
}

/* The hello of either version; the version is read first so that a client
 * can refuse a mode it did not ask for before parsing the rest. */
static uint32_t hello_version(const uint8_t *b, size_t len)
{
    return len >= 4 ? io_get_u32le(b) : 0;
}

/* -------------------------------------------------------------- serve */

static const char k_serve_help[] =
    "usage: tensafe serve --adapter DIR|PKG [--trusted-key HEX|FILE] --module NAME[,NAME...]\n"
    "                     [--mode sealed-private|sealed --semi-honest|plain-zero-moai]\n"
    "                     [--port P] [--port-file F] [--once | --requests K] [--timeout S]\n"
    "                     [--accept-timeout S] [--allow-unsigned] [--backend cpu|cuda]\n"
    "                     [--preset NAME | --precision P] [--max-abs X]   (plain-zero-moai)\n"
    "                     [--json]\n"
    "\n"
    "Two-party HE-LoRA server on 127.0.0.1 (never another interface). It holds the\n"
    "adapter and never a secret key; the client holds x and the keys. Modes (the\n"
    "client must ask for the same one):\n"
    "  sealed-private (default)  the server learns nothing about x; the client learns\n"
    "                   only delta = s*B*A*x (two exact BFV rounds per token)\n"
    "  sealed           one round: the server learns u = A x plus the client's DP noise;\n"
    "                   safe only between peers that follow the protocol (a deviating\n"
    "                   client can read the adapter): needs --semi-honest\n"
    "  plain-zero-moai  the seeds' CKKS protocol, for parity only: the client can read\n"
    "                   the adapter's A (and s*B), the server gets a decryption oracle\n"
    "  --port P            TCP port (default 7433; 0 picks a free port)\n"
    "  --port-file F       write the port number to F once listening\n"
    "  --semi-honest       required with --mode sealed: accept that it protects only\n"
    "                      against peers that follow the protocol (docs/THREAT_MODEL.md)\n"
    "  --json              at exit, one JSON summary on stdout (progress: stderr)\n"
    "  --once              serve one client connection, then exit\n"
    "  --requests K        exit after K row requests (tokens) in total\n"
    "  --timeout S         per-socket send/receive timeout (default 30 s)\n"
    "  --accept-timeout S  exit with an error when no client connects for S seconds\n"
    "  --allow-unsigned    serve an unsigned PEFT directory (with a warning); without it\n"
    "                      only a signed package verified with --trusted-key is served\n"
    "  --backend cpu|cuda  where the server's ring work runs (default cpu; cuda needs a\n"
    "                      build with CUDA and a device; the bytes are the same)\n"
    "  plain-zero-moai only (the sealed modes derive their plan from the shapes):\n"
    "  --preset NAME       core preset instead of the planner (--precision P, default 1e-6)\n"
    "  --max-abs X         bound on the clients' |x| (default 8)\n"
    "The protocol has no authentication or transport encryption (docs/PROTOCOL.md).\n";

typedef struct {
    io_mode mode;
    tsafe_lora_server *server;     /* plain-zero-moai */
    tsafe_lora_site **sites;
    tsafe_sealed_plan splan[NET_MAX_WIDTHS]; /* sealed modes: one per input width */
    uint32_t n_widths;
    uint32_t mod_width[IO_MAX_MODULES];
    int widths_hello;              /* HELLO v3: SHELLO and QUERY name a width */
    tsafe_sealed_site **ssites;
    const tsafe_backend_factory *backend; /* --backend: where the ring work runs */
    const io_modules *m;
    uint8_t *hello;
    size_t hello_len;
    uint64_t requests_left; /* UINT64_MAX: no limit */
    tsafe_lora_stats stats;
} serve_state;

/* Receives the next frame and checks its kind; an ERROR from the client
 * fails with its status. */
static tsafe_status expect_frame(conn *c, int want, uint8_t **buf, size_t *len, int *kind)
{
    free(*buf);
    *buf = NULL;
    tsafe_status st = recv_frame(c, kind, buf, len);
    if (st != TSAFE_OK)
        return st;
    if (*kind == K_ERROR)
        return peer_error(c, *buf, *len);
    if (*kind != want) {
        snprintf(c->what, sizeof c->what, "expected %s, got %s", kind_name(want),
                 kind_name(*kind));
        return TSAFE_E_FORMAT;
    }
    return TSAFE_OK;
}

/* One server round of a sealed token: run it on the message, send the
 * answer (RESPONSE1 or FINAL), or report the rejection to the client. The
 * HE work is added to *busy. */
static tsafe_status sealed_round(serve_state *S, conn *c, tsafe_sealed_server *srv, int round,
                                 const tsafe_sealed_site *const *sites, size_t n_sites,
                                 const uint8_t *buf, size_t len, uint64_t token, double *busy)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    double t1 = now_ms();
    tsafe_status st = round == 1
        ? tsafe_sealed_server_round1(srv, sites, n_sites, buf, len, &out, &out_len, &S->stats)
        : tsafe_sealed_server_round2(srv, sites, n_sites, buf, len, &out, &out_len, &S->stats);
    *busy += now_ms() - t1;
    if (st != TSAFE_OK) {
        snprintf(c->what, sizeof c->what, "token %llu: %s rejected", (unsigned long long)token,
                 round == 1 ? "query" : "share");
        send_error(c, st, c->what);
        return st;
    }
    st = send_frame(c, round == 1 ? K_RESPONSE1 : K_FINAL, out, out_len);
    tsafe_lora_bytes_free(out);
    return st;
}

/* Work done ahead (while the client computes) is optional: the rounds
 * redo what is missing, so a failure there costs time, not the session.
 * Says so once per session. */
static void ahead_failed(int *warned, unsigned session, const char *what, tsafe_status st)
{
    if (st == TSAFE_OK || *warned)
        return;
    *warned = 1;
    fprintf(stderr, "serve: session %u: %s failed (%s); the rounds do it themselves\n",
            session, what, tsafe_strerror(st));
}

/* HELLO v3 prefixes: SHELLO "u32 width", QUERY "u32 width, u32 n, n x u32
 * module index" (distinct modules of that width). Fills *w and sel
 * (every module of width 0 without v3) and *off (the prefix length).
 * Returns 0, or -1 with a description in c->what. */
static int query_prefix(const serve_state *S, conn *c, int query, const uint8_t *b, size_t len,
                        uint32_t *w, const tsafe_sealed_site **sel, size_t *n_sel, size_t *off)
{
    *off = 0;
    if (!S->widths_hello) {
        *w = 0;
        for (size_t i = 0; i < S->m->n; i++)
            sel[i] = S->ssites[i];
        *n_sel = S->m->n;
        return 0;
    }
    rbuf r = {b, len, 0, 0};
    *w = r_u32(&r);
    uint32_t n = query ? r_u32(&r) : 1;
    if (r.bad || *w >= S->n_widths || n == 0 || n > S->m->n) {
        snprintf(c->what, sizeof c->what, "%s: width or module count out of range",
                 query ? "QUERY" : "SHELLO");
        return -1;
    }
    uint8_t seen[IO_MAX_MODULES] = {0};
    for (uint32_t k = 0; query && k < n; k++) {
        uint32_t i = r_u32(&r);
        if (r.bad || i >= S->m->n || S->mod_width[i] != *w || seen[i]) {
            snprintf(c->what, sizeof c->what,
                     "QUERY: module %u is not a distinct module of width %u", i, *w);
            return -1;
        }
        seen[i] = 1;
        sel[k] = S->ssites[i];
    }
    *n_sel = query ? n : 0;
    *off = r.off;
    return 0;
}

/* One client connection in a sealed mode: SHELLO first and after each key
 * rotation; per token QUERY -> RESPONSE1, SHARE -> FINAL. A sealed server
 * per connection and width (its session), the sites shared; with HELLO
 * v3 each QUERY names the width and the modules it is for, and the SHARE
 * after it is for the same. Returns 0 on success. */
static int serve_sealed_session(serve_state *S, conn *c, unsigned session)
{
    tsafe_status st = TSAFE_OK;
    tsafe_sealed_server *srv[NET_MAX_WIDTHS] = {NULL};
    const tsafe_sealed_site *sel[IO_MAX_MODULES];
    size_t n_sel = 0;
    uint32_t w = 0;
    uint8_t *buf = NULL;
    size_t len = 0;
    int kind = 0;
    uint64_t served = 0;
    double t0 = now_ms(), busy = 0, ahead = 0; /* ahead: HE work done while waiting */
    int warned = 0;
    for (uint32_t k = 0; k < S->n_widths && st == TSAFE_OK; k++)
        if ((st = tsafe_sealed_server_create(&S->splan[k], &srv[k])) == TSAFE_OK)
            st = tsafe_sealed_server_use_backend(srv[k], S->backend);
    if (st != TSAFE_OK) {
        snprintf(c->what, sizeof c->what, "sealed server");
        goto fail;
    }
    if ((st = send_frame(c, K_HELLO, S->hello, S->hello_len)) != TSAFE_OK)
        goto fail;
    for (;;) {
        free(buf);
        buf = NULL;
        if ((st = recv_frame(c, &kind, &buf, &len)) != TSAFE_OK)
            goto fail;
        if (kind == K_BYE)
            break;
        if (kind == K_ERROR) {
            st = peer_error(c, buf, len);
            snprintf(c->what, sizeof c->what, "client gave up");
            goto fail;
        }
        if (kind != K_SHELLO && kind != K_QUERY) {
            snprintf(c->what, sizeof c->what, "expected SHELLO, QUERY or BYE, got %s",
                     kind_name(kind));
            st = TSAFE_E_FORMAT;
            send_error(c, st, c->what);
            goto fail;
        }
        size_t off = 0;
        if (query_prefix(S, c, kind == K_QUERY, buf, len, &w, sel, &n_sel, &off) != 0) {
            st = TSAFE_E_FORMAT;
            send_error(c, st, c->what);
            goto fail;
        }
        if (kind == K_SHELLO) {
            if ((st = tsafe_sealed_server_accept(srv[w], buf + off, len - off)) != TSAFE_OK) {
                snprintf(c->what, sizeof c->what,
                         "client hello refused (its plan is not this server's %s plan, or "
                         "the message is malformed)",
                         io_mode_name(S->mode));
                send_error(c, st, c->what);
                goto fail;
            }
            continue;
        }
        if (S->requests_left == 0) { /* by design, not a failure of this server */
            send_error(c, TSAFE_E_STATE, "request limit of this server reached");
            printf("session %u: refused token %llu (--requests limit reached)\n", session,
                   (unsigned long long)served + 1);
            fflush(stdout);
            break;
        }
        if ((st = sealed_round(S, c, srv[w], 1, sel, n_sel, buf + off, len - off, served + 1,
                               &busy)) != TSAFE_OK)
            goto fail;
        /* while the client decrypts and encrypts its shares: round 2's
         * band plaintexts (sealed-private; a no-op in sealed) */
        double t1 = now_ms();
        ahead_failed(&warned, session, "preparing round 2",
                     tsafe_sealed_server_prepare_round2(srv[w], sel, n_sel, &S->stats));
        ahead += now_ms() - t1;
        if ((st = expect_frame(c, K_SHARE, &buf, &len, &kind)) != TSAFE_OK) {
            char why[400]; /* room for the prefix within c->what */
            snprintf(why, sizeof why, "%.399s", c->what);
            snprintf(c->what, sizeof c->what, "token %llu: %s", (unsigned long long)served + 1,
                     kind == K_ERROR ? "client gave up" : why);
            if (kind != K_ERROR && st != TSAFE_E_IO)
                send_error(c, st, c->what);
            goto fail;
        }
        if ((st = sealed_round(S, c, srv[w], 2, sel, n_sel, buf, len, served + 1, &busy)) !=
            TSAFE_OK)
            goto fail;
        served++;
        if (S->requests_left != UINT64_MAX)
            S->requests_left--;
    }
    const char *unit = S->widths_hello ? "query" : "token"; /* v3: a token is many queries */
    printf("session %u (%s): %llu %s, %.1f KiB in, %.1f KiB out, %.3f ms/%s of HE "
           "work (+%.3f done while waiting for the client), %.1f ms total\n",
           session, io_mode_name(S->mode), (unsigned long long)served,
           served == 1 ? unit : S->widths_hello ? "queries" : "tokens", (double)c->bytes_in / 1024.0,
           (double)c->bytes_out / 1024.0, served ? busy / (double)served : 0.0, unit,
           served ? ahead / (double)served : 0.0, now_ms() - t0);
    fflush(stdout);
    free(buf);
    for (uint32_t k = 0; k < NET_MAX_WIDTHS; k++)
        tsafe_sealed_server_free(srv[k]);
    return 0;
fail:
    free(buf);
    for (uint32_t k = 0; k < NET_MAX_WIDTHS; k++)
        tsafe_sealed_server_free(srv[k]);
    {
        char what[700];
        snprintf(what, sizeof what, "serve: session %u: %s", session, c->what);
        return tool_fail(what, st);
    }
}

/* One client connection in plain-zero-moai. Returns 0 on success. */
static int serve_plain_session(serve_state *S, conn *c, unsigned session)
{
    tsafe_status st;
    uint8_t *buf = NULL, *resp = NULL, *dbytes = NULL;
    size_t len = 0, resp_len = 0;
    int kind = 0;
    float *deltas[IO_MAX_MODULES], *dflat = NULL;
    uint64_t served = 0;
    double t0 = now_ms(), busy = 0;
    const io_modules *m = S->m;
    /* one response buffer per session, reused for every request */
    size_t resp_cap = 0;
    if ((st = tsafe_lora_server_response_size(S->server,
                                              (const tsafe_lora_site *const *)S->sites, m->n,
                                              &resp_cap)) != TSAFE_OK) {
        snprintf(c->what, sizeof c->what, "response size");
        goto fail;
    }
    if (!(dflat = malloc((size_t)m->total_out * sizeof *dflat)) ||
        !(dbytes = malloc((size_t)m->total_out * 4)) || !(resp = malloc(resp_cap))) {
        st = TSAFE_E_NOMEM;
        snprintf(c->what, sizeof c->what, "allocate");
        goto fail;
    }
    float *o = dflat;
    for (size_t i = 0; i < m->n; i++) {
        deltas[i] = o;
        o += m->info[i].out_dim;
    }
    if ((st = send_frame(c, K_HELLO, S->hello, S->hello_len)) != TSAFE_OK)
        goto fail;
    for (;;) {
        free(buf);
        buf = NULL;
        if ((st = recv_frame(c, &kind, &buf, &len)) != TSAFE_OK)
            goto fail;
        if (kind == K_BYE)
            break;
        if (kind == K_ERROR) {
            st = peer_error(c, buf, len);
            snprintf(c->what, sizeof c->what, "client gave up");
            goto fail;
        }
        if (kind != K_REQUEST) {
            snprintf(c->what, sizeof c->what, "expected REQUEST or BYE, got %s", kind_name(kind));
            st = TSAFE_E_FORMAT;
            send_error(c, st, c->what);
            goto fail;
        }
        if (S->requests_left == 0) { /* by design, not a failure of this server */
            send_error(c, TSAFE_E_STATE, "request limit of this server reached");
            printf("session %u: refused request %llu (--requests limit reached)\n", session,
                   (unsigned long long)served + 1);
            fflush(stdout);
            break;
        }
        double t1 = now_ms();
        st = tsafe_lora_server_process_into(S->server, (const tsafe_lora_site *const *)S->sites,
                                            m->n, buf, len, resp, resp_cap, &resp_len,
                                            &S->stats);
        busy += now_ms() - t1;
        if (st != TSAFE_OK) {
            snprintf(c->what, sizeof c->what, "request %llu: ciphertext rejected",
                     (unsigned long long)served + 1);
            send_error(c, st, c->what);
            goto fail;
        }
        st = send_frame(c, K_RESPONSE, resp, resp_len);
        if (st != TSAFE_OK)
            goto fail;
        free(buf);
        buf = NULL;
        if ((st = recv_frame(c, &kind, &buf, &len)) != TSAFE_OK)
            goto fail;
        if (kind == K_ERROR) {
            st = peer_error(c, buf, len);
            snprintf(c->what, sizeof c->what, "client gave up on request %llu",
                     (unsigned long long)served + 1);
            goto fail;
        }
        if (kind != K_UPRIME) {
            snprintf(c->what, sizeof c->what, "expected UPRIME, got %s", kind_name(kind));
            st = TSAFE_E_FORMAT;
            send_error(c, st, c->what);
            goto fail;
        }
        t1 = now_ms();
        st = tsafe_lora_server_apply(S->server, (const tsafe_lora_site *const *)S->sites, m->n,
                                     buf, len, deltas, &S->stats);
        busy += now_ms() - t1;
        if (st != TSAFE_OK) {
            snprintf(c->what, sizeof c->what, "request %llu: u' message rejected",
                     (unsigned long long)served + 1);
            send_error(c, st, c->what);
            goto fail;
        }
        for (uint32_t i = 0; i < m->total_out; i++)
            io_put_f32le(dbytes + 4 * i, dflat[i]);
        if ((st = send_frame(c, K_DELTA, dbytes, (size_t)m->total_out * 4)) != TSAFE_OK)
            goto fail;
        served++;
        if (S->requests_left != UINT64_MAX)
            S->requests_left--;
    }
    printf("session %u: %llu request%s, %.1f KiB in, %.1f KiB out, %.3f ms/request of HE work, "
           "%.1f ms total\n",
           session, (unsigned long long)served, served == 1 ? "" : "s",
           (double)c->bytes_in / 1024.0, (double)c->bytes_out / 1024.0,
           served ? busy / (double)served : 0.0, now_ms() - t0);
    fflush(stdout);
    free(buf);
    free(dflat);
    free(dbytes);
    free(resp);
    return 0;
fail:
    free(buf);
    free(dflat);
    free(dbytes);
    free(resp);
    {
        char what[700];
        snprintf(what, sizeof what, "serve: session %u: %s", session, c->what);
        return tool_fail(what, st);
    }
}

static int listen_local(uint32_t port, uint16_t *bound, int *fd_out, char *what, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(what, cap, "socket: %s", strerror(errno));
        return TSAFE_E_IO;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* 127.0.0.1 only */
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        snprintf(what, cap, "listen on 127.0.0.1:%u: %s", port, strerror(errno));
        close(fd);
        return TSAFE_E_IO;
    }
    *bound = ntohs(a.sin_port);
    *fd_out = fd;
    return TSAFE_OK;
}

static tsafe_sealed_mode sealed_mode_of(io_mode m)
{
    return m == IO_MODE_SEALED ? TSAFE_SEALED : TSAFE_SEALED_PRIVATE;
}

/* The sealed plan of width w (modules i with mod_width[i] == w), as both
 * sides derive it from the public shapes with the default bit widths: the
 * largest rank and d_out of its modules; HELLO v2: every module reads the
 * one query of a token (sites_per_query = n, PROTOCOL.md, Plan); v3: a
 * query carries the few modules that read one x, the default split. */
static tsafe_status width_plan(tsafe_sealed_mode mode, int v3, uint32_t d_in,
                               const uint32_t *rank, const uint32_t *d_out,
                               const uint32_t *mod_width, uint32_t w, size_t n,
                               tsafe_sealed_plan *plan)
{
    uint32_t r = 0, o = 0;
    for (size_t i = 0; i < n; i++)
        if (mod_width[i] == w) {
            r = rank[i] > r ? rank[i] : r;
            o = d_out[i] > o ? d_out[i] : o;
        }
    tsafe_sealed_opts opts = {.sites_per_query = v3 ? 0 : (uint32_t)n,
                              .semi_honest = mode == TSAFE_SEALED}; /* --semi-honest */
    return tsafe_sealed_plan_derive(mode, d_in, r, o, &opts, plan);
}

/* The sealed plans, one per input width of the served modules, and one
 * sealed site per module on its width's plan (sites[] holds m->n entries;
 * on failure every site is freed). */
static tsafe_status serve_sealed_setup(io_mode mode, const io_modules *m, serve_state *S,
                                       tsafe_sealed_site **sites, char *what, size_t cap)
{
    uint32_t d_in[IO_MAX_MODULES], rank[IO_MAX_MODULES], d_out[IO_MAX_MODULES];
    uint32_t width_d_in[NET_MAX_WIDTHS];
    for (size_t i = 0; i < m->n; i++) {
        sites[i] = NULL;
        d_in[i] = (uint32_t)m->info[i].in_dim;
        rank[i] = (uint32_t)m->info[i].rank;
        d_out[i] = (uint32_t)m->info[i].out_dim;
    }
    if (!(S->n_widths = widths_of(d_in, m->n, width_d_in, S->mod_width))) {
        snprintf(what, cap, "serve: the modules take more than %u input widths", NET_MAX_WIDTHS);
        return TSAFE_E_RANGE;
    }
    tsafe_status st = TSAFE_OK;
    for (uint32_t w = 0; w < S->n_widths; w++)
        if ((st = width_plan(sealed_mode_of(mode), S->widths_hello, width_d_in[w], rank, d_out,
                             S->mod_width, w, m->n, &S->splan[w])) != TSAFE_OK) {
            snprintf(what, cap, "serve: %s plan for the modules of d_in %u", io_mode_name(mode),
                     width_d_in[w]);
            return st;
        }
    for (size_t i = 0; i < m->n; i++) {
        const tsafe_lora_module_info *mi = &m->info[i];
        st = tsafe_sealed_site_create(&S->splan[S->mod_width[i]], mi->A, mi->B,
                                      (uint32_t)mi->rank, (uint32_t)mi->out_dim,
                                      (float)mi->scale, &sites[i]);
        if (st != TSAFE_OK) {
            snprintf(what, cap, "serve: prepare module '%s' for %s", mi->name,
                     io_mode_name(mode));
            for (size_t k = 0; k < i; k++)
                tsafe_sealed_site_free(sites[k]);
            return st;
        }
    }
    return TSAFE_OK;
}

int cmd_serve(int argc, char **argv)
{
    const char *adapter = NULL, *key = NULL, *modules = NULL, *preset = NULL, *port_file = NULL;
    const char *mode_name = "sealed-private", *backend_name = "cpu";
    uint32_t port = 7433, requests = 0;
    double precision = 1e-6, max_abs = 8.0, timeout = 30, accept_timeout = 0;
    int once = 0, allow_unsigned = 0, json = 0, semi_honest = 0;
    tool_opt o[] = {{"--adapter", OPT_STR, &adapter, 0},
                    {"--trusted-key", OPT_STR, &key, 0},
                    {"--module", OPT_STR, &modules, 0},
                    {"--port", OPT_U32, &port, 0},
                    {"--port-file", OPT_STR, &port_file, 0},
                    {"--preset", OPT_STR, &preset, 0},
                    {"--precision", OPT_DOUBLE, &precision, 0},
                    {"--max-abs", OPT_DOUBLE, &max_abs, 0},
                    {"--once", OPT_FLAG, &once, 0},
                    {"--requests", OPT_U32, &requests, 0},
                    {"--timeout", OPT_DOUBLE, &timeout, 0},
                    {"--accept-timeout", OPT_DOUBLE, &accept_timeout, 0},
                    {"--allow-unsigned", OPT_FLAG, &allow_unsigned, 0},
                    {"--mode", OPT_STR, &mode_name, 0},
                    {"--backend", OPT_STR, &backend_name, 0},
                    {"--json", OPT_FLAG, &json, 0},
                    {"--semi-honest", OPT_FLAG, &semi_honest, 0}};
    int rc = opts_parse("serve", argc, argv, 1, o, sizeof o / sizeof o[0], NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        fputs(k_serve_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (!adapter || !modules)
        return tool_usage("serve: --adapter and --module are required");
    if (json && io_reserve_stdout() != 0)
        return tool_fail("serve: standard output for --json", TSAFE_E_IO);
    if (port > 65535)
        return tool_usage("serve: --port must be 0..65535");
    if (once && o[9].seen)
        return tool_usage("serve: give --once or --requests, not both");
    if (o[9].seen && requests == 0)
        return tool_usage("serve: --requests must be at least 1");
    if (preset && o[6].seen)
        return tool_usage("serve: give --preset or --precision, not both");
    if (!(max_abs > 0) || !(precision > 0) || !(timeout > 0) || accept_timeout < 0)
        return tool_usage("serve: --max-abs, --precision and --timeout must be positive");
    io_mode mode;
    if (io_mode_parse(mode_name, &mode) || mode == IO_MODE_LOCAL)
        return tool_usage("serve: --mode must be sealed-private, sealed or plain-zero-moai, not "
                          "'%s'",
                          mode_name);
    if ((rc = io_mode_consent("serve", mode, semi_honest)) != 0)
        return rc;
    if (mode != IO_MODE_PLAIN_ZERO_MOAI && (o[5].seen || o[6].seen || o[7].seen))
        return tool_usage("serve: --preset, --precision and --max-abs set the CKKS plan of "
                          "--mode plain-zero-moai; --mode %s derives its plan from the shapes",
                          mode_name);

    char what[4200];
    const tsafe_backend_factory *backend = NULL;
    tsafe_status bst = io_backend_factory(backend_name, &backend, what, sizeof what);
    if (bst != TSAFE_OK)
        return bst == TSAFE_E_ARG ? tool_usage("serve: %s", what) : tool_fail(what, bst);
    tsafe_lora_adapter *ad = NULL;
    io_modules *m = calloc(1, sizeof *m);
    tsafe_lora_site *sites[IO_MAX_MODULES];
    tsafe_sealed_site *ssites[IO_MAX_MODULES];
    size_t n_sites = 0, n_ssites = 0;
    serve_state S;
    memset(&S, 0, sizeof S);
    S.mode = mode;
    S.backend = backend;
    wbuf hw = {NULL, 0, 0, 0};
    int lfd = -1;
    tsafe_status st;
    rc = 1;
    if (!m) {
        tool_fail("serve", TSAFE_E_NOMEM);
        goto out;
    }
    tsafe_lora_plan plan;
    if ((st = io_load_adapter(adapter, key, &ad, what, sizeof what)) != TSAFE_OK ||
        (st = io_require_signed(ad, "serve", allow_unsigned, what, sizeof what)) != TSAFE_OK ||
        (st = io_resolve_modules_ex(ad, modules, mode == IO_MODE_PLAIN_ZERO_MOAI, m, what,
                                    sizeof what)) != TSAFE_OK) {
        tool_fail(what, st);
        goto out;
    }
    /* HELLO v3 (queries name their width and modules) for a whole model's
     * modules: several widths, or --module all */
    S.widths_hello = m->several_widths || !strcmp(modules, "all");
    if (mode != IO_MODE_PLAIN_ZERO_MOAI) {
        if ((st = serve_sealed_setup(mode, m, &S, ssites, what, sizeof what)) != TSAFE_OK) {
            tool_fail(what, st);
            goto out;
        }
        n_ssites = m->n;
        /* refuse a backend the sealed rings cannot use now, not per client */
        tsafe_sealed_server *probe = NULL;
        if ((st = tsafe_sealed_server_create(&S.splan[0], &probe)) == TSAFE_OK)
            st = tsafe_sealed_server_use_backend(probe, backend);
        tsafe_sealed_server_free(probe);
        if (st != TSAFE_OK) {
            snprintf(what, sizeof what, "serve: --backend %s for --mode %s", backend_name,
                     mode_name);
            tool_fail(what, st);
            goto out;
        }
        if ((st = S.widths_hello ? hello_encode_widths(sealed_mode_of(mode), m, &hw)
                                 : hello_encode_sealed(sealed_mode_of(mode), m, &hw)) !=
            TSAFE_OK) {
            tool_fail("serve: encode hello", st);
            goto out;
        }
    } else {
        if ((st = io_make_plan(preset, m, max_abs, precision, &plan, what, sizeof what)) !=
            TSAFE_OK) {
            tool_fail(what, st);
            goto out;
        }
        if ((st = tsafe_lora_server_create(&plan, &S.server)) != TSAFE_OK) {
            tool_fail("serve: HE context", st);
            goto out;
        }
        if ((st = tsafe_lora_server_use_backend(S.server, backend)) != TSAFE_OK) {
            snprintf(what, sizeof what, "serve: --backend %s", backend_name);
            tool_fail(what, st);
            goto out;
        }
        if ((st = io_make_sites(tsafe_lora_server_context(S.server), &plan, m, sites, what,
                                sizeof what)) != TSAFE_OK) {
            tool_fail(what, st);
            goto out;
        }
        n_sites = m->n;
        if ((st = hello_encode(&plan, m, &hw)) != TSAFE_OK) {
            tool_fail("serve: encode hello", st);
            goto out;
        }
    }
    S.ssites = ssites;
    S.sites = sites;
    S.m = m;
    S.hello = hw.p;
    S.hello_len = hw.len;
    S.requests_left = o[9].seen ? requests : UINT64_MAX;
    uint16_t bound = 0;
    if ((st = listen_local(port, &bound, &lfd, what, sizeof what)) != TSAFE_OK) {
        tool_fail(what, st);
        goto out;
    }
    install_signals();
    if (mode == IO_MODE_PLAIN_ZERO_MOAI)
        printf("listening on 127.0.0.1:%u -- mode plain-zero-moai (the client can read the "
               "adapter's A), plan %s (N=%u, log2 Q %.1f <= %u), %zu module%s, d_in %u, |x| <= "
               "%g\n",
               bound, plan.name, 1u << plan.params.log_n, plan.log2_q, plan.max_log2_q, m->n,
               m->n == 1 ? "" : "s", m->d_in, plan.max_abs_x);
    else
        for (uint32_t w = 0; w < S.n_widths; w++) {
            const tsafe_sealed_plan *sp = &S.splan[w];
            size_t nw = 0;
            for (size_t i = 0; i < m->n; i++)
                nw += S.mod_width[i] == w;
            printf("%s127.0.0.1:%u -- mode %s (N=%u, t=2^%u; x %u, A %u bits; model "
                   "rel error %.1e), %zu module%s, d_in %u\n",
                   w ? "  and on " : "listening on ", bound, mode_name, 1u << sp->r1.log_n,
                   sp->r1.t_bits, sp->x_bits, sp->a_bits, sp->expected_rel_error,
                   nw, nw == 1 ? "" : "s", sp->d_in);
        }
    io_origin_text(ad, what, sizeof what);
    printf("adapter: %s\nbackend: %s\n", what, backend_name);
    fflush(stdout);
    if (port_file) {
        char pbuf[16], tmp[4200];
        int pn = snprintf(pbuf, sizeof pbuf, "%u\n", bound);
        snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
        if ((st = io_write_file(tmp, pbuf, (size_t)pn, 0644)) != TSAFE_OK ||
            rename(tmp, port_file) != 0) {
            snprintf(what, sizeof what, "write port file '%s'", port_file);
            tool_fail(what, st ? st : TSAFE_E_IO);
            goto out;
        }
    }
    unsigned session = 0;
    int failures = 0;
    while (!g_stop) {
        struct pollfd pfd = {lfd, POLLIN, 0};
        int pr = poll(&pfd, 1, accept_timeout > 0 ? (int)(accept_timeout * 1000) : -1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            snprintf(what, sizeof what, "serve: no client connected within %g s", accept_timeout);
            tool_fail(what, TSAFE_E_IO);
            goto out;
        }
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            snprintf(what, sizeof what, "serve: accept: %s", strerror(errno));
            tool_fail(what, TSAFE_E_IO);
            goto out;
        }
        set_timeouts(cfd, timeout);
        conn c;
        memset(&c, 0, sizeof c);
        c.fd = cfd;
        ++session;
        if ((S.mode == IO_MODE_PLAIN_ZERO_MOAI ? serve_plain_session(&S, &c, session)
                                               : serve_sealed_session(&S, &c, session)) != 0)
            failures++;
        close(cfd);
        if (once || S.requests_left == 0)
            break;
    }
    printf("served %u session%s (%llu HE products), %d failed\n", session,
           session == 1 ? "" : "s", (unsigned long long)S.stats.he_ops, failures);
    if (json)
        io_json_emit(json_pack("{s:s, s:i, s:i, s:i, s:I}", "mode", io_mode_name(S.mode), "port",
                               (int)bound, "sessions", (int)session, "failed", failures,
                               "he_products", (json_int_t)S.stats.he_ops));
    rc = failures ? 1 : 0;
out:
    if (lfd >= 0)
        close(lfd);
    io_free_sites(sites, n_sites);
    for (size_t i = 0; i < n_ssites; i++)
        tsafe_sealed_site_free(ssites[i]);
    tsafe_lora_server_free(S.server);
    free(hw.p);
    free(m);
    tsafe_lora_adapter_free(ad);
    return rc;
}

/* ------------------------------------------------------------- client */

/* Default total epsilon of one client session (one `tensafe client` run)
 * when --dp-budget is not given: a stated, fixed budget that refuses once
 * spent, instead of E x rows, which can never refuse. Why 8: docs/THREAT_MODEL.md
 * ("Differential privacy: the default budget"). */
#define DP_SESSION_EPS_DEFAULT 8.0

static const char k_client_help[] =
    "usage: tensafe client --port P --input X.f32 [--rows K] [--output D.f32]\n"
    "                      [--mode sealed-private|sealed --semi-honest|plain-zero-moai]\n"
    "                      [--dp-eps E --dp-clip C [--dp-delta D] [--dp-budget EPS] | --no-dp]\n"
    "                      [--timeout S] [--json]\n"
    "\n"
    "Two-party HE-LoRA client for 'tensafe serve' on 127.0.0.1:P. It makes fresh keys\n"
    "that never leave this process and, for each row of d_in float32 values, receives\n"
    "the deltas of the server's modules (concatenated in its order), written to D.f32.\n"
    "It refuses a server that serves another mode than the one asked for. Modes:\n"
    "  sealed-private (default)  the server learns nothing about x (it sees only fresh\n"
    "                   ciphertexts, and nothing decrypted goes back); this client\n"
    "                   learns only delta. Two exact BFV rounds per row.\n"
    "  sealed           one round cheaper: the server learns u = A x plus discrete-\n"
    "                   Gaussian DP noise; needs --dp-eps and --dp-clip, or --no-dp\n"
    "                   to release u exactly, and --semi-honest: a deviating server\n"
    "                   gets a decryption oracle on this client's key\n"
    "  plain-zero-moai  the seeds' CKKS protocol, for parity only: this client can read\n"
    "                   the adapter's A, and the released u' gives the server a\n"
    "                   decryption oracle (DP optional)\n"
    "The sealed plan is derived here from the shapes the server announces and\n"
    "checked (128-bit bound, decryption failure <= 2^-40); the key rotates every\n"
    "4096 rows (a new hello).\n"
    "  --rows K       the first K rows of X.f32 (default: all)\n"
    "  --dp-eps E, --dp-clip C   (sealed, plain-zero-moai) make each row's release\n"
    "                 (E, D)-DP for u of L2 norm <= C: plain-zero-moai clips u to C and\n"
    "                 adds Gaussian noise, sealed adds discrete-Gaussian noise to its\n"
    "                 share (it cannot clip: C is the assumed bound). Exact Gaussian-DP\n"
    "                 accounting; --dp-delta D (default 1e-5, also the session's total\n"
    "                 delta); --dp-budget EPS total epsilon of the session (default 8,\n"
    "                 see docs/THREAT_MODEL.md): rows beyond what it allows are refused\n"
    "                 before anything is sent; the spent budget is printed at the end\n"
    "  --no-dp        (sealed) release u to the server without noise\n"
    "  --semi-honest  required with --mode sealed: accept that it protects only against\n"
    "                 a server that follows the protocol (docs/THREAT_MODEL.md)\n"
    "  --timeout S    send/receive timeout (default 30 s)\n"
    "  --json         one JSON summary on stdout (other lines: stderr)\n"
    "'-' for X.f32 / D.f32: standard input / output.\n";

static int connect_local(uint32_t port, double timeout, int *fd_out, char *what, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(what, cap, "socket: %s", strerror(errno));
        return TSAFE_E_IO;
    }
    set_timeouts(fd, timeout);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        snprintf(what, cap, "client: connect to 127.0.0.1:%u: %s", port, strerror(errno));
        close(fd);
        return TSAFE_E_IO;
    }
    *fd_out = fd;
    return TSAFE_OK;
}

typedef struct {
    uint32_t port, rows;
    int rows_seen;
    const char *input, *output;
    double dp_eps, dp_clip, dp_delta, dp_budget, timeout;
    int dp, budget_seen, no_dp, json;
    io_mode mode;
} client_opts;

/* What one client run holds; freed by client_run_free. */
typedef struct {
    const client_opts *co;
    conn c;
    hello_info *h;
    tsafe_sealed_plan plan; /* sealed modes: derived from the hello */
    tsafe_dp_session *dp;
    float *x, *out;
    size_t count, rows;
    uint8_t *buf;
    size_t len;
    int kind;
    tsafe_lora_stats stats;
} client_run;

/* Receives a frame of kind want (an ERROR from the server becomes its
 * status and message). */
static tsafe_status client_expect(client_run *R, int want)
{
    free(R->buf);
    R->buf = NULL;
    return expect_frame(&R->c, want, &R->buf, &R->len, &R->kind);
}

/* plain-zero-moai rows: REQUEST -> RESPONSE, UPRIME -> DELTA. */
static int client_plain_rows(client_run *R, double *ms)
{
    char what[4200];
    const hello_info *h = R->h;
    const tsafe_lora_plan *p = &h->plan;
    tsafe_lora_client *cl = NULL;
    float *u[IO_MAX_MODULES] = {NULL};
    uint8_t *req = NULL, *umsg = NULL;
    size_t req_len = 0, umsg_len = 0;
    int rc = 1;
    tsafe_status st;
    if ((st = tsafe_lora_client_create(p, NULL, &cl)) != TSAFE_OK) {
        send_error(&R->c, st, "client cannot use the announced plan");
        tool_fail("client: build keys for the server's plan", st);
        goto out;
    }
    for (size_t i = 0; i < h->n; i++)
        if (!(u[i] = malloc(h->rank[i] * sizeof(float)))) {
            tool_fail("client", TSAFE_E_NOMEM);
            goto out;
        }
    double t0 = now_ms();
    for (size_t r = 0; r < R->rows; r++) {
        const char *step = "encrypt";
        R->c.what[0] = 0;
        R->kind = 0;
        if ((st = tsafe_lora_client_encrypt(cl, R->x + r * p->d_in, &req, &req_len,
                                            &R->stats)) != TSAFE_OK)
            goto row_fail;
        step = "send request";
        st = send_frame(&R->c, K_REQUEST, req, req_len);
        tsafe_lora_bytes_free(req);
        req = NULL;
        if (st != TSAFE_OK)
            goto row_fail;
        step = "receive response";
        if ((st = client_expect(R, K_RESPONSE)) != TSAFE_OK)
            goto row_fail;
        step = "decrypt response";
        if ((st = tsafe_lora_client_decode(cl, R->buf, R->len, h->n, h->rank, u, &R->stats)) !=
            TSAFE_OK)
            goto row_fail;
        step = "release u'";
        if ((st = tsafe_lora_client_release(cl, h->n, h->rank, u, R->dp, &umsg, &umsg_len,
                                            &R->stats)) != TSAFE_OK)
            goto row_fail;
        for (size_t i = 0; i < h->n; i++)
            sodium_memzero(u[i], h->rank[i] * sizeof(float));
        step = "send u'";
        st = send_frame(&R->c, K_UPRIME, umsg, umsg_len);
        tsafe_lora_bytes_free(umsg);
        umsg = NULL;
        if (st != TSAFE_OK)
            goto row_fail;
        step = "receive delta";
        if ((st = client_expect(R, K_DELTA)) != TSAFE_OK)
            goto row_fail;
        if (R->len != (size_t)h->total_out * 4) {
            snprintf(R->c.what, sizeof R->c.what, "expected DELTA of %u floats, got %zu bytes",
                     h->total_out, R->len);
            st = TSAFE_E_FORMAT;
            goto row_fail;
        }
        for (uint32_t i = 0; i < h->total_out; i++)
            R->out[r * h->total_out + i] = io_get_f32le(R->buf + 4 * i);
        io_progress("client: rows", r + 1, R->rows);
        continue;
    row_fail:
        if (st != TSAFE_E_IO && R->kind != K_ERROR)
            send_error(&R->c, st, "client gave up");
        snprintf(what, sizeof what, "client: row %zu: %s%s%s", r, step,
                 R->c.what[0] ? ": " : "", R->c.what);
        tool_fail(what, st);
        goto out;
    }
    *ms = now_ms() - t0;
    printf("mode plain-zero-moai (this client can read the adapter's A), plan %s (N=%u, "
           "log2 Q %.1f <= %u: 128-bit), fresh client keys\n",
           p->name, 1u << p->params.log_n, p->log2_q, p->max_log2_q);
    rc = 0;
out:
    for (size_t i = 0; i < h->n; i++)
        if (u[i]) {
            sodium_memzero(u[i], h->rank[i] * sizeof(float));
            free(u[i]);
        }
    tsafe_lora_bytes_free(req);
    tsafe_lora_bytes_free(umsg);
    tsafe_lora_client_free(cl);
    return rc;
}

/* Sealed rows: SHELLO when the session needs one (first row, key rotation),
 * then QUERY -> RESPONSE1, SHARE -> FINAL. */
static int client_sealed_rows(client_run *R, double *ms)
{
    char what[4200];
    const hello_info *h = R->h;
    tsafe_sealed_mode mode = sealed_mode_of(R->co->mode);
    const tsafe_sealed_plan plan = R->plan;
    tsafe_sealed_client *cl = NULL;
    uint8_t *msg = NULL;
    size_t msg_len = 0;
    float *deltas[IO_MAX_MODULES];
    unsigned hellos = 0;
    int rc = 1;
    tsafe_status st = tsafe_sealed_client_create(&plan, NULL, &cl); /* checks it again */
    if (st != TSAFE_OK) {
        send_error(&R->c, st, "client cannot use the plan");
        tool_fail("client: keys for the sealed plan", st);
        goto out;
    }
    double t0 = now_ms();
    for (size_t r = 0; r < R->rows; r++) {
        const char *step = "hello";
        R->c.what[0] = 0;
        R->kind = 0;
        float *o = R->out + r * h->total_out;
        for (size_t i = 0; i < h->n; i++) {
            deltas[i] = o;
            o += h->d_out[i];
        }
        if (tsafe_sealed_client_needs_hello(cl)) {
            if ((st = tsafe_sealed_client_hello(cl, &msg, &msg_len)) != TSAFE_OK)
                goto row_fail;
            R->stats.bytes_up += msg_len;
            st = send_frame(&R->c, K_SHELLO, msg, msg_len);
            tsafe_lora_bytes_free(msg);
            msg = NULL;
            if (st != TSAFE_OK)
                goto row_fail;
            hellos++;
        }
        step = "encrypt query";
        if ((st = tsafe_sealed_client_query(cl, R->x + r * h->d_in, &msg, &msg_len,
                                            &R->stats)) != TSAFE_OK)
            goto row_fail;
        step = "send query";
        st = send_frame(&R->c, K_QUERY, msg, msg_len);
        tsafe_lora_bytes_free(msg);
        msg = NULL;
        if (st != TSAFE_OK)
            goto row_fail;
        step = "receive response";
        if ((st = client_expect(R, K_RESPONSE1)) != TSAFE_OK)
            goto row_fail;
        step = "decrypt response";
        if ((st = tsafe_sealed_client_respond(cl, R->buf, R->len, h->n, h->rank, h->d_out, R->dp,
                                              R->co->no_dp, &msg, &msg_len, &R->stats)) !=
            TSAFE_OK)
            goto row_fail;
        step = "send share";
        st = send_frame(&R->c, K_SHARE, msg, msg_len);
        tsafe_lora_bytes_free(msg);
        msg = NULL;
        if (st != TSAFE_OK)
            goto row_fail;
        step = "receive result";
        if ((st = client_expect(R, K_FINAL)) != TSAFE_OK)
            goto row_fail;
        step = "read result";
        if ((st = tsafe_sealed_client_finish(cl, R->buf, R->len, h->n, h->d_out, deltas,
                                             &R->stats)) != TSAFE_OK)
            goto row_fail;
        io_progress("client: rows", r + 1, R->rows);
        continue;
    row_fail:
        if (st != TSAFE_E_IO && R->kind != K_ERROR)
            send_error(&R->c, st, "client gave up");
        snprintf(what, sizeof what, "client: row %zu: %s%s%s", r, step,
                 R->c.what[0] ? ": " : "", R->c.what);
        tool_fail(what, st);
        goto out;
    }
    *ms = now_ms() - t0;
    printf("mode %s (N=%u, t=2^%u; x %u, A %u bits; model rel error %.1e, decryption failure "
           "2^%.0f), fresh client keys, %u hello%s (key rotated every %u rows)\n",
           io_mode_name(R->co->mode), 1u << plan.r1.log_n, plan.r1.t_bits, plan.x_bits,
           plan.a_bits, plan.expected_rel_error, plan.log2_fail, hellos, hellos == 1 ? "" : "s",
           plan.rotate_after);
    if (mode == TSAFE_SEALED && !R->dp)
        printf("sealed --no-dp: the server learned u = A x of every row exactly\n");
    rc = 0;
out:
    tsafe_lora_bytes_free(msg);
    tsafe_sealed_client_free(cl);
    return rc;
}

static const char *hello_mode_name(const uint8_t *b, size_t len)
{
    uint32_t v = hello_version(b, len);
    if (v == 1)
        return "plain-zero-moai";
    if ((v == 2 || v == 3) && len >= 8)
        return io_get_u32le(b + 4) == TSAFE_SEALED           ? "sealed"
               : io_get_u32le(b + 4) == TSAFE_SEALED_PRIVATE ? "sealed-private"
                                                             : NULL;
    return NULL;
}

/* The server's HELLO: refused unless it serves the mode asked for (checked
 * before anything else in it is parsed), then validated. */
static int client_hello(client_run *R)
{
    char what[4200];
    tsafe_status st;
    if ((st = recv_frame(&R->c, &R->kind, &R->buf, &R->len)) != TSAFE_OK ||
        (R->kind == K_ERROR && (st = peer_error(&R->c, R->buf, R->len)) != TSAFE_OK)) {
        snprintf(what, sizeof what, "client: server hello: %s", R->c.what);
        return tool_fail(what, st);
    }
    if (R->kind != K_HELLO) {
        snprintf(what, sizeof what, "client: expected HELLO, got %s", kind_name(R->kind));
        return tool_fail(what, TSAFE_E_FORMAT);
    }
    const char *served = hello_mode_name(R->buf, R->len);
    const char *asked = io_mode_name(R->co->mode);
    if (served && strcmp(served, asked)) {
        int downgrade = R->co->mode != IO_MODE_PLAIN_ZERO_MOAI &&
                        !strcmp(served, "plain-zero-moai");
        st = TSAFE_E_PARAMS_MISMATCH;
        snprintf(what, sizeof what, "client: the server serves --mode %s, this client asked for "
                                    "%s%s",
                 served, asked,
                 downgrade ? " (plain-zero-moai lets the client read the adapter and gives the "
                             "server a decryption oracle on x: ask for it with --mode "
                             "plain-zero-moai)"
                           : "");
        send_error(&R->c, st, "client refuses the server's mode");
        return tool_fail(what, st);
    }
    if (hello_version(R->buf, R->len) == 3) { /* per-query module selection */
        snprintf(what, sizeof what, "client: the server serves modules of several input widths "
                                    "(hello version 3): use 'tensafe generate --server'");
        send_error(&R->c, TSAFE_E_VERSION, "client speaks hello version 2 only");
        return tool_fail(what, TSAFE_E_VERSION);
    }
    st = R->co->mode == IO_MODE_PLAIN_ZERO_MOAI
             ? hello_decode(R->buf, R->len, R->h, what, sizeof what)
             : hello_decode_sealed(R->buf, R->len, R->h, what, sizeof what);
    if (st != TSAFE_OK) {
        if (!served)
            snprintf(what, sizeof what, "client: server hello: unknown version or mode");
        return tool_fail(what, st);
    }
    if (R->co->mode == IO_MODE_PLAIN_ZERO_MOAI)
        return 0;
    /* the client's own plan, derived from the announced public shapes, its
     * default widths and the module count (every module reads the one
     * query), never from parameters the server sends */
    const hello_info *h = R->h;
    tsafe_sealed_opts o = {.sites_per_query = (uint32_t)h->n,
                           .semi_honest = R->co->mode == IO_MODE_SEALED}; /* --semi-honest */
    st = tsafe_sealed_plan_derive(sealed_mode_of(R->co->mode), h->d_in, h->rank_max,
                                  h->d_out_max, &o, &R->plan);
    if (st != TSAFE_OK) {
        snprintf(what, sizeof what, "client: no %s plan for the server's shapes (d_in %u, rank "
                                    "%u, d_out %u)",
                 asked, h->d_in, h->rank_max, h->d_out_max);
        send_error(&R->c, st, "client cannot derive a plan for the announced shapes");
        return tool_fail(what, st);
    }
    return 0;
}

/* The input rows against the announced d_in (and |x| bound of
 * plain-zero-moai). */
static int client_rows(client_run *R)
{
    char what[4200];
    const client_opts *co = R->co;
    uint32_t d = R->h->d_in;
    if (R->count == 0 || R->count % d) {
        snprintf(what, sizeof what,
                 "input '%s': %zu float32 values is not a positive multiple of the server's "
                 "d_in=%u",
                 co->input, R->count, d);
        send_error(&R->c, TSAFE_E_SHAPE, "client input does not match d_in");
        return tool_fail(what, TSAFE_E_SHAPE);
    }
    R->rows = R->count / d;
    if (co->rows_seen) {
        if (co->rows == 0 || co->rows > R->rows) {
            snprintf(what, sizeof what, "--rows %u: input '%s' has %zu row%s", co->rows,
                     co->input, R->rows, R->rows == 1 ? "" : "s");
            send_error(&R->c, TSAFE_E_RANGE, "client gave up");
            return tool_fail(what, TSAFE_E_RANGE);
        }
        R->rows = co->rows;
    }
    double bound = co->mode == IO_MODE_PLAIN_ZERO_MOAI ? R->h->plan.max_abs_x : INFINITY;
    for (size_t i = 0; i < R->rows * d; i++)
        if (!(fabsf(R->x[i]) <= bound)) {
            if (isfinite(bound))
                snprintf(what, sizeof what, "input '%s' row %zu: |x| = %g is above the server's "
                                            "bound %g (serve --max-abs)",
                         co->input, i / d, (double)R->x[i], bound);
            else
                snprintf(what, sizeof what, "input '%s' row %zu: a non-finite value",
                         co->input, i / d);
            send_error(&R->c, TSAFE_E_VALUE_RANGE, "client gave up");
            return tool_fail(what, TSAFE_E_VALUE_RANGE);
        }
    return 0;
}

/* The session's DP accountant; refuses before anything is released when
 * the budget cannot cover every row. */
static int client_dp(client_run *R)
{
    char what[4200];
    const client_opts *co = R->co;
    tsafe_dp_params dpp;
    memset(&dpp, 0, sizeof dpp);
    dpp.clip_norm = co->dp_clip;
    dpp.eps = co->dp_eps;
    dpp.delta = co->dp_delta;
    dpp.eps_total = co->budget_seen ? co->dp_budget : DP_SESSION_EPS_DEFAULT;
    dpp.delta_total = co->dp_delta;
    dpp.accountant = TSAFE_DP_ACCOUNTANT_GDP;
    tsafe_status st;
    if ((st = tsafe_dp_session_create(&dpp, &R->dp)) != TSAFE_OK) {
        send_error(&R->c, st, "client gave up");
        return tool_fail("client: DP session (--dp-eps, --dp-clip, --dp-delta, --dp-budget)", st);
    }
    tsafe_dp_stats ds; /* refuse before releasing anything, not at row k */
    if ((st = tsafe_dp_session_stats(R->dp, &ds)) != TSAFE_OK) {
        snprintf(what, sizeof what, "client: DP session");
    } else if (ds.releases_max < R->rows) {
        snprintf(what, sizeof what,
                 "client: %zu rows need %zu DP releases, the session budget eps %g "
                 "(delta %g%s) allows %llu at --dp-eps %g; send fewer rows (--rows) or "
                 "set --dp-budget",
                 R->rows, R->rows, ds.eps_total, ds.delta_total,
                 co->budget_seen ? "" : ", the default", (unsigned long long)ds.releases_max,
                 co->dp_eps);
        st = TSAFE_E_BUDGET;
    }
    if (st != TSAFE_OK) {
        send_error(&R->c, st, "client gave up");
        return tool_fail(what, st);
    }
    return 0;
}

static int run_client(const client_opts *co)
{
    char what[4200];
    client_run R;
    memset(&R, 0, sizeof R);
    R.co = co;
    R.c.fd = -1;
    int rc = 1;
    double ms = 0;
    tsafe_status st;
    if (!(R.h = calloc(1, sizeof *R.h))) {
        tool_fail("client", TSAFE_E_NOMEM);
        goto out;
    }
    if ((st = io_read_f32(co->input, &R.x, &R.count)) != TSAFE_OK) {
        snprintf(what, sizeof what, "read input '%s'%s", co->input,
                 st == TSAFE_E_SHAPE ? " (size is not a multiple of 4 bytes)" : "");
        tool_fail(what, st);
        goto out;
    }
    if ((st = connect_local(co->port, co->timeout, &R.c.fd, what, sizeof what)) != TSAFE_OK) {
        tool_fail(what, st);
        goto out;
    }
    if (client_hello(&R) || client_rows(&R) || (co->dp && client_dp(&R)))
        goto out;
    const hello_info *h = R.h;
    if (!(R.out = malloc(R.rows * h->total_out * sizeof *R.out))) {
        tool_fail("client", TSAFE_E_NOMEM);
        goto out;
    }
    if ((co->mode == IO_MODE_PLAIN_ZERO_MOAI ? client_plain_rows(&R, &ms)
                                             : client_sealed_rows(&R, &ms)) != 0)
        goto out;
    (void)send_frame(&R.c, K_BYE, NULL, 0);
    if (co->output && (st = io_write_f32(co->output, R.out, R.rows * h->total_out)) != TSAFE_OK) {
        snprintf(what, sizeof what, "write '%s'", co->output);
        tool_fail(what, st);
        goto out;
    }
    printf("modules:");
    for (size_t i = 0; i < h->n; i++)
        printf(" %s (rank %u, d_out %u)", h->names[i], h->rank[i], h->d_out[i]);
    printf("\n%zu row%s, %.3f ms/row, %.1f KiB sent, %.1f KiB received%s%s\n", R.rows,
           R.rows == 1 ? "" : "s", ms / (double)R.rows, (double)R.c.bytes_out / 1024.0,
           (double)R.c.bytes_in / 1024.0, co->output ? ", deltas -> " : "",
           co->output ? co->output : "");
    if (co->json) {
        json_t *mods = json_array();
        for (size_t i = 0; i < h->n; i++)
            json_array_append_new(mods, json_pack("{s:s, s:i, s:i}", "name", h->names[i], "rank",
                                                  (int)h->rank[i], "d_out", (int)h->d_out[i]));
        io_json_emit(json_pack("{s:s, s:i, s:o, s:I, s:f, s:I, s:I, s:s?}", "mode",
                               io_mode_name(co->mode), "port", (int)co->port, "modules", mods,
                               "rows", (json_int_t)R.rows, "ms_per_row", ms / (double)R.rows,
                               "bytes_sent", (json_int_t)R.c.bytes_out, "bytes_received",
                               (json_int_t)R.c.bytes_in, "output", co->output));
    }
    rc = 0;
out:
    if (R.dp) { /* the spent budget, on every exit once a session exists */
        tsafe_dp_stats ds;
        if (tsafe_dp_session_stats(R.dp, &ds) == TSAFE_OK)
            printf("dp: clip %g, sigma %.4g, %llu releases, eps spent %.4g of %.4g (delta %g)\n",
                   ds.clip_norm, ds.sigma, (unsigned long long)ds.releases, ds.eps_spent,
                   ds.eps_total, ds.delta_total);
    }
    if (R.c.fd >= 0)
        close(R.c.fd);
    if (R.x)
        sodium_memzero(R.x, R.count * sizeof *R.x);
    free(R.x);
    free(R.out);
    free(R.buf);
    tsafe_dp_session_free(R.dp);
    free(R.h);
    return rc;
}

int cmd_client(int argc, char **argv)
{
    client_opts co;
    memset(&co, 0, sizeof co);
    co.dp_delta = 1e-5;
    co.timeout = 30;
    const char *mode_name = "sealed-private";
    int semi_honest = 0;
    tool_opt o[] = {{"--port", OPT_U32, &co.port, 0},
                    {"--input", OPT_STR, &co.input, 0},
                    {"--rows", OPT_U32, &co.rows, 0},
                    {"--output", OPT_STR, &co.output, 0},
                    {"--dp-eps", OPT_DOUBLE, &co.dp_eps, 0},
                    {"--dp-clip", OPT_DOUBLE, &co.dp_clip, 0},
                    {"--dp-delta", OPT_DOUBLE, &co.dp_delta, 0},
                    {"--dp-budget", OPT_DOUBLE, &co.dp_budget, 0},
                    {"--timeout", OPT_DOUBLE, &co.timeout, 0},
                    {"--mode", OPT_STR, &mode_name, 0},
                    {"--no-dp", OPT_FLAG, &co.no_dp, 0},
                    {"--json", OPT_FLAG, &co.json, 0},
                    {"--semi-honest", OPT_FLAG, &semi_honest, 0}};
    int rc = opts_parse("client", argc, argv, 1, o, sizeof o / sizeof o[0], NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        fputs(k_client_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (!o[0].seen || !co.input)
        return tool_usage("client: --port and --input are required");
    if (co.port == 0 || co.port > 65535)
        return tool_usage("client: --port must be 1..65535");
    if (co.json && co.output && !strcmp(co.output, "-"))
        return tool_usage("client: --output - and --json both want standard output");
    if (co.json && io_reserve_stdout() != 0)
        return tool_fail("client: standard output for --json", TSAFE_E_IO);
    if (io_mode_parse(mode_name, &co.mode) || co.mode == IO_MODE_LOCAL)
        return tool_usage("client: --mode must be sealed-private, sealed or plain-zero-moai, "
                          "not '%s'",
                          mode_name);
    if ((rc = io_mode_consent("client", co.mode, semi_honest)) != 0)
        return rc;
    if (o[4].seen != o[5].seen)
        return tool_usage("client: --dp-eps and --dp-clip go together");
    if ((o[6].seen || o[7].seen) && !o[4].seen)
        return tool_usage("client: --dp-delta and --dp-budget need --dp-eps and --dp-clip");
    co.dp = o[4].seen;
    if (co.dp && co.no_dp)
        return tool_usage("client: give --dp-eps/--dp-clip or --no-dp, not both");
    if (co.mode == IO_MODE_SEALED_PRIVATE && (co.dp || co.no_dp))
        return tool_usage("client: --mode sealed-private releases nothing decrypted to the "
                          "server: the DP options (--dp-*, --no-dp) apply to --mode sealed and "
                          "plain-zero-moai");
    if (co.mode == IO_MODE_PLAIN_ZERO_MOAI && co.no_dp)
        return tool_usage("client: --no-dp is for --mode sealed (plain-zero-moai releases "
                          "without noise unless --dp-eps is given)");
    if (co.mode == IO_MODE_SEALED && !co.dp && !co.no_dp)
        return tool_usage("client: --mode sealed releases u = A x to the server: give --dp-eps "
                          "E --dp-clip C for DP noise, or --no-dp to release it exactly");
    if (co.dp && (!(co.dp_eps > 0) || !(co.dp_clip > 0) || !(co.dp_delta > 0 && co.dp_delta < 1)))
        return tool_usage("client: --dp-eps and --dp-clip must be positive, --dp-delta in (0, 1)");
    co.rows_seen = o[2].seen;
    co.budget_seen = o[7].seen;
    if (!(co.timeout > 0))
        return tool_usage("client: --timeout must be positive");
    signal(SIGPIPE, SIG_IGN);
    return run_client(&co);
}

/* ------------------------------------------------- net_remote (v3 client) */

struct net_remote {
    conn c;
    hello_info *h;
    io_mode mode;
    tsafe_dp_session *dp;
    int no_dp;
    uint32_t n_widths, width_d_in[NET_MAX_WIDTHS], mod_width[IO_MAX_MODULES];
    tsafe_sealed_plan plan[NET_MAX_WIDTHS];
    tsafe_sealed_client *cl[NET_MAX_WIDTHS];
    uint8_t *buf;
    size_t len;
    int kind;
    wbuf out; /* prefix + library message of the frame being sent */
};

/* The server's HELLO, version 3 in the mode asked for, and the client's
 * plans and keys for each width (derived here, never sent by the server). */
static tsafe_status remote_hello(net_remote *r, char *what, size_t cap)
{
    tsafe_status st = recv_frame(&r->c, &r->kind, &r->buf, &r->len);
    if (st == TSAFE_OK && r->kind == K_ERROR)
        st = peer_error(&r->c, r->buf, r->len);
    if (st != TSAFE_OK || r->kind != K_HELLO) {
        snprintf(what, cap, "server hello: %s",
                 st != TSAFE_OK ? r->c.what : "expected HELLO");
        return st != TSAFE_OK ? st : TSAFE_E_FORMAT;
    }
    uint32_t v = hello_version(r->buf, r->len);
    const char *served = hello_mode_name(r->buf, r->len);
    if (served && strcmp(served, io_mode_name(r->mode))) {
        snprintf(what, cap, "the server serves --mode %s, this client asked for %s", served,
                 io_mode_name(r->mode));
        return TSAFE_E_PARAMS_MISMATCH;
    }
    if (v != 3) {
        snprintf(what, cap, "the server answers one query for all its modules (hello version "
                            "%u): serve the whole adapter with 'tensafe serve --module all'",
                 v);
        return TSAFE_E_VERSION;
    }
    if ((st = hello_decode_widths(r->buf, r->len, r->h, what, cap)) != TSAFE_OK)
        return st;
    const hello_info *h = r->h;
    if (!(r->n_widths = widths_of(h->d_in_of, h->n, r->width_d_in, r->mod_width))) {
        snprintf(what, cap, "server hello: more than %u input widths", NET_MAX_WIDTHS);
        return TSAFE_E_RANGE;
    }
    tsafe_sealed_mode sm = sealed_mode_of(r->mode);
    for (uint32_t w = 0; w < r->n_widths; w++)
        if ((st = width_plan(sm, 1, r->width_d_in[w], h->rank, h->d_out, r->mod_width, w, h->n,
                             &r->plan[w])) != TSAFE_OK ||
            (st = tsafe_sealed_client_create(&r->plan[w], NULL, &r->cl[w])) != TSAFE_OK) {
            snprintf(what, cap, "no %s plan for the server's modules of d_in %u",
                     io_mode_name(r->mode), r->width_d_in[w]);
            return st;
        }
    return TSAFE_OK;
}

tsafe_status net_remote_open(uint32_t port, double timeout, io_mode mode, tsafe_dp_session *dp,
                             int no_dp, net_remote **out, char *what, size_t cap)
{
    *out = NULL;
    if (mode != IO_MODE_SEALED && mode != IO_MODE_SEALED_PRIVATE) {
        snprintf(what, cap, "--server needs --mode sealed or sealed-private");
        return TSAFE_E_ARG;
    }
    signal(SIGPIPE, SIG_IGN);
    net_remote *r = calloc(1, sizeof *r);
    if (!r || !(r->h = calloc(1, sizeof *r->h))) {
        free(r);
        return TSAFE_E_NOMEM;
    }
    r->c.fd = -1;
    r->mode = mode;
    r->dp = dp;
    r->no_dp = no_dp;
    tsafe_status st = connect_local(port, timeout, &r->c.fd, what, cap);
    if (st == TSAFE_OK && (st = remote_hello(r, what, cap)) != TSAFE_OK && st != TSAFE_E_IO)
        send_error(&r->c, st, "client refuses the server's hello");
    if (st != TSAFE_OK) {
        net_remote_close(r);
        return st;
    }
    *out = r;
    return TSAFE_OK;
}

void net_remote_close(net_remote *r)
{
    if (!r)
        return;
    if (r->c.fd >= 0) {
        (void)send_frame(&r->c, K_BYE, NULL, 0);
        close(r->c.fd);
    }
    for (uint32_t w = 0; w < NET_MAX_WIDTHS; w++)
        tsafe_sealed_client_free(r->cl[w]);
    free(r->h);
    free(r->buf);
    free(r->out.p);
    free(r);
}

size_t net_remote_count(const net_remote *r) { return r ? r->h->n : 0; }

const char *net_remote_module(const net_remote *r, size_t i, uint32_t *d_in, uint32_t *rank,
                              uint32_t *d_out)
{
    *d_in = r->h->d_in_of[i];
    *rank = r->h->rank[i];
    *d_out = r->h->d_out[i];
    return r->h->names[i];
}

/* Sends kind with payload = the prefix already in r->out + msg (freed). */
static tsafe_status remote_send(net_remote *r, int kind, uint8_t *msg, size_t len)
{
    w_bytes(&r->out, msg, len);
    tsafe_lora_bytes_free(msg);
    if (r->out.oom)
        return TSAFE_E_NOMEM;
    return send_frame(&r->c, kind, r->out.p, r->out.len);
}

static tsafe_status remote_expect(net_remote *r, int want)
{
    free(r->buf);
    r->buf = NULL;
    return expect_frame(&r->c, want, &r->buf, &r->len, &r->kind);
}

/* SHELLO (when the width's client needs one), QUERY, RESPONSE1, SHARE,
 * FINAL; *step names the step that failed. */
static tsafe_status remote_exchange(net_remote *r, uint32_t w, const uint32_t *mods, size_t n,
                                    const float *x, float *const *delta, const char **step)
{
    tsafe_sealed_client *cl = r->cl[w];
    uint32_t ranks[IO_MAX_MODULES], d_outs[IO_MAX_MODULES];
    for (size_t k = 0; k < n; k++) {
        ranks[k] = r->h->rank[mods[k]];
        d_outs[k] = r->h->d_out[mods[k]];
    }
    tsafe_lora_stats lib; /* the library's own byte counts: the wire's are counted here */
    memset(&lib, 0, sizeof lib);
    uint8_t *msg = NULL;
    size_t len = 0;
    tsafe_status st;
    if (tsafe_sealed_client_needs_hello(cl)) {
        *step = "hello";
        r->out.len = 0;
        w_u32(&r->out, w);
        if ((st = tsafe_sealed_client_hello(cl, &msg, &len)) != TSAFE_OK ||
            (st = remote_send(r, K_SHELLO, msg, len)) != TSAFE_OK)
            return st;
    }
    *step = "query";
    r->out.len = 0;
    w_u32(&r->out, w);
    w_u32(&r->out, (uint32_t)n);
    for (size_t k = 0; k < n; k++)
        w_u32(&r->out, mods[k]);
    if ((st = tsafe_sealed_client_query(cl, x, &msg, &len, &lib)) != TSAFE_OK ||
        (st = remote_send(r, K_QUERY, msg, len)) != TSAFE_OK)
        return st;
    *step = "response";
    r->out.len = 0;
    if ((st = remote_expect(r, K_RESPONSE1)) != TSAFE_OK ||
        (st = tsafe_sealed_client_respond(cl, r->buf, r->len, n, ranks, d_outs, r->dp, r->no_dp,
                                          &msg, &len, &lib)) != TSAFE_OK ||
        (st = remote_send(r, K_SHARE, msg, len)) != TSAFE_OK)
        return st;
    *step = "result";
    if ((st = remote_expect(r, K_FINAL)) != TSAFE_OK)
        return st;
    return tsafe_sealed_client_finish(cl, r->buf, r->len, n, d_outs, delta, &lib);
}

tsafe_status net_remote_delta(net_remote *r, const uint32_t *mods, size_t n, const float *x,
                              float *const *delta, tsafe_lora_stats *stats, char *what,
                              size_t cap)
{
    if (!r || !mods || !x || !delta || n == 0 || n > r->h->n)
        return TSAFE_E_ARG;
    uint32_t w = mods[0] < r->h->n ? r->mod_width[mods[0]] : 0;
    for (size_t k = 0; k < n; k++)
        if (mods[k] >= r->h->n || r->mod_width[mods[k]] != w) {
            snprintf(what, cap, "modules of one query must share one input width");
            return TSAFE_E_ARG;
        }
    uint64_t up = r->c.bytes_out, down = r->c.bytes_in;
    const char *step = "";
    r->c.what[0] = 0;
    r->kind = 0;
    tsafe_status st = remote_exchange(r, w, mods, n, x, delta, &step);
    if (stats) {
        stats->bytes_up += r->c.bytes_out - up;
        stats->bytes_down += r->c.bytes_in - down;
        stats->tokens++;
    }
    if (st != TSAFE_OK) {
        if (st != TSAFE_E_IO && r->kind != K_ERROR)
            send_error(&r->c, st, "client gave up");
        snprintf(what, cap, "server 127.0.0.1: %s of modules %s..: %s", step,
                 r->h->names[mods[0]], r->c.what[0] ? r->c.what : tsafe_strerror(st));
    }
    return st;
}
