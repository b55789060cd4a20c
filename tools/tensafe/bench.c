/* `tensafe bench [core|lora|moe|cuda] [--json] [--quick]` */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clock.h"
#include "commands.h"
#include "io.h"

const struct tsafe_backend_factory *bench_backend;
const char *bench_protocol;
unsigned bench_device_threads;

double bench_now_us(void)
{
    return tsafe_now_us();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median_us(bench_fn fn, void *arg, int warmup, int reps)
{
    for (int i = 0; i < warmup; i++)
        fn(arg);
    if (reps < 1)
        reps = 1;
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t)
        return -1;
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now_us();
        fn(arg);
        t[i] = bench_now_us() - t0;
    }
    double m = bench_median_of(t, reps);
    free(t);
    return m;
}

double bench_median_of(double *v, int n)
{
    if (n < 1)
        return -1;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct bench_report {
    int json;
    int tsv; /* group<TAB>name<TAB>params<TAB>value<TAB>unit, for scripts/plots.sh */
    json_t *rows;
    const char *last_group;
};

bench_report *bench_report_create(int json)
{
    bench_report *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->json = json;
    r->rows = json_array();
    return r;
}

static void print_group(bench_report *r, const char *group)
{
    if (r->json || (r->last_group && strcmp(r->last_group, group) == 0))
        return;
    r->last_group = group;
    if (r->tsv)
        return;
    printf("\n== %s\n%-34s %-34s %14s  %s\n", group, "benchmark", "params",
           "median", "note");
}

void bench_report_add(bench_report *r, const char *group, const char *name,
                      const char *params, double median_us, const char *note)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:f}", "group", group, "name", name,
                          "params", params, "median_us", median_us);
    if (note)
        json_object_set_new(o, "note", json_string(note));
    json_array_append_new(r->rows, o);
    print_group(r, group);
    if (r->tsv)
        printf("%s\t%s\t%s\t%.3f\tus\n", group, name, params, median_us);
    else if (!r->json) {
        printf("%-34s %-34s %11.2f us  %s\n", name, params, median_us,
               note ? note : "");
        fflush(stdout);
    }
}

void bench_report_add_value(bench_report *r, const char *group,
                            const char *name, const char *params,
                            double value, const char *unit)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:f, s:s}", "group", group, "name",
                          name, "params", params, "value", value, "unit", unit);
    json_array_append_new(r->rows, o);
    print_group(r, group);
    if (r->tsv)
        printf("%s\t%s\t%s\t%.3f\t%s\n", group, name, params, value, unit);
    else if (!r->json) {
        printf("%-34s %-34s %14.0f %s\n", name, params, value, unit);
        fflush(stdout);
    }
}

void bench_report_finish(bench_report *r)
{
    if (r->json) {
        char *s = json_dumps(r->rows, JSON_INDENT(1));
        if (s)
            puts(s);
        free(s);
    }
    json_decref(r->rows);
    free(r);
}

int cmd_bench(int argc, char **argv)
{
    int json = 0, quick = 0, tsv = 0;
    const char *which = "all", *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *end;
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (*end || v < 1 || v > 256)
                return tool_usage("bench: --threads must be 1..256");
            bench_device_threads = (unsigned)v;
        } else if (!strcmp(argv[i], "--protocol") && i + 1 < argc) {
            bench_protocol = argv[++i];
            if (strcmp(bench_protocol, "sealed") && strcmp(bench_protocol, "sealed-private"))
                return tool_usage("bench: --protocol must be sealed or sealed-private");
        }
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--tsv"))
            tsv = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: tensafe bench [core|lora|lora-sweep|moe|model|serve|cuda|all] [--json|--tsv] [--quick]\n"
                   "                    [--backend cpu|cuda] [--protocol sealed|sealed-private] [--threads N]\n"
                   "Prints medians (µs) of the core CKKS operations, the per-token\n"
                   "HE-LoRA delta, the MoE layer and the CUDA backend; `model`: every\n"
                   "HE site of a token of Qwen2.5-1.5B and Qwen3-30B-A3B (sealed modes); `serve`:\n"
                   "server sites/s and token p50/p99 of batched sessions at 1 to 4096 sites\n"
                   "(CPU with 1 and all threads, CUDA when present; with --backend cuda the\n"
                   "device against the CPU on all threads). --backend: where\n"
                   "the HE-LoRA and MoE servers' ring work runs (default cpu); `bench lora`\n"
                   "also times one site's call on the CPU backend alone. --protocol: `serve`\n"
                   "runs that protocol only; --threads: the device's host threads in `serve`\n"
                   "(default one per core). TSAFE_CUDA_PROFILE=1: `serve` adds where the\n"
                   "CUDA backends' callers spent their time.\n");
            return 0;
        } else if (argv[i][0] != '-')
            which = argv[i];
        else
            return tool_usage("bench: unknown option '%s'", argv[i]);
    }
    int all = !strcmp(which, "all");
    if (!all && strcmp(which, "core") && strcmp(which, "lora") &&
        strcmp(which, "moe") && strcmp(which, "cuda") && strcmp(which, "lora-sweep") &&
        strcmp(which, "model") && strcmp(which, "serve"))
        return tool_usage("bench: unknown group '%s'", which);
    char what[256];
    tsafe_status bst = io_backend_factory(backend, &bench_backend, what, sizeof what);
    if (bst != TSAFE_OK)
        return bst == TSAFE_E_ARG ? tool_usage("bench: %s", what) : tool_fail(what, bst);
    bench_report *r = bench_report_create(json);
    if (!r)
        return tool_fail("bench", -10);
    r->tsv = tsv && !json;
    int rc = 0;
    if (!rc && (all || !strcmp(which, "core")))
        rc = bench_core(r, quick);
    if (!rc && (all || !strcmp(which, "lora")))
        rc = bench_lora(r, quick);
    if (!rc && !strcmp(which, "lora-sweep") &&
        strcmp(which, "model"))
        rc = bench_lora_sweep(r, quick);
    if (!rc && (all || !strcmp(which, "moe")))
        rc = bench_moe(r, quick);
    if (!rc && !strcmp(which, "model"))
        rc = bench_model(r, quick);
    if (!rc && !strcmp(which, "serve"))
        rc = bench_serve(r, quick);
    if (!rc && (all || !strcmp(which, "cuda")))
        rc = bench_cuda(r, quick);
    bench_report_finish(r);
    return rc;
}
