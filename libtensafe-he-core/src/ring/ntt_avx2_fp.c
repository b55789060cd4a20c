/* AVX2 + FMA NTT for primes between 2^30 and 2^50 (avx2.h), in double
 * precision: the values of a transform (below 4q < 2^52) are exact
 * doubles, so the polynomial is converted in place at the start, every
 * stage runs on doubles, and the end converts back to canonical words.
 *
 * x * w mod q for x < 2^52, w < q < 2^50, with the twiddle's w / q
 * precomputed (correctly rounded): e = x * (w / q) is within 1 of the true
 * quotient, so qt = floor(e) leaves r = x w - qt q in (-q, 2q). The
 * product is kept exactly as h + l (h = fl(x w), l = fma(x, w, -h)),
 * t = fma(-qt, q, h) is exact (an integer below 2^52 in magnitude), so
 * r = t + l is exact too; one conditional +q gives Harvey's [0, 2q).
 * Same stage order, lazy ranges and canonical results as ntt.c's scalar
 * loops (test_ring_ntt compares them bit for bit). */
#include "avx2.h"

#include <stdlib.h>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

typedef __m256d vd;

static const double k_magic = 4503599627370496.0; /* 2^52 */

/* Words below 2^52 as exact doubles, and back (2^52's exponent bits). */
static inline vd w2d(__m256i x)
{
    return _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_or_si256(x, _mm256_set1_epi64x(0x4330000000000000ll))),
        _mm256_set1_pd(k_magic));
}

static inline __m256i d2w(vd x)
{
    return _mm256_xor_si256(_mm256_castpd_si256(_mm256_add_pd(x, _mm256_set1_pd(k_magic))),
                            _mm256_set1_epi64x(0x4330000000000000ll));
}

static inline __m256i ldw(const uint64_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
static inline vd ldd(const uint64_t *p) { return _mm256_loadu_pd((const double *)(const void *)p); }
static inline void std_(uint64_t *p, vd x) { _mm256_storeu_pd((double *)(void *)p, x); }

/* A polynomial's words as doubles in place, and back, four at a time. */
static void to_double(uint64_t *a, size_t n)
{
    for (size_t j = 0; j < n; j += 4)
        std_(a + j, w2d(ldw(a + j)));
}

static void to_words(uint64_t *a, size_t n)
{
    for (size_t j = 0; j < n; j += 4)
        _mm256_storeu_si256((__m256i *)(void *)(a + j), d2w(ldd(a + j)));
}

/* x >= c ? x - c : x */
static inline vd csub(vd x, vd c)
{
    return _mm256_sub_pd(x, _mm256_and_pd(_mm256_cmp_pd(x, c, _CMP_GE_OQ), c));
}

/* x w - floor(e) q in [0, 2q), for x w = h + l held exactly and an
 * estimate e within 1 of x w / q (see the top): t = h - qt q and t + l are
 * exact integers in (-q, 2q), and one +q fixes a negative one. */
static inline vd rem_lazy(vd h, vd l, vd e, vd q)
{
    vd qt = _mm256_round_pd(e, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    vd r = _mm256_add_pd(_mm256_fnmadd_pd(qt, q, h), l);
    return _mm256_add_pd(r, _mm256_and_pd(_mm256_cmp_pd(r, _mm256_setzero_pd(), _CMP_LT_OQ), q));
}

/* x * w mod q in [0, 2q) for integer-valued x < 2^52, wq = w / q. */
static inline vd mul_lazy(vd x, vd w, vd wq, vd q)
{
    vd h = _mm256_mul_pd(x, w);
    return rem_lazy(h, _mm256_fmsub_pd(x, w, h), _mm256_mul_pd(x, wq), q);
}

static inline void fwd_bfly(vd *x, vd *y, vd w, vd wq, vd q, vd two_q)
{
    vd a = csub(*x, two_q);
    vd b = mul_lazy(*y, w, wq, q);
    *x = _mm256_add_pd(a, b);
    *y = _mm256_add_pd(_mm256_sub_pd(a, b), two_q);
}

static inline void inv_bfly(vd *x, vd *y, vd w, vd wq, vd q, vd two_q)
{
    vd u = *x, v = *y;
    *x = csub(_mm256_add_pd(u, v), two_q);
    *y = mul_lazy(_mm256_add_pd(_mm256_sub_pd(u, v), two_q), w, wq, q);
}

static inline vd pair_dup(const double *t)
{
    return _mm256_permute4x64_pd(_mm256_castpd128_pd256(_mm_loadu_pd(t)), 0x50);
}

void tsafe_ntt_forward_avx2_fp(const tsafe_ntt_table *t, uint64_t *a)
{
    const tsafe_ntt_fp *f = t->fp;
    const size_t n = t->n;
    const vd q = _mm256_set1_pd((double)t->mod.q), two_q = _mm256_add_pd(q, q);
    to_double(a, n);
    size_t m = 1, gap = n >> 1;
    for (; gap >= 4; m <<= 1, gap >>= 1)
        for (size_t i = 0; i < m; i++) {
            const vd w = _mm256_set1_pd(f->fwd[m + i]), wq = _mm256_set1_pd(f->fwd_q[m + i]);
            uint64_t *x = a + 2 * i * gap, *y = x + gap;
            for (size_t j = 0; j < gap; j += 4) {
                vd vx = ldd(x + j), vy = ldd(y + j);
                fwd_bfly(&vx, &vy, w, wq, q, two_q);
                std_(x + j, vx);
                std_(y + j, vy);
            }
        }
    /* gaps 2 and 1 on eight values at a time, then reduced to [0, q) */
    const size_t m2 = n / 4, m1 = n / 2;
    for (size_t g = 0; g < n / 8; g++) {
        vd v0 = ldd(a + 8 * g), v1 = ldd(a + 8 * g + 4);
        vd x = _mm256_permute2f128_pd(v0, v1, 0x20), y = _mm256_permute2f128_pd(v0, v1, 0x31);
        fwd_bfly(&x, &y, pair_dup(f->fwd + m2 + 2 * g), pair_dup(f->fwd_q + m2 + 2 * g), q,
                 two_q);
        vd p = _mm256_unpacklo_pd(x, y), r = _mm256_unpackhi_pd(x, y);
        fwd_bfly(&p, &r, _mm256_loadu_pd(f->fwd + m1 + 4 * g), _mm256_loadu_pd(f->fwd_q + m1 + 4 * g),
                 q, two_q);
        p = csub(csub(p, two_q), q);
        r = csub(csub(r, two_q), q);
        vd lo = _mm256_unpacklo_pd(p, r), hi = _mm256_unpackhi_pd(p, r);
        std_(a + 8 * g, _mm256_permute2f128_pd(lo, hi, 0x20));
        std_(a + 8 * g + 4, _mm256_permute2f128_pd(lo, hi, 0x31));
    }
    to_words(a, n);
}

void tsafe_ntt_inverse_avx2_fp(const tsafe_ntt_table *t, uint64_t *a)
{
    const tsafe_ntt_fp *f = t->fp;
    const size_t n = t->n;
    const vd q = _mm256_set1_pd((double)t->mod.q), two_q = _mm256_add_pd(q, q);
    to_double(a, n);
    const size_t m1 = n / 2, m2 = n / 4;
    for (size_t g = 0; g < n / 8; g++) { /* gaps 1 and 2 */
        vd v0 = ldd(a + 8 * g), v1 = ldd(a + 8 * g + 4);
        vd lo = _mm256_permute2f128_pd(v0, v1, 0x20), hi = _mm256_permute2f128_pd(v0, v1, 0x31);
        vd p = _mm256_unpacklo_pd(lo, hi), r = _mm256_unpackhi_pd(lo, hi);
        inv_bfly(&p, &r, _mm256_loadu_pd(f->inv + m1 + 4 * g), _mm256_loadu_pd(f->inv_q + m1 + 4 * g),
                 q, two_q);
        vd x = _mm256_unpacklo_pd(p, r), y = _mm256_unpackhi_pd(p, r);
        inv_bfly(&x, &y, pair_dup(f->inv + m2 + 2 * g), pair_dup(f->inv_q + m2 + 2 * g), q, two_q);
        std_(a + 8 * g, _mm256_permute2f128_pd(x, y, 0x20));
        std_(a + 8 * g + 4, _mm256_permute2f128_pd(x, y, 0x31));
    }
    for (size_t m = n >> 3, gap = 4; m > 1; m >>= 1, gap <<= 1)
        for (size_t i = 0; i < m; i++) {
            const vd w = _mm256_set1_pd(f->inv[m + i]), wq = _mm256_set1_pd(f->inv_q[m + i]);
            uint64_t *x = a + 2 * i * gap, *y = x + gap;
            for (size_t j = 0; j < gap; j += 4) {
                vd vx = ldd(x + j), vy = ldd(y + j);
                inv_bfly(&vx, &vy, w, wq, q, two_q);
                std_(x + j, vx);
                std_(y + j, vy);
            }
        }
    /* last stage: (u + v) / N and (u - v) * psi^-bitrev(1) / N, in [0, q) */
    const size_t h = n >> 1;
    const vd ni = _mm256_set1_pd(f->n_inv), niq = _mm256_set1_pd(f->n_inv_q);
    const vd wl = _mm256_set1_pd(f->last), wlq = _mm256_set1_pd(f->last_q);
    for (size_t j = 0; j < h; j += 4) {
        vd u = ldd(a + j), v = ldd(a + j + h);
        std_(a + j, csub(mul_lazy(_mm256_add_pd(u, v), ni, niq, q), q));
        std_(a + j + h, csub(mul_lazy(_mm256_add_pd(_mm256_sub_pd(u, v), two_q), wl, wlq, q), q));
    }
    to_words(a, n);
}

/* x * w mod q in [0, q) for x, w < q < 2^50, with 1/q: h = fl(x w) and
 * 1/q each err by half an ulp, so h / q is within 0.4 of x w / q < 2^50,
 * an estimate rem_lazy takes. */
static inline vd mul_full(vd x, vd w, vd qinv, vd q)
{
    vd h = _mm256_mul_pd(x, w);
    return csub(rem_lazy(h, _mm256_fmsub_pd(x, w, h), _mm256_mul_pd(h, qinv), q), q);
}

size_t tsafe_avx2_fp_vec_mac2(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                              const uint64_t *const *a1, const uint64_t *const *w,
                              size_t terms, size_t n, uint64_t q, int assign)
{
    const vd vq = _mm256_set1_pd((double)q), qinv = _mm256_set1_pd(1.0 / (double)q);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        vd s0 = assign ? _mm256_setzero_pd() : w2d(ldw(out0 + j));
        vd s1 = assign ? _mm256_setzero_pd() : w2d(ldw(out1 + j));
        for (size_t k = 0; k < terms; k++) {
            const vd vw = w2d(ldw(w[k] + j));
            s0 = csub(_mm256_add_pd(s0, mul_full(w2d(ldw(a0[k] + j)), vw, qinv, vq)), vq);
            s1 = csub(_mm256_add_pd(s1, mul_full(w2d(ldw(a1[k] + j)), vw, qinv, vq)), vq);
        }
        _mm256_storeu_si256((__m256i *)(void *)(out0 + j), d2w(s0));
        _mm256_storeu_si256((__m256i *)(void *)(out1 + j), d2w(s1));
    }
    return j;
}

size_t tsafe_avx2_fp_vec_mul(uint64_t *out, const uint64_t *a, const uint64_t *b, size_t n,
                             uint64_t q, int add)
{
    const vd vq = _mm256_set1_pd((double)q), qinv = _mm256_set1_pd(1.0 / (double)q);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        vd r = mul_full(w2d(ldw(a + j)), w2d(ldw(b + j)), qinv, vq);
        if (add)
            r = csub(_mm256_add_pd(r, w2d(ldw(out + j))), vq);
        _mm256_storeu_si256((__m256i *)(void *)(out + j), d2w(r));
    }
    return j;
}

#else /* never selected: tsafe_cpu_has_avx2_fma() is 0 without these */

size_t tsafe_avx2_fp_vec_mul(uint64_t *out, const uint64_t *a, const uint64_t *b, size_t n,
                             uint64_t q, int add)
{
    (void)out; (void)a; (void)b; (void)n; (void)q; (void)add;
    return 0;
}

size_t tsafe_avx2_fp_vec_mac2(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                              const uint64_t *const *a1, const uint64_t *const *w,
                              size_t terms, size_t n, uint64_t q, int assign)
{
    (void)out0; (void)out1; (void)a0; (void)a1; (void)w; (void)terms; (void)n; (void)q;
    (void)assign;
    return 0;
}

void tsafe_ntt_forward_avx2_fp(const tsafe_ntt_table *t, uint64_t *a)
{
    tsafe_ntt_forward_scalar(t, a);
}

void tsafe_ntt_inverse_avx2_fp(const tsafe_ntt_table *t, uint64_t *a)
{
    tsafe_ntt_inverse_scalar(t, a);
}

#endif

/* Plain C (no vector code): the tables the kernels above read. */
static double *twiddles(const uint64_t *w, size_t n)
{
    double *d = aligned_alloc(64, ((n * sizeof *d) + 63) & ~(size_t)63);
    if (d)
        for (size_t i = 0; i < n; i++)
            d[i] = (double)w[i];
    return d;
}

static double *quotients(const uint64_t *w, size_t n, uint64_t q)
{
    double *d = aligned_alloc(64, ((n * sizeof *d) + 63) & ~(size_t)63);
    if (d)
        for (size_t i = 0; i < n; i++)
            d[i] = (double)w[i] / (double)q; /* one rounding: both exact */
    return d;
}

void tsafe_ntt_fp_free(tsafe_ntt_fp *f)
{
    if (!f)
        return;
    free(f->fwd);
    free(f->fwd_q);
    free(f->inv);
    free(f->inv_q);
    free(f);
}

tsafe_ntt_fp *tsafe_ntt_fp_build(const tsafe_ntt_table *t)
{
    tsafe_ntt_fp *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    const uint64_t q = t->mod.q;
    f->fwd = twiddles(t->fwd, t->n);
    f->fwd_q = quotients(t->fwd, t->n, q);
    f->inv = twiddles(t->inv, t->n);
    f->inv_q = quotients(t->inv, t->n, q);
    if (!f->fwd || !f->fwd_q || !f->inv || !f->inv_q) {
        tsafe_ntt_fp_free(f);
        return NULL;
    }
    f->n_inv = (double)t->n_inv;
    f->n_inv_q = (double)t->n_inv / (double)q;
    f->last = (double)t->inv_last;
    f->last_q = (double)t->inv_last / (double)q;
    return f;
}
