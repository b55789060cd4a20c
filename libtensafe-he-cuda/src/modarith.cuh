/* Word-size modular arithmetic and memory access shared by the CUDA kernels
 * and their host emulation (internal). Every function computes the same
 * value on host and device; only the device-only instructions differ in
 * spelling, each in one place below: the 64x64 -> high-word product
 * (__umul64hi / a 128-bit product), the read-only-cache load (__ldg / a
 * plain load) and the 16-byte vector accesses (one ulonglong2 access /
 * two word accesses plus an alignment check). Primes are odd and below
 * 2^62 (tables.c checks), so Harvey's lazy ranges [0, 2q) and [0, 4q) fit
 * a word. */
#ifndef TSAFE_CUDA_MODARITH_CUH
#define TSAFE_CUDA_MODARITH_CUH

#include <stdint.h>
#include <vector_types.h>

#include "tables.h"

#define TSAFE_HD __host__ __device__ __forceinline__

TSAFE_HD uint64_t ts_mulhi(uint64_t a, uint64_t b)
{
#if defined(__CUDA_ARCH__)
    return __umul64hi(a, b);
#else
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#endif
}

/* Host only (a host function, called from the host side of the accessors
 * below): 16-byte accesses at addresses that are not 16-byte aligned, i.e.
 * that would fault on the device (misaligned address); the emulation fails
 * an operation that made any. */
inline unsigned long &tsafe_emu_misaligned(void)
{
    static thread_local unsigned long n;
    return n;
}

/* 16-byte load / store of p[0], p[1] (one vector access on the device). */
TSAFE_HD ulonglong2 ts_ld16(const uint64_t *p)
{
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const ulonglong2 *>(p);
#else
    if ((uintptr_t)p & 15)
        tsafe_emu_misaligned()++;
    ulonglong2 v;
    v.x = p[0];
    v.y = p[1];
    return v;
#endif
}

TSAFE_HD void ts_st16(uint64_t *p, ulonglong2 v)
{
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<ulonglong2 *>(p) = v;
#else
    if ((uintptr_t)p & 15)
        tsafe_emu_misaligned()++;
    p[0] = v.x;
    p[1] = v.y;
#endif
}

/* 16-byte load through the read-only data cache (data constant for the
 * kernel's lifetime: twiddles). */
TSAFE_HD ulonglong2 ts_ldg16(const uint64_t *p)
{
#if defined(__CUDA_ARCH__)
    return __ldg(reinterpret_cast<const ulonglong2 *>(p));
#else
    return ts_ld16(p);
#endif
}

TSAFE_HD uint64_t ts_add_mod(uint64_t a, uint64_t b, uint64_t q)
{
    uint64_t s = a + b;
    return s >= q ? s - q : s;
}

TSAFE_HD uint64_t ts_sub_mod(uint64_t a, uint64_t b, uint64_t q)
{
    return a >= b ? a - b : a + q - b;
}

/* x * w mod q in [0, 2q) for any x < 2^64, wp = floor(w 2^64 / q), w < q. */
TSAFE_HD uint64_t ts_mul_shoup_lazy(uint64_t x, uint64_t w, uint64_t wp,
                                    uint64_t q)
{
    return x * w - ts_mulhi(x, wp) * q;
}

TSAFE_HD uint64_t ts_mul_shoup(uint64_t x, uint64_t w, uint64_t wp, uint64_t q)
{
    uint64_t r = ts_mul_shoup_lazy(x, w, wp, q);
    return r >= q ? r - q : r;
}

/* Barrett reduction of x = hi 2^64 + lo < q 2^64 with mu = floor(2^128/q):
 * the quotient estimate floor(x mu / 2^128) is at most 2 below the true
 * quotient, so the remainder lies in [0, 3q) and two conditional
 * subtractions finish. Computes the estimate exactly (all four partial
 * products). */
TSAFE_HD uint64_t ts_reduce_128(uint64_t hi, uint64_t lo,
                                const tsafe_cuda_prime &p)
{
    uint64_t c0 = ts_mulhi(lo, p.ratio_lo);
    uint64_t m1_lo = lo * p.ratio_hi, m1_hi = ts_mulhi(lo, p.ratio_hi);
    uint64_t m2_lo = hi * p.ratio_lo, m2_hi = ts_mulhi(hi, p.ratio_lo);
    uint64_t s = c0 + m1_lo;
    uint64_t carry = s < c0;
    uint64_t s2 = s + m2_lo;
    carry += s2 < s;
    uint64_t qe = hi * p.ratio_hi + m1_hi + m2_hi + carry;
    uint64_t r = lo - qe * p.q;
    if (r >= p.q)
        r -= p.q;
    if (r >= p.q)
        r -= p.q;
    return r;
}

TSAFE_HD uint64_t ts_mul_mod(uint64_t a, uint64_t b, const tsafe_cuda_prime &p)
{
    return ts_reduce_128(ts_mulhi(a, b), a * b, p);
}

/* x mod q for any 64-bit x. */
TSAFE_HD uint64_t ts_reduce_64(uint64_t x, const tsafe_cuda_prime &p)
{
    return ts_reduce_128(0, x, p);
}

#endif
