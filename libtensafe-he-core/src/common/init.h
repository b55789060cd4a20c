/* Library initialisation shared by every module (internal to the libraries
 * and the tool): one entry point instead of sodium_init() at each caller.
 * Idempotent and thread-safe (libsodium's guarantee). */
#ifndef TSAFE_INIT_H
#define TSAFE_INIT_H

#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" { /* also called from the tool's CUDA C++ */
#endif

/* libsodium ready: TSAFE_OK, or TSAFE_E_CRYPTO when it cannot start (no
 * usable randomness source). */
tsafe_status tsafe_sodium_ready(void);

#ifdef __cplusplus
}
#endif

#endif
