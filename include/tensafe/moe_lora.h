/* Expert LoRA on the routed experts of an MoE layer, under HE.
 *
 * Only the experts a token is routed to run their adapters: per token, one
 * encryption of h serves the gate_proj and up_proj adapters of every routed
 * expert (and the shared expert), and each routed expert's down_proj adapter
 * runs on that expert's activation (one encryption each). Adapters of
 * experts no token is routed to are never touched; per-site use counters
 * make that checkable.
 *
 * The HE work goes through tsafe_lora_engine (plaintext reference, local, or
 * two-party), one engine for inputs of the hidden size (gate/up sites) and
 * one for inputs of the expert size (down sites); both may be the same when
 * the dimensions are.
 *
 * Ownership: a tsafe_moe_lora borrows its sites (they must outlive it) and
 * its layer. Thread safety: one forward at a time per object. */
#ifndef TENSAFE_MOE_LORA_H
#define TENSAFE_MOE_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/lora_he.h"
#include "tensafe/moe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tsafe_moe_proj {
    TSAFE_MOE_PROJ_GATE = 0,
    TSAFE_MOE_PROJ_UP = 1,
    TSAFE_MOE_PROJ_DOWN = 2
} tsafe_moe_proj;

typedef struct tsafe_moe_lora tsafe_moe_lora;

typedef struct tsafe_moe_lora_stats {
    uint64_t tokens;
    uint64_t expert_runs;      /* (token, routed expert) pairs with an adapter */
    uint64_t engine_calls_h;   /* encryptions of h (one per token) */
    uint64_t engine_calls_act; /* encryptions of activations (per expert run) */
    double lora_us;            /* time inside the engines */
    double total_us;           /* whole forward */
    tsafe_lora_stats he;       /* accumulated engine statistics */
} tsafe_moe_lora_stats;

/* An empty adapter set for layer's experts (+ the shared expert). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_lora_create(
    const tsafe_moe_layer *layer, tsafe_moe_lora **out);
TSAFE_API void tsafe_moe_lora_free(tsafe_moe_lora *lora);

/* Attach a site to expert e (0..n_experts-1, or TSAFE_MOE_SHARED) and a
 * projection. gate/up sites take d_in = hidden size and d_out = the
 * expert's intermediate size; down sites the reverse. site NULL detaches. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_lora_set_site(
    tsafe_moe_lora *lora, int32_t expert, tsafe_moe_proj proj,
    const tsafe_lora_site *site);

/* The layer forward with the adapters of routed experts added:
 * gate/up pre-activations += their deltas, down output += its delta, before
 * the routing weight. engine_h handles gate/up sites, engine_act down sites.
 * stats may be NULL (accumulated when given). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_lora_forward(
    tsafe_moe_layer *layer, tsafe_moe_lora *lora,
    const tsafe_lora_engine *engine_h, const tsafe_lora_engine *engine_act,
    const float *h, size_t n_tokens, float *out, tsafe_moe_route *routes,
    tsafe_moe_lora_stats *stats);

/* How many times the site of (expert, proj) has been run. */
TSAFE_API uint64_t tsafe_moe_lora_site_uses(const tsafe_moe_lora *lora,
                                            int32_t expert, tsafe_moe_proj proj);

#ifdef __cplusplus
}
#endif
#endif
