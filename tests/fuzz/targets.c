/* Fuzz target bodies (see targets.h). Included as source by every
 * tests/fuzz/fuzz_<name>.c, by tests/test_fuzz_replay.c and by
 * tests/fuzz/gen_corpus.c, so everything here except the entry points and
 * tsafe_fuzz_cleanup is static. */
#include "fuzz/targets.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "tensafe/bfv.h"
#include "tensafe/ckks.h"
#include "tensafe/lora_adapter.h"
#include "tensafe/lora_dp.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_package.h"
#include "tensafe/lora_sealed.h"
#include "tensafe/lora_session.h"
#include "tensafe/lora_two_party.h"
#include "tensafe/moe.h"
#include "tensafe/safetensors.h"

/* ------------------------------------------------------------ helpers */

#if defined(__GNUC__)
__attribute__((noreturn))
#endif
static void fz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "fuzz invariant violated at %s:%d: %s\n", file, line, what);
    abort();
}

/* An invariant of the library (not a property of the input): abort. */
#define FZ_CHECK(cond)                                   \
    do {                                                 \
        if (!(cond))                                     \
            fz_fail(__FILE__, __LINE__, #cond);          \
    } while (0)

/* Calls whose status does not matter to the target (errors are expected). */
#define FZ_IGNORE(expr)                \
    do {                               \
        tsafe_status fz_s_ = (expr);   \
        (void)fz_s_;                   \
    } while (0)

static void fz_fill32(uint8_t out[32], uint8_t v)
{
    memset(out, v, 32);
}

/* ------------------------------------------------------------ CKKS fixture */

/* Small insecure context (N = 1024, two 30-bit primes) so that every input
 * runs in well under a millisecond. */
typedef struct {
    int ready;
    tsafe_context *ctx;
    tsafe_secret_key *sk;
    tsafe_public_key *pk;
    tsafe_plaintext *pt; /* encoded at the top level */
    tsafe_ciphertext *ct; /* symmetric encryption of pt (seeded) */
    tsafe_ciphertext *ct_pub; /* public-key encryption of pt */
} fz_ckks_fixture;

static fz_ckks_fixture g_fz_ckks;

static void fz_ckks_params(tsafe_params *p)
{
    memset(p, 0, sizeof *p);
    p->log_n = 10;
    p->n_primes = 2;
    p->prime_bits[0] = 30;
    p->prime_bits[1] = 30;
    p->n_special = 0;
    p->scale = 0x1p20;
    p->flags = TSAFE_PARAMS_INSECURE_FOR_TESTS;
}

static const fz_ckks_fixture *fz_ckks(void)
{
    fz_ckks_fixture *f = &g_fz_ckks;
    if (f->ready)
        return f;
    tsafe_params p;
    fz_ckks_params(&p);
    uint8_t s1[32], s2[32], s3[32], s4[32];
    fz_fill32(s1, 0x11);
    fz_fill32(s2, 0x22);
    fz_fill32(s3, 0x33);
    fz_fill32(s4, 0x44);
    double v[16];
    for (int i = 0; i < 16; i++)
        v[i] = 0.25 * (double)(i - 8);
    FZ_CHECK(tsafe_context_create(&p, &f->ctx) == TSAFE_OK);
    uint32_t top = tsafe_context_max_level(f->ctx);
    FZ_CHECK(tsafe_secret_key_generate(f->ctx, s1, &f->sk) == TSAFE_OK);
    FZ_CHECK(tsafe_public_key_generate(f->ctx, f->sk, s2, &f->pk) == TSAFE_OK);
    FZ_CHECK(tsafe_plaintext_create(f->ctx, &f->pt) == TSAFE_OK);
    FZ_CHECK(tsafe_ckks_encode(f->ctx, v, 16, p.scale, top, f->pt) == TSAFE_OK);
    FZ_CHECK(tsafe_ciphertext_create(f->ctx, &f->ct) == TSAFE_OK);
    FZ_CHECK(tsafe_ckks_encrypt_symmetric(f->ctx, f->sk, f->pt, s3, f->ct) == TSAFE_OK);
    FZ_CHECK(tsafe_ciphertext_create(f->ctx, &f->ct_pub) == TSAFE_OK);
    FZ_CHECK(tsafe_ckks_encrypt_public(f->ctx, f->pk, f->pt, s4, f->ct_pub) == TSAFE_OK);
    f->ready = 1;
    return f;
}

static void fz_ckks_free(void)
{
    fz_ckks_fixture *f = &g_fz_ckks;
    tsafe_ciphertext_free(f->ct_pub);
    tsafe_ciphertext_free(f->ct);
    tsafe_plaintext_free(f->pt);
    tsafe_public_key_free(f->pk);
    tsafe_secret_key_free(f->sk);
    tsafe_context_free(f->ctx);
    memset(f, 0, sizeof *f);
}

/* The readers accept exactly what the writers produce: an accepted input
 * re-serialises to the same bytes. */
#define FZ_RESERIALIZE(kind, ctx, obj, data, size)                              \
    do {                                                                        \
        size_t need_ = 0, wrote_ = 0;                                           \
        FZ_CHECK(tsafe_##kind##_serialized_size(ctx, obj, &need_) == TSAFE_OK); \
        FZ_CHECK(need_ == (size));                                              \
        uint8_t *buf_ = malloc(need_ ? need_ : 1);                              \
        FZ_CHECK(buf_ != NULL);                                                 \
        FZ_CHECK(tsafe_##kind##_serialize(ctx, obj, buf_, need_, &wrote_) ==    \
                 TSAFE_OK);                                                     \
        FZ_CHECK(wrote_ == need_);                                              \
        FZ_CHECK(memcmp(buf_, data, need_) == 0);                               \
        sodium_memzero(buf_, need_);                                            \
        free(buf_);                                                             \
    } while (0)

/* Decrypts ct with the fixture key and reads a few slots and coefficients. */
static void fz_use_ciphertext(const fz_ckks_fixture *f, const tsafe_secret_key *sk,
                              const tsafe_ciphertext *ct)
{
    tsafe_plaintext *pt = NULL;
    double vals[8], coeffs[4];
    size_t n = tsafe_context_n(f->ctx);
    if (tsafe_plaintext_create(f->ctx, &pt) == TSAFE_OK) {
        if (tsafe_ckks_decrypt(f->ctx, sk, ct, pt) == TSAFE_OK)
            FZ_IGNORE(tsafe_ckks_decode(f->ctx, pt, vals, 8));
        tsafe_plaintext_free(pt);
    }
    FZ_IGNORE(tsafe_ckks_decrypt_coeffs_strided(f->ctx, sk, ct, n / 4, coeffs, 4));
}

/* Evaluates with an untrusted ciphertext against the fixture's objects. */
static void fz_eval_ciphertext(const fz_ckks_fixture *f, const tsafe_ciphertext *ct)
{
    tsafe_ciphertext *out = NULL;
    if (tsafe_ciphertext_create(f->ctx, &out) != TSAFE_OK)
        return;
    FZ_IGNORE(tsafe_ckks_add(f->ctx, ct, f->ct, out));
    FZ_IGNORE(tsafe_ckks_sub(f->ctx, f->ct_pub, ct, out));
    FZ_IGNORE(tsafe_ckks_add_plain(f->ctx, ct, f->pt, out));
    if (tsafe_ckks_mul_plain(f->ctx, ct, f->pt, out) == TSAFE_OK) {
        if (tsafe_ckks_rescale(f->ctx, out, out) == TSAFE_OK)
            fz_use_ciphertext(f, f->sk, out);
    }
    FZ_IGNORE(tsafe_ckks_mul_const(f->ctx, ct, -1.5, 16.0, out));
    FZ_IGNORE(tsafe_ckks_negate(f->ctx, ct, out));
    FZ_IGNORE(tsafe_ckks_drop_to_level(f->ctx, ct, 0, out));
    FZ_IGNORE(tsafe_ciphertext_copy(f->ctx, ct, out));
    tsafe_ciphertext_free(out);
}

int tsafe_fuzz_ciphertext(const uint8_t *data, size_t size)
{
    const fz_ckks_fixture *f = fz_ckks();
    tsafe_ciphertext *ct = NULL, *into = NULL;
    tsafe_status st = tsafe_ciphertext_deserialize(f->ctx, data, size, &ct);
    /* the allocation-free reader agrees with the allocating one */
    FZ_CHECK(tsafe_ciphertext_create(f->ctx, &into) == TSAFE_OK);
    FZ_CHECK(tsafe_ciphertext_deserialize_into(f->ctx, data, size, into) == st);
    if (st == TSAFE_OK)
        FZ_RESERIALIZE(ciphertext, f->ctx, into, data, size);
    tsafe_ciphertext_free(into);
    if (st != TSAFE_OK)
        return 0;
    FZ_CHECK(ct != NULL);
    FZ_CHECK(tsafe_ciphertext_level(ct) <= tsafe_context_max_level(f->ctx));
    FZ_CHECK(isfinite(tsafe_ciphertext_scale(ct)));
    (void)tsafe_ciphertext_is_seeded(ct);
    FZ_RESERIALIZE(ciphertext, f->ctx, ct, data, size);
    fz_use_ciphertext(f, f->sk, ct);
    fz_eval_ciphertext(f, ct);
    tsafe_ciphertext_free(ct);
    return 1;
}

int tsafe_fuzz_plaintext(const uint8_t *data, size_t size)
{
    const fz_ckks_fixture *f = fz_ckks();
    tsafe_plaintext *pt = NULL;
    if (tsafe_plaintext_deserialize(f->ctx, data, size, &pt) != TSAFE_OK)
        return 0;
    FZ_CHECK(pt != NULL);
    FZ_CHECK(tsafe_plaintext_level(pt) <= tsafe_context_max_level(f->ctx));
    FZ_RESERIALIZE(plaintext, f->ctx, pt, data, size);
    double re[8], im[8];
    FZ_IGNORE(tsafe_ckks_decode(f->ctx, pt, re, 8));
    FZ_IGNORE(tsafe_ckks_decode_complex(f->ctx, pt, re, im, 8));
    tsafe_ciphertext *out = NULL;
    if (tsafe_ciphertext_create(f->ctx, &out) == TSAFE_OK) {
        FZ_IGNORE(tsafe_ckks_add_plain(f->ctx, f->ct, pt, out));
        FZ_IGNORE(tsafe_ckks_mul_plain(f->ctx, f->ct_pub, pt, out));
        if (tsafe_plaintext_prepare_mul(f->ctx, pt) == TSAFE_OK)
            FZ_IGNORE(tsafe_ckks_mul_plain(f->ctx, f->ct, pt, out));
        tsafe_ciphertext_free(out);
    }
    tsafe_plaintext_free(pt);
    return 1;
}

int tsafe_fuzz_public_key(const uint8_t *data, size_t size)
{
    const fz_ckks_fixture *f = fz_ckks();
    tsafe_public_key *pk = NULL;
    if (tsafe_public_key_deserialize(f->ctx, data, size, &pk) != TSAFE_OK)
        return 0;
    FZ_CHECK(pk != NULL);
    FZ_RESERIALIZE(public_key, f->ctx, pk, data, size);
    tsafe_ciphertext *ct = NULL;
    uint8_t seed[32];
    fz_fill32(seed, 0x55);
    if (tsafe_ciphertext_create(f->ctx, &ct) == TSAFE_OK) {
        if (tsafe_ckks_encrypt_public(f->ctx, pk, f->pt, seed, ct) == TSAFE_OK)
            fz_use_ciphertext(f, f->sk, ct);
        tsafe_ciphertext_free(ct);
    }
    tsafe_public_key_free(pk);
    return 1;
}

int tsafe_fuzz_secret_key(const uint8_t *data, size_t size)
{
    const fz_ckks_fixture *f = fz_ckks();
    tsafe_secret_key *sk = NULL;
    if (tsafe_secret_key_deserialize(f->ctx, data, size, &sk) != TSAFE_OK)
        return 0;
    FZ_CHECK(sk != NULL);
    FZ_RESERIALIZE(secret_key, f->ctx, sk, data, size);
    fz_use_ciphertext(f, sk, f->ct);
    fz_use_ciphertext(f, sk, f->ct_pub);
    uint8_t seed[32];
    fz_fill32(seed, 0x66);
    tsafe_public_key *pk = NULL;
    if (tsafe_public_key_generate(f->ctx, sk, seed, &pk) == TSAFE_OK)
        tsafe_public_key_free(pk);
    tsafe_ciphertext *ct = NULL;
    if (tsafe_ciphertext_create(f->ctx, &ct) == TSAFE_OK) {
        if (tsafe_ckks_encrypt_symmetric(f->ctx, sk, f->pt, seed, ct) == TSAFE_OK)
            fz_use_ciphertext(f, sk, ct);
        tsafe_ciphertext_free(ct);
    }
    tsafe_secret_key_free(sk);
    return 1;
}

/* --------------------------------------------------------------- params */

int tsafe_fuzz_params(const uint8_t *data, size_t size)
{
    tsafe_params p;
    if (tsafe_params_deserialize(data, size, &p) != TSAFE_OK)
        return 0;
    uint8_t buf[4 + 4 + 16 + 8 + TSAFE_MAX_PRIMES * 12];
    size_t wrote = 0;
    FZ_CHECK(tsafe_params_serialize(&p, buf, sizeof buf, &wrote) == TSAFE_OK);
    FZ_CHECK(wrote == size && memcmp(buf, data, size) == 0);
    (void)tsafe_params_max_log_q(p.log_n);
    /* context creation costs O(N log N * primes); keep inputs fast */
    if (p.log_n > 12)
        return 1;
    tsafe_context *ctx = NULL;
    if (tsafe_context_create(&p, &ctx) != TSAFE_OK)
        return 1;
    const tsafe_params *vp = tsafe_context_params(ctx);
    FZ_CHECK(vp != NULL && vp->log_n == p.log_n && vp->n_primes == p.n_primes);
    FZ_CHECK(tsafe_context_n(ctx) == ((size_t)1 << p.log_n));
    FZ_CHECK(tsafe_context_max_level(ctx) + 1 + vp->n_special == vp->n_primes);
    for (uint32_t i = 0; i < vp->n_primes; i++)
        FZ_CHECK(tsafe_context_prime(ctx, i) == vp->primes[i] && vp->primes[i] > 1);
    FZ_CHECK(tsafe_context_prime(ctx, vp->n_primes) == 0);
    (void)tsafe_context_log2_q(ctx);
    (void)tsafe_context_slots(ctx);
    (void)tsafe_context_arith_path(ctx);
    /* the validated parameters (explicit primes) rebuild the same context */
    FZ_CHECK(tsafe_params_serialize(vp, buf, sizeof buf, &wrote) == TSAFE_OK);
    tsafe_params q;
    FZ_CHECK(tsafe_params_deserialize(buf, wrote, &q) == TSAFE_OK);
    tsafe_context *ctx2 = NULL;
    FZ_CHECK(tsafe_context_create(&q, &ctx2) == TSAFE_OK);
    uint8_t fp1[TSAFE_FINGERPRINT_BYTES], fp2[TSAFE_FINGERPRINT_BYTES];
    tsafe_context_fingerprint(ctx, fp1);
    tsafe_context_fingerprint(ctx2, fp2);
    FZ_CHECK(memcmp(fp1, fp2, sizeof fp1) == 0);
    tsafe_context_free(ctx2);
    tsafe_context_free(ctx);
    return 1;
}

/* ----------------------------------------------------- two-party fixture */

/* plan_auto(64, 4, 1.0, 0.05, 1e-4) gives N = 2048 with two 27-bit primes:
 * a 14 KB request and a 28 KB response (1e-6 would pick N = 4096 and a
 * 100 KB response, too big for a seed corpus and slow to mutate). */
#define FZ_LORA_D 64u
#define FZ_LORA_R 4u

typedef struct {
    int ready;
    tsafe_lora_plan plan;
    tsafe_lora_client *client;
    tsafe_lora_server *server;
    tsafe_lora_site *site;
} fz_lora_fixture;

static fz_lora_fixture g_fz_lora;

static const fz_lora_fixture *fz_lora(void)
{
    fz_lora_fixture *f = &g_fz_lora;
    if (f->ready)
        return f;
    static float A[FZ_LORA_R * FZ_LORA_D], B[FZ_LORA_D * FZ_LORA_R];
    for (size_t i = 0; i < FZ_LORA_R * FZ_LORA_D; i++) {
        A[i] = (float)(0.04 * sin(0.7 * (double)i));
        B[i] = (float)(0.04 * cos(0.3 * (double)i));
    }
    uint8_t seed[32];
    fz_fill32(seed, 0x77);
    FZ_CHECK(tsafe_lora_plan_auto(FZ_LORA_D, FZ_LORA_R, 1.0, 0.05, 1e-4, &f->plan) == TSAFE_OK);
    FZ_CHECK(tsafe_lora_client_create(&f->plan, seed, &f->client) == TSAFE_OK);
    FZ_CHECK(tsafe_lora_server_create(&f->plan, &f->server) == TSAFE_OK);
    FZ_CHECK(tsafe_lora_site_create(tsafe_lora_server_context(f->server), &f->plan, A, B,
                                    FZ_LORA_D, 2.0f, &f->site) == TSAFE_OK);
    f->ready = 1;
    return f;
}

static void fz_lora_free(void)
{
    fz_lora_fixture *f = &g_fz_lora;
    tsafe_lora_site_free(f->site);
    tsafe_lora_server_free(f->server);
    tsafe_lora_client_free(f->client);
    memset(f, 0, sizeof *f);
}

/* Client side of a response: decode, then release (no DP) and apply. */
static int fz_lora_decode(const fz_lora_fixture *f, const uint8_t *resp, size_t len)
{
    float u[FZ_LORA_R], delta[FZ_LORA_D];
    float *us[1] = {u}, *ds[1] = {delta};
    uint32_t ranks[1] = {FZ_LORA_R};
    const tsafe_lora_site *sites[1] = {f->site};
    tsafe_lora_stats stats;
    memset(&stats, 0, sizeof stats);
    if (tsafe_lora_client_decode(f->client, resp, len, 1, ranks, us, &stats) != TSAFE_OK)
        return 0;
    uint8_t *msg = NULL;
    size_t mlen = 0;
    if (tsafe_lora_client_release(f->client, 1, ranks, us, NULL, &msg, &mlen, &stats) ==
        TSAFE_OK) {
        FZ_IGNORE(tsafe_lora_server_apply(f->server, sites, 1, msg, mlen, ds, &stats));
        tsafe_lora_bytes_free(msg);
    }
    return 1;
}

int tsafe_fuzz_lora_request(const uint8_t *data, size_t size)
{
    const fz_lora_fixture *f = fz_lora();
    const tsafe_lora_site *sites[1] = {f->site};
    uint8_t *resp = NULL;
    size_t rlen = 0;
    tsafe_lora_stats stats;
    memset(&stats, 0, sizeof stats);
    if (tsafe_lora_server_process(f->server, sites, 1, data, size, &resp, &rlen, &stats) !=
        TSAFE_OK)
        return 0;
    FZ_CHECK(resp != NULL && rlen > 0);
    /* the caller-buffer variant accepts the same request, writes the same
     * bytes and stays inside its buffer */
    uint8_t *into = malloc(rlen);
    size_t ilen = 0;
    if (into) {
        FZ_CHECK(tsafe_lora_server_process_into(f->server, sites, 1, data, size, into, rlen, &ilen,
                                                NULL) == TSAFE_OK);
        FZ_CHECK(ilen == rlen && memcmp(into, resp, rlen) == 0);
        free(into);
    }
    (void)fz_lora_decode(f, resp, rlen);
    tsafe_lora_bytes_free(resp);
    return 1;
}

int tsafe_fuzz_lora_response(const uint8_t *data, size_t size)
{
    return fz_lora_decode(fz_lora(), data, size);
}

int tsafe_fuzz_lora_umsg(const uint8_t *data, size_t size)
{
    const fz_lora_fixture *f = fz_lora();
    const tsafe_lora_site *sites[1] = {f->site};
    float delta[FZ_LORA_D];
    float *ds[1] = {delta};
    tsafe_lora_stats stats;
    memset(&stats, 0, sizeof stats);
    return tsafe_lora_server_apply(f->server, sites, 1, data, size, ds, &stats) == TSAFE_OK;
}

/* -------------------------------------------------------------- package */

typedef struct {
    int ready;
    uint8_t pk[32];
    uint8_t sk[64];
} fz_pkg_fixture;

static fz_pkg_fixture g_fz_pkg;

static const fz_pkg_fixture *fz_pkg(void)
{
    fz_pkg_fixture *f = &g_fz_pkg;
    if (f->ready)
        return f;
    FZ_CHECK(sodium_init() >= 0);
    uint8_t seed[32];
    memcpy(seed, TSAFE_FUZZ_PKG_SEED, 32);
    FZ_CHECK(crypto_sign_seed_keypair(f->pk, f->sk, seed) == 0);
    f->ready = 1;
    return f;
}

static void fz_adapter_use(const tsafe_lora_adapter *a);

/* The adapter loader on the same (verified) bytes. */
static void fz_pkg_load_adapter(const uint8_t *bytes, size_t len, const uint8_t pk[32])
{
    tsafe_lora_adapter *a = NULL;
    if (tsafe_lora_adapter_load_package(bytes, len, pk, NULL, &a) == TSAFE_OK) {
        fz_adapter_use(a);
        tsafe_lora_adapter_free(a);
    }
}

static void fz_pkg_use(const tsafe_package *p)
{
    tsafe_package_manifest m;
    FZ_CHECK(tsafe_package_manifest_get(p, &m) == TSAFE_OK);
    FZ_CHECK(m.adapter_id && m.domain && m.creator && m.rank >= 1);
    FZ_CHECK(isfinite(m.alpha) && m.alpha > 0 && isfinite(m.price_per_1k_tokens) &&
             m.price_per_1k_tokens >= 0);
    FZ_CHECK(m.n_targets == 0 || m.targets != NULL);
    for (size_t i = 0; i < m.n_targets; i++)
        FZ_CHECK(m.targets[i] && m.targets[i][0]);
    FZ_CHECK(m.use_rslora == 0 || m.use_rslora == 1);
    for (size_t i = 0; i < m.n_rank_pattern; i++)
        FZ_CHECK(m.rank_pattern[i].key[0] && m.rank_pattern[i].value >= 1 &&
                 m.rank_pattern[i].value <= 16777216.0);
    for (size_t i = 0; i < m.n_alpha_pattern; i++)
        FZ_CHECK(m.alpha_pattern[i].key[0] && isfinite(m.alpha_pattern[i].value) &&
                 m.alpha_pattern[i].value > 0);
    const uint8_t *payload = NULL;
    size_t plen = 0;
    FZ_CHECK(tsafe_package_payload(p, &payload, &plen) == TSAFE_OK);
    FZ_CHECK(plen == 0 || payload != NULL);
    uint8_t d1[32], d2[32];
    FZ_CHECK(tsafe_package_payload_digest(p, d1) == TSAFE_OK);
    crypto_generichash(d2, 32, payload, plen, NULL, 0);
    FZ_CHECK(memcmp(d1, d2, 32) == 0);
    FZ_CHECK(tsafe_package_manifest_json(p) != NULL);
    /* the payload is an adapter's safetensors bytes: parse it too */
    tsafe_safetensors *st = NULL;
    if (tsafe_safetensors_parse_borrowed(payload, plen, &st) == TSAFE_OK)
        tsafe_safetensors_free(st);
}

/* Payload length the manifest of a (re-signed) package declares, or
 * UINT64_MAX when it cannot be read. The reader allocates this much before
 * inflating, so the target skips re-signing inputs that ask for more than
 * libFuzzer's default malloc limit (a trusted signer may ask for 4 GiB). */
static uint64_t fz_pkg_declared_payload(const uint8_t *data, size_t size)
{
    if (size < 24 + 96)
        return UINT64_MAX;
    uint32_t mlen = (uint32_t)data[12] | (uint32_t)data[13] << 8 |
                    (uint32_t)data[14] << 16 | (uint32_t)data[15] << 24;
    if (mlen > size - 24 - 96)
        return UINT64_MAX;
    json_t *o = json_loadb((const char *)data + 24, mlen, 0, NULL);
    uint64_t v = UINT64_MAX;
    json_t *pl = o ? json_object_get(o, "payload_length") : NULL;
    if (pl && json_is_integer(pl) && json_integer_value(pl) >= 0)
        v = (uint64_t)json_integer_value(pl);
    json_decref(o);
    return v;
}

int tsafe_fuzz_package(const uint8_t *data, size_t size)
{
    const fz_pkg_fixture *f = fz_pkg();
    tsafe_package *p = NULL;
    int accepted = tsafe_package_open(data, size, f->pk, &p) == TSAFE_OK;
    if (accepted) {
        fz_pkg_load_adapter(data, size, f->pk);
        fz_pkg_use(p);
        tsafe_package_free(p);
        p = NULL;
    }
    /* A mutated package never passes the signature check; to reach the
     * framing, manifest and inflate code, sign the mutated bytes again with
     * the trusted key (digest over everything before the 96-byte trailer). */
    if (size >= 24 + 96 && size <= ((size_t)1 << 22) && !accepted &&
        fz_pkg_declared_payload(data, size) <= ((uint64_t)1 << 24)) {
        uint8_t *copy = malloc(size);
        FZ_CHECK(copy != NULL);
        memcpy(copy, data, size);
        size_t body = size - 96;
        uint8_t msg[30 + 32];
        crypto_generichash(copy + body, 32, copy, body, NULL, 0);
        memcpy(msg, "TenSafe-HE adapter package v1", 30); /* with its NUL */
        memcpy(msg + 30, copy + body, 32);
        FZ_CHECK(crypto_sign_detached(copy + body + 32, NULL, msg, sizeof msg, f->sk) == 0);
        if (tsafe_package_open(copy, size, f->pk, &p) == TSAFE_OK) {
            fz_pkg_load_adapter(copy, size, f->pk);
            fz_pkg_use(p);
            tsafe_package_free(p);
        }
        free(copy);
    }
    return accepted;
}

/* ------------------------------------------------------------------- DP */

/* Input: up to 8 doubles, a selector byte, a release count, then floats
 * for a vector (missing bytes read as zero). */
int tsafe_fuzz_dp(const uint8_t *data, size_t size)
{
    uint8_t raw[8 * 8 + 1 + 8];
    memset(raw, 0, sizeof raw);
    memcpy(raw, data, size < sizeof raw ? size : sizeof raw);
    double v[8];
    memcpy(v, raw, sizeof v);
    uint8_t sel = raw[64];
    uint64_t releases;
    memcpy(&releases, raw + 65, 8);
    tsafe_dp_accountant acc = (sel & 1) ? TSAFE_DP_ACCOUNTANT_GDP : TSAFE_DP_ACCOUNTANT_RDP;
    float vec[64];
    size_t n = 0;
    for (size_t off = sizeof raw; off + 4 <= size && n < 64; off += 4)
        memcpy(&vec[n++], data + off, 4);

    double out = 0;
    uint64_t count = 0;
    if (tsafe_dp_sigma_analytic(v[0], v[1], v[2], &out) == TSAFE_OK)
        FZ_CHECK(isfinite(out) && out > 0);
    if (tsafe_dp_gaussian_delta(v[0], v[3], &out) == TSAFE_OK)
        FZ_CHECK(!isnan(out));
    if (tsafe_dp_epsilon_spent(acc, v[2], v[3], releases, v[1], &out) == TSAFE_OK)
        FZ_CHECK(!isnan(out));
    FZ_IGNORE(tsafe_dp_max_releases(acc, v[2], v[3], v[4], v[5], &count));
    double noise[8];
    FZ_IGNORE(tsafe_dp_gaussian_fill(noise, 8, v[3]));
    float tmp[64];
    memcpy(tmp, vec, n * sizeof *vec);
    double norm = 0;
    if (n && tsafe_dp_clip_l2(tmp, n, v[6], &norm) == TSAFE_OK) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += (double)tmp[i] * tmp[i];
        FZ_CHECK(sqrt(s) <= v[6] * (1 + 1e-6) || !(v[6] > 0));
    }
    memcpy(tmp, vec, n * sizeof *vec);
    FZ_IGNORE(tsafe_dp_add_gaussian_noise(tmp, n, v[3]));

    tsafe_dp_params p;
    memset(&p, 0, sizeof p);
    p.clip_norm = v[6];
    p.sensitivity = (sel & 2) ? v[2] : 0.0;
    p.sigma = (sel & 4) ? v[3] : 0.0;
    p.eps = v[0];
    p.delta = v[1];
    p.eps_total = v[4];
    p.delta_total = v[5];
    p.accountant = acc;
    tsafe_dp_session *s = NULL;
    if (tsafe_dp_session_create(&p, &s) != TSAFE_OK)
        return 0;
    tsafe_dp_stats st0, st1;
    FZ_CHECK(tsafe_dp_session_stats(s, &st0) == TSAFE_OK);
    FZ_CHECK(st0.releases == 0 && st0.releases_left >= 1 && isfinite(st0.sigma));
    memcpy(tmp, vec, n * sizeof *vec);
    tsafe_status rs = tsafe_dp_session_release(s, tmp, n);
    FZ_CHECK(tsafe_dp_session_stats(s, &st1) == TSAFE_OK);
    FZ_CHECK(st1.releases == st0.releases + (rs == TSAFE_OK));
    tsafe_dp_session_free(s);
    return 1;
}

/* ---------------------------------------------------------- safetensors */

/* Reads every tensor and metadata entry of a parsed file. */
static void fz_st_walk(const tsafe_safetensors *st)
{
    size_t count = tsafe_safetensors_tensor_count(st);
    tsafe_tensor_info info;
    for (size_t i = 0; i < count; i++) {
        FZ_CHECK(tsafe_safetensors_tensor_at(st, i, &info) == TSAFE_OK);
        FZ_CHECK(info.name != NULL && (info.ndim == 0 || info.shape != NULL));
        FZ_CHECK(info.nbytes == info.numel * tsafe_dtype_size(info.dtype));
        tsafe_tensor_info again;
        FZ_CHECK(tsafe_safetensors_find(st, info.name, &again) == TSAFE_OK);
        FZ_CHECK(again.numel == info.numel && again.dtype == info.dtype);
        const void *bytes = NULL;
        size_t nbytes = 0;
        FZ_CHECK(tsafe_safetensors_tensor_data(st, info.name, &bytes, &nbytes) == TSAFE_OK);
        FZ_CHECK(nbytes == info.nbytes && (nbytes == 0 || bytes != NULL));
        int is_float = info.dtype == TSAFE_DTYPE_F32 || info.dtype == TSAFE_DTYPE_F16 ||
                       info.dtype == TSAFE_DTYPE_BF16 || info.dtype == TSAFE_DTYPE_F64;
        if (info.numel <= ((size_t)1 << 16)) {
            float *buf = malloc((info.numel ? info.numel : 1) * sizeof *buf);
            FZ_CHECK(buf != NULL);
            tsafe_status s1 = tsafe_safetensors_read_f32(st, info.name, buf, info.numel);
            FZ_CHECK(is_float ? s1 == TSAFE_OK : s1 != TSAFE_OK);
            size_t half = info.numel / 2;
            tsafe_status s2 = tsafe_safetensors_read_f32_range(st, info.name, half,
                                                               info.numel - half, buf);
            FZ_CHECK(is_float ? s2 == TSAFE_OK : s2 != TSAFE_OK);
            FZ_CHECK(tsafe_safetensors_read_f32_range(st, info.name, half, info.numel + 1,
                                                      buf) != TSAFE_OK);
            free(buf);
        }
    }
    FZ_CHECK(tsafe_safetensors_tensor_at(st, count, &info) != TSAFE_OK);
    size_t nm = tsafe_safetensors_metadata_count(st);
    for (size_t i = 0; i < nm; i++) {
        const char *k = NULL, *v = NULL;
        FZ_CHECK(tsafe_safetensors_metadata_at(st, i, &k, &v) == TSAFE_OK);
        FZ_CHECK(k && v);
        const char *w = tsafe_safetensors_metadata(st, k);
        FZ_CHECK(w && strcmp(w, v) == 0);
    }
}

/* A copy written back by the writer parses again with the same tensors. */
static void fz_st_rewrite(const tsafe_safetensors *st)
{
    tsafe_safetensors_writer *w = NULL;
    if (tsafe_safetensors_writer_create(&w) != TSAFE_OK)
        return;
    size_t count = tsafe_safetensors_tensor_count(st);
    int ok = 1;
    for (size_t i = 0; i < count && ok; i++) {
        tsafe_tensor_info info;
        const void *bytes = NULL;
        size_t nbytes = 0;
        FZ_CHECK(tsafe_safetensors_tensor_at(st, i, &info) == TSAFE_OK);
        FZ_CHECK(tsafe_safetensors_tensor_data(st, info.name, &bytes, &nbytes) == TSAFE_OK);
        ok = tsafe_safetensors_writer_add(w, info.name, info.dtype, info.shape, info.ndim,
                                          bytes, nbytes) == TSAFE_OK;
    }
    size_t nm = tsafe_safetensors_metadata_count(st);
    for (size_t i = 0; i < nm && ok; i++) {
        const char *k = NULL, *v = NULL;
        FZ_CHECK(tsafe_safetensors_metadata_at(st, i, &k, &v) == TSAFE_OK);
        ok = tsafe_safetensors_writer_set_metadata(w, k, v) == TSAFE_OK;
    }
    uint8_t *out = NULL;
    size_t len = 0;
    if (ok && tsafe_safetensors_writer_serialize(w, &out, &len) == TSAFE_OK) {
        tsafe_safetensors *st2 = NULL;
        FZ_CHECK(tsafe_safetensors_parse(out, len, &st2) == TSAFE_OK);
        FZ_CHECK(tsafe_safetensors_tensor_count(st2) == count);
        FZ_CHECK(tsafe_safetensors_metadata_count(st2) == nm);
        tsafe_safetensors_free(st2);
        tsafe_safetensors_bytes_free(out);
    }
    tsafe_safetensors_writer_free(w);
}

/* The fixed adapter_config.json the safetensors target loads its input
 * with, and the fixed weights the adapter_config target loads its input
 * with (one attention module and one fused-expert pair, r = 2, E = 2). */
static const char k_fz_adapter_config[] =
    "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4,"
    "\"target_modules\":[\"q_proj\",\"v_proj\",\"down_proj\"],"
    "\"target_parameters\":[\"mlp.experts.gate_up_proj\",\"mlp.experts.down_proj\"]}";

typedef struct {
    int ready;
    uint8_t *st;
    size_t st_len;
} fz_adapter_fixture;

static fz_adapter_fixture g_fz_adapter;

static const fz_adapter_fixture *fz_adapter(void)
{
    fz_adapter_fixture *f = &g_fz_adapter;
    if (f->ready)
        return f;
    static const char *const names[4] = {
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
        "base_model.model.model.layers.1.mlp.experts.lora_A.weight",
        "base_model.model.model.layers.1.mlp.experts.lora_B.weight",
    };
    static const uint64_t shapes[4][2] = {{2, 8}, {8, 2}, {4, 8}, {6, 4}};
    float vals[64];
    for (int i = 0; i < 64; i++)
        vals[i] = (float)(0.01 * (i % 13) - 0.05);
    tsafe_safetensors_writer *w = NULL;
    FZ_CHECK(tsafe_safetensors_writer_create(&w) == TSAFE_OK);
    for (int t = 0; t < 4; t++)
        FZ_CHECK(tsafe_safetensors_writer_add_f32(w, names[t], TSAFE_DTYPE_F32, shapes[t], 2,
                                                  vals) == TSAFE_OK);
    FZ_CHECK(tsafe_safetensors_writer_set_metadata(w, "format", "pt") == TSAFE_OK);
    FZ_CHECK(tsafe_safetensors_writer_serialize(w, &f->st, &f->st_len) == TSAFE_OK);
    tsafe_safetensors_writer_free(w);
    f->ready = 1;
    return f;
}

static void fz_adapter_free(void)
{
    tsafe_safetensors_bytes_free(g_fz_adapter.st);
    memset(&g_fz_adapter, 0, sizeof g_fz_adapter);
}

/* Reads every module of a loaded adapter; saves it and loads it back. */
static void fz_adapter_use(const tsafe_lora_adapter *a)
{
    tsafe_lora_config cfg;
    FZ_CHECK(tsafe_lora_adapter_config(a, &cfg) == TSAFE_OK);
    FZ_CHECK(cfg.r >= 1 && isfinite(cfg.lora_alpha));
    size_t nt = tsafe_lora_adapter_target_count(a);
    for (size_t i = 0; i < nt; i++)
        FZ_CHECK(tsafe_lora_adapter_target(a, i) != NULL);
    size_t nm = tsafe_lora_adapter_module_count(a);
    for (size_t i = 0; i < nm; i++) {
        tsafe_lora_module_info m;
        size_t idx = 0;
        FZ_CHECK(tsafe_lora_adapter_module(a, i, &m) == TSAFE_OK);
        FZ_CHECK(m.name && m.proj && m.rank >= 1 && m.in_dim >= 1 && m.out_dim >= 1);
        FZ_CHECK(m.A && m.B && isfinite(m.scale));
        FZ_CHECK(tsafe_lora_adapter_find(a, m.name, &idx) == TSAFE_OK && idx == i);
        if (m.in_dim * m.out_dim <= 4096) {
            double *dw = malloc(m.in_dim * m.out_dim * sizeof *dw);
            FZ_CHECK(dw != NULL);
            FZ_IGNORE(tsafe_lora_module_delta_w(&m, dw));
            free(dw);
        }
    }
    tsafe_lora_module_info none;
    FZ_CHECK(tsafe_lora_adapter_module(a, nm, &none) != TSAFE_OK);
    char *cj = NULL;
    uint8_t *sb = NULL;
    size_t sl = 0;
    if (tsafe_lora_adapter_save_peft_memory(a, TSAFE_DTYPE_F32, &cj, &sb, &sl) == TSAFE_OK) {
        tsafe_lora_adapter *b = NULL;
        FZ_CHECK(tsafe_lora_adapter_load_peft_memory(cj, strlen(cj), sb, sl, NULL, &b) ==
                 TSAFE_OK);
        FZ_CHECK(tsafe_lora_adapter_module_count(b) == nm);
        tsafe_lora_adapter_free(b);
        tsafe_safetensors_bytes_free(cj);
        tsafe_safetensors_bytes_free(sb);
    }
}

int tsafe_fuzz_safetensors(const uint8_t *data, size_t size)
{
    tsafe_safetensors *st = NULL, *sb = NULL;
    tsafe_status s1 = tsafe_safetensors_parse(data, size, &st);
    tsafe_status s2 = tsafe_safetensors_parse_borrowed(data, size, &sb);
    FZ_CHECK(s1 == s2);
    tsafe_safetensors_free(sb);
    /* the same bytes as PEFT weights under a fixed adapter_config.json,
     * with the error detail (tensor names and numbers from the header) */
    tsafe_lora_adapter *a = NULL;
    tsafe_error_info ei;
    tsafe_lora_load_options opt;
    memset(&opt, 0, sizeof opt);
    opt.error = &ei;
    tsafe_status sa = tsafe_lora_adapter_load_peft_memory(
        k_fz_adapter_config, strlen(k_fz_adapter_config), data, size, &opt, &a);
    FZ_CHECK(ei.status == sa && strnlen(ei.detail, sizeof ei.detail) < sizeof ei.detail);
    if (sa == TSAFE_OK) {
        fz_adapter_use(a);
        tsafe_lora_adapter_free(a);
    }
    if (s1 != TSAFE_OK)
        return 0;
    fz_st_walk(st);
    fz_st_rewrite(st);
    tsafe_safetensors_free(st);
    return 1;
}

int tsafe_fuzz_adapter_config(const uint8_t *data, size_t size)
{
    const fz_adapter_fixture *f = fz_adapter();
    int accepted = 0;
    for (int layout = 0; layout < 2; layout++) {
        tsafe_lora_load_options opt;
        tsafe_error_info ei; /* layout 1 also exercises the error detail */
        memset(&opt, 0, sizeof opt);
        opt.fused_layout = layout ? TSAFE_LORA_FUSED_OUT_IN : TSAFE_LORA_FUSED_IN_OUT;
        opt.error = layout ? &ei : NULL;
        tsafe_lora_adapter *a = NULL;
        tsafe_status st = tsafe_lora_adapter_load_peft_memory((const char *)data, size, f->st,
                                                              f->st_len, &opt, &a);
        if (layout) /* the detail matches the status and is terminated */
            FZ_CHECK(ei.status == st && strnlen(ei.detail, sizeof ei.detail) < sizeof ei.detail);
        if (st == TSAFE_OK) {
            accepted |= layout == 0;
            fz_adapter_use(a);
            tsafe_lora_adapter_free(a);
        }
    }
    return accepted;
}

/* ------------------------------------------------------------------ MoE */

int tsafe_fuzz_moe_config(const uint8_t *data, size_t size)
{
    tsafe_moe_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (tsafe_moe_config_parse_json((const char *)data, size, &cfg) != TSAFE_OK)
        return 0;
    FZ_CHECK(tsafe_moe_config_validate(&cfg) == TSAFE_OK);
    FZ_CHECK(memchr(cfg.name, '\0', sizeof cfg.name) != NULL);
    for (uint32_t l = 0; l < 4; l++)
        (void)tsafe_moe_config_is_full_attention(&cfg, l);
    /* tiny shapes: build a layer and run one token through it */
    uint32_t inter = cfg.n_experts ? cfg.expert_intermediate : cfg.intermediate_size;
    if (cfg.hidden_size <= 64 && inter <= 64 && cfg.n_experts <= 16 &&
        cfg.shared_expert_intermediate <= 64) {
        tsafe_moe_layer *layer = NULL;
        if (tsafe_moe_layer_create_random(&cfg, 7, 0, &layer) == TSAFE_OK) {
            float h[64], out[64];
            tsafe_moe_route route;
            for (uint32_t i = 0; i < cfg.hidden_size; i++)
                h[i] = (float)(0.1 * (double)((int)(i % 7) - 3));
            if (tsafe_moe_layer_forward(layer, h, 1, out, &route) == TSAFE_OK) {
                FZ_CHECK(route.k == cfg.top_k);
                for (uint32_t i = 0; i < route.k; i++)
                    FZ_CHECK(route.expert[i] < cfg.n_experts);
            }
            tsafe_moe_layer_free(layer);
        }
    }
    return 1;
}

/* Exercises a gate on the text: classify, score, a stepped session. */
static void fz_gate_run(const tsafe_stepgate *g, const char *text, size_t len)
{
    size_t nd = tsafe_stepgate_domain_count(g);
    int32_t dom = 0;
    if (tsafe_stepgate_classify(g, text, len, &dom) == TSAFE_OK)
        FZ_CHECK(dom == TSAFE_STEPGATE_FALLBACK || (dom >= 0 && (size_t)dom < nd));
    uint32_t scores[256];
    if (nd <= 256)
        FZ_IGNORE(tsafe_stepgate_score(g, text, len, scores, nd));
    tsafe_stepgate_session *s = NULL;
    if (tsafe_stepgate_session_create(g, &s) != TSAFE_OK)
        return;
    size_t first = len / 3;
    if (tsafe_stepgate_session_begin(s, text, first, &dom) == TSAFE_OK) {
        size_t pos = first;
        for (int steps = 0; pos < len && steps < 64; steps++) {
            size_t chunk = len - pos < 5 ? len - pos : 5;
            int switched = 0;
            if (tsafe_stepgate_session_step(s, text + pos, chunk, &dom, &switched) != TSAFE_OK)
                break;
            FZ_CHECK(dom == TSAFE_STEPGATE_FALLBACK || (dom >= 0 && (size_t)dom < nd));
            pos += chunk;
        }
        (void)tsafe_stepgate_session_domain(s);
    }
    tsafe_stepgate_session_free(s);
}

static tsafe_stepgate *g_fz_default_gate;

int tsafe_fuzz_stepgate(const uint8_t *data, size_t size)
{
    static const char text[] =
        "Is a Mortgage refinance worth it? My bank's interest  rate is 7%; "
        "I'd rather invest in an ETF portfolio (stocks, bonds) and dividends.";
    /* the input as a JSON keyword configuration */
    tsafe_stepgate *g = NULL;
    int accepted = tsafe_stepgate_create_json((const char *)data, size, &g) == TSAFE_OK;
    if (accepted) {
        size_t nd = tsafe_stepgate_domain_count(g);
        FZ_CHECK(nd >= 1);
        for (int32_t i = -1; i <= (int32_t)nd && i < 300; i++) {
            const char *name = tsafe_stepgate_domain_name(g, i);
            const char *ad = tsafe_stepgate_domain_adapter(g, i);
            FZ_CHECK((name != NULL) == (i < (int32_t)nd));
            FZ_CHECK((ad != NULL) == (i < (int32_t)nd));
        }
        (void)tsafe_stepgate_decide_every(g);
        (void)tsafe_stepgate_hysteresis(g);
        fz_gate_run(g, text, sizeof text - 1);
        fz_gate_run(g, (const char *)data, size);
        tsafe_stepgate_free(g);
    }
    /* the input as request text for the default gate */
    if (!g_fz_default_gate)
        FZ_CHECK(tsafe_stepgate_create_default(&g_fz_default_gate) == TSAFE_OK);
    fz_gate_run(g_fz_default_gate, (const char *)data, size);
    return accepted;
}

/* ------------------------------------------------------------------ BFV */

/* N = 2048 with a 30-bit q0 and a 31-bit q1, t = 2^16: below the smallest
 * secure size (N = 2048 holds 54 bits of modulus), hence the test flag,
 * which only this fixture uses. Half the cost of the smallest secure
 * context; the sealed targets below run the real (secure) parameters. */
#define FZ_BFV_READS 64u

typedef struct {
    int ready;
    tsafe_bfv_context *ctx;
    tsafe_bfv_secret_key *sk;
    tsafe_bfv_public_key *pk;
    tsafe_bfv_ct *ct;        /* an encryption under sk (seeded) */
    tsafe_bfv_ct *in;        /* what tsafe_bfv_ct_read fills */
    tsafe_bfv_plain *pt;
    tsafe_bfv_acc *acc;
    tsafe_bfv_sealed *res;   /* room for FZ_BFV_READS reads */
    uint32_t pos[FZ_BFV_READS]; /* distinct read positions */
} fz_bfv_fixture;

static fz_bfv_fixture g_fz_bfv;

static void fz_bfv_params(tsafe_bfv_params *p)
{
    memset(p, 0, sizeof *p);
    p->log_n = 11;
    p->resp_bits = 30;
    p->gap_bits = 31;
    p->t_bits = 16;
    p->flags = TSAFE_BFV_INSECURE_FOR_TESTS;
}

static const fz_bfv_fixture *fz_bfv(void)
{
    fz_bfv_fixture *f = &g_fz_bfv;
    if (f->ready)
        return f;
    tsafe_bfv_params p;
    fz_bfv_params(&p);
    uint8_t s1[32], s2[32], s3[32];
    fz_fill32(s1, 0x81);
    fz_fill32(s2, 0x82);
    fz_fill32(s3, 0x83);
    int64_t m[64], w[256];
    for (int i = 0; i < 64; i++)
        m[i] = (i * 37) % 201 - 100;
    for (int i = 0; i < 256; i++)
        w[i] = (i * 11) % 61 - 30;
    FZ_CHECK(tsafe_bfv_context_create(&p, &f->ctx) == TSAFE_OK);
    size_t n = tsafe_bfv_context_n(f->ctx);
    FZ_CHECK(tsafe_bfv_secret_key_generate(f->ctx, s1, &f->sk) == TSAFE_OK);
    FZ_CHECK(tsafe_bfv_public_key_generate(f->ctx, f->sk, s2, &f->pk) == TSAFE_OK);
    FZ_CHECK(tsafe_bfv_ct_create(f->ctx, &f->ct) == TSAFE_OK);
    FZ_CHECK(tsafe_bfv_encrypt(f->ctx, f->sk, m, 64, s3, f->ct) == TSAFE_OK);
    FZ_CHECK(tsafe_bfv_ct_create(f->ctx, &f->in) == TSAFE_OK);
    FZ_CHECK(tsafe_bfv_plain_create(f->ctx, w, 256, &f->pt) == TSAFE_OK);
    FZ_CHECK(tsafe_bfv_acc_create(f->ctx, &f->acc) == TSAFE_OK);
    FZ_CHECK(tsafe_bfv_sealed_create(f->ctx, FZ_BFV_READS, &f->res) == TSAFE_OK);
    for (uint32_t k = 0; k < FZ_BFV_READS; k++) /* 37 is odd: distinct mod 2^11 */
        f->pos[k] = (uint32_t)((k * 37u + 63u) % n);
    f->ready = 1;
    return f;
}

static void fz_bfv_free(void)
{
    fz_bfv_fixture *f = &g_fz_bfv;
    tsafe_bfv_sealed_free(f->res);
    tsafe_bfv_acc_free(f->acc);
    tsafe_bfv_plain_free(f->pt);
    tsafe_bfv_ct_free(f->in);
    tsafe_bfv_ct_free(f->ct);
    tsafe_bfv_public_key_free(f->pk);
    tsafe_bfv_secret_key_free(f->sk);
    tsafe_bfv_context_free(f->ctx);
    memset(f, 0, sizeof *f);
}

/* acc = ct * pt, sealed under pk at the first n fixture positions, then
 * decrypted with the fixture key: every decrypted value lies in [0, t). */
static void fz_bfv_product(const fz_bfv_fixture *f, const tsafe_bfv_ct *ct,
                           const tsafe_bfv_public_key *pk, size_t n)
{
    uint8_t seed[32];
    uint64_t m[FZ_BFV_READS];
    fz_fill32(seed, 0x84);
    tsafe_bfv_acc_zero(f->acc);
    if (tsafe_bfv_acc_mul_add(f->acc, ct, f->pt) != TSAFE_OK)
        return;
    if (tsafe_bfv_seal(f->ctx, f->acc, pk, f->pos, NULL, n, 20, seed, f->res) != TSAFE_OK)
        return;
    FZ_CHECK(tsafe_bfv_decrypt_reads(f->ctx, f->sk, f->res, f->pos, n, m) == TSAFE_OK);
    for (size_t k = 0; k < n; k++)
        FZ_CHECK(m[k] < ((uint64_t)1 << 16));
}

/* The writers give back exactly the bytes the reader accepted. */
#define FZ_BFV_REWRITE(call, data, size)                     \
    do {                                                     \
        uint8_t *buf_ = malloc(size);                        \
        FZ_CHECK(buf_ != NULL);                              \
        FZ_CHECK((call) == TSAFE_OK);                        \
        FZ_CHECK(memcmp(buf_, data, size) == 0);             \
        free(buf_);                                          \
    } while (0)

/* Input: a selector byte (0 public key, 1 ciphertext, 2 sealed result,
 * modulo 3), a read count (sealed results; above FZ_BFV_READS is refused),
 * then the encoding. */
int tsafe_fuzz_bfv(const uint8_t *data, size_t size)
{
    const fz_bfv_fixture *f = fz_bfv();
    if (size < 2)
        return 0;
    uint8_t sel = data[0] % 3;
    size_t n_reads = data[1];
    data += 2;
    size -= 2;
    if (sel == 0) {
        tsafe_bfv_public_key *pk = NULL;
        if (tsafe_bfv_public_key_read(f->ctx, data, size, &pk) != TSAFE_OK) {
            FZ_CHECK(pk == NULL);
            return 0;
        }
        FZ_CHECK(pk != NULL && size == tsafe_bfv_public_key_bytes(f->ctx));
        FZ_BFV_REWRITE(tsafe_bfv_public_key_write(f->ctx, pk, buf_, size), data, size);
        fz_bfv_product(f, f->ct, pk, 8);
        tsafe_bfv_public_key_free(pk);
        return 1;
    }
    if (sel == 1) {
        if (tsafe_bfv_ct_read(f->ctx, data, size, f->in) != TSAFE_OK)
            return 0;
        FZ_CHECK(size == tsafe_bfv_ct_bytes(f->ctx));
        FZ_BFV_REWRITE(tsafe_bfv_ct_write(f->ctx, f->in, buf_, size), data, size);
        fz_bfv_product(f, f->in, f->pk, FZ_BFV_READS);
        return 1;
    }
    if (tsafe_bfv_sealed_read(f->ctx, data, size, n_reads, f->res) != TSAFE_OK)
        return 0;
    FZ_CHECK(n_reads <= FZ_BFV_READS && size == tsafe_bfv_sealed_bytes(f->ctx, n_reads));
    FZ_BFV_REWRITE(tsafe_bfv_sealed_write(f->ctx, f->res, buf_, size), data, size);
    uint64_t m[FZ_BFV_READS];
    double noise[FZ_BFV_READS];
    FZ_CHECK(tsafe_bfv_decrypt_reads(f->ctx, f->sk, f->res, f->pos, n_reads, m) == TSAFE_OK);
    for (size_t k = 0; k < n_reads; k++)
        FZ_CHECK(m[k] < ((uint64_t)1 << 16));
    FZ_CHECK(tsafe_bfv_decrypt_noise(f->ctx, f->sk, f->res, f->pos, n_reads, noise) ==
             TSAFE_OK);
    for (size_t k = 0; k < n_reads; k++)
        FZ_CHECK(isfinite(noise[k]));
    return 1;
}

/* ------------------------------------------------------- sealed protocol */

/* One plan per mode (tsafe_sealed_plan_derive(mode, 64, 4, 64): N = 4096,
 * the real parameters), one site, and one reference token run at setup with
 * a client seeded from a fixed seed (its keys and session id follow from the
 * seed: a client re-created from it accepts the reference messages again).
 * Each message target owns the object that reads its message, held in the
 * state just before that message; a call that accepts the input moves the
 * object on, and the target puts it back (by the protocol itself, or by
 * re-creating it). A refused message leaves the state as it was. */
#define FZ_SEALED_D 64u
#define FZ_SEALED_R 4u
#define FZ_SEALED_OUT 64u
/* header (8), tag (session 16, epoch 4, seq 8), u32 n_sites */
#define FZ_SEALED_PREFIX 40u

typedef struct {
    uint8_t *b;
    size_t n;
} fz_msg;

typedef struct {
    int ready;
    tsafe_sealed_plan plan;
    tsafe_sealed_sizes sizes;
    tsafe_sealed_site *site;
    const tsafe_sealed_site *sites[1]; /* = {site} */
    uint8_t seed[32];
    float x[FZ_SEALED_D];
    /* the reference token; hello_other opens another session */
    fz_msg hello, hello_other, query, r1, share, final;
    tsafe_sealed_server *s_hello;  /* not on the reference session */
    tsafe_sealed_server *s_query;  /* session open, token 0 expected */
    tsafe_sealed_client *c_r1;     /* query sent */
    tsafe_sealed_server *s_share;  /* round 1 done */
    tsafe_sealed_client *c_final;  /* share sent */
} fz_sealed_fixture;

/* [0] sealed, [1] sealed-private with opts.unchecked_shares (the corpus'
 * mode byte 1; before 2026-11-28 the default), [2] sealed-private (its
 * default, checked shares; mode byte 3) */
static fz_sealed_fixture g_fz_sealed[3];

/* A client from the fixture's seed that has sent its hello. */
static tsafe_sealed_client *fz_sealed_client(const fz_sealed_fixture *f)
{
    tsafe_sealed_client *c = NULL;
    fz_msg h;
    FZ_CHECK(tsafe_sealed_client_create(&f->plan, f->seed, &c) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_client_hello(c, &h.b, &h.n) == TSAFE_OK);
    tsafe_lora_bytes_free(h.b);
    return c;
}

static void fz_sealed_query(const fz_sealed_fixture *f, tsafe_sealed_client *c)
{
    fz_msg q;
    FZ_CHECK(tsafe_sealed_client_query(c, f->x, &q.b, &q.n, NULL) == TSAFE_OK);
    tsafe_lora_bytes_free(q.b);
}

/* A fresh client that has answered the reference response 1. */
static void fz_sealed_reset_final(fz_sealed_fixture *f)
{
    uint32_t rank = FZ_SEALED_R, d_out = FZ_SEALED_OUT;
    fz_msg sh;
    tsafe_sealed_client_free(f->c_final);
    f->c_final = fz_sealed_client(f);
    fz_sealed_query(f, f->c_final);
    FZ_CHECK(tsafe_sealed_client_respond(f->c_final, f->r1.b, f->r1.n, 1, &rank, &d_out, NULL,
                                         1, &sh.b, &sh.n, NULL) == TSAFE_OK);
    tsafe_lora_bytes_free(sh.b);
}

/* The share server back on the reference session with round 1 done: leave
 * the session (another one's hello), re-open it (a hello of another
 * session resets the sequence) and answer the reference query. */
static void fz_sealed_reset_share(fz_sealed_fixture *f)
{
    fz_msg r;
    FZ_CHECK(tsafe_sealed_server_accept(f->s_share, f->hello_other.b, f->hello_other.n) ==
             TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_accept(f->s_share, f->hello.b, f->hello.n) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_round1(f->s_share, f->sites, 1, f->query.b,
                                        f->query.n, &r.b, &r.n, NULL) == TSAFE_OK);
    tsafe_lora_bytes_free(r.b);
}

static fz_sealed_fixture *fz_sealed(int priv)
{
    fz_sealed_fixture *f = &g_fz_sealed[priv];
    if (f->ready)
        return f;
    static float A[FZ_SEALED_R * FZ_SEALED_D], B[FZ_SEALED_OUT * FZ_SEALED_R];
    for (size_t i = 0; i < FZ_SEALED_R * FZ_SEALED_D; i++)
        A[i] = (float)(0.05 * sin(0.9 * (double)i));
    for (size_t i = 0; i < FZ_SEALED_OUT * FZ_SEALED_R; i++)
        B[i] = (float)(0.03 * cos(0.4 * (double)i));
    for (uint32_t i = 0; i < FZ_SEALED_D; i++)
        f->x[i] = (float)(1.7 * sin(1.1 * (double)i));
    tsafe_sealed_mode mode = priv ? TSAFE_SEALED_PRIVATE : TSAFE_SEALED;
    uint8_t other[32];
    fz_fill32(f->seed, (uint8_t)(0x91 + priv)); /* the session id is the seed's start */
    fz_fill32(other, priv == 2 ? 0x96 : 0x93);
    /* sealed's opt-in (private ignores it); fixture 2 checks its shares */
    const tsafe_sealed_opts opts = {.semi_honest = 1, .unchecked_shares = priv == 1};
    FZ_CHECK(tsafe_sealed_plan_derive(mode, FZ_SEALED_D, FZ_SEALED_R, FZ_SEALED_OUT, &opts,
                                      &f->plan) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_plan_sizes(&f->plan, FZ_SEALED_R, FZ_SEALED_OUT, &f->sizes) ==
             TSAFE_OK);
    FZ_CHECK(tsafe_sealed_site_create(&f->plan, A, B, FZ_SEALED_R, FZ_SEALED_OUT, 2.0f,
                                      &f->site) == TSAFE_OK);
    f->sites[0] = f->site;

    /* the reference token */
    tsafe_sealed_client *c = NULL, *o = NULL;
    tsafe_sealed_server *s = NULL;
    uint32_t rank = FZ_SEALED_R, d_out = FZ_SEALED_OUT;
    float delta[FZ_SEALED_OUT], *dp = delta;
    FZ_CHECK(tsafe_sealed_client_create(&f->plan, f->seed, &c) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_client_create(&f->plan, other, &o) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_create(&f->plan, &s) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_client_hello(c, &f->hello.b, &f->hello.n) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_client_hello(o, &f->hello_other.b, &f->hello_other.n) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_accept(s, f->hello.b, f->hello.n) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_client_query(c, f->x, &f->query.b, &f->query.n, NULL) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_round1(s, f->sites, 1, f->query.b, f->query.n,
                                        &f->r1.b, &f->r1.n, NULL) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_client_respond(c, f->r1.b, f->r1.n, 1, &rank, &d_out, NULL, 1,
                                         &f->share.b, &f->share.n, NULL) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_round2(s, f->sites, 1, f->share.b, f->share.n,
                                        &f->final.b, &f->final.n, NULL) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_client_finish(c, f->final.b, f->final.n, 1, &d_out, &dp, NULL) ==
             TSAFE_OK);
    tsafe_sealed_server_free(s);
    tsafe_sealed_client_free(o);
    tsafe_sealed_client_free(c);

    /* each target's object, in the state before its message */
    FZ_CHECK(tsafe_sealed_server_create(&f->plan, &f->s_hello) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_create(&f->plan, &f->s_query) == TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_accept(f->s_query, f->hello.b, f->hello.n) == TSAFE_OK);
    f->c_r1 = fz_sealed_client(f);
    fz_sealed_query(f, f->c_r1);
    FZ_CHECK(tsafe_sealed_server_create(&f->plan, &f->s_share) == TSAFE_OK);
    fz_sealed_reset_share(f);
    fz_sealed_reset_final(f);
    f->ready = 1;
    return f;
}

static void fz_sealed_free(void)
{
    for (int i = 0; i < 3; i++) {
        fz_sealed_fixture *f = &g_fz_sealed[i];
        tsafe_sealed_client_free(f->c_final);
        tsafe_sealed_server_free(f->s_share);
        tsafe_sealed_client_free(f->c_r1);
        tsafe_sealed_server_free(f->s_query);
        tsafe_sealed_server_free(f->s_hello);
        fz_msg *msgs[6] = {&f->hello, &f->hello_other, &f->query, &f->r1, &f->share, &f->final};
        for (int k = 0; k < 6; k++)
            tsafe_lora_bytes_free(msgs[k]->b);
        tsafe_sealed_site_free(f->site);
        memset(f, 0, sizeof *f);
    }
}

/* The first input byte picks the plan (low bit: 0 sealed, 1 sealed-private
 * with unchecked shares; 3: sealed-private, checked); the rest is the message. NULL
 * for an empty input. */
static fz_sealed_fixture *fz_sealed_split(const uint8_t **data, size_t *size)
{
    if (*size == 0)
        return NULL;
    int priv = (*data)[0] & 1 ? ((*data)[0] & 2 ? 2 : 1) : 0;
    (*data)++;
    (*size)--;
    return fz_sealed(priv);
}

int tsafe_fuzz_sealed_hello(const uint8_t *data, size_t size)
{
    fz_sealed_fixture *f = fz_sealed_split(&data, &size);
    if (!f || tsafe_sealed_server_accept(f->s_hello, data, size) != TSAFE_OK)
        return 0;
    /* the accepted public key seals a response when the hello opened the
     * reference session (refused as a replay otherwise) */
    fz_msg r;
    if (tsafe_sealed_server_round1(f->s_hello, f->sites, 1, f->query.b, f->query.n,
                                   &r.b, &r.n, NULL) == TSAFE_OK) {
        FZ_CHECK(r.n == FZ_SEALED_PREFIX + (f->plan.mode == TSAFE_SEALED ? 16u : 8u) + f->sizes.response1);
        tsafe_lora_bytes_free(r.b);
    }
    /* leave the session the input opened (a replay of it would be refused):
     * another session's hello, or a new server when the input was that one */
    if (tsafe_sealed_server_accept(f->s_hello, f->hello_other.b, f->hello_other.n) !=
        TSAFE_OK) {
        tsafe_sealed_server_free(f->s_hello);
        f->s_hello = NULL;
        FZ_CHECK(tsafe_sealed_server_create(&f->plan, &f->s_hello) == TSAFE_OK);
    }
    return 1;
}

int tsafe_fuzz_sealed_query(const uint8_t *data, size_t size)
{
    fz_sealed_fixture *f = fz_sealed_split(&data, &size);
    fz_msg r;
    if (!f || tsafe_sealed_server_round1(f->s_query, f->sites, 1, data, size, &r.b,
                                         &r.n, NULL) != TSAFE_OK)
        return 0;
    FZ_CHECK(r.n == FZ_SEALED_PREFIX + (f->plan.mode == TSAFE_SEALED ? 16u : 8u) + f->sizes.response1);
    tsafe_lora_bytes_free(r.b);
    /* round 2 of this token is now pending (the same query again would be
     * a replay): back to "session open, token 0 expected" through another
     * session's hello, then the reference one */
    FZ_CHECK(tsafe_sealed_server_accept(f->s_query, f->hello_other.b, f->hello_other.n) ==
             TSAFE_OK);
    FZ_CHECK(tsafe_sealed_server_accept(f->s_query, f->hello.b, f->hello.n) == TSAFE_OK);
    return 1;
}

int tsafe_fuzz_sealed_response1(const uint8_t *data, size_t size)
{
    fz_sealed_fixture *f = fz_sealed_split(&data, &size);
    if (!f)
        return 0;
    int priv = f->plan.mode == TSAFE_SEALED_PRIVATE;
    uint32_t rank = FZ_SEALED_R, d_out = FZ_SEALED_OUT;
    fz_msg sh, q;
    if (tsafe_sealed_client_respond(f->c_r1, data, size, 1, &rank, &d_out, NULL, 1, &sh.b,
                                    &sh.n, NULL) != TSAFE_OK) {
        /* a refused response ends the client's session: a new one */
        FZ_CHECK(tsafe_sealed_client_failed(f->c_r1));
        tsafe_sealed_client_free(f->c_r1);
        f->c_r1 = fz_sealed_client(f);
        fz_sealed_query(f, f->c_r1);
        return 0;
    }
    FZ_CHECK(sh.n == FZ_SEALED_PREFIX + (priv ? 8u : 4u) + f->sizes.share);
    tsafe_lora_bytes_free(sh.b);
    /* back to "query sent": a new query for the same token, or a new client */
    if (tsafe_sealed_client_query(f->c_r1, f->x, &q.b, &q.n, NULL) == TSAFE_OK) {
        tsafe_lora_bytes_free(q.b);
    } else {
        tsafe_sealed_client_free(f->c_r1);
        f->c_r1 = fz_sealed_client(f);
        fz_sealed_query(f, f->c_r1);
    }
    return 1;
}

int tsafe_fuzz_sealed_share(const uint8_t *data, size_t size)
{
    fz_sealed_fixture *f = fz_sealed_split(&data, &size);
    if (!f)
        return 0;
    int priv = f->plan.mode == TSAFE_SEALED_PRIVATE;
    fz_msg r;
    if (tsafe_sealed_server_round2(f->s_share, f->sites, 1, data, size, &r.b, &r.n,
                                   NULL) != TSAFE_OK) {
        fz_sealed_reset_share(f); /* a refused share ends the server's session */
        return 0;
    }
    FZ_CHECK(r.n == FZ_SEALED_PREFIX + (priv ? 12u : 4u) + f->sizes.response2);
    tsafe_lora_bytes_free(r.b);
    fz_sealed_reset_share(f);
    return 1;
}

int tsafe_fuzz_sealed_final(const uint8_t *data, size_t size)
{
    fz_sealed_fixture *f = fz_sealed_split(&data, &size);
    if (!f)
        return 0;
    uint32_t d_out = FZ_SEALED_OUT;
    float delta[FZ_SEALED_OUT], *dp = delta;
    if (tsafe_sealed_client_finish(f->c_final, data, size, 1, &d_out, &dp, NULL) != TSAFE_OK) {
        fz_sealed_reset_final(f); /* a refused final message ends the session */
        return 0;
    }
    /* sealed: finite f32 values times the client's (small) x scale */
    if (f->plan.mode == TSAFE_SEALED)
        for (uint32_t j = 0; j < FZ_SEALED_OUT; j++)
            FZ_CHECK(isfinite(delta[j]));
    fz_sealed_reset_final(f);
    return 1;
}

/* ------------------------------------------------------------ sessions */

/* A sealed-private service of one small module (d_in 64, rank 4, d_out
 * 16, fixed weights), the server's HELLO frame, and a real client's first
 * frames (SHELLO + QUERY) for it (fresh keys: any server session of the
 * service accepts them). */
#define FZ_SESSION_D 64u
#define FZ_SESSION_R 4u
#define FZ_SESSION_O 16u
typedef struct {
    int ready;
    tsafe_session_service *svc;
    float A[FZ_SESSION_R * FZ_SESSION_D], B[FZ_SESSION_O * FZ_SESSION_R];
    fz_msg hello, client; /* whole frames */
} fz_session_fixture;

static fz_session_fixture g_fz_session;

static void fz_session_out(fz_msg *m, const uint8_t *d, size_t n)
{
    uint8_t *b = realloc(m->b, m->n + n);
    FZ_CHECK(b != NULL);
    memcpy(b + m->n, d, n);
    m->b = b;
    m->n += n;
}

static fz_session_fixture *fz_session(void)
{
    fz_session_fixture *f = &g_fz_session;
    if (f->ready)
        return f;
    for (size_t i = 0; i < FZ_SESSION_R * FZ_SESSION_D; i++)
        f->A[i] = (float)((int)(i * 37 % 101) - 50) / 1000.0f;
    for (size_t i = 0; i < FZ_SESSION_O * FZ_SESSION_R; i++)
        f->B[i] = (float)((int)(i * 53 % 89) - 44) / 1000.0f;
    tsafe_session_module m = {"q_proj", f->A, f->B, FZ_SESSION_D, FZ_SESSION_R, FZ_SESSION_O,
                              1.0f};
    tsafe_session_service_opts so = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    FZ_CHECK(tsafe_session_service_create(&so, &m, 1, &f->svc) == TSAFE_OK);
    tsafe_session_server *s;
    tsafe_session_client *c;
    tsafe_session_client_opts co = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    FZ_CHECK(tsafe_session_server_create(f->svc, NULL, &s) == TSAFE_OK);
    FZ_CHECK(tsafe_session_client_create(&co, NULL, &c) == TSAFE_OK);
    const uint8_t *d;
    size_t n, used;
    for (tsafe_session_server_output(s, &d, &n); n; tsafe_session_server_output(s, &d, &n)) {
        fz_session_out(&f->hello, d, n);
        tsafe_session_server_sent(s, n);
    }
    FZ_CHECK(tsafe_session_client_feed(c, f->hello.b, f->hello.n, &used) == TSAFE_OK);
    float x[FZ_SESSION_D], delta[FZ_SESSION_O], *dp = delta;
    for (size_t i = 0; i < FZ_SESSION_D; i++)
        x[i] = (float)i / 64.0f - 0.5f;
    FZ_CHECK(tsafe_session_client_submit(c, NULL, 0, x, &dp) == TSAFE_OK);
    for (tsafe_session_client_output(c, &d, &n); n; tsafe_session_client_output(c, &d, &n)) {
        fz_session_out(&f->client, d, n);
        tsafe_session_client_sent(c, n);
    }
    tsafe_session_client_free(c);
    tsafe_session_server_free(s);
    f->ready = 1;
    return f;
}

static void fz_session_free(void)
{
    fz_session_fixture *f = &g_fz_session;
    tsafe_session_service_free(f->svc);
    free(f->hello.b);
    free(f->client.b);
    memset(f, 0, sizeof *f);
}

/* Every queued byte "sent"; the session's failure has a status and text. */
static void fz_session_drain_server(tsafe_session_server *s)
{
    const uint8_t *d;
    size_t n;
    for (tsafe_session_server_output(s, &d, &n); n; tsafe_session_server_output(s, &d, &n))
        tsafe_session_server_sent(s, n);
    if (tsafe_session_server_wants(s) & TSAFE_SESSION_FAILED)
        FZ_CHECK(tsafe_session_server_status(s) != TSAFE_OK &&
                 tsafe_session_server_what(s)[0] != 0);
}

/* Byte 0: bit 0 picks the side (0: the bytes go to a fresh server
 * session, running every work step; 1: to a client session awaiting its
 * hello), bits 1-7 the piece size the bytes are fed in (0: all at once).
 * Accepted when the session took everything without failing (the client:
 * and read a hello). */
int tsafe_fuzz_session_feed(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    fz_session_fixture *f = fz_session();
    int client = data[0] & 1;
    size_t piece = data[0] >> 1 ? (size_t)(data[0] >> 1) : SIZE_MAX;
    data++;
    size--;
    tsafe_session_server *s = NULL;
    tsafe_session_client *c = NULL;
    tsafe_session_client_opts co = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    tsafe_session_limits lim = {.max_frame = 1u << 20};
    if (client)
        FZ_CHECK(tsafe_session_client_create(&co, &lim, &c) == TSAFE_OK);
    else
        FZ_CHECK(tsafe_session_server_create(f->svc, &lim, &s) == TSAFE_OK);
    size_t off = 0;
    while (off < size) {
        size_t k = size - off < piece ? size - off : piece, used = 0;
        tsafe_status st = client ? tsafe_session_client_feed(c, data + off, k, &used)
                                 : tsafe_session_server_feed(s, data + off, k, &used);
        FZ_CHECK(used <= k);
        off += used;
        if (st != TSAFE_OK)
            break;
        if (s && (tsafe_session_server_wants(s) & TSAFE_SESSION_WANT_WORK))
            FZ_IGNORE(tsafe_session_server_work(s));
        else if (!used)
            break; /* a client between tokens takes nothing */
        if (s)
            fz_session_drain_server(s);
    }
    int ok;
    if (s) {
        fz_session_drain_server(s);
        ok = off == size && !(tsafe_session_server_wants(s) & TSAFE_SESSION_FAILED);
    } else {
        unsigned w = tsafe_session_client_wants(c);
        if (w & TSAFE_SESSION_FAILED)
            FZ_CHECK(tsafe_session_client_status(c) != TSAFE_OK);
        ok = off == size && (w & TSAFE_SESSION_READY);
    }
    tsafe_session_server_free(s);
    tsafe_session_client_free(c);
    return ok;
}

/* ------------------------------------------------------------- cleanup */

void tsafe_fuzz_cleanup(void)
{
    fz_ckks_free();
    fz_lora_free();
    fz_adapter_free();
    fz_bfv_free();
    fz_sealed_free();
    fz_session_free();
    sodium_memzero(&g_fz_pkg, sizeof g_fz_pkg);
    tsafe_stepgate_free(g_fz_default_gate);
    g_fz_default_gate = NULL;
}
