/* Negacyclic NTT over Z_q[X]/(X^N + 1): tables and the scalar path.
 *
 * Forward: Cooley-Tukey, decimation in time, psi powers in bit-reversed
 * order (Longa-Naehrig), Harvey's lazy butterfly with Shoup quotients:
 * values stay in [0, 4q) between stages (q < 2^62 keeps 4q in a word) and
 * the last stage reduces fully. Slot k ends up holding a(psi^(2*bitrev(k)+1)).
 * Inverse: Gentleman-Sande undoing each forward butterfly, values in
 * [0, 2q) between stages, N^-1 folded into the last stage. */
#include "ring.h"

#include <stdlib.h>
#include <string.h>

#include "tsafe_check.h"
#include "ifma.h"
#include "avx2.h"

static uint32_t bitrev(uint32_t x, uint32_t bits)
{
    uint32_t r = 0;
    for (uint32_t i = 0; i < bits; i++) {
        r = (r << 1) | (x & 1);
        x >>= 1;
    }
    return r;
}

static void *alloc_words(size_t n)
{
    size_t bytes = n * sizeof(uint64_t);
    bytes = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

static void free_ifma(tsafe_ntt_ifma *x)
{
    if (!x)
        return;
    free(x->fwd52);
    free(x->inv52);
    free(x);
}

void tsafe_ntt_table_free(tsafe_ntt_table *t)
{
    if (!t)
        return;
    free(t->fwd);
    free(t->fwd_shoup);
    free(t->inv);
    free(t->inv_shoup);
    free_ifma((tsafe_ntt_ifma *)t->ifma);
    tsafe_ntt_fp_free((tsafe_ntt_fp *)t->fp);
    memset(t, 0, sizeof *t);
}

static uint64_t shoup52(uint64_t w, uint64_t q)
{
    return (uint64_t)(((tsafe_u128)w << 52) / q);
}

static tsafe_status build_ifma(tsafe_ntt_table *t)
{
    size_t n = t->n;
    uint64_t q = t->mod.q;
    tsafe_ntt_ifma *x = calloc(1, sizeof *x);
    if (!x)
        return TSAFE_E_NOMEM;
    x->fwd52 = alloc_words(n);
    x->inv52 = alloc_words(n);
    if (!x->fwd52 || !x->inv52) {
        free_ifma(x);
        return TSAFE_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        x->fwd52[i] = shoup52(t->fwd[i], q);
        x->inv52[i] = shoup52(t->inv[i], q);
    }
    x->n_inv52 = shoup52(t->n_inv, q);
    x->inv_last = t->inv_last;
    x->inv_last52 = shoup52(x->inv_last, q);
    t->ifma = x;
    return TSAFE_OK;
}

tsafe_status tsafe_ntt_table_init(tsafe_ntt_table *t, uint32_t log_n,
                                  uint64_t q, int allow_ifma)
{
    tsafe_status st = TSAFE_OK;
    TSAFE_REQUIRE(t != NULL, TSAFE_E_NULL);
    memset(t, 0, sizeof *t);
    TSAFE_REQUIRE(log_n >= 1 && log_n <= 17, TSAFE_E_ARG);
    size_t n = (size_t)1 << log_n;
    TSAFE_REQUIRE(q >= 3 && (q >> 62) == 0, TSAFE_E_ARG);
    TSAFE_REQUIRE((q - 1) % (2 * (uint64_t)n) == 0, TSAFE_E_ARG);

    uint64_t psi;
    TSAFE_REQUIRE(tsafe_primitive_2n_root(q, log_n, &psi) == TSAFE_OK,
                  TSAFE_E_ARG);

    t->log_n = log_n;
    t->n = n;
    t->psi = psi;
    tsafe_modulus_init(&t->mod, q);
    t->fwd = alloc_words(n);
    t->fwd_shoup = alloc_words(n);
    t->inv = alloc_words(n);
    t->inv_shoup = alloc_words(n);
    TSAFE_CHECK(t->fwd && t->fwd_shoup && t->inv && t->inv_shoup,
                TSAFE_E_NOMEM);

    /* Powers psi^j and psi^-j in natural order, then scattered. */
    uint64_t psi_inv = tsafe_inv_mod(psi, &t->mod);
    uint64_t p = 1, pi = 1;
    for (size_t j = 0; j < n; j++) {
        size_t r = bitrev((uint32_t)j, log_n);
        t->fwd[r] = p;
        t->inv[r] = pi;
        p = tsafe_mul_mod(p, psi, &t->mod);
        pi = tsafe_mul_mod(pi, psi_inv, &t->mod);
    }
    for (size_t j = 0; j < n; j++) {
        t->fwd_shoup[j] = tsafe_shoup_precompute(t->fwd[j], q);
        t->inv_shoup[j] = tsafe_shoup_precompute(t->inv[j], q);
    }
    t->n_inv = tsafe_inv_mod((uint64_t)n % q, &t->mod);
    t->n_inv_shoup = tsafe_shoup_precompute(t->n_inv, q);
    t->inv_last = n > 1 ? tsafe_mul_mod(t->inv[1], t->n_inv, &t->mod) : t->n_inv;
    t->inv_last_shoup = tsafe_shoup_precompute(t->inv_last, q);

    if (allow_ifma && q < TSAFE_IFMA_MAX_Q && log_n >= 4 &&
        tsafe_cpu_has_ifma()) {
        TSAFE_TRY(build_ifma(t));
        t->use_ifma = 1;
    } else if (allow_ifma && q < TSAFE_AVX2_MAX_Q && log_n >= 4 && tsafe_cpu_has_avx2()) {
        t->use_avx2 = 1;
    } else if (allow_ifma && q < TSAFE_AVX2_FP_MAX_Q && log_n >= 4 && tsafe_cpu_has_avx2_fma()) {
        t->fp = tsafe_ntt_fp_build(t);
        TSAFE_CHECK(t->fp != NULL, TSAFE_E_NOMEM);
        t->use_avx2_fp = 1;
    }
    return TSAFE_OK;
fail:
    tsafe_ntt_table_free(t);
    return st;
}

/* ------------------------------------------------------ scalar forward */

static inline void fwd_bfly(uint64_t *x, uint64_t *y, uint64_t w,
                            uint64_t wp, uint64_t q, uint64_t two_q)
{
    uint64_t a = *x;
    a = a >= two_q ? a - two_q : a;                  /* [0, 2q) */
    uint64_t b = tsafe_mul_shoup_lazy(*y, w, wp, q); /* [0, 2q) */
    *x = a + b;                                      /* [0, 4q) */
    *y = a - b + two_q;                              /* (0, 4q) */
}

static inline uint64_t reduce_4q(uint64_t v, uint64_t q, uint64_t two_q)
{
    v = v >= two_q ? v - two_q : v;
    return v >= q ? v - q : v;
}

/* Two stages at once (gaps g and g/2) on four elements held in registers:
 * half the loads and stores of two radix-2 passes. `last` marks the pair
 * that ends with gap 1, which also reduces to [0, q). */
static inline void fwd_pair(uint64_t *a, size_t m, size_t gap,
                            const uint64_t *fw, const uint64_t *fwp,
                            uint64_t q, int last)
{
    const uint64_t two_q = 2 * q;
    const size_t h = gap >> 1;
    for (size_t i = 0; i < m; i++) {
        const uint64_t w1 = fw[m + i], w1p = fwp[m + i];
        const uint64_t w2 = fw[2 * m + 2 * i], w2p = fwp[2 * m + 2 * i];
        const uint64_t w3 = fw[2 * m + 2 * i + 1];
        const uint64_t w3p = fwp[2 * m + 2 * i + 1];
        uint64_t *p = a + 2 * i * gap;
        for (size_t j = 0; j < h; j++) {
            uint64_t x0 = p[j], x1 = p[j + h];
            uint64_t x2 = p[j + gap], x3 = p[j + gap + h];
            fwd_bfly(&x0, &x2, w1, w1p, q, two_q);
            fwd_bfly(&x1, &x3, w1, w1p, q, two_q);
            fwd_bfly(&x0, &x1, w2, w2p, q, two_q);
            fwd_bfly(&x2, &x3, w3, w3p, q, two_q);
            if (last) {
                x0 = reduce_4q(x0, q, two_q);
                x1 = reduce_4q(x1, q, two_q);
                x2 = reduce_4q(x2, q, two_q);
                x3 = reduce_4q(x3, q, two_q);
            }
            p[j] = x0;
            p[j + h] = x1;
            p[j + gap] = x2;
            p[j + gap + h] = x3;
        }
    }
}

void tsafe_ntt_forward_scalar(const tsafe_ntt_table *t, uint64_t *a)
{
    const size_t n = t->n;
    const uint64_t q = t->mod.q, two_q = 2 * q;
    const uint64_t *fw = t->fwd, *fwp = t->fwd_shoup;
    size_t m = 1, gap = n >> 1;

    if (t->log_n & 1) {
        /* Odd stage count: one radix-2 stage first. */
        const uint64_t w = fw[1], wp = fwp[1];
        for (size_t j = 0; j < gap; j++) {
            fwd_bfly(a + j, a + j + gap, w, wp, q, two_q);
            if (n == 2) {
                a[0] = reduce_4q(a[0], q, two_q);
                a[1] = reduce_4q(a[1], q, two_q);
            }
        }
        m = 2;
        gap >>= 1;
    }
    for (; gap > 2; m <<= 2, gap >>= 2)
        fwd_pair(a, m, gap, fw, fwp, q, 0);
    if (gap == 2)
        fwd_pair(a, m, gap, fw, fwp, q, 1);
}

/* ------------------------------------------------------ scalar inverse */

static inline void inv_bfly(uint64_t *x, uint64_t *y, uint64_t w,
                            uint64_t wp, uint64_t q, uint64_t two_q)
{
    uint64_t u = *x, v = *y;                        /* [0, 2q) */
    uint64_t s = u + v;
    *x = s >= two_q ? s - two_q : s;
    *y = tsafe_mul_shoup_lazy(u - v + two_q, w, wp, q);
}

void tsafe_ntt_inverse_scalar(const tsafe_ntt_table *t, uint64_t *a)
{
    const size_t n = t->n;
    const uint64_t q = t->mod.q, two_q = 2 * q;
    const uint64_t *iw = t->inv, *iwp = t->inv_shoup;
    size_t m = n >> 1, gap = 1;

    if (n == 2)
        goto last;
    /* gap 1 and 2 unrolled, then the long strides. */
    for (size_t i = 0; i < m; i++) {
        uint64_t *x = a + 2 * i;
        inv_bfly(x, x + 1, iw[m + i], iwp[m + i], q, two_q);
    }
    m >>= 1;
    gap <<= 1;
    if (m > 1) {
        for (size_t i = 0; i < m; i++) {
            const uint64_t w = iw[m + i], wp = iwp[m + i];
            uint64_t *x = a + 4 * i;
            inv_bfly(x, x + 2, w, wp, q, two_q);
            inv_bfly(x + 1, x + 3, w, wp, q, two_q);
        }
        m >>= 1;
        gap <<= 1;
    }
    for (; m > 1; m >>= 1, gap <<= 1) {
        for (size_t i = 0; i < m; i++) {
            const uint64_t w = iw[m + i], wp = iwp[m + i];
            uint64_t *x = a + 2 * i * gap, *y = x + gap;
            for (size_t j = 0; j < gap; j += 4) {
                inv_bfly(x + j, y + j, w, wp, q, two_q);
                inv_bfly(x + j + 1, y + j + 1, w, wp, q, two_q);
                inv_bfly(x + j + 2, y + j + 2, w, wp, q, two_q);
                inv_bfly(x + j + 3, y + j + 3, w, wp, q, two_q);
            }
        }
    }
last:;
    /* Last stage: (u + v) / N and (u - v) * psi^-bitrev(1) / N. */
    const size_t h = n >> 1;
    const uint64_t ni = t->n_inv, nip = t->n_inv_shoup;
    const uint64_t wl = t->inv_last, wlp = t->inv_last_shoup;
    for (size_t j = 0; j < h; j++) {
        uint64_t u = a[j], v = a[j + h];
        a[j] = tsafe_mul_shoup(u + v, ni, nip, q);
        a[j + h] = tsafe_mul_shoup(u - v + two_q, wl, wlp, q);
    }
}

/* ------------------------------------------------------------ dispatch */

void tsafe_ntt_forward(const tsafe_ntt_table *t, uint64_t *a)
{
    if (t->use_ifma)
        tsafe_ntt_forward_ifma(t, a);
    else if (t->use_avx2)
        tsafe_ntt_forward_avx2(t, a);
    else if (t->use_avx2_fp)
        tsafe_ntt_forward_avx2_fp(t, a);
    else
        tsafe_ntt_forward_scalar(t, a);
}

void tsafe_ntt_inverse(const tsafe_ntt_table *t, uint64_t *a)
{
    if (t->use_ifma)
        tsafe_ntt_inverse_ifma(t, a);
    else if (t->use_avx2)
        tsafe_ntt_inverse_avx2(t, a);
    else if (t->use_avx2_fp)
        tsafe_ntt_inverse_avx2_fp(t, a);
    else
        tsafe_ntt_inverse_scalar(t, a);
}
