/* Internal helpers shared by the safetensors and PEFT adapter code. */
#ifndef TSAFE_ADAPTER_SAFETENSORS_INTERNAL_H
#define TSAFE_ADAPTER_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/safetensors.h"
#include "file.h"
#include "tsafe_check.h"

/* The public parse_borrowed / open_file, filling err (may be NULL) with
 * the culprit when they fail (see tsafe_error_info). */
tsafe_status tsafe_safetensors_parse_borrowed_ex(const void *data, size_t len,
                                                 tsafe_error_info *err,
                                                 tsafe_safetensors **out);
tsafe_status tsafe_safetensors_open_file_ex(const char *path, tsafe_error_info *err,
                                            tsafe_safetensors **out);

/* Strict UTF-8 check (no overlongs, no surrogates, <= U+10FFFF). */
int tsafe_utf8_valid(const uint8_t *s, size_t n);

/* Converts `count` elements starting at raw (little-endian bytes of dtype
 * F32/F16/BF16/F64) to float. Returns 0 for another dtype. */
int tsafe_convert_to_f32(tsafe_dtype dtype, const uint8_t *raw, size_t count,
                         float *out);

/* Whole files are read with tsafe_read_file (common/file.h). */
/* Writes (create/truncate) a whole file. */
tsafe_status tsafe_write_file(const char *path, const void *data, size_t len);

#endif
