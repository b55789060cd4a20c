/* Host reference of the CKKS LoRA ring work (tsafe_ref.h): the plain
 * ZeRo-MOAI server's products and local mode's products and decryption
 * through the core's direct calls, no backend. */
#include <stdlib.h>
#include <string.h>

#include "reference/tsafe_ref.h"
#include "../libtensafe-lora/src/he/he_internal.h"
#include "../libtensafe-lora/src/wire/wire.h"

/* x * pts[b] rescaled down to `level` into prod. */
static tsafe_status product(const tsafe_context *ctx, const tsafe_ciphertext *x,
                            const tsafe_plaintext *pt, uint32_t level, tsafe_ciphertext *prod)
{
    tsafe_status st = tsafe_ckks_mul_plain(ctx, x, pt, prod);
    while (st == TSAFE_OK && tsafe_ciphertext_level(prod) > level)
        st = tsafe_ckks_rescale(ctx, prod, prod);
    return st;
}

static tsafe_status read_request(const tsafe_context *ctx, const uint8_t *req, size_t len,
                                 tsafe_ciphertext *x)
{
    tsafe_rbuf r = {req, len, 0};
    uint32_t clen;
    const uint8_t *blob;
    tsafe_status st = tsafe_rbuf_header(&r, TSAFE_MSG_REQUEST);
    if (st != TSAFE_OK)
        return st;
    if (!tsafe_rbuf_u32(&r, &clen) || !(blob = tsafe_rbuf_take(&r, clen)) || r.pos != len)
        return TSAFE_E_FORMAT;
    return tsafe_ciphertext_deserialize_into(ctx, blob, clen, x);
}

static tsafe_status write_products(const tsafe_context *ctx, const tsafe_lora_plan *plan,
                                   const tsafe_lora_site *const *sites, size_t n_sites,
                                   const tsafe_ciphertext *x, tsafe_ciphertext *prod,
                                   tsafe_wbuf *w)
{
    size_t n = 0, wr = 0;
    tsafe_status st = tsafe_ciphertext_serialized_size_at(ctx, plan->response_level, &n);
    tsafe_wbuf_header(w, TSAFE_MSG_RESPONSE);
    tsafe_wbuf_u32(w, (uint32_t)n_sites);
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        tsafe_wbuf_u32(w, sites[i]->plan.rank);
        tsafe_wbuf_u32(w, sites[i]->plan.n_batches);
        for (uint32_t b = 0; b < sites[i]->plan.n_batches && st == TSAFE_OK; b++) {
            st = product(ctx, x, sites[i]->pts[b], plan->response_level, prod);
            tsafe_wbuf_u32(w, (uint32_t)n);
            uint8_t *p = st == TSAFE_OK ? tsafe_wbuf_reserve(w, n) : NULL;
            if (st == TSAFE_OK)
                st = p ? tsafe_ciphertext_serialize(ctx, prod, p, n, &wr) : TSAFE_E_NOMEM;
        }
    }
    return st == TSAFE_OK && w->failed ? TSAFE_E_NOMEM : st;
}

tsafe_status tsafe_ref_lora_process(const tsafe_context *ctx, const tsafe_lora_plan *plan,
                                    const tsafe_lora_site *const *sites, size_t n_sites,
                                    const uint8_t *request, size_t len, uint8_t **out,
                                    size_t *out_len)
{
    tsafe_ciphertext *x = NULL, *prod = NULL;
    tsafe_wbuf w = {0};
    tsafe_status st = tsafe_ciphertext_create(ctx, &x);
    if (st == TSAFE_OK)
        st = tsafe_ciphertext_create(ctx, &prod);
    if (st == TSAFE_OK)
        st = read_request(ctx, request, len, x);
    if (st == TSAFE_OK)
        st = write_products(ctx, plan, sites, n_sites, x, prod, &w);
    tsafe_ciphertext_free(x);
    tsafe_ciphertext_free(prod);
    if (st != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    *out = w.buf;
    *out_len = w.len;
    return TSAFE_OK;
}

/* Products, strided decryption and trace reads of every batch. */
static tsafe_status local_reads(const tsafe_context *ctx, const tsafe_secret_key *sk,
                                const tsafe_lora_plan *plan,
                                const tsafe_lora_site *const *sites, size_t n_sites,
                                const tsafe_ciphertext *x, float *const *u)
{
    tsafe_ciphertext *prod = NULL;
    size_t stride = tsafe_lora_read_stride(ctx, plan), K = 2 * (size_t)plan->cols;
    double *y = calloc(K, sizeof *y);
    tsafe_status st = y ? tsafe_ciphertext_create(ctx, &prod) : TSAFE_E_NOMEM;
    for (size_t s = 0; s < n_sites && st == TSAFE_OK; s++)
        for (uint32_t b = 0; b < sites[s]->plan.n_batches && st == TSAFE_OK; b++) {
            st = tsafe_ckks_mul_plain(ctx, x, sites[s]->pts[b], prod);
            if (st == TSAFE_OK)
                st = tsafe_ckks_decrypt_coeffs_strided(ctx, sk, prod, stride, y, K);
            if (st == TSAFE_OK)
                tsafe_lora_read_batch(ctx, &sites[s]->plan, b, y, u[s]);
        }
    tsafe_ciphertext_free(prod);
    free(y);
    return st;
}

tsafe_status tsafe_ref_lora_local_u(const tsafe_context *ctx, const tsafe_secret_key *sk,
                                    const tsafe_lora_plan *plan,
                                    const tsafe_lora_site *const *sites, size_t n_sites,
                                    const float *x, float *const *u)
{
    size_t slots = tsafe_context_slots(ctx);
    double *re = calloc(slots, sizeof *re), *im = calloc(slots, sizeof *im);
    tsafe_ciphertext *ct = NULL;
    tsafe_status st = re && im ? tsafe_ciphertext_create(ctx, &ct) : TSAFE_E_NOMEM;
    if (st == TSAFE_OK)
        st = tsafe_lora_encrypt_x(ctx, plan, sk, x, re, im, ct);
    if (st == TSAFE_OK)
        st = local_reads(ctx, sk, plan, sites, n_sites, ct, u);
    tsafe_ciphertext_free(ct);
    free(re);
    free(im);
    return st;
}

tsafe_status tsafe_ref_lora_local_delta(const tsafe_context *ctx, const tsafe_secret_key *sk,
                                        const tsafe_lora_plan *plan,
                                        const tsafe_lora_site *const *sites, size_t n_sites,
                                        const float *x, float *const *delta)
{
    float *u[1024] = {NULL};
    if (n_sites > 1024)
        return TSAFE_E_RANGE;
    tsafe_status st = TSAFE_OK;
    for (size_t s = 0; s < n_sites; s++)
        if (!(u[s] = calloc(sites[s]->plan.rank, sizeof(float))))
            st = TSAFE_E_NOMEM;
    if (st == TSAFE_OK)
        st = tsafe_ref_lora_local_u(ctx, sk, plan, sites, n_sites, x, u);
    for (size_t s = 0; s < n_sites; s++) {
        if (st == TSAFE_OK)
            tsafe_lora_apply_b(sites[s], u[s], delta[s]);
        free(u[s]);
    }
    return st;
}
