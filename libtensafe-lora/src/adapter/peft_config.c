/* adapter_config.json: the fields that change what the weights mean. */
#include <math.h>
#include <string.h>

#include "detail.h"
#include "json_get.h"
#include "peft_internal.h"
#include "safetensors_internal.h"

void tsafe_peft_config_clear(tsafe_peft_config *c)
{
    if (!c)
        return;
    json_decref(c->root);
    json_decref(c->targets);
    json_decref(c->target_params);
    memset(c, 0, sizeof *c);
}

/* Optional boolean: absent or null -> 0. */
static tsafe_status opt_bool(json_t *root, const char *field, int *out)
{
    json_t *v = tsafe_json_member(root, field);
    *out = 0;
    if (!v)
        return TSAFE_OK;
    return tsafe_json_bool(v, out) ? TSAFE_OK : TSAFE_E_FORMAT;
}

/* PEFT's r: an integer in [1, 2^24]. */
static int positive_rank(json_t *v, size_t *out)
{
    json_int_t x;
    if (!tsafe_json_int_in(v, 1, (json_int_t)(1 << 24), &x))
        return 0;
    *out = (size_t)x;
    return 1;
}

/* string | [string...] | null -> new array of strings. */
static tsafe_status string_list(json_t *v, json_t **out)
{
    *out = json_array();
    if (!*out)
        return TSAFE_E_NOMEM;
    if (!v || json_is_null(v))
        return TSAFE_OK;
    if (json_is_string(v))
        return json_array_append(*out, v) == 0 ? TSAFE_OK : TSAFE_E_NOMEM;
    if (!json_is_array(v))
        return TSAFE_E_FORMAT;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e))
            return TSAFE_E_FORMAT;
        if (json_array_append(*out, e) != 0)
            return TSAFE_E_NOMEM;
    }
    return TSAFE_OK;
}

/* The config's failures all read "adapter_config.json: ..." */
#define CFG_FAIL(code, ...)                                                       \
    do {                                                                          \
        st = tsafe_detail(err, (code), "adapter_config.json: " __VA_ARGS__);      \
        goto fail;                                                                \
    } while (0)

/* "rank_pattern" and "alpha_pattern": optional objects of non-empty keys
 * to ranks / finite alphas; kept in c (borrowed from c->root). */
static tsafe_status parse_patterns(json_t *root, tsafe_error_info *err, tsafe_peft_config *c)
{
    tsafe_status st = TSAFE_OK;
    const char *names[2] = {"rank_pattern", "alpha_pattern"};
    for (int p = 0; p < 2; p++) {
        json_t *pat = json_object_get(root, names[p]);
        if (!pat || json_is_null(pat))
            continue;
        if (!json_is_object(pat))
            CFG_FAIL(TSAFE_E_FORMAT, "\"%s\" is not an object", names[p]);
        const char *k;
        json_t *v;
        json_object_foreach(pat, k, v) {
            size_t rv;
            double av;
            if (k[0] == '\0')
                CFG_FAIL(TSAFE_E_FORMAT, "\"%s\" has an empty key", names[p]);
            if (!(p == 0 ? positive_rank(v, &rv) : tsafe_json_finite(v, &av)))
                CFG_FAIL(TSAFE_E_FORMAT, "\"%s\"[\"%s\"] is not %s", names[p], k,
                         p == 0 ? "an integer in [1, 2^24]" : "a finite number");
        }
        if (p == 0)
            c->rank_pattern = pat;
        else
            c->alpha_pattern = pat;
    }
    return TSAFE_OK;
fail:
    return st;
}

tsafe_status tsafe_peft_config_parse(const char *text, size_t len,
                                     tsafe_error_info *err, tsafe_peft_config *c)
{
    tsafe_status st = TSAFE_OK;
    memset(c, 0, sizeof *c);
    json_error_t jerr;
    c->root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!c->root)
        CFG_FAIL(TSAFE_E_JSON, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
    if (!json_is_object(c->root))
        CFG_FAIL(TSAFE_E_FORMAT, "not a JSON object");
    json_t *root = c->root;

    /* DoRA first: the clearest answer for a DoRA adapter. */
    int flag;
    if ((st = opt_bool(root, "use_dora", &flag)) != TSAFE_OK)
        CFG_FAIL(st, "\"use_dora\" is not a boolean");
    if (flag)
        CFG_FAIL(TSAFE_E_DORA, "\"use_dora\": true (DoRA is not supported)");

    json_t *pt = json_object_get(root, "peft_type");
    if (!pt)
        CFG_FAIL(TSAFE_E_MISSING_FIELD, "no \"peft_type\"");
    if (!json_is_string(pt))
        CFG_FAIL(TSAFE_E_FORMAT, "\"peft_type\" is not a string");
    if (strcmp(json_string_value(pt), "LORA") != 0)
        CFG_FAIL(TSAFE_E_UNSUPPORTED,
                 "\"peft_type\": \"%s\": not a LoRA adapter (only \"LORA\" adapters load)",
                 json_string_value(pt));

    json_t *r = json_object_get(root, "r");
    json_t *alpha = json_object_get(root, "lora_alpha");
    if (!r || !alpha)
        CFG_FAIL(TSAFE_E_MISSING_FIELD, "no \"%s\"", !r ? "r" : "lora_alpha");
    if (!positive_rank(r, &c->cfg.r))
        CFG_FAIL(TSAFE_E_FORMAT, "\"r\" is not an integer in [1, 2^24]");
    if (!tsafe_json_finite(alpha, &c->cfg.lora_alpha))
        CFG_FAIL(TSAFE_E_FORMAT, "\"lora_alpha\" is not a finite number");

    const char *bools[4] = {"use_rslora", "fan_in_fan_out", "lora_bias", "use_qalora"};
    int *dst[4] = {&c->cfg.use_rslora, &c->cfg.fan_in_fan_out, &flag, &flag};
    for (int b = 0; b < 4; b++) {
        if ((st = opt_bool(root, bools[b], dst[b])) != TSAFE_OK)
            CFG_FAIL(st, "\"%s\" is not a boolean", bools[b]);
        if (b >= 2 && flag)
            CFG_FAIL(TSAFE_E_UNSUPPORTED, "\"%s\": true is not supported", bools[b]);
    }

    if ((st = parse_patterns(root, err, c)) != TSAFE_OK)
        goto fail;
    const char *lists[2] = {"target_modules", "target_parameters"};
    json_t **ldst[2] = {&c->targets, &c->target_params};
    for (int l = 0; l < 2; l++)
        if ((st = string_list(json_object_get(root, lists[l]), ldst[l])) != TSAFE_OK) {
            if (st == TSAFE_E_NOMEM)
                goto fail;
            CFG_FAIL(st, "\"%s\" is not a string or a list of strings", lists[l]);
        }
    return TSAFE_OK;
fail:
    tsafe_peft_config_clear(c);
    return st;
}

int tsafe_peft_pattern_match(const char *key, const char *name)
{
    size_t kl = strlen(key), nl = strlen(name);
    if (kl == nl)
        return strcmp(key, name) == 0;
    return nl > kl && name[nl - kl - 1] == '.' &&
           strcmp(name + nl - kl, key) == 0;
}

json_t *tsafe_peft_pattern_value(json_t *pat, const char *peft_name)
{
    if (!pat)
        return NULL;
    json_t *exact = json_object_get(pat, peft_name); /* PEFT checks it first */
    if (exact)
        return exact;
    const char *k;
    json_t *v;
    json_object_foreach(pat, k, v) {
        if (tsafe_peft_pattern_match(k, peft_name))
            return v;
    }
    return NULL;
}

size_t tsafe_peft_rank_for(const tsafe_peft_config *c, const char *peft_name)
{
    json_t *v = tsafe_peft_pattern_value(c->rank_pattern, peft_name);
    return v ? (size_t)json_integer_value(v) : c->cfg.r;
}

double tsafe_peft_alpha_for(const tsafe_peft_config *c, const char *peft_name)
{
    json_t *v = tsafe_peft_pattern_value(c->alpha_pattern, peft_name);
    return v ? json_number_value(v) : c->cfg.lora_alpha;
}
