/* Every exported function, given NULL pointers and out-of-range arguments,
 * returns an error status (or, for free(NULL) and getters, does nothing /
 * returns its documented default) instead of crashing.
 *
 * Table-driven per public header: each header has a table of
 * {function name, check}. test_header_coverage reads include/tensafe/ *.h,
 * extracts every TSAFE_API function and fails when one has no entry in its
 * header's table (so a new function without a case fails the suite);
 * scripts/check-api-coverage.sh does the same against the symbols the
 * shared libraries export. Run from the repository root (or set
 * TSAFE_INCLUDE_DIR). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "tensafe/backend.h"
#include "tensafe/backend_impl.h"
#include "tensafe/ckks.h"
#include "tensafe/ckks_buffer.h"
#include "tensafe/lora_adapter.h"
#include "tensafe/lora_dp.h"
#include "tensafe/lora_engine.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_package.h"
#include "tensafe/lora_registry.h"
#include "tensafe/lora_svd.h"
#include "tensafe/lora_two_party.h"
#include "tensafe/lora_sealed.h"
#include "tensafe/bfv.h"
#include "tensafe/bfv_backend.h"
#include "tensafe/moe.h"
#include "tensafe/moe_lora.h"
#include "tensafe/lora_session.h"
#include "tensafe/safetensors.h"
#include "tensafe/status.h"
#include "tensafe/version.h"
#if defined(TSAFE_WITH_CUDA)
#include "tensafe/cuda.h"
#endif

/* ------------------------------------------------------------ macros */

/* The call must return an error status (< 0). */
#define ERR(call)                                                               \
    do {                                                                        \
        tsafe_status s_ = (call);                                               \
        if (s_ >= 0)                                                            \
            fail_msg("%s:%d: %s returned %d, want an error", __FILE__, __LINE__, \
                     #call, (int)s_);                                           \
    } while (0)

/* The call must return exactly `code`. */
#define IS(code, call)                                                        \
    do {                                                                      \
        tsafe_status s_ = (call);                                             \
        if (s_ != (code))                                                     \
            fail_msg("%s:%d: %s returned %s, want %s", __FILE__, __LINE__,    \
                     #call, tsafe_status_name(s_), tsafe_status_name(code));  \
    } while (0)

#define OK(call) IS(TSAFE_OK, call)

/* ----------------------------------------------------------- fixture */

#define LD 64u /* LoRA d_in */
#define LR 4u  /* LoRA rank */

typedef struct {
    tsafe_params params;
    tsafe_context *ctx, *ctx2;       /* ctx2: other parameters */
    tsafe_secret_key *sk;
    tsafe_public_key *pk;
    tsafe_plaintext *pt, *pt0;       /* top level / level 0 */
    tsafe_ciphertext *ct, *ct0, *out; /* top level / level 0 / scratch */
    uint8_t *ct_bytes;
    size_t ct_len;
    tsafe_backend *be;
    tsafe_buffer *buf, *buf1;        /* 2 polys x 2 limbs / 1 limb */
    tsafe_lora_plan plan;
    tsafe_lora_client *client;
    tsafe_lora_server *server;
    tsafe_lora_site *site;
    tsafe_lora_local *local;
    float A[LR * LD], B[LD * LR], x[LD], u[LR], delta[LD];
    uint8_t *req, *resp, *umsg;
    size_t req_len, resp_len, umsg_len;
    tsafe_dp_session *dp;
    uint8_t pkg_pk[32], pkg_sk[64];
    uint8_t *pkg;
    size_t pkg_len;
    tsafe_package *package;
    tsafe_registry *reg;
    tsafe_registry_ref *ref;
    uint8_t *st_bytes;
    size_t st_len;
    tsafe_safetensors *st;
    tsafe_safetensors_writer *stw;
    tsafe_lora_adapter *adapter;
    tsafe_moe_config moecfg;
    tsafe_moe_layer *layer;
    tsafe_stepgate *gate;
    tsafe_stepgate_session *gs;
    int destroyed; /* registry destroy callback count */
} fixture;

static fixture F;

static void count_destroy(void *obj)
{
    (void)obj;
    F.destroyed++;
}

static int setup_fixture(void **state)
{
    fixture *f = &F;
    memset(f, 0, sizeof *f);
    uint8_t seed[32];
    memset(seed, 0x5A, sizeof seed);
    /* CKKS: N = 1024, two 30-bit primes, insecure (fast) */
    f->params.log_n = 10;
    f->params.n_primes = 2;
    f->params.prime_bits[0] = 30;
    f->params.prime_bits[1] = 30;
    f->params.scale = 0x1p20;
    f->params.flags = TSAFE_PARAMS_INSECURE_FOR_TESTS;
    tsafe_params p2 = f->params;
    p2.log_n = 11;
    double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (tsafe_context_create(&f->params, &f->ctx) || tsafe_context_create(&p2, &f->ctx2) ||
        tsafe_secret_key_generate(f->ctx, seed, &f->sk) ||
        tsafe_public_key_generate(f->ctx, f->sk, seed, &f->pk) ||
        tsafe_plaintext_create(f->ctx, &f->pt) ||
        tsafe_ckks_encode(f->ctx, v, 8, 0x1p20, 1, f->pt) ||
        tsafe_plaintext_create(f->ctx, &f->pt0) ||
        tsafe_ckks_encode(f->ctx, v, 8, 0x1p20, 0, f->pt0) ||
        tsafe_ciphertext_create(f->ctx, &f->ct) ||
        tsafe_ckks_encrypt_symmetric(f->ctx, f->sk, f->pt, seed, f->ct) ||
        tsafe_ciphertext_create(f->ctx, &f->ct0) ||
        tsafe_ckks_encrypt_public(f->ctx, f->pk, f->pt0, seed, f->ct0) ||
        tsafe_ciphertext_create(f->ctx, &f->out))
        return -1;
    if (tsafe_ciphertext_serialized_size(f->ctx, f->ct, &f->ct_len))
        return -1;
    f->ct_bytes = malloc(f->ct_len);
    size_t w = 0;
    if (!f->ct_bytes ||
        tsafe_ciphertext_serialize(f->ctx, f->ct, f->ct_bytes, f->ct_len, &w))
        return -1;
    if (tsafe_backend_cpu_create(f->ctx, &f->be) ||
        tsafe_buffer_alloc(f->be, 2, 2, &f->buf) || tsafe_buffer_alloc(f->be, 2, 1, &f->buf1))
        return -1;
    /* LoRA */
    for (size_t i = 0; i < LR * LD; i++) {
        f->A[i] = (float)(0.04 * sin((double)i));
        f->B[i] = (float)(0.04 * cos((double)i));
    }
    for (size_t i = 0; i < LD; i++)
        f->x[i] = (float)(0.5 * sin(0.3 * (double)i));
    const tsafe_lora_site *sites[1];
    float *us[1] = {f->u};
    uint32_t ranks[1] = {LR};
    if (tsafe_lora_plan_auto(LD, LR, 1.0, 0.05, 1e-4, &f->plan) ||
        tsafe_lora_client_create(&f->plan, seed, &f->client) ||
        tsafe_lora_server_create(&f->plan, &f->server) ||
        tsafe_lora_site_create(tsafe_lora_server_context(f->server), &f->plan, f->A, f->B, LD,
                               1.0f, &f->site) ||
        tsafe_lora_local_create(&f->plan, seed, &f->local))
        return -1;
    sites[0] = f->site;
    if (tsafe_lora_client_encrypt(f->client, f->x, &f->req, &f->req_len, NULL) ||
        tsafe_lora_server_process(f->server, sites, 1, f->req, f->req_len, &f->resp,
                                  &f->resp_len, NULL) ||
        tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, ranks, us, NULL) ||
        tsafe_lora_client_release(f->client, 1, ranks, us, NULL, &f->umsg, &f->umsg_len, NULL))
        return -1;
    /* DP */
    tsafe_dp_params dpp;
    memset(&dpp, 0, sizeof dpp);
    dpp.clip_norm = 1.0;
    dpp.eps = 1.0;
    dpp.delta = 1e-6;
    dpp.eps_total = 10.0;
    dpp.delta_total = 1e-5;
    if (tsafe_dp_session_create(&dpp, &f->dp))
        return -1;
    /* safetensors + adapter */
    uint64_t shape_a[2] = {2, 8}, shape_b[2] = {8, 2};
    float vals[16];
    for (int i = 0; i < 16; i++)
        vals[i] = 0.01f * (float)i;
    if (tsafe_safetensors_writer_create(&f->stw) ||
        tsafe_safetensors_writer_add_f32(f->stw, "a", TSAFE_DTYPE_F32, shape_a, 2, vals) ||
        tsafe_safetensors_writer_add(f->stw, "i", TSAFE_DTYPE_I32, shape_a, 1, vals, 8) ||
        tsafe_safetensors_writer_set_metadata(f->stw, "format", "pt") ||
        tsafe_safetensors_writer_serialize(f->stw, &f->st_bytes, &f->st_len) ||
        tsafe_safetensors_parse(f->st_bytes, f->st_len, &f->st))
        return -1;
    tsafe_lora_config lc = {2, 4.0, 0, 0};
    if (tsafe_lora_adapter_create(&lc, &f->adapter) ||
        tsafe_lora_adapter_add_module(f->adapter, "layers.0.self_attn.q_proj", 2, 8, 8, vals,
                                      vals, 4.0))
        return -1;
    (void)shape_b;
    /* package */
    static const char *const targets[1] = {"q_proj"};
    tsafe_package_manifest m = {.adapter_id = "id", .domain = "banking", .rank = 2,
        .alpha = 4.0, .targets = targets, .n_targets = 1,
        .price_per_1k_tokens = 0.5, .creator = "me"};
    if (tsafe_package_keypair(f->pkg_pk, f->pkg_sk) ||
        tsafe_package_create(&m, f->st_bytes, f->st_len, f->pkg_sk, &f->pkg, &f->pkg_len) ||
        tsafe_package_open(f->pkg, f->pkg_len, f->pkg_pk, &f->package))
        return -1;
    /* registry */
    static int object;
    tsafe_registry_meta meta = {"adapter-1", 0.5, NULL};
    if (tsafe_registry_create(&f->reg) || tsafe_registry_set_allow_unsigned(f->reg, 1) ||
        tsafe_registry_put(f->reg, "slot", &object, count_destroy, &meta) ||
        tsafe_registry_acquire(f->reg, "slot", &f->ref))
        return -1;
    /* MoE: a tiny MoE with a gated shared expert */
    memset(&f->moecfg, 0, sizeof f->moecfg);
    strcpy(f->moecfg.name, "tiny");
    f->moecfg.hidden_size = 16;
    f->moecfg.n_layers = 1;
    f->moecfg.n_heads = 2;
    f->moecfg.n_kv_heads = 2;
    f->moecfg.n_experts = 4;
    f->moecfg.top_k = 2;
    f->moecfg.expert_intermediate = 8;
    f->moecfg.shared_expert_intermediate = 8;
    f->moecfg.shared_expert_gate = 1;
    f->moecfg.full_attention_interval = 1;
    if (tsafe_moe_layer_create_random(&f->moecfg, 1, 0, &f->layer) ||
        tsafe_stepgate_create_default(&f->gate) ||
        tsafe_stepgate_session_create(f->gate, &f->gs))
        return -1;
    (void)state; /* tests read F; a group state would override their tables */
    return 0;
}

static void sealed_world_free(void);

static int teardown_fixture(void **state)
{
    (void)state;
    sealed_world_free();
    fixture *f = &F;
    tsafe_stepgate_session_free(f->gs);
    tsafe_stepgate_free(f->gate);
    tsafe_moe_layer_free(f->layer);
    tsafe_registry_release(f->ref);
    tsafe_registry_free(f->reg);
    tsafe_package_free(f->package);
    tsafe_package_bytes_free(f->pkg);
    sodium_memzero(f->pkg_sk, sizeof f->pkg_sk);
    tsafe_lora_adapter_free(f->adapter);
    tsafe_safetensors_free(f->st);
    tsafe_safetensors_bytes_free(f->st_bytes);
    tsafe_safetensors_writer_free(f->stw);
    tsafe_dp_session_free(f->dp);
    tsafe_lora_bytes_free(f->req);
    tsafe_lora_bytes_free(f->resp);
    tsafe_lora_bytes_free(f->umsg);
    tsafe_lora_local_free(f->local);
    tsafe_lora_site_free(f->site);
    tsafe_lora_server_free(f->server);
    tsafe_lora_client_free(f->client);
    tsafe_buffer_free(f->buf1);
    tsafe_buffer_free(f->buf);
    tsafe_backend_free(f->be);
    free(f->ct_bytes);
    tsafe_ciphertext_free(f->out);
    tsafe_ciphertext_free(f->ct0);
    tsafe_ciphertext_free(f->ct);
    tsafe_plaintext_free(f->pt0);
    tsafe_plaintext_free(f->pt);
    tsafe_public_key_free(f->pk);
    tsafe_secret_key_free(f->sk);
    tsafe_context_free(f->ctx2);
    tsafe_context_free(f->ctx);
    return 0;
}

/* ------------------------------------------------------------ tables */

typedef void (*api_check)(fixture *f);

typedef struct {
    const char *name;
    api_check check;
} api_case;

typedef struct {
    const char *header;   /* file name in include/tensafe/ */
    const api_case *cases;
    size_t n;
    int skipped;          /* header not built in this configuration */
} api_table;

#define CHECK_FN(fn) static void check_##fn(fixture *f)
#define ENTRY(fn) {#fn, check_##fn}

/* ----------------------------------------------------------- status.h */

static const int k_codes[] = {0, -1, -2, -47, -92, -93, 1, 42, -1000, INT_MIN, INT_MAX};

CHECK_FN(tsafe_strerror)
{
    for (size_t i = 0; i < sizeof k_codes / sizeof k_codes[0]; i++)
        assert_non_null(tsafe_strerror(k_codes[i]));
}

CHECK_FN(tsafe_status_name)
{
    for (size_t i = 0; i < sizeof k_codes / sizeof k_codes[0]; i++)
        assert_non_null(tsafe_status_name(k_codes[i]));
    assert_string_equal(tsafe_status_name(TSAFE_E_FORMAT), "TSAFE_E_FORMAT");
}

static const api_case k_status[] = {ENTRY(tsafe_strerror), ENTRY(tsafe_status_name)};

/* ---------------------------------------------------------- version.h */

CHECK_FN(tsafe_version_number)
{
    assert_int_equal(tsafe_version_number(), TSAFE_VERSION_NUMBER);
}

CHECK_FN(tsafe_version_string)
{
    assert_non_null(tsafe_version_string());
}

static const api_case k_version[] = {ENTRY(tsafe_version_number), ENTRY(tsafe_version_string)};

/* ------------------------------------------------------------- ckks.h */

CHECK_FN(tsafe_params_preset)
{
    tsafe_params p;
    ERR(tsafe_params_preset(NULL, &p));
    ERR(tsafe_params_preset("seed-n16384", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_params_preset("no-such-preset", &p));
    IS(TSAFE_E_NOT_FOUND, tsafe_params_preset("", &p));
}

CHECK_FN(tsafe_params_preset_count)
{
    assert_true(tsafe_params_preset_count() > 0);
}

CHECK_FN(tsafe_params_preset_name)
{
    assert_null(tsafe_params_preset_name(tsafe_params_preset_count()));
    assert_null(tsafe_params_preset_name(SIZE_MAX));
    assert_non_null(tsafe_params_preset_name(0));
}

CHECK_FN(tsafe_params_max_log_q)
{
    assert_int_equal(tsafe_params_max_log_q(0), 0);
    assert_int_equal(tsafe_params_max_log_q(9), 0);
    assert_int_equal(tsafe_params_max_log_q(17), 0);
    assert_int_equal(tsafe_params_max_log_q(UINT32_MAX), 0);
}

CHECK_FN(tsafe_params_serialize)
{
    uint8_t buf[512];
    size_t w = 0;
    tsafe_params p = f->params;
    ERR(tsafe_params_serialize(NULL, buf, sizeof buf, &w));
    ERR(tsafe_params_serialize(&p, buf, sizeof buf, NULL));
    ERR(tsafe_params_serialize(&p, NULL, sizeof buf, &w));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_params_serialize(&p, buf, 1, &w));
    p.n_primes = 0;
    ERR(tsafe_params_serialize(&p, buf, sizeof buf, &w));
    p.n_primes = TSAFE_MAX_PRIMES + 1;
    ERR(tsafe_params_serialize(&p, buf, sizeof buf, &w));
    p.n_primes = UINT32_MAX;
    ERR(tsafe_params_serialize(&p, buf, sizeof buf, &w));
}

CHECK_FN(tsafe_params_deserialize)
{
    uint8_t buf[512];
    size_t w = 0;
    tsafe_params p;
    OK(tsafe_params_serialize(&f->params, buf, sizeof buf, &w));
    ERR(tsafe_params_deserialize(NULL, w, &p));
    ERR(tsafe_params_deserialize(buf, w, NULL));
    ERR(tsafe_params_deserialize(buf, 0, &p));
    ERR(tsafe_params_deserialize(buf, w - 1, &p));
}

CHECK_FN(tsafe_context_create)
{
    tsafe_context *c = NULL;
    ERR(tsafe_context_create(NULL, &c));
    ERR(tsafe_context_create(&f->params, NULL));
    tsafe_params p;
    p = f->params; p.log_n = 9;  ERR(tsafe_context_create(&p, &c));
    p = f->params; p.log_n = 17; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.log_n = UINT32_MAX; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.n_primes = 0; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.n_primes = TSAFE_MAX_PRIMES + 1; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.n_special = 2; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.n_special = 1; p.n_primes = 1; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.scale = NAN; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.scale = 0.0; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.scale = -1.0; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.prime_bits[0] = 0; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.prime_bits[0] = 62; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.prime_bits[1] = UINT32_MAX; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.primes[0] = 4; p.primes[1] = 6; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.primes[0] = 1; p.primes[1] = UINT64_MAX; ERR(tsafe_context_create(&p, &c));
    p = f->params; p.flags = 0; IS(TSAFE_E_INSECURE, tsafe_context_create(&p, &c));
    p = f->params; p.flags = 0x80; ERR(tsafe_context_create(&p, &c));
    assert_null(c);
}

CHECK_FN(tsafe_context_free)
{
    tsafe_context_free(NULL);
}

CHECK_FN(tsafe_context_n)
{
    assert_int_equal(tsafe_context_n(NULL), 0);
    assert_int_equal(tsafe_context_n(f->ctx), 1024);
}

CHECK_FN(tsafe_context_slots)
{
    assert_int_equal(tsafe_context_slots(NULL), 0);
}

CHECK_FN(tsafe_context_max_level)
{
    assert_int_equal(tsafe_context_max_level(NULL), 0);
}

CHECK_FN(tsafe_context_prime)
{
    assert_int_equal(tsafe_context_prime(NULL, 0), 0);
    assert_int_equal(tsafe_context_prime(f->ctx, 2), 0);
    assert_int_equal(tsafe_context_prime(f->ctx, UINT32_MAX), 0);
}

CHECK_FN(tsafe_context_log2_q)
{
    assert_true(tsafe_context_log2_q(NULL) == 0.0);
}

CHECK_FN(tsafe_context_params)
{
    assert_null(tsafe_context_params(NULL));
}

CHECK_FN(tsafe_context_fingerprint)
{
    uint8_t fp[TSAFE_FINGERPRINT_BYTES];
    tsafe_context_fingerprint(NULL, fp);
    tsafe_context_fingerprint(f->ctx, NULL);
}

CHECK_FN(tsafe_context_arith_path)
{
    (void)tsafe_context_arith_path(NULL);
    assert_non_null(tsafe_context_arith_path(f->ctx));
}

CHECK_FN(tsafe_ifma_available)
{
    int a = tsafe_ifma_available();
    assert_true(a == 0 || a == 1);
}

CHECK_FN(tsafe_secret_key_generate)
{
    tsafe_secret_key *sk = NULL;
    ERR(tsafe_secret_key_generate(NULL, NULL, &sk));
    ERR(tsafe_secret_key_generate(f->ctx, NULL, NULL));
    assert_null(sk);
}

CHECK_FN(tsafe_secret_key_free)
{
    tsafe_secret_key_free(NULL);
}

CHECK_FN(tsafe_public_key_generate)
{
    tsafe_public_key *pk = NULL;
    ERR(tsafe_public_key_generate(NULL, f->sk, NULL, &pk));
    ERR(tsafe_public_key_generate(f->ctx, NULL, NULL, &pk));
    ERR(tsafe_public_key_generate(f->ctx, f->sk, NULL, NULL));
    ERR(tsafe_public_key_generate(f->ctx2, f->sk, NULL, &pk)); /* other context */
    assert_null(pk);
}

CHECK_FN(tsafe_public_key_free)
{
    tsafe_public_key_free(NULL);
}

CHECK_FN(tsafe_plaintext_create)
{
    tsafe_plaintext *pt = NULL;
    ERR(tsafe_plaintext_create(NULL, &pt));
    ERR(tsafe_plaintext_create(f->ctx, NULL));
    assert_null(pt);
}

CHECK_FN(tsafe_plaintext_free)
{
    tsafe_plaintext_free(NULL);
}

CHECK_FN(tsafe_plaintext_level)
{
    assert_int_equal(tsafe_plaintext_level(NULL), 0);
}

CHECK_FN(tsafe_plaintext_scale)
{
    (void)tsafe_plaintext_scale(NULL);
}

static void bad_encode(fixture *f, int complex_)
{
    double v[4] = {1, 2, 3, 4}, big[1] = {1e300}, nan_[1] = {NAN};
    size_t slots = tsafe_context_slots(f->ctx);
    tsafe_plaintext *pt;
    OK(tsafe_plaintext_create(f->ctx, &pt));
#define ENC(ctx, vals, n, scale, level, out)                                            \
    (complex_ ? tsafe_ckks_encode_complex(ctx, vals, NULL, n, scale, level, out)        \
              : tsafe_ckks_encode(ctx, vals, n, scale, level, out))
    ERR(ENC(NULL, v, 4, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, NULL, 4, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, v, 4, 0x1p20, 0, NULL));
    ERR(ENC(f->ctx, v, slots + 1, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, v, SIZE_MAX, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, v, 4, 0x1p20, 2, pt));
    ERR(ENC(f->ctx, v, 4, 0x1p20, UINT32_MAX, pt));
    ERR(ENC(f->ctx, v, 4, NAN, 0, pt));
    ERR(ENC(f->ctx, v, 4, 0.0, 0, pt));
    ERR(ENC(f->ctx, v, 4, -0x1p20, 0, pt));
    ERR(ENC(f->ctx, v, 4, INFINITY, 0, pt));
    ERR(ENC(f->ctx, big, 1, 0x1p20, 0, pt));
    ERR(ENC(f->ctx, nan_, 1, 0x1p20, 0, pt));
    ERR(ENC(f->ctx2, v, 4, 0x1p20, 0, pt)); /* plaintext of another context */
#undef ENC
    if (complex_)
        ERR(tsafe_ckks_encode_complex(f->ctx, v, nan_, 1, 0x1p20, 0, pt));
    tsafe_plaintext_free(pt);
}

CHECK_FN(tsafe_ckks_encode) { bad_encode(f, 0); }
CHECK_FN(tsafe_ckks_encode_complex) { bad_encode(f, 1); }

CHECK_FN(tsafe_ckks_decode)
{
    double v[8];
    size_t slots = tsafe_context_slots(f->ctx);
    ERR(tsafe_ckks_decode(NULL, f->pt, v, 8));
    ERR(tsafe_ckks_decode(f->ctx, NULL, v, 8));
    ERR(tsafe_ckks_decode(f->ctx, f->pt, NULL, 8));
    ERR(tsafe_ckks_decode(f->ctx, f->pt, v, slots + 1));
    ERR(tsafe_ckks_decode(f->ctx2, f->pt, v, 8));
}

CHECK_FN(tsafe_ckks_decode_complex)
{
    double re[8], im[8];
    size_t slots = tsafe_context_slots(f->ctx);
    ERR(tsafe_ckks_decode_complex(NULL, f->pt, re, im, 8));
    ERR(tsafe_ckks_decode_complex(f->ctx, NULL, re, im, 8));
    ERR(tsafe_ckks_decode_complex(f->ctx, f->pt, NULL, NULL, 8)); /* one may be NULL */
    ERR(tsafe_ckks_decode_complex(f->ctx, f->pt, re, im, slots + 1));
}

CHECK_FN(tsafe_plaintext_prepare_mul)
{
    ERR(tsafe_plaintext_prepare_mul(NULL, f->pt));
    ERR(tsafe_plaintext_prepare_mul(f->ctx, NULL));
    ERR(tsafe_plaintext_prepare_mul(f->ctx2, f->pt));
}

CHECK_FN(tsafe_ciphertext_create)
{
    tsafe_ciphertext *ct = NULL;
    ERR(tsafe_ciphertext_create(NULL, &ct));
    ERR(tsafe_ciphertext_create(f->ctx, NULL));
    assert_null(ct);
}

CHECK_FN(tsafe_ciphertext_free)
{
    tsafe_ciphertext_free(NULL);
}

CHECK_FN(tsafe_ciphertext_copy)
{
    ERR(tsafe_ciphertext_copy(NULL, f->ct, f->out));
    ERR(tsafe_ciphertext_copy(f->ctx, NULL, f->out));
    ERR(tsafe_ciphertext_copy(f->ctx, f->ct, NULL));
    ERR(tsafe_ciphertext_copy(f->ctx2, f->ct, f->out));
}

CHECK_FN(tsafe_ciphertext_level)
{
    assert_int_equal(tsafe_ciphertext_level(NULL), 0);
}

CHECK_FN(tsafe_ciphertext_scale)
{
    (void)tsafe_ciphertext_scale(NULL);
}

CHECK_FN(tsafe_ciphertext_is_seeded)
{
    assert_int_equal(tsafe_ciphertext_is_seeded(NULL), 0);
}

CHECK_FN(tsafe_ckks_encrypt_symmetric)
{
    ERR(tsafe_ckks_encrypt_symmetric(NULL, f->sk, f->pt, NULL, f->out));
    ERR(tsafe_ckks_encrypt_symmetric(f->ctx, NULL, f->pt, NULL, f->out));
    ERR(tsafe_ckks_encrypt_symmetric(f->ctx, f->sk, NULL, NULL, f->out));
    ERR(tsafe_ckks_encrypt_symmetric(f->ctx, f->sk, f->pt, NULL, NULL));
    ERR(tsafe_ckks_encrypt_symmetric(f->ctx2, f->sk, f->pt, NULL, f->out));
}

CHECK_FN(tsafe_ckks_encrypt_values_symmetric)
{
    double v[4] = {1, 2, 3, 4}, nan_[1] = {NAN};
    size_t slots = tsafe_context_slots(f->ctx);
    ERR(tsafe_ckks_encrypt_values_symmetric(NULL, f->sk, v, NULL, 4, 0x1p20, 0, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, NULL, v, NULL, 4, 0x1p20, 0, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, NULL, NULL, 4, 0x1p20, 0, NULL,
                                            f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, 4, 0x1p20, 0, NULL, NULL));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, slots + 1, 0x1p20, 0, NULL,
                                            f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, 4, 0x1p20, 2, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, 4, NAN, 0, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, v, NULL, 4, 0.5, 0, NULL, f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx, f->sk, nan_, NULL, 1, 0x1p20, 0, NULL,
                                            f->out));
    ERR(tsafe_ckks_encrypt_values_symmetric(f->ctx2, f->sk, v, NULL, 4, 0x1p20, 0, NULL,
                                            f->out));
}

CHECK_FN(tsafe_ckks_encrypt_public)
{
    ERR(tsafe_ckks_encrypt_public(NULL, f->pk, f->pt, NULL, f->out));
    ERR(tsafe_ckks_encrypt_public(f->ctx, NULL, f->pt, NULL, f->out));
    ERR(tsafe_ckks_encrypt_public(f->ctx, f->pk, NULL, NULL, f->out));
    ERR(tsafe_ckks_encrypt_public(f->ctx, f->pk, f->pt, NULL, NULL));
    ERR(tsafe_ckks_encrypt_public(f->ctx2, f->pk, f->pt, NULL, f->out));
}

CHECK_FN(tsafe_ckks_decrypt)
{
    tsafe_plaintext *pt;
    OK(tsafe_plaintext_create(f->ctx, &pt));
    ERR(tsafe_ckks_decrypt(NULL, f->sk, f->ct, pt));
    ERR(tsafe_ckks_decrypt(f->ctx, NULL, f->ct, pt));
    ERR(tsafe_ckks_decrypt(f->ctx, f->sk, NULL, pt));
    ERR(tsafe_ckks_decrypt(f->ctx, f->sk, f->ct, NULL));
    ERR(tsafe_ckks_decrypt(f->ctx2, f->sk, f->ct, pt));
    tsafe_plaintext_free(pt);
}

CHECK_FN(tsafe_ckks_decrypt_coeffs_strided)
{
    double out[1024];
    size_t n = tsafe_context_n(f->ctx);
    ERR(tsafe_ckks_decrypt_coeffs_strided(NULL, f->sk, f->ct, n / 4, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, NULL, f->ct, n / 4, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, NULL, n / 4, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, n / 4, NULL, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, 0, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, 3, out, n / 3));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, 2 * n, out, 1));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, n / 4, out, 5));
    ERR(tsafe_ckks_decrypt_coeffs_strided(f->ctx, f->sk, f->ct, SIZE_MAX, out, 0));
}

/* binary ops: NULLs, another context, mismatched levels */
#define BINARY_CHECKS(op, b_ok, b_other)                          \
    do {                                                          \
        ERR(op(NULL, f->ct, b_ok, f->out));                       \
        ERR(op(f->ctx, NULL, b_ok, f->out));                      \
        ERR(op(f->ctx, f->ct, NULL, f->out));                     \
        ERR(op(f->ctx, f->ct, b_ok, NULL));                       \
        ERR(op(f->ctx2, f->ct, b_ok, f->out));                    \
        ERR(op(f->ctx, f->ct, b_other, f->out));                  \
    } while (0)

CHECK_FN(tsafe_ckks_add) { BINARY_CHECKS(tsafe_ckks_add, f->ct, f->ct0); }
CHECK_FN(tsafe_ckks_sub) { BINARY_CHECKS(tsafe_ckks_sub, f->ct, f->ct0); }
CHECK_FN(tsafe_ckks_add_plain) { BINARY_CHECKS(tsafe_ckks_add_plain, f->pt, f->pt0); }
CHECK_FN(tsafe_ckks_mul_plain) { BINARY_CHECKS(tsafe_ckks_mul_plain, f->pt, f->pt0); }

CHECK_FN(tsafe_ckks_negate)
{
    ERR(tsafe_ckks_negate(NULL, f->ct, f->out));
    ERR(tsafe_ckks_negate(f->ctx, NULL, f->out));
    ERR(tsafe_ckks_negate(f->ctx, f->ct, NULL));
    ERR(tsafe_ckks_negate(f->ctx2, f->ct, f->out));
}

CHECK_FN(tsafe_ckks_mul_const)
{
    ERR(tsafe_ckks_mul_const(NULL, f->ct, 2.0, 1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, NULL, 2.0, 1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 2.0, 1.0, NULL));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, NAN, 1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, INFINITY, 1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 2.0, NAN, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 2.0, 0.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 2.0, -1.0, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx, f->ct, 1e300, 1e300, f->out));
    ERR(tsafe_ckks_mul_const(f->ctx2, f->ct, 2.0, 1.0, f->out));
}

CHECK_FN(tsafe_ckks_rescale)
{
    ERR(tsafe_ckks_rescale(NULL, f->ct, f->out));
    ERR(tsafe_ckks_rescale(f->ctx, NULL, f->out));
    ERR(tsafe_ckks_rescale(f->ctx, f->ct, NULL));
    IS(TSAFE_E_LEVEL, tsafe_ckks_rescale(f->ctx, f->ct0, f->out)); /* level 0 */
    ERR(tsafe_ckks_rescale(f->ctx2, f->ct, f->out));
}

CHECK_FN(tsafe_ckks_drop_to_level)
{
    ERR(tsafe_ckks_drop_to_level(NULL, f->ct, 0, f->out));
    ERR(tsafe_ckks_drop_to_level(f->ctx, NULL, 0, f->out));
    ERR(tsafe_ckks_drop_to_level(f->ctx, f->ct, 0, NULL));
    ERR(tsafe_ckks_drop_to_level(f->ctx, f->ct0, 1, f->out)); /* up */
    ERR(tsafe_ckks_drop_to_level(f->ctx, f->ct, UINT32_MAX, f->out));
    ERR(tsafe_ckks_drop_to_level(f->ctx2, f->ct, 0, f->out));
}

/* serialized_size / serialize / deserialize for one object kind */
#define SER_CHECKS(kind, obj, objtype)                                                    \
    do {                                                                                  \
        size_t n_ = 0, w_ = 0;                                                            \
        ERR(tsafe_##kind##_serialized_size(NULL, obj, &n_));                              \
        ERR(tsafe_##kind##_serialized_size(f->ctx, NULL, &n_));                           \
        ERR(tsafe_##kind##_serialized_size(f->ctx, obj, NULL));                           \
        OK(tsafe_##kind##_serialized_size(f->ctx, obj, &n_));                             \
        uint8_t *b_ = malloc(n_);                                                         \
        assert_non_null(b_);                                                              \
        ERR(tsafe_##kind##_serialize(NULL, obj, b_, n_, &w_));                            \
        ERR(tsafe_##kind##_serialize(f->ctx, NULL, b_, n_, &w_));                         \
        ERR(tsafe_##kind##_serialize(f->ctx, obj, NULL, n_, &w_));                        \
        ERR(tsafe_##kind##_serialize(f->ctx, obj, b_, n_, NULL));                         \
        IS(TSAFE_E_BUFFER_SMALL, tsafe_##kind##_serialize(f->ctx, obj, b_, n_ - 1, &w_)); \
        ERR(tsafe_##kind##_serialize(f->ctx, obj, b_, 0, &w_));                           \
        ERR(tsafe_##kind##_serialize(f->ctx2, obj, b_, n_, &w_));                         \
        OK(tsafe_##kind##_serialize(f->ctx, obj, b_, n_, &w_));                           \
        objtype *o_ = NULL;                                                               \
        ERR(tsafe_##kind##_deserialize(NULL, b_, n_, &o_));                               \
        ERR(tsafe_##kind##_deserialize(f->ctx, NULL, n_, &o_));                           \
        ERR(tsafe_##kind##_deserialize(f->ctx, b_, n_, NULL));                            \
        ERR(tsafe_##kind##_deserialize(f->ctx, b_, 0, &o_));                              \
        ERR(tsafe_##kind##_deserialize(f->ctx, b_, n_ - 1, &o_));                         \
        ERR(tsafe_##kind##_deserialize(f->ctx2, b_, n_, &o_));                            \
        assert_null(o_);                                                                  \
        sodium_memzero(b_, n_);                                                           \
        free(b_);                                                                         \
    } while (0)

CHECK_FN(tsafe_ciphertext_serialized_size) { SER_CHECKS(ciphertext, f->ct, tsafe_ciphertext); }
CHECK_FN(tsafe_ciphertext_serialize) { check_tsafe_ciphertext_serialized_size(f); }
CHECK_FN(tsafe_ciphertext_deserialize) { check_tsafe_ciphertext_serialized_size(f); }

CHECK_FN(tsafe_ciphertext_serialized_size_at)
{
    size_t n = 0;
    uint32_t top = tsafe_context_max_level(f->ctx);
    ERR(tsafe_ciphertext_serialized_size_at(NULL, 0, &n));
    ERR(tsafe_ciphertext_serialized_size_at(f->ctx, 0, NULL));
    IS(TSAFE_E_LEVEL, tsafe_ciphertext_serialized_size_at(f->ctx, top + 1, &n));
    IS(TSAFE_E_LEVEL, tsafe_ciphertext_serialized_size_at(f->ctx, UINT32_MAX, &n));
    OK(tsafe_ciphertext_serialized_size_at(f->ctx, top, &n));
    assert_true(n > 0);
}

CHECK_FN(tsafe_ciphertext_deserialize_into)
{
    ERR(tsafe_ciphertext_deserialize_into(NULL, f->ct_bytes, f->ct_len, f->out));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx, NULL, f->ct_len, f->out));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx, f->ct_bytes, f->ct_len, NULL));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx, f->ct_bytes, 0, f->out));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx, f->ct_bytes, f->ct_len - 1, f->out));
    ERR(tsafe_ciphertext_deserialize_into(f->ctx2, f->ct_bytes, f->ct_len, f->out));
}

CHECK_FN(tsafe_plaintext_serialized_size) { SER_CHECKS(plaintext, f->pt, tsafe_plaintext); }
CHECK_FN(tsafe_plaintext_serialize) { check_tsafe_plaintext_serialized_size(f); }
CHECK_FN(tsafe_plaintext_deserialize) { check_tsafe_plaintext_serialized_size(f); }
CHECK_FN(tsafe_public_key_serialized_size) { SER_CHECKS(public_key, f->pk, tsafe_public_key); }
CHECK_FN(tsafe_public_key_serialize) { check_tsafe_public_key_serialized_size(f); }
CHECK_FN(tsafe_public_key_deserialize) { check_tsafe_public_key_serialized_size(f); }
CHECK_FN(tsafe_secret_key_serialized_size) { SER_CHECKS(secret_key, f->sk, tsafe_secret_key); }
CHECK_FN(tsafe_secret_key_serialize) { check_tsafe_secret_key_serialized_size(f); }
CHECK_FN(tsafe_secret_key_deserialize) { check_tsafe_secret_key_serialized_size(f); }

static const api_case k_ckks[] = {
    ENTRY(tsafe_params_preset), ENTRY(tsafe_params_preset_count),
    ENTRY(tsafe_params_preset_name), ENTRY(tsafe_params_max_log_q),
    ENTRY(tsafe_params_serialize), ENTRY(tsafe_params_deserialize),
    ENTRY(tsafe_context_create), ENTRY(tsafe_context_free), ENTRY(tsafe_context_n),
    ENTRY(tsafe_context_slots), ENTRY(tsafe_context_max_level), ENTRY(tsafe_context_prime),
    ENTRY(tsafe_context_log2_q), ENTRY(tsafe_context_params), ENTRY(tsafe_context_fingerprint),
    ENTRY(tsafe_context_arith_path), ENTRY(tsafe_ifma_available),
    ENTRY(tsafe_secret_key_generate), ENTRY(tsafe_secret_key_free),
    ENTRY(tsafe_public_key_generate), ENTRY(tsafe_public_key_free),
    ENTRY(tsafe_plaintext_create), ENTRY(tsafe_plaintext_free), ENTRY(tsafe_plaintext_level),
    ENTRY(tsafe_plaintext_scale), ENTRY(tsafe_ckks_encode), ENTRY(tsafe_ckks_encode_complex),
    ENTRY(tsafe_ckks_decode), ENTRY(tsafe_ckks_decode_complex),
    ENTRY(tsafe_plaintext_prepare_mul), ENTRY(tsafe_ciphertext_create),
    ENTRY(tsafe_ciphertext_free), ENTRY(tsafe_ciphertext_copy), ENTRY(tsafe_ciphertext_level),
    ENTRY(tsafe_ciphertext_scale), ENTRY(tsafe_ciphertext_is_seeded),
    ENTRY(tsafe_ckks_encrypt_symmetric), ENTRY(tsafe_ckks_encrypt_values_symmetric),
    ENTRY(tsafe_ckks_encrypt_public), ENTRY(tsafe_ckks_decrypt),
    ENTRY(tsafe_ckks_decrypt_coeffs_strided), ENTRY(tsafe_ckks_add), ENTRY(tsafe_ckks_sub),
    ENTRY(tsafe_ckks_negate), ENTRY(tsafe_ckks_add_plain), ENTRY(tsafe_ckks_mul_plain),
    ENTRY(tsafe_ckks_mul_const), ENTRY(tsafe_ckks_rescale), ENTRY(tsafe_ckks_drop_to_level),
    ENTRY(tsafe_ciphertext_serialized_size), ENTRY(tsafe_ciphertext_serialize),
    ENTRY(tsafe_ciphertext_deserialize), ENTRY(tsafe_ciphertext_deserialize_into),
    ENTRY(tsafe_ciphertext_serialized_size_at),
    ENTRY(tsafe_plaintext_serialized_size), ENTRY(tsafe_plaintext_serialize),
    ENTRY(tsafe_plaintext_deserialize), ENTRY(tsafe_public_key_serialized_size),
    ENTRY(tsafe_public_key_serialize), ENTRY(tsafe_public_key_deserialize),
    ENTRY(tsafe_secret_key_serialized_size), ENTRY(tsafe_secret_key_serialize),
    ENTRY(tsafe_secret_key_deserialize),
};

/* ---------------------------------------------------------- backend.h */

CHECK_FN(tsafe_backend_cpu_create)
{
    tsafe_backend *b = NULL;
    ERR(tsafe_backend_cpu_create(NULL, &b));
    ERR(tsafe_backend_cpu_create(f->ctx, NULL));
    assert_null(b);
}

CHECK_FN(tsafe_backend_free)
{
    tsafe_backend_free(NULL);
}

CHECK_FN(tsafe_backend_name)
{
    (void)tsafe_backend_name(NULL);
    assert_non_null(tsafe_backend_name(f->be));
}

CHECK_FN(tsafe_buffer_alloc)
{
    tsafe_buffer *b = NULL;
    ERR(tsafe_buffer_alloc(NULL, 1, 1, &b));
    ERR(tsafe_buffer_alloc(f->be, 1, 1, NULL));
    ERR(tsafe_buffer_alloc(f->be, 0, 1, &b));
    ERR(tsafe_buffer_alloc(f->be, 1, 0, &b));
    ERR(tsafe_buffer_alloc(f->be, 1, 3, &b)); /* more limbs than primes */
    ERR(tsafe_buffer_alloc(f->be, 1, UINT32_MAX, &b));
    ERR(tsafe_buffer_alloc(f->be, SIZE_MAX, 2, &b));
    ERR(tsafe_buffer_alloc(f->be, SIZE_MAX / 1024 + 1, 1, &b));
    assert_null(b);
}

CHECK_FN(tsafe_buffer_free)
{
    tsafe_buffer_free(NULL);
}

CHECK_FN(tsafe_buffer_words)
{
    assert_int_equal(tsafe_buffer_words(NULL), 0);
    assert_int_equal(tsafe_buffer_words(f->buf), 2 * 2 * 1024);
}

CHECK_FN(tsafe_buffer_upload)
{
    size_t n = tsafe_buffer_words(f->buf);
    uint64_t *w = calloc(n + 1, sizeof *w);
    ERR(tsafe_buffer_upload(NULL, w, n));
    ERR(tsafe_buffer_upload(f->buf, NULL, n));
    ERR(tsafe_buffer_upload(f->buf, w, n + 1));
    ERR(tsafe_buffer_upload(f->buf, w, SIZE_MAX));
    free(w);
}

CHECK_FN(tsafe_buffer_download)
{
    size_t n = tsafe_buffer_words(f->buf);
    uint64_t *w = calloc(n + 1, sizeof *w);
    ERR(tsafe_buffer_download(NULL, w, n));
    ERR(tsafe_buffer_download(f->buf, NULL, n));
    ERR(tsafe_buffer_download(f->buf, w, n + 1));
    ERR(tsafe_buffer_download(f->buf, w, SIZE_MAX));
    free(w);
}

CHECK_FN(tsafe_backend_ntt_forward)
{
    ERR(tsafe_backend_ntt_forward(NULL, f->buf));
    ERR(tsafe_backend_ntt_forward(f->be, NULL));
}

CHECK_FN(tsafe_backend_ntt_inverse)
{
    ERR(tsafe_backend_ntt_inverse(NULL, f->buf));
    ERR(tsafe_backend_ntt_inverse(f->be, NULL));
}

CHECK_FN(tsafe_backend_elementwise)
{
    ERR(tsafe_backend_elementwise(NULL, TSAFE_OP_ADD, f->buf, f->buf, f->buf));
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_ADD, NULL, f->buf, f->buf));
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_ADD, f->buf, NULL, f->buf));
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_ADD, f->buf, f->buf, NULL));
    ERR(tsafe_backend_elementwise(f->be, (tsafe_elementwise_op)99, f->buf, f->buf, f->buf));
    ERR(tsafe_backend_elementwise(f->be, (tsafe_elementwise_op)-1, f->buf, f->buf, f->buf));
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_MUL, f->buf, f->buf, f->buf1)); /* limbs */
    ERR(tsafe_backend_elementwise(f->be, TSAFE_OP_MUL, f->buf1, f->buf, f->buf));
}

CHECK_FN(tsafe_backend_rescale)
{
    ERR(tsafe_backend_rescale(NULL, f->buf1, f->buf));
    ERR(tsafe_backend_rescale(f->be, NULL, f->buf));
    ERR(tsafe_backend_rescale(f->be, f->buf1, NULL));
    ERR(tsafe_backend_rescale(f->be, f->buf, f->buf));  /* same limb count */
    ERR(tsafe_backend_rescale(f->be, f->buf1, f->buf1)); /* one limb in */
}

CHECK_FN(tsafe_backend_synchronize)
{
    ERR(tsafe_backend_synchronize(NULL));
}

CHECK_FN(tsafe_backend_cpu_create_bfv)
{
    tsafe_backend *b = (tsafe_backend *)1;
    ERR(tsafe_backend_cpu_create_bfv(NULL, &b));
    assert_null(b);
}

CHECK_FN(tsafe_backend_n)
{
    assert_int_equal(tsafe_backend_n(NULL), 0);
    assert_int_equal(tsafe_backend_n(f->be), 1024);
}

CHECK_FN(tsafe_backend_max_limbs)
{
    assert_int_equal(tsafe_backend_max_limbs(NULL), 0);
    assert_true(tsafe_backend_max_limbs(f->be) >= 2);
}

CHECK_FN(tsafe_backend_cpu_factory)
{
    const tsafe_backend_factory *cf = tsafe_backend_cpu_factory();
    assert_non_null(cf);
    assert_non_null(cf->create);
}

CHECK_FN(tsafe_backend_create)
{
    tsafe_backend *b = (tsafe_backend *)1;
    ERR(tsafe_backend_create(NULL, NULL, NULL, NULL));
    ERR(tsafe_backend_create(NULL, NULL, NULL, &b));
    assert_null(b);
    static const tsafe_backend_factory no_create = {"x", NULL, NULL};
    ERR(tsafe_backend_create(&no_create, f->ctx, NULL, &b));
    assert_null(b);
}

CHECK_FN(tsafe_buffer_alloc_operand)
{
    tsafe_buffer *o = (tsafe_buffer *)1;
    ERR(tsafe_buffer_alloc_operand(NULL, 1, 1, &o));
    assert_null(o);
    ERR(tsafe_buffer_alloc_operand(f->be, 1, 1, NULL));
    ERR(tsafe_buffer_alloc_operand(f->be, 0, 1, &o));
    ERR(tsafe_buffer_alloc_operand(f->be, 1, 0, &o));
}

CHECK_FN(tsafe_buffer_polys)
{
    assert_int_equal(tsafe_buffer_polys(NULL), 0);
    assert_true(tsafe_buffer_polys(f->buf) >= 1);
}

CHECK_FN(tsafe_buffer_limbs)
{
    assert_int_equal(tsafe_buffer_limbs(NULL), 0);
    assert_true(tsafe_buffer_limbs(f->buf) >= 1);
}

CHECK_FN(tsafe_buffer_host_words)
{
    assert_null(tsafe_buffer_host_words(NULL));
    assert_non_null(tsafe_buffer_host_words(f->buf)); /* CPU: host memory */
}

CHECK_FN(tsafe_backend_mul_acc)
{
    const tsafe_buffer *a[1] = {f->buf}, *w[1] = {f->buf}; /* w not an operand */
    tsafe_backend_mac job = {f->buf1, 1, a, w, 0};
    ERR(tsafe_backend_mul_acc(NULL, &job, 1));
    ERR(tsafe_backend_mul_acc(f->be, NULL, 1));
    ERR(tsafe_backend_mul_acc(f->be, &job, 1));
    tsafe_backend_mac nulls = {f->buf1, 1, NULL, NULL, 1};
    ERR(tsafe_backend_mul_acc(f->be, &nulls, 1));
    tsafe_backend_mac noacc = {NULL, 0, NULL, NULL, 0};
    ERR(tsafe_backend_mul_acc(f->be, &noacc, 1));
}

CHECK_FN(tsafe_backend_mod_switch)
{
    ERR(tsafe_backend_mod_switch(NULL, f->buf1, f->buf));
    ERR(tsafe_backend_mod_switch(f->be, NULL, f->buf));
    ERR(tsafe_backend_mod_switch(f->be, f->buf1, NULL));
    ERR(tsafe_backend_mod_switch(f->be, f->buf, f->buf));
    ERR(tsafe_backend_mod_switch(f->be, f->buf1, f->buf1));
}

CHECK_FN(tsafe_backend_ntt_read)
{
    uint32_t pos[2] = {0, (uint32_t)tsafe_backend_n(f->be)}; /* the second: N */
    uint64_t out[4];
    ERR(tsafe_backend_ntt_read(NULL, f->buf, 0, pos, 1, out));
    ERR(tsafe_backend_ntt_read(f->be, NULL, 0, pos, 1, out));
    ERR(tsafe_backend_ntt_read(f->be, f->buf, 0, NULL, 1, out));
    ERR(tsafe_backend_ntt_read(f->be, f->buf, 0, pos, 1, NULL));
    ERR(tsafe_backend_ntt_read(f->be, f->buf, 2, pos, 1, out)); /* poly */
    ERR(tsafe_backend_ntt_read(f->be, f->buf, 0, pos, 2, out)); /* position N */
}

static const api_case k_backend[] = {
    ENTRY(tsafe_backend_cpu_create), ENTRY(tsafe_backend_free), ENTRY(tsafe_backend_name),
    ENTRY(tsafe_backend_cpu_create_bfv), ENTRY(tsafe_backend_n), ENTRY(tsafe_backend_max_limbs),
    ENTRY(tsafe_backend_cpu_factory), ENTRY(tsafe_backend_create),
    ENTRY(tsafe_buffer_alloc_operand), ENTRY(tsafe_buffer_polys), ENTRY(tsafe_buffer_limbs),
    ENTRY(tsafe_buffer_host_words), ENTRY(tsafe_backend_mul_acc), ENTRY(tsafe_backend_mod_switch),
    ENTRY(tsafe_buffer_alloc), ENTRY(tsafe_buffer_free), ENTRY(tsafe_buffer_words),
    ENTRY(tsafe_buffer_upload), ENTRY(tsafe_buffer_download), ENTRY(tsafe_backend_ntt_forward),
    ENTRY(tsafe_backend_ntt_inverse), ENTRY(tsafe_backend_elementwise),
    ENTRY(tsafe_backend_rescale), ENTRY(tsafe_backend_synchronize),
    ENTRY(tsafe_backend_ntt_read),
};

/* ------------------------------------------------------- ckks_buffer.h */

CHECK_FN(tsafe_ciphertext_to_buffer)
{
    ERR(tsafe_ciphertext_to_buffer(NULL, f->ct, f->buf));
    ERR(tsafe_ciphertext_to_buffer(f->ctx, NULL, f->buf));
    ERR(tsafe_ciphertext_to_buffer(f->ctx, f->ct, NULL));
    IS(TSAFE_E_RANGE, tsafe_ciphertext_to_buffer(f->ctx, f->ct, f->buf1)); /* limbs */
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_ciphertext_to_buffer(f->ctx2, f->ct, f->buf));
    OK(tsafe_ciphertext_to_buffer(f->ctx, f->ct, f->buf));
}

CHECK_FN(tsafe_plaintext_to_buffer)
{
    tsafe_buffer *o = NULL;
    assert_int_equal(tsafe_buffer_alloc_operand(f->be, 1, 2, &o), TSAFE_OK);
    ERR(tsafe_plaintext_to_buffer(NULL, f->pt, o));
    ERR(tsafe_plaintext_to_buffer(f->ctx, NULL, o));
    ERR(tsafe_plaintext_to_buffer(f->ctx, f->pt, NULL));
    IS(TSAFE_E_RANGE, tsafe_plaintext_to_buffer(f->ctx, f->pt0, o)); /* level 0: 1 limb */
    IS(TSAFE_E_RANGE, tsafe_plaintext_to_buffer(f->ctx, f->pt, f->buf)); /* 2 polys */
    OK(tsafe_plaintext_to_buffer(f->ctx, f->pt, o));
    tsafe_buffer_free(o);
}

CHECK_FN(tsafe_plaintext_operand)
{
    tsafe_buffer *o = (tsafe_buffer *)1;
    IS(TSAFE_E_NULL, tsafe_plaintext_operand(f->ctx, f->pt, f->be, NULL));
    ERR(tsafe_plaintext_operand(NULL, f->pt, f->be, &o));
    assert_null(o);
    ERR(tsafe_plaintext_operand(f->ctx, NULL, f->be, &o));
    ERR(tsafe_plaintext_operand(f->ctx, f->pt, NULL, &o));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_plaintext_operand(f->ctx2, f->pt, f->be, &o));
    OK(tsafe_plaintext_operand(f->ctx, f->pt, f->be, &o)); /* not prepared: a copy */
    assert_int_equal(tsafe_buffer_limbs(o), tsafe_plaintext_level(f->pt) + 1);
    tsafe_buffer_free(o);
    tsafe_plaintext *prep = NULL;
    OK(tsafe_plaintext_create(f->ctx, &prep));
    OK(tsafe_ckks_encode(f->ctx, (double[2]){1, 2}, 2, tsafe_plaintext_scale(f->pt),
                         tsafe_plaintext_level(f->pt), prep));
    OK(tsafe_plaintext_prepare_mul(f->ctx, prep));
    OK(tsafe_plaintext_operand(f->ctx, prep, f->be, &o));
    /* borrowed from the plaintext on the CPU backend: never written */
    uint64_t *zeros = calloc(tsafe_buffer_words(o), sizeof *zeros);
    assert_non_null(zeros);
    IS(TSAFE_E_ARG, tsafe_buffer_upload(o, zeros, tsafe_buffer_words(o)));
    free(zeros);
    tsafe_buffer_free(o);
    tsafe_plaintext_free(prep);
}

CHECK_FN(tsafe_ciphertext_serialize_buffer)
{
    uint8_t small[8];
    size_t w = 1;
    ERR(tsafe_ciphertext_serialize_buffer(f->ctx, f->buf, 0x1p20, small, 8, NULL));
    ERR(tsafe_ciphertext_serialize_buffer(NULL, f->buf, 0x1p20, small, 8, &w));
    assert_int_equal(w, 0);
    ERR(tsafe_ciphertext_serialize_buffer(f->ctx, NULL, 0x1p20, small, 8, &w));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_ciphertext_serialize_buffer(f->ctx, f->buf, 0x1p20, small, 8, &w));
    size_t need = 0;
    OK(tsafe_ciphertext_serialized_size_at(f->ctx, 1, &need));
    assert_int_equal(w, need); /* the (unseeded) size at level 1 */
    IS(TSAFE_E_NULL, tsafe_ciphertext_serialize_buffer(f->ctx, f->buf, 0x1p20, NULL, 0, &w));
    uint8_t *big = malloc(need);
    assert_non_null(big);
    IS(TSAFE_E_SCALE, tsafe_ciphertext_serialize_buffer(f->ctx, f->buf, NAN, big, need, &w));
    IS(TSAFE_E_PARAMS_MISMATCH,
       tsafe_ciphertext_serialize_buffer(f->ctx2, f->buf, 0x1p20, big, need, &w));
    free(big);
}

CHECK_FN(tsafe_ckks_decrypt_coeffs_strided_buffer)
{
    double out[4];
    size_t stride = 1024 / 4;
    ERR(tsafe_ckks_decrypt_coeffs_strided_buffer(NULL, f->sk, f->buf, 1.0, stride, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, NULL, f->buf, 1.0, stride, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, f->sk, NULL, 1.0, stride, out, 4));
    ERR(tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, f->sk, f->buf, 1.0, stride, NULL, 4));
    IS(TSAFE_E_RANGE, tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, f->sk, f->buf, 1.0,
                                                                stride, out, 5));
    IS(TSAFE_E_ARG, tsafe_ckks_decrypt_coeffs_strided_buffer(f->ctx, f->sk, f->buf, 1.0, 3, out,
                                                              4));
}

static const api_case k_ckks_buffer[] = {
    ENTRY(tsafe_ciphertext_to_buffer), ENTRY(tsafe_plaintext_to_buffer),
    ENTRY(tsafe_plaintext_operand),
    ENTRY(tsafe_ciphertext_serialize_buffer), ENTRY(tsafe_ckks_decrypt_coeffs_strided_buffer),
};

/* ----------------------------------------------------- backend_impl.h */

CHECK_FN(tsafe_context_psi)
{
    assert_int_equal(tsafe_context_psi(NULL, 0), 0);
    assert_int_equal(tsafe_context_psi(f->ctx, 2), 0);
    assert_int_equal(tsafe_context_psi(f->ctx, UINT32_MAX), 0);
}

CHECK_FN(tsafe_context_log_n)
{
    assert_int_equal(tsafe_context_log_n(NULL), 0);
    assert_int_equal(tsafe_context_log_n(f->ctx), 10);
}

CHECK_FN(tsafe_backend_init)
{
    static const struct tsafe_backend_i empty = {0};
    tsafe_backend *b = NULL;
    ERR(tsafe_backend_init(NULL, TSAFE_BACKEND_API_VERSION, f->be->iface, NULL, f->ctx));
    ERR(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, NULL, NULL, f->ctx));
    ERR(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION + 1, f->be->iface, NULL, f->ctx));
    ERR(tsafe_backend_init(&b, -1, f->be->iface, NULL, f->ctx));
    ERR(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, f->be->iface, NULL, NULL));
    ERR(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, &empty, NULL, f->ctx));
    assert_null(b);
}

CHECK_FN(tsafe_backend_init_bfv)
{
    tsafe_backend *b = NULL;
    ERR(tsafe_backend_init_bfv(&b, TSAFE_BACKEND_API_VERSION, f->be->iface, NULL, NULL));
    ERR(tsafe_backend_init_bfv(NULL, TSAFE_BACKEND_API_VERSION, f->be->iface, NULL, NULL));
    assert_null(b);
}

CHECK_FN(tsafe_backend_log_n)
{
    assert_int_equal(tsafe_backend_log_n(NULL), 0);
    assert_int_equal(tsafe_backend_log_n(f->be), 10);
}

CHECK_FN(tsafe_backend_prime)
{
    assert_int_equal(tsafe_backend_prime(NULL, 0), 0);
    assert_int_equal(tsafe_backend_prime(f->be, 0), tsafe_context_prime(f->ctx, 0));
    assert_int_equal(tsafe_backend_prime(f->be, UINT32_MAX), 0);
}

CHECK_FN(tsafe_backend_psi)
{
    assert_int_equal(tsafe_backend_psi(NULL, 0), 0);
    assert_int_equal(tsafe_backend_psi(f->be, 0), tsafe_context_psi(f->ctx, 0));
    assert_int_equal(tsafe_backend_psi(f->be, UINT32_MAX), 0);
}

static const api_case k_backend_impl[] = {
    ENTRY(tsafe_context_psi), ENTRY(tsafe_context_log_n), ENTRY(tsafe_backend_init),
    ENTRY(tsafe_backend_init_bfv), ENTRY(tsafe_backend_log_n), ENTRY(tsafe_backend_prime),
    ENTRY(tsafe_backend_psi),
};

/* ---------------------------------------------------------- lora_he.h */

CHECK_FN(tsafe_lora_plan_auto)
{
    tsafe_lora_plan p;
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, 0.05, 1e-4, NULL));
    ERR(tsafe_lora_plan_auto(0, LR, 1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, 0, 1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(UINT32_MAX, LR, 1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, UINT32_MAX, 1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, NAN, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, -1.0, 0.05, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, 0.0, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, INFINITY, 1e-4, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, 0.05, 0.0, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1.0, 0.05, NAN, &p));
    ERR(tsafe_lora_plan_auto(LD, LR, 1e300, 1e300, 1e-9, &p));
}

CHECK_FN(tsafe_lora_plan_preset)
{
    tsafe_lora_plan p;
    ERR(tsafe_lora_plan_preset(NULL, LD, LR, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", LD, LR, 1.0, 0.05, NULL));
    ERR(tsafe_lora_plan_preset("no-such-preset", LD, LR, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", 0, LR, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", LD, 0, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", UINT32_MAX, UINT32_MAX, 1.0, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", LD, LR, NAN, 0.05, &p));
    ERR(tsafe_lora_plan_preset("seed-n16384", LD, LR, 1.0, -0.05, &p));
}

CHECK_FN(tsafe_lora_site_create)
{
    tsafe_lora_site *s = NULL;
    const tsafe_context *c = tsafe_lora_server_context(f->server);
    float bigA[LR * LD];
    memcpy(bigA, f->A, sizeof bigA);
    bigA[3] = 1.0f; /* above max_abs_a = 0.05 */
    ERR(tsafe_lora_site_create(NULL, &f->plan, f->A, f->B, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(c, NULL, f->A, f->B, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(c, &f->plan, NULL, f->B, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(c, &f->plan, f->A, NULL, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(c, &f->plan, f->A, f->B, LD, 1.0f, NULL));
    ERR(tsafe_lora_site_create(c, &f->plan, f->A, f->B, 0, 1.0f, &s));
    IS(TSAFE_E_VALUE_RANGE, tsafe_lora_site_create(c, &f->plan, bigA, f->B, LD, 1.0f, &s));
    bigA[3] = NAN;
    ERR(tsafe_lora_site_create(c, &f->plan, bigA, f->B, LD, 1.0f, &s));
    ERR(tsafe_lora_site_create(f->ctx, &f->plan, f->A, f->B, LD, 1.0f, &s)); /* other ctx */
    ERR(tsafe_lora_site_create(c, &f->plan, f->A, f->B, LD, NAN, &s));
    /* plans are plain structs: an edited one must not overrun the slots */
    tsafe_lora_plan bad = f->plan;
    bad.cols = 100000;
    ERR(tsafe_lora_site_create(c, &bad, f->A, f->B, LD, 1.0f, &s));
    bad = f->plan;
    bad.half = 100000;
    ERR(tsafe_lora_site_create(c, &bad, f->A, f->B, LD, 1.0f, &s));
    bad = f->plan;
    bad.n_batches = 0;
    ERR(tsafe_lora_site_create(c, &bad, f->A, f->B, LD, 1.0f, &s));
    assert_null(s);
    tsafe_lora_client *cl = NULL;
    uint8_t *req = NULL;
    size_t len = 0;
    bad = f->plan;
    bad.half = 100000;
    if (tsafe_lora_client_create(&bad, NULL, &cl) == TSAFE_OK) {
        ERR(tsafe_lora_client_encrypt(cl, f->x, &req, &len, NULL));
        tsafe_lora_client_free(cl);
    }
    assert_null(req);
}

CHECK_FN(tsafe_lora_site_free)
{
    tsafe_lora_site_free(NULL);
}

CHECK_FN(tsafe_lora_site_d_out)
{
    assert_int_equal(tsafe_lora_site_d_out(NULL), 0);
    assert_int_equal(tsafe_lora_site_d_out(f->site), LD);
}

CHECK_FN(tsafe_lora_site_rank)
{
    assert_int_equal(tsafe_lora_site_rank(NULL), 0);
    assert_int_equal(tsafe_lora_site_rank(f->site), LR);
}

CHECK_FN(tsafe_lora_site_plain_delta)
{
    ERR(tsafe_lora_site_plain_delta(NULL, f->x, f->delta));
    ERR(tsafe_lora_site_plain_delta(f->site, NULL, f->delta));
    ERR(tsafe_lora_site_plain_delta(f->site, f->x, NULL));
}

CHECK_FN(tsafe_lora_local_create)
{
    tsafe_lora_local *l = NULL;
    tsafe_lora_plan bad = f->plan;
    ERR(tsafe_lora_local_create(NULL, NULL, &l));
    ERR(tsafe_lora_local_create(&f->plan, NULL, NULL));
    bad.params.log_n = 0;
    ERR(tsafe_lora_local_create(&bad, NULL, &l));
    bad = f->plan;
    bad.level = 7;
    ERR(tsafe_lora_local_create(&bad, NULL, &l));
    bad = f->plan;
    bad.cols = 0;
    ERR(tsafe_lora_local_create(&bad, NULL, &l));
    assert_null(l);
}

CHECK_FN(tsafe_lora_local_free)
{
    tsafe_lora_local_free(NULL);
}

CHECK_FN(tsafe_lora_local_context)
{
    assert_null(tsafe_lora_local_context(NULL));
    assert_non_null(tsafe_lora_local_context(f->local));
}

static void local_checks(fixture *f, int want_u)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    float buf[LD];
    float *outs[1] = {buf}, *nullouts[1] = {NULL};
    float xbig[LD], xnan[LD];
    memcpy(xbig, f->x, sizeof xbig);
    memcpy(xnan, f->x, sizeof xnan);
    xbig[1] = 1e6f;
    xnan[1] = NAN;
#define LOCAL(l, s, n, x, o) \
    (want_u ? tsafe_lora_local_u(l, s, n, x, o, NULL) : tsafe_lora_local_delta(l, s, n, x, o, NULL))
    ERR(LOCAL(NULL, sites, 1, f->x, outs));
    ERR(LOCAL(f->local, NULL, 1, f->x, outs));
    ERR(LOCAL(f->local, nulls, 1, f->x, outs));
    ERR(LOCAL(f->local, sites, 1, NULL, outs));
    ERR(LOCAL(f->local, sites, 1, f->x, NULL));
    ERR(LOCAL(f->local, sites, 1, f->x, nullouts));
    ERR(LOCAL(f->local, sites, 1, xbig, outs));
    ERR(LOCAL(f->local, sites, 1, xnan, outs));
    ERR(LOCAL(f->local, sites, SIZE_MAX, f->x, outs));
#undef LOCAL
}

CHECK_FN(tsafe_lora_local_delta) { local_checks(f, 0); }
CHECK_FN(tsafe_lora_local_u) { local_checks(f, 1); }

/* An engine's function given NULLs / a NULL owner returns an error. */
static void engine_checks(fixture *f, tsafe_lora_engine e, int null_user_ok)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    float *ds[1] = {f->delta}, *nullds[1] = {NULL};
    assert_non_null(e.fn);
    ERR(e.fn(e.user, NULL, 1, f->x, ds, NULL));
    ERR(e.fn(e.user, nulls, 1, f->x, ds, NULL));
    ERR(e.fn(e.user, sites, 1, NULL, ds, NULL));
    ERR(e.fn(e.user, sites, 1, f->x, NULL, NULL));
    ERR(e.fn(e.user, sites, 1, f->x, nullds, NULL));
    if (!null_user_ok)
        ERR(e.fn(NULL, sites, 1, f->x, ds, NULL));
}

CHECK_FN(tsafe_lora_engine_plain)
{
    engine_checks(f, tsafe_lora_engine_plain(), 1);
}

CHECK_FN(tsafe_lora_engine_local)
{
    engine_checks(f, tsafe_lora_engine_local(NULL), 0);
    engine_checks(f, tsafe_lora_engine_local(f->local), 0);
}

/* counts its calls, makes CPU backends */
static int g_factory_calls;
static tsafe_status counting_create(void *user, const tsafe_context *ckks,
                                    const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    (void)user;
    g_factory_calls++;
    return tsafe_backend_create(NULL, ckks, bfv, out);
}
static tsafe_status failing_create(void *user, const tsafe_context *ckks,
                                   const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    (void)user;
    (void)ckks;
    (void)bfv;
    *out = NULL;
    return TSAFE_E_NO_DEVICE;
}
static const tsafe_backend_factory k_counting = {"counting", counting_create, NULL};
static const tsafe_backend_factory k_failing = {"failing", failing_create, NULL};

CHECK_FN(tsafe_lora_local_use_backend)
{
    ERR(tsafe_lora_local_use_backend(NULL, NULL));
    IS(TSAFE_E_NO_DEVICE, tsafe_lora_local_use_backend(f->local, &k_failing));
    int before = g_factory_calls;
    OK(tsafe_lora_local_use_backend(f->local, &k_counting));
    assert_int_equal(g_factory_calls, before + 1);
    OK(tsafe_lora_local_use_backend(f->local, NULL)); /* back to CPU */
}

static const api_case k_lora_he[] = {
    ENTRY(tsafe_lora_local_use_backend),
    ENTRY(tsafe_lora_engine_plain), ENTRY(tsafe_lora_engine_local),
    ENTRY(tsafe_lora_plan_auto), ENTRY(tsafe_lora_plan_preset), ENTRY(tsafe_lora_site_create),
    ENTRY(tsafe_lora_site_free), ENTRY(tsafe_lora_site_d_out), ENTRY(tsafe_lora_site_rank),
    ENTRY(tsafe_lora_site_plain_delta), ENTRY(tsafe_lora_local_create),
    ENTRY(tsafe_lora_local_free), ENTRY(tsafe_lora_local_context),
    ENTRY(tsafe_lora_local_delta), ENTRY(tsafe_lora_local_u),
};

/* --------------------------------------------------- lora_two_party.h */

CHECK_FN(tsafe_lora_bytes_free)
{
    tsafe_lora_bytes_free(NULL);
}

CHECK_FN(tsafe_lora_client_create)
{
    tsafe_lora_client *c = NULL;
    tsafe_lora_plan bad = f->plan;
    ERR(tsafe_lora_client_create(NULL, NULL, &c));
    ERR(tsafe_lora_client_create(&f->plan, NULL, NULL));
    bad.params.n_primes = 0;
    ERR(tsafe_lora_client_create(&bad, NULL, &c));
    bad = f->plan;
    bad.cols = 0;
    ERR(tsafe_lora_client_create(&bad, NULL, &c));
    assert_null(c);
}

CHECK_FN(tsafe_lora_client_free)
{
    tsafe_lora_client_free(NULL);
}

CHECK_FN(tsafe_lora_client_encrypt)
{
    uint8_t *req = NULL;
    size_t len = 0;
    float xbig[LD];
    memcpy(xbig, f->x, sizeof xbig);
    xbig[0] = 1e9f;
    ERR(tsafe_lora_client_encrypt(NULL, f->x, &req, &len, NULL));
    ERR(tsafe_lora_client_encrypt(f->client, NULL, &req, &len, NULL));
    ERR(tsafe_lora_client_encrypt(f->client, f->x, NULL, &len, NULL));
    ERR(tsafe_lora_client_encrypt(f->client, f->x, &req, NULL, NULL));
    ERR(tsafe_lora_client_encrypt(f->client, xbig, &req, &len, NULL));
    xbig[0] = NAN;
    ERR(tsafe_lora_client_encrypt(f->client, xbig, &req, &len, NULL));
    assert_null(req);
}

CHECK_FN(tsafe_lora_client_decode)
{
    float *us[1] = {f->u}, *nulls[1] = {NULL};
    uint32_t ranks[1] = {LR}, bad_ranks[1] = {LR + 1}, zero[1] = {0};
    ERR(tsafe_lora_client_decode(NULL, f->resp, f->resp_len, 1, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, NULL, f->resp_len, 1, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, NULL, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, ranks, NULL, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, ranks, nulls, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, 0, 1, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len - 1, 1, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 0, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 2, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, SIZE_MAX, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, bad_ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, zero, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->req, f->req_len, 1, ranks, us, NULL));
}

CHECK_FN(tsafe_lora_client_release)
{
    float u[LR] = {0.1f, 0.2f, 0.3f, 0.4f};
    float *us[1] = {u}, *nulls[1] = {NULL};
    uint32_t ranks[1] = {LR}, zero[1] = {0};
    uint8_t *msg = NULL;
    size_t len = 0;
    ERR(tsafe_lora_client_release(NULL, 1, ranks, us, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, NULL, us, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, ranks, NULL, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, ranks, nulls, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, ranks, us, NULL, NULL, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, ranks, us, NULL, &msg, NULL, NULL));
    ERR(tsafe_lora_client_release(f->client, 0, ranks, us, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, SIZE_MAX, ranks, us, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, zero, us, NULL, &msg, &len, NULL));
    /* NOTE: a NaN in u is released as is (the server refuses it on apply) */
    assert_null(msg);
}

CHECK_FN(tsafe_lora_server_create)
{
    tsafe_lora_server *s = NULL;
    tsafe_lora_plan bad = f->plan;
    ERR(tsafe_lora_server_create(NULL, &s));
    ERR(tsafe_lora_server_create(&f->plan, NULL));
    bad.params.log_n = 99;
    ERR(tsafe_lora_server_create(&bad, &s));
    assert_null(s);
}

CHECK_FN(tsafe_lora_server_free)
{
    tsafe_lora_server_free(NULL);
}

CHECK_FN(tsafe_lora_server_context)
{
    assert_null(tsafe_lora_server_context(NULL));
}

CHECK_FN(tsafe_lora_server_process)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    uint8_t *resp = NULL;
    size_t len = 0;
    ERR(tsafe_lora_server_process(NULL, sites, 1, f->req, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, NULL, 1, f->req, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, nulls, 1, f->req, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 0, f->req, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, SIZE_MAX, f->req, f->req_len, &resp, &len,
                                  NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, NULL, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->req, 0, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->req, f->req_len - 1, &resp, &len,
                                  NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->req, f->req_len, NULL, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->req, f->req_len, &resp, NULL, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->resp, f->resp_len, &resp, &len,
                                  NULL));
    assert_null(resp);
}

CHECK_FN(tsafe_lora_server_response_size)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    size_t n = 1;
    ERR(tsafe_lora_server_response_size(NULL, sites, 1, &n));
    ERR(tsafe_lora_server_response_size(f->server, NULL, 1, &n));
    ERR(tsafe_lora_server_response_size(f->server, nulls, 1, &n));
    ERR(tsafe_lora_server_response_size(f->server, sites, 0, &n));
    ERR(tsafe_lora_server_response_size(f->server, sites, SIZE_MAX, &n));
    ERR(tsafe_lora_server_response_size(f->server, sites, 1, NULL));
    assert_int_equal(n, 0);
    OK(tsafe_lora_server_response_size(f->server, sites, 1, &n));
    assert_int_equal(n, f->resp_len);
}

CHECK_FN(tsafe_lora_server_process_into)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    size_t cap = f->resp_len, len = 1;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    ERR(tsafe_lora_server_process_into(NULL, sites, 1, f->req, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, NULL, 1, f->req, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, nulls, 1, f->req, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 0, f->req, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, SIZE_MAX, f->req, f->req_len, buf,
                                       cap, &len, NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, NULL, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->req, 0, buf, cap, &len, NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->req, f->req_len - 1, buf, cap,
                                       &len, NULL));
    assert_int_equal(len, 0);
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->req, f->req_len, NULL, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->req, f->req_len, buf, cap, NULL,
                                       NULL));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_lora_server_process_into(f->server, sites, 1, f->req,
                                                            f->req_len, buf, cap - 1, &len,
                                                            NULL));
    assert_int_equal(len, cap); /* the size needed */
    IS(TSAFE_E_BUFFER_SMALL, tsafe_lora_server_process_into(f->server, sites, 1, f->req,
                                                            f->req_len, buf, 0, &len, NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->resp, f->resp_len, buf, cap,
                                       &len, NULL));
    free(buf);
}

CHECK_FN(tsafe_lora_server_apply)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    float *ds[1] = {f->delta}, *nullds[1] = {NULL};
    ERR(tsafe_lora_server_apply(NULL, sites, 1, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, NULL, 1, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, nulls, 1, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 0, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, SIZE_MAX, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, NULL, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->umsg, 0, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->umsg, f->umsg_len - 1, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->umsg, f->umsg_len, NULL, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->umsg, f->umsg_len, nullds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->req, f->req_len, ds, NULL));
}

CHECK_FN(tsafe_lora_engine_two_party)
{
    tsafe_lora_pair pair = {f->client, f->server, NULL}, half = {NULL, f->server, NULL};
    engine_checks(f, tsafe_lora_engine_two_party(NULL), 0);
    engine_checks(f, tsafe_lora_engine_two_party(&half), 0);
    engine_checks(f, tsafe_lora_engine_two_party(&pair), 0);
}

CHECK_FN(tsafe_lora_server_use_backend)
{
    ERR(tsafe_lora_server_use_backend(NULL, NULL));
    IS(TSAFE_E_NO_DEVICE, tsafe_lora_server_use_backend(f->server, &k_failing));
    assert_string_equal(tsafe_lora_server_backend_name(f->server), "cpu"); /* kept */
    OK(tsafe_lora_server_use_backend(f->server, &k_counting));
    OK(tsafe_lora_server_use_backend(f->server, NULL));
}

CHECK_FN(tsafe_lora_server_backend_name)
{
    assert_string_equal(tsafe_lora_server_backend_name(NULL), "none");
    assert_string_equal(tsafe_lora_server_backend_name(f->server), "cpu");
}

CHECK_FN(tsafe_lora_pair_use_backend)
{
    tsafe_lora_pair empty = {NULL, NULL, NULL}, pair = {f->client, f->server, NULL};
    ERR(tsafe_lora_pair_use_backend(NULL, NULL));
    ERR(tsafe_lora_pair_use_backend(&empty, NULL));
    IS(TSAFE_E_NO_DEVICE, tsafe_lora_pair_use_backend(&pair, &k_failing));
    OK(tsafe_lora_pair_use_backend(&pair, NULL));
}

static const api_case k_lora_two_party[] = {
    ENTRY(tsafe_lora_server_use_backend), ENTRY(tsafe_lora_server_backend_name),
    ENTRY(tsafe_lora_pair_use_backend),
    ENTRY(tsafe_lora_engine_two_party),
    ENTRY(tsafe_lora_bytes_free), ENTRY(tsafe_lora_client_create),
    ENTRY(tsafe_lora_client_free), ENTRY(tsafe_lora_client_encrypt),
    ENTRY(tsafe_lora_client_decode), ENTRY(tsafe_lora_client_release),
    ENTRY(tsafe_lora_server_create), ENTRY(tsafe_lora_server_free),
    ENTRY(tsafe_lora_server_context), ENTRY(tsafe_lora_server_process),
    ENTRY(tsafe_lora_server_response_size), ENTRY(tsafe_lora_server_process_into),
    ENTRY(tsafe_lora_server_apply),
};

/* ---------------------------------------------------------- lora_dp.h */

static const double k_bad_doubles[] = {0.0, -1.0, NAN, INFINITY, -INFINITY};

CHECK_FN(tsafe_dp_sigma_analytic)
{
    double s = 0;
    ERR(tsafe_dp_sigma_analytic(1.0, 1e-5, 1.0, NULL));
    for (size_t i = 0; i < 5; i++) {
        ERR(tsafe_dp_sigma_analytic(k_bad_doubles[i], 1e-5, 1.0, &s));
        ERR(tsafe_dp_sigma_analytic(1.0, k_bad_doubles[i], 1.0, &s));
        ERR(tsafe_dp_sigma_analytic(1.0, 1e-5, k_bad_doubles[i], &s));
    }
    ERR(tsafe_dp_sigma_analytic(1.0, 1.0, 1.0, &s));
    ERR(tsafe_dp_sigma_analytic(1.0, 2.0, 1.0, &s));
}

CHECK_FN(tsafe_dp_gaussian_delta)
{
    double d = 0;
    ERR(tsafe_dp_gaussian_delta(1.0, 1.0, NULL));
    ERR(tsafe_dp_gaussian_delta(-1.0, 1.0, &d));
    ERR(tsafe_dp_gaussian_delta(NAN, 1.0, &d));
    ERR(tsafe_dp_gaussian_delta(1.0, 0.0, &d));
    ERR(tsafe_dp_gaussian_delta(1.0, -1.0, &d));
    ERR(tsafe_dp_gaussian_delta(1.0, NAN, &d));
}

CHECK_FN(tsafe_dp_epsilon_spent)
{
    double e = 0;
    ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, 10, 1e-5, NULL));
    ERR(tsafe_dp_epsilon_spent((tsafe_dp_accountant)7, 1.0, 1.0, 10, 1e-5, &e));
    ERR(tsafe_dp_epsilon_spent((tsafe_dp_accountant)-1, 1.0, 1.0, 10, 1e-5, &e));
    for (size_t i = 0; i < 5; i++) {
        ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_GDP, k_bad_doubles[i], 1.0, 10, 1e-5, &e));
        ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, 1.0, k_bad_doubles[i], 10, 1e-5, &e));
        ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, 10, k_bad_doubles[i], &e));
    }
    ERR(tsafe_dp_epsilon_spent(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, 10, 1.0, &e));
}

CHECK_FN(tsafe_dp_max_releases)
{
    uint64_t c = 0;
    ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, 1.0, 1e-5, NULL));
    ERR(tsafe_dp_max_releases((tsafe_dp_accountant)7, 1.0, 1.0, 1.0, 1e-5, &c));
    for (size_t i = 0; i < 5; i++) {
        ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_RDP, k_bad_doubles[i], 1.0, 1.0, 1e-5, &c));
        ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_GDP, 1.0, k_bad_doubles[i], 1.0, 1e-5, &c));
        ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_RDP, 1.0, 1.0, k_bad_doubles[i], 1e-5, &c));
        ERR(tsafe_dp_max_releases(TSAFE_DP_ACCOUNTANT_GDP, 1.0, 1.0, 1.0, k_bad_doubles[i], &c));
    }
}

CHECK_FN(tsafe_dp_clip_l2)
{
    float v[3] = {3, 4, 0};
    double nb;
    ERR(tsafe_dp_clip_l2(NULL, 3, 1.0, &nb));
    for (size_t i = 0; i < 5; i++)
        ERR(tsafe_dp_clip_l2(v, 3, k_bad_doubles[i], &nb));
    v[2] = NAN;
    IS(TSAFE_E_VALUE_RANGE, tsafe_dp_clip_l2(v, 3, 1.0, &nb));
    assert_true(v[0] == 3.0f && v[1] == 4.0f); /* untouched */
    v[2] = INFINITY;
    IS(TSAFE_E_VALUE_RANGE, tsafe_dp_clip_l2(v, 3, 1.0, NULL));
}

CHECK_FN(tsafe_dp_gaussian_fill)
{
    double out[4];
    ERR(tsafe_dp_gaussian_fill(NULL, 4, 1.0));
    ERR(tsafe_dp_gaussian_fill(out, 4, -1.0));
    ERR(tsafe_dp_gaussian_fill(out, 4, NAN));
    ERR(tsafe_dp_gaussian_fill(out, 4, INFINITY));
}

CHECK_FN(tsafe_dp_add_gaussian_noise)
{
    float v[4] = {0};
    ERR(tsafe_dp_add_gaussian_noise(NULL, 4, 1.0));
    ERR(tsafe_dp_add_gaussian_noise(v, 4, -1.0));
    ERR(tsafe_dp_add_gaussian_noise(v, 4, NAN));
    ERR(tsafe_dp_add_gaussian_noise(v, 4, INFINITY));
}

CHECK_FN(tsafe_dp_session_create)
{
    tsafe_dp_session *s = NULL;
    tsafe_dp_params base, p;
    memset(&base, 0, sizeof base);
    base.clip_norm = 1.0;
    base.eps = 1.0;
    base.delta = 1e-6;
    base.eps_total = 10.0;
    base.delta_total = 1e-5;
    ERR(tsafe_dp_session_create(NULL, &s));
    ERR(tsafe_dp_session_create(&base, NULL));
    for (size_t i = 0; i < 5; i++) {
        double b = k_bad_doubles[i];
        p = base; p.clip_norm = b; ERR(tsafe_dp_session_create(&p, &s));
        p = base; p.eps_total = b; ERR(tsafe_dp_session_create(&p, &s));
        p = base; p.delta_total = b; ERR(tsafe_dp_session_create(&p, &s));
        p = base; p.eps = b; ERR(tsafe_dp_session_create(&p, &s));
        p = base; p.delta = b; ERR(tsafe_dp_session_create(&p, &s));
        if (b != 0.0) {
            p = base; p.sensitivity = b; ERR(tsafe_dp_session_create(&p, &s));
            p = base; p.sigma = b; ERR(tsafe_dp_session_create(&p, &s));
        }
    }
    p = base; p.delta_total = 1.0; ERR(tsafe_dp_session_create(&p, &s));
    p = base; p.accountant = (tsafe_dp_accountant)9; ERR(tsafe_dp_session_create(&p, &s));
    p = base; p.eps_total = 1e-9; IS(TSAFE_E_BUDGET, tsafe_dp_session_create(&p, &s));
    assert_null(s);
}

CHECK_FN(tsafe_dp_session_free)
{
    tsafe_dp_session_free(NULL);
}

CHECK_FN(tsafe_dp_session_release)
{
    float v[4] = {1, 2, 3, NAN};
    tsafe_dp_stats before, after;
    OK(tsafe_dp_session_stats(f->dp, &before));
    ERR(tsafe_dp_session_release(NULL, v, 3));
    ERR(tsafe_dp_session_release(f->dp, NULL, 3));
    ERR(tsafe_dp_session_release(f->dp, v, 4)); /* NaN */
    OK(tsafe_dp_session_stats(f->dp, &after));
    assert_true(after.releases == before.releases); /* nothing charged */
}

CHECK_FN(tsafe_dp_session_stats)
{
    tsafe_dp_stats st;
    ERR(tsafe_dp_session_stats(NULL, &st));
    ERR(tsafe_dp_session_stats(f->dp, NULL));
}

static const api_case k_lora_dp[] = {
    ENTRY(tsafe_dp_sigma_analytic), ENTRY(tsafe_dp_gaussian_delta),
    ENTRY(tsafe_dp_epsilon_spent), ENTRY(tsafe_dp_max_releases), ENTRY(tsafe_dp_clip_l2),
    ENTRY(tsafe_dp_gaussian_fill), ENTRY(tsafe_dp_add_gaussian_noise),
    ENTRY(tsafe_dp_session_create), ENTRY(tsafe_dp_session_free),
    ENTRY(tsafe_dp_session_release), ENTRY(tsafe_dp_session_stats),
};

/* --------------------------------------------------------- lora_svd.h */

CHECK_FN(tsafe_svd_reduce)
{
    float A[2 * 3] = {1, 2, 3, 4, 5, 6}, B[3 * 2] = {1, 0, 0, 1, 1, 1};
    tsafe_svd_options o = {TSAFE_SVD_FIXED_RANK, 1, 0.0, 0}, bad;
    tsafe_svd_result *r = NULL;
    ERR(tsafe_svd_reduce(NULL, B, 2, 3, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, NULL, 2, 3, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, B, 2, 3, 3, NULL, &r));
    ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &o, NULL));
    ERR(tsafe_svd_reduce(A, B, 0, 3, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, B, 2, 0, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, B, 2, 3, 0, &o, &r));
    ERR(tsafe_svd_reduce(A, B, (size_t)INT_MAX + 1, 3, 3, &o, &r));
    ERR(tsafe_svd_reduce(A, B, 2, SIZE_MAX, 3, &o, &r));
    bad = o; bad.rank = 0; ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad = o; bad.rank = 3; IS(TSAFE_E_RANGE, tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad = o; bad.select = (tsafe_svd_select)9; ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad = o; bad.select = TSAFE_SVD_ENERGY; bad.energy = 0.0;
    ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad.energy = 1.5; ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    bad.energy = NAN; ERR(tsafe_svd_reduce(A, B, 2, 3, 3, &bad, &r));
    A[0] = NAN;
    IS(TSAFE_E_VALUE_RANGE, tsafe_svd_reduce(A, B, 2, 3, 3, &o, &r));
    assert_null(r);
}

CHECK_FN(tsafe_svd_result_free)
{
    tsafe_svd_result_free(NULL);
}

static const api_case k_lora_svd[] = {ENTRY(tsafe_svd_reduce), ENTRY(tsafe_svd_result_free)};

/* ----------------------------------------------------- lora_package.h */

CHECK_FN(tsafe_package_keypair)
{
    uint8_t pk[32], sk[64];
    ERR(tsafe_package_keypair(NULL, sk));
    ERR(tsafe_package_keypair(pk, NULL));
}

CHECK_FN(tsafe_package_create)
{
    static const char *const targets[2] = {"q_proj", ""};
    tsafe_package_manifest good = {.adapter_id = "id", .domain = "d", .rank = 2,
        .alpha = 4.0, .targets = targets, .n_targets = 1,
        .price_per_1k_tokens = 0.5, .creator = "c"}, m;
    uint8_t *out = NULL, junk_sk[64];
    size_t len = 0;
    memset(junk_sk, 0x42, sizeof junk_sk);
    ERR(tsafe_package_create(NULL, NULL, 0, f->pkg_sk, &out, &len));
    ERR(tsafe_package_create(&good, NULL, 0, NULL, &out, &len));
    ERR(tsafe_package_create(&good, NULL, 0, f->pkg_sk, NULL, &len));
    ERR(tsafe_package_create(&good, NULL, 0, f->pkg_sk, &out, NULL));
    ERR(tsafe_package_create(&good, NULL, 5, f->pkg_sk, &out, &len));
    IS(TSAFE_E_KEY, tsafe_package_create(&good, NULL, 0, junk_sk, &out, &len));
    m = good; m.adapter_id = NULL; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.adapter_id = ""; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.domain = NULL; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.creator = NULL; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.rank = 0; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.alpha = 0; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.alpha = NAN; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.price_per_1k_tokens = -1;
    ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.price_per_1k_tokens = INFINITY;
    ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.targets = NULL; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.n_targets = 2; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.n_targets = TSAFE_PACKAGE_MAX_TARGETS + 1;
    ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    char *longs = malloc(TSAFE_PACKAGE_MAX_STRING + 2);
    memset(longs, 'a', TSAFE_PACKAGE_MAX_STRING + 1);
    longs[TSAFE_PACKAGE_MAX_STRING + 1] = '\0';
    m = good; m.adapter_id = longs; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    free(longs);
    m = good; m.adapter_id = "\xff\xfe"; /* not UTF-8 */
    ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    assert_null(out);
}

CHECK_FN(tsafe_package_bytes_free)
{
    tsafe_package_bytes_free(NULL);
}

CHECK_FN(tsafe_package_open)
{
    tsafe_package *p = NULL;
    uint8_t zero_pk[32] = {0};
    ERR(tsafe_package_open(NULL, f->pkg_len, f->pkg_pk, &p));
    ERR(tsafe_package_open(f->pkg, f->pkg_len, NULL, &p));
    ERR(tsafe_package_open(f->pkg, f->pkg_len, f->pkg_pk, NULL));
    IS(TSAFE_E_TRUNCATED, tsafe_package_open(f->pkg, 0, f->pkg_pk, &p));
    ERR(tsafe_package_open(f->pkg, f->pkg_len - 1, f->pkg_pk, &p));
    IS(TSAFE_E_KEY, tsafe_package_open(f->pkg, f->pkg_len, zero_pk, &p));
    assert_null(p);
}

CHECK_FN(tsafe_package_free)
{
    tsafe_package_free(NULL);
}

CHECK_FN(tsafe_package_manifest_get)
{
    tsafe_package_manifest m;
    ERR(tsafe_package_manifest_get(NULL, &m));
    ERR(tsafe_package_manifest_get(f->package, NULL));
}

CHECK_FN(tsafe_package_payload)
{
    const uint8_t *d;
    size_t n;
    ERR(tsafe_package_payload(NULL, &d, &n));
    ERR(tsafe_package_payload(f->package, NULL, &n));
    ERR(tsafe_package_payload(f->package, &d, NULL));
}

CHECK_FN(tsafe_package_payload_digest)
{
    uint8_t d[32];
    ERR(tsafe_package_payload_digest(NULL, d));
    ERR(tsafe_package_payload_digest(f->package, NULL));
}

CHECK_FN(tsafe_package_manifest_json)
{
    assert_null(tsafe_package_manifest_json(NULL));
    assert_non_null(tsafe_package_manifest_json(f->package));
}

static const api_case k_lora_package[] = {
    ENTRY(tsafe_package_keypair), ENTRY(tsafe_package_create), ENTRY(tsafe_package_bytes_free),
    ENTRY(tsafe_package_open), ENTRY(tsafe_package_free), ENTRY(tsafe_package_manifest_get),
    ENTRY(tsafe_package_payload), ENTRY(tsafe_package_payload_digest),
    ENTRY(tsafe_package_manifest_json),
};

/* ---------------------------------------------------- lora_registry.h */

CHECK_FN(tsafe_registry_create)
{
    ERR(tsafe_registry_create(NULL));
}

CHECK_FN(tsafe_registry_free)
{
    tsafe_registry_free(NULL);
}

CHECK_FN(tsafe_registry_put)
{
    static int obj;
    tsafe_registry_meta ok = {"a", 1.0, NULL}, m;
    char *longs = malloc(TSAFE_REGISTRY_MAX_NAME + 2);
    memset(longs, 's', TSAFE_REGISTRY_MAX_NAME + 1);
    longs[TSAFE_REGISTRY_MAX_NAME + 1] = '\0';
    int before = f->destroyed;
    ERR(tsafe_registry_put(NULL, "s", &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, NULL, &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, "", &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, longs, &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, "\xc3\x28", &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, NULL));
    m = ok; m.adapter_id = NULL; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    m = ok; m.adapter_id = ""; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    m = ok; m.adapter_id = longs; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    m = ok; m.price_per_1k_tokens = -1; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    m = ok; m.price_per_1k_tokens = NAN; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    tsafe_lora_origin o = {(tsafe_lora_origin_kind)7, {0}, {0}, NULL};
    m = ok; m.origin = &o; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    o.kind = TSAFE_LORA_ORIGIN_UNSIGNED;
    o.path = "\xc3\x28"; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    o.path = ""; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    free(longs);
    assert_int_equal(f->destroyed, before); /* the caller still owns obj */
}

CHECK_FN(tsafe_registry_set_allow_unsigned)
{
    ERR(tsafe_registry_set_allow_unsigned(NULL, 1));
    IS(TSAFE_OK, tsafe_registry_set_allow_unsigned(f->reg, 1)); /* the fixture's setting */
}

CHECK_FN(tsafe_registry_ref_origin)
{
    tsafe_lora_origin o;
    ERR(tsafe_registry_ref_origin(NULL, &o));
    ERR(tsafe_registry_ref_origin(f->ref, NULL));
    IS(TSAFE_OK, tsafe_registry_ref_origin(f->ref, &o));
    assert_int_equal(o.kind, TSAFE_LORA_ORIGIN_UNSIGNED);
}

CHECK_FN(tsafe_registry_remove)
{
    ERR(tsafe_registry_remove(NULL, "slot"));
    ERR(tsafe_registry_remove(f->reg, NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_registry_remove(f->reg, "no-such-slot"));
}

CHECK_FN(tsafe_registry_acquire)
{
    tsafe_registry_ref *r = (tsafe_registry_ref *)&r;
    ERR(tsafe_registry_acquire(NULL, "slot", &r));
    ERR(tsafe_registry_acquire(f->reg, NULL, &r));
    ERR(tsafe_registry_acquire(f->reg, "slot", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_registry_acquire(f->reg, "no-such-slot", &r));
    assert_null(r);
}

CHECK_FN(tsafe_registry_release)
{
    tsafe_registry_release(NULL);
}

CHECK_FN(tsafe_registry_ref_object)
{
    assert_null(tsafe_registry_ref_object(NULL));
    assert_non_null(tsafe_registry_ref_object(f->ref));
}

CHECK_FN(tsafe_registry_ref_adapter_id)
{
    assert_null(tsafe_registry_ref_adapter_id(NULL));
}

CHECK_FN(tsafe_registry_ref_price)
{
    (void)tsafe_registry_ref_price(NULL);
}

CHECK_FN(tsafe_registry_ref_generation)
{
    assert_int_equal(tsafe_registry_ref_generation(NULL), 0);
}

CHECK_FN(tsafe_registry_meter)
{
    ERR(tsafe_registry_meter(NULL, 1, 1, 1, 1));
}

CHECK_FN(tsafe_registry_slot_counters)
{
    tsafe_registry_counters c;
    ERR(tsafe_registry_slot_counters(NULL, "slot", &c));
    ERR(tsafe_registry_slot_counters(f->reg, NULL, &c));
    ERR(tsafe_registry_slot_counters(f->reg, "slot", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_registry_slot_counters(f->reg, "never-seen", &c));
}

CHECK_FN(tsafe_registry_adapter_counters)
{
    tsafe_registry_counters c;
    ERR(tsafe_registry_adapter_counters(NULL, "adapter-1", &c));
    ERR(tsafe_registry_adapter_counters(f->reg, NULL, &c));
    ERR(tsafe_registry_adapter_counters(f->reg, "adapter-1", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_registry_adapter_counters(f->reg, "never-seen", &c));
}

CHECK_FN(tsafe_registry_metering_json)
{
    char *j = NULL;
    ERR(tsafe_registry_metering_json(NULL, &j));
    ERR(tsafe_registry_metering_json(f->reg, NULL));
    assert_null(j);
}

static const api_case k_lora_registry[] = {
    ENTRY(tsafe_registry_create), ENTRY(tsafe_registry_free), ENTRY(tsafe_registry_put),
    ENTRY(tsafe_registry_set_allow_unsigned), ENTRY(tsafe_registry_ref_origin),
    ENTRY(tsafe_registry_remove), ENTRY(tsafe_registry_acquire), ENTRY(tsafe_registry_release),
    ENTRY(tsafe_registry_ref_object), ENTRY(tsafe_registry_ref_adapter_id),
    ENTRY(tsafe_registry_ref_price), ENTRY(tsafe_registry_ref_generation),
    ENTRY(tsafe_registry_meter), ENTRY(tsafe_registry_slot_counters),
    ENTRY(tsafe_registry_adapter_counters), ENTRY(tsafe_registry_metering_json),
};

/* ------------------------------------------------------ safetensors.h */

CHECK_FN(tsafe_dtype_name)
{
    assert_string_equal(tsafe_dtype_name((tsafe_dtype)99), "INVALID");
    assert_string_equal(tsafe_dtype_name((tsafe_dtype)-1), "INVALID");
    assert_string_equal(tsafe_dtype_name(TSAFE_DTYPE_INVALID), "INVALID");
}

CHECK_FN(tsafe_dtype_size)
{
    assert_int_equal(tsafe_dtype_size((tsafe_dtype)99), 0);
    assert_int_equal(tsafe_dtype_size((tsafe_dtype)-1), 0);
    assert_int_equal(tsafe_dtype_size(TSAFE_DTYPE_INVALID), 0);
}

CHECK_FN(tsafe_dtype_from_name)
{
    assert_int_equal(tsafe_dtype_from_name(NULL), TSAFE_DTYPE_INVALID);
    assert_int_equal(tsafe_dtype_from_name(""), TSAFE_DTYPE_INVALID);
    assert_int_equal(tsafe_dtype_from_name("f32"), TSAFE_DTYPE_INVALID);
}

CHECK_FN(tsafe_f16_to_f32)
{
    assert_true(isinf(tsafe_f16_to_f32(0x7C00)));
    assert_true(isnan(tsafe_f16_to_f32(0xFFFF)));
}

CHECK_FN(tsafe_bf16_to_f32)
{
    assert_true(isinf(tsafe_bf16_to_f32(0xFF80)));
    assert_true(isnan(tsafe_bf16_to_f32(0x7FC1)));
}

CHECK_FN(tsafe_f32_to_f16)
{
    assert_int_equal(tsafe_f32_to_f16(1e30f), 0x7C00);
    assert_true((tsafe_f32_to_f16(NAN) & 0x7FFF) > 0x7C00);
}

CHECK_FN(tsafe_f32_to_bf16)
{
    assert_true((tsafe_f32_to_bf16(NAN) & 0x7FFF) > 0x7F80);
    assert_int_equal(tsafe_f32_to_bf16(INFINITY), 0x7F80);
}

static void parse_checks(fixture *f, int borrowed)
{
    tsafe_safetensors *st = NULL;
#define PARSE(d, n, o) \
    (borrowed ? tsafe_safetensors_parse_borrowed(d, n, o) : tsafe_safetensors_parse(d, n, o))
    ERR(PARSE(NULL, f->st_len, &st));
    ERR(PARSE(f->st_bytes, f->st_len, NULL));
    IS(TSAFE_E_TRUNCATED, PARSE(f->st_bytes, 0, &st));
    ERR(PARSE(f->st_bytes, f->st_len - 1, &st));
    ERR(PARSE(NULL, 0, &st));
#undef PARSE
    assert_null(st);
}

CHECK_FN(tsafe_safetensors_parse) { parse_checks(f, 0); }
CHECK_FN(tsafe_safetensors_parse_borrowed) { parse_checks(f, 1); }

CHECK_FN(tsafe_safetensors_open_file)
{
    tsafe_safetensors *st = NULL;
    ERR(tsafe_safetensors_open_file(NULL, &st));
    ERR(tsafe_safetensors_open_file("tests", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_safetensors_open_file("/nonexistent/x.safetensors", &st));
    ERR(tsafe_safetensors_open_file("/", &st)); /* a directory */
    ERR(tsafe_safetensors_open_file("", &st));
    assert_null(st);
}

CHECK_FN(tsafe_safetensors_free)
{
    tsafe_safetensors_free(NULL);
}

CHECK_FN(tsafe_safetensors_tensor_count)
{
    assert_int_equal(tsafe_safetensors_tensor_count(NULL), 0);
    assert_int_equal(tsafe_safetensors_tensor_count(f->st), 2);
}

CHECK_FN(tsafe_safetensors_tensor_at)
{
    tsafe_tensor_info ti;
    ERR(tsafe_safetensors_tensor_at(NULL, 0, &ti));
    ERR(tsafe_safetensors_tensor_at(f->st, 0, NULL));
    IS(TSAFE_E_RANGE, tsafe_safetensors_tensor_at(f->st, 2, &ti));
    IS(TSAFE_E_RANGE, tsafe_safetensors_tensor_at(f->st, SIZE_MAX, &ti));
}

CHECK_FN(tsafe_safetensors_find)
{
    tsafe_tensor_info ti;
    ERR(tsafe_safetensors_find(NULL, "a", &ti));
    ERR(tsafe_safetensors_find(f->st, NULL, &ti));
    IS(TSAFE_E_NOT_FOUND, tsafe_safetensors_find(f->st, "zz", &ti));
    IS(TSAFE_E_NOT_FOUND, tsafe_safetensors_find(f->st, "__metadata__", &ti));
    OK(tsafe_safetensors_find(f->st, "a", NULL)); /* documented: presence test */
}

CHECK_FN(tsafe_safetensors_tensor_data)
{
    const void *d;
    size_t n;
    ERR(tsafe_safetensors_tensor_data(NULL, "a", &d, &n));
    ERR(tsafe_safetensors_tensor_data(f->st, NULL, &d, &n));
    ERR(tsafe_safetensors_tensor_data(f->st, "a", NULL, &n));
    ERR(tsafe_safetensors_tensor_data(f->st, "a", &d, NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_safetensors_tensor_data(f->st, "zz", &d, &n));
}

CHECK_FN(tsafe_safetensors_read_f32)
{
    float out[32];
    ERR(tsafe_safetensors_read_f32(NULL, "a", out, 16));
    ERR(tsafe_safetensors_read_f32(f->st, NULL, out, 16));
    ERR(tsafe_safetensors_read_f32(f->st, "a", NULL, 16));
    IS(TSAFE_E_ARG, tsafe_safetensors_read_f32(f->st, "a", out, 15));
    IS(TSAFE_E_ARG, tsafe_safetensors_read_f32(f->st, "a", out, 17));
    IS(TSAFE_E_DTYPE, tsafe_safetensors_read_f32(f->st, "i", out, 2));
    IS(TSAFE_E_NOT_FOUND, tsafe_safetensors_read_f32(f->st, "zz", out, 1));
}

CHECK_FN(tsafe_safetensors_read_f32_range)
{
    float out[32];
    ERR(tsafe_safetensors_read_f32_range(NULL, "a", 0, 4, out));
    ERR(tsafe_safetensors_read_f32_range(f->st, NULL, 0, 4, out));
    ERR(tsafe_safetensors_read_f32_range(f->st, "a", 0, 4, NULL));
    IS(TSAFE_E_RANGE, tsafe_safetensors_read_f32_range(f->st, "a", 17, 0, out));
    IS(TSAFE_E_RANGE, tsafe_safetensors_read_f32_range(f->st, "a", 10, 7, out));
    IS(TSAFE_E_RANGE, tsafe_safetensors_read_f32_range(f->st, "a", 1, SIZE_MAX, out));
    IS(TSAFE_E_RANGE, tsafe_safetensors_read_f32_range(f->st, "a", SIZE_MAX, 2, out));
    ERR(tsafe_safetensors_read_f32_range(f->st, "i", 0, 1, out));
}

CHECK_FN(tsafe_safetensors_metadata)
{
    assert_null(tsafe_safetensors_metadata(NULL, "format"));
    assert_null(tsafe_safetensors_metadata(f->st, NULL));
    assert_null(tsafe_safetensors_metadata(f->st, "nope"));
}

CHECK_FN(tsafe_safetensors_metadata_count)
{
    assert_int_equal(tsafe_safetensors_metadata_count(NULL), 0);
}

CHECK_FN(tsafe_safetensors_metadata_at)
{
    const char *k, *v;
    ERR(tsafe_safetensors_metadata_at(NULL, 0, &k, &v));
    ERR(tsafe_safetensors_metadata_at(f->st, 0, NULL, &v));
    ERR(tsafe_safetensors_metadata_at(f->st, 0, &k, NULL));
    IS(TSAFE_E_RANGE, tsafe_safetensors_metadata_at(f->st, 1, &k, &v));
    IS(TSAFE_E_RANGE, tsafe_safetensors_metadata_at(f->st, SIZE_MAX, &k, &v));
}

CHECK_FN(tsafe_safetensors_writer_create)
{
    ERR(tsafe_safetensors_writer_create(NULL));
}

CHECK_FN(tsafe_safetensors_writer_free)
{
    tsafe_safetensors_writer_free(NULL);
}

CHECK_FN(tsafe_safetensors_writer_add)
{
    uint8_t d[16] = {0};
    uint64_t s2[1] = {2}, huge[2] = {UINT64_MAX, UINT64_MAX};
    tsafe_safetensors_writer *w = f->stw;
    ERR(tsafe_safetensors_writer_add(NULL, "n", TSAFE_DTYPE_U8, s2, 1, d, 2));
    ERR(tsafe_safetensors_writer_add(w, NULL, TSAFE_DTYPE_U8, s2, 1, d, 2));
    ERR(tsafe_safetensors_writer_add(w, "", TSAFE_DTYPE_U8, s2, 1, d, 2));
    ERR(tsafe_safetensors_writer_add(w, "__metadata__", TSAFE_DTYPE_U8, s2, 1, d, 2));
    ERR(tsafe_safetensors_writer_add(w, "a", TSAFE_DTYPE_U8, s2, 1, d, 2)); /* duplicate */
    ERR(tsafe_safetensors_writer_add(w, "n", TSAFE_DTYPE_INVALID, s2, 1, d, 2));
    ERR(tsafe_safetensors_writer_add(w, "n", (tsafe_dtype)99, s2, 1, d, 2));
    ERR(tsafe_safetensors_writer_add(w, "n", TSAFE_DTYPE_U8, NULL, 1, d, 2));
    ERR(tsafe_safetensors_writer_add(w, "n", TSAFE_DTYPE_U8, s2, 1, NULL, 2));
    IS(TSAFE_E_SHAPE, tsafe_safetensors_writer_add(w, "n", TSAFE_DTYPE_U8, s2, 1, d, 3));
    ERR(tsafe_safetensors_writer_add(w, "n", TSAFE_DTYPE_F64, huge, 2, d, 16));
    ERR(tsafe_safetensors_writer_add(w, "\xff", TSAFE_DTYPE_U8, s2, 1, d, 2));
}

CHECK_FN(tsafe_safetensors_writer_add_f32)
{
    float v[2] = {1, 2};
    uint64_t s2[1] = {2};
    ERR(tsafe_safetensors_writer_add_f32(NULL, "m", TSAFE_DTYPE_F32, s2, 1, v));
    ERR(tsafe_safetensors_writer_add_f32(f->stw, NULL, TSAFE_DTYPE_F32, s2, 1, v));
    ERR(tsafe_safetensors_writer_add_f32(f->stw, "m", TSAFE_DTYPE_F32, s2, 1, NULL));
    ERR(tsafe_safetensors_writer_add_f32(f->stw, "m", TSAFE_DTYPE_F32, NULL, 1, v));
    IS(TSAFE_E_DTYPE, tsafe_safetensors_writer_add_f32(f->stw, "m", TSAFE_DTYPE_I32, s2, 1, v));
    ERR(tsafe_safetensors_writer_add_f32(f->stw, "m", (tsafe_dtype)99, s2, 1, v));
}

CHECK_FN(tsafe_safetensors_writer_set_metadata)
{
    ERR(tsafe_safetensors_writer_set_metadata(NULL, "k", "v"));
    ERR(tsafe_safetensors_writer_set_metadata(f->stw, NULL, "v"));
    ERR(tsafe_safetensors_writer_set_metadata(f->stw, "k", NULL));
    IS(TSAFE_E_ARG, tsafe_safetensors_writer_set_metadata(f->stw, "k", "\xc3"));
    IS(TSAFE_E_ARG, tsafe_safetensors_writer_set_metadata(f->stw, "\xed\xa0\x80", "v"));
}

CHECK_FN(tsafe_safetensors_writer_serialize)
{
    uint8_t *b = NULL;
    size_t n = 0;
    ERR(tsafe_safetensors_writer_serialize(NULL, &b, &n));
    ERR(tsafe_safetensors_writer_serialize(f->stw, NULL, &n));
    ERR(tsafe_safetensors_writer_serialize(f->stw, &b, NULL));
    assert_null(b);
}

CHECK_FN(tsafe_safetensors_writer_write_file)
{
    ERR(tsafe_safetensors_writer_write_file(NULL, "/tmp/x.safetensors"));
    ERR(tsafe_safetensors_writer_write_file(f->stw, NULL));
    ERR(tsafe_safetensors_writer_write_file(f->stw, "/nonexistent-dir/x.safetensors"));
    ERR(tsafe_safetensors_writer_write_file(f->stw, ""));
}

CHECK_FN(tsafe_safetensors_bytes_free)
{
    tsafe_safetensors_bytes_free(NULL);
}

static const api_case k_safetensors[] = {
    ENTRY(tsafe_dtype_name), ENTRY(tsafe_dtype_size), ENTRY(tsafe_dtype_from_name),
    ENTRY(tsafe_f16_to_f32), ENTRY(tsafe_bf16_to_f32), ENTRY(tsafe_f32_to_f16),
    ENTRY(tsafe_f32_to_bf16), ENTRY(tsafe_safetensors_parse),
    ENTRY(tsafe_safetensors_parse_borrowed), ENTRY(tsafe_safetensors_open_file),
    ENTRY(tsafe_safetensors_free), ENTRY(tsafe_safetensors_tensor_count),
    ENTRY(tsafe_safetensors_tensor_at), ENTRY(tsafe_safetensors_find),
    ENTRY(tsafe_safetensors_tensor_data), ENTRY(tsafe_safetensors_read_f32),
    ENTRY(tsafe_safetensors_read_f32_range), ENTRY(tsafe_safetensors_metadata),
    ENTRY(tsafe_safetensors_metadata_count), ENTRY(tsafe_safetensors_metadata_at),
    ENTRY(tsafe_safetensors_writer_create), ENTRY(tsafe_safetensors_writer_free),
    ENTRY(tsafe_safetensors_writer_add), ENTRY(tsafe_safetensors_writer_add_f32),
    ENTRY(tsafe_safetensors_writer_set_metadata), ENTRY(tsafe_safetensors_writer_serialize),
    ENTRY(tsafe_safetensors_writer_write_file), ENTRY(tsafe_safetensors_bytes_free),
};

/* ----------------------------------------------------- lora_adapter.h */

static void load_dir_checks(int ex)
{
    tsafe_lora_adapter *a = NULL;
    tsafe_lora_load_options bad = {.fused_layout = (tsafe_lora_fused_layout)7};
#define LOAD(dir, out) \
    (ex ? tsafe_lora_adapter_load_peft_ex(dir, NULL, out) : tsafe_lora_adapter_load_peft(dir, out))
    ERR(LOAD(NULL, &a));
    ERR(LOAD("tests", NULL));
    IS(TSAFE_E_NOT_FOUND, LOAD("/nonexistent-adapter-dir", &a));
    ERR(LOAD("", &a));
#undef LOAD
    if (ex)
        ERR(tsafe_lora_adapter_load_peft_ex("/nonexistent-adapter-dir", &bad, &a));
    assert_null(a);
}

CHECK_FN(tsafe_lora_adapter_load_peft) { load_dir_checks(0); }
CHECK_FN(tsafe_lora_adapter_load_peft_ex) { load_dir_checks(1); }

CHECK_FN(tsafe_lora_adapter_load_peft_memory)
{
    static const char cfg[] = "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4}";
    tsafe_lora_adapter *a = NULL;
    tsafe_lora_load_options bad = {.fused_layout = (tsafe_lora_fused_layout)7};
    ERR(tsafe_lora_adapter_load_peft_memory(NULL, 10, f->st_bytes, f->st_len, NULL, &a));
    ERR(tsafe_lora_adapter_load_peft_memory(cfg, strlen(cfg), NULL, f->st_len, NULL, &a));
    ERR(tsafe_lora_adapter_load_peft_memory(cfg, strlen(cfg), f->st_bytes, f->st_len, NULL,
                                            NULL));
    ERR(tsafe_lora_adapter_load_peft_memory(cfg, 0, f->st_bytes, f->st_len, NULL, &a));
    ERR(tsafe_lora_adapter_load_peft_memory(cfg, strlen(cfg), f->st_bytes, 0, NULL, &a));
    ERR(tsafe_lora_adapter_load_peft_memory(cfg, strlen(cfg), f->st_bytes, f->st_len, &bad, &a));
    /* f->st holds tensors "a" and "i": not LoRA keys */
    ERR(tsafe_lora_adapter_load_peft_memory(cfg, strlen(cfg), f->st_bytes, f->st_len, NULL, &a));
    assert_null(a);
}

CHECK_FN(tsafe_lora_adapter_load_package)
{
    tsafe_lora_adapter *a = NULL;
    uint8_t zero_pk[32] = {0};
    tsafe_lora_load_options bad = {.fused_layout = (tsafe_lora_fused_layout)7};
    ERR(tsafe_lora_adapter_load_package(NULL, f->pkg_len, f->pkg_pk, NULL, &a));
    ERR(tsafe_lora_adapter_load_package(f->pkg, f->pkg_len, NULL, NULL, &a));
    ERR(tsafe_lora_adapter_load_package(f->pkg, f->pkg_len, f->pkg_pk, NULL, NULL));
    ERR(tsafe_lora_adapter_load_package(f->pkg, 0, f->pkg_pk, NULL, &a));
    ERR(tsafe_lora_adapter_load_package(f->pkg, f->pkg_len - 1, f->pkg_pk, NULL, &a));
    IS(TSAFE_E_KEY, tsafe_lora_adapter_load_package(f->pkg, f->pkg_len, zero_pk, NULL, &a));
    ERR(tsafe_lora_adapter_load_package(f->pkg, f->pkg_len, f->pkg_pk, &bad, &a));
    /* verified, but the payload (tensors "a", "i") holds no LoRA keys */
    ERR(tsafe_lora_adapter_load_package(f->pkg, f->pkg_len, f->pkg_pk, NULL, &a));
    assert_null(a);
}

CHECK_FN(tsafe_lora_adapter_create)
{
    tsafe_lora_adapter *a = NULL;
    tsafe_lora_config c = {2, 4.0, 0, 0}, b;
    ERR(tsafe_lora_adapter_create(NULL, &a));
    ERR(tsafe_lora_adapter_create(&c, NULL));
    b = c; b.r = 0; IS(TSAFE_E_ARG, tsafe_lora_adapter_create(&b, &a));
    b = c; b.lora_alpha = NAN; IS(TSAFE_E_ARG, tsafe_lora_adapter_create(&b, &a));
    b = c; b.lora_alpha = INFINITY; IS(TSAFE_E_ARG, tsafe_lora_adapter_create(&b, &a));
    assert_null(a);
}

CHECK_FN(tsafe_lora_adapter_add_module)
{
    float v[16] = {0}, vn[16] = {0};
    vn[3] = NAN;
    tsafe_lora_adapter *a = f->adapter;
    size_t before = tsafe_lora_adapter_module_count(a);
    ERR(tsafe_lora_adapter_add_module(NULL, "m", 2, 8, 8, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, NULL, 2, 8, 8, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "", 2, 8, 8, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "\xff", 2, 8, 8, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "layers.0.self_attn.q_proj", 2, 8, 8, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", 0, 8, 8, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", 2, 0, 8, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", 2, 8, 0, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", 2, 8, 8, NULL, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", 2, 8, 8, v, NULL, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", 2, 8, 8, v, v, NAN));
    ERR(tsafe_lora_adapter_add_module(a, "m", 2, 8, 8, vn, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", 2, 8, 8, v, vn, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", SIZE_MAX, SIZE_MAX, 8, v, v, 1.0));
    ERR(tsafe_lora_adapter_add_module(a, "m", 2, SIZE_MAX / 2, 8, v, v, 1.0));
    assert_int_equal(tsafe_lora_adapter_module_count(a), before);
}

CHECK_FN(tsafe_lora_adapter_save_peft)
{
    ERR(tsafe_lora_adapter_save_peft(NULL, "/tmp/tsafe-null-test", TSAFE_DTYPE_F32));
    ERR(tsafe_lora_adapter_save_peft(f->adapter, NULL, TSAFE_DTYPE_F32));
    ERR(tsafe_lora_adapter_save_peft(f->adapter, "/nonexistent-root-dir/x/y", TSAFE_DTYPE_F32));
    IS(TSAFE_E_DTYPE, tsafe_lora_adapter_save_peft(f->adapter, "/nonexistent-root-dir/x",
                                                   TSAFE_DTYPE_I32));
}

CHECK_FN(tsafe_lora_adapter_save_peft_memory)
{
    char *cj = NULL;
    uint8_t *sb = NULL;
    size_t n = 0;
    ERR(tsafe_lora_adapter_save_peft_memory(NULL, TSAFE_DTYPE_F32, &cj, &sb, &n));
    ERR(tsafe_lora_adapter_save_peft_memory(f->adapter, TSAFE_DTYPE_F32, NULL, &sb, &n));
    ERR(tsafe_lora_adapter_save_peft_memory(f->adapter, TSAFE_DTYPE_F32, &cj, NULL, &n));
    ERR(tsafe_lora_adapter_save_peft_memory(f->adapter, TSAFE_DTYPE_F32, &cj, &sb, NULL));
    IS(TSAFE_E_DTYPE, tsafe_lora_adapter_save_peft_memory(f->adapter, TSAFE_DTYPE_U8, &cj, &sb, &n));
    ERR(tsafe_lora_adapter_save_peft_memory(f->adapter, (tsafe_dtype)99, &cj, &sb, &n));
    assert_null(cj);
    assert_null(sb);
}

CHECK_FN(tsafe_lora_adapter_free)
{
    tsafe_lora_adapter_free(NULL);
}

CHECK_FN(tsafe_lora_adapter_origin)
{
    tsafe_lora_origin o;
    ERR(tsafe_lora_adapter_origin(NULL, &o));
    ERR(tsafe_lora_adapter_origin(f->adapter, NULL));
}

CHECK_FN(tsafe_lora_adapter_config)
{
    tsafe_lora_config c;
    ERR(tsafe_lora_adapter_config(NULL, &c));
    ERR(tsafe_lora_adapter_config(f->adapter, NULL));
}

CHECK_FN(tsafe_lora_adapter_target_count)
{
    assert_int_equal(tsafe_lora_adapter_target_count(NULL), 0);
    assert_int_equal(tsafe_lora_adapter_target_count(f->adapter), 0);
}

CHECK_FN(tsafe_lora_adapter_target)
{
    assert_null(tsafe_lora_adapter_target(NULL, 0));
    assert_null(tsafe_lora_adapter_target(f->adapter, 0));
    assert_null(tsafe_lora_adapter_target(f->adapter, SIZE_MAX));
}

CHECK_FN(tsafe_lora_adapter_module_count)
{
    assert_int_equal(tsafe_lora_adapter_module_count(NULL), 0);
}

CHECK_FN(tsafe_lora_adapter_module)
{
    tsafe_lora_module_info m;
    size_t n = tsafe_lora_adapter_module_count(f->adapter);
    ERR(tsafe_lora_adapter_module(NULL, 0, &m));
    ERR(tsafe_lora_adapter_module(f->adapter, 0, NULL));
    IS(TSAFE_E_RANGE, tsafe_lora_adapter_module(f->adapter, n, &m));
    IS(TSAFE_E_RANGE, tsafe_lora_adapter_module(f->adapter, SIZE_MAX, &m));
}

CHECK_FN(tsafe_lora_adapter_find)
{
    size_t i;
    ERR(tsafe_lora_adapter_find(NULL, "x", &i));
    ERR(tsafe_lora_adapter_find(f->adapter, NULL, &i));
    ERR(tsafe_lora_adapter_find(f->adapter, "layers.0.self_attn.q_proj", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_lora_adapter_find(f->adapter, "nope", &i));
}

CHECK_FN(tsafe_lora_module_delta_w)
{
    tsafe_lora_module_info m;
    double out[64];
    OK(tsafe_lora_adapter_module(f->adapter, 0, &m));
    ERR(tsafe_lora_module_delta_w(NULL, out));
    ERR(tsafe_lora_module_delta_w(&m, NULL));
    tsafe_lora_module_info b = m;
    b.A = NULL;
    ERR(tsafe_lora_module_delta_w(&b, out));
    b = m;
    b.B = NULL;
    ERR(tsafe_lora_module_delta_w(&b, out));
}

CHECK_FN(tsafe_lora_module_apply)
{
    tsafe_lora_module_info m;
    OK(tsafe_lora_adapter_module(f->adapter, 0, &m));
    float *x = calloc(m.in_dim, sizeof *x), *d = calloc(m.out_dim, sizeof *d);
    assert_non_null(x);
    assert_non_null(d);
    OK(tsafe_lora_module_apply(&m, x, d));
    ERR(tsafe_lora_module_apply(NULL, x, d));
    ERR(tsafe_lora_module_apply(&m, NULL, d));
    ERR(tsafe_lora_module_apply(&m, x, NULL));
    tsafe_lora_module_info b = m;
    b.A = NULL;
    ERR(tsafe_lora_module_apply(&b, x, d));
    x[0] = NAN;
    IS(TSAFE_E_VALUE_RANGE, tsafe_lora_module_apply(&m, x, d));
    free(x);
    free(d);
}

static const api_case k_lora_adapter[] = {
    ENTRY(tsafe_lora_adapter_load_peft), ENTRY(tsafe_lora_adapter_load_peft_ex),
    ENTRY(tsafe_lora_adapter_load_peft_memory), ENTRY(tsafe_lora_adapter_load_package),
    ENTRY(tsafe_lora_adapter_create),
    ENTRY(tsafe_lora_adapter_add_module), ENTRY(tsafe_lora_adapter_save_peft),
    ENTRY(tsafe_lora_adapter_save_peft_memory), ENTRY(tsafe_lora_adapter_free),
    ENTRY(tsafe_lora_adapter_config), ENTRY(tsafe_lora_adapter_origin),
    ENTRY(tsafe_lora_adapter_target_count),
    ENTRY(tsafe_lora_adapter_target), ENTRY(tsafe_lora_adapter_module_count),
    ENTRY(tsafe_lora_adapter_module), ENTRY(tsafe_lora_adapter_find),
    ENTRY(tsafe_lora_module_delta_w), ENTRY(tsafe_lora_module_apply),
};

/* --------------------------------------------------------------- moe.h */

CHECK_FN(tsafe_moe_config_preset)
{
    tsafe_moe_config c;
    ERR(tsafe_moe_config_preset(NULL, &c));
    ERR(tsafe_moe_config_preset("qwen3-30b-a3b", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_moe_config_preset("no-such-model", &c));
}

CHECK_FN(tsafe_moe_config_preset_count)
{
    assert_true(tsafe_moe_config_preset_count() >= 3);
}

CHECK_FN(tsafe_moe_config_preset_name)
{
    assert_null(tsafe_moe_config_preset_name(tsafe_moe_config_preset_count()));
    assert_null(tsafe_moe_config_preset_name(SIZE_MAX));
}

CHECK_FN(tsafe_moe_config_validate)
{
    tsafe_moe_config c;
    ERR(tsafe_moe_config_validate(NULL));
    OK(tsafe_moe_config_validate(&f->moecfg));
    c = f->moecfg; c.hidden_size = 0; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.top_k = 0; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.top_k = 5; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.n_experts = 64; c.top_k = 33;
    IS(TSAFE_E_UNSUPPORTED, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.n_kv_heads = 3; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.n_heads = 3; c.n_kv_heads = 3; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.shared_expert_intermediate = 0; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.hidden_size = UINT32_MAX; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; c.n_experts = UINT32_MAX; IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
    c = f->moecfg; memset(c.name, 'x', sizeof c.name); IS(TSAFE_E_PARAMS, tsafe_moe_config_validate(&c));
}

CHECK_FN(tsafe_moe_config_load_json)
{
    tsafe_moe_config c;
    ERR(tsafe_moe_config_load_json(NULL, &c));
    ERR(tsafe_moe_config_load_json("tests", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_moe_config_load_json("/nonexistent/config.json", &c));
    ERR(tsafe_moe_config_load_json("/", &c));
}

CHECK_FN(tsafe_moe_config_parse_json)
{
    tsafe_moe_config c;
    ERR(tsafe_moe_config_parse_json(NULL, 10, &c));
    ERR(tsafe_moe_config_parse_json("{}", 2, NULL));
    ERR(tsafe_moe_config_parse_json("{}", 0, &c));
    IS(TSAFE_E_MISSING_FIELD, tsafe_moe_config_parse_json("{}", 2, &c));
    IS(TSAFE_E_JSON, tsafe_moe_config_parse_json("{", 1, &c));
}

CHECK_FN(tsafe_moe_config_is_full_attention)
{
    tsafe_moe_config c = f->moecfg;
    assert_int_equal(tsafe_moe_config_is_full_attention(NULL, 0), 0);
    c.full_attention_interval = 0; /* invalid: must not divide by zero */
    (void)tsafe_moe_config_is_full_attention(&c, 3);
    c.full_attention_interval = 4;
    (void)tsafe_moe_config_is_full_attention(&c, UINT32_MAX);
}

CHECK_FN(tsafe_moe_layer_create_random)
{
    tsafe_moe_layer *l = NULL;
    tsafe_moe_config c = f->moecfg;
    ERR(tsafe_moe_layer_create_random(NULL, 1, 0, &l));
    ERR(tsafe_moe_layer_create_random(&c, 1, 0, NULL));
    ERR(tsafe_moe_layer_create_random(&c, 1, 1, &l)); /* fewer than top_k */
    c.hidden_size = 0;
    ERR(tsafe_moe_layer_create_random(&c, 1, 0, &l));
    assert_null(l);
}

CHECK_FN(tsafe_moe_layer_create_random_ex)
{
    tsafe_moe_layer *l = NULL;
    tsafe_moe_layer_options o = {0, (tsafe_moe_weights_mode)9};
    ERR(tsafe_moe_layer_create_random_ex(NULL, 1, NULL, &l));
    ERR(tsafe_moe_layer_create_random_ex(&f->moecfg, 1, NULL, NULL));
    ERR(tsafe_moe_layer_create_random_ex(&f->moecfg, 1, &o, &l));
    o.mode = TSAFE_MOE_WEIGHTS_LAZY;
    o.n_experts_override = 1;
    ERR(tsafe_moe_layer_create_random_ex(&f->moecfg, 1, &o, &l));
    assert_null(l);
}

CHECK_FN(tsafe_moe_layer_create_zero)
{
    tsafe_moe_layer *l = NULL;
    ERR(tsafe_moe_layer_create_zero(NULL, 0, &l));
    ERR(tsafe_moe_layer_create_zero(&f->moecfg, 0, NULL));
    ERR(tsafe_moe_layer_create_zero(&f->moecfg, 1, &l));
    assert_null(l);
}

CHECK_FN(tsafe_moe_layer_set_router)
{
    float g[4 * 16] = {0}, s[16] = {0};
    ERR(tsafe_moe_layer_set_router(NULL, g, s));
    ERR(tsafe_moe_layer_set_router(f->layer, NULL, s));
    ERR(tsafe_moe_layer_set_router(f->layer, g, NULL)); /* gated shared expert needs it */
}

CHECK_FN(tsafe_moe_layer_set_expert)
{
    float w[16 * 8] = {0};
    ERR(tsafe_moe_layer_set_expert(NULL, 0, w, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, 4, w, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, -2, w, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, INT32_MAX, w, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, 0, NULL, w, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, 0, w, NULL, w));
    ERR(tsafe_moe_layer_set_expert(f->layer, 0, w, w, NULL));
}

CHECK_FN(tsafe_moe_layer_load_safetensors)
{
    tsafe_moe_layer *l = NULL;
    ERR(tsafe_moe_layer_load_safetensors(NULL, f->st, "model.layers.0.mlp"));
    OK(tsafe_moe_layer_create_zero(&f->moecfg, 0, &l));
    ERR(tsafe_moe_layer_load_safetensors(l, NULL, "model.layers.0.mlp"));
    ERR(tsafe_moe_layer_load_safetensors(l, f->st, NULL));
    ERR(tsafe_moe_layer_load_safetensors(l, f->st, "model.layers.0.mlp")); /* no tensors */
    char *longp = malloc(5000);
    memset(longp, 'p', 4999);
    longp[4999] = '\0';
    ERR(tsafe_moe_layer_load_safetensors(l, f->st, longp));
    free(longp);
    tsafe_moe_layer_free(l);
}

CHECK_FN(tsafe_moe_layer_free)
{
    tsafe_moe_layer_free(NULL);
}

CHECK_FN(tsafe_moe_layer_config)
{
    assert_null(tsafe_moe_layer_config(NULL));
}

CHECK_FN(tsafe_moe_layer_route)
{
    float h[16] = {0};
    tsafe_moe_route r[1];
    ERR(tsafe_moe_layer_route(NULL, h, 1, r));
    ERR(tsafe_moe_layer_route(f->layer, NULL, 1, r));
    ERR(tsafe_moe_layer_route(f->layer, h, 1, NULL));
    ERR(tsafe_moe_layer_route(f->layer, h, SIZE_MAX, r));
    h[5] = NAN;
    IS(TSAFE_E_VALUE_RANGE, tsafe_moe_layer_route(f->layer, h, 1, r));
}

static tsafe_status failing_hook(void *user, tsafe_moe_hook_stage stage, int32_t expert,
                                 const uint32_t *tokens, size_t m, const float *in,
                                 size_t in_cols, float *io, size_t io_cols)
{
    (void)user; (void)stage; (void)expert; (void)tokens; (void)m; (void)in; (void)in_cols;
    (void)io; (void)io_cols;
    return TSAFE_E_STATE;
}

static void forward_checks(fixture *f, int hooked)
{
    float h[16] = {0}, out[16];
    tsafe_moe_layer_stats before, after;
    OK(tsafe_moe_layer_get_stats(f->layer, &before));
#define FWD(l, hh, n, o) \
    (hooked ? tsafe_moe_layer_forward_hooked(l, hh, n, o, NULL, NULL, NULL) \
            : tsafe_moe_layer_forward(l, hh, n, o, NULL))
    ERR(FWD(NULL, h, 1, out));
    ERR(FWD(f->layer, NULL, 1, out));
    ERR(FWD(f->layer, h, 1, NULL));
    ERR(FWD(f->layer, h, SIZE_MAX, out));
    h[0] = NAN;
    ERR(FWD(f->layer, h, 1, out));
    h[0] = 0;
#undef FWD
    if (hooked)
        IS(TSAFE_E_STATE,
           tsafe_moe_layer_forward_hooked(f->layer, h, 1, out, NULL, failing_hook, NULL));
    OK(tsafe_moe_layer_get_stats(f->layer, &after));
    assert_true(after.tokens == before.tokens); /* failures count nothing */
}

CHECK_FN(tsafe_moe_layer_forward) { forward_checks(f, 0); }
CHECK_FN(tsafe_moe_layer_forward_hooked) { forward_checks(f, 1); }

CHECK_FN(tsafe_moe_layer_get_stats)
{
    tsafe_moe_layer_stats s;
    ERR(tsafe_moe_layer_get_stats(NULL, &s));
    ERR(tsafe_moe_layer_get_stats(f->layer, NULL));
}

CHECK_FN(tsafe_moe_layer_expert_hits)
{
    uint64_t c[4];
    ERR(tsafe_moe_layer_expert_hits(NULL, c, 4));
    ERR(tsafe_moe_layer_expert_hits(f->layer, NULL, 4));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_moe_layer_expert_hits(f->layer, c, 3));
}

CHECK_FN(tsafe_moe_layer_reset_counters)
{
    tsafe_moe_layer_reset_counters(NULL);
}

CHECK_FN(tsafe_stepgate_create_default)
{
    ERR(tsafe_stepgate_create_default(NULL));
}

CHECK_FN(tsafe_stepgate_create_json)
{
    tsafe_stepgate *g = NULL;
    static const char ok[] = "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"x\"]}]}";
    static const char empty_kw[] = "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"\"]}]}";
    ERR(tsafe_stepgate_create_json(NULL, 10, &g));
    ERR(tsafe_stepgate_create_json(ok, strlen(ok), NULL));
    ERR(tsafe_stepgate_create_json(ok, 0, &g));
    ERR(tsafe_stepgate_create_json(ok, strlen(ok) - 1, &g));
    IS(TSAFE_E_MISSING_FIELD, tsafe_stepgate_create_json("{}", 2, &g));
    IS(TSAFE_E_PARAMS,
       tsafe_stepgate_create_json(empty_kw, strlen(empty_kw), &g));
    assert_null(g);
}

CHECK_FN(tsafe_stepgate_load_json)
{
    tsafe_stepgate *g = NULL;
    ERR(tsafe_stepgate_load_json(NULL, &g));
    ERR(tsafe_stepgate_load_json("tests", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_stepgate_load_json("/nonexistent/gate.json", &g));
    ERR(tsafe_stepgate_load_json("/", &g));
    assert_null(g);
}

CHECK_FN(tsafe_stepgate_free)
{
    tsafe_stepgate_free(NULL);
}

CHECK_FN(tsafe_stepgate_domain_count)
{
    assert_int_equal(tsafe_stepgate_domain_count(NULL), 0);
    assert_int_equal(tsafe_stepgate_domain_count(f->gate), 2);
}

CHECK_FN(tsafe_stepgate_domain_name)
{
    assert_null(tsafe_stepgate_domain_name(NULL, 0));
    assert_null(tsafe_stepgate_domain_name(f->gate, 2));
    assert_null(tsafe_stepgate_domain_name(f->gate, -2));
    assert_null(tsafe_stepgate_domain_name(f->gate, INT32_MAX));
    assert_null(tsafe_stepgate_domain_name(f->gate, INT32_MIN));
    assert_string_equal(tsafe_stepgate_domain_name(f->gate, TSAFE_STEPGATE_FALLBACK), "shared");
}

CHECK_FN(tsafe_stepgate_domain_adapter)
{
    assert_null(tsafe_stepgate_domain_adapter(NULL, 0));
    assert_null(tsafe_stepgate_domain_adapter(f->gate, 2));
    assert_null(tsafe_stepgate_domain_adapter(f->gate, -2));
    assert_null(tsafe_stepgate_domain_adapter(f->gate, INT32_MIN));
}

CHECK_FN(tsafe_stepgate_decide_every)
{
    assert_int_equal(tsafe_stepgate_decide_every(NULL), 0);
}

CHECK_FN(tsafe_stepgate_hysteresis)
{
    (void)tsafe_stepgate_hysteresis(NULL);
    assert_int_equal(tsafe_stepgate_hysteresis(f->gate), 1);
}

CHECK_FN(tsafe_stepgate_score)
{
    uint32_t s[2];
    ERR(tsafe_stepgate_score(NULL, "bank", 4, s, 2));
    ERR(tsafe_stepgate_score(f->gate, NULL, 4, s, 2));
    ERR(tsafe_stepgate_score(f->gate, "bank", 4, NULL, 2));
    ERR(tsafe_stepgate_score(f->gate, "bank", 4, s, 1));
    ERR(tsafe_stepgate_score(f->gate, "bank", 4, s, 0));
}

CHECK_FN(tsafe_stepgate_classify)
{
    int32_t d;
    ERR(tsafe_stepgate_classify(NULL, "bank", 4, &d));
    ERR(tsafe_stepgate_classify(f->gate, NULL, 4, &d));
    ERR(tsafe_stepgate_classify(f->gate, "bank", 4, NULL));
}

CHECK_FN(tsafe_stepgate_session_create)
{
    tsafe_stepgate_session *s = NULL;
    ERR(tsafe_stepgate_session_create(NULL, &s));
    ERR(tsafe_stepgate_session_create(f->gate, NULL));
    assert_null(s);
}

CHECK_FN(tsafe_stepgate_session_free)
{
    tsafe_stepgate_session_free(NULL);
}

CHECK_FN(tsafe_stepgate_session_begin)
{
    int32_t d;
    ERR(tsafe_stepgate_session_begin(NULL, "bank", 4, &d));
    ERR(tsafe_stepgate_session_begin(f->gs, NULL, 4, &d));
    if (tsafe_stepgate_session_begin(f->gs, "bank", 4, NULL) != TSAFE_OK) {} /* may be optional */
}

CHECK_FN(tsafe_stepgate_session_step)
{
    int32_t d;
    int sw;
    tsafe_stepgate_session *s;
    OK(tsafe_stepgate_session_create(f->gate, &s));
    IS(TSAFE_E_STATE, tsafe_stepgate_session_step(s, "bank", 4, &d, &sw)); /* before begin */
    OK(tsafe_stepgate_session_begin(s, "hello", 5, &d));
    ERR(tsafe_stepgate_session_step(NULL, "bank", 4, &d, &sw));
    ERR(tsafe_stepgate_session_step(s, NULL, 4, &d, &sw));
    if (tsafe_stepgate_session_step(s, "bank", 4, NULL, &sw) != TSAFE_OK) {} /* may be optional */
    OK(tsafe_stepgate_session_step(s, "bank", 4, &d, NULL)); /* switched is optional */
    tsafe_stepgate_session_free(s);
}

CHECK_FN(tsafe_stepgate_session_domain)
{
    assert_int_equal(tsafe_stepgate_session_domain(NULL), TSAFE_STEPGATE_FALLBACK);
}

static const api_case k_moe[] = {
    ENTRY(tsafe_moe_config_preset), ENTRY(tsafe_moe_config_preset_count),
    ENTRY(tsafe_moe_config_preset_name), ENTRY(tsafe_moe_config_validate),
    ENTRY(tsafe_moe_config_load_json), ENTRY(tsafe_moe_config_parse_json),
    ENTRY(tsafe_moe_config_is_full_attention), ENTRY(tsafe_moe_layer_create_random),
    ENTRY(tsafe_moe_layer_create_random_ex), ENTRY(tsafe_moe_layer_create_zero),
    ENTRY(tsafe_moe_layer_set_router), ENTRY(tsafe_moe_layer_set_expert),
    ENTRY(tsafe_moe_layer_load_safetensors), ENTRY(tsafe_moe_layer_free),
    ENTRY(tsafe_moe_layer_config), ENTRY(tsafe_moe_layer_route),
    ENTRY(tsafe_moe_layer_forward), ENTRY(tsafe_moe_layer_forward_hooked),
    ENTRY(tsafe_moe_layer_get_stats), ENTRY(tsafe_moe_layer_expert_hits),
    ENTRY(tsafe_moe_layer_reset_counters),
    ENTRY(tsafe_stepgate_create_default), ENTRY(tsafe_stepgate_create_json),
    ENTRY(tsafe_stepgate_load_json), ENTRY(tsafe_stepgate_free),
    ENTRY(tsafe_stepgate_domain_count), ENTRY(tsafe_stepgate_domain_name),
    ENTRY(tsafe_stepgate_domain_adapter), ENTRY(tsafe_stepgate_decide_every),
    ENTRY(tsafe_stepgate_hysteresis), ENTRY(tsafe_stepgate_score),
    ENTRY(tsafe_stepgate_classify), ENTRY(tsafe_stepgate_session_create),
    ENTRY(tsafe_stepgate_session_free), ENTRY(tsafe_stepgate_session_begin),
    ENTRY(tsafe_stepgate_session_step), ENTRY(tsafe_stepgate_session_domain),
};

/* ---------------------------------------------------------- moe_lora.h */

CHECK_FN(tsafe_moe_lora_create)
{
    tsafe_moe_lora *l = NULL;
    ERR(tsafe_moe_lora_create(NULL, &l));
    ERR(tsafe_moe_lora_create(f->layer, NULL));
    assert_null(l);
}

CHECK_FN(tsafe_moe_lora_free)
{
    tsafe_moe_lora_free(NULL);
}

CHECK_FN(tsafe_moe_lora_set_site)
{
    tsafe_moe_lora *l = NULL;
    OK(tsafe_moe_lora_create(f->layer, &l));
    ERR(tsafe_moe_lora_set_site(NULL, 0, TSAFE_MOE_PROJ_GATE, NULL));
    ERR(tsafe_moe_lora_set_site(l, 4, TSAFE_MOE_PROJ_GATE, NULL));  /* 4 experts */
    ERR(tsafe_moe_lora_set_site(l, -2, TSAFE_MOE_PROJ_GATE, NULL));
    ERR(tsafe_moe_lora_set_site(l, INT32_MIN, TSAFE_MOE_PROJ_UP, NULL));
    ERR(tsafe_moe_lora_set_site(l, 0, (tsafe_moe_proj)9, NULL));
    ERR(tsafe_moe_lora_set_site(l, 0, (tsafe_moe_proj)-1, NULL));
    /* the fixture site has d_in 64, the layer hidden size 16 */
    ERR(tsafe_moe_lora_set_site(l, 0, TSAFE_MOE_PROJ_GATE, f->site));
    ERR(tsafe_moe_lora_set_site(l, 0, TSAFE_MOE_PROJ_DOWN, f->site));
    tsafe_moe_lora_free(l);
}

CHECK_FN(tsafe_moe_lora_forward)
{
    tsafe_moe_lora *l = NULL;
    tsafe_lora_engine e = tsafe_lora_engine_plain(), none = {NULL, NULL};
    float h[16] = {0}, out[16];
    OK(tsafe_moe_lora_create(f->layer, &l));
    ERR(tsafe_moe_lora_forward(NULL, l, &e, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, NULL, &e, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, NULL, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, NULL, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &none, &none, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, &e, NULL, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, &e, h, 1, NULL, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, &e, h, SIZE_MAX, out, NULL, NULL));
    h[0] = NAN;
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, &e, h, 1, out, NULL, NULL));
    tsafe_moe_lora_free(l);
}

CHECK_FN(tsafe_moe_lora_set_module)
{
    tsafe_moe_lora *l = NULL;
    const tsafe_lora_module *m = tsafe_lora_site_module(f->site);
    OK(tsafe_moe_lora_create(f->layer, &l));
    ERR(tsafe_moe_lora_set_module(NULL, 0, TSAFE_MOE_PROJ_GATE, NULL));
    ERR(tsafe_moe_lora_set_module(l, 4, TSAFE_MOE_PROJ_GATE, NULL)); /* 4 experts */
    ERR(tsafe_moe_lora_set_module(l, -2, TSAFE_MOE_PROJ_GATE, NULL));
    ERR(tsafe_moe_lora_set_module(l, 0, (tsafe_moe_proj)9, NULL));
    /* the fixture module has d_in 64, the layer hidden size 16 */
    IS(TSAFE_E_SHAPE, tsafe_moe_lora_set_module(l, 0, TSAFE_MOE_PROJ_GATE, m));
    IS(TSAFE_E_SHAPE, tsafe_moe_lora_set_module(l, 0, TSAFE_MOE_PROJ_DOWN, m));
    OK(tsafe_moe_lora_set_module(l, 0, TSAFE_MOE_PROJ_GATE, NULL));
    tsafe_moe_lora_free(l);
}

CHECK_FN(tsafe_moe_lora_forward_modules)
{
    tsafe_moe_lora *l = NULL;
    tsafe_lora_module_engine e = tsafe_lora_module_engine_plain(), none = {NULL, NULL, NULL};
    float h[16] = {0}, out[16];
    OK(tsafe_moe_lora_create(f->layer, &l));
    ERR(tsafe_moe_lora_forward_modules(NULL, l, &e, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, NULL, &e, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, NULL, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &e, NULL, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &none, &none, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &e, &e, NULL, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &e, &e, h, 1, NULL, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &e, &e, h, SIZE_MAX, out, NULL, NULL));
    tsafe_moe_lora_free(l);
}

CHECK_FN(tsafe_moe_lora_site_uses)
{
    tsafe_moe_lora *l = NULL;
    OK(tsafe_moe_lora_create(f->layer, &l));
    assert_int_equal(tsafe_moe_lora_site_uses(NULL, 0, TSAFE_MOE_PROJ_GATE), 0);
    assert_int_equal(tsafe_moe_lora_site_uses(l, 4, TSAFE_MOE_PROJ_GATE), 0);
    assert_int_equal(tsafe_moe_lora_site_uses(l, -2, TSAFE_MOE_PROJ_GATE), 0);
    assert_int_equal(tsafe_moe_lora_site_uses(l, 0, (tsafe_moe_proj)9), 0);
    tsafe_moe_lora_free(l);
}

static const api_case k_moe_lora[] = {
    ENTRY(tsafe_moe_lora_create), ENTRY(tsafe_moe_lora_free), ENTRY(tsafe_moe_lora_set_site),
    ENTRY(tsafe_moe_lora_forward), ENTRY(tsafe_moe_lora_site_uses),
    ENTRY(tsafe_moe_lora_set_module), ENTRY(tsafe_moe_lora_forward_modules),
};

/* -------------------------------------------------------------- cuda.h */

#if defined(TSAFE_WITH_CUDA)
CHECK_FN(tsafe_cuda_device_count)
{
    IS(TSAFE_E_NULL, tsafe_cuda_device_count(NULL));
}

CHECK_FN(tsafe_cuda_device_name)
{
    char buf[64];
    int a, b;
    ERR(tsafe_cuda_device_name(-1, buf, sizeof buf, &a, &b));
    ERR(tsafe_cuda_device_name(INT32_MAX, buf, sizeof buf, &a, &b));
    ERR(tsafe_cuda_device_name(0, NULL, sizeof buf, &a, &b));
    ERR(tsafe_cuda_device_name(0, buf, 0, &a, &b));
}

CHECK_FN(tsafe_cuda_mem_info)
{
    size_t fr, tot;
    ERR(tsafe_cuda_mem_info(-1, &fr, &tot));
    ERR(tsafe_cuda_mem_info(INT32_MAX, &fr, &tot));
    ERR(tsafe_cuda_mem_info(0, NULL, &tot));
    ERR(tsafe_cuda_mem_info(0, &fr, NULL));
}

CHECK_FN(tsafe_backend_cuda_create)
{
    tsafe_backend *b = NULL;
    ERR(tsafe_backend_cuda_create(NULL, 0, &b));
    ERR(tsafe_backend_cuda_create(f->ctx, 0, NULL));
    ERR(tsafe_backend_cuda_create(f->ctx, -1, &b));
    ERR(tsafe_backend_cuda_create(f->ctx, INT32_MAX, &b));
    assert_null(b);
}

CHECK_FN(tsafe_backend_cuda_create_bfv)
{
    tsafe_backend *b = (tsafe_backend *)1;
    ERR(tsafe_backend_cuda_create_bfv(NULL, 0, &b));
    assert_null(b);
    ERR(tsafe_backend_cuda_create_bfv(NULL, 0, NULL));
}

CHECK_FN(tsafe_backend_cuda_factory)
{
    const tsafe_backend_factory *cf = tsafe_backend_cuda_factory();
    assert_non_null(cf);
    assert_non_null(cf->create);
    assert_string_equal(cf->name, "cuda");
    /* neither or both rings: refused before any device is touched */
    tsafe_backend *b = (tsafe_backend *)1;
    ERR(cf->create(cf->user, NULL, NULL, &b));
    assert_null(b);
    ERR(cf->create(cf->user, f->ctx, NULL, NULL));
    ERR(tsafe_backend_create(cf, NULL, NULL, &b));
    assert_null(b);
}

CHECK_FN(tsafe_backend_is_cuda)
{
    assert_int_equal(tsafe_backend_is_cuda(NULL), 0);
    assert_int_equal(tsafe_backend_is_cuda(f->be), 0);
}

CHECK_FN(tsafe_cuda_buffer_device_pointer)
{
    void *p = NULL;
    ERR(tsafe_cuda_buffer_device_pointer(NULL, &p));
    ERR(tsafe_cuda_buffer_device_pointer(f->buf, NULL));
    IS(TSAFE_E_ARG, tsafe_cuda_buffer_device_pointer(f->buf, &p)); /* a CPU buffer */
}

CHECK_FN(tsafe_cuda_graph_begin)
{
    ERR(tsafe_cuda_graph_begin(NULL));
    ERR(tsafe_cuda_graph_begin(f->be));
}

CHECK_FN(tsafe_cuda_graph_end)
{
    ERR(tsafe_cuda_graph_end(NULL));
    ERR(tsafe_cuda_graph_end(f->be));
}

CHECK_FN(tsafe_cuda_graph_launch)
{
    ERR(tsafe_cuda_graph_launch(NULL));
    ERR(tsafe_cuda_graph_launch(f->be));
}

CHECK_FN(tsafe_cuda_last_error)
{
    assert_non_null(tsafe_cuda_last_error());
}

static const api_case k_cuda[] = {
    ENTRY(tsafe_cuda_device_count), ENTRY(tsafe_cuda_device_name), ENTRY(tsafe_cuda_mem_info),
    ENTRY(tsafe_backend_cuda_create), ENTRY(tsafe_backend_cuda_create_bfv),
    ENTRY(tsafe_backend_cuda_factory), ENTRY(tsafe_backend_is_cuda),
    ENTRY(tsafe_cuda_buffer_device_pointer), ENTRY(tsafe_cuda_graph_begin),
    ENTRY(tsafe_cuda_graph_end), ENTRY(tsafe_cuda_graph_launch), ENTRY(tsafe_cuda_last_error),
};
#define CUDA_TABLE {"cuda.h", k_cuda, sizeof k_cuda / sizeof k_cuda[0], 0}
#else
#define CUDA_TABLE {"cuda.h", NULL, 0, 1}
#endif

/* ------------------------------------------------------------- bfv.h */

/* A small BFV world and a sealed pair (d_in 64, rank 4, d_out 64), built on
 * first use and freed by the fixture teardown. */

/* A non-NULL out-pointer value that a failing constructor must overwrite
 * with NULL once its pointer arguments have passed the NULL checks. */
#define POISON(p) ((p) = (void *)&S)
static struct {
    tsafe_bfv_context *c;
    tsafe_bfv_secret_key *sk;
    tsafe_bfv_public_key *pk;
    tsafe_bfv_ct *ct;
    tsafe_bfv_plain *pt;
    tsafe_bfv_acc *acc;
    tsafe_bfv_sealed *res;
    tsafe_sealed_plan plan;
    tsafe_sealed_client *cl;
    tsafe_sealed_server *sv;
    tsafe_sealed_site *site;
    float A[4 * 64], B[64 * 4], x[64];
} S;

static void sealed_world(void)
{
    if (S.c)
        return;
    tsafe_bfv_params p = {12, 49, 60, 37, 0};
    int64_t m[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    OK(tsafe_bfv_context_create(&p, &S.c));
    OK(tsafe_bfv_secret_key_generate(S.c, NULL, &S.sk));
    OK(tsafe_bfv_public_key_generate(S.c, S.sk, NULL, &S.pk));
    OK(tsafe_bfv_ct_create(S.c, &S.ct));
    OK(tsafe_bfv_encrypt(S.c, S.sk, m, 8, NULL, S.ct));
    OK(tsafe_bfv_plain_create(S.c, m, 8, &S.pt));
    OK(tsafe_bfv_acc_create(S.c, &S.acc));
    OK(tsafe_bfv_sealed_create(S.c, 8, &S.res));
    for (int i = 0; i < 4 * 64; i++)
        S.A[i] = (float)(i % 7) * 0.01f, S.B[i] = (float)(i % 5) * 0.01f;
    for (int i = 0; i < 64; i++)
        S.x[i] = (float)(i % 3) - 1.0f;
    OK(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, 64, 4, 64, NULL, &S.plan));
    OK(tsafe_sealed_client_create(&S.plan, NULL, &S.cl));
    OK(tsafe_sealed_server_create(&S.plan, &S.sv));
    OK(tsafe_sealed_site_create(&S.plan, S.A, S.B, 4, 64, 1.0f, &S.site));
}

static void sealed_world_free(void)
{
    tsafe_sealed_site_free(S.site);
    tsafe_sealed_server_free(S.sv);
    tsafe_sealed_client_free(S.cl);
    tsafe_bfv_sealed_free(S.res);
    tsafe_bfv_acc_free(S.acc);
    tsafe_bfv_plain_free(S.pt);
    tsafe_bfv_ct_free(S.ct);
    tsafe_bfv_public_key_free(S.pk);
    tsafe_bfv_secret_key_free(S.sk);
    tsafe_bfv_context_free(S.c);
    memset(&S, 0, sizeof S);
}

CHECK_FN(tsafe_bfv_context_create)
{
    (void)f;
    tsafe_bfv_context *c = NULL;
    tsafe_bfv_params p = {12, 49, 60, 37, 0}, bad = p;
    IS(TSAFE_E_NULL, tsafe_bfv_context_create(NULL, &c));
    IS(TSAFE_E_NULL, tsafe_bfv_context_create(&p, NULL));
    bad.log_n = 20;
    POISON(c);
    IS(TSAFE_E_PARAMS, tsafe_bfv_context_create(&bad, &c));
    assert_null(c);
    bad = p;
    bad.t_bits = 48;
    POISON(c);
    IS(TSAFE_E_PARAMS, tsafe_bfv_context_create(&bad, &c));
    assert_null(c);
    bad = p;
    bad.flags = 0x80;
    POISON(c);
    ERR(tsafe_bfv_context_create(&bad, &c));
    assert_null(c);
    bad = p;
    bad.gap_bits = 62;
    POISON(c);
    IS(TSAFE_E_PARAMS, tsafe_bfv_context_create(&bad, &c));
    assert_null(c);
}

CHECK_FN(tsafe_bfv_context_free) { (void)f; tsafe_bfv_context_free(NULL); }

CHECK_FN(tsafe_bfv_context_n)
{
    (void)f;
    sealed_world();
    assert_int_equal(tsafe_bfv_context_n(NULL), 0);
    assert_int_equal(tsafe_bfv_context_n(S.c), 4096);
}

CHECK_FN(tsafe_bfv_context_limbs)
{
    sealed_world();
    assert_int_equal(tsafe_bfv_context_limbs(NULL), 0);
    assert_int_equal(tsafe_bfv_context_limbs(S.c), 3); /* 49 + 30 + 30 bits */
}

CHECK_FN(tsafe_bfv_context_prime)
{
    (void)f;
    sealed_world();
    assert_true(tsafe_bfv_context_prime(NULL, 0) == 0);
    assert_true(tsafe_bfv_context_prime(S.c, tsafe_bfv_context_limbs(S.c)) == 0);
    assert_true(tsafe_bfv_context_prime(S.c, 1) != 0);
}

CHECK_FN(tsafe_bfv_context_log2_q)
{
    (void)f;
    sealed_world();
    assert_true(tsafe_bfv_context_log2_q(NULL) == 0.0);
    assert_true(tsafe_bfv_context_log2_q(S.c) <= 109.0);
}

CHECK_FN(tsafe_bfv_context_params)
{
    (void)f;
    sealed_world();
    assert_null(tsafe_bfv_context_params(NULL));
    assert_int_equal(tsafe_bfv_context_params(S.c)->log_n, 12);
}

CHECK_FN(tsafe_bfv_context_fingerprint)
{
    (void)f;
    uint8_t fp[32];
    sealed_world();
    memset(fp, 0xA5, sizeof fp);
    tsafe_bfv_context_fingerprint(NULL, fp); /* no-op */
    for (size_t i = 0; i < sizeof fp; i++)
        assert_int_equal(fp[i], 0xA5);
    tsafe_bfv_context_fingerprint(S.c, NULL);
}

CHECK_FN(tsafe_bfv_secret_key_generate)
{
    (void)f;
    tsafe_bfv_secret_key *k = NULL;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_secret_key_generate(NULL, NULL, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_secret_key_generate(S.c, NULL, NULL));
    assert_null(k);
}

CHECK_FN(tsafe_bfv_secret_key_free) { (void)f; tsafe_bfv_secret_key_free(NULL); }

CHECK_FN(tsafe_bfv_public_key_generate)
{
    (void)f;
    tsafe_bfv_public_key *k = NULL;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_generate(NULL, S.sk, NULL, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_generate(S.c, NULL, NULL, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_generate(S.c, S.sk, NULL, NULL));
    assert_null(k);
}

CHECK_FN(tsafe_bfv_public_key_free) { (void)f; tsafe_bfv_public_key_free(NULL); }

CHECK_FN(tsafe_bfv_public_key_bytes)
{
    (void)f;
    assert_int_equal(tsafe_bfv_public_key_bytes(NULL), 0);
}

CHECK_FN(tsafe_bfv_public_key_write)
{
    (void)f;
    uint8_t b[16];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_write(NULL, S.pk, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_write(S.c, NULL, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_write(S.c, S.pk, NULL, 0));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_bfv_public_key_write(S.c, S.pk, b, sizeof b));
}

CHECK_FN(tsafe_bfv_public_key_read)
{
    (void)f;
    uint8_t b[64] = {0};
    tsafe_bfv_public_key *k = NULL;
    sealed_world();
    size_t need = tsafe_bfv_public_key_bytes(S.c);
    uint8_t *big = malloc(need + 1);
    assert_non_null(big);
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_read(NULL, b, sizeof b, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_read(S.c, NULL, sizeof b, &k));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_read(S.c, b, sizeof b, NULL));
    POISON(k);
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_public_key_read(S.c, b, sizeof b, &k));
    assert_null(k);
    OK(tsafe_bfv_public_key_write(S.c, S.pk, big, need + 1));
    POISON(k);
    IS(TSAFE_E_FORMAT, tsafe_bfv_public_key_read(S.c, big, need + 1, &k)); /* trailing byte */
    assert_null(k);
    memset(big + TSAFE_BFV_SEED_BYTES, 0xFF, 8); /* first residue above q0 */
    POISON(k);
    IS(TSAFE_E_FORMAT, tsafe_bfv_public_key_read(S.c, big, need, &k));
    assert_null(k);
    free(big);
}

CHECK_FN(tsafe_bfv_ct_create)
{
    (void)f;
    tsafe_bfv_ct *ct = NULL;
    IS(TSAFE_E_NULL, tsafe_bfv_ct_create(NULL, &ct));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_create(NULL, NULL));
    assert_null(ct);
}

CHECK_FN(tsafe_bfv_ct_free) { (void)f; tsafe_bfv_ct_free(NULL); }

CHECK_FN(tsafe_bfv_encrypt)
{
    (void)f;
    int64_t m[2] = {0, (int64_t)1 << 40};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt(NULL, S.sk, m, 1, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt(S.c, NULL, m, 1, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt(S.c, S.sk, NULL, 1, NULL, S.ct));
    IS(TSAFE_E_NULL, tsafe_bfv_encrypt(S.c, S.sk, m, 1, NULL, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_encrypt(S.c, S.sk, m, 5000, NULL, S.ct));
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_encrypt(S.c, S.sk, m, 2, NULL, S.ct));
    OK(tsafe_bfv_encrypt(S.c, S.sk, m, 1, NULL, S.ct)); /* leave it valid */
}

CHECK_FN(tsafe_bfv_ct_bytes)
{
    (void)f;
    assert_int_equal(tsafe_bfv_ct_bytes(NULL), 0);
}

CHECK_FN(tsafe_bfv_ct_write)
{
    (void)f;
    uint8_t b[16];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_ct_write(NULL, S.ct, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_write(S.c, NULL, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_write(S.c, S.ct, NULL, 0));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_bfv_ct_write(S.c, S.ct, b, sizeof b));
}

CHECK_FN(tsafe_bfv_ct_read)
{
    (void)f;
    uint8_t b[64] = {0};
    tsafe_bfv_ct *tmp;
    sealed_world();
    OK(tsafe_bfv_ct_create(S.c, &tmp));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read(NULL, b, sizeof b, tmp));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read(S.c, NULL, sizeof b, tmp));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read(S.c, b, sizeof b, NULL));
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_ct_read(S.c, b, sizeof b, tmp));
    size_t need = tsafe_bfv_ct_bytes(S.c);
    uint8_t *big = malloc(need + 1), small[8];
    assert_non_null(big);
    OK(tsafe_bfv_ct_write(S.c, S.ct, big, need + 1));
    big[need] = 0;
    IS(TSAFE_E_FORMAT, tsafe_bfv_ct_read(S.c, big, need + 1, tmp)); /* trailing byte */
    OK(tsafe_bfv_ct_read(S.c, big, need, tmp));
    /* a refused read leaves the ciphertext unusable, neither half-read nor
     * holding the previous message: wrong length, then a bad residue */
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_ct_read(S.c, big, need - 1, tmp));
    IS(TSAFE_E_STATE, tsafe_bfv_ct_write(S.c, tmp, small, sizeof small));
    OK(tsafe_bfv_ct_read(S.c, big, need, tmp));
    memset(big + TSAFE_BFV_SEED_BYTES, 0xFF, 8); /* first residue above q0 */
    IS(TSAFE_E_FORMAT, tsafe_bfv_ct_read(S.c, big, need, tmp));
    IS(TSAFE_E_STATE, tsafe_bfv_ct_write(S.c, tmp, small, sizeof small));
    free(big);
    tsafe_bfv_ct_free(tmp);
}

CHECK_FN(tsafe_bfv_plain_create)
{
    (void)f;
    tsafe_bfv_plain *pt = NULL;
    int64_t big = (int64_t)1 << 41;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_plain_create(NULL, &big, 1, &pt));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_create(S.c, NULL, 1, &pt));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_create(S.c, &big, 1, NULL));
    POISON(pt);
    IS(TSAFE_E_RANGE, tsafe_bfv_plain_create(S.c, &big, 5000, &pt));
    assert_null(pt);
    POISON(pt);
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_plain_create(S.c, &big, 1, &pt));
    assert_null(pt);
}

CHECK_FN(tsafe_bfv_plain_free) { (void)f; tsafe_bfv_plain_free(NULL); }

CHECK_FN(tsafe_bfv_acc_create)
{
    (void)f;
    tsafe_bfv_acc *a = NULL;
    IS(TSAFE_E_NULL, tsafe_bfv_acc_create(NULL, &a));
    assert_null(a);
}

CHECK_FN(tsafe_bfv_acc_free) { (void)f; tsafe_bfv_acc_free(NULL); }
CHECK_FN(tsafe_bfv_acc_zero) { (void)f; tsafe_bfv_acc_zero(NULL); }

CHECK_FN(tsafe_bfv_acc_mul_add)
{
    (void)f;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_acc_mul_add(NULL, S.ct, S.pt));
    IS(TSAFE_E_NULL, tsafe_bfv_acc_mul_add(S.acc, NULL, S.pt));
    IS(TSAFE_E_NULL, tsafe_bfv_acc_mul_add(S.acc, S.ct, NULL));
}

CHECK_FN(tsafe_bfv_sealed_create)
{
    (void)f;
    tsafe_bfv_sealed *r = NULL;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_create(NULL, 1, &r));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_create(S.c, 1, NULL));
    POISON(r);
    IS(TSAFE_E_RANGE, tsafe_bfv_sealed_create(S.c, 5000, &r));
    assert_null(r);
}

CHECK_FN(tsafe_bfv_sealed_free) { (void)f; tsafe_bfv_sealed_free(NULL); }

CHECK_FN(tsafe_bfv_sealed_bytes)
{
    (void)f;
    sealed_world();
    assert_int_equal(tsafe_bfv_sealed_bytes(NULL, 1), 0);
    assert_int_equal(tsafe_bfv_sealed_bytes(S.c, 5000), 0);
}

CHECK_FN(tsafe_bfv_seal)
{
    (void)f;
    uint32_t pos[2] = {7, 4096}, twice[2] = {7, 7};
    uint64_t mask[2] = {0, (uint64_t)1 << 40};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_seal(NULL, S.acc, S.pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal(S.c, NULL, S.pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal(S.c, S.acc, NULL, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal(S.c, S.acc, S.pk, NULL, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal(S.c, S.acc, S.pk, pos, NULL, 1, 20, NULL, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal(S.c, S.acc, S.pk, pos, NULL, 2, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal(S.c, S.acc, S.pk, pos, NULL, 9, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal(S.c, S.acc, S.pk, pos, NULL, 1, 101, NULL, S.res));
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_seal(S.c, S.acc, S.pk, twice, mask, 2, 20, NULL, S.res));
    IS(TSAFE_E_ARG, tsafe_bfv_seal(S.c, S.acc, S.pk, twice, NULL, 2, 20, NULL, S.res));
}

CHECK_FN(tsafe_bfv_sealed_write)
{
    (void)f;
    uint8_t b[8];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_write(NULL, S.res, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_write(S.c, NULL, b, sizeof b));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_write(S.c, S.res, NULL, 0));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_bfv_sealed_write(S.c, S.res, b, sizeof b));
}

CHECK_FN(tsafe_bfv_sealed_read)
{
    (void)f;
    uint8_t b[8] = {0};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_read(NULL, b, sizeof b, 1, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_read(S.c, NULL, sizeof b, 1, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_sealed_read(S.c, b, sizeof b, 1, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_sealed_read(S.c, b, sizeof b, 9, S.res));
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_sealed_read(S.c, b, sizeof b, 1, S.res));
    size_t need = tsafe_bfv_sealed_bytes(S.c, 1);
    uint8_t *ff = malloc(need + 1);
    assert_non_null(ff);
    memset(ff, 0xFF, need + 1); /* every residue above q0 */
    IS(TSAFE_E_FORMAT, tsafe_bfv_sealed_read(S.c, ff, need + 1, 1, S.res));
    IS(TSAFE_E_FORMAT, tsafe_bfv_sealed_read(S.c, ff, need, 1, S.res));
    free(ff);
}

CHECK_FN(tsafe_bfv_sealed_c1) { (void)f; assert_null(tsafe_bfv_sealed_c1(NULL)); }
CHECK_FN(tsafe_bfv_sealed_c0) { (void)f; assert_null(tsafe_bfv_sealed_c0(NULL)); }

CHECK_FN(tsafe_bfv_decrypt_reads)
{
    (void)f;
    uint32_t pos[1] = {5000};
    uint64_t m[1];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(NULL, S.sk, S.res, pos, 0, m));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(S.c, NULL, S.res, pos, 0, m));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(S.c, S.sk, NULL, pos, 0, m));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(S.c, S.sk, S.res, NULL, 1, m));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_reads(S.c, S.sk, S.res, pos, 0, NULL));
    ERR(tsafe_bfv_decrypt_reads(S.c, S.sk, S.res, pos, 1, m)); /* count != reads */
}

CHECK_FN(tsafe_bfv_decrypt_noise)
{
    (void)f;
    uint32_t pos[1] = {1};
    double e[1];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_noise(NULL, S.sk, S.res, pos, 0, e));
    IS(TSAFE_E_NULL, tsafe_bfv_decrypt_noise(S.c, S.sk, S.res, pos, 1, NULL));
    ERR(tsafe_bfv_decrypt_noise(S.c, S.sk, S.res, pos, 7, e));
}

static const api_case k_bfv[] = {
    ENTRY(tsafe_bfv_context_create), ENTRY(tsafe_bfv_context_free), ENTRY(tsafe_bfv_context_n),
    ENTRY(tsafe_bfv_context_prime), ENTRY(tsafe_bfv_context_log2_q),
    ENTRY(tsafe_bfv_context_limbs),
    ENTRY(tsafe_bfv_context_params), ENTRY(tsafe_bfv_context_fingerprint),
    ENTRY(tsafe_bfv_secret_key_generate), ENTRY(tsafe_bfv_secret_key_free),
    ENTRY(tsafe_bfv_public_key_generate), ENTRY(tsafe_bfv_public_key_free),
    ENTRY(tsafe_bfv_public_key_bytes), ENTRY(tsafe_bfv_public_key_write),
    ENTRY(tsafe_bfv_public_key_read), ENTRY(tsafe_bfv_ct_create), ENTRY(tsafe_bfv_ct_free),
    ENTRY(tsafe_bfv_encrypt), ENTRY(tsafe_bfv_ct_bytes), ENTRY(tsafe_bfv_ct_write),
    ENTRY(tsafe_bfv_ct_read), ENTRY(tsafe_bfv_plain_create), ENTRY(tsafe_bfv_plain_free),
    ENTRY(tsafe_bfv_acc_create), ENTRY(tsafe_bfv_acc_free), ENTRY(tsafe_bfv_acc_zero),
    ENTRY(tsafe_bfv_acc_mul_add), ENTRY(tsafe_bfv_sealed_create), ENTRY(tsafe_bfv_sealed_free),
    ENTRY(tsafe_bfv_sealed_bytes), ENTRY(tsafe_bfv_seal), ENTRY(tsafe_bfv_sealed_write),
    ENTRY(tsafe_bfv_sealed_read), ENTRY(tsafe_bfv_sealed_c1), ENTRY(tsafe_bfv_sealed_c0),
    ENTRY(tsafe_bfv_decrypt_reads), ENTRY(tsafe_bfv_decrypt_noise),
};

/* ------------------------------------------------------ lora_sealed.h */

CHECK_FN(tsafe_sealed_plan_derive)
{
    (void)f;
    tsafe_sealed_plan p;
    tsafe_sealed_opts wide = {.x_bits = 24, .a_bits = 24, .b_bits = 24, .semi_honest = 1};
    IS(TSAFE_E_NULL, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 4, 64, NULL, NULL));
    /* sealed mode without the caller's semi-honest opt-in */
    IS(TSAFE_E_INSECURE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 4, 64, NULL, &p));
    IS(TSAFE_E_ARG, tsafe_sealed_plan_derive((tsafe_sealed_mode)7, 64, 4, 64, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 0, 4, 64, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 0, 64, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 4, 0, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 2000, 64, NULL, &p));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_derive(TSAFE_SEALED, 64, 4, 64, &wide, &p));
}

CHECK_FN(tsafe_sealed_plan_check)
{
    (void)f;
    tsafe_sealed_plan bad;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_plan_check(NULL));
    OK(tsafe_sealed_plan_check(&S.plan));
    bad = S.plan;
    bad.version = 99;
    IS(TSAFE_E_VERSION, tsafe_sealed_plan_check(&bad));
    bad = S.plan;
    bad.flood1 = 1;
    IS(TSAFE_E_PARAMS, tsafe_sealed_plan_check(&bad));
}

CHECK_FN(tsafe_sealed_plan_sizes)
{
    (void)f;
    tsafe_sealed_sizes z;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_plan_sizes(NULL, 4, 64, &z));
    IS(TSAFE_E_NULL, tsafe_sealed_plan_sizes(&S.plan, 4, 64, NULL));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_sizes(&S.plan, 5, 64, &z));
    IS(TSAFE_E_RANGE, tsafe_sealed_plan_sizes(&S.plan, 4, 65, &z));
    OK(tsafe_sealed_plan_sizes(&S.plan, 4, 64, &z));
    assert_true(z.query > 0 && z.response1 > 0 && z.share > 0 && z.response2 > 0);
}

CHECK_FN(tsafe_sealed_site_create)
{
    (void)f;
    tsafe_sealed_site *s = NULL;
    float nan_a[4 * 64];
    sealed_world();
    memcpy(nan_a, S.A, sizeof nan_a);
    nan_a[3] = NAN;
    IS(TSAFE_E_NULL, tsafe_sealed_site_create(NULL, S.A, S.B, 4, 64, 1.0f, &s));
    IS(TSAFE_E_NULL, tsafe_sealed_site_create(&S.plan, NULL, S.B, 4, 64, 1.0f, &s));
    IS(TSAFE_E_NULL, tsafe_sealed_site_create(&S.plan, S.A, NULL, 4, 64, 1.0f, &s));
    IS(TSAFE_E_NULL, tsafe_sealed_site_create(&S.plan, S.A, S.B, 4, 64, 1.0f, NULL));
    POISON(s);
    IS(TSAFE_E_RANGE, tsafe_sealed_site_create(&S.plan, S.A, S.B, 5, 64, 1.0f, &s));
    assert_null(s);
    POISON(s);
    IS(TSAFE_E_RANGE, tsafe_sealed_site_create(&S.plan, S.A, S.B, 4, 65, 1.0f, &s));
    assert_null(s);
    POISON(s);
    IS(TSAFE_E_VALUE_RANGE, tsafe_sealed_site_create(&S.plan, nan_a, S.B, 4, 64, 1.0f, &s));
    assert_null(s);
    POISON(s);
    IS(TSAFE_E_VALUE_RANGE, tsafe_sealed_site_create(&S.plan, S.A, S.B, 4, 64, INFINITY, &s));
    assert_null(s);
}

CHECK_FN(tsafe_sealed_site_free) { (void)f; tsafe_sealed_site_free(NULL); }

CHECK_FN(tsafe_sealed_set_rounding_key)
{
    (void)f;
    /* NULL draws a fresh key (valid); a key repeats one adapter's B_q */
    assert_int_equal(tsafe_sealed_set_rounding_key(NULL), TSAFE_OK);
    uint8_t key[32] = {7};
    assert_int_equal(tsafe_sealed_set_rounding_key(key), TSAFE_OK);
}

CHECK_FN(tsafe_sealed_site_rank)
{
    (void)f;
    sealed_world();
    assert_int_equal(tsafe_sealed_site_rank(NULL), 0);
    assert_int_equal(tsafe_sealed_site_rank(S.site), 4);
}

CHECK_FN(tsafe_sealed_site_d_out)
{
    (void)f;
    sealed_world();
    assert_int_equal(tsafe_sealed_site_d_out(NULL), 0);
    assert_int_equal(tsafe_sealed_site_d_out(S.site), 64);
}

CHECK_FN(tsafe_sealed_client_create)
{
    (void)f;
    tsafe_sealed_client *c = NULL;
    tsafe_sealed_plan bad;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_client_create(NULL, NULL, &c));
    IS(TSAFE_E_NULL, tsafe_sealed_client_create(&S.plan, NULL, NULL));
    bad = S.plan;
    bad.r1.flags = TSAFE_BFV_INSECURE_FOR_TESTS;
    POISON(c);
    IS(TSAFE_E_INSECURE, tsafe_sealed_client_create(&bad, NULL, &c));
    assert_null(c);
}

CHECK_FN(tsafe_sealed_client_free) { (void)f; tsafe_sealed_client_free(NULL); }

CHECK_FN(tsafe_sealed_client_needs_hello)
{
    (void)f;
    assert_int_equal(tsafe_sealed_client_needs_hello(NULL), 0);
}

CHECK_FN(tsafe_sealed_client_failed)
{
    (void)f;
    assert_int_equal(tsafe_sealed_client_failed(NULL), 0);
}

CHECK_FN(tsafe_sealed_client_hello)
{
    (void)f;
    uint8_t *m = NULL;
    size_t n;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_client_hello(NULL, &m, &n));
    IS(TSAFE_E_NULL, tsafe_sealed_client_hello(S.cl, NULL, &n));
    IS(TSAFE_E_NULL, tsafe_sealed_client_hello(S.cl, &m, NULL));
    assert_null(m);
}

CHECK_FN(tsafe_sealed_client_query)
{
    (void)f;
    uint8_t *m = NULL;
    size_t n;
    float bad[64];
    sealed_world();
    memcpy(bad, S.x, sizeof bad);
    bad[0] = NAN;
    IS(TSAFE_E_NULL, tsafe_sealed_client_query(NULL, S.x, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_query(S.cl, NULL, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_query(S.cl, S.x, NULL, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_query(S.cl, S.x, &m, NULL, NULL));
    POISON(m);
    n = 1;
    if (!tsafe_sealed_client_needs_hello(S.cl)) /* after the hello case */
        IS(TSAFE_E_VALUE_RANGE, tsafe_sealed_client_query(S.cl, bad, &m, &n, NULL));
    else
        IS(TSAFE_E_STATE, tsafe_sealed_client_query(S.cl, S.x, &m, &n, NULL));
    assert_null(m);
    assert_int_equal(n, 0);
}

CHECK_FN(tsafe_sealed_client_respond)
{
    (void)f;
    uint8_t b[8] = {0}, *m = NULL;
    size_t n;
    uint32_t r = 4, d = 64, bigr = 5;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(NULL, b, 8, 1, &r, &d, NULL, 1, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, NULL, 8, 1, &r, &d, NULL, 1, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, b, 8, 1, NULL, &d, NULL, 1, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, b, 8, 1, &r, NULL, NULL, 1, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, b, 8, 1, &r, &d, NULL, 1, NULL, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_respond(S.cl, b, 8, 1, &r, &d, NULL, 1, &m, NULL, NULL));
    /* no query pending */
    POISON(m);
    n = 1;
    IS(TSAFE_E_STATE, tsafe_sealed_client_respond(S.cl, b, 8, 1, &r, &d, NULL, 1, &m, &n, NULL));
    (void)bigr;
    assert_null(m);
    assert_int_equal(n, 0);
}

CHECK_FN(tsafe_sealed_client_finish)
{
    (void)f;
    uint8_t b[8] = {0};
    uint32_t d = 64;
    float out[64], *o = out;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_client_finish(NULL, b, 8, 1, &d, &o, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_finish(S.cl, NULL, 8, 1, &d, &o, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_finish(S.cl, b, 8, 1, NULL, &o, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_client_finish(S.cl, b, 8, 1, &d, NULL, NULL));
    IS(TSAFE_E_STATE, tsafe_sealed_client_finish(S.cl, b, 8, 1, &d, &o, NULL));
}

CHECK_FN(tsafe_sealed_server_create)
{
    (void)f;
    tsafe_sealed_server *s = NULL;
    tsafe_sealed_plan bad;
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_create(NULL, &s));
    IS(TSAFE_E_NULL, tsafe_sealed_server_create(&S.plan, NULL));
    bad = S.plan;
    bad.chunk1 = 1;
    POISON(s);
    IS(TSAFE_E_PARAMS, tsafe_sealed_server_create(&bad, &s));
    assert_null(s);
}

CHECK_FN(tsafe_sealed_server_free) { (void)f; tsafe_sealed_server_free(NULL); }

CHECK_FN(tsafe_sealed_server_accept)
{
    (void)f;
    uint8_t b[8] = {0};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_accept(NULL, b, 8));
    IS(TSAFE_E_NULL, tsafe_sealed_server_accept(S.sv, NULL, 8));
    ERR(tsafe_sealed_server_accept(S.sv, b, 8));
    ERR(tsafe_sealed_server_accept(S.sv, b, 0));
    /* a real hello on a server of its own: accepted once, then a replay;
     * one byte short is truncated, one byte long is refused */
    tsafe_sealed_server *sv;
    uint8_t *h, *h2;
    size_t hn;
    OK(tsafe_sealed_server_create(&S.plan, &sv));
    OK(tsafe_sealed_client_hello(S.cl, &h, &hn));
    h2 = malloc(hn + 1);
    assert_non_null(h2);
    memcpy(h2, h, hn);
    h2[hn] = 0;
    IS(TSAFE_E_TRUNCATED, tsafe_sealed_server_accept(sv, h, hn - 1));
    IS(TSAFE_E_FORMAT, tsafe_sealed_server_accept(sv, h2, hn + 1));
    OK(tsafe_sealed_server_accept(sv, h, hn));
    IS(TSAFE_E_REPLAY, tsafe_sealed_server_accept(sv, h, hn));
    free(h2);
    tsafe_lora_bytes_free(h);
    tsafe_sealed_server_free(sv);
}

CHECK_FN(tsafe_sealed_server_round1)
{
    (void)f;
    uint8_t b[8] = {0}, *m = NULL;
    size_t n;
    const tsafe_sealed_site *ss[1] = {S.site}, *nul[1] = {NULL};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(NULL, ss, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, NULL, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, nul, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, ss, 1, NULL, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, ss, 1, b, 8, NULL, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round1(S.sv, ss, 1, b, 8, &m, NULL, NULL));
    POISON(m);
    IS(TSAFE_E_RANGE, tsafe_sealed_server_round1(S.sv, ss, 0, b, 8, &m, &n, NULL));
    assert_null(m);
    POISON(m);
    n = 1;
    IS(TSAFE_E_STATE, tsafe_sealed_server_round1(S.sv, ss, 1, b, 8, &m, &n, NULL)); /* no session */
    assert_null(m);
    assert_int_equal(n, 0);
}

CHECK_FN(tsafe_sealed_server_round2)
{
    (void)f;
    uint8_t b[8] = {0}, *m = NULL;
    size_t n;
    const tsafe_sealed_site *ss[1] = {S.site};
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(NULL, ss, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(S.sv, NULL, 1, b, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(S.sv, ss, 1, NULL, 8, &m, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(S.sv, ss, 1, b, 8, NULL, &n, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_round2(S.sv, ss, 1, b, 8, &m, NULL, NULL));
    POISON(m);
    IS(TSAFE_E_RANGE, tsafe_sealed_server_round2(S.sv, ss, 0, b, 8, &m, &n, NULL));
    assert_null(m);
    POISON(m);
    n = 1;
    IS(TSAFE_E_STATE, tsafe_sealed_server_round2(S.sv, ss, 1, b, 8, &m, &n, NULL));
    assert_null(m);
    assert_int_equal(n, 0);
}

CHECK_FN(tsafe_sealed_server_last_u)
{
    (void)f;
    int64_t u[4];
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_last_u(NULL, 0, u, 4));
    IS(TSAFE_E_NULL, tsafe_sealed_server_last_u(S.sv, 0, NULL, 4));
    IS(TSAFE_E_STATE, tsafe_sealed_server_last_u(S.sv, 0, u, 4)); /* sealed-private */
}

CHECK_FN(tsafe_sealed_pair_create)
{
    (void)f;
    tsafe_sealed_pair *p = NULL;
    IS(TSAFE_E_NULL, tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, NULL));
    POISON(p);
    IS(TSAFE_E_ARG, tsafe_sealed_pair_create((tsafe_sealed_mode)9, NULL, NULL, 0, &p));
    assert_null(p);
    /* sealed without a DP session needs the explicit opt-out */
    POISON(p);
    IS(TSAFE_E_ARG, tsafe_sealed_pair_create(TSAFE_SEALED, NULL, NULL, 0, &p));
    assert_null(p);
}

CHECK_FN(tsafe_sealed_pair_free) { (void)f; tsafe_sealed_pair_free(NULL); }

CHECK_FN(tsafe_sealed_pair_prepare)
{
    const tsafe_lora_site *ss[1] = {f->site}, *nul[1] = {NULL};
    tsafe_sealed_pair *p;
    OK(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &p));
    IS(TSAFE_E_NULL, tsafe_sealed_pair_prepare(NULL, ss, 1));
    IS(TSAFE_E_NULL, tsafe_sealed_pair_prepare(p, NULL, 1));
    ERR(tsafe_sealed_pair_prepare(p, nul, 1));
    IS(TSAFE_E_RANGE, tsafe_sealed_pair_prepare(p, ss, 100000));
    tsafe_sealed_pair_free(p);
}

CHECK_FN(tsafe_lora_engine_sealed)
{
    tsafe_sealed_pair *p;
    OK(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &p));
    engine_checks(f, tsafe_lora_engine_sealed(p), 0);
    tsafe_lora_engine e = tsafe_lora_engine_sealed(NULL);
    const tsafe_lora_site *ss[1] = {f->site};
    float *d[1] = {f->delta};
    IS(TSAFE_E_NULL, e.fn(e.user, ss, 1, f->x, d, NULL));
    tsafe_sealed_pair_free(p);
}

/* ------------------------------------------------------ bfv_backend.h */

CHECK_FN(tsafe_bfv_ct_read_buffer)
{
    sealed_world();
    tsafe_buffer *x = NULL, *ckks_buf = f->buf;
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &x));
    uint8_t bytes[8] = {0};
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffer(NULL, bytes, sizeof bytes, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffer(S.c, NULL, sizeof bytes, x));
    IS(TSAFE_E_NULL, tsafe_bfv_ct_read_buffer(S.c, bytes, sizeof bytes, NULL));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_ct_read_buffer(S.c, bytes, sizeof bytes, ckks_buf));
    IS(TSAFE_E_TRUNCATED, tsafe_bfv_ct_read_buffer(S.c, bytes, sizeof bytes, x));
    tsafe_buffer_free(x);
    OK(tsafe_buffer_alloc(b, 1, tsafe_bfv_context_limbs(S.c), &x)); /* one polynomial */
    IS(TSAFE_E_RANGE, tsafe_bfv_ct_read_buffer(S.c, bytes, sizeof bytes, x));
    tsafe_buffer_free(x);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_plain_operand)
{
    sealed_world();
    tsafe_buffer *o = NULL;
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_operand(S.pt, b, NULL));
    POISON(o);
    IS(TSAFE_E_NULL, tsafe_bfv_plain_operand(NULL, b, &o));
    assert_null(o);
    IS(TSAFE_E_NULL, tsafe_bfv_plain_operand(S.pt, NULL, &o));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_plain_operand(S.pt, f->be, &o)); /* CKKS ring */
    assert_null(o);
    OK(tsafe_bfv_plain_operand(S.pt, b, &o));
    tsafe_buffer_free(o);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_plain_encode_buffer)
{
    sealed_world();
    tsafe_buffer *o = NULL, *plainbuf = NULL;
    tsafe_backend *b = NULL;
    int64_t m[2] = {1, (int64_t)1 << 41};
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_buffer_alloc_operand(b, 1, tsafe_bfv_context_limbs(S.c), &o));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &plainbuf));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_encode_buffer(NULL, m, 1, o));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_encode_buffer(S.c, NULL, 1, o));
    IS(TSAFE_E_NULL, tsafe_bfv_plain_encode_buffer(S.c, m, 1, NULL));
    IS(TSAFE_E_ARG, tsafe_bfv_plain_encode_buffer(S.c, m, 1, plainbuf)); /* 2 polynomials */
    IS(TSAFE_E_RANGE, tsafe_bfv_plain_encode_buffer(S.c, m, 4097, o));
    IS(TSAFE_E_VALUE_RANGE, tsafe_bfv_plain_encode_buffer(S.c, m, 2, o));
    OK(tsafe_bfv_plain_encode_buffer(S.c, m, 1, o));
    tsafe_buffer_free(plainbuf);
    tsafe_buffer_free(o);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_public_key_operand)
{
    sealed_world();
    tsafe_buffer *o = NULL;
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_operand(S.pk, b, NULL));
    POISON(o);
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_operand(NULL, b, &o));
    assert_null(o);
    IS(TSAFE_E_NULL, tsafe_bfv_public_key_operand(S.pk, NULL, &o));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_public_key_operand(S.pk, f->be, &o));
    OK(tsafe_bfv_public_key_operand(S.pk, b, &o));
    tsafe_buffer_free(o);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_create)
{
    sealed_world();
    tsafe_bfv_sealer *sl = NULL;
    tsafe_backend *b = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_create(S.c, b, NULL));
    POISON(sl);
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_create(NULL, b, &sl));
    assert_null(sl);
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_create(S.c, NULL, &sl));
    IS(TSAFE_E_PARAMS_MISMATCH, tsafe_bfv_sealer_create(S.c, f->be, &sl));
    assert_null(sl);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_free)
{
    (void)f;
    tsafe_bfv_sealer_free(NULL);
}

CHECK_FN(tsafe_bfv_seal_buffer)
{
    sealed_world();
    tsafe_backend *b = NULL;
    tsafe_bfv_sealer *sl = NULL;
    tsafe_buffer *acc = NULL, *pk = NULL;
    uint32_t pos[2] = {7, 4096}, twice[2] = {7, 7};
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_bfv_sealer_create(S.c, b, &sl));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &acc));
    OK(tsafe_bfv_public_key_operand(S.pk, b, &pk));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(NULL, acc, pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(sl, NULL, pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(sl, acc, NULL, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(sl, acc, pk, NULL, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_NULL, tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 1, 20, NULL, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_buffer(sl, pk, acc, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_ARG, tsafe_bfv_seal_buffer(sl, f->buf, pk, pos, NULL, 1, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 2, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 9, 20, NULL, S.res));
    IS(TSAFE_E_RANGE, tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 1, 101, NULL, S.res));
    IS(TSAFE_E_ARG, tsafe_bfv_seal_buffer(sl, acc, pk, twice, NULL, 2, 20, NULL, S.res));
    OK(tsafe_bfv_seal_buffer(sl, acc, pk, pos, NULL, 1, 20, NULL, S.res));
    tsafe_buffer_free(pk);
    tsafe_buffer_free(acc);
    tsafe_bfv_sealer_free(sl);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_prepare)
{
    sealed_world();
    tsafe_backend *b = NULL;
    tsafe_bfv_sealer *sl = NULL;
    tsafe_buffer *pk = NULL, *plain = NULL;
    OK(tsafe_backend_cpu_create_bfv(S.c, &b));
    OK(tsafe_bfv_sealer_create(S.c, b, &sl));
    OK(tsafe_bfv_public_key_operand(S.pk, b, &pk));
    OK(tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(S.c), &plain));
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_prepare(NULL, pk, 1, NULL));
    IS(TSAFE_E_NULL, tsafe_bfv_sealer_prepare(sl, NULL, 1, NULL));
    IS(TSAFE_E_RANGE, tsafe_bfv_sealer_prepare(sl, plain, 1, NULL)); /* not an operand */
    IS(TSAFE_E_ARG, tsafe_bfv_sealer_prepare(sl, f->buf, 1, NULL));  /* another backend */
    IS(TSAFE_E_RANGE, tsafe_bfv_sealer_prepare(sl, pk, (size_t)1 << 21, NULL));
    OK(tsafe_bfv_sealer_prepare(sl, pk, 2, NULL));
    assert_int_equal(tsafe_bfv_sealer_ready(sl), 2);
    tsafe_buffer_free(plain);
    tsafe_buffer_free(pk);
    tsafe_bfv_sealer_free(sl);
    tsafe_backend_free(b);
}

CHECK_FN(tsafe_bfv_sealer_ready)
{
    (void)f;
    assert_int_equal(tsafe_bfv_sealer_ready(NULL), 0);
}

CHECK_FN(tsafe_bfv_sealer_drop)
{
    (void)f;
    tsafe_bfv_sealer_drop(NULL);
}

static const api_case k_bfv_backend[] = {
    ENTRY(tsafe_bfv_sealer_prepare), ENTRY(tsafe_bfv_sealer_ready),
    ENTRY(tsafe_bfv_sealer_drop),
    ENTRY(tsafe_bfv_ct_read_buffer), ENTRY(tsafe_bfv_plain_operand),
    ENTRY(tsafe_bfv_plain_encode_buffer), ENTRY(tsafe_bfv_public_key_operand),
    ENTRY(tsafe_bfv_sealer_create), ENTRY(tsafe_bfv_sealer_free), ENTRY(tsafe_bfv_seal_buffer),
};

CHECK_FN(tsafe_sealed_server_use_backend)
{
    sealed_world();
    static const tsafe_backend_factory broken = {"broken", NULL, NULL};
    IS(TSAFE_E_NULL, tsafe_sealed_server_use_backend(NULL, NULL));
    ERR(tsafe_sealed_server_use_backend(S.sv, &broken));
    assert_string_equal(tsafe_sealed_server_backend_name(S.sv), "cpu"); /* kept */
    OK(tsafe_sealed_server_use_backend(S.sv, NULL));
}

CHECK_FN(tsafe_sealed_server_refill)
{
    sealed_world();
    IS(TSAFE_E_NULL, tsafe_sealed_server_refill(NULL, NULL));
    OK(tsafe_sealed_server_refill(S.sv, NULL)); /* no session yet: nothing to do */
}

CHECK_FN(tsafe_sealed_server_prepare_round2)
{
    sealed_world();
    const tsafe_sealed_site *sites[1] = {S.site};
    IS(TSAFE_E_NULL, tsafe_sealed_server_prepare_round2(NULL, sites, 1, NULL));
    IS(TSAFE_E_NULL, tsafe_sealed_server_prepare_round2(S.sv, NULL, 1, NULL));
    IS(TSAFE_E_RANGE, tsafe_sealed_server_prepare_round2(S.sv, sites, 0, NULL));
    /* no session, no round 1 pending */
    IS(TSAFE_E_STATE, tsafe_sealed_server_prepare_round2(S.sv, sites, 1, NULL));
}

CHECK_FN(tsafe_sealed_server_backend_name)
{
    sealed_world();
    assert_string_equal(tsafe_sealed_server_backend_name(NULL), "none");
    assert_string_equal(tsafe_sealed_server_backend_name(S.sv), "cpu");
}

CHECK_FN(tsafe_sealed_pair_use_backend)
{
    (void)f;
    IS(TSAFE_E_NULL, tsafe_sealed_pair_use_backend(NULL, NULL));
}

static const api_case k_lora_sealed[] = {
    ENTRY(tsafe_sealed_server_use_backend),
    ENTRY(tsafe_sealed_server_refill), ENTRY(tsafe_sealed_server_prepare_round2),
    ENTRY(tsafe_sealed_server_backend_name), ENTRY(tsafe_sealed_pair_use_backend),
    ENTRY(tsafe_sealed_plan_derive), ENTRY(tsafe_sealed_plan_check),
    ENTRY(tsafe_sealed_plan_sizes), ENTRY(tsafe_sealed_site_create),
    ENTRY(tsafe_sealed_site_free), ENTRY(tsafe_sealed_set_rounding_key), ENTRY(tsafe_sealed_site_rank), ENTRY(tsafe_sealed_site_d_out),
    ENTRY(tsafe_sealed_client_create), ENTRY(tsafe_sealed_client_free),
    ENTRY(tsafe_sealed_client_hello), ENTRY(tsafe_sealed_client_needs_hello),
    ENTRY(tsafe_sealed_client_failed),
    ENTRY(tsafe_sealed_client_query), ENTRY(tsafe_sealed_client_respond),
    ENTRY(tsafe_sealed_client_finish), ENTRY(tsafe_sealed_server_create),
    ENTRY(tsafe_sealed_server_free), ENTRY(tsafe_sealed_server_accept),
    ENTRY(tsafe_sealed_server_round1), ENTRY(tsafe_sealed_server_round2),
    ENTRY(tsafe_sealed_server_last_u), ENTRY(tsafe_sealed_pair_create),
    ENTRY(tsafe_sealed_pair_free), ENTRY(tsafe_sealed_pair_prepare),
    ENTRY(tsafe_lora_engine_sealed),
};

/* ------------------------------------------------------ lora_engine.h */

CHECK_FN(tsafe_lora_module_create)
{
    tsafe_lora_module *m = NULL;
    float nan_a[LR * LD];
    memcpy(nan_a, f->A, sizeof nan_a);
    nan_a[3] = NAN;
    IS(TSAFE_E_NULL, tsafe_lora_module_create(NULL, f->B, LR, LD, LD, 1.0f, &m));
    IS(TSAFE_E_NULL, tsafe_lora_module_create(f->A, NULL, LR, LD, LD, 1.0f, &m));
    IS(TSAFE_E_NULL, tsafe_lora_module_create(f->A, f->B, LR, LD, LD, 1.0f, NULL));
    IS(TSAFE_E_ARG, tsafe_lora_module_create(f->A, f->B, 0, LD, LD, 1.0f, &m));
    IS(TSAFE_E_ARG, tsafe_lora_module_create(f->A, f->B, LR, 0, LD, 1.0f, &m));
    IS(TSAFE_E_ARG, tsafe_lora_module_create(f->A, f->B, LR, LD, 0, 1.0f, &m));
    IS(TSAFE_E_VALUE_RANGE, tsafe_lora_module_create(nan_a, f->B, LR, LD, LD, 1.0f, &m));
    IS(TSAFE_E_VALUE_RANGE, tsafe_lora_module_create(f->A, f->B, LR, LD, LD, INFINITY, &m));
    assert_null(m);
    OK(tsafe_lora_module_create(f->A, f->B, LR, LD, LD, 1.0f, &m));
    tsafe_lora_module_free(m);
}

CHECK_FN(tsafe_lora_module_from_info)
{
    tsafe_lora_module *m = NULL;
    tsafe_lora_module_info info = {.rank = LR, .in_dim = LD, .out_dim = LD, .scale = 2.0,
                                   .A = f->A, .B = f->B};
    IS(TSAFE_E_NULL, tsafe_lora_module_from_info(NULL, &m));
    IS(TSAFE_E_NULL, tsafe_lora_module_from_info(&info, NULL));
    info.rank = (size_t)1 << 40;
    IS(TSAFE_E_ARG, tsafe_lora_module_from_info(&info, &m));
    info.rank = LR;
    OK(tsafe_lora_module_from_info(&info, &m));
    assert_true(tsafe_lora_module_scale(m) == 2.0f);
    tsafe_lora_module_free(m);
}

CHECK_FN(tsafe_lora_module_free) { (void)f; tsafe_lora_module_free(NULL); }

/* Every getter answers 0 / NULL for NULL. */
static void module_getters_null(void)
{
    assert_int_equal(tsafe_lora_module_id(NULL), 0);
    assert_int_equal(tsafe_lora_module_rank(NULL), 0);
    assert_int_equal(tsafe_lora_module_d_in(NULL), 0);
    assert_int_equal(tsafe_lora_module_d_out(NULL), 0);
    assert_true(tsafe_lora_module_scale(NULL) == 0.0f);
    assert_null(tsafe_lora_module_A(NULL));
    assert_null(tsafe_lora_module_B(NULL));
}
CHECK_FN(tsafe_lora_module_id) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_rank) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_d_in) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_d_out) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_scale) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_A) { (void)f; module_getters_null(); }
CHECK_FN(tsafe_lora_module_B) { (void)f; module_getters_null(); }

CHECK_FN(tsafe_lora_site_module)
{
    assert_null(tsafe_lora_site_module(NULL));
    const tsafe_lora_module *m = tsafe_lora_site_module(f->site);
    assert_non_null(m);
    assert_int_equal(tsafe_lora_module_rank(m), LR);
    assert_true(tsafe_lora_module_id(m) != 0);
}

/* A module engine given NULLs / a NULL owner returns an error. */
static void module_engine_checks(fixture *f, tsafe_lora_module_engine e, int null_user_ok)
{
    const tsafe_lora_module *ms[1] = {tsafe_lora_site_module(f->site)}, *nulls[1] = {NULL};
    float *ds[1] = {f->delta}, *nullds[1] = {NULL};
    assert_non_null(e.fn);
    ERR(tsafe_lora_module_engine_run(&e, NULL, 1, f->x, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, nulls, 1, f->x, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, 0, f->x, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, SIZE_MAX, f->x, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, 1, NULL, ds, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, 1, f->x, NULL, NULL));
    ERR(tsafe_lora_module_engine_run(&e, ms, 1, f->x, nullds, NULL));
    if (!null_user_ok)
        ERR(e.fn(NULL, ms, 1, f->x, ds, NULL));
}

CHECK_FN(tsafe_lora_module_engine_run)
{
    tsafe_lora_module_engine none = {NULL, NULL, NULL};
    const tsafe_lora_module *ms[1] = {tsafe_lora_site_module(f->site)};
    float *ds[1] = {f->delta};
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_run(NULL, ms, 1, f->x, ds, NULL));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_run(&none, ms, 1, f->x, ds, NULL));
}

CHECK_FN(tsafe_lora_module_engine_prepare)
{
    tsafe_lora_module_engine none = {NULL, NULL, NULL}, plain = tsafe_lora_module_engine_plain();
    tsafe_lora_module_engine local = tsafe_lora_module_engine_local(NULL);
    const tsafe_lora_module *ms[1] = {tsafe_lora_site_module(f->site)}, *nulls[1] = {NULL};
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(NULL, ms, 1));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(&none, ms, 1));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(&plain, NULL, 1));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(&plain, nulls, 1));
    IS(TSAFE_E_RANGE, tsafe_lora_module_engine_prepare(&plain, ms, SIZE_MAX));
    IS(TSAFE_E_NULL, tsafe_lora_module_engine_prepare(&local, ms, 1));
    OK(tsafe_lora_module_engine_prepare(&plain, ms, 1)); /* nothing to prepare */
    local = tsafe_lora_module_engine_local(f->local);
    OK(tsafe_lora_module_engine_prepare(&local, ms, 1));
}

CHECK_FN(tsafe_lora_module_engine_plain)
{
    module_engine_checks(f, tsafe_lora_module_engine_plain(), 1);
}

CHECK_FN(tsafe_lora_module_engine_local)
{
    module_engine_checks(f, tsafe_lora_module_engine_local(NULL), 0);
    module_engine_checks(f, tsafe_lora_module_engine_local(f->local), 0);
}

CHECK_FN(tsafe_lora_module_engine_two_party)
{
    tsafe_lora_pair pair = {f->client, f->server, NULL}, half = {NULL, f->server, NULL};
    module_engine_checks(f, tsafe_lora_module_engine_two_party(NULL), 0);
    module_engine_checks(f, tsafe_lora_module_engine_two_party(&half), 0);
    module_engine_checks(f, tsafe_lora_module_engine_two_party(&pair), 0);
}

CHECK_FN(tsafe_lora_module_engine_sealed)
{
    tsafe_sealed_pair *p;
    OK(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, NULL, NULL, 0, &p));
    module_engine_checks(f, tsafe_lora_module_engine_sealed(NULL), 0);
    module_engine_checks(f, tsafe_lora_module_engine_sealed(p), 0);
    tsafe_sealed_pair_free(p);
}

static const api_case k_lora_engine[] = {
    ENTRY(tsafe_lora_module_create), ENTRY(tsafe_lora_module_from_info),
    ENTRY(tsafe_lora_module_free), ENTRY(tsafe_lora_module_id),
    ENTRY(tsafe_lora_module_rank), ENTRY(tsafe_lora_module_d_in),
    ENTRY(tsafe_lora_module_d_out), ENTRY(tsafe_lora_module_scale),
    ENTRY(tsafe_lora_module_A), ENTRY(tsafe_lora_module_B), ENTRY(tsafe_lora_site_module),
    ENTRY(tsafe_lora_module_engine_run), ENTRY(tsafe_lora_module_engine_prepare),
    ENTRY(tsafe_lora_module_engine_plain),
    ENTRY(tsafe_lora_module_engine_local), ENTRY(tsafe_lora_module_engine_two_party),
    ENTRY(tsafe_lora_module_engine_sealed),
};

/* ----------------------------------------------------- lora_session.h */

/* One sealed-private service over the fixture's adapter, a server session
 * of it and a client session (not connected). */
static void session_objects(fixture *f, tsafe_session_service **svc, tsafe_session_server **s,
                            tsafe_session_client **c)
{
    tsafe_session_module m = {"q_proj", f->A, f->B, LD, LR, LD, 1.0f};
    tsafe_session_service_opts so = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    tsafe_session_client_opts co = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    OK(tsafe_session_service_create(&so, &m, 1, svc));
    OK(tsafe_session_server_create(*svc, NULL, s));
    OK(tsafe_session_client_create(&co, NULL, c));
}

static void session_free(tsafe_session_service *svc, tsafe_session_server *s,
                         tsafe_session_client *c)
{
    tsafe_session_client_free(c);
    tsafe_session_server_free(s);
    tsafe_session_service_free(svc);
}

CHECK_FN(tsafe_session_protocol_name)
{
    (void)f;
    assert_string_equal(tsafe_session_protocol_name((tsafe_session_protocol)99), "unknown");
    assert_string_equal(tsafe_session_protocol_name(TSAFE_SESSION_SEALED), "sealed");
}

CHECK_FN(tsafe_session_service_create)
{
    tsafe_session_service *svc = (tsafe_session_service *)1;
    tsafe_session_module m = {"q_proj", f->A, f->B, LD, LR, LD, 1.0f};
    tsafe_session_service_opts so = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    IS(TSAFE_E_NULL, tsafe_session_service_create(NULL, &m, 1, &svc));
    assert_null(svc);
    IS(TSAFE_E_NULL, tsafe_session_service_create(&so, NULL, 1, &svc));
    IS(TSAFE_E_NULL, tsafe_session_service_create(&so, &m, 1, NULL));
    IS(TSAFE_E_RANGE, tsafe_session_service_create(&so, &m, 0, &svc));
    so.protocol = (tsafe_session_protocol)7;
    IS(TSAFE_E_ARG, tsafe_session_service_create(&so, &m, 1, &svc));
    so.protocol = TSAFE_SESSION_PLAIN_ZERO_MOAI; /* needs its CKKS plan */
    IS(TSAFE_E_NULL, tsafe_session_service_create(&so, &m, 1, &svc));
    so.protocol = TSAFE_SESSION_SEALED; /* needs semi_honest */
    IS(TSAFE_E_INSECURE, tsafe_session_service_create(&so, &m, 1, &svc));
    so.protocol = TSAFE_SESSION_SEALED_PRIVATE;
    m.name = NULL;
    IS(TSAFE_E_NULL, tsafe_session_service_create(&so, &m, 1, &svc));
    m.name = "bad\nname";
    IS(TSAFE_E_ARG, tsafe_session_service_create(&so, &m, 1, &svc));
    m.name = "q";
    m.rank = 0;
    IS(TSAFE_E_ARG, tsafe_session_service_create(&so, &m, 1, &svc));
}

CHECK_FN(tsafe_session_service_free) { (void)f; tsafe_session_service_free(NULL); }

CHECK_FN(tsafe_session_service_widths)
{
    (void)f;
    assert_int_equal(tsafe_session_service_widths(NULL), 0);
    assert_int_equal(tsafe_session_service_hello_version(NULL), 0);
}

CHECK_FN(tsafe_session_service_hello_version)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    assert_int_equal(tsafe_session_service_hello_version(svc), 2);
    assert_int_equal(tsafe_session_service_widths(svc), 1);
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_service_plan)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    tsafe_sealed_plan p;
    size_t n;
    IS(TSAFE_E_NULL, tsafe_session_service_plan(NULL, 0, &p, &n));
    IS(TSAFE_E_NULL, tsafe_session_service_plan(svc, 0, NULL, &n));
    IS(TSAFE_E_NULL, tsafe_session_service_plan(svc, 0, &p, NULL));
    IS(TSAFE_E_RANGE, tsafe_session_service_plan(svc, 1, &p, &n));
    OK(tsafe_session_service_plan(svc, 0, &p, &n));
    assert_int_equal(n, 1);
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_create)
{
    tsafe_session_server *s = (tsafe_session_server *)1;
    (void)f;
    IS(TSAFE_E_NULL, tsafe_session_server_create(NULL, NULL, &s));
    assert_null(s);
    IS(TSAFE_E_NULL, tsafe_session_server_create(NULL, NULL, NULL));
}

CHECK_FN(tsafe_session_server_free) { (void)f; tsafe_session_server_free(NULL); }

/* The calls of either machine that take a NULL session. */
CHECK_FN(tsafe_session_server_feed)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    size_t used = 7;
    uint8_t b[1] = {0};
    IS(TSAFE_E_NULL, tsafe_session_server_feed(NULL, b, 1, &used));
    IS(TSAFE_E_NULL, tsafe_session_server_feed(s, NULL, 1, &used));
    IS(TSAFE_E_NULL, tsafe_session_server_feed(s, b, 1, NULL));
    OK(tsafe_session_server_feed(s, NULL, 0, &used));
    assert_int_equal(used, 0);
    IS(TSAFE_E_NULL, tsafe_session_client_feed(NULL, b, 1, &used));
    IS(TSAFE_E_NULL, tsafe_session_client_feed(c, NULL, 1, &used));
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_output)
{
    (void)f;
    const uint8_t *d = (const uint8_t *)1;
    size_t n = 5;
    tsafe_session_server_output(NULL, &d, &n);
    assert_null(d);
    assert_int_equal(n, 0);
    tsafe_session_server_output(NULL, NULL, NULL);
    tsafe_session_client_output(NULL, &d, &n);
    assert_int_equal(n, 0);
    tsafe_session_server_sent(NULL, 3);
    tsafe_session_client_sent(NULL, 3);
}

CHECK_FN(tsafe_session_server_sent) { check_tsafe_session_server_output(f); }

CHECK_FN(tsafe_session_server_wants)
{
    (void)f;
    assert_int_equal(tsafe_session_server_wants(NULL), TSAFE_SESSION_FAILED);
    assert_int_equal(tsafe_session_client_wants(NULL), TSAFE_SESSION_FAILED);
}

CHECK_FN(tsafe_session_server_work)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    IS(TSAFE_E_NULL, tsafe_session_server_work(NULL));
    OK(tsafe_session_server_work(s)); /* nothing pending */
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_abort)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    tsafe_session_server_abort(NULL, TSAFE_E_IO, NULL);
    tsafe_session_client_abort(NULL, TSAFE_E_IO, NULL);
    tsafe_session_server_abort(s, TSAFE_E_STATE, NULL);
    IS(TSAFE_E_STATE, tsafe_session_server_status(s));
    assert_true(tsafe_session_server_wants(s) & TSAFE_SESSION_FAILED);
    tsafe_session_client_abort(c, TSAFE_E_RANGE, "host");
    IS(TSAFE_E_RANGE, tsafe_session_client_status(c));
    assert_string_equal(tsafe_session_client_what(c), "host");
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_status)
{
    (void)f;
    IS(TSAFE_E_NULL, tsafe_session_server_status(NULL));
    IS(TSAFE_E_NULL, tsafe_session_client_status(NULL));
}

CHECK_FN(tsafe_session_server_what)
{
    (void)f;
    assert_string_equal(tsafe_session_server_what(NULL), "");
    assert_string_equal(tsafe_session_client_what(NULL), "");
}

CHECK_FN(tsafe_session_server_stats)
{
    (void)f;
    tsafe_session_stats st;
    tsafe_session_server_stats(NULL, &st);
    assert_int_equal(st.tokens, 0);
    tsafe_session_server_stats(NULL, NULL);
    tsafe_session_client_stats(NULL, &st);
    tsafe_session_client_stats(NULL, NULL);
}

CHECK_FN(tsafe_session_client_create)
{
    (void)f;
    tsafe_session_client *c = (tsafe_session_client *)1;
    tsafe_session_client_opts co = {.protocol = TSAFE_SESSION_SEALED};
    IS(TSAFE_E_NULL, tsafe_session_client_create(NULL, NULL, &c));
    assert_null(c);
    IS(TSAFE_E_NULL, tsafe_session_client_create(&co, NULL, NULL));
    IS(TSAFE_E_ARG, tsafe_session_client_create(&co, NULL, &c)); /* no DP, no allow_no_dp */
    co.allow_no_dp = 1;
    IS(TSAFE_E_INSECURE, tsafe_session_client_create(&co, NULL, &c));
    co.protocol = TSAFE_SESSION_PLAIN_ZERO_MOAI;
    co.per_query = 1;
    IS(TSAFE_E_ARG, tsafe_session_client_create(&co, NULL, &c));
}

CHECK_FN(tsafe_session_client_free) { (void)f; tsafe_session_client_free(NULL); }
CHECK_FN(tsafe_session_client_feed) { check_tsafe_session_server_feed(f); }
CHECK_FN(tsafe_session_client_output) { check_tsafe_session_server_output(f); }
CHECK_FN(tsafe_session_client_sent) { check_tsafe_session_server_output(f); }
CHECK_FN(tsafe_session_client_wants) { check_tsafe_session_server_wants(f); }
CHECK_FN(tsafe_session_client_abort) { check_tsafe_session_server_abort(f); }
CHECK_FN(tsafe_session_client_status) { check_tsafe_session_server_status(f); }
CHECK_FN(tsafe_session_client_what) { check_tsafe_session_server_what(f); }
CHECK_FN(tsafe_session_client_stats) { check_tsafe_session_server_stats(f); }

/* Before the hello: nothing to read, nothing to submit. */
CHECK_FN(tsafe_session_client_modules)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    const char *name;
    uint32_t a, b, d;
    tsafe_sealed_plan sp;
    float *out[1] = {f->delta};
    assert_int_equal(tsafe_session_client_modules(NULL), 0);
    assert_int_equal(tsafe_session_client_modules(c), 0);
    IS(TSAFE_E_NULL, tsafe_session_client_module(NULL, 0, &name, &a, &b, &d));
    IS(TSAFE_E_NULL, tsafe_session_client_module(c, 0, NULL, &a, &b, &d));
    IS(TSAFE_E_STATE, tsafe_session_client_module(c, 0, &name, &a, &b, &d));
    IS(TSAFE_E_NULL, tsafe_session_client_plan(NULL, 0, &sp, NULL));
    IS(TSAFE_E_STATE, tsafe_session_client_plan(c, 0, &sp, NULL));
    IS(TSAFE_E_NULL, tsafe_session_client_submit(NULL, NULL, 0, f->x, out));
    IS(TSAFE_E_NULL, tsafe_session_client_submit(c, NULL, 0, NULL, out));
    IS(TSAFE_E_NULL, tsafe_session_client_submit(c, NULL, 0, f->x, NULL));
    IS(TSAFE_E_STATE, tsafe_session_client_submit(c, NULL, 0, f->x, out));
    IS(TSAFE_E_NULL, tsafe_session_client_close(NULL));
    IS(TSAFE_E_STATE, tsafe_session_client_close(c));
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_client_module) { check_tsafe_session_client_modules(f); }
CHECK_FN(tsafe_session_client_plan) { check_tsafe_session_client_modules(f); }
CHECK_FN(tsafe_session_client_submit) { check_tsafe_session_client_modules(f); }
CHECK_FN(tsafe_session_client_close) { check_tsafe_session_client_modules(f); }

CHECK_FN(tsafe_session_server_run)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    tsafe_session_transport t = {NULL, NULL, NULL};
    float *out[1] = {f->delta};
    IS(TSAFE_E_NULL, tsafe_session_server_run(NULL, &t));
    IS(TSAFE_E_NULL, tsafe_session_server_run(s, NULL));
    IS(TSAFE_E_NULL, tsafe_session_server_run(s, &t)); /* no callbacks */
    IS(TSAFE_E_NULL, tsafe_session_client_connect(NULL, &t));
    IS(TSAFE_E_NULL, tsafe_session_client_connect(c, &t));
    IS(TSAFE_E_NULL, tsafe_session_client_delta(c, NULL, NULL, 0, f->x, out));
    IS(TSAFE_E_NULL, tsafe_session_client_bye(c, &t));
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_pump)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    IS(TSAFE_E_NULL, tsafe_session_pump(NULL, c));
    IS(TSAFE_E_NULL, tsafe_session_pump(s, NULL));
    OK(tsafe_session_pump(s, c)); /* the hello: the client is READY */
    assert_true(tsafe_session_client_wants(c) & TSAFE_SESSION_READY);
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_client_connect) { check_tsafe_session_server_run(f); }
CHECK_FN(tsafe_session_client_delta) { check_tsafe_session_server_run(f); }
CHECK_FN(tsafe_session_client_bye) { check_tsafe_session_server_run(f); }

static const api_case k_lora_session[] = {
    ENTRY(tsafe_session_protocol_name), ENTRY(tsafe_session_service_create),
    ENTRY(tsafe_session_service_free), ENTRY(tsafe_session_service_widths),
    ENTRY(tsafe_session_service_hello_version), ENTRY(tsafe_session_service_plan),
    ENTRY(tsafe_session_server_create), ENTRY(tsafe_session_server_free),
    ENTRY(tsafe_session_server_feed), ENTRY(tsafe_session_server_output),
    ENTRY(tsafe_session_server_sent), ENTRY(tsafe_session_server_wants),
    ENTRY(tsafe_session_server_work), ENTRY(tsafe_session_server_abort),
    ENTRY(tsafe_session_server_status), ENTRY(tsafe_session_server_what),
    ENTRY(tsafe_session_server_stats), ENTRY(tsafe_session_client_create),
    ENTRY(tsafe_session_client_free), ENTRY(tsafe_session_client_feed),
    ENTRY(tsafe_session_client_output), ENTRY(tsafe_session_client_sent),
    ENTRY(tsafe_session_client_wants), ENTRY(tsafe_session_client_modules),
    ENTRY(tsafe_session_client_module), ENTRY(tsafe_session_client_plan),
    ENTRY(tsafe_session_client_submit), ENTRY(tsafe_session_client_close),
    ENTRY(tsafe_session_client_abort), ENTRY(tsafe_session_client_status),
    ENTRY(tsafe_session_client_what), ENTRY(tsafe_session_client_stats),
    ENTRY(tsafe_session_pump), ENTRY(tsafe_session_server_run),
    ENTRY(tsafe_session_client_connect),
    ENTRY(tsafe_session_client_delta), ENTRY(tsafe_session_client_bye),
};

/* ------------------------------------------------------------ driver */

#define TABLE(h, t) {h, t, sizeof t / sizeof t[0], 0}
static const api_table k_tables[] = {
    TABLE("status.h", k_status),
    TABLE("version.h", k_version),
    TABLE("ckks.h", k_ckks),
    TABLE("backend.h", k_backend),
    TABLE("backend_impl.h", k_backend_impl),
    TABLE("ckks_buffer.h", k_ckks_buffer),
    TABLE("lora_he.h", k_lora_he),
    TABLE("lora_engine.h", k_lora_engine),
    TABLE("lora_two_party.h", k_lora_two_party),
    TABLE("bfv.h", k_bfv),
    TABLE("bfv_backend.h", k_bfv_backend),
    TABLE("lora_sealed.h", k_lora_sealed),
    TABLE("lora_session.h", k_lora_session),
    TABLE("lora_dp.h", k_lora_dp),
    TABLE("lora_svd.h", k_lora_svd),
    TABLE("lora_package.h", k_lora_package),
    TABLE("lora_registry.h", k_lora_registry),
    TABLE("safetensors.h", k_safetensors),
    TABLE("lora_adapter.h", k_lora_adapter),
    TABLE("moe.h", k_moe),
    TABLE("moe_lora.h", k_moe_lora),
    CUDA_TABLE,
};
#define N_TABLES (sizeof k_tables / sizeof k_tables[0])

static void run_table(void **state)
{
    const api_table *t = (const api_table *)*state;
    for (size_t i = 0; i < t->n; i++)
        t->cases[i].check(&F);
    print_message("%-18s %zu functions\n", t->header, t->n);
}

/* --------------------------------------------------- header coverage */

static const char *include_dir(void)
{
    const char *e = getenv("TSAFE_INCLUDE_DIR");
    return e && *e ? e : "include/tensafe";
}

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, fp) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(fp);
    if (s)
        s[n] = '\0';
    return s;
}

static int is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* Calls fn(name) for every function declared with TSAFE_API in text. */
static size_t for_each_api(const char *text, const api_table *t, size_t *missing)
{
    size_t found = 0;
    const char *p = text;
    while ((p = strstr(p, "TSAFE_API")) != NULL) {
        const char *line = p;
        while (line > text && line[-1] != '\n')
            line--;
        p += 9;
        if (is_ident(*p) || strncmp(line, "#", 1) == 0)
            continue; /* the macro's own definition or a longer identifier */
        const char *paren = strchr(p, '(');
        if (!paren)
            break;
        const char *e = paren;
        while (e > p && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\t'))
            e--;
        const char *b = e;
        while (b > p && is_ident(b[-1]))
            b--;
        char name[128];
        size_t len = (size_t)(e - b);
        if (len == 0 || len >= sizeof name)
            continue;
        memcpy(name, b, len);
        name[len] = '\0';
        found++;
        int ok = 0;
        for (size_t i = 0; i < t->n && !ok; i++)
            ok = strcmp(t->cases[i].name, name) == 0;
        if (!ok) {
            print_error("%s: %s has no NULL/out-of-range case\n", t->header, name);
            (*missing)++;
        }
        p = paren;
    }
    return found;
}

static void test_header_coverage(void **state)
{
    (void)state;
    DIR *d = opendir(include_dir());
    if (!d)
        fail_msg("cannot open %s (run from the repository root)", include_dir());
    struct dirent *e;
    size_t missing = 0, total = 0, headers = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".h") != 0 || strcmp(e->d_name, "export.h") == 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", include_dir(), e->d_name);
        char *text = slurp(path);
        assert_non_null(text);
        const api_table *t = NULL;
        for (size_t i = 0; i < N_TABLES; i++)
            if (strcmp(k_tables[i].header, e->d_name) == 0)
                t = &k_tables[i];
        api_table none = {e->d_name, NULL, 0, 0};
        if (!t)
            t = &none;
        if (t->skipped) {
            print_message("%-18s skipped (not built in this configuration)\n", t->header);
        } else {
            size_t before = missing;
            size_t found = for_each_api(text, t, &missing);
            if (found && !t->cases && missing > before)
                print_error("%s: header has no table in test_api_null.c\n", e->d_name);
            total += found;
            headers++;
            /* every table entry names a function of its header */
            for (size_t i = 0; i < t->n; i++) {
                const char *hit = strstr(text, t->cases[i].name);
                int whole = 0;
                while (hit && !whole) {
                    whole = !is_ident(hit[strlen(t->cases[i].name)]) &&
                            (hit == text || !is_ident(hit[-1]));
                    if (!whole)
                        hit = strstr(hit + 1, t->cases[i].name);
                }
                if (!whole) {
                    print_error("%s: table entry %s is not declared there\n", t->header,
                                t->cases[i].name);
                    missing++;
                }
            }
        }
        free(text);
    }
    closedir(d);
    print_message("%zu functions in %zu headers, %zu without a case\n", total, headers, missing);
    assert_int_equal(missing, 0);
    assert_true(total > 200);
}

int main(void)
{
    struct CMUnitTest tests[N_TABLES + 1];
    size_t n = 0;
    for (size_t i = 0; i < N_TABLES; i++) {
        if (k_tables[i].skipped)
            continue;
        struct CMUnitTest t = {k_tables[i].header, run_table, NULL, NULL,
                               (void *)&k_tables[i]};
        tests[n++] = t;
    }
    struct CMUnitTest cov = {"header_coverage", test_header_coverage, NULL, NULL, NULL};
    tests[n++] = cov;
    return _cmocka_run_group_tests("api_null", tests, n, setup_fixture, teardown_fixture);
}
