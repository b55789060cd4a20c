#include "wire.h"

#include <stdlib.h>
#include <string.h>

#define MSG_MAGIC "TSLR"
#define MSG_VERSION 1

void tsafe_wbuf_presize(tsafe_wbuf *w, size_t cap)
{
    if (w->fixed || w->failed || cap <= w->cap)
        return;
    uint8_t *nb = realloc(w->buf, cap);
    if (nb) {
        w->buf = nb;
        w->cap = cap;
    }
}

uint8_t *tsafe_wbuf_reserve(tsafe_wbuf *w, size_t n)
{
    if (w->failed)
        return NULL;
    if (n > SIZE_MAX / 2 - w->len) {
        w->failed = 1;
        return NULL;
    }
    if (w->len + n > w->cap) {
        if (w->fixed) {
            w->failed = 1;
            return NULL;
        }
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *nb = realloc(w->buf, cap);
        if (!nb) {
            w->failed = 1;
            return NULL;
        }
        w->buf = nb;
        w->cap = cap;
    }
    uint8_t *p = w->buf + w->len;
    w->len += n;
    return p;
}

void tsafe_wbuf_u32(tsafe_wbuf *w, uint32_t v)
{
    uint8_t *p = tsafe_wbuf_reserve(w, 4);
    if (p)
        tsafe_store_le32(p, v);
}

void tsafe_wbuf_f32(tsafe_wbuf *w, float f)
{
    uint8_t *p = tsafe_wbuf_reserve(w, 4);
    if (p)
        tsafe_store_f32le(p, f);
}

void tsafe_wbuf_header(tsafe_wbuf *w, uint8_t kind)
{
    uint8_t *p = tsafe_wbuf_reserve(w, TSAFE_MSG_HEADER);
    if (!p)
        return;
    memcpy(p, MSG_MAGIC, 4);
    p[4] = MSG_VERSION;
    p[5] = kind;
    p[6] = p[7] = 0;
}

const uint8_t *tsafe_rbuf_take(tsafe_rbuf *r, size_t n)
{
    if (r->pos > r->len || n > r->len - r->pos)
        return NULL;
    const uint8_t *p = r->buf + r->pos;
    r->pos += n;
    return p;
}

int tsafe_rbuf_u32(tsafe_rbuf *r, uint32_t *v)
{
    const uint8_t *p = tsafe_rbuf_take(r, 4);
    return p ? (*v = tsafe_load_le32(p), 1) : 0;
}

int tsafe_rbuf_f32(tsafe_rbuf *r, float *f)
{
    const uint8_t *p = tsafe_rbuf_take(r, 4);
    return p ? (*f = tsafe_load_f32le(p), 1) : 0;
}

tsafe_status tsafe_rbuf_header(tsafe_rbuf *r, uint8_t kind)
{
    const uint8_t *p = tsafe_rbuf_take(r, TSAFE_MSG_HEADER);
    if (!p)
        return TSAFE_E_TRUNCATED;
    if (memcmp(p, MSG_MAGIC, 4) != 0)
        return TSAFE_E_FORMAT;
    if (p[4] != MSG_VERSION)
        return TSAFE_E_VERSION;
    if (p[5] != kind)
        return TSAFE_E_KIND;
    if (p[6] || p[7])
        return TSAFE_E_FORMAT;
    return TSAFE_OK;
}

void tsafe_wbuf_u64(tsafe_wbuf *w, uint64_t v)
{
    uint8_t *p = tsafe_wbuf_reserve(w, 8);
    if (p)
        tsafe_store_le64(p, v);
}

void tsafe_wbuf_f64(tsafe_wbuf *w, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    tsafe_wbuf_u64(w, v);
}

void tsafe_wbuf_bytes(tsafe_wbuf *w, const void *src, size_t n)
{
    uint8_t *p = tsafe_wbuf_reserve(w, n);
    if (p && n)
        memcpy(p, src, n);
}

int tsafe_rbuf_u64(tsafe_rbuf *r, uint64_t *v)
{
    const uint8_t *p = tsafe_rbuf_take(r, 8);
    return p ? (*v = tsafe_load_le64(p), 1) : 0;
}

int tsafe_rbuf_f64(tsafe_rbuf *r, double *d)
{
    uint64_t v;
    int ok = tsafe_rbuf_u64(r, &v);
    if (ok)
        memcpy(d, &v, 8);
    return ok;
}
