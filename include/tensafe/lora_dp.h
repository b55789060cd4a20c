/* Differential privacy for released LoRA intermediates (libtensafe-lora).
 *
 * What it does: L2 clipping to a bound C, Gaussian noise from the libsodium
 * CSPRNG calibrated by the analytic Gaussian mechanism (Balle & Wang 2018),
 * and a per-client-session accountant that composes releases and refuses
 * with TSAFE_E_BUDGET once the (eps_total, delta_total) budget is spent.
 *
 * Sensitivity. After clipping to C any two released vectors differ by at
 * most 2C in L2 ("replace one input" neighbours), which is the default
 * sensitivity of a session. Callers whose neighbouring relation is
 * add/remove may pass sensitivity = C explicitly.
 *
 * Accountants. Releases of a session all use the same sigma.
 *  - TSAFE_DP_ACCOUNTANT_RDP: Renyi DP of the Gaussian mechanism,
 *    RDP(alpha) = alpha * T * Delta^2 / (2 sigma^2) after T releases,
 *    converted to (eps, delta) with the improved conversion of Balle,
 *    Barthe, Gaboardi, Hsu & Sato (AISTATS 2020, Thm. 21):
 *      eps = min_{alpha>1} RDP(alpha) + log((alpha-1)/alpha)
 *                                      - (log delta + log alpha)/(alpha-1)
 *    minimised numerically (log-spaced scan, then golden-section refine).
 *  - TSAFE_DP_ACCOUNTANT_GDP: exact. T Gaussian releases with the same
 *    sensitivity/sigma are mu-GDP with mu = sqrt(T) * Delta / sigma (Dong,
 *    Roth & Su 2019), whose (eps, delta) curve is
 *      delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
 *    Tighter than RDP; no conversion slack.
 *
 * LIMITATION (floating point). Noise is sampled in IEEE double: 53-bit
 * uniforms from randombytes_buf, Box-Muller with libm log/sqrt/cos, then
 * added to a float and rounded. Textbook floating-point samplers do not
 * realise the ideal continuous distribution: the set of reachable outputs
 * and their rounding leak information about the unnoised value (Mironov,
 * "On significance of the least significant bits for differential
 * privacy", CCS 2012; Jin et al., "Are we there yet? Timing and
 * floating-point attacks on differential privacy systems", S&P 2022), and
 * libm timing is data dependent. The guarantee stated by the accountant is
 * the one of the ideal real-valued mechanism. A discrete Gaussian
 * (Canonne, Kamath & Steinke 2020) on a fixed grid would close this gap;
 * it is not implemented here.
 *
 * Thread safety: the free functions are reentrant. A tsafe_dp_session
 * belongs to ONE client session and is not synchronised: calls on the same
 * session must not overlap (different sessions are independent). */
#ifndef TENSAFE_LORA_DP_H
#define TENSAFE_LORA_DP_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/export.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tsafe_dp_accountant {
    TSAFE_DP_ACCOUNTANT_RDP = 0, /* Renyi DP + improved conversion */
    TSAFE_DP_ACCOUNTANT_GDP = 1  /* exact Gaussian-DP composition */
} tsafe_dp_accountant;

/* Session parameters (plain value struct; zero-initialise, then fill).
 *  clip_norm    C > 0: every released vector is clipped to L2 norm <= C.
 *  sensitivity  L2 sensitivity Delta used for calibration and accounting;
 *               0 means 2 * clip_norm (replace-one neighbours). A value
 *               given must be > 0 and finite; it is not compared with C,
 *               the caller owns the neighbouring relation.
 *  sigma        > 0: noise standard deviation per coordinate, used as is.
 *               0: calibrate from (eps, delta) with the analytic Gaussian
 *               mechanism: sigma = tsafe_dp_sigma_analytic(eps, delta, Delta).
 *  eps, delta   per-release target (only when sigma == 0); eps > 0,
 *               0 < delta < 1.
 *  eps_total, delta_total   session budget; eps_total > 0, 0 < delta_total < 1.
 *  accountant   see above. */
typedef struct tsafe_dp_params {
    double clip_norm;
    double sensitivity;
    double sigma;
    double eps;
    double delta;
    double eps_total;
    double delta_total;
    tsafe_dp_accountant accountant;
} tsafe_dp_params;

/* Read-only snapshot of a session. */
typedef struct tsafe_dp_stats {
    double clip_norm;
    double sensitivity;      /* Delta actually used */
    double sigma;            /* noise std per coordinate */
    double eps_total;
    double delta_total;
    double eps_spent;        /* eps at delta_total after `releases` releases */
    double eps_remaining;    /* eps_total - eps_spent (>= 0) */
    uint64_t releases;       /* successful releases so far */
    uint64_t releases_left;  /* further releases the budget allows */
    uint64_t releases_max;   /* releases + releases_left */
    uint64_t clipped;        /* releases whose input norm exceeded C */
    tsafe_dp_accountant accountant;
} tsafe_dp_stats;

typedef struct tsafe_dp_session tsafe_dp_session;

/* ---------------------------------------------------------- calibration */

/* Smallest sigma (rounded up by 1e-10 relative) such that the Gaussian
 * mechanism with L2 sensitivity `sensitivity` is (eps, delta)-DP, from the
 * exact condition of Balle & Wang 2018 (Thm. 8 / Alg. 1):
 *   Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta.
 * Evaluated in the log domain through Mills ratios (erfc-based, no
 * overflow of e^eps, no underflow for tiny delta), solved by bisection in
 * log sigma. eps > 0 finite, 0 < delta < 1, sensitivity > 0 finite. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_sigma_analytic(double eps, double delta, double sensitivity,
                        double *sigma);

/* delta(eps) of mu-GDP (equivalently: one Gaussian release with
 * Delta/sigma = mu): Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
 * eps >= 0, mu > 0. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_gaussian_delta(double eps, double mu, double *delta);

/* eps spent at `delta` after `releases` Gaussian releases with the given
 * sensitivity and sigma, under accountant `acc` (0 releases -> 0). */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_epsilon_spent(tsafe_dp_accountant acc, double sensitivity,
                       double sigma, uint64_t releases, double delta,
                       double *eps);

/* Largest T with epsilon_spent(T, delta_total) <= eps_total (capped at
 * 2^62). *count may be 0. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_max_releases(tsafe_dp_accountant acc, double sensitivity,
                      double sigma, double eps_total, double delta_total,
                      uint64_t *count);

/* ------------------------------------------------------------ mechanisms */

/* Scales vec (n floats, in place) so that its L2 norm is <= clip_norm
 * (computed in double; the float result is re-checked so the bound holds
 * after rounding). Vectors already inside the ball are left unchanged.
 * norm_before (optional) receives the input norm. Non-finite input ->
 * TSAFE_E_VALUE_RANGE, vec untouched. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_clip_l2(float *vec, size_t n, double clip_norm, double *norm_before);

/* Fills out[0..n) with independent N(0, sigma^2) samples from the
 * libsodium CSPRNG (see LIMITATION above). sigma >= 0 finite. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_gaussian_fill(double *out, size_t n, double sigma);

/* vec[i] += N(0, sigma^2), in place (noise drawn in double, sum rounded to
 * float). Intermediate noise is wiped. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_add_gaussian_noise(float *vec, size_t n, double sigma);

/* --------------------------------------------------------------- session */

/* Validates *p, calibrates sigma if needed and precomputes how many
 * releases the budget allows. TSAFE_E_BUDGET if not even one release fits
 * the budget. *out owned by the caller, free with tsafe_dp_session_free. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_session_create(const tsafe_dp_params *p, tsafe_dp_session **out);

/* NULL is a no-op. */
TSAFE_API void tsafe_dp_session_free(tsafe_dp_session *s);

/* One release: if the budget allows one more release, clip vec (n floats,
 * in place) to C, add N(0, sigma^2) to every coordinate and charge the
 * budget. Otherwise TSAFE_E_BUDGET, and vec is untouched and nothing is
 * charged. Any other error also leaves vec untouched and charges nothing.
 * Not thread-safe on the same session. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_session_release(tsafe_dp_session *s, float *vec, size_t n);

/* Snapshot of parameters and spent budget. */
TSAFE_API TSAFE_NODISCARD tsafe_status
tsafe_dp_session_stats(const tsafe_dp_session *s, tsafe_dp_stats *out);

#ifdef __cplusplus
}
#endif
#endif
