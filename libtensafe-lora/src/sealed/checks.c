/* Checked shares (plan.checks; docs/PROTOCOL.md "Checked shares",
 * docs/MALICIOUS_CLIENT.md): the server's fresh W of round 1 and H of
 * round 2, the fold's plaintext matrix [B_q - H K | H] and its mask
 * constants. No ring work: server_round1.c and server_round2.c run the
 * products and sealings. */
#include <math.h>
#include <string.h>

#include <sodium.h>

#include "server_internal.h"

/* w uniform in [-G, G) (G = 32: six bits each) */
static void draw_w(tsafe_sealed_draws *d, int8_t *w, size_t n)
{
    uint64_t u[64];
    for (size_t i = 0; i < n; i += 8 * 64) {
        size_t take = n - i < 8 * 64 ? n - i : 8 * 64;
        tsafe_sealed_draw_masks(d, u, (take + 7) / 8);
        const uint8_t *b = (const uint8_t *)u;
        for (size_t k = 0; k < take; k++)
            w[i + k] = (int8_t)((b[k] & (2 * TSAFE_SEALED_CHECK_G - 1)) - TSAFE_SEALED_CHECK_G);
    }
    sodium_memzero(u, sizeof u);
}

/* sum of K's squares over block b's checks and rows (rb of them) */
static double k_norm2(const tsafe_sealed_plan *p, const int8_t *wb, uint32_t rb)
{
    double s = 0;
    for (uint32_t c = 0; c < p->checks; c++)
        for (uint32_t o = 0; o < rb; o++) {
            int v = tsafe_sealed_check_entry(wb, p->rows1, c, o);
            s += (double)v * v;
        }
    return s;
}

void tsafe_sealed_draw_checks_w(tsafe_sealed_draws *d, const tsafe_sealed_plan *p,
                                uint32_t rank, int8_t *w)
{
    tsafe_sealed_layout l1;
    tsafe_sealed_layout1(p, rank, &l1);
    for (uint32_t b = 0; b < l1.n_blocks; b++) {
        uint32_t rb = tsafe_sealed_block_reads(&l1, b, NULL);
        int8_t *wb = w + (size_t)b * p->rows1;
        /* redrawn until K's squares are within KAPPA of their mean: the
         * plan's round-2 noise takes that (one draw in millions for full
         * blocks; small blocks redraw more) */
        do
            draw_w(d, wb, p->rows1);
        while (k_norm2(p, wb, rb) >
               TSAFE_SEALED_CHECK_KAPPA * p->checks * rb * tsafe_sealed_check_w_mean_square());
    }
}

void tsafe_sealed_check_poly(const tsafe_sealed_plan *p, const int8_t *wb, int64_t *coeff,
                             size_t n)
{
    memset(coeff, 0, n * sizeof *coeff);
    for (uint32_t m = 0; m < p->rows1; m++)
        coeff[(size_t)m * p->chunk1] = wb[m];
}

/* H's entries uniform in [-2^h, 2^h) from a stream keyed by seed; ctr
 * selects the stream's part (a redraw takes the next). */
static void draw_h_rows(const uint8_t seed[32], uint64_t ctr, uint32_t hb, int16_t *h, size_t n)
{
    uint8_t k[32];
    uint8_t in[40];
    memcpy(in, seed, 32);
    for (int i = 0; i < 8; i++)
        in[32 + i] = (uint8_t)(ctr >> (8 * i));
    crypto_generichash(k, 32, in, sizeof in, NULL, 0);
    randombytes_buf_deterministic(h, n * sizeof *h, k);
    uint16_t mask = (uint16_t)((2u << hb) - 1);
    for (size_t i = 0; i < n; i++)
        h[i] = (int16_t)((int32_t)((uint16_t)h[i] & mask) - (1 << hb));
    sodium_memzero(k, sizeof k);
    sodium_memzero(in, sizeof in);
}

/* Row o of M = [B_q - H K | H] from H's row ho; returns the squares of
 * its H K part. */
__attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"))) static double
fold_row(uint32_t rank, uint32_t m, const int32_t *K, const int16_t *ho,
                       const int64_t *bo, int64_t *mo)
{
    /* |H K| <= checks 2^h G < 2^31 for every width the plan takes (h <=
     * 21): 32-bit lanes, which the compiler vectorises */
    int32_t hk[1024];
    for (uint32_t j = 0; j < rank; j++)
        hk[j] = 0;
    for (uint32_t e = 0; e < m; e++) {
        int32_t he = ho[e];
        const int32_t *ke = K + (size_t)e * rank;
        for (uint32_t j = 0; j < rank; j++)
            hk[j] += he * ke[j];
    }
    double s = 0;
    for (uint32_t j = 0; j < rank; j++) {
        s += (double)hk[j] * (double)hk[j];
        mo[j] = bo[j] - hk[j];
    }
    for (uint32_t e = 0; e < m; e++)
        mo[rank + e] = ho[e];
    return s;
}

tsafe_status tsafe_sealed_fold_matrix(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                                      const uint8_t seed[32], const int32_t *K, int16_t *H,
                                      int64_t *M)
{
    const tsafe_sealed_layout *l = &site->l2;
    uint32_t rank = site->rank, m = p->checks, width = rank + m;
    uint32_t hb = tsafe_sealed_check_h_bits(p);
    double rms = tsafe_sealed_check_hk_rms(p);
    for (uint32_t b = 0; b < l->n_blocks; b++) {
        uint32_t from = b * l->rows, rows = tsafe_sealed_block_reads(l, b, NULL);
        double bound = TSAFE_SEALED_CHECK_FRO * TSAFE_SEALED_CHECK_FRO * rms * rms * rows * rank;
        int16_t *hb0 = H + (size_t)from * m;
        /* the block's H redrawn until its H K is within the plan's bound
         * (TSAFE_SEALED_CHECK_FRO); K's own bound (round 1) makes one
         * draw the common case */
        for (uint64_t tries = 0;; tries++) {
            if (tries == 4096)
                return TSAFE_E_CRYPTO;
            draw_h_rows(seed, ((uint64_t)b << 32) | tries, hb, hb0, (size_t)rows * m);
            double s = 0;
            for (uint32_t o = from; o < from + rows; o++)
                s += fold_row(rank, m, K, H + (size_t)o * m, site->bq + (size_t)o * rank,
                              M + (size_t)o * width);
            if (s <= bound)
                break;
        }
    }
    return TSAFE_OK;
}

void tsafe_sealed_fold_constants(const tsafe_sealed_plan *p, uint32_t rank, const int32_t *K,
                                 const int64_t *C, uint64_t *v)
{
    uint64_t t2 = 1ull << p->r2.t_bits;
    for (uint32_t e = 0; e < p->checks; e++) {
        uint64_t acc = (uint64_t)C[rank + e];
        for (uint32_t j = 0; j < rank; j++)
            acc -= (uint64_t)(int64_t)K[(size_t)e * rank + j] * (uint64_t)C[j];
        v[e] = acc & (t2 - 1);
    }
}

void tsafe_sealed_fold_masks(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                             uint32_t b, const int16_t *H, const uint64_t *v, uint64_t *mask)
{
    const tsafe_sealed_layout *l = &site->l2;
    uint64_t t2 = 1ull << p->r2.t_bits;
    uint32_t m = p->checks;
    uint32_t reads = tsafe_sealed_block_reads(l, b, NULL);
    for (uint32_t k = 0; k < reads; k++) {
        const int16_t *ho = H + (size_t)(b * l->rows + k) * m;
        uint64_t acc = mask[k];
        for (uint32_t e = 0; e < m; e++)
            acc += (uint64_t)(int64_t)ho[e] * v[e];
        mask[k] = acc & (t2 - 1);
    }
}
