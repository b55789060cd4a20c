/* LoRA modules (tensafe/lora_engine.h): immutable weights with an id that
 * is never reused, the key every engine prepares its own form under. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "tensafe/lora_engine.h"
#include "engine_internal.h"

struct tsafe_lora_module {
    uint64_t id;
    uint32_t rank, d_in, d_out;
    float scale;
    float *A, *B;
};

/* Ids: never reused (an address may be, after a free). */
static _Atomic uint64_t next_module_id = 1;

static int all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

tsafe_status tsafe_lora_module_create(const float *A, const float *B, uint32_t rank,
                                      uint32_t d_in, uint32_t d_out, float scale,
                                      tsafe_lora_module **out)
{
    if (!A || !B || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (rank == 0 || rank > 1024 || d_in == 0 || d_in > (1u << 24) || d_out == 0 ||
        d_out > (1u << 24))
        return TSAFE_E_ARG;
    size_t na = (size_t)rank * d_in, nb = (size_t)d_out * rank;
    if (!isfinite(scale) || !all_finite(A, na) || !all_finite(B, nb))
        return TSAFE_E_VALUE_RANGE;
    tsafe_lora_module *m = calloc(1, sizeof *m);
    if (!m)
        return TSAFE_E_NOMEM;
    m->A = malloc(na * sizeof *m->A);
    m->B = malloc(nb * sizeof *m->B);
    if (!m->A || !m->B) {
        tsafe_lora_module_free(m);
        return TSAFE_E_NOMEM;
    }
    memcpy(m->A, A, na * sizeof *A);
    memcpy(m->B, B, nb * sizeof *B);
    m->rank = rank;
    m->d_in = d_in;
    m->d_out = d_out;
    m->scale = scale;
    m->id = atomic_fetch_add(&next_module_id, 1);
    *out = m;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_module_from_info(const tsafe_lora_module_info *info,
                                         tsafe_lora_module **out)
{
    if (!info || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (info->rank > 1024 || info->in_dim > (1u << 24) || info->out_dim > (1u << 24))
        return TSAFE_E_ARG;
    return tsafe_lora_module_create(info->A, info->B, (uint32_t)info->rank,
                                    (uint32_t)info->in_dim, (uint32_t)info->out_dim,
                                    (float)info->scale, out);
}

void tsafe_lora_module_free(tsafe_lora_module *m)
{
    if (!m)
        return;
    free(m->A);
    free(m->B);
    free(m);
}

uint64_t tsafe_lora_module_id(const tsafe_lora_module *m) { return m ? m->id : 0; }
uint32_t tsafe_lora_module_rank(const tsafe_lora_module *m) { return m ? m->rank : 0; }
uint32_t tsafe_lora_module_d_in(const tsafe_lora_module *m) { return m ? m->d_in : 0; }
uint32_t tsafe_lora_module_d_out(const tsafe_lora_module *m) { return m ? m->d_out : 0; }
float tsafe_lora_module_scale(const tsafe_lora_module *m) { return m ? m->scale : 0.0f; }
const float *tsafe_lora_module_A(const tsafe_lora_module *m) { return m ? m->A : NULL; }
const float *tsafe_lora_module_B(const tsafe_lora_module *m) { return m ? m->B : NULL; }

void tsafe_lora_plain_delta_(const float *A, const float *B, uint32_t rank, uint32_t d_in,
                             uint32_t d_out, float scale, const float *x, float *u,
                             float *delta)
{
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)rank, (int)d_in, 1.0f, A, (int)d_in, x, 1,
                0.0f, u, 1);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)d_out, (int)rank, scale, B, (int)rank, u, 1,
                0.0f, delta, 1);
}

tsafe_status tsafe_lora_module_check_call(const tsafe_lora_module *const *modules, size_t n,
                                          const float *x, float *const *delta)
{
    if (!modules || !x || !delta)
        return TSAFE_E_NULL;
    if (n == 0 || n > TSAFE_LORA_MAX_CALL_MODULES)
        return TSAFE_E_RANGE;
    for (size_t i = 0; i < n; i++) {
        if (!modules[i] || !delta[i])
            return TSAFE_E_NULL;
        if (modules[i]->d_in != modules[0]->d_in)
            return TSAFE_E_PARAMS_MISMATCH;
    }
    return TSAFE_OK;
}
