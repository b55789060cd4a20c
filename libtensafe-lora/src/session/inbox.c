/* Frame assembly from fed bytes (session_internal.h): the header first,
 * checked before any allocation, then exactly its body. */
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"

/* The body buffer for len bytes (+1: a terminator for text). */
static tsafe_status inbox_reserve(session_inbox *in, uint32_t len)
{
    if ((size_t)len + 1 <= in->cap)
        return TSAFE_OK;
    uint8_t *b = realloc(in->body, (size_t)len + 1);
    if (!b)
        return TSAFE_E_NOMEM;
    in->body = b;
    in->cap = (size_t)len + 1;
    return TSAFE_OK;
}

tsafe_status tsafe_sess_session_inbox_feed(session_inbox *in, uint32_t max, const uint8_t *data,
                                size_t len, size_t *used, char *what, size_t cap)
{
    size_t u = 0;
    *used = 0;
    while (!in->ready && u < len) {
        if (in->hdr_got < TSAFE_FRAME_HEADER) {
            size_t k = TSAFE_FRAME_HEADER - in->hdr_got;
            k = k < len - u ? k : len - u;
            memcpy(in->hdr + in->hdr_got, data + u, k);
            in->hdr_got += k;
            u += k;
            *used = u;
            if (in->hdr_got < TSAFE_FRAME_HEADER)
                break;
            tsafe_status st = tsafe_frame_header_get(in->hdr, max, &in->kind, &in->len, what, cap);
            if (st == TSAFE_OK)
                st = inbox_reserve(in, in->len);
            if (st != TSAFE_OK)
                return st;
            in->got = 0;
        }
        size_t k = in->len - in->got;
        k = k < len - u ? k : len - u;
        if (k)
            memcpy(in->body + in->got, data + u, k);
        in->got += (uint32_t)k;
        u += k;
        *used = u;
        if (in->got == in->len) {
            in->body[in->len] = 0;
            in->ready = 1;
        }
    }
    return TSAFE_OK;
}

void tsafe_sess_session_inbox_release(session_inbox *in)
{
    if (in->ext_free) {
        in->ext_free(in->body);
        in->ext_free = NULL;
        in->body = in->spare;
        in->spare = NULL;
    }
    in->ready = 0;
    in->hdr_got = 0;
    in->len = in->got = 0;
    in->kind = 0;
}

void tsafe_sess_session_inbox_free(session_inbox *in)
{
    tsafe_sess_session_inbox_release(in);
    free(in->body);
    memset(in, 0, sizeof *in);
}
