/* Sealed client: derives/validates the plan, holds the secret keys, never
 * an adapter. Per token: query (encrypt x), respond (decrypt the shares;
 * send them noised, or re-encrypted), finish (read delta). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "clock.h"
#include "sealed_internal.h"
#include "tsafe_check.h"
#include "../dp/dp_release.h"

static void drop_keys(tsafe_sealed_client *c)
{
    tsafe_bfv_secret_key_free(c->sk1);
    tsafe_bfv_secret_key_free(c->sk2);
    tsafe_bfv_public_key_free(c->pk1);
    tsafe_bfv_public_key_free(c->pk2);
    c->sk1 = c->sk2 = NULL;
    c->pk1 = c->pk2 = NULL;
}

/* Fresh keys (a new epoch): the client's defence against a server that
 * would collect decryption-derived data under one key for long. */
static tsafe_status new_keys(tsafe_sealed_client *c, const uint8_t *seed)
{
    drop_keys(c);
    uint8_t s[4][32], *sp[4] = {NULL, NULL, NULL, NULL};
    if (seed) {
        const char *labels[4] = {"sk1", "pk1", "sk2", "pk2"};
        for (int i = 0; i < 4; i++) {
            uint8_t lab[40];
            memcpy(s[i], seed, 32);
            /* per-epoch, per-purpose seeds from the test seed */
            snprintf((char *)lab, sizeof lab, "tsafe-sealed-%s-%u", labels[i], c->tag.epoch);
            crypto_generichash(s[i], 32, lab, strlen((char *)lab), seed, 32);
            sp[i] = s[i];
        }
    }
    tsafe_status st = tsafe_bfv_secret_key_generate(c->c1, sp[0], &c->sk1);
    if (st == TSAFE_OK)
        st = tsafe_bfv_public_key_generate(c->c1, c->sk1, sp[1], &c->pk1);
    if (st == TSAFE_OK && c->c2)
        st = tsafe_bfv_secret_key_generate(c->c2, sp[2], &c->sk2);
    if (st == TSAFE_OK && c->c2)
        st = tsafe_bfv_public_key_generate(c->c2, c->sk2, sp[3], &c->pk2);
    sodium_memzero(s, sizeof s);
    c->tokens = 0;
    c->tag.seq = 0;
    c->needs_hello = 1;
    c->state = IDLE;
    return st;
}

void tsafe_sealed_client_free(tsafe_sealed_client *c)
{
    if (!c)
        return;
    drop_keys(c);
    size_t n = c->c1 ? tsafe_bfv_context_n(c->c1) : 0;
    if (c->xq)
        sodium_memzero(c->xq, c->plan.d_in * sizeof *c->xq);
    if (c->z)
        sodium_memzero(c->z, n * sizeof *c->z);
    if (c->m)
        sodium_memzero(c->m, n * sizeof *c->m);
    free(c->xq);
    free(c->z);
    free(c->m);
    free(c->pos);
    tsafe_bfv_ct_free(c->ct1);
    tsafe_bfv_ct_free(c->ct2);
    tsafe_bfv_sealed_free(c->res1);
    tsafe_bfv_sealed_free(c->res2);
    tsafe_bfv_context_free(c->c1);
    tsafe_bfv_context_free(c->c2);
    sodium_memzero(&c->sx, sizeof c->sx);
    free(c);
}

tsafe_status tsafe_sealed_client_create(const tsafe_sealed_plan *plan,
                                        const uint8_t *seed,
                                        tsafe_sealed_client **out)
{
    TSAFE_REQUIRE(plan && out, TSAFE_E_NULL);
    *out = NULL;
    /* the client's own derivation decides: anything else is refused */
    tsafe_status st = tsafe_sealed_plan_check(plan);
    if (st != TSAFE_OK)
        return st;
    tsafe_sealed_client *c = calloc(1, sizeof *c);
    if (!c)
        return TSAFE_E_NOMEM;
    c->plan = *plan;
    TSAFE_TRY(tsafe_sealed_contexts(plan, &c->c1, &c->c2));
    size_t n = tsafe_bfv_context_n(c->c1);
    c->xq = calloc(plan->d_in, sizeof *c->xq);
    c->z = calloc(n, sizeof *c->z);
    c->m = calloc(n, sizeof *c->m);
    c->pos = calloc(n, sizeof *c->pos);
    TSAFE_CHECK(c->xq && c->z && c->m && c->pos, TSAFE_E_NOMEM);
    TSAFE_TRY(tsafe_bfv_ct_create(c->c1, &c->ct1));
    TSAFE_TRY(tsafe_bfv_sealed_create(c->c1, n, &c->res1));
    if (c->c2) {
        TSAFE_TRY(tsafe_bfv_ct_create(c->c2, &c->ct2));
        TSAFE_TRY(tsafe_bfv_sealed_create(c->c2, n, &c->res2));
    }
    if (seed)
        memcpy(c->tag.session, seed, TSAFE_SEALED_SESSION_BYTES);
    else
        randombytes_buf(c->tag.session, TSAFE_SEALED_SESSION_BYTES);
    TSAFE_TRY(new_keys(c, seed));
    *out = c;
    return TSAFE_OK;
fail:
    tsafe_sealed_client_free(c);
    return st;
}

int tsafe_sealed_client_needs_hello(const tsafe_sealed_client *c)
{
    return c ? c->needs_hello : 0;
}

tsafe_status tsafe_sealed_client_hello(tsafe_sealed_client *c, uint8_t **msg,
                                       size_t *len)
{
    TSAFE_REQUIRE(c && msg && len, TSAFE_E_NULL);
    *msg = NULL;
    *len = 0;
    uint8_t fp[32];
    tsafe_sealed_plan_fingerprint(&c->plan, fp);
    size_t l1 = tsafe_bfv_public_key_bytes(c->c1);
    size_t l2 = c->c2 ? tsafe_bfv_public_key_bytes(c->c2) : 0;
    tsafe_wbuf w = {0};
    tsafe_wbuf_header(&w, TSAFE_MSG_SEALED_HELLO);
    tsafe_wbuf_bytes(&w, fp, 32);
    tsafe_wbuf_bytes(&w, c->tag.session, TSAFE_SEALED_SESSION_BYTES);
    tsafe_wbuf_u32(&w, c->tag.epoch);
    /* one reservation: a second one may move the buffer under the first */
    uint8_t *p1 = tsafe_wbuf_reserve(&w, l1 + l2), *p2 = p1 ? p1 + l1 : NULL;
    tsafe_status st = p1 ? TSAFE_OK : TSAFE_E_NOMEM;
    if (st == TSAFE_OK)
        st = tsafe_bfv_public_key_write(c->c1, c->pk1, p1, l1);
    if (st == TSAFE_OK && l2)
        st = tsafe_bfv_public_key_write(c->c2, c->pk2, p2, l2);
    if (st != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    c->needs_hello = 0;
    *msg = w.buf;
    *len = w.len;
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_client_query(tsafe_sealed_client *c, const float *x,
                                       uint8_t **msg, size_t *len,
                                       tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(c && x && msg && len, TSAFE_E_NULL);
    *msg = NULL;
    *len = 0;
    TSAFE_REQUIRE(!c->needs_hello && c->state == IDLE, TSAFE_E_STATE);
    const tsafe_sealed_plan *p = &c->plan;
    double t0 = tsafe_now_us(), l2 = 0;
    for (uint32_t j = 0; j < p->d_in; j++) {
        TSAFE_REQUIRE(isfinite(x[j]), TSAFE_E_VALUE_RANGE);
        l2 += (double)x[j] * (double)x[j];
    }
    TSAFE_REQUIRE(isfinite(l2), TSAFE_E_VALUE_RANGE);
    /* Per-token scale on the L2 norm: ||x_q||_2 <= X2 (tsafe_sealed_x2; the
     * sqrt(d_in) / 2 + 1 absorbs the roundings), so the server's bounds
     * hold for every x, dense or one-hot, and a typical x uses them well.
     * The scale never leaves the client. */
    double x2 = tsafe_sealed_x2(p) - sqrt((double)p->d_in) / 2 - 1;
    c->sx = l2 > 0 ? sqrt(l2) / x2 : 1.0;
    TSAFE_REQUIRE(c->sx > 0 && isfinite(c->sx), TSAFE_E_VALUE_RANGE);
    for (uint32_t j = 0; j < p->d_in; j++)
        c->xq[j] = (int64_t)lrint(x[j] / c->sx);
    size_t ctl = tsafe_bfv_ct_bytes(c->c1);
    tsafe_wbuf w = {0};
    tsafe_wbuf_presize(&w, tsafe_sealed_part_bytes(p, TSAFE_MSG_SEALED_QUERY, 0, 0));
    tsafe_wbuf_header(&w, TSAFE_MSG_SEALED_QUERY);
    tsafe_sealed_put_tag(&w, &c->tag);
    tsafe_wbuf_u32(&w, p->n_chunks1);
    tsafe_status st = TSAFE_OK;
    for (uint32_t ch = 0; ch < p->n_chunks1 && st == TSAFE_OK; ch++) {
        uint32_t from = ch * p->chunk1;
        uint32_t cnt = from + p->chunk1 <= p->d_in ? p->chunk1 : p->d_in - from;
        /* sealed-private: at the scale Q / (t 2^K), so that round 1 reads
         * u / 2^K (a site's plaintexts carry 2^(K - k)) at t's step */
        st = tsafe_bfv_encrypt_frac(c->c1, c->sk1, c->xq + from, cnt,
                                    p->mode == TSAFE_SEALED_PRIVATE ? p->trunc_bits : 0, NULL,
                                    c->ct1);
        uint8_t *dst = st == TSAFE_OK ? tsafe_wbuf_reserve(&w, ctl) : NULL;
        if (st == TSAFE_OK)
            st = dst ? tsafe_bfv_ct_write(c->c1, c->ct1, dst, ctl) : TSAFE_E_NOMEM;
    }
    sodium_memzero(c->xq, p->d_in * sizeof *c->xq);
    if (st != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    c->state = QUERIED;
    *msg = w.buf;
    *len = w.len;
    if (stats) {
        stats->encrypt_us += tsafe_now_us() - t0;
        stats->bytes_up += w.len;
        stats->tokens += 1;
    }
    return TSAFE_OK;
}

/* Take one sealed result of `reads` coefficients from r and decrypt them
 * into m (values mod t). */
static tsafe_status read_block(const tsafe_bfv_context *ctx, const tsafe_bfv_secret_key *sk,
                               tsafe_bfv_sealed *res, tsafe_rbuf *r, const uint32_t *pos,
                               uint32_t reads, uint64_t *m)
{
    size_t need = tsafe_bfv_sealed_bytes(ctx, reads);
    const uint8_t *p = tsafe_rbuf_take(r, need);
    if (!p)
        return TSAFE_E_TRUNCATED;
    tsafe_status st = tsafe_bfv_sealed_read(ctx, p, need, reads, res);
    return st == TSAFE_OK ? tsafe_bfv_decrypt_reads(ctx, sk, res, pos, reads, m) : st;
}

/* Decrypt one site's round-1 blocks into c->m[0..rank) (values mod t),
 * then a checked plan's checked reads into c->m[rank..rank + checks):
 * one more result, read at rows 0..checks-1. */
static tsafe_status decrypt_site(tsafe_sealed_client *c, tsafe_rbuf *r, uint32_t rank)
{
    const tsafe_sealed_plan *p = &c->plan;
    tsafe_sealed_layout l, lc;
    tsafe_sealed_layout1(p, rank, &l);
    for (uint32_t b = 0; b < l.n_blocks; b++) {
        uint32_t reads = tsafe_sealed_block_reads(&l, b, c->pos);
        tsafe_status st = read_block(c->c1, c->sk1, c->res1, r, c->pos, reads,
                                     c->m + (size_t)b * l.rows);
        if (st != TSAFE_OK)
            return st;
    }
    if (!p->checks)
        return TSAFE_OK;
    tsafe_sealed_layout_checks(p, &lc);
    uint32_t reads = tsafe_sealed_block_reads(&lc, 0, c->pos);
    return read_block(c->c1, c->sk1, c->res1, r, c->pos, reads, c->m + rank);
}

/* v mod t (v < t) as the representative in [-t/2, t/2). */
static int64_t centred(uint64_t v, uint64_t t)
{
    return v >= t / 2 ? (int64_t)v - (int64_t)t : (int64_t)v;
}

/* sealed-private: encrypt the reads f (values mod t2, centred: each
 * encodes, whatever was decrypted) */
static tsafe_status share_ct(tsafe_sealed_client *c, uint32_t rank, uint32_t d_out,
                             tsafe_wbuf *w)
{
    const tsafe_sealed_plan *p = &c->plan;
    tsafe_sealed_layout l;
    tsafe_sealed_layout2(p, rank, d_out, &l);
    uint64_t t = 1ull << p->r1.t_bits;
    size_t ctl = tsafe_bfv_ct_bytes(c->c2);
    tsafe_wbuf_u32(w, rank);
    tsafe_wbuf_u32(w, l.n_chunks);
    tsafe_status st = TSAFE_OK;
    uint32_t len = rank + p->checks; /* f, then f_e */
    for (uint32_t ch = 0; ch < l.n_chunks && st == TSAFE_OK; ch++) {
        uint32_t from = ch * l.chunk;
        uint32_t cnt = from + l.chunk <= len ? l.chunk : len - from;
        for (uint32_t k = 0; k < cnt; k++)
            c->z[k] = centred(c->m[from + k], t);
        st = tsafe_bfv_encrypt(c->c2, c->sk2, c->z, cnt, NULL, c->ct2);
        uint8_t *dst = st == TSAFE_OK ? tsafe_wbuf_reserve(w, ctl) : NULL;
        if (st == TSAFE_OK)
            st = dst ? tsafe_bfv_ct_write(c->c2, c->ct2, dst, ctl) : TSAFE_E_NOMEM;
    }
    return st;
}

/* sealed: u + n in the clear, n drawn for one DP release per site (sites
 * share x but each reveals its u). */
static tsafe_status share_noised(tsafe_sealed_client *c, uint32_t rank, double scale_a,
                                 tsafe_dp_session *dp, tsafe_wbuf *w)
{
    uint64_t t = 1ull << c->plan.r1.t_bits;
    double sigma = 0;
    tsafe_status st;
    if (dp && (st = tsafe_dp_session_charge(dp, &sigma)) != TSAFE_OK)
        return st;
    tsafe_wbuf_u32(w, rank);
    /* in integer units of the scales; the server's scale_a is trusted
     * (sealed mode assumes a semi-honest server, THREAT_MODEL.md), but
     * clamped so that no field can make the sampler fail or vanish */
    double sig_int = sigma > 0 ? fmin(fmax(sigma / (c->sx * scale_a), 1.0), 0x1p40) : 0;
    st = TSAFE_OK;
    for (uint32_t k = 0; k < rank && st == TSAFE_OK; k++) {
        int64_t noise = 0;
        if (sig_int > 0)
            st = tsafe_dp_discrete_gaussian(sig_int, &noise);
        uint64_t v = (c->m[k] + (uint64_t)noise) & (t - 1);
        tsafe_wbuf_u64(w, v);
    }
    return st;
}

/* One site's part of response 1: its public fields checked against the
 * rank and d_out the caller expects, its blocks decrypted (*dec_us: the
 * time that took), then its share written to w: re-encrypted
 * (sealed-private) or noised (sealed). */
static tsafe_status respond_site(tsafe_sealed_client *c, tsafe_rbuf *r, tsafe_wbuf *w,
                                 uint32_t want_rank, uint32_t want_d_out, tsafe_dp_session *dp,
                                 double *dec_us)
{
    int priv = c->plan.mode == TSAFE_SEALED_PRIVATE;
    uint32_t rank, d_out;
    double scale_a = 1;
    if (!tsafe_rbuf_u32(r, &rank) || !tsafe_rbuf_u32(r, &d_out) ||
        (!priv && !tsafe_rbuf_f64(r, &scale_a)))
        return TSAFE_E_TRUNCATED;
    /* public fields only, checked before this site is decrypted: a
     * refusal tells nothing of x (sealed-private's shares are values mod
     * t2, each encodes: no decrypted value can fail round 2) */
    if (rank != want_rank || d_out != want_d_out || !(scale_a >= 0x1p-100) ||
        !(scale_a <= 0x1p100))
        return TSAFE_E_FORMAT;
    double d0 = tsafe_now_us();
    tsafe_status st = decrypt_site(c, r, rank);
    if (st != TSAFE_OK)
        return st;
    *dec_us += tsafe_now_us() - d0;
    return priv ? share_ct(c, rank, d_out, w) : share_noised(c, rank, scale_a, dp, w);
}

static tsafe_status respond(tsafe_sealed_client *c, const uint8_t *response, size_t len,
                            size_t n_sites, const uint32_t *ranks, const uint32_t *d_outs,
                            tsafe_dp_session *dp, int allow_no_dp, uint8_t **msg,
                            size_t *out_len, tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(c && response && ranks && d_outs && msg && out_len, TSAFE_E_NULL);
    *msg = NULL;
    *out_len = 0;
    TSAFE_REQUIRE(c->state == QUERIED, TSAFE_E_STATE);
    TSAFE_REQUIRE(n_sites >= 1 && n_sites <= TSAFE_MSG_MAX_SITES, TSAFE_E_RANGE);
    int priv = c->plan.mode == TSAFE_SEALED_PRIVATE;
    /* sealed releases u + n to the server: no noise only on request */
    TSAFE_REQUIRE(priv || dp || allow_no_dp, TSAFE_E_ARG);
    for (size_t i = 0; i < n_sites; i++)
        TSAFE_REQUIRE(ranks[i] >= 1 && ranks[i] <= c->plan.rank && d_outs[i] >= 1 &&
                          d_outs[i] <= c->plan.d_out_max, TSAFE_E_RANGE);
    double t0 = tsafe_now_us(), dec_us = 0;
    tsafe_rbuf r = {response, len, 0};
    tsafe_status st;
    uint32_t ns;
    if ((st = tsafe_rbuf_header(&r, TSAFE_MSG_SEALED_RESPONSE1)) != TSAFE_OK ||
        (st = tsafe_sealed_get_tag(&r, &c->tag)) != TSAFE_OK)
        return st;
    if (!tsafe_rbuf_u32(&r, &ns))
        return TSAFE_E_TRUNCATED;
    if (ns != n_sites)
        return TSAFE_E_FORMAT;
    tsafe_wbuf w = {0};
    uint8_t kind = priv ? TSAFE_MSG_SEALED_SHARE_CT : TSAFE_MSG_SEALED_SHARE;
    size_t want = 0;
    for (size_t i = 0; i < n_sites; i++)
        want += tsafe_sealed_part_bytes(&c->plan, kind, ranks[i], d_outs[i]);
    tsafe_wbuf_presize(&w, want);
    tsafe_wbuf_header(&w, kind);
    tsafe_sealed_put_tag(&w, &c->tag);
    tsafe_wbuf_u32(&w, (uint32_t)n_sites);
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++)
        st = respond_site(c, &r, &w, ranks[i], d_outs[i], dp, &dec_us);
    size_t n = tsafe_bfv_context_n(c->c1);
    sodium_memzero(c->m, n * sizeof *c->m);
    sodium_memzero(c->z, n * sizeof *c->z);
    if (st == TSAFE_OK && r.pos != len)
        st = TSAFE_E_FORMAT;
    if (st == TSAFE_OK && w.failed)
        st = TSAFE_E_NOMEM;
    if (st != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    c->state = RESPONDED;
    c->n_sites = n_sites;
    *msg = w.buf;
    *out_len = w.len;
    if (stats) {
        stats->decrypt_us += dec_us;
        stats->sums_us += tsafe_now_us() - t0 - dec_us;
        stats->bytes_down += len;
        stats->bytes_up += w.len;
    }
    return TSAFE_OK;
}

/* The output scales a response 2 may carry: outside this range a float
 * delta could not hold a product (checked before decrypting, on a public
 * field, so a refusal tells nothing of x). */
static tsafe_status finish_private(tsafe_sealed_client *c, tsafe_rbuf *r,
                                   uint32_t d_out, float *delta)
{
    double scale;
    if (!tsafe_rbuf_f64(r, &scale))
        return TSAFE_E_TRUNCATED;
    if (!(scale >= 0x1p-300) || !(scale <= 0x1p200))
        return TSAFE_E_FORMAT;
    const uint8_t *exps = tsafe_rbuf_take(r, d_out); /* row j on scale 2^-exps[j] */
    if (!exps)
        return TSAFE_E_TRUNCATED;
    for (uint32_t j = 0; j < d_out; j++)
        if (exps[j] > 63 && exps[j] != TSAFE_SEALED_ROW_ZERO)
            return TSAFE_E_FORMAT;
    tsafe_sealed_layout l;
    tsafe_sealed_layout2(&c->plan, c->plan.rank, d_out, &l);
    /* the layout's chunking of the input does not change the reads */
    uint64_t t2 = 1ull << c->plan.r2.t_bits;
    tsafe_status st = TSAFE_OK;
    for (uint32_t b = 0; b < l.n_blocks && st == TSAFE_OK; b++) {
        uint32_t reads = tsafe_sealed_block_reads(&l, b, c->pos);
        st = read_block(c->c2, c->sk2, c->res2, r, c->pos, reads, c->m);
        for (uint32_t k = 0; k < reads && st == TSAFE_OK; k++) {
            int64_t v = centred(c->m[k], t2);
            size_t row = (size_t)b * l.rows + k;
            /* a zero row is exactly zero (its read may be off by one) */
            float d = exps[row] == TSAFE_SEALED_ROW_ZERO
                          ? 0.0f
                          : (float)(c->sx * scale * ldexp((double)v, -(int)exps[row]));
            /* only a product too large for a float: the true delta itself */
            if (!isfinite(d))
                st = TSAFE_E_VALUE_RANGE;
            delta[row] = d;
        }
    }
    return st;
}

static tsafe_status finish(tsafe_sealed_client *c, const uint8_t *msg,
                                        size_t len, size_t n_sites,
                                        const uint32_t *d_outs, float *const *delta,
                                        tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(c && msg && d_outs && delta, TSAFE_E_NULL);
    TSAFE_REQUIRE(c->state == RESPONDED, TSAFE_E_STATE);
    TSAFE_REQUIRE(n_sites == c->n_sites, TSAFE_E_RANGE);
    int priv = c->plan.mode == TSAFE_SEALED_PRIVATE;
    double t0 = tsafe_now_us();
    tsafe_rbuf r = {msg, len, 0};
    tsafe_status st;
    uint32_t ns;
    if ((st = tsafe_rbuf_header(&r, priv ? TSAFE_MSG_SEALED_RESPONSE2
                                         : TSAFE_MSG_SEALED_DELTA)) != TSAFE_OK ||
        (st = tsafe_sealed_get_tag(&r, &c->tag)) != TSAFE_OK)
        return st;
    if (!tsafe_rbuf_u32(&r, &ns))
        return TSAFE_E_TRUNCATED;
    if (ns != n_sites)
        return TSAFE_E_FORMAT;
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        uint32_t d_out;
        if (!delta[i]) {
            st = TSAFE_E_NULL;
            break;
        }
        if (!tsafe_rbuf_u32(&r, &d_out)) {
            st = TSAFE_E_TRUNCATED;
            break;
        }
        if (d_out != d_outs[i]) {
            st = TSAFE_E_FORMAT;
            break;
        }
        if (priv) {
            st = finish_private(c, &r, d_out, delta[i]);
            continue;
        }
        for (uint32_t j = 0; j < d_out && st == TSAFE_OK; j++) {
            float v;
            if (!tsafe_rbuf_f32(&r, &v))
                st = TSAFE_E_TRUNCATED;
            else if (!isfinite(v))
                st = TSAFE_E_FORMAT;
            else if (!(fabs(c->sx * v) <= FLT_MAX))
                st = TSAFE_E_VALUE_RANGE; /* a delta beyond float32 (huge x) */
            else
                delta[i][j] = (float)(c->sx * v);
        }
    }
    /* decrypted values of earlier sites go, whatever happened */
    sodium_memzero(c->m, tsafe_bfv_context_n(c->c1) * sizeof *c->m);
    if (st != TSAFE_OK)
        return st;
    if (r.pos != len)
        return TSAFE_E_FORMAT;
    c->state = IDLE;
    c->tag.seq++;
    if (++c->tokens >= c->plan.rotate_after) {
        c->tag.epoch++;
        if ((st = new_keys(c, NULL)) != TSAFE_OK)
            return st;
    }
    if (stats) {
        stats->decrypt_us += tsafe_now_us() - t0;
        stats->bytes_down += len;
    }
    return TSAFE_OK;
}

/* A token that failed after its query went out ends the session: a later
 * response for it (a host retrying) or for any later token is refused, so
 * a server gets at most one failure per session to learn from. */
tsafe_status tsafe_sealed_client_respond(tsafe_sealed_client *c, const uint8_t *response,
                                         size_t len, size_t n_sites, const uint32_t *ranks,
                                         const uint32_t *d_outs, tsafe_dp_session *dp,
                                         int allow_no_dp, uint8_t **msg, size_t *out_len,
                                         tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(c && response && ranks && d_outs && msg && out_len, TSAFE_E_NULL);
    *msg = NULL;
    *out_len = 0;
    TSAFE_REQUIRE(c->state == QUERIED, TSAFE_E_STATE);
    tsafe_status st = respond(c, response, len, n_sites, ranks, d_outs, dp, allow_no_dp,
                              msg, out_len, stats);
    if (st != TSAFE_OK)
        c->state = FAILED;
    return st;
}

tsafe_status tsafe_sealed_client_finish(tsafe_sealed_client *c, const uint8_t *msg,
                                        size_t len, size_t n_sites,
                                        const uint32_t *d_outs, float *const *delta,
                                        tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(c && msg && d_outs && delta, TSAFE_E_NULL);
    TSAFE_REQUIRE(c->state == RESPONDED, TSAFE_E_STATE);
    tsafe_status st = finish(c, msg, len, n_sites, d_outs, delta, stats);
    if (st != TSAFE_OK)
        c->state = FAILED;
    return st;
}

int tsafe_sealed_client_failed(const tsafe_sealed_client *c)
{
    return c ? c->state == FAILED : 0;
}
