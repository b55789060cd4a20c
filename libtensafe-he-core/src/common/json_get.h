/* Typed reads of jansson values (internal; header-only, so only the
 * libraries and the tool that link jansson include it, never the core's
 * own files). The predicates check a value and leave the status to the
 * caller, whose format decides it (a package's manifest says
 * TSAFE_E_FORMAT, a model config TSAFE_E_JSON / TSAFE_E_PARAMS). */
#ifndef TSAFE_JSON_GET_H
#define TSAFE_JSON_GET_H

#include <math.h>
#include <stdint.h>

#include <jansson.h>

#include "tensafe/status.h"

/* o[key], with JSON null read as absent: NULL. Borrowed from o. */
static inline json_t *tsafe_json_member(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

/* 1 and *out when v is an integer in [lo, hi], else 0 (*out untouched). */
static inline int tsafe_json_int_in(const json_t *v, json_int_t lo, json_int_t hi,
                                    json_int_t *out)
{
    if (!json_is_integer(v))
        return 0;
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

/* 1 and *out when v is a finite number (integer or real), else 0. */
static inline int tsafe_json_finite(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return 0;
    double d = json_number_value(v);
    if (!isfinite(d))
        return 0;
    *out = d;
    return 1;
}

/* 1 and *out (0 or 1) when v is a boolean, else 0. */
static inline int tsafe_json_bool(const json_t *v, int *out)
{
    if (!json_is_boolean(v))
        return 0;
    *out = json_is_true(v) ? 1 : 0;
    return 1;
}

/* The model-config convention (MoE config.json, step-gate files): an
 * unsigned 32-bit member; absent or null gives dflt unless required
 * (TSAFE_E_MISSING_FIELD); TSAFE_E_JSON when not an integer,
 * TSAFE_E_PARAMS when out of range. */
static inline tsafe_status tsafe_json_u32(const json_t *o, const char *key, int required,
                                          uint32_t dflt, uint32_t *out)
{
    json_t *v = tsafe_json_member(o, key);
    json_int_t x;
    if (v == NULL) {
        if (required)
            return TSAFE_E_MISSING_FIELD;
        *out = dflt;
        return TSAFE_OK;
    }
    if (!json_is_integer(v))
        return TSAFE_E_JSON;
    if (!tsafe_json_int_in(v, 0, (json_int_t)UINT32_MAX, &x))
        return TSAFE_E_PARAMS;
    *out = (uint32_t)x;
    return TSAFE_OK;
}

#endif
