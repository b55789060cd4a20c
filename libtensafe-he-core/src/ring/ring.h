/* Ring layer (internal): modular arithmetic on word-size primes, prime
 * generation and the negacyclic NTT. Knows nothing of CKKS.
 *
 * Conventions: every public result is fully reduced to [0, q) unless the
 * name says `lazy`. Primes are odd, 20..61 bits, q = 1 mod 2N for NTT use.
 * Tables are immutable after init and shareable between threads. */
#ifndef TSAFE_RING_H
#define TSAFE_RING_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"
#include "../common/cpu.h"

typedef unsigned __int128 tsafe_u128;

/* ------------------------------------------------------------ modulus */

typedef struct tsafe_modulus {
    uint64_t q;
    uint32_t bits;       /* ceil(log2 q) == bit length of q */
    uint64_t barrett_hi; /* floor(2^128 / q), high word */
    uint64_t barrett_lo; /* floor(2^128 / q), low word */
} tsafe_modulus;

void tsafe_modulus_init(tsafe_modulus *m, uint64_t q);

static inline uint64_t tsafe_add_mod(uint64_t a, uint64_t b, uint64_t q)
{
    uint64_t s = a + b;
    return s >= q ? s - q : s;
}

static inline uint64_t tsafe_sub_mod(uint64_t a, uint64_t b, uint64_t q)
{
    return a >= b ? a - b : a + q - b;
}

static inline uint64_t tsafe_neg_mod(uint64_t a, uint64_t q)
{
    return a ? q - a : 0;
}

/* Barrett reduction of a 128-bit value x < q * 2^64 (always true for a
 * product of two reduced operands), any q < 2^63. Bound: with
 * mu = floor(2^128/q) the quotient estimate floor(x*mu/2^128) (computed
 * exactly, all carries kept) is at most 1 below the true quotient, so one
 * conditional subtraction finishes the reduction (proof in modulus.c). */
uint64_t tsafe_reduce_128(tsafe_u128 x, const tsafe_modulus *m);

static inline uint64_t tsafe_mul_mod(uint64_t a, uint64_t b,
                                     const tsafe_modulus *m)
{
    return tsafe_reduce_128((tsafe_u128)a * b, m);
}

/* Shoup: w' = floor(w * 2^64 / q) for a fixed operand w < q. */
static inline uint64_t tsafe_shoup_precompute(uint64_t w, uint64_t q)
{
    return (uint64_t)(((tsafe_u128)w << 64) / q);
}

/* x * w mod q in [0, 2q) for any x < 2^64 (Harvey's lazy form). */
static inline uint64_t tsafe_mul_shoup_lazy(uint64_t x, uint64_t w,
                                            uint64_t wp, uint64_t q)
{
    uint64_t hi = (uint64_t)(((tsafe_u128)x * wp) >> 64);
    return x * w - hi * q;
}

static inline uint64_t tsafe_mul_shoup(uint64_t x, uint64_t w, uint64_t wp,
                                       uint64_t q)
{
    uint64_t r = tsafe_mul_shoup_lazy(x, w, wp, q);
    return r >= q ? r - q : r;
}

uint64_t tsafe_pow_mod(uint64_t base, uint64_t exp, const tsafe_modulus *m);
/* Inverse of a (a != 0 mod q, q prime). */
uint64_t tsafe_inv_mod(uint64_t a, const tsafe_modulus *m);

/* ------------------------------------------------------------- primes */

/* 1 if q is prime (GMP, 50 Miller-Rabin rounds after trial division). */
int tsafe_is_prime(uint64_t q);

/* For each i, the largest prime q < 2^bits[i] with q = 1 mod 2^(log_n+1)
 * not already used by an earlier entry; TSAFE_E_NO_PRIME if none. */
tsafe_status tsafe_primes_generate(uint32_t log_n, size_t count,
                                   const uint32_t *bits, uint64_t *out);

/* Smallest primitive 2N-th root of unity mod q (deterministic). */
tsafe_status tsafe_primitive_2n_root(uint64_t q, uint32_t log_n,
                                     uint64_t *psi);

/* ---------------------------------------------------------------- NTT */

typedef struct tsafe_ntt_table {
    uint32_t log_n;
    size_t n;
    tsafe_modulus mod;
    uint64_t psi;          /* primitive 2N-th root */
    uint64_t *fwd;         /* psi powers, bit-reversed order, and Shoup */
    uint64_t *fwd_shoup;
    uint64_t *inv;         /* inverse psi powers for the inverse transform */
    uint64_t *inv_shoup;
    uint64_t n_inv;        /* N^-1 mod q and its Shoup quotient */
    uint64_t n_inv_shoup;
    uint64_t inv_last;     /* inv[1] * N^-1 mod q (the last inverse stage) */
    uint64_t inv_last_shoup;
    int use_ifma;          /* IFMA path selected (CPU has it and q < 2^50) */
    int use_avx2;          /* else AVX2 path (CPU has it and q < 2^30) */
    int use_avx2_fp;       /* else AVX2 + FMA doubles (q < 2^50) */
    void *fp;              /* their tables (ring/avx2.h), or NULL */
    void *ifma;            /* IFMA-specific tables (52-bit Shoup), or NULL */
} tsafe_ntt_table;

/* Build tables for prime q (q = 1 mod 2N, q < 2^62), log_n in 1..17.
 * TSAFE_E_ARG for a bad q (composite, too large, not 1 mod 2N) or log_n,
 * TSAFE_E_NOMEM on allocation failure (t is then zeroed). allow_ifma = 0
 * forces scalar; otherwise use_ifma = CPU has IFMA && q < 2^50 && N >= 16,
 * and where that is 0, use_avx2 = CPU has AVX2 && q < 2^30 && N >= 16,
 * else use_avx2_fp = CPU has AVX2 and FMA && q < 2^50 && N >= 16.
 * t is caller-owned storage; release with tsafe_ntt_table_free (which
 * zeroes it, so a second free is harmless). */
tsafe_status tsafe_ntt_table_init(tsafe_ntt_table *t, uint32_t log_n,
                                  uint64_t q, int allow_ifma);
void tsafe_ntt_table_free(tsafe_ntt_table *t);

/* In place. Forward: natural-order coefficients in [0, q) -> evaluations at
 * psi^(2*bitrev(k)+1) in slot k, in [0, q). Inverse: the exact inverse.
 * Dispatch to the IFMA path when t->use_ifma, the AVX2 one when
 * t->use_avx2 (ring/avx2.h), else scalar. */
void tsafe_ntt_forward(const tsafe_ntt_table *t, uint64_t *a);
void tsafe_ntt_inverse(const tsafe_ntt_table *t, uint64_t *a);

/* Explicit paths (tests compare them; the IFMA ones require
 * tsafe_cpu_has_ifma() and q < 2^50 and t->ifma != NULL, which init only
 * builds for N >= 16). Same input ranges and bit-identical outputs. */
void tsafe_ntt_forward_scalar(const tsafe_ntt_table *t, uint64_t *a);
void tsafe_ntt_inverse_scalar(const tsafe_ntt_table *t, uint64_t *a);
void tsafe_ntt_forward_ifma(const tsafe_ntt_table *t, uint64_t *a);
void tsafe_ntt_inverse_ifma(const tsafe_ntt_table *t, uint64_t *a);
/* The AVX2 ones (ntt_avx2.c, ring/avx2.h) require tsafe_cpu_has_avx2(),
 * q < 2^30 and N >= 16; bit-identical outputs too. */
void tsafe_ntt_forward_avx2(const tsafe_ntt_table *t, uint64_t *a);
void tsafe_ntt_inverse_avx2(const tsafe_ntt_table *t, uint64_t *a);
/* AVX2 + FMA in doubles: tsafe_cpu_has_avx2_fma(), q < 2^50, N >= 16 and
 * t->fp != NULL (init builds it with use_avx2_fp). */
void tsafe_ntt_forward_avx2_fp(const tsafe_ntt_table *t, uint64_t *a);
void tsafe_ntt_inverse_avx2_fp(const tsafe_ntt_table *t, uint64_t *a);
/* Their tables for t (twiddles filled; ring/avx2.h): NULL on allocation
 * failure. Only after tsafe_cpu_has_avx2_fma() (built for AVX2). */
typedef struct tsafe_ntt_fp tsafe_ntt_fp;
tsafe_ntt_fp *tsafe_ntt_fp_build(const tsafe_ntt_table *t);
void tsafe_ntt_fp_free(tsafe_ntt_fp *f);

/* tsafe_cpu_has_ifma(): common/cpu.h. */

/* ------------------------------------------------ element-wise vectors */

/* All inputs reduced (< q), n any length, out may alias an input.
 * tsafe_vec_mul_shoup, tsafe_vec_mul, tsafe_vec_mul_add and
 * tsafe_vec_mul_scalar dispatch internally to AVX-512 IFMA kernels when
 * q < 2^50 and tsafe_cpu_has_ifma(); the 52-bit Shoup quotient is derived
 * in-register as wp >> 12 (floor(w*2^52/q) == floor(w*2^64/q) >> 12), so
 * callers keep the 64-bit quotients of tsafe_vec_shoup_precompute. Results
 * are bit-identical to the scalar loops. */

/* out[k] = a[k] * w[k] mod q with Shoup quotients wp (fixed operand w). */
void tsafe_vec_mul_shoup(uint64_t *out, const uint64_t *a, const uint64_t *w,
                         const uint64_t *wp, size_t n, uint64_t q);
/* out[k] = a[k] * b[k] mod q (Barrett). */
void tsafe_vec_mul(uint64_t *out, const uint64_t *a, const uint64_t *b,
                   size_t n, const tsafe_modulus *m);
/* out[k] += a[k] * b[k] mod q (Barrett). */
void tsafe_vec_mul_add(uint64_t *out, const uint64_t *a, const uint64_t *b,
                       size_t n, const tsafe_modulus *m);
void tsafe_vec_add(uint64_t *out, const uint64_t *a, const uint64_t *b,
                   size_t n, uint64_t q);
void tsafe_vec_sub(uint64_t *out, const uint64_t *a, const uint64_t *b,
                   size_t n, uint64_t q);
void tsafe_vec_neg(uint64_t *out, const uint64_t *a, size_t n, uint64_t q);
/* out[k] = a[k] * c mod q for a constant c < q. */
void tsafe_vec_mul_scalar(uint64_t *out, const uint64_t *a, uint64_t c,
                          size_t n, uint64_t q);
/* out[k] = b[k] - a[k] * w[k] mod q (Shoup, fixed operand w); out may
 * alias b. */
void tsafe_vec_sub_mul_shoup(uint64_t *out, const uint64_t *b, const uint64_t *a,
                             const uint64_t *w, const uint64_t *wp, size_t n,
                             uint64_t q);

/* out0 += a0 * w and out1 += a1 * w mod q: both polynomials of a
 * ciphertext times one fixed operand (Shoup), read once for both; inputs
 * < q. tsafe_vec_mac2_shoup with one term. */
void tsafe_vec_mul_shoup_add2(uint64_t *out0, uint64_t *out1, const uint64_t *a0,
                              const uint64_t *a1, const uint64_t *w, const uint64_t *wp,
                              size_t n, uint64_t q);

/* out0 (+)= sum_k a0[k] * w[k], out1 (+)= sum_k a1[k] * w[k] mod q (each
 * w[k] a fixed operand with Shoup quotients wp[k]): a ciphertext's two
 * polynomials times several plaintexts, each coefficient's sums kept in
 * registers, so out is read and written once instead of once per term.
 * assign: out = the sums. Results are canonical, as term by term. */
void tsafe_vec_mac2_shoup(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                          const uint64_t *const *a1, const uint64_t *const *w,
                          const uint64_t *const *wp, size_t terms, size_t n, uint64_t q,
                          int assign);

/* 1 when every a[k] < q (any q: a reader's range check, AVX-512 where the
 * IFMA kernels run). */
int tsafe_vec_all_below(const uint64_t *a, size_t n, uint64_t q);

/* 1 when the tsafe_vec_* kernels run IFMA for modulus q (and n >= 8). */
int tsafe_vec_uses_ifma(uint64_t q);

/* out[k] = out[k] + a[k] * w[k] mod q (Shoup, fixed operand w): one pass
 * for a multiply-accumulate. */
void tsafe_vec_mul_shoup_add(uint64_t *out, const uint64_t *a, const uint64_t *w,
                             const uint64_t *wp, size_t n, uint64_t q);

/* One limb of a modulus switch that drops prime q_l, rounding half up:
 * round(x / q_l) mod q_i = ((x_i + h) - ((x_l + h) mod q_l)) / q_l mod q_i
 * with h = (q_l - 1)/2 (x_i, x_l the residues of x). */
typedef struct tsafe_switch_consts {
    uint64_t qi, ql;
    uint64_t h, hi;            /* h and h mod q_i */
    uint64_t inv, inv_shoup;   /* q_l^-1 mod q_i */
    uint64_t one_shoup;        /* Shoup quotient of 1 mod q_i: y mod q_i */
} tsafe_switch_consts;

void tsafe_switch_consts_init(tsafe_switch_consts *k, const tsafe_modulus *mi,
                              const tsafe_modulus *ml);

static inline uint64_t tsafe_mod_switch_one(uint64_t xi, uint64_t xl,
                                            const tsafe_switch_consts *k)
{
    uint64_t yl = xl + k->h;
    if (yl >= k->ql)
        yl -= k->ql;
    uint64_t yi = tsafe_add_mod(xi, k->hi, k->qi);
    uint64_t d = tsafe_sub_mod(yi, tsafe_mul_shoup(yl, 1, k->one_shoup, k->qi), k->qi);
    return tsafe_mul_shoup(d, k->inv, k->inv_shoup, k->qi);
}

/* out[k] = tsafe_mod_switch_one(xi[k], xl[k]); out may alias xi. IFMA
 * when both primes are below 2^50. */
void tsafe_vec_mod_switch(uint64_t *out, const uint64_t *xi, const uint64_t *xl,
                          size_t n, const tsafe_switch_consts *k);

/* Small signed integers (|e| < q, error and ternary samples): x += e mod q,
 * and out = e mod q. AVX-512 where the IFMA kernels run. */
void tsafe_vec_add_i8(uint64_t *x, const int8_t *e, size_t n, uint64_t q);
void tsafe_vec_from_i8(uint64_t *out, const int8_t *e, size_t n, uint64_t q);
/* out = v mod q for 64-bit v with |v| < q (plaintext weights); returns 0,
 * or -1 as soon as some |v| >= q is met (out is then partly written: the
 * caller reduces those values another way). */
int tsafe_vec_from_i64_small(uint64_t *out, const int64_t *v, size_t n, uint64_t q);

/* Shoup quotients for a whole vector. */
void tsafe_vec_shoup_precompute(uint64_t *wp, const uint64_t *w, size_t n,
                                uint64_t q);

/* -------------------------------------------------------- coset reads */

/* A few coefficients of an NTT-form polynomial at positions c + m l (m a
 * power of two, R = N/m <= TSAFE_COSET_MAX_R), for N products plus R per
 * position instead of a whole inverse NTT (the arithmetic: coset.c). The
 * positions of a sealed block's reads have that shape. */
#define TSAFE_COSET_MAX_R 64

/* 1 and (m, c) when pos[0..n_pos) (each < n) share a residue c modulo a
 * power of two m with n/m <= TSAFE_COSET_MAX_R; else 0. */
int tsafe_coset_fit(size_t n, const uint32_t *pos, size_t n_pos, uint32_t *m,
                    uint32_t *c);

/* Tables per (m, c) for the limbs of `ntt` (borrowed: it must outlive the
 * cache), built on first use and kept (a few shapes). Thread-safe: lookups
 * and builds hold the cache's mutex; built tables are immutable. */
typedef struct tsafe_coset_cache tsafe_coset_cache;
tsafe_status tsafe_coset_cache_create(const tsafe_ntt_table *ntt, uint32_t n_limbs,
                                      tsafe_coset_cache **out);
void tsafe_coset_cache_free(tsafe_coset_cache *cc);

/* out[k] = coefficient pos[k] of the polynomial whose limb `limb` in NTT
 * form is a (values in [0, q)); results in [0, q), equal to the inverse
 * NTT's. scratch: N words. TSAFE_E_UNSUPPORTED when the positions are no
 * such coset or the cache is full (callers then take the inverse NTT);
 * TSAFE_E_RANGE for a position >= N or a limb out of range. */
tsafe_status tsafe_coset_read(tsafe_coset_cache *cc, uint32_t limb, const uint64_t *a,
                              const uint32_t *pos, size_t n_pos, uint64_t *out,
                              uint64_t *scratch);

/* ---------------------------------------------------------- ring view */

/* What a compute backend needs of a context's ring: the degree and the
 * limbs a buffer may have (the CKKS data primes, or the BFV context's two
 * primes), with their NTT tables. Borrowed from the context that embeds it
 * (tsafe_context, tsafe_bfv_context); immutable. */
struct tsafe_ring_view {
    size_t n;
    uint32_t log_n;
    uint32_t n_limbs;
    const tsafe_modulus *mod;
    const tsafe_ntt_table *ntt;
};

#endif
