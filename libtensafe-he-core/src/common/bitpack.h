/* Bit packing of reduced residues (internal). */
#ifndef TSAFE_BITPACK_H
#define TSAFE_BITPACK_H

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"
#include "tensafe/status.h"

/* Write n values of `bits` bits each, LSB first, padded to a byte with zero
 * bits. Poisons w (pos > cap) when the packed size does not fit. */
void tsafe_pack_bits(tsafe_writer *w, const uint64_t *v, size_t n,
                     uint32_t bits);
/* Read n values; TSAFE_E_TRUNCATED when short, TSAFE_E_FORMAT for a value
 * >= q or nonzero padding bits. */
tsafe_status tsafe_unpack_bits(tsafe_reader *r, uint64_t *v, size_t n,
                               uint32_t bits, uint64_t q);

/* The AVX-512 VBMI group loops (bitpack_avx512.c), for 8 <= bits <= 57 and
 * only when tsafe_cpu_has_avx512_sampling(): whole groups of 8 values
 * (`bits` bytes each, so a group starts byte-aligned); they return how
 * many values they did, the caller finishes the rest. Unpack stops while
 * a group's 64-byte load would pass len and sets *bad for a value >= q. */
size_t tsafe_unpack_avx512(const uint8_t *p, size_t len, uint64_t *v, size_t n,
                           uint32_t bits, uint64_t q, int *bad);
size_t tsafe_pack_avx512(uint8_t *out, const uint64_t *v, size_t n, uint32_t bits);

#endif
