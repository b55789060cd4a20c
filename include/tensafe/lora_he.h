/* HE-LoRA: the adapter path u = A x under CKKS, zero rotations.
 *
 * LoRA computes y = W x + s * B (A x) with A (r x d_in), B (d_out x r),
 * s = alpha/r (alpha/sqrt(r) with rsLoRA). Only u = A x runs under HE; B is
 * applied in plaintext by whoever holds it.
 *
 * Packing (ZeRo-MOAI, zero rotations): x is packed as h = ceil(d_in/2)
 * complex values z_t = x_t + i x_(t+h) and copied into `cols` interleaved
 * cosets of the slot group: slot c + cols*t holds z_t for every copy c.
 * Plaintext batch b holds row b*cols + c of A, conjugate-packed
 * (a_t - i a_(t+h)), in the same slots, so Re(z w) = x_t a_t + x_(t+h) a_(t+h)
 * and the segment sum over coset c is u_(b*cols+c). A coset of the
 * subgroup <5^cols> sums to a trace: (slots/cols) * sum_k m_(kL) zeta^(5^c kL)
 * with L = N/(2 cols), i.e. the reader needs only 2*cols decrypted
 * coefficients (tsafe_ckks_decrypt_coeffs_strided), no decode FFT.
 * Per token: one encryption, n_batches = ceil(r/cols) ct x pt products
 * (plaintexts encoded and NTT'd once at load), strided decryption, B u.
 *
 * Modes (see docs/THREAT_MODEL.md):
 *  - local (tsafe_lora_local): one process holds the secret key and the
 *    adapter; protects nothing from that process (parity and tests).
 *  - two-party (tsafe_lora_client / tsafe_lora_server, separate types and
 *    compilation units): the client holds the keys, the server the adapter;
 *    they exchange only serialized bytes. The server never holds a secret
 *    key. NOTE: the client can read every product x_j * A_ij from the
 *    decrypted slots, so plain ZeRo-MOAI reveals A to the client.
 *
 * Thread safety: plans, sites and servers' adapter data are immutable after
 * creation and shareable; clients, locals and servers are per-thread.
 */
#ifndef TENSAFE_LORA_HE_H
#define TENSAFE_LORA_HE_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/backend.h"
#include "tensafe/ckks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ plan */

typedef struct tsafe_lora_plan {
    tsafe_params params;      /* context parameters (explicit primes) */
    uint32_t level;           /* ciphertext level used (level + 1 limbs) */
    uint32_t response_level;  /* two-party: the server rescales products down
                                 to this level before sending (fewer bytes);
                                 == level: products sent as computed */
    double scale_x;           /* encoding scale of x */
    double scale_a;           /* encoding scale of A */
    uint32_t d_in, rank;
    uint32_t half;            /* h = ceil(d_in / 2) complex values */
    uint32_t cols;            /* rows of A per ciphertext product */
    uint32_t n_batches;       /* ceil(rank / cols) */
    double max_abs_x;         /* inputs beyond this are refused */
    double max_abs_a;         /* adapters beyond this are refused */
    double expected_error;    /* model: |u error| / (max_abs_x*max_abs_a*sqrt(d_in)) */
    double log2_q;            /* bits of the whole modulus */
    uint32_t max_log2_q;      /* 128-bit bound for this N */
    double cost;              /* relative cost units the planner minimised */
    char name[48];            /* "auto-n4096-2x50" or the preset name */
} tsafe_lora_plan;

/* The cheapest secure parameters (N in 2^11..2^15, one or two primes) for
 * depth-one HE-LoRA at this shape whose modelled error is at most
 * target_error, with room for |x| <= max_abs_x and |A| <= max_abs_a
 * without overflow. TSAFE_E_VALUE_RANGE when nothing fits. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_plan_auto(
    uint32_t d_in, uint32_t rank, double max_abs_x, double max_abs_a,
    double target_error, tsafe_lora_plan *out);
/* A named core preset ("seed-n16384", "seed-n32768", ...): picks the
 * lowest level and the scales that hold the bounds; lowers scale_x when
 * |x| is large; TSAFE_E_VALUE_RANGE when even that overflows. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_plan_preset(
    const char *preset, uint32_t d_in, uint32_t rank, double max_abs_x,
    double max_abs_a, tsafe_lora_plan *out);

/* ------------------------------------------------------------------ site */

/* One adapter module prepared for a plan: A packed into n_batches
 * plaintexts (NTT form, Shoup-prepared), B and the scale kept in float.
 * Immutable and shareable; borrows ctx (which must outlive it). */
typedef struct tsafe_lora_site tsafe_lora_site;

/* A: rank x d_in row-major, B: d_out x rank row-major (copied).
 * TSAFE_E_VALUE_RANGE if some |A_ij| > plan->max_abs_a. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_site_create(
    const tsafe_context *ctx, const tsafe_lora_plan *plan, const float *A,
    const float *B, uint32_t d_out, float scale, tsafe_lora_site **out);
TSAFE_API void tsafe_lora_site_free(tsafe_lora_site *site);
TSAFE_API uint32_t tsafe_lora_site_d_out(const tsafe_lora_site *site);
TSAFE_API uint32_t tsafe_lora_site_rank(const tsafe_lora_site *site);

/* Plaintext reference: delta = scale * B (A x) in float (OpenBLAS). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_site_plain_delta(
    const tsafe_lora_site *site, const float *x, float *delta);

/* ----------------------------------------------------------- statistics */

typedef struct tsafe_lora_stats {
    double encrypt_us;   /* encode + encrypt x (client) */
    double products_us;  /* all ct x pt products (server) */
    double reduce_us;    /* serialization / response assembly (server) */
    double decrypt_us;   /* strided decryption (client) */
    double sums_us;      /* trace read -> u (client) */
    double bu_us;        /* delta = s B u (server) */
    uint64_t bytes_up;   /* client -> server */
    uint64_t bytes_down; /* server -> client */
    uint64_t he_ops;     /* ct x pt products */
    uint64_t tokens;
    double offline_us;   /* server work done between tokens (sealed:
                            tsafe_sealed_server_refill), not in the above */
} tsafe_lora_stats;

/* --------------------------------------------------------------- engines */

/* Who computes deltas: a small interface so layers above (MoE expert LoRA,
 * hosts) can run the same code in plaintext, local or two-party mode.
 * fn computes delta[s] (d_out of site s) for n_sites sites sharing one
 * input x; stats may be NULL. */
typedef tsafe_status (*tsafe_lora_delta_fn)(void *user,
                                            const tsafe_lora_site *const *sites,
                                            size_t n_sites, const float *x,
                                            float *const *delta,
                                            tsafe_lora_stats *stats);
typedef struct tsafe_lora_engine {
    tsafe_lora_delta_fn fn;
    void *user;
} tsafe_lora_engine;

/* Plaintext reference engine (tsafe_lora_site_plain_delta). */
TSAFE_API tsafe_lora_engine tsafe_lora_engine_plain(void);

/* ----------------------------------------------------------- local mode */

/* Holds a context, a secret key and nothing else; sites are passed in. */
typedef struct tsafe_lora_local tsafe_lora_local;

/* Builds the context for plan; seed (32 bytes) reproduces the key, NULL
 * draws one from the CSPRNG. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_local_create(
    const tsafe_lora_plan *plan, const uint8_t *seed, tsafe_lora_local **out);
TSAFE_API void tsafe_lora_local_free(tsafe_lora_local *l);
/* Borrowed context to create sites with. */
TSAFE_API const tsafe_context *tsafe_lora_local_context(
    const tsafe_lora_local *l);
/* delta[s] (length d_out of site s) for n_sites sites sharing one
 * encryption of x; stats may be NULL (accumulated when given). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_local_delta(
    tsafe_lora_local *l, const tsafe_lora_site *const *sites, size_t n_sites,
    const float *x, float *const *delta, tsafe_lora_stats *stats);
/* u only (rank values per site), for callers that apply B themselves. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_local_u(
    tsafe_lora_local *l, const tsafe_lora_site *const *sites, size_t n_sites,
    const float *x, float *const *u, tsafe_lora_stats *stats);

/* The compute backend of l's ring work (ct x pt products): the CPU backend
 * from creation; this replaces it with one made by f for l's context (f
 * NULL: CPU; f and its user must outlive l) and drops cached operand
 * buffers. On error the current backend stays. u and delta are bitwise
 * the same on every backend. Not while another call on l runs. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_local_use_backend(
    tsafe_lora_local *l, const tsafe_backend_factory *f);

/* Local-mode engine over l (borrowed; sites must be built on its context). */
TSAFE_API tsafe_lora_engine tsafe_lora_engine_local(tsafe_lora_local *l);

#ifdef __cplusplus
}
#endif
#endif
