/* Homomorphic evaluation: add/sub/negate, plaintext add and multiply,
 * constant multiply, rescale, level drop. Every call checks context, level
 * and scale and reports a mismatch as a status. All data stays in NTT form;
 * only rescale transforms (one limb inverse, the others forward). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckks_internal.h"
#include "tsafe_check.h"

static int scales_match(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

static tsafe_status check_ct(const tsafe_context *ctx,
                             const tsafe_ciphertext *ct)
{
    TSAFE_REQUIRE(ct, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, ct->ctx), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(ct->valid, TSAFE_E_STATE);
    return TSAFE_OK;
}

static tsafe_status check_out(const tsafe_context *ctx, tsafe_ciphertext *out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, out->ctx), TSAFE_E_PARAMS_MISMATCH);
    return TSAFE_OK;
}

static tsafe_status check_binary(const tsafe_context *ctx,
                                 const tsafe_ciphertext *a,
                                 const tsafe_ciphertext *b,
                                 tsafe_ciphertext *out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx, TSAFE_E_NULL);
    if ((st = check_ct(ctx, a)) || (st = check_ct(ctx, b)) ||
        (st = check_out(ctx, out)))
        return st;
    TSAFE_REQUIRE(a->level == b->level, TSAFE_E_LEVEL);
    TSAFE_REQUIRE(scales_match(a->scale, b->scale), TSAFE_E_SCALE);
    return TSAFE_OK;
}

static void finish(tsafe_ciphertext *out, uint32_t level, double scale,
                   int seeded)
{
    out->level = level;
    out->scale = scale;
    out->seeded = seeded;
    out->valid = 1;
}

typedef enum { OP_ADD, OP_SUB } addsub;

static tsafe_status add_sub(const tsafe_context *ctx,
                            const tsafe_ciphertext *a,
                            const tsafe_ciphertext *b, tsafe_ciphertext *out,
                            addsub op)
{
    tsafe_status st = check_binary(ctx, a, b, out);
    if (st != TSAFE_OK)
        return st;
    for (uint32_t i = 0; i <= a->level; i++) {
        uint64_t q = ctx->mod[i].q;
        const uint64_t *x[2] = {tsafe_climb(a->c0, ctx, i), tsafe_climb(a->c1, ctx, i)};
        const uint64_t *y[2] = {tsafe_climb(b->c0, ctx, i), tsafe_climb(b->c1, ctx, i)};
        uint64_t *o[2] = {tsafe_limb(out->c0, ctx, i), tsafe_limb(out->c1, ctx, i)};
        for (int p = 0; p < 2; p++) {
            if (op == OP_ADD)
                tsafe_vec_add(o[p], x[p], y[p], ctx->n, q);
            else
                tsafe_vec_sub(o[p], x[p], y[p], ctx->n, q);
        }
    }
    finish(out, a->level, a->scale, 0);
    return TSAFE_OK;
}

tsafe_status tsafe_ckks_add(const tsafe_context *ctx, const tsafe_ciphertext *a,
                            const tsafe_ciphertext *b, tsafe_ciphertext *out)
{
    return add_sub(ctx, a, b, out, OP_ADD);
}

tsafe_status tsafe_ckks_sub(const tsafe_context *ctx, const tsafe_ciphertext *a,
                            const tsafe_ciphertext *b, tsafe_ciphertext *out)
{
    return add_sub(ctx, a, b, out, OP_SUB);
}

tsafe_status tsafe_ckks_negate(const tsafe_context *ctx,
                               const tsafe_ciphertext *a, tsafe_ciphertext *out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx, TSAFE_E_NULL);
    if ((st = check_ct(ctx, a)) || (st = check_out(ctx, out)))
        return st;
    for (uint32_t i = 0; i <= a->level; i++) {
        uint64_t q = ctx->mod[i].q;
        tsafe_vec_neg(tsafe_limb(out->c0, ctx, i), tsafe_climb(a->c0, ctx, i), ctx->n, q);
        tsafe_vec_neg(tsafe_limb(out->c1, ctx, i), tsafe_climb(a->c1, ctx, i), ctx->n, q);
    }
    finish(out, a->level, a->scale, 0);
    return TSAFE_OK;
}

static tsafe_status check_plain(const tsafe_context *ctx,
                                const tsafe_ciphertext *a,
                                const tsafe_plaintext *p,
                                tsafe_ciphertext *out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && p, TSAFE_E_NULL);
    if ((st = check_ct(ctx, a)) || (st = check_out(ctx, out)))
        return st;
    TSAFE_REQUIRE(tsafe_same_context(ctx, p->ctx), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(p->valid, TSAFE_E_STATE);
    TSAFE_REQUIRE(p->level >= a->level, TSAFE_E_LEVEL);
    return TSAFE_OK;
}

tsafe_status tsafe_ckks_add_plain(const tsafe_context *ctx,
                                  const tsafe_ciphertext *a,
                                  const tsafe_plaintext *p,
                                  tsafe_ciphertext *out)
{
    tsafe_status st = check_plain(ctx, a, p, out);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(scales_match(a->scale, p->scale), TSAFE_E_SCALE);
    size_t words = (size_t)(a->level + 1) * ctx->n;
    if (out != a)
        memcpy(out->c1, a->c1, words * sizeof(uint64_t));
    for (uint32_t i = 0; i <= a->level; i++)
        tsafe_vec_add(tsafe_limb(out->c0, ctx, i), tsafe_climb(a->c0, ctx, i),
                      tsafe_climb(p->data, ctx, i), ctx->n, ctx->mod[i].q);
    /* c1 untouched: a seeded `a` stays valid */
    int seeded = a->seeded;
    if (out != a)
        memcpy(out->seed, a->seed, sizeof out->seed);
    finish(out, a->level, a->scale, seeded);
    return TSAFE_OK;
}

tsafe_status tsafe_ckks_mul_plain(const tsafe_context *ctx,
                                  const tsafe_ciphertext *a,
                                  const tsafe_plaintext *p,
                                  tsafe_ciphertext *out)
{
    tsafe_status st = check_plain(ctx, a, p, out);
    if (st != TSAFE_OK)
        return st;
    double scale = a->scale * p->scale;
    TSAFE_REQUIRE(isfinite(scale), TSAFE_E_SCALE);
    for (uint32_t i = 0; i <= a->level; i++) {
        const tsafe_modulus *m = &ctx->mod[i];
        const uint64_t *w = tsafe_climb(p->data, ctx, i);
        uint64_t *o0 = tsafe_limb(out->c0, ctx, i), *o1 = tsafe_limb(out->c1, ctx, i);
        const uint64_t *x0 = tsafe_climb(a->c0, ctx, i), *x1 = tsafe_climb(a->c1, ctx, i);
        if (p->shoup) {
            const uint64_t *wp = tsafe_climb(p->shoup, ctx, i);
            tsafe_vec_mul_shoup(o0, x0, w, wp, ctx->n, m->q);
            tsafe_vec_mul_shoup(o1, x1, w, wp, ctx->n, m->q);
        } else {
            tsafe_vec_mul(o0, x0, w, ctx->n, m);
            tsafe_vec_mul(o1, x1, w, ctx->n, m);
        }
    }
    finish(out, a->level, scale, 0);
    return TSAFE_OK;
}

tsafe_status tsafe_ckks_mul_const(const tsafe_context *ctx,
                                  const tsafe_ciphertext *a, double value,
                                  double const_scale, tsafe_ciphertext *out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx, TSAFE_E_NULL);
    if ((st = check_ct(ctx, a)) || (st = check_out(ctx, out)))
        return st;
    TSAFE_REQUIRE(isfinite(value) && isfinite(const_scale) && const_scale >= 1.0,
                  TSAFE_E_ARG);
    double v = nearbyint(value * const_scale);
    TSAFE_REQUIRE(fabs(v) < 4.6e18, TSAFE_E_VALUE_RANGE);
    double scale = a->scale * const_scale;
    TSAFE_REQUIRE(isfinite(scale), TSAFE_E_SCALE);
    int64_t c = (int64_t)v;
    for (uint32_t i = 0; i <= a->level; i++) {
        uint64_t q = ctx->mod[i].q;
        uint64_t r = c >= 0 ? (uint64_t)c % q : q - 1 - (uint64_t)(-(c + 1)) % q;
        tsafe_vec_mul_scalar(tsafe_limb(out->c0, ctx, i), tsafe_climb(a->c0, ctx, i), r, ctx->n, q);
        tsafe_vec_mul_scalar(tsafe_limb(out->c1, ctx, i), tsafe_climb(a->c1, ctx, i), r, ctx->n, q);
    }
    finish(out, a->level, scale, 0);
    return TSAFE_OK;
}

tsafe_status tsafe_ckks_rescale(const tsafe_context *ctx,
                                const tsafe_ciphertext *a, tsafe_ciphertext *out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx, TSAFE_E_NULL);
    if ((st = check_ct(ctx, a)) || (st = check_out(ctx, out)))
        return st;
    TSAFE_REQUIRE(a->level > 0, TSAFE_E_LEVEL);
    uint64_t *scratch = malloc(2 * ctx->n * sizeof *scratch);
    TSAFE_REQUIRE(scratch, TSAFE_E_NOMEM);
    uint32_t level = a->level;
    double scale = a->scale / (double)ctx->mod[level].q;
    /* in place is safe: limb i of the output only reads limb i and limb l */
    tsafe_poly_rescale(ctx, a->c0, level, out->c0, scratch);
    tsafe_poly_rescale(ctx, a->c1, level, out->c1, scratch);
    free(scratch);
    finish(out, level - 1, scale, 0);
    return TSAFE_OK;
}

tsafe_status tsafe_ckks_drop_to_level(const tsafe_context *ctx,
                                      const tsafe_ciphertext *a,
                                      uint32_t level, tsafe_ciphertext *out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx, TSAFE_E_NULL);
    if ((st = check_ct(ctx, a)) || (st = check_out(ctx, out)))
        return st;
    TSAFE_REQUIRE(level <= a->level, TSAFE_E_LEVEL);
    if (out != a) {
        size_t words = (size_t)(level + 1) * ctx->n * sizeof(uint64_t);
        memcpy(out->c0, a->c0, words);
        memcpy(out->c1, a->c1, words);
        memcpy(out->seed, a->seed, sizeof out->seed);
    }
    /* limbs of a seeded `a` are expanded independently: the seed still
     * describes the remaining limbs */
    finish(out, level, a->scale, a->seeded);
    return TSAFE_OK;
}
