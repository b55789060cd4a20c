/* MoE layer (libtensafe-moe): Qwen MoE configurations, router, SwiGLU
 * experts, a layer object that runs one token or a small batch, and the
 * domain step-gate that picks a domain LoRA adapter from keywords.
 *
 * Everything here is plaintext. Expert LoRA under HE is layered on top: the
 * forward pass reports, per token, the routed expert ids and weights
 * (tsafe_moe_route) and can call a hook on each routed expert's
 * pre-activations, so an HE-LoRA pass touches only the routed experts'
 * adapters (tsafe_moe_layer_forward_hooked).
 *
 * Numerics: router logits and probabilities are fp32; the softmax subtracts
 * the maximum logit; expert matrices run through OpenBLAS (sgemv/sgemm).
 *
 * Ownership: `_create*` return handles freed with the matching `_free`;
 * `_free(NULL)` is a no-op. Pointers passed in are borrowed for the call
 * unless a comment says otherwise.
 *
 * Thread safety: a tsafe_moe_config is a plain value. A tsafe_moe_layer is
 * used by one thread at a time (forward updates its counters and, in lazy
 * mode, materialises expert weights). A tsafe_stepgate is immutable after
 * creation and may be shared; each request uses its own
 * tsafe_stepgate_session (one thread at a time).
 */
#ifndef TENSAFE_MOE_H
#define TENSAFE_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/export.h"
#include "tensafe/safetensors.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_MOE_NAME_MAX 64 /* bytes of tsafe_moe_config.name, NUL included */
#define TSAFE_MOE_MAX_TOPK 32 /* largest supported top_k */
#define TSAFE_MOE_SHARED (-1) /* expert id of the shared expert / dense MLP */

/* Upper bounds a configuration may reach (refused with TSAFE_E_PARAMS):
 * they keep every size product far from overflow. */
#define TSAFE_MOE_MAX_HIDDEN 65536u
#define TSAFE_MOE_MAX_INTERMEDIATE 1048576u
#define TSAFE_MOE_MAX_EXPERTS 65536u
#define TSAFE_MOE_MAX_LAYERS 65536u

/* ---------------------------------------------------------------- config */

/* Shape of one model (plain value). Field names follow Hugging Face
 * config.json: hidden_size, num_hidden_layers, num_attention_heads,
 * num_key_value_heads, head_dim, num_experts, num_experts_per_tok,
 * moe_intermediate_size, shared_expert_intermediate_size, norm_topk_prob,
 * full_attention_interval, intermediate_size, vocab_size. */
typedef struct tsafe_moe_config {
    char name[TSAFE_MOE_NAME_MAX];       /* preset name or model id */
    uint32_t hidden_size;                /* d */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;                 /* divides n_heads */
    uint32_t head_dim;                   /* 0: hidden_size / n_heads */
    uint32_t n_experts;                  /* 0: dense MLP */
    uint32_t top_k;                      /* routed experts per token; 0 when dense */
    uint32_t expert_intermediate;        /* moe_intermediate_size */
    uint32_t shared_expert_intermediate; /* 0: no shared expert */
    int shared_expert_gate;              /* 1: shared output scaled by sigmoid(w_s.h) */
    int norm_topk_prob;                  /* 1: renormalise the k weights to sum 1 */
    uint32_t full_attention_interval;    /* every n-th layer full attention; 1: all */
    uint32_t intermediate_size;          /* dense MLP width (0 allowed for MoE) */
    uint32_t vocab_size;                 /* 0: unknown */
} tsafe_moe_config;

/* Fill *out with a named preset (published shapes):
 *   "qwen2.5-1.5b"    dense, d=1536, 28 layers, 12/2 heads, MLP 8960
 *   "qwen3-30b-a3b"   d=2048, 48 layers, 32/4 heads (head_dim 128),
 *                     128 experts, top-8, expert dim 768, norm_topk_prob
 *   "qwen3.5-35b-a3b" d=2048, 40 layers, 16/2 heads (head_dim 256),
 *                     256 experts, top-8, expert dim 512, one shared expert
 *                     of dim 512 with a sigmoid gate, full attention every
 *                     4th layer, norm_topk_prob
 * Names compare case-insensitively. TSAFE_E_NOT_FOUND for an unknown name. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_config_preset(const char *name,
                                                               tsafe_moe_config *out);
TSAFE_API size_t tsafe_moe_config_preset_count(void);
/* Name of preset i, static storage; NULL when i is out of range. */
TSAFE_API const char *tsafe_moe_config_preset_name(size_t i);

/* TSAFE_OK when the configuration is consistent; TSAFE_E_PARAMS when not
 * (a zero size, top_k outside 1..n_experts for MoE or nonzero for dense,
 * n_kv_heads not dividing n_heads, n_heads not dividing hidden_size while
 * head_dim is 0, a shared gate without shared expert, a missing expert or
 * MLP width, a size above the TSAFE_MOE_MAX_* bounds, an unterminated name);
 * TSAFE_E_UNSUPPORTED when top_k > TSAFE_MOE_MAX_TOPK. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_config_validate(const tsafe_moe_config *cfg);

/* Read a model's config.json. Fields are taken from the "text_config" object
 * when there is one (Qwen3.5 / multimodal files nest them), else from the
 * top level. Required: hidden_size, num_hidden_layers, num_attention_heads;
 * with num_experts > 0 also num_experts_per_tok and moe_intermediate_size;
 * without (dense) intermediate_size. Optional: num_key_value_heads
 * (default num_attention_heads), head_dim, shared_expert_intermediate_size
 * (default 0; a shared expert always has the sigmoid gate of Qwen2-MoE /
 * Qwen3-Next / Qwen3.5), norm_topk_prob (default true for model_type
 * qwen3_next / qwen3_5_moe*, false otherwise, as in transformers),
 * full_attention_interval (default 1), vocab_size. name = "_name_or_path",
 * else "model_type", else "config.json" (truncated to fit).
 * Errors: TSAFE_E_JSON (not JSON, or a field of the wrong JSON type: sizes
 * must be integers, norm_topk_prob a boolean), TSAFE_E_MISSING_FIELD,
 * TSAFE_E_PARAMS (negative or inconsistent values, see validate),
 * TSAFE_E_IO / TSAFE_E_NOT_FOUND for the file. *out is written only on
 * success. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_config_load_json(const char *path,
                                                                  tsafe_moe_config *out);
/* The same from bytes in memory (need not be NUL-terminated). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_config_parse_json(const char *text, size_t len,
                                                                   tsafe_moe_config *out);

/* 1 when layer (0-based) uses full attention: (layer + 1) % interval == 0,
 * as Qwen3-Next/Qwen3.5 layer_types; 0 otherwise or when cfg is NULL. */
TSAFE_API int tsafe_moe_config_is_full_attention(const tsafe_moe_config *cfg, uint32_t layer);

/* ---------------------------------------------------------------- routes */

/* Routing of one token. expert[0..k) are the routed expert ids in
 * descending router probability; ties (equal fp32 probabilities) put the
 * lower expert index first. weight[i] is the softmax probability of
 * expert[i], divided by the sum of the k probabilities when norm_topk_prob.
 * shared_gate = sigmoid(w_s . h) when the layer has a gated shared expert,
 * 1 for an ungated shared expert / dense MLP, 0 without. */
typedef struct tsafe_moe_route {
    uint32_t k;
    uint32_t expert[TSAFE_MOE_MAX_TOPK];
    float weight[TSAFE_MOE_MAX_TOPK];
    float shared_gate;
} tsafe_moe_route;

/* ---------------------------------------------------------------- layer */

typedef struct tsafe_moe_layer tsafe_moe_layer;

/* Weight storage of a generated layer. */
typedef enum tsafe_moe_weights_mode {
    TSAFE_MOE_WEIGHTS_EAGER = 0, /* every expert generated at creation */
    TSAFE_MOE_WEIGHTS_LAZY = 1   /* an expert is generated the first time it
                                    is routed to, then kept: memory grows
                                    only with the experts actually used */
} tsafe_moe_weights_mode;

typedef struct tsafe_moe_layer_options {
    uint32_t n_experts_override; /* 0: cfg->n_experts; else this many experts
                                    (>= top_k), e.g. 8 for tests at d=2048 */
    tsafe_moe_weights_mode mode;
} tsafe_moe_layer_options;

/* A layer with synthetic weights expanded deterministically from seed with
 * ChaCha20 (weights are not secrets): uniform in +-1/sqrt(fan_in). Each
 * tensor has its own stream keyed by (seed, tensor, expert), so expert e has
 * the same weights whatever n_experts_override or mode, and a lazy layer
 * computes bit-identical outputs to an eager one. cfg is copied (with
 * n_experts replaced by the override). Memory: 3*d*I*4 bytes per expert
 * (12.6 MB at d=2048, I=512; 3.2 GB for 256 eager experts). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_create_random(
    const tsafe_moe_config *cfg, uint64_t seed, uint32_t n_experts_override,
    tsafe_moe_layer **out);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_create_random_ex(
    const tsafe_moe_config *cfg, uint64_t seed, const tsafe_moe_layer_options *opt,
    tsafe_moe_layer **out);

/* A layer with all weights zero, to be filled with tsafe_moe_layer_set_*
 * (e.g. from a checkpoint). n_experts_override as above (0: cfg's). Routed
 * experts' memory is allocated when an expert is first set or routed to
 * (an expert never set computes zero), so a router-only layer is cheap. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_create_zero(
    const tsafe_moe_config *cfg, uint32_t n_experts_override, tsafe_moe_layer **out);

/* Copy router weights: gate_w is [n_experts x d] row-major (HF mlp.gate.weight);
 * shared_gate_w is [d] (HF mlp.shared_expert_gate.weight), required iff the
 * config has a gated shared expert, else must be NULL. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_set_router(tsafe_moe_layer *layer,
                                                                  const float *gate_w,
                                                                  const float *shared_gate_w);
/* Copy one expert's SwiGLU weights, row-major as HF nn.Linear weights:
 * gate_proj [I x d], up_proj [I x d], down_proj [d x I]; expert in
 * 0..n_experts-1, or TSAFE_MOE_SHARED for the shared expert (I =
 * shared_expert_intermediate) or the dense MLP (I = intermediate_size). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_set_expert(tsafe_moe_layer *layer,
                                                                  int32_t expert,
                                                                  const float *gate_proj,
                                                                  const float *up_proj,
                                                                  const float *down_proj);

/* Fill a layer (typically from tsafe_moe_layer_create_zero, with the
 * checkpoint's config) from one decoder layer's tensors. prefix is
 * prepended to every name, e.g. "model.layers.0.mlp." (Qwen3-MoE) or
 * "model.language_model.layers.0.mlp." (Qwen3.5). Names (HF):
 *   gate.weight [E x d]; shared_expert_gate.weight [1 x d] (or [d]);
 *   experts.<e>.{gate,up,down}_proj.weight, or fused
 *   experts.gate_up_proj [E x 2I x d] (gate rows, then up rows) and
 *   experts.down_proj [E x d x I];
 *   shared_expert.{gate,up,down}_proj.weight;
 *   dense: {gate,up,down}_proj.weight.
 * F32, F16, BF16 and F64 tensors are converted to fp32. Shapes must match
 * the layer exactly (its expert count included). Errors:
 * TSAFE_E_MISSING_FIELD (a tensor is absent), TSAFE_E_SHAPE, TSAFE_E_DTYPE,
 * TSAFE_E_ARG (prefix too long). On error the layer holds a partial mix and
 * should be freed. st is borrowed for the call only. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_load_safetensors(
    tsafe_moe_layer *layer, const tsafe_safetensors *st, const char *prefix);

TSAFE_API void tsafe_moe_layer_free(tsafe_moe_layer *layer);

/* The layer's configuration (n_experts = the experts it really has);
 * borrowed, valid while the layer lives. */
TSAFE_API const tsafe_moe_config *tsafe_moe_layer_config(const tsafe_moe_layer *layer);

/* Routing only (no expert computation): routes[t] for each of n_tokens
 * rows of h ([n_tokens x d] row-major). Does not touch the counters. A
 * dense layer gives k = 0, shared_gate = 1. TSAFE_E_VALUE_RANGE when a
 * router logit is not finite (NaN/Inf in h or the weights). Reads the layer
 * only: concurrent route calls on one layer are safe (not concurrently
 * with set_*, forward or free). At most 2^24 tokens per call. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_route(const tsafe_moe_layer *layer,
                                                            const float *h, size_t n_tokens,
                                                            tsafe_moe_route *routes);

/* out[t] = sum_i weight_i * E_{expert_i}(h[t]) + shared_gate * S(h[t]),
 * E(x) = down(silu(gate x) * up x); a dense layer computes its MLP.
 * h and out are [n_tokens x d] row-major and must not overlap; out is
 * overwritten. routes (optional, n_tokens entries) receives each token's
 * routing -- the hook for expert LoRA: only routes[t].expert[] need their
 * adapters run. Counters: tokens += n_tokens, hits[e] += tokens routed to e. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_forward(tsafe_moe_layer *layer,
                                                              const float *h, size_t n_tokens,
                                                              float *out, tsafe_moe_route *routes);

/* Stages of tsafe_moe_layer_forward_hooked. */
typedef enum tsafe_moe_hook_stage {
    /* in = X [m x d] (the m tokens' h rows); io = [m x 2I], row r =
     * [gate_proj x_r (I values) | up_proj x_r (I values)] before SiLU: add
     * the gate/up LoRA deltas here. */
    TSAFE_MOE_HOOK_GATE_UP = 0,
    /* in = A [m x I] = silu(gate) * up; io = [m x d] = down_proj A before
     * the routing weight: add the down LoRA delta here. */
    TSAFE_MOE_HOOK_DOWN = 1
} tsafe_moe_hook_stage;

/* Called once per stage for every expert that at least one token of the
 * batch is routed to (experts in increasing id, the shared expert / dense
 * MLP last as TSAFE_MOE_SHARED), never for an unrouted expert. tokens[r] is
 * the batch index of row r. Anything but TSAFE_OK stops the forward and is
 * returned (out is then unspecified; counters are not updated). */
typedef tsafe_status (*tsafe_moe_expert_hook)(void *user, tsafe_moe_hook_stage stage,
                                              int32_t expert, const uint32_t *tokens,
                                              size_t m, const float *in, size_t in_cols,
                                              float *io, size_t io_cols);

/* tsafe_moe_layer_forward with a hook (NULL: the plain forward). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_forward_hooked(
    tsafe_moe_layer *layer, const float *h, size_t n_tokens, float *out,
    tsafe_moe_route *routes, tsafe_moe_expert_hook hook, void *user);

/* Counters since creation or the last reset. */
typedef struct tsafe_moe_layer_stats {
    uint64_t tokens;               /* tokens through forward */
    uint64_t expert_evals;         /* (token, routed expert) evaluations */
    uint64_t shared_evals;         /* shared expert / dense MLP evaluations */
    uint32_t experts_materialised; /* experts holding weights (lazy mode) */
    uint64_t weight_bytes;         /* bytes of weights held now */
} tsafe_moe_layer_stats;

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_get_stats(const tsafe_moe_layer *layer,
                                                                tsafe_moe_layer_stats *out);
/* Copy per-expert hit counts (tokens routed to expert e) into counts[0..n);
 * n must be >= the layer's n_experts (TSAFE_E_BUFFER_SMALL otherwise). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_moe_layer_expert_hits(const tsafe_moe_layer *layer,
                                                                  uint64_t *counts, size_t n);
TSAFE_API void tsafe_moe_layer_reset_counters(tsafe_moe_layer *layer);

/* ---------------------------------------------------------------- step-gate */

/* Domain step-gate: picks a domain LoRA adapter for a request from keyword
 * counts.
 *
 * Matching: a keyword matches at a whole-word position, ASCII letters
 * compared case-insensitively, every other byte (UTF-8 included) exactly.
 * Word characters are ASCII letters, digits and '_' and every non-ASCII code
 * point except Unicode punctuation and spaces (U+0080..U+00BF but the letters
 * U+00AA/U+00B5/U+00BA, U+00D7, U+00F7, U+2000..U+206F, U+3000..U+303F,
 * U+FEFF); invalid UTF-8 bytes count as word characters. So "bankrupt" and
 * "bankö" do not contain "bank", while "bank," "(bank)" and "bank—loan" do.
 * A space inside a keyword ("interest rate") matches any run of ASCII
 * whitespace. A domain's score is the number of keyword occurrences.
 *
 * Decision rule: the domain with the highest score; ties go to the domain
 * listed first in the configuration; no keyword at all (every score 0) gives
 * the fallback adapter. During generation (decide_every = K > 0) the text so
 * far (prompt + generated tokens) is rescored every K tokens and the current
 * choice changes only when the best domain's score exceeds the current
 * one's (the fallback counts as 0) by at least max(hysteresis, 1).
 *
 * JSON: {"domains":[{"name":"banking","adapter":"banking",
 *         "keywords":["bank","interest rate"]}, ...],
 *        "fallback":"shared", "decide_every":0, "hysteresis":1}
 * "domains" (non-empty array) and each "name" and "keywords" are required;
 * "adapter" defaults to the name, "fallback" to "shared", decide_every to 0
 * (decide at request start only), hysteresis to 1. Limits: 256 domains,
 * 4096 keywords per domain, 256 bytes per keyword and name, keywords
 * non-empty after trimming whitespace and free of NUL bytes, domain names
 * unique. */

#define TSAFE_STEPGATE_FALLBACK (-1) /* domain index meaning "the fallback" */

typedef struct tsafe_stepgate tsafe_stepgate;
typedef struct tsafe_stepgate_session tsafe_stepgate_session;

/* The seeds' lists: banking (bank, deposit, loan, mortgage, credit, savings,
 * checking, interest rate, refinance), investment (invest, portfolio,
 * stock, bond, etf, dividend, market, allocation, risk), fallback "shared"
 * (the always-on shared adapter), decide_every 0, hysteresis 1. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_stepgate_create_default(tsafe_stepgate **out);
/* Errors: TSAFE_E_JSON (not JSON / wrong types), TSAFE_E_MISSING_FIELD,
 * TSAFE_E_PARAMS (empty or too long keyword, duplicate name, limits). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_stepgate_create_json(const char *text, size_t len,
                                                                 tsafe_stepgate **out);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_stepgate_load_json(const char *path,
                                                               tsafe_stepgate **out);
TSAFE_API void tsafe_stepgate_free(tsafe_stepgate *gate);

TSAFE_API size_t tsafe_stepgate_domain_count(const tsafe_stepgate *gate);
/* Name / adapter of domain i (TSAFE_STEPGATE_FALLBACK: the fallback adapter
 * for both); NULL when out of range. Borrowed from the gate. */
TSAFE_API const char *tsafe_stepgate_domain_name(const tsafe_stepgate *gate, int32_t i);
TSAFE_API const char *tsafe_stepgate_domain_adapter(const tsafe_stepgate *gate, int32_t i);
TSAFE_API uint32_t tsafe_stepgate_decide_every(const tsafe_stepgate *gate);
TSAFE_API uint32_t tsafe_stepgate_hysteresis(const tsafe_stepgate *gate);

/* scores[i] = keyword occurrences of domain i in text[0..len) (text need not
 * be NUL-terminated; len 0 allowed); n_scores >= domain count. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_stepgate_score(const tsafe_stepgate *gate,
                                                           const char *text, size_t len,
                                                           uint32_t *scores, size_t n_scores);
/* One decision without history: *domain = best domain index or
 * TSAFE_STEPGATE_FALLBACK. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_stepgate_classify(const tsafe_stepgate *gate,
                                                              const char *text, size_t len,
                                                              int32_t *domain);

/* A request. The gate must outlive the session. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_stepgate_session_create(const tsafe_stepgate *gate,
                                                                    tsafe_stepgate_session **out);
TSAFE_API void tsafe_stepgate_session_free(tsafe_stepgate_session *s);
/* Start (or restart) a request with its prompt; decides without hysteresis. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_stepgate_session_begin(tsafe_stepgate_session *s,
                                                                   const char *prompt, size_t len,
                                                                   int32_t *domain);
/* Append one generated token's text. Every decide_every-th call re-decides
 * with hysteresis; *domain (optional) gets the current choice, *switched
 * (optional) 1 when this call changed it. TSAFE_E_STATE before begin,
 * TSAFE_E_RANGE when the request's text would pass 16 MiB. Rescoring reads
 * the whole text so far (keywords may straddle tokens). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_stepgate_session_step(tsafe_stepgate_session *s,
                                                                  const char *token, size_t len,
                                                                  int32_t *domain, int *switched);
/* Current choice (TSAFE_STEPGATE_FALLBACK before begin). */
TSAFE_API int32_t tsafe_stepgate_session_domain(const tsafe_stepgate_session *s);

#ifdef __cplusplus
}
#endif
#endif
