/* Ciphertext objects, encryption (secret key with seeded `a`; public key)
 * and decryption (full, and the strided partial decryption used by readers
 * that need only a few coefficients). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ckks_internal.h"
#include "keys_internal.h"
#include "tsafe_check.h"
#include "../common/prng.h"

tsafe_status tsafe_ciphertext_create(const tsafe_context *ctx,
                                     tsafe_ciphertext **out)
{
    TSAFE_REQUIRE(ctx && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_ciphertext *ct = calloc(1, sizeof *ct);
    TSAFE_REQUIRE(ct, TSAFE_E_NOMEM);
    ct->ctx = ctx;
    ct->c0 = tsafe_poly_alloc(ctx, ctx->n_data);
    ct->c1 = tsafe_poly_alloc(ctx, ctx->n_data);
    if (!ct->c0 || !ct->c1) {
        tsafe_ciphertext_free(ct);
        return TSAFE_E_NOMEM;
    }
    *out = ct;
    return TSAFE_OK;
}

void tsafe_ciphertext_free(tsafe_ciphertext *ct)
{
    if (!ct)
        return;
    tsafe_poly_free(ct->c0, ct->ctx, ct->ctx->n_data, 0);
    tsafe_poly_free(ct->c1, ct->ctx, ct->ctx->n_data, 0);
    free(ct);
}

tsafe_status tsafe_ciphertext_copy(const tsafe_context *ctx,
                                   const tsafe_ciphertext *src,
                                   tsafe_ciphertext *dst)
{
    TSAFE_REQUIRE(ctx && src && dst, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, src->ctx) &&
                      tsafe_same_context(ctx, dst->ctx),
                  TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(src->valid, TSAFE_E_STATE);
    if (src == dst)
        return TSAFE_OK;
    size_t words = (size_t)(src->level + 1) * ctx->n * sizeof(uint64_t);
    memcpy(dst->c0, src->c0, words);
    memcpy(dst->c1, src->c1, words);
    dst->level = src->level;
    dst->scale = src->scale;
    dst->seeded = src->seeded;
    memcpy(dst->seed, src->seed, sizeof dst->seed);
    dst->valid = 1;
    return TSAFE_OK;
}

uint32_t tsafe_ciphertext_level(const tsafe_ciphertext *ct)
{
    return ct ? ct->level : 0;
}

double tsafe_ciphertext_scale(const tsafe_ciphertext *ct)
{
    return ct ? ct->scale : 0;
}

int tsafe_ciphertext_is_seeded(const tsafe_ciphertext *ct)
{
    return ct && ct->valid && ct->seeded;
}

static tsafe_status check_pt(const tsafe_context *ctx,
                             const tsafe_plaintext *pt)
{
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(pt->valid, TSAFE_E_STATE);
    TSAFE_REQUIRE(pt->level < ctx->n_data, TSAFE_E_LEVEL);
    return TSAFE_OK;
}

tsafe_status tsafe_ckks_encrypt_symmetric(const tsafe_context *ctx,
                                          const tsafe_secret_key *sk,
                                          const tsafe_plaintext *pt,
                                          const uint8_t *seed,
                                          tsafe_ciphertext *ct)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && sk && pt && ct, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, sk->ctx) &&
                      tsafe_same_context(ctx, ct->ctx),
                  TSAFE_E_PARAMS_MISMATCH);
    st = check_pt(ctx, pt);
    if (st != TSAFE_OK)
        return st;
    uint8_t root[32], e_seed[32];
    uint32_t level = pt->level;
    ct->valid = 0;
    TSAFE_TRY(tsafe_seed_or_fresh(seed, root));
    /* the `a` seed travels with the ciphertext; the error seed never does */
    tsafe_seed_derive(ct->seed, root, "tensafe ct a");
    tsafe_seed_derive(e_seed, root, "tensafe ct e");
    tsafe_expand_uniform_ntt(ctx, ct->seed, level, ct->c1);
    TSAFE_TRY(tsafe_sample_error_ntt(ctx, e_seed, 3, level, ct->c0));
    for (uint32_t i = 0; i <= level; i++) {
        uint64_t q = ctx->mod[i].q;
        uint64_t *c0 = tsafe_limb(ct->c0, ctx, i);
        const uint64_t *a = tsafe_climb(ct->c1, ctx, i);
        const uint64_t *s = tsafe_climb(sk->s_ntt, ctx, i);
        const uint64_t *sp = tsafe_climb(sk->s_shoup, ctx, i);
        const uint64_t *mm = tsafe_climb(pt->data, ctx, i);
        for (size_t k = 0; k < ctx->n; k++) {
            uint64_t v = tsafe_add_mod(c0[k], mm[k], q);
            c0[k] = tsafe_sub_mod(v, tsafe_mul_shoup(a[k], s[k], sp[k], q), q);
        }
    }
    ct->level = level;
    ct->scale = pt->scale;
    ct->seeded = 1;
    ct->valid = 1;
fail:
    sodium_memzero(root, sizeof root);
    sodium_memzero(e_seed, sizeof e_seed);
    return st;
}

tsafe_status tsafe_ckks_encrypt_public(const tsafe_context *ctx,
                                       const tsafe_public_key *pk,
                                       const tsafe_plaintext *pt,
                                       const uint8_t *seed,
                                       tsafe_ciphertext *ct)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && pk && pt && ct, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pk->ctx) &&
                      tsafe_same_context(ctx, ct->ctx),
                  TSAFE_E_PARAMS_MISMATCH);
    st = check_pt(ctx, pt);
    if (st != TSAFE_OK)
        return st;
    uint8_t root[32], u_seed[32], e_seed[32];
    uint32_t level = pt->level;
    int8_t *u = malloc(ctx->n);
    uint64_t *u_ntt = tsafe_poly_alloc(ctx, level + 1);
    ct->valid = 0;
    TSAFE_CHECK(u && u_ntt, TSAFE_E_NOMEM);
    TSAFE_TRY(tsafe_seed_or_fresh(seed, root));
    tsafe_seed_derive(u_seed, root, "tensafe pk-enc u");
    tsafe_seed_derive(e_seed, root, "tensafe pk-enc e");
    tsafe_prng p;
    tsafe_prng_init(&p, u_seed, 4);
    tsafe_prng_ternary(&p, u, ctx->n);
    tsafe_prng_clear(&p);
    tsafe_small_to_ntt(ctx, u, level, u_ntt);
    TSAFE_TRY(tsafe_sample_error_ntt(ctx, e_seed, 5, level, ct->c0));
    TSAFE_TRY(tsafe_sample_error_ntt(ctx, e_seed, 6, level, ct->c1));
    for (uint32_t i = 0; i <= level; i++) {
        const tsafe_modulus *m = &ctx->mod[i];
        uint64_t *c0 = tsafe_limb(ct->c0, ctx, i);
        uint64_t *c1 = tsafe_limb(ct->c1, ctx, i);
        const uint64_t *uu = tsafe_climb(u_ntt, ctx, i);
        const uint64_t *p0 = tsafe_climb(pk->p0, ctx, i);
        const uint64_t *p1 = tsafe_climb(pk->p1, ctx, i);
        const uint64_t *mm = tsafe_climb(pt->data, ctx, i);
        for (size_t k = 0; k < ctx->n; k++) {
            uint64_t v = tsafe_add_mod(c0[k], mm[k], m->q);
            c0[k] = tsafe_add_mod(v, tsafe_mul_mod(p0[k], uu[k], m), m->q);
            c1[k] = tsafe_add_mod(c1[k], tsafe_mul_mod(p1[k], uu[k], m), m->q);
        }
    }
    ct->level = level;
    ct->scale = pt->scale;
    ct->seeded = 0;
    ct->valid = 1;
fail:
    sodium_memzero(root, sizeof root);
    sodium_memzero(u_seed, sizeof u_seed);
    sodium_memzero(e_seed, sizeof e_seed);
    if (u) {
        sodium_memzero(u, ctx->n);
        free(u);
    }
    if (u_ntt)
        tsafe_poly_free(u_ntt, ctx, level + 1, 1);
    return st;
}

tsafe_status tsafe_ckks_encrypt_values_symmetric(
    const tsafe_context *ctx, const tsafe_secret_key *sk, const double *re,
    const double *im, size_t count, double scale, uint32_t level,
    const uint8_t *seed, tsafe_ciphertext *ct)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && sk && ct, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, sk->ctx) &&
                      tsafe_same_context(ctx, ct->ctx),
                  TSAFE_E_PARAMS_MISMATCH);
    uint8_t root[32], e_seed[32];
    int8_t *e = malloc(ctx->n);
    ct->valid = 0;
    TSAFE_CHECK(e, TSAFE_E_NOMEM);
    TSAFE_TRY(tsafe_encode_coeffs(ctx, re, im, count, scale, level, ct->c0));
    TSAFE_TRY(tsafe_seed_or_fresh(seed, root));
    tsafe_seed_derive(ct->seed, root, "tensafe ct a");
    tsafe_seed_derive(e_seed, root, "tensafe ct e");
    tsafe_prng p;
    tsafe_prng_init(&p, e_seed, 3); /* the same error stream as encrypt_symmetric */
    tsafe_prng_cbd(&p, e, ctx->n);
    tsafe_prng_clear(&p);
    tsafe_expand_uniform_ntt(ctx, ct->seed, level, ct->c1);
    for (uint32_t i = 0; i <= level; i++) {
        uint64_t q = ctx->mod[i].q;
        uint64_t *c0 = tsafe_limb(ct->c0, ctx, i);
        /* m + e in coefficient form: one NTT per limb instead of two */
        for (size_t k = 0; k < ctx->n; k++)
            c0[k] = tsafe_add_mod(c0[k], e[k] >= 0 ? (uint64_t)e[k] : q - (uint64_t)(-e[k]), q);
        tsafe_ntt_forward(&ctx->ntt[i], c0);
        const uint64_t *a = tsafe_climb(ct->c1, ctx, i);
        const uint64_t *s = tsafe_climb(sk->s_ntt, ctx, i);
        const uint64_t *sp = tsafe_climb(sk->s_shoup, ctx, i);
        for (size_t k = 0; k < ctx->n; k++)
            c0[k] = tsafe_sub_mod(c0[k], tsafe_mul_shoup(a[k], s[k], sp[k], q), q);
    }
    ct->level = level;
    ct->scale = scale;
    ct->seeded = 1;
    ct->valid = 1;
fail:
    /* a failure after encoding leaves m (the caller's values, scaled) in
     * c0 in the clear: wipe what may have been written */
    if (st != TSAFE_OK && level < ctx->n_data)
        sodium_memzero(ct->c0, (size_t)(level + 1) * ctx->n * sizeof *ct->c0);
    sodium_memzero(root, sizeof root);
    sodium_memzero(e_seed, sizeof e_seed);
    if (e) {
        sodium_memzero(e, ctx->n);
        free(e);
    }
    return st;
}

static tsafe_status check_decrypt(const tsafe_context *ctx,
                                  const tsafe_secret_key *sk,
                                  const tsafe_ciphertext *ct)
{
    TSAFE_REQUIRE(ctx && sk && ct, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, sk->ctx) &&
                      tsafe_same_context(ctx, ct->ctx),
                  TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(ct->valid, TSAFE_E_STATE);
    return TSAFE_OK;
}

tsafe_status tsafe_ckks_decrypt(const tsafe_context *ctx,
                                const tsafe_secret_key *sk,
                                const tsafe_ciphertext *ct,
                                tsafe_plaintext *pt)
{
    tsafe_status st = check_decrypt(ctx, sk, ct);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(pt, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx), TSAFE_E_PARAMS_MISMATCH);
    for (uint32_t i = 0; i <= ct->level; i++) {
        uint64_t q = ctx->mod[i].q;
        uint64_t *o = tsafe_limb(pt->data, ctx, i);
        const uint64_t *c0 = tsafe_climb(ct->c0, ctx, i);
        const uint64_t *c1 = tsafe_climb(ct->c1, ctx, i);
        tsafe_vec_mul_shoup(o, c1, tsafe_climb(sk->s_ntt, ctx, i),
                            tsafe_climb(sk->s_shoup, ctx, i), ctx->n, q);
        tsafe_vec_add(o, o, c0, ctx->n, q);
    }
    if (pt->shoup) {
        tsafe_poly_free(pt->shoup, ctx, ctx->n_data, 0);
        pt->shoup = NULL;
    }
    pt->level = ct->level;
    pt->scale = ct->scale;
    pt->valid = 1;
    return TSAFE_OK;
}

static uint32_t bitrev(uint32_t x, uint32_t bits)
{
    uint32_t r = 0;
    for (uint32_t i = 0; i < bits; i++)
        r |= ((x >> i) & 1u) << (bits - 1 - i);
    return r;
}

/* m[k*S] = psi^(-kS)/N * sum_r F_r * psi^(-2S r k), where F_r sums the NTT
 * values whose natural index j has j mod K = r (K = N/S). With the
 * bit-reversed NTT order those are the N/K contiguous entries of block
 * bitrev_K(r). One pointwise product per limb plus an O(K^2) tail. */
tsafe_status tsafe_ckks_decrypt_coeffs_strided(const tsafe_context *ctx,
                                               const tsafe_secret_key *sk,
                                               const tsafe_ciphertext *ct,
                                               size_t stride, double *out,
                                               size_t count)
{
    tsafe_status st = check_decrypt(ctx, sk, ct);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    if ((st = tsafe_decrypt_strided_check(ctx, stride, count)) != TSAFE_OK)
        return st;
    return tsafe_decrypt_strided_words(ctx, sk, ct->c0, ct->c1, ct->level, ct->scale,
                                       stride, out);
}

tsafe_status tsafe_decrypt_strided_check(const tsafe_context *ctx, size_t stride,
                                         size_t count)
{
    size_t n = ctx->n;
    TSAFE_REQUIRE(stride >= 1 && stride <= n && (stride & (stride - 1)) == 0,
                  TSAFE_E_ARG);
    TSAFE_REQUIRE(count == n / stride, TSAFE_E_RANGE);
    return TSAFE_OK;
}

tsafe_status tsafe_decrypt_strided_words(const tsafe_context *ctx,
                                         const tsafe_secret_key *sk,
                                         const uint64_t *c0p, const uint64_t *c1p,
                                         uint32_t level, double scale, size_t stride,
                                         double *out)
{
    tsafe_status st = TSAFE_OK;
    size_t n = ctx->n;
    size_t K = n / stride, block = n / K;
    uint32_t log_k = (uint32_t)__builtin_ctzll(K);
    uint64_t *res = calloc((size_t)(level + 1) * K, sizeof *res);
    uint64_t *fold = calloc(K, sizeof *fold);
    TSAFE_CHECK(res && fold, TSAFE_E_NOMEM);
    for (uint32_t i = 0; i <= level; i++) {
        const tsafe_modulus *m = &ctx->mod[i];
        uint64_t q = m->q;
        const uint64_t *c0 = tsafe_climb(c0p, ctx, i);
        const uint64_t *c1 = tsafe_climb(c1p, ctx, i);
        const uint64_t *s = tsafe_climb(sk->s_ntt, ctx, i);
        const uint64_t *sp = tsafe_climb(sk->s_shoup, ctx, i);
        for (size_t b = 0; b < K; b++) {
            /* lazy: each term < 3q < 2^63, summed in 128 bits, reduced once */
            tsafe_u128 acc = 0;
            size_t base = b * block;
            for (size_t k = 0; k < block; k++)
                acc += c0[base + k] +
                       tsafe_mul_shoup_lazy(c1[base + k], s[base + k], sp[base + k], q);
            fold[bitrev((uint32_t)b, log_k)] = tsafe_reduce_128(acc, m); /* acc < N*3q < q*2^64 */
        }
        uint64_t psi_inv = tsafe_inv_mod(ctx->ntt[i].psi, m);
        uint64_t w = tsafe_pow_mod(psi_inv, 2 * stride, m); /* order K */
        uint64_t n_inv = tsafe_inv_mod(n % q, m);
        uint64_t pre = n_inv;                               /* psi^-kS / N */
        uint64_t step = tsafe_pow_mod(psi_inv, stride, m);
        for (size_t k = 0; k < K; k++) {
            uint64_t wk = tsafe_pow_mod(w, k, m), wr = 1, acc = 0;
            for (size_t r = 0; r < K; r++) {
                acc = tsafe_add_mod(acc, tsafe_mul_mod(fold[r], wr, m), q);
                wr = tsafe_mul_mod(wr, wk, m);
            }
            res[k * (level + 1) + i] = tsafe_mul_mod(acc, pre, m);
            pre = tsafe_mul_mod(pre, step, m);
        }
    }
    for (size_t k = 0; k < K; k++)
        out[k] = tsafe_crt_to_double(ctx, res + k * (level + 1), level) / scale;
fail:
    if (res) {
        sodium_memzero(res, (size_t)(level + 1) * K * sizeof *res);
        free(res);
    }
    if (fold) {
        sodium_memzero(fold, K * sizeof *fold);
        free(fold);
    }
    return st;
}
