/* Polynomial storage (internal): 64-byte aligned, so that a 512-bit load
 * of the AVX-512 kernels never splits across two cache lines (malloc
 * returns 16-byte alignment; measured 5 % on the IFMA products of the
 * sealed server). Zeroed; release with free(). */
#ifndef TSAFE_ALLOC_H
#define TSAFE_ALLOC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline void *tsafe_calloc_aligned(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    size_t bytes = count * size;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

#endif
