/* CKKS core: parameters, context, keys, encoding, encryption and evaluation.
 *
 * Model (after SEAL/Lattigo): a plain `tsafe_params` value becomes an
 * immutable, validated `tsafe_context` (primes, NTT tables, FFT plans,
 * fingerprint). Keys, plaintexts and ciphertexts are opaque handles bound to
 * one context; every operation checks that its operands share the context's
 * fingerprint, level and scale, and returns an error code otherwise.
 *
 * Levels: a ciphertext at level L has L+1 RNS limbs (primes 0..L). The top
 * level is tsafe_context_max_level(). Rescale drops the last limb.
 *
 * Thread safety: contexts, keys and plaintexts are immutable after creation
 * (apart from tsafe_plaintext_prepare_mul, which must finish before sharing)
 * and may be shared between threads. A ciphertext must not be written by one
 * thread while another thread uses it.
 *
 * Ownership: every `_create`/`_generate`/`_deserialize` returns a handle the
 * caller frees with the matching `_free`; `_free(NULL)` is a no-op. A handle
 * borrows its context: the context must outlive it. Secret keys and
 * decrypted plaintexts are wiped on free.
 */
#ifndef TENSAFE_CKKS_H
#define TENSAFE_CKKS_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/export.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_MAX_PRIMES 16
#define TSAFE_SEED_BYTES 32
#define TSAFE_FINGERPRINT_BYTES 32
#define TSAFE_MIN_LOG_N 10
#define TSAFE_MAX_LOG_N 16

/* Flags for tsafe_params.flags */
#define TSAFE_PARAMS_INSECURE_FOR_TESTS 0x1u

/* ---------------------------------------------------------------- params */

/* A parameter set (plain value). Either give prime_bits[] (primes are then
 * generated: for each size, the largest unused primes below 2^bits with
 * q = 1 mod 2N, checked with GMP) or give primes[] explicitly (all nonzero).
 * The last n_special primes are counted against the security bound but never
 * used by ciphertexts (SEAL's key-switching prime; this SDK needs no
 * key switching, the seeds' presets keep it for parity). */
typedef struct tsafe_params {
    uint32_t log_n;                          /* N = 2^log_n, 10..16 */
    uint32_t n_primes;                       /* chain length, special included */
    uint32_t prime_bits[TSAFE_MAX_PRIMES];   /* 20..61 bits each */
    uint64_t primes[TSAFE_MAX_PRIMES];       /* explicit primes, or all 0 */
    uint32_t n_special;                      /* 0 or 1 */
    double scale;                            /* default encoding scale */
    uint32_t flags;                          /* TSAFE_PARAMS_* */
} tsafe_params;

/* Fill *out with a named preset. Names: "seed-n16384" (N=16384,
 * [60,40,40,60], scale 2^40, last prime special), "seed-n32768" (N=32768,
 * [60,40,40,40,60]), "ifma-n4096" ([50,50]), "ifma-n8192" ([50,50,50]),
 * "ifma-n16384" ([50,40,40,40,50]) -- the last three with primes below 2^50
 * for the IFMA path. Returns TSAFE_E_NOT_FOUND for an unknown name. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_params_preset(const char *name,
                                                           tsafe_params *out);
/* Number of presets and the name of preset i (NULL when out of range). */
TSAFE_API size_t tsafe_params_preset_count(void);
TSAFE_API const char *tsafe_params_preset_name(size_t i);

/* Largest log2(Q) allowed for 128-bit security with a ternary secret
 * (HomomorphicEncryption.org standard); 0 for an unsupported log_n. */
TSAFE_API uint32_t tsafe_params_max_log_q(uint32_t log_n);

/* Versioned binary encoding of a parameter set (so a peer can build the same
 * context). serialize writes at most cap bytes; *written gets the size. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_params_serialize(
    const tsafe_params *p, uint8_t *buf, size_t cap, size_t *written);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_params_deserialize(
    const uint8_t *buf, size_t len, tsafe_params *out);

/* --------------------------------------------------------------- context */

typedef struct tsafe_context tsafe_context;

/* Validate p and build the context. Refuses sets above the 128-bit bound
 * with TSAFE_E_INSECURE unless TSAFE_PARAMS_INSECURE_FOR_TESTS is set. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_context_create(
    const tsafe_params *p, tsafe_context **out);
TSAFE_API void tsafe_context_free(tsafe_context *ctx);

TSAFE_API size_t tsafe_context_n(const tsafe_context *ctx);
TSAFE_API size_t tsafe_context_slots(const tsafe_context *ctx);
/* Highest ciphertext level (number of data primes minus one). */
TSAFE_API uint32_t tsafe_context_max_level(const tsafe_context *ctx);
/* Prime i of the full chain (special included); 0 when out of range. */
TSAFE_API uint64_t tsafe_context_prime(const tsafe_context *ctx, uint32_t i);
/* log2 of the product of all primes (special included). */
TSAFE_API double tsafe_context_log2_q(const tsafe_context *ctx);
/* The validated parameters, with generated primes filled in. Borrowed. */
TSAFE_API const tsafe_params *tsafe_context_params(const tsafe_context *ctx);
/* 32-byte BLAKE2b fingerprint of the validated parameters. */
TSAFE_API void tsafe_context_fingerprint(const tsafe_context *ctx,
                                         uint8_t out[TSAFE_FINGERPRINT_BYTES]);
/* Name of the arithmetic path in use ("ifma", "avx2" or "scalar"). */
TSAFE_API const char *tsafe_context_arith_path(const tsafe_context *ctx);
/* 1 when this CPU runs the AVX-512 IFMA path (for primes below 2^50). */
TSAFE_API int tsafe_ifma_available(void);

/* ------------------------------------------------------------------ keys */

typedef struct tsafe_secret_key tsafe_secret_key;
typedef struct tsafe_public_key tsafe_public_key;

/* Uniform ternary secret. seed: 32 bytes to reproduce a key bit for bit
 * (tests), or NULL to draw a fresh seed from the OS CSPRNG. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_secret_key_generate(
    const tsafe_context *ctx, const uint8_t *seed, tsafe_secret_key **out);
TSAFE_API void tsafe_secret_key_free(tsafe_secret_key *sk);

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_public_key_generate(
    const tsafe_context *ctx, const tsafe_secret_key *sk, const uint8_t *seed,
    tsafe_public_key **out);
TSAFE_API void tsafe_public_key_free(tsafe_public_key *pk);

/* ------------------------------------------------------------ plaintexts */

typedef struct tsafe_plaintext tsafe_plaintext;

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_plaintext_create(
    const tsafe_context *ctx, tsafe_plaintext **out);
TSAFE_API void tsafe_plaintext_free(tsafe_plaintext *pt);
TSAFE_API uint32_t tsafe_plaintext_level(const tsafe_plaintext *pt);
TSAFE_API double tsafe_plaintext_scale(const tsafe_plaintext *pt);

/* Encode count <= slots real values (the remaining slots are zero) at the
 * given scale and level into pt (NTT form). Slot j is the evaluation at
 * zeta^(5^j mod 2N), as in SEAL and OpenFHE. Values whose scaled size
 * exceeds the level's modulus give TSAFE_E_VALUE_RANGE. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_encode(
    const tsafe_context *ctx, const double *values, size_t count, double scale,
    uint32_t level, tsafe_plaintext *pt);
/* Same with complex slots: re[j] + i*im[j]; im may be NULL (all zero). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_encode_complex(
    const tsafe_context *ctx, const double *re, const double *im, size_t count,
    double scale, uint32_t level, tsafe_plaintext *pt);
/* Decode the first count slots (real parts / both parts). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_decode(
    const tsafe_context *ctx, const tsafe_plaintext *pt, double *values,
    size_t count);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_decode_complex(
    const tsafe_context *ctx, const tsafe_plaintext *pt, double *re,
    double *im, size_t count);

/* Precompute Shoup quotients so that later ct x pt products with this
 * plaintext cost one multiply-high per coefficient. Doubles its memory. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_plaintext_prepare_mul(
    const tsafe_context *ctx, tsafe_plaintext *pt);

/* ----------------------------------------------------------- ciphertexts */

typedef struct tsafe_ciphertext tsafe_ciphertext;

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_create(
    const tsafe_context *ctx, tsafe_ciphertext **out);
TSAFE_API void tsafe_ciphertext_free(tsafe_ciphertext *ct);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_copy(
    const tsafe_context *ctx, const tsafe_ciphertext *src,
    tsafe_ciphertext *dst);
TSAFE_API uint32_t tsafe_ciphertext_level(const tsafe_ciphertext *ct);
TSAFE_API double tsafe_ciphertext_scale(const tsafe_ciphertext *ct);
/* 1 when the ciphertext still carries the seed of its `a` part (fresh
 * secret-key encryption): it then serializes at half size. */
TSAFE_API int tsafe_ciphertext_is_seeded(const tsafe_ciphertext *ct);

/* Secret-key encryption; `a` is expanded from a 32-byte seed (given, or
 * fresh from the CSPRNG when seed is NULL). The level is the plaintext's. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_encrypt_symmetric(
    const tsafe_context *ctx, const tsafe_secret_key *sk,
    const tsafe_plaintext *pt, const uint8_t *seed, tsafe_ciphertext *ct);
/* Encode and encrypt in one pass with the secret key: the error is added in
 * coefficient form, so each limb needs one NTT instead of two. The result
 * is bit-identical to tsafe_ckks_encode_complex + encrypt_symmetric with the
 * same seed (im may be NULL). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_encrypt_values_symmetric(
    const tsafe_context *ctx, const tsafe_secret_key *sk, const double *re,
    const double *im, size_t count, double scale, uint32_t level,
    const uint8_t *seed, tsafe_ciphertext *ct);
/* Public-key encryption; seed as above (drives u, e0, e1). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_encrypt_public(
    const tsafe_context *ctx, const tsafe_public_key *pk,
    const tsafe_plaintext *pt, const uint8_t *seed, tsafe_ciphertext *ct);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_decrypt(
    const tsafe_context *ctx, const tsafe_secret_key *sk,
    const tsafe_ciphertext *ct, tsafe_plaintext *pt);

/* Partial decryption for readers that need only a few coefficients: writes
 * the centred decrypted coefficients m[k*stride] / scale for
 * k = 0 .. N/stride - 1 into out (count must equal N/stride; stride a power
 * of two dividing N). Costs one pointwise product per limb plus a fold,
 * instead of a full inverse NTT. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_decrypt_coeffs_strided(
    const tsafe_context *ctx, const tsafe_secret_key *sk,
    const tsafe_ciphertext *ct, size_t stride, double *out, size_t count);

/* Evaluation. out may alias an input. Levels must match (drop first) and
 * scales must agree to a relative 1e-9, else TSAFE_E_LEVEL/TSAFE_E_SCALE. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_add(
    const tsafe_context *ctx, const tsafe_ciphertext *a,
    const tsafe_ciphertext *b, tsafe_ciphertext *out);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_sub(
    const tsafe_context *ctx, const tsafe_ciphertext *a,
    const tsafe_ciphertext *b, tsafe_ciphertext *out);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_negate(
    const tsafe_context *ctx, const tsafe_ciphertext *a, tsafe_ciphertext *out);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_add_plain(
    const tsafe_context *ctx, const tsafe_ciphertext *a,
    const tsafe_plaintext *p, tsafe_ciphertext *out);
/* ct x pt: result scale is the product of scales. The plaintext's level
 * must be >= the ciphertext's (higher limbs are ignored). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_mul_plain(
    const tsafe_context *ctx, const tsafe_ciphertext *a,
    const tsafe_plaintext *p, tsafe_ciphertext *out);
/* Multiply by round(value * const_scale); result scale = scale*const_scale.
 * const_scale = 1 multiplies by an integer without changing the scale. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_mul_const(
    const tsafe_context *ctx, const tsafe_ciphertext *a, double value,
    double const_scale, tsafe_ciphertext *out);
/* Divide by the last prime with rounding and drop it (level - 1). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_rescale(
    const tsafe_context *ctx, const tsafe_ciphertext *a, tsafe_ciphertext *out);
/* Drop limbs down to `level` without changing the scale. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ckks_drop_to_level(
    const tsafe_context *ctx, const tsafe_ciphertext *a, uint32_t level,
    tsafe_ciphertext *out);

/* --------------------------------------------------------- serialization
 *
 * Versioned binary format: magic "TSHE", format version, object kind, the
 * context fingerprint, level, flags, scale, then coefficients bit-packed to
 * ceil(log2 q_i) bits per limb. Readers check every length, the fingerprint
 * and every coefficient < q_i, and return TSAFE_E_FORMAT-family errors.
 * `_serialized_size` gives the exact size `_serialize` writes. Buffers that
 * hold a serialized secret key are the caller's to wipe. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_serialized_size(
    const tsafe_context *ctx, const tsafe_ciphertext *ct, size_t *size);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_serialize(
    const tsafe_context *ctx, const tsafe_ciphertext *ct, uint8_t *buf,
    size_t cap, size_t *written);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_deserialize(
    const tsafe_context *ctx, const uint8_t *buf, size_t len,
    tsafe_ciphertext **out);

/* Size of a full (not seeded) ciphertext serialized at `level`, without
 * having one: for sizing buffers up front (TSAFE_E_LEVEL above the
 * context's top level). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_serialized_size_at(
    const tsafe_context *ctx, uint32_t level, size_t *size);

/* Same, into an existing ciphertext (no allocation: for hot loops). On
 * error ct is left invalid (unusable until written again). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_ciphertext_deserialize_into(
    const tsafe_context *ctx, const uint8_t *buf, size_t len,
    tsafe_ciphertext *ct);

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_plaintext_serialized_size(
    const tsafe_context *ctx, const tsafe_plaintext *pt, size_t *size);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_plaintext_serialize(
    const tsafe_context *ctx, const tsafe_plaintext *pt, uint8_t *buf,
    size_t cap, size_t *written);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_plaintext_deserialize(
    const tsafe_context *ctx, const uint8_t *buf, size_t len,
    tsafe_plaintext **out);

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_public_key_serialized_size(
    const tsafe_context *ctx, const tsafe_public_key *pk, size_t *size);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_public_key_serialize(
    const tsafe_context *ctx, const tsafe_public_key *pk, uint8_t *buf,
    size_t cap, size_t *written);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_public_key_deserialize(
    const tsafe_context *ctx, const uint8_t *buf, size_t len,
    tsafe_public_key **out);

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_secret_key_serialized_size(
    const tsafe_context *ctx, const tsafe_secret_key *sk, size_t *size);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_secret_key_serialize(
    const tsafe_context *ctx, const tsafe_secret_key *sk, uint8_t *buf,
    size_t cap, size_t *written);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_secret_key_deserialize(
    const tsafe_context *ctx, const uint8_t *buf, size_t len,
    tsafe_secret_key **out);

#ifdef __cplusplus
}
#endif
#endif
