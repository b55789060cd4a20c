/* Loading a tsafe_moe_config from a model's config.json (jansson). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json_get.h"
#include "moe_internal.h"

#define CONFIG_JSON_CAP (16u << 20)

/* Absent and JSON null both read as "not given" (dflt). */
static tsafe_status get_bool(json_t *obj, const char *key, int dflt, int *out)
{
    json_t *v = tsafe_json_member(obj, key);
    if (v == NULL) {
        *out = dflt;
        return TSAFE_OK;
    }
    return tsafe_json_bool(v, out) ? TSAFE_OK : TSAFE_E_JSON;
}

static const char *get_str(json_t *a, json_t *b, const char *key)
{
    json_t *v = tsafe_json_member(a, key);
    if (!json_is_string(v) && b != NULL)
        v = tsafe_json_member(b, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Copy at most cap-1 bytes, never cutting a UTF-8 sequence. */
static void copy_name(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int default_norm_topk(const char *model_type)
{
    static const char *const yes[] = {"qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"};
    if (model_type == NULL)
        return 0;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (strcmp(model_type, yes[i]) == 0)
            return 1;
    return 0;
}

static tsafe_status parse_root(json_t *root, tsafe_moe_config *out)
{
    tsafe_status st = TSAFE_OK;
    tsafe_moe_config c;
    memset(&c, 0, sizeof c);
    TSAFE_CHECK(json_is_object(root), TSAFE_E_JSON);

    json_t *src = root, *outer = NULL;
    json_t *tc = tsafe_json_member(root, "text_config");
    if (tc != NULL) {
        TSAFE_CHECK(json_is_object(tc), TSAFE_E_JSON);
        src = tc;
        outer = root;
    }

    TSAFE_TRY(tsafe_json_u32(src, "hidden_size", 1, 0, &c.hidden_size));
    TSAFE_TRY(tsafe_json_u32(src, "num_hidden_layers", 1, 0, &c.n_layers));
    TSAFE_TRY(tsafe_json_u32(src, "num_attention_heads", 1, 0, &c.n_heads));
    TSAFE_TRY(tsafe_json_u32(src, "num_key_value_heads", 0, c.n_heads, &c.n_kv_heads));
    TSAFE_TRY(tsafe_json_u32(src, "head_dim", 0, 0, &c.head_dim));
    TSAFE_TRY(tsafe_json_u32(src, "num_experts", 0, 0, &c.n_experts));
    TSAFE_TRY(tsafe_json_u32(src, "intermediate_size", c.n_experts == 0, 0, &c.intermediate_size));
    TSAFE_TRY(tsafe_json_u32(src, "full_attention_interval", 0, 1, &c.full_attention_interval));
    TSAFE_TRY(tsafe_json_u32(src, "vocab_size", 0, 0, &c.vocab_size));
    if (c.n_experts > 0) {
        const char *mt = get_str(src, outer, "model_type");
        TSAFE_TRY(tsafe_json_u32(src, "num_experts_per_tok", 1, 0, &c.top_k));
        TSAFE_TRY(tsafe_json_u32(src, "moe_intermediate_size", 1, 0, &c.expert_intermediate));
        TSAFE_TRY(tsafe_json_u32(src, "shared_expert_intermediate_size", 0, 0,
                        &c.shared_expert_intermediate));
        TSAFE_TRY(get_bool(src, "norm_topk_prob", default_norm_topk(mt), &c.norm_topk_prob));
        c.shared_expert_gate = c.shared_expert_intermediate > 0;
    }

    const char *name = get_str(root, NULL, "_name_or_path");
    if (name == NULL || name[0] == '\0')
        name = get_str(src, outer, "model_type");
    if (name == NULL || name[0] == '\0')
        name = "config.json";
    copy_name(c.name, sizeof c.name, name);

    TSAFE_TRY(tsafe_moe_config_validate(&c));
    *out = c;
    return TSAFE_OK;
fail:
    return st;
}

tsafe_status tsafe_moe_config_parse_json(const char *text, size_t len, tsafe_moe_config *out)
{
    TSAFE_REQUIRE(text != NULL && out != NULL, TSAFE_E_NULL);
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return TSAFE_E_JSON;
    tsafe_status st = parse_root(root, out);
    json_decref(root);
    return st;
}

tsafe_status tsafe_moe_config_load_json(const char *path, tsafe_moe_config *out)
{
    TSAFE_REQUIRE(path != NULL && out != NULL, TSAFE_E_NULL);
    uint8_t *buf = NULL;
    size_t len = 0;
    tsafe_status st = tsafe_read_file(path, CONFIG_JSON_CAP, &buf, &len);
    if (st != TSAFE_OK)
        return st;
    st = tsafe_moe_config_parse_json((const char *)buf, len, out);
    free(buf);
    return st;
}
