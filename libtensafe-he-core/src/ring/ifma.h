/* Internal: AVX-512 IFMA kernels of the ring layer (ntt_ifma.c, compiled
 * with IFMA flags) and the table they read. Callers must check
 * tsafe_cpu_has_ifma() first; every kernel requires q < 2^50. */
#ifndef TSAFE_RING_IFMA_H
#define TSAFE_RING_IFMA_H

#include "ring.h"

/* Hangs off tsafe_ntt_table.ifma. 52-bit Shoup quotients
 * floor(w * 2^52 / q) of the fwd/inv twiddles (== the 64-bit quotient
 * >> 12), 64-byte aligned. */
typedef struct tsafe_ntt_ifma {
    uint64_t *fwd52;
    uint64_t *inv52;
    uint64_t n_inv52;       /* quotient of N^-1 */
    uint64_t inv_last;      /* inv[1] * N^-1 mod q (last inverse stage) */
    uint64_t inv_last52;
} tsafe_ntt_ifma;

/* Largest modulus the IFMA kernels accept (lazy values < 4q < 2^52). */
#define TSAFE_IFMA_MAX_Q ((uint64_t)1 << 50)

void tsafe_ifma_vec_mul_shoup(uint64_t *out, const uint64_t *a,
                              const uint64_t *w, const uint64_t *wp,
                              size_t n, uint64_t q);
void tsafe_ifma_vec_mul_shoup_add(uint64_t *out, const uint64_t *a,
                                  const uint64_t *w, const uint64_t *wp,
                                  size_t n, uint64_t q);
size_t tsafe_ifma_vec_mac2_shoup(uint64_t *out0, uint64_t *out1, const uint64_t *const *a0,
                                 const uint64_t *const *a1, const uint64_t *const *w,
                                 const uint64_t *const *wp, size_t terms, size_t n,
                                 uint64_t q, int assign);
void tsafe_ifma_vec_mod_switch(uint64_t *out, const uint64_t *xi,
                               const uint64_t *xl, size_t n,
                               const tsafe_switch_consts *k);
void tsafe_ifma_vec_sub_mul_shoup(uint64_t *out, const uint64_t *b,
                                  const uint64_t *a, const uint64_t *w,
                                  const uint64_t *wp, size_t n, uint64_t q);
void tsafe_ifma_vec_add_i8(uint64_t *x, const int8_t *e, size_t n, uint64_t q);
int tsafe_ifma_vec_all_below(const uint64_t *a, size_t n, uint64_t q);
void tsafe_ifma_vec_from_i8(uint64_t *out, const int8_t *e, size_t n, uint64_t q);
int tsafe_ifma_vec_from_i64_small(uint64_t *out, const int64_t *v, size_t n, uint64_t q);
void tsafe_ifma_vec_mul_scalar(uint64_t *out, const uint64_t *a, uint64_t c,
                               uint64_t cp52, size_t n, uint64_t q);
void tsafe_ifma_vec_mul(uint64_t *out, const uint64_t *a, const uint64_t *b,
                        size_t n, const tsafe_modulus *m, int accumulate);

#endif
