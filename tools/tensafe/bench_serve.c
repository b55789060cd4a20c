/* `tensafe bench serve`: the server side of many sessions at once. K
 * client/server session pairs in this process (in-memory transport, the
 * bytes of every message), tokens of up to 28 sites each (a 28-module
 * layer group), all pending steps of a batch run by one
 * tsafe_session_server_work_batch call per round; only those calls are
 * timed. Per batch size (sites of all sessions together): sites/s and the
 * p50 / p99 of a token's server time (the batch calls it went through:
 * round 1, the round-2 preparation, round 2). On the CPU backend with one
 * thread and with every core (a pool shared by the batch and the backend),
 * and on CUDA when there is a device; with `--backend cuda` the device
 * against every core of the CPU instead, side by side. Also: one 28-site
 * token in one call against 28 one-site tokens, one call each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "commands.h"
#include "io.h"
#include "tensafe/backend.h"
#include "tensafe/cpu_pool.h"
#include "tensafe/lora_session.h"
#ifdef TSAFE_WITH_CUDA
#include "tensafe/cuda.h"
#endif

#define SERVE_GROUP 28u /* sites of one token: a layer group */

typedef struct {
    tsafe_session_server *s;
    tsafe_session_client *c;
} serve_pair;

typedef struct {
    uint32_t d, rank;
    tsafe_session_protocol proto;
    const tsafe_backend_factory *factory;
    tsafe_cpu_pool *pool;
    tsafe_session_service *svc;
    serve_pair *pair;
    tsafe_session_server **srv;
    size_t n_pairs;
    float *A, *B, *x, *delta; /* modules' weights, the input, the outputs */
    double cpu_us;            /* process CPU time inside the batch calls, summed */
} serve_bench;

/* CPU time of every thread of this process: during a batch call only the
 * batch runs, so its growth over the call is the batch's CPU time, and
 * CPU / wall the cores the batch got (on a shared machine, fewer than
 * the pool's threads when others hold the cores). */
static double process_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Moves what is queued between the ends of p (the client's crypto runs in
 * its feed); 1 when something moved. */
static int move_bytes(serve_pair *p)
{
    int moved = 0;
    const uint8_t *d;
    size_t n, used;
    tsafe_session_client_output(p->c, &d, &n);
    if (n && tsafe_session_server_feed(p->s, d, n, &used) == TSAFE_OK && used) {
        tsafe_session_client_sent(p->c, used);
        moved = 1;
    }
    tsafe_session_server_output(p->s, &d, &n);
    if (n && tsafe_session_client_feed(p->c, d, n, &used) == TSAFE_OK && used) {
        tsafe_session_server_sent(p->s, used);
        moved = 1;
    }
    return moved;
}

/* Until nothing moves: bytes, and the batch's pending server steps in one
 * call each time (timed, into *server_us). 0, or -1 when a session failed. */
static int drive(serve_bench *b, size_t k, double *server_us)
{
    for (int moved = 1; moved;) {
        moved = 0;
        for (size_t i = 0; i < k; i++)
            while (move_bytes(&b->pair[i]))
                moved = 1;
        int work = 0;
        for (size_t i = 0; i < k && !work; i++)
            work = (tsafe_session_server_wants(b->srv[i]) & TSAFE_SESSION_WANT_WORK) != 0;
        if (work) {
            double t0 = bench_now_us(), c0 = process_cpu_us();
            if (tsafe_session_server_work_batch(b->srv, k, b->pool) != TSAFE_OK)
                return -1;
            *server_us += bench_now_us() - t0;
            b->cpu_us += process_cpu_us() - c0;
            moved = 1;
        }
    }
    for (size_t i = 0; i < k; i++)
        if ((tsafe_session_client_wants(b->pair[i].c) |
             tsafe_session_server_wants(b->srv[i])) & TSAFE_SESSION_FAILED)
            return -1;
    return 0;
}

/* One token on each of the first k sessions, of the modules first,
 * first + 1, ... (mod 28), 28 sites each but the last, which takes the
 * remainder of total; the server time of its batch calls. */
static int token_from(serve_bench *b, size_t total, uint32_t first, double *server_us)
{
    size_t k = (total + SERVE_GROUP - 1) / SERVE_GROUP;
    uint32_t mods[SERVE_GROUP];
    for (uint32_t m = 0; m < SERVE_GROUP; m++)
        mods[m] = (first + m) % SERVE_GROUP;
    for (size_t i = 0; i < k; i++) {
        size_t n = total - i * SERVE_GROUP < SERVE_GROUP ? total - i * SERVE_GROUP : SERVE_GROUP;
        float *out[SERVE_GROUP];
        for (size_t m = 0; m < n; m++)
            out[m] = b->delta + m * b->d;
        if (tsafe_session_client_submit(b->pair[i].c, mods, n, b->x, out) != TSAFE_OK)
            return -1;
    }
    *server_us = 0;
    return drive(b, k, server_us);
}

static int batch_token(serve_bench *b, size_t total, double *server_us)
{
    return token_from(b, total, 0, server_us);
}

static void serve_free(serve_bench *b)
{
    for (size_t i = 0; i < b->n_pairs; i++) {
        tsafe_session_server_free(b->pair[i].s);
        tsafe_session_client_free(b->pair[i].c);
    }
    free(b->pair);
    free(b->srv);
    tsafe_session_service_free(b->svc);
    free(b->A);
    free(b->B);
    free(b->x);
    free(b->delta);
    memset(b, 0, sizeof *b);
}

static tsafe_status make_service(serve_bench *b)
{
    uint32_t d = b->d, r = b->rank;
    b->A = malloc((size_t)SERVE_GROUP * r * d * sizeof *b->A);
    b->B = malloc((size_t)SERVE_GROUP * d * r * sizeof *b->B);
    b->x = malloc(d * sizeof *b->x);
    b->delta = malloc((size_t)SERVE_GROUP * d * sizeof *b->delta);
    if (!b->A || !b->B || !b->x || !b->delta)
        return TSAFE_E_NOMEM;
    unsigned seed = 2048;
    for (size_t i = 0; i < (size_t)SERVE_GROUP * r * d; i++) {
        b->A[i] = (float)(rand_r(&seed) / (double)RAND_MAX - 0.5) * 0.1f;
        b->B[i] = (float)(rand_r(&seed) / (double)RAND_MAX - 0.5) * 0.1f;
    }
    for (uint32_t i = 0; i < d; i++)
        b->x[i] = (float)sin(0.37 * i);
    tsafe_session_module mod[SERVE_GROUP];
    char names[SERVE_GROUP][16];
    for (uint32_t m = 0; m < SERVE_GROUP; m++) {
        snprintf(names[m], sizeof names[m], "site.%u", m);
        mod[m] = (tsafe_session_module){names[m], b->A + (size_t)m * r * d,
                                        b->B + (size_t)m * d * r, d, r, d, 1.0f};
    }
    tsafe_session_service_opts so = {.protocol = b->proto, .per_query = 1,
                                     .backend = b->factory, .pool = b->pool};
    so.sealed.semi_honest = b->proto == TSAFE_SESSION_SEALED;
    return tsafe_session_service_create(&so, mod, SERVE_GROUP, &b->svc);
}

/* The service and n_pairs connected session pairs (hello read). */
static tsafe_status serve_open(serve_bench *b, size_t n_pairs)
{
    tsafe_status st = make_service(b);
    b->pair = calloc(n_pairs, sizeof *b->pair);
    b->srv = calloc(n_pairs, sizeof *b->srv);
    if (st == TSAFE_OK && (!b->pair || !b->srv))
        st = TSAFE_E_NOMEM;
    tsafe_session_client_opts co = {.protocol = b->proto, .per_query = 1,
                                    .allow_no_dp = b->proto == TSAFE_SESSION_SEALED};
    co.sealed.semi_honest = b->proto == TSAFE_SESSION_SEALED;
    for (size_t i = 0; i < n_pairs && st == TSAFE_OK; i++, b->n_pairs++) {
        st = tsafe_session_server_create(b->svc, NULL, &b->pair[i].s);
        if (st == TSAFE_OK)
            st = tsafe_session_client_create(&co, NULL, &b->pair[i].c);
        b->srv[i] = b->pair[i].s;
        while (st == TSAFE_OK && move_bytes(&b->pair[i]))
            ;
        if (st == TSAFE_OK && !(tsafe_session_client_wants(b->pair[i].c) & TSAFE_SESSION_READY))
            st = TSAFE_E_STATE;
    }
    return st;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The q-quantile (nearest rank) of v[0..n), sorted in place. */
static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* Batch sizes: sites of all sessions in one batch. */
static const size_t k_sizes[] = {1, 28, 224, 1344, 4096};

static int reps_for(size_t sites, int quick)
{
    if (quick)
        return 2;
    return sites <= 1 ? 21 : sites <= 28 ? 11 : sites <= 224 ? 5 : 3;
}

#define MAX_CFG 2 /* configurations timed side by side */
#define MAX_REPS 32

static void report_size(bench_report *r, const serve_bench *b, const char *label,
                        size_t sites, double *t, int reps, double cpu_us, double *p50)
{
    char params[128], note[192];
    double wall = 0;
    for (int i = 0; i < reps; i++)
        wall += t[i];
    *p50 = quantile(t, reps, 0.5);
    double p99 = quantile(t, reps, 0.99);
    snprintf(params, sizeof params, "%s, d=%u r=%u, batch %zu site(s), %zu session(s)", label,
             b->d, b->rank, sites, (sites + SERVE_GROUP - 1) / SERVE_GROUP);
    snprintf(note, sizeof note,
             "%.0f sites/s; token p50 %.2f ms, p99 %.2f ms (%d reps); %.2f cores busy",
             sites / (*p50 * 1e-6), *p50 / 1e3, p99 / 1e3, reps, cpu_us / wall);
    bench_report_add(r, "serve", tsafe_session_protocol_name(b->proto), params, *p50, note);
}

static void report_ratio(bench_report *r, tsafe_session_protocol proto,
                         const char *const *label, size_t sites, const double *p50,
                         const char *how)
{
    char params[160], note[96];
    snprintf(params, sizeof params, "sites/s %s / %s, batch %zu site(s)", label[1], label[0],
             sites);
    snprintf(note, sizeof note, "%.2fx (%s)", p50[0] / p50[1], how);
    bench_report_add(r, "serve", tsafe_session_protocol_name(proto), params, p50[1], note);
}

/* With TSAFE_CUDA_PROFILE set: what the CUDA backends' callers spent in
 * each kind of backend call over the batch's tokens (the rows since the
 * last reset), per token, summed over the threads; then reset (r NULL:
 * only reset). */
static void report_profile(bench_report *r, const serve_bench *b, size_t sites, int tokens)
{
#ifdef TSAFE_WITH_CUDA
    tsafe_cuda_profile_row row[32];
    size_t n = tsafe_cuda_profile(row, 32, 1);
    if (!r)
        return;
    for (size_t i = 0; i < n && i < 32; i++) {
        char params[128], note[128];
        snprintf(params, sizeof params, "profile, batch %zu site(s): %s", sites, row[i].what);
        snprintf(note, sizeof note, "%.1f calls, %.0f items per token; time summed over threads",
                 (double)row[i].calls / tokens, (double)row[i].items / tokens);
        bench_report_add(r, "serve", tsafe_session_protocol_name(b->proto), params,
                         row[i].seconds * 1e6 / tokens, note);
    }
#else
    (void)r, (void)b, (void)sites, (void)tokens;
#endif
}

/* Batch sizes [z0, z1) on each configuration of b[c0 .. c0 + n_cfg), their
 * repetitions interleaved (a load that comes and goes hits them alike);
 * each one's p50 into p50[c][z]. */
static int serve_sizes(bench_report *r, serve_bench *b, const char *const *label, int c0,
                       int n_cfg, size_t z0, size_t z1, int quick, double p50[][5])
{
    for (size_t z = z0; z < z1; z++) {
        size_t sites = k_sizes[z];
        int reps = reps_for(sites, quick);
        double t[MAX_CFG][MAX_REPS], warm, cpu[MAX_CFG];
        for (int c = c0; c < c0 + n_cfg; c++) {
            if (batch_token(&b[c], sites, &warm) != 0) /* untimed: first-use caches */
                return -1;
            b[c].cpu_us = 0;
        }
        report_profile(NULL, &b[c0], sites, 1); /* reset: the timed tokens only */
        for (int i = 0; i < reps; i++)
            for (int c = c0; c < c0 + n_cfg; c++)
                if (batch_token(&b[c], sites, &t[c][i]) != 0)
                    return -1;
        for (int c = c0; c < c0 + n_cfg; c++) {
            cpu[c] = b[c].cpu_us;
            report_size(r, &b[c], label[c], sites, t[c], reps, cpu[c], &p50[c][z]);
        }
        report_profile(r, &b[c0], sites, reps);
    }
    return 0;
}

/* One 28-site token in one call against the same 28 sites as 28 one-site
 * tokens, module 0 to 27 (one session of each configuration,
 * interleaved). Until 2026-11-27 the one-site tokens all read module 0,
 * whose operands then stayed in cache: a comparison of other work. */
static int serve_ratio(bench_report *r, serve_bench *b, const char *const *label, int n_cfg,
                       int quick)
{
    int reps = quick ? 2 : 7;
    double one[MAX_CFG][16], many[MAX_CFG][16], x;
    for (int c = 0; c < n_cfg; c++)
        if (batch_token(&b[c], SERVE_GROUP, &x) != 0 || batch_token(&b[c], 1, &x) != 0)
            return -1;
    for (int i = 0; i < reps; i++)
        for (int c = 0; c < n_cfg; c++) {
            if (batch_token(&b[c], SERVE_GROUP, &one[c][i]) != 0)
                return -1;
            many[c][i] = 0;
            for (uint32_t s = 0; s < SERVE_GROUP; s++) {
                if (token_from(&b[c], 1, s, &x) != 0)
                    return -1;
                many[c][i] += x;
            }
        }
    for (int c = 0; c < n_cfg; c++) {
        double a = bench_median_of(one[c], reps), m = bench_median_of(many[c], reps);
        char params[128], note[96];
        snprintf(params, sizeof params, "%s, d=%u r=%u: 28-site token / 28 one-site tokens",
                 label[c], b[c].d, b[c].rank);
        snprintf(note, sizeof note, "%.3f (%.2f ms / %.2f ms)", a / m, a / 1e3, m / 1e3);
        bench_report_add(r, "serve", tsafe_session_protocol_name(b[c].proto), params, a, note);
    }
    return 0;
}

#define SMALL_SIZES 3 /* 1, 28, 224 sites: both configurations open at once */

static int serve_open_cfg(serve_bench *b, tsafe_session_protocol proto,
                          const tsafe_backend_factory *f, tsafe_cpu_pool *pool, size_t pairs)
{
    *b = (serve_bench){.d = 2048, .rank = 32, .proto = proto, .factory = f, .pool = pool};
    tsafe_status st = serve_open(b, pairs);
    return st == TSAFE_OK ? 0 : tool_fail("bench serve: setup", st);
}

/* The configurations (factory, pool) of one protocol: the small batches
 * and the 28-site ratio with every configuration open, repetitions
 * interleaved; the large ones (147 sessions of tens of MB each) one
 * configuration at a time. */
static int serve_case(bench_report *r, tsafe_session_protocol proto,
                      const tsafe_backend_factory *const *f, tsafe_cpu_pool *const *pool,
                      const char *const *label, int n_cfg, int quick)
{
    size_t n_sizes = quick ? 2 : sizeof k_sizes / sizeof *k_sizes;
    size_t small = n_sizes < SMALL_SIZES ? n_sizes : SMALL_SIZES;
    size_t pairs = (k_sizes[small - 1] + SERVE_GROUP - 1) / SERVE_GROUP;
    serve_bench b[MAX_CFG];
    double p50[MAX_CFG][5];
    memset(b, 0, sizeof b);
    int rc = 0;
    for (int c = 0; c < n_cfg && !rc; c++)
        rc = serve_open_cfg(&b[c], proto, f[c], pool[c], pairs);
    if (!rc && (serve_sizes(r, b, label, 0, n_cfg, 0, small, quick, p50) != 0 ||
                serve_ratio(r, b, label, n_cfg, quick) != 0))
        rc = tool_fail("bench serve: a session failed", TSAFE_E_STATE);
    for (int c = 0; c < n_cfg; c++)
        serve_free(&b[c]);
    size_t most = (k_sizes[n_sizes - 1] + SERVE_GROUP - 1) / SERVE_GROUP;
    for (int c = 0; c < n_cfg && !rc && small < n_sizes; c++) {
        rc = serve_open_cfg(&b[c], proto, f[c], pool[c], most);
        if (!rc && serve_sizes(r, b, label, c, 1, small, n_sizes, quick, p50) != 0)
            rc = tool_fail("bench serve: a session failed", TSAFE_E_STATE);
        serve_free(&b[c]);
    }
    for (size_t z = 0; z < n_sizes && !rc && n_cfg == 2; z++) {
        double pz[2] = {p50[0][z], p50[1][z]};
        report_ratio(r, proto, label, k_sizes[z], pz,
                     z < small ? "interleaved" : "one after the other");
    }
    return rc;
}

static volatile double g_spin_sink;

/* A control task: arithmetic only, no memory traffic, no library code. */
static void spin_task(void *arg, size_t i)
{
    (void)arg;
    (void)i;
    double x = 0;
    for (long k = 0; k < 30000000; k++)
        x += (double)k * 1e-9;
    g_spin_sink = x;
}

/* What the machine gives a second thread now: 4 independent spin tasks on
 * the pool against one thread, interleaved (the ceiling of any 2 / 1
 * ratio measured in the same run). */
static void serve_control(bench_report *r, tsafe_cpu_pool *all, const char *when)
{
    double one[5], many[5];
    for (int i = 0; i < 5; i++) {
        double t0 = bench_now_us();
        tsafe_cpu_pool_run(NULL, 4, spin_task, NULL);
        one[i] = bench_now_us() - t0;
        t0 = bench_now_us();
        tsafe_cpu_pool_run(all, 4, spin_task, NULL);
        many[i] = bench_now_us() - t0;
    }
    double a = bench_median_of(one, 5), b = bench_median_of(many, 5);
    char params[128], note[96];
    snprintf(params, sizeof params, "control (%s): 4 spin tasks, %u threads / 1", when,
             tsafe_cpu_pool_threads(all));
    snprintf(note, sizeof note, "%.2fx (%.1f / %.1f ms)", a / b, a / 1e3, b / 1e3);
    bench_report_add(r, "serve", "control", params, b, note);
}

/* A pool of every core and its row label "<what>, N threads"; 0 or the
 * tool's failure status. */
static int pool_all(const char *what, tsafe_cpu_pool **all, char *label, size_t cap)
{
    tsafe_status st = tsafe_cpu_pool_create(0, all);
    if (st != TSAFE_OK)
        return tool_fail("bench serve: pool", st);
    snprintf(label, cap, "%s, %u threads", what, tsafe_cpu_pool_threads(*all));
    return 0;
}

/* Both protocols (or --protocol's) on the configurations given. */
static int serve_modes(bench_report *r, const tsafe_backend_factory *const *f,
                       tsafe_cpu_pool *const *pool, const char *const *label, int n_cfg,
                       int quick)
{
    int rc = 0;
    if (!bench_protocol || !strcmp(bench_protocol, "sealed"))
        rc = serve_case(r, TSAFE_SESSION_SEALED, f, pool, label, n_cfg, quick);
    if (!rc && (!bench_protocol || !strcmp(bench_protocol, "sealed-private")))
        rc = serve_case(r, TSAFE_SESSION_SEALED_PRIVATE, f, pool, label, n_cfg, quick);
    return rc;
}

/* CPU with one thread and with a pool of every core (the sessions of a
 * batch, a round's sealings and the backends' products on it), side by
 * side; both modes. */
static int serve_cpu(bench_report *r, int quick)
{
    tsafe_cpu_pool *all = NULL;
    char label[64];
    int rc = pool_all("cpu", &all, label, sizeof label);
    if (rc)
        return rc;
    const tsafe_backend_factory *f[2] = {NULL, NULL};
    tsafe_cpu_pool *pool[2] = {NULL, all};
    const char *labels[2] = {"cpu, 1 thread", label};
    serve_control(r, all, "before");
    rc = serve_modes(r, f, pool, labels, 2, quick);
    serve_control(r, all, "after");
    tsafe_cpu_pool_free(all);
    return rc;
}

/* `--backend cuda`: the device against this machine's CPU backend on
 * every core, side by side in one run (the ratio rows: CPU p50 / device
 * p50 per batch size); the one-thread rows are left out (GPU lease time).
 * The device configuration has the pool too: the sessions of a batch run
 * side by side on its threads, each on its own backends (streams), so the
 * host work of one overlaps the device work of another. */
static int serve_device(bench_report *r, int quick, const tsafe_backend_factory *dev)
{
    tsafe_cpu_pool *all = NULL;
    char label[64], dlabel[64];
    int rc = pool_all("cpu", &all, label, sizeof label);
    if (rc)
        return rc;
    tsafe_cpu_pool *dpool = all; /* --threads: the device's own pool */
    if (bench_device_threads && tsafe_cpu_pool_create(bench_device_threads, &dpool) != TSAFE_OK) {
        tsafe_cpu_pool_free(all);
        return tool_fail("bench serve: pool", TSAFE_E_NOMEM);
    }
    snprintf(dlabel, sizeof dlabel, "%s, %u threads", dev->name, tsafe_cpu_pool_threads(dpool));
    const tsafe_backend_factory *f[2] = {NULL, dev};
    tsafe_cpu_pool *pool[2] = {all, dpool};
    const char *labels[2] = {label, dlabel};
    rc = serve_modes(r, f, pool, labels, 2, quick);
    if (dpool != all)
        tsafe_cpu_pool_free(dpool);
    tsafe_cpu_pool_free(all);
    return rc;
}

int bench_serve(bench_report *r, int quick)
{
    if (bench_backend && strcmp(bench_backend->name, "cpu") != 0)
        return serve_device(r, quick, bench_backend);
    int rc = serve_cpu(r, quick);
    const tsafe_backend_factory *cuda = NULL;
    char what[256];
    if (!rc && io_backend_factory("cuda", &cuda, what, sizeof what) == TSAFE_OK) {
        /* the device driven by every core (sessions side by side, each on
         * its own streams), as --backend cuda runs it */
        tsafe_cpu_pool *all = NULL;
        char label[64];
        if ((rc = pool_all("cuda", &all, label, sizeof label)) != 0)
            return rc;
        const char *lp = label;
        rc = serve_modes(r, &cuda, &all, &lp, 1, quick);
        tsafe_cpu_pool_free(all);
    } else if (!rc)
        bench_report_add_value(r, "serve", "cuda skipped", what, 0, "devices");
    return rc;
}
