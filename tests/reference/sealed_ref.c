/* Host reference of the sealed server (tsafe_ref.h): both rounds with
 * the direct calls of bfv.h (tsafe_bfv_ct_read, tsafe_bfv_acc_mul_add,
 * tsafe_bfv_plain_create, tsafe_bfv_seal) where the server uses its
 * backend; the masks, draws and codecs are the library's own. */
#include <stdlib.h>
#include <string.h>

#include "reference/tsafe_ref.h"
#include "../libtensafe-lora/src/sealed/server_internal.h"

#define REF_MAX_CHUNKS TSAFE_SEALED_MAX_CHUNKS

struct tsafe_ref_sealed {
    tsafe_sealed_plan plan;
    tsafe_bfv_context *c1, *c2;
    tsafe_bfv_public_key *pk1, *pk2;
    tsafe_sealed_tag tag;
    tsafe_sealed_draws draws;
    tsafe_bfv_ct *x[REF_MAX_CHUNKS], *z[REF_MAX_CHUNKS];
    tsafe_bfv_acc *acc1, *acc2;
    tsafe_bfv_sealed *res1, *res2;
    uint64_t *R;
    size_t off[TSAFE_MSG_MAX_SITES + 1];
    uint32_t *pos;
    uint64_t *mask;
    int64_t *noise;
};

void tsafe_ref_sealed_free(tsafe_ref_sealed *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < REF_MAX_CHUNKS; i++)
        tsafe_bfv_ct_free(r->x[i]);
    for (size_t i = 0; i < REF_MAX_CHUNKS; i++)
        tsafe_bfv_ct_free(r->z[i]);
    tsafe_bfv_acc_free(r->acc1);
    tsafe_bfv_acc_free(r->acc2);
    tsafe_bfv_sealed_free(r->res1);
    tsafe_bfv_sealed_free(r->res2);
    tsafe_bfv_public_key_free(r->pk1);
    tsafe_bfv_public_key_free(r->pk2);
    tsafe_bfv_context_free(r->c1);
    tsafe_bfv_context_free(r->c2);
    free(r->R);
    free(r->pos);
    free(r->mask);
    free(r->noise);
    free(r);
}

/* Round 2's ring (sealed-private). */
static tsafe_status create_round2(tsafe_ref_sealed *r, size_t n)
{
    tsafe_sealed_layout l2;
    tsafe_sealed_layout2(&r->plan, r->plan.rank, r->plan.d_out_max, &l2);
    tsafe_status st = l2.n_chunks <= REF_MAX_CHUNKS ? TSAFE_OK : TSAFE_E_RANGE;
    for (uint32_t i = 0; i < l2.n_chunks && st == TSAFE_OK; i++)
        st = tsafe_bfv_ct_create(r->c2, &r->z[i]);
    if (st == TSAFE_OK)
        st = tsafe_bfv_acc_create(r->c2, &r->acc2);
    if (st == TSAFE_OK)
        st = tsafe_bfv_sealed_create(r->c2, n, &r->res2);
    r->noise = malloc((size_t)r->plan.d_out_max * sizeof *r->noise);
    return st == TSAFE_OK && !r->noise ? TSAFE_E_NOMEM : st;
}

tsafe_status tsafe_ref_sealed_create(const tsafe_sealed_plan *plan, const uint8_t *seed,
                                     tsafe_ref_sealed **out)
{
    tsafe_ref_sealed *r = calloc(1, sizeof *r);
    if (!r)
        return TSAFE_E_NOMEM;
    r->plan = *plan;
    r->draws.seeded = 1;
    memcpy(r->draws.seed, seed, 32);
    tsafe_status st = tsafe_sealed_contexts(plan, &r->c1, &r->c2);
    size_t n = st == TSAFE_OK ? tsafe_bfv_context_n(r->c1) : 0;
    if (st == TSAFE_OK && plan->n_chunks1 > REF_MAX_CHUNKS)
        st = TSAFE_E_RANGE;
    for (uint32_t i = 0; i < plan->n_chunks1 && st == TSAFE_OK; i++)
        st = tsafe_bfv_ct_create(r->c1, &r->x[i]);
    if (st == TSAFE_OK)
        st = tsafe_bfv_acc_create(r->c1, &r->acc1);
    if (st == TSAFE_OK)
        st = tsafe_bfv_sealed_create(r->c1, n, &r->res1);
    r->pos = malloc(n * sizeof *r->pos);
    r->mask = malloc(n * sizeof *r->mask);
    if (st == TSAFE_OK && !(r->pos && r->mask))
        st = TSAFE_E_NOMEM;
    if (st == TSAFE_OK && plan->mode == TSAFE_SEALED_PRIVATE)
        st = create_round2(r, n);
    if (st != TSAFE_OK) {
        tsafe_ref_sealed_free(r);
        return st;
    }
    *out = r;
    return TSAFE_OK;
}

tsafe_status tsafe_ref_sealed_accept(tsafe_ref_sealed *r, const uint8_t *hello, size_t len)
{
    tsafe_rbuf b = {hello, len, 0};
    tsafe_status st = tsafe_rbuf_header(&b, TSAFE_MSG_SEALED_HELLO);
    const uint8_t *sess, *k1, *k2 = NULL;
    size_t l1 = tsafe_bfv_public_key_bytes(r->c1);
    size_t l2 = r->c2 ? tsafe_bfv_public_key_bytes(r->c2) : 0;
    if (st != TSAFE_OK)
        return st;
    if (!tsafe_rbuf_take(&b, 32) || !(sess = tsafe_rbuf_take(&b, TSAFE_SEALED_SESSION_BYTES)) ||
        !tsafe_rbuf_u32(&b, &r->tag.epoch) || !(k1 = tsafe_rbuf_take(&b, l1)) ||
        (r->c2 && !(k2 = tsafe_rbuf_take(&b, l2))))
        return TSAFE_E_TRUNCATED;
    memcpy(r->tag.session, sess, TSAFE_SEALED_SESSION_BYTES);
    r->tag.seq = 0;
    tsafe_bfv_public_key_free(r->pk1);
    tsafe_bfv_public_key_free(r->pk2);
    r->pk1 = r->pk2 = NULL;
    st = tsafe_bfv_public_key_read(r->c1, k1, l1, &r->pk1);
    if (st == TSAFE_OK && r->c2)
        st = tsafe_bfv_public_key_read(r->c2, k2, l2, &r->pk2);
    return st;
}

/* Reads n ciphertexts of ctx from b into cts (the direct type). */
static tsafe_status read_cts(tsafe_rbuf *b, const tsafe_bfv_context *ctx, tsafe_bfv_ct **cts,
                             uint32_t n)
{
    size_t ctl = tsafe_bfv_ct_bytes(ctx);
    tsafe_status st = TSAFE_OK;
    for (uint32_t c = 0; c < n && st == TSAFE_OK; c++) {
        const uint8_t *p = tsafe_rbuf_take(b, ctl);
        st = p ? tsafe_bfv_ct_read(ctx, p, ctl, cts[c]) : TSAFE_E_TRUNCATED;
    }
    return st;
}

static tsafe_status seal(tsafe_ref_sealed *r, const tsafe_bfv_context *ctx, tsafe_bfv_acc *acc,
                         const tsafe_bfv_public_key *pk, tsafe_bfv_sealed *res,
                         const tsafe_sealed_layout *l, uint32_t b, uint32_t flood,
                         tsafe_wbuf *w)
{
    uint8_t sd[32];
    uint32_t reads = tsafe_sealed_block_reads(l, b, r->pos);
    tsafe_status st = tsafe_bfv_seal(ctx, acc, pk, r->pos, r->mask, reads, flood,
                                     tsafe_sealed_next_seed(&r->draws, sd), res);
    return st == TSAFE_OK ? tsafe_sealed_put_sealed(ctx, res, reads, w) : st;
}

/* Round 1's masks R for the sites' ranks, as the server draws them. */
static tsafe_status draw_R(tsafe_ref_sealed *r, const tsafe_sealed_site *const *sites, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        r->off[i] = total;
        total += sites[i]->rank;
    }
    r->off[n] = total;
    free(r->R);
    if (!(r->R = malloc((total ? total : 1) * sizeof *r->R)))
        return TSAFE_E_NOMEM;
    tsafe_sealed_draw_masks(&r->draws, r->R, total);
    for (size_t i = 0; i < total; i++)
        r->R[i] &= (1ull << r->plan.r1.t_bits) - 1;
    return TSAFE_OK;
}

static tsafe_status round1_site(tsafe_ref_sealed *r, const tsafe_sealed_site *site,
                                const uint64_t *R, tsafe_wbuf *w)
{
    const tsafe_sealed_layout *l = &site->l1;
    tsafe_status st = TSAFE_OK;
    tsafe_sealed_put_site1(w, &r->plan, site);
    for (uint32_t b = 0; b < l->n_blocks && st == TSAFE_OK; b++) {
        tsafe_bfv_acc_zero(r->acc1);
        for (uint32_t c = 0; c < l->n_chunks && st == TSAFE_OK; c++)
            st = tsafe_bfv_acc_mul_add(r->acc1, r->x[c], site->p1[(size_t)c * l->n_blocks + b]);
        tsafe_sealed_round1_masks(&r->plan, l, b, R, r->mask);
        if (st == TSAFE_OK)
            st = seal(r, r->c1, r->acc1, r->pk1, r->res1, l, b,
                      r->plan.mode == TSAFE_SEALED_PRIVATE ? TSAFE_BFV_FLOOD_STEP : r->plan.flood1, w);
    }
    return st;
}

/* The message header, tag and site count; the output's likewise. */
static tsafe_status open_round(tsafe_ref_sealed *r, tsafe_rbuf *b, uint8_t in_kind,
                               uint8_t out_kind, size_t n_sites, tsafe_wbuf *w)
{
    tsafe_status st = tsafe_rbuf_header(b, in_kind);
    if (st == TSAFE_OK)
        st = tsafe_sealed_get_tag(b, &r->tag);
    tsafe_wbuf_header(w, out_kind);
    tsafe_sealed_put_tag(w, &r->tag);
    tsafe_wbuf_u32(w, (uint32_t)n_sites);
    return st;
}

static tsafe_status close_round(tsafe_status st, const tsafe_rbuf *b, tsafe_wbuf *w,
                                uint8_t **out, size_t *out_len)
{
    if (st == TSAFE_OK && (b->pos != b->len || w->failed))
        st = TSAFE_E_FORMAT;
    if (st != TSAFE_OK) {
        free(w->buf);
        return st;
    }
    *out = w->buf;
    *out_len = w->len;
    return TSAFE_OK;
}

tsafe_status tsafe_ref_sealed_round1(tsafe_ref_sealed *r, const tsafe_sealed_site *const *sites,
                                     size_t n_sites, const uint8_t *query, size_t len,
                                     uint8_t **out, size_t *out_len)
{
    tsafe_rbuf b = {query, len, 0};
    tsafe_wbuf w = {0};
    tsafe_status st = open_round(r, &b, TSAFE_MSG_SEALED_QUERY, TSAFE_MSG_SEALED_RESPONSE1,
                                 n_sites, &w);
    if (st == TSAFE_OK)
        st = tsafe_sealed_get_chunks(&b, &r->plan);
    if (st == TSAFE_OK)
        st = read_cts(&b, r->c1, r->x, r->plan.n_chunks1);
    if (st == TSAFE_OK)
        st = draw_R(r, sites, n_sites);
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++)
        st = round1_site(r, sites[i], r->R + r->off[i], &w);
    return close_round(st, &b, &w, out, out_len);
}

/* sealed: delta' = s B' (u + n) in doubles, plain loops. */
static tsafe_status round2_sealed_site(tsafe_ref_sealed *r, const tsafe_sealed_site *site,
                                       const uint64_t *R, tsafe_rbuf *b, tsafe_wbuf *w)
{
    uint32_t rank;
    double u[1024];
    if (!tsafe_rbuf_u32(b, &rank) || rank != site->rank)
        return TSAFE_E_FORMAT;
    for (uint32_t k = 0; k < rank; k++) {
        uint64_t v;
        if (!tsafe_rbuf_u64(b, &v))
            return TSAFE_E_TRUNCATED;
        u[k] = (double)tsafe_sealed_unmask(&r->plan, v, R[k]);
    }
    tsafe_wbuf_u32(w, site->d_out);
    for (uint32_t j = 0; j < site->d_out; j++) {
        double acc = 0;
        for (uint32_t k = 0; k < rank; k++)
            acc += (double)site->bprime[(size_t)k * site->d_out + j] * u[k];
        tsafe_wbuf_f32(w, (float)acc);
    }
    return TSAFE_OK;
}

/* Block b of round 2: the shares times B_q's blocks. */
static tsafe_status round2_block(tsafe_ref_sealed *r, const tsafe_sealed_site *site, uint32_t b)
{
    const tsafe_sealed_layout *l = &site->l2;
    tsafe_status st = TSAFE_OK;
    tsafe_bfv_acc_zero(r->acc2);
    for (uint32_t c = 0; c < l->n_chunks && st == TSAFE_OK; c++)
        st = tsafe_bfv_acc_mul_add(r->acc2, r->z[c], site->p2[(size_t)c * l->n_blocks + b]);
    return st;
}

static tsafe_status round2_private_site(tsafe_ref_sealed *r, const tsafe_sealed_site *site,
                                        const uint64_t *R, tsafe_rbuf *b, tsafe_wbuf *w)
{
    const tsafe_sealed_layout *l = &site->l2;
    int64_t C[1024];
    tsafe_status st = tsafe_sealed_get_site2(b, site);
    if (st == TSAFE_OK)
        st = read_cts(b, r->c2, r->z, l->n_chunks);
    if (st != TSAFE_OK)
        return st;
    tsafe_sealed_round2_c(&r->plan, site, R, C);
    tsafe_sealed_put_site2(w, site);
    tsafe_sealed_draw_out_noise(&r->draws, site, r->noise);
    for (uint32_t blk = 0; blk < l->n_blocks && st == TSAFE_OK; blk++) {
        st = round2_block(r, site, blk);
        tsafe_sealed_round2_masks(&r->plan, site, blk, C, r->noise, r->mask);
        if (st == TSAFE_OK)
            st = seal(r, r->c2, r->acc2, r->pk2, r->res2, l, blk, TSAFE_BFV_FLOOD_STEP, w);
    }
    return st;
}

tsafe_status tsafe_ref_sealed_round2(tsafe_ref_sealed *r, const tsafe_sealed_site *const *sites,
                                     size_t n_sites, const uint8_t *msg, size_t len,
                                     uint8_t **out, size_t *out_len)
{
    int priv = r->plan.mode == TSAFE_SEALED_PRIVATE;
    tsafe_rbuf b = {msg, len, 0};
    tsafe_wbuf w = {0};
    uint32_t ns = 0;
    tsafe_status st = open_round(r, &b, priv ? TSAFE_MSG_SEALED_SHARE_CT : TSAFE_MSG_SEALED_SHARE,
                                 priv ? TSAFE_MSG_SEALED_RESPONSE2 : TSAFE_MSG_SEALED_DELTA,
                                 n_sites, &w);
    if (st == TSAFE_OK && (!tsafe_rbuf_u32(&b, &ns) || ns != n_sites))
        st = TSAFE_E_FORMAT;
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++)
        st = priv ? round2_private_site(r, sites[i], r->R + r->off[i], &b, &w)
                  : round2_sealed_site(r, sites[i], r->R + r->off[i], &b, &w);
    r->tag.seq++;
    return close_round(st, &b, &w, out, out_len);
}
