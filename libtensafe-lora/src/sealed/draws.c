/* The sealed server's randomness: masks, sealing seeds and the
 * sealed-private output noise, from the CSPRNG or (tests only) a seed. */
#include <math.h>
#include <string.h>

#include <sodium.h>

#include "bytes.h"
#include "server_internal.h"

const uint8_t *tsafe_sealed_next_seed(tsafe_sealed_draws *d, uint8_t out[32])
{
    if (!d->seeded)
        return NULL;
    uint8_t ctr[8];
    tsafe_store_le64(ctr, d->n);
    d->n++;
    crypto_generichash(out, 32, ctr, sizeof ctr, d->seed, 32);
    return out;
}

void tsafe_sealed_draw_masks(tsafe_sealed_draws *d, uint64_t *R, size_t n)
{
    if (!d->seeded) {
        randombytes_buf(R, n * sizeof *R);
        return;
    }
    uint8_t k[32];
    tsafe_sealed_next_seed(d, k);
    randombytes_buf_deterministic(R, n * sizeof *R, k);
}

/* noise[j] = round(sum_i B_q[j][i] z_i), z_i Gaussian of sd
 * tsafe_sealed_out_noise_sd(rank) clamped at TSAFE_SEALED_OUT_NOISE_TAIL
 * sd (Box-Muller on 53-bit uniforms from the CSPRNG, or the test seed).
 * It smooths the lattice of the outputs and is not a DP mechanism: any sd
 * at least the smoothing parameter serves, so the sampler's float
 * rounding does not matter. A zero B gives zero noise (delta = 0). */
void tsafe_sealed_draw_out_z(tsafe_sealed_draws *d, uint32_t rank, double *z)
{
    uint64_t u[1026];
    tsafe_sealed_draw_masks(d, u, rank + 1);
    double sd = tsafe_sealed_out_noise_sd(rank), lim = TSAFE_SEALED_OUT_NOISE_TAIL * sd;
    for (uint32_t i = 0; i < rank; i += 2) {
        double a = ((double)(u[i] >> 11) + 1) * 0x1p-53; /* (0, 1] */
        double b = (double)(u[i + 1] >> 11) * 0x1p-53;
        double rad = sd * sqrt(-2 * log(a));
        z[i] = fmin(fmax(rad * cos(2 * M_PI * b), -lim), lim);
        if (i + 1 < rank)
            z[i + 1] = fmin(fmax(rad * sin(2 * M_PI * b), -lim), lim);
    }
    sodium_memzero(u, sizeof u);
}

double tsafe_sealed_row_dot(const int64_t *row, const double *z, uint32_t rank)
{
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, a[4];
    for (uint32_t i = 0; i < rank; i++)
        s[i & 7] += (double)row[i] * z[i];
    for (int l = 0; l < 4; l++)
        a[l] = s[l] + s[l + 4];
    return (a[0] + a[2]) + (a[1] + a[3]);
}

void tsafe_sealed_out_noise(const tsafe_sealed_site *site, const double *z, int64_t *noise)
{
    uint32_t rank = site->rank;
    for (uint32_t j = 0; j < site->d_out; j++)
        noise[j] = (int64_t)llround(tsafe_sealed_row_dot(site->bq + (size_t)j * rank, z, rank));
}

void tsafe_sealed_draw_out_noise(tsafe_sealed_draws *d, const tsafe_sealed_site *site,
                                 int64_t *noise)
{
    double z[1026];
    tsafe_sealed_draw_out_z(d, site->rank, z);
    tsafe_sealed_out_noise(site, z, noise);
    sodium_memzero(z, sizeof z);
}
