/* Generates the seed corpora under tests/corpus/fuzz_<target>/ (the
 * directory `make fuzz` passes to build/fuzz/fuzz_<target>) with the public
 * API and the fixtures of targets.c (same contexts, keys, signing key), then
 * checks each file against its target: "ok-*" accepted, "bad-*" refused.
 * Deterministic: every key, seed and value is fixed, so re-running it gives
 * byte-identical files.
 *
 * Build and run from the repository root (after `make libs`):
 *   cc -std=c11 -D_GNU_SOURCE -O1 -Iinclude -Itests -o build/gen_corpus \
 *      tests/fuzz/gen_corpus.c build/lib/libtensafe-moe.a \
 *      build/lib/libtensafe-lora.a build/lib/libtensafe-he-core.a \
 *      -ljansson -llapacke -lopenblas -lgmp -lfftw3 -lsodium -lcrypto -lz -lm -lpthread
 *   ./build/gen_corpus [tests/corpus]
 */
#include "fuzz/targets.c"

#include <errno.h>
#include <sys/stat.h>

static const char *g_root = "tests/corpus";
static int g_errors;
static size_t g_files, g_bytes;

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

static void put(const char *target, fuzz_fn fn, const char *name, const void *data,
                size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fuzz_%s", g_root, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "mkdir %s: %s\n", path, strerror(errno));
        exit(1);
    }
    snprintf(path, sizeof path, "%s/fuzz_%s/%s", g_root, target, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || (len && fwrite(data, 1, len, fp) != len) || fclose(fp) != 0) {
        fprintf(stderr, "write %s failed\n", path);
        exit(1);
    }
    g_files++;
    g_bytes += len;
    /* check the expectation encoded in the name */
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, data, len);
    int accepted = fn(copy, len);
    free(copy);
    if (strncmp(name, "ok-", 3) == 0 && !accepted) {
        fprintf(stderr, "%s: expected accepted, was refused\n", path);
        g_errors++;
    }
    if (strncmp(name, "bad-", 4) == 0 && accepted) {
        fprintf(stderr, "%s: expected refused, was accepted\n", path);
        g_errors++;
    }
}

static void put_str(const char *target, fuzz_fn fn, const char *name, const char *s)
{
    put(target, fn, name, s, strlen(s));
}

#define PUT(t, name, data, len) put(#t, tsafe_fuzz_##t, name, data, len)
#define PUTS(t, name, s) put_str(#t, tsafe_fuzz_##t, name, s)

/* A buffer with one byte changed. */
static void put_flipped(const char *target, fuzz_fn fn, const char *name, const uint8_t *data,
                        size_t len, size_t at, uint8_t value)
{
    uint8_t *b = malloc(len);
    memcpy(b, data, len);
    b[at] = value;
    put(target, fn, name, b, len);
    free(b);
}
#define PUTF(t, name, data, len, at, v) put_flipped(#t, tsafe_fuzz_##t, name, data, len, at, v)

/* ------------------------------------------------------------- params */

static void gen_params(void)
{
    uint8_t buf[512];
    size_t w = 0;
    tsafe_params p;
    fz_ckks_params(&p);
    if (tsafe_params_serialize(&p, buf, sizeof buf, &w) != TSAFE_OK)
        exit(1);
    PUT(params, "ok-fuzz-context", buf, w);
    PUT(params, "bad-truncated", buf, w - 1);
    PUTF(params, "bad-magic-tshe", buf, w, 3, 'E');
    PUTF(params, "bad-version", buf, w, 4, 2);
    PUTF(params, "bad-reserved", buf, w, 5, 1);
    PUTF(params, "bad-log-n-9", buf, w, 8, 9);
    PUTF(params, "bad-n-primes-0", buf, w, 12, 0);
    PUTF(params, "bad-flags", buf, w, 20, 0x3);
    /* explicit primes, as the validated context holds them */
    const fz_ckks_fixture *f = fz_ckks();
    if (tsafe_params_serialize(tsafe_context_params(f->ctx), buf, sizeof buf, &w) != TSAFE_OK)
        exit(1);
    PUT(params, "ok-explicit-primes", buf, w);
    PUTF(params, "ok-explicit-not-prime", buf, w, w - 8, (uint8_t)(buf[w - 8] + 2));
    /* presets and a special prime */
    static const char *const presets[] = {"seed-n16384", "ifma-n4096"};
    for (int i = 0; i < 2; i++) {
        char name[64];
        if (tsafe_params_preset(presets[i], &p) != TSAFE_OK ||
            tsafe_params_serialize(&p, buf, sizeof buf, &w) != TSAFE_OK)
            exit(1);
        snprintf(name, sizeof name, "ok-preset-%s", presets[i]);
        PUT(params, name, buf, w);
    }
    memset(&p, 0, sizeof p);
    p.log_n = 11;
    p.n_primes = 3;
    p.prime_bits[0] = 40;
    p.prime_bits[1] = 30;
    p.prime_bits[2] = 41;
    p.n_special = 1;
    p.scale = 0x1p30;
    p.flags = TSAFE_PARAMS_INSECURE_FOR_TESTS;
    if (tsafe_params_serialize(&p, buf, sizeof buf, &w) != TSAFE_OK)
        exit(1);
    PUT(params, "ok-special-prime", buf, w);
    p.flags = 0; /* above the 128-bit bound for N = 2048: refused by context */
    if (tsafe_params_serialize(&p, buf, sizeof buf, &w) != TSAFE_OK)
        exit(1);
    PUT(params, "ok-insecure-refused-by-context", buf, w);
}

/* ----------------------------------------------------- CKKS objects */

#define SERIALIZE(kind, ctx, obj, out, outlen)                                      \
    do {                                                                            \
        size_t n_ = 0;                                                              \
        if (tsafe_##kind##_serialized_size(ctx, obj, &n_) != TSAFE_OK) exit(1);    \
        out = malloc(n_);                                                           \
        if (tsafe_##kind##_serialize(ctx, obj, out, n_, &outlen) != TSAFE_OK) exit(1); \
    } while (0)

static void gen_ckks(void)
{
    const fz_ckks_fixture *f = fz_ckks();
    uint8_t *b = NULL, *pb = NULL;
    size_t n = 0, pn = 0;

    SERIALIZE(plaintext, f->ctx, f->pt, pb, pn);
    PUT(plaintext, "ok-top-level", pb, pn);

    /* ciphertexts */
    SERIALIZE(ciphertext, f->ctx, f->ct, b, n);
    PUT(ciphertext, "ok-seeded", b, n);
    PUT(ciphertext, "bad-truncated", b, n - 1);
    PUTF(ciphertext, "bad-version", b, n, 4, 9);
    PUTF(ciphertext, "bad-fingerprint", b, n, 8, (uint8_t)(b[8] ^ 1));
    PUTF(ciphertext, "bad-level", b, n, 40, 7);
    PUTF(ciphertext, "bad-flags", b, n, 6, 0x80);
    free(b);
    SERIALIZE(ciphertext, f->ctx, f->ct_pub, b, n);
    PUT(ciphertext, "ok-public", b, n);
    {
        uint8_t *c = malloc(n);
        memcpy(c, b, n);
        memset(c + 52, 0xFF, 4); /* first coefficient 2^30 - 1 >= q */
        PUT(ciphertext, "bad-coefficient-above-q", c, n);
        free(c);
    }
    PUT(ciphertext, "bad-plaintext-kind", pb, pn);
    free(b);
    tsafe_ciphertext *ct = NULL;
    if (tsafe_ciphertext_create(f->ctx, &ct) != TSAFE_OK ||
        tsafe_ckks_mul_plain(f->ctx, f->ct_pub, f->pt, ct) != TSAFE_OK ||
        tsafe_ckks_rescale(f->ctx, ct, ct) != TSAFE_OK)
        exit(1);
    SERIALIZE(ciphertext, f->ctx, ct, b, n);
    PUT(ciphertext, "ok-rescaled-level0", b, n);
    free(b);
    tsafe_ciphertext_free(ct);

    /* plaintexts */
    PUT(plaintext, "bad-truncated", pb, pn - 7);
    PUTF(plaintext, "bad-kind", pb, pn, 5, 0x7F);
    PUTF(plaintext, "bad-scale-nan", pb, pn, 51, 0xFF);
    tsafe_plaintext *pt0 = NULL;
    double v[4] = {1.5, -2.25, 3.0, 1e-3};
    if (tsafe_plaintext_create(f->ctx, &pt0) != TSAFE_OK ||
        tsafe_ckks_encode(f->ctx, v, 4, 0x1p10, 0, pt0) != TSAFE_OK)
        exit(1);
    SERIALIZE(plaintext, f->ctx, pt0, b, n);
    PUT(plaintext, "ok-level0", b, n);
    free(b);
    tsafe_plaintext_free(pt0);

    /* keys */
    SERIALIZE(public_key, f->ctx, f->pk, b, n);
    PUT(public_key, "ok-fixture", b, n);
    PUT(public_key, "bad-truncated", b, n / 2);
    PUTF(public_key, "bad-fingerprint", b, n, 20, (uint8_t)(b[20] + 1));
    PUT(public_key, "bad-plaintext-kind", pb, pn);
    free(b);
    SERIALIZE(secret_key, f->ctx, f->sk, b, n);
    PUT(secret_key, "ok-fixture", b, n);
    PUT(secret_key, "bad-truncated", b, n - 1);
    PUTF(secret_key, "bad-ternary-3", b, n, n - 1, 0xFF);
    PUT(secret_key, "bad-plaintext-kind", pb, pn);
    sodium_memzero(b, n);
    free(b);
    tsafe_secret_key *sk2 = NULL;
    uint8_t seed[32];
    fz_fill32(seed, 0x99);
    if (tsafe_secret_key_generate(f->ctx, seed, &sk2) != TSAFE_OK)
        exit(1);
    SERIALIZE(secret_key, f->ctx, sk2, b, n);
    PUT(secret_key, "ok-other-key", b, n);
    free(b);
    tsafe_secret_key_free(sk2);
    free(pb);
}

/* ------------------------------------------------------- two-party */

static void gen_lora(void)
{
    const fz_lora_fixture *f = fz_lora();
    float x[FZ_LORA_D];
    for (uint32_t i = 0; i < FZ_LORA_D; i++)
        x[i] = (float)(0.9 * sin(1.3 * (double)i));
    uint8_t *req = NULL, *resp = NULL, *msg = NULL;
    size_t rq = 0, rs = 0, ms = 0;
    const tsafe_lora_site *sites[1] = {f->site};
    float u[FZ_LORA_R];
    float *us[1] = {u};
    uint32_t ranks[1] = {FZ_LORA_R};
    if (tsafe_lora_client_encrypt(f->client, x, &req, &rq, NULL) != TSAFE_OK ||
        tsafe_lora_server_process(f->server, sites, 1, req, rq, &resp, &rs, NULL) != TSAFE_OK ||
        tsafe_lora_client_decode(f->client, resp, rs, 1, ranks, us, NULL) != TSAFE_OK ||
        tsafe_lora_client_release(f->client, 1, ranks, us, NULL, &msg, &ms, NULL) != TSAFE_OK)
        exit(1);
    PUT(lora_request, "ok-request", req, rq);
    PUT(lora_request, "bad-truncated", req, rq - 1);
    PUTF(lora_request, "bad-kind", req, rq, 5, 2);
    PUTF(lora_request, "bad-version", req, rq, 4, 2);
    PUTF(lora_request, "bad-length", req, rq, 8, (uint8_t)(req[8] + 1));
    PUT(lora_request, "bad-response", resp, rs);

    PUT(lora_response, "ok-response", resp, rs);
    PUT(lora_response, "bad-truncated", resp, rs - 3);
    PUTF(lora_response, "bad-n-sites", resp, rs, 8, 2);
    PUTF(lora_response, "bad-rank", resp, rs, 12, 5);
    PUTF(lora_response, "bad-n-batches", resp, rs, 16, 0);
    PUT(lora_response, "bad-request", req, rq);

    PUT(lora_umsg, "ok-umsg", msg, ms);
    PUT(lora_umsg, "bad-truncated", msg, ms - 1);
    PUTF(lora_umsg, "bad-rank", msg, ms, 12, 3);
    PUTF(lora_umsg, "bad-n-sites", msg, ms, 8, 0);
    {
        uint8_t *c = malloc(ms);
        memcpy(c, msg, ms);
        memset(c + 16, 0xFF, 4); /* u[0] = NaN */
        PUT(lora_umsg, "bad-nan-value", c, ms);
        free(c);
    }
    tsafe_lora_bytes_free(req);
    tsafe_lora_bytes_free(resp);
    tsafe_lora_bytes_free(msg);
}

/* ------------------------------------------------------- safetensors */

/* A small valid file with every dtype, a scalar and metadata. */
static void make_all_dtypes(uint8_t **out, size_t *len)
{
    tsafe_safetensors_writer *w = NULL;
    if (tsafe_safetensors_writer_create(&w) != TSAFE_OK)
        exit(1);
    uint8_t raw[64];
    for (int i = 0; i < 64; i++)
        raw[i] = (uint8_t)(i * 37 + 11);
    for (int d = TSAFE_DTYPE_BOOL; d <= TSAFE_DTYPE_U64; d++) {
        uint64_t shape[2] = {2, 2};
        size_t nbytes = 4 * tsafe_dtype_size((tsafe_dtype)d);
        uint8_t tmp[64];
        memcpy(tmp, raw, nbytes);
        if (d == TSAFE_DTYPE_BOOL)
            for (int i = 0; i < 4; i++)
                tmp[i] &= 1;
        char name[32];
        snprintf(name, sizeof name, "t.%s", tsafe_dtype_name((tsafe_dtype)d));
        if (tsafe_safetensors_writer_add(w, name, (tsafe_dtype)d, shape, 2, tmp, nbytes) !=
            TSAFE_OK)
            exit(1);
    }
    float one = 1.0f;
    if (tsafe_safetensors_writer_add_f32(w, "scalar", TSAFE_DTYPE_F32, NULL, 0, &one) !=
            TSAFE_OK ||
        tsafe_safetensors_writer_add(w, "empty", TSAFE_DTYPE_F16, (const uint64_t[]){0, 3}, 2,
                                     NULL, 0) != TSAFE_OK ||
        tsafe_safetensors_writer_set_metadata(w, "format", "pt") != TSAFE_OK ||
        tsafe_safetensors_writer_set_metadata(w, "note", "caf\xc3\xa9 \xe2\x82\xac") != TSAFE_OK ||
        tsafe_safetensors_writer_serialize(w, out, len) != TSAFE_OK)
        exit(1);
    tsafe_safetensors_writer_free(w);
}

/* Header-only file: u64 length + JSON (+ data). */
static void put_st_raw(const char *name, const char *json, const uint8_t *data, size_t dlen)
{
    size_t jl = strlen(json);
    uint8_t *b = malloc(8 + jl + dlen);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)jl >> (8 * i));
    memcpy(b + 8, json, jl);
    if (dlen)
        memcpy(b + 8 + jl, data, dlen);
    PUT(safetensors, name, b, 8 + jl + dlen);
    free(b);
}

static void gen_safetensors(void)
{
    const fz_adapter_fixture *f = fz_adapter();
    PUT(safetensors, "ok-peft-adapter", f->st, f->st_len);
    uint8_t *b = NULL;
    size_t n = 0;
    make_all_dtypes(&b, &n);
    PUT(safetensors, "ok-all-dtypes", b, n);
    PUT(safetensors, "bad-truncated-data", b, n - 1);
    PUT(safetensors, "bad-truncated-header", b, 12);
    PUT(safetensors, "bad-short", b, 7);
    tsafe_safetensors_bytes_free(b);
    uint8_t d16[16] = {0};
    put_st_raw("ok-empty", "{}", NULL, 0);
    put_st_raw("ok-metadata-only", "{\"__metadata__\":{\"a\":\"b\"}}", NULL, 0);
    put_st_raw("ok-two-tensors",
               "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
               "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}",
               d16, 16);
    put_st_raw("bad-gap",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", d16, 8);
    put_st_raw("bad-overlap",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d16, 12);
    put_st_raw("bad-shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
               d16, 8);
    put_st_raw("bad-dtype", "{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               d16, 8);
    put_st_raw("bad-duplicate-key",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", d16, 8);
    put_st_raw("bad-overflow",
               "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],"
               "\"data_offsets\":[0,8]}}", d16, 8);
    put_st_raw("bad-not-object", "[1,2,3]", NULL, 0);
    put_st_raw("bad-utf8", "{\"\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
               d16, 1);
    put_st_raw("bad-unknown-field",
               "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", d16, 1);
    static const uint8_t huge[16] = {0, 0, 0, 0, 0, 1, 0, 0, '{', '}'};
    PUT(safetensors, "bad-header-too-large", huge, 10);
}

/* --------------------------------------------------------- adapter config */

static void gen_adapter_config(void)
{
    PUTS(adapter_config, "ok-fixed", k_fz_adapter_config);
    PUTS(adapter_config, "ok-patterns",
         "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":16,\"use_rslora\":true,"
         "\"fan_in_fan_out\":false,\"bias\":\"none\",\"task_type\":\"CAUSAL_LM\","
         "\"target_modules\":\"q_proj\",\"rank_pattern\":{\"layers.7.q_proj\":8},"
         "\"alpha_pattern\":{\"q_proj\":3.5},"
         "\"target_parameters\":[\"mlp.experts.down_proj\"],"
         "\"base_model_name_or_path\":\"Qwen/Qwen3-30B-A3B\",\"use_dora\":false}");
    PUTS(adapter_config, "bad-dora",
         "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4,\"use_dora\":true}");
    PUTS(adapter_config, "bad-peft-type", "{\"peft_type\":\"IA3\",\"r\":2,\"lora_alpha\":4}");
    PUTS(adapter_config, "bad-missing-r", "{\"peft_type\":\"LORA\",\"lora_alpha\":4}");
    PUTS(adapter_config, "bad-r-string",
         "{\"peft_type\":\"LORA\",\"r\":\"2\",\"lora_alpha\":4}");
    PUTS(adapter_config, "bad-rank-mismatch",
         "{\"peft_type\":\"LORA\",\"r\":3,\"lora_alpha\":4,"
         "\"target_parameters\":[\"mlp.experts.gate_up_proj\"]}");
    PUTS(adapter_config, "bad-no-fused-target", "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4}");
    PUTS(adapter_config, "bad-json", "{\"peft_type\":\"LORA\",\"r\":2,");
    PUTS(adapter_config, "bad-empty", "");
}

/* --------------------------------------------------------------- package */

static void gen_package(void)
{
    const fz_pkg_fixture *f = fz_pkg();
    const fz_adapter_fixture *a = fz_adapter();
    static const char *const targets[] = {"q_proj", "v_proj", "mlp.experts.down_proj"};
    tsafe_package_manifest m;
    memset(&m, 0, sizeof m);
    m.adapter_id = "fuzz/banking-r2";
    m.domain = "banking";
    m.rank = 2;
    m.alpha = 4.0;
    m.targets = targets;
    m.n_targets = 3;
    m.price_per_1k_tokens = 0.25;
    m.creator = "TenSafe fuzz corpus";
    uint8_t *b = NULL;
    size_t n = 0;
    if (tsafe_package_create(&m, a->st, a->st_len, f->sk, &b, &n) != TSAFE_OK)
        exit(1);
    PUT(package, "ok-adapter", b, n);
    {
        static const tsafe_package_pattern rp[] = {{"v_proj", 2}}, ap[] = {{"q_proj", 3.5}};
        tsafe_package_manifest mp = m;
        mp.rank_pattern = rp;
        mp.n_rank_pattern = 1;
        mp.alpha_pattern = ap;
        mp.n_alpha_pattern = 1;
        mp.use_rslora = 1;
        uint8_t *bp = NULL;
        size_t np = 0;
        if (tsafe_package_create(&mp, a->st, a->st_len, f->sk, &bp, &np) != TSAFE_OK)
            exit(1);
        PUT(package, "ok-patterns", bp, np);
        tsafe_package_bytes_free(bp);
    }
    PUT(package, "bad-truncated", b, n - 1);
    PUTF(package, "bad-flipped-manifest", b, n, 30, (uint8_t)(b[30] ^ 0x20));
    PUTF(package, "bad-flipped-signature", b, n, n - 1, (uint8_t)(b[n - 1] ^ 1));
    PUTF(package, "bad-version", b, n, 8, 2);
    tsafe_package_bytes_free(b);
    /* an empty payload, unicode strings, no targets */
    m.adapter_id = "x";
    m.domain = "";
    m.creator = "\xe6\x97\xa5\xe6\x9c\xac \xc3\xa9";
    m.n_targets = 0;
    m.targets = NULL;
    m.price_per_1k_tokens = 0.0;
    if (tsafe_package_create(&m, NULL, 0, f->sk, &b, &n) != TSAFE_OK)
        exit(1);
    PUT(package, "ok-empty-payload", b, n);
    tsafe_package_bytes_free(b);
    /* signed with another key: refused */
    uint8_t pk2[32], sk2[64], seed2[32];
    fz_fill32(seed2, 0xAB);
    crypto_sign_seed_keypair(pk2, sk2, seed2);
    if (tsafe_package_create(&m, NULL, 0, sk2, &b, &n) != TSAFE_OK)
        exit(1);
    PUT(package, "bad-other-signer", b, n);
    tsafe_package_bytes_free(b);
    sodium_memzero(sk2, sizeof sk2);
}

/* ------------------------------------------------------------------ DP */

static void put_dp(const char *name, const double v[8], uint8_t sel, uint64_t releases,
                   size_t n_vec)
{
    uint8_t b[8 * 8 + 1 + 8 + 16 * 4];
    memcpy(b, v, 64);
    b[64] = sel;
    memcpy(b + 65, &releases, 8);
    for (size_t i = 0; i < n_vec && i < 16; i++) {
        float x = (float)(0.3 * (double)i - 1.0);
        memcpy(b + 73 + 4 * i, &x, 4);
    }
    PUT(dp, name, b, 73 + 4 * (n_vec < 16 ? n_vec : 16));
}

static void gen_dp(void)
{
    /* eps, delta, sensitivity, sigma, eps_total, delta_total, clip, unused */
    const double base[8] = {1.0, 1e-5, 2.0, 3.0, 8.0, 1e-5, 1.0, 0.0};
    put_dp("ok-rdp-calibrated", base, 0, 100, 16);
    put_dp("ok-gdp-explicit-sigma", base, 1 | 2 | 4, 1000, 8);
    double tiny[8] = {1e-3, 1e-300, 1e-300, 1e-300, 1e3, 1e-300, 1e-30, 0};
    put_dp("edge-tiny", tiny, 1, UINT64_MAX, 4);
    double huge[8] = {1e300, 0.999999, 1e300, 1e300, 1e308, 0.5, 1e38, 0};
    put_dp("edge-huge", huge, 2 | 4, 1ull << 62, 16);
    double bad[8] = {-1.0, 2.0, 0.0, -3.0, -8.0, 0.0, 0.0, 0.0};
    put_dp("bad-negative", bad, 0, 1, 2);
    double nan[8];
    for (int i = 0; i < 8; i++)
        nan[i] = NAN;
    put_dp("bad-nan", nan, 7, 5, 3);
    double over[8] = {0.01, 1e-9, 2.0, 0.0, 0.02, 1e-9, 1.0, 0};
    put_dp("edge-small-budget", over, 0, 1, 1);
}

/* ------------------------------------------------------------------ MoE */

static void gen_moe_config(void)
{
    PUTS(moe_config, "ok-qwen3-30b-a3b",
         "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"model_type\":\"qwen3_moe\","
         "\"hidden_size\":2048,\"num_hidden_layers\":48,\"num_attention_heads\":32,"
         "\"num_key_value_heads\":4,\"head_dim\":128,\"num_experts\":128,"
         "\"num_experts_per_tok\":8,\"moe_intermediate_size\":768,\"intermediate_size\":6144,"
         "\"norm_topk_prob\":true,\"vocab_size\":151936,\"rope_theta\":1000000.0,"
         "\"torch_dtype\":\"bfloat16\",\"decoder_sparse_step\":1,\"mlp_only_layers\":[]}");
    PUTS(moe_config, "ok-qwen3.5-nested",
         "{\"model_type\":\"qwen3_5_moe\",\"text_config\":{\"model_type\":\"qwen3_5_moe_text\","
         "\"hidden_size\":2048,\"num_hidden_layers\":40,\"num_attention_heads\":16,"
         "\"num_key_value_heads\":2,\"head_dim\":256,\"num_experts\":256,"
         "\"num_experts_per_tok\":8,\"moe_intermediate_size\":512,"
         "\"shared_expert_intermediate_size\":512,\"full_attention_interval\":4,"
         "\"vocab_size\":248320},\"vision_config\":{\"hidden_size\":1152}}");
    PUTS(moe_config, "ok-qwen2.5-dense",
         "{\"_name_or_path\":\"Qwen/Qwen2.5-1.5B\",\"model_type\":\"qwen2\","
         "\"hidden_size\":1536,\"intermediate_size\":8960,\"num_hidden_layers\":28,"
         "\"num_attention_heads\":12,\"num_key_value_heads\":2,\"vocab_size\":151936}");
    PUTS(moe_config, "ok-tiny-moe",
         "{\"model_type\":\"qwen2_moe\",\"hidden_size\":32,\"num_hidden_layers\":2,"
         "\"num_attention_heads\":4,\"num_experts\":6,\"num_experts_per_tok\":2,"
         "\"moe_intermediate_size\":16,\"shared_expert_intermediate_size\":8,"
         "\"norm_topk_prob\":false}");
    PUTS(moe_config, "ok-tiny-dense",
         "{\"hidden_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
         "\"intermediate_size\":24}");
    PUTS(moe_config, "bad-missing-hidden",
         "{\"num_hidden_layers\":2,\"num_attention_heads\":4,\"intermediate_size\":8}");
    PUTS(moe_config, "bad-string-size",
         "{\"hidden_size\":\"2048\",\"num_hidden_layers\":2,\"num_attention_heads\":4,"
         "\"intermediate_size\":8}");
    PUTS(moe_config, "bad-negative",
         "{\"hidden_size\":-64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
         "\"intermediate_size\":8}");
    PUTS(moe_config, "bad-topk-above-experts",
         "{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
         "\"num_experts\":4,\"num_experts_per_tok\":5,\"moe_intermediate_size\":8}");
    PUTS(moe_config, "bad-huge",
         "{\"hidden_size\":18446744073709551615,\"num_hidden_layers\":2,"
         "\"num_attention_heads\":4,\"intermediate_size\":8}");
    PUTS(moe_config, "bad-not-json", "{\"hidden_size\":");
}

/* ------------------------------------------------------------ step-gate */

static void gen_stepgate(void)
{
    PUTS(stepgate, "ok-seeds",
         "{\"domains\":[{\"name\":\"banking\",\"adapter\":\"banking\",\"keywords\":[\"bank\","
         "\"deposit\",\"loan\",\"mortgage\",\"credit\",\"savings\",\"checking\","
         "\"interest rate\",\"refinance\"]},{\"name\":\"investment\",\"keywords\":[\"invest\","
         "\"portfolio\",\"stock\",\"bond\",\"etf\",\"dividend\",\"market\",\"allocation\","
         "\"risk\"]}],\"fallback\":\"shared\",\"decide_every\":4,\"hysteresis\":2}");
    PUTS(stepgate, "ok-minimal", "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"x\"]}]}");
    PUTS(stepgate, "ok-unicode",
         "{\"domains\":[{\"name\":\"m\\u00e9dical\",\"adapter\":\"med\",\"keywords\":"
         "[\"sant\\u00e9\",\"\\u65e5\\u672c\",\"  heart   attack \"]}],\"decide_every\":1}");
    PUTS(stepgate, "bad-empty-domains", "{\"domains\":[]}");
    PUTS(stepgate, "bad-duplicate-name",
         "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"x\"]},{\"name\":\"a\","
         "\"keywords\":[\"y\"]}]}");
    PUTS(stepgate, "bad-blank-keyword",
         "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"   \"]}]}");
    PUTS(stepgate, "bad-missing-keywords", "{\"domains\":[{\"name\":\"a\"}]}");
    PUTS(stepgate, "bad-keywords-type", "{\"domains\":[{\"name\":\"a\",\"keywords\":\"x\"}]}");
    PUTS(stepgate, "text-request",
         "Should I refinance my mortgage or put the savings into an ETF? "
         "bankrupt bank\xe2\x80\x94loan (BANK) interest\t\n rate \xff\xfe caf\xc3\xa9");
}

/* ------------------------------------------------------------------ BFV */

/* sel, n_reads, then the encoding (the input layout of tsafe_fuzz_bfv). */
static void put_bfv(const char *name, uint8_t sel, uint8_t n_reads, const uint8_t *enc,
                    size_t len, size_t at, int value)
{
    uint8_t *b = malloc(len + 2);
    b[0] = sel;
    b[1] = n_reads;
    memcpy(b + 2, enc, len);
    if (value >= 0)
        b[2 + at] = (uint8_t)value;
    PUT(bfv, name, b, len + 2);
    free(b);
}

static void gen_bfv(void)
{
    const fz_bfv_fixture *f = fz_bfv();
    size_t n = tsafe_bfv_public_key_bytes(f->ctx);
    uint8_t *b = malloc(n + 1);
    if (tsafe_bfv_public_key_write(f->ctx, f->pk, b, n) != TSAFE_OK)
        exit(1);
    put_bfv("ok-public-key", 0, 0, b, n, 0, -1);
    put_bfv("bad-public-key-truncated", 0, 0, b, n - 1, 0, -1);
    /* the first coefficient of p0 (30 bits after the 32-byte seed) all ones: >= q0 */
    {
        uint8_t *c = malloc(n);
        memcpy(c, b, n);
        memset(c + 32, 0xFF, 4);
        put_bfv("bad-public-key-coefficient-above-q", 0, 0, c, n, 0, -1);
        free(c);
    }
    if (tsafe_bfv_ct_bytes(f->ctx) != n || tsafe_bfv_ct_write(f->ctx, f->ct, b, n) != TSAFE_OK)
        exit(1);
    put_bfv("ok-ciphertext", 1, 0, b, n, 0, -1);
    b[n] = 0;
    put_bfv("bad-ciphertext-trailing-byte", 1, 0, b, n + 1, 0, -1);
    put_bfv("bad-ciphertext-as-public-key", 0, 0, b, n - 2, 0, -1);
    free(b);

    /* sealed results of the fixture product at 0, 7 (direct sums), 64
     * (through the NTT) reads */
    static const uint8_t reads[3] = {0, 7, FZ_BFV_READS};
    uint8_t seed[32];
    fz_fill32(seed, 0x85);
    for (int i = 0; i < 3; i++) {
        char name[64];
        tsafe_bfv_acc_zero(f->acc);
        if (tsafe_bfv_acc_mul_add(f->acc, f->ct, f->pt) != TSAFE_OK ||
            tsafe_bfv_seal(f->ctx, f->acc, f->pk, f->pos, NULL, reads[i], 20, seed, f->res) !=
                TSAFE_OK)
            exit(1);
        size_t sn = tsafe_bfv_sealed_bytes(f->ctx, reads[i]);
        uint8_t *s = malloc(sn + 8);
        if (tsafe_bfv_sealed_write(f->ctx, f->res, s, sn) != TSAFE_OK)
            exit(1);
        snprintf(name, sizeof name, "ok-sealed-%u-reads", reads[i]);
        put_bfv(name, 2, reads[i], s, sn, 0, -1);
        if (reads[i] == FZ_BFV_READS) {
            put_bfv("bad-sealed-count-mismatch", 2, FZ_BFV_READS - 1, s, sn, 0, -1);
            memset(s + sn, 0, 8);
            put_bfv("bad-sealed-over-capacity", 2, FZ_BFV_READS + 1,
                    s, tsafe_bfv_sealed_bytes(f->ctx, FZ_BFV_READS + 1), 0, -1);
            memset(s + sn - 4, 0xFF, 4); /* the last read (the top 30 bits) 2^30 - 1 */
            put_bfv("bad-sealed-read-above-q", 2, FZ_BFV_READS, s, sn, 0, -1);
        }
        free(s);
    }
}

/* ------------------------------------------------------- sealed protocol */

/* The mode byte (0 sealed, 1 sealed-private, 3 checked shares), then len bytes of msg, with
 * the bytes [at, at + k) set to value when k > 0. */
static void put_sealed(const char *target, fuzz_fn fn, const char *name, int priv,
                       const uint8_t *msg, size_t len, size_t at, size_t k, uint8_t value)
{
    uint8_t *b = malloc(len + 1);
    b[0] = (uint8_t)priv;
    memcpy(b + 1, msg, len);
    if (k)
        memset(b + 1 + at, value, k);
    put(target, fn, name, b, len + 1);
    free(b);
}
#define PUTM(t, name, priv, msg, len) put_sealed(#t, tsafe_fuzz_##t, name, priv, msg, len, 0, 0, 0)
#define PUTMF(t, name, priv, msg, len, at, k, v) \
    put_sealed(#t, tsafe_fuzz_##t, name, priv, msg, len, at, k, v)

/* Messages come from the fixtures' reference token: the ciphertexts carry
 * CSPRNG randomness (the protocol takes no seed), so unlike the other
 * corpora these files change when regenerated; what they test does not. */
static void gen_sealed(void)
{
    const fz_sealed_fixture *s = fz_sealed(0), *p = fz_sealed(1);
    const size_t tag = 8, seq = 8 + 16 + 4, pre = FZ_SEALED_PREFIX;

    /* sealed-private with checked shares (mode byte 3): every message of
     * its reference token, and a share one ciphertext short (its checks) */
    const fz_sealed_fixture *k = fz_sealed(2);
    PUTM(sealed_hello, "ok-checked", 3, k->hello.b, k->hello.n);
    PUTM(sealed_query, "ok-checked", 3, k->query.b, k->query.n);
    PUTM(sealed_response1, "ok-checked", 3, k->r1.b, k->r1.n);
    PUTM(sealed_response1, "bad-checked-without-checks", 3, p->r1.b, p->r1.n);
    PUTM(sealed_share, "ok-checked", 3, k->share.b, k->share.n);
    PUTM(sealed_share, "bad-checked-unchecked-share", 3, p->share.b, p->share.n);
    PUTM(sealed_final, "ok-checked", 3, k->final.b, k->final.n);

    /* hello: fingerprint at 8, session at 40, epoch at 56, keys from 60 */
    PUTM(sealed_hello, "ok-sealed", 0, s->hello.b, s->hello.n);
    PUTM(sealed_hello, "ok-private", 1, p->hello.b, p->hello.n);
    PUTM(sealed_hello, "bad-truncated", 0, s->hello.b, s->hello.n - 1);
    PUTMF(sealed_hello, "bad-plan-fingerprint", 0, s->hello.b, 60, 8, 1, 0);
    PUTM(sealed_hello, "bad-other-plan", 1, s->hello.b, 60);
    PUTMF(sealed_hello, "bad-kind", 0, s->hello.b, 60, 5, 1, 11);
    PUTMF(sealed_hello, "bad-key-coefficient-above-q", 0, s->hello.b, s->hello.n, 60 + 32, 7,
          0xFF);

    /* query: tag, u32 n_chunks at 36, ciphertexts from 40 */
    PUTM(sealed_query, "ok-sealed", 0, s->query.b, s->query.n);
    PUTM(sealed_query, "ok-private", 1, p->query.b, p->query.n);
    PUTM(sealed_query, "bad-truncated", 0, s->query.b, s->query.n - 1);
    PUTMF(sealed_query, "bad-replay-seq", 0, s->query.b, pre, seq, 1, 1);
    PUTMF(sealed_query, "bad-session", 0, s->query.b, pre, tag, 1, 0);
    PUTMF(sealed_query, "bad-n-chunks", 0, s->query.b, pre, 36, 1, 2);
    PUTMF(sealed_query, "bad-coefficient-above-q", 0, s->query.b, s->query.n, pre + 32, 7, 0xFF);

    /* response 1: per site rank, d_out (from 40), sealed mode's f64 scale,
     * then the sealed results (sealed-private has no shift field since
     * plan version 7) */
    PUTM(sealed_response1, "ok-sealed", 0, s->r1.b, s->r1.n);
    PUTM(sealed_response1, "ok-private", 1, p->r1.b, p->r1.n);
    PUTM(sealed_response1, "bad-truncated", 0, s->r1.b, s->r1.n - 1);
    PUTMF(sealed_response1, "bad-rank", 0, s->r1.b, 60, pre, 1, 3);
    PUTMF(sealed_response1, "bad-scale-nan", 0, s->r1.b, 60, pre + 8, 8, 0xFF);
    PUTMF(sealed_response1, "bad-private-d-out", 1, p->r1.b, 60, pre + 4, 1, 3);
    PUTMF(sealed_response1, "bad-c1-above-q", 1, p->r1.b, p->r1.n, 60, 7, 0xFF);
    PUTMF(sealed_response1, "bad-replay-seq", 0, s->r1.b, 60, seq, 1, 1);

    /* share: sealed u32 rank + rank u64 (from 40); private u32 rank, u32
     * n_cts, ciphertexts from 48 */
    PUTM(sealed_share, "ok-sealed", 0, s->share.b, s->share.n);
    PUTM(sealed_share, "ok-private", 1, p->share.b, p->share.n);
    PUTM(sealed_share, "bad-sealed-truncated", 0, s->share.b, s->share.n - 1);
    PUTMF(sealed_share, "bad-sealed-share-above-t", 0, s->share.b, s->share.n, pre + 4 + 4, 4,
          0xFF);
    PUTMF(sealed_share, "bad-sealed-kind", 1, s->share.b, s->share.n, 0, 0, 0);
    PUTMF(sealed_share, "bad-private-n-cts", 1, p->share.b, 48, pre + 4, 1, 3);
    {
        /* the first round-2 ciphertext alone, its first c0 coefficient >= q0 */
        uint32_t ncts = p->share.b[pre + 4];
        size_t ctl = p->sizes.share / ncts;
        PUTMF(sealed_share, "bad-private-coefficient-above-q", 1, p->share.b, 48 + ctl, 48 + 32,
              7, 0xFF);
    }
    PUTMF(sealed_share, "bad-replay-seq", 0, s->share.b, s->share.n, seq, 1, 1);

    /* final: sealed u32 d_out + f32 values (from 40); private u32 d_out,
     * f64 scale, sealed results from 52 */
    PUTM(sealed_final, "ok-sealed", 0, s->final.b, s->final.n);
    PUTM(sealed_final, "ok-private", 1, p->final.b, p->final.n);
    PUTM(sealed_final, "bad-sealed-truncated", 0, s->final.b, s->final.n - 1);
    PUTMF(sealed_final, "bad-sealed-nan", 0, s->final.b, s->final.n, pre + 4, 4, 0xFF);
    PUTMF(sealed_final, "bad-sealed-d-out", 0, s->final.b, s->final.n, pre, 1, 63);
    PUTMF(sealed_final, "bad-private-scale-zero", 1, p->final.b, 52, pre + 4, 8, 0);
    PUTM(sealed_final, "bad-private-truncated", 1, p->final.b, p->final.n - 1);
    /* private: the d_out row exponents from 52, then the sealed results
     * (until 2026-11-27 this case hit the first exponents, refused as >
     * 63; 255 now marks a zero row) */
    uint32_t pdo = (uint32_t)p->final.b[pre] | (uint32_t)p->final.b[pre + 1] << 8;
    PUTMF(sealed_final, "bad-private-c1-above-q", 1, p->final.b, p->final.n, 52 + pdo, 7, 0xFF);
    PUTMF(sealed_final, "bad-private-row-exp", 1, p->final.b, p->final.n, 52, 1, 64);
    PUTMF(sealed_final, "ok-private-zero-row", 1, p->final.b, p->final.n, 52, 1, 255);
    PUTMF(sealed_final, "bad-replay-seq", 1, p->final.b, 52, seq, 1, 1);
}

/* Session feed: byte 0 = side (bit 0) and piece size (bits 1-7). The
 * client's frames carry fresh keys, so these files change when regenerated. */
static void put_session(const char *name, uint8_t sel, const uint8_t *msg, size_t len,
                        size_t at, uint8_t value)
{
    uint8_t *b = malloc(len + 1);
    b[0] = sel;
    memcpy(b + 1, msg, len);
    if (at)
        b[1 + at - 1] = value;
    put("session_feed", tsafe_fuzz_session_feed, name, b, len + 1);
    free(b);
}

static void gen_session(void)
{
    const fz_session_fixture *f = fz_session();
    put_session("ok-server-shello-query", 0, f->client.b, f->client.n, 0, 0);
    put_session("ok-server-shello-query-pieces", 7 << 1, f->client.b, f->client.n, 0, 0);
    put_session("ok-client-hello", 1, f->hello.b, f->hello.n, 0, 0);
    put_session("ok-client-hello-bytewise", 1 | 1 << 1, f->hello.b, f->hello.n, 0, 0);
    /* a stream cut short is no error: the session waits for the rest */
    put_session("server-truncated-waits", 0, f->client.b, f->client.n / 16, 0, 0);
    put_session("bad-server-magic", 0, f->client.b, 64, 1, 'X');
    put_session("bad-server-oversized", 0, f->client.b, 12, 12, 0x7F); /* u32 length msb */
    put_session("bad-client-truncated", 1, f->hello.b, f->hello.n - 1, 0, 0);
    put_session("bad-client-mode", 1, f->hello.b, f->hello.n, 12 + 5, 1); /* sealed, not private */
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_root = argv[1];
    if (mkdir(g_root, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "mkdir %s: %s\n", g_root, strerror(errno));
        return 1;
    }
    gen_params();
    gen_ckks();
    gen_lora();
    gen_safetensors();
    gen_adapter_config();
    gen_package();
    gen_dp();
    gen_moe_config();
    gen_stepgate();
    gen_bfv();
    gen_sealed();
    gen_session();
    tsafe_fuzz_cleanup();
    printf("gen_corpus: %zu files, %zu bytes, %d expectation errors\n", g_files, g_bytes,
           g_errors);
    return g_errors ? 1 : 0;
}
