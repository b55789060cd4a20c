/* Adapter from a signed package: verify first (against the caller's trusted
 * key), then parse the payload as PEFT safetensors with a config built from
 * the verified manifest. Nothing in the package is parsed before the
 * signature and digest check out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tensafe/lora_adapter.h"
#include "tensafe/lora_package.h"
#include "../adapter/adapter_internal.h"
#include "../adapter/detail.h"
#include "format.h"

/* PEFT's {key: value} object, keys in the manifest's order (jansson keeps
 * insertion order, and the PEFT loader matches in that order) */
static json_t *pattern_object(const tsafe_package_pattern *p, size_t n, int is_rank)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++) {
        json_t *v = is_rank ? json_integer((json_int_t)p[i].value) : json_real(p[i].value);
        if (json_object_set_new(o, p[i].key, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

tsafe_status tsafe_lora_adapter_load_package(const uint8_t *bytes, size_t len,
                                             const uint8_t trusted_pk[32],
                                             const tsafe_lora_load_options *opt,
                                             tsafe_lora_adapter **out)
{
    tsafe_error_info *err = opt ? opt->error : NULL;
    tsafe_detail_reset(err);
    if (!bytes || !trusted_pk || !out)
        return tsafe_detail(err, TSAFE_E_NULL, "a required pointer is NULL");
    *out = NULL;
    tsafe_package *pkg = NULL;
    tsafe_status st = tsafe_package_open(bytes, len, trusted_pk, &pkg);
    if (st != TSAFE_OK)
        return tsafe_detail(err, st, "package of %zu bytes: %s", len,
                            st == TSAFE_E_VERIFY ? "digest or signature does not verify "
                                                   "against the trusted key"
                                                 : tsafe_strerror(st));
    tsafe_package_manifest m;
    const uint8_t *payload = NULL;
    size_t payload_len = 0;
    char *config = NULL;
    json_t *cfg = NULL, *targets = NULL;
    if ((st = tsafe_package_manifest_get(pkg, &m)) != TSAFE_OK ||
        (st = tsafe_package_payload(pkg, &payload, &payload_len)) != TSAFE_OK)
        goto out;
    targets = json_array();
    for (size_t i = 0; targets && i < m.n_targets; i++)
        json_array_append_new(targets, json_string(m.targets[i]));
    cfg = json_pack("{s:s, s:i, s:f, s:o, s:b, s:o, s:o}", "peft_type", "LORA", "r",
                    (json_int_t)m.rank, "lora_alpha", m.alpha, "target_modules", targets,
                    "use_rslora", m.use_rslora, "rank_pattern",
                    pattern_object(m.rank_pattern, m.n_rank_pattern, 1), "alpha_pattern",
                    pattern_object(m.alpha_pattern, m.n_alpha_pattern, 0));
    targets = NULL; /* owned by cfg now ("o" steals even when json_pack fails) */
    config = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
    if (!config) {
        st = TSAFE_E_NOMEM;
        goto out;
    }
    st = tsafe_lora_adapter_load_peft_memory(config, strlen(config), payload, payload_len, opt,
                                             out);
    if (st == TSAFE_OK) {
        /* open verified the stored digest (the bytes before the trailer)
         * and the signature over it with trusted_pk */
        tsafe_lora_origin *o = &(*out)->origin;
        o->kind = TSAFE_LORA_ORIGIN_SIGNED;
        memcpy(o->package_digest, bytes + len - PKG_TRAILER_BYTES, PKG_DIGEST_BYTES);
        memcpy(o->signer_key, trusted_pk, 32);
        o->path = NULL;
    }
out:
    free(config);
    json_decref(cfg);
    json_decref(targets);
    tsafe_package_free(pkg);
    return st;
}
