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
#include "tsafe_check.h"

/* Per-thread FFT scratch: encode/decode run on the hot path of every token,
 * and a fresh 16*N-byte buffer per call costs page faults (large mallocs
 * are fresh mmaps). Freed by the key's destructor when the thread exits.
 * It holds slot values, which are secret on the client path (the client's
 * x) and after a decode: every user wipes it before returning, so between
 * calls it is all zeros (tsafe_encode_scratch_peek_ lets a test check). */
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;

typedef struct {
    fftw_complex *v;
    size_t n;
} fft_scratch;

static void scratch_free(void *p)
{
    fft_scratch *s = p;
    if (s) {
        sodium_memzero(s->v, s->n * sizeof *s->v);
        fftw_free(s->v);
        free(s);
    }
}

static void scratch_key_init(void)
{
    if (pthread_key_create(&g_scratch_key, scratch_free) != 0)
        g_scratch_key = 0;
}

/* Borrow n complex values of zeroed scratch for this thread, or NULL. */
static fftw_complex *scratch_get(size_t n)
{
    pthread_once(&g_scratch_once, scratch_key_init);
    fft_scratch *s = pthread_getspecific(g_scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(g_scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->n < n) {
        fftw_complex *v = fftw_malloc(n * sizeof *v);
        if (!v)
            return NULL;
        if (s->v) {
            sodium_memzero(s->v, s->n * sizeof *s->v);
            fftw_free(s->v);
        }
        s->v = v;
        s->n = n;
    }
    return s->v;
}

const void *tsafe_encode_scratch_peek_(size_t *bytes)
{
    pthread_once(&g_scratch_once, scratch_key_init);
    fft_scratch *s = pthread_getspecific(g_scratch_key);
    *bytes = s && s->v ? s->n * sizeof *s->v : 0;
    return s ? s->v : NULL;
}

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
        uint64_t mag = x >= 0 ? (uint64_t)x : (uint64_t)(-(x + 1)) + 1;
        for (uint32_t i = 0; i <= level; i++) {
            const tsafe_modulus *m = &c->mod[i];
            uint64_t r = mag < m->q ? mag : tsafe_reduce_128(mag, m);
            tsafe_limb(poly, c, i)[k] = x >= 0 ? r : tsafe_neg_mod(r, m->q);
        }
        return;
    }
    mpz_set_d(big, v);
    for (uint32_t i = 0; i <= level; i++)
        tsafe_limb(poly, c, i)[k] = mpz_fdiv_ui(big, c->mod[i].q);
}

/* Round to nearest (ties to even) without a libm call on the hot path:
 * adding 1.5*2^52 forces rounding at the units place for |x| < 2^51. */
static inline double round_fast(double x)
{
    if (fabs(x) < 0x1p51) {
        volatile double big = 0x1.8p52; /* volatile: keep the add/sub pair */
        return (x + big) - big;
    }
    return nearbyint(x);
}

/* log2 of half the modulus at a level: scaled values must stay below it. */
static double log2_half_q(const tsafe_context *c, uint32_t level)
{
    double l = -1.0;
    for (uint32_t i = 0; i <= level; i++)
        l += log2((double)c->mod[i].q);
    return l;
}

/* Encode into coefficient form (limbs 0..level of poly), no NTT. */
tsafe_status tsafe_encode_coeffs(const tsafe_context *ctx, const double *re,
                                 const double *im, size_t count, double scale,
                                 uint32_t level, uint64_t *poly)
{
    tsafe_status st = TSAFE_OK;
    TSAFE_REQUIRE(ctx && (re || count == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(count <= ctx->slots, TSAFE_E_RANGE);
    TSAFE_REQUIRE(level < ctx->n_data, TSAFE_E_LEVEL);
    TSAFE_REQUIRE(isfinite(scale) && scale >= 1.0, TSAFE_E_SCALE);
    size_t n = ctx->n;
    fftw_complex *v = scratch_get(n);
    TSAFE_REQUIRE(v, TSAFE_E_NOMEM);
    memset(v, 0, n * sizeof *v);
    for (size_t j = 0; j < count; j++) {
        double a = re[j], b = im ? im[j] : 0.0;
        if (!isfinite(a) || !isfinite(b)) {
            st = TSAFE_E_VALUE_RANGE;
            goto wipe;
        }
        size_t s = ctx->slot_index[j];
        v[s] = a + I * b;
        v[n - 1 - s] = a - I * b; /* zeta^-t = conj: index N-1-s */
    }
    fftw_execute_dft(ctx->fft_fwd, v, v); /* sign -1: sum v_s w^(-sk) */
    double limit = ldexp(1.0, (int)floor(log2_half_q(ctx, level)));
    double inv_n = scale / (double)n;
    mpz_t big;
    mpz_init(big);
    for (size_t k = 0; k < n; k++) {
        /* m_k = Re(v_k * zeta^-k) / N, times the scale */
        double x = (creal(v[k]) * creal(ctx->twist[k]) +
                    cimag(v[k]) * cimag(ctx->twist[k])) * inv_n;
        x = round_fast(x);
        if (!(fabs(x) < limit)) {
            st = TSAFE_E_VALUE_RANGE;
            break;
        }
        put_coeff(ctx, x, level, poly, k, big);
    }
    mpz_clear(big);
wipe:
    /* the buffer stays with the thread, its contents do not: they are the
     * slot values (x itself when a client encrypts) */
    sodium_memzero(v, n * sizeof *v);
    return st;
}

tsafe_status tsafe_ckks_encode_complex(const tsafe_context *ctx,
                                       const double *re, const double *im,
                                       size_t count, double scale,
                                       uint32_t level, tsafe_plaintext *pt)
{
    TSAFE_REQUIRE(ctx && pt, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx), TSAFE_E_PARAMS_MISMATCH);
    pt->valid = 0;
    tsafe_status st = tsafe_encode_coeffs(ctx, re, im, count, scale, level, pt->data);
    if (st != TSAFE_OK)
        return st;
    tsafe_poly_ntt(ctx, pt->data, level);
    pt->level = level;
    pt->scale = scale;
    pt->valid = 1;
    if (pt->shoup) { /* stale quotients: drop them */
        tsafe_poly_free(pt->shoup, ctx, ctx->n_data, 0);
        pt->shoup = NULL;
    }
    return TSAFE_OK;
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
    fftw_complex *v = scratch_get(n);
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
    if (v) /* decoded (possibly secret) values: wipe, keep the buffer */
        sodium_memzero(v, n * sizeof *v);
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
