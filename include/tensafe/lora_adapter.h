/* LoRA adapters (libtensafe-lora): loading PEFT directories, building
 * adapters in memory, writing them back in PEFT layout.
 *
 * A module is one adapted linear map y = W x + s * B (A x) with
 *   A: rank x in_dim   (row-major float)
 *   B: out_dim x rank  (row-major float)
 *   s = alpha / rank, or alpha / sqrt(rank) with use_rslora,
 * i.e. dW = s * B * A is out_dim x in_dim in the "W x" orientation.
 *
 * MODULE NAMES are canonical: PEFT prefixes are stripped repeatedly
 * ("base_model.model.", "model.", "language_model.", in any nesting, e.g.
 * base_model.model.model.layers..., base_model.model.model.language_model.
 * layers..., base_model.model.language_model.model.layers..., model.layers...)
 * and the LoRA suffix (".lora_A.weight", ".lora_A.<adapter>.weight", same
 * for lora_B) removed, giving e.g.
 *   layers.12.self_attn.q_proj      layer 12, expert -1, proj "q_proj"
 *   layers.3.mlp.gate_proj          layer 3,  expert -1, proj "gate_proj"
 *   layers.3.mlp.experts.17.down_proj   layer 3, expert 17, proj "down_proj"
 * layer = the integer after "layers." (-1 if none), expert = the integer
 * after "experts." when another component follows (-1 if none), proj = the
 * last dot-separated component. Modules are ordered by name with runs of
 * digits compared as numbers (layers.2 < layers.10).
 *
 * FUSED-EXPERT KEYS (PEFT target_parameters on a 3-D expert parameter,
 * lora.ParamWrapper): "<prefix>.layers.L.mlp.experts.lora_A.weight" of shape
 * [r*E, d1] and "...lora_B.weight" of shape [d2, r*E], where the base
 * parameter is [E, d1, d2]. As in PEFT's ParamWrapper.get_delta_weight:
 *   A is expert-major: rows e*r .. e*r+r-1 belong to expert e;
 *   B is expert-minor: column j*E + e is rank component j of expert e;
 * so dParam[e] = s * (B_e A_e)^T (d1 x d2). They are split into modules
 * "layers.L.mlp.experts.<e>.<proj>" for e = 0 .. E-1, with E = rows(A)/r.
 * Orientation (tsafe_lora_load_options.fused_layout):
 *   TSAFE_LORA_FUSED_IN_OUT (default): base param is [E, in, out]
 *     (y = x P[e], gpt-oss style; PEFT's own in/out naming): A_e is
 *     rank x in and B_e out x rank, used as is.
 *   TSAFE_LORA_FUSED_OUT_IN: base param is [E, out, in] (F.linear layout,
 *     e.g. transformers v5 fused Qwen MoE experts): dW_e = A_e^T B_e^T, so
 *     the module stores A = B_e^T (rank x in) and B = A_e^T (out x rank).
 * The projection name comes from adapter_config.json "target_parameters":
 * the last component of the entries whose module path is a dot-suffix of
 * this module's path ("mlp.experts.gate_up_proj" -> "gate_up_proj"). With
 * one candidate it is used. With several (PEFT nests one ParamWrapper per
 * parameter; the inner ones appear as ".base_layer." in the key), the
 * candidates are put in wrapping order (gate_up_proj, gate_proj, up_proj,
 * down_proj - the order transformers registers them - then others in
 * alphabetical order) and a key with k ".base_layer" segments gets candidate
 * n-1-k (the outermost wrapper was created last). No candidate -> the load
 * fails with TSAFE_E_ADAPTER. A fused gate_up_proj module has out = 2*I
 * (gate rows then up rows, as the base parameter stores them). Entries
 * whose parameter name is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*,
 * without "lora_" or "base_layer") are ignored.
 *
 * rank_pattern / alpha_pattern use PEFT's rule: a pattern key K applies to a
 * module whose PEFT module name (the key without "base_model.model." and
 * the LoRA suffix; for fused keys the module path + "." + parameter name,
 * e.g. "model.layers.0.mlp.experts.gate_up_proj") equals K or ends with
 * "." + K; the first matching key in file order wins. Keys are matched
 * literally (PEFT treats them as regular expressions; literal keys behave
 * the same).
 *
 * fan_in_fan_out: in PEFT this flag only says that the BASE weight is stored
 * (in, out) (GPT-2 Conv1D); lora_A.weight is still [r, in] and lora_B.weight
 * [out, r] (PEFT transposes B*A when merging). The loader therefore reads the
 * factors as stored and returns dW in the W x orientation; the flag is kept
 * in tsafe_lora_config for callers that merge into a (in, out) base weight.
 *
 * Refused: a directory with adapter_model.bin but no .safetensors
 * (TSAFE_E_PICKLE); use_dora true or lora_magnitude_vector keys
 * (TSAFE_E_DORA); peft_type other than "LORA", lora_embedding_* keys,
 * LoRA bias keys, modules_to_save weights or other unknown keys
 * (TSAFE_E_UNSUPPORTED); missing r / lora_alpha / peft_type
 * (TSAFE_E_MISSING_FIELD); unparsable JSON or duplicate keys
 * (TSAFE_E_JSON); a field of the wrong type or value, e.g. r not an integer
 * in [1, 2^24] (TSAFE_E_FORMAT); A without B or B without A, one factor
 * under two spellings, two keys giving the same module, or no module at all
 * (TSAFE_E_ADAPTER); A rows != B columns, not 2-D, or fused rows not a
 * multiple of r (TSAFE_E_SHAPE); a factor whose rank disagrees with the
 * configured rank for its module (TSAFE_E_ADAPTER); non-finite values, or
 * a scale or delta weight s*B*A beyond float32's range, e.g. lora_alpha
 * 1e300 (TSAFE_E_VALUE_RANGE, the same in tsafe_lora_adapter_add_module); dtype other than F32/F16/BF16 (TSAFE_E_DTYPE);
 * any safetensors error (see tensafe/safetensors.h).
 *
 * Thread safety: a loaded adapter is immutable and may be shared by any
 * number of threads. tsafe_lora_adapter_add_module mutates: call it only
 * while one thread owns the adapter (before sharing it). */
#ifndef TENSAFE_LORA_ADAPTER_H
#define TENSAFE_LORA_ADAPTER_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/export.h"
#include "tensafe/safetensors.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsafe_lora_adapter tsafe_lora_adapter;

/* Adapter-wide defaults (plain value struct). */
typedef struct tsafe_lora_config {
    size_t r;           /* default rank (>= 1) */
    double lora_alpha;  /* default alpha (finite) */
    int use_rslora;     /* scale alpha/sqrt(rank) instead of alpha/rank */
    int fan_in_fan_out; /* informational, see above */
} tsafe_lora_config;

typedef enum tsafe_lora_fused_layout {
    TSAFE_LORA_FUSED_IN_OUT = 0,
    TSAFE_LORA_FUSED_OUT_IN = 1
} tsafe_lora_fused_layout;

/* Load options (plain value struct; zero-initialise, then fill).
 *  fused_layout  see FUSED-EXPERT KEYS above.
 *  error         optional (NULL: none), caller-owned: every load call that
 *                takes these options resets it on entry and, when it fails,
 *                sets error->status to the returned status and
 *                error->detail to the culprit and its numbers -- the tensor
 *                or file and what was expected vs found, e.g.
 *                "tensor 'm.lora_B.weight' is [8, 3]: expected 4 columns (the
 *                rows of 'm.lora_A.weight' [4, 16])". The library prints
 *                nothing; the caller decides. Thread-safe as long as each
 *                concurrent call gets its own tsafe_error_info (the options
 *                struct itself is only read). */
typedef struct tsafe_lora_load_options {
    tsafe_lora_fused_layout fused_layout;
    tsafe_error_info *error;
} tsafe_lora_load_options;

/* Where an adapter came from (plain value struct), as recorded by the
 * loader that made it; see tsafe_lora_adapter_origin. */
typedef enum tsafe_lora_origin_kind {
    TSAFE_LORA_ORIGIN_UNSIGNED = 0, /* PEFT directory or memory, or built in
                                       code: nobody vouches for it */
    TSAFE_LORA_ORIGIN_SIGNED = 1    /* a signed package whose digest and
                                       signature verified */
} tsafe_lora_origin_kind;

typedef struct tsafe_lora_origin {
    tsafe_lora_origin_kind kind;
    /* SIGNED: the package digest the signature covers (BLAKE2b-256 of every
     * package byte before the trailer, docs/PACKAGE_FORMAT.md) and the
     * trusted Ed25519 public key that verified it. Zero when UNSIGNED. */
    uint8_t package_digest[32];
    uint8_t signer_key[32];
    /* UNSIGNED: the directory it was loaded from (NUL-terminated), or NULL
     * for memory / built adapters. NULL when SIGNED. Borrowed: valid as
     * long as the object that filled the struct (adapter or registry ref). */
    const char *path;
} tsafe_lora_origin;

/* One module, as returned by tsafe_lora_adapter_module. Every pointer is
 * borrowed from the adapter and valid until tsafe_lora_adapter_free. */
typedef struct tsafe_lora_module_info {
    const char *name;   /* canonical, e.g. "layers.3.mlp.experts.17.down_proj" */
    const char *proj;   /* last component, e.g. "down_proj" */
    int layer;          /* -1 if the name has no "layers.<n>" */
    int expert;         /* -1 if not an expert module */
    size_t rank;
    size_t in_dim;
    size_t out_dim;
    double alpha;
    double scale;       /* alpha/rank or alpha/sqrt(rank) */
    tsafe_dtype source_dtype; /* dtype of lora_A in the file (F32 if built) */
    const float *A;     /* rank x in_dim, row-major */
    const float *B;     /* out_dim x rank, row-major */
} tsafe_lora_module_info;

/* Loads <dir>/adapter_config.json + <dir>/adapter_model.safetensors.
 * opt may be NULL (defaults). On success *out is owned by the caller.
 * Missing config or weights -> TSAFE_E_NOT_FOUND (TSAFE_E_PICKLE when only
 * adapter_model.bin is there). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_load_peft(const char *dir, tsafe_lora_adapter **out);
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_load_peft_ex(const char *dir,
                                const tsafe_lora_load_options *opt,
                                tsafe_lora_adapter **out);

/* Same from memory: the adapter_config.json text (config_len bytes, need not
 * be NUL-terminated) and the safetensors bytes. Both borrowed for the call
 * only. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_load_peft_memory(const char *config_json, size_t config_len,
                                    const void *safetensors,
                                    size_t safetensors_len,
                                    const tsafe_lora_load_options *opt,
                                    tsafe_lora_adapter **out);

/* An empty adapter with the given defaults (r >= 1, finite alpha, else
 * TSAFE_E_ARG). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_create(const tsafe_lora_config *cfg,
                          tsafe_lora_adapter **out);

/* Adds a module (A: rank x in_dim, B: out_dim x rank, both COPIED). Its
 * scale is alpha/rank or alpha/sqrt(rank) per the adapter's use_rslora.
 * `name` must be canonical (see above) so that a PEFT save/load round trip
 * gives it back: non-empty UTF-8, no empty component, not starting with
 * "base_model.model.", "model." or "language_model.", containing neither
 * "lora_" nor "base_layer", not ending in "experts".
 * Errors: a name already present or not canonical -> TSAFE_E_ARG; a zero dimension -> TSAFE_E_ARG; sizes overflowing ->
 * TSAFE_E_SIZE_OVERFLOW; non-finite alpha, A or B -> TSAFE_E_VALUE_RANGE.
 * Not thread-safe (see above). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_add_module(tsafe_lora_adapter *adapter, const char *name,
                              size_t rank, size_t in_dim, size_t out_dim,
                              const float *A, const float *B, double alpha);

/* Writes <dir>/adapter_config.json and <dir>/adapter_model.safetensors
 * (dir is created with mode 0700 if missing). Keys:
 * "base_model.model.model.<name>.lora_A.weight" / ".lora_B.weight"; values
 * converted to dtype F32, F16 or BF16 (round to nearest even; others ->
 * TSAFE_E_DTYPE). Config: peft_type LORA, r and lora_alpha = the adapter
 * defaults, rank_pattern / alpha_pattern (keyed by "model." + name) for
 * modules that differ, use_rslora, target_modules = the distinct proj names.
 * Fused modules are written as per-expert keys. Reloading gives the same
 * modules (values rounded to dtype). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_save_peft(const tsafe_lora_adapter *adapter,
                             const char *dir, tsafe_dtype dtype);

/* Same into memory: *config_json (NUL-terminated) and *safetensors are
 * malloc'd; release both with tsafe_safetensors_bytes_free (or free()). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_save_peft_memory(const tsafe_lora_adapter *adapter,
                                    tsafe_dtype dtype, char **config_json,
                                    uint8_t **safetensors,
                                    size_t *safetensors_len);

/* From a signed adapter package (docs/PACKAGE_FORMAT.md): verifies the
 * package against trusted_pk (a key the caller trusts, never one found in
 * the package) and only then loads its safetensors payload, with r and
 * lora_alpha from the verified manifest. Errors: those of tsafe_package_open
 * (TSAFE_E_VERIFY for a bad signature or digest, TSAFE_E_FORMAT...), then
 * those of tsafe_lora_adapter_load_peft_memory. Defined in libtensafe-lora's
 * package folder (declared here to keep adapter loading in one header). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_load_package(const uint8_t *bytes, size_t len,
                                const uint8_t trusted_pk[32],
                                const tsafe_lora_load_options *opt,
                                tsafe_lora_adapter **out);

/* NULL is a no-op. The adapter must no longer be in use by any thread. */
TSAFE_API void tsafe_lora_adapter_free(tsafe_lora_adapter *adapter);

/* Where the adapter came from: SIGNED with the package digest and signer
 * key for tsafe_lora_adapter_load_package; UNSIGNED with path = dir for
 * tsafe_lora_adapter_load_peft / _ex; UNSIGNED with path NULL for
 * tsafe_lora_adapter_load_peft_memory and tsafe_lora_adapter_create.
 * out->path is borrowed from the adapter (valid until its free). Pass it
 * to tsafe_registry_meta.origin when serving the adapter. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_origin(const tsafe_lora_adapter *adapter, tsafe_lora_origin *out);

/* The adapter's defaults (after load: r, lora_alpha, use_rslora,
 * fan_in_fan_out from adapter_config.json). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_config(const tsafe_lora_adapter *adapter,
                          tsafe_lora_config *out);

/* target_modules of adapter_config.json: count, then entry i (borrowed).
 * A string-valued target_modules (a regex in PEFT) is one entry. Empty for
 * adapters built in memory. */
TSAFE_API size_t
tsafe_lora_adapter_target_count(const tsafe_lora_adapter *adapter);
TSAFE_API const char *
tsafe_lora_adapter_target(const tsafe_lora_adapter *adapter, size_t i);

TSAFE_API size_t
tsafe_lora_adapter_module_count(const tsafe_lora_adapter *adapter);

/* Module i (0 <= i < count, else TSAFE_E_RANGE). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_module(const tsafe_lora_adapter *adapter, size_t i,
                          tsafe_lora_module_info *out);

/* Index of the module with this canonical name; TSAFE_E_NOT_FOUND if none.
 * O(log n). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_adapter_find(const tsafe_lora_adapter *adapter, const char *name,
                        size_t *index);

/* dW = scale * B * A into out (out_dim x in_dim, row-major), accumulated in
 * double. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_module_delta_w(const tsafe_lora_module_info *m, double *out);

/* The plaintext delta of one row, delta = scale * B (A x) (in_dim floats
 * in x, out_dim floats out), accumulated in double: the reference the HE
 * modes are compared with. TSAFE_E_VALUE_RANGE when x holds a non-finite
 * value or a delta is not finite in float32 (huge x or weights; delta is
 * then unspecified), TSAFE_E_NULL, TSAFE_E_NOMEM. Reentrant. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_lora_module_apply(const tsafe_lora_module_info *m, const float *x, float *delta);

#ifdef __cplusplus
}
#endif
#endif
