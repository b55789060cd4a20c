/* Element-wise vector operations mod q (scalar, IFMA where it pays; where
 * IFMA is missing, AVX2 below 2^30 and, for mac2 and the plain products,
 * AVX2 + FMA doubles below 2^50). */
#include "ring.h"

#include "avx2.h"
#include "ifma.h"

/* Inputs are reduced (< q) as everywhere in this layer; the IFMA kernels
 * rely on it (< 2^52). */
static inline int ifma_ok(uint64_t q, size_t n)
{
    return n >= 8 && q < TSAFE_IFMA_MAX_Q && q >= 8 && tsafe_cpu_has_ifma();
}

/* The AVX2 kernels where IFMA is not taken (avx2.h): 32-bit lanes below
 * 2^30, doubles (AVX2 + FMA) from there to 2^50. */
static inline int avx2_ok(uint64_t q, size_t n)
{
    return n >= 4 && q < TSAFE_AVX2_MAX_Q && !ifma_ok(q, n) && tsafe_cpu_has_avx2();
}

static inline int avx2_fp_ok(uint64_t q, size_t n)
{
    return n >= 4 && q >= TSAFE_AVX2_MAX_Q && q < TSAFE_AVX2_FP_MAX_Q && !ifma_ok(q, n) &&
           tsafe_cpu_has_avx2_fma();
}

void tsafe_vec_mul_shoup(uint64_t *out, const uint64_t *a, const uint64_t *w,
                         const uint64_t *wp, size_t n, uint64_t q)
{
    if (ifma_ok(q, n)) {
        tsafe_ifma_vec_mul_shoup(out, a, w, wp, n, q);
        return;
    }
    size_t k = avx2_ok(q, n) ? tsafe_avx2_vec_mul_shoup(out, a, w, wp, n, q) : 0;
    for (; k < n; k++)
        out[k] = tsafe_mul_shoup(a[k], w[k], wp[k], q);
}

/* Small signed values into residues where IFMA is not taken (any prime
 * of the library: q < 2^62, so x + e stays below 2^63). */
static inline int small_avx2_ok(uint64_t q, size_t n)
{
    return n >= 4 && q < ((uint64_t)1 << 62) && tsafe_cpu_has_avx2();
}

/* Products of two arbitrary residues (no Shoup quotient) in doubles,
 * where IFMA is not taken: any q below 2^50. */
static inline int fp_plain_ok(uint64_t q, size_t n)
{
    return n >= 4 && q < TSAFE_AVX2_FP_MAX_Q && !ifma_ok(q, n) && tsafe_cpu_has_avx2_fma();
}

void tsafe_vec_mul(uint64_t *out, const uint64_t *a, const uint64_t *b,
                   size_t n, const tsafe_modulus *m)
{
    if (ifma_ok(m->q, n)) {
        tsafe_ifma_vec_mul(out, a, b, n, m, 0);
        return;
    }
    size_t k = fp_plain_ok(m->q, n) ? tsafe_avx2_fp_vec_mul(out, a, b, n, m->q, 0) : 0;
    for (; k < n; k++)
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
    size_t k = fp_plain_ok(q, n) ? tsafe_avx2_fp_vec_mul(out, a, b, n, q, 1) : 0;
    for (; k < n; k++)
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

int tsafe_vec_uses_ifma(uint64_t q) { return ifma_ok(q, 8); }

void tsafe_vec_sub_mul_shoup(uint64_t *out, const uint64_t *b, const uint64_t *a,
                             const uint64_t *w, const uint64_t *wp, size_t n,
                             uint64_t q)
{
    if (ifma_ok(q, n)) {
        tsafe_ifma_vec_sub_mul_shoup(out, b, a, w, wp, n, q);
        return;
    }
    size_t k = avx2_ok(q, n) ? tsafe_avx2_vec_sub_mul_shoup(out, b, a, w, wp, n, q) : 0;
    for (; k < n; k++)
        out[k] = tsafe_sub_mod(b[k], tsafe_mul_shoup(a[k], w[k], wp[k], q), q);
}

void tsafe_vec_mul_shoup_add(uint64_t *out, const uint64_t *a, const uint64_t *w,
                             const uint64_t *wp, size_t n, uint64_t q)
{
    if (ifma_ok(q, n)) {
        tsafe_ifma_vec_mul_shoup_add(out, a, w, wp, n, q);
        return;
    }
    size_t k = avx2_ok(q, n) ? tsafe_avx2_vec_mul_shoup_add(out, a, w, wp, n, q) : 0;
    for (; k < n; k++)
        out[k] = tsafe_add_mod(out[k], tsafe_mul_shoup(a[k], w[k], wp[k], q), q);
}

void tsafe_vec_mul_shoup_add2(uint64_t *out0, uint64_t *out1, const uint64_t *a0,
                              const uint64_t *a1, const uint64_t *w, const uint64_t *wp,
                              size_t n, uint64_t q)
{
    /* one term of the fused product: the same residues on every path */
    const uint64_t *const ta0[1] = {a0}, *const ta1[1] = {a1}, *const tw[1] = {w};
    const uint64_t *const twp[1] = {wp};
    tsafe_vec_mac2_shoup(out0, out1, ta0, ta1, tw, twp, 1, n, q, 0);
}

void tsafe_vec_mac2_shoup(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                          const uint64_t *const *a1, const uint64_t *const *w,
                          const uint64_t *const *wp, size_t terms, size_t n, uint64_t q,
                          int assign)
{
    size_t j = ifma_ok(q, n)   ? tsafe_ifma_vec_mac2_shoup(out0, out1, a0, a1, w, wp, terms, n,
                                                           q, assign)
               : avx2_ok(q, n) ? tsafe_avx2_vec_mac2_shoup(out0, out1, a0, a1, w, wp, terms, n,
                                                           q, assign)
               : avx2_fp_ok(q, n) ? tsafe_avx2_fp_vec_mac2(out0, out1, a0, a1, w, terms, n, q,
                                                           assign)
                               : 0;
    for (; j < n; j++) { /* the scalar path, or the vector path's tail */
        uint64_t s0 = assign ? 0 : out0[j], s1 = assign ? 0 : out1[j];
        for (size_t k = 0; k < terms; k++) {
            s0 = tsafe_add_mod(s0, tsafe_mul_shoup(a0[k][j], w[k][j], wp[k][j], q), q);
            s1 = tsafe_add_mod(s1, tsafe_mul_shoup(a1[k][j], w[k][j], wp[k][j], q), q);
        }
        out0[j] = s0;
        out1[j] = s1;
    }
}

void tsafe_switch_consts_init(tsafe_switch_consts *k, const tsafe_modulus *mi,
                              const tsafe_modulus *ml)
{
    k->qi = mi->q;
    k->ql = ml->q;
    k->h = (ml->q - 1) / 2;
    k->hi = k->h % mi->q;
    k->inv = tsafe_inv_mod(ml->q % mi->q, mi);
    k->inv_shoup = tsafe_shoup_precompute(k->inv, mi->q);
    k->one_shoup = tsafe_shoup_precompute(1, mi->q);
}

void tsafe_vec_mod_switch(uint64_t *out, const uint64_t *xi, const uint64_t *xl,
                          size_t n, const tsafe_switch_consts *k)
{
    if (ifma_ok(k->qi, n) && k->ql < TSAFE_IFMA_MAX_Q) {
        tsafe_ifma_vec_mod_switch(out, xi, xl, n, k);
        return;
    }
    for (size_t j = 0; j < n; j++)
        out[j] = tsafe_mod_switch_one(xi[j], xl[j], k);
}

void tsafe_vec_add_i8(uint64_t *x, const int8_t *e, size_t n, uint64_t q)
{
    if (ifma_ok(q, n)) {
        tsafe_ifma_vec_add_i8(x, e, n, q);
        return;
    }
    size_t k = small_avx2_ok(q, n) ? tsafe_avx2_vec_add_i8(x, e, n, q) : 0;
    for (; k < n; k++)
        x[k] = tsafe_add_mod(x[k], e[k] >= 0 ? (uint64_t)e[k] : q - (uint64_t)(-e[k]), q);
}

int tsafe_vec_all_below(const uint64_t *a, size_t n, uint64_t q)
{
    if (n >= 8 && tsafe_cpu_has_ifma())
        return tsafe_ifma_vec_all_below(a, n, q);
    uint64_t over = 0;
    for (size_t k = 0; k < n; k++)
        over |= a[k] >= q;
    return over == 0;
}

void tsafe_vec_from_i8(uint64_t *out, const int8_t *e, size_t n, uint64_t q)
{
    if (ifma_ok(q, n)) {
        tsafe_ifma_vec_from_i8(out, e, n, q);
        return;
    }
    size_t k = small_avx2_ok(q, n) ? tsafe_avx2_vec_from_i8(out, e, n, q) : 0;
    for (; k < n; k++)
        out[k] = e[k] < 0 ? q - (uint64_t)(-e[k]) : (uint64_t)e[k];
}

int tsafe_vec_from_i64_small(uint64_t *out, const int64_t *v, size_t n, uint64_t q)
{
    if (ifma_ok(q, n))
        return tsafe_ifma_vec_from_i64_small(out, v, n, q);
    size_t k = 0;
    if (small_avx2_ok(q, n)) {
        int bad;
        k = tsafe_avx2_vec_from_i64_small(out, v, n, q, &bad);
        if (bad)
            return -1;
    }
    for (; k < n; k++) {
        uint64_t m = v[k] < 0 ? (uint64_t)0 - (uint64_t)v[k] : (uint64_t)v[k];
        if (m >= q)
            return -1;
        out[k] = v[k] < 0 ? q - m : m;
    }
    return 0;
}

void tsafe_vec_shoup_precompute(uint64_t *wp, const uint64_t *w, size_t n,
                                uint64_t q)
{
    for (size_t k = 0; k < n; k++)
        wp[k] = tsafe_shoup_precompute(w[k], q);
}
