/* The module engines' common entry and the plaintext one; the encrypted
 * engines live with their schemes (he/engine.c, sealed/pair.c). */
#include <stdlib.h>

#include "clock.h"
#include "engine_internal.h"

tsafe_status tsafe_lora_module_engine_run(const tsafe_lora_module_engine *e,
                                          const tsafe_lora_module *const *modules, size_t n,
                                          const float *x, float *const *delta,
                                          tsafe_lora_stats *stats)
{
    if (!e || !e->fn)
        return TSAFE_E_NULL;
    return e->fn(e->user, modules, n, x, delta, stats);
}

tsafe_status tsafe_lora_module_engine_prepare(const tsafe_lora_module_engine *e,
                                              const tsafe_lora_module *const *modules, size_t n)
{
    if (!e || !e->fn || (n && !modules))
        return TSAFE_E_NULL;
    if (n > TSAFE_LORA_MAX_CALL_MODULES)
        return TSAFE_E_RANGE;
    for (size_t i = 0; i < n; i++)
        if (!modules[i])
            return TSAFE_E_NULL;
    return e->prepare && n ? e->prepare(e->user, modules, n) : TSAFE_OK;
}

static tsafe_status plain_fn(void *user, const tsafe_lora_module *const *modules, size_t n,
                             const float *x, float *const *delta, tsafe_lora_stats *stats)
{
    (void)user;
    tsafe_status st = tsafe_lora_module_check_call(modules, n, x, delta);
    if (st != TSAFE_OK)
        return st;
    double t0 = tsafe_now_us();
    for (size_t i = 0; i < n; i++) {
        const tsafe_lora_module *m = modules[i];
        float *u = malloc(tsafe_lora_module_rank(m) * sizeof *u);
        if (!u)
            return TSAFE_E_NOMEM;
        tsafe_lora_plain_delta_(tsafe_lora_module_A(m), tsafe_lora_module_B(m),
                                tsafe_lora_module_rank(m), tsafe_lora_module_d_in(m),
                                tsafe_lora_module_d_out(m), tsafe_lora_module_scale(m), x, u,
                                delta[i]);
        free(u);
    }
    if (stats) {
        stats->bu_us += tsafe_now_us() - t0;
        stats->tokens += 1;
    }
    return TSAFE_OK;
}

tsafe_lora_module_engine tsafe_lora_module_engine_plain(void)
{
    tsafe_lora_module_engine e = {plain_fn, NULL, NULL};
    return e;
}
