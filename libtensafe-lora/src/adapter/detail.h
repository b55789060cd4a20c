/* Filling a caller's tsafe_error_info (internal to libtensafe-lora). The
 * innermost failure knows the culprit, so the first detail written wins;
 * outer layers only add one when nothing deeper did. */
#ifndef TSAFE_ADAPTER_DETAIL_H
#define TSAFE_ADAPTER_DETAIL_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"

/* e may be NULL (no-op). Clears status and detail. */
void tsafe_detail_reset(tsafe_error_info *e);

/* Records st in e->status and, when e->detail is still empty, the
 * formatted text (truncated to fit, never mid-character). Returns st, so
 * `return tsafe_detail(e, TSAFE_E_SHAPE, "...", ...)` reads as one step.
 * e may be NULL: then only st is returned. */
tsafe_status tsafe_detail(tsafe_error_info *e, tsafe_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "[d0, d1, ...]" into buf (cap >= 4); "..." when it does not fit. */
const char *tsafe_detail_shape(char *buf, size_t cap, const uint64_t *shape,
                               size_t ndim);

#endif
