/* Expert LoRA on the routed experts of an MoE layer, under HE.
 *
 * Only the experts a token is routed to run their adapters: per token, one
 * encryption of h serves the gate_proj and up_proj adapters of every routed
 * expert (and the shared expert), and each routed expert's down_proj adapter
 * runs on that expert's activation (one encryption each). Adapters of
 * experts no token is routed to are never touched; per-site use counters
 * make that checkable.
 *
 * The HE work goes through engines over modules (tensafe/lora_engine.h:
 * plaintext reference, local, plain ZeRo-MOAI, sealed, sealed-private;
 * tsafe_moe_lora_forward_modules), or through the older site engines
 * (tsafe_lora_engine, tsafe_moe_lora_forward), one engine for inputs of
 * the hidden size (gate/up) and one for inputs of the expert size (down);
 * both may be the same when the dimensions are.
 *
 * Ownership: a tsafe_moe_lora borrows its modules or sites (they must
 * outlive it) and its layer. Thread safety: one forward at a time per
 * object. */
#ifndef TENSAFE_MOE_LORA_H
#define TENSAFE_MOE_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/lora_engine.h"
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

/* Attach a module to expert e (0..n_experts-1, or TSAFE_MOE_SHARED) and a
 * projection. gate/up modules take d_in = hidden size and d_out = the
 * expert's intermediate size; down modules the reverse (TSAFE_E_SHAPE
 * otherwise). module NULL detaches. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_lora_set_module(
    tsafe_moe_lora *lora, int32_t expert, tsafe_moe_proj proj,
    const tsafe_lora_module *module);
/* The same with a CKKS site (its module, tsafe_lora_site_module, serves
 * the module engines; the site itself the site engines). A slot set with
 * tsafe_moe_lora_set_module has no site: tsafe_moe_lora_forward refuses it
 * (TSAFE_E_STATE). site NULL detaches. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_lora_set_site(
    tsafe_moe_lora *lora, int32_t expert, tsafe_moe_proj proj,
    const tsafe_lora_site *site);

/* The layer forward with the adapters of routed experts added:
 * gate/up pre-activations += their deltas, down output += its delta, before
 * the routing weight. engine_h handles gate/up modules, engine_act down
 * modules (each engine prepares its own form of a module on first use).
 * stats may be NULL (accumulated when given). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_lora_forward_modules(
    tsafe_moe_layer *layer, tsafe_moe_lora *lora,
    const tsafe_lora_module_engine *engine_h, const tsafe_lora_module_engine *engine_act,
    const float *h, size_t n_tokens, float *out, tsafe_moe_route *routes,
    tsafe_moe_lora_stats *stats);
/* The same through site engines, on the sites of tsafe_moe_lora_set_site. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_lora_forward(
    tsafe_moe_layer *layer, tsafe_moe_lora *lora,
    const tsafe_lora_engine *engine_h, const tsafe_lora_engine *engine_act,
    const float *h, size_t n_tokens, float *out, tsafe_moe_route *routes,
    tsafe_moe_lora_stats *stats);

/* How many times the adapter of (expert, proj) has been run. */
TSAFE_API uint64_t tsafe_moe_lora_site_uses(const tsafe_moe_lora *lora,
                                            int32_t expert, tsafe_moe_proj proj);

#ifdef __cplusplus
}
#endif
#endif
