/* LoRA modules and the engines over them (libtensafe-lora).
 *
 * A tsafe_lora_module is the weights of one adapted linear map, the
 * delta = scale * B (A x) of lora_adapter.h's module (A: rank x d_in,
 * B: d_out x rank, row-major floats), copied at creation, with an id that
 * is unique in the process and never reused (an address may be, after a
 * free). It is built from an adapter's module (tsafe_lora_module_info) or
 * from arrays, and knows no encryption scheme.
 *
 * An engine (tsafe_lora_module_engine) computes the deltas of a list of
 * modules for one input x: in clear (plain), under CKKS with the key in
 * the host (local), plain ZeRo-MOAI two-party, or the sealed two-party
 * protocol. Each engine prepares its own form of a module on first use
 * -- CKKS plaintexts on its context, sealed sites under its plan --
 * keyed on the module id, and keeps it until the engine's object is
 * freed. Sealed engines need no CKKS context.
 *
 * Ownership: modules are created and freed by the caller
 * (tsafe_lora_module_free; free(NULL) a no-op) and must stay valid during
 * every call they are handed to (and while a tsafe_moe_lora holds them).
 * What an engine prepared copies what it needs, so a module may be freed
 * before the engine's object (a local, a two-party server, a sealed
 * pair); the object keeps the prepared form, unused, until its own free
 * (ids are never reused). An engine value only borrows the object it
 * wraps.
 *
 * Thread safety: a module is immutable after creation and may be shared
 * by any number of threads and engines. An engine is as per-thread as the
 * object it wraps (a local, a pair): one call at a time per object. */
#ifndef TENSAFE_LORA_ENGINE_H
#define TENSAFE_LORA_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/lora_adapter.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_sealed.h"
#include "tensafe/lora_two_party.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsafe_lora_module tsafe_lora_module;

/* A module from arrays (copied): A rank x d_in, B d_out x rank, finite
 * values and scale; 1 <= rank <= 1024, d_in and d_out in 1..2^24.
 * TSAFE_E_NULL, TSAFE_E_ARG (shapes), TSAFE_E_VALUE_RANGE (a non-finite
 * value), TSAFE_E_NOMEM. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_module_create(
    const float *A, const float *B, uint32_t rank, uint32_t d_in, uint32_t d_out,
    float scale, tsafe_lora_module **out);
/* A module from an adapter's module (tsafe_lora_adapter_module): its A,
 * B, dimensions and scale (as a float), copied; the adapter may be freed
 * afterwards. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_module_from_info(
    const tsafe_lora_module_info *info, tsafe_lora_module **out);
TSAFE_API void tsafe_lora_module_free(tsafe_lora_module *m);
/* Accessors (0 / NULL for NULL). A and B are borrowed, valid while m is. */
TSAFE_API uint64_t tsafe_lora_module_id(const tsafe_lora_module *m);
TSAFE_API uint32_t tsafe_lora_module_rank(const tsafe_lora_module *m);
TSAFE_API uint32_t tsafe_lora_module_d_in(const tsafe_lora_module *m);
TSAFE_API uint32_t tsafe_lora_module_d_out(const tsafe_lora_module *m);
TSAFE_API float tsafe_lora_module_scale(const tsafe_lora_module *m);
TSAFE_API const float *tsafe_lora_module_A(const tsafe_lora_module *m);
TSAFE_API const float *tsafe_lora_module_B(const tsafe_lora_module *m);

/* The module a CKKS site was built from (tsafe_lora_site_create makes
 * one): borrowed, valid while the site is. */
TSAFE_API const tsafe_lora_module *tsafe_lora_site_module(const tsafe_lora_site *site);

/* delta[i] (d_out of modules[i] floats) for modules[i] and x (d_in
 * floats; every module of one call has the same d_in). */
typedef tsafe_status (*tsafe_lora_module_fn)(void *user,
                                             const tsafe_lora_module *const *modules,
                                             size_t n, const float *x, float *const *delta,
                                             tsafe_lora_stats *stats);
/* Builds the engine's form of modules now (n <= 256) instead of on their
 * first call. */
typedef tsafe_status (*tsafe_lora_module_prepare_fn)(void *user,
                                                     const tsafe_lora_module *const *modules,
                                                     size_t n);
typedef struct tsafe_lora_module_engine {
    tsafe_lora_module_fn fn;
    void *user;
    tsafe_lora_module_prepare_fn prepare; /* NULL: nothing to prepare */
} tsafe_lora_module_engine;

/* e->fn(e->user, ...) with the checks every engine needs (NULL e or fn:
 * TSAFE_E_NULL). stats may be NULL. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_module_engine_run(
    const tsafe_lora_module_engine *e, const tsafe_lora_module *const *modules, size_t n,
    const float *x, float *const *delta, tsafe_lora_stats *stats);
/* e->prepare(e->user, modules, n) (adapter load time: the first token
 * then does only its own work); TSAFE_OK when e has nothing to prepare.
 * Sealed engines take modules of several input widths in one call; local
 * and two-party ones only modules of their plan's rank and d_in. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_lora_module_engine_prepare(
    const tsafe_lora_module_engine *e, const tsafe_lora_module *const *modules, size_t n);
/* In clear (the reference: the same float arithmetic as
 * tsafe_lora_site_plain_delta). */
TSAFE_API tsafe_lora_module_engine tsafe_lora_module_engine_plain(void);
/* Local mode over l (borrowed): sites on l's context, built per module
 * on first use and kept until l is freed. */
TSAFE_API tsafe_lora_module_engine tsafe_lora_module_engine_local(tsafe_lora_local *l);
/* Plain ZeRo-MOAI over pair (borrowed): sites on its server's context,
 * kept until the server is freed. */
TSAFE_API tsafe_lora_module_engine tsafe_lora_module_engine_two_party(tsafe_lora_pair *pair);
/* The sealed pair p (borrowed): sealed sites per module and input width,
 * kept until p is freed; no CKKS context. */
TSAFE_API tsafe_lora_module_engine tsafe_lora_module_engine_sealed(tsafe_sealed_pair *p);

#ifdef __cplusplus
}
#endif
#endif
