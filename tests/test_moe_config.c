/* MoE configurations: presets, validation, config.json loading on fixtures
 * written here (Qwen2.5-1.5B, Qwen3-30B-A3B, Qwen3.5-35B-A3B with realistic
 * field names, flat and text_config-nested) and malformed files. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensafe/moe.h"

static char g_dir[64];

static const char *write_fixture(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
    return path;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/tsafe_moe_cfg_XXXXXX");
    return mkdtemp(g_dir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Qwen/Qwen2.5-1.5B config.json (as published). */
static const char k_qwen25[] =
    "{\n"
    "  \"architectures\": [\"Qwen2ForCausalLM\"],\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"eos_token_id\": 151643,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 1536,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 8960,\n"
    "  \"max_position_embeddings\": 131072,\n"
    "  \"max_window_layers\": 28,\n"
    "  \"model_type\": \"qwen2\",\n"
    "  \"num_attention_heads\": 12,\n"
    "  \"num_hidden_layers\": 28,\n"
    "  \"num_key_value_heads\": 2,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_theta\": 1000000.0,\n"
    "  \"sliding_window\": null,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

/* Qwen/Qwen3-30B-A3B config.json (flat). */
static const char k_qwen3[] =
    "{\n"
    "  \"architectures\": [\"Qwen3MoeForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"decoder_sparse_step\": 1,\n"
    "  \"head_dim\": 128,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 2048,\n"
    "  \"intermediate_size\": 6144,\n"
    "  \"max_position_embeddings\": 40960,\n"
    "  \"mlp_only_layers\": [],\n"
    "  \"model_type\": \"qwen3_moe\",\n"
    "  \"moe_intermediate_size\": 768,\n"
    "  \"norm_topk_prob\": true,\n"
    "  \"num_attention_heads\": 32,\n"
    "  \"num_experts\": 128,\n"
    "  \"num_experts_per_tok\": 8,\n"
    "  \"num_hidden_layers\": 48,\n"
    "  \"num_key_value_heads\": 4,\n"
    "  \"output_router_logits\": false,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 1000000.0,\n"
    "  \"router_aux_loss_coef\": 0.001,\n"
    "  \"sliding_window\": null,\n"
    "  \"tie_word_embeddings\": false,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

/* Qwen/Qwen3.5-35B-A3B: multimodal file, text fields under text_config;
 * norm_topk_prob left out (transformers' default for qwen3_5_moe is true). */
static const char k_qwen35[] =
    "{\n"
    "  \"architectures\": [\"Qwen3_5MoeForConditionalGeneration\"],\n"
    "  \"image_token_id\": 248056,\n"
    "  \"model_type\": \"qwen3_5_moe\",\n"
    "  \"text_config\": {\n"
    "    \"attention_bias\": false,\n"
    "    \"attn_output_gate\": true,\n"
    "    \"dtype\": \"bfloat16\",\n"
    "    \"eos_token_id\": 248046,\n"
    "    \"full_attention_interval\": 4,\n"
    "    \"head_dim\": 256,\n"
    "    \"hidden_act\": \"silu\",\n"
    "    \"hidden_size\": 2048,\n"
    "    \"layer_types\": [\"linear_attention\", \"linear_attention\",\n"
    "                    \"linear_attention\", \"full_attention\"],\n"
    "    \"linear_conv_kernel_dim\": 4,\n"
    "    \"linear_key_head_dim\": 128,\n"
    "    \"linear_num_key_heads\": 16,\n"
    "    \"linear_num_value_heads\": 32,\n"
    "    \"linear_value_head_dim\": 128,\n"
    "    \"max_position_embeddings\": 262144,\n"
    "    \"mlp_only_layers\": [],\n"
    "    \"model_type\": \"qwen3_5_moe_text\",\n"
    "    \"moe_intermediate_size\": 512,\n"
    "    \"num_attention_heads\": 16,\n"
    "    \"num_experts\": 256,\n"
    "    \"num_experts_per_tok\": 8,\n"
    "    \"num_hidden_layers\": 40,\n"
    "    \"num_key_value_heads\": 2,\n"
    "    \"partial_rotary_factor\": 0.25,\n"
    "    \"rms_norm_eps\": 1e-06,\n"
    "    \"shared_expert_intermediate_size\": 512,\n"
    "    \"vocab_size\": 248320\n"
    "  },\n"
    "  \"tie_word_embeddings\": false,\n"
    "  \"vision_config\": {\"depth\": 27, \"hidden_size\": 1152}\n"
    "}\n";

/* The same model written flat, Qwen3-Next style, with norm_topk_prob. */
static const char k_qwen35_flat[] =
    "{\"_name_or_path\": \"Qwen/Qwen3.5-35B-A3B\", \"model_type\": \"qwen3_5_moe_text\",\n"
    " \"hidden_size\": 2048, \"num_hidden_layers\": 40, \"num_attention_heads\": 16,\n"
    " \"num_key_value_heads\": 2, \"head_dim\": 256, \"num_experts\": 256,\n"
    " \"num_experts_per_tok\": 8, \"moe_intermediate_size\": 512,\n"
    " \"shared_expert_intermediate_size\": 512, \"norm_topk_prob\": true,\n"
    " \"full_attention_interval\": 4, \"vocab_size\": 248320}\n";

static void expect_same(const tsafe_moe_config *a, const tsafe_moe_config *b)
{
    assert_int_equal(a->hidden_size, b->hidden_size);
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->n_heads, b->n_heads);
    assert_int_equal(a->n_kv_heads, b->n_kv_heads);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->n_experts, b->n_experts);
    assert_int_equal(a->top_k, b->top_k);
    assert_int_equal(a->expert_intermediate, b->expert_intermediate);
    assert_int_equal(a->shared_expert_intermediate, b->shared_expert_intermediate);
    assert_int_equal(a->shared_expert_gate, b->shared_expert_gate);
    assert_int_equal(a->norm_topk_prob, b->norm_topk_prob);
    assert_int_equal(a->full_attention_interval, b->full_attention_interval);
    assert_int_equal(a->vocab_size, b->vocab_size);
}

static void test_presets(void **state)
{
    (void)state;
    tsafe_moe_config c;
    assert_int_equal(tsafe_moe_config_preset_count(), 3);
    for (size_t i = 0; i < tsafe_moe_config_preset_count(); i++) {
        const char *n = tsafe_moe_config_preset_name(i);
        assert_non_null(n);
        assert_int_equal(tsafe_moe_config_preset(n, &c), TSAFE_OK);
        assert_string_equal(c.name, n);
        assert_int_equal(tsafe_moe_config_validate(&c), TSAFE_OK);
    }
    assert_null(tsafe_moe_config_preset_name(3));
    assert_int_equal(tsafe_moe_config_preset("qwen9-1t", &c), TSAFE_E_NOT_FOUND);
    assert_int_equal(tsafe_moe_config_preset(NULL, &c), TSAFE_E_NULL);

    assert_int_equal(tsafe_moe_config_preset("Qwen2.5-1.5B", &c), TSAFE_OK);
    assert_int_equal(c.hidden_size, 1536);
    assert_int_equal(c.n_layers, 28);
    assert_int_equal(c.n_heads, 12);
    assert_int_equal(c.n_kv_heads, 2);
    assert_int_equal(c.n_experts, 0);
    assert_int_equal(c.intermediate_size, 8960);

    assert_int_equal(tsafe_moe_config_preset("qwen3-30b-a3b", &c), TSAFE_OK);
    assert_int_equal(c.hidden_size, 2048);
    assert_int_equal(c.n_layers, 48);
    assert_int_equal(c.n_heads, 32);
    assert_int_equal(c.n_kv_heads, 4);
    assert_int_equal(c.n_experts, 128);
    assert_int_equal(c.top_k, 8);
    assert_int_equal(c.expert_intermediate, 768);
    assert_int_equal(c.shared_expert_intermediate, 0);
    assert_true(c.norm_topk_prob);

    assert_int_equal(tsafe_moe_config_preset("qwen3.5-35b-a3b", &c), TSAFE_OK);
    assert_int_equal(c.hidden_size, 2048);
    assert_int_equal(c.n_layers, 40);
    assert_int_equal(c.n_experts, 256);
    assert_int_equal(c.top_k, 8);
    assert_int_equal(c.expert_intermediate, 512);
    assert_int_equal(c.shared_expert_intermediate, 512);
    assert_true(c.shared_expert_gate);
    assert_true(c.norm_topk_prob);
    assert_int_equal(c.full_attention_interval, 4);
    /* layers 3, 7, ..., 39 are full attention: 10 of 40 */
    unsigned full = 0;
    for (uint32_t l = 0; l < c.n_layers; l++)
        full += (unsigned)tsafe_moe_config_is_full_attention(&c, l);
    assert_int_equal(full, 10);
    assert_true(tsafe_moe_config_is_full_attention(&c, 3));
    assert_false(tsafe_moe_config_is_full_attention(&c, 0));
    assert_false(tsafe_moe_config_is_full_attention(NULL, 3));
}

static void test_validate(void **state)
{
    (void)state;
    tsafe_moe_config base, c;
    assert_int_equal(tsafe_moe_config_preset("qwen3.5-35b-a3b", &base), TSAFE_OK);
    /* each case mutates a copy of base */
#define BAD(stmt, st)                                                        \
    do {                                                                     \
        c = base;                                                            \
        stmt;                                                                \
        assert_int_equal(tsafe_moe_config_validate(&c), st);                 \
    } while (0)
    BAD((void)0, TSAFE_OK);
    BAD(c.hidden_size = 0, TSAFE_E_PARAMS);
    BAD(c.n_layers = 0, TSAFE_E_PARAMS);
    BAD(c.n_heads = 0, TSAFE_E_PARAMS);
    BAD(c.n_kv_heads = 3, TSAFE_E_PARAMS);            /* 16 % 3 != 0 */
    BAD((c.head_dim = 0, c.n_heads = 24, c.n_kv_heads = 8), TSAFE_E_PARAMS); /* 2048 % 24 */
    BAD((c.head_dim = 0, c.n_heads = 32, c.n_kv_heads = 4), TSAFE_OK);
    BAD(c.top_k = 257, TSAFE_E_PARAMS);               /* top_k > n_experts */
    BAD(c.top_k = 0, TSAFE_E_PARAMS);
    BAD(c.top_k = 33, TSAFE_E_UNSUPPORTED);           /* above TSAFE_MOE_MAX_TOPK */
    BAD(c.expert_intermediate = 0, TSAFE_E_PARAMS);
    BAD(c.shared_expert_intermediate = 0, TSAFE_E_PARAMS); /* gate without expert */
    BAD((c.shared_expert_intermediate = 0, c.shared_expert_gate = 0), TSAFE_OK);
    BAD(c.full_attention_interval = 0, TSAFE_E_PARAMS);
    BAD(c.full_attention_interval = 41, TSAFE_E_PARAMS);
    BAD(c.hidden_size = TSAFE_MOE_MAX_HIDDEN * 2, TSAFE_E_PARAMS);
    BAD(c.n_experts = TSAFE_MOE_MAX_EXPERTS + 1, TSAFE_E_PARAMS);
    BAD(c.norm_topk_prob = 2, TSAFE_E_PARAMS);
    BAD(memset(c.name, 'x', sizeof c.name), TSAFE_E_PARAMS); /* unterminated */
    /* dense */
    assert_int_equal(tsafe_moe_config_preset("qwen2.5-1.5b", &base), TSAFE_OK);
    BAD((void)0, TSAFE_OK);
    BAD(c.intermediate_size = 0, TSAFE_E_PARAMS);
    BAD(c.top_k = 2, TSAFE_E_PARAMS);
    BAD(c.shared_expert_intermediate = 64, TSAFE_E_PARAMS);
#undef BAD
    assert_int_equal(tsafe_moe_config_validate(NULL), TSAFE_E_NULL);
}

static void test_load_fixtures(void **state)
{
    (void)state;
    tsafe_moe_config want, got;

    assert_int_equal(tsafe_moe_config_preset("qwen2.5-1.5b", &want), TSAFE_OK);
    assert_int_equal(tsafe_moe_config_load_json(write_fixture("q25.json", k_qwen25), &got),
                     TSAFE_OK);
    expect_same(&got, &want);
    assert_int_equal(got.intermediate_size, 8960);
    assert_string_equal(got.name, "qwen2");

    assert_int_equal(tsafe_moe_config_preset("qwen3-30b-a3b", &want), TSAFE_OK);
    assert_int_equal(tsafe_moe_config_load_json(write_fixture("q3.json", k_qwen3), &got),
                     TSAFE_OK);
    expect_same(&got, &want);

    assert_int_equal(tsafe_moe_config_preset("qwen3.5-35b-a3b", &want), TSAFE_OK);
    assert_int_equal(tsafe_moe_config_load_json(write_fixture("q35.json", k_qwen35), &got),
                     TSAFE_OK);
    expect_same(&got, &want);
    assert_string_equal(got.name, "qwen3_5_moe_text");

    assert_int_equal(tsafe_moe_config_parse_json(k_qwen35_flat, strlen(k_qwen35_flat), &got),
                     TSAFE_OK);
    expect_same(&got, &want);
    assert_string_equal(got.name, "Qwen/Qwen3.5-35B-A3B");

    /* norm_topk_prob defaults by model_type: qwen3_moe without it -> false */
    char *txt = strdup(k_qwen3);
    assert_non_null(txt);
    char *p = strstr(txt, "\"norm_topk_prob\": true,");
    assert_non_null(p);
    memset(p, ' ', strlen("\"norm_topk_prob\": true,"));
    assert_int_equal(tsafe_moe_config_parse_json(txt, strlen(txt), &got), TSAFE_OK);
    assert_false(got.norm_topk_prob);
    free(txt);

    /* not NUL-terminated input: parse only len bytes */
    char buf[sizeof k_qwen35_flat + 8];
    memcpy(buf, k_qwen35_flat, strlen(k_qwen35_flat));
    memset(buf + strlen(k_qwen35_flat), 'Z', 8);
    assert_int_equal(tsafe_moe_config_parse_json(buf, strlen(k_qwen35_flat), &got), TSAFE_OK);
}

/* Replace the first occurrence of `from` in src by `to`. */
static char *patched(const char *src, const char *from, const char *to)
{
    const char *p = strstr(src, from);
    assert_non_null(p);
    size_t a = (size_t)(p - src), n = strlen(src) - strlen(from) + strlen(to);
    char *o = malloc(n + 1);
    assert_non_null(o);
    memcpy(o, src, a);
    memcpy(o + a, to, strlen(to));
    strcpy(o + a + strlen(to), p + strlen(from));
    return o;
}

static void test_malformed(void **state)
{
    (void)state;
    struct {
        const char *base, *from, *to;
        tsafe_status want;
    } cases[] = {
        {k_qwen3, "\"hidden_size\": 2048,", "", TSAFE_E_MISSING_FIELD},
        {k_qwen3, "\"num_hidden_layers\": 48,", "", TSAFE_E_MISSING_FIELD},
        {k_qwen3, "\"num_attention_heads\": 32,", "", TSAFE_E_MISSING_FIELD},
        {k_qwen3, "\"num_experts_per_tok\": 8,", "", TSAFE_E_MISSING_FIELD},
        {k_qwen3, "\"moe_intermediate_size\": 768,", "", TSAFE_E_MISSING_FIELD},
        {k_qwen25, "\"intermediate_size\": 8960,", "", TSAFE_E_MISSING_FIELD},
        {k_qwen35, "\"hidden_size\": 2048,", "", TSAFE_E_MISSING_FIELD}, /* nested */
        {k_qwen3, "\"hidden_size\": 2048,", "\"hidden_size\": \"2048\",", TSAFE_E_JSON},
        {k_qwen3, "\"hidden_size\": 2048,", "\"hidden_size\": 2048.5,", TSAFE_E_JSON},
        {k_qwen3, "\"num_experts\": 128,", "\"num_experts\": [128],", TSAFE_E_JSON},
        {k_qwen3, "\"norm_topk_prob\": true,", "\"norm_topk_prob\": 1,", TSAFE_E_JSON},
        {k_qwen35, "\"text_config\": {", "\"text_config\": 7, \"x\": {", TSAFE_E_JSON},
        {k_qwen3, "\"num_experts_per_tok\": 8,", "\"num_experts_per_tok\": 129,",
         TSAFE_E_PARAMS},
        {k_qwen3, "\"hidden_size\": 2048,", "\"hidden_size\": 0,", TSAFE_E_PARAMS},
        {k_qwen3, "\"hidden_size\": 2048,", "\"hidden_size\": -2048,", TSAFE_E_PARAMS},
        {k_qwen3, "\"hidden_size\": 2048,", "\"hidden_size\": 99999999999,", TSAFE_E_PARAMS},
        {k_qwen25, "\"num_attention_heads\": 12,", "\"num_attention_heads\": 7,",
         TSAFE_E_PARAMS}, /* 1536 % 7 and 7 % 2 */
        {k_qwen25, "\"num_key_value_heads\": 2,", "\"num_key_value_heads\": 5,",
         TSAFE_E_PARAMS},
        {k_qwen35, "\"full_attention_interval\": 4,", "\"full_attention_interval\": 0,",
         TSAFE_E_PARAMS},
        {k_qwen3, "\"num_experts_per_tok\": 8,", "\"num_experts_per_tok\": 0,",
         TSAFE_E_PARAMS},
        {k_qwen3, "\"vocab_size\": 151936\n}", "\"vocab_size\": 151936", TSAFE_E_JSON},
        {k_qwen3, "\"model_type\": \"qwen3_moe\",", "\"hidden_size\": 1024,",
         TSAFE_E_JSON}, /* duplicate key */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = patched(cases[i].base, cases[i].from, cases[i].to);
        tsafe_moe_config c;
        memset(&c, 0xAB, sizeof c);
        tsafe_status st = tsafe_moe_config_parse_json(t, strlen(t), &c);
        if (st != cases[i].want)
            print_message("case %zu: got %d want %d\n", i, (int)st, (int)cases[i].want);
        assert_int_equal(st, cases[i].want);
        assert_int_equal((unsigned char)c.name[0], 0xAB); /* untouched on error */
        /* and the same through a file */
        char name[32];
        snprintf(name, sizeof name, "bad%zu.json", i);
        assert_int_equal(tsafe_moe_config_load_json(write_fixture(name, t), &c),
                         cases[i].want);
        free(t);
    }
    const char *not_json[] = {"", "   ", "not json", "{", "[1,2,3]", "null", "\"str\"",
                              "{\"hidden_size\": 2048,}"};
    for (size_t i = 0; i < sizeof not_json / sizeof not_json[0]; i++) {
        tsafe_moe_config c;
        assert_int_equal(tsafe_moe_config_parse_json(not_json[i], strlen(not_json[i]), &c),
                         TSAFE_E_JSON);
    }
    tsafe_moe_config c;
    assert_int_equal(tsafe_moe_config_load_json(write_fixture("empty.json", ""), &c),
                     TSAFE_E_JSON);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/does-not-exist.json", g_dir);
    assert_int_equal(tsafe_moe_config_load_json(missing, &c), TSAFE_E_NOT_FOUND);
    assert_int_equal(tsafe_moe_config_load_json(g_dir, &c) != TSAFE_OK, 1); /* a directory */
    assert_int_equal(tsafe_moe_config_load_json(NULL, &c), TSAFE_E_NULL);
    assert_int_equal(tsafe_moe_config_parse_json(NULL, 0, &c), TSAFE_E_NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_load_fixtures),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
