/* Signed package framing shared by create.c and open.c (hidden). The
 * normative description is docs/PACKAGE_FORMAT.md. */
#ifndef TSAFE_LORA_PACKAGE_FORMAT_H
#define TSAFE_LORA_PACKAGE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/lora_package.h"
#include "bytes.h" /* tsafe_load_le* / tsafe_store_le* for the header fields */

#define PKG_MAGIC "TSPKG\0\r\n"
#define PKG_MAGIC_BYTES 8u
#define PKG_HEADER_BYTES 24u
#define PKG_DIGEST_BYTES 32u
#define PKG_SIG_BYTES 64u
#define PKG_TRAILER_BYTES (PKG_DIGEST_BYTES + PKG_SIG_BYTES)
/* Domain separation for the signature: these bytes INCLUDING the final
 * NUL, then the 32-byte digest, form the signed message. */
#define PKG_SIG_DOMAIN "TenSafe-HE adapter package v1"
#define PKG_SIG_DOMAIN_BYTES (sizeof(PKG_SIG_DOMAIN)) /* 30, with NUL */
#define PKG_FORMAT_NAME "tensafe-adapter-package"
#define PKG_COMPRESSION "zlib"

/* Header field offsets (little-endian integers). */
#define PKG_OFF_VERSION 8u  /* u16 */
#define PKG_OFF_FLAGS 10u   /* u16, must be 0 */
#define PKG_OFF_MLEN 12u    /* u32 manifest bytes */
#define PKG_OFF_CLEN 16u    /* u64 compressed payload bytes */

/* zlib is fed at most this many bytes per call (its counters are uInt). */
#define PKG_ZCHUNK ((size_t)1 << 30)

/* Largest rank a rank_pattern entry may give (PEFT loader's cap). */
#define PKG_MAX_PATTERN_RANK 16777216.0

/* Pattern checks shared by create and open: 1 when valid. */
int tsafe_pkg_pattern_value_ok_(double v, int is_rank);
int tsafe_pkg_patterns_valid_(const tsafe_package_pattern *p, size_t n, int is_rank);

/* Digest of bytes[0..n) (BLAKE2b-256) and the signed message for it. */
void tsafe_pkg_digest_(const uint8_t *bytes, size_t n, uint8_t out[32]);
void tsafe_pkg_sig_message_(const uint8_t digest[32],
                            uint8_t msg[PKG_SIG_DOMAIN_BYTES + 32]);

#endif
