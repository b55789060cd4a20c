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

#endif
