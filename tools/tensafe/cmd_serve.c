/* `tensafe serve`: two-party HE-LoRA server on 127.0.0.1. Options, the
 * adapters, the socket and printing; the protocol (framing, hello, rounds,
 * key rotation) is the library's session (tensafe/lora_session.h,
 * docs/PROTOCOL.md), the concurrency serve_loop.c (docs/SERVING.md). */
#include <getopt.h> /* struct option: opts_getopt runs getopt_long */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include <jansson.h>
#include <sodium.h>

#include "tensafe/lora_registry.h"

#include "clock.h"
#include "commands.h"
#include "io.h"
#include "net_socket.h"
#include "serve_loop.h"

#define SERVE_MAX_ADAPTERS 16

static const char k_serve_help[] =
    "usage: tensafe serve --adapter [ID=]DIR|PKG... [--trusted-key HEX|FILE] --module NAME[,...]\n"
    "                     [--mode sealed-private|sealed --semi-honest|plain-zero-moai]\n"
    "                     [--port P] [--port-file F] [--once | --requests K] [--timeout S]\n"
    "                     [--accept-timeout S] [--allow-unsigned] [--backend cpu|cuda]\n"
    "                     [--workers N] [--max-sessions N] [--max-message BYTES] [--unchecked-shares]\n"
    "                     [--idle-timeout S] [--message-timeout S] [--send-buffer BYTES]\n"
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
    "Sessions are served concurrently (docs/SERVING.md): one event loop moves the bytes,\n"
    "a pool of workers runs the HE rounds; SIGTERM or SIGINT drains (no new sessions,\n"
    "tokens in flight finish, sessions close between tokens) and exits 0.\n"
    "  --adapter ID=PKG    repeat for several adapters: a client names one with\n"
    "                      'tensafe client --adapter-id ID' (ids: 1-128 printable bytes,\n"
    "                      no space or '/'); one adapter without ID serves every client\n"
    "  --workers N         threads running the HE rounds (default: one per core)\n"
    "  --max-sessions N    sessions open at once (default 256); more get ERROR and close\n"
    "  --max-message B     largest frame accepted, bytes (default and cap 64 MiB)\n"
    "  --idle-timeout S    close a session with no byte in or out for S s (default --timeout)\n"
    "  --message-timeout S a whole frame must arrive, and an answer be read, within S s\n"
    "                      (default --timeout): a trickling peer cannot hold a session\n"
    "  --send-buffer B     kernel send buffer of each connection (SO_SNDBUF): what a\n"
    "                      peer that does not read may leave queued\n"
    "  --port P            TCP port (default 7433; 0 picks a free port)\n"
    "  --port-file F       write the port number to F once listening\n"
    "  --semi-honest       required with --mode sealed: accept that it protects only\n"
    "                      against peers that follow the protocol (docs/THREAT_MODEL.md)\n"
    "  --json              at exit, one JSON summary on stdout (progress: stderr)\n"
    "  --once              serve one client connection, then exit (status 1 if it failed)\n"
    "  --requests K        exit after K row requests (tokens) in total (each session may\n"
    "                      finish the count left when it opened)\n"
    "  --timeout S         default of --idle-timeout and --message-timeout (30 s)\n"
    "  --accept-timeout S  exit with an error when no client is connected for S seconds\n"
    "  --allow-unsigned    serve an unsigned PEFT directory (with a warning); without it\n"
    "                      only a signed package verified with --trusted-key is served\n"
    "  --backend cpu|cuda  where the server's ring work runs (default cpu; cuda needs a\n"
    "                      build with CUDA and a device; the bytes are the same)\n"
    "  sealed modes (the plan is derived from the shapes; the client must be given\n"
    "  the same widths, the hello does not carry them):\n"
    "  --x-bits X, --a-bits A, --b-bits B   fixed-point widths of x, A and B\n"
    "                      (default 13, 14, 13: docs/PROTOCOL.md)\n"
    "  --unchecked-shares  sealed-private without its checked shares (by default\n"
    "                      round 1 adds checked reads that round 2 folds into the\n"
    "                      output with fresh random matrices, so that a client that\n"
    "                      tampers with its share reads noise, not B): about 0.55x\n"
    "                      the server's time, but such a client reads B_q in rank + 1\n"
    "                      tokens; only for clients that follow the protocol\n"
    "                      (docs/MALICIOUS_CLIENT.md; clients need --unchecked-shares\n"
    "                      too). --checked-shares, the default, is accepted\n"
    "  --rounding-key FILE  sealed-private: the secret (32 bytes, raw or 64 hex digits)\n"
    "                      that keys the server's rounding of B; keep it across restarts\n"
    "                      so that every run rounds the adapter alike (default: a new\n"
    "                      random key per run; e.g. head -c 32 /dev/urandom > FILE)\n"
    "  plain-zero-moai only:\n"
    "  --preset NAME       core preset instead of the planner (--precision P, default 1e-6)\n"
    "  --max-abs X         bound on the clients' |x| (default 8)\n"
    "The protocol has no authentication or transport encryption (docs/PROTOCOL.md).\n";

typedef struct {
    const char *adapter[SERVE_MAX_ADAPTERS], *key, *modules, *preset, *port_file, *mode_name,
        *backend_name, *rounding_key;
    size_t n_adapters;
    uint32_t port, requests, x_bits, a_bits, b_bits, workers, max_sessions, max_message,
        send_buffer;
    double precision, max_abs, timeout, accept_timeout, idle_timeout, message_timeout;
    int once, allow_unsigned, json, semi_honest, requests_seen, precision_seen, plain_opts,
        bits_seen, too_many_adapters, checked, unchecked;
    io_mode mode;
} serve_opts;

enum {
    O_ADAPTER = 256, O_KEY, O_MODULE, O_PORT, O_PORT_FILE, O_PRESET, O_PRECISION, O_MAX_ABS,
    O_ONCE, O_REQUESTS, O_TIMEOUT, O_ACCEPT_TIMEOUT, O_UNSIGNED, O_MODE, O_BACKEND, O_JSON,
    O_SEMI_HONEST, O_X_BITS, O_A_BITS, O_B_BITS, O_ROUNDING_KEY, O_WORKERS, O_MAX_SESSIONS,
    O_MAX_MESSAGE, O_IDLE_TIMEOUT, O_MESSAGE_TIMEOUT, O_SEND_BUFFER, O_CHECKED, O_UNCHECKED
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
    {"checked-shares", no_argument, NULL, O_CHECKED},
    {"unchecked-shares", no_argument, NULL, O_UNCHECKED},
    {"workers", required_argument, NULL, O_WORKERS},
    {"max-sessions", required_argument, NULL, O_MAX_SESSIONS},
    {"max-message", required_argument, NULL, O_MAX_MESSAGE},
    {"idle-timeout", required_argument, NULL, O_IDLE_TIMEOUT},
    {"message-timeout", required_argument, NULL, O_MESSAGE_TIMEOUT},
    {"send-buffer", required_argument, NULL, O_SEND_BUFFER},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* One option's value into o (0, 2 on a bad value). */
static int serve_opt(void *ctx, int c, const char *v)
{
    serve_opts *o = ctx;
    const char *n = "serve";
    switch (c) {
    case O_ADAPTER:
        if (o->n_adapters == SERVE_MAX_ADAPTERS)
            o->too_many_adapters = 1;
        else
            o->adapter[o->n_adapters++] = v;
        return 0;
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
    case O_CHECKED: o->checked = 1; return 0;
    case O_UNCHECKED: o->unchecked = 1; return 0;
    case O_WORKERS: return opts_value(n, "--workers", OPT_U32, v, &o->workers);
    case O_MAX_SESSIONS: return opts_value(n, "--max-sessions", OPT_U32, v, &o->max_sessions);
    case O_MAX_MESSAGE: return opts_value(n, "--max-message", OPT_U32, v, &o->max_message);
    case O_SEND_BUFFER: return opts_value(n, "--send-buffer", OPT_U32, v, &o->send_buffer);
    case O_IDLE_TIMEOUT:
        return opts_value(n, "--idle-timeout", OPT_DOUBLE, v, &o->idle_timeout);
    case O_MESSAGE_TIMEOUT:
        return opts_value(n, "--message-timeout", OPT_DOUBLE, v, &o->message_timeout);
    }
    return 2;
}

/* The options' combinations (2 after a usage line). */
static int serve_check(serve_opts *o)
{
    if (!o->n_adapters || !o->modules)
        return tool_usage("serve: --adapter and --module are required");
    if (o->too_many_adapters)
        return tool_usage("serve: at most %d --adapter", SERVE_MAX_ADAPTERS);
    if (o->max_sessions == 0 || o->max_sessions > 65536 || o->workers > 1024 ||
        o->send_buffer > (1u << 30))
        return tool_usage("serve: --max-sessions must be 1..65536, --workers at most 1024, "
                          "--send-buffer at most 1 GiB");
    if (o->max_message && o->max_message < 1024)
        return tool_usage("serve: --max-message must be at least 1024 bytes");
    if (o->idle_timeout < 0 || o->message_timeout < 0)
        return tool_usage("serve: --idle-timeout and --message-timeout must be positive");
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
    return io_share_checks("serve", o->mode, o->checked, o->unchecked);
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
    o->max_sessions = 256;
    o->idle_timeout = o->message_timeout = -1; /* unset: --timeout */
    int rc = opts_getopt("serve", argc, argv, k_serve_long, serve_opt, o);
    if (o->idle_timeout == -1)
        o->idle_timeout = o->timeout;
    if (o->message_timeout == -1)
        o->message_timeout = o->timeout;
    return rc ? rc : serve_check(o);
}

static tsafe_session_protocol protocol_of(io_mode m)
{
    return m == IO_MODE_SEALED            ? TSAFE_SESSION_SEALED
           : m == IO_MODE_PLAIN_ZERO_MOAI ? TSAFE_SESSION_PLAIN_ZERO_MOAI
                                          : TSAFE_SESSION_SEALED_PRIVATE;
}

/* One served adapter. */
typedef struct {
    char id[TSAFE_SESSION_MAX_ADAPTER_ID + 1]; /* "" when none */
    const char *path;
    tsafe_lora_adapter *ad;
    io_modules *m;
    tsafe_lora_plan plan; /* plain-zero-moai */
    tsafe_session_service *svc; /* the registry's once registered */
    tsafe_registry_ref *ref;    /* held while serving: metering */
} serve_adapter;

/* What the server holds while it serves. */
typedef struct {
    const serve_opts *o;
    serve_adapter a[SERVE_MAX_ADAPTERS];
    const tsafe_session_service *svcs[SERVE_MAX_ADAPTERS];
    size_t n;
    tsafe_registry *reg;  /* the adapters' services, their origins and metering */
    json_t *per_session; /* --json: one object per session */
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


/* "ID=PATH" (an id of printable bytes without '/' before the first '=')
 * or a plain PATH; a second adapter without an id is refused. */
static tsafe_status split_adapter(serve_adapter *a, const char *spec, char *what, size_t cap)
{
    const char *eq = strchr(spec, '=');
    size_t len = eq ? (size_t)(eq - spec) : 0;
    int is_id = eq && len && len <= TSAFE_SESSION_MAX_ADAPTER_ID && !memchr(spec, '/', len);
    for (size_t i = 0; is_id && i < len; i++)
        is_id = spec[i] > 0x20 && spec[i] < 0x7f;
    a->path = is_id ? eq + 1 : spec;
    if (is_id)
        memcpy(a->id, spec, len);
    a->id[is_id ? len : 0] = 0;
    if (!*a->path) {
        snprintf(what, cap, "serve: --adapter '%s': no path", spec);
        return TSAFE_E_ARG;
    }
    return TSAFE_OK;
}

/* Adapter a's modules as a session service. */
static tsafe_status serve_service(serve_state *S, serve_adapter *a,
                                  const tsafe_backend_factory *backend)
{
    const serve_opts *o = S->o;
    int plain = o->mode == IO_MODE_PLAIN_ZERO_MOAI;
    tsafe_status st;
    if (!(a->m = calloc(1, sizeof *a->m)))
        return TSAFE_E_NOMEM;
    if ((st = io_load_adapter(a->path, o->key, &a->ad, S->what, sizeof S->what)) != TSAFE_OK ||
        (st = io_require_signed(a->ad, "serve", o->allow_unsigned, S->what, sizeof S->what)) !=
            TSAFE_OK ||
        (st = io_resolve_modules_ex(a->ad, o->modules, plain, a->m, S->what, sizeof S->what)) !=
            TSAFE_OK)
        return st;
    if (plain && (st = io_make_plan(o->preset, a->m, o->max_abs, o->precision, &a->plan, S->what,
                                    sizeof S->what)) != TSAFE_OK)
        return st;
    tsafe_session_module mods[IO_MAX_MODULES];
    for (size_t i = 0; i < a->m->n; i++) {
        const tsafe_lora_module_info *mi = &a->m->info[i];
        mods[i] = (tsafe_session_module){mi->name,           mi->A,          mi->B,
                                         (uint32_t)mi->in_dim, (uint32_t)mi->rank,
                                         (uint32_t)mi->out_dim, (float)mi->scale};
    }
    tsafe_session_service_opts so = {.protocol = protocol_of(o->mode),
                                     /* HELLO v3 for a whole model's modules */
                                     .per_query = a->m->several_widths ||
                                                  !strcmp(o->modules, "all"),
                                     .plain_plan = plain ? &a->plan : NULL,
                                     .backend = backend,
                                     .adapter_id = a->id};
    so.sealed = (tsafe_sealed_opts){.x_bits = o->x_bits, .a_bits = o->a_bits,
                                    .b_bits = o->b_bits,
                                    .semi_honest = o->mode == IO_MODE_SEALED,
                                    .unchecked_shares = (uint32_t)o->unchecked};
    st = tsafe_session_service_create(&so, mods, a->m->n, &a->svc);
    if (st != TSAFE_OK)
        snprintf(S->what, sizeof S->what,
                 "serve: prepare the modules of '%s' for --mode %s (--backend %s)", a->path,
                 o->mode_name, o->backend_name);
    return st;
}

static void destroy_service(void *svc) { tsafe_session_service_free(svc); }

/* Adapter a's service into the registry (slot: its id, or "default"),
 * with the adapter's origin (the registry refuses unsigned ones unless
 * --allow-unsigned); a reference held for metering. */
static tsafe_status serve_register(serve_state *S, serve_adapter *a)
{
    tsafe_lora_origin org;
    const char *slot = a->id[0] ? a->id : "default";
    tsafe_status st = tsafe_lora_adapter_origin(a->ad, &org);
    tsafe_registry_meta meta = {.adapter_id = slot, .price_per_1k_tokens = 0, .origin = &org};
    if (st == TSAFE_OK &&
        (st = tsafe_registry_put(S->reg, slot, a->svc, destroy_service, &meta)) == TSAFE_OK)
        st = tsafe_registry_acquire(S->reg, slot, &a->ref);
    if (st == TSAFE_OK)
        a->svc = NULL; /* the registry's; served through the held reference */
    else
        snprintf(S->what, sizeof S->what, "serve: register adapter '%s'", slot);
    return st;
}

/* Every --adapter as a service; ids required and distinct when several. */
static tsafe_status serve_services(serve_state *S, const tsafe_backend_factory *backend)
{
    const serve_opts *o = S->o;
    tsafe_status st;
    if (o->rounding_key &&
        (st = set_rounding_key(o->rounding_key, S->what, sizeof S->what)) != TSAFE_OK)
        return st;
    if ((st = tsafe_registry_create(&S->reg)) != TSAFE_OK ||
        (st = tsafe_registry_set_allow_unsigned(S->reg, o->allow_unsigned)) != TSAFE_OK)
        return st;
    for (S->n = 0; S->n < o->n_adapters; S->n++) {
        serve_adapter *a = &S->a[S->n];
        if ((st = split_adapter(a, o->adapter[S->n], S->what, sizeof S->what)) != TSAFE_OK)
            return st;
        for (size_t k = 0; k < S->n; k++)
            if (!a->id[0] || !strcmp(a->id, S->a[k].id)) {
                snprintf(S->what, sizeof S->what,
                         "serve: several adapters need distinct ids: --adapter ID=PATH ('%s')",
                         o->adapter[S->n]);
                return TSAFE_E_ARG;
            }
        if (S->n == 1 && !S->a[0].id[0]) {
            snprintf(S->what, sizeof S->what,
                     "serve: several adapters need distinct ids: --adapter ID=PATH ('%s')",
                     o->adapter[0]);
            return TSAFE_E_ARG;
        }
        if ((st = serve_service(S, a, backend)) != TSAFE_OK ||
            (st = serve_register(S, a)) != TSAFE_OK)
            return st;
        S->svcs[S->n] = tsafe_registry_ref_object(a->ref);
    }
    return TSAFE_OK;
}

static void print_listening(const serve_state *S, const serve_adapter *a, uint16_t bound)
{
    const io_modules *m = a->m;
    const tsafe_lora_plan *p = &a->plan;
    if (a->id[0])
        printf("adapter id '%s': ", a->id);
    if (S->o->mode == IO_MODE_PLAIN_ZERO_MOAI) {
        printf("listening on 127.0.0.1:%u -- mode plain-zero-moai (the client can read the "
               "adapter's A), plan %s (N=%u, log2 Q %.1f <= %u), %zu module%s, d_in %u, |x| <= "
               "%g\n",
               bound, p->name, 1u << p->params.log_n, p->log2_q, p->max_log2_q, m->n,
               m->n == 1 ? "" : "s", m->d_in, p->max_abs_x);
        return;
    }
    const tsafe_session_service *svc = tsafe_registry_ref_object(a->ref);
    for (size_t w = 0; w < tsafe_session_service_widths(svc); w++) {
        tsafe_sealed_plan sp;
        size_t nw = 0;
        if (tsafe_session_service_plan(svc, w, &sp, &nw) != TSAFE_OK)
            continue;
        printf("%s127.0.0.1:%u -- mode %s (N=%u, t=2^%u; x %u, A %u bits; model rel error "
               "%.1e), %zu module%s, d_in %u\n",
               w ? "  and on " : "listening on ", bound, S->o->mode_name, 1u << sp.r1.log_n,
               sp.r1.t_bits, sp.x_bits, sp.a_bits, sp.expected_rel_error, nw,
               nw == 1 ? "" : "s", sp.d_in);
    }
}

/* One session's metering line (and JSON object), as it ends. */
static void on_session_end(void *user, const serve_session_end *e)
{
    serve_state *S = user;
    const tsafe_session_server *s = e->s;
    tsafe_session_stats ss;
    tsafe_session_server_stats(s, &ss);
    const char *id = tsafe_session_server_adapter_id(s);
    int plain = S->o->mode == IO_MODE_PLAIN_ZERO_MOAI;
    int v3 = S->n && tsafe_session_service_hello_version(S->svcs[0]) == 3;
    const char *unit = plain ? "request" : v3 ? "query" : "token";
    const char *units = plain ? "requests" : v3 ? "queries" : "tokens";
    double per = ss.tokens ? ss.work_us / 1e3 / (double)ss.tokens : 0.0;
    double ahead = ss.tokens ? ss.ahead_us / 1e3 / (double)ss.tokens : 0.0;
    tsafe_status st = tsafe_session_server_status(s);
    if (st != TSAFE_OK)
        fprintf(stderr, "serve: session %u: %s (%s)\n", e->id, tsafe_session_server_what(s),
                tsafe_status_name(st));
    if (ss.limit_reached)
        printf("session %u: refused %s %llu (--requests limit reached)\n", e->id,
               plain ? "request" : "token", (unsigned long long)ss.tokens + 1);
    printf("session %u (%s%s%s): %llu %s, %.1f KiB in, %.1f KiB out, %.3f ms/%s of HE work "
           "(+%.3f done while waiting for the client), %.1f ms total\n",
           e->id, S->o->mode_name, id[0] ? ", adapter " : "", id,
           (unsigned long long)ss.tokens, ss.tokens == 1 ? unit : units,
           (double)e->bytes_in / 1024.0, (double)e->bytes_out / 1024.0, per, unit, ahead, e->ms);
    fflush(stdout);
    for (size_t i = 0; i < S->n; i++)
        if (!strcmp(S->a[i].id, id)) {
            st = tsafe_registry_meter(S->a[i].ref, ss.tokens, ss.he.he_ops, e->bytes_in,
                                      e->bytes_out);
            (void)st; /* counters only */
        }
    st = tsafe_session_server_status(s);
    if (S->per_session)
        json_array_append_new(
            S->per_session,
            json_pack("{s:i, s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:s}", "id", (int)e->id,
                      "adapter", id, "tokens", (json_int_t)ss.tokens, "bytes_in",
                      (json_int_t)e->bytes_in, "bytes_out", (json_int_t)e->bytes_out,
                      "work_ms_per_token", per, "ahead_ms_per_token", ahead, "ms", e->ms,
                      "status", st == TSAFE_OK ? "ok" : tsafe_status_name(st)));
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

static serve_limits limits_of(const serve_opts *o)
{
    serve_limits l = {.workers = o->workers,
                      .max_sessions = o->max_sessions,
                      .max_message = o->max_message,
                      .idle_timeout = o->idle_timeout,
                      .message_timeout = o->message_timeout,
                      .accept_timeout = o->accept_timeout,
                      .send_buffer = (int)o->send_buffer,
                      .once = o->once,
                      .requests = o->requests_seen ? o->requests : 0};
    return l;
}

/* The registry's per-adapter metering (tokens, HE products, bytes) as
 * JSON; null when it cannot be read. */
static json_t *registry_json(tsafe_registry *reg)
{
    char *text = NULL;
    json_t *j = tsafe_registry_metering_json(reg, &text) == TSAFE_OK
                    ? json_loads(text, 0, NULL)
                    : NULL;
    free(text);
    return j ? j : json_null();
}

static void print_summary(serve_state *S, const serve_totals *t, uint16_t bound)
{
    printf("served %u session%s (%llu HE products), %u failed", t->sessions,
           t->sessions == 1 ? "" : "s", (unsigned long long)t->he_ops, t->failed);
    if (t->refused)
        printf(", %u refused (--max-sessions)", t->refused);
    if (t->probes)
        printf(", %u connection%s closed before a byte (health checks)", t->probes,
               t->probes == 1 ? "" : "s");
    if (t->drained)
        printf(", drained (%u closed between tokens)", t->closed_by_drain);
    printf("\n");
    if (S->o->json)
        io_json_emit(json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:I, s:I, s:o, s:o}",
                               "mode", S->o->mode_name, "port", (int)bound, "sessions",
                               (int)t->sessions, "failed", (int)t->failed, "refused",
                               (int)t->refused, "probes", (int)t->probes,
                               "closed_by_drain", (int)t->closed_by_drain, "drained",
                               t->drained, "tokens", (json_int_t)t->tokens, "he_products",
                               (json_int_t)t->he_ops, "per_session", json_incref(S->per_session),
                               "metering", registry_json(S->reg)));
}

static int serve_run(serve_state *S)
{
    const serve_opts *o = S->o;
    const tsafe_backend_factory *backend = NULL;
    tsafe_status st = io_backend_factory(o->backend_name, &backend, S->what, sizeof S->what);
    if (st != TSAFE_OK)
        return st == TSAFE_E_ARG ? tool_usage("serve: %s", S->what) : tool_fail(S->what, st);
    if ((st = serve_services(S, backend)) != TSAFE_OK)
        return st == TSAFE_E_ARG ? tool_usage("%s", S->what) : tool_fail(S->what, st);
    uint16_t bound = 0;
    int lfd = -1;
    if ((st = net_listen_local(o->port, &bound, &lfd, S->what, sizeof S->what)) != TSAFE_OK)
        return tool_fail(S->what, st);
    for (size_t i = 0; i < S->n; i++) {
        print_listening(S, &S->a[i], bound);
        io_origin_text(S->a[i].ad, S->what, sizeof S->what);
        printf("adapter: %s\n", S->what);
    }
    serve_limits lim = limits_of(o);
    printf("backend: %s\n", o->backend_name);
    fflush(stdout);
    int rc = o->port_file ? write_port_file(o->port_file, bound) : 0;
    if (rc) {
        close(lfd);
        return rc;
    }
    serve_totals t;
    rc = serve_loop_run(lfd, S->svcs, S->n, &lim, on_session_end, S, &t, S->what,
                        sizeof S->what);
    if (rc)
        return tool_fail(S->what, rc);
    print_summary(S, &t, bound);
    /* a drain ends cleanly whatever the sessions did (each failure is logged) */
    return t.failed && !t.drained ? 1 : 0;
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
    serve_state *S = calloc(1, sizeof *S);
    if (!S)
        return tool_fail("serve", TSAFE_E_NOMEM);
    S->o = &o;
    S->per_session = o.json ? json_array() : NULL;
    rc = serve_run(S);
    for (size_t i = 0; i < SERVE_MAX_ADAPTERS; i++) {
        tsafe_registry_release(S->a[i].ref);
        tsafe_session_service_free(S->a[i].svc); /* one the registry did not take */
        free(S->a[i].m);
    }
    tsafe_registry_free(S->reg); /* frees the registered services */
    for (size_t i = 0; i < SERVE_MAX_ADAPTERS; i++)
        tsafe_lora_adapter_free(S->a[i].ad);
    json_decref(S->per_session);
    free(S);
    return rc;
}
