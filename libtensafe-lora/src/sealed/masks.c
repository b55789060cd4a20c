/* The sealed server's masking arithmetic (no ring work): what each block
 * adds to its sealing, sealed-private's round-2 constants. */
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
    for (uint32_t k = 0; k < site->rank; k++)
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

int64_t tsafe_sealed_unmask(const tsafe_sealed_plan *p, uint64_t v, uint64_t R)
{
    uint64_t t = 1ull << p->r1.t_bits, half = t >> 1;
    uint64_t y = (v + R + half) & (t - 1);
    return y >= half ? (int64_t)y - (int64_t)t : (int64_t)y;
}
