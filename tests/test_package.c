/* Signed adapter packages: round trip, the documented byte layout checked
 * independently, every single-byte change rejected, wrong/bad keys,
 * truncations, and validly signed but malformed packages built by a
 * writer in this file (docs/PACKAGE_FORMAT.md). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tensafe/lora_package.h"

static uint64_t rng_state;

static uint64_t rnd64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint8_t pk[32], sk[64], other_pk[32], other_sk[64];

static const char *const targets[] = {"q_proj", "k_proj", "v_proj"};

static tsafe_package_manifest sample_manifest(void)
{
    tsafe_package_manifest m = {0};
    m.adapter_id = "med-qa-v3";
    m.domain = "medical";
    m.rank = 32;
    m.alpha = 64.0;
    m.targets = targets;
    m.n_targets = 3;
    m.price_per_1k_tokens = 0.125;
    m.creator = "Zo\xc3\xab's lab"; /* UTF-8 */
    return m;
}

/* A safetensors-looking payload: 8-byte length, JSON, then data. The data
 * is half compressible (small ints) and half random. */
static uint8_t *make_payload(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    size_t hl = strlen(hdr);
    for (size_t i = 0; i < n; i++)
        p[i] = (i < n / 2) ? (uint8_t)(i % 7) : (uint8_t)rnd64();
    if (n >= 8 + hl) {
        for (int i = 0; i < 8; i++)
            p[i] = (uint8_t)((uint64_t)hl >> (8 * i));
        memcpy(p + 8, hdr, hl);
    }
    return p;
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static const char DOMAIN_SEP[] = "TenSafe-HE adapter package v1"; /* + NUL */

/* Independent writer of the documented format (for forged-but-signed and
 * malformed packages). */
static uint8_t *forge(const char *manifest, const uint8_t *comp, size_t clen,
                      uint64_t mlen_field, uint64_t clen_field, uint16_t version,
                      uint16_t flags, size_t extra, const uint8_t *signer,
                      size_t *out_len)
{
    size_t mlen = strlen(manifest);
    size_t body = 24 + mlen + clen + extra, total = body + 96;
    uint8_t *b = calloc(1, total);
    assert_non_null(b);
    memcpy(b, "TSPKG\0\r\n", 8);
    put_le(b + 8, version, 2);
    put_le(b + 10, flags, 2);
    put_le(b + 12, mlen_field, 4);
    put_le(b + 16, clen_field, 8);
    memcpy(b + 24, manifest, mlen);
    memcpy(b + 24 + mlen, comp, clen);
    crypto_generichash(b + body, 32, b, body, NULL, 0);
    uint8_t msg[sizeof DOMAIN_SEP + 32];
    memcpy(msg, DOMAIN_SEP, sizeof DOMAIN_SEP);
    memcpy(msg + sizeof DOMAIN_SEP, b + body, 32);
    crypto_sign_detached(b + body + 32, NULL, msg, sizeof msg, signer);
    *out_len = total;
    return b;
}

static uint8_t *zcompress(const uint8_t *p, size_t n, size_t *out_len)
{
    uLongf cap = compressBound(n);
    uint8_t *c = malloc(cap);
    assert_non_null(c);
    assert_int_equal(compress2(c, &cap, p, n, 6), Z_OK);
    *out_len = cap;
    return c;
}

static void hexdigest(const uint8_t *p, size_t n, char hex[65])
{
    uint8_t d[32];
    crypto_generichash(d, 32, p, n, NULL, 0);
    sodium_bin2hex(hex, 65, d, 32);
}

/* ------------------------------------------------------------------ tests */

static void test_round_trip_and_layout(void **state)
{
    (void)state;
    const size_t sizes[] = {0, 1, 777, 50000};
    for (size_t si = 0; si < 4; si++) {
        size_t n = sizes[si];
        uint8_t *payload = make_payload(n);
        tsafe_package_manifest m = sample_manifest();
        /* every other size with PEFT patterns, keys out of sorted order:
         * the order is PEFT's precedence and must survive */
        static const tsafe_package_pattern rp[2] = {{"z_proj", 4}, {"layers.0.a_proj", 2}},
                                           ap[1] = {{"z_proj", 0.75}};
        if (si % 2) {
            m.rank_pattern = rp;
            m.n_rank_pattern = 2;
            m.alpha_pattern = ap;
            m.n_alpha_pattern = 1;
            m.use_rslora = 1;
        }
        uint8_t *pkg = NULL;
        size_t len = 0;
        assert_int_equal(tsafe_package_create(&m, payload, n, sk, &pkg, &len),
                         TSAFE_OK);

        /* layout per docs/PACKAGE_FORMAT.md, checked without the library */
        assert_true(len >= 24 + 96);
        assert_memory_equal(pkg, "TSPKG\0\r\n", 8);
        assert_int_equal(get_le(pkg + 8, 2), 1);
        assert_int_equal(get_le(pkg + 10, 2), 0);
        uint64_t mlen = get_le(pkg + 12, 4), clen = get_le(pkg + 16, 8);
        assert_int_equal(24 + mlen + clen + 96, len);
        uint8_t d[32];
        crypto_generichash(d, 32, pkg, len - 96, NULL, 0);
        assert_memory_equal(d, pkg + len - 96, 32);
        uint8_t msg[sizeof DOMAIN_SEP + 32];
        memcpy(msg, DOMAIN_SEP, sizeof DOMAIN_SEP);
        memcpy(msg + sizeof DOMAIN_SEP, d, 32);
        assert_int_equal(crypto_sign_verify_detached(pkg + len - 64, msg,
                                                     sizeof msg, pk), 0);
        uLongf dl = n + 1;
        uint8_t *dec = malloc(n + 1);
        assert_int_equal(uncompress(dec, &dl, pkg + 24 + mlen, clen), Z_OK);
        assert_int_equal(dl, n);
        if (n)
            assert_memory_equal(dec, payload, n);
        free(dec);
        char hex[65];
        hexdigest(payload, n, hex);
        char *mj = strndup((const char *)pkg + 24, mlen);
        assert_non_null(strstr(mj, hex));
        assert_true((strstr(mj, "\"rank_pattern\":[[\"z_proj\",4],[\"layers.0.a_proj\",2]]") &&
                     strstr(mj, "\"alpha_pattern\":[[\"z_proj\",0.75]]") &&
                     strstr(mj, "\"use_rslora\":true")) == (si % 2 == 1));
        assert_true(!strstr(mj, "pattern") == (si % 2 == 0));
        free(mj);

        /* and through the library */
        tsafe_package *p = NULL;
        assert_int_equal(tsafe_package_open(pkg, len, pk, &p), TSAFE_OK);
        tsafe_package_manifest g;
        assert_int_equal(tsafe_package_manifest_get(p, &g), TSAFE_OK);
        assert_string_equal(g.adapter_id, m.adapter_id);
        assert_string_equal(g.domain, m.domain);
        assert_string_equal(g.creator, m.creator);
        assert_int_equal(g.rank, m.rank);
        assert_true(g.alpha == m.alpha);
        assert_true(g.price_per_1k_tokens == m.price_per_1k_tokens);
        assert_int_equal(g.n_targets, 3);
        for (size_t i = 0; i < 3; i++)
            assert_string_equal(g.targets[i], targets[i]);
        assert_int_equal(g.n_rank_pattern, m.n_rank_pattern);
        assert_int_equal(g.n_alpha_pattern, m.n_alpha_pattern);
        assert_int_equal(g.use_rslora, m.use_rslora);
        for (size_t i = 0; i < g.n_rank_pattern; i++) {
            assert_string_equal(g.rank_pattern[i].key, rp[i].key);
            assert_true(g.rank_pattern[i].value == rp[i].value);
        }
        for (size_t i = 0; i < g.n_alpha_pattern; i++) {
            assert_string_equal(g.alpha_pattern[i].key, ap[i].key);
            assert_true(g.alpha_pattern[i].value == ap[i].value);
        }
        const uint8_t *data;
        size_t dlen;
        assert_int_equal(tsafe_package_payload(p, &data, &dlen), TSAFE_OK);
        assert_int_equal(dlen, n);
        if (n)
            assert_memory_equal(data, payload, n);
        uint8_t pd[32], pd_ref[32];
        assert_int_equal(tsafe_package_payload_digest(p, pd), TSAFE_OK);
        crypto_generichash(pd_ref, 32, payload, n, NULL, 0);
        assert_memory_equal(pd, pd_ref, 32);
        assert_non_null(tsafe_package_manifest_json(p));
        tsafe_package_free(p);
        tsafe_package_bytes_free(pkg);
        free(payload);
    }
}

static int expected_for_position(size_t pos)
{
    if (pos < 8)
        return TSAFE_E_FORMAT;
    if (pos < 10)
        return TSAFE_E_VERSION;
    return TSAFE_E_VERIFY;
}

static void flip_and_check(uint8_t *pkg, size_t len, size_t pos)
{
    uint8_t x = (uint8_t)(1 + rnd64() % 255);
    pkg[pos] ^= x;
    tsafe_package *p = (tsafe_package *)1;
    int st = tsafe_package_open(pkg, len, pk, &p);
    if (st != expected_for_position(pos))
        print_message("position %zu xor 0x%02x: %d\n", pos, x, st);
    assert_int_equal(st, expected_for_position(pos));
    assert_null(p);
    pkg[pos] ^= x;
}

static void test_every_byte_small(void **state)
{
    (void)state;
    uint8_t *payload = make_payload(3000);
    tsafe_package_manifest m = sample_manifest();
    uint8_t *pkg;
    size_t len;
    assert_int_equal(tsafe_package_create(&m, payload, 3000, sk, &pkg, &len),
                     TSAFE_OK);
    for (size_t pos = 0; pos < len; pos++)
        flip_and_check(pkg, len, pos);
    print_message("small package: all %zu single-byte changes rejected\n", len);
    tsafe_package *p = NULL;
    assert_int_equal(tsafe_package_open(pkg, len, pk, &p), TSAFE_OK);
    tsafe_package_free(p);
    tsafe_package_bytes_free(pkg);
    free(payload);
}

static void test_every_byte_big_sampled(void **state)
{
    (void)state;
    const size_t n = 256 * 1024;
    uint8_t *payload = make_payload(n);
    tsafe_package_manifest m = sample_manifest();
    uint8_t *pkg;
    size_t len;
    assert_int_equal(tsafe_package_create(&m, payload, n, sk, &pkg, &len),
                     TSAFE_OK);
    size_t mlen = (size_t)get_le(pkg + 12, 4);
    size_t pstart = 24 + mlen, pend = len - 96;
    for (size_t pos = 0; pos < pstart; pos++)
        flip_and_check(pkg, len, pos);
    for (size_t pos = pend; pos < len; pos++)
        flip_and_check(pkg, len, pos);
    for (int i = 0; i < 2000; i++)
        flip_and_check(pkg, len, pstart + (size_t)(rnd64() % (pend - pstart)));
    print_message("big package (%zu bytes): %zu header/manifest/trailer bytes "
                  "+ 2000 payload positions rejected\n", len, pstart + 96);
    tsafe_package_bytes_free(pkg);
    free(payload);
}

static void test_keys(void **state)
{
    (void)state;
    uint8_t *payload = make_payload(1000);
    tsafe_package_manifest m = sample_manifest();
    uint8_t *pkg;
    size_t len;
    assert_int_equal(tsafe_package_create(&m, payload, 1000, sk, &pkg, &len),
                     TSAFE_OK);
    tsafe_package *p = NULL;
    assert_int_equal(tsafe_package_open(pkg, len, other_pk, &p), TSAFE_E_VERIFY);
    assert_null(p);
    uint8_t zero[32] = {0};
    assert_int_equal(tsafe_package_open(pkg, len, zero, &p), TSAFE_E_KEY);
    uint8_t bad[32];
    memset(bad, 0xff, sizeof bad); /* non-canonical encoding */
    assert_int_equal(tsafe_package_open(pkg, len, bad, &p), TSAFE_E_KEY);
    tsafe_package_bytes_free(pkg);

    /* signed by another key: rejected with ours, accepted with theirs */
    assert_int_equal(tsafe_package_create(&m, payload, 1000, other_sk, &pkg, &len),
                     TSAFE_OK);
    assert_int_equal(tsafe_package_open(pkg, len, pk, &p), TSAFE_E_VERIFY);
    assert_int_equal(tsafe_package_open(pkg, len, other_pk, &p), TSAFE_OK);
    tsafe_package_free(p);
    tsafe_package_bytes_free(pkg);

    /* inconsistent secret key (public half replaced) */
    uint8_t mixed[64];
    memcpy(mixed, sk, 32);
    memcpy(mixed + 32, other_pk, 32);
    assert_int_equal(tsafe_package_create(&m, payload, 1000, mixed, &pkg, &len),
                     TSAFE_E_KEY);
    sodium_memzero(mixed, sizeof mixed);
    free(payload);
}

static void test_truncation_and_extension(void **state)
{
    (void)state;
    uint8_t *payload = make_payload(2000);
    tsafe_package_manifest m = sample_manifest();
    uint8_t *pkg;
    size_t len;
    assert_int_equal(tsafe_package_create(&m, payload, 2000, sk, &pkg, &len),
                     TSAFE_OK);
    for (size_t l = 0; l < len; l++) {
        uint8_t *cut = malloc(l ? l : 1); /* exact size: ASan sees overreads */
        memcpy(cut, pkg, l);
        tsafe_package *p = (tsafe_package *)1;
        int st = tsafe_package_open(cut, l, pk, &p);
        assert_true(st == TSAFE_E_TRUNCATED || st == TSAFE_E_VERIFY);
        if (l < 24 + 96)
            assert_int_equal(st, TSAFE_E_TRUNCATED);
        assert_null(p);
        free(cut);
    }
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, pkg, len);
    longer[len] = 0;
    tsafe_package *p = NULL;
    assert_int_equal(tsafe_package_open(longer, len + 1, pk, &p), TSAFE_E_VERIFY);
    free(longer);
    tsafe_package_bytes_free(pkg);
    free(payload);
}

/* Validly signed (by the trusted key) but malformed: the checks after
 * verification must still hold. */
static void test_signed_but_malformed(void **state)
{
    (void)state;
    const size_t n = 600;
    uint8_t *payload = make_payload(n);
    size_t clen;
    uint8_t *comp = zcompress(payload, n, &clen);
    char hex[65];
    hexdigest(payload, n, hex);
    char good[1024];
    snprintf(good, sizeof good,
             "{\"adapter_id\":\"x\",\"alpha\":16,\"creator\":\"c\",\"domain\":\"d\","
             "\"format\":\"tensafe-adapter-package\",\"payload_blake2b_256\":\"%s\","
             "\"payload_compression\":\"zlib\",\"payload_length\":%zu,"
             "\"price_per_1k_tokens\":0.5,\"rank\":8,\"targets\":[\"q_proj\"]}",
             hex, n);
    size_t ml = strlen(good), len;
    tsafe_package *p = NULL;

    /* the reference writer's package opens */
    uint8_t *b = forge(good, comp, clen, ml, clen, 1, 0, 0, sk, &len);
    assert_int_equal(tsafe_package_open(b, len, pk, &p), TSAFE_OK);
    tsafe_package_manifest g;
    assert_int_equal(tsafe_package_manifest_get(p, &g), TSAFE_OK);
    assert_true(g.alpha == 16.0 && g.rank == 8);
    assert_int_equal(g.n_rank_pattern + g.n_alpha_pattern + (size_t)g.use_rslora, 0);
    tsafe_package_free(p);
    free(b);

    /* the optional PEFT members, as the documented format writes them */
    char with_pat[1200];
    snprintf(with_pat, sizeof with_pat, "%.*s,\"rank_pattern\":[[\"v_proj\",4],[\"layers.1.q_proj\",2]],"
             "\"alpha_pattern\":[[\"v_proj\",2.5]],\"use_rslora\":true}", (int)ml - 1, good);
    b = forge(with_pat, comp, clen, strlen(with_pat), clen, 1, 0, 0, sk, &len);
    assert_int_equal(tsafe_package_open(b, len, pk, &p), TSAFE_OK);
    assert_int_equal(tsafe_package_manifest_get(p, &g), TSAFE_OK);
    assert_int_equal(g.n_rank_pattern, 2);
    assert_string_equal(g.rank_pattern[0].key, "v_proj");
    assert_true(g.rank_pattern[0].value == 4.0);
    assert_string_equal(g.rank_pattern[1].key, "layers.1.q_proj");
    assert_true(g.rank_pattern[1].value == 2.0);
    assert_int_equal(g.n_alpha_pattern, 1);
    assert_true(g.alpha_pattern[0].value == 2.5);
    assert_int_equal(g.use_rslora, 1);
    tsafe_package_free(p);
    free(b);

    struct {
        const char *what;
        const char *find, *repl; /* textual edit of the manifest */
        int64_t dm, dc;           /* length-field edits */
        uint16_t flags;
        size_t extra;
        int expect;
    } cases[] = {
        {"flags", NULL, NULL, 0, 0, 1, 0, TSAFE_E_FORMAT},
        {"gap before trailer", NULL, NULL, 0, 0, 0, 5, TSAFE_E_FORMAT},
        {"mlen too big", NULL, NULL, 1000, 0, 0, 0, TSAFE_E_TRUNCATED},
        {"clen short", NULL, NULL, 0, -1, 0, 0, TSAFE_E_FORMAT},
        {"not json", "{\"adapter_id\"", "[\"adapter_id\"", 0, 0, 0, 0, TSAFE_E_JSON},
        {"unknown key", "\"rank\":8", "\"rank\":8,\"zz\":1", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"duplicate key", "\"rank\":8", "\"rank\":8,\"rank\":8", 0, 0, 0, 0, TSAFE_E_JSON},
        {"missing rank", ",\"rank\":8", "", 0, 0, 0, 0, TSAFE_E_MISSING_FIELD},
        {"rank zero", "\"rank\":8", "\"rank\":0", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank string", "\"rank\":8", "\"rank\":\"8\"", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"negative price", "0.5", "-0.5", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"bad format", "tensafe-adapter-package", "other", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"bad compression", "\"zlib\"", "\"zstd\"", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"empty target", "[\"q_proj\"]", "[\"\"]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"target not string", "[\"q_proj\"]", "[1]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"short hex", "\"payload_blake2b_256\":\"", "\"payload_blake2b_256\":\"0", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank pattern 0", "\"rank\":8", "\"rank\":8,\"rank_pattern\":[[\"v\",0]]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank pattern 2.5", "\"rank\":8", "\"rank\":8,\"rank_pattern\":[[\"v\",2.5]]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank pattern 2^24+1", "\"rank\":8", "\"rank\":8,\"rank_pattern\":[[\"v\",16777217]]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank pattern object", "\"rank\":8", "\"rank\":8,\"rank_pattern\":{\"v\":4}", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank pattern empty", "\"rank\":8", "\"rank\":8,\"rank_pattern\":[]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank pattern triple", "\"rank\":8", "\"rank\":8,\"rank_pattern\":[[\"v\",4,1]]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank pattern empty key", "\"rank\":8", "\"rank\":8,\"rank_pattern\":[[\"\",4]]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"rank pattern twice", "\"rank\":8", "\"rank\":8,\"rank_pattern\":[[\"v\",4],[\"v\",2]]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"alpha pattern negative", "\"rank\":8", "\"rank\":8,\"alpha_pattern\":[[\"v\",-1]]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"alpha pattern string", "\"rank\":8", "\"rank\":8,\"alpha_pattern\":[[\"v\",\"1\"]]", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"use_rslora false", "\"rank\":8", "\"rank\":8,\"use_rslora\":false", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"use_rslora 1", "\"rank\":8", "\"rank\":8,\"use_rslora\":1", 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"wrong length+1", NULL, NULL, 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"wrong length-1", NULL, NULL, 0, 0, 0, 0, TSAFE_E_FORMAT},
        {"over cap", NULL, NULL, 0, 0, 0, 0, TSAFE_E_RANGE},
        {"digest mismatch", NULL, NULL, 0, 0, 0, 0, TSAFE_E_VERIFY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char man[1100];
        strcpy(man, good);
        if (cases[i].find) {
            char *at = strstr(man, cases[i].find);
            assert_non_null(at);
            char rest[1100];
            strcpy(rest, at + strlen(cases[i].find));
            strcpy(at, cases[i].repl);
            strcat(man, rest);
        }
        char num[32];
        snprintf(num, sizeof num, ":%zu,", n);
        if (!strcmp(cases[i].what, "wrong length+1") ||
            !strcmp(cases[i].what, "wrong length-1") ||
            !strcmp(cases[i].what, "over cap")) {
            char *at = strstr(man, num);
            assert_non_null(at);
            char rest[1100];
            strcpy(rest, at + strlen(num));
            snprintf(at, 40, ":%llu,",
                     !strcmp(cases[i].what, "over cap")
                         ? (unsigned long long)TSAFE_PACKAGE_MAX_PAYLOAD + 1
                         : (unsigned long long)(n + (cases[i].what[12] == '+' ? 1 : -1)));
            strcat(man, rest);
        }
        if (!strcmp(cases[i].what, "digest mismatch")) {
            char *h = strstr(man, hex);
            *h = *h == '0' ? '1' : '0'; /* still hex, different digest */
        }
        size_t mlen = strlen(man);
        b = forge(man, comp, clen, (uint64_t)((int64_t)mlen + cases[i].dm),
                  (uint64_t)((int64_t)clen + cases[i].dc), 1, cases[i].flags,
                  cases[i].extra, sk, &len);
        p = (tsafe_package *)1;
        int st = tsafe_package_open(b, len, pk, &p);
        if (st != cases[i].expect)
            print_message("case '%s': got %d (%s)\n", cases[i].what, st,
                          tsafe_status_name(st));
        assert_int_equal(st, cases[i].expect);
        assert_null(p);
        free(b);
    }

    /* corrupt / trailing-garbage / short zlib streams, validly signed */
    uint8_t *c2 = malloc(clen + 3);
    memcpy(c2, comp, clen);
    c2[clen] = 1;
    c2[clen + 1] = 2;
    c2[clen + 2] = 3;
    b = forge(good, c2, clen + 3, ml, clen + 3, 1, 0, 0, sk, &len);
    assert_int_equal(tsafe_package_open(b, len, pk, &p), TSAFE_E_FORMAT);
    free(b);
    b = forge(good, comp, clen - 4, ml, clen - 4, 1, 0, 0, sk, &len);
    assert_int_equal(tsafe_package_open(b, len, pk, &p), TSAFE_E_FORMAT);
    free(b);
    memcpy(c2, comp, clen);
    c2[clen / 2] ^= 0x55;
    b = forge(good, c2, clen, ml, clen, 1, 0, 0, sk, &len);
    {
        int st = tsafe_package_open(b, len, pk, &p);
        assert_true(st == TSAFE_E_FORMAT || st == TSAFE_E_VERIFY);
    }
    free(b);
    /* unknown version, even though signed */
    b = forge(good, comp, clen, ml, clen, 2, 0, 0, sk, &len);
    assert_int_equal(tsafe_package_open(b, len, pk, &p), TSAFE_E_VERSION);
    free(b);
    free(c2);
    free(comp);
    free(payload);
}

static void test_create_errors(void **state)
{
    (void)state;
    uint8_t buf[16] = {0};
    uint8_t *pkg = NULL;
    size_t len = 0;
    tsafe_package_manifest m = sample_manifest();
    m.adapter_id = "";
    assert_int_equal(tsafe_package_create(&m, buf, 16, sk, &pkg, &len), TSAFE_E_ARG);
    m = sample_manifest();
    m.alpha = 0.0 / 0.0;
    assert_int_equal(tsafe_package_create(&m, buf, 16, sk, &pkg, &len), TSAFE_E_ARG);
    m = sample_manifest();
    m.rank = 0;
    assert_int_equal(tsafe_package_create(&m, buf, 16, sk, &pkg, &len), TSAFE_E_ARG);
    m = sample_manifest();
    m.creator = "\xff\xfe"; /* not UTF-8 */
    assert_int_equal(tsafe_package_create(&m, buf, 16, sk, &pkg, &len), TSAFE_E_ARG);
    m = sample_manifest();
    m.price_per_1k_tokens = -1.0;
    assert_int_equal(tsafe_package_create(&m, buf, 16, sk, &pkg, &len), TSAFE_E_ARG);
    /* patterns: ranks whole in [1, 2^24], alphas finite > 0, keys distinct */
    static const struct {
        tsafe_package_pattern p[2];
        size_t n;
        int is_rank;
    } bad[] = {
        {{{"v_proj", 0}}, 1, 1},           {{{"v_proj", 2.5}}, 1, 1},
        {{{"v_proj", 16777217.0}}, 1, 1},  {{{"", 4}}, 1, 1},
        {{{NULL, 4}}, 1, 1},               {{{"v_proj", 4}, {"v_proj", 2}}, 2, 1},
        {{{"v_proj", -1}}, 1, 0},          {{{"v_proj", 0}}, 1, 0},
        {{{"v_proj", 1.0 / 0.0}}, 1, 0},   {{{"\xff", 1}}, 1, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        m = sample_manifest();
        if (bad[i].is_rank) {
            m.rank_pattern = bad[i].p;
            m.n_rank_pattern = bad[i].n;
        } else {
            m.alpha_pattern = bad[i].p;
            m.n_alpha_pattern = bad[i].n;
        }
        assert_int_equal(tsafe_package_create(&m, buf, 16, sk, &pkg, &len), TSAFE_E_ARG);
        assert_null(pkg);
    }
    m = sample_manifest();
    m.n_rank_pattern = 1; /* no array */
    assert_int_equal(tsafe_package_create(&m, buf, 16, sk, &pkg, &len), TSAFE_E_ARG);
    m = sample_manifest();
    m.use_rslora = 2;
    assert_int_equal(tsafe_package_create(&m, buf, 16, sk, &pkg, &len), TSAFE_E_ARG);
    m = sample_manifest();
    assert_int_equal(tsafe_package_create(&m, NULL, 16, sk, &pkg, &len), TSAFE_E_NULL);
    assert_null(pkg);
    tsafe_package_free(NULL);
    tsafe_package_bytes_free(NULL);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    uint64_t seed;
    randombytes_buf(&seed, sizeof seed);
    const char *env = getenv("TSAFE_TEST_SEED");
    if (env)
        seed = strtoull(env, NULL, 0);
    rng_state = seed;
    printf("test_package seed: 0x%016llx (set TSAFE_TEST_SEED to replay)\n",
           (unsigned long long)seed);
    if (tsafe_package_keypair(pk, sk) != TSAFE_OK ||
        tsafe_package_keypair(other_pk, other_sk) != TSAFE_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_layout),
        cmocka_unit_test(test_every_byte_small),
        cmocka_unit_test(test_every_byte_big_sampled),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_truncation_and_extension),
        cmocka_unit_test(test_signed_but_malformed),
        cmocka_unit_test(test_create_errors),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(other_sk, sizeof other_sk);
    return rc;
}
