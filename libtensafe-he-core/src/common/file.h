/* Reading a whole file (internal to the libraries and the tool): the one
 * reader behind adapter configs, safetensors without mmap, MoE configs,
 * step-gate files and the tool's inputs. */
#ifndef TSAFE_FILE_H
#define TSAFE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" { /* also called from the tool's CUDA C++ */
#endif

/* Reads path into a malloc'd buffer (*data, freed by the caller with
 * free()) of *len bytes plus a NUL after the last one, so text can be
 * parsed in place; *len may be 0. Reads until end of file (pipes and
 * special files too), at most cap bytes. TSAFE_E_NOT_FOUND (no such file or
 * directory), TSAFE_E_IO (cannot open or read, e.g. a directory),
 * TSAFE_E_RANGE (larger than cap), TSAFE_E_NOMEM; *data and *len are left
 * alone on failure. */
tsafe_status tsafe_read_file(const char *path, size_t cap, uint8_t **data, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
