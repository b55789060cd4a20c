/* Filling a layer from a checkpoint's safetensors (Hugging Face names). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/safetensors.h"
#include "moe_internal.h"

#define MOE_NAME_CAP 512

static tsafe_status tensor_name(char *buf, const char *prefix, const char *fmt, int32_t e)
{
    char tail[128];
    int n = snprintf(tail, sizeof tail, fmt, e);
    if (n < 0 || (size_t)n >= sizeof tail)
        return TSAFE_E_ARG;
    n = snprintf(buf, MOE_NAME_CAP, "%s%s", prefix, tail);
    return (n < 0 || n >= MOE_NAME_CAP) ? TSAFE_E_ARG : TSAFE_OK;
}

/* Shape must be exactly dims[0..nd) (a [1 x d] gate also accepts [d]). */
static tsafe_status check_shape(const tsafe_safetensors *st, const char *name,
                                const uint64_t *dims, size_t nd, int allow_flat)
{
    tsafe_tensor_info info;
    tsafe_status s = tsafe_safetensors_find(st, name, &info);
    if (s == TSAFE_E_NOT_FOUND)
        return TSAFE_E_MISSING_FIELD;
    if (s != TSAFE_OK)
        return s;
    if (allow_flat && info.ndim == 1 && info.shape[0] == dims[nd - 1])
        return TSAFE_OK;
    if (info.ndim != nd)
        return TSAFE_E_SHAPE;
    for (size_t i = 0; i < nd; i++)
        if (info.shape[i] != dims[i])
            return TSAFE_E_SHAPE;
    return TSAFE_OK;
}

static tsafe_status read_exact(const tsafe_safetensors *st, const char *name,
                               const uint64_t *dims, size_t nd, float *dst, size_t count)
{
    tsafe_status s = check_shape(st, name, dims, nd, 0);
    return s != TSAFE_OK ? s : tsafe_safetensors_read_f32(st, name, dst, count);
}

/* gate/up/down of one expert under `base` ("...experts.7." or
 * "...shared_expert." or the dense "...mlp.") into scratch, then set. */
static tsafe_status load_split(tsafe_moe_layer *L, const tsafe_safetensors *st,
                               const char *prefix, const char *base_fmt, int32_t id,
                               uint32_t inter, float *g, float *u, float *dn)
{
    char fmt[128], name[MOE_NAME_CAP];
    const uint64_t gu_dims[2] = {inter, L->d}, d_dims[2] = {L->d, inter};
    const size_t n = (size_t)inter * L->d;
    static const char *const parts[3] = {"gate_proj.weight", "up_proj.weight",
                                         "down_proj.weight"};
    float *dst[3] = {g, u, dn};
    tsafe_status s;
    for (int p = 0; p < 3; p++) {
        int k = snprintf(fmt, sizeof fmt, "%s%s", base_fmt, parts[p]);
        if (k < 0 || (size_t)k >= sizeof fmt)
            return TSAFE_E_ARG;
        if ((s = tensor_name(name, prefix, fmt, id)) != TSAFE_OK)
            return s;
        if ((s = read_exact(st, name, p < 2 ? gu_dims : d_dims, 2, dst[p], n)) != TSAFE_OK)
            return s;
    }
    return tsafe_moe_layer_set_expert(L, id, g, u, dn);
}

/* Fused experts: experts.gate_up_proj [E x 2I x d] (gate rows first, then
 * up) and experts.down_proj [E x d x I]. */
static tsafe_status load_fused(tsafe_moe_layer *L, const tsafe_safetensors *st,
                               const char *prefix, float *g, float *u, float *dn)
{
    char gu_name[MOE_NAME_CAP], dn_name[MOE_NAME_CAP];
    const uint32_t E = L->cfg.n_experts, I = L->inter, d = L->d;
    const uint64_t gu_dims[3] = {E, 2ull * I, d}, d_dims[3] = {E, d, I};
    const size_t n = (size_t)I * d;
    tsafe_status s;
    if ((s = tensor_name(gu_name, prefix, "experts.gate_up_proj", 0)) != TSAFE_OK ||
        (s = tensor_name(dn_name, prefix, "experts.down_proj", 0)) != TSAFE_OK)
        return s;
    if ((s = check_shape(st, gu_name, gu_dims, 3, 0)) != TSAFE_OK ||
        (s = check_shape(st, dn_name, d_dims, 3, 0)) != TSAFE_OK)
        return s;
    for (uint32_t e = 0; e < E; e++) {
        if ((s = tsafe_safetensors_read_f32_range(st, gu_name, (size_t)e * 2 * n, n, g)) !=
                TSAFE_OK ||
            (s = tsafe_safetensors_read_f32_range(st, gu_name, (size_t)e * 2 * n + n, n, u)) !=
                TSAFE_OK ||
            (s = tsafe_safetensors_read_f32_range(st, dn_name, (size_t)e * n, n, dn)) !=
                TSAFE_OK)
            return s;
        if ((s = tsafe_moe_layer_set_expert(L, (int32_t)e, g, u, dn)) != TSAFE_OK)
            return s;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_moe_layer_load_safetensors(tsafe_moe_layer *L, const tsafe_safetensors *sf,
                                              const char *prefix)
{
    tsafe_status st = TSAFE_OK;
    float *g = NULL, *u = NULL, *dn = NULL, *router = NULL, *sgate = NULL;
    char name[MOE_NAME_CAP];
    TSAFE_REQUIRE(L != NULL && sf != NULL && prefix != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(strlen(prefix) < MOE_NAME_CAP - 128, TSAFE_E_ARG);
    const uint32_t E = L->cfg.n_experts, d = L->d;
    const uint32_t imax = L->inter > L->shared_inter ? L->inter : L->shared_inter;
    const size_t n = (size_t)imax * d;
    g = malloc(n * sizeof *g);
    u = malloc(n * sizeof *u);
    dn = malloc(n * sizeof *dn);
    TSAFE_CHECK(g && u && dn, TSAFE_E_NOMEM);

    if (E > 0) {
        const uint64_t r_dims[2] = {E, d}, s_dims[2] = {1, d};
        router = malloc((size_t)E * d * sizeof *router);
        TSAFE_CHECK(router != NULL, TSAFE_E_NOMEM);
        TSAFE_TRY(tensor_name(name, prefix, "gate.weight", 0));
        TSAFE_TRY(read_exact(sf, name, r_dims, 2, router, (size_t)E * d));
        if (L->shared_kind == 1) {
            sgate = malloc(d * sizeof *sgate);
            TSAFE_CHECK(sgate != NULL, TSAFE_E_NOMEM);
            TSAFE_TRY(tensor_name(name, prefix, "shared_expert_gate.weight", 0));
            TSAFE_TRY(check_shape(sf, name, s_dims, 2, 1));
            TSAFE_TRY(tsafe_safetensors_read_f32(sf, name, sgate, d));
        }
        TSAFE_TRY(tsafe_moe_layer_set_router(L, router, sgate));
        TSAFE_TRY(tensor_name(name, prefix, "experts.gate_up_proj", 0));
        if (tsafe_safetensors_find(sf, name, NULL) == TSAFE_OK) {
            TSAFE_TRY(load_fused(L, sf, prefix, g, u, dn));
        } else {
            for (uint32_t e = 0; e < E; e++)
                TSAFE_TRY(load_split(L, sf, prefix, "experts.%d.", (int32_t)e, L->inter, g, u,
                                   dn));
        }
        if (L->shared_kind != 0)
            TSAFE_TRY(load_split(L, sf, prefix, "shared_expert.", TSAFE_MOE_SHARED,
                               L->shared_inter, g, u, dn));
    } else {
        TSAFE_TRY(load_split(L, sf, prefix, "", TSAFE_MOE_SHARED, L->shared_inter, g, u, dn));
    }
fail:
    free(g);
    free(u);
    free(dn);
    free(router);
    free(sgate);
    return st;
}
