/* Strict safetensors reader and writer (libtensafe-lora).
 *
 * File layout: u64 little-endian header length n, n bytes of UTF-8 JSON (an
 * object: tensor name -> {"dtype", "shape", "data_offsets"}, plus an optional
 * "__metadata__" string -> string map), then the data section. The reader
 * mirrors the reference implementation's validation and is stricter where
 * that costs nothing:
 *   file shorter than 8 bytes, or than 8 + n, or data section shorter than
 *     the offsets claim                                  -> TSAFE_E_TRUNCATED
 *   n > TSAFE_SAFETENSORS_MAX_HEADER                     -> TSAFE_E_HEADER_TOO_LARGE
 *   header not valid UTF-8 (overlong, surrogate, > U+10FFFF) -> TSAFE_E_FORMAT
 *   header not parseable JSON, or duplicate keys         -> TSAFE_E_JSON
 *   header valid JSON but not an object                  -> TSAFE_E_KIND
 *   entry not an object / field of the wrong type / unknown field / shape dim
 *     negative / "__metadata__" not a string map         -> TSAFE_E_FORMAT
 *   entry lacks dtype, shape or data_offsets             -> TSAFE_E_MISSING_FIELD
 *   unknown dtype string                                 -> TSAFE_E_DTYPE
 *   shape product or product * dtype size overflows      -> TSAFE_E_SIZE_OVERFLOW
 *   offsets (sorted by start) not contiguous from 0: gap, overlap, end before
 *     start, or bytes after the last tensor              -> TSAFE_E_OFFSETS
 *   end - start != product(shape) * dtype size           -> TSAFE_E_SHAPE
 * Every multiplication is checked; tensor bytes are never accessed through
 * casts (memcpy only), so any alignment of the data section is fine.
 *
 * Thread safety: a parsed tsafe_safetensors is immutable; every const
 * function may be called concurrently. A writer is single-threaded. */
#ifndef TENSAFE_SAFETENSORS_H
#define TENSAFE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/export.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Header length cap (bytes), the reference implementation's 100 MB. */
#define TSAFE_SAFETENSORS_MAX_HEADER 100000000u

/* Element types of the safetensors format (names as in the file). */
typedef enum tsafe_dtype {
    TSAFE_DTYPE_INVALID = 0,
    TSAFE_DTYPE_BOOL = 1,
    TSAFE_DTYPE_U8 = 2,
    TSAFE_DTYPE_I8 = 3,
    TSAFE_DTYPE_F8_E5M2 = 4,
    TSAFE_DTYPE_F8_E4M3 = 5,
    TSAFE_DTYPE_I16 = 6,
    TSAFE_DTYPE_U16 = 7,
    TSAFE_DTYPE_F16 = 8,
    TSAFE_DTYPE_BF16 = 9,
    TSAFE_DTYPE_I32 = 10,
    TSAFE_DTYPE_U32 = 11,
    TSAFE_DTYPE_F32 = 12,
    TSAFE_DTYPE_F64 = 13,
    TSAFE_DTYPE_I64 = 14,
    TSAFE_DTYPE_U64 = 15
} tsafe_dtype;

/* "F32", "BF16", ...; "INVALID" for an unknown value. Static storage. */
TSAFE_API const char *tsafe_dtype_name(tsafe_dtype dtype);
/* Bytes per element; 0 for an unknown value. */
TSAFE_API size_t tsafe_dtype_size(tsafe_dtype dtype);
/* Parses a dtype name (exact, case-sensitive); TSAFE_DTYPE_INVALID if unknown. */
TSAFE_API tsafe_dtype tsafe_dtype_from_name(const char *name);

/* Exact IEEE binary16 / bfloat16 -> binary32 (subnormals, +-0, inf and NaN
 * preserved; NaN payload kept in the high mantissa bits). */
TSAFE_API float tsafe_f16_to_f32(uint16_t h);
TSAFE_API float tsafe_bf16_to_f32(uint16_t b);
/* binary32 -> binary16 / bfloat16, round to nearest even; overflow -> inf,
 * NaN -> quiet NaN with the sign kept. */
TSAFE_API uint16_t tsafe_f32_to_f16(float f);
TSAFE_API uint16_t tsafe_f32_to_bf16(float f);

/* ------------------------------------------------------------------ reader */

typedef struct tsafe_safetensors tsafe_safetensors;

/* Description of one tensor. Pointers are borrowed from the reader and stay
 * valid until tsafe_safetensors_free. */
typedef struct tsafe_tensor_info {
    const char *name;
    tsafe_dtype dtype;
    size_t ndim;
    const uint64_t *shape; /* ndim entries (NULL when ndim == 0: a scalar) */
    size_t numel;          /* product of shape (1 for a scalar) */
    size_t nbytes;         /* numel * dtype size */
} tsafe_tensor_info;

/* Parses and validates `len` bytes. The bytes are COPIED: the caller may free
 * `data` right after. On success *out is owned by the caller. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_parse(const void *data, size_t len, tsafe_safetensors **out);

/* Same, but BORROWS `data`: it must stay valid and unchanged until
 * tsafe_safetensors_free(*out). No copy of the (possibly large) data. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_parse_borrowed(const void *data, size_t len,
                                 tsafe_safetensors **out);

/* Opens a file read-only (memory-mapped when possible, else read into
 * memory) and validates it. TSAFE_E_IO / TSAFE_E_NOT_FOUND on file errors.
 * The file must not be truncated or rewritten while the handle is open
 * (a mapping would see the change; writers should replace files by
 * rename). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_open_file(const char *path, tsafe_safetensors **out);

/* NULL is a no-op. */
TSAFE_API void tsafe_safetensors_free(tsafe_safetensors *st);

/* Number of tensors (the "__metadata__" entry is not a tensor). */
TSAFE_API size_t tsafe_safetensors_tensor_count(const tsafe_safetensors *st);

/* Tensor i, in ascending order of name (strcmp), 0 <= i < count. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_tensor_at(const tsafe_safetensors *st, size_t i,
                            tsafe_tensor_info *out);

/* Looks a tensor up by exact name; TSAFE_E_NOT_FOUND if absent. `out` may be
 * NULL to test presence only. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_find(const tsafe_safetensors *st, const char *name,
                       tsafe_tensor_info *out);

/* Raw little-endian bytes of a tensor (borrowed; NO alignment guarantee:
 * read them with memcpy). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_tensor_data(const tsafe_safetensors *st, const char *name,
                              const void **data, size_t *nbytes);

/* Converts a whole tensor of dtype F32, F16, BF16 or F64 to float
 * (row-major, as stored). `count` must equal numel (else TSAFE_E_ARG);
 * other dtypes -> TSAFE_E_DTYPE. F64 values outside float's range become
 * +-inf (no error: check with isfinite if it matters). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_read_f32(const tsafe_safetensors *st, const char *name,
                           float *out, size_t count);

/* Same for the elements [first, first + count) of the flattened tensor
 * (e.g. rows of one expert). Out of range -> TSAFE_E_RANGE. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_read_f32_range(const tsafe_safetensors *st,
                                 const char *name, size_t first, size_t count,
                                 float *out);

/* "__metadata__" value for `key`, or NULL. Borrowed. */
TSAFE_API const char *tsafe_safetensors_metadata(const tsafe_safetensors *st,
                                                 const char *key);
TSAFE_API size_t tsafe_safetensors_metadata_count(const tsafe_safetensors *st);
/* Entry i of the metadata map (file order); borrowed strings. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_metadata_at(const tsafe_safetensors *st, size_t i,
                              const char **key, const char **value);

/* ------------------------------------------------------------------ writer */

typedef struct tsafe_safetensors_writer tsafe_safetensors_writer;

TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_writer_create(tsafe_safetensors_writer **out);
/* NULL is a no-op. */
TSAFE_API void tsafe_safetensors_writer_free(tsafe_safetensors_writer *w);

/* Adds a tensor from raw little-endian bytes (copied). nbytes must equal
 * product(shape) * dtype size (else TSAFE_E_SHAPE). A name used twice, the
 * name "__metadata__" or an empty name -> TSAFE_E_ARG. ndim may be 0 (scalar;
 * shape may then be NULL). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_writer_add(tsafe_safetensors_writer *w, const char *name,
                             tsafe_dtype dtype, const uint64_t *shape,
                             size_t ndim, const void *data, size_t nbytes);

/* Adds a tensor from floats, converted to dtype F32, F16, BF16 (round to
 * nearest even) or F64 (other dtypes -> TSAFE_E_DTYPE). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_writer_add_f32(tsafe_safetensors_writer *w, const char *name,
                                 tsafe_dtype dtype, const uint64_t *shape,
                                 size_t ndim, const float *values);

/* Sets a "__metadata__" entry (both strings copied; a key set twice keeps
 * the last value). Strings must be valid UTF-8 (else TSAFE_E_ARG). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_writer_set_metadata(tsafe_safetensors_writer *w,
                                      const char *key, const char *value);

/* Serialises: tensors in ascending name order, data contiguous in that
 * order, header padded with spaces to a multiple of 8. *bytes is allocated
 * with malloc; release it with tsafe_safetensors_bytes_free (or free()). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_writer_serialize(const tsafe_safetensors_writer *w,
                                   uint8_t **bytes, size_t *len);
/* Serialises to a file (created or truncated, mode 0644 before umask). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_safetensors_writer_write_file(const tsafe_safetensors_writer *w,
                                    const char *path);
TSAFE_API void tsafe_safetensors_bytes_free(void *bytes);

#ifdef __cplusplus
}
#endif
#endif
