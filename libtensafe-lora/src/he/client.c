/* Two-party client: holds the context and the secret key; never an
 * adapter. Encrypts x, decrypts the server's products into u, releases u'
 * (optionally with DP noise). */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "tensafe/lora_two_party.h"
#include "clock.h"
#include "he_internal.h"
#include "../wire/wire.h"

struct tsafe_lora_client {
    tsafe_context *ctx;
    tsafe_secret_key *sk;
    tsafe_lora_plan plan;
    tsafe_plaintext *pt;
    tsafe_ciphertext *ct; /* Enc(x) out, then the server's products in: public */
    double *re, *im;      /* packed x: wiped by tsafe_lora_encrypt_x */
    double *y;            /* decrypted coefficients (x_j A_ij sums): wiped after each use */
    size_t slots;
};

/* free() for buffers that held plaintext derived from x. */
static void wipe_free(void *p, size_t bytes)
{
    if (p) {
        sodium_memzero(p, bytes);
        free(p);
    }
}

void tsafe_lora_bytes_free(uint8_t *bytes) { free(bytes); }

tsafe_status tsafe_lora_client_create(const tsafe_lora_plan *plan,
                                      const uint8_t *seed, tsafe_lora_client **out)
{
    if (!plan || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_lora_client *c = calloc(1, sizeof *c);
    if (!c)
        return TSAFE_E_NOMEM;
    c->plan = *plan;
    tsafe_status st;
    if ((st = tsafe_context_create(&plan->params, &c->ctx)) != TSAFE_OK)
        goto fail;
    st = TSAFE_E_PARAMS_MISMATCH;
    if (plan->level > tsafe_context_max_level(c->ctx) || plan->cols == 0 ||
        plan->response_level > plan->level)
        goto fail;
    if ((st = tsafe_secret_key_generate(c->ctx, seed, &c->sk)) != TSAFE_OK ||
        (st = tsafe_plaintext_create(c->ctx, &c->pt)) != TSAFE_OK ||
        (st = tsafe_ciphertext_create(c->ctx, &c->ct)) != TSAFE_OK)
        goto fail;
    size_t slots = tsafe_context_slots(c->ctx);
    c->re = calloc(slots, sizeof *c->re);
    c->im = calloc(slots, sizeof *c->im);
    c->y = calloc(2 * (size_t)plan->cols, sizeof *c->y);
    c->slots = slots;
    st = TSAFE_E_NOMEM;
    if (!c->re || !c->im || !c->y)
        goto fail;
    *out = c;
    return TSAFE_OK;
fail:
    tsafe_lora_client_free(c);
    return st;
}

void tsafe_lora_client_free(tsafe_lora_client *c)
{
    if (!c)
        return;
    tsafe_ciphertext_free(c->ct);
    tsafe_plaintext_free(c->pt);
    tsafe_secret_key_free(c->sk);
    tsafe_context_free(c->ctx);
    wipe_free(c->re, c->slots * sizeof *c->re);
    wipe_free(c->im, c->slots * sizeof *c->im);
    wipe_free(c->y, 2 * (size_t)c->plan.cols * sizeof *c->y);
    free(c);
}

tsafe_status tsafe_lora_client_encrypt(tsafe_lora_client *c, const float *x,
                                       uint8_t **request, size_t *len,
                                       tsafe_lora_stats *stats)
{
    if (!c || !x || !request || !len)
        return TSAFE_E_NULL;
    *request = NULL;
    *len = 0;
    double t0 = tsafe_now_us();
    tsafe_status st;
    if ((st = tsafe_lora_encrypt_x(c->ctx, &c->plan, c->sk, x, c->re, c->im,
                                    c->ct)) != TSAFE_OK)
        return st;
    size_t ct_len;
    if ((st = tsafe_ciphertext_serialized_size(c->ctx, c->ct, &ct_len)) != TSAFE_OK)
        return st;
    if (ct_len > UINT32_MAX)
        return TSAFE_E_SIZE_OVERFLOW;
    tsafe_wbuf w = {0};
    tsafe_wbuf_header(&w, TSAFE_MSG_REQUEST);
    tsafe_wbuf_u32(&w, (uint32_t)ct_len);
    uint8_t *p = tsafe_wbuf_reserve(&w, ct_len);
    size_t written = 0;
    if (!p) {
        free(w.buf);
        return TSAFE_E_NOMEM;
    }
    if ((st = tsafe_ciphertext_serialize(c->ctx, c->ct, p, ct_len, &written)) != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    *request = w.buf;
    *len = w.len;
    if (stats) {
        stats->encrypt_us += tsafe_now_us() - t0;
        stats->bytes_up += w.len;
        stats->tokens += 1;
    }
    return TSAFE_OK;
}

/* The sites of a response after its header: decrypts each product into
 * c->y and reads u. The caller wipes c->y. */
static tsafe_status decode_sites(tsafe_lora_client *c, tsafe_rbuf *rb, size_t n_sites,
                                 const uint32_t *ranks, float *const *u, size_t stride,
                                 size_t K, double *dec_us, double *sum_us)
{
    tsafe_rbuf r = *rb;
    tsafe_status st;
    tsafe_lora_plan p = c->plan;
    double sum_t = 0, dec_t = 0;
    for (size_t s = 0; s < n_sites; s++) {
        uint32_t rank, nb;
        if (!u[s])
            return TSAFE_E_NULL;
        if (!tsafe_rbuf_u32(&r, &rank) || !tsafe_rbuf_u32(&r, &nb))
            return TSAFE_E_TRUNCATED;
        if (rank != ranks[s] || rank == 0 || nb != (rank + p.cols - 1) / p.cols)
            return TSAFE_E_FORMAT;
        p.rank = rank;
        for (uint32_t b = 0; b < nb; b++) {
            uint32_t clen;
            const uint8_t *blob;
            if (!tsafe_rbuf_u32(&r, &clen) || !(blob = tsafe_rbuf_take(&r, clen)))
                return TSAFE_E_TRUNCATED;
            double t0 = tsafe_now_us();
            tsafe_ciphertext *ct = c->ct; /* reused: no allocation per batch */
            if ((st = tsafe_ciphertext_deserialize_into(c->ctx, blob, clen, ct)) != TSAFE_OK)
                return st;
            if (tsafe_ciphertext_level(ct) != c->plan.response_level ||
                tsafe_ciphertext_scale(ct) != tsafe_lora_response_scale(c->ctx, &c->plan))
                return TSAFE_E_FORMAT;
            if ((st = tsafe_ckks_decrypt_coeffs_strided(c->ctx, c->sk, ct, stride, c->y, K)) !=
                TSAFE_OK)
                return st;
            double t1 = tsafe_now_us();
            tsafe_lora_read_batch(c->ctx, &p, b, c->y, u[s]);
            sum_t += tsafe_now_us() - t1;
            dec_t += t1 - t0;
        }
    }
    *rb = r;
    *dec_us = dec_t;
    *sum_us = sum_t;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_client_decode(tsafe_lora_client *c, const uint8_t *response,
                                      size_t len, size_t n_sites,
                                      const uint32_t *ranks, float *const *u,
                                      tsafe_lora_stats *stats)
{
    if (!c || !response || !ranks || !u)
        return TSAFE_E_NULL;
    tsafe_rbuf r = {response, len, 0};
    tsafe_status st = tsafe_rbuf_header(&r, TSAFE_MSG_RESPONSE);
    if (st != TSAFE_OK)
        return st;
    uint32_t ns;
    if (!tsafe_rbuf_u32(&r, &ns))
        return TSAFE_E_TRUNCATED;
    if (ns != n_sites)
        return TSAFE_E_FORMAT;
    size_t stride = tsafe_lora_read_stride(c->ctx, &c->plan), K = 2 * c->plan.cols;
    double dec_us = 0, sum_us = 0;
    st = decode_sites(c, &r, n_sites, ranks, u, stride, K, &dec_us, &sum_us);
    sodium_memzero(c->y, K * sizeof *c->y); /* every exit: y held x_j A_ij sums */
    if (st != TSAFE_OK)
        return st;
    if (r.pos != len)
        return TSAFE_E_FORMAT;
    if (stats) {
        stats->decrypt_us += dec_us;
        stats->sums_us += sum_us;
        stats->bytes_down += len;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_lora_client_release(tsafe_lora_client *c, size_t n_sites,
                                       const uint32_t *ranks, float *const *u,
                                       tsafe_dp_session *dp, uint8_t **msg,
                                       size_t *len, tsafe_lora_stats *stats)
{
    if (!c || !ranks || !u || !msg || !len)
        return TSAFE_E_NULL;
    *msg = NULL;
    *len = 0;
    if (n_sites == 0 || n_sites > TSAFE_MSG_MAX_SITES)
        return TSAFE_E_RANGE;
    size_t total = 0;
    for (size_t s = 0; s < n_sites; s++) {
        if (!u[s])
            return TSAFE_E_NULL;
        if (ranks[s] == 0 || ranks[s] > 65536)
            return TSAFE_E_RANGE;
        total += ranks[s];
    }
    double t0 = tsafe_now_us();
    if (dp) { /* one release (one budget charge) per token over all sites */
        float *all = malloc(total * sizeof *all);
        if (!all)
            return TSAFE_E_NOMEM;
        for (size_t s = 0, off = 0; s < n_sites; off += ranks[s], s++)
            memcpy(all + off, u[s], ranks[s] * sizeof *all);
        tsafe_status st = tsafe_dp_session_release(dp, all, total);
        if (st == TSAFE_OK)
            for (size_t s = 0, off = 0; s < n_sites; off += ranks[s], s++)
                memcpy(u[s], all + off, ranks[s] * sizeof *all);
        wipe_free(all, total * sizeof *all); /* u before noise on error paths */
        if (st != TSAFE_OK)
            return st;
    }
    tsafe_wbuf w = {0};
    tsafe_wbuf_header(&w, TSAFE_MSG_U);
    tsafe_wbuf_u32(&w, (uint32_t)n_sites);
    for (size_t s = 0; s < n_sites; s++) {
        tsafe_wbuf_u32(&w, ranks[s]);
        for (uint32_t i = 0; i < ranks[s]; i++)
            tsafe_wbuf_f32(&w, u[s][i]);
    }
    if (w.failed) {
        free(w.buf);
        return TSAFE_E_NOMEM;
    }
    *msg = w.buf;
    *len = w.len;
    if (stats) {
        stats->sums_us += tsafe_now_us() - t0;
        stats->bytes_up += w.len;
    }
    return TSAFE_OK;
}
