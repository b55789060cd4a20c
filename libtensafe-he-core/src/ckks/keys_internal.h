/* Sampling and allocation helpers shared by keys.c, encrypt.c and
 * serialize.c (internal). */
#ifndef TSAFE_KEYS_INTERNAL_H
#define TSAFE_KEYS_INTERNAL_H

#include "ckks_internal.h"

/* Copy seed, or draw a fresh one from the CSPRNG when seed is NULL. */
tsafe_status tsafe_seed_or_fresh(const uint8_t *seed, uint8_t out[32]);
/* Uniform polynomial in NTT form, limbs 0..level, limb i from stream 0x100+i
 * of seed (so dropping limbs keeps a seeded `a` reproducible). */
void tsafe_expand_uniform_ntt(const tsafe_context *c, const uint8_t seed[32],
                              uint32_t level, uint64_t *out);
/* Small signed coefficients -> NTT form in limbs 0..level. */
void tsafe_small_to_ntt(const tsafe_context *c, const int8_t *small,
                        uint32_t level, uint64_t *out);
/* Centred-binomial error in NTT form. */
tsafe_status tsafe_sample_error_ntt(const tsafe_context *c,
                                    const uint8_t seed[32], uint64_t stream,
                                    uint32_t level, uint64_t *out);
tsafe_status tsafe_secret_key_alloc(const tsafe_context *ctx,
                                    tsafe_secret_key **out);
/* s_ntt and s_shoup from the ternary coefficients sk->s. */
void tsafe_secret_key_finish(const tsafe_context *ctx, tsafe_secret_key *sk);
tsafe_status tsafe_public_key_alloc(const tsafe_context *ctx,
                                    tsafe_public_key **out);

#endif
