/* AVX-512 (VBMI + VPOPCNTDQ) versions of the two tight samplers of prng.c:
 * eight candidates per step, the same values in the same order and the same
 * stream bytes consumed as the scalar loops (test_prng compares them on
 * every width). Only called after tsafe_cpu_has_avx512_sampling() said yes;
 * the functions carry their own target attribute, so the file builds with
 * the library's baseline flags. Why: on the sealed path the two samplers
 * took 12 % of a site's time (perf, d = 2048, r = 32), one bit-twiddled
 * candidate at a time. */
#include "prng.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512vpopcntdq,popcnt")))

/* Byte permutation that spreads 8 candidates of nb bytes (packed) into 8
 * little-endian qwords; the mask zeroes the bytes past nb in each qword. */
TARGET static void spread_index(unsigned nb, __m512i *idx, __mmask64 *keep)
{
    uint8_t ix[64];
    uint64_t m = 0;
    for (unsigned j = 0; j < 8; j++)
        for (unsigned i = 0; i < 8; i++) {
            ix[8 * j + i] = (uint8_t)(i < nb ? j * nb + i : 0);
            if (i < nb)
                m |= 1ull << (8 * j + i);
        }
    *idx = _mm512_loadu_si512(ix);
    *keep = m;
}

TARGET size_t tsafe_uniform_tight_avx512(const uint8_t *src, size_t avail, uint64_t q,
                                         unsigned nb, uint64_t *out, size_t n,
                                         size_t *used)
{
    __m512i idx, vq = _mm512_set1_epi64((long long)q);
    __mmask64 keep;
    spread_index(nb, &idx, &keep);
    int bits = 64 - __builtin_clzll(q);
    __m512i vmask = _mm512_set1_epi64(bits == 64 ? -1ll : (long long)((1ull << bits) - 1));
    __mmask64 load = nb == 8 ? ~0ull : (1ull << (8 * nb)) - 1;
    size_t got = 0, pos = 0;
    /* at most 8 accepted per step: stop while 8 more could overshoot n */
    while (n - got >= 8 && avail - pos >= 8 * (size_t)nb) {
        __m512i raw = _mm512_maskz_loadu_epi8(load, src + pos);
        __m512i v = _mm512_and_si512(_mm512_maskz_permutexvar_epi8(keep, idx, raw), vmask);
        __mmask8 ok = _mm512_cmplt_epu64_mask(v, vq);
        /* compress in a register, then a plain store of all eight lanes
         * (the loop's bound leaves room): the memory form of vpcompressq is
         * microcoded and slow on some cores (AMD Zen 4). The count goes
         * through kmov and a 32-bit popcnt: GCC 12 under -fsanitize=thread
         * spilled the 8-bit mask and counted stale high bits otherwise. */
        size_t k = (size_t)_mm_popcnt_u32(_cvtmask8_u32(ok));
        _mm512_storeu_si512((void *)(out + got), _mm512_maskz_compress_epi64(ok, v));
        got += k;
        pos += 8 * (size_t)nb;
    }
    *used = pos;
    return got;
}

TARGET size_t tsafe_cbd21_avx512(const uint8_t *src, size_t avail, int8_t *out, size_t n)
{
    __m512i idx;
    __mmask64 keep;
    spread_index(6, &idx, &keep);
    const __m512i m21 = _mm512_set1_epi64(0x1FFFFF);
    size_t done = 0;
    while (n - done >= 8 && avail - 6 * done >= 48) {
        __m512i raw = _mm512_maskz_loadu_epi8((1ull << 48) - 1, src + 6 * done);
        __m512i v = _mm512_maskz_permutexvar_epi8(keep, idx, raw);
        __m512i lo = _mm512_popcnt_epi64(_mm512_and_si512(v, m21));
        __m512i hi = _mm512_popcnt_epi64(_mm512_and_si512(_mm512_srli_epi64(v, 21), m21));
        __m128i b = _mm512_cvtepi64_epi8(_mm512_sub_epi64(lo, hi));
        _mm_storel_epi64((__m128i *)(void *)(out + done), b);
        done += 8;
    }
    return done;
}

#else

size_t tsafe_uniform_tight_avx512(const uint8_t *src, size_t avail, uint64_t q,
                                  unsigned nb, uint64_t *out, size_t n, size_t *used)
{
    (void)src; (void)avail; (void)q; (void)nb; (void)out; (void)n;
    *used = 0;
    return 0;
}

size_t tsafe_cbd21_avx512(const uint8_t *src, size_t avail, int8_t *out, size_t n)
{
    (void)src; (void)avail; (void)out; (void)n;
    return 0;
}

#endif
