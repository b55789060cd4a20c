/* Run-time CPU features (internal to the libraries; common/cpu.c): the
 * one answer to "may this AVX-512 code run here?". Each answer is computed
 * once per process and cached; thread-safe. Code compiled for AVX-512 (the
 * *_ifma.c files, built with -mavx512*, and functions with a target
 * attribute) runs only after its check said yes. */
#ifndef TSAFE_CPU_H
#define TSAFE_CPU_H

#ifdef __cplusplus
extern "C" { /* also called from the tool's CUDA C++ */
#endif

/* AVX-512 F, DQ, BW, VL and IFMA with OS support: the IFMA NTT and vector
 * kernels. TSAFE_DISABLE_IFMA=1 in the environment forces 0. */
int tsafe_cpu_has_ifma(void);

/* VBMI and VPOPCNTDQ on top of tsafe_cpu_has_ifma() (so also off with
 * TSAFE_DISABLE_IFMA=1): the AVX-512 samplers and bit packing. */
int tsafe_cpu_has_avx512_sampling(void);

/* AVX2 with OS support (YMM state saved): the AVX2 kernels of the ring
 * layer for primes below 2^30 (ring/avx2.h), used where IFMA is not.
 * TSAFE_DISABLE_AVX2=1 in the environment forces 0. */
int tsafe_cpu_has_avx2(void);

/* tsafe_cpu_has_avx2() and FMA3: the double-precision NTT for primes up
 * to 2^50 (ring/avx2.h). Off with TSAFE_DISABLE_AVX2=1 too. */
int tsafe_cpu_has_avx2_fma(void);

/* AVX-512F with OS support, nothing more (for code that needs only the
 * foundation instructions). */
int tsafe_cpu_has_avx512f(void);

#ifdef __cplusplus
}
#endif

#endif
