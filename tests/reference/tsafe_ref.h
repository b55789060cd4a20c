/* Host references of the LoRA servers' ring work (tests only, never in a
 * shipped library): the same rounds computed with the core's direct calls
 * (tsafe_ckks_mul_plain / _rescale / _decrypt_coeffs_strided,
 * tsafe_bfv_ct_read / _acc_mul_add / _seal) instead of a backend. The
 * tests compare the libraries' bytes (CPU backend, counting backends)
 * against these byte for byte, in every mode: sealed and sealed-private
 * (tsafe_ref_sealed_*), plain ZeRo-MOAI (tsafe_ref_lora_process) and
 * local HE (tsafe_ref_lora_local_*). What is not ring work (message
 * codecs, masks, the seeded draws, packing) is the libraries' own code,
 * so that a difference can only come from the ring work. Inputs are the
 * well-formed messages of the real clients; errors are reported, not
 * hunted. Not thread-safe: one reference per thread. */
#ifndef TSAFE_TEST_REFERENCE_H
#define TSAFE_TEST_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/lora_sealed.h"
#include "tensafe/lora_two_party.h"

/* ---------------------------------------------------------------- sealed */

typedef struct tsafe_ref_sealed tsafe_ref_sealed;

/* A reference sealed server for plan whose draws come from seed (32
 * bytes), as a server given tsafe_sealed_server_debug_seed(s, seed). */
tsafe_status tsafe_ref_sealed_create(const tsafe_sealed_plan *plan, const uint8_t *seed,
                                     tsafe_ref_sealed **out);
void tsafe_ref_sealed_free(tsafe_ref_sealed *r);
/* The client's hello (keys, session, epoch). */
tsafe_status tsafe_ref_sealed_accept(tsafe_ref_sealed *r, const uint8_t *hello, size_t len);
/* Query -> response 1; share message -> final message (malloc'd: free). */
tsafe_status tsafe_ref_sealed_round1(tsafe_ref_sealed *r, const tsafe_sealed_site *const *sites,
                                     size_t n_sites, const uint8_t *query, size_t len,
                                     uint8_t **out, size_t *out_len);
tsafe_status tsafe_ref_sealed_round2(tsafe_ref_sealed *r, const tsafe_sealed_site *const *sites,
                                     size_t n_sites, const uint8_t *msg, size_t len,
                                     uint8_t **out, size_t *out_len);

/* ------------------------------------------------------- ZeRo-MOAI, local */

/* The plain ZeRo-MOAI server's response to a request (malloc'd: free):
 * per batch x * pts[b], rescaled to the plan's response level. */
tsafe_status tsafe_ref_lora_process(const tsafe_context *ctx, const tsafe_lora_plan *plan,
                                    const tsafe_lora_site *const *sites, size_t n_sites,
                                    const uint8_t *request, size_t len, uint8_t **out,
                                    size_t *out_len);
/* Local mode's u (rank floats per site) under sk: x encrypted with the
 * CSPRNG as tsafe_lora_local_u does (same randombytes stream, same
 * ciphertext), products, strided decryption, trace reads. */
tsafe_status tsafe_ref_lora_local_u(const tsafe_context *ctx, const tsafe_secret_key *sk,
                                    const tsafe_lora_plan *plan,
                                    const tsafe_lora_site *const *sites, size_t n_sites,
                                    const float *x, float *const *u);
/* ... and delta = scale B u per site (as tsafe_lora_local_delta). */
tsafe_status tsafe_ref_lora_local_delta(const tsafe_context *ctx, const tsafe_secret_key *sk,
                                        const tsafe_lora_plan *plan,
                                        const tsafe_lora_site *const *sites, size_t n_sites,
                                        const float *x, float *const *delta);

#endif
