/* Adapters from signed packages: a package loads only after verification
 * against the caller's key; any change or another key is refused; the
 * loaded adapter equals the packed one. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "tensafe/lora_adapter.h"
#include "tensafe/lora_package.h"
#include "tensafe/lora_registry.h"
#include "support/tsafe_test_rng.h"

static void test_package_roundtrip_and_refusals(void **state)
{
    (void)state;
    tsafe_lora_config cfg = {8, 16.0, 0, 0};
    tsafe_lora_adapter *ad = NULL;
    assert_int_equal(tsafe_lora_adapter_create(&cfg, &ad), TSAFE_OK);
    float A[8 * 64], B[32 * 8];
    for (int i = 0; i < 8 * 64; i++) A[i] = tsafe_test_uniform_float(-1, 1);
    for (int i = 0; i < 32 * 8; i++) B[i] = tsafe_test_uniform_float(-1, 1);
    assert_int_equal(tsafe_lora_adapter_add_module(ad, "layers.0.self_attn.q_proj", 8, 64, 32, A,
                                                   B, 16.0), TSAFE_OK);
    char *config = NULL;
    uint8_t *st_bytes = NULL;
    size_t st_len = 0;
    assert_int_equal(tsafe_lora_adapter_save_peft_memory(ad, TSAFE_DTYPE_F32, &config, &st_bytes,
                                                         &st_len), TSAFE_OK);
    uint8_t pk[32], sk[64], other_pk[32], other_sk[64];
    assert_int_equal(tsafe_package_keypair(pk, sk), TSAFE_OK);
    assert_int_equal(tsafe_package_keypair(other_pk, other_sk), TSAFE_OK);
    const char *targets[] = {"q_proj"};
    tsafe_package_manifest m = {.adapter_id = "bank-v1", .domain = "banking", .rank = 8,
        .alpha = 16.0, .targets = targets, .n_targets = 1,
        .price_per_1k_tokens = 0.25, .creator = "tests"};
    uint8_t *pkg = NULL;
    size_t pkg_len = 0;
    assert_int_equal(tsafe_package_create(&m, st_bytes, st_len, sk, &pkg, &pkg_len), TSAFE_OK);

    tsafe_lora_adapter *loaded = NULL;
    assert_int_equal(tsafe_lora_adapter_load_package(pkg, pkg_len, pk, NULL, &loaded), TSAFE_OK);
    tsafe_lora_module_info mi;
    assert_int_equal(tsafe_lora_adapter_module_count(loaded), 1);
    assert_int_equal(tsafe_lora_adapter_module(loaded, 0, &mi), TSAFE_OK);
    assert_string_equal(mi.name, "layers.0.self_attn.q_proj");
    assert_memory_equal(mi.A, A, sizeof A);
    assert_memory_equal(mi.B, B, sizeof B);
    assert_true(mi.scale == 2.0);
    tsafe_lora_adapter_free(loaded);

    /* another key: refused, nothing loaded */
    loaded = (tsafe_lora_adapter *)1;
    assert_int_equal(tsafe_lora_adapter_load_package(pkg, pkg_len, other_pk, NULL, &loaded),
                     TSAFE_E_VERIFY);
    assert_null(loaded);
    /* any changed byte: refused (sampled positions incl. header and end) */
    for (size_t i = 0; i < pkg_len; i += 1 + pkg_len / 300) {
        pkg[i] ^= 0x20;
        assert_int_not_equal(tsafe_lora_adapter_load_package(pkg, pkg_len, pk, NULL, &loaded),
                             TSAFE_OK);
        assert_null(loaded);
        pkg[i] ^= 0x20;
    }
    for (size_t t = 0; t < pkg_len; t += 1 + t / 8)
        assert_int_not_equal(tsafe_lora_adapter_load_package(pkg, t, pk, NULL, &loaded), TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_load_package(NULL, 0, pk, NULL, &loaded), TSAFE_E_NULL);
    tsafe_package_bytes_free(pkg);
    tsafe_safetensors_bytes_free(config);
    tsafe_safetensors_bytes_free(st_bytes);
    tsafe_lora_adapter_free(ad);
}

/* Issue 23.1: PEFT rank_pattern / alpha_pattern and rsLoRA travel in the
 * signed manifest; the loaded modules get the rank, alpha and scale PEFT's
 * rules give (computed here from the rule, not from the loader), and the
 * manifest's pattern order is PEFT's precedence. */
static void test_package_with_patterns(void **state)
{
    (void)state;
    enum { D = 48 };
    static const struct {
        const char *name;
        size_t rank;
        double alpha; /* PEFT's, as the manifest below assigns it */
    } mods[] = {{"layers.0.self_attn.k_proj", 8, 16.0},
                {"layers.0.self_attn.q_proj", 8, 5.0},
                {"layers.0.self_attn.v_proj", 4, 3.0}};
    tsafe_lora_config cfg = {8, 16.0, 1, 0};
    tsafe_lora_adapter *ad = NULL;
    assert_int_equal(tsafe_lora_adapter_create(&cfg, &ad), TSAFE_OK);
    float A[3][8 * D], B[3][D * 8];
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < mods[k].rank * D; i++) {
            A[k][i] = tsafe_test_uniform_float(-1, 1);
            B[k][i] = tsafe_test_uniform_float(-1, 1);
        }
        assert_int_equal(tsafe_lora_adapter_add_module(ad, mods[k].name, mods[k].rank, D, D, A[k],
                                                       B[k], mods[k].alpha), TSAFE_OK);
    }
    char *config = NULL;
    uint8_t *st_bytes = NULL, *pkg = NULL, pk[32], sk[64];
    size_t st_len = 0, pkg_len = 0;
    assert_int_equal(tsafe_lora_adapter_save_peft_memory(ad, TSAFE_DTYPE_F32, &config, &st_bytes,
                                                         &st_len), TSAFE_OK);
    assert_int_equal(tsafe_package_keypair(pk, sk), TSAFE_OK);
    const char *targets[] = {"k_proj", "q_proj", "v_proj"};
    /* "self_attn.v_proj" comes first, so it wins over "v_proj" (rank 2) */
    tsafe_package_pattern rp[2] = {{"self_attn.v_proj", 4}, {"v_proj", 2}};
    const tsafe_package_pattern ap[2] = {{"v_proj", 3.0}, {"q_proj", 5.0}};
    tsafe_package_manifest m = {.adapter_id = "pat", .domain = "", .rank = 8, .alpha = 16.0,
                                .targets = targets, .n_targets = 3, .creator = "",
                                .rank_pattern = rp, .n_rank_pattern = 2,
                                .alpha_pattern = ap, .n_alpha_pattern = 2, .use_rslora = 1};
    assert_int_equal(tsafe_package_create(&m, st_bytes, st_len, sk, &pkg, &pkg_len), TSAFE_OK);
    tsafe_lora_adapter *loaded = NULL;
    assert_int_equal(tsafe_lora_adapter_load_package(pkg, pkg_len, pk, NULL, &loaded), TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_module_count(loaded), 3);
    for (size_t k = 0; k < 3; k++) {
        tsafe_lora_module_info mi;
        assert_int_equal(tsafe_lora_adapter_module(loaded, k, &mi), TSAFE_OK);
        assert_string_equal(mi.name, mods[k].name);
        assert_int_equal(mi.rank, mods[k].rank);
        assert_true(mi.alpha == mods[k].alpha);
        assert_true(mi.scale == mods[k].alpha / sqrt((double)mods[k].rank)); /* rsLoRA */
        assert_memory_equal(mi.A, A[k], mods[k].rank * D * sizeof(float));
        assert_memory_equal(mi.B, B[k], mods[k].rank * D * sizeof(float));
    }
    tsafe_lora_adapter_free(loaded);
    tsafe_package_bytes_free(pkg);

    /* the other order gives v_proj rank 2, which its factors contradict */
    rp[0] = (tsafe_package_pattern){"v_proj", 2};
    rp[1] = (tsafe_package_pattern){"self_attn.v_proj", 4};
    assert_int_equal(tsafe_package_create(&m, st_bytes, st_len, sk, &pkg, &pkg_len), TSAFE_OK);
    tsafe_error_info err;
    tsafe_lora_load_options opt = {TSAFE_LORA_FUSED_IN_OUT, &err};
    assert_int_equal(tsafe_lora_adapter_load_package(pkg, pkg_len, pk, &opt, &loaded),
                     TSAFE_E_ADAPTER);
    assert_null(loaded);
    assert_non_null(strstr(err.detail, "v_proj"));
    tsafe_package_bytes_free(pkg);
    tsafe_safetensors_bytes_free(config);
    tsafe_safetensors_bytes_free(st_bytes);
    tsafe_lora_adapter_free(ad);
    sodium_memzero(sk, sizeof sk);
}

static int g_destroyed;
static void count_destroy(void *o)
{
    (void)o;
    g_destroyed++;
}

static void hex32(const uint8_t *b, char *out)
{
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

/* The origin of the slot's entry in the registry's JSON export. */
static json_t *json_origin(tsafe_registry *reg, const char *slot, json_t **root)
{
    char *js = NULL;
    assert_int_equal(tsafe_registry_metering_json(reg, &js), TSAFE_OK);
    *root = json_loads(js, 0, NULL);
    free(js);
    assert_non_null(*root);
    json_t *slots = json_object_get(*root, "slots");
    for (size_t i = 0; i < json_array_size(slots); i++) {
        json_t *e = json_array_get(slots, i);
        if (strcmp(json_string_value(json_object_get(e, "slot")), slot) == 0)
            return json_object_get(e, "origin");
    }
    fail_msg("slot %s not in the export", slot);
    return NULL;
}

/* Issue 12.4: loaders record where an adapter came from; a registry
 * refuses unsigned entries unless allowed, and records (and exports) the
 * origin of each entry. */
static void test_origin_and_unsigned_policy(void **state)
{
    (void)state;
    tsafe_lora_config cfg = {4, 8.0, 0, 0};
    tsafe_lora_adapter *built = NULL;
    assert_int_equal(tsafe_lora_adapter_create(&cfg, &built), TSAFE_OK);
    float A[4 * 16], B[8 * 4];
    for (int i = 0; i < 4 * 16; i++) A[i] = tsafe_test_uniform_float(-1, 1);
    for (int i = 0; i < 8 * 4; i++) B[i] = tsafe_test_uniform_float(-1, 1);
    assert_int_equal(tsafe_lora_adapter_add_module(built, "layers.0.self_attn.q_proj", 4, 16, 8,
                                                   A, B, 8.0), TSAFE_OK);
    tsafe_lora_origin o;
    assert_int_equal(tsafe_lora_adapter_origin(built, &o), TSAFE_OK);
    assert_int_equal(o.kind, TSAFE_LORA_ORIGIN_UNSIGNED);
    assert_null(o.path);

    /* signed: the package digest (as the signature covers it) and the key */
    char *config = NULL;
    uint8_t *st_bytes = NULL, pk[32], sk[64], other_pk[32], other_sk[64];
    size_t st_len = 0;
    assert_int_equal(tsafe_lora_adapter_save_peft_memory(built, TSAFE_DTYPE_F32, &config,
                                                         &st_bytes, &st_len), TSAFE_OK);
    assert_int_equal(tsafe_package_keypair(pk, sk), TSAFE_OK);
    assert_int_equal(tsafe_package_keypair(other_pk, other_sk), TSAFE_OK);
    const char *targets[] = {"q_proj"};
    tsafe_package_manifest m = {.adapter_id = "bank-v2", .domain = "banking", .rank = 4,
        .alpha = 8.0, .targets = targets, .n_targets = 1,
        .price_per_1k_tokens = 0.25, .creator = "tests"};
    uint8_t *pkg = NULL;
    size_t pkg_len = 0;
    assert_int_equal(tsafe_package_create(&m, st_bytes, st_len, sk, &pkg, &pkg_len), TSAFE_OK);
    tsafe_lora_adapter *signed_ad = NULL, *mem_ad = NULL, *dir_ad = NULL;
    assert_int_equal(tsafe_lora_adapter_load_package(pkg, pkg_len, pk, NULL, &signed_ad),
                     TSAFE_OK);
    uint8_t want[32];
    crypto_generichash(want, 32, pkg, pkg_len - 96, NULL, 0); /* BLAKE2b-256 of the body */
    assert_int_equal(tsafe_lora_adapter_origin(signed_ad, &o), TSAFE_OK);
    assert_int_equal(o.kind, TSAFE_LORA_ORIGIN_SIGNED);
    assert_memory_equal(o.package_digest, want, 32);
    assert_memory_equal(o.signer_key, pk, 32);
    assert_null(o.path);
    /* a refused package says why, through the error info */
    tsafe_error_info ei;
    tsafe_lora_load_options opt = {TSAFE_LORA_FUSED_IN_OUT, &ei};
    tsafe_lora_adapter *none = NULL;
    assert_int_equal(tsafe_lora_adapter_load_package(pkg, pkg_len, other_pk, &opt, &none),
                     TSAFE_E_VERIFY);
    assert_int_equal(ei.status, TSAFE_E_VERIFY);
    assert_non_null(strstr(ei.detail, "does not verify against the trusted key"));

    /* unsigned: memory (no path) and a directory (its path) */
    assert_int_equal(tsafe_lora_adapter_load_peft_memory(config, strlen(config), st_bytes,
                                                         st_len, NULL, &mem_ad), TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_origin(mem_ad, &o), TSAFE_OK);
    assert_int_equal(o.kind, TSAFE_LORA_ORIGIN_UNSIGNED);
    assert_null(o.path);
    char dir[] = "/tmp/tensafe-origin-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(tsafe_lora_adapter_save_peft(built, dir, TSAFE_DTYPE_F32), TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_load_peft(dir, &dir_ad), TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_origin(dir_ad, &o), TSAFE_OK);
    assert_int_equal(o.kind, TSAFE_LORA_ORIGIN_UNSIGNED);
    assert_string_equal(o.path, dir);

    /* registry: unsigned refused by default, the caller keeps the object */
    tsafe_registry *reg = NULL;
    assert_int_equal(tsafe_registry_create(&reg), TSAFE_OK);
    tsafe_lora_origin od;
    assert_int_equal(tsafe_lora_adapter_origin(dir_ad, &od), TSAFE_OK);
    tsafe_registry_meta meta = {"bank-v2", 0.25, &od};
    g_destroyed = 0;
    assert_int_equal(tsafe_registry_put(reg, "q", dir_ad, count_destroy, &meta),
                     TSAFE_E_UNSIGNED);
    meta.origin = NULL; /* no origin at all is unsigned too */
    assert_int_equal(tsafe_registry_put(reg, "q", dir_ad, count_destroy, &meta),
                     TSAFE_E_UNSIGNED);
    assert_int_equal(g_destroyed, 0);
    tsafe_registry_ref *ref = NULL;
    assert_int_equal(tsafe_registry_acquire(reg, "q", &ref), TSAFE_E_NOT_FOUND);

    /* signed: accepted, origin readable from a ref and in the JSON export */
    tsafe_lora_origin os;
    assert_int_equal(tsafe_lora_adapter_origin(signed_ad, &os), TSAFE_OK);
    meta.origin = &os;
    assert_int_equal(tsafe_registry_put(reg, "q", signed_ad, count_destroy, &meta), TSAFE_OK);
    assert_int_equal(tsafe_registry_acquire(reg, "q", &ref), TSAFE_OK);
    assert_int_equal(tsafe_registry_ref_origin(ref, &o), TSAFE_OK);
    assert_int_equal(o.kind, TSAFE_LORA_ORIGIN_SIGNED);
    assert_memory_equal(o.package_digest, want, 32);
    assert_memory_equal(o.signer_key, pk, 32);
    tsafe_registry_release(ref);
    json_t *root = NULL, *jo = json_origin(reg, "q", &root);
    char hex[65];
    assert_string_equal(json_string_value(json_object_get(jo, "kind")), "signed");
    hex32(want, hex);
    assert_string_equal(json_string_value(json_object_get(jo, "package_digest")), hex);
    hex32(pk, hex);
    assert_string_equal(json_string_value(json_object_get(jo, "signer_key")), hex);
    json_decref(root);

    /* allowed explicitly: the unsigned directory goes in, with its path */
    assert_int_equal(tsafe_registry_set_allow_unsigned(reg, 1), TSAFE_OK);
    meta.origin = &od;
    assert_int_equal(tsafe_registry_put(reg, "k", dir_ad, count_destroy, &meta), TSAFE_OK);
    assert_int_equal(tsafe_registry_acquire(reg, "k", &ref), TSAFE_OK);
    assert_int_equal(tsafe_registry_ref_origin(ref, &o), TSAFE_OK);
    assert_int_equal(o.kind, TSAFE_LORA_ORIGIN_UNSIGNED);
    assert_string_equal(o.path, dir);
    assert_true(o.path != od.path); /* copied */
    tsafe_registry_release(ref);
    jo = json_origin(reg, "k", &root);
    assert_string_equal(json_string_value(json_object_get(jo, "kind")), "unsigned");
    assert_string_equal(json_string_value(json_object_get(jo, "path")), dir);
    json_decref(root);
    /* refusing again affects later puts only */
    assert_int_equal(tsafe_registry_set_allow_unsigned(reg, 0), TSAFE_OK);
    meta.origin = NULL;
    assert_int_equal(tsafe_registry_put(reg, "m", mem_ad, count_destroy, &meta),
                     TSAFE_E_UNSIGNED);
    assert_int_equal(tsafe_registry_acquire(reg, "k", &ref), TSAFE_OK);
    tsafe_registry_release(ref);
    assert_int_equal(g_destroyed, 0);
    tsafe_registry_free(reg); /* destroys the two entries it owns */
    assert_int_equal(g_destroyed, 2);
    tsafe_lora_adapter_free(signed_ad); /* count_destroy does not free */
    tsafe_lora_adapter_free(dir_ad);

    tsafe_lora_adapter_free(mem_ad);
    char p[128];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    unlink(p);
    rmdir(dir);
    tsafe_package_bytes_free(pkg);
    tsafe_safetensors_bytes_free((uint8_t *)config);
    tsafe_safetensors_bytes_free(st_bytes);
    tsafe_lora_adapter_free(built);
}

int main(void)
{
    tsafe_test_rng_init("adapter_package");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_package_roundtrip_and_refusals),
        cmocka_unit_test(test_package_with_patterns),
        cmocka_unit_test(test_origin_and_unsigned_policy),
    };
    return cmocka_run_group_tests_name("adapter_package", tests, NULL, NULL);
}
