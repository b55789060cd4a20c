/* AVX-512 IFMA path (8 x 52-bit lanes) of the NTT and element-wise ops.
 * Compiled with -mavx512f/vl/ifma/dq/bw; only called after
 * tsafe_cpu_has_ifma() and for q < 2^50.
 *
 * Shoup with beta = 2^52: for x < 2^52 and w' = floor(w * 2^52 / q),
 * Q = hi52(x * w') and r = lo52(x*w) - lo52(Q*q) mod 2^52 lies in [0, 2q)
 * (2q < 2^52, so the mod-2^52 difference is the true one). Butterflies keep
 * the same lazy ranges as the scalar path ([0, 4q) < 2^52 forward, [0, 2q)
 * inverse) and end fully reduced, so both paths are bit-identical. */
#include <immintrin.h>

#include "ifma.h"

#define MASK52 ((1ULL << 52) - 1)

typedef struct {
    __m512i q, two_q, negq, mask;
} vconst;

static inline vconst make_const(uint64_t q)
{
    vconst c;
    c.q = _mm512_set1_epi64((long long)q);
    c.two_q = _mm512_set1_epi64((long long)(2 * q));
    c.negq = _mm512_set1_epi64((long long)((1ULL << 52) - q));
    c.mask = _mm512_set1_epi64((long long)MASK52);
    return c;
}

/* v - m if v >= m, else v (the wrapped difference is larger). */
static inline __m512i csub(__m512i v, __m512i m)
{
    return _mm512_min_epu64(v, _mm512_sub_epi64(v, m));
}

/* x * w mod q in [0, 2q) for x < 2^52. */
static inline __m512i mul_shoup52(__m512i x, __m512i w, __m512i wp,
                                  const vconst *c)
{
    __m512i zero = _mm512_setzero_si512();
    __m512i qt = _mm512_madd52hi_epu64(zero, x, wp);
    __m512i r = _mm512_madd52lo_epu64(zero, x, w);
    r = _mm512_madd52lo_epu64(r, qt, c->negq);
    return _mm512_and_si512(r, c->mask);
}

static inline void fwd_bfly(__m512i *x, __m512i *y, __m512i w, __m512i wp,
                            const vconst *c)
{
    __m512i a = csub(*x, c->two_q);
    __m512i b = mul_shoup52(*y, w, wp, c);
    *x = _mm512_add_epi64(a, b);
    *y = _mm512_add_epi64(_mm512_sub_epi64(a, b), c->two_q);
}

static inline void inv_bfly(__m512i *x, __m512i *y, __m512i w, __m512i wp,
                            const vconst *c)
{
    __m512i u = *x, v = *y;
    *x = csub(_mm512_add_epi64(u, v), c->two_q);
    *y = mul_shoup52(_mm512_add_epi64(_mm512_sub_epi64(u, v), c->two_q), w,
                     wp, c);
}

#define LD(p) _mm512_loadu_si512((const void *)(p))
#define ST(p, v) _mm512_storeu_si512((void *)(p), (v))
#define IDX(a, b, c_, d, e, f, g, h) _mm512_set_epi64(h, g, f, e, d, c_, b, a)

/* Broadcast patterns for twiddles of the gap-4 and gap-2 stages. */
static inline __m512i bcast2(const uint64_t *p)
{
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
    return _mm512_permutexvar_epi64(IDX(0, 0, 0, 0, 1, 1, 1, 1), v);
}

static inline __m512i bcast4(const uint64_t *p)
{
    __m512i v = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_permutexvar_epi64(IDX(0, 0, 1, 1, 2, 2, 3, 3), v);
}

void tsafe_ntt_forward_ifma(const tsafe_ntt_table *t, uint64_t *a)
{
    const tsafe_ntt_ifma *x52 = (const tsafe_ntt_ifma *)t->ifma;
    const size_t n = t->n;
    const uint64_t *fw = t->fwd, *fwp = x52->fwd52;
    const vconst c = make_const(t->mod.q);
    size_t m = 1, gap = n >> 1;

    /* Strides of at least 8: whole vectors share one twiddle. An odd
     * number of such stages starts with one radix-2 pass; the rest go two
     * stages at a time (gaps g, g/2) on four registers. */
    if ((t->log_n - 3) & 1) {
        const __m512i w = _mm512_set1_epi64((long long)fw[1]);
        const __m512i wp = _mm512_set1_epi64((long long)fwp[1]);
        for (size_t j = 0; j < gap; j += 8) {
            __m512i vx = LD(a + j), vy = LD(a + gap + j);
            fwd_bfly(&vx, &vy, w, wp, &c);
            ST(a + j, vx);
            ST(a + gap + j, vy);
        }
        m = 2;
        gap >>= 1;
    }
    for (; gap >= 16; m <<= 2, gap >>= 2) {
        const size_t h = gap >> 1;
        for (size_t i = 0; i < m; i++) {
            const __m512i w1 = _mm512_set1_epi64((long long)fw[m + i]);
            const __m512i w1p = _mm512_set1_epi64((long long)fwp[m + i]);
            const __m512i w2 = _mm512_set1_epi64((long long)fw[2 * m + 2 * i]);
            const __m512i w2p = _mm512_set1_epi64((long long)fwp[2 * m + 2 * i]);
            const __m512i w3 = _mm512_set1_epi64((long long)fw[2 * m + 2 * i + 1]);
            const __m512i w3p = _mm512_set1_epi64((long long)fwp[2 * m + 2 * i + 1]);
            uint64_t *p = a + 2 * i * gap;
            for (size_t j = 0; j < h; j += 8) {
                __m512i x0 = LD(p + j), x1 = LD(p + j + h);
                __m512i x2 = LD(p + j + gap), x3 = LD(p + j + gap + h);
                fwd_bfly(&x0, &x2, w1, w1p, &c);
                fwd_bfly(&x1, &x3, w1, w1p, &c);
                fwd_bfly(&x0, &x1, w2, w2p, &c);
                fwd_bfly(&x2, &x3, w3, w3p, &c);
                ST(p + j, x0);
                ST(p + j + h, x1);
                ST(p + j + gap, x2);
                ST(p + j + gap + h, x3);
            }
        }
    }

    /* Gaps 4, 2, 1 on 16-element chunks held in two registers: permutes
     * bring the butterfly partners into (X, Y) lanes stage by stage. */
    const size_t m4 = n >> 3, m2 = n >> 2, m1 = n >> 1;
    for (size_t k = 0; k < n / 16; k++) {
        uint64_t *p = a + 16 * k;
        __m512i v0 = LD(p), v1 = LD(p + 8);
        /* gap 4: X = elements {0-3, 8-11}, Y = {4-7, 12-15}. */
        __m512i vx = _mm512_permutex2var_epi64(v0, IDX(0, 1, 2, 3, 8, 9, 10, 11), v1);
        __m512i vy = _mm512_permutex2var_epi64(v0, IDX(4, 5, 6, 7, 12, 13, 14, 15), v1);
        fwd_bfly(&vx, &vy, bcast2(fw + m4 + 2 * k), bcast2(fwp + m4 + 2 * k), &c);
        /* gap 2: X = {0,1,4,5,8,9,12,13}, Y = {2,3,6,7,10,11,14,15}. */
        v0 = _mm512_permutex2var_epi64(vx, IDX(0, 1, 8, 9, 4, 5, 12, 13), vy);
        v1 = _mm512_permutex2var_epi64(vx, IDX(2, 3, 10, 11, 6, 7, 14, 15), vy);
        fwd_bfly(&v0, &v1, bcast4(fw + m2 + 4 * k), bcast4(fwp + m2 + 4 * k), &c);
        /* gap 1: X = even elements, Y = odd elements. */
        vx = _mm512_permutex2var_epi64(v0, IDX(0, 8, 2, 10, 4, 12, 6, 14), v1);
        vy = _mm512_permutex2var_epi64(v0, IDX(1, 9, 3, 11, 5, 13, 7, 15), v1);
        fwd_bfly(&vx, &vy, LD(fw + m1 + 8 * k), LD(fwp + m1 + 8 * k), &c);
        /* Back to natural order, fully reduced. */
        v0 = _mm512_permutex2var_epi64(vx, IDX(0, 8, 1, 9, 2, 10, 3, 11), vy);
        v1 = _mm512_permutex2var_epi64(vx, IDX(4, 12, 5, 13, 6, 14, 7, 15), vy);
        v0 = csub(csub(v0, c.two_q), c.q);
        v1 = csub(csub(v1, c.two_q), c.q);
        ST(p, v0);
        ST(p + 8, v1);
    }
}

/* Inverse stages at gaps 1, 2, 4, in registers (mirror of the forward
 * path). */
static inline void inv_gaps_1_2_4(uint64_t *a, size_t n, const uint64_t *iw,
                                  const uint64_t *iwp, const vconst *cp)
{
    const vconst c = *cp;
    const size_t m4 = n >> 3, m2 = n >> 2, m1 = n >> 1;
    for (size_t k = 0; k < n / 16; k++) {
        uint64_t *p = a + 16 * k;
        __m512i v0 = LD(p), v1 = LD(p + 8);
        __m512i vx = _mm512_permutex2var_epi64(v0, IDX(0, 2, 4, 6, 8, 10, 12, 14), v1);
        __m512i vy = _mm512_permutex2var_epi64(v0, IDX(1, 3, 5, 7, 9, 11, 13, 15), v1);
        inv_bfly(&vx, &vy, LD(iw + m1 + 8 * k), LD(iwp + m1 + 8 * k), &c);
        v0 = _mm512_permutex2var_epi64(vx, IDX(0, 8, 2, 10, 4, 12, 6, 14), vy);
        v1 = _mm512_permutex2var_epi64(vx, IDX(1, 9, 3, 11, 5, 13, 7, 15), vy);
        inv_bfly(&v0, &v1, bcast4(iw + m2 + 4 * k), bcast4(iwp + m2 + 4 * k), &c);
        vx = _mm512_permutex2var_epi64(v0, IDX(0, 1, 8, 9, 4, 5, 12, 13), v1);
        vy = _mm512_permutex2var_epi64(v0, IDX(2, 3, 10, 11, 6, 7, 14, 15), v1);
        inv_bfly(&vx, &vy, bcast2(iw + m4 + 2 * k), bcast2(iwp + m4 + 2 * k), &c);
        v0 = _mm512_permutex2var_epi64(vx, IDX(0, 1, 2, 3, 8, 9, 10, 11), vy);
        v1 = _mm512_permutex2var_epi64(vx, IDX(4, 5, 6, 7, 12, 13, 14, 15), vy);
        ST(p, v0);
        ST(p + 8, v1);
    }
}

/* Inverse stages at gaps 8 .. N/4: two at a time (gaps g, 2g) on four
 * registers, a radix-2 pass when one is left over. */
static inline void inv_gaps_8_up(uint64_t *a, size_t n, const uint64_t *iw,
                                 const uint64_t *iwp, const vconst *cp)
{
    const vconst c = *cp;
    size_t m = n >> 4, gap = 8;
    for (; m >= 4; m >>= 2, gap <<= 2) {
        for (size_t i = 0; i < m / 2; i++) {
            const __m512i w0 = _mm512_set1_epi64((long long)iw[m + 2 * i]);
            const __m512i w0p = _mm512_set1_epi64((long long)iwp[m + 2 * i]);
            const __m512i w1 = _mm512_set1_epi64((long long)iw[m + 2 * i + 1]);
            const __m512i w1p = _mm512_set1_epi64((long long)iwp[m + 2 * i + 1]);
            const __m512i w2 = _mm512_set1_epi64((long long)iw[m / 2 + i]);
            const __m512i w2p = _mm512_set1_epi64((long long)iwp[m / 2 + i]);
            uint64_t *p = a + 4 * i * gap;
            for (size_t j = 0; j < gap; j += 8) {
                __m512i x0 = LD(p + j), x1 = LD(p + j + gap);
                __m512i x2 = LD(p + j + 2 * gap), x3 = LD(p + j + 3 * gap);
                inv_bfly(&x0, &x1, w0, w0p, &c);
                inv_bfly(&x2, &x3, w1, w1p, &c);
                inv_bfly(&x0, &x2, w2, w2p, &c);
                inv_bfly(&x1, &x3, w2, w2p, &c);
                ST(p + j, x0);
                ST(p + j + gap, x1);
                ST(p + j + 2 * gap, x2);
                ST(p + j + 3 * gap, x3);
            }
        }
    }
    if (m == 2) {
        for (size_t i = 0; i < 2; i++) {
            const __m512i w = _mm512_set1_epi64((long long)iw[2 + i]);
            const __m512i wp = _mm512_set1_epi64((long long)iwp[2 + i]);
            uint64_t *px = a + 2 * i * gap, *py = px + gap;
            for (size_t j = 0; j < gap; j += 8) {
                __m512i vx = LD(px + j), vy = LD(py + j);
                inv_bfly(&vx, &vy, w, wp, &c);
                ST(px + j, vx);
                ST(py + j, vy);
            }
        }
    }
}

/* The last inverse stage with N^-1 folded in, fully reduced. */
static inline void inv_last(uint64_t *a, const tsafe_ntt_table *t, const tsafe_ntt_ifma *x52,
                            const vconst *cp)
{
    const vconst c = *cp;
    const size_t n = t->n;
    const size_t h = n >> 1;
    const __m512i ni = _mm512_set1_epi64((long long)t->n_inv);
    const __m512i nip = _mm512_set1_epi64((long long)x52->n_inv52);
    const __m512i wl = _mm512_set1_epi64((long long)x52->inv_last);
    const __m512i wlp = _mm512_set1_epi64((long long)x52->inv_last52);
    for (size_t j = 0; j < h; j += 8) {
        __m512i u = LD(a + j), v = LD(a + h + j);
        __m512i s = _mm512_add_epi64(u, v);
        __m512i d = _mm512_add_epi64(_mm512_sub_epi64(u, v), c.two_q);
        ST(a + j, csub(mul_shoup52(s, ni, nip, &c), c.q));
        ST(a + h + j, csub(mul_shoup52(d, wl, wlp, &c), c.q));
    }
}

void tsafe_ntt_inverse_ifma(const tsafe_ntt_table *t, uint64_t *a)
{
    const tsafe_ntt_ifma *x52 = (const tsafe_ntt_ifma *)t->ifma;
    const vconst c = make_const(t->mod.q);
    inv_gaps_1_2_4(a, t->n, t->inv, x52->inv52, &c);
    inv_gaps_8_up(a, t->n, t->inv, x52->inv52, &c);
    inv_last(a, t, x52, &c);
}

/* ------------------------------------------------------- element-wise */

void tsafe_ifma_vec_mul_shoup(uint64_t *out, const uint64_t *a,
                              const uint64_t *w, const uint64_t *wp,
                              size_t n, uint64_t q)
{
    const vconst c = make_const(q);
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        /* floor(w 2^52 / q) == floor(w 2^64 / q) >> 12. */
        __m512i vwp = _mm512_srli_epi64(LD(wp + k), 12);
        ST(out + k, csub(mul_shoup52(LD(a + k), LD(w + k), vwp, &c), c.q));
    }
    for (; k < n; k++)
        out[k] = tsafe_mul_shoup(a[k], w[k], wp[k], q);
}

void tsafe_ifma_vec_mul_shoup_add(uint64_t *out, const uint64_t *a,
                                  const uint64_t *w, const uint64_t *wp,
                                  size_t n, uint64_t q)
{
    const vconst c = make_const(q);
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512i vwp = _mm512_srli_epi64(LD(wp + k), 12);
        __m512i p = csub(mul_shoup52(LD(a + k), LD(w + k), vwp, &c), c.q);
        ST(out + k, csub(_mm512_add_epi64(LD(out + k), p), c.q));
    }
    for (; k < n; k++)
        out[k] = tsafe_add_mod(out[k], tsafe_mul_shoup(a[k], w[k], wp[k], q), q);
}

/* Coefficients [0, n rounded down to 8) of tsafe_vec_mac2_shoup; returns
 * where it stopped (the caller's scalar loop does the rest). */
size_t tsafe_ifma_vec_mac2_shoup(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                                 const uint64_t *const *a1, const uint64_t *const *w,
                                 const uint64_t *const *wp, size_t terms, size_t n,
                                 uint64_t q, int assign)
{
    const vconst c = make_const(q);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m512i s0 = assign ? _mm512_setzero_si512() : LD(out0 + j);
        __m512i s1 = assign ? _mm512_setzero_si512() : LD(out1 + j);
        for (size_t k = 0; k < terms; k++) {
            __m512i vw = LD(w[k] + j), vwp = _mm512_srli_epi64(LD(wp[k] + j), 12);
            __m512i p0 = csub(mul_shoup52(LD(a0[k] + j), vw, vwp, &c), c.q);
            __m512i p1 = csub(mul_shoup52(LD(a1[k] + j), vw, vwp, &c), c.q);
            s0 = csub(_mm512_add_epi64(s0, p0), c.q);
            s1 = csub(_mm512_add_epi64(s1, p1), c.q);
        }
        ST(out0 + j, s0);
        ST(out1 + j, s1);
    }
    return j;
}

/* The scalar formula of tsafe_vec_mod_switch lane by lane: every value
 * below 2^50, so 52-bit Shoup products are exact. */
void tsafe_ifma_vec_mod_switch(uint64_t *out, const uint64_t *xi,
                               const uint64_t *xl, size_t n,
                               const tsafe_switch_consts *kk)
{
    const vconst ci = make_const(kk->qi);
    const __m512i ql = _mm512_set1_epi64((long long)kk->ql);
    const __m512i h = _mm512_set1_epi64((long long)kk->h);
    const __m512i hi = _mm512_set1_epi64((long long)kk->hi);
    const __m512i one = _mm512_set1_epi64(1);
    const __m512i one52 = _mm512_set1_epi64((long long)(kk->one_shoup >> 12));
    const __m512i inv = _mm512_set1_epi64((long long)kk->inv);
    const __m512i inv52 = _mm512_set1_epi64((long long)(kk->inv_shoup >> 12));
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512i yl = csub(_mm512_add_epi64(LD(xl + k), h), ql);
        __m512i ylm = csub(mul_shoup52(yl, one, one52, &ci), ci.q);
        __m512i yi = csub(_mm512_add_epi64(LD(xi + k), hi), ci.q);
        __m512i d = csub(_mm512_sub_epi64(_mm512_add_epi64(yi, ci.q), ylm), ci.q);
        ST(out + k, csub(mul_shoup52(d, inv, inv52, &ci), ci.q));
    }
    for (; k < n; k++)
        out[k] = tsafe_mod_switch_one(xi[k], xl[k], kk);
}

void tsafe_ifma_vec_sub_mul_shoup(uint64_t *out, const uint64_t *b,
                                  const uint64_t *a, const uint64_t *w,
                                  const uint64_t *wp, size_t n, uint64_t q)
{
    const vconst c = make_const(q);
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512i vwp = _mm512_srli_epi64(LD(wp + k), 12);
        __m512i p = csub(mul_shoup52(LD(a + k), LD(w + k), vwp, &c), c.q);
        /* b - p + q in (0, 2q) */
        ST(out + k, csub(_mm512_sub_epi64(_mm512_add_epi64(LD(b + k), c.q), p), c.q));
    }
    for (; k < n; k++)
        out[k] = tsafe_sub_mod(b[k], tsafe_mul_shoup(a[k], w[k], wp[k], q), q);
}

/* x + e mod q for small signed e (|e| < q): the sign-extended sum, plus q
 * where it went negative, minus q where it reached q. */
void tsafe_ifma_vec_add_i8(uint64_t *x, const int8_t *e, size_t n, uint64_t q)
{
    const __m512i vq = _mm512_set1_epi64((long long)q), zero = _mm512_setzero_si512();
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512i ev = _mm512_cvtepi8_epi64(_mm_loadl_epi64((const __m128i *)(e + k)));
        __m512i v = _mm512_add_epi64(LD(x + k), ev);
        v = _mm512_mask_add_epi64(v, _mm512_cmplt_epi64_mask(v, zero), v, vq);
        ST(x + k, csub(v, vq));
    }
    for (; k < n; k++) {
        int64_t v = (int64_t)x[k] + e[k];
        x[k] = (uint64_t)(v < 0 ? v + (int64_t)q : v >= (int64_t)q ? v - (int64_t)q : v);
    }
}

int tsafe_ifma_vec_all_below(const uint64_t *a, size_t n, uint64_t q)
{
    const __m512i vq = _mm512_set1_epi64((long long)q);
    __mmask8 over = 0;
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        over |= _mm512_cmpge_epu64_mask(LD(a + k), vq);
    for (; k < n; k++)
        over |= a[k] >= q;
    return over == 0;
}

void tsafe_ifma_vec_from_i8(uint64_t *out, const int8_t *e, size_t n, uint64_t q)
{
    const __m512i vq = _mm512_set1_epi64((long long)q), zero = _mm512_setzero_si512();
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512i v = _mm512_cvtepi8_epi64(_mm_loadl_epi64((const __m128i *)(e + k)));
        ST(out + k, _mm512_mask_add_epi64(v, _mm512_cmplt_epi64_mask(v, zero), v, vq));
    }
    for (; k < n; k++)
        out[k] = e[k] < 0 ? q - (uint64_t)(-e[k]) : (uint64_t)e[k];
}

int tsafe_ifma_vec_from_i64_small(uint64_t *out, const int64_t *v, size_t n, uint64_t q)
{
    const __m512i vq = _mm512_set1_epi64((long long)q), zero = _mm512_setzero_si512();
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512i x = _mm512_loadu_si512((const void *)(v + k));
        if (_mm512_cmpge_epu64_mask(_mm512_abs_epi64(x), vq))
            return -1;
        ST(out + k, _mm512_mask_add_epi64(x, _mm512_cmplt_epi64_mask(x, zero), x, vq));
    }
    for (; k < n; k++) {
        uint64_t m = v[k] < 0 ? (uint64_t)0 - (uint64_t)v[k] : (uint64_t)v[k];
        if (m >= q)
            return -1;
        out[k] = v[k] < 0 ? q - m : m;
    }
    return 0;
}

void tsafe_ifma_vec_mul_scalar(uint64_t *out, const uint64_t *a, uint64_t cst,
                               uint64_t cp52, size_t n, uint64_t q)
{
    const vconst c = make_const(q);
    const __m512i w = _mm512_set1_epi64((long long)cst);
    const __m512i wp = _mm512_set1_epi64((long long)cp52);
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        ST(out + k, csub(mul_shoup52(LD(a + k), w, wp, &c), c.q));
    const uint64_t cp = tsafe_shoup_precompute(cst, q);
    for (; k < n; k++)
        out[k] = tsafe_mul_shoup(a[k], cst, cp, q);
}

/* Barrett on 52-bit limbs, q of b <= 50 bits, a, b < q so x = a*b < q^2:
 * xs = floor(x / 2^(b-2)) < 2^52, mu = floor(2^(b+50) / q) < 2^52,
 * qhat = floor(xs * mu / 2^52). Then qhat <= floor(x/q) and
 * qhat > x/q - 1 - 1/2 - 1 (the three floors; x/2^(b+50) < 1 and
 * 2^(b-2)/q <= 1/2), so x - qhat*q lies in [0, 3q): two conditional
 * subtractions. 3q < 2^52 keeps the mod-2^52 difference exact. */
void tsafe_ifma_vec_mul(uint64_t *out, const uint64_t *a, const uint64_t *b,
                        size_t n, const tsafe_modulus *m, int accumulate)
{
    const uint64_t q = m->q;
    const uint32_t bits = m->bits;
    const vconst c = make_const(q);
    const __m512i zero = _mm512_setzero_si512();
    const __m512i mu = _mm512_set1_epi64(
        (long long)(((tsafe_u128)1 << (bits + 50)) / q));
    const __m128i sh_hi = _mm_cvtsi32_si128((int)(54 - bits));
    const __m128i sh_lo = _mm_cvtsi32_si128((int)(bits - 2));
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512i va = LD(a + k), vb = LD(b + k);
        __m512i lo = _mm512_madd52lo_epu64(zero, va, vb);
        __m512i hi = _mm512_madd52hi_epu64(zero, va, vb);
        __m512i xs = _mm512_or_si512(_mm512_sll_epi64(hi, sh_hi),
                                     _mm512_srl_epi64(lo, sh_lo));
        __m512i qh = _mm512_madd52hi_epu64(zero, xs, mu);
        __m512i r = _mm512_and_si512(_mm512_madd52lo_epu64(lo, qh, c.negq),
                                     c.mask);
        r = csub(csub(r, c.two_q), c.q);
        if (accumulate)
            r = csub(_mm512_add_epi64(r, LD(out + k)), c.q);
        ST(out + k, r);
    }
    for (; k < n; k++) {
        uint64_t r = tsafe_mul_mod(a[k], b[k], m);
        out[k] = accumulate ? tsafe_add_mod(out[k], r, q) : r;
    }
}
