/* LLL of a generating set through fplll (tests/adversaries/lll_fplll.cpp).
 * rows: m x n integers (row-major); out: room for m x n; *rank: the
 * number of nonzero reduced rows written to out (a reduced basis of the
 * lattice the rows generate), shortest first. 0 on success, -1 when fplll
 * fails or a reduced entry does not fit in 64 bits. */
#ifndef TSAFE_TEST_LLL_FPLLL_H
#define TSAFE_TEST_LLL_FPLLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
int adv_lll(const int64_t *rows, size_t m, size_t n, int64_t *out, size_t *rank);
#ifdef __cplusplus
}
#endif
#endif
