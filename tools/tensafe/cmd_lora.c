/* `tensafe lora apply | compare | make-input`: run adapter
 * modules on raw float32 rows, in plaintext, local HE or in-process
 * two-party HE. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "clock.h"
#include "commands.h"
#include "io.h"

static const char k_help[] =
    "usage: tensafe lora apply --adapter DIR|PKG [--trusted-key HEX|FILE] --module NAME[,NAME...]\n"
    "                          --input X.f32 --output D.f32\n"
    "                          [--mode sealed-private|sealed --semi-honest|local|\n"
    "                           plain-zero-moai | --plain]\n"
    "                          [--params PRESET|auto] [--max-abs X] [--precision P]\n"
    "                          [--backend cpu|cuda] [--x-bits N] [--a-bits N] [--b-bits N]\n"
    "                          [--unchecked-shares] [--json]\n"
    "       tensafe lora compare D.f32 REF.f32 [--tol T] [--json]\n"
    "       tensafe lora make-input --dim D [--rows K] [--max-abs X] --out X.f32\n"
    "\n"
    "apply    reads rows of d_in float32 (little-endian) values and writes, per row, the\n"
    "         LoRA delta s*B*(A x) of each module (concatenated in the order given).\n"
    "         The two-party modes run client and server in this process, exchanging\n"
    "         the real message bytes:\n"
    "           sealed-private (default)  the server learns nothing about x, the client\n"
    "                            only delta (two exact BFV rounds)\n"
    "           sealed           one round; the server learns u = A x (over a network\n"
    "                            'tensafe client' adds DP noise; here, in one process,\n"
    "                            none is added); it protects only against peers\n"
    "                            that follow the protocol: needs --semi-honest\n"
    "           plain-zero-moai  the seeds' CKKS protocol: the client can read the\n"
    "                            adapter's A (and s*B), the server gets a decryption\n"
    "                            oracle; parity checks only\n"
    "           local            one process holds the CKKS key (protects nothing)\n"
    "         --plain: the plaintext reference (double precision) instead of a mode.\n"
    "         --backend: where the server side's ring work runs (default cpu; cuda\n"
    "         needs a CUDA build and a device; the results are the same).\n"
    "         --max-abs: bound on |x| the plan allows (default: the input's largest |x|);\n"
    "         --params, --precision: the CKKS plan of local and plain-zero-moai (planner\n"
    "         target error, default 1e-6); the sealed modes derive their own.\n"
    "         --x-bits, --a-bits, --b-bits (sealed modes; b: sealed-private only):\n"
    "         the quantization widths of x, A and B, 4..20 bits (default: x 13; A\n"
    "         and B chosen by the plan for the shapes, A 12..16 and B 12..15 bits\n"
    "         for sealed-private, A 12..13 for sealed). Wider is finer but must fit\n"
    "         the ring: a width with no room is refused (exit 1); the summary\n"
    "         names the widths used.\n"
    "         --unchecked-shares (sealed-private): without its checked reads\n"
    "         (about 0.55x the server's time; a client that tampers with its share\n"
    "         would read the adapter: docs/MALICIOUS_CLIENT.md). --checked-shares,\n"
    "         the default, is accepted.\n"
    "         A delta that is not finite in float32 is refused (exit 1).\n"
    "         --json: the summary as one JSON object.\n"
    "compare  relative L2 error ||D - REF|| / ||REF|| of two float32 files; with --tol,\n"
    "         exits 1 when it is above T; --json: the result as one JSON object\n"
    "make-input  K rows of D uniform float32 values in [-X, X] (test inputs, not secret;\n"
    "         default K 1, X 1)\n"
    "\n"
    "'-' as a file is standard input (--input, compare's files) or standard output\n"
    "(--output, --out: the summary line then goes to standard error).\n";

typedef struct {
    const char *adapter, *key, *modules, *input, *output, *mode_name, *params;
    double max_abs, precision;
    int max_abs_seen, plain, json;
    int semi_honest; /* --semi-honest: the opt-in sealed mode needs */
    int checked;     /* --checked-shares (the default) */
    int unchecked;   /* --unchecked-shares */
    uint32_t bits[3];              /* --x-bits, --a-bits, --b-bits */
    tsafe_sealed_opts sealed_opts; /* their widths (0: the plan's choice) */
    io_mode mode;
    const char *backend_name;             /* --backend */
    const tsafe_backend_factory *backend; /* its factory */
} apply_opts;

/* What one `lora apply` run holds; freed by run_free. */
typedef struct {
    tsafe_lora_adapter *ad;
    io_modules *m;
    float *x, *out;
    size_t count, rows;
    double xmax, bound;               /* max |x| of the input, the plan's bound */
    tsafe_lora_site *sites[IO_MAX_MODULES];
    size_t n_sites;
    tsafe_lora_local *local;
    tsafe_lora_pair pair;
    tsafe_sealed_pair *sealed;
    tsafe_lora_plan plan;
    tsafe_sealed_plan sealed_plan; /* sealed modes: for the summary */
    tsafe_lora_engine eng;
    tsafe_lora_stats stats;
    const char *mode;
} apply_run;

static void run_free(apply_run *r)
{
    tsafe_sealed_pair_free(r->sealed); /* before the sites it points to */
    io_free_sites(r->sites, r->n_sites);
    tsafe_lora_local_free(r->local);
    tsafe_lora_client_free(r->pair.client);
    tsafe_lora_server_free(r->pair.server);
    free(r->x);
    free(r->out);
    free(r->m);
    tsafe_lora_adapter_free(r->ad);
}

/* The adapter's modules and the input rows: finite, within --max-abs (or
 * bounded by their own max |x|). 0, or 1 after saying why. */
static int load_inputs(const apply_opts *a, apply_run *r)
{
    char what[4200];
    tsafe_status st;
    if ((st = io_load_adapter(a->adapter, a->key, &r->ad, what, sizeof what)) != TSAFE_OK ||
        (st = io_resolve_modules(r->ad, a->modules, r->m, what, sizeof what)) != TSAFE_OK)
        return tool_fail(what, st);
    const io_modules *m = r->m;
    if ((st = io_read_f32(a->input, &r->x, &r->count)) != TSAFE_OK || r->count % m->d_in ||
        !r->count) {
        if (st == TSAFE_OK || st == TSAFE_E_SHAPE)
            snprintf(what, sizeof what,
                     "input '%s': size is not a positive multiple of %zu bytes (rows of d_in=%u "
                     "float32)",
                     a->input, (size_t)4 * m->d_in, m->d_in);
        else
            snprintf(what, sizeof what, "read input '%s'", a->input);
        return tool_fail(what, st == TSAFE_OK ? TSAFE_E_SHAPE : st);
    }
    r->rows = r->count / m->d_in;
    for (size_t i = 0; i < r->count; i++) {
        if (!isfinite(r->x[i])) {
            snprintf(what, sizeof what, "input '%s': row %zu has a non-finite value", a->input,
                     i / m->d_in);
            return tool_fail(what, TSAFE_E_VALUE_RANGE);
        }
        r->xmax = fmax(r->xmax, fabs((double)r->x[i]));
    }
    r->bound = a->max_abs_seen ? a->max_abs : (r->xmax > 0 ? r->xmax : 1.0);
    if (r->xmax > r->bound) {
        snprintf(what, sizeof what, "input '%s': max |x| = %g exceeds --max-abs %g", a->input,
                 r->xmax, r->bound);
        return tool_fail(what, TSAFE_E_VALUE_RANGE);
    }
    if (!(r->out = malloc(r->rows * m->total_out * sizeof *r->out)))
        return tool_fail("lora apply", TSAFE_E_NOMEM);
    return 0;
}

/* The HE context that holds the sites: a local engine's, or the two-party
 * server's (public data only; the sealed modes read A, B and the scale
 * from there too). 0, or 1 after saying why. */
static int make_context(const apply_opts *a, apply_run *r, const tsafe_context **ctx)
{
    tsafe_status st;
    if (a->mode == IO_MODE_LOCAL) {
        if ((st = tsafe_lora_local_create(&r->plan, NULL, &r->local)) != TSAFE_OK ||
            (st = tsafe_lora_local_use_backend(r->local, a->backend)) != TSAFE_OK)
            return tool_fail("lora apply: local HE context and backend", st);
        *ctx = tsafe_lora_local_context(r->local);
        return 0;
    }
    if ((a->mode == IO_MODE_PLAIN_ZERO_MOAI &&
         (st = tsafe_lora_client_create(&r->plan, NULL, &r->pair.client)) != TSAFE_OK) ||
        (st = tsafe_lora_server_create(&r->plan, &r->pair.server)) != TSAFE_OK ||
        (st = tsafe_lora_pair_use_backend(&r->pair, a->backend)) != TSAFE_OK)
        return tool_fail("lora apply: two-party client, server and backend", st);
    *ctx = tsafe_lora_server_context(r->pair.server);
    return 0;
}

/* The plan the sealed pair will derive (the same call: its widths go in the
 * summary), with a clear message when the given widths do not fit. */
static tsafe_status sealed_widths(const apply_opts *a, const io_modules *m, size_t n_sites,
                                  const tsafe_sealed_opts *so, tsafe_sealed_plan *plan)
{
    uint32_t d_out_max = 0;
    for (size_t i = 0; i < m->n; i++)
        d_out_max = m->info[i].out_dim > d_out_max ? (uint32_t)m->info[i].out_dim : d_out_max;
    tsafe_sealed_opts o = *so;
    o.sites_per_query = (uint32_t)n_sites;
    tsafe_status st = tsafe_sealed_plan_derive(
        a->mode == IO_MODE_SEALED ? TSAFE_SEALED : TSAFE_SEALED_PRIVATE, m->d_in, m->max_rank,
        d_out_max, &o, plan);
    if (st == TSAFE_OK)
        return TSAFE_OK;
    char what[400], w[3][16];
    const uint32_t v[3] = {so->x_bits, so->a_bits, so->b_bits};
    for (int i = 0; i < 3; i++)
        snprintf(w[i], sizeof w[i], v[i] ? "%u" : "default", v[i]);
    snprintf(what, sizeof what,
             "lora apply: no %s plan for d_in %u, rank %u, d_out %u with widths x %s, a %s, "
             "b %s%s",
             io_mode_name(a->mode), m->d_in, m->max_rank, d_out_max, w[0], w[1], w[2],
             v[0] || v[1] || v[2] ? " (narrower --x/a/b-bits may fit)" : "");
    tool_fail(what, st);
    return st;
}

/* The plan, the sites and the engine of the chosen mode. 0, or 1 after
 * saying why. */
static int make_engine(const apply_opts *a, apply_run *r)
{
    char what[4200];
    const io_modules *m = r->m;
    int sealed_mode = a->mode == IO_MODE_SEALED || a->mode == IO_MODE_SEALED_PRIVATE;
    tsafe_status st;
    /* the sealed modes keep A, B and the scale in CKKS sites, but their
     * own protocol scales x per token: plan those sites for |x| <= 1, and
     * say what failed in the sealed mode's terms */
    if ((st = io_make_plan(a->params, m, sealed_mode ? 1.0 : r->bound, a->precision, &r->plan,
                           what, sizeof what)) != TSAFE_OK) {
        if (sealed_mode)
            snprintf(what, sizeof what,
                     "lora apply (%s): max |A| = %g is too large for the HE sites that "
                     "hold the adapter (d_in %u, rank %u)",
                     r->mode, m->max_abs_a, m->d_in, m->max_rank);
        return tool_fail(what, st);
    }
    const tsafe_context *ctx = NULL;
    if (make_context(a, r, &ctx))
        return 1;
    if ((st = io_make_sites(ctx, &r->plan, m, r->sites, what, sizeof what)) != TSAFE_OK)
        return tool_fail(what, st);
    r->n_sites = m->n;
    if (!sealed_mode) {
        r->eng = r->local ? tsafe_lora_engine_local(r->local)
                          : tsafe_lora_engine_two_party(&r->pair);
        return 0;
    }
    /* one process plays both parties: DP noise would protect u from
     * ourselves, so sealed runs exact here (allow_no_dp) */
    tsafe_sealed_opts so = a->sealed_opts;     /* --x-bits, --a-bits, --b-bits */
    so.semi_honest = (uint32_t)a->semi_honest; /* --semi-honest */
    so.unchecked_shares = (uint32_t)a->unchecked; /* --unchecked-shares */
    if (sealed_widths(a, m, r->n_sites, &so, &r->sealed_plan) != TSAFE_OK)
        return 1;
    if ((st = tsafe_sealed_pair_create(a->mode == IO_MODE_SEALED ? TSAFE_SEALED
                                                                 : TSAFE_SEALED_PRIVATE,
                                       &so, NULL, 1, &r->sealed)) != TSAFE_OK ||
        (st = tsafe_sealed_pair_use_backend(r->sealed, a->backend)) != TSAFE_OK ||
        (st = tsafe_sealed_pair_prepare(r->sealed, (const tsafe_lora_site *const *)r->sites,
                                        r->n_sites)) != TSAFE_OK) {
        snprintf(what, sizeof what,
                 "lora apply: %s plan and sites for d_in %u, rank %u, %zu module%s", r->mode,
                 m->d_in, m->max_rank, m->n, m->n == 1 ? "" : "s");
        return tool_fail(what, st);
    }
    r->eng = tsafe_lora_engine_sealed(r->sealed);
    return 0;
}

/* Row row's deltas (each module's block of out) in plaintext or through
 * the engine; *bad: the module whose delta is not finite, else m->n. */
static tsafe_status apply_row(const apply_opts *a, apply_run *r, size_t row, size_t *bad)
{
    const io_modules *m = r->m;
    const float *xr = r->x + row * m->d_in;
    float *o = r->out + row * m->total_out, *deltas[IO_MAX_MODULES];
    for (size_t i = 0; i < m->n; i++) {
        deltas[i] = o;
        o += m->info[i].out_dim;
    }
    tsafe_status st = TSAFE_OK;
    *bad = m->n;
    if (a->plain) {
        for (size_t i = 0; i < m->n && st == TSAFE_OK; i++)
            if ((st = tsafe_lora_module_apply(&m->info[i], xr, deltas[i])) != TSAFE_OK)
                *bad = i;
        return st;
    }
    st = r->eng.fn(r->eng.user, (const tsafe_lora_site *const *)r->sites, r->n_sites, xr, deltas,
                   &r->stats);
    for (size_t i = 0; i < m->n && st == TSAFE_OK; i++)
        for (size_t k = 0; k < m->info[i].out_dim; k++)
            if (!isfinite(deltas[i][k])) {
                *bad = i;
                return TSAFE_E_VALUE_RANGE;
            }
    return st;
}

/* Every row; *ms: the time they took. 0, or 1 after saying why. */
static int apply_rows(const apply_opts *a, apply_run *r, double *ms)
{
    char what[4200];
    const io_modules *m = r->m;
    double t0 = tsafe_now_ms();
    for (size_t row = 0; row < r->rows; row++) {
        size_t bad;
        tsafe_status st = apply_row(a, r, row, &bad);
        if (st == TSAFE_E_VALUE_RANGE) {
            char who[600] = "a module";
            if (bad < m->n)
                snprintf(who, sizeof who, "module '%s' (scale %g, max |A| %g)",
                         m->info[bad].name, m->info[bad].scale,
                         io_module_max_abs_a(&m->info[bad]));
            snprintf(what, sizeof what,
                     "lora apply (%s) on row %zu: %s gives a delta that is not finite in "
                     "float32 (max |x| %g): refused", r->mode, row, who, r->xmax);
            return tool_fail(what, st);
        }
        if (st != TSAFE_OK) {
            snprintf(what, sizeof what, "lora apply (%s) on row %zu", r->mode, row);
            return tool_fail(what, st);
        }
        io_progress("lora apply: rows", row + 1, r->rows);
    }
    *ms = tsafe_now_ms() - t0;
    return 0;
}

static void report_json(const apply_opts *a, const apply_run *r, double ms)
{
    const io_modules *m = r->m;
    double rows = (double)r->rows;
    json_t *names = json_array();
    for (size_t i = 0; i < m->n; i++)
        json_array_append_new(names, json_string(m->info[i].name));
    json_t *j = json_pack("{s:I, s:o, s:i, s:i, s:s, s:s, s:s}", "rows", (json_int_t)r->rows,
                          "modules", names, "d_in", (int)m->d_in, "d_out", (int)m->total_out,
                          "mode", r->mode, "output", a->output, "plan",
                          !a->plain && !r->sealed ? r->plan.name : "");
    const tsafe_sealed_plan *sp = &r->sealed_plan;
    if (j && sp->x_bits) {
        json_object_set_new(j, "x_bits", json_integer(sp->x_bits));
        json_object_set_new(j, "a_bits", json_integer(sp->a_bits));
        if (sp->b_bits)
            json_object_set_new(j, "b_bits", json_integer(sp->b_bits));
    }
    if (j && !a->plain) {
        json_object_set_new(j, "ms_per_row", json_real(ms / rows));
        json_object_set_new(j, "bytes_up_per_row", json_real((double)r->stats.bytes_up / rows));
        json_object_set_new(j, "bytes_down_per_row",
                            json_real((double)r->stats.bytes_down / rows));
    }
    io_json_emit(j);
}

static void report_text(const apply_opts *a, const apply_run *r, double ms)
{
    const io_modules *m = r->m;
    size_t rows = r->rows;
    printf("lora apply: %zu row%s x %zu module%s (d_in %u -> %u values per row), mode %s", rows,
           rows == 1 ? "" : "s", m->n, m->n == 1 ? "" : "s", m->d_in, m->total_out, r->mode);
    if (!a->plain && !r->sealed)
        printf(", plan %s", r->plan.name);
    const tsafe_sealed_plan *sp = &r->sealed_plan;
    if (sp->x_bits && sp->b_bits)
        printf(", widths x %u a %u b %u bits", sp->x_bits, sp->a_bits, sp->b_bits);
    else if (sp->x_bits)
        printf(", widths x %u a %u bits", sp->x_bits, sp->a_bits);
    if (!a->plain)
        printf(", %.3f ms/row", ms / (double)rows);
    if (!a->plain && !r->local)
        printf(", %.1f KiB up + %.1f KiB down per row",
               (double)r->stats.bytes_up / 1024.0 / (double)rows,
               (double)r->stats.bytes_down / 1024.0 / (double)rows);
    printf(" -> %s\n", a->output);
}

static int apply(const apply_opts *a)
{
    char what[4200];
    apply_run r;
    memset(&r, 0, sizeof r);
    r.mode = a->plain ? "plain" : io_mode_name(a->mode);
    if (!(r.m = calloc(1, sizeof *r.m)))
        return tool_fail("lora apply", TSAFE_E_NOMEM);
    int rc = 1;
    double ms = 0;
    tsafe_status st;
    if (load_inputs(a, &r) || (!a->plain && make_engine(a, &r)) || apply_rows(a, &r, &ms))
        goto out;
    if ((st = io_write_f32(a->output, r.out, r.rows * r.m->total_out)) != TSAFE_OK) {
        snprintf(what, sizeof what, "write '%s'", a->output);
        tool_fail(what, st);
        goto out;
    }
    if (a->json)
        report_json(a, &r, ms);
    else
        report_text(a, &r, ms);
    rc = 0;
out:
    run_free(&r);
    return rc;
}

static int compare(const char *a, const char *b, int tol_seen, double tol, int json)
{
    char what[4200];
    float *va = NULL, *vb = NULL;
    size_t na = 0, nb = 0;
    tsafe_status st;
    if ((st = io_read_f32(a, &va, &na)) != TSAFE_OK) {
        snprintf(what, sizeof what, "read '%s'", a);
        return tool_fail(what, st);
    }
    if ((st = io_read_f32(b, &vb, &nb)) != TSAFE_OK) {
        free(va);
        snprintf(what, sizeof what, "read '%s'", b);
        return tool_fail(what, st);
    }
    int rc = 0;
    if (na != nb || na == 0) {
        snprintf(what, sizeof what, "compare: '%s' has %zu values, '%s' has %zu", a, na, b, nb);
        rc = tool_fail(what, TSAFE_E_SHAPE);
    } else {
        double num = 0, den = 0, mx = 0;
        for (size_t i = 0; i < na; i++) {
            double d = (double)va[i] - vb[i];
            num += d * d;
            den += (double)vb[i] * vb[i];
            mx = fmax(mx, fabs(d));
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (!(rel == rel))
            rel = INFINITY;
        if (json) {
            json_t *j = json_pack("{s:f, s:f, s:I}", "rel_l2", isfinite(rel) ? rel : -1.0,
                                  "max_abs_err", isfinite(mx) ? mx : -1.0, "values",
                                  (json_int_t)na);
            if (j && tol_seen) {
                json_object_set_new(j, "tol", json_real(tol));
                json_object_set_new(j, "pass", json_boolean(rel <= tol));
            }
            io_json_emit(j); /* -1: not finite (JSON has no inf) */
        } else {
            printf("rel_l2 %.3e  max_abs_err %.3e  (%zu values)\n", rel, mx, na);
        }
        if (tol_seen && !(rel <= tol)) {
            snprintf(what, sizeof what, "compare: relative L2 error %.3e is above --tol %g", rel,
                     tol);
            rc = tool_fail(what, TSAFE_E_VALUE_RANGE);
        }
    }
    free(va);
    free(vb);
    return rc;
}

/* Test inputs: uniform in [-max_abs, max_abs] (not secret). */
static int make_input(const char *out, uint32_t dim, uint32_t rows, double max_abs)
{
    size_t n = (size_t)dim * rows;
    float *v = malloc(n * sizeof *v);
    if (!v)
        return tool_fail("lora make-input", TSAFE_E_NOMEM);
    for (size_t i = 0; i < n; i++) {
        uint64_t r;
        randombytes_buf(&r, sizeof r);
        v[i] = (float)(max_abs * ((double)(r >> 11) * 0x1p-52 - 1.0));
    }
    tsafe_status st = io_write_f32(out, v, n);
    free(v);
    if (st != TSAFE_OK) {
        char what[4200];
        snprintf(what, sizeof what, "write '%s'", out);
        return tool_fail(what, st);
    }
    printf("%u rows of %u float32 in [-%g, %g] -> %s\n", rows, dim, max_abs, max_abs, out);
    return 0;
}

/* `lora apply`'s options; the enum names their slots. */
enum { A_ADAPTER, A_KEY, A_MODULE, A_INPUT, A_OUTPUT, A_MODE, A_PARAMS, A_MAX_ABS, A_PRECISION,
       A_PLAIN, A_BACKEND, A_JSON, A_SEMI_HONEST, A_X_BITS, A_A_BITS, A_B_BITS, A_CHECKED,
       A_UNCHECKED, A_COUNT };

/* The combinations `lora apply` refuses, and the backend by name. */
static int check_apply_opts(apply_opts *a, const tool_opt *o)
{
    if (!a->adapter || !a->modules || !a->input || !a->output)
        return tool_usage("lora apply: --adapter, --module, --input and --output are required");
    if (a->plain && (o[A_MODE].seen || o[A_PARAMS].seen || o[A_PRECISION].seen ||
                     o[A_BACKEND].seen || o[A_X_BITS].seen || o[A_A_BITS].seen ||
                     o[A_B_BITS].seen))
        return tool_usage("lora apply: --plain is the plaintext reference, not a mode: it "
                          "takes no --mode, --params, --precision, --backend or --x/a/b-bits");
    if (a->json && !strcmp(a->output, "-"))
        return tool_usage("lora apply: --output - and --json both want standard output");
    if (!strcmp(a->mode_name, "two-party"))
        return tool_usage("lora apply: --mode two-party was renamed plain-zero-moai (it lets "
                          "the client read the adapter); the default is sealed-private");
    if (io_mode_parse(a->mode_name, &a->mode))
        return tool_usage("lora apply: --mode must be sealed-private, sealed, local or "
                          "plain-zero-moai, not '%s'",
                          a->mode_name);
    int rc = io_mode_consent("lora apply", a->mode, a->semi_honest);
    if (rc != 0)
        return rc;
    if ((rc = io_share_checks("lora apply", a->mode, a->checked, a->unchecked)) != 0)
        return rc;
    /* the three width options, consecutive in the table */
    if ((rc = io_sealed_widths("lora apply", a->mode, &o[A_X_BITS], &a->sealed_opts)) != 0)
        return rc;
    if ((o[A_PARAMS].seen || o[A_PRECISION].seen) &&
        (a->mode == IO_MODE_SEALED || a->mode == IO_MODE_SEALED_PRIVATE))
        return tool_usage("lora apply: --params and --precision set the CKKS plan of --mode "
                          "local and plain-zero-moai; --mode %s derives its own",
                          a->mode_name);
    a->max_abs_seen = o[A_MAX_ABS].seen;
    if (a->max_abs_seen && !(a->max_abs > 0))
        return tool_usage("lora apply: --max-abs must be positive");
    if (!(a->precision > 0))
        return tool_usage("lora apply: --precision must be positive");
    char what[256];
    tsafe_status bst = io_backend_factory(a->backend_name, &a->backend, what, sizeof what);
    if (bst != TSAFE_OK)
        return bst == TSAFE_E_ARG ? tool_usage("lora apply: %s", what) : tool_fail(what, bst);
    return 0;
}

static int cmd_lora_apply(int argc, char **argv)
{
    apply_opts a = {.mode_name = "sealed-private",
                    .params = "auto",
                    .precision = 1e-6,
                    .mode = IO_MODE_SEALED_PRIVATE,
                    .backend_name = "cpu"};
    tool_opt o[A_COUNT] = {[A_ADAPTER] = {"--adapter", OPT_STR, &a.adapter, 0},
                           [A_KEY] = {"--trusted-key", OPT_STR, &a.key, 0},
                           [A_MODULE] = {"--module", OPT_STR, &a.modules, 0},
                           [A_INPUT] = {"--input", OPT_STR, &a.input, 0},
                           [A_OUTPUT] = {"--output", OPT_STR, &a.output, 0},
                           [A_MODE] = {"--mode", OPT_STR, &a.mode_name, 0},
                           [A_PARAMS] = {"--params", OPT_STR, &a.params, 0},
                           [A_MAX_ABS] = {"--max-abs", OPT_DOUBLE, &a.max_abs, 0},
                           [A_PRECISION] = {"--precision", OPT_DOUBLE, &a.precision, 0},
                           [A_PLAIN] = {"--plain", OPT_FLAG, &a.plain, 0},
                           [A_BACKEND] = {"--backend", OPT_STR, &a.backend_name, 0},
                           [A_JSON] = {"--json", OPT_FLAG, &a.json, 0},
                           [A_SEMI_HONEST] = {"--semi-honest", OPT_FLAG, &a.semi_honest, 0},
                           [A_X_BITS] = {"--x-bits", OPT_U32, &a.bits[0], 0},
                           [A_A_BITS] = {"--a-bits", OPT_U32, &a.bits[1], 0},
                           [A_B_BITS] = {"--b-bits", OPT_U32, &a.bits[2], 0},
                           [A_CHECKED] = {"--checked-shares", OPT_FLAG, &a.checked, 0},
                           [A_UNCHECKED] = {"--unchecked-shares", OPT_FLAG, &a.unchecked, 0}};
    int rc = opts_parse("lora apply", argc, argv, 2, o, A_COUNT, NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        fputs(k_help, stdout);
        return 0;
    }
    if (rc || (rc = check_apply_opts(&a, o)) != 0)
        return rc;
    return apply(&a);
}

static int cmd_lora_compare(int argc, char **argv)
{
    double tol = 0;
    int json = 0;
    const char *pos[2];
    size_t npos = 0;
    tool_opt o[] = {{"--tol", OPT_DOUBLE, &tol, 0}, {"--json", OPT_FLAG, &json, 0}};
    int rc = opts_parse("lora compare", argc, argv, 2, o, 2, pos, 2, &npos);
    if (rc == OPTS_HELP) {
        fputs(k_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (npos != 2)
        return tool_usage("lora compare: needs two float32 files");
    return compare(pos[0], pos[1], o[0].seen, tol, json);
}

static int cmd_lora_make_input(int argc, char **argv)
{
    uint32_t dim = 0, rows = 1;
    double max_abs = 1.0;
    const char *out = NULL;
    tool_opt o[] = {{"--dim", OPT_U32, &dim, 0},
                    {"--rows", OPT_U32, &rows, 0},
                    {"--max-abs", OPT_DOUBLE, &max_abs, 0},
                    {"--out", OPT_STR, &out, 0}};
    int rc = opts_parse("lora make-input", argc, argv, 2, o, sizeof o / sizeof o[0], NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        printf("usage: tensafe lora make-input --dim D [--rows K] [--max-abs X] --out X.f32\n"
               "\n"
               "K rows (default 1) of D float32 values drawn uniformly from [-X, X]\n"
               "(default X 1) with libsodium's CSPRNG: test inputs for 'lora apply' and\n"
               "'tensafe client', not secret. --out - writes them to standard output.\n");
        return 0;
    }
    if (rc)
        return rc;
    if (!out || dim == 0 || rows == 0 || !(max_abs > 0) || (uint64_t)dim * rows > (1u << 28))
        return tool_usage("lora make-input: needs --dim D >= 1, --rows K >= 1, --out FILE");
    return make_input(out, dim, rows, max_abs);
}

int cmd_lora(int argc, char **argv)
{
    if (argc < 2)
        return tool_usage("lora: missing subcommand (apply, compare or make-input)");
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        fputs(k_help, stdout);
        return 0;
    }
    if (!strcmp(sub, "apply"))
        return cmd_lora_apply(argc, argv);
    if (!strcmp(sub, "compare"))
        return cmd_lora_compare(argc, argv);
    if (!strcmp(sub, "make-input"))
        return cmd_lora_make_input(argc, argv);
    return tool_usage("lora: unknown subcommand '%s' (apply, compare or make-input)", sub);
}
