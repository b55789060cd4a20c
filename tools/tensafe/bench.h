/* Benchmark helpers for `tensafe bench`: wall-clock medians over repeated
 * runs and a table/JSON report. Timing uses CLOCK_MONOTONIC. */
#ifndef TENSAFE_TOOL_BENCH_H
#define TENSAFE_TOOL_BENCH_H

#include <stddef.h>

typedef struct bench_report bench_report;

struct tsafe_backend_factory;
/* --backend of `tensafe bench`: where the HE-LoRA / MoE servers' ring work
 * runs (the CPU factory unless another was chosen). */
extern const struct tsafe_backend_factory *bench_backend;
/* --protocol of `tensafe bench serve`: "sealed" or "sealed-private" alone
 * (NULL: both). */
extern const char *bench_protocol;
/* --threads of `tensafe bench serve --backend cuda`: the device's pool
 * threads (0: one per core, as the CPU's). */
extern unsigned bench_device_threads;

/* Function under test: called repeatedly with its argument. */
typedef void (*bench_fn)(void *arg);

double bench_now_us(void);
/* Median of `reps` timed calls (after `warmup` untimed ones), in µs. */
double bench_median_us(bench_fn fn, void *arg, int warmup, int reps);

/* Median of the values v[0..n) (sorted in place). */
double bench_median_of(double *v, int n);

bench_report *bench_report_create(int json);
/* Adds a row: name, parameter description, median µs, and an optional
 * free-form note (e.g. a ratio or a byte count), which may be NULL. */
void bench_report_add(bench_report *r, const char *group, const char *name,
                      const char *params, double median_us, const char *note);
/* Adds a non-time figure (bytes, ratio) printed in the value column. */
void bench_report_add_value(bench_report *r, const char *group,
                            const char *name, const char *params,
                            double value, const char *unit);
/* Prints (table or JSON array) and frees. */
void bench_report_finish(bench_report *r);

/* Bench groups (each adds rows; returns 0 or an exit code). */
int bench_core(bench_report *r, int quick);
int bench_lora(bench_report *r, int quick);
/* local-mode delta vs rank and parameter set (for docs/plots) */
int bench_lora_sweep(bench_report *r, int quick);
int bench_moe(bench_report *r, int quick);
int bench_cuda(bench_report *r, int quick);
/* every HE site of a token of whole models (bench_model.c) */
int bench_model(bench_report *r, int quick);
/* many server sessions batched (bench_serve.c); only when named */
int bench_serve(bench_report *r, int quick);

#endif
