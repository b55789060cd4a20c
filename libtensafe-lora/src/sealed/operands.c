/* The server's cache of site plaintexts as backend operand buffers. */
#include <stdlib.h>
#include <string.h>

#include "sealed_internal.h"
#include "tsafe_check.h"

static void entry_clear(tsafe_sealed_operands *e)
{
    for (size_t i = 0; e->o1 && i < e->n1; i++)
        tsafe_buffer_free(e->o1[i]);
    for (size_t i = 0; e->o2 && i < e->n2; i++)
        tsafe_buffer_free(e->o2[i]);
    free(e->o1);
    free(e->o2);
    memset(e, 0, sizeof *e);
}

void tsafe_sealed_opcache_clear(tsafe_sealed_opcache *c)
{
    for (size_t i = 0; i < TSAFE_SEALED_OPERAND_CACHE; i++)
        entry_clear(&c->e[i]);
}

static tsafe_status build(tsafe_buffer **o, tsafe_bfv_plain *const *p, size_t n,
                          tsafe_backend *b)
{
    for (size_t i = 0; i < n; i++) {
        tsafe_status st = tsafe_bfv_plain_operand(p[i], b, &o[i]);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_opcache_get(tsafe_sealed_opcache *c, tsafe_backend *b1,
                                      tsafe_backend *b2, const tsafe_sealed_site *site,
                                      const tsafe_sealed_operands **out)
{
    size_t victim = 0;
    c->clock++;
    for (size_t i = 0; i < TSAFE_SEALED_OPERAND_CACHE; i++) {
        tsafe_sealed_operands *e = &c->e[i];
        if (e->site_id == site->id) {
            e->last_use = c->clock;
            *out = e;
            return TSAFE_OK;
        }
        if (e->last_use < c->e[victim].last_use)
            victim = i;
    }
    tsafe_sealed_operands *e = &c->e[victim];
    entry_clear(e);
    tsafe_status st;
    e->n1 = (size_t)site->l1.n_chunks * site->l1.n_blocks;
    TSAFE_CHECK(e->o1 = calloc(e->n1, sizeof *e->o1), TSAFE_E_NOMEM);
    TSAFE_TRY(build(e->o1, site->p1, e->n1, b1));
    if (site->p2 && b2) {
        e->n2 = (size_t)site->l2.n_chunks * site->l2.n_blocks;
        TSAFE_CHECK(e->o2 = calloc(e->n2, sizeof *e->o2), TSAFE_E_NOMEM);
        TSAFE_TRY(build(e->o2, site->p2, e->n2, b2));
    }
    e->site_id = site->id;
    e->last_use = c->clock;
    *out = e;
    return TSAFE_OK;
fail:
    entry_clear(e);
    return st;
}
