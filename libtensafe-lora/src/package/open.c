/* Opening packages: verify first, parse after. */
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "format.h"
#include "json_get.h"
#include "init.h"
#include "tsafe_check.h"

struct tsafe_package {
    char *manifest_json; /* NUL-terminated copy of the signed manifest */
    char *adapter_id;
    char *domain;
    char *creator;
    char **targets;
    size_t n_targets;
    uint32_t rank;
    double alpha;
    double price;
    uint8_t *payload;
    size_t payload_len;
    uint8_t payload_digest[32];
    /* optional: [0] rank_pattern, [1] alpha_pattern (keys malloc'd) */
    tsafe_package_pattern *pattern[2];
    size_t n_pattern[2];
    int use_rslora;
};

static void free_patterns(tsafe_package_pattern *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++)
        free((char *)p[i].key);
    free(p);
}

void tsafe_package_free(tsafe_package *p)
{
    if (!p)
        return;
    free(p->manifest_json);
    free(p->adapter_id);
    free(p->domain);
    free(p->creator);
    if (p->targets)
        for (size_t i = 0; i < p->n_targets; i++)
            free(p->targets[i]);
    free(p->targets);
    free(p->payload);
    for (int k = 0; k < 2; k++)
        free_patterns(p->pattern[k], p->n_pattern[k]);
    free(p);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A required string member: present, a string, no longer than the cap. */
static tsafe_status get_string(json_t *o, const char *key, int allow_empty,
                               char **out)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return TSAFE_E_MISSING_FIELD;
    if (!json_is_string(v))
        return TSAFE_E_FORMAT;
    size_t n = json_string_length(v);
    if (n > TSAFE_PACKAGE_MAX_STRING || (!allow_empty && n == 0) ||
        memchr(json_string_value(v), '\0', n))
        return TSAFE_E_FORMAT;
    *out = dup_n(json_string_value(v), n);
    return *out ? TSAFE_OK : TSAFE_E_NOMEM;
}

static tsafe_status get_number(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return TSAFE_E_MISSING_FIELD;
    return tsafe_json_finite(v, out) ? TSAFE_OK : TSAFE_E_FORMAT;
}

static tsafe_status get_integer(json_t *o, const char *key, json_int_t lo,
                                json_int_t hi, json_int_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return TSAFE_E_MISSING_FIELD;
    return tsafe_json_int_in(v, lo, hi, out) ? TSAFE_OK : TSAFE_E_FORMAT;
}

static tsafe_status expect_string(json_t *o, const char *key, const char *want)
{
    char *s = NULL;
    tsafe_status st = get_string(o, key, 0, &s);
    if (st == TSAFE_OK && strcmp(s, want) != 0)
        st = TSAFE_E_FORMAT;
    free(s);
    return st;
}

static const char *const known_keys[] = {
    "format", "adapter_id", "domain", "rank", "alpha", "targets",
    "price_per_1k_tokens", "creator", "payload_blake2b_256",
    "payload_length", "payload_compression", "rank_pattern", "alpha_pattern",
    "use_rslora",
};

/* Optional "rank_pattern" / "alpha_pattern": an array of [key, value]
 * pairs (an array, not an object, so that PEFT's first-match order
 * survives sorted-key writers); keys non-empty and distinct, values as
 * tsafe_package_create requires. */
static tsafe_status get_patterns(json_t *o, const char *name, int is_rank,
                                 tsafe_package_pattern **out, size_t *n_out)
{
    json_t *a = json_object_get(o, name);
    if (!a)
        return TSAFE_OK;
    if (!json_is_array(a) || json_array_size(a) == 0 ||
        json_array_size(a) > TSAFE_PACKAGE_MAX_TARGETS)
        return TSAFE_E_FORMAT;
    size_t n = json_array_size(a);
    tsafe_package_pattern *p = calloc(n, sizeof *p);
    if (!p)
        return TSAFE_E_NOMEM;
    tsafe_status st = TSAFE_OK;
    for (size_t i = 0; i < n; i++) {
        json_t *pair = json_array_get(a, i), *k = json_array_get(pair, 0),
               *v = json_array_get(pair, 1);
        json_int_t rank = 0;
        double value = 0;
        TSAFE_CHECK(json_is_array(pair) && json_array_size(pair) == 2 && json_is_string(k) &&
                        (is_rank ? tsafe_json_int_in(v, 1, PKG_MAX_PATTERN_RANK, &rank)
                                 : tsafe_json_finite(v, &value)),
                    TSAFE_E_FORMAT);
        size_t kl = json_string_length(k);
        TSAFE_CHECK(kl > 0 && kl <= TSAFE_PACKAGE_MAX_STRING &&
                        !memchr(json_string_value(k), '\0', kl),
                    TSAFE_E_FORMAT);
        p[i].value = is_rank ? (double)rank : value;
        p[i].key = dup_n(json_string_value(k), kl);
        TSAFE_CHECK(p[i].key, TSAFE_E_NOMEM);
    }
    TSAFE_CHECK(tsafe_pkg_patterns_valid_(p, n, is_rank), TSAFE_E_FORMAT);
    *out = p;
    *n_out = n;
    p = NULL;
fail:
    free_patterns(p, n);
    return st;
}

/* Parses the (already verified) manifest into p; fills the expected payload
 * digest and length. */
static tsafe_status parse_manifest(tsafe_package *p, const uint8_t *mbytes,
                                   size_t mlen, uint8_t want_digest[32],
                                   uint64_t *want_len)
{
    tsafe_status st = TSAFE_OK;
    json_error_t err;
    char *hex = NULL;
    json_t *o = json_loadb((const char *)mbytes, mlen, JSON_REJECT_DUPLICATES, &err);
    TSAFE_CHECK(o, TSAFE_E_JSON);
    TSAFE_CHECK(json_is_object(o), TSAFE_E_FORMAT);
    /* only known members: an unknown one would be silently unchecked */
    const char *key;
    json_t *val;
    json_object_foreach(o, key, val) {
        int known = 0;
        for (size_t i = 0; i < sizeof known_keys / sizeof *known_keys; i++)
            known |= strcmp(key, known_keys[i]) == 0;
        TSAFE_CHECK(known, TSAFE_E_FORMAT);
    }
    TSAFE_TRY(expect_string(o, "format", PKG_FORMAT_NAME));
    TSAFE_TRY(expect_string(o, "payload_compression", PKG_COMPRESSION));
    TSAFE_TRY(get_string(o, "adapter_id", 0, &p->adapter_id));
    TSAFE_TRY(get_string(o, "domain", 1, &p->domain));
    TSAFE_TRY(get_string(o, "creator", 1, &p->creator));
    json_int_t rank, plen;
    TSAFE_TRY(get_integer(o, "rank", 1, (json_int_t)UINT32_MAX, &rank));
    p->rank = (uint32_t)rank;
    TSAFE_TRY(get_number(o, "alpha", &p->alpha));
    TSAFE_CHECK(p->alpha > 0.0, TSAFE_E_FORMAT);
    TSAFE_TRY(get_number(o, "price_per_1k_tokens", &p->price));
    TSAFE_CHECK(p->price >= 0.0, TSAFE_E_FORMAT);
    TSAFE_TRY(get_integer(o, "payload_length", 0, (json_int_t)INT64_MAX, &plen));
    TSAFE_CHECK((uint64_t)plen <= TSAFE_PACKAGE_MAX_PAYLOAD, TSAFE_E_RANGE);
    TSAFE_CHECK((uint64_t)plen <= SIZE_MAX, TSAFE_E_RANGE);
    *want_len = (uint64_t)plen;
    TSAFE_TRY(get_string(o, "payload_blake2b_256", 0, &hex));
    size_t bin_len = 0;
    TSAFE_CHECK(strlen(hex) == 64 &&
              sodium_hex2bin(want_digest, 32, hex, 64, NULL, &bin_len, NULL) == 0 &&
              bin_len == 32, TSAFE_E_FORMAT);

    json_t *t = json_object_get(o, "targets");
    TSAFE_CHECK(t, TSAFE_E_MISSING_FIELD);
    TSAFE_CHECK(json_is_array(t), TSAFE_E_FORMAT);
    size_t nt = json_array_size(t);
    TSAFE_CHECK(nt <= TSAFE_PACKAGE_MAX_TARGETS, TSAFE_E_FORMAT);
    p->targets = calloc(nt ? nt : 1, sizeof *p->targets);
    TSAFE_CHECK(p->targets, TSAFE_E_NOMEM);
    p->n_targets = nt;
    for (size_t i = 0; i < nt; i++) {
        json_t *s = json_array_get(t, i);
        TSAFE_CHECK(json_is_string(s), TSAFE_E_FORMAT);
        size_t n = json_string_length(s);
        TSAFE_CHECK(n > 0 && n <= TSAFE_PACKAGE_MAX_STRING &&
                  !memchr(json_string_value(s), '\0', n), TSAFE_E_FORMAT);
        p->targets[i] = dup_n(json_string_value(s), n);
        TSAFE_CHECK(p->targets[i], TSAFE_E_NOMEM);
    }
    TSAFE_TRY(get_patterns(o, "rank_pattern", 1, &p->pattern[0], &p->n_pattern[0]));
    TSAFE_TRY(get_patterns(o, "alpha_pattern", 0, &p->pattern[1], &p->n_pattern[1]));
    json_t *rs = json_object_get(o, "use_rslora");
    TSAFE_CHECK(!rs || json_is_true(rs), TSAFE_E_FORMAT); /* written only when true */
    p->use_rslora = rs != NULL;
fail:
    free(hex);
    json_decref(o);
    return st;
}

/* Inflates exactly `want` bytes from src[0..n); the stream must end exactly
 * at the end of src and produce exactly `want` bytes. */
static tsafe_status inflate_exact(const uint8_t *src, size_t n, size_t want,
                                  uint8_t **out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return TSAFE_E_NOMEM;
    tsafe_status st = TSAFE_OK;
    uint8_t *buf = malloc(want ? want : 1);
    uint8_t spare; /* catches output beyond `want` */
    TSAFE_CHECK(buf, TSAFE_E_NOMEM);
    size_t in_done = 0, out_done = 0;
    for (;;) {
        size_t in_chunk = n - in_done < PKG_ZCHUNK ? n - in_done : PKG_ZCHUNK;
        size_t out_room = want - out_done;
        size_t out_chunk = out_room < PKG_ZCHUNK ? out_room : PKG_ZCHUNK;
        z.next_in = (Bytef *)(src + in_done);
        z.avail_in = (uInt)in_chunk;
        if (out_chunk) {
            z.next_out = buf + out_done;
            z.avail_out = (uInt)out_chunk;
        } else {
            z.next_out = &spare;
            z.avail_out = 1;
        }
        int rc = inflate(&z, Z_NO_FLUSH);
        size_t produced = (out_chunk ? out_chunk : 1) - z.avail_out;
        TSAFE_CHECK(out_chunk || produced == 0, TSAFE_E_FORMAT); /* too long */
        in_done += in_chunk - z.avail_in;
        out_done += produced;
        if (rc == Z_STREAM_END)
            break;
        /* Z_OK means progress; anything else (corrupt data, or no progress
         * because the input ended before the stream did) is an error */
        TSAFE_CHECK(rc == Z_OK, TSAFE_E_FORMAT);
    }
    TSAFE_CHECK(in_done == n, TSAFE_E_FORMAT);      /* trailing bytes */
    TSAFE_CHECK(out_done == want, TSAFE_E_FORMAT); /* too short */
    *out = buf;
    buf = NULL;
fail:
    free(buf);
    inflateEnd(&z);
    return st;
}

tsafe_status tsafe_package_open(const uint8_t *bytes, size_t len,
                                const uint8_t trusted_pk[32],
                                tsafe_package **out)
{
    if (!bytes || !trusted_pk || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (len < PKG_MAGIC_BYTES)
        return TSAFE_E_TRUNCATED;
    if (memcmp(bytes, PKG_MAGIC, PKG_MAGIC_BYTES) != 0)
        return TSAFE_E_FORMAT;
    if (len < PKG_HEADER_BYTES + PKG_TRAILER_BYTES)
        return TSAFE_E_TRUNCATED;
    if (tsafe_load_le16(bytes + PKG_OFF_VERSION) != TSAFE_PACKAGE_VERSION)
        return TSAFE_E_VERSION;
    if (tsafe_sodium_ready() != TSAFE_OK)
        return TSAFE_E_CRYPTO;
    if (crypto_core_ed25519_is_valid_point(trusted_pk) != 1)
        return TSAFE_E_KEY;

    /* 1. authenticate: digest of everything before the trailer, then the
     *    signature over the recomputed digest with the caller's key. */
    const size_t body = len - PKG_TRAILER_BYTES;
    uint8_t digest[32], msg[PKG_SIG_DOMAIN_BYTES + 32];
    tsafe_pkg_digest_(bytes, body, digest);
    if (sodium_memcmp(digest, bytes + body, 32) != 0)
        return TSAFE_E_VERIFY;
    tsafe_pkg_sig_message_(digest, msg);
    if (crypto_sign_verify_detached(bytes + body + 32, msg, sizeof msg,
                                    trusted_pk) != 0)
        return TSAFE_E_VERIFY;

    /* 2. only now: framing, manifest, payload */
    tsafe_status st = TSAFE_OK;
    tsafe_package *p = NULL;
    if (tsafe_load_le16(bytes + PKG_OFF_FLAGS) != 0)
        return TSAFE_E_FORMAT;
    uint64_t mlen = tsafe_load_le32(bytes + PKG_OFF_MLEN);
    uint64_t clen = tsafe_load_le64(bytes + PKG_OFF_CLEN);
    if (mlen > TSAFE_PACKAGE_MAX_MANIFEST)
        return TSAFE_E_FORMAT;
    uint64_t room = body - PKG_HEADER_BYTES;
    if (mlen > room || clen > room - mlen)
        return TSAFE_E_TRUNCATED;
    if (mlen + clen != room)
        return TSAFE_E_FORMAT; /* bytes between payload and trailer */

    p = calloc(1, sizeof *p);
    TSAFE_CHECK(p, TSAFE_E_NOMEM);
    const uint8_t *mbytes = bytes + PKG_HEADER_BYTES;
    p->manifest_json = dup_n((const char *)mbytes, (size_t)mlen);
    TSAFE_CHECK(p->manifest_json, TSAFE_E_NOMEM);
    uint8_t want_digest[32];
    uint64_t want_len = 0;
    TSAFE_TRY(parse_manifest(p, mbytes, (size_t)mlen, want_digest, &want_len));
    TSAFE_TRY(inflate_exact(mbytes + mlen, (size_t)clen, (size_t)want_len, &p->payload));
    p->payload_len = (size_t)want_len;
    tsafe_pkg_digest_(p->payload, p->payload_len, p->payload_digest);
    TSAFE_CHECK(sodium_memcmp(p->payload_digest, want_digest, 32) == 0, TSAFE_E_VERIFY);
    *out = p;
    p = NULL;
fail:
    tsafe_package_free(p);
    return st;
}

tsafe_status tsafe_package_manifest_get(const tsafe_package *p,
                                        tsafe_package_manifest *m)
{
    if (!p || !m)
        return TSAFE_E_NULL;
    m->adapter_id = p->adapter_id;
    m->domain = p->domain;
    m->rank = p->rank;
    m->alpha = p->alpha;
    m->targets = (const char *const *)p->targets;
    m->n_targets = p->n_targets;
    m->price_per_1k_tokens = p->price;
    m->creator = p->creator;
    m->rank_pattern = p->pattern[0];
    m->n_rank_pattern = p->n_pattern[0];
    m->alpha_pattern = p->pattern[1];
    m->n_alpha_pattern = p->n_pattern[1];
    m->use_rslora = p->use_rslora;
    return TSAFE_OK;
}

tsafe_status tsafe_package_payload(const tsafe_package *p,
                                   const uint8_t **data, size_t *len)
{
    if (!p || !data || !len)
        return TSAFE_E_NULL;
    *data = p->payload;
    *len = p->payload_len;
    return TSAFE_OK;
}

tsafe_status tsafe_package_payload_digest(const tsafe_package *p,
                                          uint8_t digest[32])
{
    if (!p || !digest)
        return TSAFE_E_NULL;
    memcpy(digest, p->payload_digest, 32);
    return TSAFE_OK;
}

const char *tsafe_package_manifest_json(const tsafe_package *p)
{
    return p ? p->manifest_json : NULL;
}
