/* Host-side tables of the CUDA backend: computed with 128-bit integer
 * arithmetic from the primes and roots of the backend's ring (a CKKS
 * context's data primes or a BFV context's two primes, read through
 * tsafe_backend_log_n / _prime / _psi), so the device NTT evaluates at
 * exactly the CPU NTT's points. */
#include "tables.h"

#include <stdlib.h>
#include <string.h>

#include "tensafe/backend_impl.h"

typedef unsigned __int128 u128;

static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t q)
{
    return (uint64_t)(((u128)a * b) % q);
}

static uint64_t powmod(uint64_t b, uint64_t e, uint64_t q)
{
    uint64_t r = 1 % q;
    b %= q;
    while (e) {
        if (e & 1)
            r = mulmod(r, b, q);
        b = mulmod(b, b, q);
        e >>= 1;
    }
    return r;
}

/* q prime: a^(q-2) */
static uint64_t invmod(uint64_t a, uint64_t q) { return powmod(a, q - 2, q); }

static uint64_t shoup(uint64_t w, uint64_t q)
{
    return (uint64_t)(((u128)w << 64) / q);
}

static uint32_t bitrev(uint32_t x, uint32_t bits)
{
    uint32_t r = 0;
    for (uint32_t i = 0; i < bits; i++) {
        r = (r << 1) | (x & 1);
        x >>= 1;
    }
    return r;
}

static void fill_twiddles(uint64_t *tw, uint64_t root, uint64_t q,
                          uint32_t log_n)
{
    size_t n = (size_t)1 << log_n;
    uint64_t p = 1;
    for (size_t k = 0; k < n; k++) {
        size_t j = bitrev((uint32_t)k, log_n);
        tw[2 * j] = p;
        tw[2 * j + 1] = shoup(p, q);
        p = mulmod(p, root, q);
    }
}

void tsafe_cuda_tables_free(tsafe_cuda_tables *t)
{
    if (!t)
        return;
    free(t->tw_fwd);
    free(t->tw_inv);
    t->tw_fwd = t->tw_inv = NULL;
}

tsafe_status tsafe_cuda_tables_build(const tsafe_backend *ring,
                                     tsafe_cuda_tables *t)
{
    if (!ring || !t)
        return TSAFE_E_NULL;
    memset(t, 0, sizeof(*t));
    t->log_n = tsafe_backend_log_n(ring);
    t->n = tsafe_backend_n(ring);
    t->n_primes = tsafe_backend_max_limbs(ring);
    t->ckks = ring->he != NULL;
    if (t->log_n < TSAFE_MIN_LOG_N || t->log_n > TSAFE_MAX_LOG_N ||
        t->n != ((size_t)1 << t->log_n) || t->n_primes == 0 ||
        t->n_primes > TSAFE_MAX_PRIMES)
        return TSAFE_E_PARAMS;

    for (uint32_t i = 0; i < t->n_primes; i++) {
        uint64_t q = tsafe_backend_prime(ring, i);
        uint64_t psi = tsafe_backend_psi(ring, i);
        /* 4q < 2^64 keeps Harvey's lazy butterflies exact */
        if (q < 3 || !(q & 1) || q >= (1ull << 62) || psi == 0 || psi >= q)
            return TSAFE_E_PARAMS;
        if (powmod(psi, t->n, q) != q - 1) /* primitive 2N-th root */
            return TSAFE_E_PARAMS;
        tsafe_cuda_prime *pr = &t->primes[i];
        u128 ratio = ~(u128)0 / q; /* floor((2^128 - 1)/q) = floor(2^128/q) for odd q */
        pr->q = q;
        pr->two_q = 2 * q;
        pr->ratio_hi = (uint64_t)(ratio >> 64);
        pr->ratio_lo = (uint64_t)ratio;
        pr->n_inv = invmod((uint64_t)(t->n % q), q);
        pr->n_inv_shoup = shoup(pr->n_inv, q);
    }
    /* dropping prime l: the rescale (CKKS) and the modulus switch (both
     * rings) round the same way, so one table serves both */
    for (uint32_t l = 1; l < t->n_primes; l++) {
        uint64_t ql = t->primes[l].q;
        for (uint32_t i = 0; i < l; i++) {
            uint64_t qi = t->primes[i].q;
            tsafe_cuda_rescale_const *rc =
                &t->rescale[l * TSAFE_MAX_PRIMES + i];
            rc->qinv = invmod(ql % qi, qi);
            rc->qinv_shoup = shoup(rc->qinv, qi);
            rc->half_mod = (ql >> 1) % qi;
        }
    }

    size_t words = 2 * t->n * t->n_primes;
    t->tw_fwd = malloc(words * sizeof(uint64_t));
    t->tw_inv = malloc(words * sizeof(uint64_t));
    if (!t->tw_fwd || !t->tw_inv) {
        tsafe_cuda_tables_free(t);
        return TSAFE_E_NOMEM;
    }
    for (uint32_t i = 0; i < t->n_primes; i++) {
        uint64_t q = t->primes[i].q;
        uint64_t psi = tsafe_backend_psi(ring, i);
        fill_twiddles(t->tw_fwd + 2 * t->n * i, psi, q, t->log_n);
        fill_twiddles(t->tw_inv + 2 * t->n * i, invmod(psi, q), q, t->log_n);
    }
    return TSAFE_OK;
}
