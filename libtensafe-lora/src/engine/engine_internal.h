/* Internals of the module engines (libtensafe-lora/src/engine), shared
 * with the CKKS and sealed engines. */
#ifndef TSAFE_LORA_ENGINE_INTERNAL_H
#define TSAFE_LORA_ENGINE_INTERNAL_H

#include "tensafe/lora_engine.h"

/* The most modules one engine call takes. */
#define TSAFE_LORA_MAX_CALL_MODULES 256u

/* delta = scale B (A x) in floats, two OpenBLAS sgemv (u: rank scratch):
 * the one arithmetic of the plaintext engines, sites and modules alike. */
void tsafe_lora_plain_delta_(const float *A, const float *B, uint32_t rank, uint32_t d_in,
                             uint32_t d_out, float scale, const float *x, float *u,
                             float *delta);
/* The checks of every engine call: non-NULL lists, 1..MAX modules, one
 * input width. */
tsafe_status tsafe_lora_module_check_call(const tsafe_lora_module *const *modules, size_t n,
                                          const float *x, float *const *delta);

#endif
