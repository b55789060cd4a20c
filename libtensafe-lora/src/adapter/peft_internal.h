/* PEFT adapter_config.json and tensor-key handling (internal). */
#ifndef TSAFE_PEFT_INTERNAL_H
#define TSAFE_PEFT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "adapter_internal.h"

typedef struct {
    tsafe_lora_config cfg;
    json_t *root;          /* owns everything below */
    json_t *rank_pattern;  /* object or NULL */
    json_t *alpha_pattern; /* object or NULL */
    json_t *targets;       /* array of strings (normalised) */
    json_t *target_params; /* array of strings (normalised) */
} tsafe_peft_config;

/* Parses and validates adapter_config.json text. On error nothing is held
 * and err (may be NULL) names the field. */
tsafe_status tsafe_peft_config_parse(const char *text, size_t len,
                                     tsafe_error_info *err, tsafe_peft_config *out);
void tsafe_peft_config_clear(tsafe_peft_config *c);

/* PEFT's pattern rule: name == key or name ends with "." + key. */
int tsafe_peft_pattern_match(const char *key, const char *name);
/* Value of the pattern that applies to peft_name (exact key first, then
 * the first dot-suffix key in object order), or NULL. */
json_t *tsafe_peft_pattern_value(json_t *pat, const char *peft_name);
/* Rank / alpha for a PEFT module name (first matching pattern key, else the
 * default). */
size_t tsafe_peft_rank_for(const tsafe_peft_config *c, const char *peft_name);
double tsafe_peft_alpha_for(const tsafe_peft_config *c, const char *peft_name);

/* One tensor key, decomposed. */
typedef struct {
    const char *key;  /* borrowed tensor name */
    char *peft_name;  /* without "base_model.model." and ".base_layer" */
    char *canonical;  /* prefixes stripped */
    int is_b;         /* lora_B (else lora_A) */
    int fused;        /* canonical ends with "experts" (3-D param wrapper) */
    int depth;        /* number of ".base_layer" segments removed */
} tsafe_peft_key;

/* TSAFE_E_DORA for lora_magnitude_vector keys, TSAFE_E_UNSUPPORTED for any
 * key that is not lora_A/lora_B weight. */
tsafe_status tsafe_peft_parse_key(const char *key, tsafe_peft_key *out);
void tsafe_peft_key_clear(tsafe_peft_key *k);

/* Strips the known prefixes repeatedly; returns a pointer into name. */
const char *tsafe_peft_strip_prefixes(const char *name);

#endif
