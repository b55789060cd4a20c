/* BFV-style exact coefficient encryption, internals shared by the files of
 * libtensafe-he-core/src/bfv. Not installed. */
#ifndef TSAFE_BFV_INTERNAL_H
#define TSAFE_BFV_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/bfv.h"
#include "../ring/ring.h"

struct tsafe_bfv_context {
    tsafe_bfv_params p;
    size_t n;
    tsafe_modulus mod[2];   /* q0 (response), q1 (dropped by the switch) */
    tsafe_ntt_table ntt[2];
    uint64_t t;             /* 2^t_bits */
    tsafe_u128 Q;           /* q0 * q1 < 2^111 */
    uint64_t delta_mod[2];  /* floor(Q / t) mod q_i */
    uint64_t q_mod_t;       /* Q mod t: round(Q m / t) = floor(Q/t) m + round((Q mod t) m / t) */
    uint64_t q1_inv;        /* q1^-1 mod q0 and its Shoup quotient */
    uint64_t q1_inv_shoup;
    uint64_t half_q1;       /* (q1 - 1) / 2: rounding offset of the switch */
    uint64_t half_q1_q0;    /* half_q1 mod q0 */
    uint64_t one_shoup_q0;  /* Shoup quotient of 1 mod q0: y mod q0 for any 64-bit y */
    double log2_q;
    uint8_t fingerprint[TSAFE_BFV_FINGERPRINT_BYTES];
    struct tsafe_ring_view ring; /* both primes, for backends */
};

struct tsafe_bfv_secret_key {
    const tsafe_bfv_context *ctx;
    int8_t *s;          /* ternary, N */
    uint64_t *s_ntt;    /* 2 limbs, NTT form */
    uint64_t *s_shoup;
    uint32_t *plus, *minus; /* positions of +1 and -1 coefficients */
    size_t n_plus, n_minus;
};

struct tsafe_bfv_public_key {
    const tsafe_bfv_context *ctx;
    uint8_t seed[TSAFE_BFV_SEED_BYTES];
    uint64_t *p0, *p0_shoup; /* 2 limbs, NTT form */
    uint64_t *p1, *p1_shoup; /* a, expanded from seed */
};

struct tsafe_bfv_ct {
    const tsafe_bfv_context *ctx;
    uint8_t seed[TSAFE_BFV_SEED_BYTES];
    uint64_t *c0; /* 2 limbs, NTT form */
    uint64_t *c1; /* 2 limbs, NTT form, expanded from seed */
    int valid;
};

struct tsafe_bfv_plain {
    const tsafe_bfv_context *ctx;
    uint64_t *p, *ps; /* 2 limbs, NTT form, then Shoup quotients: ps = p + 2N */
};

struct tsafe_bfv_acc {
    const tsafe_bfv_context *ctx;
    uint64_t *a0, *a1; /* 2 limbs each, NTT form */
    uint64_t *tmp;     /* 2 limbs of scratch */
};

struct tsafe_bfv_sealed {
    const tsafe_bfv_context *ctx;
    size_t cap, n_reads;
    uint64_t *c1; /* N values mod q0 */
    uint64_t *c0; /* cap values mod q0 */
};

/* ChaCha20 stream labels (the 64-bit nonce of tsafe_prng_init). */
enum {
    TSAFE_BFV_STREAM_A = 0xBF00,     /* + limb index */
    TSAFE_BFV_STREAM_SECRET = 0xBF10,
    TSAFE_BFV_STREAM_ERR = 0xBF11,
    TSAFE_BFV_STREAM_SEAL = 0xBF12
};

/* Objects of equal contexts may be combined (a server's sites and the
 * ciphertexts it reads are built on separate but identical contexts). */
static inline int tsafe_bfv_same_ctx(const tsafe_bfv_context *a,
                                     const tsafe_bfv_context *b)
{
    return a == b || memcmp(a->fingerprint, b->fingerprint,
                            TSAFE_BFV_FINGERPRINT_BYTES) == 0;
}

/* v mod q for signed v, in [0, q). */
static inline uint64_t tsafe_bfv_signed_mod(int64_t v, uint64_t q)
{
    if (v >= 0)
        return (uint64_t)v % q;
    uint64_t r = ((uint64_t)0 - (uint64_t)v) % q;
    return r ? q - r : 0;
}

/* out += a * w (w fixed with Shoup quotients wp), one limb. */
static inline void tsafe_bfv_mul_add_limb(uint64_t *out, const uint64_t *a,
                                          const uint64_t *w, const uint64_t *wp,
                                          uint64_t *tmp, size_t n, uint64_t q)
{
    tsafe_vec_mul_shoup(tmp, a, w, wp, n, q);
    tsafe_vec_add(out, out, tmp, n, q);
}

/* Two zeroed limbs of N residues (one polynomial at Q). */
static inline uint64_t *tsafe_bfv_limbs_alloc(const tsafe_bfv_context *c)
{
    return calloc(2 * c->n, sizeof(uint64_t));
}

/* Expand the uniform polynomial a (2 limbs, NTT form) from its seed. */
void tsafe_bfv_expand_a(const tsafe_bfv_context *c, const uint8_t seed[32],
                        uint64_t *a);
/* round(Q * m / t) mod q_i for 0 <= |m| < 2^63 (m signed). */
uint64_t tsafe_bfv_scale_up(const tsafe_bfv_context *c, uint32_t i,
                            int64_t m);

/* Public key storage and completion: alloc, fill seed and p0, then
 * finish expands p1 = a and the Shoup quotients. */
tsafe_status tsafe_bfv_public_key_alloc(const tsafe_bfv_context *c,
                                        tsafe_bfv_public_key **out);
void tsafe_bfv_public_key_finish(tsafe_bfv_public_key *pk);

#endif
