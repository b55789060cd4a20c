/* CKKS sites per module, keyed on the module id, for the module engines
 * of local mode and plain ZeRo-MOAI (tensafe/lora_engine.h). */
#include <stdlib.h>

#include "he_internal.h"

static tsafe_status grow(tsafe_lora_sitecache *c)
{
    size_t cap = c->cap ? 2 * c->cap : 16;
    uint64_t *ids = realloc(c->ids, cap * sizeof *ids);
    if (!ids)
        return TSAFE_E_NOMEM;
    c->ids = ids;
    tsafe_lora_site **sites = realloc(c->sites, cap * sizeof *sites);
    if (!sites)
        return TSAFE_E_NOMEM;
    c->sites = sites;
    c->cap = cap;
    return TSAFE_OK;
}

static tsafe_status site_of(tsafe_lora_sitecache *c, const tsafe_context *ctx,
                            const tsafe_lora_plan *plan, const tsafe_lora_module *m,
                            const tsafe_lora_site **out)
{
    uint64_t id = tsafe_lora_module_id(m);
    for (size_t i = 0; i < c->n; i++)
        if (c->ids[i] == id) {
            *out = c->sites[i];
            return TSAFE_OK;
        }
    if (tsafe_lora_module_rank(m) != plan->rank || tsafe_lora_module_d_in(m) != plan->d_in)
        return TSAFE_E_PARAMS_MISMATCH;
    tsafe_status st = c->n == c->cap ? grow(c) : TSAFE_OK;
    tsafe_lora_site *s = NULL;
    if (st == TSAFE_OK)
        st = tsafe_lora_site_create(ctx, plan, tsafe_lora_module_A(m), tsafe_lora_module_B(m),
                                    tsafe_lora_module_d_out(m), tsafe_lora_module_scale(m), &s);
    if (st != TSAFE_OK)
        return st;
    c->ids[c->n] = id;
    c->sites[c->n++] = s;
    *out = s;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_sitecache_map(tsafe_lora_sitecache *c, const tsafe_context *ctx,
                                      const tsafe_lora_plan *plan,
                                      const tsafe_lora_module *const *modules, size_t n,
                                      const tsafe_lora_site **sites)
{
    tsafe_status st = TSAFE_OK;
    for (size_t i = 0; i < n && st == TSAFE_OK; i++)
        st = site_of(c, ctx, plan, modules[i], &sites[i]);
    return st;
}

void tsafe_lora_sitecache_clear(tsafe_lora_sitecache *c)
{
    for (size_t i = 0; i < c->n; i++)
        tsafe_lora_site_free(c->sites[i]);
    free(c->ids);
    free(c->sites);
    c->ids = NULL;
    c->sites = NULL;
    c->n = c->cap = 0;
}
