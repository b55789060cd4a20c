/* tsafe_moe_bench_layer: wall-clock timing of one generated layer. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moe_internal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

tsafe_status tsafe_moe_bench_layer(const tsafe_moe_config *cfg, uint64_t seed,
                                   const tsafe_moe_layer_options *opt, size_t batch,
                                   size_t reps, tsafe_moe_bench_result *out)
{
    tsafe_status st = TSAFE_OK;
    tsafe_moe_layer *L = NULL;
    float *h = NULL, *y = NULL;
    double *t_fwd = NULL, *t_route = NULL;
    tsafe_moe_route *routes = NULL;
    size_t nd;
    TSAFE_REQUIRE(cfg != NULL && out != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(batch > 0 && batch <= 65536 && reps > 0 && reps <= 100000, TSAFE_E_RANGE);
    memset(out, 0, sizeof *out);

    double t0 = now_s();
    TSAFE_TRY(tsafe_moe_layer_create_random_ex(cfg, seed, opt, &L));
    out->create_s = now_s() - t0;

    TSAFE_CHECK(tsafe_mul_size(batch, L->d, &nd), TSAFE_E_SIZE_OVERFLOW);
    h = malloc(nd * sizeof *h);
    y = malloc(nd * sizeof *y);
    routes = malloc(batch * sizeof *routes);
    t_fwd = malloc(reps * sizeof *t_fwd);
    t_route = malloc(reps * sizeof *t_route);
    TSAFE_CHECK(h && y && routes && t_fwd && t_route, TSAFE_E_NOMEM);

    /* one warm-up batch, then fresh tokens each rep (rep index as stream id) */
    tsafe_moe_fill_uniform(h, nd, 1.7320508f, L->key, MOE_T_TOKENS, -1); /* unit variance */
    TSAFE_TRY(tsafe_moe_layer_forward(L, h, batch, y, routes));
    for (size_t r = 0; r < reps; r++) {
        tsafe_moe_fill_uniform(h, nd, 1.7320508f, L->key, MOE_T_TOKENS, (int64_t)r);
        double a = now_s();
        TSAFE_TRY(tsafe_moe_layer_route(L, h, batch, routes));
        double b = now_s();
        TSAFE_TRY(tsafe_moe_layer_forward(L, h, batch, y, routes));
        double c = now_s();
        t_route[r] = (b - a) * 1e6 / (double)batch;
        t_fwd[r] = (c - b) * 1e6 / (double)batch;
    }
    out->us_per_token = median(t_fwd, reps);
    out->us_per_token_min = t_fwd[0]; /* sorted by median() */
    out->route_us_per_token = median(t_route, reps);
    out->n_tokens = batch;
    out->reps = reps;
    out->weight_bytes = L->weight_bytes;
fail:
    free(h);
    free(y);
    free(routes);
    free(t_fwd);
    free(t_route);
    tsafe_moe_layer_free(L);
    return st;
}
