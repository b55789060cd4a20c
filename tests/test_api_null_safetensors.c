/* NULL and out-of-range arguments to every function of tensafe/safetensors.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

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

int main(void)
{
    static const api_table tables[] = {TABLE("safetensors.h", k_safetensors)};
    return api_null_run("api_null_safetensors", tables, sizeof tables / sizeof tables[0], 0);
}
