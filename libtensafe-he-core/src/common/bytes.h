/* Little-endian byte codecs (internal to the libraries and the tool): the
 * one place that turns integers into wire and file bytes. tsafe_load_le* /
 * tsafe_store_le* read and write at a pointer the caller has checked; the
 * tsafe_reader / tsafe_writer cursors are bounds-checked: readers return 0
 * instead of reading past the end, writers never write past the capacity
 * (they poison the position instead). */
#ifndef TSAFE_BYTES_H
#define TSAFE_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void tsafe_store_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void tsafe_store_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void tsafe_store_le64(uint8_t *p, uint64_t v)
{
    /* written out so that compilers merge it into one store */
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
    p[4] = (uint8_t)(v >> 32);
    p[5] = (uint8_t)(v >> 40);
    p[6] = (uint8_t)(v >> 48);
    p[7] = (uint8_t)(v >> 56);
}

static inline void tsafe_store_f32le(uint8_t *p, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    tsafe_store_le32(p, v);
}

static inline uint16_t tsafe_load_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t tsafe_load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t tsafe_load_le64(const uint8_t *p)
{
    /* written out so that compilers merge it into one load */
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
           (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
           (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline float tsafe_load_f32le(const uint8_t *p)
{
    uint32_t v = tsafe_load_le32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

typedef struct {
    uint8_t *buf;
    size_t cap;
    size_t pos;
} tsafe_writer;

typedef struct {
    const uint8_t *buf;
    size_t len;
    size_t pos;
} tsafe_reader;

static inline void tsafe_put_bytes(tsafe_writer *w, const void *src, size_t n)
{
    if (w->pos > w->cap || n > w->cap - w->pos) {
        w->pos = w->cap + 1; /* poison: caller sees pos > cap */
        return;
    }
    memcpy(w->buf + w->pos, src, n);
    w->pos += n;
}

static inline void tsafe_put_u8(tsafe_writer *w, uint8_t v)
{
    tsafe_put_bytes(w, &v, 1);
}

static inline void tsafe_put_u32(tsafe_writer *w, uint32_t v)
{
    uint8_t b[4];
    tsafe_store_le32(b, v);
    tsafe_put_bytes(w, b, 4);
}

static inline void tsafe_put_u64(tsafe_writer *w, uint64_t v)
{
    uint8_t b[8];
    tsafe_store_le64(b, v);
    tsafe_put_bytes(w, b, 8);
}

static inline void tsafe_put_f64(tsafe_writer *w, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    tsafe_put_u64(w, v);
}

static inline int tsafe_get_bytes(tsafe_reader *r, void *dst, size_t n)
{
    if (r->pos > r->len || n > r->len - r->pos)
        return 0;
    memcpy(dst, r->buf + r->pos, n);
    r->pos += n;
    return 1;
}

static inline int tsafe_get_u8(tsafe_reader *r, uint8_t *v)
{
    return tsafe_get_bytes(r, v, 1);
}

static inline int tsafe_get_u32(tsafe_reader *r, uint32_t *v)
{
    uint8_t b[4];
    if (!tsafe_get_bytes(r, b, 4))
        return 0;
    *v = tsafe_load_le32(b);
    return 1;
}

static inline int tsafe_get_u64(tsafe_reader *r, uint64_t *v)
{
    uint8_t b[8];
    if (!tsafe_get_bytes(r, b, 8))
        return 0;
    *v = tsafe_load_le64(b);
    return 1;
}

static inline int tsafe_get_f64(tsafe_reader *r, double *d)
{
    uint64_t v;
    if (!tsafe_get_u64(r, &v))
        return 0;
    memcpy(d, &v, 8);
    return 1;
}

#endif
