/* Sealed message codecs shared by the client, the server and the tests'
 * host reference: the tag every message carries, and the per-site parts
 * of the server's messages (format in docs/PROTOCOL.md). */
#include <math.h>
#include <string.h>

#include "server_internal.h"

void tsafe_sealed_put_tag(tsafe_wbuf *w, const tsafe_sealed_tag *t)
{
    tsafe_wbuf_bytes(w, t->session, TSAFE_SEALED_SESSION_BYTES);
    tsafe_wbuf_u32(w, t->epoch);
    tsafe_wbuf_u64(w, t->seq);
}

tsafe_status tsafe_sealed_get_tag(tsafe_rbuf *r, const tsafe_sealed_tag *want)
{
    const uint8_t *sess = tsafe_rbuf_take(r, TSAFE_SEALED_SESSION_BYTES);
    uint32_t epoch;
    uint64_t seq;
    if (!sess || !tsafe_rbuf_u32(r, &epoch) || !tsafe_rbuf_u64(r, &seq))
        return TSAFE_E_TRUNCATED;
    if (memcmp(sess, want->session, TSAFE_SEALED_SESSION_BYTES) != 0 ||
        epoch != want->epoch || seq != want->seq)
        return TSAFE_E_REPLAY;
    return TSAFE_OK;
}

size_t tsafe_sealed_message_bytes(const tsafe_sealed_plan *p,
                                  const tsafe_sealed_site *const *sites, size_t n_sites,
                                  uint8_t kind)
{
    size_t want = 0;
    for (size_t i = 0; i < n_sites; i++)
        want += tsafe_sealed_part_bytes(p, kind, sites[i]->rank, sites[i]->d_out);
    return want;
}

tsafe_status tsafe_sealed_put_sealed(const tsafe_bfv_context *ctx, const tsafe_bfv_sealed *res,
                                     size_t reads, tsafe_wbuf *w)
{
    size_t need = tsafe_bfv_sealed_bytes(ctx, reads);
    uint8_t *p = tsafe_wbuf_reserve(w, need);
    if (!p)
        return TSAFE_E_NOMEM;
    return tsafe_bfv_sealed_write(ctx, res, p, need);
}

void tsafe_sealed_put_site1(tsafe_wbuf *w, const tsafe_sealed_plan *p,
                            const tsafe_sealed_site *site)
{
    tsafe_wbuf_u32(w, site->rank);
    tsafe_wbuf_u32(w, site->d_out);
    if (p->mode == TSAFE_SEALED)
        tsafe_wbuf_f64(w, site->scale_a); /* the client's DP calibration */
}

void tsafe_sealed_put_site2(tsafe_wbuf *w, const tsafe_sealed_site *site)
{
    tsafe_wbuf_u32(w, site->d_out);
    tsafe_wbuf_f64(w, site->scale_b * ldexp(1.0, (int)site->trunc_bits));
    tsafe_wbuf_bytes(w, site->row_exp, site->d_out);
}

tsafe_status tsafe_sealed_get_chunks(tsafe_rbuf *r, const tsafe_sealed_plan *p)
{
    uint32_t nc;
    if (!tsafe_rbuf_u32(r, &nc))
        return TSAFE_E_TRUNCATED;
    return nc == p->n_chunks1 ? TSAFE_OK : TSAFE_E_FORMAT;
}

tsafe_status tsafe_sealed_get_site2(tsafe_rbuf *r, const tsafe_sealed_site *site)
{
    uint32_t rank, ncts;
    if (!tsafe_rbuf_u32(r, &rank) || !tsafe_rbuf_u32(r, &ncts))
        return TSAFE_E_TRUNCATED;
    return rank == site->rank && ncts == site->l2.n_chunks ? TSAFE_OK : TSAFE_E_FORMAT;
}
