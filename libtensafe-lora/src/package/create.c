/* Building and signing packages. */
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "format.h"
#include "init.h"
#include "tsafe_check.h"

void tsafe_pkg_digest_(const uint8_t *bytes, size_t n, uint8_t out[32])
{
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, 32);
    /* generichash_update takes unsigned long long: one call is enough */
    crypto_generichash_update(&h, bytes, (unsigned long long)n);
    crypto_generichash_final(&h, out, 32);
}

void tsafe_pkg_sig_message_(const uint8_t digest[32],
                            uint8_t msg[PKG_SIG_DOMAIN_BYTES + 32])
{
    memcpy(msg, PKG_SIG_DOMAIN, PKG_SIG_DOMAIN_BYTES);
    memcpy(msg + PKG_SIG_DOMAIN_BYTES, digest, 32);
}

tsafe_status tsafe_package_keypair(uint8_t pk[32], uint8_t sk[64])
{
    if (!pk || !sk)
        return TSAFE_E_NULL;
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    return crypto_sign_keypair(pk, sk) == 0 ? TSAFE_OK : TSAFE_E_CRYPTO;
}

void tsafe_package_bytes_free(uint8_t *bytes)
{
    free(bytes);
}

/* sk = seed || pk in libsodium's layout; the pk half must match the seed. */
static tsafe_status check_secret_key(const uint8_t sk[64])
{
    uint8_t pk2[32], sk2[64];
    if (crypto_sign_seed_keypair(pk2, sk2, sk) != 0)
        return TSAFE_E_CRYPTO;
    int same = sodium_memcmp(pk2, sk + 32, 32) == 0;
    sodium_memzero(sk2, sizeof sk2);
    return same ? TSAFE_OK : TSAFE_E_KEY;
}

static int valid_string(const char *s, int allow_empty)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, TSAFE_PACKAGE_MAX_STRING + 1);
    return n <= TSAFE_PACKAGE_MAX_STRING && (allow_empty || n > 0);
}

static tsafe_status check_manifest(const tsafe_package_manifest *m)
{
    if (!valid_string(m->adapter_id, 0) || !valid_string(m->domain, 1) ||
        !valid_string(m->creator, 1))
        return TSAFE_E_ARG;
    if (m->rank == 0 || !(m->alpha > 0.0) || !isfinite(m->alpha) ||
        !(m->price_per_1k_tokens >= 0.0) || !isfinite(m->price_per_1k_tokens))
        return TSAFE_E_ARG;
    if (m->n_targets > TSAFE_PACKAGE_MAX_TARGETS || (m->n_targets && !m->targets))
        return TSAFE_E_ARG;
    for (size_t i = 0; i < m->n_targets; i++)
        if (!valid_string(m->targets[i], 0))
            return TSAFE_E_ARG;
    if (m->use_rslora != 0 && m->use_rslora != 1)
        return TSAFE_E_ARG;
    if (!tsafe_pkg_patterns_valid_(m->rank_pattern, m->n_rank_pattern, 1) ||
        !tsafe_pkg_patterns_valid_(m->alpha_pattern, m->n_alpha_pattern, 0))
        return TSAFE_E_ARG;
    return TSAFE_OK;
}

int tsafe_pkg_pattern_value_ok_(double v, int is_rank)
{
    if (is_rank)
        return v >= 1.0 && v <= PKG_MAX_PATTERN_RANK && v == (double)(uint32_t)v;
    return isfinite(v) && v > 0.0;
}

int tsafe_pkg_patterns_valid_(const tsafe_package_pattern *p, size_t n, int is_rank)
{
    if (n > TSAFE_PACKAGE_MAX_TARGETS || (n && !p))
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!valid_string(p[i].key, 0) || !tsafe_pkg_pattern_value_ok_(p[i].value, is_rank))
            return 0;
        for (size_t j = 0; j < i; j++) /* n <= 4096: quadratic is fine */
            if (strcmp(p[i].key, p[j].key) == 0)
                return 0;
    }
    return 1;
}

/* [[key, value], ...] in the caller's order (PEFT's precedence) */
static json_t *patterns_json(const tsafe_package_pattern *p, size_t n, int is_rank)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *v = is_rank ? json_integer((json_int_t)p[i].value) : json_real(p[i].value);
        json_t *pair = json_pack("[s,o]", p[i].key, v); /* NULL on bad UTF-8 */
        if (!pair || json_array_append_new(a, pair) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* jansson "set new" that turns a NULL value (bad UTF-8, NaN) into an error */
static int set_new(json_t *obj, const char *key, json_t *v)
{
    return v ? json_object_set_new(obj, key, v) : -1;
}

static tsafe_status manifest_json(const tsafe_package_manifest *m,
                                  const uint8_t digest[32], size_t len,
                                  char **out)
{
    tsafe_status st = TSAFE_OK;
    char hex[65];
    sodium_bin2hex(hex, sizeof hex, digest, 32);
    json_t *o = json_object(), *t = json_array();
    TSAFE_CHECK(o && t, TSAFE_E_NOMEM);
    for (size_t i = 0; i < m->n_targets; i++) {
        json_t *s = json_string(m->targets[i]);
        TSAFE_CHECK(s, TSAFE_E_ARG); /* not UTF-8 */
        TSAFE_CHECK(json_array_append_new(t, s) == 0, TSAFE_E_NOMEM);
    }
    int bad = 0;
    bad |= set_new(o, "format", json_string(PKG_FORMAT_NAME));
    bad |= set_new(o, "adapter_id", json_string(m->adapter_id));
    bad |= set_new(o, "domain", json_string(m->domain));
    bad |= set_new(o, "rank", json_integer((json_int_t)m->rank));
    bad |= set_new(o, "alpha", json_real(m->alpha));
    bad |= json_object_set(o, "targets", t);
    bad |= set_new(o, "price_per_1k_tokens", json_real(m->price_per_1k_tokens));
    bad |= set_new(o, "creator", json_string(m->creator));
    bad |= set_new(o, "payload_blake2b_256", json_string(hex));
    bad |= set_new(o, "payload_length", json_integer((json_int_t)len));
    bad |= set_new(o, "payload_compression", json_string(PKG_COMPRESSION));
    /* optional members only when used: packages without them keep the
     * bytes (and readers) they had */
    if (m->n_rank_pattern)
        bad |= set_new(o, "rank_pattern", patterns_json(m->rank_pattern, m->n_rank_pattern, 1));
    if (m->n_alpha_pattern)
        bad |= set_new(o, "alpha_pattern",
                       patterns_json(m->alpha_pattern, m->n_alpha_pattern, 0));
    if (m->use_rslora)
        bad |= set_new(o, "use_rslora", json_true());
    TSAFE_CHECK(!bad, TSAFE_E_ARG); /* a string that is not valid UTF-8 */
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    TSAFE_CHECK(s, TSAFE_E_NOMEM);
    *out = s;
fail:
    json_decref(t);
    json_decref(o);
    return st;
}

/* zlib-compresses src into a malloc'd buffer. */
static tsafe_status deflate_all(const uint8_t *src, size_t n, uint8_t **out,
                                size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit(&z, Z_BEST_COMPRESSION) != Z_OK)
        return TSAFE_E_NOMEM;
    tsafe_status st = TSAFE_OK;
    uLong bound = deflateBound(&z, (uLong)n);
    size_t cap = (size_t)bound + 64;
    uint8_t *buf = malloc(cap);
    TSAFE_CHECK(buf, TSAFE_E_NOMEM);
    size_t in_done = 0, out_done = 0;
    for (;;) {
        size_t in_chunk = n - in_done < PKG_ZCHUNK ? n - in_done : PKG_ZCHUNK;
        size_t out_chunk = cap - out_done < PKG_ZCHUNK ? cap - out_done : PKG_ZCHUNK;
        z.next_in = (Bytef *)(src ? src + in_done : NULL);
        z.avail_in = (uInt)in_chunk;
        z.next_out = buf + out_done;
        z.avail_out = (uInt)out_chunk;
        int flush = in_done + in_chunk == n ? Z_FINISH : Z_NO_FLUSH;
        int rc = deflate(&z, flush);
        in_done += in_chunk - z.avail_in;
        out_done += out_chunk - z.avail_out;
        if (rc == Z_STREAM_END)
            break;
        TSAFE_CHECK(rc == Z_OK || rc == Z_BUF_ERROR, TSAFE_E_NOMEM);
        TSAFE_CHECK(out_done < cap, TSAFE_E_NOMEM); /* bound was exceeded */
    }
    *out = buf;
    *out_len = out_done;
    buf = NULL;
fail:
    free(buf);
    deflateEnd(&z);
    return st;
}

tsafe_status tsafe_package_create(const tsafe_package_manifest *m,
                                  const uint8_t *payload, size_t len,
                                  const uint8_t signer_sk[64], uint8_t **out,
                                  size_t *out_len)
{
    if (!m || !signer_sk || !out || !out_len || (!payload && len))
        return TSAFE_E_NULL;
    *out = NULL;
    *out_len = 0;
    if ((uint64_t)len > TSAFE_PACKAGE_MAX_PAYLOAD)
        return TSAFE_E_RANGE;
    tsafe_status st = check_manifest(m);
    if (st != TSAFE_OK)
        return st;
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    st = check_secret_key(signer_sk);
    if (st != TSAFE_OK)
        return st;

    char *mj = NULL;
    uint8_t *comp = NULL, *pkg = NULL;
    size_t clen = 0;
    uint8_t pdigest[32], digest[32], msg[PKG_SIG_DOMAIN_BYTES + 32];
    tsafe_pkg_digest_(payload, len, pdigest);
    TSAFE_TRY(manifest_json(m, pdigest, len, &mj));
    size_t mlen = strlen(mj);
    TSAFE_CHECK(mlen <= TSAFE_PACKAGE_MAX_MANIFEST, TSAFE_E_RANGE);
    TSAFE_TRY(deflate_all(payload, len, &comp, &clen));

    size_t body = PKG_HEADER_BYTES + mlen; /* mlen <= 1 MiB: no overflow */
    TSAFE_CHECK(clen <= SIZE_MAX - body - PKG_TRAILER_BYTES, TSAFE_E_SIZE_OVERFLOW);
    body += clen;
    size_t total = body + PKG_TRAILER_BYTES;
    pkg = malloc(total);
    TSAFE_CHECK(pkg, TSAFE_E_NOMEM);
    memcpy(pkg, PKG_MAGIC, PKG_MAGIC_BYTES);
    tsafe_store_le16(pkg + PKG_OFF_VERSION, TSAFE_PACKAGE_VERSION);
    tsafe_store_le16(pkg + PKG_OFF_FLAGS, 0);
    tsafe_store_le32(pkg + PKG_OFF_MLEN, (uint32_t)mlen);
    tsafe_store_le64(pkg + PKG_OFF_CLEN, (uint64_t)clen);
    memcpy(pkg + PKG_HEADER_BYTES, mj, mlen);
    if (clen)
        memcpy(pkg + PKG_HEADER_BYTES + mlen, comp, clen);
    tsafe_pkg_digest_(pkg, body, digest);
    memcpy(pkg + body, digest, 32);
    tsafe_pkg_sig_message_(digest, msg);
    TSAFE_CHECK(crypto_sign_detached(pkg + body + 32, NULL, msg, sizeof msg,
                               signer_sk) == 0, TSAFE_E_CRYPTO);
    *out = pkg;
    *out_len = total;
    pkg = NULL;
fail:
    free(pkg);
    free(comp);
    if (mj) { /* json_dumps allocated with jansson's allocator */
        json_malloc_t jm;
        json_free_t jf;
        json_get_alloc_funcs(&jm, &jf);
        jf(mj);
    }
    return st;
}
