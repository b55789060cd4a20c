/* Adapter registry with hot-swap and metering (libtensafe-lora).
 *
 * A registry maps slot names ("tenant-a/q_proj", "medical", ...) to
 * reference-counted entries. An entry wraps an opaque object (a loaded
 * adapter, a packed HE plan, anything) with its destroy callback and
 * metadata (adapter id, price per 1k tokens).
 *
 *  - put replaces a slot's entry atomically: an acquire that happens after
 *    put returns sees the new entry; one that happened before keeps the old
 *    entry until it releases it (a token in flight finishes with the
 *    adapter it started with).
 *  - The destroy callback runs exactly once, when the last reference goes
 *    (the slot's own or the last in-flight ref), in the thread that drops
 *    it (put, remove, release or registry_free), never while the registry
 *    lock is held -- so it may call back into the registry.
 *
 * Provenance: every entry records where its object came from (a
 * tsafe_lora_origin: a signed package's digest and signer key, or
 * "unsigned" with the path it was loaded from). A new registry REFUSES
 * unsigned entries (put returns TSAFE_E_UNSIGNED) until
 * tsafe_registry_set_allow_unsigned(reg, 1) -- the library form of the
 * CLI's --allow-unsigned. The registry cannot verify an opaque object: it
 * records what the caller states. Take the origin from
 * tsafe_lora_adapter_origin, which the loaders fill (only
 * tsafe_lora_adapter_load_package, after verifying the signature against
 * the caller's trusted key, reports SIGNED).
 *
 * Metering: each entry carries counters for its slot and for its adapter
 * (adapter id + price). tsafe_registry_meter adds to both with relaxed
 * atomic adds (no lock); the JSON export reads them under the registry
 * lock (each counter is read atomically; a snapshot taken while threads
 * meter may mix counts from a few in-flight calls). Cost = tokens / 1000 *
 * price, per (adapter id, price) row: a re-put with a new price starts a
 * new row, so past tokens keep their price.
 *
 * Thread safety: every function may be called from any thread
 * concurrently, except tsafe_registry_free, which must not race with other
 * calls on the same registry. Implementation: one pthread mutex per
 * registry guards the slot table (held for a lookup and a refcount
 * increment only); entry reference counts and counters are C11 atomics.
 * Refs may outlive the registry (entries and counters are freed by the
 * last reference). */
#ifndef TENSAFE_LORA_REGISTRY_H
#define TENSAFE_LORA_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/export.h"
#include "tensafe/lora_adapter.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_REGISTRY_MAX_NAME 1024u /* bytes in a slot name / adapter id */

typedef struct tsafe_registry tsafe_registry;
/* A held reference to one entry (what acquire returns). */
typedef struct tsafe_registry_ref tsafe_registry_ref;

/* Called once with the object when its entry's last reference goes. */
typedef void (*tsafe_registry_destroy_fn)(void *object);

#define TSAFE_REGISTRY_MAX_PATH 4096u /* bytes in an unsigned origin's path */

typedef struct tsafe_registry_meta {
    const char *adapter_id;     /* required, UTF-8, 1..TSAFE_REGISTRY_MAX_NAME
                                   bytes; copied */
    double price_per_1k_tokens; /* finite, >= 0 */
    /* Where the object came from (copied, path included). NULL means
     * unsigned with no path. kind must be a tsafe_lora_origin_kind; an
     * unsigned path must be UTF-8 of 1..TSAFE_REGISTRY_MAX_PATH bytes (it
     * goes into the JSON export), else TSAFE_E_ARG. */
    const tsafe_lora_origin *origin;
} tsafe_registry_meta;

typedef struct tsafe_registry_counters {
    uint64_t tokens;
    uint64_t he_ops;
    uint64_t bytes_in;
    uint64_t bytes_out;
} tsafe_registry_counters;

TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_create(tsafe_registry **out);

/* Drops the registry's references (destroying entries no ref holds). Refs
 * still held stay valid; release them later. NULL is a no-op. */
TSAFE_API void tsafe_registry_free(tsafe_registry *reg);

/* Whether put accepts entries whose origin is unsigned (meta->origin NULL
 * or kind TSAFE_LORA_ORIGIN_UNSIGNED). 0 (the default of a new registry)
 * refuses them; nonzero allows them. Affects later puts only: entries
 * already in place stay. Safe to call from any thread. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_set_allow_unsigned(tsafe_registry *reg, int allow);

/* Puts `object` into `slot` (UTF-8, 1..TSAFE_REGISTRY_MAX_NAME bytes;
 * created on first use; name copied), replacing
 * the previous entry atomically. On TSAFE_OK the registry owns `object` and
 * calls destroy(object) (destroy may be NULL) when the last reference goes.
 * An unsigned origin while the registry does not allow unsigned entries ->
 * TSAFE_E_UNSIGNED (checked after the arguments, before anything changes).
 * On error nothing changed and the caller still owns `object`. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_put(tsafe_registry *reg, const char *slot, void *object,
                   tsafe_registry_destroy_fn destroy,
                   const tsafe_registry_meta *meta);

/* Empties a slot (its counters stay). TSAFE_E_NOT_FOUND if it is empty or
 * unknown. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_remove(tsafe_registry *reg, const char *slot);

/* The slot's current entry with one reference held for the caller, who
 * must pass it to tsafe_registry_release exactly once. TSAFE_E_NOT_FOUND
 * for an unknown or empty slot (*ref = NULL). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_acquire(tsafe_registry *reg, const char *slot,
                       tsafe_registry_ref **ref);

/* Drops one reference; may run the destroy callback. NULL is a no-op. */
TSAFE_API void tsafe_registry_release(tsafe_registry_ref *ref);

/* Accessors on a held ref (valid while the ref is held). */
TSAFE_API void *tsafe_registry_ref_object(const tsafe_registry_ref *ref);
TSAFE_API const char *tsafe_registry_ref_adapter_id(const tsafe_registry_ref *ref);
TSAFE_API double tsafe_registry_ref_price(const tsafe_registry_ref *ref);
/* The entry's origin as given to put; out->path is borrowed from the ref
 * (valid while the ref is held). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_ref_origin(const tsafe_registry_ref *ref, tsafe_lora_origin *out);
/* Registry-wide put counter at the time this entry was put (1, 2, ...). */
TSAFE_API uint64_t tsafe_registry_ref_generation(const tsafe_registry_ref *ref);

/* Adds usage to the entry's slot and adapter counters (lock-free). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_meter(tsafe_registry_ref *ref, uint64_t tokens, uint64_t he_ops,
                     uint64_t bytes_in, uint64_t bytes_out);

/* Counter snapshots; TSAFE_E_NOT_FOUND when never seen. The adapter form
 * sums every price row of that adapter id. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_slot_counters(tsafe_registry *reg, const char *slot,
                             tsafe_registry_counters *out);
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_adapter_counters(tsafe_registry *reg, const char *adapter_id,
                                tsafe_registry_counters *out);

/* Metering as a JSON document (malloc'd, NUL-terminated; free with free()):
 * {"adapters":[{"adapter_id","price_per_1k_tokens","tokens","he_ops",
 *               "bytes_in","bytes_out","cost"}...],
 *  "slots":[{"slot","adapter_id" (null when empty),"generation",
 *            "origin" (null when empty; else {"kind":"signed",
 *              "package_digest":64 hex,"signer_key":64 hex} or
 *              {"kind":"unsigned","path":string or null}),
 *            "tokens","he_ops","bytes_in","bytes_out"}...],
 *  "totals":{"tokens","he_ops","bytes_in","bytes_out","cost"}}
 * Counters above 2^63-1 are written as 2^63-1. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_registry_metering_json(tsafe_registry *reg, char **json);

#ifdef __cplusplus
}
#endif
#endif
