/* Internal to the four libraries (never installed): error-path macros and
 * checked size arithmetic. TSAFE_TRY and TSAFE_CHECK jump to a local
 * `fail:` label with `st` set, where the function frees what it allocated.
 * The Makefile puts this folder on every library's include path. */
#ifndef TSAFE_CHECK_H
#define TSAFE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"

#define TSAFE_CHECK(cond, code)                                              \
    do {                                                                     \
        if (!(cond)) {                                                       \
            st = (code);                                                     \
            goto fail;                                                       \
        }                                                                    \
    } while (0)

#define TSAFE_TRY(expr)                                                      \
    do {                                                                     \
        st = (expr);                                                         \
        if (st != TSAFE_OK)                                                  \
            goto fail;                                                       \
    } while (0)

/* Early return for argument checks before anything is allocated. */
#define TSAFE_REQUIRE(cond, code)                                            \
    do {                                                                     \
        if (!(cond))                                                         \
            return (code);                                                   \
    } while (0)

/* a * b into *out; returns 0 (and leaves *out alone) on overflow. */
static inline int tsafe_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

#endif
