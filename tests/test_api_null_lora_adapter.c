/* NULL and out-of-range arguments to every function of tensafe/lora_adapter.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

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

int main(void)
{
    static const api_table tables[] = {TABLE("lora_adapter.h", k_lora_adapter)};
    return api_null_run("api_null_lora_adapter", tables, sizeof tables / sizeof tables[0], 0);
}
