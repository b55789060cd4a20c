/* LSB-first bit packing of residues (shared by the CKKS and BFV
 * serializers). */
#include "bitpack.h"

static inline void store_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* LSB-first bit stream, 64 bits at a time; the caller reserved the exact
 * limb size (checked against the capacity before any write). */
void tsafe_pack_bits(tsafe_writer *w, const uint64_t *v, size_t n,
                      uint32_t bits)
{
    size_t len = (n * bits + 7) / 8;
    if (w->pos > w->cap || len > w->cap - w->pos) {
        w->pos = w->cap + 1;
        return;
    }
    uint8_t *out = w->buf + w->pos;
    unsigned __int128 acc = 0;
    uint32_t have = 0;
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        acc |= (unsigned __int128)v[k] << have;
        have += bits;
        if (have >= 64) {
            store_le64(out + o, (uint64_t)acc);
            o += 8;
            acc >>= 64;
            have -= 64;
        }
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
    const uint8_t *p = r->buf + r->pos;
    unsigned __int128 acc = 0;
    uint32_t have = 0;
    size_t byte = 0;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    for (size_t k = 0; k < n; k++) {
        if (have < bits) {
            if (len - byte >= 8) {
                acc |= (unsigned __int128)load_le64(p + byte) << have;
                byte += 8;
                have += 64;
            } else {
                while (have < bits) {
                    acc |= (unsigned __int128)p[byte++] << have;
                    have += 8;
                }
            }
        }
        uint64_t x = (uint64_t)acc & mask;
        acc >>= bits;
        have -= bits;
        if (x >= q)
            return TSAFE_E_FORMAT;
        v[k] = x;
    }
    while (byte < len) /* trailing padding byte(s) not yet loaded */
        acc |= (unsigned __int128)p[byte++] << have, have += 8;
    if (acc != 0) /* padding bits must be zero */
        return TSAFE_E_FORMAT;
    r->pos += len;
    return TSAFE_OK;
}

