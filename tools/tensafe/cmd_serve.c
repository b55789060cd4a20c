/* `tensafe serve`: two-party HE-LoRA server on 127.0.0.1. Options, the
 * adapter, the socket, signals and printing; the protocol (framing, hello,
 * rounds, key rotation) is the library's session (tensafe/lora_session.h,
 * docs/PROTOCOL.md). One connection at a time. */
#include <errno.h>
#include <getopt.h> /* struct option: opts_getopt runs getopt_long */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include <jansson.h>
#include <sodium.h>

#include "clock.h"
#include "commands.h"
#include "io.h"
#include "net_socket.h"

static const char k_serve_help[] =
    "usage: tensafe serve --adapter DIR|PKG [--trusted-key HEX|FILE] --module NAME[,NAME...]\n"
    "                     [--mode sealed-private|sealed --semi-honest|plain-zero-moai]\n"
    "                     [--port P] [--port-file F] [--once | --requests K] [--timeout S]\n"
    "                     [--accept-timeout S] [--allow-unsigned] [--backend cpu|cuda]\n"
    "                     [--x-bits X --a-bits A --b-bits B]           (sealed modes)\n"
    "                     [--rounding-key FILE]                      (sealed-private)\n"
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
    "  sealed modes (the plan is derived from the shapes; the client must be given\n"
    "  the same widths, the hello does not carry them):\n"
    "  --x-bits X, --a-bits A, --b-bits B   fixed-point widths of x, A and B\n"
    "                      (default 13, 14, 13: docs/PROTOCOL.md)\n"
    "  --rounding-key FILE  sealed-private: the secret (32 bytes, raw or 64 hex digits)\n"
    "                      that keys the server's rounding of B; keep it across restarts\n"
    "                      so that every run rounds the adapter alike (default: a new\n"
    "                      random key per run; e.g. head -c 32 /dev/urandom > FILE)\n"
    "  plain-zero-moai only:\n"
    "  --preset NAME       core preset instead of the planner (--precision P, default 1e-6)\n"
    "  --max-abs X         bound on the clients' |x| (default 8)\n"
    "The protocol has no authentication or transport encryption (docs/PROTOCOL.md).\n";

typedef struct {
    const char *adapter, *key, *modules, *preset, *port_file, *mode_name, *backend_name,
        *rounding_key;
    uint32_t port, requests, x_bits, a_bits, b_bits;
    double precision, max_abs, timeout, accept_timeout;
    int once, allow_unsigned, json, semi_honest, requests_seen, precision_seen, plain_opts,
        bits_seen;
    io_mode mode;
} serve_opts;

enum {
    O_ADAPTER = 256, O_KEY, O_MODULE, O_PORT, O_PORT_FILE, O_PRESET, O_PRECISION, O_MAX_ABS,
    O_ONCE, O_REQUESTS, O_TIMEOUT, O_ACCEPT_TIMEOUT, O_UNSIGNED, O_MODE, O_BACKEND, O_JSON,
    O_SEMI_HONEST, O_X_BITS, O_A_BITS, O_B_BITS, O_ROUNDING_KEY
};

static const struct option k_serve_long[] = {
    {"adapter", required_argument, NULL, O_ADAPTER},
    {"trusted-key", required_argument, NULL, O_KEY},
    {"module", required_argument, NULL, O_MODULE},
    {"port", required_argument, NULL, O_PORT},
    {"port-file", required_argument, NULL, O_PORT_FILE},
    {"preset", required_argument, NULL, O_PRESET},
    {"precision", required_argument, NULL, O_PRECISION},
    {"max-abs", required_argument, NULL, O_MAX_ABS},
    {"once", no_argument, NULL, O_ONCE},
    {"requests", required_argument, NULL, O_REQUESTS},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"accept-timeout", required_argument, NULL, O_ACCEPT_TIMEOUT},
    {"allow-unsigned", no_argument, NULL, O_UNSIGNED},
    {"mode", required_argument, NULL, O_MODE},
    {"backend", required_argument, NULL, O_BACKEND},
    {"json", no_argument, NULL, O_JSON},
    {"semi-honest", no_argument, NULL, O_SEMI_HONEST},
    {"x-bits", required_argument, NULL, O_X_BITS},
    {"a-bits", required_argument, NULL, O_A_BITS},
    {"b-bits", required_argument, NULL, O_B_BITS},
    {"rounding-key", required_argument, NULL, O_ROUNDING_KEY},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* One option's value into o (0, 2 on a bad value). */
static int serve_opt(void *ctx, int c, const char *v)
{
    serve_opts *o = ctx;
    const char *n = "serve";
    switch (c) {
    case O_ADAPTER: o->adapter = v; return 0;
    case O_KEY: o->key = v; return 0;
    case O_MODULE: o->modules = v; return 0;
    case O_PORT: return opts_value(n, "--port", OPT_U32, v, &o->port);
    case O_PORT_FILE: o->port_file = v; return 0;
    case O_PRESET: o->preset = v; o->plain_opts = 1; return 0;
    case O_PRECISION:
        o->precision_seen = o->plain_opts = 1;
        return opts_value(n, "--precision", OPT_DOUBLE, v, &o->precision);
    case O_MAX_ABS:
        o->plain_opts = 1;
        return opts_value(n, "--max-abs", OPT_DOUBLE, v, &o->max_abs);
    case O_ONCE: o->once = 1; return 0;
    case O_REQUESTS:
        o->requests_seen = 1;
        return opts_value(n, "--requests", OPT_U32, v, &o->requests);
    case O_TIMEOUT: return opts_value(n, "--timeout", OPT_DOUBLE, v, &o->timeout);
    case O_ACCEPT_TIMEOUT:
        return opts_value(n, "--accept-timeout", OPT_DOUBLE, v, &o->accept_timeout);
    case O_UNSIGNED: o->allow_unsigned = 1; return 0;
    case O_MODE: o->mode_name = v; return 0;
    case O_BACKEND: o->backend_name = v; return 0;
    case O_JSON: o->json = 1; return 0;
    case O_SEMI_HONEST: o->semi_honest = 1; return 0;
    case O_X_BITS: o->bits_seen = 1; return opts_value(n, "--x-bits", OPT_U32, v, &o->x_bits);
    case O_A_BITS: o->bits_seen = 1; return opts_value(n, "--a-bits", OPT_U32, v, &o->a_bits);
    case O_B_BITS: o->bits_seen = 1; return opts_value(n, "--b-bits", OPT_U32, v, &o->b_bits);
    case O_ROUNDING_KEY: o->rounding_key = v; return 0;
    }
    return 2;
}

/* The options' combinations (2 after a usage line). */
static int serve_check(serve_opts *o)
{
    if (!o->adapter || !o->modules)
        return tool_usage("serve: --adapter and --module are required");
    if (o->port > 65535)
        return tool_usage("serve: --port must be 0..65535");
    if (o->once && o->requests_seen)
        return tool_usage("serve: give --once or --requests, not both");
    if (o->requests_seen && o->requests == 0)
        return tool_usage("serve: --requests must be at least 1");
    if (o->preset && o->precision_seen)
        return tool_usage("serve: give --preset or --precision, not both");
    if (!(o->max_abs > 0) || !(o->precision > 0) || !(o->timeout > 0) || o->accept_timeout < 0)
        return tool_usage("serve: --max-abs, --precision and --timeout must be positive");
    if (io_mode_parse(o->mode_name, &o->mode) || o->mode == IO_MODE_LOCAL)
        return tool_usage("serve: --mode must be sealed-private, sealed or plain-zero-moai, not "
                          "'%s'",
                          o->mode_name);
    int rc = io_mode_consent("serve", o->mode, o->semi_honest);
    if (rc)
        return rc;
    if (o->mode != IO_MODE_PLAIN_ZERO_MOAI && o->plain_opts)
        return tool_usage("serve: --preset, --precision and --max-abs set the CKKS plan of "
                          "--mode plain-zero-moai; --mode %s derives its plan from the shapes",
                          o->mode_name);
    if (o->rounding_key && o->mode != IO_MODE_SEALED_PRIVATE)
        return tool_usage("serve: --rounding-key keys sealed-private's rounding of B; "
                          "--mode %s does not round B",
                          o->mode_name);
    if (o->mode == IO_MODE_PLAIN_ZERO_MOAI && o->bits_seen)
        return tool_usage("serve: --x-bits, --a-bits and --b-bits set the sealed plan; "
                          "--mode plain-zero-moai plans with --precision");
    return 0;
}

static int serve_parse(int argc, char **argv, serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode_name = "sealed-private";
    o->backend_name = "cpu";
    o->port = 7433;
    o->precision = 1e-6;
    o->max_abs = 8.0;
    o->timeout = 30;
    int rc = opts_getopt("serve", argc, argv, k_serve_long, serve_opt, o);
    return rc ? rc : serve_check(o);
}

static tsafe_session_protocol protocol_of(io_mode m)
{
    return m == IO_MODE_SEALED            ? TSAFE_SESSION_SEALED
           : m == IO_MODE_PLAIN_ZERO_MOAI ? TSAFE_SESSION_PLAIN_ZERO_MOAI
                                          : TSAFE_SESSION_SEALED_PRIVATE;
}

/* What the server holds while it serves. */
typedef struct {
    const serve_opts *o;
    tsafe_lora_adapter *ad;
    io_modules *m;
    tsafe_lora_plan plan; /* plain-zero-moai */
    tsafe_session_service *svc;
    uint64_t requests_left; /* UINT64_MAX: no limit */
    uint64_t he_ops;
    char what[4200];
} serve_state;

/* --rounding-key FILE: 32 raw bytes or 64 hex digits (a newline may
 * follow), set as the process's sealed rounding key. */
static tsafe_status set_rounding_key(const char *path, char *what, size_t cap)
{
    uint8_t *buf = NULL, key[32];
    size_t len = 0, got = 0;
    tsafe_status st = io_read_file(path, 256, &buf, &len);
    if (st == TSAFE_OK) {
        while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
            len--;
        if (len == 32)
            memcpy(key, buf, 32);
        else if (len != 64 || sodium_hex2bin(key, 32, (const char *)buf, 64, NULL, &got, NULL) ||
                 got != 32)
            st = TSAFE_E_FORMAT;
    }
    if (buf)
        sodium_memzero(buf, len);
    free(buf);
    if (st == TSAFE_OK)
        st = tsafe_sealed_set_rounding_key(key);
    sodium_memzero(key, sizeof key);
    if (st != TSAFE_OK)
        snprintf(what, cap, "serve: --rounding-key '%s' (32 bytes, raw or 64 hex digits)", path);
    return st;
}

/* The adapter's modules as a session service. */
static tsafe_status serve_service(serve_state *S, const tsafe_backend_factory *backend)
{
    const serve_opts *o = S->o;
    int plain = o->mode == IO_MODE_PLAIN_ZERO_MOAI;
    tsafe_status st;
    if (o->rounding_key &&
        (st = set_rounding_key(o->rounding_key, S->what, sizeof S->what)) != TSAFE_OK)
        return st;
    if ((st = io_load_adapter(o->adapter, o->key, &S->ad, S->what, sizeof S->what)) != TSAFE_OK ||
        (st = io_require_signed(S->ad, "serve", o->allow_unsigned, S->what, sizeof S->what)) !=
            TSAFE_OK ||
        (st = io_resolve_modules_ex(S->ad, o->modules, plain, S->m, S->what, sizeof S->what)) !=
            TSAFE_OK)
        return st;
    if (plain && (st = io_make_plan(o->preset, S->m, o->max_abs, o->precision, &S->plan, S->what,
                                    sizeof S->what)) != TSAFE_OK)
        return st;
    tsafe_session_module mods[IO_MAX_MODULES];
    for (size_t i = 0; i < S->m->n; i++) {
        const tsafe_lora_module_info *mi = &S->m->info[i];
        mods[i] = (tsafe_session_module){mi->name,           mi->A,          mi->B,
                                         (uint32_t)mi->in_dim, (uint32_t)mi->rank,
                                         (uint32_t)mi->out_dim, (float)mi->scale};
    }
    tsafe_session_service_opts so = {.protocol = protocol_of(o->mode),
                                     /* HELLO v3 for a whole model's modules */
                                     .per_query = S->m->several_widths ||
                                                  !strcmp(o->modules, "all"),
                                     .plain_plan = plain ? &S->plan : NULL,
                                     .backend = backend};
    so.sealed = (tsafe_sealed_opts){.x_bits = o->x_bits, .a_bits = o->a_bits,
                                    .b_bits = o->b_bits,
                                    .semi_honest = o->mode == IO_MODE_SEALED};
    st = tsafe_session_service_create(&so, mods, S->m->n, &S->svc);
    if (st != TSAFE_OK)
        snprintf(S->what, sizeof S->what, "serve: prepare the modules for --mode %s (--backend %s)",
                 o->mode_name, o->backend_name);
    return st;
}

static void print_listening(const serve_state *S, uint16_t bound)
{
    const io_modules *m = S->m;
    const tsafe_lora_plan *p = &S->plan;
    if (S->o->mode == IO_MODE_PLAIN_ZERO_MOAI) {
        printf("listening on 127.0.0.1:%u -- mode plain-zero-moai (the client can read the "
               "adapter's A), plan %s (N=%u, log2 Q %.1f <= %u), %zu module%s, d_in %u, |x| <= "
               "%g\n",
               bound, p->name, 1u << p->params.log_n, p->log2_q, p->max_log2_q, m->n,
               m->n == 1 ? "" : "s", m->d_in, p->max_abs_x);
        return;
    }
    for (size_t w = 0; w < tsafe_session_service_widths(S->svc); w++) {
        tsafe_sealed_plan sp;
        size_t nw = 0;
        if (tsafe_session_service_plan(S->svc, w, &sp, &nw) != TSAFE_OK)
            continue;
        printf("%s127.0.0.1:%u -- mode %s (N=%u, t=2^%u; x %u, A %u bits; model rel error "
               "%.1e), %zu module%s, d_in %u\n",
               w ? "  and on " : "listening on ", bound, S->o->mode_name, 1u << sp.r1.log_n,
               sp.r1.t_bits, sp.x_bits, sp.a_bits, sp.expected_rel_error, nw,
               nw == 1 ? "" : "s", sp.d_in);
    }
}

/* One connection through a server session. Returns 0 on success. */
static int serve_one(serve_state *S, int fd, unsigned session)
{
    const int v3 = tsafe_session_service_hello_version(S->svc) == 3;
    const int plain = S->o->mode == IO_MODE_PLAIN_ZERO_MOAI;
    tsafe_session_limits lim = {.max_tokens = S->requests_left == UINT64_MAX ? 0
                                                                             : S->requests_left};
    tsafe_session_server *s = NULL;
    net_conn c = {fd, 0, 0};
    tsafe_session_transport t = net_transport(&c);
    double t0 = tsafe_now_ms();
    tsafe_status st = tsafe_session_server_create(S->svc, &lim, &s);
    if (st == TSAFE_OK)
        st = tsafe_session_server_run(s, &t);
    tsafe_session_stats ss;
    tsafe_session_server_stats(s, &ss);
    S->he_ops += ss.he.he_ops;
    if (S->requests_left != UINT64_MAX)
        S->requests_left -= ss.tokens < S->requests_left ? ss.tokens : S->requests_left;
    if (st != TSAFE_OK) {
        char what[700];
        snprintf(what, sizeof what, "serve: session %u: %s", session,
                 s ? tsafe_session_server_what(s) : "create");
        tsafe_session_server_free(s);
        return tool_fail(what, st);
    }
    if (ss.limit_reached)
        printf("session %u: refused %s %llu (--requests limit reached)\n", session,
               plain ? "request" : "token", (unsigned long long)ss.tokens + 1);
    const char *unit = plain ? "request" : v3 ? "query" : "token";
    const char *units = plain ? "requests" : v3 ? "queries" : "tokens";
    double per = ss.tokens ? ss.work_us / 1e3 / (double)ss.tokens : 0.0;
    if (plain)
        printf("session %u: %llu %s, %.1f KiB in, %.1f KiB out, %.3f ms/%s of HE work, %.1f ms "
               "total\n",
               session, (unsigned long long)ss.tokens, ss.tokens == 1 ? unit : units,
               (double)c.bytes_in / 1024.0, (double)c.bytes_out / 1024.0, per, unit,
               tsafe_now_ms() - t0);
    else
        printf("session %u (%s): %llu %s, %.1f KiB in, %.1f KiB out, %.3f ms/%s of HE work "
               "(+%.3f done while waiting for the client), %.1f ms total\n",
               session, S->o->mode_name, (unsigned long long)ss.tokens,
               ss.tokens == 1 ? unit : units, (double)c.bytes_in / 1024.0,
               (double)c.bytes_out / 1024.0, per, unit,
               ss.tokens ? ss.ahead_us / 1e3 / (double)ss.tokens : 0.0, tsafe_now_ms() - t0);
    fflush(stdout);
    tsafe_session_server_free(s);
    return 0;
}

static int write_port_file(const char *path, uint16_t bound)
{
    char pbuf[16], tmp[4200];
    int pn = snprintf(pbuf, sizeof pbuf, "%u\n", bound);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    tsafe_status st = io_write_file(tmp, pbuf, (size_t)pn, 0644);
    if (st != TSAFE_OK || rename(tmp, path) != 0) {
        char what[4300];
        snprintf(what, sizeof what, "write port file '%s'", path);
        return tool_fail(what, st ? st : TSAFE_E_IO);
    }
    return 0;
}

/* Accepts and serves connections one at a time until a signal, --once or
 * the --requests limit; *sessions and *failures count them. */
static int serve_loop(serve_state *S, int lfd, unsigned *sessions, int *failures)
{
    while (!net_stop) {
        struct pollfd pfd = {lfd, POLLIN, 0};
        double at = S->o->accept_timeout;
        int pr = poll(&pfd, 1, at > 0 ? (int)(at * 1000) : -1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            snprintf(S->what, sizeof S->what, "serve: no client connected within %g s", at);
            return tool_fail(S->what, TSAFE_E_IO);
        }
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            snprintf(S->what, sizeof S->what, "serve: accept: %s", strerror(errno));
            return tool_fail(S->what, TSAFE_E_IO);
        }
        net_set_timeouts(cfd, S->o->timeout);
        if (serve_one(S, cfd, ++*sessions) != 0)
            ++*failures;
        close(cfd);
        if (S->o->once || S->requests_left == 0)
            break;
    }
    return 0;
}

static int serve_run(serve_state *S)
{
    const serve_opts *o = S->o;
    const tsafe_backend_factory *backend = NULL;
    tsafe_status st = io_backend_factory(o->backend_name, &backend, S->what, sizeof S->what);
    if (st != TSAFE_OK)
        return st == TSAFE_E_ARG ? tool_usage("serve: %s", S->what) : tool_fail(S->what, st);
    if ((st = serve_service(S, backend)) != TSAFE_OK)
        return tool_fail(S->what, st);
    uint16_t bound = 0;
    int lfd = -1;
    if ((st = net_listen_local(o->port, &bound, &lfd, S->what, sizeof S->what)) != TSAFE_OK)
        return tool_fail(S->what, st);
    net_install_signals();
    print_listening(S, bound);
    io_origin_text(S->ad, S->what, sizeof S->what);
    printf("adapter: %s\nbackend: %s\n", S->what, o->backend_name);
    fflush(stdout);
    unsigned sessions = 0;
    int failures = 0;
    int rc = o->port_file ? write_port_file(o->port_file, bound) : 0;
    if (rc == 0)
        rc = serve_loop(S, lfd, &sessions, &failures);
    close(lfd);
    if (rc)
        return rc;
    printf("served %u session%s (%llu HE products), %d failed\n", sessions,
           sessions == 1 ? "" : "s", (unsigned long long)S->he_ops, failures);
    if (o->json)
        io_json_emit(json_pack("{s:s, s:i, s:i, s:i, s:I}", "mode", o->mode_name, "port",
                               (int)bound, "sessions", (int)sessions, "failed", failures,
                               "he_products", (json_int_t)S->he_ops));
    return failures ? 1 : 0;
}

int cmd_serve(int argc, char **argv)
{
    serve_opts o;
    int rc = serve_parse(argc, argv, &o);
    if (rc == OPTS_HELP) {
        fputs(k_serve_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (o.json && io_reserve_stdout() != 0)
        return tool_fail("serve: standard output for --json", TSAFE_E_IO);
    serve_state S;
    memset(&S, 0, sizeof S);
    S.o = &o;
    S.requests_left = o.requests_seen ? o.requests : UINT64_MAX;
    if (!(S.m = calloc(1, sizeof *S.m)))
        return tool_fail("serve", TSAFE_E_NOMEM);
    rc = serve_run(&S);
    tsafe_session_service_free(S.svc);
    free(S.m);
    tsafe_lora_adapter_free(S.ad);
    return rc;
}
