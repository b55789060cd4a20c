/* LSB-first bit packing of residues (shared by the CKKS and BFV
 * serializers). */
#include "bitpack.h"

#include <string.h>

#include "cpu.h"

/* widths the AVX-512 group loops take (a lane's value plus its shift within
 * a byte fits 64 bits; adjacent lanes share at most one byte) */
static int vector_width(uint32_t bits)
{
    return bits >= 8 && bits <= 57 && tsafe_cpu_has_avx512_sampling();
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TSAFE_BITPACK_WORDS 1
#else
#define TSAFE_BITPACK_WORDS 0
#endif

/* Reading widths up to 57 bits (every BFV limb, the CKKS primes below 58
 * bits) goes word-wise: value k sits at bit k*bits, so an unaligned 8-byte
 * window at byte (k*bits)/8 holds all of it (bits + 7 <= 64); no
 * data-dependent branch. The last values, whose window would pass the end,
 * go byte-wise. (Writing stays a stream: overlapping read-modify-write
 * windows stall on store forwarding, measured 2x slower.) Same values as
 * the stream below; tests/test_bitpack.c checks both against a bit-by-bit
 * reference. */
static tsafe_status unpack_words(const uint8_t *p, size_t len, uint64_t *v, size_t n,
                                 uint32_t bits, uint64_t mask, uint64_t q)
{
    size_t k = 0;
    if (vector_width(bits)) {
        int bad;
        k = tsafe_unpack_avx512(p, len, v, n, bits, q, &bad);
        if (bad)
            return TSAFE_E_FORMAT;
    }
    for (; k < n; k++) {
        size_t off = k * bits, byte = off >> 3;
        if (byte + 8 > len)
            break;
        uint64_t w;
        memcpy(&w, p + byte, 8);
        uint64_t x = (w >> (off & 7)) & mask;
        if (x >= q)
            return TSAFE_E_FORMAT;
        v[k] = x;
    }
    for (; k < n; k++) {
        size_t off = k * bits;
        uint64_t x = 0;
        for (uint32_t b = 0; b < bits;) {
            size_t at = off + b;
            unsigned sh = (unsigned)(at & 7);
            x |= (uint64_t)(p[at >> 3] >> sh) << b;
            b += 8 - sh;
        }
        x &= mask;
        if (x >= q)
            return TSAFE_E_FORMAT;
        v[k] = x;
    }
    /* padding bits (the top of the last byte) must be zero */
    unsigned used = (unsigned)((n * bits) & 7);
    if (used && len && (p[len - 1] >> used) != 0)
        return TSAFE_E_FORMAT;
    return TSAFE_OK;
}

/* LSB-first bit stream through a 64-bit accumulator (no 128-bit shifts:
 * this runs for every ciphertext on the wire); the caller reserved the
 * exact limb size (checked against the capacity before any write). */
void tsafe_pack_bits(tsafe_writer *w, const uint64_t *v, size_t n,
                     uint32_t bits)
{
    size_t len = (n * bits + 7) / 8;
    if (w->pos > w->cap || len > w->cap - w->pos) {
        w->pos = w->cap + 1;
        return;
    }
    uint8_t *out = w->buf + w->pos;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t acc = 0;
    uint32_t have = 0; /* bits held in acc, < 64 */
    size_t k = vector_width(bits) ? tsafe_pack_avx512(out, v, n, bits) : 0;
    size_t o = k / 8 * bits; /* whole groups of 8: byte-aligned */
    for (; k < n; k++) {
        uint64_t x = v[k] & mask;
        acc |= x << have;
        uint32_t next = have + bits;
        if (next >= 64) {
            tsafe_store_le64(out + o, acc);
            o += 8;
            acc = have ? x >> (64 - have) : 0;
            next -= 64;
        }
        have = next;
    }
    while (have > 0) {
        out[o++] = (uint8_t)acc;
        acc >>= 8;
        have = have > 8 ? have - 8 : 0;
    }
    w->pos += len;
}

tsafe_status tsafe_unpack_bits(tsafe_reader *r, uint64_t *v, size_t n,
                               uint32_t bits, uint64_t q)
{
    size_t len = (n * bits + 7) / 8;
    if (r->pos > r->len || len > r->len - r->pos)
        return TSAFE_E_TRUNCATED;
    if (bits == 0 || bits > 64)
        return TSAFE_E_FORMAT;
    const uint8_t *p = r->buf + r->pos;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (TSAFE_BITPACK_WORDS && bits <= 57) {
        tsafe_status st = unpack_words(p, len, v, n, bits, mask, q);
        if (st == TSAFE_OK)
            r->pos += len;
        return st;
    }
    uint64_t acc = 0;
    uint32_t have = 0; /* bits held in acc, < 64 */
    size_t byte = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t x;
        if (have >= bits) {
            x = acc & mask;
            acc = bits == 64 ? 0 : acc >> bits;
            have -= bits;
        } else {
            uint64_t word = 0;
            uint32_t got = 0;
            if (len - byte >= 8) {
                word = tsafe_load_le64(p + byte);
                byte += 8;
                got = 64;
            } else {
                while (byte < len)
                    word |= (uint64_t)p[byte++] << got, got += 8;
            }
            uint32_t used = bits - have; /* <= got: len covers n * bits */
            x = (acc | (have ? word << have : word)) & mask;
            acc = used == 64 ? 0 : word >> used;
            have = got - used;
        }
        if (x >= q)
            return TSAFE_E_FORMAT;
        v[k] = x;
    }
    if (acc != 0) /* padding bits must be zero */
        return TSAFE_E_FORMAT;
    while (byte < len)
        if (p[byte++] != 0)
            return TSAFE_E_FORMAT;
    r->pos += len;
    return TSAFE_OK;
}
