/* Backend facts other parts of the core rely on (not installed). */
#ifndef TSAFE_BACKEND_INTERNAL_H
#define TSAFE_BACKEND_INTERNAL_H

#include "tensafe/backend_impl.h"

/* 1 when b is this library's CPU backend: host memory, operands stored as
 * the values of all limbs followed by their Shoup quotients. Objects with
 * that layout (BFV plaintexts) may then be borrowed as operands. */
int tsafe_backend_is_core_cpu(const tsafe_backend *b);

#endif
