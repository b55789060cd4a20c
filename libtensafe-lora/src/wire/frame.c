/* Transport frames (frame.h): header and ERROR bodies. */
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "wire.h"

const char *tsafe_frame_kind_name(int k)
{
    static const char *const n[] = {"?",     "HELLO",  "REQUEST", "RESPONSE",  "UPRIME",
                                    "DELTA", "BYE",    "ERROR",   "SHELLO",    "QUERY",
                                    "RESPONSE1", "SHARE", "FINAL", "SELECT"};
    return k >= 1 && k <= TSAFE_FRAME_LAST ? n[k] : "unknown";
}

void tsafe_frame_header_put(uint8_t h[TSAFE_FRAME_HEADER], int kind, uint32_t len)
{
    memcpy(h, "TSNP", 4);
    h[4] = 1;
    h[5] = (uint8_t)kind;
    h[6] = h[7] = 0;
    tsafe_store_le32(h + 8, len);
}

tsafe_status tsafe_frame_header_get(const uint8_t h[TSAFE_FRAME_HEADER], uint32_t max,
                                    int *kind, uint32_t *len, char *what, size_t cap)
{
    if (memcmp(h, "TSNP", 4) || h[6] || h[7]) {
        snprintf(what, cap, "peer does not speak the tensafe protocol");
        return TSAFE_E_FORMAT;
    }
    if (h[4] != 1) {
        snprintf(what, cap, "peer speaks framing version %u, not 1", h[4]);
        return TSAFE_E_VERSION;
    }
    if (h[5] < 1 || h[5] > TSAFE_FRAME_LAST) {
        snprintf(what, cap, "unknown message kind %u", h[5]);
        return TSAFE_E_FORMAT;
    }
    uint32_t n = tsafe_load_le32(h + 8);
    if (n > max) {
        snprintf(what, cap, "%s message of %u bytes is above the %u-byte cap",
                 tsafe_frame_kind_name(h[5]), n, max);
        return TSAFE_E_RANGE;
    }
    *kind = h[5];
    *len = n;
    return TSAFE_OK;
}

size_t tsafe_frame_error_put(uint8_t *out, tsafe_status st, const char *msg)
{
    size_t n = strlen(msg);
    if (n > TSAFE_FRAME_ERROR_TEXT)
        n = TSAFE_FRAME_ERROR_TEXT;
    tsafe_store_le32(out, (uint32_t)(int32_t)st);
    memcpy(out + 4, msg, n);
    return 4 + n;
}

tsafe_status tsafe_frame_error_get(const uint8_t *b, size_t n, char *what, size_t cap)
{
    if (n < 4) {
        snprintf(what, cap, "peer sent a malformed error message");
        return TSAFE_E_FORMAT;
    }
    int32_t s = (int32_t)tsafe_load_le32(b);
    char msg[TSAFE_FRAME_ERROR_TEXT + 1];
    size_t m = n - 4 > TSAFE_FRAME_ERROR_TEXT ? TSAFE_FRAME_ERROR_TEXT : n - 4;
    for (size_t i = 0; i < m; i++)
        msg[i] = b[4 + i] >= 0x20 && b[4 + i] < 0x7f ? (char)b[4 + i] : '?';
    msg[m] = 0;
    snprintf(what, cap, "%s", msg);
    return s < 0 && s > -1000 ? (tsafe_status)s : TSAFE_E_FORMAT;
}
