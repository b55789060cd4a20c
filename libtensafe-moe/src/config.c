/* Qwen MoE configuration presets and validation. */
#include <string.h>
#include <strings.h>

#include "moe_internal.h"

typedef struct preset {
    const char *name;
    tsafe_moe_config cfg;
} preset;

/* Published shapes (Hugging Face config.json of each model). */
static const preset k_presets[] = {
    {"qwen2.5-1.5b",
     {.name = "qwen2.5-1.5b",
      .hidden_size = 1536,
      .n_layers = 28,
      .n_heads = 12,
      .n_kv_heads = 2,
      .head_dim = 0,
      .n_experts = 0,
      .top_k = 0,
      .expert_intermediate = 0,
      .shared_expert_intermediate = 0,
      .shared_expert_gate = 0,
      .norm_topk_prob = 0,
      .full_attention_interval = 1,
      .intermediate_size = 8960,
      .vocab_size = 151936}},
    {"qwen3-30b-a3b",
     {.name = "qwen3-30b-a3b",
      .hidden_size = 2048,
      .n_layers = 48,
      .n_heads = 32,
      .n_kv_heads = 4,
      .head_dim = 128,
      .n_experts = 128,
      .top_k = 8,
      .expert_intermediate = 768,
      .shared_expert_intermediate = 0,
      .shared_expert_gate = 0,
      .norm_topk_prob = 1,
      .full_attention_interval = 1,
      .intermediate_size = 6144,
      .vocab_size = 151936}},
    {"qwen3.5-35b-a3b",
     {.name = "qwen3.5-35b-a3b",
      .hidden_size = 2048,
      .n_layers = 40,
      .n_heads = 16,
      .n_kv_heads = 2,
      .head_dim = 256,
      .n_experts = 256,
      .top_k = 8,
      .expert_intermediate = 512,
      .shared_expert_intermediate = 512,
      .shared_expert_gate = 1,
      .norm_topk_prob = 1,
      .full_attention_interval = 4,
      .intermediate_size = 0,
      .vocab_size = 248320}},
};

#define N_PRESETS (sizeof k_presets / sizeof k_presets[0])

tsafe_status tsafe_moe_config_preset(const char *name, tsafe_moe_config *out)
{
    TSAFE_REQUIRE(name != NULL && out != NULL, TSAFE_E_NULL);
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (strcasecmp(name, k_presets[i].name) == 0) {
            *out = k_presets[i].cfg;
            return TSAFE_OK;
        }
    }
    return TSAFE_E_NOT_FOUND;
}

size_t tsafe_moe_config_preset_count(void)
{
    return N_PRESETS;
}

const char *tsafe_moe_config_preset_name(size_t i)
{
    return i < N_PRESETS ? k_presets[i].name : NULL;
}

tsafe_status tsafe_moe_config_validate(const tsafe_moe_config *c)
{
    TSAFE_REQUIRE(c != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(memchr(c->name, '\0', sizeof c->name) != NULL, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->hidden_size > 0 && c->hidden_size <= TSAFE_MOE_MAX_HIDDEN, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->n_layers > 0 && c->n_layers <= TSAFE_MOE_MAX_LAYERS, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->n_heads > 0 && c->n_kv_heads > 0, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->n_heads <= c->hidden_size, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->n_heads % c->n_kv_heads == 0, TSAFE_E_PARAMS);
    if (c->head_dim == 0)
        TSAFE_REQUIRE(c->hidden_size % c->n_heads == 0, TSAFE_E_PARAMS);
    else
        TSAFE_REQUIRE(c->head_dim <= TSAFE_MOE_MAX_HIDDEN, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->full_attention_interval > 0 && c->full_attention_interval <= c->n_layers,
                TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->intermediate_size <= TSAFE_MOE_MAX_INTERMEDIATE, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->shared_expert_gate == 0 || c->shared_expert_gate == 1, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->norm_topk_prob == 0 || c->norm_topk_prob == 1, TSAFE_E_PARAMS);
    if (c->n_experts == 0) {
        /* dense: one MLP, nothing routed */
        TSAFE_REQUIRE(c->top_k == 0 && c->shared_expert_intermediate == 0 &&
                        c->shared_expert_gate == 0 && c->intermediate_size > 0,
                    TSAFE_E_PARAMS);
        return TSAFE_OK;
    }
    TSAFE_REQUIRE(c->n_experts <= TSAFE_MOE_MAX_EXPERTS, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->top_k >= 1 && c->top_k <= c->n_experts, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->expert_intermediate > 0 &&
                    c->expert_intermediate <= TSAFE_MOE_MAX_INTERMEDIATE,
                TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->shared_expert_intermediate <= TSAFE_MOE_MAX_INTERMEDIATE, TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->shared_expert_gate == 0 || c->shared_expert_intermediate > 0,
                TSAFE_E_PARAMS);
    TSAFE_REQUIRE(c->top_k <= TSAFE_MOE_MAX_TOPK, TSAFE_E_UNSUPPORTED);
    return TSAFE_OK;
}

int tsafe_moe_config_is_full_attention(const tsafe_moe_config *cfg, uint32_t layer)
{
    if (cfg == NULL || cfg->full_attention_interval == 0)
        return 0;
    return ((uint64_t)layer + 1) % cfg->full_attention_interval == 0;
}
