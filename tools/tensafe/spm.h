/* SentencePiece tokenizer for `tensafe generate`, a C interface over the
 * library's C++ API (libsentencepiece, spm.cpp). Exceptions never cross
 * into C: every call returns a tsafe_status.
 * Ownership: spm_tok from spm_load, freed by spm_free (NULL ok); strings
 * and id arrays returned are malloc'd, freed by the caller with free().
 * A tokenizer is read-only after load and may be shared between threads. */
#ifndef TENSAFE_TOOL_SPM_H
#define TENSAFE_TOOL_SPM_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spm_tok spm_tok;

/* A SentencePiece model file (.model). TSAFE_E_NOT_FOUND / TSAFE_E_FORMAT
 * with the library's message in what (cap bytes). */
tsafe_status spm_load(const char *path, spm_tok **out, char *what, size_t cap);
void spm_free(spm_tok *t);
uint32_t spm_vocab_size(const spm_tok *t);
/* The model's BOS id (-1 when it has none). */
int spm_bos(const spm_tok *t);
int spm_eos(const spm_tok *t);
/* text -> *ids (malloc'd, *n ids), without BOS/EOS. */
tsafe_status spm_encode(const spm_tok *t, const char *text, uint32_t **ids, size_t *n);
/* ids -> *text (malloc'd, NUL-terminated). Ids out of range: TSAFE_E_RANGE. */
tsafe_status spm_decode(const spm_tok *t, const uint32_t *ids, size_t n, char **text);

#ifdef __cplusplus
}
#endif
#endif
