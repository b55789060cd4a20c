/* CKKS layer internals shared by the files of libtensafe-he-core/src/ckks.
 * Not installed; other libraries use only include/tensafe/ckks.h. */
#ifndef TSAFE_CKKS_INTERNAL_H
#define TSAFE_CKKS_INTERNAL_H

#include <complex.h>
#include <pthread.h>
#include <stdint.h>

#include "tensafe/ckks.h"
#include "../ring/ring.h"

/* Serialized object kinds (byte 5 of every header). */
enum {
    TSAFE_KIND_PARAMS = 1,
    TSAFE_KIND_CIPHERTEXT = 2,
    TSAFE_KIND_PLAINTEXT = 3,
    TSAFE_KIND_PUBLIC_KEY = 4,
    TSAFE_KIND_SECRET_KEY = 5
};

/* Garner (mixed-radix) CRT constants for one level (limbs 0..level). */
typedef struct tsafe_crt_level {
    /* inv[i][j] = q_j^-1 mod q_i for j < i (row-major, MAX x MAX) */
    uint64_t inv[TSAFE_MAX_PRIMES][TSAFE_MAX_PRIMES];
    /* mixed-radix digits of floor((Q_level - 1) / 2): x > half -> negative */
    uint64_t half_digits[TSAFE_MAX_PRIMES];
    /* radix weights prod_{j<i} q_j as long double */
    long double weight[TSAFE_MAX_PRIMES];
} tsafe_crt_level;

struct tsafe_context {
    tsafe_params params; /* validated; primes[] always filled */
    uint32_t log_n;
    size_t n;
    size_t slots;
    uint32_t n_primes; /* whole chain */
    uint32_t n_data;   /* usable by ciphertexts: n_primes - n_special */
    tsafe_modulus mod[TSAFE_MAX_PRIMES];
    tsafe_ntt_table ntt[TSAFE_MAX_PRIMES];
    double log2_q;
    uint8_t fingerprint[TSAFE_FINGERPRINT_BYTES];
    const char *arith_path;
    struct tsafe_ring_view ring; /* the data primes, for backends */

    /* Rescale: qinv_last[l][i] = q_l^-1 mod q_i (i < l) and Shoup quotient;
     * half_last[l][i] = floor(q_l / 2) mod q_i. */
    uint64_t qinv_last[TSAFE_MAX_PRIMES][TSAFE_MAX_PRIMES];
    uint64_t qinv_last_shoup[TSAFE_MAX_PRIMES][TSAFE_MAX_PRIMES];
    uint64_t half_last[TSAFE_MAX_PRIMES][TSAFE_MAX_PRIMES];

    tsafe_crt_level *crt; /* n_data entries, one per level */

    /* Encoding: slot j <-> zeta^(5^j mod 2N); slot_index[j] = (5^j mod 2N - 1)/2
     * is the position in the length-N DFT over odd powers. */
    uint32_t *slot_index;
    double complex *twist;     /* zeta^k, k < N */
    void *fft_fwd, *fft_inv;   /* fftw_plan, N-point complex */
};

struct tsafe_secret_key {
    const tsafe_context *ctx;
    int8_t *s;        /* ternary coefficients, N */
    uint64_t *s_ntt;  /* n_data limbs, NTT form */
    uint64_t *s_shoup; /* Shoup quotients of s_ntt (fixed operand) */
};

struct tsafe_public_key {
    const tsafe_context *ctx;
    uint64_t *p0, *p1; /* n_data limbs each, NTT form; p0 = -a*s + e, p1 = a */
};

struct tsafe_plaintext {
    const tsafe_context *ctx;
    uint32_t level;
    double scale;
    uint64_t *data;  /* n_data limbs allocated, level+1 valid, NTT form */
    uint64_t *shoup; /* NULL unless prepared for multiplication */
    int valid;       /* 0 until encoded / decrypted / deserialized */
};

struct tsafe_ciphertext {
    const tsafe_context *ctx;
    uint32_t level;
    double scale;
    uint64_t *c0, *c1; /* n_data limbs allocated each, level+1 valid */
    int seeded;        /* c1 was expanded from seed (still unmodified) */
    uint8_t seed[TSAFE_SEED_BYTES];
    int valid;
};

/* limb pointer helpers */
static inline uint64_t *tsafe_limb(uint64_t *poly, const tsafe_context *c,
                                   uint32_t i)
{
    return poly + (size_t)i * c->n;
}

static inline const uint64_t *tsafe_climb(const uint64_t *poly,
                                          const tsafe_context *c, uint32_t i)
{
    return poly + (size_t)i * c->n;
}

uint64_t *tsafe_poly_alloc(const tsafe_context *c, uint32_t limbs);
void tsafe_poly_free(uint64_t *p, const tsafe_context *c, uint32_t limbs,
                     int wipe);

/* Reduce signed integer coefficients into every limb 0..level (coeff form). */
void tsafe_poly_from_i64(const tsafe_context *c, const int64_t *coeffs,
                         uint32_t level, uint64_t *out);
void tsafe_poly_ntt(const tsafe_context *c, uint64_t *poly, uint32_t level);
void tsafe_poly_intt(const tsafe_context *c, uint64_t *poly, uint32_t level);

/* Encode slots into coefficient form (limbs 0..level of poly), no NTT. */
tsafe_status tsafe_encode_coeffs(const tsafe_context *ctx, const double *re,
                                 const double *im, size_t count, double scale,
                                 uint32_t level, uint64_t *poly);

/* White-box hook for tests: this thread's FFT scratch (NULL and 0 bytes
 * before its first encode/decode). Read-only; never exported. */
const void *tsafe_encode_scratch_peek_(size_t *bytes);

/* Centred CRT of the residues res[0..level] (one coefficient) to double. */
double tsafe_crt_to_double(const tsafe_context *c, const uint64_t *res,
                           uint32_t level);

/* Rescale (NTT form): in has level+1 limbs, out gets level limbs. */
void tsafe_poly_rescale(const tsafe_context *c, const uint64_t *in,
                        uint32_t level, uint64_t *out, uint64_t *scratch);

/* Same-context check: compares the context pointers, then fingerprints. */
int tsafe_same_context(const tsafe_context *a, const tsafe_context *b);

/* FFTW's planner is not thread-safe: every plan creation/destruction in the
 * SDK takes this lock. */
void tsafe_fftw_lock(void);
void tsafe_fftw_unlock(void);

/* Ciphertext body from raw limbs (limbs 0..level of c0 and c1, NTT form,
 * unseeded) into buf of exactly `need` bytes (the serialized size at that
 * level); TSAFE_E_SCALE for a scale no reader accepts. Shared by
 * tsafe_ciphertext_serialize and the backend-buffer serializer. */
tsafe_status tsafe_ciphertext_serialize_words(const tsafe_context *ctx, const uint64_t *c0,
                                              const uint64_t *c1, uint32_t level,
                                              double scale, uint8_t *buf, size_t need);

/* Strided decryption (tsafe_ckks_decrypt_coeffs_strided) split into its
 * argument check and its body over raw limbs (c0, c1 limbs 0..level). */
tsafe_status tsafe_decrypt_strided_check(const tsafe_context *ctx, size_t stride,
                                         size_t count);
tsafe_status tsafe_decrypt_strided_words(const tsafe_context *ctx,
                                         const tsafe_secret_key *sk,
                                         const uint64_t *c0, const uint64_t *c1,
                                         uint32_t level, double scale, size_t stride,
                                         double *out);

#endif
