/* Two-party HE-LoRA: the client holds the CKKS keys and the hidden state x;
 * the server holds the adapter (sites) and never a secret key. They
 * exchange only byte buffers in a versioned format (docs/PROTOCOL.md):
 *
 *   client                                 server
 *   encrypt(x)        -- request -->
 *                                          process(sites): ct x pt products
 *                     <-- response --
 *   decode -> u (per site), optional DP noise
 *   release(u')       -- u' message -->
 *                                          apply(sites): delta = s B u'
 *
 * What each side learns (docs/THREAT_MODEL.md): the server sees x only
 * encrypted and u' (DP-protected when the client adds noise). The client
 * can read every product x_j A_ij of plain ZeRo-MOAI, so it learns A.
 *
 * Every message is malloc'd by the library (free it with
 * tsafe_lora_bytes_free), except where the caller passes the buffer
 * (tsafe_lora_server_process_into).
 * Parsers validate every length and value and return TSAFE_E_FORMAT-family
 * errors. Thread safety: one client/server object per thread; sites are
 * shared read-only. The two types live in separate compilation units; the
 * server's has no field or call that can hold a secret key. */
#ifndef TENSAFE_LORA_TWO_PARTY_H
#define TENSAFE_LORA_TWO_PARTY_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/backend.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_dp.h"

#ifdef __cplusplus
extern "C" {
#endif

TSAFE_API void tsafe_lora_bytes_free(uint8_t *bytes);

/* ---------------------------------------------------------------- client */

typedef struct tsafe_lora_client tsafe_lora_client;

/* Builds the plan's context and a fresh secret key (seed: 32 bytes to
 * reproduce it in tests, NULL for the CSPRNG). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_client_create(
    const tsafe_lora_plan *plan, const uint8_t *seed, tsafe_lora_client **out);
TSAFE_API void tsafe_lora_client_free(tsafe_lora_client *c);

/* Encrypt x (d_in floats, |x_i| <= plan max_abs_x) into a request. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_client_encrypt(
    tsafe_lora_client *c, const float *x, uint8_t **request, size_t *len,
    tsafe_lora_stats *stats);
/* Decrypt a response into u: u[s] receives ranks[s] values for site s;
 * n_sites and ranks must match what the server answered. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_client_decode(
    tsafe_lora_client *c, const uint8_t *response, size_t len, size_t n_sites,
    const uint32_t *ranks, float *const *u, tsafe_lora_stats *stats);
/* Serialize u' for the server. dp may be NULL (no noise: u is revealed to
 * the server as is); otherwise each site's u is clipped and noised by the
 * DP session, and TSAFE_E_BUDGET is returned (nothing released) once the
 * budget is spent. u is modified in place when dp is given. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_client_release(
    tsafe_lora_client *c, size_t n_sites, const uint32_t *ranks,
    float *const *u, tsafe_dp_session *dp, uint8_t **msg, size_t *len,
    tsafe_lora_stats *stats);

/* ---------------------------------------------------------------- server */

typedef struct tsafe_lora_server tsafe_lora_server;

TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_server_create(
    const tsafe_lora_plan *plan, tsafe_lora_server **out);
TSAFE_API void tsafe_lora_server_free(tsafe_lora_server *s);
/* The server's context (public data only), to build sites with. */
TSAFE_API const tsafe_context *tsafe_lora_server_context(
    const tsafe_lora_server *s);
/* Request -> response: every site's products with the one ciphertext
 * (*response malloc'd; free with tsafe_lora_bytes_free). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_server_process(
    tsafe_lora_server *s, const tsafe_lora_site *const *sites, size_t n_sites,
    const uint8_t *request, size_t len, uint8_t **response, size_t *out_len,
    tsafe_lora_stats *stats);
/* Exact size of the response for these sites (the same for every request:
 * it depends only on the plan and the sites' batch counts). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_server_response_size(
    const tsafe_lora_server *s, const tsafe_lora_site *const *sites,
    size_t n_sites, size_t *size);
/* tsafe_lora_server_process into the caller's buffer of cap bytes, for a
 * server loop that reuses one buffer per connection: no allocation and no
 * first-touch page faults per token (responses are megabytes). *out_len
 * receives the size needed even when TSAFE_E_BUFFER_SMALL is returned;
 * after any other error it is 0 and buf's contents are unspecified. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_server_process_into(
    tsafe_lora_server *s, const tsafe_lora_site *const *sites, size_t n_sites,
    const uint8_t *request, size_t len, uint8_t *buf, size_t cap,
    size_t *out_len, tsafe_lora_stats *stats);
/* The compute backend of the server's ring work (ct x pt products and
 * rescales; docs/API.md "Choosing a backend"). A server starts on the CPU
 * backend; this replaces it with one made by f for the server's context
 * (f NULL: the CPU backend; f and its user must outlive s) and drops the
 * operand buffers cached for the sites. On error (e.g. TSAFE_E_NO_DEVICE
 * from a CUDA factory without a GPU) the current backend stays. Responses
 * are byte-identical on every backend. Not while another call on s runs. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_server_use_backend(
    tsafe_lora_server *s, const tsafe_backend_factory *f);
/* Name of the server's current backend ("cpu", "cuda", ...; "none" for
 * NULL). Static or backend-owned storage, valid until the backend changes. */
TSAFE_API const char *tsafe_lora_server_backend_name(const tsafe_lora_server *s);
/* u' message -> delta[s] (d_out of site s) = scale * B u'. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_server_apply(
    tsafe_lora_server *s, const tsafe_lora_site *const *sites, size_t n_sites,
    const uint8_t *msg, size_t len, float *const *delta,
    tsafe_lora_stats *stats);

/* ------------------------------------------------------ in-process pair */

/* A client and a server in one process exchanging the real message bytes
 * (for demos, tests and benchmarks: every byte that would cross the wire is
 * produced, parsed and counted). Borrowed; sites are built on the server's
 * context. dp may be NULL. */
typedef struct tsafe_lora_pair {
    tsafe_lora_client *client;
    tsafe_lora_server *server;
    tsafe_dp_session *dp;
} tsafe_lora_pair;

TSAFE_API tsafe_lora_engine tsafe_lora_engine_two_party(tsafe_lora_pair *pair);
/* tsafe_lora_server_use_backend on the pair's server. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_pair_use_backend(
    tsafe_lora_pair *pair, const tsafe_backend_factory *f);

#ifdef __cplusplus
}
#endif
#endif
