/* BFV-style exact coefficient encryption, internals shared by the files of
 * libtensafe-he-core/src/bfv. Not installed. */
#ifndef TSAFE_BFV_INTERNAL_H
#define TSAFE_BFV_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/bfv.h"
#include "../ring/ring.h"
#include "../common/alloc.h"

/* Limbs: q0 (the response modulus, kept by the switch) and one or two gap
 * primes (dropped by it). A gap above 50 bits is split into two primes so
 * that every limb runs the IFMA kernels (which need q < 2^50). */
#define TSAFE_BFV_MAX_LIMBS 3

struct tsafe_bfv_context {
    tsafe_bfv_params p;
    size_t n;
    uint32_t L;             /* limbs: q0, then the gap primes */
    tsafe_modulus mod[TSAFE_BFV_MAX_LIMBS];
    tsafe_ntt_table ntt[TSAFE_BFV_MAX_LIMBS];
    uint64_t t;             /* 2^t_bits */
    tsafe_u128 Q;           /* q0 * gap primes < 2^111 */
    uint64_t delta_mod[TSAFE_BFV_MAX_LIMBS]; /* floor(Q / t) mod q_i */
    uint64_t q_mod_t;       /* Q mod t: round(Q m / t) = floor(Q/t) m + round((Q mod t) m / t) */
    /* The switch Q -> q0 drops limbs L-1 .. 1 one at a time, each with
     * rounding (the backends' mod_switch): sw[l][i] for dropped limb l and
     * kept limb i < l */
    tsafe_switch_consts sw[TSAFE_BFV_MAX_LIMBS][TSAFE_BFV_MAX_LIMBS];
    uint64_t one_shoup[TSAFE_BFV_MAX_LIMBS]; /* Shoup of 1: y mod q_i for any 64-bit y */
    /* the sealings' read draws (seal.c): Shoup of delta_mod, and 2^64 mod
     * q_i with its Shoup (a 128-bit flood in two 64-bit halves) */
    uint64_t delta_shoup[TSAFE_BFV_MAX_LIMBS];
    uint64_t r64[TSAFE_BFV_MAX_LIMBS], r64_shoup[TSAFE_BFV_MAX_LIMBS];
    double log2_q;
    uint8_t fingerprint[TSAFE_BFV_FINGERPRINT_BYTES];
    struct tsafe_ring_view ring; /* all limbs, for backends */
    tsafe_coset_cache *coset;    /* q0 only: decryptions' coset reads */
};

struct tsafe_bfv_secret_key {
    const tsafe_bfv_context *ctx;
    int8_t *s;          /* ternary, N */
    uint64_t *s_ntt;    /* L limbs, NTT form */
    uint64_t *s_shoup;
    uint32_t *plus, *minus; /* positions of +1 and -1 coefficients */
    size_t n_plus, n_minus;
};

struct tsafe_bfv_public_key {
    const tsafe_bfv_context *ctx;
    uint8_t seed[TSAFE_BFV_SEED_BYTES];
    uint64_t *p0, *p0_shoup; /* L limbs, NTT form */
    uint64_t *p1, *p1_shoup; /* a, expanded from seed */
};

struct tsafe_bfv_ct {
    const tsafe_bfv_context *ctx;
    uint8_t seed[TSAFE_BFV_SEED_BYTES];
    uint64_t *c0; /* L limbs, NTT form */
    uint64_t *c1; /* L limbs, NTT form, expanded from seed */
    int valid;
};

struct tsafe_bfv_plain {
    const tsafe_bfv_context *ctx;
    uint64_t *p, *ps; /* L limbs, NTT form, then Shoup quotients: ps = p + L N */
};

struct tsafe_bfv_acc {
    const tsafe_bfv_context *ctx;
    uint64_t *a0, *a1; /* L limbs each, NTT form */
    uint64_t *tmp;     /* one limb of scratch (the sealing's r) */
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

/* ------------------------------------------------ sealing (seal.c) */

/* The randomness of one sealing, in its fixed order: the ternary r of the
 * encryption of zero, its error e1 on c1 (both unless with_zero is 0),
 * then per read the error e0, the flood and the mask summed into
 * add[i * n_reads + k] (limb i). From seed (32 bytes) or the CSPRNG. */
typedef struct seal_draw {
    int8_t *r, *e1, *e0; /* N, N, n_reads (at least 1) */
    uint64_t *add;       /* L * n_reads */
} seal_draw;
tsafe_status tsafe_bfv_seal_draw(const tsafe_bfv_context *c, const uint8_t *seed,
                                 const uint64_t *mask, size_t n_reads, uint32_t flood_bits,
                                 int with_zero, seal_draw *d);
/* The same draws with the encryption of zero, except that e1 is not
 * drawn: its N samples (6 stream bytes each, cbd21 of their low 42 bits)
 * are skipped at stream offset *e1_off, for a device to expand from key
 * (the sealing's master seed, secret: wipe it) -- d->e1 is untouched. */
tsafe_status tsafe_bfv_seal_draw_lean(const tsafe_bfv_context *c, const uint8_t *seed,
                                      const uint64_t *mask, size_t n_reads,
                                      uint32_t flood_bits, seal_draw *d, uint8_t key[32],
                                      uint64_t *e1_off);
/* A ciphertext's bytes: its seed and c0 (checked: exact length, every
 * residue < q_i, zero padding), c1 not expanded. */
tsafe_status tsafe_bfv_ct_parse(const tsafe_bfv_context *c, const uint8_t *buf, size_t len,
                                uint8_t seed[TSAFE_BFV_SEED_BYTES], uint64_t *c0);
/* A sealing's reads: within N, distinct, masks < t, at most r's capacity;
 * flood_bits <= 100 or TSAFE_BFV_FLOOD_STEP. */
tsafe_status tsafe_bfv_seal_check_reads(const tsafe_bfv_context *c, const uint32_t *pos,
                                        const uint64_t *mask, size_t n_reads,
                                        uint32_t flood_bits, const tsafe_bfv_sealed *r);
struct tsafe_bfv_sealer;
struct tsafe_backend;
struct tsafe_backend *tsafe_bfv_sealer_backend(const struct tsafe_bfv_sealer *s);
const tsafe_bfv_context *tsafe_bfv_sealer_ctx(const struct tsafe_bfv_sealer *s);

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

/* Limb i of an integer polynomial (|coeff| < 2^63): coeff mod q_i by a
 * Shoup reduction (no division; plaintexts are encoded per token). */
static inline void tsafe_bfv_encode_limb(const tsafe_bfv_context *c, uint32_t i,
                                         const int64_t *coeffs, size_t count,
                                         uint64_t *l)
{
    uint64_t q = c->mod[i].q, one = c->one_shoup[i];
    /* Weights (11-14 bits) are far below every prime: one vectorised pass
     * (a sparse plaintext has zeros in random places, which a branch per
     * value mispredicts); larger values take the Shoup reduction. */
    if (tsafe_vec_from_i64_small(l, coeffs, count, q) == 0)
        return;
    for (size_t k = 0; k < count; k++) {
        int64_t v = coeffs[k];
        uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
        uint64_t r = tsafe_mul_shoup(m, 1, one, q);
        l[k] = v < 0 ? tsafe_neg_mod(r, q) : r;
    }
}

/* L zeroed limbs of N residues (one polynomial at Q). */
static inline uint64_t *tsafe_bfv_limbs_alloc(const tsafe_bfv_context *c)
{
    return tsafe_calloc_aligned((size_t)c->L * c->n, sizeof(uint64_t));
}

/* round(x / (Q / q0)) mod q0 for x given by its L residues (x is
 * overwritten): the limbs dropped one at a time, the same arithmetic as
 * the backends' mod_switch. */
static inline uint64_t tsafe_bfv_switch_to_q0(const tsafe_bfv_context *c, uint64_t *x)
{
    for (uint32_t l = c->L - 1; l >= 1; l--)
        for (uint32_t i = 0; i < l; i++)
            x[i] = tsafe_mod_switch_one(x[i], x[l], &c->sw[l][i]);
    return x[0];
}

/* Expand the uniform polynomial a (2 limbs, NTT form) from its seed. */
void tsafe_bfv_expand_a(const tsafe_bfv_context *c, const uint8_t seed[32],
                        uint64_t *a);
/* round(Q * m / t) mod q_i for 0 <= |m| < 2^63 (m signed). */
uint64_t tsafe_bfv_scale_up(const tsafe_bfv_context *c, uint32_t i,
                            int64_t m);
/* round(Q * m / (t 2^f)) mod q_i: the constants of a fractional scale. */
typedef struct {
    uint32_t bits; /* t_bits + f */
    tsafe_u128 q_mod; /* Q mod 2^bits */
    uint64_t delta_mod[TSAFE_BFV_MAX_LIMBS]; /* floor(Q / 2^bits) mod q_i */
} tsafe_bfv_frac;
void tsafe_bfv_frac_init(const tsafe_bfv_context *c, uint32_t frac_bits, tsafe_bfv_frac *f);
uint64_t tsafe_bfv_scale_up_frac(const tsafe_bfv_context *c, const tsafe_bfv_frac *f,
                                 uint32_t i, int64_t m);

/* b is a backend over c's ring (its own context or one with equal
 * parameters). */
struct tsafe_backend;
int tsafe_bfv_backend_serves(const struct tsafe_backend *b, const tsafe_bfv_context *c);

/* Public key storage and completion: alloc, fill seed and p0, then
 * finish expands p1 = a and the Shoup quotients. */
tsafe_status tsafe_bfv_public_key_alloc(const tsafe_bfv_context *c,
                                        tsafe_bfv_public_key **out);
void tsafe_bfv_public_key_finish(tsafe_bfv_public_key *pk);

#endif
