/* Transport frames of the two-party sessions (internal; docs/PROTOCOL.md,
 * "TCP framing"): a 12-byte header
 *   "TSNP" | u8 version = 1 | u8 kind | u16 reserved = 0 | u32 length
 * then `length` bytes (at most TSAFE_FRAME_MAX). Every library message
 * travels in one frame; the session layer (../session) owns the order. */
#ifndef TSAFE_LORA_FRAME_H
#define TSAFE_LORA_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"

#define TSAFE_FRAME_HEADER 12
#define TSAFE_FRAME_MAX ((uint32_t)64 << 20)

enum {
    TSAFE_FRAME_HELLO = 1,
    TSAFE_FRAME_REQUEST,   /* plain ZeRo-MOAI */
    TSAFE_FRAME_RESPONSE,
    TSAFE_FRAME_UPRIME,
    TSAFE_FRAME_DELTA,
    TSAFE_FRAME_BYE,
    TSAFE_FRAME_ERROR,     /* i32 status, then <= 400 printable bytes */
    TSAFE_FRAME_SHELLO,    /* sealed modes */
    TSAFE_FRAME_QUERY,
    TSAFE_FRAME_RESPONSE1,
    TSAFE_FRAME_SHARE,
    TSAFE_FRAME_FINAL,
    TSAFE_FRAME_SELECT,    /* client -> server before the HELLO: an adapter id */
    TSAFE_FRAME_LAST = TSAFE_FRAME_SELECT
};
#define TSAFE_FRAME_ERROR_TEXT 400

/* "HELLO", ..., "unknown". Static storage. */
const char *tsafe_frame_kind_name(int kind);
void tsafe_frame_header_put(uint8_t h[TSAFE_FRAME_HEADER], int kind, uint32_t len);
/* Validates a received header against the cap max (<= TSAFE_FRAME_MAX):
 * TSAFE_E_FORMAT (not TSNP, reserved bits, unknown kind), TSAFE_E_VERSION,
 * TSAFE_E_RANGE (above max); what (cap bytes) says which. */
tsafe_status tsafe_frame_header_get(const uint8_t h[TSAFE_FRAME_HEADER], uint32_t max,
                                    int *kind, uint32_t *len, char *what, size_t cap);
/* An ERROR body (status, message truncated to TSAFE_FRAME_ERROR_TEXT) into
 * out (4 + TSAFE_FRAME_ERROR_TEXT bytes); returns its length. */
size_t tsafe_frame_error_put(uint8_t *out, tsafe_status st, const char *msg);
/* A received ERROR body: the peer's status (TSAFE_E_FORMAT when it is no
 * status) and its message, non-printable bytes replaced, into what. */
tsafe_status tsafe_frame_error_get(const uint8_t *b, size_t n, char *what, size_t cap);

#endif
