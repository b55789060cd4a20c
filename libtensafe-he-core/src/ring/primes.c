/* NTT-friendly prime generation and primitive roots of unity. */
#include "ring.h"

#include "tsafe_check.h"

#include <gmp.h>

int tsafe_is_prime(uint64_t q)
{
    if (q < 2)
        return 0;
    mpz_t z;
    mpz_init(z);
    mpz_import(z, 1, -1, sizeof q, 0, 0, &q);
    /* 2 = "definitely prime", 1 = "probably prime" (error < 4^-50). */
    int r = mpz_probab_prime_p(z, 50);
    mpz_clear(z);
    return r > 0;
}

static int already_used(const uint64_t *out, size_t n, uint64_t q)
{
    for (size_t i = 0; i < n; i++)
        if (out[i] == q)
            return 1;
    return 0;
}

/* Candidates are q = k*2N + 1 with 2^(bits-1) < q < 2^bits, searched
 * downwards, so every prime has exactly `bits` bits (as in SEAL's
 * CoeffModulus::Create, which also keeps primes distinct across sizes). */
tsafe_status tsafe_primes_generate(uint32_t log_n, size_t count,
                                   const uint32_t *bits, uint64_t *out)
{
    TSAFE_REQUIRE(count == 0 || (bits && out), TSAFE_E_NULL);
    TSAFE_REQUIRE(log_n >= 1 && log_n <= 17, TSAFE_E_ARG);
    uint64_t two_n = (uint64_t)2 << log_n;
    for (size_t i = 0; i < count; i++) {
        uint32_t b = bits[i];
        TSAFE_REQUIRE(b >= 20 && b <= 61, TSAFE_E_ARG);
        TSAFE_REQUIRE(b > log_n + 2, TSAFE_E_ARG);
        uint64_t top = (uint64_t)1 << b;
        uint64_t low = (uint64_t)1 << (b - 1);
        /* Largest k with k*2N + 1 < 2^b: 2N divides 2^b, so k = 2^b/2N - 1. */
        uint64_t q = top - two_n + 1;
        int found = 0;
        for (; q > low; q -= two_n) {
            if (tsafe_is_prime(q) && !already_used(out, i, q)) {
                found = 1;
                break;
            }
        }
        TSAFE_REQUIRE(found, TSAFE_E_NO_PRIME);
        out[i] = q;
    }
    return TSAFE_OK;
}

/* Any primitive 2N-th root r generates all of them as r^k, k odd. We find
 * one from x^((q-1)/2N) for x = 2, 3, ... and then walk the odd powers,
 * keeping the smallest, so the result does not depend on the search. */
tsafe_status tsafe_primitive_2n_root(uint64_t q, uint32_t log_n,
                                     uint64_t *psi)
{
    TSAFE_REQUIRE(psi != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(log_n >= 1 && log_n <= 17, TSAFE_E_ARG);
    uint64_t two_n = (uint64_t)2 << log_n;
    TSAFE_REQUIRE(q >= 3 && (q >> 62) == 0 && (q - 1) % two_n == 0,
                  TSAFE_E_ARG);
    TSAFE_REQUIRE(tsafe_is_prime(q), TSAFE_E_ARG);
    tsafe_modulus m;
    tsafe_modulus_init(&m, q);
    uint64_t e = (q - 1) / two_n;
    uint64_t n = two_n / 2;
    uint64_t r = 0;
    for (uint64_t x = 2; x < q; x++) {
        uint64_t c = tsafe_pow_mod(x, e, &m);
        /* c has order dividing 2N; primitive iff c^N == -1. */
        if (tsafe_pow_mod(c, n, &m) == q - 1) {
            r = c;
            break;
        }
    }
    TSAFE_REQUIRE(r != 0, TSAFE_E_ARG);
    uint64_t r2 = tsafe_mul_mod(r, r, &m);
    uint64_t best = r, cur = r;
    for (uint64_t k = 1; k < n; k++) {
        cur = tsafe_mul_mod(cur, r2, &m);
        if (cur < best)
            best = cur;
    }
    *psi = best;
    return TSAFE_OK;
}
