/* Sealed two-party HE-LoRA: the client learns only delta = s B A x; the
 * server learns nothing about x (sealed-private, the default) or only
 * u + DP noise (sealed). docs/THREAT_MODEL.md states the argument,
 * docs/PROTOCOL.md the wire format.
 *
 *   client                                     server
 *   hello: plan, session id, public key  -->   accept (plan must match)
 *   query: Enc(x chunks)                 -->   round 1: per site
 *                                              Enc(A x) + Enc(0), mask R,
 *                                              flood, switch to q0
 *                                        <--   response: c1 + read c0s
 *   decrypt share v = u + t/2 - R mod t (uniform: reveals nothing of A;
 *   sealed-private reads f = u/2^k + t/2 - R at t's step, plan version 7)
 *   sealed:         v + DP noise         -->   u + n = v + R - t/2 (mod t)
 *                                        <--   delta' = s B (u + n)
 *   sealed-private: Enc(f)               -->   round 2: Enc(B' u~) (exact,
 *                                              u~ = f + R - t/2 = u/2^k +- 1)
 *                                        <--   sealed result: delta
 *
 * Arithmetic is exact integer fixed point (BFV-style, tensafe/bfv.h): x is
 * quantized per token to x_bits (scale kept by the client), A per site to
 * a_bits, s*B*scale_A to b_bits (sealed-private). What the client decrypts
 * carries no encryption noise, and nothing it sends back is derived from
 * a decryption in sealed-private (no decryption oracle for the server).
 *
 * The client owns the parameters: it derives the plan from public shapes
 * and its own options and refuses any other (tsafe_sealed_plan_check).
 * Every message carries the session id, a sequence number and the round;
 * out-of-order or replayed messages are refused with TSAFE_E_REPLAY.
 *
 * Messages are malloc'd by the library (tsafe_lora_bytes_free). Thread
 * safety: clients and servers are per-thread objects; sites are immutable
 * after creation and shareable between the servers of one plan. */
#ifndef TENSAFE_LORA_SEALED_H
#define TENSAFE_LORA_SEALED_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/bfv.h"
#include "tensafe/backend.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_dp.h"
#include "tensafe/lora_two_party.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_SEALED_PLAN_VERSION 7u
#define TSAFE_SEALED_SESSION_BYTES 16

typedef enum tsafe_sealed_mode {
    TSAFE_SEALED = 1,         /* one HE round; the server learns u + noise */
    TSAFE_SEALED_PRIVATE = 2  /* two HE rounds; the server learns nothing */
} tsafe_sealed_mode;

/* The widths (bits) a plan accepts for x, A and B: others are refused
 * with TSAFE_E_RANGE. Whether a width fits the ring at given shapes is
 * the derivation's answer (TSAFE_E_VALUE_RANGE when none does). */
#define TSAFE_SEALED_WIDTH_MIN 4u
#define TSAFE_SEALED_WIDTH_MAX 20u

/* Client options (zero = default). */
typedef struct tsafe_sealed_opts {
    uint32_t x_bits;       /* default 13 */
    uint32_t a_bits;       /* default 14 (sealed-private; 13 or 12 where
                              round 1 has no room), 13 (sealed) */
    uint32_t b_bits;       /* sealed-private; default: 12..15, the width
                              whose plan models the smallest error */
    uint32_t rotate_after; /* tokens per secret key; default 4096 */
    uint32_t sites_per_query; /* sites expected to read one query (1..4096;
                                 default 1): weights the round-1 split, a
                                 shared query may be longer when it makes
                                 every site's response shorter */
    uint32_t semi_honest;  /* 1: the caller accepts that sealed mode (TSAFE_SEALED)
                              protects only against peers that follow the
                              protocol (a malicious server gets a decryption
                              oracle, the client learns s B' from its own
                              noise: THREAT_MODEL.md). Required to derive a
                              sealed plan (TSAFE_E_INSECURE without it);
                              ignored by sealed-private. */
    uint32_t unchecked_shares; /* sealed-private, 1: leave out the checked
                              shares (since 2026-11-28 the default is to
                              check them: round 1 also returns
                              TSAFE_SEALED_CHECKS checked reads per site
                              and round 2 folds them into the output with
                              fresh random matrices, so that a client that
                              offsets its share reads B_q only modulo small
                              numbers, at about 2^16 tokens a column for its
                              parities; docs/MALICIOUS_CLIENT.md). An
                              unchecked plan costs the server about 0.55x
                              per site, but a client that offsets its share
                              reads a column of B_q exactly per token (all
                              of B_q in rank + 1 tokens a site): only for
                              clients that follow the protocol. Default 0. */
} tsafe_sealed_opts;

/* Checked reads per site of a sealed-private plan (0 with
 * opts.unchecked_shares). */
#define TSAFE_SEALED_CHECKS 16u

/* Everything both sides must agree on, derived from the public shapes and
 * the client's options. A plain value; compare with tsafe_sealed_plan_check. */
typedef struct tsafe_sealed_plan {
    uint32_t version;
    uint32_t mode;               /* tsafe_sealed_mode */
    uint32_t d_in, rank;         /* rank: the largest rank of any site */
    uint32_t d_out_max;          /* the largest d_out of any site */
    uint32_t x_bits, a_bits, b_bits;
    tsafe_bfv_params r1;         /* round 1 (x chunks times A blocks) */
    tsafe_bfv_params r2;         /* round 2 (sealed-private only) */
    uint32_t chunk1, rows1;      /* x chunk length, A rows per block */
    uint32_t n_chunks1;          /* ceil(d_in / chunk1) */
    uint32_t flood1;             /* flooding bits, round 1 */
    uint32_t trunc_bits;         /* k: round 2 works on floor(u / 2^k) */
    uint32_t chunk2;             /* round-2 input chunk of the largest site
                                    (rows of B per block = N / chunk); a
                                    site with fewer outputs may take a
                                    longer one (PROTOCOL.md, Layouts) */
    uint32_t rotate_after;       /* tokens per secret key */
    uint32_t sites_per_query;    /* the option the round-1 split was chosen for */
    uint32_t semi_honest;        /* sealed: the caller's opt-in (opts) */
    double log2_sd1, log2_sd2;   /* flooding: statistical distance per site
                                    response (log2), rounds 1 and 2 */
    double log2_fail;            /* decryption failure probability (log2) */
    double expected_rel_error;   /* model of |delta error| / |delta| */
    uint32_t checks;             /* checked reads per site: sealed-private
                                    TSAFE_SEALED_CHECKS, 0 with
                                    opts.unchecked_shares and in sealed */
} tsafe_sealed_plan;

/* Derive the plan for sites with input d_in, ranks <= rank and outputs
 * <= d_out_max. opts may be NULL. TSAFE_E_VALUE_RANGE when no parameter
 * set meets the bounds (widths too large for N = 4096..8192);
 * TSAFE_E_INSECURE for TSAFE_SEALED without opts->semi_honest. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_plan_derive(
    tsafe_sealed_mode mode, uint32_t d_in, uint32_t rank, uint32_t d_out_max,
    const tsafe_sealed_opts *opts, tsafe_sealed_plan *out);
/* The client's check of a plan it was handed: re-derives it from its
 * shapes and widths and refuses (TSAFE_E_PARAMS) anything that differs,
 * and TSAFE_E_INSECURE for a test-only flag. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_plan_check(
    const tsafe_sealed_plan *plan);
/* Bytes per token of one site (up: shared query; down and round 2). */
typedef struct tsafe_sealed_sizes {
    size_t query;      /* client -> server, shared by all sites of one x */
    size_t response1;  /* server -> client per site */
    size_t share;      /* client -> server per site (round 2 input) */
    size_t response2;  /* server -> client per site (delta) */
} tsafe_sealed_sizes;
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_plan_sizes(
    const tsafe_sealed_plan *plan, uint32_t rank, uint32_t d_out,
    tsafe_sealed_sizes *out);

/* ------------------------------------------------------------------ site */

typedef struct tsafe_sealed_site tsafe_sealed_site;

/* Quantize an adapter module for plan (A: rank x d_in, B: d_out x rank,
 * row-major, copied; rank <= plan rank, d_out <= plan d_out_max). The
 * plaintexts are built once here. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_site_create(
    const tsafe_sealed_plan *plan, const float *A, const float *B,
    uint32_t rank, uint32_t d_out, float scale, tsafe_sealed_site **out);
TSAFE_API void tsafe_sealed_site_free(tsafe_sealed_site *site);
/* sealed-private rounds B stochastically, from a stream keyed by a
 * process-wide secret (32 bytes; by default drawn from the CSPRNG on
 * first use): the client cannot compute B_q, so two adapters with the same
 * product cannot be told apart by which lattice the outputs lie on. The
 * same adapter gives the same B_q under one key. A server that restarts
 * should set a persistent secret key (kept like a signing key) before it
 * builds sites, so that a client cannot collect fresh roundings of one
 * adapter; NULL draws a new one. Applies to sites created after the call;
 * thread-safe. TSAFE_E_CRYPTO when libsodium cannot start. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_set_rounding_key(const uint8_t *key);
TSAFE_API uint32_t tsafe_sealed_site_rank(const tsafe_sealed_site *site);
TSAFE_API uint32_t tsafe_sealed_site_d_out(const tsafe_sealed_site *site);

/* ---------------------------------------------------------------- client */

typedef struct tsafe_sealed_client tsafe_sealed_client;

/* Checks plan (tsafe_sealed_plan_check), builds contexts and keys (seed:
 * 32 bytes for tests, NULL for the CSPRNG) and a random session id. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_client_create(
    const tsafe_sealed_plan *plan, const uint8_t *seed,
    tsafe_sealed_client **out);
TSAFE_API void tsafe_sealed_client_free(tsafe_sealed_client *c);
/* The hello message (plan, session id, public keys). Send it first and
 * again after every key rotation (tsafe_sealed_client_needs_hello). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_client_hello(
    tsafe_sealed_client *c, uint8_t **msg, size_t *len);
/* 1 when a token failed: the client refuses everything but free. */
TSAFE_API int tsafe_sealed_client_failed(const tsafe_sealed_client *c);
/* 1 when the key was rotated and a new hello must be sent. */
TSAFE_API int tsafe_sealed_client_needs_hello(const tsafe_sealed_client *c);
/* Quantize and encrypt x (d_in floats, finite) for the next token. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_client_query(
    tsafe_sealed_client *c, const float *x, uint8_t **msg, size_t *len,
    tsafe_lora_stats *stats);
/* Decrypt the round-1 response for sites of the given ranks and outputs,
 * and produce the client's second message: sealed: the shares plus
 * discrete-Gaussian DP noise from dp (dp may be NULL only with
 * allow_no_dp: the server then learns u exactly); sealed-private: the
 * encrypted truncated shares (dp unused). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_client_respond(
    tsafe_sealed_client *c, const uint8_t *response, size_t len,
    size_t n_sites, const uint32_t *ranks, const uint32_t *d_outs,
    tsafe_dp_session *dp, int allow_no_dp, uint8_t **msg, size_t *out_len,
    tsafe_lora_stats *stats);
/* Read the server's final message into delta[s] (d_outs[s] floats).
 * Any failure of respond or finish ends the session: every later call
 * but free returns TSAFE_E_STATE (tsafe_sealed_client_failed says so);
 * start a new client (new keys, new session id) to go on. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_client_finish(
    tsafe_sealed_client *c, const uint8_t *msg, size_t len, size_t n_sites,
    const uint32_t *d_outs, float *const *delta, tsafe_lora_stats *stats);

/* ---------------------------------------------------------------- server */

typedef struct tsafe_sealed_server tsafe_sealed_server;

/* A server for plan (its own derivation; a hello with another plan is
 * refused). Holds public keys only. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_create(
    const tsafe_sealed_plan *plan, tsafe_sealed_server **out);
TSAFE_API void tsafe_sealed_server_free(tsafe_sealed_server *s);
/* Start (or re-key) a session from a hello message. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_accept(
    tsafe_sealed_server *s, const uint8_t *hello, size_t len);
/* Round 1: query -> response (masks kept for round 2). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_round1(
    tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
    size_t n_sites, const uint8_t *query, size_t len, uint8_t **response,
    size_t *out_len, tsafe_lora_stats *stats);
/* Round 2: the client's second message -> the final message (sealed: the
 * deltas in clear, scaled by the client's private x scale; sealed-private:
 * sealed encryptions of the deltas). The same sites, in the same order. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_round2(
    tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
    size_t n_sites, const uint8_t *msg, size_t len, uint8_t **out,
    size_t *out_len, tsafe_lora_stats *stats);
/* Where the server's ring work runs (products, sealing, the switch): on
 * backends from factory f (NULL: the CPU backend, also the default at
 * create), one per round's ring, created now. Cached site operands are
 * dropped. On error the server keeps its previous backend. f (and its
 * user) must outlive the server. Not while another call on s runs. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_use_backend(
    tsafe_sealed_server *s, const tsafe_backend_factory *f);
/* Offline work for the next token, to run between tokens (after the final
 * message went out, before the next query): prepares as many encryptions
 * of zero under the session's keys as the last token sealed, so that the
 * next token's rounds do only their online part (tsafe_bfv_sealer_prepare).
 * Optional: without it each sealing makes its own. Time goes to
 * stats->offline_us (stats may be NULL). A no-op before a session and
 * when enough are ready. For hosts with idle time
 * between tokens and for device backends: on the 2-core CPU machine it
 * does not pay in a tight loop (the next token's caches are cold), nor
 * between the tokens of tensafe serve over 127.0.0.1 (the client's next
 * query arrives before it is done), so neither the in-process pair nor
 * tensafe serve calls it. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_refill(
    tsafe_sealed_server *s, tsafe_lora_stats *stats);
/* Threads for the sealings of a round (the encryptions of zero, the
 * switch): with a pool, a round's blocks are sealed on up to its thread
 * count at once, each extra thread on a backend of its own from the
 * server's factory (host-memory backends; others seal on one thread).
 * Same bytes as without. pool is borrowed (NULL: one thread) and must
 * outlive the server or the next use_pool. Not while another call on s
 * runs. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_use_pool(
    tsafe_sealed_server *s, tsafe_cpu_pool *pool);
/* The hook a host calls between round 1 and round 2 (after response 1
 * went out, while the client decrypts and encrypts its shares) for the
 * part of round 2 that needs only the server's own masks. Since plan
 * version 7 (no wrap band: docs/PROTOCOL.md) there is none; the call is
 * checked and returns. sites: those of round 1, in the same order.
 * TSAFE_E_STATE unless round 1 is pending; stats unused (NULL ok). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_prepare_round2(
    tsafe_sealed_server *s, const tsafe_sealed_site *const *sites, size_t n_sites,
    tsafe_lora_stats *stats);
/* "cpu", "cuda:0 (sm_90)", ...; "none" for NULL or when a failed
 * tsafe_sealed_server_use_backend left no backend (the rounds then
 * return TSAFE_E_STATE). Borrowed. */
TSAFE_API const char *tsafe_sealed_server_backend_name(const tsafe_sealed_server *s);
/* sealed only: what the server learned in the last round 2, u + n of
 * site i in units of the client's quantized x (attack tests, audits). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_server_last_u(
    const tsafe_sealed_server *s, size_t site, int64_t *u, size_t n);

/* ------------------------------------------------------ in-process pair */

/* A sealed client and server in one process exchanging the real bytes
 * (demos, tests, benchmarks). Calls group sites by input width; for each
 * width the pair keeps a client/server session whose plan the client
 * derives (opts may be NULL) from the largest rank and d_out seen (a
 * larger site later starts a new session). The engine builds one sealed
 * site per LoRA site (from the site's A, B and scale) on first use and
 * keeps it until the pair's free: the LoRA sites must outlive the pair.
 * dp (borrowed): sealed mode only; NULL there needs allow_no_dp. */
typedef struct tsafe_sealed_pair tsafe_sealed_pair;
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_pair_create(
    tsafe_sealed_mode mode, const tsafe_sealed_opts *opts,
    tsafe_dp_session *dp, int allow_no_dp, tsafe_sealed_pair **out);
TSAFE_API void tsafe_sealed_pair_free(tsafe_sealed_pair *p);
/* Build the sessions and sealed sites for these LoRA sites now (adapter
 * load time) instead of on their first token. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_pair_prepare(
    tsafe_sealed_pair *p, const tsafe_lora_site *const *sites, size_t n);
/* Every server of the pair, present and future, on backends from f (NULL:
 * CPU). f must outlive p. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_sealed_pair_use_backend(
    tsafe_sealed_pair *p, const tsafe_backend_factory *f);
TSAFE_API tsafe_lora_engine tsafe_lora_engine_sealed(tsafe_sealed_pair *p);

#ifdef __cplusplus
}
#endif
#endif
