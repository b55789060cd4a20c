/* `tensafe client`: the two-party HE-LoRA client of `tensafe serve` on
 * 127.0.0.1. Options, the input rows, the DP budget, the socket and
 * printing; the protocol is the library's client session
 * (tensafe/lora_session.h, docs/PROTOCOL.md). */
#include <getopt.h> /* struct option: opts_getopt runs getopt_long */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "clock.h"
#include "commands.h"
#include "io.h"
#include "net_socket.h"

/* Default total epsilon of one client session (one `tensafe client` run)
 * when --dp-budget is not given: a stated, fixed budget that refuses once
 * spent, instead of E x rows, which can never refuse. Why 8: docs/THREAT_MODEL.md
 * ("Differential privacy: the default budget"). */
#define DP_SESSION_EPS_DEFAULT 8.0

static const char k_client_help[] =
    "usage: tensafe client --port P --input X.f32 [--rows K] [--output D.f32]\n"
    "                      [--mode sealed-private|sealed --semi-honest|plain-zero-moai]\n"
    "                      [--dp-eps E --dp-clip C [--dp-delta D] [--dp-budget EPS] | --no-dp]\n"
    "                      [--x-bits X --a-bits A --b-bits B] [--unchecked-shares]\n"
    "                      [--timeout S] [--json] [--adapter-id ID]\n"
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
    "  --x-bits X, --a-bits A, --b-bits B   (sealed modes) the server's widths, when it\n"
    "                 was started with them (the hello does not carry them)\n"
    "  --unchecked-shares  (sealed-private) the plan of a server started with it:\n"
    "                 no checked reads (about 0.55x the server's time), but a client\n"
    "                 that tampers with its share reads the adapter (B_q in rank + 1\n"
    "                 tokens): only for clients that follow the protocol\n"
    "                 (docs/MALICIOUS_CLIENT.md). --checked-shares, the default,\n"
    "                 is accepted\n"
    "  --adapter-id ID  the adapter to be served, of a server started with\n"
    "                 --adapter ID=PKG (several adapters need it; docs/SERVING.md)\n"
    "  --timeout S    send/receive timeout (default 30 s)\n"
    "  --json         one JSON summary on stdout (other lines: stderr), with each\n"
    "                 row's wall time in ms (row_ms)\n"
    "'-' for X.f32 / D.f32: standard input / output.\n";

typedef struct {
    uint32_t port, rows, x_bits, a_bits, b_bits;
    const char *input, *output, *mode_name, *adapter_id;
    double dp_eps, dp_clip, dp_delta, dp_budget, timeout;
    int port_seen, rows_seen, eps_seen, clip_seen, delta_seen, budget_seen, bits_seen;
    int dp, no_dp, json, semi_honest, checked, unchecked;
    io_mode mode;
} client_opts;

enum {
    O_PORT = 256, O_INPUT, O_ROWS, O_OUTPUT, O_DP_EPS, O_DP_CLIP, O_DP_DELTA, O_DP_BUDGET,
    O_TIMEOUT, O_MODE, O_NO_DP, O_JSON, O_SEMI_HONEST, O_X_BITS, O_A_BITS, O_B_BITS,
    O_ADAPTER_ID, O_CHECKED, O_UNCHECKED
};

static const struct option k_client_long[] = {
    {"port", required_argument, NULL, O_PORT},
    {"input", required_argument, NULL, O_INPUT},
    {"rows", required_argument, NULL, O_ROWS},
    {"output", required_argument, NULL, O_OUTPUT},
    {"dp-eps", required_argument, NULL, O_DP_EPS},
    {"dp-clip", required_argument, NULL, O_DP_CLIP},
    {"dp-delta", required_argument, NULL, O_DP_DELTA},
    {"dp-budget", required_argument, NULL, O_DP_BUDGET},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"mode", required_argument, NULL, O_MODE},
    {"no-dp", no_argument, NULL, O_NO_DP},
    {"json", no_argument, NULL, O_JSON},
    {"semi-honest", no_argument, NULL, O_SEMI_HONEST},
    {"x-bits", required_argument, NULL, O_X_BITS},
    {"a-bits", required_argument, NULL, O_A_BITS},
    {"b-bits", required_argument, NULL, O_B_BITS},
    {"adapter-id", required_argument, NULL, O_ADAPTER_ID},
    {"checked-shares", no_argument, NULL, O_CHECKED},
    {"unchecked-shares", no_argument, NULL, O_UNCHECKED},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static int client_opt(void *ctx, int c, const char *v)
{
    client_opts *o = ctx;
    const char *n = "client";
    switch (c) {
    case O_PORT: o->port_seen = 1; return opts_value(n, "--port", OPT_U32, v, &o->port);
    case O_INPUT: o->input = v; return 0;
    case O_ROWS: o->rows_seen = 1; return opts_value(n, "--rows", OPT_U32, v, &o->rows);
    case O_OUTPUT: o->output = v; return 0;
    case O_DP_EPS: o->eps_seen = 1; return opts_value(n, "--dp-eps", OPT_DOUBLE, v, &o->dp_eps);
    case O_DP_CLIP:
        o->clip_seen = 1;
        return opts_value(n, "--dp-clip", OPT_DOUBLE, v, &o->dp_clip);
    case O_DP_DELTA:
        o->delta_seen = 1;
        return opts_value(n, "--dp-delta", OPT_DOUBLE, v, &o->dp_delta);
    case O_DP_BUDGET:
        o->budget_seen = 1;
        return opts_value(n, "--dp-budget", OPT_DOUBLE, v, &o->dp_budget);
    case O_TIMEOUT: return opts_value(n, "--timeout", OPT_DOUBLE, v, &o->timeout);
    case O_MODE: o->mode_name = v; return 0;
    case O_NO_DP: o->no_dp = 1; return 0;
    case O_JSON: o->json = 1; return 0;
    case O_SEMI_HONEST: o->semi_honest = 1; return 0;
    case O_X_BITS: o->bits_seen = 1; return opts_value(n, "--x-bits", OPT_U32, v, &o->x_bits);
    case O_A_BITS: o->bits_seen = 1; return opts_value(n, "--a-bits", OPT_U32, v, &o->a_bits);
    case O_B_BITS: o->bits_seen = 1; return opts_value(n, "--b-bits", OPT_U32, v, &o->b_bits);
    case O_ADAPTER_ID: o->adapter_id = v; return 0;
    case O_CHECKED: o->checked = 1; return 0;
    case O_UNCHECKED: o->unchecked = 1; return 0;
    }
    return 2;
}

/* DP options against the mode (2 after a usage line). */
static int client_check_dp(client_opts *o)
{
    if (o->eps_seen != o->clip_seen)
        return tool_usage("client: --dp-eps and --dp-clip go together");
    if ((o->delta_seen || o->budget_seen) && !o->eps_seen)
        return tool_usage("client: --dp-delta and --dp-budget need --dp-eps and --dp-clip");
    o->dp = o->eps_seen;
    if (o->dp && o->no_dp)
        return tool_usage("client: give --dp-eps/--dp-clip or --no-dp, not both");
    if (o->mode == IO_MODE_SEALED_PRIVATE && (o->dp || o->no_dp))
        return tool_usage("client: --mode sealed-private releases nothing decrypted to the "
                          "server: the DP options (--dp-*, --no-dp) apply to --mode sealed and "
                          "plain-zero-moai");
    if (o->mode == IO_MODE_PLAIN_ZERO_MOAI && o->no_dp)
        return tool_usage("client: --no-dp is for --mode sealed (plain-zero-moai releases "
                          "without noise unless --dp-eps is given)");
    if (o->mode == IO_MODE_SEALED && !o->dp && !o->no_dp)
        return tool_usage("client: --mode sealed releases u = A x to the server: give --dp-eps "
                          "E --dp-clip C for DP noise, or --no-dp to release it exactly");
    if (o->dp && (!(o->dp_eps > 0) || !(o->dp_clip > 0) || !(o->dp_delta > 0 && o->dp_delta < 1)))
        return tool_usage("client: --dp-eps and --dp-clip must be positive, --dp-delta in (0, 1)");
    return 0;
}

static int client_check(client_opts *o)
{
    if (!o->port_seen || !o->input)
        return tool_usage("client: --port and --input are required");
    if (o->port == 0 || o->port > 65535)
        return tool_usage("client: --port must be 1..65535");
    if (o->json && o->output && !strcmp(o->output, "-"))
        return tool_usage("client: --output - and --json both want standard output");
    if (io_mode_parse(o->mode_name, &o->mode) || o->mode == IO_MODE_LOCAL)
        return tool_usage("client: --mode must be sealed-private, sealed or plain-zero-moai, "
                          "not '%s'",
                          o->mode_name);
    int rc = io_mode_consent("client", o->mode, o->semi_honest);
    if (rc || (rc = client_check_dp(o)) != 0)
        return rc;
    if (o->mode == IO_MODE_PLAIN_ZERO_MOAI && o->bits_seen)
        return tool_usage("client: --x-bits, --a-bits and --b-bits are for the sealed modes");
    if ((rc = io_share_checks("client", o->mode, o->checked, o->unchecked)) != 0)
        return rc;
    if (!(o->timeout > 0))
        return tool_usage("client: --timeout must be positive");
    return 0;
}

static int client_parse(int argc, char **argv, client_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dp_delta = 1e-5;
    o->timeout = 30;
    o->mode_name = "sealed-private";
    int rc = opts_getopt("client", argc, argv, k_client_long, client_opt, o);
    return rc ? rc : client_check(o);
}

/* What one client run holds. */
typedef struct {
    const client_opts *o;
    net_conn c;
    tsafe_session_transport t;
    tsafe_session_client *s;
    tsafe_dp_session *dp;
    float *x, *out;
    double *row_ms;
    size_t count, rows;
    uint32_t d_in, total_out;
    char what[4200];
} client_run;

/* The session's DP accountant (before connecting: nothing is released
 * without it). */
static int client_dp(client_run *R)
{
    const client_opts *o = R->o;
    tsafe_dp_params dpp;
    memset(&dpp, 0, sizeof dpp);
    dpp.clip_norm = o->dp_clip;
    dpp.eps = o->dp_eps;
    dpp.delta = o->dp_delta;
    dpp.eps_total = o->budget_seen ? o->dp_budget : DP_SESSION_EPS_DEFAULT;
    dpp.delta_total = o->dp_delta;
    dpp.accountant = TSAFE_DP_ACCOUNTANT_GDP;
    tsafe_status st = tsafe_dp_session_create(&dpp, &R->dp);
    if (st != TSAFE_OK)
        return tool_fail("client: DP session (--dp-eps, --dp-clip, --dp-delta, --dp-budget)", st);
    return 0;
}

/* Refuses (ERROR to the server, then the line here) before anything is
 * released when the budget cannot cover every row. */
static int client_budget(client_run *R)
{
    tsafe_dp_stats ds;
    tsafe_status st = tsafe_dp_session_stats(R->dp, &ds);
    if (st != TSAFE_OK)
        snprintf(R->what, sizeof R->what, "client: DP session");
    else if (ds.releases_max < R->rows) {
        snprintf(R->what, sizeof R->what,
                 "client: %zu rows need %zu DP releases, the session budget eps %g (delta %g%s) "
                 "allows %llu at --dp-eps %g; send fewer rows (--rows) or set --dp-budget",
                 R->rows, R->rows, ds.eps_total, ds.delta_total,
                 R->o->budget_seen ? "" : ", the default", (unsigned long long)ds.releases_max,
                 R->o->dp_eps);
        st = TSAFE_E_BUDGET;
    }
    return st == TSAFE_OK ? 0 : st;
}

/* Ends the session with st: an ERROR to the server, the line here. */
static int client_refuse(client_run *R, tsafe_status st, const char *peer)
{
    tsafe_session_client_abort(R->s, st, peer);
    tsafe_status bye = tsafe_session_client_bye(R->s, &R->t); /* flushes the ERROR */
    (void)bye;
    return tool_fail(R->what, st);
}

/* The input rows against the announced d_in (and |x| bound of
 * plain-zero-moai). */
static int client_rows(client_run *R)
{
    const client_opts *o = R->o;
    uint32_t d = R->d_in;
    if (R->count == 0 || R->count % d) {
        snprintf(R->what, sizeof R->what,
                 "input '%s': %zu float32 values is not a positive multiple of the server's "
                 "d_in=%u",
                 o->input, R->count, d);
        return client_refuse(R, TSAFE_E_SHAPE, "client input does not match d_in");
    }
    R->rows = R->count / d;
    if (o->rows_seen) {
        if (o->rows == 0 || o->rows > R->rows) {
            snprintf(R->what, sizeof R->what, "--rows %u: input '%s' has %zu row%s", o->rows,
                     o->input, R->rows, R->rows == 1 ? "" : "s");
            return client_refuse(R, TSAFE_E_RANGE, "client gave up");
        }
        R->rows = o->rows;
    }
    double bound = INFINITY;
    tsafe_lora_plan lp;
    if (o->mode == IO_MODE_PLAIN_ZERO_MOAI &&
        tsafe_session_client_plan(R->s, 0, NULL, &lp) == TSAFE_OK)
        bound = lp.max_abs_x;
    for (size_t i = 0; i < R->rows * d; i++)
        if (!(fabsf(R->x[i]) <= bound)) {
            if (isfinite(bound))
                snprintf(R->what, sizeof R->what,
                         "input '%s' row %zu: |x| = %g is above the server's bound %g (serve "
                         "--max-abs)",
                         o->input, i / d, (double)R->x[i], bound);
            else
                snprintf(R->what, sizeof R->what, "input '%s' row %zu: a non-finite value",
                         o->input, i / d);
            return client_refuse(R, TSAFE_E_VALUE_RANGE, "client gave up");
        }
    if (R->dp && client_budget(R) != 0)
        return client_refuse(R, TSAFE_E_BUDGET, "client gave up");
    return 0;
}

/* Connects and reads the server's hello through the session. */
static int client_open(client_run *R)
{
    const client_opts *o = R->o;
    tsafe_session_client_opts co = {
        .protocol = o->mode == IO_MODE_SEALED            ? TSAFE_SESSION_SEALED
                    : o->mode == IO_MODE_PLAIN_ZERO_MOAI ? TSAFE_SESSION_PLAIN_ZERO_MOAI
                                                         : TSAFE_SESSION_SEALED_PRIVATE,
        .dp = R->dp,
        .allow_no_dp = o->no_dp,
        .adapter_id = o->adapter_id};
    co.sealed = (tsafe_sealed_opts){.x_bits = o->x_bits, .a_bits = o->a_bits,
                                    .b_bits = o->b_bits,
                                    .semi_honest = o->mode == IO_MODE_SEALED,
                                    .unchecked_shares = (uint32_t)o->unchecked};
    tsafe_status st = tsafe_session_client_create(&co, NULL, &R->s);
    if (st == TSAFE_E_ARG && o->adapter_id)
        return tool_usage("client: --adapter-id '%s': 1-%u printable bytes, no space",
                          o->adapter_id, TSAFE_SESSION_MAX_ADAPTER_ID);
    if (st != TSAFE_OK)
        return tool_fail("client: session", st);
    if ((st = net_connect_local(o->port, o->timeout, &R->c.fd, R->what, sizeof R->what)) !=
        TSAFE_OK) {
        char what[4300];
        snprintf(what, sizeof what, "client: %s", R->what);
        return tool_fail(what, st);
    }
    R->t = net_transport(&R->c);
    if ((st = tsafe_session_client_connect(R->s, &R->t)) != TSAFE_OK) {
        snprintf(R->what, sizeof R->what, "client: %s", tsafe_session_client_what(R->s));
        return tool_fail(R->what, st);
    }
    for (size_t i = 0; i < tsafe_session_client_modules(R->s); i++) {
        const char *name;
        uint32_t d_in, rank, d_out;
        if (tsafe_session_client_module(R->s, i, &name, &d_in, &rank, &d_out) == TSAFE_OK) {
            R->d_in = d_in;
            R->total_out += d_out;
        }
    }
    return 0;
}

/* Every row through the session; *ms their wall time. */
static int client_tokens(client_run *R, double *ms)
{
    size_t n = tsafe_session_client_modules(R->s);
    float *deltas[IO_MAX_MODULES];
    double t0 = tsafe_now_ms();
    for (size_t r = 0; r < R->rows; r++) {
        double tr = tsafe_now_ms();
        float *o = R->out + r * R->total_out;
        for (size_t i = 0; i < n; i++) {
            const char *name;
            uint32_t d_in, rank, d_out;
            if (tsafe_session_client_module(R->s, i, &name, &d_in, &rank, &d_out) != TSAFE_OK)
                return tool_fail("client: module list", TSAFE_E_STATE);
            deltas[i] = o;
            o += d_out;
        }
        tsafe_status st =
            tsafe_session_client_delta(R->s, &R->t, NULL, 0, R->x + r * R->d_in, deltas);
        if (st != TSAFE_OK) {
            snprintf(R->what, sizeof R->what, "client: row %zu: %s", r,
                     tsafe_session_client_what(R->s));
            return tool_fail(R->what, st);
        }
        R->row_ms[r] = tsafe_now_ms() - tr;
        io_progress("client: rows", r + 1, R->rows);
    }
    *ms = tsafe_now_ms() - t0;
    return 0;
}

static void print_mode(const client_run *R)
{
    tsafe_sealed_plan sp;
    tsafe_lora_plan lp;
    tsafe_session_stats ss;
    tsafe_session_client_stats(R->s, &ss);
    if (R->o->mode == IO_MODE_PLAIN_ZERO_MOAI) {
        if (tsafe_session_client_plan(R->s, 0, NULL, &lp) == TSAFE_OK)
            printf("mode plain-zero-moai (this client can read the adapter's A), plan %s (N=%u, "
                   "log2 Q %.1f <= %u: 128-bit), fresh client keys\n",
                   lp.name, 1u << lp.params.log_n, lp.log2_q, lp.max_log2_q);
        return;
    }
    if (tsafe_session_client_plan(R->s, 0, &sp, NULL) != TSAFE_OK)
        return;
    printf("mode %s (N=%u, t=2^%u; x %u, A %u bits; model rel error %.1e, decryption failure "
           "2^%.0f), fresh client keys, %llu hello%s (key rotated every %u rows)\n",
           R->o->mode_name, 1u << sp.r1.log_n, sp.r1.t_bits, sp.x_bits, sp.a_bits,
           sp.expected_rel_error, sp.log2_fail, (unsigned long long)ss.hellos,
           ss.hellos == 1 ? "" : "s", sp.rotate_after);
    if (R->o->mode == IO_MODE_SEALED && !R->dp)
        printf("sealed --no-dp: the server learned u = A x of every row exactly\n");
}

static void print_summary(const client_run *R, double ms)
{
    const client_opts *o = R->o;
    size_t n = tsafe_session_client_modules(R->s);
    json_t *mods = o->json ? json_array() : NULL;
    printf("modules:");
    for (size_t i = 0; i < n; i++) {
        const char *name;
        uint32_t d_in, rank, d_out;
        if (tsafe_session_client_module(R->s, i, &name, &d_in, &rank, &d_out) != TSAFE_OK)
            continue;
        printf(" %s (rank %u, d_out %u)", name, rank, d_out);
        if (mods)
            json_array_append_new(mods, json_pack("{s:s, s:i, s:i}", "name", name, "rank",
                                                  (int)rank, "d_out", (int)d_out));
    }
    printf("\n%zu row%s, %.3f ms/row, %.1f KiB sent, %.1f KiB received%s%s\n", R->rows,
           R->rows == 1 ? "" : "s", ms / (double)R->rows, (double)R->c.bytes_out / 1024.0,
           (double)R->c.bytes_in / 1024.0, o->output ? ", deltas -> " : "",
           o->output ? o->output : "");
    if (o->json) {
        json_t *row_ms = json_array();
        for (size_t r = 0; r < R->rows; r++)
            json_array_append_new(row_ms, json_real(R->row_ms[r]));
        io_json_emit(json_pack("{s:s, s:i, s:o, s:I, s:f, s:o, s:I, s:I, s:s?, s:s?}", "mode",
                               o->mode_name, "port", (int)o->port, "modules", mods, "rows",
                               (json_int_t)R->rows, "ms_per_row", ms / (double)R->rows, "row_ms",
                               row_ms, "bytes_sent", (json_int_t)R->c.bytes_out,
                               "bytes_received", (json_int_t)R->c.bytes_in, "output", o->output,
                               "adapter_id", o->adapter_id));
    }
}

static int client_main(client_run *R)
{
    const client_opts *o = R->o;
    tsafe_status st;
    if ((st = io_read_f32(o->input, &R->x, &R->count)) != TSAFE_OK) {
        snprintf(R->what, sizeof R->what, "read input '%s'%s", o->input,
                 st == TSAFE_E_SHAPE ? " (size is not a multiple of 4 bytes)" : "");
        return tool_fail(R->what, st);
    }
    double ms = 0;
    int rc = 0;
    if ((o->dp && (rc = client_dp(R)) != 0) || (rc = client_open(R)) != 0 ||
        (rc = client_rows(R)) != 0)
        return rc;
    if (!(R->out = malloc(R->rows * R->total_out * sizeof *R->out)) ||
        !(R->row_ms = calloc(R->rows, sizeof *R->row_ms)))
        return tool_fail("client", TSAFE_E_NOMEM);
    if ((rc = client_tokens(R, &ms)) != 0)
        return rc;
    print_mode(R);
    st = tsafe_session_client_bye(R->s, &R->t);
    (void)st; /* the deltas are in; a server gone before BYE changes nothing */
    if (o->output && (st = io_write_f32(o->output, R->out, R->rows * R->total_out)) != TSAFE_OK) {
        snprintf(R->what, sizeof R->what, "write '%s'", o->output);
        return tool_fail(R->what, st);
    }
    print_summary(R, ms);
    return 0;
}

int cmd_client(int argc, char **argv)
{
    client_opts o;
    int rc = client_parse(argc, argv, &o);
    if (rc == OPTS_HELP) {
        fputs(k_client_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (o.json && io_reserve_stdout() != 0)
        return tool_fail("client: standard output for --json", TSAFE_E_IO);
    signal(SIGPIPE, SIG_IGN);
    client_run R;
    memset(&R, 0, sizeof R);
    R.o = &o;
    R.c.fd = -1;
    rc = client_main(&R);
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
    free(R.row_ms);
    tsafe_session_client_free(R.s);
    tsafe_dp_session_free(R.dp);
    return rc;
}
