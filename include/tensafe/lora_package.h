/* Signed adapter packages (libtensafe-lora). Byte layout, signing rule and
 * verification order: docs/PACKAGE_FORMAT.md.
 *
 *   header (24 B: magic "TSPKG\0\r\n", version, flags, lengths)
 *   manifest (UTF-8 JSON: adapter id, domain, rank, alpha, targets, price
 *             per 1k tokens, creator, BLAKE2b-256 + length of the payload;
 *             optional PEFT rank/alpha patterns and use_rslora)
 *   payload  (zlib stream of the adapter's safetensors bytes; opaque here)
 *   digest   (BLAKE2b-256 of every byte before it)
 *   signature (Ed25519 over "TenSafe-HE adapter package v1\0" || digest)
 *
 * tsafe_package_open checks the magic and version, then the digest and the
 * signature against a public key THE CALLER passes in, and only then parses
 * the manifest JSON and inflates the payload (capped, exact length, digest
 * checked). A key found inside a package is never used: whoever can edit
 * the package could then sign it with their own key.
 *
 * Thread safety: the functions are reentrant; a tsafe_package is immutable
 * after open and may be read from several threads. */
#ifndef TENSAFE_LORA_PACKAGE_H
#define TENSAFE_LORA_PACKAGE_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/export.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_PACKAGE_VERSION 1u
#define TSAFE_PACKAGE_PUBLICKEYBYTES 32u
#define TSAFE_PACKAGE_SECRETKEYBYTES 64u
#define TSAFE_PACKAGE_DIGESTBYTES 32u
/* Caps enforced on create and open. */
#define TSAFE_PACKAGE_MAX_MANIFEST ((size_t)1 << 20)    /* 1 MiB of JSON */
#define TSAFE_PACKAGE_MAX_PAYLOAD ((uint64_t)1 << 32)   /* 4 GiB inflated */
#define TSAFE_PACKAGE_MAX_STRING 4096u                  /* per string field */
#define TSAFE_PACKAGE_MAX_TARGETS 4096u

/* One entry of PEFT's rank_pattern or alpha_pattern (plain struct): key
 * matched against module names by PEFT's rule (tensafe/lora_adapter.h),
 * value the rank (an integer in [1, 2^24]) or the alpha (finite, > 0). */
typedef struct tsafe_package_pattern {
    const char *key;
    double value;
} tsafe_package_pattern;

/* Manifest fields (plain struct; zero-initialise it, then fill; all strings
 * UTF-8, NUL-terminated, at most TSAFE_PACKAGE_MAX_STRING bytes, no
 * embedded NUL).
 *  adapter_id  required, non-empty.
 *  domain      required (may be "").
 *  rank        >= 1 (PEFT's "r": the rank of modules no pattern names).
 *  alpha       finite, > 0 (PEFT's "lora_alpha", same rule).
 *  targets     n_targets (0..TSAFE_PACKAGE_MAX_TARGETS) non-empty strings.
 *  price_per_1k_tokens  finite, >= 0.
 *  creator     required (may be "").
 *  rank_pattern, alpha_pattern  optional (n 0..TSAFE_PACKAGE_MAX_TARGETS,
 *              non-empty distinct keys): PEFT's per-module overrides, in
 *              PEFT's precedence order (an exact key first, then the first
 *              key in this order that matches).
 *  use_rslora  0 or 1: scale alpha/sqrt(rank) instead of alpha/rank.
 * In a struct filled by tsafe_package_manifest_get every pointer is borrowed
 * from the package and valid until tsafe_package_free. */
typedef struct tsafe_package_manifest {
    const char *adapter_id;
    const char *domain;
    uint32_t rank;
    double alpha;
    const char *const *targets;
    size_t n_targets;
    double price_per_1k_tokens;
    const char *creator;
    const tsafe_package_pattern *rank_pattern;
    size_t n_rank_pattern;
    const tsafe_package_pattern *alpha_pattern;
    size_t n_alpha_pattern;
    int use_rslora;
} tsafe_package_manifest;

typedef struct tsafe_package tsafe_package;

/* Fresh Ed25519 key pair from the libsodium CSPRNG into caller buffers
 * (pk 32 bytes, sk 64 bytes = seed || pk). The caller wipes sk
 * (sodium_memzero) when done. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_package_keypair(uint8_t pk[32], uint8_t sk[64]);

/* Builds a signed package. m and payload are borrowed; payload may be
 * empty (len 0, payload NULL allowed). signer_sk must be a consistent
 * libsodium Ed25519 secret key (its public half must match its seed), else
 * TSAFE_E_KEY. Invalid manifest fields -> TSAFE_E_ARG; payload longer than
 * TSAFE_PACKAGE_MAX_PAYLOAD -> TSAFE_E_RANGE. On success *out (malloc'd,
 * *out_len bytes) is owned by the caller: release it with
 * tsafe_package_bytes_free (or free()). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_package_create(const tsafe_package_manifest *m, const uint8_t *payload,
                     size_t len, const uint8_t signer_sk[64], uint8_t **out,
                     size_t *out_len);

/* free() for buffers returned by tsafe_package_create; NULL is a no-op. */
TSAFE_API void tsafe_package_bytes_free(uint8_t *bytes);

/* Verifies and opens a package from untrusted bytes (borrowed; not
 * referenced after return). Order: length >= minimum (else
 * TSAFE_E_TRUNCATED), magic (TSAFE_E_FORMAT), version (TSAFE_E_VERSION),
 * trusted_pk is a valid Ed25519 point (else TSAFE_E_KEY), digest and
 * signature (TSAFE_E_VERIFY) -- only then the header lengths (TSAFE_E_FORMAT
 * / TSAFE_E_TRUNCATED), the manifest JSON (TSAFE_E_JSON, TSAFE_E_FORMAT,
 * TSAFE_E_MISSING_FIELD), the inflated payload (TSAFE_E_FORMAT, exact
 * length, TSAFE_E_RANGE above the cap) and its digest (TSAFE_E_VERIFY).
 * On success *out is owned by the caller (tsafe_package_free). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_package_open(const uint8_t *bytes, size_t len,
                   const uint8_t trusted_pk[32], tsafe_package **out);

/* NULL is a no-op. */
TSAFE_API void tsafe_package_free(tsafe_package *p);

/* Fills *m with borrowed pointers into p (valid until tsafe_package_free). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_package_manifest_get(const tsafe_package *p, tsafe_package_manifest *m);

/* The inflated payload (borrowed, valid until tsafe_package_free). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_package_payload(const tsafe_package *p, const uint8_t **data,
                      size_t *len);

/* BLAKE2b-256 of the payload (as verified). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_package_payload_digest(const tsafe_package *p, uint8_t digest[32]);

/* The verified manifest JSON as stored (NUL-terminated copy, borrowed). */
TSAFE_API const char *tsafe_package_manifest_json(const tsafe_package *p);

#ifdef __cplusplus
}
#endif
#endif
