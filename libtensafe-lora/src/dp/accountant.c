/* Composition of Gaussian releases: RDP with the improved conversion, or
 * exact Gaussian DP. */
#include <math.h>

#include "dp_internal.h"

#define RDP_SCAN 800
#define RDP_T_MIN (-16.1180956509583) /* log(1e-7): alpha - 1 >= 1e-7 */
#define RDP_T_MAX (20.7232658369464)  /* log(1e9) */

/* eps(alpha) at alpha = 1 + e^t (Balle et al. 2020, Thm. 21; the same
 * expression as TensorFlow Privacy's rdp accountant). */
static double rdp_conv(double rho, double log_delta, double t)
{
    double am1 = exp(t), alpha = 1.0 + am1;
    return alpha * rho + log(am1 / alpha) - (log_delta + log(alpha)) / am1;
}

double tsafe_dp_rdp_eps_(double rho, double delta)
{
    if (!(rho > 0.0))
        return 0.0;
    double ld = log(delta);
    double step = (RDP_T_MAX - RDP_T_MIN) / (RDP_SCAN - 1);
    int best = 0;
    double best_v = INFINITY;
    for (int i = 0; i < RDP_SCAN; i++) {
        double v = rdp_conv(rho, ld, RDP_T_MIN + i * step);
        if (v < best_v) {
            best_v = v;
            best = i;
        }
    }
    /* golden-section refine on the bracket around the scan minimum */
    double a = RDP_T_MIN + (best > 0 ? best - 1 : 0) * step;
    double b = RDP_T_MIN + (best < RDP_SCAN - 1 ? best + 1 : best) * step;
    const double g = 0.61803398874989484820;
    double c = b - g * (b - a), d = a + g * (b - a);
    double fc = rdp_conv(rho, ld, c), fd = rdp_conv(rho, ld, d);
    for (int it = 0; it < 80; it++) {
        if (fc < fd) {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = rdp_conv(rho, ld, c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = rdp_conv(rho, ld, d);
        }
    }
    double v = fc < fd ? fc : fd;
    if (best_v < v)
        v = best_v;
    return v > 0.0 ? v : 0.0;
}

static int check_common(tsafe_dp_accountant acc, double sensitivity,
                        double sigma, double delta)
{
    if (acc != TSAFE_DP_ACCOUNTANT_RDP && acc != TSAFE_DP_ACCOUNTANT_GDP)
        return 0;
    if (!(sensitivity > 0.0) || !isfinite(sensitivity))
        return 0;
    if (!(sigma > 0.0) || !isfinite(sigma))
        return 0;
    if (!(delta > 0.0) || !(delta < 1.0))
        return 0;
    return 1;
}

static double eps_after(tsafe_dp_accountant acc, double ratio, uint64_t t,
                        double delta)
{
    if (t == 0)
        return 0.0;
    double td = (double)t;
    if (acc == TSAFE_DP_ACCOUNTANT_GDP)
        return tsafe_dp_gdp_eps_(sqrt(td) * ratio, delta);
    return tsafe_dp_rdp_eps_(0.5 * td * ratio * ratio, delta);
}

tsafe_status tsafe_dp_epsilon_spent(tsafe_dp_accountant acc,
                                    double sensitivity, double sigma,
                                    uint64_t releases, double delta,
                                    double *eps)
{
    if (!eps)
        return TSAFE_E_NULL;
    if (!check_common(acc, sensitivity, sigma, delta))
        return TSAFE_E_ARG;
    double ratio = sensitivity / sigma;
    if (!isfinite(ratio) || !(ratio > 0.0))
        return TSAFE_E_RANGE;
    *eps = eps_after(acc, ratio, releases, delta);
    return TSAFE_OK;
}

/* Does a budget of (eps_total, delta) cover t releases? GDP is decided on
 * the delta side directly (no eps root-finding in the way). */
static int fits(tsafe_dp_accountant acc, double ratio, uint64_t t,
                double eps_total, double delta)
{
    if (t == 0)
        return 1;
    if (acc == TSAFE_DP_ACCOUNTANT_GDP)
        /* 1e-9 slack in log delta covers the evaluation error */
        return tsafe_dp_log_delta_(eps_total, sqrt((double)t) * ratio) +
                   1e-9 <= log(delta);
    return eps_after(acc, ratio, t, delta) <= eps_total;
}

tsafe_status tsafe_dp_max_releases(tsafe_dp_accountant acc,
                                   double sensitivity, double sigma,
                                   double eps_total, double delta_total,
                                   uint64_t *count)
{
    if (!count)
        return TSAFE_E_NULL;
    if (!check_common(acc, sensitivity, sigma, delta_total) ||
        !(eps_total > 0.0) || !isfinite(eps_total))
        return TSAFE_E_ARG;
    double ratio = sensitivity / sigma;
    if (!isfinite(ratio) || !(ratio > 0.0))
        return TSAFE_E_RANGE;
    const uint64_t cap = (uint64_t)1 << 62;
    if (!fits(acc, ratio, 1, eps_total, delta_total)) {
        *count = 0;
        return TSAFE_OK;
    }
    uint64_t lo = 1, hi = 2; /* lo fits; find hi that does not */
    while (hi <= cap && fits(acc, ratio, hi, eps_total, delta_total)) {
        lo = hi;
        hi *= 2;
    }
    if (hi > cap) {
        *count = cap;
        return TSAFE_OK;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (fits(acc, ratio, mid, eps_total, delta_total))
            lo = mid;
        else
            hi = mid;
    }
    *count = lo;
    return TSAFE_OK;
}
