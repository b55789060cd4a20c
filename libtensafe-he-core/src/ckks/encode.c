/* CKKS canonical-embedding encoder with the standard slot order: slot j is
 * the evaluation at zeta^(5^j mod 2N), zeta = exp(i*pi/N), as in SEAL and
 * OpenFHE.
 *
 * Writing odd exponents t = 2s+1, m(zeta^t) = sum_k (m_k zeta^k) w^(sk) with
 * w = exp(2*pi*i/N): decoding is one length-N DFT of the twisted
 * coefficients, encoding its inverse (conjugate slots fill the other half).
 * FFTW executes the plans made once per context (new-array execute calls
 * are thread-safe). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <complex.h>
#include <fftw3.h>
#include <gmp.h>
#include <sodium.h>

#include "ckks_internal.h"
#include "../common/check.h"

tsafe_status tsafe_plaintext_create(const tsafe_context *ctx,
                                    tsafe_plaintext **out)
{
    TSAFE_REQUIRE(ctx && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_plaintext *pt = calloc(1, sizeof *pt);
    TSAFE_REQUIRE(pt, TSAFE_E_NOMEM);
    pt->ctx = ctx;
    pt->data = tsafe_poly_alloc(ctx, ctx->n_data);
    if (!pt->data) {
        free(pt);
        return TSAFE_E_NOMEM;
    }
    *out = pt;
    return TSAFE_OK;
}

void tsafe_plaintext_free(tsafe_plaintext *pt)
{
    if (!pt)
        return;
    /* decrypted plaintexts are secret: always wipe */
    tsafe_poly_free(pt->data, pt->ctx, pt->ctx->n_data, 1);
    tsafe_poly_free(pt->shoup, pt->ctx, pt->ctx->n_data, 0);
    free(pt);
}

uint32_t tsafe_plaintext_level(const tsafe_plaintext *pt)
{
    return pt ? pt->level : 0;
}

double tsafe_plaintext_scale(const tsafe_plaintext *pt)
{
    return pt ? pt->scale : 0;
}

/* Reduce one real coefficient (already scaled and rounded) into every limb;
 * values beyond int64 take the GMP path. */
static void put_coeff(const tsafe_context *c, double v, uint32_t level,
                      uint64_t *poly, size_t k, mpz_t big)
{
    if (fabs(v) < 9.2e18) {
        int64_t x = (int64_t)v;
        for (uint32_t i = 0; i <= level; i++) {
            uint64_t q = c->mod[i].q;
            uint64_t r = x >= 0 ? (uint64_t)x % q
                                : q - 1 - (uint64_t)(-(x + 1)) % q;
            tsafe_limb(poly, c, i)[k] = r;
        }
        return;
    }
    mpz_set_d(big, v);
    for (uint32_t i = 0; i <= level; i++)
        tsafe_limb(poly, c, i)[k] = mpz_fdiv_ui(big, c->mod[i].q);
}

/* log2 of half the modulus at a level: scaled values must stay below it. */
static double log2_half_q(const tsafe_context *c, uint32_t level)
{
    double l = -1.0;
    for (uint32_t i = 0; i <= level; i++)
        l += log2((double)c->mod[i].q);
    return l;
}

tsafe_status tsafe_ckks_encode_complex(const tsafe_context *ctx,
                                       const double *re, const double *im,
                                       size_t count, double scale,
                                       uint32_t level, tsafe_plaintext *pt)
{
    tsafe_status st = TSAFE_OK;
    TSAFE_REQUIRE(ctx && pt && (re || count == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(count <= ctx->slots, TSAFE_E_RANGE);
    TSAFE_REQUIRE(level < ctx->n_data, TSAFE_E_LEVEL);
    TSAFE_REQUIRE(isfinite(scale) && scale >= 1.0, TSAFE_E_SCALE);
    size_t n = ctx->n;
    fftw_complex *v = fftw_malloc(n * sizeof *v);
    TSAFE_REQUIRE(v, TSAFE_E_NOMEM);
    memset(v, 0, n * sizeof *v);
    for (size_t j = 0; j < count; j++) {
        double a = re[j], b = im ? im[j] : 0.0;
        TSAFE_CHECK(isfinite(a) && isfinite(b), TSAFE_E_VALUE_RANGE);
        size_t s = ctx->slot_index[j];
        v[s] = a + I * b;
        v[n - 1 - s] = a - I * b; /* zeta^-t = conj: index N-1-s */
    }
    fftw_execute_dft(ctx->fft_fwd, v, v); /* sign -1: sum v_s w^(-sk) */
    double limit = ldexp(1.0, (int)floor(log2_half_q(ctx, level)));
    double inv_n = scale / (double)n;
    mpz_t big;
    mpz_init(big);
    pt->valid = 0;
    for (size_t k = 0; k < n; k++) {
        /* m_k = Re(v_k * zeta^-k) / N, times the scale */
        double x = creal(v[k] * conj(ctx->twist[k])) * inv_n;
        x = nearbyint(x);
        if (!(fabs(x) < limit)) {
            mpz_clear(big);
            TSAFE_CHECK(0, TSAFE_E_VALUE_RANGE);
        }
        put_coeff(ctx, x, level, pt->data, k, big);
    }
    mpz_clear(big);
    tsafe_poly_ntt(ctx, pt->data, level);
    pt->level = level;
    pt->scale = scale;
    pt->valid = 1;
    if (pt->shoup) { /* stale quotients: drop them */
        tsafe_poly_free(pt->shoup, ctx, ctx->n_data, 0);
        pt->shoup = NULL;
    }
fail:
    sodium_memzero(v, n * sizeof *v);
    fftw_free(v);
    return st;
}

tsafe_status tsafe_ckks_encode(const tsafe_context *ctx, const double *values,
                               size_t count, double scale, uint32_t level,
                               tsafe_plaintext *pt)
{
    return tsafe_ckks_encode_complex(ctx, values, NULL, count, scale, level,
                                     pt);
}

tsafe_status tsafe_ckks_decode_complex(const tsafe_context *ctx,
                                       const tsafe_plaintext *pt, double *re,
                                       double *im, size_t count)
{
    tsafe_status st = TSAFE_OK;
    TSAFE_REQUIRE(ctx && pt && (re || im || count == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(pt->valid, TSAFE_E_STATE);
    TSAFE_REQUIRE(count <= ctx->slots, TSAFE_E_RANGE);
    size_t n = ctx->n;
    uint32_t level = pt->level;
    uint64_t *coef = tsafe_poly_alloc(ctx, level + 1);
    fftw_complex *v = fftw_malloc(n * sizeof *v);
    TSAFE_CHECK(coef && v, TSAFE_E_NOMEM);
    memcpy(coef, pt->data, (size_t)(level + 1) * n * sizeof *coef);
    tsafe_poly_intt(ctx, coef, level);
    uint64_t res[TSAFE_MAX_PRIMES];
    double inv_scale = 1.0 / pt->scale;
    for (size_t k = 0; k < n; k++) {
        for (uint32_t i = 0; i <= level; i++)
            res[i] = coef[(size_t)i * n + k];
        v[k] = tsafe_crt_to_double(ctx, res, level) * inv_scale * ctx->twist[k];
    }
    fftw_execute_dft(ctx->fft_inv, v, v); /* sign +1: sum w^(sk) */
    for (size_t j = 0; j < count; j++) {
        fftw_complex z = v[ctx->slot_index[j]];
        if (re)
            re[j] = creal(z);
        if (im)
            im[j] = cimag(z);
    }
fail:
    if (coef)
        tsafe_poly_free(coef, ctx, level + 1, 1);
    if (v) {
        sodium_memzero(v, n * sizeof *v);
        fftw_free(v);
    }
    return st;
}

tsafe_status tsafe_ckks_decode(const tsafe_context *ctx,
                               const tsafe_plaintext *pt, double *values,
                               size_t count)
{
    TSAFE_REQUIRE(values || count == 0, TSAFE_E_NULL);
    return tsafe_ckks_decode_complex(ctx, pt, values, NULL, count);
}

tsafe_status tsafe_plaintext_prepare_mul(const tsafe_context *ctx,
                                         tsafe_plaintext *pt)
{
    TSAFE_REQUIRE(ctx && pt, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(pt->valid, TSAFE_E_STATE);
    if (!pt->shoup) {
        pt->shoup = tsafe_poly_alloc(ctx, ctx->n_data);
        TSAFE_REQUIRE(pt->shoup, TSAFE_E_NOMEM);
    }
    for (uint32_t i = 0; i <= pt->level; i++)
        tsafe_vec_shoup_precompute(tsafe_limb(pt->shoup, ctx, i),
                                   tsafe_climb(pt->data, ctx, i), ctx->n,
                                   ctx->mod[i].q);
    return TSAFE_OK;
}
