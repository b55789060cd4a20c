/* Raw encodings of BFV objects (no header: the messages that carry them
 * name the context by its fingerprint). Every reader checks the exact
 * length and that each coefficient is below its modulus. */
#include <stdlib.h>
#include <string.h>

#include "bfv_internal.h"
#include "tsafe_check.h"
#include "../common/bitpack.h"

static size_t limb_bytes(const tsafe_bfv_context *c, uint32_t i, size_t n)
{
    return (n * c->mod[i].bits + 7) / 8;
}

static void write_limbs(tsafe_writer *w, const tsafe_bfv_context *c,
                        const uint64_t *v)
{
    for (uint32_t i = 0; i < c->L; i++)
        tsafe_pack_bits(w, v + i * c->n, c->n, c->mod[i].bits);
}

static tsafe_status read_limbs(tsafe_reader *r, const tsafe_bfv_context *c,
                               uint64_t *v)
{
    for (uint32_t i = 0; i < c->L; i++) {
        tsafe_status st = tsafe_unpack_bits(r, v + i * c->n, c->n,
                                            c->mod[i].bits, c->mod[i].q);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

size_t tsafe_bfv_public_key_bytes(const tsafe_bfv_context *c)
{
    if (!c)
        return 0;
    size_t bytes = TSAFE_BFV_SEED_BYTES;
    for (uint32_t i = 0; i < c->L; i++)
        bytes += limb_bytes(c, i, c->n);
    return bytes;
}

size_t tsafe_bfv_ct_bytes(const tsafe_bfv_context *c)
{
    return tsafe_bfv_public_key_bytes(c); /* the same shape: seed + c0 */
}

size_t tsafe_bfv_sealed_bytes(const tsafe_bfv_context *c, size_t n_reads)
{
    return c && n_reads <= c->n ? limb_bytes(c, 0, c->n) + limb_bytes(c, 0, n_reads) : 0;
}

static tsafe_status finish_write(const tsafe_writer *w, size_t need)
{
    return w->pos == need ? TSAFE_OK : TSAFE_E_STATE;
}

tsafe_status tsafe_bfv_public_key_write(const tsafe_bfv_context *c,
                                        const tsafe_bfv_public_key *pk,
                                        uint8_t *buf, size_t cap)
{
    TSAFE_REQUIRE(c && pk && buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(pk->ctx == c, TSAFE_E_PARAMS_MISMATCH);
    size_t need = tsafe_bfv_public_key_bytes(c);
    TSAFE_REQUIRE(cap >= need, TSAFE_E_BUFFER_SMALL);
    tsafe_writer w = {buf, need, 0};
    tsafe_put_bytes(&w, pk->seed, TSAFE_BFV_SEED_BYTES);
    write_limbs(&w, c, pk->p0);
    return finish_write(&w, need);
}

tsafe_status tsafe_bfv_public_key_read(const tsafe_bfv_context *c,
                                       const uint8_t *buf, size_t len,
                                       tsafe_bfv_public_key **out)
{
    TSAFE_REQUIRE(c && buf && out, TSAFE_E_NULL);
    *out = NULL;
    size_t need = tsafe_bfv_public_key_bytes(c);
    TSAFE_REQUIRE(len >= need, TSAFE_E_TRUNCATED);
    TSAFE_REQUIRE(len == need, TSAFE_E_FORMAT);
    tsafe_bfv_public_key *pk;
    tsafe_status st = tsafe_bfv_public_key_alloc(c, &pk);
    if (st != TSAFE_OK)
        return st;
    tsafe_reader r = {buf, len, 0};
    if (!tsafe_get_bytes(&r, pk->seed, TSAFE_BFV_SEED_BYTES))
        st = TSAFE_E_TRUNCATED;
    else
        st = read_limbs(&r, c, pk->p0);
    if (st != TSAFE_OK) {
        tsafe_bfv_public_key_free(pk);
        return st;
    }
    tsafe_bfv_public_key_finish(pk);
    *out = pk;
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_ct_write(const tsafe_bfv_context *c,
                                const tsafe_bfv_ct *ct, uint8_t *buf, size_t cap)
{
    TSAFE_REQUIRE(c && ct && buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(ct->ctx == c, TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(ct->valid, TSAFE_E_STATE);
    size_t need = tsafe_bfv_ct_bytes(c);
    TSAFE_REQUIRE(cap >= need, TSAFE_E_BUFFER_SMALL);
    tsafe_writer w = {buf, need, 0};
    tsafe_put_bytes(&w, ct->seed, TSAFE_BFV_SEED_BYTES);
    write_limbs(&w, c, ct->c0);
    return finish_write(&w, need);
}

tsafe_status tsafe_bfv_ct_parse(const tsafe_bfv_context *c, const uint8_t *buf, size_t len,
                                uint8_t seed[TSAFE_BFV_SEED_BYTES], uint64_t *c0)
{
    size_t need = tsafe_bfv_ct_bytes(c);
    TSAFE_REQUIRE(len >= need, TSAFE_E_TRUNCATED);
    TSAFE_REQUIRE(len == need, TSAFE_E_FORMAT);
    tsafe_reader r = {buf, len, 0};
    if (!tsafe_get_bytes(&r, seed, TSAFE_BFV_SEED_BYTES))
        return TSAFE_E_TRUNCATED;
    return read_limbs(&r, c, c0);
}

tsafe_status tsafe_bfv_ct_read(const tsafe_bfv_context *c, const uint8_t *buf,
                               size_t len, tsafe_bfv_ct *ct)
{
    TSAFE_REQUIRE(c && buf && ct, TSAFE_E_NULL);
    TSAFE_REQUIRE(ct->ctx == c, TSAFE_E_PARAMS_MISMATCH);
    ct->valid = 0; /* a failed read leaves no usable ciphertext behind */
    tsafe_status st = tsafe_bfv_ct_parse(c, buf, len, ct->seed, ct->c0);
    if (st != TSAFE_OK)
        return st;
    tsafe_bfv_expand_a(c, ct->seed, ct->c1);
    ct->valid = 1;
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_sealed_write(const tsafe_bfv_context *c,
                                    const tsafe_bfv_sealed *res, uint8_t *buf,
                                    size_t cap)
{
    TSAFE_REQUIRE(c && res && buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(res->ctx == c, TSAFE_E_PARAMS_MISMATCH);
    size_t need = tsafe_bfv_sealed_bytes(c, res->n_reads);
    TSAFE_REQUIRE(cap >= need, TSAFE_E_BUFFER_SMALL);
    tsafe_writer w = {buf, need, 0};
    tsafe_pack_bits(&w, res->c1, c->n, c->mod[0].bits);
    tsafe_pack_bits(&w, res->c0, res->n_reads, c->mod[0].bits);
    return finish_write(&w, need);
}

tsafe_status tsafe_bfv_sealed_read(const tsafe_bfv_context *c,
                                   const uint8_t *buf, size_t len,
                                   size_t n_reads, tsafe_bfv_sealed *res)
{
    TSAFE_REQUIRE(c && buf && res, TSAFE_E_NULL);
    TSAFE_REQUIRE(res->ctx == c, TSAFE_E_PARAMS_MISMATCH);
    res->n_reads = 0; /* nothing readable after a failed read */
    TSAFE_REQUIRE(n_reads <= res->cap, TSAFE_E_RANGE);
    size_t need = tsafe_bfv_sealed_bytes(c, n_reads);
    TSAFE_REQUIRE(len >= need, TSAFE_E_TRUNCATED);
    TSAFE_REQUIRE(len == need, TSAFE_E_FORMAT);
    tsafe_reader r = {buf, len, 0};
    uint64_t q = c->mod[0].q;
    tsafe_status st = tsafe_unpack_bits(&r, res->c1, c->n, c->mod[0].bits, q);
    if (st == TSAFE_OK)
        st = tsafe_unpack_bits(&r, res->c0, n_reads, c->mod[0].bits, q);
    res->n_reads = st == TSAFE_OK ? n_reads : 0;
    return st;
}
