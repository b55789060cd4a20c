/* The DP module's library-internal interface (hidden symbols), for a
 * module that adds its own noise to an integer release: the sealed client
 * charges the session's accountant and draws discrete-Gaussian noise for
 * the shares it sends. Thread safety as in tensafe/lora_dp.h: the sampler
 * is reentrant (libsodium's CSPRNG); a session is charged from one thread
 * at a time. */
#ifndef TSAFE_LORA_DP_RELEASE_H
#define TSAFE_LORA_DP_RELEASE_H

#include <stdint.h>

#include "tensafe/lora_dp.h"

/* One sample of the discrete Gaussian N_Z(0, sigma^2), exact (CKS 2020),
 * randomness from the CSPRNG. sigma in (0, 2^50]. */
tsafe_status tsafe_dp_discrete_gaussian(double sigma, int64_t *out);

/* Charge one release to the session (TSAFE_E_BUDGET when spent) and give
 * its sigma, for callers that add the noise themselves (the sealed
 * client adds discrete-Gaussian noise to integer shares). */
tsafe_status tsafe_dp_session_charge(tsafe_dp_session *s, double *sigma);

#endif
