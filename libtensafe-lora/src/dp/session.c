/* Per-client DP session: clip + noise + budget. Not synchronised (one
 * client session = one thread at a time, see tensafe/lora_dp.h). */
#include <math.h>
#include <sodium.h>
#include <stdlib.h>

#include "dp_internal.h"
#include "init.h"

struct tsafe_dp_session {
    tsafe_dp_params p;
    double sensitivity;
    double sigma;
    uint64_t releases;
    uint64_t releases_max;
    uint64_t clipped;
};

static int pos_finite(double x)
{
    return x > 0.0 && isfinite(x);
}

static int prob(double x)
{
    return x > 0.0 && x < 1.0;
}

tsafe_status tsafe_dp_session_create(const tsafe_dp_params *p,
                                     tsafe_dp_session **out)
{
    if (!p || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (!pos_finite(p->clip_norm) || !pos_finite(p->eps_total) ||
        !prob(p->delta_total))
        return TSAFE_E_ARG;
    if (p->accountant != TSAFE_DP_ACCOUNTANT_RDP &&
        p->accountant != TSAFE_DP_ACCOUNTANT_GDP)
        return TSAFE_E_ARG;
    if (p->sensitivity != 0.0 && !pos_finite(p->sensitivity))
        return TSAFE_E_ARG;
    if (p->sigma != 0.0 && !pos_finite(p->sigma))
        return TSAFE_E_ARG;
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;

    double sens = p->sensitivity != 0.0 ? p->sensitivity : 2.0 * p->clip_norm;
    if (!pos_finite(sens))
        return TSAFE_E_RANGE;
    double sigma = p->sigma;
    tsafe_status st;
    if (sigma == 0.0) {
        if (!pos_finite(p->eps) || !prob(p->delta))
            return TSAFE_E_ARG;
        st = tsafe_dp_sigma_analytic(p->eps, p->delta, sens, &sigma);
        if (st != TSAFE_OK)
            return st;
    }
    uint64_t tmax = 0;
    st = tsafe_dp_max_releases(p->accountant, sens, sigma, p->eps_total,
                               p->delta_total, &tmax);
    if (st != TSAFE_OK)
        return st;
    if (tmax == 0)
        return TSAFE_E_BUDGET;

    tsafe_dp_session *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    s->p = *p;
    s->sensitivity = sens;
    s->sigma = sigma;
    s->releases_max = tmax;
    *out = s;
    return TSAFE_OK;
}

void tsafe_dp_session_free(tsafe_dp_session *s)
{
    free(s);
}

tsafe_status tsafe_dp_session_release(tsafe_dp_session *s, float *vec,
                                      size_t n)
{
    if (!s || !vec)
        return TSAFE_E_NULL;
    if (n == 0)
        return TSAFE_E_ARG;
    if (s->releases >= s->releases_max)
        return TSAFE_E_BUDGET;
    for (size_t i = 0; i < n; i++) /* validate before touching anything */
        if (!isfinite(vec[i]))
            return TSAFE_E_VALUE_RANGE;
    double norm = 0.0;
    tsafe_status st = tsafe_dp_clip_l2(vec, n, s->p.clip_norm, &norm);
    if (st != TSAFE_OK)
        return st; /* cannot happen after the checks above */
    st = tsafe_dp_add_gaussian_noise(vec, n, s->sigma);
    if (st != TSAFE_OK) {
        /* the clipped-but-unnoised vector must never be used */
        sodium_memzero(vec, n * sizeof *vec);
        return st;
    }
    s->releases++;
    if (norm > s->p.clip_norm)
        s->clipped++;
    return TSAFE_OK;
}

tsafe_status tsafe_dp_session_stats(const tsafe_dp_session *s,
                                    tsafe_dp_stats *out)
{
    if (!s || !out)
        return TSAFE_E_NULL;
    tsafe_dp_stats r = {0};
    r.clip_norm = s->p.clip_norm;
    r.sensitivity = s->sensitivity;
    r.sigma = s->sigma;
    r.eps_total = s->p.eps_total;
    r.delta_total = s->p.delta_total;
    r.releases = s->releases;
    r.releases_max = s->releases_max;
    r.releases_left = s->releases_max - s->releases;
    r.clipped = s->clipped;
    r.accountant = s->p.accountant;
    tsafe_status st = tsafe_dp_epsilon_spent(s->p.accountant, s->sensitivity,
                                             s->sigma, s->releases,
                                             s->p.delta_total, &r.eps_spent);
    if (st != TSAFE_OK)
        return st;
    r.eps_remaining = r.eps_total - r.eps_spent;
    if (r.eps_remaining < 0.0)
        r.eps_remaining = 0.0;
    *out = r;
    return TSAFE_OK;
}

tsafe_status tsafe_dp_session_charge(tsafe_dp_session *s, double *sigma)
{
    if (!s || !sigma)
        return TSAFE_E_NULL;
    if (s->releases >= s->releases_max)
        return TSAFE_E_BUDGET;
    s->releases++;
    *sigma = s->sigma;
    return TSAFE_OK;
}
