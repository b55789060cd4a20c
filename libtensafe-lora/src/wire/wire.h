/* The wire module (internal): what both two-party protocols put on the
 * wire and every session needs. Message framing and the growable
 * message buffers here (codec.c), the transport frames of the sessions
 * (frame.c, frame.h). Every integer goes through the internal common's
 * little-endian codec (bytes.h: tsafe_store_le32, tsafe_load_le32 ...);
 * timings use its clock (clock.h). Formats in docs/PROTOCOL.md.
 *
 * Library messages:
 *   header: "TSLR" | version u8 (=1) | kind u8 | reserved u16 (=0)
 *   request  (kind 1): u32 len | ciphertext bytes
 *   response (kind 2): u32 n_sites | per site: u32 rank | u32 n_batches |
 *                      per batch: u32 len | ciphertext bytes
 *   u'       (kind 3): u32 n_sites | per site: u32 rank | rank x f32
 * All little-endian; a message must be consumed exactly. */
#ifndef TSAFE_LORA_WIRE_H
#define TSAFE_LORA_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"
#include "bytes.h"

enum {
    TSAFE_MSG_REQUEST = 1, TSAFE_MSG_RESPONSE = 2, TSAFE_MSG_U = 3,
    /* sealed protocol (docs/PROTOCOL.md) */
    TSAFE_MSG_SEALED_HELLO = 10, TSAFE_MSG_SEALED_QUERY = 11,
    TSAFE_MSG_SEALED_RESPONSE1 = 12, TSAFE_MSG_SEALED_SHARE = 13,
    TSAFE_MSG_SEALED_SHARE_CT = 14, TSAFE_MSG_SEALED_DELTA = 15,
    TSAFE_MSG_SEALED_RESPONSE2 = 16
};
#define TSAFE_MSG_HEADER 8
#define TSAFE_MSG_MAX_SITES 4096u

/* An output buffer: growable (malloc'd, `fixed` 0), or the caller's
 * memory of `cap` bytes (`fixed` 1: never reallocated). When a reserve
 * cannot be met, `failed` is set and later writes do nothing. */
typedef struct {
    uint8_t *buf;
    size_t len, cap;
    int failed;
    int fixed;
} tsafe_wbuf;

void tsafe_wbuf_header(tsafe_wbuf *w, uint8_t kind);
void tsafe_wbuf_u32(tsafe_wbuf *w, uint32_t v);
void tsafe_wbuf_f32(tsafe_wbuf *w, float v);
/* Allocate cap bytes up front for a growable buffer that will hold about
 * that much (megabyte messages grown by doubling copied themselves a dozen
 * times and faulted fresh pages in every token). A failed allocation is
 * not an error: writes then grow the buffer as usual. */
void tsafe_wbuf_presize(tsafe_wbuf *w, size_t cap);
/* Reserve n bytes and return where to write them (NULL on failure). */
uint8_t *tsafe_wbuf_reserve(tsafe_wbuf *w, size_t n);
void tsafe_wbuf_u64(tsafe_wbuf *w, uint64_t v);
void tsafe_wbuf_f64(tsafe_wbuf *w, double v);
void tsafe_wbuf_bytes(tsafe_wbuf *w, const void *src, size_t n);

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
} tsafe_rbuf;

tsafe_status tsafe_rbuf_header(tsafe_rbuf *r, uint8_t kind);
int tsafe_rbuf_u32(tsafe_rbuf *r, uint32_t *v);
int tsafe_rbuf_f32(tsafe_rbuf *r, float *v);
int tsafe_rbuf_u64(tsafe_rbuf *r, uint64_t *v);
int tsafe_rbuf_f64(tsafe_rbuf *r, double *v);
/* Borrow n bytes (0 when fewer remain). */
const uint8_t *tsafe_rbuf_take(tsafe_rbuf *r, size_t n);

#endif
