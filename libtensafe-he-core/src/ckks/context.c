/* Validated, immutable CKKS context: primes, NTT tables, CRT and rescale
 * constants, encoding tables and FFTW plans, fingerprint. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <complex.h>
#include <fftw3.h>
#include <gmp.h>
#include <sodium.h>

#include "tensafe/backend_impl.h" /* exports tsafe_context_psi/log_n */
#include "ckks_internal.h"
#include "tsafe_check.h"
#include "alloc.h"
#include "../common/prng.h"

static pthread_mutex_t g_fftw_lock = PTHREAD_MUTEX_INITIALIZER;

void tsafe_fftw_lock(void) { pthread_mutex_lock(&g_fftw_lock); }
void tsafe_fftw_unlock(void) { pthread_mutex_unlock(&g_fftw_lock); }

uint64_t *tsafe_poly_alloc(const tsafe_context *c, uint32_t limbs)
{
    if (limbs == 0)
        limbs = 1;
    return tsafe_calloc_aligned((size_t)limbs * c->n, sizeof(uint64_t));
}

void tsafe_poly_free(uint64_t *p, const tsafe_context *c, uint32_t limbs,
                     int wipe)
{
    if (!p)
        return;
    if (wipe)
        sodium_memzero(p, (size_t)(limbs ? limbs : 1) * c->n * sizeof *p);
    free(p);
}

int tsafe_same_context(const tsafe_context *a, const tsafe_context *b)
{
    if (!a || !b)
        return 0;
    return a == b || sodium_memcmp(a->fingerprint, b->fingerprint,
                                   TSAFE_FINGERPRINT_BYTES) == 0;
}

/* Check the shape of a parameter set before any prime work. */
static tsafe_status check_shape(const tsafe_params *p)
{
    if (p->log_n < TSAFE_MIN_LOG_N || p->log_n > TSAFE_MAX_LOG_N)
        return TSAFE_E_PARAMS;
    if (p->n_primes == 0 || p->n_primes > TSAFE_MAX_PRIMES)
        return TSAFE_E_PARAMS;
    if (p->n_special > 1 || p->n_special >= p->n_primes)
        return TSAFE_E_PARAMS;
    if (!isfinite(p->scale) || p->scale < 1.0)
        return TSAFE_E_PARAMS;
    if (p->flags & ~TSAFE_PARAMS_INSECURE_FOR_TESTS)
        return TSAFE_E_PARAMS;
    return TSAFE_OK;
}

/* Fill primes (generated or checked), return log2 Q. */
static tsafe_status resolve_primes(tsafe_params *p, double *log2_q)
{
    int explicit_primes = 0, zero = 0;
    for (uint32_t i = 0; i < p->n_primes; i++) {
        if (p->primes[i])
            explicit_primes = 1;
        else
            zero = 1;
    }
    if (explicit_primes && zero)
        return TSAFE_E_PARAMS;
    uint64_t two_n = 2ull << p->log_n;
    if (!explicit_primes) {
        for (uint32_t i = 0; i < p->n_primes; i++)
            if (p->prime_bits[i] < 20 || p->prime_bits[i] > 61)
                return TSAFE_E_PARAMS;
        tsafe_status st = tsafe_primes_generate(p->log_n, p->n_primes,
                                                p->prime_bits, p->primes);
        if (st != TSAFE_OK)
            return st;
    }
    double lq = 0;
    for (uint32_t i = 0; i < p->n_primes; i++) {
        uint64_t q = p->primes[i];
        if (q >> 61 || q < (1u << 19) || q % two_n != 1 || !tsafe_is_prime(q))
            return TSAFE_E_PARAMS;
        for (uint32_t j = 0; j < i; j++)
            if (p->primes[j] == q)
                return TSAFE_E_PARAMS;
        p->prime_bits[i] = (uint32_t)(64 - __builtin_clzll(q));
        lq += log2((double)q);
    }
    *log2_q = lq;
    return TSAFE_OK;
}

static void fingerprint(tsafe_context *c)
{
    uint8_t buf[512];
    size_t len = 0;
    if (tsafe_params_serialize(&c->params, buf, sizeof buf, &len) != TSAFE_OK)
        len = 0;
    crypto_generichash(c->fingerprint, TSAFE_FINGERPRINT_BYTES, buf, len,
                       (const unsigned char *)"TenSafe-HE params v1", 20);
}

/* Rescale constants for dropping prime l from limbs 0..l. */
static void rescale_tables(tsafe_context *c)
{
    for (uint32_t l = 1; l < c->n_data; l++) {
        uint64_t ql = c->mod[l].q;
        for (uint32_t i = 0; i < l; i++) {
            const tsafe_modulus *m = &c->mod[i];
            uint64_t inv = tsafe_inv_mod(ql % m->q, m);
            c->qinv_last[l][i] = inv;
            c->qinv_last_shoup[l][i] = tsafe_shoup_precompute(inv, m->q);
            c->half_last[l][i] = (ql >> 1) % m->q;
        }
    }
}

/* Garner constants and the digits of floor((Q_l - 1)/2) per level. */
static tsafe_status crt_tables(tsafe_context *c)
{
    c->crt = calloc(c->n_data, sizeof *c->crt);
    if (!c->crt)
        return TSAFE_E_NOMEM;
    mpz_t Q, h, t;
    mpz_inits(Q, h, t, NULL);
    for (uint32_t l = 0; l < c->n_data; l++) {
        tsafe_crt_level *cl = &c->crt[l];
        long double w = 1.0L;
        mpz_set_ui(Q, 1);
        for (uint32_t i = 0; i <= l; i++) {
            cl->weight[i] = w;
            w *= (long double)c->mod[i].q;
            for (uint32_t j = 0; j < i; j++)
                cl->inv[i][j] =
                    tsafe_inv_mod(c->mod[j].q % c->mod[i].q, &c->mod[i]);
            mpz_mul_ui(Q, Q, c->mod[i].q);
        }
        /* half = (Q - 1) / 2 in mixed radix */
        mpz_sub_ui(h, Q, 1);
        mpz_fdiv_q_2exp(h, h, 1);
        for (uint32_t i = 0; i <= l; i++)
            cl->half_digits[i] = mpz_fdiv_q_ui(h, h, c->mod[i].q);
    }
    mpz_clears(Q, h, t, NULL);
    return TSAFE_OK;
}

static tsafe_status encoding_tables(tsafe_context *c)
{
    size_t n = c->n, two_n = 2 * n;
    c->slot_index = malloc(c->slots * sizeof *c->slot_index);
    c->twist = fftw_malloc(n * sizeof *c->twist);
    if (!c->slot_index || !c->twist)
        return TSAFE_E_NOMEM;
    uint64_t g = 1;
    for (size_t j = 0; j < c->slots; j++) {
        c->slot_index[j] = (uint32_t)((g - 1) / 2);
        g = (g * 5) % two_n;
    }
    for (size_t k = 0; k < n; k++) {
        long double a = 3.14159265358979323846264338327950288L * (long double)k /
                        (long double)n;
        c->twist[k] = (double)cosl(a) + I * (double)sinl(a);
    }
    fftw_complex *tmp = fftw_malloc(n * sizeof *tmp);
    if (!tmp)
        return TSAFE_E_NOMEM;
    tsafe_fftw_lock();
    c->fft_fwd = fftw_plan_dft_1d((int)n, tmp, tmp, FFTW_FORWARD,
                                  FFTW_ESTIMATE);
    c->fft_inv = fftw_plan_dft_1d((int)n, tmp, tmp, FFTW_BACKWARD,
                                  FFTW_ESTIMATE);
    tsafe_fftw_unlock();
    fftw_free(tmp);
    return c->fft_fwd && c->fft_inv ? TSAFE_OK : TSAFE_E_NOMEM;
}

tsafe_status tsafe_context_create(const tsafe_params *params,
                                  tsafe_context **out)
{
    tsafe_status st;
    TSAFE_REQUIRE(params && out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(tsafe_sodium_ready() == TSAFE_OK, TSAFE_E_CRYPTO);
    tsafe_context *c = calloc(1, sizeof *c);
    TSAFE_REQUIRE(c, TSAFE_E_NOMEM);
    c->params = *params;
    TSAFE_TRY(check_shape(&c->params));
    TSAFE_TRY(resolve_primes(&c->params, &c->log2_q));
    if (!(c->params.flags & TSAFE_PARAMS_INSECURE_FOR_TESTS) &&
        c->log2_q > (double)tsafe_params_max_log_q(c->params.log_n))
        TSAFE_CHECK(0, TSAFE_E_INSECURE);

    c->log_n = c->params.log_n;
    c->n = (size_t)1 << c->log_n;
    c->slots = c->n / 2;
    c->n_primes = c->params.n_primes;
    c->n_data = c->n_primes - c->params.n_special;
    int ifma = 1, vector = 1;
    for (uint32_t i = 0; i < c->n_primes; i++) {
        tsafe_modulus_init(&c->mod[i], c->params.primes[i]);
        TSAFE_TRY(tsafe_ntt_table_init(&c->ntt[i], c->log_n,
                                       c->params.primes[i], 1));
        if (i < c->n_data && !c->ntt[i].use_ifma)
            ifma = 0;
        if (i < c->n_data && !c->ntt[i].use_ifma && !c->ntt[i].use_avx2 &&
            !c->ntt[i].use_avx2_fp)
            vector = 0;
    }
    c->arith_path = ifma ? "ifma" : vector ? "avx2" : "scalar";
    c->ring = (struct tsafe_ring_view){c->n, c->log_n, c->n_data, c->mod, c->ntt};
    rescale_tables(c);
    TSAFE_TRY(crt_tables(c));
    TSAFE_TRY(encoding_tables(c));
    fingerprint(c);
    *out = c;
    return TSAFE_OK;
fail:
    tsafe_context_free(c);
    return st;
}

void tsafe_context_free(tsafe_context *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < TSAFE_MAX_PRIMES; i++)
        if (c->ntt[i].n)
            tsafe_ntt_table_free(&c->ntt[i]);
    free(c->crt);
    free(c->slot_index);
    if (c->twist)
        fftw_free(c->twist);
    tsafe_fftw_lock();
    if (c->fft_fwd)
        fftw_destroy_plan(c->fft_fwd);
    if (c->fft_inv)
        fftw_destroy_plan(c->fft_inv);
    tsafe_fftw_unlock();
    free(c);
}

size_t tsafe_context_n(const tsafe_context *c) { return c ? c->n : 0; }
size_t tsafe_context_slots(const tsafe_context *c) { return c ? c->slots : 0; }
uint32_t tsafe_context_log_n(const tsafe_context *c) { return c ? c->log_n : 0; }

uint32_t tsafe_context_max_level(const tsafe_context *c)
{
    return c ? c->n_data - 1 : 0;
}

uint64_t tsafe_context_prime(const tsafe_context *c, uint32_t i)
{
    return c && i < c->n_primes ? c->mod[i].q : 0;
}

uint64_t tsafe_context_psi(const tsafe_context *c, uint32_t i)
{
    return c && i < c->n_primes ? c->ntt[i].psi : 0;
}

double tsafe_context_log2_q(const tsafe_context *c) { return c ? c->log2_q : 0; }

const tsafe_params *tsafe_context_params(const tsafe_context *c)
{
    return c ? &c->params : NULL;
}

void tsafe_context_fingerprint(const tsafe_context *c,
                               uint8_t out[TSAFE_FINGERPRINT_BYTES])
{
    if (c && out)
        memcpy(out, c->fingerprint, TSAFE_FINGERPRINT_BYTES);
}

int tsafe_ifma_available(void) { return tsafe_cpu_has_ifma(); }

const char *tsafe_context_arith_path(const tsafe_context *c)
{
    return c ? c->arith_path : "none";
}
