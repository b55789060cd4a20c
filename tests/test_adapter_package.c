/* Adapters from signed packages: a package loads only after verification
 * against the caller's key; any change or another key is refused; the
 * loaded adapter equals the packed one. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_adapter.h"
#include "tensafe/lora_package.h"
#include "support/tsafe_test_rng.h"

static void test_package_roundtrip_and_refusals(void **state)
{
    (void)state;
    tsafe_lora_config cfg = {8, 16.0, 0, 0};
    tsafe_lora_adapter *ad = NULL;
    assert_int_equal(tsafe_lora_adapter_create(&cfg, &ad), TSAFE_OK);
    float A[8 * 64], B[32 * 8];
    for (int i = 0; i < 8 * 64; i++) A[i] = (float)tsafe_test_uniform(-1, 1);
    for (int i = 0; i < 32 * 8; i++) B[i] = (float)tsafe_test_uniform(-1, 1);
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
    tsafe_package_manifest m = {"bank-v1", "banking", 8, 16.0, targets, 1, 0.25, "tests"};
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

int main(void)
{
    tsafe_test_rng_init("adapter_package");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_package_roundtrip_and_refusals),
    };
    return cmocka_run_group_tests_name("adapter_package", tests, NULL, NULL);
}
