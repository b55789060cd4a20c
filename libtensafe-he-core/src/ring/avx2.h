/* Internal: AVX2 kernels of the ring layer for primes below 2^30
 * (ntt_avx2.c, compiled with -mavx2). Callers must check
 * tsafe_cpu_has_avx2() first.
 *
 * Why only q < 2^30: AVX2 has no 64 x 64-bit multiply, but vpmuludq
 * multiplies the low 32 bits of each 64-bit lane into a full 64-bit
 * product. With q < 2^30 every lazy value (< 4q) fits in 32 bits, so
 * Harvey's butterfly runs four lanes at a time with the 32-bit Shoup
 * quotient floor(w * 2^32 / q), which is the 64-bit quotient >> 32 that
 * the tables and operands already hold. The sealed modes' gap primes
 * (two of every ciphertext's three limbs) are of this size; machines
 * with AVX-512 IFMA take the IFMA kernels instead (ifma.h). Outputs are
 * the same canonical residues as the scalar paths, bit for bit. */
#ifndef TSAFE_RING_AVX2_H
#define TSAFE_RING_AVX2_H

#include "ring.h"

/* Largest modulus (exclusive) the AVX2 kernels accept. */
#define TSAFE_AVX2_MAX_Q ((uint64_t)1 << 30)

/* The NTT kernels tsafe_ntt_forward_avx2 / tsafe_ntt_inverse_avx2 are
 * declared in ring.h beside the IFMA ones (t->use_avx2).
 *
 * Primes from 2^30 to 2^50 (the sealed modes' q0, the IFMA presets) take
 * a double-precision NTT instead (ntt_avx2_fp.c, AVX2 + FMA: values below
 * 2^52 are exact doubles), tsafe_ntt_forward_avx2_fp / _inverse_avx2_fp
 * in ring.h (t->use_avx2_fp), reading these tables off t->fp. */
struct tsafe_ntt_fp {
    double *fwd, *fwd_q;  /* fwd twiddles as doubles, and each w / q */
    double *inv, *inv_q;  /* the same for the inverse twiddles */
    double n_inv, n_inv_q;  /* N^-1 and N^-1 / q */
    double last, last_q;    /* inv[1] * N^-1 mod q (last inverse stage) */
};

/* tsafe_vec_mac2_shoup's body in doubles for 2^30 <= q < 2^50 (reads no
 * Shoup quotients), the first (n / 4) * 4 coefficients; returns how many.
 * Inputs < q. After tsafe_cpu_has_avx2_fma(). */
size_t tsafe_avx2_fp_vec_mac2(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                              const uint64_t *const *a1, const uint64_t *const *w,
                              size_t terms, size_t n, uint64_t q, int assign);

/* out = a b mod q (add: out + a b mod q) for q < 2^50 -- any such q, the
 * 30-bit ones included: the product of two canonical values in doubles,
 * its quotient estimated from fl(a b) / q (within 1 of the true one below
 * 2^50, see ntt_avx2_fp.c), the first (n / 4) * 4 coefficients; returns
 * how many. Inputs < q. After tsafe_cpu_has_avx2_fma(). */
size_t tsafe_avx2_fp_vec_mul(uint64_t *out, const uint64_t *a, const uint64_t *b, size_t n,
                             uint64_t q, int add);

/* tsafe_vec_from_i64_small's body (any q < 2^63) over the first
 * (n / 4) * 4 values; returns how many, *bad = 1 when one of them has a
 * magnitude of q or more (out is then unspecified). After
 * tsafe_cpu_has_avx2(). */
size_t tsafe_avx2_vec_from_i64_small(uint64_t *out, const int64_t *v, size_t n, uint64_t q,
                                     int *bad);

/* tsafe_vec_from_i8 and tsafe_vec_add_i8 (|e| < q, x < q; any q < 2^62)
 * over the first (n / 4) * 4 coefficients; return how many. After
 * tsafe_cpu_has_avx2(). */
size_t tsafe_avx2_vec_from_i8(uint64_t *out, const int8_t *e, size_t n, uint64_t q);
size_t tsafe_avx2_vec_add_i8(uint64_t *x, const int8_t *e, size_t n, uint64_t q);

/* Largest modulus (exclusive) of the double-precision kernels. */
#define TSAFE_AVX2_FP_MAX_Q ((uint64_t)1 << 50)

/* tsafe_vec_mac2_shoup's body over the first (n / 4) * 4 coefficients;
 * returns how many it did (the caller finishes the tail). Inputs < q. */
size_t tsafe_avx2_vec_mac2_shoup(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                                 const uint64_t *const *a1, const uint64_t *const *w,
                                 const uint64_t *const *wp, size_t terms, size_t n,
                                 uint64_t q, int assign);

/* out[k] = a[k] * w[k] mod q in [0, q) (tsafe_vec_mul_shoup), the first
 * (n / 4) * 4 coefficients; returns how many. a[k] < 2^32. */
size_t tsafe_avx2_vec_mul_shoup(uint64_t *out, const uint64_t *a, const uint64_t *w,
                                const uint64_t *wp, size_t n, uint64_t q);

/* out[k] += a[k] * w[k] mod q (tsafe_vec_mul_shoup_add) and out[k] = b[k] -
 * a[k] * w[k] mod q (tsafe_vec_sub_mul_shoup; out may alias b), the first
 * (n / 4) * 4 coefficients; return how many. Inputs < q. */
size_t tsafe_avx2_vec_mul_shoup_add(uint64_t *out, const uint64_t *a, const uint64_t *w,
                                    const uint64_t *wp, size_t n, uint64_t q);
size_t tsafe_avx2_vec_sub_mul_shoup(uint64_t *out, const uint64_t *b, const uint64_t *a,
                                    const uint64_t *w, const uint64_t *wp, size_t n, uint64_t q);

#endif
