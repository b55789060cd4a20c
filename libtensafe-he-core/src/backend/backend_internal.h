/* Backend facts other parts of the core rely on (not installed). */
#ifndef TSAFE_BACKEND_INTERNAL_H
#define TSAFE_BACKEND_INTERNAL_H

#include "tensafe/backend_impl.h"

/* 1 when b is this library's CPU backend: host memory, operands stored as
 * the values of all limbs followed by their Shoup quotients. Objects with
 * that layout (BFV plaintexts) may then be borrowed as operands. */
int tsafe_backend_is_core_cpu(const tsafe_backend *b);

/* An operand buffer of this library's CPU backend over values w and their
 * Shoup quotients wp (n_polys x n_limbs x N each, limb-major) that another
 * object holds: no copy, no recomputation. That object must outlive the
 * buffer and not change while it is used; uploads into it are refused.
 * TSAFE_E_ARG for another backend. */
tsafe_status tsafe_cpu_operand_borrow(tsafe_backend *b, const uint64_t *w,
                                      const uint64_t *wp, size_t n_polys,
                                      uint32_t n_limbs, tsafe_buffer **out);

#endif
