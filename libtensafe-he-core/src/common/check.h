/* Internal error-path macros: keep error handling flat. TSAFE_TRY and
 * TSAFE_CHECK jump to a local `fail:` label with `st` set, where the
 * function frees what it allocated. */
#ifndef TSAFE_CHECK_H
#define TSAFE_CHECK_H

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

#endif
