/* Sealed server, round 1: the query's chunks times every site's A blocks
 * on the backend, masked by fresh R, flooded and sealed (response 1). */
#include <stdlib.h>

#include <sodium.h>

#include "clock.h"
#include "server_internal.h"
#include "tsafe_check.h"

/* Round 1's flood: a whole step in sealed-private (the client's reads are
 * then +-1, and what lies below a step is uniform whatever noise its
 * query carried: THREAT_MODEL.md, F12); plan.flood1 bits in sealed mode,
 * whose client sends u + n back: a read +-1 there would give the server
 * a bit of the client's decryption noise per read. */
static uint32_t round1_flood(const tsafe_sealed_plan *p)
{
    return p->mode == TSAFE_SEALED_PRIVATE ? TSAFE_BFV_FLOOD_STEP : p->flood1;
}

/* A checked plan's W(X) of every block of the group's sites, encoded
 * into s->wb[acc0 + j] (block j in site-major order). */
static tsafe_status encode_checks(tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                                  size_t n_sites, size_t acc0, size_t jobs, size_t w0)
{
    tsafe_status st = tsafe_sealed_pool_reserve(s->be1, &s->wb, &s->n_wb, acc0 + jobs, 1);
    size_t n = tsafe_bfv_context_n(s->c1), j = acc0;
    int64_t *coeff = st == TSAFE_OK ? malloc(n * sizeof *coeff) : NULL;
    if (st == TSAFE_OK && !coeff)
        st = TSAFE_E_NOMEM;
    const int8_t *w = s->W + w0;
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++)
        for (uint32_t b = 0; b < sites[i]->l1.n_blocks && st == TSAFE_OK; b++, j++) {
            tsafe_sealed_check_poly(&s->plan, w, coeff, n);
            w += s->plan.rows1;
            st = tsafe_bfv_plain_encode_buffer(s->c1, coeff, n, s->wb[j]);
        }
    if (coeff)
        sodium_memzero(coeff, n * sizeof *coeff);
    free(coeff);
    return st;
}

/* Every block of every site is one job of one tsafe_backend_mul_acc call
 * (the batched entry point); accs[acc0 + j] is block j in site-major
 * order. A checked plan adds one job per site in a second call (its terms
 * are the blocks' accumulators): the sum of its blocks' products times
 * their W(X), into accs[chk0 + i] for the round's site i (sites from s0). */
static tsafe_status round1_products(tsafe_sealed_server *s,
                                    const tsafe_sealed_site *const *sites,
                                    size_t n_sites, const tsafe_sealed_operands **ops,
                                    size_t acc0, size_t chk0, size_t s0, size_t w0)
{
    size_t jobs = 0;
    for (size_t i = 0; i < n_sites; i++)
        jobs += sites[i]->l1.n_blocks;
    int chk = s->plan.checks != 0;
    size_t need = chk ? chk0 + s0 + n_sites : acc0 + jobs;
    tsafe_status st = tsafe_sealed_pool_reserve(s->be1, &s->accs, &s->n_accs, need, 2);
    if (st == TSAFE_OK && chk)
        st = encode_checks(s, sites, n_sites, acc0, jobs, w0);
    if (st != TSAFE_OK)
        return st;
    uint32_t nc = s->plan.n_chunks1;
    size_t all = chk ? jobs + n_sites : jobs;
    tsafe_backend_mac *job = malloc(all * sizeof *job);
    const tsafe_buffer **terms = malloc((2 * jobs * nc + 2 * jobs) * sizeof *terms);
    if (!job || !terms) {
        free(job);
        free(terms);
        return TSAFE_E_NOMEM;
    }
    size_t j = 0;
    for (size_t i = 0; i < n_sites; i++) {
        const tsafe_sealed_layout *l = &sites[i]->l1;
        for (uint32_t b = 0; b < l->n_blocks; b++, j++) {
            const tsafe_buffer **a = terms + 2 * j * nc, **w = a + nc;
            for (uint32_t c = 0; c < l->n_chunks; c++) {
                a[c] = s->xb[c];
                w[c] = ops[i]->o1[(size_t)c * l->n_blocks + b];
            }
            job[j] = (tsafe_backend_mac){s->accs[acc0 + j], l->n_chunks, a, w, 1};
        }
    }
    const tsafe_buffer **ca = terms + 2 * jobs * nc, **cw = ca + jobs;
    for (size_t i = 0, k = 0; chk && i < n_sites; i++) {
        uint32_t nb = sites[i]->l1.n_blocks;
        for (uint32_t b = 0; b < nb; b++) {
            ca[k + b] = s->accs[acc0 + k + b];
            cw[k + b] = s->wb[acc0 + k + b];
        }
        job[jobs + i] = (tsafe_backend_mac){s->accs[chk0 + s0 + i], nb, ca + k, cw + k, 1};
        k += nb;
    }
    st = tsafe_backend_mul_acc(s->be1, job, jobs);
    if (st == TSAFE_OK && chk) /* their own call: they read the blocks' accumulators, and
                                  jobs that depend on each other would run one by one */
        st = tsafe_backend_mul_acc(s->be1, job + jobs, n_sites);
    free(job);
    free(terms);
    return st;
}

/* The products of every site, one call per group of sites whose operands
 * the cache holds at once (a later site's fetch may evict an earlier
 * one's entry: the operands of one call must all be fetched for it). */
static tsafe_status round1_groups(tsafe_sealed_server *s,
                                  const tsafe_sealed_site *const *sites, size_t n_sites)
{
    const tsafe_sealed_operands *ops[TSAFE_SEALED_OPERAND_CACHE];
    tsafe_status st = TSAFE_OK;
    size_t acc0 = 0, chk0 = 0, w0 = 0;
    for (size_t i = 0; i < n_sites; i++) /* the checked products after the blocks */
        chk0 += sites[i]->l1.n_blocks;
    for (size_t g = 0; g < n_sites && st == TSAFE_OK; g += TSAFE_SEALED_OPERAND_CACHE) {
        size_t m = n_sites - g < TSAFE_SEALED_OPERAND_CACHE ? n_sites - g
                                                             : TSAFE_SEALED_OPERAND_CACHE;
        for (size_t i = 0; i < m && st == TSAFE_OK; i++)
            st = tsafe_sealed_opcache_get(&s->cache, s->be1, s->be2, sites[g + i], &ops[i]);
        if (st == TSAFE_OK)
            st = round1_products(s, sites + g, m, ops, acc0, chk0, g, w0);
        for (size_t i = 0; i < m; i++) {
            acc0 += sites[g + i]->l1.n_blocks;
            w0 += (size_t)sites[g + i]->l1.n_blocks * s->plan.rows1;
        }
    }
    return st;
}

/* The query's tag and chunks (into s->xb), consumed exactly. */
static tsafe_status read_query(tsafe_sealed_server *s, const uint8_t *query, size_t len)
{
    tsafe_status st;
    tsafe_rbuf r = {query, len, 0};
    if ((st = tsafe_rbuf_header(&r, TSAFE_MSG_SEALED_QUERY)) != TSAFE_OK ||
        (st = tsafe_sealed_get_tag(&r, &s->tag)) != TSAFE_OK ||
        (st = tsafe_sealed_get_chunks(&r, &s->plan)) != TSAFE_OK)
        return st;
    /* the chunks lie one after the other: one call (on a device, their
     * seeds expanded there) */
    size_t ctl = tsafe_bfv_ct_bytes(s->c1), nc = s->plan.n_chunks1;
    const uint8_t *p = tsafe_rbuf_take(&r, nc * ctl);
    if (!p)
        return TSAFE_E_TRUNCATED;
    if ((st = tsafe_bfv_ct_read_buffers(s->c1, p, ctl, nc, s->xb)) != TSAFE_OK)
        return st;
    if (r.pos != len)
        return TSAFE_E_FORMAT;
    return TSAFE_OK;
}

/* A checked plan's w for every site's blocks (s->W, site-major). */
static tsafe_status draw_checks(tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                                size_t n_sites)
{
    size_t need = 0;
    for (size_t i = 0; i < n_sites; i++)
        need += (size_t)sites[i]->l1.n_blocks * s->plan.rows1;
    if (need > s->W_cap) {
        if (s->W)
            sodium_memzero(s->W, s->W_cap);
        free(s->W);
        s->W = malloc(need);
        s->W_cap = s->W ? need : 0;
        if (!s->W)
            return TSAFE_E_NOMEM;
    }
    int8_t *w = s->W;
    for (size_t i = 0; i < n_sites; i++) {
        tsafe_sealed_draw_checks_w(&s->draws, &s->plan, sites[i]->rank, w);
        w += (size_t)sites[i]->l1.n_blocks * s->plan.rows1;
    }
    return TSAFE_OK;
}

/* Fresh masks R (mod t) for the sites' reads (rank, then a checked
 * plan's checks), laid out by s->off. */
static tsafe_status draw_round_masks(tsafe_sealed_server *s,
                                     const tsafe_sealed_site *const *sites, size_t n_sites)
{
    size_t total = 0;
    for (size_t i = 0; i < n_sites; i++) {
        s->off[i] = total;
        total += tsafe_sealed_site_reads1(&s->plan, sites[i]);
    }
    s->off[n_sites] = total;
    tsafe_status st = tsafe_sealed_server_reserve_R(s, total);
    if (st != TSAFE_OK)
        return st;
    uint64_t t = 1ull << s->plan.r1.t_bits;
    tsafe_sealed_draw_masks(&s->draws, s->R, total);
    for (size_t i = 0; i < total; i++)
        s->R[i] &= t - 1;
    return s->plan.checks ? draw_checks(s, sites, n_sites) : TSAFE_OK;
}

/* A checked plan's sealing of a site's checked product (acc): reads at
 * rows 0..checks-1, masks t/2 - R_e (R_e after the site's rank masks). */
static tsafe_status seal_checks(tsafe_sealed_server *s, const tsafe_sealed_site *site,
                                const uint64_t *R, tsafe_buffer *acc, tsafe_wbuf *w)
{
    const tsafe_sealed_plan *p = &s->plan;
    uint64_t t = 1ull << p->r1.t_bits, half = t >> 1;
    tsafe_sealed_layout lc;
    tsafe_sealed_layout_checks(p, &lc);
    const uint64_t *Re = R + site->rank;
    for (uint32_t k = 0; k < p->checks; k++)
        s->mask[k] = (half - Re[k]) & (t - 1);
    return tsafe_sealed_server_seal(s, s->c1, s->sealer1, acc, s->pkb1, s->res, &lc, 0,
                                    TSAFE_BFV_FLOOD_STEP, w);
}

/* Response 1 from the products in s->accs: per block the masks, then the
 * sealing (queued, run together at the end). Returns the number of blocks sealed in *seals. */
static tsafe_status write_response1(tsafe_sealed_server *s,
                                    const tsafe_sealed_site *const *sites, size_t n_sites,
                                    tsafe_wbuf *w, size_t *seals)
{
    tsafe_status st = TSAFE_OK;
    tsafe_wbuf_presize(w, tsafe_sealed_message_bytes(&s->plan, sites, n_sites,
                                                     TSAFE_MSG_SEALED_RESPONSE1));
    tsafe_wbuf_header(w, TSAFE_MSG_SEALED_RESPONSE1);
    tsafe_sealed_put_tag(w, &s->tag);
    tsafe_wbuf_u32(w, (uint32_t)n_sites);
    const uint64_t *R = s->R;
    size_t j = 0, chk0 = 0; /* backend accumulator of the block; the checked ones */
    for (size_t i = 0; i < n_sites; i++)
        chk0 += sites[i]->l1.n_blocks;
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        const tsafe_sealed_layout *l = &sites[i]->l1;
        tsafe_sealed_put_site1(w, &s->plan, sites[i]);
        for (uint32_t b = 0; b < l->n_blocks && st == TSAFE_OK; b++, j++) {
            tsafe_sealed_round1_masks(&s->plan, l, b, R, s->mask);
            st = tsafe_sealed_server_seal(s, s->c1, s->sealer1, s->accs[j], s->pkb1, s->res,
                                          l, b, round1_flood(&s->plan), w);
        }
        if (st == TSAFE_OK && s->plan.checks)
            st = seal_checks(s, sites[i], R, s->accs[chk0 + i], w);
        R += tsafe_sealed_site_reads1(&s->plan, sites[i]);
    }
    *seals = s->plan.checks ? j + n_sites : j;
    if (st != TSAFE_OK) { /* nothing of it is sent */
        tsafe_sealed_sealq_discard(&s->sealq);
        return st;
    }
    return tsafe_sealed_server_seal_flush(s, w); /* the queued sealings, at once */
}

static tsafe_status round1(tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                           size_t n_sites, const uint8_t *query, size_t len,
                           uint8_t **response, size_t *out_len, tsafe_lora_stats *stats)
{
    double t0 = tsafe_now_us();
    tsafe_status st = read_query(s, query, len);
    if (st == TSAFE_OK)
        st = draw_round_masks(s, sites, n_sites);
    double p0 = tsafe_now_us();
    if (st == TSAFE_OK)
        st = round1_groups(s, sites, n_sites);
    if (st != TSAFE_OK)
        return st;
    double prod_us = tsafe_now_us() - p0;
    tsafe_wbuf w = {0};
    size_t seals = 0;
    if ((st = write_response1(s, sites, n_sites, &w, &seals)) != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    s->await_round2 = 1;
    s->n_sites = n_sites;
    s->seals1 = seals; /* what refill prepares for the next token */
    *response = w.buf;
    *out_len = w.len;
    if (stats) {
        stats->products_us += prod_us;
        stats->reduce_us += tsafe_now_us() - t0 - prod_us;
        stats->he_ops += (uint64_t)n_sites * s->plan.n_chunks1;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_server_round1(tsafe_sealed_server *s,
                                        const tsafe_sealed_site *const *sites,
                                        size_t n_sites, const uint8_t *query,
                                        size_t len, uint8_t **response,
                                        size_t *out_len, tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(s && query && response && out_len, TSAFE_E_NULL);
    *response = NULL;
    *out_len = 0;
    tsafe_status st = tsafe_sealed_server_check_sites(s, sites, n_sites);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(s->have_session, TSAFE_E_STATE);
    TSAFE_REQUIRE(s->be1, TSAFE_E_STATE); /* a failed use_backend left none */
    /* one query per sequence number: while its round 2 is pending, the
     * same query again is a replay (a fresh one would carry seq + 1) */
    TSAFE_REQUIRE(!s->await_round2, TSAFE_E_REPLAY);
    st = round1(s, sites, n_sites, query, len, response, out_len, stats);
    if (st != TSAFE_OK) /* no token pending; the session stays (round 2 ends it) */
        tsafe_sealed_server_wipe_masks(s);
    return st;
}
