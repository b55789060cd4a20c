/* Element-wise vector operations mod q (scalar, IFMA where it pays). */
#include "ring.h"

#include "ifma.h"

/* Inputs are reduced (< q) as everywhere in this layer; the IFMA kernels
 * rely on it (< 2^52). */
static inline int ifma_ok(uint64_t q, size_t n)
{
    return n >= 8 && q < TSAFE_IFMA_MAX_Q && q >= 8 && tsafe_cpu_has_ifma();
}

void tsafe_vec_mul_shoup(uint64_t *out, const uint64_t *a, const uint64_t *w,
                         const uint64_t *wp, size_t n, uint64_t q)
{
    if (ifma_ok(q, n)) {
        tsafe_ifma_vec_mul_shoup(out, a, w, wp, n, q);
        return;
    }
    for (size_t k = 0; k < n; k++)
        out[k] = tsafe_mul_shoup(a[k], w[k], wp[k], q);
}

void tsafe_vec_mul(uint64_t *out, const uint64_t *a, const uint64_t *b,
                   size_t n, const tsafe_modulus *m)
{
    if (ifma_ok(m->q, n)) {
        tsafe_ifma_vec_mul(out, a, b, n, m, 0);
        return;
    }
    for (size_t k = 0; k < n; k++)
        out[k] = tsafe_mul_mod(a[k], b[k], m);
}

void tsafe_vec_mul_add(uint64_t *out, const uint64_t *a, const uint64_t *b,
                       size_t n, const tsafe_modulus *m)
{
    if (ifma_ok(m->q, n)) {
        tsafe_ifma_vec_mul(out, a, b, n, m, 1);
        return;
    }
    const uint64_t q = m->q;
    for (size_t k = 0; k < n; k++)
        out[k] = tsafe_add_mod(out[k], tsafe_mul_mod(a[k], b[k], m), q);
}

void tsafe_vec_add(uint64_t *out, const uint64_t *a, const uint64_t *b,
                   size_t n, uint64_t q)
{
    for (size_t k = 0; k < n; k++)
        out[k] = tsafe_add_mod(a[k], b[k], q);
}

void tsafe_vec_sub(uint64_t *out, const uint64_t *a, const uint64_t *b,
                   size_t n, uint64_t q)
{
    for (size_t k = 0; k < n; k++)
        out[k] = tsafe_sub_mod(a[k], b[k], q);
}

void tsafe_vec_neg(uint64_t *out, const uint64_t *a, size_t n, uint64_t q)
{
    for (size_t k = 0; k < n; k++)
        out[k] = tsafe_neg_mod(a[k], q);
}

void tsafe_vec_mul_scalar(uint64_t *out, const uint64_t *a, uint64_t c,
                          size_t n, uint64_t q)
{
    if (ifma_ok(q, n)) {
        uint64_t cp52 = (uint64_t)(((tsafe_u128)c << 52) / q);
        tsafe_ifma_vec_mul_scalar(out, a, c, cp52, n, q);
        return;
    }
    const uint64_t cp = tsafe_shoup_precompute(c, q);
    for (size_t k = 0; k < n; k++)
        out[k] = tsafe_mul_shoup(a[k], c, cp, q);
}

void tsafe_vec_shoup_precompute(uint64_t *wp, const uint64_t *w, size_t n,
                                uint64_t q)
{
    for (size_t k = 0; k < n; k++)
        wp[k] = tsafe_shoup_precompute(w[k], q);
}
