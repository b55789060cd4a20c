/* Many sealings in one call (tsafe_bfv_seal_batch): the draws of every
 * item on the host, in the order tsafe_bfv_seal_buffer draws them, except
 * e1 (N binomial samples, most of the stream: the backend expands them
 * from the item's key and stream offset), then the ring work of all items
 * in one backend call (seal_batch, API 4) --
 * a GPU's case, where one sealing at a time is a handful of tiny kernels
 * and two PCIe round trips. Backends without the slot seal item by item. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bfv_internal.h"
#include "tensafe/backend_impl.h"
#include "tensafe/bfv_backend.h"
#include "tsafe_check.h"

int tsafe_bfv_sealer_batches(const tsafe_bfv_sealer *s)
{
    return s && tsafe_bfv_sealer_backend(s)->iface->seal_batch != NULL;
}

/* Every item valid before any work (the outputs are then only the call's). */
static tsafe_status check_items(const tsafe_bfv_sealer *s, const tsafe_buffer *pk,
                                const tsafe_bfv_seal_item *items, size_t n,
                                uint32_t flood_bits, size_t *total_reads)
{
    const tsafe_bfv_context *c = tsafe_bfv_sealer_ctx(s);
    const tsafe_backend *b = tsafe_bfv_sealer_backend(s);
    TSAFE_REQUIRE(pk->backend == b, TSAFE_E_ARG);
    TSAFE_REQUIRE(pk->n_polys == 2 && pk->n_limbs == c->L && pk->operand, TSAFE_E_RANGE);
    size_t total = 0;
    for (size_t j = 0; j < n; j++) {
        const tsafe_bfv_seal_item *it = &items[j];
        TSAFE_REQUIRE(it->acc && it->out && (it->pos || it->n_reads == 0), TSAFE_E_NULL);
        TSAFE_REQUIRE(it->acc->backend == b, TSAFE_E_ARG);
        TSAFE_REQUIRE(tsafe_bfv_same_ctx(it->out->ctx, c), TSAFE_E_PARAMS_MISMATCH);
        TSAFE_REQUIRE(it->acc->n_polys == 2 && it->acc->n_limbs == c->L && !it->acc->operand,
                      TSAFE_E_RANGE);
        tsafe_status st = tsafe_bfv_seal_check_reads(c, it->pos, it->mask, it->n_reads,
                                                     flood_bits, it->out);
        if (st != TSAFE_OK)
            return st;
        total += it->n_reads;
    }
    *total_reads = total;
    return TSAFE_OK;
}

/* The host side of a batch: r of every item (n x N bytes), the keys of
 * their streams (e1 is expanded by the backend from key and offset), the
 * read additions (L x reads, item-major), e0 scratch; all secret. */
typedef struct {
    int8_t *r, *e0;
    uint8_t *key;
    uint64_t *add;
    tsafe_backend_seal_job *job;
    size_t n, rbytes, addw, e0n;
} batch_draws;

static void draws_free(batch_draws *d)
{
    if (d->r)
        sodium_memzero(d->r, d->rbytes);
    if (d->key)
        sodium_memzero(d->key, 32 * d->n);
    if (d->e0)
        sodium_memzero(d->e0, d->e0n);
    if (d->add)
        sodium_memzero(d->add, d->addw * sizeof *d->add);
    free(d->r);
    free(d->key);
    free(d->e0);
    free(d->add);
    free(d->job);
}

static tsafe_status draw_all(const tsafe_bfv_context *c, const tsafe_bfv_seal_item *items,
                             size_t n, size_t total_reads, uint32_t flood_bits,
                             batch_draws *d)
{
    size_t N = c->n;
    d->n = n;
    d->rbytes = n * N;
    d->addw = total_reads * c->L;
    d->e0n = N;
    d->r = malloc(d->rbytes);
    d->key = malloc(32 * n);
    d->e0 = malloc(N);
    d->add = malloc((d->addw ? d->addw : 1) * sizeof *d->add);
    d->job = calloc(n, sizeof *d->job);
    TSAFE_REQUIRE(d->r && d->key && d->e0 && d->add && d->job, TSAFE_E_NOMEM);
    size_t off = 0;
    for (size_t j = 0; j < n; j++) {
        const tsafe_bfv_seal_item *it = &items[j];
        seal_draw sd = {d->r + j * N, NULL, d->e0, d->add + off * c->L};
        uint64_t e1_off = 0;
        tsafe_status st = tsafe_bfv_seal_draw_lean(c, it->seed, it->mask, it->n_reads,
                                                   flood_bits, &sd, d->key + 32 * j, &e1_off);
        if (st != TSAFE_OK)
            return st;
        d->job[j] = (tsafe_backend_seal_job){
            .acc = it->acc->mem, .r = sd.r, .e1_key = d->key + 32 * j, .e1_off = e1_off,
            .e1_stream = TSAFE_BFV_STREAM_SEAL, .pos = it->pos, .add = sd.add,
            .n_reads = it->n_reads, .c1 = it->out->c1, .c0 = it->out->c0};
        off += it->n_reads;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_seal_batch(tsafe_bfv_sealer *s, const tsafe_buffer *pk,
                                  const tsafe_bfv_seal_item *items, size_t n,
                                  uint32_t flood_bits)
{
    TSAFE_REQUIRE(s && pk && (items || n == 0), TSAFE_E_NULL);
    size_t total = 0;
    tsafe_status st = check_items(s, pk, items, n, flood_bits, &total);
    if (st != TSAFE_OK || n == 0)
        return st;
    tsafe_backend *b = tsafe_bfv_sealer_backend(s);
    if (!b->iface->seal_batch) { /* one at a time, prepared ones first */
        for (size_t j = 0; j < n && st == TSAFE_OK; j++)
            st = tsafe_bfv_seal_buffer(s, items[j].acc, pk, items[j].pos, items[j].mask,
                                       items[j].n_reads, flood_bits, items[j].seed,
                                       items[j].out);
        return st;
    }
    batch_draws d = {0};
    st = draw_all(tsafe_bfv_sealer_ctx(s), items, n, total, flood_bits, &d);
    if (st == TSAFE_OK)
        st = b->iface->seal_batch(b, pk->mem, d.job, n);
    if (st == TSAFE_OK)
        for (size_t j = 0; j < n; j++)
            items[j].out->n_reads = items[j].n_reads;
    draws_free(&d);
    return st;
}
