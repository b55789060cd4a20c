/* Writes an adapter as a PEFT directory (config + safetensors). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "peft_internal.h"
#include "safetensors_internal.h"

#define KEY_PREFIX "base_model.model.model."

static json_t *number_json(double v)
{
    /* PEFT writes integral alphas as integers; keep that when exact. */
    if (v == floor(v) && fabs(v) < 9.0e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

/* Does the pattern object give this module its own rank / alpha? */
static int resolves(json_t *pat, const char *pname, int is_rank, size_t rank,
                    double alpha, const tsafe_lora_config *cfg)
{
    json_t *v = tsafe_peft_pattern_value(pat, pname);
    if (is_rank)
        return (v ? (size_t)json_integer_value(v) : cfg->r) == rank;
    return (v ? json_number_value(v) : cfg->lora_alpha) == alpha;
}

/* rank_pattern / alpha_pattern with one exact key ("model." + name) per
 * module that needs one. A new key can capture other modules by PEFT's
 * suffix rule (a name that contains ".model.<other name>"), so repeat until
 * every module resolves to its own value; at most one key per module. */
static tsafe_status build_patterns(const tsafe_lora_adapter *a, json_t *rp,
                                   json_t *ap)
{
    tsafe_status st = TSAFE_OK;
    char *pname = NULL;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < a->n; i++) {
            const tsafe_lora_mod *m = &a->m[i];
            size_t kl = strlen(m->name) + 7;
            free(pname);
            pname = malloc(kl);
            TSAFE_CHECK(pname, TSAFE_E_NOMEM);
            snprintf(pname, kl, "model.%s", m->name);
            if (!resolves(rp, pname, 1, m->rank, m->alpha, &a->cfg)) {
                TSAFE_CHECK(json_object_get(rp, pname) == NULL, TSAFE_E_STATE);
                TSAFE_CHECK(json_object_set_new(rp, pname,
                                             json_integer((json_int_t)m->rank)) == 0,
                         TSAFE_E_NOMEM);
                changed = 1;
            }
            if (!resolves(ap, pname, 0, m->rank, m->alpha, &a->cfg)) {
                TSAFE_CHECK(json_object_get(ap, pname) == NULL, TSAFE_E_STATE);
                TSAFE_CHECK(json_object_set_new(ap, pname, number_json(m->alpha)) == 0,
                         TSAFE_E_NOMEM);
                changed = 1;
            }
        }
    }
fail:
    free(pname);
    return st;
}

static tsafe_status build_config(const tsafe_lora_adapter *a, char **out)
{
    tsafe_status st = TSAFE_OK;
    json_t *root = json_object(), *rp = json_object(), *ap = json_object();
    json_t *tm = json_array();
    TSAFE_CHECK(root && rp && ap && tm, TSAFE_E_NOMEM);
    TSAFE_TRY(build_patterns(a, rp, ap));
    for (size_t i = 0; i < a->n; i++) {
        const tsafe_lora_mod *m = &a->m[i];
        int seen = 0;
        for (size_t j = 0; j < json_array_size(tm); j++)
            seen |= strcmp(json_string_value(json_array_get(tm, j)), m->proj) == 0;
        if (!seen)
            TSAFE_CHECK(json_array_append_new(tm, json_string(m->proj)) == 0,
                     TSAFE_E_NOMEM);
    }
    int ok = json_object_set_new(root, "peft_type", json_string("LORA")) == 0 &&
             json_object_set_new(root, "task_type", json_string("CAUSAL_LM")) == 0 &&
             json_object_set_new(root, "r", json_integer((json_int_t)a->cfg.r)) == 0 &&
             json_object_set_new(root, "lora_alpha", number_json(a->cfg.lora_alpha)) == 0 &&
             json_object_set_new(root, "use_rslora", json_boolean(a->cfg.use_rslora)) == 0 &&
             json_object_set_new(root, "use_dora", json_false()) == 0 &&
             json_object_set_new(root, "fan_in_fan_out", json_boolean(a->cfg.fan_in_fan_out)) == 0 &&
             json_object_set_new(root, "bias", json_string("none")) == 0 &&
             json_object_set_new(root, "lora_dropout", json_real(0.0)) == 0 &&
             json_object_set(root, "target_modules", tm) == 0 &&
             json_object_set(root, "rank_pattern", rp) == 0 &&
             json_object_set(root, "alpha_pattern", ap) == 0;
    TSAFE_CHECK(ok, TSAFE_E_NOMEM);
    *out = json_dumps(root, JSON_INDENT(2));
    TSAFE_CHECK(*out, TSAFE_E_NOMEM);
fail:
    json_decref(root);
    json_decref(rp);
    json_decref(ap);
    json_decref(tm);
    return st;
}

static tsafe_status build_tensors(const tsafe_lora_adapter *a, tsafe_dtype dtype,
                                  uint8_t **bytes, size_t *len)
{
    tsafe_status st = TSAFE_OK;
    tsafe_safetensors_writer *w = NULL;
    char *key = NULL;
    TSAFE_TRY(tsafe_safetensors_writer_create(&w));
    for (size_t i = 0; i < a->n; i++) {
        const tsafe_lora_mod *m = &a->m[i];
        size_t kl = strlen(KEY_PREFIX) + strlen(m->name) + 32;
        free(key);
        key = malloc(kl);
        TSAFE_CHECK(key, TSAFE_E_NOMEM);
        uint64_t sa[2] = {m->rank, m->in_dim}, sb[2] = {m->out_dim, m->rank};
        snprintf(key, kl, KEY_PREFIX "%s.lora_A.weight", m->name);
        TSAFE_TRY(tsafe_safetensors_writer_add_f32(w, key, dtype, sa, 2, m->A));
        snprintf(key, kl, KEY_PREFIX "%s.lora_B.weight", m->name);
        TSAFE_TRY(tsafe_safetensors_writer_add_f32(w, key, dtype, sb, 2, m->B));
    }
    TSAFE_TRY(tsafe_safetensors_writer_set_metadata(w, "format", "pt"));
    TSAFE_TRY(tsafe_safetensors_writer_serialize(w, bytes, len));
fail:
    free(key);
    tsafe_safetensors_writer_free(w);
    return st;
}

tsafe_status tsafe_lora_adapter_save_peft_memory(const tsafe_lora_adapter *a,
                                                 tsafe_dtype dtype,
                                                 char **config_json,
                                                 uint8_t **safetensors,
                                                 size_t *safetensors_len)
{
    if (!a || !config_json || !safetensors || !safetensors_len)
        return TSAFE_E_NULL;
    *config_json = NULL;
    *safetensors = NULL;
    *safetensors_len = 0;
    if (dtype != TSAFE_DTYPE_F32 && dtype != TSAFE_DTYPE_F16 &&
        dtype != TSAFE_DTYPE_BF16)
        return TSAFE_E_DTYPE;
    char *cfg = NULL;
    tsafe_status st = build_config(a, &cfg);
    if (st != TSAFE_OK)
        return st;
    st = build_tensors(a, dtype, safetensors, safetensors_len);
    if (st != TSAFE_OK) {
        free(cfg);
        return st;
    }
    *config_json = cfg;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_adapter_save_peft(const tsafe_lora_adapter *a,
                                          const char *dir, tsafe_dtype dtype)
{
    if (!a || !dir)
        return TSAFE_E_NULL;
    tsafe_status st = TSAFE_OK;
    char *cfg = NULL, *path = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0;
    TSAFE_TRY(tsafe_lora_adapter_save_peft_memory(a, dtype, &cfg, &bytes, &len));
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        TSAFE_CHECK(0, TSAFE_E_IO);
    size_t pl = strlen(dir) + 40;
    path = malloc(pl);
    TSAFE_CHECK(path, TSAFE_E_NOMEM);
    snprintf(path, pl, "%s/adapter_model.safetensors", dir);
    TSAFE_TRY(tsafe_write_file(path, bytes, len));
    snprintf(path, pl, "%s/adapter_config.json", dir);
    TSAFE_TRY(tsafe_write_file(path, cfg, strlen(cfg)));
fail:
    free(path);
    free(cfg);
    free(bytes);
    return st;
}
