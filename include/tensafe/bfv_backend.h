/* The exact (BFV) operations of the sealed protocol's server on a compute
 * backend (tensafe/backend.h): ciphertexts, plaintexts and public keys as
 * backend buffers, and the sealing step composed of backend calls. The
 * server does its products with tsafe_backend_mul_acc on these buffers.
 *
 * Shapes (N = the context's degree, L = tsafe_bfv_context_limbs limbs: q0
 * then the gap primes, NTT form): a ciphertext or accumulator is 2
 * polynomials x L limbs (c0, c1); a plaintext 1 x L (an operand when it is
 * reused); a public key an operand of 2 x L (p0, p1). The backend must serve this context's ring
 * (tsafe_backend_cpu_create_bfv or a device backend for it).
 *
 * Results are byte-identical to the direct functions of bfv.h
 * (tsafe_bfv_ct_read, tsafe_bfv_acc_mul_add, tsafe_bfv_seal) for the same
 * inputs and seeds (tests/test_bfv.c).
 *
 * Thread safety: as for backends, a sealer and the buffers belong to one
 * thread at a time. */
#ifndef TENSAFE_BFV_BACKEND_H
#define TENSAFE_BFV_BACKEND_H

#include "tensafe/backend.h"
#include "tensafe/bfv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads a ciphertext in tsafe_bfv_ct_read's format (exact length, every
 * coefficient checked) into dst (2 x L), expanding c1 from its seed. On
 * error dst's contents are unspecified. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_ct_read_buffer(
    const tsafe_bfv_context *ctx, const uint8_t *buf, size_t len,
    tsafe_buffer *dst);
/* n ciphertexts of ct_len bytes each, one after the other in buf, into
 * dst[0..n) (as tsafe_bfv_ct_read_buffer each). On a backend with the
 * ct_read slot (a GPU) in one call: c0 parsed and checked here, c1
 * expanded from its seed on the device. A refused ciphertext leaves the
 * buffers unspecified. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_ct_read_buffers(
    const tsafe_bfv_context *c, const uint8_t *buf, size_t ct_len, size_t n,
    tsafe_buffer *const *dst);
/* The same for n ciphertexts of ct_len bytes each at at[0..n), which need
 * not be adjacent (one slot call for ciphertexts spread over a message:
 * on a GPU each call costs several runtime calls). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_ct_read_buffers_at(
    const tsafe_bfv_context *c, const uint8_t *const *at, size_t ct_len, size_t n,
    tsafe_buffer *const *dst);

/* An operand buffer holding pt on backend b. On this library's CPU backend
 * the buffer borrows pt's storage (no copy: pt must outlive the buffer);
 * elsewhere it is a copy. Free with tsafe_buffer_free. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_plain_operand(
    const tsafe_bfv_plain *pt, tsafe_backend *b, tsafe_buffer **out);

/* Encode coefficients as tsafe_bfv_plain_create does (|coeff| < 2^40,
 * count <= N) straight into a buffer of 1 x L: an operand, or a plain
 * buffer for a plaintext multiplied once (per-token plaintexts, without a
 * tsafe_bfv_plain in between and without the operand's precomputation). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_plain_encode_buffer(
    const tsafe_bfv_context *ctx, const int64_t *coeffs, size_t count,
    tsafe_buffer *operand);

/* The public key (p0, p1) as an operand buffer of 2 x L on b (a copy). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_public_key_operand(
    const tsafe_bfv_public_key *pk, tsafe_backend *b, tsafe_buffer **out);

/* Scratch of the sealing step on backend b (borrowed, as ctx). */
typedef struct tsafe_bfv_sealer tsafe_bfv_sealer;
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_sealer_create(
    const tsafe_bfv_context *ctx, tsafe_backend *b, tsafe_bfv_sealer **out);
TSAFE_API void tsafe_bfv_sealer_free(tsafe_bfv_sealer *s);

/* The offline half of sealing: `count` fresh encryptions of zero under pk
 * (r (p0, p1) in NTT form, and the error e1), prepared ahead -- between
 * tokens -- so that tsafe_bfv_seal_buffer does only the online half (one
 * addition to the products, their inverse NTT, e1 and the read errors,
 * masks and flooding, the switch): the sampling of r and e1, the transform
 * of r and the products r p move out of the token. Each is used once, for
 * this pk only (another pk drops them). seed (32 bytes, tests) derives them
 * reproducibly; NULL draws from the CSPRNG. Memory: 2 L N words + N bytes
 * each (200 KB at N = 4096, L = 3). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_sealer_prepare(
    tsafe_bfv_sealer *s, const tsafe_buffer *pk, size_t count, const uint8_t *seed);
/* Prepared encryptions of zero not yet used (0 for NULL). */
TSAFE_API size_t tsafe_bfv_sealer_ready(const tsafe_bfv_sealer *s);
/* Forget the prepared ones (a new key); the buffers are kept. NULL ok. */
TSAFE_API void tsafe_bfv_sealer_drop(tsafe_bfv_sealer *s);

/* tsafe_bfv_seal on the backend: acc (2 x L, NTT form; consumed) plus a
 * fresh encryption of zero under pk (operand 2 x L), the errors, masks and
 * flooding at pos, the switch to q0 (L - 1 tsafe_backend_mod_switch calls);
 * c1 and the read coefficients land in r. c0 is read at pos from NTT form
 * (tsafe_backend_ntt_read) where the backend can, so only c1 goes through
 * the inverse NTT and the switch. The same randomness, drawn in the same
 * order, as tsafe_bfv_seal: equal seeds give equal results -- when no
 * prepared encryption of zero for pk is ready; with one, it is used and the
 * seed draws only the read errors and floods. Arguments as
 * there (TSAFE_E_ARG for repeated positions, TSAFE_E_RANGE, ...). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_seal_buffer(
    tsafe_bfv_sealer *s, tsafe_buffer *acc, const tsafe_buffer *pk,
    const uint32_t *pos, const uint64_t *mask, size_t n_reads,
    uint32_t flood_bits, const uint8_t *seed, tsafe_bfv_sealed *r);

/* One sealing of tsafe_bfv_seal_batch: tsafe_bfv_seal_buffer's acc, pos,
 * mask, n_reads, seed and r. */
typedef struct tsafe_bfv_seal_item {
    tsafe_buffer *acc;        /* 2 x L, NTT form; consumed */
    const uint32_t *pos;
    const uint64_t *mask;     /* n_reads masks < t, or NULL */
    size_t n_reads;
    const uint8_t *seed;      /* 32 bytes (tests), or NULL: the CSPRNG */
    tsafe_bfv_sealed *out;
} tsafe_bfv_seal_item;

/* n sealings under one key and flood width, each the result
 * tsafe_bfv_seal_buffer gives for its item when no prepared encryption of
 * zero is used (equal seeds: equal bytes). On a backend that seals in
 * batches (tsafe_bfv_sealer_batches) the ring work of all n is one backend
 * call, and each encryption of zero is made inline from the item's draws
 * (prepared ones stay for later calls); elsewhere the items go through
 * tsafe_bfv_seal_buffer in order (prepared ones used first, as there).
 * Items need distinct accumulators and outputs. Every item is checked
 * before any work; on error the outputs and accumulators are unspecified. Host scratch holding the draws is wiped. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_bfv_seal_batch(
    tsafe_bfv_sealer *s, const tsafe_buffer *pk, const tsafe_bfv_seal_item *items,
    size_t n, uint32_t flood_bits);
/* 1 when s's backend seals many items in one call (a GPU), else 0 (and
 * for NULL). */
TSAFE_API int tsafe_bfv_sealer_batches(const tsafe_bfv_sealer *s);

#ifdef __cplusplus
}
#endif
#endif
