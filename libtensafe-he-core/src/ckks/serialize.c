/* Versioned binary serialization of ciphertexts, plaintexts and keys.
 *
 * Header (52 bytes, little-endian):
 *   "TSHE" | version u8 (=1) | kind u8 | flags u8 | reserved u8 (=0) |
 *   context fingerprint [32] | level u32 | scale f64
 * Body: polynomials limb by limb, limb i bit-packed LSB-first with
 * bit_length(q_i) bits per coefficient and padded to a byte. A seeded
 * ciphertext stores its 32-byte `a` seed instead of c1. A secret key stores
 * 2 bits per ternary coefficient (s + 1; the value 3 is invalid).
 *
 * Readers check the exact total length, magic, version, kind, flags,
 * fingerprint, level, scale and every coefficient < q_i. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ckks_internal.h"
#include "keys_internal.h"
#include "../common/bytes.h"
#include "../common/bitpack.h"
#include "tsafe_check.h"

#define SER_MAGIC "TSHE"
#define SER_VERSION 1
#define SER_HEADER 52
#define FLAG_NTT 0x1u
#define FLAG_SEEDED 0x2u

typedef struct {
    uint8_t kind, flags;
    uint32_t level;
    double scale;
} header;

static size_t limb_bytes(const tsafe_context *c, uint32_t i)
{
    return (c->n * c->mod[i].bits + 7) / 8;
}

static size_t poly_bytes(const tsafe_context *c, uint32_t level)
{
    size_t s = 0;
    for (uint32_t i = 0; i <= level; i++)
        s += limb_bytes(c, i);
    return s;
}

static void write_header(tsafe_writer *w, const tsafe_context *c,
                         const header *h)
{
    tsafe_put_bytes(w, SER_MAGIC, 4);
    tsafe_put_u8(w, SER_VERSION);
    tsafe_put_u8(w, h->kind);
    tsafe_put_u8(w, h->flags);
    tsafe_put_u8(w, 0);
    tsafe_put_bytes(w, c->fingerprint, TSAFE_FINGERPRINT_BYTES);
    tsafe_put_u32(w, h->level);
    tsafe_put_f64(w, h->scale);
}

/* The scales a reader accepts; writers refuse others (TSAFE_E_SCALE) so that
 * every emitted byte string reads back (rescale can take a scale below 1,
 * repeated products above 2^1000). */
static int scale_ok(double s)
{
    return isfinite(s) && s >= 1.0 && s <= 0x1p1000;
}

/* Parse and validate the common header for an expected kind. */
static tsafe_status read_header(tsafe_reader *r, const tsafe_context *c,
                                uint8_t kind, header *h)
{
    uint8_t magic[4], ver, res, fp[TSAFE_FINGERPRINT_BYTES];
    if (!tsafe_get_bytes(r, magic, 4))
        return TSAFE_E_TRUNCATED;
    if (memcmp(magic, SER_MAGIC, 4) != 0)
        return TSAFE_E_FORMAT;
    if (!tsafe_get_u8(r, &ver) || !tsafe_get_u8(r, &h->kind) ||
        !tsafe_get_u8(r, &h->flags) || !tsafe_get_u8(r, &res) ||
        !tsafe_get_bytes(r, fp, sizeof fp) || !tsafe_get_u32(r, &h->level) ||
        !tsafe_get_f64(r, &h->scale))
        return TSAFE_E_TRUNCATED;
    if (ver != SER_VERSION)
        return TSAFE_E_VERSION;
    if (h->kind != kind)
        return TSAFE_E_KIND;
    if (res != 0 || (h->flags & ~(FLAG_NTT | FLAG_SEEDED)))
        return TSAFE_E_FORMAT;
    if (sodium_memcmp(fp, c->fingerprint, sizeof fp) != 0)
        return TSAFE_E_PARAMS_MISMATCH;
    if (h->level >= c->n_data)
        return TSAFE_E_FORMAT;
    if (!scale_ok(h->scale))
        return TSAFE_E_FORMAT;
    return TSAFE_OK;
}

static void pack_poly(tsafe_writer *w, const tsafe_context *c,
                      const uint64_t *poly, uint32_t level)
{
    for (uint32_t i = 0; i <= level; i++)
        tsafe_pack_bits(w, tsafe_climb(poly, c, i), c->n, c->mod[i].bits);
}

static tsafe_status unpack_poly(tsafe_reader *r, const tsafe_context *c,
                                uint64_t *poly, uint32_t level)
{
    for (uint32_t i = 0; i <= level; i++) {
        tsafe_status st = tsafe_unpack_bits(r, tsafe_limb(poly, c, i), c->n,
                                      c->mod[i].bits, c->mod[i].q);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

/* Common tail of every serializer: size query and capacity check. */
static tsafe_status begin_write(size_t need, uint8_t *buf, size_t cap,
                                size_t *written)
{
    TSAFE_REQUIRE(written, TSAFE_E_NULL);
    *written = need;
    TSAFE_REQUIRE(buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(cap >= need, TSAFE_E_BUFFER_SMALL);
    return TSAFE_OK;
}

/* ------------------------------------------------------------ ciphertext */

static size_t ct_size(const tsafe_context *c, const tsafe_ciphertext *ct)
{
    return SER_HEADER + poly_bytes(c, ct->level) +
           (ct->seeded ? TSAFE_SEED_BYTES : poly_bytes(c, ct->level));
}

tsafe_status tsafe_ciphertext_serialized_size(const tsafe_context *ctx,
                                              const tsafe_ciphertext *ct,
                                              size_t *size)
{
    TSAFE_REQUIRE(ctx && ct && size, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, ct->ctx), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(ct->valid, TSAFE_E_STATE);
    TSAFE_REQUIRE(scale_ok(ct->scale), TSAFE_E_SCALE);
    *size = ct_size(ctx, ct);
    return TSAFE_OK;
}

tsafe_status tsafe_ciphertext_serialized_size_at(const tsafe_context *ctx,
                                                 uint32_t level, size_t *size)
{
    TSAFE_REQUIRE(ctx && size, TSAFE_E_NULL);
    TSAFE_REQUIRE(level <= tsafe_context_max_level(ctx), TSAFE_E_LEVEL);
    *size = SER_HEADER + 2 * poly_bytes(ctx, level);
    return TSAFE_OK;
}

tsafe_status tsafe_ciphertext_serialize(const tsafe_context *ctx,
                                        const tsafe_ciphertext *ct,
                                        uint8_t *buf, size_t cap,
                                        size_t *written)
{
    size_t need;
    tsafe_status st = tsafe_ciphertext_serialized_size(ctx, ct, &need);
    if (st != TSAFE_OK)
        return st;
    if ((st = begin_write(need, buf, cap, written)) != TSAFE_OK)
        return st;
    if (!ct->seeded)
        return tsafe_ciphertext_serialize_words(ctx, ct->c0, ct->c1, ct->level, ct->scale,
                                                buf, need);
    tsafe_writer w = {buf, cap, 0};
    header h = {TSAFE_KIND_CIPHERTEXT, (uint8_t)(FLAG_NTT | FLAG_SEEDED), ct->level,
                ct->scale};
    write_header(&w, ctx, &h);
    pack_poly(&w, ctx, ct->c0, ct->level);
    tsafe_put_bytes(&w, ct->seed, TSAFE_SEED_BYTES);
    return w.pos == need ? TSAFE_OK : TSAFE_E_STATE;
}

tsafe_status tsafe_ciphertext_serialize_words(const tsafe_context *ctx, const uint64_t *c0,
                                              const uint64_t *c1, uint32_t level,
                                              double scale, uint8_t *buf, size_t need)
{
    TSAFE_REQUIRE(scale_ok(scale), TSAFE_E_SCALE);
    TSAFE_REQUIRE(need == SER_HEADER + 2 * poly_bytes(ctx, level), TSAFE_E_STATE);
    tsafe_writer w = {buf, need, 0};
    header h = {TSAFE_KIND_CIPHERTEXT, (uint8_t)FLAG_NTT, level, scale};
    write_header(&w, ctx, &h);
    pack_poly(&w, ctx, c0, level);
    pack_poly(&w, ctx, c1, level);
    return w.pos == need ? TSAFE_OK : TSAFE_E_STATE;
}

tsafe_status tsafe_ciphertext_deserialize_into(const tsafe_context *ctx,
                                               const uint8_t *buf, size_t len,
                                               tsafe_ciphertext *ct)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && buf && ct, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, ct->ctx), TSAFE_E_PARAMS_MISMATCH);
    ct->valid = 0;
    tsafe_reader r = {buf, len, 0};
    header h;
    TSAFE_TRY(read_header(&r, ctx, TSAFE_KIND_CIPHERTEXT, &h));
    TSAFE_CHECK(h.flags & FLAG_NTT, TSAFE_E_FORMAT);
    int seeded = (h.flags & FLAG_SEEDED) != 0;
    size_t need = SER_HEADER + poly_bytes(ctx, h.level) +
                  (seeded ? TSAFE_SEED_BYTES : poly_bytes(ctx, h.level));
    TSAFE_CHECK(len >= need, TSAFE_E_TRUNCATED);
    TSAFE_CHECK(len == need, TSAFE_E_FORMAT);
    TSAFE_TRY(unpack_poly(&r, ctx, ct->c0, h.level));
    if (seeded) {
        TSAFE_CHECK(tsafe_get_bytes(&r, ct->seed, TSAFE_SEED_BYTES),
                    TSAFE_E_TRUNCATED);
        tsafe_expand_uniform_ntt(ctx, ct->seed, h.level, ct->c1);
    } else {
        TSAFE_TRY(unpack_poly(&r, ctx, ct->c1, h.level));
    }
    ct->level = h.level;
    ct->scale = h.scale;
    ct->seeded = seeded;
    ct->valid = 1;
    return TSAFE_OK;
fail:
    return st;
}

tsafe_status tsafe_ciphertext_deserialize(const tsafe_context *ctx,
                                          const uint8_t *buf, size_t len,
                                          tsafe_ciphertext **out)
{
    TSAFE_REQUIRE(ctx && buf && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_ciphertext *ct = NULL;
    tsafe_status st = tsafe_ciphertext_create(ctx, &ct);
    if (st != TSAFE_OK)
        return st;
    st = tsafe_ciphertext_deserialize_into(ctx, buf, len, ct);
    if (st != TSAFE_OK) {
        tsafe_ciphertext_free(ct);
        return st;
    }
    *out = ct;
    return TSAFE_OK;
}

/* ------------------------------------------------------------- plaintext */

tsafe_status tsafe_plaintext_serialized_size(const tsafe_context *ctx,
                                             const tsafe_plaintext *pt,
                                             size_t *size)
{
    TSAFE_REQUIRE(ctx && pt && size, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pt->ctx), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(pt->valid, TSAFE_E_STATE);
    TSAFE_REQUIRE(scale_ok(pt->scale), TSAFE_E_SCALE);
    *size = SER_HEADER + poly_bytes(ctx, pt->level);
    return TSAFE_OK;
}

tsafe_status tsafe_plaintext_serialize(const tsafe_context *ctx,
                                       const tsafe_plaintext *pt, uint8_t *buf,
                                       size_t cap, size_t *written)
{
    size_t need;
    tsafe_status st = tsafe_plaintext_serialized_size(ctx, pt, &need);
    if (st != TSAFE_OK)
        return st;
    if ((st = begin_write(need, buf, cap, written)) != TSAFE_OK)
        return st;
    tsafe_writer w = {buf, cap, 0};
    header h = {TSAFE_KIND_PLAINTEXT, FLAG_NTT, pt->level, pt->scale};
    write_header(&w, ctx, &h);
    pack_poly(&w, ctx, pt->data, pt->level);
    return w.pos == need ? TSAFE_OK : TSAFE_E_STATE;
}

tsafe_status tsafe_plaintext_deserialize(const tsafe_context *ctx,
                                         const uint8_t *buf, size_t len,
                                         tsafe_plaintext **out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && buf && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_reader r = {buf, len, 0};
    header h;
    tsafe_plaintext *pt = NULL;
    TSAFE_TRY(read_header(&r, ctx, TSAFE_KIND_PLAINTEXT, &h));
    TSAFE_CHECK(h.flags == FLAG_NTT, TSAFE_E_FORMAT);
    size_t need = SER_HEADER + poly_bytes(ctx, h.level);
    TSAFE_CHECK(len >= need, TSAFE_E_TRUNCATED);
    TSAFE_CHECK(len == need, TSAFE_E_FORMAT);
    TSAFE_TRY(tsafe_plaintext_create(ctx, &pt));
    TSAFE_TRY(unpack_poly(&r, ctx, pt->data, h.level));
    pt->level = h.level;
    pt->scale = h.scale;
    pt->valid = 1;
    *out = pt;
    return TSAFE_OK;
fail:
    tsafe_plaintext_free(pt);
    return st;
}

/* ------------------------------------------------------------ public key */

tsafe_status tsafe_public_key_serialized_size(const tsafe_context *ctx,
                                              const tsafe_public_key *pk,
                                              size_t *size)
{
    TSAFE_REQUIRE(ctx && pk && size, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, pk->ctx), TSAFE_E_PARAMS_MISMATCH);
    *size = SER_HEADER + 2 * poly_bytes(ctx, ctx->n_data - 1);
    return TSAFE_OK;
}

tsafe_status tsafe_public_key_serialize(const tsafe_context *ctx,
                                        const tsafe_public_key *pk,
                                        uint8_t *buf, size_t cap,
                                        size_t *written)
{
    size_t need;
    tsafe_status st = tsafe_public_key_serialized_size(ctx, pk, &need);
    if (st != TSAFE_OK)
        return st;
    if ((st = begin_write(need, buf, cap, written)) != TSAFE_OK)
        return st;
    tsafe_writer w = {buf, cap, 0};
    uint32_t top = ctx->n_data - 1;
    header h = {TSAFE_KIND_PUBLIC_KEY, FLAG_NTT, top, 1.0};
    write_header(&w, ctx, &h);
    pack_poly(&w, ctx, pk->p0, top);
    pack_poly(&w, ctx, pk->p1, top);
    return w.pos == need ? TSAFE_OK : TSAFE_E_STATE;
}

tsafe_status tsafe_public_key_deserialize(const tsafe_context *ctx,
                                          const uint8_t *buf, size_t len,
                                          tsafe_public_key **out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && buf && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_reader r = {buf, len, 0};
    header h;
    tsafe_public_key *pk = NULL;
    uint32_t top = ctx->n_data - 1;
    TSAFE_TRY(read_header(&r, ctx, TSAFE_KIND_PUBLIC_KEY, &h));
    TSAFE_CHECK(h.flags == FLAG_NTT && h.level == top && h.scale == 1.0,
                TSAFE_E_FORMAT);
    size_t need = SER_HEADER + 2 * poly_bytes(ctx, top);
    TSAFE_CHECK(len >= need, TSAFE_E_TRUNCATED);
    TSAFE_CHECK(len == need, TSAFE_E_FORMAT);
    TSAFE_TRY(tsafe_public_key_alloc(ctx, &pk));
    TSAFE_TRY(unpack_poly(&r, ctx, pk->p0, top));
    TSAFE_TRY(unpack_poly(&r, ctx, pk->p1, top));
    *out = pk;
    return TSAFE_OK;
fail:
    tsafe_public_key_free(pk);
    return st;
}

/* ------------------------------------------------------------ secret key */

tsafe_status tsafe_secret_key_serialized_size(const tsafe_context *ctx,
                                              const tsafe_secret_key *sk,
                                              size_t *size)
{
    TSAFE_REQUIRE(ctx && sk && size, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_same_context(ctx, sk->ctx), TSAFE_E_PARAMS_MISMATCH);
    *size = SER_HEADER + ctx->n / 4;
    return TSAFE_OK;
}

tsafe_status tsafe_secret_key_serialize(const tsafe_context *ctx,
                                        const tsafe_secret_key *sk,
                                        uint8_t *buf, size_t cap,
                                        size_t *written)
{
    size_t need;
    tsafe_status st = tsafe_secret_key_serialized_size(ctx, sk, &need);
    if (st != TSAFE_OK)
        return st;
    if ((st = begin_write(need, buf, cap, written)) != TSAFE_OK)
        return st;
    tsafe_writer w = {buf, cap, 0};
    header h = {TSAFE_KIND_SECRET_KEY, 0, ctx->n_data - 1, 1.0};
    write_header(&w, ctx, &h);
    for (size_t k = 0; k < ctx->n; k += 4) {
        uint8_t b = 0;
        for (size_t t = 0; t < 4; t++)
            b |= (uint8_t)((sk->s[k + t] + 1) << (2 * t));
        tsafe_put_u8(&w, b);
    }
    return w.pos == need ? TSAFE_OK : TSAFE_E_STATE;
}

tsafe_status tsafe_secret_key_deserialize(const tsafe_context *ctx,
                                          const uint8_t *buf, size_t len,
                                          tsafe_secret_key **out)
{
    tsafe_status st;
    TSAFE_REQUIRE(ctx && buf && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_reader r = {buf, len, 0};
    header h;
    tsafe_secret_key *sk = NULL;
    TSAFE_TRY(read_header(&r, ctx, TSAFE_KIND_SECRET_KEY, &h));
    TSAFE_CHECK(h.flags == 0 && h.level == ctx->n_data - 1 && h.scale == 1.0,
                TSAFE_E_FORMAT);
    size_t need = SER_HEADER + ctx->n / 4;
    TSAFE_CHECK(len >= need, TSAFE_E_TRUNCATED);
    TSAFE_CHECK(len == need, TSAFE_E_FORMAT);
    TSAFE_TRY(tsafe_secret_key_alloc(ctx, &sk));
    for (size_t k = 0; k < ctx->n; k += 4) {
        uint8_t b = buf[SER_HEADER + k / 4];
        for (size_t t = 0; t < 4; t++) {
            uint8_t v = (b >> (2 * t)) & 3;
            TSAFE_CHECK(v != 3, TSAFE_E_FORMAT);
            sk->s[k + t] = (int8_t)v - 1;
        }
    }
    tsafe_secret_key_finish(ctx, sk);
    *out = sk;
    return TSAFE_OK;
fail:
    tsafe_secret_key_free(sk);
    return st;
}
