/* Analytic Gaussian mechanism (Balle & Wang 2018) and the Gaussian-DP
 * privacy curve. Both are the same function of (eps, mu = Delta/sigma):
 *   delta(eps; mu) = Phi(A) - e^eps Phi(B),  A = mu/2 - eps/mu,
 *                                            B = -mu/2 - eps/mu.
 * Since B^2 - A^2 = 2 eps, e^eps phi(B) = phi(A), so with the Mills ratio
 * R(y) = Phi(-y)/phi(y):  e^eps Phi(B) = phi(A) R(-B), and for A <= 0
 *   delta = phi(A) [R(-A) - R(-B)]
 * which is evaluated in the log domain: no e^eps overflow, no underflow of
 * Phi for tiny delta, and the cancellation is confined to a difference of
 * two O(1/y) Mills ratios. */
#include <float.h>
#include <math.h>

#include "dp_internal.h"

#define SQRT_PI_OVER_2 1.2533141373155002512 /* sqrt(pi/2) */
#define LOG_SQRT_2PI 0.91893853320467274178  /* log sqrt(2 pi) */
#define SIGMA_MARGIN 1e-10

/* erfcx(x) = exp(x^2) erfc(x) for x >= 0. Below 26 the product is exact to
 * ~x^2 ulps (erfc keeps full relative precision down to 1e-300); above,
 * the asymptotic series is accurate to < 1e-18 with 8 terms. */
static double erfcx_nonneg(double x)
{
    if (x < 26.0)
        return exp(x * x) * erfc(x);
    double t = 1.0 / (2.0 * x * x), term = 1.0, sum = 1.0;
    for (int k = 1; k <= 8; k++) {
        term *= -(2.0 * k - 1.0) * t;
        sum += term;
    }
    return sum / (x * 1.7724538509055160273); /* x sqrt(pi) */
}

/* Mills ratio Phi(-y)/phi(y), y >= 0. */
static double mills(double y)
{
    return SQRT_PI_OVER_2 * erfcx_nonneg(y * 0.70710678118654752440);
}

double tsafe_dp_log_delta_(double eps, double mu)
{
    double a = 0.5 * mu - eps / mu;
    double b = -0.5 * mu - eps / mu; /* b < 0 always */
    double log_phi_a = -0.5 * a * a - LOG_SQRT_2PI;
    if (a <= 0.0) {
        double diff = mills(-a) - mills(-b);
        if (!(diff > 0.0))
            return -INFINITY;
        return log_phi_a + log(diff);
    }
    double big_phi_a = 1.0 - 0.5 * erfc(a * 0.70710678118654752440);
    double d = big_phi_a - exp(log_phi_a) * mills(-b);
    if (!(d > 0.0))
        return -INFINITY;
    return log(d);
}

tsafe_status tsafe_dp_gaussian_delta(double eps, double mu, double *delta)
{
    if (!delta)
        return TSAFE_E_NULL;
    if (!(eps >= 0.0) || !isfinite(eps) || !(mu > 0.0) || !isfinite(mu))
        return TSAFE_E_ARG;
    *delta = exp(tsafe_dp_log_delta_(eps, mu));
    return TSAFE_OK;
}

/* Largest mu with delta(eps; mu) <= delta: delta grows with mu. */
static int max_mu(double eps, double log_target, double *mu_out)
{
    double mu = eps / sqrt(2.0 * (log(1.25) - log_target)); /* classical */
    if (!(mu > 0.0) || !isfinite(mu))
        mu = 1.0;
    double lo = mu, hi = mu;
    int guard = 0;
    while (tsafe_dp_log_delta_(eps, lo) > log_target) {
        lo *= 0.5;
        if (++guard > 2100 || lo == 0.0)
            return -1;
    }
    guard = 0;
    while (!(tsafe_dp_log_delta_(eps, hi) > log_target)) {
        hi *= 2.0;
        if (++guard > 2100 || !isfinite(hi))
            return -1;
    }
    if (lo == hi)
        hi = 2.0 * lo; /* cannot happen: lo feasible, hi not */
    for (int it = 0; it < 400 && hi / lo > 1.0 + 4.0 * DBL_EPSILON; it++) {
        double mid = sqrt(lo * hi);
        if (mid <= lo || mid >= hi)
            break;
        if (tsafe_dp_log_delta_(eps, mid) > log_target)
            hi = mid;
        else
            lo = mid;
    }
    *mu_out = lo;
    return 0;
}

tsafe_status tsafe_dp_sigma_analytic(double eps, double delta,
                                     double sensitivity, double *sigma)
{
    if (!sigma)
        return TSAFE_E_NULL;
    if (!(eps > 0.0) || !isfinite(eps) || !(delta > 0.0) || !(delta < 1.0) ||
        !(sensitivity > 0.0) || !isfinite(sensitivity))
        return TSAFE_E_ARG;
    double mu;
    if (max_mu(eps, log(delta), &mu) != 0)
        return TSAFE_E_RANGE;
    double s = sensitivity / mu;
    if (!isfinite(s) || !(s > 0.0))
        return TSAFE_E_RANGE;
    /* Round up by a relative SIGMA_MARGIN: delta(sigma) is evaluated to
     * ~1e-11 relative, and a 1e-10 increase of sigma lowers delta by more
     * than that (|d log delta / d log sigma| >= 2.7 measured over eps in
     * [0.01, 50], delta in [1e-20, 1e-3]), so the returned sigma satisfies
     * the exact condition (checked in tests/test_dp.c against long double). */
    *sigma = s * (1.0 + SIGMA_MARGIN);
    return TSAFE_OK;
}

double tsafe_dp_gdp_eps_(double mu, double delta)
{
    double log_target = log(delta);
    if (tsafe_dp_log_delta_(0.0, mu) <= log_target)
        return 0.0;
    double lo = 0.0, hi = 1.0;
    int guard = 0;
    while (tsafe_dp_log_delta_(hi, mu) > log_target) {
        lo = hi;
        hi *= 2.0;
        if (++guard > 1100)
            return INFINITY;
    }
    for (int it = 0; it < 400 && hi - lo > 2.0 * DBL_EPSILON * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi)
            break;
        if (tsafe_dp_log_delta_(mid, mu) > log_target)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}
