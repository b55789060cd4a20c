/* L2 clipping and CSPRNG Gaussian noise (see the LIMITATION note in
 * tensafe/lora_dp.h about floating-point sampling). */
#include <math.h>
#include <sodium.h>

#include "dp_internal.h"
#include "init.h"

#define NOISE_BLOCK 128 /* uint64 draws per randombytes_buf call (even) */

tsafe_status tsafe_dp_clip_l2(float *vec, size_t n, double clip_norm,
                              double *norm_before)
{
    if (!vec && n)
        return TSAFE_E_NULL;
    if (!(clip_norm > 0.0) || !isfinite(clip_norm))
        return TSAFE_E_ARG;
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(vec[i]))
            return TSAFE_E_VALUE_RANGE;
        ss += (double)vec[i] * (double)vec[i];
    }
    double norm = sqrt(ss);
    if (norm_before)
        *norm_before = norm;
    if (norm <= clip_norm)
        return TSAFE_OK;
    /* Aim 2^-22 inside the ball: float rounding moves the norm by at most
     * 2^-24 relative; re-check anyway and shrink further if needed. */
    double scale = clip_norm / norm * (1.0 - 0x1p-22);
    for (int round = 0; round < 8; round++) {
        ss = 0.0;
        for (size_t i = 0; i < n; i++) {
            vec[i] = (float)((double)vec[i] * scale);
            ss += (double)vec[i] * (double)vec[i];
        }
        if (sqrt(ss) <= clip_norm)
            return TSAFE_OK;
        scale = 1.0 - 0x1p-20;
    }
    for (size_t i = 0; i < n; i++) /* unreachable in practice */
        vec[i] = 0.0f;
    return TSAFE_OK;
}

/* (0,1) uniform with 53 random bits; never 0, so log() is finite. */
static double u53(uint64_t r)
{
    return ((double)(r >> 11) + 0.5) * 0x1p-53;
}

/* z[0..m) <- N(0,1), Box-Muller on pairs of 53-bit uniforms. m even,
 * m <= NOISE_BLOCK. The raw random words are wiped before returning. */
static void gauss_block(double *z, size_t m)
{
    uint64_t raw[NOISE_BLOCK];
    randombytes_buf(raw, m * sizeof(uint64_t));
    for (size_t p = 0; p + 1 < m; p += 2) {
        double r = sqrt(-2.0 * log(u53(raw[p])));
        double th = 6.283185307179586477 * u53(raw[p + 1]);
        z[p] = r * cos(th);
        z[p + 1] = r * sin(th);
    }
    sodium_memzero(raw, sizeof raw);
}

tsafe_status tsafe_dp_gaussian_fill(double *out, size_t n, double sigma)
{
    if (!out && n)
        return TSAFE_E_NULL;
    if (!(sigma >= 0.0) || !isfinite(sigma))
        return TSAFE_E_ARG;
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    double z[NOISE_BLOCK];
    for (size_t i = 0; i < n; i += NOISE_BLOCK) {
        size_t m = n - i < NOISE_BLOCK ? n - i : NOISE_BLOCK;
        gauss_block(z, (m + 1) & ~(size_t)1);
        for (size_t j = 0; j < m; j++)
            out[i + j] = sigma * z[j];
    }
    sodium_memzero(z, sizeof z);
    return TSAFE_OK;
}

tsafe_status tsafe_dp_add_gaussian_noise(float *vec, size_t n, double sigma)
{
    if (!vec && n)
        return TSAFE_E_NULL;
    if (!(sigma >= 0.0) || !isfinite(sigma))
        return TSAFE_E_ARG;
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    double z[NOISE_BLOCK];
    for (size_t i = 0; i < n; i += NOISE_BLOCK) {
        size_t m = n - i < NOISE_BLOCK ? n - i : NOISE_BLOCK;
        gauss_block(z, (m + 1) & ~(size_t)1);
        for (size_t j = 0; j < m; j++)
            vec[i + j] = (float)((double)vec[i + j] + sigma * z[j]);
    }
    sodium_memzero(z, sizeof z);
    return TSAFE_OK;
}
