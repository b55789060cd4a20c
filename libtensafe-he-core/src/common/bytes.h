/* Bounds-checked little-endian byte readers and writers (internal). Readers
 * return 0 instead of reading past the end. Writers assume the caller has
 * checked capacity (they still never write past it). */
#ifndef TSAFE_BYTES_H
#define TSAFE_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    tsafe_put_bytes(w, b, 4);
}

static inline void tsafe_put_u64(tsafe_writer *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
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
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
    return 1;
}

static inline int tsafe_get_u64(tsafe_reader *r, uint64_t *v)
{
    uint8_t b[8];
    if (!tsafe_get_bytes(r, b, 8))
        return 0;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = (x << 8) | b[i];
    *v = x;
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
