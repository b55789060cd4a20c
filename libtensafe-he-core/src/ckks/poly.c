/* RNS polynomial helpers of the CKKS layer: reduction of signed
 * coefficients, per-limb transforms, centred CRT, rescale. */
#include <stdlib.h>

#include "ckks_internal.h"

void tsafe_poly_from_i64(const tsafe_context *c, const int64_t *coeffs,
                         uint32_t level, uint64_t *out)
{
    for (uint32_t i = 0; i <= level; i++) {
        uint64_t q = c->mod[i].q;
        uint64_t *o = tsafe_limb(out, c, i);
        for (size_t k = 0; k < c->n; k++) {
            int64_t v = coeffs[k];
            if (v >= 0) {
                o[k] = (uint64_t)v % q;
            } else {
                uint64_t r = (uint64_t)(-(v + 1)) % q; /* no overflow at INT64_MIN */
                o[k] = q - 1 - r;
            }
        }
    }
}

void tsafe_poly_ntt(const tsafe_context *c, uint64_t *poly, uint32_t level)
{
    for (uint32_t i = 0; i <= level; i++)
        tsafe_ntt_forward(&c->ntt[i], tsafe_limb(poly, c, i));
}

void tsafe_poly_intt(const tsafe_context *c, uint64_t *poly, uint32_t level)
{
    for (uint32_t i = 0; i <= level; i++)
        tsafe_ntt_inverse(&c->ntt[i], tsafe_limb(poly, c, i));
}

/* Garner: x = d0 + q0*(d1 + q1*(d2 + ...)), digits exact mod q_i; the value
 * is negative (x - Q) when x > floor((Q-1)/2), decided on the exact digits;
 * only the final weighted sum is rounded (long double, 64-bit mantissa). */
double tsafe_crt_to_double(const tsafe_context *c, const uint64_t *res,
                           uint32_t level)
{
    const tsafe_crt_level *cl = &c->crt[level];
    if (level == 0) {
        uint64_t q = c->mod[0].q, v = res[0];
        return v > (q - 1) / 2 ? -(double)(q - v) : (double)v;
    }
    uint64_t d[TSAFE_MAX_PRIMES];
    for (uint32_t i = 0; i <= level; i++) {
        const tsafe_modulus *m = &c->mod[i];
        uint64_t v = res[i];
        for (uint32_t j = 0; j < i; j++) {
            v = tsafe_sub_mod(v, d[j] % m->q, m->q);
            v = tsafe_mul_mod(v, cl->inv[i][j], m);
        }
        d[i] = v;
    }
    int negative = 0;
    for (int i = (int)level; i >= 0; i--) {
        if (d[i] != cl->half_digits[i]) {
            negative = d[i] > cl->half_digits[i];
            break;
        }
    }
    long double acc = 0;
    if (!negative) {
        for (int i = (int)level; i >= 0; i--)
            acc += (long double)d[i] * cl->weight[i];
        return (double)acc;
    }
    /* Q - x = (Q - 1 - x) + 1, digit-wise without borrows */
    for (int i = (int)level; i >= 0; i--)
        acc += (long double)(c->mod[i].q - 1 - d[i]) * cl->weight[i];
    return -(double)(acc + 1.0L);
}

/* Drop prime l = level with rounding: out_i = (in_i - [in_l + q_l/2]_i
 * + q_l/2) * q_l^-1. scratch holds 2N words. */
void tsafe_poly_rescale(const tsafe_context *c, const uint64_t *in,
                        uint32_t level, uint64_t *out, uint64_t *scratch)
{
    size_t n = c->n;
    uint64_t ql = c->mod[level].q, half = ql >> 1;
    uint64_t *last = scratch, *tmp = scratch + n;
    const uint64_t *src = tsafe_climb(in, c, level);
    for (size_t k = 0; k < n; k++)
        last[k] = src[k];
    tsafe_ntt_inverse(&c->ntt[level], last);
    for (size_t k = 0; k < n; k++)
        last[k] = tsafe_add_mod(last[k], half, ql);
    for (uint32_t i = 0; i < level; i++) {
        const tsafe_modulus *m = &c->mod[i];
        uint64_t q = m->q, h = c->half_last[level][i];
        for (size_t k = 0; k < n; k++) { /* last[k] < q_l: one Barrett at most */
            uint64_t r = last[k] < q ? last[k] : tsafe_reduce_128(last[k], m);
            tmp[k] = tsafe_sub_mod(r, h, q);
        }
        tsafe_ntt_forward(&c->ntt[i], tmp);
        const uint64_t *a = tsafe_climb(in, c, i);
        uint64_t *o = tsafe_limb(out, c, i);
        uint64_t w = c->qinv_last[level][i], wp = c->qinv_last_shoup[level][i];
        for (size_t k = 0; k < n; k++)
            o[k] = tsafe_mul_shoup(tsafe_sub_mod(a[k], tmp[k], q), w, wp, q);
    }
}
