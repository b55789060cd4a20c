/* Serialization of ciphertexts, plaintexts, public and secret keys:
 * round trips (decrypted results and re-serialized bytes compared), every
 * truncation and a sweep of single-byte corruptions of each object (an
 * error status, or -- where a changed coefficient / seed / scale stays
 * valid -- a successful decode of a usable object whose re-serialization is
 * exactly the corrupted input), and one targeted check per validation rule.
 *
 * Contexts: an insecure N=1024 set with two 30-bit primes (full sweeps) and
 * the "ifma-n4096" preset (every truncation, header sweep, sampled body). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "tensafe/ckks.h"
#include "support/tsafe_test_rng.h"
#include "../libtensafe-he-core/src/ckks/ckks_internal.h"

/* Header layout (serialize.c): magic[4] version kind flags reserved
 * fingerprint[32] level u32 scale f64 -> 52 bytes. */
#define HDR 52
#define OFF_VERSION 4
#define OFF_KIND 5
#define OFF_FLAGS 6
#define OFF_RESERVED 7
#define OFF_FP 8
#define OFF_LEVEL 40
#define OFF_SCALE 44

typedef struct {
    tsafe_context *c;
    tsafe_secret_key *sk;
    tsafe_public_key *pk;
    size_t slots;
    uint32_t top;
} fixture;

static void fx_open_params(fixture *f, const tsafe_params *p)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(tsafe_context_create(p, &f->c), TSAFE_OK);
    assert_int_equal(tsafe_secret_key_generate(f->c, NULL, &f->sk), TSAFE_OK);
    assert_int_equal(tsafe_public_key_generate(f->c, f->sk, NULL, &f->pk), TSAFE_OK);
    f->slots = tsafe_context_slots(f->c);
    f->top = tsafe_context_max_level(f->c);
}

/* N=1024, two ~30-bit primes, scale 2^25: insecure, small enough for
 * full sweeps. */
static void fx_open_small(fixture *f)
{
    tsafe_params p = {.log_n = 10, .n_primes = 2, .prime_bits = {30, 30},
                      .scale = 0x1p25, .flags = TSAFE_PARAMS_INSECURE_FOR_TESTS};
    fx_open_params(f, &p);
}

static void fx_open_preset(fixture *f, const char *name)
{
    tsafe_params p;
    assert_int_equal(tsafe_params_preset(name, &p), TSAFE_OK);
    fx_open_params(f, &p);
}

static void fx_close(fixture *f)
{
    tsafe_public_key_free(f->pk);
    tsafe_secret_key_free(f->sk);
    tsafe_context_free(f->c);
}

static double *rand_vec(size_t n)
{
    double *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = tsafe_test_uniform(-1, 1);
    return v;
}

static tsafe_plaintext *encode(fixture *f, const double *v, uint32_t level)
{
    tsafe_plaintext *pt = NULL;
    double scale = tsafe_context_params(f->c)->scale;
    assert_int_equal(tsafe_plaintext_create(f->c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encode(f->c, v, f->slots, scale, level, pt), TSAFE_OK);
    return pt;
}

static tsafe_ciphertext *encrypt(fixture *f, const double *v, uint32_t level,
                                 int public_key)
{
    tsafe_plaintext *pt = encode(f, v, level);
    tsafe_ciphertext *ct = NULL;
    assert_int_equal(tsafe_ciphertext_create(f->c, &ct), TSAFE_OK);
    if (public_key)
        assert_int_equal(tsafe_ckks_encrypt_public(f->c, f->pk, pt, NULL, ct), TSAFE_OK);
    else
        assert_int_equal(tsafe_ckks_encrypt_symmetric(f->c, f->sk, pt, NULL, ct), TSAFE_OK);
    tsafe_plaintext_free(pt);
    return ct;
}

/* ------------------------------------------------ generic object access */

typedef enum { OBJ_CT, OBJ_PT, OBJ_PK, OBJ_SK } obj_kind;

static tsafe_status obj_size(const tsafe_context *c, obj_kind k, const void *o,
                             size_t *size)
{
    switch (k) {
    case OBJ_CT: return tsafe_ciphertext_serialized_size(c, o, size);
    case OBJ_PT: return tsafe_plaintext_serialized_size(c, o, size);
    case OBJ_PK: return tsafe_public_key_serialized_size(c, o, size);
    case OBJ_SK: return tsafe_secret_key_serialized_size(c, o, size);
    }
    return TSAFE_E_ARG;
}

static tsafe_status obj_ser(const tsafe_context *c, obj_kind k, const void *o,
                            uint8_t *buf, size_t cap, size_t *written)
{
    switch (k) {
    case OBJ_CT: return tsafe_ciphertext_serialize(c, o, buf, cap, written);
    case OBJ_PT: return tsafe_plaintext_serialize(c, o, buf, cap, written);
    case OBJ_PK: return tsafe_public_key_serialize(c, o, buf, cap, written);
    case OBJ_SK: return tsafe_secret_key_serialize(c, o, buf, cap, written);
    }
    return TSAFE_E_ARG;
}

static tsafe_status obj_deser(const tsafe_context *c, obj_kind k,
                              const uint8_t *buf, size_t len, void **out)
{
    switch (k) {
    case OBJ_CT: return tsafe_ciphertext_deserialize(c, buf, len, (tsafe_ciphertext **)out);
    case OBJ_PT: return tsafe_plaintext_deserialize(c, buf, len, (tsafe_plaintext **)out);
    case OBJ_PK: return tsafe_public_key_deserialize(c, buf, len, (tsafe_public_key **)out);
    case OBJ_SK: return tsafe_secret_key_deserialize(c, buf, len, (tsafe_secret_key **)out);
    }
    return TSAFE_E_ARG;
}

static void obj_free(obj_kind k, void *o)
{
    switch (k) {
    case OBJ_CT: tsafe_ciphertext_free(o); break;
    case OBJ_PT: tsafe_plaintext_free(o); break;
    case OBJ_PK: tsafe_public_key_free(o); break;
    case OBJ_SK: tsafe_secret_key_free(o); break;
    }
}

/* Serialize into a fresh buffer of exactly the announced size. */
static uint8_t *ser(const tsafe_context *c, obj_kind k, const void *o, size_t *len)
{
    size_t need = 0, w = 0;
    assert_int_equal(obj_size(c, k, o, &need), TSAFE_OK);
    uint8_t *b = malloc(need);
    assert_non_null(b);
    assert_int_equal(obj_ser(c, k, o, b, need, &w), TSAFE_OK);
    assert_int_equal(w, need);
    *len = need;
    return b;
}

/* The decoded object can be used: a ciphertext decrypts, a plaintext
 * decodes, a public key encrypts, a secret key decrypts. */
static void obj_use(fixture *f, obj_kind k, void *o)
{
    tsafe_plaintext *pt = NULL;
    tsafe_ciphertext *ct = NULL;
    assert_int_equal(tsafe_plaintext_create(f->c, &pt), TSAFE_OK);
    switch (k) {
    case OBJ_CT:
        assert_int_equal(tsafe_ckks_decrypt(f->c, f->sk, o, pt), TSAFE_OK);
        break;
    case OBJ_PT: {
        double v[4];
        assert_int_equal(tsafe_ckks_decode(f->c, o, v, 4), TSAFE_OK);
        break;
    }
    case OBJ_PK:
    case OBJ_SK: {
        double v[4] = {0.5, -0.25, 0.125, 1.0};
        double scale = tsafe_context_params(f->c)->scale;
        assert_int_equal(tsafe_ckks_encode(f->c, v, 4, scale, 0, pt), TSAFE_OK);
        assert_int_equal(tsafe_ciphertext_create(f->c, &ct), TSAFE_OK);
        if (k == OBJ_PK) {
            assert_int_equal(tsafe_ckks_encrypt_public(f->c, o, pt, NULL, ct), TSAFE_OK);
        } else {
            assert_int_equal(tsafe_ckks_encrypt_symmetric(f->c, o, pt, NULL, ct), TSAFE_OK);
            assert_int_equal(tsafe_ckks_decrypt(f->c, o, ct, pt), TSAFE_OK);
        }
        break;
    }
    }
    tsafe_ciphertext_free(ct);
    tsafe_plaintext_free(pt);
}

/* Deserialize, re-serialize and require the identical bytes. */
static void *roundtrip(fixture *f, obj_kind k, const uint8_t *b, size_t len)
{
    void *o = NULL;
    assert_int_equal(obj_deser(f->c, k, b, len, &o), TSAFE_OK);
    assert_non_null(o);
    size_t len2;
    uint8_t *b2 = ser(f->c, k, o, &len2);
    assert_int_equal(len2, len);
    assert_memory_equal(b2, b, len);
    free(b2);
    return o;
}

/* Statuses a reader of untrusted bytes may give for malformed input. */
static int is_format_error(tsafe_status st)
{
    return st == TSAFE_E_FORMAT || st == TSAFE_E_TRUNCATED ||
           st == TSAFE_E_VERSION || st == TSAFE_E_KIND ||
           st == TSAFE_E_PARAMS_MISMATCH;
}

/* ------------------------------------------------- bit-packing helpers */

/* Bit offset of coefficient k of limb i of the first polynomial. */
static size_t coeff_bit(const tsafe_context *c, uint32_t limb, size_t k)
{
    size_t bit = (size_t)HDR * 8;
    for (uint32_t i = 0; i < limb; i++)
        bit += ((c->n * c->mod[i].bits + 7) / 8) * 8;
    return bit + k * c->mod[limb].bits;
}

static uint64_t get_bits(const uint8_t *b, size_t bit, uint32_t nbits)
{
    uint64_t v = 0;
    for (uint32_t j = 0; j < nbits; j++)
        v |= (uint64_t)((b[(bit + j) / 8] >> ((bit + j) % 8)) & 1) << j;
    return v;
}

static void set_bits(uint8_t *b, size_t bit, uint32_t nbits, uint64_t v)
{
    for (uint32_t j = 0; j < nbits; j++) {
        size_t p = bit + j;
        b[p / 8] = (uint8_t)((b[p / 8] & ~(1u << (p % 8))) | (((v >> j) & 1) << (p % 8)));
    }
}

static void put_f64(uint8_t *b, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (8 * i));
}

static void put_u32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static tsafe_status deser_status(fixture *f, obj_kind k, const uint8_t *b, size_t len)
{
    void *o = (void *)0x1;
    tsafe_status st = obj_deser(f->c, k, b, len, &o);
    if (st == TSAFE_OK) {
        obj_free(k, o);
    } else {
        assert_null(o); /* out cleared on error */
    }
    return st;
}

/* A copy of b with one edit applied by the caller. */
static uint8_t *dup(const uint8_t *b, size_t len)
{
    uint8_t *d = malloc(len + 16);
    assert_non_null(d);
    memcpy(d, b, len);
    memset(d + len, 0, 16);
    return d;
}

/* ------------------------------------------------------------ sweeps */

static void sweep_truncations(fixture *f, obj_kind k, const uint8_t *b, size_t len)
{
    /* each prefix sits at the very end of one heap block, so ASan sees any
     * read past the given length */
    uint8_t *blk = malloc(len);
    assert_non_null(blk);
    for (size_t l = 0; l < len; l++) {
        uint8_t *t = blk + (len - l);
        memcpy(t, b, l);
        void *o = (void *)0x1;
        tsafe_status st = obj_deser(f->c, k, t, l, &o);
        if (st != TSAFE_E_TRUNCATED && st != TSAFE_E_FORMAT)
            fail_msg("truncation to %zu of %zu bytes: status %d", l, len, st);
        assert_null(o);
    }
    sodium_memzero(blk, len);
    free(blk);
}

/* Corrupt byte pos of b (xor with a random nonzero byte); the reader must
 * fail with a format-family status or produce a usable object that
 * re-serializes to exactly the corrupted bytes. Returns 1 on success. */
static int corrupt_one(fixture *f, obj_kind k, const uint8_t *b, size_t len,
                       size_t pos, uint8_t *scratch, uint8_t *reser)
{
    memcpy(scratch, b, len);
    scratch[pos] ^= (uint8_t)(1 + tsafe_test_below(255));
    void *o = (void *)0x1;
    tsafe_status st = obj_deser(f->c, k, scratch, len, &o);
    if (st != TSAFE_OK) {
        if (!is_format_error(st))
            fail_msg("corruption at %zu of %zu: status %d", pos, len, st);
        assert_null(o);
        return 0;
    }
    if (pos < OFF_SCALE) /* only the scale may change validly in the header */
        fail_msg("corrupted header byte %zu accepted", pos);
    obj_use(f, k, o);
    size_t w = 0;
    assert_int_equal(obj_ser(f->c, k, o, reser, len, &w), TSAFE_OK);
    assert_int_equal(w, len);
    assert_memory_equal(reser, scratch, len);
    obj_free(k, o);
    return 1;
}

/* positions: every byte when sample == 0, else every header byte plus
 * `sample` random body positions. */
static void sweep_corruptions(fixture *f, obj_kind k, const uint8_t *b, size_t len,
                              size_t sample, const char *what)
{
    uint8_t *scratch = malloc(len), *reser = malloc(len);
    assert_non_null(scratch);
    assert_non_null(reser);
    size_t ok = 0, tried = 0;
    if (sample == 0) {
        for (size_t pos = 0; pos < len; pos++, tried++)
            ok += corrupt_one(f, k, b, len, pos, scratch, reser);
    } else {
        for (size_t pos = 0; pos < HDR; pos++, tried++)
            ok += corrupt_one(f, k, b, len, pos, scratch, reser);
        for (size_t s = 0; s < sample; s++, tried++)
            ok += corrupt_one(f, k, b, len, HDR + tsafe_test_below(len - HDR), scratch, reser);
    }
    print_message("%-28s %7zu bytes: %zu corruptions, %zu rejected, %zu decoded\n",
                  what, len, tried, tried - ok, ok);
    sodium_memzero(scratch, len);
    sodium_memzero(reser, len);
    free(scratch);
    free(reser);
}

/* ----------------------------------------------------------- round trips */

static void decrypt_bytes_equal(fixture *f, const tsafe_ciphertext *a,
                                const tsafe_ciphertext *b)
{
    tsafe_plaintext *pa = NULL, *pb = NULL;
    assert_int_equal(tsafe_plaintext_create(f->c, &pa), TSAFE_OK);
    assert_int_equal(tsafe_plaintext_create(f->c, &pb), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decrypt(f->c, f->sk, a, pa), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decrypt(f->c, f->sk, b, pb), TSAFE_OK);
    size_t la, lb;
    uint8_t *ba = ser(f->c, OBJ_PT, pa, &la), *bb = ser(f->c, OBJ_PT, pb, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(ba, bb, la);
    free(ba);
    free(bb);
    tsafe_plaintext_free(pa);
    tsafe_plaintext_free(pb);
}

static double max_err(fixture *f, const tsafe_ciphertext *ct, const double *want)
{
    tsafe_plaintext *pt = NULL;
    double *got = malloc(f->slots * sizeof *got);
    assert_int_equal(tsafe_plaintext_create(f->c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decrypt(f->c, f->sk, ct, pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decode(f->c, pt, got, f->slots), TSAFE_OK);
    double e = 0;
    for (size_t i = 0; i < f->slots; i++)
        e = fmax(e, fabs(got[i] - want[i]));
    free(got);
    tsafe_plaintext_free(pt);
    return e;
}

/* Serialize ct, deserialize, check metadata, decryption and bytes. */
static size_t ct_roundtrip(fixture *f, const tsafe_ciphertext *ct, const double *want,
                           double tol)
{
    size_t len;
    uint8_t *b = ser(f->c, OBJ_CT, ct, &len);
    tsafe_ciphertext *d = roundtrip(f, OBJ_CT, b, len);
    assert_int_equal(tsafe_ciphertext_level(d), tsafe_ciphertext_level(ct));
    assert_true(tsafe_ciphertext_scale(d) == tsafe_ciphertext_scale(ct));
    assert_int_equal(tsafe_ciphertext_is_seeded(d), tsafe_ciphertext_is_seeded(ct));
    uint32_t lvl = tsafe_ciphertext_level(ct);
    size_t words = (size_t)(lvl + 1) * f->c->n * sizeof(uint64_t);
    assert_memory_equal(d->c0, ct->c0, words);
    assert_memory_equal(d->c1, ct->c1, words); /* a seeded c1 re-expands */
    decrypt_bytes_equal(f, ct, d);
    if (want) {
        double e = max_err(f, d, want);
        if (!(e < tol))
            fail_msg("level %u seeded %d: error %.3g above %.3g", lvl,
                     tsafe_ciphertext_is_seeded(ct), e, tol);
    }
    tsafe_ciphertext_free(d);
    free(b);
    return len;
}

static void check_ct_roundtrips(fixture *f, double tol, double tol_low)
{
    double *x = rand_vec(f->slots), *w = rand_vec(f->slots), *xw = malloc(f->slots * 8);
    for (size_t i = 0; i < f->slots; i++)
        xw[i] = x[i] * w[i];
    uint32_t top = f->top;
    /* seeded at the top and the lowest level, public-key (unseeded) */
    tsafe_ciphertext *s_top = encrypt(f, x, top, 0), *s_low = encrypt(f, x, 0, 0);
    tsafe_ciphertext *p_top = encrypt(f, x, top, 1);
    assert_true(tsafe_ciphertext_is_seeded(s_top));
    assert_false(tsafe_ciphertext_is_seeded(p_top));
    size_t l_s_top = ct_roundtrip(f, s_top, x, tol);
    size_t l_s_low = ct_roundtrip(f, s_low, x, tol);
    size_t l_p_top = ct_roundtrip(f, p_top, x, tol);
    /* seeded: c0 plus a 32-byte seed instead of c1 (about half) */
    assert_int_equal(l_p_top - HDR, 2 * (l_s_top - HDR - TSAFE_SEED_BYTES));
    print_message("ciphertext bytes: top %zu, top seeded %zu (%.3f), lowest seeded %zu\n",
                  l_p_top, l_s_top, (double)l_s_top / l_p_top, l_s_low);
    /* after mul_plain (unseeded), and after rescale at the lowest level */
    tsafe_plaintext *pw = encode(f, w, top);
    tsafe_ciphertext *m = NULL;
    assert_int_equal(tsafe_ciphertext_create(f->c, &m), TSAFE_OK);
    assert_int_equal(tsafe_ckks_mul_plain(f->c, s_top, pw, m), TSAFE_OK);
    assert_false(tsafe_ciphertext_is_seeded(m));
    size_t l_m = ct_roundtrip(f, m, xw, tol);
    assert_int_equal(l_m, l_p_top);
    if (top > 0) {
        assert_int_equal(tsafe_ckks_rescale(f->c, m, m), TSAFE_OK);
        assert_int_equal(tsafe_ckks_drop_to_level(f->c, m, 0, m), TSAFE_OK);
        assert_false(tsafe_ciphertext_is_seeded(m));
        size_t l_low = ct_roundtrip(f, m, xw, tol_low);
        assert_int_equal(l_low - HDR, 2 * (l_s_low - HDR - TSAFE_SEED_BYTES));
        /* drop_to_level of a seeded ciphertext stays seeded */
        tsafe_ciphertext *dr = NULL;
        assert_int_equal(tsafe_ciphertext_create(f->c, &dr), TSAFE_OK);
        assert_int_equal(tsafe_ckks_drop_to_level(f->c, s_top, 0, dr), TSAFE_OK);
        assert_true(tsafe_ciphertext_is_seeded(dr));
        assert_int_equal(ct_roundtrip(f, dr, x, tol), l_s_low);
        tsafe_ciphertext_free(dr);
    }
    tsafe_ciphertext_free(m);
    tsafe_plaintext_free(pw);
    tsafe_ciphertext_free(s_top);
    tsafe_ciphertext_free(s_low);
    tsafe_ciphertext_free(p_top);
    free(x); free(w); free(xw);
}

static void check_pt_roundtrip(fixture *f)
{
    double *x = rand_vec(f->slots);
    for (uint32_t level = 0; level <= f->top; level += (f->top ? f->top : 1)) {
        tsafe_plaintext *pt = encode(f, x, level);
        size_t len;
        uint8_t *b = ser(f->c, OBJ_PT, pt, &len);
        tsafe_plaintext *d = roundtrip(f, OBJ_PT, b, len);
        assert_int_equal(tsafe_plaintext_level(d), level);
        assert_true(tsafe_plaintext_scale(d) == tsafe_plaintext_scale(pt));
        double *v1 = malloc(f->slots * 8), *v2 = malloc(f->slots * 8);
        assert_int_equal(tsafe_ckks_decode(f->c, pt, v1, f->slots), TSAFE_OK);
        assert_int_equal(tsafe_ckks_decode(f->c, d, v2, f->slots), TSAFE_OK);
        assert_memory_equal(v1, v2, f->slots * 8);
        /* a prepared plaintext serializes the same bytes */
        assert_int_equal(tsafe_plaintext_prepare_mul(f->c, pt), TSAFE_OK);
        size_t len2;
        uint8_t *b2 = ser(f->c, OBJ_PT, pt, &len2);
        assert_int_equal(len2, len);
        assert_memory_equal(b, b2, len);
        free(v1); free(v2); free(b); free(b2);
        tsafe_plaintext_free(d);
        tsafe_plaintext_free(pt);
    }
    free(x);
}

static void check_key_roundtrips(fixture *f)
{
    size_t len;
    /* public key: encryption with the same seed gives identical bytes */
    uint8_t *b = ser(f->c, OBJ_PK, f->pk, &len);
    tsafe_public_key *pk2 = roundtrip(f, OBJ_PK, b, len);
    double *x = rand_vec(f->slots);
    tsafe_plaintext *pt = encode(f, x, f->top);
    tsafe_ciphertext *c1 = NULL, *c2 = NULL;
    uint8_t seed[32];
    tsafe_test_seed32(seed);
    assert_int_equal(tsafe_ciphertext_create(f->c, &c1), TSAFE_OK);
    assert_int_equal(tsafe_ciphertext_create(f->c, &c2), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_public(f->c, f->pk, pt, seed, c1), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_public(f->c, pk2, pt, seed, c2), TSAFE_OK);
    size_t l1, l2;
    uint8_t *e1 = ser(f->c, OBJ_CT, c1, &l1), *e2 = ser(f->c, OBJ_CT, c2, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(e1, e2, l1);
    free(e1); free(e2); free(b);
    tsafe_public_key_free(pk2);
    /* secret key: same coefficients, decrypts the same, same derived pk */
    b = ser(f->c, OBJ_SK, f->sk, &len);
    assert_int_equal(len, HDR + f->c->n / 4);
    tsafe_secret_key *sk2 = roundtrip(f, OBJ_SK, b, len);
    assert_memory_equal(sk2->s, f->sk->s, f->c->n);
    assert_memory_equal(sk2->s_ntt, f->sk->s_ntt,
                        (size_t)(f->top + 1) * f->c->n * sizeof(uint64_t));
    tsafe_plaintext *d1 = NULL, *d2 = NULL;
    assert_int_equal(tsafe_plaintext_create(f->c, &d1), TSAFE_OK);
    assert_int_equal(tsafe_plaintext_create(f->c, &d2), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decrypt(f->c, f->sk, c1, d1), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decrypt(f->c, sk2, c1, d2), TSAFE_OK);
    e1 = ser(f->c, OBJ_PT, d1, &l1);
    e2 = ser(f->c, OBJ_PT, d2, &l2);
    assert_memory_equal(e1, e2, l1);
    free(e1); free(e2);
    tsafe_public_key *pa = NULL, *pb = NULL;
    assert_int_equal(tsafe_public_key_generate(f->c, f->sk, seed, &pa), TSAFE_OK);
    assert_int_equal(tsafe_public_key_generate(f->c, sk2, seed, &pb), TSAFE_OK);
    e1 = ser(f->c, OBJ_PK, pa, &l1);
    e2 = ser(f->c, OBJ_PK, pb, &l2);
    assert_memory_equal(e1, e2, l1);
    free(e1); free(e2);
    tsafe_public_key_free(pa);
    tsafe_public_key_free(pb);
    sodium_memzero(b, len); /* serialized secret key: the caller wipes it */
    free(b);
    tsafe_secret_key_free(sk2);
    tsafe_plaintext_free(d1);
    tsafe_plaintext_free(d2);
    tsafe_plaintext_free(pt);
    tsafe_ciphertext_free(c1);
    tsafe_ciphertext_free(c2);
    free(x);
}

static void test_roundtrip_small(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    /* scale 2^25, N=1024: public-key noise reaches ~1e4 in the slots, so
     * errors ~1e-3 are expected; after ct x pt + rescale the scale is 2^20 */
    check_ct_roundtrips(&f, 1e-2, 1e-1);
    check_pt_roundtrip(&f);
    check_key_roundtrips(&f);
    fx_close(&f);
}

static void test_roundtrip_presets(void **state)
{
    (void)state;
    const char *names[] = {"ifma-n4096", "seed-n16384"};
    for (int i = 0; i < 2; i++) {
        fixture f;
        fx_open_preset(&f, names[i]);
        check_ct_roundtrips(&f, 1e-6, 1e-5);
        check_pt_roundtrip(&f);
        check_key_roundtrips(&f);
        fx_close(&f);
    }
}

/* serialized_size_at(level) is the size of a real full ciphertext at every
 * level, without one: what servers size their response buffers with. */
static void test_size_at_levels(void **state)
{
    (void)state;
    const char *names[] = {"ifma-n4096", "seed-n16384"};
    for (int i = 0; i < 2; i++) {
        fixture f;
        fx_open_preset(&f, names[i]);
        double *x = rand_vec(f.slots);
        tsafe_ciphertext *s = encrypt(&f, x, f.top, 0), *u = NULL;
        tsafe_plaintext *pt = encode(&f, x, f.top);
        assert_int_equal(tsafe_ciphertext_create(f.c, &u), TSAFE_OK);
        assert_int_equal(tsafe_ckks_mul_plain(f.c, s, pt, u), TSAFE_OK);
        for (uint32_t l = f.top + 1; l-- > 0;) {
            size_t real = 0, at = 0;
            assert_int_equal(tsafe_ckks_drop_to_level(f.c, u, l, u), TSAFE_OK);
            assert_int_equal(tsafe_ciphertext_serialized_size(f.c, u, &real), TSAFE_OK);
            assert_int_equal(tsafe_ciphertext_serialized_size_at(f.c, l, &at), TSAFE_OK);
            assert_int_equal(at, real);
        }
        size_t at = 0;
        assert_int_equal(tsafe_ciphertext_serialized_size_at(f.c, f.top + 1, &at), TSAFE_E_LEVEL);
        tsafe_ciphertext_free(s);
        tsafe_ciphertext_free(u);
        tsafe_plaintext_free(pt);
        free(x);
        fx_close(&f);
    }
}

/* --------------------------------------------------------- bad bytes */

typedef struct {
    uint8_t *ct_seeded, *ct_full, *pk, *sk, *pt;
    size_t l_seeded, l_full, l_pk, l_sk, l_pt;
} blobs;

static void blobs_make(fixture *f, blobs *bl)
{
    double *x = rand_vec(f->slots);
    tsafe_ciphertext *s = encrypt(f, x, f->top, 0);
    tsafe_ciphertext *u = NULL;
    tsafe_plaintext *pt = encode(f, x, f->top);
    assert_int_equal(tsafe_ciphertext_create(f->c, &u), TSAFE_OK);
    assert_int_equal(tsafe_ckks_mul_plain(f->c, s, pt, u), TSAFE_OK);
    bl->ct_seeded = ser(f->c, OBJ_CT, s, &bl->l_seeded);
    bl->ct_full = ser(f->c, OBJ_CT, u, &bl->l_full);
    bl->pk = ser(f->c, OBJ_PK, f->pk, &bl->l_pk);
    bl->sk = ser(f->c, OBJ_SK, f->sk, &bl->l_sk);
    bl->pt = ser(f->c, OBJ_PT, pt, &bl->l_pt);
    tsafe_ciphertext_free(s);
    tsafe_ciphertext_free(u);
    tsafe_plaintext_free(pt);
    free(x);
}

static void blobs_free(blobs *bl)
{
    sodium_memzero(bl->sk, bl->l_sk);
    free(bl->ct_seeded); free(bl->ct_full); free(bl->pk); free(bl->sk); free(bl->pt);
}

static void test_truncations_small(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    blobs bl;
    blobs_make(&f, &bl);
    sweep_truncations(&f, OBJ_CT, bl.ct_seeded, bl.l_seeded);
    sweep_truncations(&f, OBJ_CT, bl.ct_full, bl.l_full);
    sweep_truncations(&f, OBJ_PK, bl.pk, bl.l_pk);
    sweep_truncations(&f, OBJ_SK, bl.sk, bl.l_sk);
    sweep_truncations(&f, OBJ_PT, bl.pt, bl.l_pt);
    blobs_free(&bl);
    fx_close(&f);
}

static void test_corruptions_small(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    blobs bl;
    blobs_make(&f, &bl);
    sweep_corruptions(&f, OBJ_CT, bl.ct_seeded, bl.l_seeded, 0, "n1024 ciphertext (seeded)");
    sweep_corruptions(&f, OBJ_CT, bl.ct_full, bl.l_full, 0, "n1024 ciphertext");
    sweep_corruptions(&f, OBJ_PK, bl.pk, bl.l_pk, 0, "n1024 public key");
    sweep_corruptions(&f, OBJ_SK, bl.sk, bl.l_sk, 0, "n1024 secret key");
    sweep_corruptions(&f, OBJ_PT, bl.pt, bl.l_pt, 500, "n1024 plaintext");
    blobs_free(&bl);
    fx_close(&f);
}

/* A real preset: every truncation, every header byte, sampled body. */
static void test_bad_bytes_preset(void **state)
{
    (void)state;
    fixture f;
    fx_open_preset(&f, "ifma-n4096");
    blobs bl;
    blobs_make(&f, &bl);
    sweep_truncations(&f, OBJ_CT, bl.ct_seeded, bl.l_seeded);
    sweep_truncations(&f, OBJ_PK, bl.pk, bl.l_pk);
    sweep_truncations(&f, OBJ_SK, bl.sk, bl.l_sk);
    sweep_corruptions(&f, OBJ_CT, bl.ct_seeded, bl.l_seeded, 300, "n4096 ciphertext (seeded)");
    sweep_corruptions(&f, OBJ_CT, bl.ct_full, bl.l_full, 300, "n4096 ciphertext");
    sweep_corruptions(&f, OBJ_PK, bl.pk, bl.l_pk, 300, "n4096 public key");
    sweep_corruptions(&f, OBJ_SK, bl.sk, bl.l_sk, 0, "n4096 secret key");
    blobs_free(&bl);
    fx_close(&f);
}

/* One targeted edit per validation rule. */
static void check_header_rules(fixture *f, obj_kind k, const uint8_t *b, size_t len)
{
    uint8_t *d;
    /* the untouched bytes decode */
    assert_int_equal(deser_status(f, k, b, len), TSAFE_OK);
    d = dup(b, len);
    d[0] = 'X';
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_FORMAT);
    memcpy(d, b, len);
    d[OFF_VERSION] = 2;
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_VERSION);
    d[OFF_VERSION] = 0;
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_VERSION);
    memcpy(d, b, len);
    d[OFF_KIND] = 0x77;
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_KIND);
    memcpy(d, b, len);
    d[OFF_RESERVED] = 1;
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_FORMAT);
    memcpy(d, b, len);
    d[OFF_FLAGS] |= 0x80; /* undefined flag bit */
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_FORMAT);
    memcpy(d, b, len);
    d[OFF_FP + 17] ^= 0x10;
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_PARAMS_MISMATCH);
    /* level >= levels */
    memcpy(d, b, len);
    put_u32(d + OFF_LEVEL, f->top + 1);
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_FORMAT);
    put_u32(d + OFF_LEVEL, UINT32_MAX);
    assert_int_equal(deser_status(f, k, d, len), TSAFE_E_FORMAT);
    /* scale: NaN, infinities, negative, zero, below 1, huge */
    const double bad_scales[] = {NAN, -NAN, INFINITY, -INFINITY, -0x1p40, 0.0, -0.0,
                                 0.5, 0x1p1001, 1e308};
    for (size_t i = 0; i < sizeof bad_scales / sizeof *bad_scales; i++) {
        memcpy(d, b, len);
        put_f64(d + OFF_SCALE, bad_scales[i]);
        assert_int_equal(deser_status(f, k, d, len), TSAFE_E_FORMAT);
    }
    /* trailing bytes */
    memcpy(d, b, len);
    assert_int_equal(deser_status(f, k, d, len + 1), TSAFE_E_FORMAT);
    assert_int_equal(deser_status(f, k, d, len + 16), TSAFE_E_FORMAT);
    /* header alone, and one byte short */
    assert_int_equal(deser_status(f, k, d, HDR), TSAFE_E_TRUNCATED);
    assert_int_equal(deser_status(f, k, d, len - 1), TSAFE_E_TRUNCATED);
    free(d);
}

/* Coefficient q_i and 2^bits - 1 (both >= q_i) at the first, last and a
 * random position of every limb -> FORMAT; q_i - 1 is accepted. */
static void check_coeff_range(fixture *f, obj_kind k, const uint8_t *b, size_t len,
                              uint32_t level)
{
    uint8_t *d = dup(b, len);
    for (uint32_t i = 0; i <= level; i++) {
        uint64_t q = f->c->mod[i].q;
        uint32_t bits = f->c->mod[i].bits;
        size_t pos[3] = {0, f->c->n - 1, tsafe_test_below(f->c->n)};
        for (int j = 0; j < 3; j++) {
            size_t bit = coeff_bit(f->c, i, pos[j]);
            uint64_t orig = get_bits(b, bit, bits);
            assert_true(orig < q);
            memcpy(d, b, len);
            set_bits(d, bit, bits, q);
            assert_int_equal(deser_status(f, k, d, len), TSAFE_E_FORMAT);
            set_bits(d, bit, bits, bits == 64 ? ~0ull : (1ull << bits) - 1);
            assert_int_equal(deser_status(f, k, d, len), TSAFE_E_FORMAT);
            set_bits(d, bit, bits, q - 1);
            assert_int_equal(deser_status(f, k, d, len), TSAFE_OK);
        }
    }
    free(d);
}

static void test_specific_rules(void **state)
{
    (void)state;
    fixture f, g;
    fx_open_small(&f);
    /* another context with the same N and sizes: other primes */
    tsafe_params p = *tsafe_context_params(f.c);
    memset(p.primes, 0, sizeof p.primes);
    p.prime_bits[0] = 31;
    p.prime_bits[1] = 29;
    fx_open_params(&g, &p);
    blobs bl;
    blobs_make(&f, &bl);

    check_header_rules(&f, OBJ_CT, bl.ct_seeded, bl.l_seeded);
    check_header_rules(&f, OBJ_CT, bl.ct_full, bl.l_full);
    check_header_rules(&f, OBJ_PK, bl.pk, bl.l_pk);
    check_header_rules(&f, OBJ_SK, bl.sk, bl.l_sk);
    check_header_rules(&f, OBJ_PT, bl.pt, bl.l_pt);
    check_coeff_range(&f, OBJ_CT, bl.ct_seeded, bl.l_seeded, f.top);
    check_coeff_range(&f, OBJ_CT, bl.ct_full, bl.l_full, f.top);
    check_coeff_range(&f, OBJ_PK, bl.pk, bl.l_pk, f.top);
    check_coeff_range(&f, OBJ_PT, bl.pt, bl.l_pt, f.top);

    /* other kinds: each reader refuses the others' bytes */
    assert_int_equal(deser_status(&f, OBJ_CT, bl.pt, bl.l_pt), TSAFE_E_KIND);
    assert_int_equal(deser_status(&f, OBJ_CT, bl.pk, bl.l_pk), TSAFE_E_KIND);
    assert_int_equal(deser_status(&f, OBJ_PT, bl.ct_full, bl.l_full), TSAFE_E_KIND);
    assert_int_equal(deser_status(&f, OBJ_PK, bl.ct_full, bl.l_full), TSAFE_E_KIND);
    assert_int_equal(deser_status(&f, OBJ_SK, bl.pk, bl.l_pk), TSAFE_E_KIND);
    assert_int_equal(deser_status(&f, OBJ_PK, bl.sk, bl.l_sk), TSAFE_E_KIND);
    /* params encoding (kind 1) is not a ciphertext either */
    uint8_t pbuf[512];
    size_t pw = 0;
    assert_int_equal(tsafe_params_serialize(tsafe_context_params(f.c), pbuf, sizeof pbuf, &pw),
                     TSAFE_OK);
    assert_true(is_format_error(deser_status(&f, OBJ_CT, pbuf, pw)));

    /* the other context's fingerprint */
    assert_int_equal(deser_status(&g, OBJ_CT, bl.ct_seeded, bl.l_seeded),
                     TSAFE_E_PARAMS_MISMATCH);
    assert_int_equal(deser_status(&g, OBJ_CT, bl.ct_full, bl.l_full),
                     TSAFE_E_PARAMS_MISMATCH);
    assert_int_equal(deser_status(&g, OBJ_PK, bl.pk, bl.l_pk), TSAFE_E_PARAMS_MISMATCH);
    assert_int_equal(deser_status(&g, OBJ_SK, bl.sk, bl.l_sk), TSAFE_E_PARAMS_MISMATCH);
    assert_int_equal(deser_status(&g, OBJ_PT, bl.pt, bl.l_pt), TSAFE_E_PARAMS_MISMATCH);

    uint8_t *d;
    /* ciphertext flags: NTT flag cleared; seeded flag toggled (length then
     * disagrees); a plaintext / key with the seeded flag */
    d = dup(bl.ct_full, bl.l_full);
    d[OFF_FLAGS] &= (uint8_t)~1u;
    assert_int_equal(deser_status(&f, OBJ_CT, d, bl.l_full), TSAFE_E_FORMAT);
    memcpy(d, bl.ct_full, bl.l_full);
    d[OFF_FLAGS] |= 2u;
    assert_true(is_format_error(deser_status(&f, OBJ_CT, d, bl.l_full)));
    free(d);
    d = dup(bl.ct_seeded, bl.l_seeded);
    d[OFF_FLAGS] &= (uint8_t)~2u;
    assert_true(is_format_error(deser_status(&f, OBJ_CT, d, bl.l_seeded)));
    free(d);
    d = dup(bl.pt, bl.l_pt);
    d[OFF_FLAGS] |= 2u;
    assert_int_equal(deser_status(&f, OBJ_PT, d, bl.l_pt), TSAFE_E_FORMAT);
    free(d);
    d = dup(bl.pk, bl.l_pk);
    d[OFF_FLAGS] = 0;
    assert_int_equal(deser_status(&f, OBJ_PK, d, bl.l_pk), TSAFE_E_FORMAT);
    free(d);
    d = dup(bl.sk, bl.l_sk);
    d[OFF_FLAGS] = 1;
    assert_int_equal(deser_status(&f, OBJ_SK, d, bl.l_sk), TSAFE_E_FORMAT);
    free(d);

    /* keys are always at the top level with scale 1 */
    if (f.top > 0) {
        d = dup(bl.pk, bl.l_pk);
        put_u32(d + OFF_LEVEL, f.top - 1);
        assert_int_equal(deser_status(&f, OBJ_PK, d, bl.l_pk), TSAFE_E_FORMAT);
        free(d);
        d = dup(bl.sk, bl.l_sk);
        put_u32(d + OFF_LEVEL, 0);
        assert_int_equal(deser_status(&f, OBJ_SK, d, bl.l_sk), TSAFE_E_FORMAT);
        free(d);
    }
    d = dup(bl.pk, bl.l_pk);
    put_f64(d + OFF_SCALE, 2.0);
    assert_int_equal(deser_status(&f, OBJ_PK, d, bl.l_pk), TSAFE_E_FORMAT);
    free(d);
    d = dup(bl.sk, bl.l_sk);
    put_f64(d + OFF_SCALE, 2.0);
    assert_int_equal(deser_status(&f, OBJ_SK, d, bl.l_sk), TSAFE_E_FORMAT);
    free(d);

    /* a ciphertext whose level says 0 but whose body is the top level's */
    if (f.top > 0) {
        d = dup(bl.ct_full, bl.l_full);
        put_u32(d + OFF_LEVEL, 0);
        assert_int_equal(deser_status(&f, OBJ_CT, d, bl.l_full), TSAFE_E_FORMAT);
        free(d);
    }

    /* secret key: the 2-bit value 3 anywhere -> FORMAT; 0..2 accepted */
    d = dup(bl.sk, bl.l_sk);
    for (int t = 0; t < 20; t++) {
        size_t coeff = tsafe_test_below(f.c->n);
        size_t byte = HDR + coeff / 4, sh = 2 * (coeff % 4);
        memcpy(d, bl.sk, bl.l_sk);
        d[byte] = (uint8_t)(d[byte] | (3u << sh));
        assert_int_equal(deser_status(&f, OBJ_SK, d, bl.l_sk), TSAFE_E_FORMAT);
        d[byte] = (uint8_t)((d[byte] & ~(3u << sh)) | ((unsigned)tsafe_test_below(3) << sh));
        assert_int_equal(deser_status(&f, OBJ_SK, d, bl.l_sk), TSAFE_OK);
    }
    memcpy(d, bl.sk, bl.l_sk);
    d[bl.l_sk - 1] |= 0xC0; /* last coefficient */
    assert_int_equal(deser_status(&f, OBJ_SK, d, bl.l_sk), TSAFE_E_FORMAT);
    memset(d, 0, bl.l_sk);
    free(d);

    /* Padding bits: every limb is N * bits bits with N >= 1024 a power of
     * two, so limbs always end on a byte boundary and no padding exists;
     * the reserved header byte (checked above) is the only filler. */
    for (uint32_t i = 0; i <= f.top; i++)
        assert_int_equal((f.c->n * f.c->mod[i].bits) % 8, 0);

    blobs_free(&bl);
    fx_close(&g);
    fx_close(&f);
}

/* Writer side: sizes, small buffers, NULLs, states, other contexts. */
static void test_writer_errors(void **state)
{
    (void)state;
    fixture f, g;
    fx_open_small(&f);
    fx_open_preset(&g, "ifma-n4096");
    double *x = rand_vec(f.slots);
    tsafe_ciphertext *ct = encrypt(&f, x, f.top, 1);
    tsafe_plaintext *pt = encode(&f, x, f.top);
    const void *objs[4] = {ct, pt, f.pk, f.sk};
    const obj_kind kinds[4] = {OBJ_CT, OBJ_PT, OBJ_PK, OBJ_SK};
    for (int i = 0; i < 4; i++) {
        size_t need = 0, w = 12345;
        assert_int_equal(obj_size(f.c, kinds[i], objs[i], &need), TSAFE_OK);
        uint8_t *b = malloc(need);
        /* too small: the needed size comes back */
        assert_int_equal(obj_ser(f.c, kinds[i], objs[i], b, need - 1, &w),
                         TSAFE_E_BUFFER_SMALL);
        assert_int_equal(w, need);
        w = 0;
        assert_int_equal(obj_ser(f.c, kinds[i], objs[i], b, 0, &w), TSAFE_E_BUFFER_SMALL);
        assert_int_equal(w, need);
        /* size query with a NULL buffer */
        w = 0;
        assert_int_equal(obj_ser(f.c, kinds[i], objs[i], NULL, 0, &w), TSAFE_E_NULL);
        assert_int_equal(w, need);
        assert_int_equal(obj_ser(f.c, kinds[i], objs[i], b, need, NULL), TSAFE_E_NULL);
        assert_int_equal(obj_ser(NULL, kinds[i], objs[i], b, need, &w), TSAFE_E_NULL);
        assert_int_equal(obj_ser(f.c, kinds[i], NULL, b, need, &w), TSAFE_E_NULL);
        assert_int_equal(obj_size(f.c, kinds[i], objs[i], NULL), TSAFE_E_NULL);
        /* another context */
        assert_int_equal(obj_ser(g.c, kinds[i], objs[i], b, need, &w),
                         TSAFE_E_PARAMS_MISMATCH);
        /* exact and larger capacities */
        assert_int_equal(obj_ser(f.c, kinds[i], objs[i], b, need, &w), TSAFE_OK);
        assert_int_equal(w, need);
        uint8_t *big = malloc(need + 100);
        memset(big, 0xAB, need + 100);
        assert_int_equal(obj_ser(f.c, kinds[i], objs[i], big, need + 100, &w), TSAFE_OK);
        assert_int_equal(w, need);
        assert_memory_equal(big, b, need);
        for (size_t j = need; j < need + 100; j++)
            assert_int_equal(big[j], 0xAB); /* nothing written past `need` */
        /* reader NULLs */
        void *o = NULL;
        assert_int_equal(obj_deser(f.c, kinds[i], NULL, need, &o), TSAFE_E_NULL);
        assert_int_equal(obj_deser(NULL, kinds[i], b, need, &o), TSAFE_E_NULL);
        assert_int_equal(obj_deser(f.c, kinds[i], b, need, NULL), TSAFE_E_NULL);
        memset(b, 0, need);
        memset(big, 0, need);
        free(big);
        free(b);
    }
    /* empty (never encrypted / encoded) objects cannot be serialized */
    tsafe_ciphertext *e = NULL;
    tsafe_plaintext *ep = NULL;
    size_t s;
    assert_int_equal(tsafe_ciphertext_create(f.c, &e), TSAFE_OK);
    assert_int_equal(tsafe_plaintext_create(f.c, &ep), TSAFE_OK);
    assert_int_equal(tsafe_ciphertext_serialized_size(f.c, e, &s), TSAFE_E_STATE);
    assert_int_equal(tsafe_plaintext_serialized_size(f.c, ep, &s), TSAFE_E_STATE);
    tsafe_ciphertext_free(e);
    tsafe_plaintext_free(ep);
    tsafe_ciphertext_free(ct);
    tsafe_plaintext_free(pt);
    free(x);
    fx_close(&g);
    fx_close(&f);
}

/* Whatever a writer emits, its reader accepts: a ciphertext whose scale left
 * the range the reader allows ([1, 2^1000]) through rescale (scale 2^25
 * divided by a 30-bit prime) or repeated constant products must either be
 * refused by the writer (TSAFE_E_SCALE) or round-trip. (Before the fix in
 * serialize.c the writer emitted such bytes and the reader refused them.) */
static void check_writer_reader_agree(fixture *f, const tsafe_ciphertext *ct)
{
    size_t need = 0;
    tsafe_status st = tsafe_ciphertext_serialized_size(f->c, ct, &need);
    if (st != TSAFE_OK) {
        assert_int_equal(st, TSAFE_E_SCALE);
        uint8_t b[8];
        size_t w = 0;
        assert_int_equal(tsafe_ciphertext_serialize(f->c, ct, b, sizeof b, &w), TSAFE_E_SCALE);
        return;
    }
    uint8_t *b = ser(f->c, OBJ_CT, ct, &need);
    tsafe_ciphertext *d = NULL;
    st = tsafe_ciphertext_deserialize(f->c, b, need, &d);
    if (st != TSAFE_OK)
        fail_msg("scale %g: serialized, but the reader refuses it (%s)",
                 tsafe_ciphertext_scale(ct), tsafe_status_name(st));
    assert_true(tsafe_ciphertext_scale(d) == tsafe_ciphertext_scale(ct));
    tsafe_ciphertext_free(d);
    free(b);
}

static void test_scale_out_of_range(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    double *x = rand_vec(f.slots);
    tsafe_ciphertext *ct = encrypt(&f, x, f.top, 1), *r = NULL;
    assert_int_equal(tsafe_ciphertext_create(f.c, &r), TSAFE_OK);
    /* 2^25 / q_1 (~2^30) < 1 */
    assert_int_equal(tsafe_ckks_rescale(f.c, ct, r), TSAFE_OK);
    assert_true(tsafe_ciphertext_scale(r) < 1.0);
    check_writer_reader_agree(&f, r);
    /* 2^25 * (2^60)^16 * 2^30 = 2^1015: above 2^1000, still finite */
    assert_int_equal(tsafe_ciphertext_copy(f.c, ct, r), TSAFE_OK);
    for (int i = 0; i < 16; i++)
        assert_int_equal(tsafe_ckks_mul_const(f.c, r, 1.0, 0x1p60, r), TSAFE_OK);
    assert_int_equal(tsafe_ckks_mul_const(f.c, r, 1.0, 0x1p30, r), TSAFE_OK);
    assert_true(tsafe_ciphertext_scale(r) > 0x1p1000);
    check_writer_reader_agree(&f, r);
    /* the same rule for plaintexts: decrypting keeps the scale */
    tsafe_plaintext *pt = NULL;
    assert_int_equal(tsafe_plaintext_create(f.c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decrypt(f.c, f.sk, r, pt), TSAFE_OK);
    size_t need = 0;
    tsafe_status st = tsafe_plaintext_serialized_size(f.c, pt, &need);
    if (st == TSAFE_OK) {
        uint8_t *b = ser(f.c, OBJ_PT, pt, &need);
        tsafe_plaintext *d = NULL;
        assert_int_equal(tsafe_plaintext_deserialize(f.c, b, need, &d), TSAFE_OK);
        tsafe_plaintext_free(d);
        free(b);
    } else {
        assert_int_equal(st, TSAFE_E_SCALE);
    }
    tsafe_plaintext_free(pt);
    tsafe_ciphertext_free(r);
    tsafe_ciphertext_free(ct);
    free(x);
    fx_close(&f);
}

int main(void)
{
    tsafe_test_rng_init("serialize");
    if (getenv("TSAFE_TEST_FILTER")) /* e.g. TSAFE_TEST_FILTER=test_rescale */
        cmocka_set_test_filter(getenv("TSAFE_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_small),
        cmocka_unit_test(test_roundtrip_presets),
        cmocka_unit_test(test_size_at_levels),
        cmocka_unit_test(test_truncations_small),
        cmocka_unit_test(test_corruptions_small),
        cmocka_unit_test(test_bad_bytes_preset),
        cmocka_unit_test(test_specific_rules),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_scale_out_of_range),
    };
    return cmocka_run_group_tests_name("serialize", tests, NULL, NULL);
}
