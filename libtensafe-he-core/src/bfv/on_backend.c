/* BFV objects as compute-backend buffers (tensafe/bfv_backend.h); the
 * sealing step on a backend lives in seal.c. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bfv_internal.h"
#include "tensafe/bfv_backend.h"
#include "tsafe_check.h"
#include "../backend/backend_internal.h"

int tsafe_bfv_backend_serves(const tsafe_backend *b, const tsafe_bfv_context *c)
{
    return b->bfv && tsafe_bfv_same_ctx(b->bfv, c);
}

/* Ciphertext j's bytes: at[j], or buf + j ct_len when at is NULL. */
static const uint8_t *ct_at(const uint8_t *buf, const uint8_t *const *at, size_t ct_len,
                            size_t j)
{
    return at ? at[j] : buf + j * ct_len;
}

/* n ciphertexts through the backend's ct_read slot: c0 parsed here, c1
 * expanded by the backend (a device's kernels). */
static tsafe_status read_by_slot(const tsafe_bfv_context *c, const uint8_t *buf,
                                 const uint8_t *const *at, size_t ct_len, size_t n,
                                 tsafe_buffer *const *dst)
{
    size_t words = (size_t)c->L * c->n;
    tsafe_backend *b = dst[0]->backend;
    if (n > SIZE_MAX / sizeof(uint64_t) / words)
        return TSAFE_E_SIZE_OVERFLOW;
    if (b->read_scratch_words < n * words) { /* kept by the backend (one thread's) */
        uint64_t *p = realloc(b->read_scratch, n * words * sizeof *p);
        if (!p)
            return TSAFE_E_NOMEM;
        b->read_scratch = p;
        b->read_scratch_words = n * words;
    }
    uint64_t *c0 = b->read_scratch;
    uint8_t *seed = malloc((n ? n : 1) * TSAFE_BFV_SEED_BYTES);
    tsafe_backend_ct_job *job = malloc((n ? n : 1) * sizeof *job);
    tsafe_status st = seed && job ? TSAFE_OK : TSAFE_E_NOMEM;
    for (size_t j = 0; j < n && st == TSAFE_OK; j++) {
        st = tsafe_bfv_ct_parse(c, ct_at(buf, at, ct_len, j), ct_len,
                                seed + j * TSAFE_BFV_SEED_BYTES, c0 + j * words);
        job[j] = (tsafe_backend_ct_job){dst[j]->mem, c0 + j * words,
                                        seed + j * TSAFE_BFV_SEED_BYTES};
    }
    if (st == TSAFE_OK && n)
        st = b->iface->ct_read(b, job, n, TSAFE_BFV_STREAM_A);
    free(seed);
    free(job);
    return st;
}

static int reads_by_slot(const tsafe_buffer *dst)
{
    return !tsafe_buffer_host_words((tsafe_buffer *)dst) && dst->backend->iface->ct_read;
}

tsafe_status tsafe_bfv_ct_read_buffer(const tsafe_bfv_context *c,
                                      const uint8_t *buf, size_t len,
                                      tsafe_buffer *dst)
{
    TSAFE_REQUIRE(c && buf && dst, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_bfv_backend_serves(dst->backend, c), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(dst->n_polys == 2 && dst->n_limbs == c->L && !dst->operand,
                  TSAFE_E_RANGE);
    if (reads_by_slot(dst))
        return read_by_slot(c, buf, NULL, len, 1, &dst);
    size_t words = (size_t)c->L * c->n; /* one polynomial */
    /* parse into a ciphertext whose limbs are the buffer's words when the
     * backend keeps them in host memory (no copy), else into staging */
    uint64_t *w = tsafe_buffer_host_words(dst);
    uint64_t *stage = w ? NULL : malloc(2 * words * sizeof *stage);
    if (!w && !stage)
        return TSAFE_E_NOMEM;
    uint64_t *into = w ? w : stage;
    tsafe_bfv_ct ct = {.ctx = c, .c0 = into, .c1 = into + words};
    tsafe_status st = tsafe_bfv_ct_read(c, buf, len, &ct);
    if (st == TSAFE_OK && stage)
        st = tsafe_buffer_upload(dst, stage, 2 * words);
    free(stage);
    return st;
}

/* Both entry points below: buf (adjacent) or at (anywhere). */
static tsafe_status read_buffers(const tsafe_bfv_context *c, const uint8_t *buf,
                                 const uint8_t *const *at, size_t ct_len, size_t n,
                                 tsafe_buffer *const *dst)
{
    int slot = n > 0;
    for (size_t j = 0; j < n; j++) {
        TSAFE_REQUIRE(dst[j] && (!at || at[j]), TSAFE_E_NULL);
        TSAFE_REQUIRE(tsafe_bfv_backend_serves(dst[j]->backend, c), TSAFE_E_PARAMS_MISMATCH);
        TSAFE_REQUIRE(dst[j]->n_polys == 2 && dst[j]->n_limbs == c->L && !dst[j]->operand,
                      TSAFE_E_RANGE);
        slot &= reads_by_slot(dst[j]) && dst[j]->backend == dst[0]->backend;
    }
    if (slot)
        return read_by_slot(c, buf, at, ct_len, n, dst);
    tsafe_status st = TSAFE_OK;
    for (size_t j = 0; j < n && st == TSAFE_OK; j++)
        st = tsafe_bfv_ct_read_buffer(c, ct_at(buf, at, ct_len, j), ct_len, dst[j]);
    return st;
}

tsafe_status tsafe_bfv_ct_read_buffers(const tsafe_bfv_context *c, const uint8_t *buf,
                                       size_t ct_len, size_t n, tsafe_buffer *const *dst)
{
    TSAFE_REQUIRE(c && (buf || n == 0) && (dst || n == 0), TSAFE_E_NULL);
    return read_buffers(c, buf, NULL, ct_len, n, dst);
}

tsafe_status tsafe_bfv_ct_read_buffers_at(const tsafe_bfv_context *c, const uint8_t *const *at,
                                          size_t ct_len, size_t n, tsafe_buffer *const *dst)
{
    TSAFE_REQUIRE(c && (at || n == 0) && (dst || n == 0), TSAFE_E_NULL);
    return read_buffers(c, NULL, at, ct_len, n, dst);
}

tsafe_status tsafe_bfv_plain_operand(const tsafe_bfv_plain *pt, tsafe_backend *b,
                                     tsafe_buffer **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(pt && b, TSAFE_E_NULL);
    const tsafe_bfv_context *c = pt->ctx;
    TSAFE_REQUIRE(tsafe_bfv_backend_serves(b, c), TSAFE_E_PARAMS_MISMATCH);
    if (tsafe_backend_is_core_cpu(b)) /* values and quotients: borrowed */
        return tsafe_cpu_operand_borrow(b, pt->p, pt->ps, 1, c->L, out);
    tsafe_buffer *buf;
    tsafe_status st = tsafe_buffer_alloc_operand(b, 1, c->L, &buf);
    if (st != TSAFE_OK)
        return st;
    if ((st = tsafe_buffer_upload(buf, pt->p, (size_t)c->L * c->n)) != TSAFE_OK) {
        tsafe_buffer_free(buf);
        return st;
    }
    *out = buf;
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_plain_encode_buffer(const tsafe_bfv_context *c,
                                           const int64_t *coeffs, size_t count,
                                           tsafe_buffer *operand)
{
    TSAFE_REQUIRE(c && operand && (coeffs || count == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_bfv_backend_serves(operand->backend, c), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(operand->n_polys == 1 && operand->n_limbs == c->L && !operand->borrowed,
                  TSAFE_E_ARG);
    TSAFE_REQUIRE(count <= c->n, TSAFE_E_RANGE);
    const int64_t lim = (int64_t)1 << 40;
    for (size_t k = 0; k < count; k++)
        TSAFE_REQUIRE(coeffs[k] > -lim && coeffs[k] < lim, TSAFE_E_VALUE_RANGE);
    size_t words = (size_t)c->L * c->n;
    /* in place when the buffer is host memory (a plaintext used once),
     * else staged and uploaded (operands get their quotients there); a
     * plain device buffer takes the residues and the backend's own NTT
     * (the same words: backends' NTTs are the CPU's), so a GPU spares the
     * host its L transforms per plaintext */
    uint64_t *host = tsafe_buffer_host_words(operand);
    int device_ntt = !host && !operand->operand;
    uint64_t *p = host ? host : malloc(words * sizeof *p);
    TSAFE_REQUIRE(p, TSAFE_E_NOMEM);
    for (uint32_t i = 0; i < c->L; i++) {
        uint64_t *l = p + i * c->n;
        tsafe_bfv_encode_limb(c, i, coeffs, count, l);
        memset(l + count, 0, (c->n - count) * sizeof *l);
        if (!device_ntt)
            tsafe_ntt_forward(&c->ntt[i], l);
    }
    if (host)
        return TSAFE_OK;
    tsafe_status st = tsafe_buffer_upload(operand, p, words);
    if (st == TSAFE_OK && device_ntt)
        st = tsafe_backend_ntt_forward(operand->backend, operand);
    sodium_memzero(p, words * sizeof *p); /* the adapter's weights */
    free(p);
    return st;
}

tsafe_status tsafe_bfv_public_key_operand(const tsafe_bfv_public_key *pk,
                                          tsafe_backend *b, tsafe_buffer **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(pk && b, TSAFE_E_NULL);
    const tsafe_bfv_context *c = pk->ctx;
    TSAFE_REQUIRE(tsafe_bfv_backend_serves(b, c), TSAFE_E_PARAMS_MISMATCH);
    size_t n2 = (size_t)c->L * c->n; /* one polynomial */
    uint64_t *w = malloc(2 * n2 * sizeof *w);
    TSAFE_REQUIRE(w, TSAFE_E_NOMEM);
    memcpy(w, pk->p0, n2 * sizeof *w);
    memcpy(w + n2, pk->p1, n2 * sizeof *w);
    tsafe_buffer *buf;
    tsafe_status st = tsafe_buffer_alloc_operand(b, 2, c->L, &buf);
    if (st == TSAFE_OK && (st = tsafe_buffer_upload(buf, w, 2 * n2)) != TSAFE_OK)
        tsafe_buffer_free(buf);
    free(w);
    if (st == TSAFE_OK)
        *out = buf;
    return st;
}
