/* LLL for the attack suite (tests/test_sealed_adversaries.c) through
 * fplll's library: exact integer basis, proven floating-point Gram-Schmidt,
 * and linearly dependent generating sets handled (their zero vectors come
 * first and are dropped here). Test-only code. */
#include <cstddef>
#include <cstdint>

#include <fplll.h>

#include "lll_fplll.h"

extern "C" int adv_lll(const int64_t *rows, size_t m, size_t n, int64_t *out, size_t *rank)
{
    *rank = 0;
    if (m == 0)
        return 0;
    fplll::ZZ_mat<mpz_t> A((int)m, (int)n);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            A[(int)i][(int)j] = (long)rows[i * n + j];
    if (fplll::lll_reduction(A, 0.99, 0.51) != fplll::RED_SUCCESS)
        return -1;
    size_t r = 0;
    for (size_t i = 0; i < m; i++) {
        bool zero = true;
        for (size_t j = 0; j < n && zero; j++)
            zero = A[(int)i][(int)j].sgn() == 0;
        if (zero)
            continue;
        for (size_t j = 0; j < n; j++) {
            mpz_t &z = A[(int)i][(int)j].get_data();
            if (!mpz_fits_slong_p(z))
                return -1;
            out[r * n + j] = (int64_t)mpz_get_si(z);
        }
        r++;
    }
    *rank = r;
    return 0;
}
