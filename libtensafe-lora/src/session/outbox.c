/* Frames queued for the host to send (session_internal.h). A frame's
 * library message is sent from where the library made it (no copy); the
 * 12-byte header and any v3 prefix go before it. */
#include <string.h>

#include "session_internal.h"

tsafe_status tsafe_sess_session_outbox_push(session_outbox *o, int kind, const uint8_t *prefix,
                                 size_t prefix_len, uint8_t *body, size_t body_len,
                                 void (*free_body)(uint8_t *))
{
    outbox_frame *f = &o->slot[(o->first + o->count) % OUTBOX_SLOTS];
    if (o->count == OUTBOX_SLOTS || prefix_len > sizeof f->head - TSAFE_FRAME_HEADER ||
        prefix_len + body_len > TSAFE_FRAME_MAX) {
        if (free_body)
            free_body(body);
        return o->count == OUTBOX_SLOTS ? TSAFE_E_STATE : TSAFE_E_RANGE;
    }
    tsafe_frame_header_put(f->head, kind, (uint32_t)(prefix_len + body_len));
    if (prefix_len)
        memcpy(f->head + TSAFE_FRAME_HEADER, prefix, prefix_len);
    f->head_len = TSAFE_FRAME_HEADER + prefix_len;
    f->body = body;
    f->body_len = body_len;
    f->free_body = free_body;
    f->off = 0;
    o->count++;
    return TSAFE_OK;
}

void tsafe_sess_session_outbox_error(session_outbox *o, tsafe_status st, const char *msg)
{
    uint8_t b[4 + TSAFE_FRAME_ERROR_TEXT];
    size_t n = tsafe_frame_error_put(b, st, msg);
    (void)tsafe_sess_session_outbox_push(o, TSAFE_FRAME_ERROR, b, n, NULL, 0, NULL);
}

void tsafe_sess_session_outbox_peek(const session_outbox *o, const uint8_t **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    if (!o->count)
        return;
    const outbox_frame *f = &o->slot[o->first];
    if (f->off < f->head_len) {
        *data = f->head + f->off;
        *len = f->head_len - f->off;
    } else {
        *data = f->body + (f->off - f->head_len);
        *len = f->head_len + f->body_len - f->off;
    }
}

static void frame_drop(outbox_frame *f)
{
    if (f->free_body)
        f->free_body(f->body);
    f->body = NULL;
    f->free_body = NULL;
}

void tsafe_sess_session_outbox_sent(session_outbox *o, size_t n)
{
    while (n && o->count) {
        outbox_frame *f = &o->slot[o->first];
        size_t left = f->head_len + f->body_len - f->off;
        size_t k = n < left ? n : left;
        f->off += k;
        n -= k;
        if (o->bytes_out)
            *o->bytes_out += k;
        if (f->off == f->head_len + f->body_len) {
            frame_drop(f);
            o->first = (o->first + 1) % OUTBOX_SLOTS;
            o->count--;
        }
    }
}

int tsafe_sess_session_outbox_empty(const session_outbox *o) { return o->count == 0; }

void tsafe_sess_session_outbox_free(session_outbox *o)
{
    while (o->count) {
        frame_drop(&o->slot[o->first]);
        o->first = (o->first + 1) % OUTBOX_SLOTS;
        o->count--;
    }
}
