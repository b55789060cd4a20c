/* HE-LoRA internals shared by plan.c, site.c, local.c, client.c and
 * server.c. Only public core API is used (the core is a separate shared
 * library). */
#ifndef TSAFE_LORA_HE_INTERNAL_H
#define TSAFE_LORA_HE_INTERNAL_H

#include "tensafe/backend.h"
#include "tensafe/lora_engine.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_two_party.h"

struct tsafe_lora_site {
    uint64_t id;            /* unique in the process (never reused): cache key */
    const tsafe_context *ctx;
    tsafe_lora_plan plan;
    uint32_t d_out;
    float scale;
    tsafe_lora_module *module; /* the weights (owned): A, B, scale */
    const float *A;         /* rank x d_in, the module's */
    const float *B;         /* d_out x rank, the module's */
    tsafe_plaintext **pts;  /* n_batches packed rows of A */
};

/* The CKKS sites a local or a two-party server built for modules, keyed
 * on the module id (sitecache.c): built on first use on the owner's
 * context and plan, kept until the owner is freed. */
typedef struct tsafe_lora_sitecache {
    uint64_t *ids;
    tsafe_lora_site **sites;
    size_t n, cap;
} tsafe_lora_sitecache;

/* sites[i] for modules[i] (the caller checked the call). */
tsafe_status tsafe_lora_sitecache_map(tsafe_lora_sitecache *c, const tsafe_context *ctx,
                                      const tsafe_lora_plan *plan,
                                      const tsafe_lora_module *const *modules, size_t n,
                                      const tsafe_lora_site **sites);
void tsafe_lora_sitecache_clear(tsafe_lora_sitecache *c);
/* The caches of a local and of a two-party server. */
tsafe_lora_sitecache *tsafe_lora_local_sitecache_(tsafe_lora_local *l,
                                                  const tsafe_lora_plan **plan);
tsafe_lora_sitecache *tsafe_lora_server_sitecache_(tsafe_lora_server *s,
                                                   const tsafe_lora_plan **plan);

/* The wire module (framing, byte codecs) for the two-party messages. */
#include "../wire/wire.h"

/* Same packing parameters (the site fits the plan). */
int tsafe_lora_plan_compatible(const tsafe_lora_plan *a,
                               const tsafe_lora_plan *b);

/* Pack x (d_in floats) per the plan and encrypt it with sk (one pass,
 * fresh CSPRNG seed); checks the |x| bound. re/im: `slots` doubles each,
 * scratch for the packed x; every path that writes them wipes them before
 * returning (sodium_memzero), so no copy of x stays in them. */
tsafe_status tsafe_lora_encrypt_x(const tsafe_context *ctx,
                                  const tsafe_lora_plan *plan,
                                  const tsafe_secret_key *sk, const float *x,
                                  double *re, double *im, tsafe_ciphertext *ct);

/* Trace read of one product: y[2*cols] decrypted strided coefficients ->
 * u for rows b*cols .. b*cols+cols-1 (those < rank). */
void tsafe_lora_read_batch(const tsafe_context *ctx,
                           const tsafe_lora_plan *plan, uint32_t batch,
                           const double *y, float *u);

/* Stride and count for tsafe_ckks_decrypt_coeffs_strided. */
size_t tsafe_lora_read_stride(const tsafe_context *ctx,
                              const tsafe_lora_plan *plan);

/* Scale of a product ciphertext as the server sends it (after its
 * response rescales), computed exactly as the core computes it. */
double tsafe_lora_response_scale(const tsafe_context *ctx,
                                 const tsafe_lora_plan *plan);

/* tsafe_lora_server_process into a buffer the server owns and reuses
 * (grown when needed): valid until the next call on s or its free. For the
 * in-process pair, so a steady stream of tokens allocates nothing and
 * touches no fresh pages. NULL with *status set on error. */
const uint8_t *tsafe_lora_server_process_scratch(tsafe_lora_server *s,
                                                 const tsafe_lora_site *const *sites,
                                                 size_t n_sites, const uint8_t *request,
                                                 size_t len, size_t *out_len,
                                                 tsafe_lora_stats *stats, tsafe_status *status);

/* delta = scale * B u (OpenBLAS sgemv). */
void tsafe_lora_apply_b(const tsafe_lora_site *site, const float *u,
                        float *delta);

/* ---- ring work on a backend (exec.c), for server.c and local.c ----
 * One per server / local object (per thread, as they are). The backend is
 * made by a factory for ctx; the sites' plaintexts become cached operand
 * buffers (keyed on the site id, at most 256 sites beyond those of the
 * current request); a request's jobs (batch b of site s, site-major order,
 * numbered 0..total-1) run in chunks of tsafe_lora_exec_chunk jobs, each
 * chunk one tsafe_backend_mul_acc call. */
typedef struct tsafe_lora_exec tsafe_lora_exec;
tsafe_status tsafe_lora_exec_create(const tsafe_context *ctx, uint32_t level,
                                    const tsafe_backend_factory *f, tsafe_lora_exec **out);
void tsafe_lora_exec_free(tsafe_lora_exec *e);
/* A backend from f replaces the current one (cached buffers dropped); on
 * error the current one stays. */
tsafe_status tsafe_lora_exec_use_backend(tsafe_lora_exec *e, const tsafe_backend_factory *f);
const char *tsafe_lora_exec_backend_name(const tsafe_lora_exec *e);
/* The request ciphertext (at the plan level), uploaded once per request. */
tsafe_status tsafe_lora_exec_load_x(tsafe_lora_exec *e, const tsafe_ciphertext *x);
size_t tsafe_lora_exec_chunk(const tsafe_lora_exec *e);
/* Products x * pt of jobs first .. first+count-1 (count <= chunk), one
 * mul_acc call; sites checked by the caller (same plan level and context). */
tsafe_status tsafe_lora_exec_mul(tsafe_lora_exec *e, const tsafe_lora_site *const *sites,
                                 size_t n_sites, size_t first, size_t count);
/* Job j of the last chunk, rescaled down to to_level: a buffer of the
 * exec (valid until the next call) and its scale. */
tsafe_status tsafe_lora_exec_result(tsafe_lora_exec *e, size_t j, uint32_t to_level,
                                    const tsafe_buffer **out, double *scale);

#endif
