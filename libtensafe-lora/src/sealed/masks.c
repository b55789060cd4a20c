/* The sealed server's masking arithmetic (no ring work): what each block
 * adds to its sealing, sealed-private's round-2 constants. */
#include <math.h>

#include "cpu.h"
#include "server_internal.h"

uint32_t tsafe_sealed_round1_masks(const tsafe_sealed_plan *p, const tsafe_sealed_layout *l,
                                   uint32_t b, const uint64_t *R, uint64_t *mask)
{
    uint64_t t = 1ull << p->r1.t_bits, half = t >> 1;
    uint32_t reads = tsafe_sealed_block_reads(l, b, NULL);
    for (uint32_t k = 0; k < reads; k++)
        mask[k] = (half - R[b * l->rows + k]) & (t - 1);
    return reads;
}

void tsafe_sealed_round2_c(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                           const uint64_t *R, int64_t *C)
{
    uint64_t t = 1ull << p->r1.t_bits, half = t >> 1;
    for (uint32_t k = 0; k < tsafe_sealed_site_reads1(p, site); k++)
        C[k] = (int64_t)((R[k] - half) & (t - 1));
}

uint32_t tsafe_sealed_round2_masks(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                                   uint32_t b, const int64_t *C, const int64_t *noise,
                                   uint64_t *mask)
{
    const tsafe_sealed_layout *l = &site->l2;
    uint64_t t2 = 1ull << p->r2.t_bits;
    uint32_t rank = site->rank, reads = tsafe_sealed_block_reads(l, b, NULL);
    noise += (size_t)b * l->rows;
    for (uint32_t k = 0; k < reads; k++) {
        const int64_t *row = site->bq + (size_t)(b * l->rows + k) * rank;
        /* B_q C mod t2: t2 is a power of two below 2^64, so the sum
         * wrapping mod 2^64 keeps it (and vectorises, unlike the 128-bit
         * sum and division it replaces) */
        uint64_t acc_c = 0;
        for (uint32_t q = 0; q < rank; q++)
            acc_c += (uint64_t)row[q] * (uint64_t)C[q];
        mask[k] = (acc_c + (uint64_t)noise[k]) & (t2 - 1);
    }
    return reads;
}

/* Rows [from, to) of the fused pass below, one at a time. */
static void noise_masks_scalar(const int64_t *bq, uint32_t rank, uint32_t from, uint32_t to,
                               const int64_t *C, const double *z, uint64_t t2, uint64_t *mask)
{
    for (uint32_t j = from; j < to; j++) {
        const int64_t *row = bq + (size_t)j * rank;
        uint64_t acc_c = 0;
        for (uint32_t q = 0; q < rank; q++)
            acc_c += (uint64_t)row[q] * (uint64_t)C[q];
        double x = tsafe_sealed_row_dot(row, z, rank);
        mask[j - from] = (acc_c + (uint64_t)llround(x)) & (t2 - 1);
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* One row at a time, eight entries a step: lane l of the double sum takes
 * the products l, l + 8, ... in turn with separate multiplies and adds,
 * then the halves are added as tsafe_sealed_row_dot writes them, so the
 * sum has its bits (a short last step loads zeros, which leave the lanes'
 * sums unchanged but for the sign of a zero). */
__attribute__((target("avx512f,avx512dq"))) static void noise_masks_avx512(
    const int64_t *bq, uint32_t rank, uint32_t from, uint32_t to, const int64_t *C,
    const double *z, uint64_t t2, uint64_t *mask)
{
    for (uint32_t j = from; j < to; j++) {
        const int64_t *row = bq + (size_t)j * rank;
        __m512d acc = _mm512_setzero_pd();
        __m512i acc_c = _mm512_setzero_si512();
        for (uint32_t q = 0; q < rank; q += 8) {
            __mmask8 m = rank - q >= 8 ? 0xFF : (__mmask8)((1u << (rank - q)) - 1);
            __m512i v = _mm512_maskz_loadu_epi64(m, row + q);
            __m512d zq = _mm512_maskz_loadu_pd(m, z + q);
            acc = _mm512_add_pd(acc, _mm512_mul_pd(_mm512_cvtepi64_pd(v), zq));
            acc_c = _mm512_add_epi64(acc_c, _mm512_mullo_epi64(v, _mm512_maskz_loadu_epi64(m, C + q)));
        }
        /* a_l = s_l + s_(l+4), then (a0 + a2) + (a1 + a3) */
        __m256d a = _mm256_add_pd(_mm512_castpd512_pd256(acc), _mm512_extractf64x4_pd(acc, 1));
        __m128d lo = _mm256_castpd256_pd128(a), hi = _mm256_extractf128_pd(a, 1);
        __m128d b = _mm_add_pd(lo, hi); /* (a0 + a2, a1 + a3) */
        double x = _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
        uint64_t c = (uint64_t)_mm512_reduce_add_epi64(acc_c);
        mask[j - from] = (c + (uint64_t)llround(x)) & (t2 - 1);
    }
}
#endif

uint32_t tsafe_sealed_round2_noise_masks(const tsafe_sealed_plan *p,
                                         const tsafe_sealed_site *site, uint32_t b,
                                         const int64_t *C, const double *z, uint64_t *mask,
                                         int vector)
{
    const tsafe_sealed_layout *l = &site->l2;
    uint64_t t2 = 1ull << p->r2.t_bits;
    uint32_t reads = tsafe_sealed_block_reads(l, b, NULL);
    uint32_t from = b * l->rows, to = from + reads;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (vector && tsafe_cpu_has_ifma()) { /* F and DQ among its checks */
        noise_masks_avx512(site->bq, site->rank, from, to, C, z, t2, mask);
        return reads;
    }
#else
    (void)vector;
#endif
    noise_masks_scalar(site->bq, site->rank, from, to, C, z, t2, mask);
    return reads;
}

int64_t tsafe_sealed_unmask(const tsafe_sealed_plan *p, uint64_t v, uint64_t R)
{
    uint64_t t = 1ull << p->r1.t_bits, half = t >> 1;
    uint64_t y = (v + R + half) & (t - 1);
    return y >= half ? (int64_t)y - (int64_t)t : (int64_t)y;
}
