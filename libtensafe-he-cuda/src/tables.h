/* Host-side constant tables of the CUDA backend (internal): per-prime
 * constants and NTT twiddles, built from the ring's facts once per backend and
 * uploaded to the device. Plain C (used by the .c and .cu files and by the
 * host emulation of the kernels). */
#ifndef TSAFE_CUDA_TABLES_H
#define TSAFE_CUDA_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/backend.h"
#include "tensafe/ckks.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-prime constants (64 bytes, one cache sector pair on the device). */
typedef struct tsafe_cuda_prime {
    uint64_t q;
    uint64_t two_q;
    uint64_t ratio_hi;   /* floor(2^128 / q), high word (Barrett) */
    uint64_t ratio_lo;   /* low word */
    uint64_t n_inv;      /* N^-1 mod q */
    uint64_t n_inv_shoup;
    uint64_t pad[2];
} tsafe_cuda_prime;

/* Constants for dropping prime l (rescale, modulus switch), for each
 * remaining prime i < l:
 * q_l^-1 mod q_i (and its Shoup quotient) and floor(q_l / 2) mod q_i. */
typedef struct tsafe_cuda_rescale_const {
    uint64_t qinv;
    uint64_t qinv_shoup;
    uint64_t half_mod;
    uint64_t pad;
} tsafe_cuda_rescale_const;

typedef struct tsafe_cuda_tables {
    uint32_t log_n;
    size_t n;
    uint32_t n_primes; /* the ring's primes (tsafe_backend_max_limbs) */
    int ckks;          /* 1: a CKKS context's data primes; 0: a BFV ring */
    tsafe_cuda_prime primes[TSAFE_MAX_PRIMES];
    /* rescale[l * TSAFE_MAX_PRIMES + i] */
    tsafe_cuda_rescale_const rescale[TSAFE_MAX_PRIMES * TSAFE_MAX_PRIMES];
    /* Twiddles, interleaved (w, floor(w 2^64 / q)) pairs: 2 * n words per
     * prime, prime-major. fwd[k] = psi^bitrev(k), inv[k] = psi^-bitrev(k). */
    uint64_t *tw_fwd;
    uint64_t *tw_inv;
} tsafe_cuda_tables;

/* Build every table from the ring that backend `ring` serves (any
 * backend: its tsafe_backend_log_n / _prime / _psi facts; CKKS or BFV).
 * Checks each prime (odd, < 2^62, psi a primitive 2N-th root).
 * TSAFE_E_NOMEM / TSAFE_E_PARAMS on failure. Borrows nothing. */
tsafe_status tsafe_cuda_tables_build(const tsafe_backend *ring,
                                     tsafe_cuda_tables *t);
void tsafe_cuda_tables_free(tsafe_cuda_tables *t);

#ifdef __cplusplus
}
#endif
#endif
