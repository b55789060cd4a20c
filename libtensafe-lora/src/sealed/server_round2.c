/* Sealed server, round 2: sealed mode turns the shares into the deltas in
 * clear; sealed-private multiplies the encrypted round-1 reads by B_q
 * on the backend and seals the result (docs/THREAT_MODEL.md). */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "clock.h"
#include "cpu.h"
#include "server_internal.h"
#include "tsafe_check.h"

/* out[j] = sum over k (in order) of bt[k d_out + j] u[k], in doubles: each
 * output the same products and sums in the same order on either path (the
 * AVX-512 one keeps 32 outputs in registers, no fused multiply-add), so
 * both give the same bits. */
static void bt_times_u_scalar(const float *bt, const double *u, uint32_t rank,
                              uint32_t from, uint32_t d_out, double *out)
{
    for (uint32_t j = from; j < d_out; j++) {
        double acc = 0;
        for (uint32_t k = 0; k < rank; k++)
            acc += (double)bt[(size_t)k * d_out + j] * u[k];
        out[j] = acc;
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx512f"))) static uint32_t bt_times_u_avx512(
    const float *bt, const double *u, uint32_t rank, uint32_t d_out, double *out)
{
    uint32_t j = 0;
    for (; j + 32 <= d_out; j += 32) {
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (uint32_t k = 0; k < rank; k++) {
            const float *b = bt + (size_t)k * d_out + j;
            __m512d uk = _mm512_set1_pd(u[k]);
            a0 = _mm512_add_pd(a0, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(b)), uk));
            a1 = _mm512_add_pd(a1, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(b + 8)), uk));
            a2 = _mm512_add_pd(a2, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(b + 16)), uk));
            a3 = _mm512_add_pd(a3, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(b + 24)), uk));
        }
        _mm512_storeu_pd(out + j, a0);
        _mm512_storeu_pd(out + j + 8, a1);
        _mm512_storeu_pd(out + j + 16, a2);
        _mm512_storeu_pd(out + j + 24, a3);
    }
    return j;
}
#endif

static void bt_times_u(const float *bt, const double *u, uint32_t rank, uint32_t d_out,
                       double *out)
{
    uint32_t from = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (tsafe_cpu_has_avx512f())
        from = bt_times_u_avx512(bt, u, rank, d_out, out);
#endif
    bt_times_u_scalar(bt, u, rank, from, d_out, out);
}

/* sealed: shares (+ noise) -> u + n -> delta' = s B' (u + n), in clear */
static tsafe_status round2_sealed(tsafe_sealed_server *s,
                                  const tsafe_sealed_site *const *sites,
                                  size_t n_sites, tsafe_rbuf *r, tsafe_wbuf *w)
{
    uint64_t t = 1ull << s->plan.r1.t_bits;
    const uint64_t *R = s->R;
    int64_t *U = s->last_u;
    for (size_t i = 0; i < n_sites; i++) {
        const tsafe_sealed_site *site = sites[i];
        uint32_t rank;
        if (!tsafe_rbuf_u32(r, &rank))
            return TSAFE_E_TRUNCATED;
        if (rank != site->rank)
            return TSAFE_E_FORMAT;
        for (uint32_t k = 0; k < rank; k++) {
            uint64_t v;
            if (!tsafe_rbuf_u64(r, &v))
                return TSAFE_E_TRUNCATED;
            if (v >= t)
                return TSAFE_E_FORMAT;
            U[k] = tsafe_sealed_unmask(&s->plan, v, R[k]);
        }
        tsafe_wbuf_u32(w, site->d_out);
        double *ud = malloc(((size_t)rank + site->d_out) * sizeof *ud), *out = ud + rank;
        if (!ud)
            return TSAFE_E_NOMEM;
        for (uint32_t k = 0; k < rank; k++)
            ud[k] = (double)U[k];
        bt_times_u(site->bprime, ud, rank, site->d_out, out);
        for (uint32_t j = 0; j < site->d_out; j++)
            tsafe_wbuf_f32(w, (float)out[j]);
        free(ud);
        R += rank;
        U += rank;
    }
    return TSAFE_OK;
}

/* Tasks for n items of host work: the pool's threads (at most n and the
 * slots' count). */
static size_t host_tasks(const tsafe_sealed_server *s, size_t n)
{
    size_t t = tsafe_cpu_pool_available(s->pool);
    if (t > n)
        t = n;
    if (t > TSAFE_SEALED_MAX_SLOTS + 1)
        t = TSAFE_SEALED_MAX_SLOTS + 1;
    return t < 2 ? 1 : t;
}

/* The sites of round 2 whose sealings are queued and whose products are
 * not done yet: their products go in one multiply-accumulate call. */
typedef struct {
    const tsafe_sealed_site *site;
    const tsafe_sealed_operands *ops;
    size_t z0, acc0;    /* its share ciphertexts and accumulators:
                           zb[z0..], accs2[acc0..]; acc0 is also its first
                           queued sealing */
    const uint8_t *ct0; /* its share ciphertexts' bytes (n_chunks, in the
                           message), decoded by round2_fill */
    const int64_t *C;   /* its constants (s->C + off) */
    double *z;          /* its output noise's Gaussians (rank, secret) */
    /* checked plans: its round-1 w, the seed of its H, and its per-token
     * plaintexts of [B_q - H K | H] at s->ptb[pt0 ..] (chunk-major) */
    const int8_t *w;
    uint8_t hseed[32];
    size_t pt0;
} round2_part;

typedef struct {
    round2_part part[TSAFE_SEALED_ROUND2_QUEUE_BATCHED];
    size_t n, zused, ptused;
    size_t w_next; /* the next site's w in s->W (all of the round's sites) */
    double *z; /* the parts' Gaussians, plan.rank each (wiped by the flush) */
    tsafe_sealed_server *s;
    size_t threads;
    tsafe_status st[TSAFE_SEALED_MAX_SLOTS + 1];
} round2_group;

/* Round 2's products of a group of sites as one multiply-accumulate call:
 * per block of each site the share chunks times the fixed B_q blocks. */
static tsafe_status round2_products(tsafe_sealed_server *s, const round2_group *g)
{
    size_t jobs = 0, nterms = 0;
    for (size_t p = 0; p < g->n; p++) {
        const tsafe_sealed_layout *l = &g->part[p].site->l2;
        jobs += l->n_blocks;
        nterms += (size_t)l->n_blocks * 2 * l->n_chunks;
    }
    tsafe_backend_mac *job = malloc(jobs * sizeof *job);
    const tsafe_buffer **terms = malloc(nterms * sizeof *terms);
    if (!job || !terms) {
        free(job);
        free(terms);
        return TSAFE_E_NOMEM;
    }
    size_t j = 0, t = 0;
    for (size_t p = 0; p < g->n; p++) {
        const round2_part *q = &g->part[p];
        const tsafe_sealed_layout *l = &q->site->l2;
        size_t nb = l->n_blocks, nc = l->n_chunks;
        for (uint32_t b = 0; b < nb; b++, j++) {
            const tsafe_buffer **a = terms + t, **w = a + nc;
            t += 2 * nc;
            for (uint32_t c = 0; c < nc; c++) {
                a[c] = s->zb[q->z0 + c];
                w[c] = s->plan.checks ? s->ptb[q->pt0 + (size_t)c * nb + b]
                                      : q->ops->o2[(size_t)c * nb + b];
            }
            job[j] = (tsafe_backend_mac){s->accs2[q->acc0 + b], nc, a, w, 1};
        }
    }
    tsafe_status st = tsafe_backend_mul_acc(s->be2, job, jobs);
    free(job);
    free(terms);
    return st;
}

tsafe_status tsafe_sealed_server_prepare_round2(tsafe_sealed_server *s,
                                                const tsafe_sealed_site *const *sites,
                                                size_t n_sites, tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(s, TSAFE_E_NULL);
    (void)stats; /* plan version 7 has no per-token plaintexts to prepare */
    return tsafe_sealed_server_check_pending(s, sites, n_sites);
}

/* Site i's share ciphertexts: room in the pool (zb[g->zused..]) and
 * their bytes, checked for length; round2_fill decodes them. */
static tsafe_status take_shares(tsafe_sealed_server *s, const tsafe_sealed_site *site,
                                tsafe_rbuf *r, round2_group *g, round2_part *q)
{
    const tsafe_sealed_layout *l = &site->l2;
    size_t ctl = tsafe_bfv_ct_bytes(s->c2);
    tsafe_status st = tsafe_sealed_get_site2(r, site);
    if (st == TSAFE_OK)
        st = tsafe_sealed_pool_reserve(s->be2, &s->zb, &s->n_zb, g->zused + l->n_chunks, 2);
    q->z0 = g->zused;
    q->ct0 = r->buf + r->pos;
    for (uint32_t c = 0; c < l->n_chunks && st == TSAFE_OK; c++, g->zused++)
        if (!tsafe_rbuf_take(r, ctl))
            st = TSAFE_E_TRUNCATED;
    return st;
}

/* Part p's masks into its queued sealings: per block B_q C + round(B_q z)
 * (mod t2), its output noise with it; a checked plan's fold adds
 * H (C_e - K C). */
static void part_masks(tsafe_sealed_server *s, const round2_part *q, const int32_t *K,
                       const int16_t *H)
{
    uint64_t v[TSAFE_SEALED_CHECKS];
    if (s->plan.checks)
        tsafe_sealed_fold_constants(&s->plan, q->site->rank, K, q->C, v);
    for (uint32_t b = 0; b < q->site->l2.n_blocks; b++) {
        uint64_t *mask = tsafe_sealed_sealq_masks(&s->sealq, q->acc0 + b);
        tsafe_sealed_round2_noise_masks(&s->plan, q->site, b, q->C, q->z, mask, 1);
        if (s->plan.checks)
            tsafe_sealed_fold_masks(&s->plan, q->site, b, H, v, mask);
    }
    sodium_memzero(v, sizeof v);
}

/* A checked part's fold: K from its w, H drawn, [B_q - H K | H] encoded
 * into its plaintexts, then its masks (H and K are gone after). */
static tsafe_status part_fold(tsafe_sealed_server *s, const round2_part *q)
{
    const tsafe_sealed_site *site = q->site;
    const tsafe_sealed_layout *l = &site->l2;
    uint32_t rank = site->rank, m = s->plan.checks;
    size_t width = (size_t)rank + m, n = tsafe_bfv_context_n(s->c2);
    size_t kb = (size_t)m * rank * sizeof(int32_t), hb = (size_t)site->d_out * m * sizeof(int16_t);
    size_t mb = (size_t)site->d_out * width * sizeof(int64_t);
    int32_t *K = malloc(kb);
    int16_t *H = malloc(hb);
    int64_t *M = malloc(mb), *coeff = malloc(n * sizeof *coeff);
    tsafe_status st = K && H && M && coeff ? TSAFE_OK : TSAFE_E_NOMEM;
    if (st == TSAFE_OK) {
        tsafe_sealed_check_matrix(&s->plan, rank, q->w, K);
        st = tsafe_sealed_fold_matrix(&s->plan, site, q->hseed, K, H, M);
    }
    for (uint32_t c = 0; c < l->n_chunks && st == TSAFE_OK; c++)
        for (uint32_t b = 0; b < l->n_blocks && st == TSAFE_OK; b++) {
            tsafe_sealed_encode_block(l, M, (uint32_t)width, c, b, coeff, n);
            st = tsafe_bfv_plain_encode_buffer(s->c2, coeff, n,
                                               s->ptb[q->pt0 + (size_t)c * l->n_blocks + b]);
        }
    if (st == TSAFE_OK)
        part_masks(s, q, K, H);
    if (K)
        sodium_memzero(K, kb);
    if (H)
        sodium_memzero(H, hb);
    if (M)
        sodium_memzero(M, mb);
    if (coeff)
        sodium_memzero(coeff, n * sizeof *coeff);
    free(K);
    free(H);
    free(M);
    free(coeff);
    return st;
}

/* Part p's masks (and a checked plan's fold, which writes them). */
static tsafe_status part_finish(tsafe_sealed_server *s, const round2_part *q)
{
    if (s->plan.checks)
        return part_fold(s, q);
    part_masks(s, q, NULL, NULL);
    return TSAFE_OK;
}

/* Task t of round2_fill: parts t, t + T, ... of the group decoded (their
 * share ciphertexts, c1 from the seeds) and their masks written. */
static void fill_task(void *arg, size_t t)
{
    round2_group *g = arg;
    tsafe_sealed_server *s = g->s;
    size_t ctl = tsafe_bfv_ct_bytes(s->c2);
    tsafe_status st = TSAFE_OK;
    for (size_t p = t; p < g->n && st == TSAFE_OK; p += g->threads) {
        const round2_part *q = &g->part[p];
        st = tsafe_bfv_ct_read_buffers(s->c2, q->ct0, ctl, q->site->l2.n_chunks, s->zb + q->z0);
        if (st == TSAFE_OK)
            st = part_finish(s, q);
    }
    g->st[t] = st;
}

/* A device's round2_fill: every share ciphertext of the group in one
 * read (spread over the message between the sites' headers; one slot call,
 * where one per site cost several runtime calls each), then the masks. */
static tsafe_status fill_device(tsafe_sealed_server *s, round2_group *g)
{
    size_t ctl = tsafe_bfv_ct_bytes(s->c2);
    const uint8_t **at = malloc((g->zused ? g->zused : 1) * sizeof *at);
    if (!at)
        return TSAFE_E_NOMEM;
    for (size_t p = 0; p < g->n; p++)
        for (uint32_t c = 0; c < g->part[p].site->l2.n_chunks; c++)
            at[g->part[p].z0 + c] = g->part[p].ct0 + c * ctl;
    tsafe_status st = tsafe_bfv_ct_read_buffers_at(s->c2, at, ctl, g->zused, s->zb);
    free(at);
    for (size_t p = 0; p < g->n && st == TSAFE_OK; p++)
        st = part_finish(s, &g->part[p]);
    return st;
}

/* The group's share ciphertexts decoded and its masks written, over the
 * pool's threads when the shares are host memory (no backend call then,
 * so threads may share the backend); a device's in one read (fill_device,
 * its uploads on this thread). */
static tsafe_status round2_fill(tsafe_sealed_server *s, round2_group *g)
{
    g->s = s;
    if (tsafe_buffer_host_words(s->zb[0]) == NULL)
        return fill_device(s, g);
    g->threads = host_tasks(s, g->n);
    tsafe_cpu_pool_run(g->threads > 1 ? s->pool : NULL, g->threads, fill_task, g);
    for (size_t t = 0; t < g->threads; t++)
        if (g->st[t] != TSAFE_OK)
            return g->st[t];
    return TSAFE_OK;
}

/* One site of a sealed-private round 2, joined to the group: its share
 * ciphertexts' bytes, C and the Gaussians of its output noise (drawn
 * here, in the draws' order), then per block the queued sealing of the
 * block's accumulator, its masks left to round2_fill (which also decodes
 * the shares, over the pool's threads); the group's products fill the
 * accumulators, the flush seals them. */
static tsafe_status round2_site(tsafe_sealed_server *s, const tsafe_sealed_site *site,
                                size_t i, tsafe_rbuf *r, tsafe_wbuf *w, round2_group *g)
{
    const tsafe_sealed_layout *l = &site->l2;
    round2_part *q = &g->part[g->n];
    q->site = site;
    tsafe_status st = take_shares(s, site, r, g, q);
    if (st != TSAFE_OK)
        return st;
    int64_t *C = s->C + s->off[i];
    tsafe_sealed_round2_c(&s->plan, site, s->R + s->off[i], C);
    q->C = C;
    q->z = g->z + g->n * (size_t)s->plan.rank;
    tsafe_sealed_put_site2(w, site);
    tsafe_sealed_draw_out_z(&s->draws, site->rank, q->z);
    st = tsafe_sealed_opcache_get(&s->cache, s->be1, s->be2, site, &q->ops);
    q->acc0 = s->sealq.n; /* one accumulator per queued sealing */
    if (st == TSAFE_OK)
        st = tsafe_sealed_pool_reserve(s->be2, &s->accs2, &s->n_accs2, q->acc0 + l->n_blocks, 2);
    if (st == TSAFE_OK && s->plan.checks) { /* its H's seed, in the draws' order */
        q->w = s->W + g->w_next;
        g->w_next += (size_t)site->l1.n_blocks * s->plan.rows1;
        tsafe_sealed_draw_masks(&s->draws, (uint64_t *)(void *)q->hseed, 4);
        q->pt0 = g->ptused;
        g->ptused += (size_t)l->n_chunks * l->n_blocks;
        st = tsafe_sealed_pool_reserve(s->be2, &s->ptb, &s->n_ptb, g->ptused, 1);
    }
    memset(s->mask, 0, (size_t)l->rows * sizeof *s->mask); /* written by round2_fill */
    for (uint32_t b = 0; b < l->n_blocks && st == TSAFE_OK; b++)
        st = tsafe_sealed_server_seal(s, s->c2, s->sealer2, s->accs2[q->acc0 + b], s->pkb2,
                                      s->res2, l, b, TSAFE_BFV_FLOOD_STEP, w);
    g->n++;
    return st;
}

/* The group's shares decoded (round2_fill), its products, then its queued
 * sealings; the group starts over. */
static tsafe_status round2_flush(tsafe_sealed_server *s, round2_group *g, tsafe_wbuf *w,
                                 double *prod_us)
{
    double p0 = tsafe_now_us();
    tsafe_status st = g->n ? round2_fill(s, g) : TSAFE_OK;
    if (st == TSAFE_OK && g->n)
        st = round2_products(s, g);
    *prod_us += tsafe_now_us() - p0;
    tsafe_status fs = TSAFE_OK;
    if (st == TSAFE_OK) /* the queued sealings, at once */
        fs = tsafe_sealed_server_seal_flush(s, w);
    else /* a share that does not decode: nothing is sealed */
        tsafe_sealed_sealq_discard(&s->sealq);
    sodium_memzero(g->z, g->n * (size_t)s->plan.rank * sizeof *g->z);
    for (size_t p = 0; p < g->n; p++)
        sodium_memzero(g->part[p].hseed, sizeof g->part[p].hseed);
    g->n = g->zused = g->ptused = 0;
    return st != TSAFE_OK ? st : fs;
}

/* sealed-private: Enc(f) -> Enc(B_q u~), u~ = f + C mod t2 with f the
 * client's read of round 1 (u / 2^k + t2/2 - R at t2's step, plan
 * version 7: no wrap to resolve, docs/PROTOCOL.md). Sites go in groups:
 * one product call and one flush of the sealings per
 * TSAFE_SEALED_ROUND2_QUEUE sealings (each queued sealing holds an
 * accumulator: a token's worth is megabytes; on a batching backend, a
 * GPU, _BATCHED: fewer, larger device calls). */
static tsafe_status round2_private(tsafe_sealed_server *s,
                                   const tsafe_sealed_site *const *sites,
                                   size_t n_sites, tsafe_rbuf *r, tsafe_wbuf *w,
                                   double *prod_us)
{
    tsafe_status st = TSAFE_OK;
    size_t lim = tsafe_bfv_sealer_batches(s->sealer2) ? TSAFE_SEALED_ROUND2_QUEUE_BATCHED
                                                      : TSAFE_SEALED_ROUND2_QUEUE;
    round2_group *g = calloc(1, sizeof *g);
    if (g)
        g->z = malloc(lim * (size_t)s->plan.rank * sizeof *g->z);
    if (!g || !g->z) {
        free(g);
        return TSAFE_E_NOMEM;
    }
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        st = round2_site(s, sites[i], i, r, w, g);
        if (st == TSAFE_OK && (s->sealq.n >= lim || g->n == lim))
            st = round2_flush(s, g, w, prod_us);
    }
    if (st == TSAFE_OK)
        st = round2_flush(s, g, w, prod_us); /* the rest */
    else /* a part may lack its operands: no products, no sealings */
        tsafe_sealed_sealq_discard(&s->sealq);
    sodium_memzero(g->z, lim * (size_t)s->plan.rank * sizeof *g->z);
    free(g->z);
    free(g);
    return st;
}

/* A message that fails ends the session (a new hello starts another): the
 * masks go at once, so a client cannot try several second messages
 * against one token's masks. */
static void abort_session(tsafe_sealed_server *s)
{
    tsafe_sealed_server_wipe_masks(s);
    s->await_round2 = 0;
    s->have_session = 0;
}

/* The share message's header, tag and site count. */
static tsafe_status read_share_head(tsafe_sealed_server *s, tsafe_rbuf *r, size_t n_sites)
{
    int priv = s->plan.mode == TSAFE_SEALED_PRIVATE;
    uint32_t ns;
    tsafe_status st;
    if ((st = tsafe_rbuf_header(r, priv ? TSAFE_MSG_SEALED_SHARE_CT
                                        : TSAFE_MSG_SEALED_SHARE)) != TSAFE_OK ||
        (st = tsafe_sealed_get_tag(r, &s->tag)) != TSAFE_OK)
        return st;
    if (!tsafe_rbuf_u32(r, &ns))
        return TSAFE_E_TRUNCATED;
    return ns == n_sites ? TSAFE_OK : TSAFE_E_FORMAT;
}

/* Round 2 of a pending token (the sites checked against it). */
static tsafe_status round2(tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                           size_t n_sites, const uint8_t *msg, size_t len, uint8_t **out,
                           size_t *out_len, tsafe_lora_stats *stats)
{
    double t0 = tsafe_now_us(), prod_us = 0;
    int priv = s->plan.mode == TSAFE_SEALED_PRIVATE;
    tsafe_rbuf r = {msg, len, 0};
    tsafe_status st = read_share_head(s, &r, n_sites);
    if (st != TSAFE_OK)
        return st;
    tsafe_wbuf w = {0};
    uint8_t kind = priv ? TSAFE_MSG_SEALED_RESPONSE2 : TSAFE_MSG_SEALED_DELTA;
    tsafe_wbuf_presize(&w, tsafe_sealed_message_bytes(&s->plan, sites, n_sites, kind));
    tsafe_wbuf_header(&w, kind);
    tsafe_sealed_put_tag(&w, &s->tag);
    tsafe_wbuf_u32(&w, (uint32_t)n_sites);
    st = priv ? round2_private(s, sites, n_sites, &r, &w, &prod_us)
              : round2_sealed(s, sites, n_sites, &r, &w);
    if (st == TSAFE_OK && r.pos != len)
        st = TSAFE_E_FORMAT;
    if (st == TSAFE_OK && w.failed)
        st = TSAFE_E_NOMEM;
    if (st != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    s->seals2 = 0;
    for (size_t i = 0; priv && i < n_sites; i++)
        s->seals2 += sites[i]->l2.n_blocks;
    /* the token is done: its masks go, the next query must be seq + 1 */
    tsafe_sealed_server_wipe_masks(s);
    s->await_round2 = 0;
    s->tag.seq++;
    *out = w.buf;
    *out_len = w.len;
    if (stats) {
        stats->products_us += prod_us;
        stats->bu_us += tsafe_now_us() - t0 - prod_us;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_server_round2(tsafe_sealed_server *s,
                                        const tsafe_sealed_site *const *sites,
                                        size_t n_sites, const uint8_t *msg,
                                        size_t len, uint8_t **out, size_t *out_len,
                                        tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(s && msg && out && out_len, TSAFE_E_NULL);
    *out = NULL;
    *out_len = 0;
    tsafe_status st = tsafe_sealed_server_check_pending(s, sites, n_sites);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(s->be1, TSAFE_E_STATE); /* a failed use_backend left none */
    st = round2(s, sites, n_sites, msg, len, out, out_len, stats);
    if (st != TSAFE_OK)
        abort_session(s);
    return st;
}
