/* Exact discrete Gaussian sampling (Canonne, Kamath, Steinke, "The
 * Discrete Gaussian for Differential Privacy", NeurIPS 2020, Algorithms
 * 1-3): every acceptance test is a Bernoulli trial with a rational
 * probability decided by comparing a uniform integer from the CSPRNG
 * (libsodium) with a GMP rational -- no floating-point sampling. sigma^2
 * is taken as the exact rational value of the double sigma*sigma. */
#include <math.h>

#include <gmp.h>
#include <sodium.h>

#include "dp_internal.h"
#include "init.h"

/* uniform integer in [0, n), n >= 1, by rejection on bit_length(n) bits */
static void uniform_below(mpz_t out, const mpz_t n)
{
    size_t bits = mpz_sizeinbase(n, 2), bytes = (bits + 7) / 8;
    unsigned char buf[64];
    for (;;) {
        size_t left = bytes;
        mpz_set_ui(out, 0);
        while (left) {
            size_t take = left < sizeof buf ? left : sizeof buf;
            randombytes_buf(buf, take);
            mpz_t part;
            mpz_init(part);
            mpz_import(part, take, 1, 1, 0, 0, buf);
            mpz_mul_2exp(out, out, 8 * take);
            mpz_add(out, out, part);
            mpz_clear(part);
            left -= take;
        }
        mpz_fdiv_r_2exp(out, out, bits);
        if (mpz_cmp(out, n) < 0)
            break;
    }
    sodium_memzero(buf, sizeof buf);
}

/* Bernoulli(p), p = num/den in [0, 1] */
static int bernoulli(const mpq_t p)
{
    mpz_t u;
    mpz_init(u);
    uniform_below(u, mpq_denref(p));
    int r = mpz_cmp(u, mpq_numref(p)) < 0;
    mpz_clear(u);
    return r;
}

/* Bernoulli(exp(-g)), g >= 0 rational (CKS Algorithm 1) */
static int bernoulli_exp(const mpq_t g)
{
    mpq_t q, one;
    mpq_inits(q, one, NULL);
    mpq_set_ui(one, 1, 1);
    int result;
    if (mpq_cmp(g, one) <= 0) {
        unsigned long k = 1;
        for (;;) {
            mpq_set_ui(q, 1, k);
            mpq_mul(q, q, g); /* g / k */
            if (!bernoulli(q))
                break;
            k++;
        }
        result = k & 1;
    } else {
        mpz_t fl;
        mpz_init(fl);
        mpz_fdiv_q(fl, mpq_numref(g), mpq_denref(g));
        result = 1;
        for (unsigned long i = 0; result && mpz_cmp_ui(fl, i) > 0; i++)
            result = bernoulli_exp(one);
        if (result) {
            mpq_set_z(q, fl);
            mpq_sub(q, g, q);
            result = bernoulli_exp(q);
        }
        mpz_clear(fl);
    }
    mpq_clears(q, one, NULL);
    return result;
}

/* discrete Laplace with scale t (CKS Algorithm 2) */
static void discrete_laplace(const mpz_t t, mpz_t out)
{
    mpz_t u;
    mpq_t g, one;
    mpz_init(u);
    mpq_inits(g, one, NULL);
    mpq_set_ui(one, 1, 1);
    for (;;) {
        uniform_below(u, t);
        mpq_set_num(g, u);
        mpq_set_den(g, t);
        mpq_canonicalize(g);
        if (!bernoulli_exp(g))
            continue;
        unsigned long v = 0;
        while (bernoulli_exp(one))
            v++;
        mpz_mul_ui(out, t, v);
        mpz_add(out, out, u); /* x = u + t v */
        unsigned char b;
        randombytes_buf(&b, 1);
        int neg = b & 1;
        if (neg && mpz_sgn(out) == 0)
            continue;
        if (neg)
            mpz_neg(out, out);
        break;
    }
    mpz_clear(u);
    mpq_clears(g, one, NULL);
}

tsafe_status tsafe_dp_discrete_gaussian(double sigma, int64_t *out)
{
    if (!out)
        return TSAFE_E_NULL;
    if (!(sigma > 0) || !isfinite(sigma) || sigma > 0x1p50)
        return TSAFE_E_ARG;
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    mpq_t s2, g, tq;
    mpz_t t, y, ay;
    mpq_inits(s2, g, tq, NULL);
    mpz_inits(t, y, ay, NULL);
    mpq_set_d(s2, sigma * sigma);
    mpz_set_d(t, floor(sigma));
    mpz_add_ui(t, t, 1);
    mpq_set_z(tq, t);
    for (;;) {
        discrete_laplace(t, y);
        mpz_abs(ay, y);
        /* g = (|y| - s2/t)^2 / (2 s2) */
        mpq_div(g, s2, tq);
        mpq_t a;
        mpq_init(a);
        mpq_set_z(a, ay);
        mpq_sub(g, a, g);
        mpq_mul(g, g, g);
        mpq_div(g, g, s2);
        mpq_div_2exp(g, g, 1);
        mpq_clear(a);
        if (bernoulli_exp(g))
            break;
    }
    *out = mpz_get_si(y);
    mpq_clears(s2, g, tq, NULL);
    mpz_clears(t, y, ay, NULL);
    return TSAFE_OK;
}
