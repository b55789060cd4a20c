/* Adapter sites: ZeRo-MOAI packing of A into plaintexts, encoding of x, and
 * the trace read that turns 2*cols decrypted coefficients into u. */
#include <complex.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <sodium.h>

#include "he_internal.h"
#include "../engine/engine_internal.h"

/* slot of copy c, position t: c + cols * t */
static size_t slot_of(const tsafe_lora_plan *p, uint32_t c, uint32_t t)
{
    return (size_t)c + (size_t)p->cols * t;
}

static tsafe_status encode_rows(const tsafe_context *ctx,
                                const tsafe_lora_plan *p, const float *A,
                                uint32_t batch, double *re, double *im,
                                tsafe_plaintext *pt)
{
    size_t slots = tsafe_context_slots(ctx);
    memset(re, 0, slots * sizeof *re);
    memset(im, 0, slots * sizeof *im);
    for (uint32_t c = 0; c < p->cols; c++) {
        uint32_t row = batch * p->cols + c;
        if (row >= p->rank)
            break;
        const float *a = A + (size_t)row * p->d_in;
        for (uint32_t t = 0; t < p->half; t++) {
            size_t s = slot_of(p, c, t);
            re[s] = a[t];
            /* conjugate packing: Re((x_t + i x_t+h)(a_t - i a_t+h)) */
            im[s] = t + p->half < p->d_in ? -(double)a[t + p->half] : 0.0;
        }
    }
    return tsafe_ckks_encode_complex(ctx, re, im, slots, p->scale_a, p->level, pt);
}

tsafe_status tsafe_lora_encrypt_x(const tsafe_context *ctx,
                                  const tsafe_lora_plan *p,
                                  const tsafe_secret_key *sk, const float *x,
                                  double *re, double *im, tsafe_ciphertext *ct)
{
    size_t slots = tsafe_context_slots(ctx);
    /* a plan is a plain struct the caller may have edited: the packing
     * must fit the slots before anything is written */
    if (p->cols == 0 || p->half != ((uint64_t)p->d_in + 1) / 2 ||
        (uint64_t)p->cols * p->half > slots)
        return TSAFE_E_PARAMS_MISMATCH;
    for (uint32_t i = 0; i < p->d_in; i++)
        if (!(fabsf(x[i]) <= p->max_abs_x))
            return TSAFE_E_VALUE_RANGE; /* also refuses NaN */
    memset(re, 0, slots * sizeof *re);
    memset(im, 0, slots * sizeof *im);
    for (uint32_t t = 0; t < p->half; t++) {
        double r = x[t], m = t + p->half < p->d_in ? x[t + p->half] : 0.0;
        for (uint32_t c = 0; c < p->cols; c++) {
            size_t s = slot_of(p, c, t);
            re[s] = r;
            im[s] = m;
        }
    }
    tsafe_status st = tsafe_ckks_encrypt_values_symmetric(ctx, sk, re, im, slots,
                                                          p->scale_x, p->level, NULL, ct);
    /* re/im are the packed x: wipe on every exit (64 KiB at N = 16384,
     * noise next to one encryption) */
    sodium_memzero(re, slots * sizeof *re);
    sodium_memzero(im, slots * sizeof *im);
    return st;
}

double tsafe_lora_response_scale(const tsafe_context *ctx, const tsafe_lora_plan *p)
{
    double scale = p->scale_x * p->scale_a;
    for (uint32_t l = p->level; l > p->response_level; l--)
        scale = scale / (double)tsafe_context_prime(ctx, l); /* as tsafe_ckks_rescale */
    return scale;
}

size_t tsafe_lora_read_stride(const tsafe_context *ctx, const tsafe_lora_plan *p)
{
    return tsafe_context_n(ctx) / (2 * (size_t)p->cols);
}

/* u_(b cols + c) = Re( (slots/cols) sum_k y_k zeta^(5^c k L) ), where
 * zeta^L = exp(i pi / K), K = 2 cols: the exponent is (5^c k) mod 2K. */
void tsafe_lora_read_batch(const tsafe_context *ctx, const tsafe_lora_plan *p,
                           uint32_t batch, const double *y, float *u)
{
    uint32_t K = 2 * p->cols;
    double h = (double)tsafe_context_slots(ctx) / p->cols;
    uint32_t g = 1; /* 5^c mod 2K */
    for (uint32_t c = 0; c < p->cols; c++) {
        uint32_t row = batch * p->cols + c;
        if (row < p->rank) {
            double acc = 0;
            for (uint32_t k = 0; k < K; k++) {
                uint32_t e = (uint32_t)(((uint64_t)g * k) % (2 * K));
                acc += y[k] * cos(M_PI * (double)e / (double)K);
            }
            u[row] = (float)(h * acc);
        }
        g = (uint32_t)(((uint64_t)g * 5) % (2 * K));
    }
}

const tsafe_lora_module *tsafe_lora_site_module(const tsafe_lora_site *site)
{
    return site ? site->module : NULL;
}

void tsafe_lora_apply_b(const tsafe_lora_site *site, const float *u, float *delta)
{
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)site->d_out, (int)site->plan.rank,
                site->scale, site->B, (int)site->plan.rank, u, 1, 0.0f, delta, 1);
}

/* Site ids: never reused (an address may be, after a free). */
static _Atomic uint64_t next_site_id = 1;

tsafe_status tsafe_lora_site_create(const tsafe_context *ctx,
                                    const tsafe_lora_plan *plan, const float *A,
                                    const float *B, uint32_t d_out, float scale,
                                    tsafe_lora_site **out)
{
    if (!ctx || !plan || !A || !B || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (d_out == 0 || d_out > (1u << 24) || !isfinite(scale))
        return TSAFE_E_ARG;
    if (tsafe_context_params(ctx)->log_n != plan->params.log_n ||
        plan->level > tsafe_context_max_level(ctx) || plan->cols == 0 ||
        plan->n_batches != (plan->rank + plan->cols - 1) / plan->cols ||
        plan->half != ((uint64_t)plan->d_in + 1) / 2 ||
        (uint64_t)plan->cols * plan->half > tsafe_context_slots(ctx))
        return TSAFE_E_PARAMS_MISMATCH;
    size_t na = (size_t)plan->rank * plan->d_in, nb = (size_t)d_out * plan->rank;
    for (size_t i = 0; i < na; i++)
        if (!(fabsf(A[i]) <= plan->max_abs_a))
            return TSAFE_E_VALUE_RANGE;
    for (size_t i = 0; i < nb; i++)
        if (!isfinite(B[i]))
            return TSAFE_E_VALUE_RANGE;
    tsafe_status st = TSAFE_E_NOMEM;
    size_t slots = tsafe_context_slots(ctx);
    double *re = malloc(slots * sizeof *re), *im = malloc(slots * sizeof *im);
    tsafe_lora_site *s = calloc(1, sizeof *s);
    if (!re || !im || !s)
        goto fail;
    s->id = atomic_fetch_add(&next_site_id, 1);
    s->ctx = ctx;
    s->plan = *plan;
    s->d_out = d_out;
    s->scale = scale;
    if ((st = tsafe_lora_module_create(A, B, plan->rank, plan->d_in, d_out, scale,
                                       &s->module)) != TSAFE_OK)
        goto fail;
    st = TSAFE_E_NOMEM;
    s->A = tsafe_lora_module_A(s->module);
    s->B = tsafe_lora_module_B(s->module);
    s->pts = calloc(plan->n_batches, sizeof *s->pts);
    if (!s->pts)
        goto fail;
    for (uint32_t b = 0; b < plan->n_batches; b++) {
        if ((st = tsafe_plaintext_create(ctx, &s->pts[b])) != TSAFE_OK ||
            (st = encode_rows(ctx, plan, A, b, re, im, s->pts[b])) != TSAFE_OK ||
            (st = tsafe_plaintext_prepare_mul(ctx, s->pts[b])) != TSAFE_OK)
            goto fail;
    }
    free(re);
    free(im);
    *out = s;
    return TSAFE_OK;
fail:
    free(re);
    free(im);
    tsafe_lora_site_free(s);
    return st;
}

void tsafe_lora_site_free(tsafe_lora_site *s)
{
    if (!s)
        return;
    if (s->pts)
        for (uint32_t b = 0; b < s->plan.n_batches; b++)
            tsafe_plaintext_free(s->pts[b]);
    free(s->pts);
    tsafe_lora_module_free(s->module);
    free(s);
}

uint32_t tsafe_lora_site_d_out(const tsafe_lora_site *s) { return s ? s->d_out : 0; }
uint32_t tsafe_lora_site_rank(const tsafe_lora_site *s) { return s ? s->plan.rank : 0; }

tsafe_status tsafe_lora_site_plain_delta(const tsafe_lora_site *s, const float *x,
                                         float *delta)
{
    if (!s || !x || !delta)
        return TSAFE_E_NULL;
    float *u = malloc(s->plan.rank * sizeof *u);
    if (!u)
        return TSAFE_E_NOMEM;
    tsafe_lora_plain_delta_(s->A, s->B, s->plan.rank, s->plan.d_in, s->d_out, s->scale, x, u,
                            delta);
    free(u);
    return TSAFE_OK;
}
