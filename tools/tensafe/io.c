/* Shared helpers of the `tensafe` subcommands (see io.h). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "commands.h"
#include <sodium.h>

#include "io.h"
#include "bytes.h"
#include "file.h"
#ifdef TSAFE_WITH_CUDA
#include "tensafe/cuda.h"
#endif

/* ------------------------------------------------------------- files */

static tsafe_status errno_status(int e)
{
    return e == ENOENT || e == ENOTDIR ? TSAFE_E_NOT_FOUND : TSAFE_E_IO;
}

/* "-" as an output: the descriptor io_reserve_stdout() kept for data. */
static int g_data_fd = -1;
static int g_stdin_read;

int io_reserve_stdout(void)
{
    if (g_data_fd >= 0)
        return 0;
    fflush(stdout);
    int fd = dup(STDOUT_FILENO);
    if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    g_data_fd = fd;
    return 0;
}

int io_stdout_reserved(void)
{
    return g_data_fd >= 0;
}

void io_json_emit(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
    json_decref(j);
    if (!s)
        return;
    if (g_data_fd >= 0) {
        size_t n = strlen(s), done = 0;
        while (done < n) {
            ssize_t w = write(g_data_fd, s + done, n - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        (void)!write(g_data_fd, "\n", 1);
    } else {
        printf("%s\n", s);
    }
    free(s);
}

/* standard input to EOF, at most cap bytes; once per process */
static tsafe_status read_stdin(size_t cap, uint8_t **buf, size_t *len)
{
    if (g_stdin_read++)
        return TSAFE_E_ARG; /* two inputs named "-" */
    size_t n = 0, room = 1 << 16;
    uint8_t *b = malloc(room + 1);
    for (;;) {
        if (!b)
            return TSAFE_E_NOMEM;
        ssize_t r = read(STDIN_FILENO, b + n, room - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return TSAFE_E_IO;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > cap) {
            free(b);
            return TSAFE_E_RANGE;
        }
        if (n == room) {
            room *= 2;
            uint8_t *nb = realloc(b, room + 1);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return TSAFE_OK;
}

tsafe_status io_read_file(const char *path, size_t cap, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (!strcmp(path, "-"))
        return read_stdin(cap, buf, len);
    return tsafe_read_file(path, cap, buf, len);
}

tsafe_status io_write_file(const char *path, const void *buf, size_t len, unsigned mode)
{
    int private_file = (mode & 077) == 0, to_stdout = !strcmp(path, "-");
    if (to_stdout && (private_file || io_reserve_stdout() != 0))
        return TSAFE_E_IO; /* secrets never go to a pipe */
    int fd = to_stdout ? dup(g_data_fd)
                       : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
                                        (private_file ? O_NOFOLLOW : 0),
                              (mode_t)mode);
    if (fd < 0)
        return errno_status(errno);
    /* an existing file keeps its old mode through open: a private file
     * (secret keys) gets its mode before any byte is written */
    if (private_file && !to_stdout && fchmod(fd, (mode_t)mode) != 0) {
        close(fd);
        return TSAFE_E_IO;
    }
    const uint8_t *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return TSAFE_E_IO;
        }
        done += (size_t)w;
    }
    return close(fd) == 0 ? TSAFE_OK : TSAFE_E_IO;
}

int io_is_dir(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return -1;
    return S_ISDIR(sb.st_mode) ? 1 : 0;
}

tsafe_status io_mkdir(const char *path, unsigned mode)
{
    if (mkdir(path, (mode_t)mode) == 0)
        return TSAFE_OK;
    if (errno == EEXIST && io_is_dir(path) == 1)
        return TSAFE_OK;
    return errno_status(errno);
}

tsafe_status io_join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= cap ? TSAFE_E_RANGE : TSAFE_OK;
}

tsafe_status io_read_f32(const char *path, float **v, size_t *count)
{
    *v = NULL;
    *count = 0;
    uint8_t *b;
    size_t n;
    tsafe_status st = io_read_file(path, IO_MAX_FILE, &b, &n);
    if (st != TSAFE_OK)
        return st;
    if (n % 4) {
        free(b);
        return TSAFE_E_SHAPE;
    }
    float *f = malloc(n ? n : 1);
    if (!f) {
        free(b);
        return TSAFE_E_NOMEM;
    }
    for (size_t i = 0; i < n / 4; i++)
        f[i] = tsafe_load_f32le(b + 4 * i);
    free(b);
    *v = f;
    *count = n / 4;
    return TSAFE_OK;
}

tsafe_status io_write_f32(const char *path, const float *v, size_t count)
{
    if (count > SIZE_MAX / 4)
        return TSAFE_E_SIZE_OVERFLOW;
    uint8_t *b = malloc(count ? count * 4 : 1);
    if (!b)
        return TSAFE_E_NOMEM;
    for (size_t i = 0; i < count; i++)
        tsafe_store_f32le(b + 4 * i, v[i]);
    tsafe_status st = io_write_file(path, b, count * 4, 0644);
    free(b);
    return st;
}

/* ----------------------------------------------------------- options */

static int parse_value(const char *cmd, const tool_opt *o, const char *v)
{
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case OPT_STR:
        *(const char **)o->dst = v;
        return 0;
    case OPT_U32: {
        if (!isdigit((unsigned char)v[0]))
            break;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || x > UINT32_MAX)
            break;
        *(uint32_t *)o->dst = (uint32_t)x;
        return 0;
    }
    case OPT_DOUBLE: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x))
            break;
        *(double *)o->dst = x;
        return 0;
    }
    case OPT_FLAG:
        break;
    }
    return tool_usage("%s: bad value '%s' for %s (expected %s)", cmd, v, o->name,
                      o->kind == OPT_U32 ? "a non-negative integer" : "a finite number");
}

int opts_value(const char *cmd, const char *name, opt_kind kind, const char *v, void *dst)
{
    tool_opt o = {name, kind, dst, 0};
    return parse_value(cmd, &o, v);
}

/* getopt_long's '?' (unknown option) or ':' (missing value) as a usage
 * line; ind = optind after the call. */
static int opts_getopt_fail(const char *cmd, int c, int argc, char **argv, int ind)
{
    const char *a = ind >= 1 && ind - 1 < argc ? argv[ind - 1] : "?";
    if (c == ':')
        return tool_usage("%s: option %s needs a value", cmd, a);
    return tool_usage("%s: unknown option '%s'", cmd, a);
}

int opts_getopt(const char *cmd, int argc, char **argv, const struct option *longs,
                int (*apply)(void *ctx, int c, const char *v), void *ctx)
{
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        if (c == 'h')
            return OPTS_HELP;
        int rc = c == '?' || c == ':' ? opts_getopt_fail(cmd, c, argc, argv, optind)
                                      : apply(ctx, c, optarg);
        if (rc)
            return rc;
    }
    if (optind < argc)
        return tool_usage("%s: unexpected argument '%s'", cmd, argv[optind]);
    return 0;
}

int opts_parse(const char *cmd, int argc, char **argv, int first, tool_opt *opts,
               size_t n_opts, const char **pos, size_t max_pos, size_t *n_pos)
{
    size_t np = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return OPTS_HELP;
        if (a[0] != '-' || a[1] == 0) {
            if (np >= max_pos)
                return tool_usage("%s: unexpected argument '%s'", cmd, a);
            pos[np++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        tool_opt *o = NULL;
        for (size_t k = 0; k < n_opts; k++)
            if (strlen(opts[k].name) == nlen && !strncmp(opts[k].name, a, nlen))
                o = &opts[k];
        if (!o)
            return tool_usage("%s: unknown option '%.*s'", cmd, (int)nlen, a);
        if (o->kind == OPT_FLAG) {
            if (eq)
                return tool_usage("%s: option %s takes no value", cmd, o->name);
            *(int *)o->dst = 1;
            o->seen = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc)
                return tool_usage("%s: option %s needs a value", cmd, o->name);
            v = argv[++i];
        }
        int rc = parse_value(cmd, o, v);
        if (rc)
            return rc;
        o->seen = 1;
    }
    if (n_pos)
        *n_pos = np;
    return 0;
}

size_t opts_split(const char *list, char **store, const char **items, size_t max)
{
    *store = strdup(list);
    if (!*store)
        return 0;
    size_t n = 0;
    char *p = *store;
    for (;;) {
        char *c = strchr(p, ',');
        if (c)
            *c = 0;
        if (!*p || n >= max)
            return 0;
        items[n++] = p;
        if (!c)
            break;
        p = c + 1;
    }
    return n;
}

/* ---------------------------------------------------------- progress */

void io_progress(const char *label, size_t i, size_t n)
{
    if (!isatty(2))
        return;
    fprintf(stderr, "\r%s %zu/%zu", label, i, n);
    if (i >= n)
        fputc('\n', stderr);
    fflush(stderr);
}

/* --------------------------------------------------------------- keys */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

tsafe_status io_hex_decode(const char *hex, uint8_t *out, size_t n)
{
    while (isspace((unsigned char)*hex))
        hex++;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval((unsigned char)hex[2 * i]);
        int lo = hi < 0 ? -1 : hexval((unsigned char)hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return TSAFE_E_FORMAT;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    for (const char *p = hex + 2 * n; *p; p++)
        if (!isspace((unsigned char)*p))
            return TSAFE_E_FORMAT;
    return TSAFE_OK;
}

void io_hex_encode(const uint8_t *in, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
    out[2 * n] = 0;
}

tsafe_status io_load_trusted_key(const char *arg, uint8_t pk[32])
{
    if (strlen(arg) == 64 && io_hex_decode(arg, pk, 32) == TSAFE_OK)
        return TSAFE_OK;
    uint8_t *b;
    size_t n;
    tsafe_status st = io_read_file(arg, 4096, &b, &n);
    if (st != TSAFE_OK)
        return st;
    if (n == 32) {
        memcpy(pk, b, 32);
        st = TSAFE_OK;
    } else {
        st = io_hex_decode((const char *)b, pk, 32) == TSAFE_OK ? TSAFE_OK : TSAFE_E_KEY;
    }
    free(b);
    return st;
}

/* ------------------------------------------------------------ adapters */

void io_origin_text(const tsafe_lora_adapter *ad, char *buf, size_t cap)
{
    tsafe_lora_origin o;
    if (tsafe_lora_adapter_origin(ad, &o) != TSAFE_OK) {
        snprintf(buf, cap, "unknown");
        return;
    }
    if (o.kind == TSAFE_LORA_ORIGIN_SIGNED) {
        char d[65], k[65];
        sodium_bin2hex(d, sizeof d, o.package_digest, 32);
        sodium_bin2hex(k, sizeof k, o.signer_key, 32);
        snprintf(buf, cap, "signed package %s, signer %s", d, k);
    } else if (o.path) {
        snprintf(buf, cap, "UNSIGNED directory '%s'", o.path);
    } else {
        snprintf(buf, cap, "UNSIGNED (built in memory)");
    }
}

tsafe_status io_require_signed(const tsafe_lora_adapter *ad, const char *cmd,
                               int allow_unsigned, char *what, size_t cap)
{
    tsafe_lora_origin o;
    tsafe_status st = tsafe_lora_adapter_origin(ad, &o);
    if (st != TSAFE_OK) {
        snprintf(what, cap, "%s: adapter origin", cmd);
        return st;
    }
    if (o.kind == TSAFE_LORA_ORIGIN_SIGNED)
        return TSAFE_OK;
    char org[4200];
    io_origin_text(ad, org, sizeof org);
    if (!allow_unsigned) {
        snprintf(what, cap,
                 "%s: refusing the %s: sign it into a package ('tensafe adapter pack') and "
                 "serve that with --trusted-key, or pass --allow-unsigned",
                 cmd, org);
        return TSAFE_E_UNSIGNED;
    }
    fprintf(stderr, "tensafe: warning: %s: serving the %s (--allow-unsigned): nobody vouches "
                    "for its weights\n", cmd, org);
    return TSAFE_OK;
}

/* Appends ": <detail>" of a failed load to what (it names the culprit). */
static void add_detail(char *what, size_t cap, const tsafe_error_info *ei)
{
    size_t n = strlen(what);
    if (ei->detail[0] && n + 3 < cap)
        snprintf(what + n, cap - n, ": %s", ei->detail);
}

tsafe_status io_load_adapter(const char *path, const char *trusted_key,
                             tsafe_lora_adapter **out, char *what, size_t cap)
{
    *out = NULL;
    tsafe_error_info ei;
    tsafe_lora_load_options opt;
    memset(&opt, 0, sizeof opt);
    opt.error = &ei;
    tsafe_status st;
    int d = strcmp(path, "-") ? io_is_dir(path) : 0; /* "-": a package on stdin */
    if (d < 0) {
        snprintf(what, cap, "adapter '%s'", path);
        return TSAFE_E_NOT_FOUND;
    }
    if (d == 1) {
        snprintf(what, cap, "load PEFT adapter '%s'", path);
        if ((st = tsafe_lora_adapter_load_peft_ex(path, &opt, out)) != TSAFE_OK)
            add_detail(what, cap, &ei);
        return st;
    }
    if (!trusted_key) {
        snprintf(what, cap, "package '%s' needs --trusted-key (hex or key file)", path);
        return TSAFE_E_KEY;
    }
    uint8_t pk[32];
    st = io_load_trusted_key(trusted_key, pk);
    if (st != TSAFE_OK) {
        snprintf(what, cap, "trusted key '%s' (64 hex characters or a file of them)", trusted_key);
        return st;
    }
    uint8_t *b;
    size_t n;
    if ((st = io_read_file(path, IO_MAX_FILE, &b, &n)) != TSAFE_OK) {
        snprintf(what, cap, "read package '%s'", path);
        return st;
    }
    snprintf(what, cap, "verify and load package '%s'", path);
    st = tsafe_lora_adapter_load_package(b, n, pk, &opt, out);
    if (st != TSAFE_OK)
        add_detail(what, cap, &ei);
    free(b);
    return st;
}

tsafe_status io_find_module(const tsafe_lora_adapter *ad, const char *name, size_t *index,
                            char *what, size_t cap)
{
    if (tsafe_lora_adapter_find(ad, name, index) == TSAFE_OK)
        return TSAFE_OK;
    size_t nl = strlen(name), hits = 0, n = tsafe_lora_adapter_module_count(ad);
    for (size_t i = 0; i < n; i++) {
        tsafe_lora_module_info m;
        if (tsafe_lora_adapter_module(ad, i, &m) != TSAFE_OK)
            continue;
        size_t ml = strlen(m.name);
        if (ml > nl && m.name[ml - nl - 1] == '.' && !strcmp(m.name + ml - nl, name)) {
            if (hits++ == 0)
                *index = i;
        }
    }
    if (hits == 1)
        return TSAFE_OK;
    if (hits == 0) {
        snprintf(what, cap, "module '%s' is not in the adapter (see 'tensafe adapter inspect')",
                 name);
        return TSAFE_E_NOT_FOUND;
    }
    snprintf(what, cap, "module '%s' matches %zu modules; give the full name", name, hits);
    return TSAFE_E_ARG;
}

double io_module_max_abs_a(const tsafe_lora_module_info *m)
{
    double a = 0;
    for (size_t k = 0; k < m->rank * m->in_dim; k++)
        a = fmax(a, fabs((double)m->A[k]));
    return a;
}

/* Module list "all": every module of the adapter, in its order. */
static tsafe_status all_modules(const tsafe_lora_adapter *ad, io_modules *m, char *what,
                                size_t cap)
{
    size_t n = tsafe_lora_adapter_module_count(ad);
    if (n == 0 || n > IO_MAX_MODULES) {
        snprintf(what, cap, "--module all: the adapter has %zu modules (1..%d served)", n,
                 IO_MAX_MODULES);
        return TSAFE_E_RANGE;
    }
    for (size_t i = 0; i < n; i++)
        if (tsafe_lora_adapter_module(ad, i, &m->info[i]) != TSAFE_OK) {
            snprintf(what, cap, "module %zu", i);
            return TSAFE_E_ADAPTER;
        }
    m->n = n;
    return TSAFE_OK;
}

static tsafe_status listed_modules(const tsafe_lora_adapter *ad, const char *list, io_modules *m,
                                   char *what, size_t cap)
{
    char *store = NULL;
    const char *items[IO_MAX_MODULES];
    size_t n = opts_split(list, &store, items, IO_MAX_MODULES);
    tsafe_status st = TSAFE_OK;
    if (!n) {
        snprintf(what, cap, "module list '%s' (1..%d comma-separated names, or all)", list,
                 IO_MAX_MODULES);
        st = TSAFE_E_ARG;
    }
    for (size_t i = 0; st == TSAFE_OK && i < n; i++) {
        size_t idx = 0;
        if ((st = io_find_module(ad, items[i], &idx, what, cap)) != TSAFE_OK)
            break;
        if ((st = tsafe_lora_adapter_module(ad, idx, &m->info[i])) != TSAFE_OK) {
            snprintf(what, cap, "module '%s'", items[i]);
            break;
        }
        m->n = i + 1;
    }
    free(store);
    return st;
}

tsafe_status io_resolve_modules_ex(const tsafe_lora_adapter *ad, const char *list,
                                   int one_width, io_modules *m, char *what, size_t cap)
{
    memset(m, 0, sizeof *m);
    tsafe_status st = !strcmp(list, "all") ? all_modules(ad, m, what, cap)
                                           : listed_modules(ad, list, m, what, cap);
    for (size_t i = 0; st == TSAFE_OK && i < m->n; i++) {
        const tsafe_lora_module_info *mi = &m->info[i];
        if (i > 0 && mi->in_dim != m->d_in) {
            if (one_width) {
                snprintf(what, cap,
                         "modules '%s' (in %u) and '%s' (in %zu) take different inputs",
                         m->info[0].name, m->d_in, mi->name, mi->in_dim);
                return TSAFE_E_SHAPE;
            }
            m->several_widths = 1;
        }
        if (mi->in_dim > (1u << 24) || mi->out_dim > (1u << 24) || mi->rank > 65536) {
            snprintf(what, cap, "module '%s' is too large for HE-LoRA", mi->name);
            return TSAFE_E_RANGE;
        }
        if (i == 0)
            m->d_in = (uint32_t)mi->in_dim;
        if (mi->rank > m->max_rank)
            m->max_rank = (uint32_t)mi->rank;
        m->total_out += (uint32_t)mi->out_dim;
        m->max_abs_a = fmax(m->max_abs_a, io_module_max_abs_a(mi));
    }
    return st;
}

tsafe_status io_resolve_modules(const tsafe_lora_adapter *ad, const char *list, io_modules *m,
                                char *what, size_t cap)
{
    return io_resolve_modules_ex(ad, list, 1, m, what, cap);
}

tsafe_status io_make_plan(const char *preset, const io_modules *m, double max_abs_x,
                          double precision, tsafe_lora_plan *plan, char *what, size_t cap)
{
    /* an all-zero A still needs a positive bound for the planner */
    double a = m->max_abs_a > 0 ? m->max_abs_a : 1e-3;
    tsafe_status st;
    if (!preset || !strcmp(preset, "auto")) {
        st = tsafe_lora_plan_auto(m->d_in, m->max_rank, max_abs_x, a, precision, plan);
        snprintf(what, cap, "no secure plan for d_in=%u rank=%u |x|<=%g |A|<=%g with error <= %g",
                 m->d_in, m->max_rank, max_abs_x, a, precision);
    } else {
        st = tsafe_lora_plan_preset(preset, m->d_in, m->max_rank, max_abs_x, a, plan);
        if (st == TSAFE_E_NOT_FOUND)
            snprintf(what, cap, "unknown parameter preset '%s' (see 'tensafe params presets')",
                     preset);
        else
            snprintf(what, cap, "plan with preset '%s' for d_in=%u rank=%u |x|<=%g |A|<=%g",
                     preset, m->d_in, m->max_rank, max_abs_x, a);
    }
    return st;
}

void io_free_sites(tsafe_lora_site **sites, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tsafe_lora_site_free(sites[i]);
        sites[i] = NULL;
    }
}

tsafe_status io_make_sites(const tsafe_context *ctx, const tsafe_lora_plan *plan,
                           const io_modules *m, tsafe_lora_site **sites, char *what, size_t cap)
{
    for (size_t i = 0; i < m->n; i++)
        sites[i] = NULL;
    for (size_t i = 0; i < m->n; i++) {
        const tsafe_lora_module_info *mi = &m->info[i];
        tsafe_lora_plan p = *plan;
        p.rank = (uint32_t)mi->rank;
        p.n_batches = (p.rank + p.cols - 1) / p.cols;
        tsafe_status st = tsafe_lora_site_create(ctx, &p, mi->A, mi->B, (uint32_t)mi->out_dim,
                                                 (float)mi->scale, &sites[i]);
        if (st != TSAFE_OK) {
            snprintf(what, cap, "prepare module '%s' for HE", mi->name);
            io_free_sites(sites, i);
            return st;
        }
    }
    return TSAFE_OK;
}

/* -------------------------------------------------------------- modes */

static const char *const k_mode_names[] = {"sealed-private", "sealed", "local",
                                           "plain-zero-moai"};

int io_mode_parse(const char *name, io_mode *out)
{
    for (int i = 0; i < 4; i++)
        if (name && !strcmp(name, k_mode_names[i])) {
            *out = (io_mode)i;
            return 0;
        }
    return -1;
}

const char *io_mode_name(io_mode m)
{
    return (unsigned)m < 4 ? k_mode_names[m] : "unknown";
}

int io_mode_consent(const char *cmd, io_mode mode, int semi_honest)
{
    if (mode == IO_MODE_SEALED && !semi_honest)
        return tool_usage("%s: sealed mode protects only against peers that follow the "
                          "protocol (docs/THREAT_MODEL.md); add --semi-honest to use it, or "
                          "use sealed-private",
                          cmd);
    if (mode != IO_MODE_SEALED && semi_honest)
        return tool_usage("%s: --semi-honest is for --mode sealed", cmd);
    return 0;
}

int io_share_checks(const char *cmd, io_mode mode, int checked, int unchecked)
{
    if (checked && unchecked)
        return tool_usage("%s: --checked-shares (the default) and --unchecked-shares "
                          "exclude each other",
                          cmd);
    if ((checked || unchecked) && mode != IO_MODE_SEALED_PRIVATE)
        return tool_usage("%s: --%s-shares is for --mode sealed-private", cmd,
                          checked ? "checked" : "unchecked");
    return 0;
}

int io_sealed_widths(const char *cmd, io_mode mode, const tool_opt w[3],
                     tsafe_sealed_opts *so)
{
    int sealed = mode == IO_MODE_SEALED || mode == IO_MODE_SEALED_PRIVATE;
    uint32_t *dst[3] = {&so->x_bits, &so->a_bits, &so->b_bits};
    for (int i = 0; i < 3; i++) {
        if (!w[i].seen)
            continue;
        uint32_t v = *(const uint32_t *)w[i].dst;
        if (!sealed)
            return tool_usage("%s: %s sets a width of the sealed modes (sealed-private, "
                              "sealed), not of %s",
                              cmd, w[i].name, io_mode_name(mode));
        if (i == 2 && mode == IO_MODE_SEALED)
            return tool_usage("%s: --b-bits is for sealed-private (sealed applies B in the "
                              "clear)",
                              cmd);
        if (v < TSAFE_SEALED_WIDTH_MIN || v > TSAFE_SEALED_WIDTH_MAX)
            return tool_usage("%s: %s must be %u..%u bits, not %u", cmd, w[i].name,
                              TSAFE_SEALED_WIDTH_MIN, TSAFE_SEALED_WIDTH_MAX, v);
        *dst[i] = v;
    }
    return 0;
}

/* ----------------------------------------------------------- printing */

static uint32_t bit_length(uint64_t v)
{
    uint32_t b = 0;
    while (v) {
        b++;
        v >>= 1;
    }
    return b;
}

void io_print_plan(FILE *f, const tsafe_lora_plan *p, const char *in)
{
    const tsafe_params *pr = &p->params;
    size_t n = (size_t)1 << pr->log_n;
    fprintf(f, "%splan          %s\n", in, p->name);
    fprintf(f, "%sN             %zu (%zu slots)\n", in, n, n / 2);
    fprintf(f, "%sprimes        ", in);
    for (uint32_t i = 0; i < pr->n_primes; i++)
        fprintf(f, "%s%u-bit %llu%s", i ? ", " : "", bit_length(pr->primes[i]),
                (unsigned long long)pr->primes[i],
                i + pr->n_special >= pr->n_primes ? " (special)" : "");
    fprintf(f, "\n");
    fprintf(f, "%slevel         %u (%u limb%s), response level %u\n", in, p->level,
            p->level + 1, p->level ? "s" : "", p->response_level);
    fprintf(f, "%sscales        x 2^%.0f, A 2^%.0f\n", in, log2(p->scale_x), log2(p->scale_a));
    fprintf(f, "%spacking       d_in %u, rank %u, cols %u, batches %u (%u ct x pt per token)\n",
            in, p->d_in, p->rank, p->cols, p->n_batches, p->n_batches);
    fprintf(f, "%sbounds        |x| <= %g, |A| <= %g\n", in, p->max_abs_x, p->max_abs_a);
    fprintf(f, "%ssecurity      log2 Q = %.2f <= %u (128-bit bound, ternary secret): %s\n", in,
            p->log2_q, p->max_log2_q,
            p->log2_q <= p->max_log2_q ? "128-bit secure" : "NOT SECURE");
    fprintf(f, "%serror model   %.3g (|u error| / (max|x| max|A| sqrt(d_in)))\n", in,
            p->expected_error);
    fprintf(f, "%scost          %.4g units\n", in, p->cost);
}

json_t *io_plan_json(const tsafe_lora_plan *p)
{
    const tsafe_params *pr = &p->params;
    json_t *primes = json_array();
    for (uint32_t i = 0; primes && i < pr->n_primes; i++)
        json_array_append_new(
            primes, json_pack("{s:I, s:I, s:b}", "bits", (json_int_t)bit_length(pr->primes[i]),
                              "value", (json_int_t)pr->primes[i], "special",
                              i + pr->n_special >= pr->n_primes));
    return json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I,"
                     " s:f, s:f, s:f, s:I, s:b, s:i, s:f, s:f}",
                     "name", p->name, "log_n", (json_int_t)pr->log_n, "n",
                     (json_int_t)1 << pr->log_n, "slots", (json_int_t)1 << (pr->log_n - 1),
                     "primes", primes, "level", (json_int_t)p->level, "response_level",
                     (json_int_t)p->response_level, "log2_scale_x", log2(p->scale_x),
                     "log2_scale_a", log2(p->scale_a), "d_in", (json_int_t)p->d_in, "rank",
                     (json_int_t)p->rank, "cols", (json_int_t)p->cols, "n_batches",
                     (json_int_t)p->n_batches, "max_abs_x", p->max_abs_x, "max_abs_a",
                     p->max_abs_a, "log2_q", p->log2_q, "max_log2_q",
                     (json_int_t)p->max_log2_q, "secure", p->log2_q <= p->max_log2_q,
                     "security_bits", p->log2_q <= p->max_log2_q ? 128 : 0, "expected_error",
                     p->expected_error, "cost", p->cost);
}

/* ------------------------------------------------------------ backends */

tsafe_status io_backend_factory(const char *name, const tsafe_backend_factory **out,
                                char *what, size_t cap)
{
    *out = NULL;
    if (!strcmp(name, "cpu")) {
        *out = tsafe_backend_cpu_factory();
        return TSAFE_OK;
    }
    if (strcmp(name, "cuda") != 0) {
        snprintf(what, cap, "--backend must be cpu or cuda, not '%s'", name);
        return TSAFE_E_ARG;
    }
#ifdef TSAFE_WITH_CUDA
    int count = 0;
    if (tsafe_cuda_device_count(&count) != TSAFE_OK || count == 0) {
        snprintf(what, cap, "--backend cuda: %s",
                 tsafe_cuda_last_error()[0] ? tsafe_cuda_last_error() : "no CUDA device");
        return TSAFE_E_NO_DEVICE;
    }
    *out = tsafe_backend_cuda_factory(); /* device 0, CKKS and BFV rings */
    return TSAFE_OK;
#else
    snprintf(what, cap, "--backend cuda: this build has no CUDA backend (rebuild with nvcc: "
                        "make CUDA=1)");
    return TSAFE_E_UNSUPPORTED;
#endif
}
