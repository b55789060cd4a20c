/* Device-memory pool of the CUDA backend (internal). Large slabs come from a
 * slab allocator callback (cudaMalloc in the backend, malloc in tests);
 * buffers are carved out of them first-fit, 256-byte aligned, and returned
 * with coalescing. Slabs are released only when the pool is destroyed, so
 * steady-state buffer traffic never reaches the driver.
 *
 * Plain host bookkeeping: not thread-safe (a backend belongs to one thread
 * at a time). Stream ordering makes reuse safe: the backend runs all work
 * on one stream, so memory freed here is reused only by later work. */
#ifndef TSAFE_CUDA_POOL_H
#define TSAFE_CUDA_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_CUDA_POOL_ALIGN 256u

/* Returns TSAFE_OK and *ptr, or an error status (message set by callee). */
typedef tsafe_status (*tsafe_cuda_slab_alloc_fn)(void *user, size_t bytes,
                                                 void **ptr);
typedef void (*tsafe_cuda_slab_free_fn)(void *user, void *ptr);

typedef struct tsafe_cuda_range {
    uintptr_t base;
    size_t size;
} tsafe_cuda_range;

typedef struct tsafe_cuda_slab {
    uintptr_t base;
    size_t size;
    tsafe_cuda_range *free_list; /* sorted by base, coalesced */
    size_t n_free, cap_free;
} tsafe_cuda_slab;

typedef struct tsafe_cuda_pool {
    tsafe_cuda_slab_alloc_fn slab_alloc;
    tsafe_cuda_slab_free_fn slab_free;
    void *user;
    size_t min_slab;           /* smallest slab to request */
    tsafe_cuda_slab *slabs;
    size_t n_slabs, cap_slabs;
    tsafe_cuda_range *live;    /* live allocations (base, size), unsorted */
    size_t n_live, cap_live;
    size_t reserved;           /* bytes in slabs */
    size_t in_use;             /* bytes handed out */
} tsafe_cuda_pool;

/* Set up the pool and reserve `initial` bytes (0 = nothing yet). */
tsafe_status tsafe_cuda_pool_init(tsafe_cuda_pool *p,
                                  tsafe_cuda_slab_alloc_fn a,
                                  tsafe_cuda_slab_free_fn f, void *user,
                                  size_t min_slab, size_t initial);
/* Carve `bytes` (> 0). allow_grow = 0 refuses to add a slab
 * (TSAFE_E_STATE), e.g. while a graph is being captured. */
tsafe_status tsafe_cuda_pool_alloc(tsafe_cuda_pool *p, size_t bytes,
                                   int allow_grow, void **out);
/* Return a pointer obtained from tsafe_cuda_pool_alloc; TSAFE_E_ARG for an
 * unknown pointer (nothing changes then). NULL is a no-op. */
tsafe_status tsafe_cuda_pool_free(tsafe_cuda_pool *p, void *ptr);
/* Release every slab (outstanding allocations become invalid). */
void tsafe_cuda_pool_destroy(tsafe_cuda_pool *p);

#ifdef __cplusplus
}
#endif
#endif
