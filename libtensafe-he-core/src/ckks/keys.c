/* Key generation: uniform ternary secret, RLWE public key. All randomness
 * is expanded from a 32-byte seed (fresh from the CSPRNG unless a test gives
 * one) through labelled sub-seeds. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ckks_internal.h"
#include "keys_internal.h"
#include "tsafe_check.h"
#include "../common/prng.h"

tsafe_status tsafe_seed_or_fresh(const uint8_t *seed, uint8_t out[32])
{
    if (seed) {
        memcpy(out, seed, 32);
        return TSAFE_OK;
    }
    return tsafe_seed_fresh(out);
}

void tsafe_expand_uniform_ntt(const tsafe_context *c, const uint8_t seed[32],
                              uint32_t level, uint64_t *out)
{
    tsafe_prng p;
    for (uint32_t i = 0; i <= level; i++) {
        tsafe_prng_init(&p, seed, 0x100 + i);
        tsafe_prng_uniform_mod(&p, c->mod[i].q, tsafe_limb(out, c, i), c->n);
    }
    tsafe_prng_clear(&p);
}

void tsafe_small_to_ntt(const tsafe_context *c, const int8_t *small,
                        uint32_t level, uint64_t *out)
{
    for (uint32_t i = 0; i <= level; i++) {
        uint64_t q = c->mod[i].q;
        uint64_t *o = tsafe_limb(out, c, i);
        for (size_t k = 0; k < c->n; k++)
            o[k] = small[k] >= 0 ? (uint64_t)small[k] : q - (uint64_t)(-small[k]);
        tsafe_ntt_forward(&c->ntt[i], o);
    }
}

tsafe_status tsafe_sample_error_ntt(const tsafe_context *c,
                                    const uint8_t seed[32], uint64_t stream,
                                    uint32_t level, uint64_t *out)
{
    int8_t *e = malloc(c->n);
    TSAFE_REQUIRE(e, TSAFE_E_NOMEM);
    tsafe_prng p;
    tsafe_prng_init(&p, seed, stream);
    tsafe_prng_cbd(&p, e, c->n);
    tsafe_prng_clear(&p);
    tsafe_small_to_ntt(c, e, level, out);
    sodium_memzero(e, c->n);
    free(e);
    return TSAFE_OK;
}

tsafe_status tsafe_secret_key_alloc(const tsafe_context *ctx,
                                    tsafe_secret_key **out)
{
    tsafe_secret_key *sk = calloc(1, sizeof *sk);
    TSAFE_REQUIRE(sk, TSAFE_E_NOMEM);
    sk->ctx = ctx;
    sk->s = calloc(ctx->n, 1);
    sk->s_ntt = tsafe_poly_alloc(ctx, ctx->n_data);
    sk->s_shoup = tsafe_poly_alloc(ctx, ctx->n_data);
    if (!sk->s || !sk->s_ntt || !sk->s_shoup) {
        tsafe_secret_key_free(sk);
        return TSAFE_E_NOMEM;
    }
    *out = sk;
    return TSAFE_OK;
}

void tsafe_secret_key_finish(const tsafe_context *ctx, tsafe_secret_key *sk)
{
    tsafe_small_to_ntt(ctx, sk->s, ctx->n_data - 1, sk->s_ntt);
    for (uint32_t i = 0; i < ctx->n_data; i++)
        tsafe_vec_shoup_precompute(tsafe_limb(sk->s_shoup, ctx, i),
                                   tsafe_climb(sk->s_ntt, ctx, i), ctx->n,
                                   ctx->mod[i].q);
}

tsafe_status tsafe_secret_key_generate(const tsafe_context *ctx,
                                       const uint8_t *seed,
                                       tsafe_secret_key **out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && out, TSAFE_E_NULL);
    *out = NULL;
    uint8_t root[32], s_seed[32];
    tsafe_secret_key *sk = NULL;
    TSAFE_TRY(tsafe_seed_or_fresh(seed, root));
    TSAFE_TRY(tsafe_secret_key_alloc(ctx, &sk));
    tsafe_seed_derive(s_seed, root, "tensafe sk");
    tsafe_prng p;
    tsafe_prng_init(&p, s_seed, 1);
    tsafe_prng_ternary(&p, sk->s, ctx->n);
    tsafe_prng_clear(&p);
    tsafe_secret_key_finish(ctx, sk);
    *out = sk;
    sk = NULL;
    st = TSAFE_OK;
fail:
    sodium_memzero(root, sizeof root);
    sodium_memzero(s_seed, sizeof s_seed);
    tsafe_secret_key_free(sk);
    return st;
}

void tsafe_secret_key_free(tsafe_secret_key *sk)
{
    if (!sk)
        return;
    if (sk->s) {
        sodium_memzero(sk->s, sk->ctx->n);
        free(sk->s);
    }
    tsafe_poly_free(sk->s_ntt, sk->ctx, sk->ctx->n_data, 1);
    tsafe_poly_free(sk->s_shoup, sk->ctx, sk->ctx->n_data, 1);
    sodium_memzero(sk, sizeof *sk);
    free(sk);
}

tsafe_status tsafe_public_key_alloc(const tsafe_context *ctx,
                                    tsafe_public_key **out)
{
    tsafe_public_key *pk = calloc(1, sizeof *pk);
    TSAFE_REQUIRE(pk, TSAFE_E_NOMEM);
    pk->ctx = ctx;
    pk->p0 = tsafe_poly_alloc(ctx, ctx->n_data);
    pk->p1 = tsafe_poly_alloc(ctx, ctx->n_data);
    if (!pk->p0 || !pk->p1) {
        tsafe_public_key_free(pk);
        return TSAFE_E_NOMEM;
    }
    *out = pk;
    return TSAFE_OK;
}

tsafe_status tsafe_public_key_generate(const tsafe_context *ctx,
                                       const tsafe_secret_key *sk,
                                       const uint8_t *seed,
                                       tsafe_public_key **out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && sk && out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(tsafe_same_context(ctx, sk->ctx), TSAFE_E_PARAMS_MISMATCH);
    uint8_t root[32], a_seed[32], e_seed[32];
    tsafe_public_key *pk = NULL;
    TSAFE_TRY(tsafe_seed_or_fresh(seed, root));
    TSAFE_TRY(tsafe_public_key_alloc(ctx, &pk));
    tsafe_seed_derive(a_seed, root, "tensafe pk a");
    tsafe_seed_derive(e_seed, root, "tensafe pk e");
    uint32_t top = ctx->n_data - 1;
    tsafe_expand_uniform_ntt(ctx, a_seed, top, pk->p1);
    TSAFE_TRY(tsafe_sample_error_ntt(ctx, e_seed, 2, top, pk->p0));
    for (uint32_t i = 0; i <= top; i++) {
        const tsafe_modulus *m = &ctx->mod[i];
        uint64_t *p0 = tsafe_limb(pk->p0, ctx, i);
        const uint64_t *a = tsafe_climb(pk->p1, ctx, i);
        const uint64_t *s = tsafe_climb(sk->s_ntt, ctx, i);
        for (size_t k = 0; k < ctx->n; k++)
            p0[k] = tsafe_sub_mod(p0[k], tsafe_mul_mod(a[k], s[k], m), m->q);
    }
    *out = pk;
    pk = NULL;
    st = TSAFE_OK;
fail:
    sodium_memzero(root, sizeof root);
    sodium_memzero(e_seed, sizeof e_seed);
    tsafe_public_key_free(pk);
    return st;
}

void tsafe_public_key_free(tsafe_public_key *pk)
{
    if (!pk)
        return;
    tsafe_poly_free(pk->p0, pk->ctx, pk->ctx->n_data, 0);
    tsafe_poly_free(pk->p1, pk->ctx, pk->ctx->n_data, 0);
    free(pk);
}
