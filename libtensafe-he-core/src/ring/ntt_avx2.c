/* AVX2 kernels for primes below 2^30 (avx2.h says why that size): the
 * negacyclic NTT of ntt.c and the products of vec.c, four 64-bit lanes at
 * a time, each holding a value below 2^32. Same stage order, lazy ranges
 * and final canonical residues as the scalar loops (test_ring_ntt and
 * test_ring_arith compare them bit for bit).
 *
 * Lane arithmetic: vpmuludq multiplies the low halves into 64 bits;
 * "x >= c ? x - c : x" on values below 2^32 is min_epu32(x, x - c) on the
 * low halves (a value below c wraps above it), the high halves staying 0. */
#include "avx2.h"

#include <string.h>

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>

typedef __m256i v4;

static inline v4 ld(const uint64_t *p) { return _mm256_loadu_si256((const v4 *)(const void *)p); }
static inline void st(uint64_t *p, v4 x) { _mm256_storeu_si256((v4 *)(void *)p, x); }

/* x >= c ? x - c : x, for x < 2^32 and c < 2^32 in every lane. */
static inline v4 csub(v4 x, v4 c) { return _mm256_min_epu32(x, _mm256_sub_epi32(x, c)); }

/* x * w mod q in [0, 2q) for x < 2^32; wq = floor(w * 2^32 / q). */
static inline v4 shoup_lazy(v4 x, v4 w, v4 wq, v4 q)
{
    v4 hi = _mm256_srli_epi64(_mm256_mul_epu32(x, wq), 32);
    return _mm256_sub_epi64(_mm256_mul_epu32(x, w), _mm256_mul_epu32(hi, q));
}

/* The 32-bit Shoup quotient from the tables' 64-bit one. */
static inline v4 q32(v4 wp) { return _mm256_srli_epi64(wp, 32); }
static inline v4 bcast_q32(uint64_t wp) { return _mm256_set1_epi64x((long long)(wp >> 32)); }

/* Twiddles (t[i], t[i], t[i+1], t[i+1]). */
static inline v4 pair_dup(const uint64_t *t)
{
    return _mm256_permute4x64_epi64(_mm256_castsi128_si256(
                                        _mm_loadu_si128((const __m128i *)(const void *)t)),
                                    0x50);
}

/* Forward butterfly: x, y in [0, 4q) -> [0, 4q). */
static inline void fwd_bfly(v4 *x, v4 *y, v4 w, v4 wq, v4 q, v4 two_q)
{
    v4 a = csub(*x, two_q);
    v4 b = shoup_lazy(*y, w, wq, q);
    *x = _mm256_add_epi64(a, b);
    *y = _mm256_add_epi64(_mm256_sub_epi64(a, b), two_q);
}

/* Inverse butterfly: u, v in [0, 2q) -> [0, 2q). */
static inline void inv_bfly(v4 *x, v4 *y, v4 w, v4 wq, v4 q, v4 two_q)
{
    v4 u = *x, v = *y;
    *x = csub(_mm256_add_epi64(u, v), two_q);
    *y = shoup_lazy(_mm256_add_epi64(_mm256_sub_epi64(u, v), two_q), w, wq, q);
}

/* One radix-2 stage with gap >= 4. */
static void fwd_stage(uint64_t *a, size_t m, size_t gap, const uint64_t *fw,
                      const uint64_t *fwp, v4 q, v4 two_q)
{
    for (size_t i = 0; i < m; i++) {
        const v4 w = _mm256_set1_epi64x((long long)fw[m + i]), wq = bcast_q32(fwp[m + i]);
        uint64_t *x = a + 2 * i * gap, *y = x + gap;
        for (size_t j = 0; j < gap; j += 4) {
            v4 vx = ld(x + j), vy = ld(y + j);
            fwd_bfly(&vx, &vy, w, wq, q, two_q);
            st(x + j, vx);
            st(y + j, vy);
        }
    }
}

/* The last two stages (gaps 2 and 1) on eight values at a time, reduced
 * to [0, q). */
static void fwd_last_two(uint64_t *a, size_t n, const uint64_t *fw, const uint64_t *fwp,
                         v4 q, v4 two_q)
{
    const size_t m2 = n / 4, m1 = n / 2;
    for (size_t g = 0; g < n / 8; g++) {
        v4 v0 = ld(a + 8 * g), v1 = ld(a + 8 * g + 4);
        /* gap 2: (a0, a1, a4, a5) against (a2, a3, a6, a7) */
        v4 x = _mm256_permute2x128_si256(v0, v1, 0x20);
        v4 y = _mm256_permute2x128_si256(v0, v1, 0x31);
        fwd_bfly(&x, &y, pair_dup(fw + m2 + 2 * g), q32(pair_dup(fwp + m2 + 2 * g)), q, two_q);
        /* gap 1: (a0, a2, a4, a6) against (a1, a3, a5, a7) */
        v4 p = _mm256_unpacklo_epi64(x, y), r = _mm256_unpackhi_epi64(x, y);
        fwd_bfly(&p, &r, ld(fw + m1 + 4 * g), q32(ld(fwp + m1 + 4 * g)), q, two_q);
        p = csub(csub(p, two_q), q);
        r = csub(csub(r, two_q), q);
        v4 lo = _mm256_unpacklo_epi64(p, r), hi = _mm256_unpackhi_epi64(p, r);
        st(a + 8 * g, _mm256_permute2x128_si256(lo, hi, 0x20));
        st(a + 8 * g + 4, _mm256_permute2x128_si256(lo, hi, 0x31));
    }
}

void tsafe_ntt_forward_avx2(const tsafe_ntt_table *t, uint64_t *a)
{
    const size_t n = t->n;
    const v4 q = _mm256_set1_epi64x((long long)t->mod.q);
    const v4 two_q = _mm256_add_epi64(q, q);
    size_t m = 1, gap = n >> 1;
    for (; gap >= 4; m <<= 1, gap >>= 1)
        fwd_stage(a, m, gap, t->fwd, t->fwd_shoup, q, two_q);
    fwd_last_two(a, n, t->fwd, t->fwd_shoup, q, two_q);
}

/* The first two inverse stages (gaps 1 and 2) on eight values at a time. */
static void inv_first_two(uint64_t *a, size_t n, const uint64_t *iw, const uint64_t *iwp,
                          v4 q, v4 two_q)
{
    const size_t m1 = n / 2, m2 = n / 4;
    for (size_t g = 0; g < n / 8; g++) {
        v4 v0 = ld(a + 8 * g), v1 = ld(a + 8 * g + 4);
        v4 lo = _mm256_permute2x128_si256(v0, v1, 0x20);
        v4 hi = _mm256_permute2x128_si256(v0, v1, 0x31);
        /* gap 1: (a0, a2, a4, a6) against (a1, a3, a5, a7) */
        v4 p = _mm256_unpacklo_epi64(lo, hi), r = _mm256_unpackhi_epi64(lo, hi);
        inv_bfly(&p, &r, ld(iw + m1 + 4 * g), q32(ld(iwp + m1 + 4 * g)), q, two_q);
        /* gap 2: (b0, b1, b4, b5) against (b2, b3, b6, b7) */
        v4 x = _mm256_unpacklo_epi64(p, r), y = _mm256_unpackhi_epi64(p, r);
        inv_bfly(&x, &y, pair_dup(iw + m2 + 2 * g), q32(pair_dup(iwp + m2 + 2 * g)), q, two_q);
        st(a + 8 * g, _mm256_permute2x128_si256(x, y, 0x20));
        st(a + 8 * g + 4, _mm256_permute2x128_si256(x, y, 0x31));
    }
}

void tsafe_ntt_inverse_avx2(const tsafe_ntt_table *t, uint64_t *a)
{
    const size_t n = t->n;
    const v4 q = _mm256_set1_epi64x((long long)t->mod.q);
    const v4 two_q = _mm256_add_epi64(q, q);
    const uint64_t *iw = t->inv, *iwp = t->inv_shoup;

    inv_first_two(a, n, iw, iwp, q, two_q);
    for (size_t m = n >> 3, gap = 4; m > 1; m >>= 1, gap <<= 1)
        for (size_t i = 0; i < m; i++) {
            const v4 w = _mm256_set1_epi64x((long long)iw[m + i]), wq = bcast_q32(iwp[m + i]);
            uint64_t *x = a + 2 * i * gap, *y = x + gap;
            for (size_t j = 0; j < gap; j += 4) {
                v4 vx = ld(x + j), vy = ld(y + j);
                inv_bfly(&vx, &vy, w, wq, q, two_q);
                st(x + j, vx);
                st(y + j, vy);
            }
        }
    /* Last stage: (u + v) / N and (u - v) * psi^-bitrev(1) / N. */
    const size_t h = n >> 1;
    const v4 ni = _mm256_set1_epi64x((long long)t->n_inv), niq = bcast_q32(t->n_inv_shoup);
    const v4 wlv = _mm256_set1_epi64x((long long)t->inv_last);
    const v4 wlq = bcast_q32(t->inv_last_shoup);
    for (size_t j = 0; j < h; j += 4) {
        v4 u = ld(a + j), v = ld(a + j + h);
        st(a + j, csub(shoup_lazy(_mm256_add_epi64(u, v), ni, niq, q), q));
        st(a + j + h,
           csub(shoup_lazy(_mm256_add_epi64(_mm256_sub_epi64(u, v), two_q), wlv, wlq, q), q));
    }
}

size_t tsafe_avx2_vec_mac2_shoup(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                                 const uint64_t *const *a1, const uint64_t *const *w,
                                 const uint64_t *const *wp, size_t terms, size_t n,
                                 uint64_t q, int assign)
{
    const v4 vq = _mm256_set1_epi64x((long long)q);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4 s0 = assign ? _mm256_setzero_si256() : ld(out0 + j);
        v4 s1 = assign ? _mm256_setzero_si256() : ld(out1 + j);
        for (size_t k = 0; k < terms; k++) {
            const v4 vw = ld(w[k] + j), vwq = q32(ld(wp[k] + j));
            s0 = csub(_mm256_add_epi64(s0, csub(shoup_lazy(ld(a0[k] + j), vw, vwq, vq), vq)), vq);
            s1 = csub(_mm256_add_epi64(s1, csub(shoup_lazy(ld(a1[k] + j), vw, vwq, vq), vq)), vq);
        }
        st(out0 + j, s0);
        st(out1 + j, s1);
    }
    return j;
}

size_t tsafe_avx2_vec_mul_shoup(uint64_t *out, const uint64_t *a, const uint64_t *w,
                                const uint64_t *wp, size_t n, uint64_t q)
{
    const v4 vq = _mm256_set1_epi64x((long long)q);
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        st(out + j, csub(shoup_lazy(ld(a + j), ld(w + j), q32(ld(wp + j)), vq), vq));
    return j;
}

size_t tsafe_avx2_vec_mul_shoup_add(uint64_t *out, const uint64_t *a, const uint64_t *w,
                                    const uint64_t *wp, size_t n, uint64_t q)
{
    const v4 vq = _mm256_set1_epi64x((long long)q);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4 r = csub(shoup_lazy(ld(a + j), ld(w + j), q32(ld(wp + j)), vq), vq);
        st(out + j, csub(_mm256_add_epi64(ld(out + j), r), vq));
    }
    return j;
}

size_t tsafe_avx2_vec_sub_mul_shoup(uint64_t *out, const uint64_t *b, const uint64_t *a,
                                    const uint64_t *w, const uint64_t *wp, size_t n, uint64_t q)
{
    const v4 vq = _mm256_set1_epi64x((long long)q);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4 r = csub(shoup_lazy(ld(a + j), ld(w + j), q32(ld(wp + j)), vq), vq);
        st(out + j, csub(_mm256_add_epi64(_mm256_sub_epi64(ld(b + j), r), vq), vq));
    }
    return j;
}

size_t tsafe_avx2_vec_from_i64_small(uint64_t *out, const int64_t *v, size_t n, uint64_t q,
                                     int *bad)
{
    const v4 vq = _mm256_set1_epi64x((long long)q), zero = _mm256_setzero_si256();
    const v4 qm1 = _mm256_set1_epi64x((long long)(q - 1));
    v4 over = zero;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4 x = ld((const uint64_t *)(const void *)(v + j));
        v4 neg = _mm256_cmpgt_epi64(zero, x);
        v4 m = _mm256_sub_epi64(_mm256_xor_si256(x, neg), neg); /* |x|; INT64_MIN stays < 0 */
        /* |x| > q - 1, or |x| >= 2^63 (negative as a signed lane) */
        over = _mm256_or_si256(over, _mm256_or_si256(_mm256_cmpgt_epi64(m, qm1),
                                                     _mm256_cmpgt_epi64(zero, m)));
        st(out + j, _mm256_blendv_epi8(m, _mm256_sub_epi64(vq, m), neg));
    }
    *bad = !_mm256_testz_si256(over, over);
    return j;
}

/* Four signed bytes as 64-bit lanes. */
static inline v4 ld_i8(const int8_t *e)
{
    int32_t w;
    memcpy(&w, e, 4);
    return _mm256_cvtepi8_epi64(_mm_cvtsi32_si128(w));
}

/* e mod q in [0, q) for |e| < q: e, or q + e when negative. */
static inline v4 i8_residue(v4 x, v4 vq)
{
    return _mm256_add_epi64(x, _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), x),
                                                vq));
}

size_t tsafe_avx2_vec_from_i8(uint64_t *out, const int8_t *e, size_t n, uint64_t q)
{
    const v4 vq = _mm256_set1_epi64x((long long)q);
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        st(out + j, i8_residue(ld_i8(e + j), vq));
    return j;
}

/* x >= c ? x - c : x on whole 64-bit lanes below 2^63 (csub above works on
 * the 32-bit ones) */
static inline v4 csub64(v4 x, v4 c)
{
    return _mm256_sub_epi64(x, _mm256_andnot_si256(_mm256_cmpgt_epi64(c, x), c));
}

size_t tsafe_avx2_vec_add_i8(uint64_t *x, const int8_t *e, size_t n, uint64_t q)
{
    const v4 vq = _mm256_set1_epi64x((long long)q);
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        st(x + j, csub64(_mm256_add_epi64(ld(x + j), i8_residue(ld_i8(e + j), vq)), vq));
    return j;
}

#else /* not x86-64 or no -mavx2: never selected (tsafe_cpu_has_avx2() is 0) */

size_t tsafe_avx2_vec_from_i8(uint64_t *out, const int8_t *e, size_t n, uint64_t q)
{
    (void)out; (void)e; (void)n; (void)q;
    return 0;
}

size_t tsafe_avx2_vec_add_i8(uint64_t *x, const int8_t *e, size_t n, uint64_t q)
{
    (void)x; (void)e; (void)n; (void)q;
    return 0;
}

size_t tsafe_avx2_vec_from_i64_small(uint64_t *out, const int64_t *v, size_t n, uint64_t q,
                                     int *bad)
{
    (void)out; (void)v; (void)n; (void)q;
    *bad = 0;
    return 0;
}

void tsafe_ntt_forward_avx2(const tsafe_ntt_table *t, uint64_t *a)
{
    tsafe_ntt_forward_scalar(t, a);
}

void tsafe_ntt_inverse_avx2(const tsafe_ntt_table *t, uint64_t *a)
{
    tsafe_ntt_inverse_scalar(t, a);
}

size_t tsafe_avx2_vec_mac2_shoup(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                                 const uint64_t *const *a1, const uint64_t *const *w,
                                 const uint64_t *const *wp, size_t terms, size_t n,
                                 uint64_t q, int assign)
{
    (void)out0; (void)out1; (void)a0; (void)a1; (void)w; (void)wp;
    (void)terms; (void)n; (void)q; (void)assign;
    return 0;
}

size_t tsafe_avx2_vec_mul_shoup(uint64_t *out, const uint64_t *a, const uint64_t *w,
                                const uint64_t *wp, size_t n, uint64_t q)
{
    (void)out; (void)a; (void)w; (void)wp; (void)n; (void)q;
    return 0;
}

size_t tsafe_avx2_vec_mul_shoup_add(uint64_t *out, const uint64_t *a, const uint64_t *w,
                                    const uint64_t *wp, size_t n, uint64_t q)
{
    (void)out; (void)a; (void)w; (void)wp; (void)n; (void)q;
    return 0;
}

size_t tsafe_avx2_vec_sub_mul_shoup(uint64_t *out, const uint64_t *b, const uint64_t *a,
                                    const uint64_t *w, const uint64_t *wp, size_t n, uint64_t q)
{
    (void)out; (void)b; (void)a; (void)w; (void)wp; (void)n; (void)q;
    return 0;
}

#endif
