/* AVX-512 VBMI versions of the residue packer's inner loops (bitpack.c):
 * eight values of `bits` bits fill exactly `bits` bytes, so a group of
 * eight is one byte permutation and one variable shift. The same bytes and
 * values as the scalar loops (tests/test_bitpack.c checks every width
 * against a bit-by-bit reference). Why: parsing the sealed query's
 * ciphertexts and writing them took a tenth of a site's time (perf,
 * d = 2048, r = 32), one value at a time. Called only when
 * tsafe_cpu_has_avx512_sampling() (the same VBMI feature set); the
 * functions carry their own target attribute. */
#include "bitpack.h"
#include "prng.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))

/* lane i of a group: bit offset i bits, first byte i bits / 8 */
static unsigned first_byte(unsigned i, uint32_t bits) { return (i * bits) >> 3; }

TARGET size_t tsafe_unpack_avx512(const uint8_t *p, size_t len, uint64_t *v, size_t n,
                                  uint32_t bits, uint64_t q, int *bad)
{
    uint8_t ix[64];
    uint64_t sh[8];
    for (unsigned i = 0; i < 8; i++) {
        for (unsigned j = 0; j < 8; j++)
            ix[8 * i + j] = (uint8_t)(first_byte(i, bits) + j); /* <= 56 */
        sh[i] = (i * bits) & 7;
    }
    __m512i idx = _mm512_loadu_si512(ix), vsh = _mm512_loadu_si512(sh);
    __m512i vmask = _mm512_set1_epi64((long long)((1ull << bits) - 1));
    __m512i vq = _mm512_set1_epi64((long long)q);
    __mmask8 over = 0;
    size_t k = 0;
    /* a group reads 64 bytes from its first: stop before the end */
    for (; k + 8 <= n && (k / 8) * bits + 64 <= len; k += 8) {
        __m512i w = _mm512_loadu_si512(p + (k / 8) * bits);
        __m512i x = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_permutexvar_epi8(idx, w), vsh), vmask);
        over |= _mm512_cmpge_epu64_mask(x, vq);
        _mm512_storeu_si512(v + k, x);
    }
    *bad = over != 0;
    return k;
}

TARGET size_t tsafe_pack_avx512(uint8_t *out, const uint64_t *v, size_t n, uint32_t bits)
{
    /* output byte b of a group comes from at most one even and one odd
     * lane (bits >= 8): byte b - first_byte(i) of lane i, shifted left by
     * its bit offset within that byte */
    uint8_t ix[2][64] = {{0}};
    uint64_t keep[2] = {0, 0}, sh[8];
    for (unsigned i = 0; i < 8; i++) {
        sh[i] = (i * bits) & 7;
        unsigned lo = first_byte(i, bits), hi = ((i + 1) * bits - 1) >> 3;
        for (unsigned b = lo; b <= hi; b++) {
            ix[i & 1][b] = (uint8_t)(8 * i + (b - lo));
            keep[i & 1] |= 1ull << b;
        }
    }
    __m512i even = _mm512_loadu_si512(ix[0]), odd = _mm512_loadu_si512(ix[1]);
    __m512i vsh = _mm512_loadu_si512(sh);
    __m512i vmask = _mm512_set1_epi64((long long)((1ull << bits) - 1));
    __mmask64 store = bits == 64 ? ~0ull : (1ull << bits) - 1;
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512i x = _mm512_sllv_epi64(_mm512_and_si512(_mm512_loadu_si512(v + k), vmask), vsh);
        __m512i y = _mm512_or_si512(_mm512_maskz_permutexvar_epi8(keep[0], even, x),
                                    _mm512_maskz_permutexvar_epi8(keep[1], odd, x));
        _mm512_mask_storeu_epi8(out + (k / 8) * bits, store, y);
    }
    return k;
}

#else

size_t tsafe_unpack_avx512(const uint8_t *p, size_t len, uint64_t *v, size_t n,
                           uint32_t bits, uint64_t q, int *bad)
{
    (void)p, (void)len, (void)v, (void)n, (void)bits, (void)q;
    *bad = 0;
    return 0;
}

size_t tsafe_pack_avx512(uint8_t *out, const uint64_t *v, size_t n, uint32_t bits)
{
    (void)out, (void)v, (void)n, (void)bits;
    return 0;
}

#endif
