/* Router: logits = W_g h, fp32 softmax over all experts (max-subtracted),
 * top-k with ties to the lower expert index, optional renormalisation, and
 * the shared expert's sigmoid gate. */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "moe_internal.h"

float tsafe_moe_sigmoid(float x)
{
    /* never exponentiates a large positive number */
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

void tsafe_moe_topk(const float *p, uint32_t n, uint32_t k, uint32_t *idx)
{
    /* Insertion into a sorted list of at most k entries. Scanning in
     * increasing index and inserting only before strictly smaller values
     * keeps equal values in increasing index order. */
    uint32_t len = 0;
    for (uint32_t i = 0; i < n; i++) {
        float v = p[i];
        if (len == k && !(v > p[idx[k - 1]]))
            continue;
        uint32_t pos = len < k ? len : k - 1;
        while (pos > 0 && v > p[idx[pos - 1]]) {
            idx[pos] = idx[pos - 1];
            pos--;
        }
        idx[pos] = i;
        if (len < k)
            len++;
    }
}

tsafe_status tsafe_moe_softmax(float *v, uint32_t n)
{
    float mx = v[0];
    for (uint32_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            return TSAFE_E_VALUE_RANGE;
        if (v[i] > mx)
            mx = v[i];
    }
    float sum = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
        v[i] = expf(v[i] - mx);
        sum += v[i];
    }
    /* sum >= 1: the maximum contributes exp(0) */
    for (uint32_t i = 0; i < n; i++)
        v[i] /= sum;
    return TSAFE_OK;
}

tsafe_status tsafe_moe_route_rows(const tsafe_moe_layer *L, const float *h, size_t n,
                                  float *logits, tsafe_moe_route *routes)
{
    const uint32_t E = L->cfg.n_experts, k = L->cfg.top_k, d = L->d;
    for (size_t t = 0; t < n; t++) {
        tsafe_moe_route *r = &routes[t];
        memset(r, 0, sizeof *r);
        r->shared_gate = L->shared_kind == 2 ? 1.0f : 0.0f;
        if (L->shared_kind == 1) {
            float s = cblas_sdot((int)d, L->shared_gate_w, 1, h + t * (size_t)d, 1);
            if (!isfinite(s))
                return TSAFE_E_VALUE_RANGE;
            r->shared_gate = tsafe_moe_sigmoid(s);
        }
    }
    if (E == 0)
        return TSAFE_OK;
    if (n == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)E, (int)d, 1.0f, L->router_w, (int)d, h,
                    1, 0.0f, logits, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)E, (int)d, 1.0f, h,
                    (int)d, L->router_w, (int)d, 0.0f, logits, (int)E);
    for (size_t t = 0; t < n; t++) {
        float *p = logits + t * (size_t)E;
        tsafe_moe_route *r = &routes[t];
        tsafe_status st = tsafe_moe_softmax(p, E);
        if (st != TSAFE_OK)
            return st;
        tsafe_moe_topk(p, E, k, r->expert);
        float sum = 0.0f;
        for (uint32_t i = 0; i < k; i++) {
            r->weight[i] = p[r->expert[i]];
            sum += r->weight[i];
        }
        if (L->cfg.norm_topk_prob) {
            /* sum >= p_max >= 1/E > 0 */
            for (uint32_t i = 0; i < k; i++)
                r->weight[i] /= sum;
        }
        r->k = k;
    }
    return TSAFE_OK;
}
