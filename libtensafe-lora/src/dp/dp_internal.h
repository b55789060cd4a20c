/* Internal helpers shared by the DP files (hidden symbols); the part other
 * modules may call is dp_release.h. */
#ifndef TSAFE_LORA_DP_INTERNAL_H
#define TSAFE_LORA_DP_INTERNAL_H

#include <stdint.h>

#include "tensafe/lora_dp.h"
#include "dp_release.h" /* what other modules may call */

/* log delta(eps; mu) for mu-GDP / one Gaussian release with Delta/sigma = mu:
 * log[Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)]; -INFINITY when the
 * value underflows even the log-domain evaluation. eps >= 0, mu > 0. */
double tsafe_dp_log_delta_(double eps, double mu);

/* Smallest eps >= 0 with delta(eps; mu) <= delta (rounded up). */
double tsafe_dp_gdp_eps_(double mu, double delta);

/* RDP (Gaussian, rho = T Delta^2 / (2 sigma^2)) -> eps at delta, improved
 * conversion minimised over alpha > 1; >= 0. */
double tsafe_dp_rdp_eps_(double rho, double delta);

#endif
