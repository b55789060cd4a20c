/* PEFT tensor keys -> canonical module names. */
#include <stdlib.h>
#include <string.h>

#include "peft_internal.h"

static int starts_with(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int ends_with(const char *s, const char *p)
{
    size_t sl = strlen(s), pl = strlen(p);
    return sl >= pl && strcmp(s + sl - pl, p) == 0;
}

const char *tsafe_peft_strip_prefixes(const char *name)
{
    static const char *const prefixes[] = {"base_model.model.", "model.",
                                           "language_model."};
    for (;;) {
        int hit = 0;
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
            if (starts_with(name, prefixes[i]) &&
                name[strlen(prefixes[i])] != '\0') {
                name += strlen(prefixes[i]);
                hit = 1;
            }
        }
        if (!hit)
            return name;
    }
}

void tsafe_peft_key_clear(tsafe_peft_key *k)
{
    if (!k)
        return;
    free(k->peft_name);
    free(k->canonical);
    k->peft_name = k->canonical = NULL;
}

/* Finds the last ".lora_A." / ".lora_B." component and checks that only
 * "weight" or "<adapter>.weight" follows. Returns the module length. */
static tsafe_status split_suffix(const char *key, size_t *mod_len, int *is_b)
{
    const char *hit = NULL;
    for (const char *p = key; (p = strstr(p, ".lora_")) != NULL; p++)
        if ((p[6] == 'A' || p[6] == 'B') && p[7] == '.')
            hit = p;
    if (!hit || hit == key)
        return TSAFE_E_UNSUPPORTED;
    const char *rest = hit + 8;
    const char *dot = strchr(rest, '.');
    if (strcmp(rest, "weight") != 0 &&
        !(dot && dot != rest && strcmp(dot, ".weight") == 0))
        return TSAFE_E_UNSUPPORTED; /* e.g. a LoRA bias */
    *mod_len = (size_t)(hit - key);
    *is_b = hit[6] == 'B';
    return TSAFE_OK;
}

tsafe_status tsafe_peft_parse_key(const char *key, tsafe_peft_key *out)
{
    memset(out, 0, sizeof *out);
    out->key = key;
    if (strstr(key, "lora_magnitude_vector"))
        return TSAFE_E_DORA;
    size_t ml;
    tsafe_status st = split_suffix(key, &ml, &out->is_b);
    if (st != TSAFE_OK)
        return st;
    const char *mod = key;
    if (starts_with(mod, "base_model.model.") && ml > 17) {
        mod += 17;
        ml -= 17;
    }
    char *pn = malloc(ml + 1);
    if (!pn)
        return TSAFE_E_NOMEM;
    memcpy(pn, mod, ml);
    pn[ml] = '\0';
    /* Remove ".base_layer" components (nested PEFT wrappers). */
    for (char *p; (p = strstr(pn, ".base_layer")) != NULL;) {
        char after = p[11];
        if (after != '\0' && after != '.') {
            free(pn);
            return TSAFE_E_UNSUPPORTED;
        }
        memmove(p, p + 11, strlen(p + 11) + 1);
        out->depth++;
    }
    if (pn[0] == '\0' || pn[0] == '.') {
        free(pn);
        return TSAFE_E_UNSUPPORTED;
    }
    out->peft_name = pn;
    out->canonical = strdup(tsafe_peft_strip_prefixes(pn));
    if (!out->canonical) {
        tsafe_peft_key_clear(out);
        return TSAFE_E_NOMEM;
    }
    out->fused = strcmp(out->canonical, "experts") == 0 ||
                 ends_with(out->canonical, ".experts");
    if (out->depth && !out->fused) {
        tsafe_peft_key_clear(out);
        return TSAFE_E_UNSUPPORTED;
    }
    return TSAFE_OK;
}
