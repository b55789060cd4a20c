/* First-fit slab pool for device memory; see pool.h. */
#include "pool.h"

#include <stdlib.h>
#include <string.h>

static int grow_array(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    if (nc > SIZE_MAX / elem)
        return 0;
    void *q = realloc(*arr, nc * elem);
    if (!q)
        return 0;
    *arr = q;
    *cap = nc;
    return 1;
}

static int round_up(size_t bytes, size_t *out)
{
    if (bytes > SIZE_MAX - (TSAFE_CUDA_POOL_ALIGN - 1))
        return 0;
    *out = (bytes + TSAFE_CUDA_POOL_ALIGN - 1) & ~(size_t)(TSAFE_CUDA_POOL_ALIGN - 1);
    return 1;
}

static tsafe_status add_slab(tsafe_cuda_pool *p, size_t bytes)
{
    if (!grow_array((void **)&p->slabs, &p->cap_slabs, p->n_slabs + 1,
                    sizeof(tsafe_cuda_slab)))
        return TSAFE_E_NOMEM;
    tsafe_cuda_slab s;
    memset(&s, 0, sizeof(s));
    if (!grow_array((void **)&s.free_list, &s.cap_free, 1,
                    sizeof(tsafe_cuda_range)))
        return TSAFE_E_NOMEM;
    void *mem = NULL;
    tsafe_status st = p->slab_alloc(p->user, bytes, &mem);
    if (st != TSAFE_OK) {
        free(s.free_list);
        return st;
    }
    s.base = (uintptr_t)mem;
    s.size = bytes;
    s.free_list[0].base = s.base;
    s.free_list[0].size = bytes;
    s.n_free = 1;
    p->slabs[p->n_slabs++] = s;
    p->reserved += bytes;
    return TSAFE_OK;
}

tsafe_status tsafe_cuda_pool_init(tsafe_cuda_pool *p,
                                  tsafe_cuda_slab_alloc_fn a,
                                  tsafe_cuda_slab_free_fn f, void *user,
                                  size_t min_slab, size_t initial)
{
    if (!p || !a || !f)
        return TSAFE_E_NULL;
    memset(p, 0, sizeof(*p));
    p->slab_alloc = a;
    p->slab_free = f;
    p->user = user;
    if (!round_up(min_slab ? min_slab : TSAFE_CUDA_POOL_ALIGN, &p->min_slab))
        return TSAFE_E_SIZE_OVERFLOW;
    if (initial) {
        size_t b;
        if (!round_up(initial, &b))
            return TSAFE_E_SIZE_OVERFLOW;
        return add_slab(p, b);
    }
    return TSAFE_OK;
}

/* First fit in slab s; returns 1 and *out on success. */
static int take(tsafe_cuda_slab *s, size_t bytes, uintptr_t *out)
{
    for (size_t i = 0; i < s->n_free; i++) {
        tsafe_cuda_range *r = &s->free_list[i];
        if (r->size < bytes)
            continue;
        *out = r->base;
        r->base += bytes;
        r->size -= bytes;
        if (r->size == 0) {
            memmove(r, r + 1, (s->n_free - i - 1) * sizeof(*r));
            s->n_free--;
        }
        return 1;
    }
    return 0;
}

tsafe_status tsafe_cuda_pool_alloc(tsafe_cuda_pool *p, size_t bytes,
                                   int allow_grow, void **out)
{
    if (!p || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    size_t need;
    if (bytes == 0)
        return TSAFE_E_ARG;
    if (!round_up(bytes, &need))
        return TSAFE_E_SIZE_OVERFLOW;
    /* reserve bookkeeping first so that no failure can leak a range */
    if (!grow_array((void **)&p->live, &p->cap_live, p->n_live + 1,
                    sizeof(tsafe_cuda_range)))
        return TSAFE_E_NOMEM;
    uintptr_t addr = 0;
    int found = 0;
    for (size_t i = 0; i < p->n_slabs && !found; i++)
        found = take(&p->slabs[i], need, &addr);
    if (!found) {
        if (!allow_grow)
            return TSAFE_E_STATE;
        /* grow geometrically so that growth stays rare */
        size_t slab = p->reserved > p->min_slab ? p->reserved : p->min_slab;
        if (slab < need)
            slab = need;
        tsafe_status st = add_slab(p, slab);
        if (st != TSAFE_OK && slab > need)
            st = add_slab(p, need); /* maybe a smaller slab still fits */
        if (st != TSAFE_OK)
            return st;
        found = take(&p->slabs[p->n_slabs - 1], need, &addr);
        if (!found)
            return TSAFE_E_STATE; /* unreachable: fresh slab >= need */
    }
    p->live[p->n_live].base = addr;
    p->live[p->n_live].size = need;
    p->n_live++;
    p->in_use += need;
    *out = (void *)addr;
    return TSAFE_OK;
}

/* Insert [base, base+size) into s's sorted free list, merging neighbours. */
static int give_back(tsafe_cuda_slab *s, uintptr_t base, size_t size)
{
    size_t i = 0;
    while (i < s->n_free && s->free_list[i].base < base)
        i++;
    int merge_prev = i > 0 && s->free_list[i - 1].base +
                                      s->free_list[i - 1].size == base;
    int merge_next = i < s->n_free && base + size == s->free_list[i].base;
    if (merge_prev && merge_next) {
        s->free_list[i - 1].size += size + s->free_list[i].size;
        memmove(&s->free_list[i], &s->free_list[i + 1],
                (s->n_free - i - 1) * sizeof(tsafe_cuda_range));
        s->n_free--;
    } else if (merge_prev) {
        s->free_list[i - 1].size += size;
    } else if (merge_next) {
        s->free_list[i].base = base;
        s->free_list[i].size += size;
    } else {
        if (!grow_array((void **)&s->free_list, &s->cap_free, s->n_free + 1,
                        sizeof(tsafe_cuda_range)))
            return 0;
        memmove(&s->free_list[i + 1], &s->free_list[i],
                (s->n_free - i) * sizeof(tsafe_cuda_range));
        s->free_list[i].base = base;
        s->free_list[i].size = size;
        s->n_free++;
    }
    return 1;
}

tsafe_status tsafe_cuda_pool_free(tsafe_cuda_pool *p, void *ptr)
{
    if (!p)
        return TSAFE_E_NULL;
    if (!ptr)
        return TSAFE_OK;
    uintptr_t a = (uintptr_t)ptr;
    size_t li = 0;
    while (li < p->n_live && p->live[li].base != a)
        li++;
    if (li == p->n_live)
        return TSAFE_E_ARG;
    size_t size = p->live[li].size;
    for (size_t i = 0; i < p->n_slabs; i++) {
        tsafe_cuda_slab *s = &p->slabs[i];
        if (a < s->base || a - s->base >= s->size)
            continue;
        if (!give_back(s, a, size))
            return TSAFE_E_NOMEM; /* range stays live; caller may retry */
        p->live[li] = p->live[p->n_live - 1];
        p->n_live--;
        p->in_use -= size;
        return TSAFE_OK;
    }
    return TSAFE_E_ARG; /* unreachable: live ranges lie in slabs */
}

void tsafe_cuda_pool_destroy(tsafe_cuda_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_slabs; i++) {
        p->slab_free(p->user, (void *)p->slabs[i].base);
        free(p->slabs[i].free_list);
    }
    free(p->slabs);
    free(p->live);
    memset(p, 0, sizeof(*p));
}
