/* Internal to libtensafe-moe: the layer object, expert storage, router and
 * weight-generation helpers shared by config/router/expert/layer files. */
#ifndef TSAFE_MOE_INTERNAL_H
#define TSAFE_MOE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/moe.h"
#include "file.h" /* tsafe_read_file: configs and step-gate files */
#include "tsafe_check.h"

/* Kinds of generated tensors; part of each ChaCha20 nonce. */
enum moe_tensor_kind {
    MOE_T_ROUTER = 1,
    MOE_T_SHARED_GATE = 2,
    MOE_T_GATE = 3,
    MOE_T_UP = 4,
    MOE_T_DOWN = 5,
    MOE_T_TOKENS = 6
};

/* One SwiGLU expert: gate_up = [gate_proj; up_proj] as [2I x d] row-major
 * (one GEMV gives both), down = [d x I]. NULL while not materialised. */
typedef struct moe_expert {
    float *gate_up;
    float *down;
} moe_expert;

struct tsafe_moe_layer {
    tsafe_moe_config cfg;      /* n_experts = experts actually held */
    uint32_t d;
    uint32_t inter;            /* routed expert width */
    uint32_t shared_inter;     /* shared expert / dense MLP width; 0: none */
    int shared_kind;           /* 0 none, 1 gated (sigmoid), 2 ungated/dense */
    int generated;             /* weights come from the seed */
    tsafe_moe_weights_mode mode;
    uint8_t key[32];           /* ChaCha20 key derived from the seed */
    float *router_w;           /* [n_experts x d] */
    float *shared_gate_w;      /* [d] when shared_kind == 1 */
    moe_expert *experts;       /* n_experts */
    moe_expert shared;
    uint64_t *hits;            /* n_experts */
    uint64_t tokens, expert_evals, shared_evals;
    uint32_t materialised;
    uint64_t weight_bytes;
};

/* ---- weights (expert.c) */
void tsafe_moe_derive_key(uint64_t seed, uint8_t key[32]);
/* n floats uniform in [-bound, bound) from the stream (key, kind, id). */
void tsafe_moe_fill_uniform(float *dst, size_t n, float bound, const uint8_t key[32],
                            enum moe_tensor_kind kind, int64_t id);
/* zero != 0: zero-filled; else contents undefined (about to be generated). */
tsafe_status tsafe_moe_expert_alloc(moe_expert *e, uint32_t d, uint32_t inter, int zero);
void tsafe_moe_expert_release(moe_expert *e);
void tsafe_moe_expert_generate(moe_expert *e, const uint8_t key[32], int32_t id, uint32_t d,
                               uint32_t inter);
/* Y[m x d] = down(silu(gate X) * up X) for X [m x d]; gu [m x 2I] and
 * act [m x I] are scratch. hook (optional) sees both stages. */
tsafe_status tsafe_moe_expert_apply(const moe_expert *e, int32_t id, uint32_t d, uint32_t inter,
                                    const float *x, size_t m, const uint32_t *tokens, float *gu,
                                    float *act, float *y, tsafe_moe_expert_hook hook, void *user);

/* ---- router (router.c) */
float tsafe_moe_sigmoid(float x);
/* Top-k of p[0..n) by value descending, ties to the lower index. */
void tsafe_moe_topk(const float *p, uint32_t n, uint32_t k, uint32_t *idx);
/* Softmax (max-subtracted, fp32) of logits in place; TSAFE_E_VALUE_RANGE
 * when a logit is not finite. */
tsafe_status tsafe_moe_softmax(float *v, uint32_t n);
/* Route n rows of h. logits: scratch [n x n_experts]. */
tsafe_status tsafe_moe_route_rows(const tsafe_moe_layer *L, const float *h, size_t n,
                                  float *logits, tsafe_moe_route *routes);

#endif
