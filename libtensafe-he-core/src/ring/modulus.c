/* Word-size modular arithmetic: Barrett constants, 128-bit reduction,
 * exponentiation and inversion. */
#include "ring.h"

void tsafe_modulus_init(tsafe_modulus *m, uint64_t q)
{
    /* floor(2^128 / q) == floor((2^128 - 1) / q) unless q divides 2^128,
     * i.e. unless q is a power of two. */
    tsafe_u128 all = ~(tsafe_u128)0;
    tsafe_u128 mu = all / q;
    if (all % q == q - 1)
        mu++;
    m->q = q;
    m->bits = q ? (uint32_t)(64 - __builtin_clzll(q)) : 0;
    m->barrett_hi = (uint64_t)(mu >> 64);
    m->barrett_lo = (uint64_t)mu;
}

/* Bound. Write x = x1*2^64 + x0 and mu = floor(2^128/q) = 2^128/q - e with
 * 0 <= e < 1. We compute the exact e_q = floor(x*mu / 2^128) (all partial
 * products and carries included), so
 *     x/q - 1 < x/q - x*e/2^128 = x*mu/2^128,  hence  e_q >= floor(x/q) - 1,
 * and e_q <= floor(x/q). The remainder r = x - e_q*q therefore lies in
 * [0, 2q): one conditional subtraction finishes (the header's "at most 2
 * below" is the looser bound of the carry-dropping variant). x < q*2^64
 * keeps floor(x/q) < 2^64, so e_q and r fit a word (2q < 2^64 for q < 2^63). */
uint64_t tsafe_reduce_128(tsafe_u128 x, const tsafe_modulus *m)
{
    uint64_t x0 = (uint64_t)x, x1 = (uint64_t)(x >> 64);
    uint64_t m0 = m->barrett_lo, m1 = m->barrett_hi;

    uint64_t c0 = (uint64_t)(((tsafe_u128)x0 * m0) >> 64);
    tsafe_u128 mid = (tsafe_u128)x0 * m1 + c0;      /* < 2^128, no overflow */
    tsafe_u128 p = (tsafe_u128)x1 * m0;
    /* The middle sum may carry out of bit 128; that carry weighs 2^64 in
     * the quotient, which only matters modulo 2^64 where it vanishes. */
    tsafe_u128 s = mid + p;
    uint64_t quot = x1 * m1 + (uint64_t)(s >> 64);
    uint64_t r = x0 - quot * m->q;
    return r >= m->q ? r - m->q : r;
}

uint64_t tsafe_pow_mod(uint64_t base, uint64_t exp, const tsafe_modulus *m)
{
    uint64_t q = m->q;
    if (q == 1)
        return 0;
    uint64_t r = 1;
    uint64_t b = base >= q ? base % q : base;
    while (exp) {
        if (exp & 1)
            r = tsafe_mul_mod(r, b, m);
        b = tsafe_mul_mod(b, b, m);
        exp >>= 1;
    }
    return r;
}

/* Extended Euclid on (a mod q, q); returns 0 when gcd != 1 (a == 0 mod q). */
uint64_t tsafe_inv_mod(uint64_t a, const tsafe_modulus *m)
{
    uint64_t q = m->q;
    uint64_t r0 = q, r1 = a % q;
    /* Coefficients kept as values mod q to stay unsigned. */
    uint64_t t0 = 0, t1 = 1;
    if (r1 == 0)
        return 0;
    while (r1 != 0) {
        uint64_t k = r0 / r1;
        uint64_t r2 = r0 - k * r1;
        uint64_t t2 = tsafe_sub_mod(t0, tsafe_mul_mod(k % q, t1, m), q);
        r0 = r1;
        r1 = r2;
        t0 = t1;
        t1 = t2;
    }
    return r0 == 1 ? t0 : 0;
}
