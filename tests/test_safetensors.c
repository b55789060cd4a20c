/* Strict safetensors reader/writer: round trips, every malformed case with
 * its own status, half-precision conversions against ldexp references. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensafe/safetensors.h"
#include "support/tsafe_test_rng.h"

/* 8-byte LE header length + header text + data, built by hand. */
static uint8_t *mk_raw(const char *hdr, size_t hlen, const void *data,
                       size_t dlen, size_t *len)
{
    uint8_t *b = malloc(8 + hlen + dlen + 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, hdr, hlen);
    if (dlen)
        memcpy(b + 8 + hlen, data, dlen);
    *len = 8 + hlen + dlen;
    return b;
}

static tsafe_status parse_text(const char *hdr, size_t dlen)
{
    uint8_t zeros[64] = {0};
    assert_true(dlen <= sizeof zeros);
    size_t len;
    uint8_t *b = mk_raw(hdr, strlen(hdr), zeros, dlen, &len);
    tsafe_safetensors *st = NULL;
    tsafe_status s = tsafe_safetensors_parse(b, len, &st);
    if (s == TSAFE_OK)
        assert_non_null(st);
    else
        assert_null(st);
    tsafe_safetensors_free(st);
    free(b);
    return s;
}

/* ------------------------------------------------------ reference floats */

static double ref_f16(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0)
        v = ldexp(m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(1024 + m, e - 25);
    return sign ? -v : v;
}

static double ref_bf16(uint16_t h)
{
    int sign = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v;
    if (e == 0)
        v = ldexp(m, -133);
    else if (e == 255)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(128 + m, e - 134);
    return sign ? -v : v;
}

static void same_value(float got, double want, unsigned pattern)
{
    if (isnan(want)) {
        if (!isnan(got))
            fail_msg("pattern 0x%04x: want NaN, got %a", pattern, (double)got);
        return;
    }
    if ((double)got != want || !signbit(got) != !signbit(want))
        fail_msg("pattern 0x%04x: want %a, got %a", pattern, want, (double)got);
}

static void test_f16_all_patterns(void **state)
{
    (void)state;
    for (unsigned h = 0; h < 65536; h++)
        same_value(tsafe_f16_to_f32((uint16_t)h), ref_f16((uint16_t)h), h);
}

static void test_bf16_all_patterns(void **state)
{
    (void)state;
    for (unsigned h = 0; h < 65536; h++)
        same_value(tsafe_bf16_to_f32((uint16_t)h), ref_bf16((uint16_t)h), h);
}

/* Encoding: every finite non-negative half h, exact values encode to h;
 * midpoints to the even neighbour; points just off the midpoint to the
 * nearer one. NaNs stay NaN, overflow goes to inf. */
static void test_f16_encode(void **state)
{
    (void)state;
    for (unsigned h = 0; h < 0x7c00; h++) {
        double v = ref_f16((uint16_t)h);
        assert_int_equal(tsafe_f32_to_f16((float)v), h);
        assert_int_equal(tsafe_f32_to_f16((float)-v), h | 0x8000u);
        if (h + 1 < 0x7c00) {
            double next = ref_f16((uint16_t)(h + 1));
            double mid = (v + next) / 2; /* needs 12 bits: exact in float */
            assert_true((double)(float)mid == mid);
            unsigned even = (h & 1) ? h + 1 : h;
            assert_int_equal(tsafe_f32_to_f16((float)mid), even);
            assert_int_equal(tsafe_f32_to_f16(nextafterf((float)mid, 0.f)), h);
            assert_int_equal(tsafe_f32_to_f16(nextafterf((float)mid, INFINITY)),
                             h + 1);
        }
    }
    /* 65504 is the largest half; the midpoint to 65536 rounds to inf. */
    assert_int_equal(tsafe_f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(tsafe_f32_to_f16(65520.f), 0x7c00);
    assert_int_equal(tsafe_f32_to_f16(1e30f), 0x7c00);
    assert_int_equal(tsafe_f32_to_f16(-INFINITY), 0xfc00);
    assert_int_equal(tsafe_f32_to_f16(0x1p-25f), 0); /* tie with 0: even */
    assert_int_equal(tsafe_f32_to_f16(nextafterf(0x1p-25f, 1.f)), 1);
    assert_int_equal(tsafe_f32_to_f16(1e-30f), 0);
    uint16_t qn = tsafe_f32_to_f16(NAN);
    assert_true((qn & 0x7c00) == 0x7c00 && (qn & 0x3ff) != 0);
}

static void test_bf16_encode(void **state)
{
    (void)state;
    for (unsigned h = 0; h < 0x7f80; h++) {
        double v = ref_bf16((uint16_t)h);
        assert_int_equal(tsafe_f32_to_bf16((float)v), h);
        if (h + 1 < 0x7f80) {
            double mid = (v + ref_bf16((uint16_t)(h + 1))) / 2;
            assert_true((double)(float)mid == mid);
            unsigned even = (h & 1) ? h + 1 : h;
            assert_int_equal(tsafe_f32_to_bf16((float)mid), even);
            assert_int_equal(tsafe_f32_to_bf16(nextafterf((float)mid, INFINITY)),
                             h + 1);
        }
    }
    assert_int_equal(tsafe_f32_to_bf16(FLT_MAX), 0x7f80); /* rounds up to inf */
    uint16_t qn = tsafe_f32_to_bf16(-NAN);
    assert_true((qn & 0x7f80) == 0x7f80 && (qn & 0x7f) != 0 && (qn & 0x8000));
}

/* -------------------------------------------------------------- round trip */

static void test_round_trip(void **state)
{
    (void)state;
    tsafe_safetensors_writer *w;
    assert_int_equal(tsafe_safetensors_writer_create(&w), TSAFE_OK);
    enum { N = 37 };
    float vals[N * 3];
    for (size_t i = 0; i < N * 3; i++)
        vals[i] = tsafe_test_uniform_float(-4.0, 4.0);
    uint64_t s32[2] = {N, 3};
    uint64_t s16[1] = {N};
    uint64_t s0[2] = {0, 5};
    int32_t ints[4] = {1, -2, 3, -4};
    uint64_t si[1] = {4};
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "w.f32", TSAFE_DTYPE_F32,
                                                      s32, 2, vals), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "w.f16", TSAFE_DTYPE_F16,
                                                      s16, 1, vals), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "w.bf16", TSAFE_DTYPE_BF16,
                                                      s16, 1, vals), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "a.f64", TSAFE_DTYPE_F64,
                                                      s16, 1, vals), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_add(w, "ints", TSAFE_DTYPE_I32, si,
                                                  1, ints, sizeof ints), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "scalar", TSAFE_DTYPE_F32,
                                                      NULL, 0, vals), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "empty", TSAFE_DTYPE_F32,
                                                      s0, 2, NULL), TSAFE_OK);
    /* writer refusals */
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "ints", TSAFE_DTYPE_F32,
                                                      s16, 1, vals), TSAFE_E_ARG);
    assert_int_equal(tsafe_safetensors_writer_add(w, "bad", TSAFE_DTYPE_I32, si,
                                                  1, ints, 12), TSAFE_E_SHAPE);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "__metadata__",
                                                      TSAFE_DTYPE_F32, s16, 1,
                                                      vals), TSAFE_E_ARG);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "i", TSAFE_DTYPE_I32,
                                                      s16, 1, vals), TSAFE_E_DTYPE);
    assert_int_equal(tsafe_safetensors_writer_set_metadata(w, "format", "pt"),
                     TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_set_metadata(w, "note", "x\"y"),
                     TSAFE_OK);

    uint8_t *bytes;
    size_t len;
    assert_int_equal(tsafe_safetensors_writer_serialize(w, &bytes, &len), TSAFE_OK);

    /* Layout checked independently: header length, padding, JSON fields. */
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | bytes[i];
    assert_true(n % 8 == 0 && 8 + n <= len);
    json_error_t je;
    json_t *root = json_loadb((const char *)bytes + 8, n, 0, &je);
    assert_non_null(root);
    json_t *e = json_object_get(root, "w.f32");
    assert_string_equal(json_string_value(json_object_get(e, "dtype")), "F32");
    json_t *off = json_object_get(e, "data_offsets");
    size_t b0 = (size_t)json_integer_value(json_array_get(off, 0));
    size_t b1 = (size_t)json_integer_value(json_array_get(off, 1));
    assert_int_equal(b1 - b0, N * 3 * 4);
    for (size_t i = 0; i < N * 3; i++) {
        const uint8_t *p = bytes + 8 + n + b0 + 4 * i;
        uint32_t u = p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
        float f;
        memcpy(&f, &u, 4);
        assert_true(f == vals[i]);
    }
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(root, "__metadata__"),
                                          "format")), "pt");
    json_decref(root);

    tsafe_safetensors *st;
    assert_int_equal(tsafe_safetensors_parse(bytes, len, &st), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_tensor_count(st), 7);
    tsafe_tensor_info ti;
    assert_int_equal(tsafe_safetensors_tensor_at(st, 0, &ti), TSAFE_OK);
    assert_string_equal(ti.name, "a.f64"); /* name order */
    assert_int_equal(tsafe_safetensors_tensor_at(st, 7, &ti), TSAFE_E_RANGE);
    assert_int_equal(tsafe_safetensors_find(st, "w.f32", &ti), TSAFE_OK);
    assert_int_equal(ti.ndim, 2);
    assert_int_equal(ti.shape[0], N);
    assert_int_equal(ti.shape[1], 3);
    assert_int_equal(ti.numel, N * 3);
    assert_int_equal(ti.nbytes, N * 12);
    assert_int_equal(tsafe_safetensors_find(st, "nope", NULL), TSAFE_E_NOT_FOUND);

    float got[N * 3];
    assert_int_equal(tsafe_safetensors_read_f32(st, "w.f32", got, N * 3), TSAFE_OK);
    assert_memory_equal(got, vals, sizeof got);
    assert_int_equal(tsafe_safetensors_read_f32(st, "w.f32", got, N), TSAFE_E_ARG);
    assert_int_equal(tsafe_safetensors_read_f32_range(st, "w.f32", 6, 9, got),
                     TSAFE_OK);
    assert_memory_equal(got, vals + 6, 9 * sizeof *got);
    assert_int_equal(tsafe_safetensors_read_f32_range(st, "w.f32", N * 3 - 2, 3, got),
                     TSAFE_E_RANGE);
    assert_int_equal(tsafe_safetensors_read_f32(st, "a.f64", got, N), TSAFE_OK);
    for (size_t i = 0; i < N; i++)
        assert_true(got[i] == vals[i]);
    /* F16 / BF16: nearest representable value: error <= half an ulp. */
    assert_int_equal(tsafe_safetensors_read_f32(st, "w.f16", got, N), TSAFE_OK);
    for (size_t i = 0; i < N; i++)
        assert_true(fabs((double)got[i] - vals[i]) <=
                    ldexp(1.0, ilogb(vals[i]) - 11) + 0x1p-25);
    assert_int_equal(tsafe_safetensors_read_f32(st, "w.bf16", got, N), TSAFE_OK);
    for (size_t i = 0; i < N; i++)
        assert_true(fabs((double)got[i] - vals[i]) <=
                    ldexp(1.0, ilogb(vals[i]) - 8));
    assert_int_equal(tsafe_safetensors_read_f32(st, "ints", got, 4), TSAFE_E_DTYPE);
    const void *raw;
    size_t rawn;
    assert_int_equal(tsafe_safetensors_tensor_data(st, "ints", &raw, &rawn), TSAFE_OK);
    assert_int_equal(rawn, sizeof ints);
    assert_memory_equal(raw, ints, sizeof ints); /* little-endian host */
    assert_int_equal(tsafe_safetensors_find(st, "scalar", &ti), TSAFE_OK);
    assert_int_equal(ti.ndim, 0);
    assert_int_equal(ti.numel, 1);
    assert_int_equal(tsafe_safetensors_find(st, "empty", &ti), TSAFE_OK);
    assert_int_equal(ti.numel, 0);
    assert_string_equal(tsafe_safetensors_metadata(st, "note"), "x\"y");
    assert_null(tsafe_safetensors_metadata(st, "none"));
    assert_int_equal(tsafe_safetensors_metadata_count(st), 2);
    tsafe_safetensors_free(st);

    /* Borrowed parse and file round trip. */
    assert_int_equal(tsafe_safetensors_parse_borrowed(bytes, len, &st), TSAFE_OK);
    tsafe_safetensors_free(st);
    char dir[] = "/tmp/tsafe_st_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    assert_int_equal(tsafe_safetensors_writer_write_file(w, path), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_open_file(path, &st), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_read_f32(st, "w.f32", got, N * 3), TSAFE_OK);
    assert_memory_equal(got, vals, sizeof got);
    tsafe_safetensors_free(st);
    unlink(path);
    rmdir(dir);
    assert_int_equal(tsafe_safetensors_open_file(path, &st), TSAFE_E_NOT_FOUND);

    tsafe_safetensors_bytes_free(bytes);
    tsafe_safetensors_writer_free(w);
}

/* ------------------------------------------------------------- malformed */

static void test_truncations(void **state)
{
    (void)state;
    tsafe_safetensors_writer *w;
    assert_int_equal(tsafe_safetensors_writer_create(&w), TSAFE_OK);
    float v[6] = {1, 2, 3, 4, 5, 6};
    uint64_t s[2] = {2, 3}, s1[1] = {2};
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "a", TSAFE_DTYPE_F32, s, 2, v),
                     TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "b", TSAFE_DTYPE_BF16, s1, 1, v),
                     TSAFE_OK);
    uint8_t *bytes;
    size_t len;
    assert_int_equal(tsafe_safetensors_writer_serialize(w, &bytes, &len), TSAFE_OK);
    for (size_t cut = 0; cut < len; cut++) {
        /* a fresh exact-size copy so ASan sees any over-read */
        uint8_t *c = malloc(cut ? cut : 1);
        memcpy(c, bytes, cut);
        tsafe_safetensors *st = NULL;
        tsafe_status r = tsafe_safetensors_parse_borrowed(c, cut, &st);
        if (r != TSAFE_E_TRUNCATED)
            fail_msg("cut %zu of %zu: status %d", cut, len, r);
        assert_null(st);
        free(c);
    }
    tsafe_safetensors *st;
    assert_int_equal(tsafe_safetensors_parse(bytes, len, &st), TSAFE_OK);
    tsafe_safetensors_free(st);
    tsafe_safetensors_bytes_free(bytes);
    tsafe_safetensors_writer_free(w);
}

static void test_header_cap(void **state)
{
    (void)state;
    uint8_t b[16] = {0};
    uint64_t n = (uint64_t)TSAFE_SAFETENSORS_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(n >> (8 * i));
    tsafe_safetensors *st;
    assert_int_equal(tsafe_safetensors_parse(b, sizeof b, &st),
                     TSAFE_E_HEADER_TOO_LARGE);
    memset(b, 0xff, 8); /* 2^64 - 1 */
    assert_int_equal(tsafe_safetensors_parse(b, sizeof b, &st),
                     TSAFE_E_HEADER_TOO_LARGE);
}

#define T(name, dt, shape, b, e)                                               \
    "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape                      \
    ",\"data_offsets\":[" #b "," #e "]}"

static void test_offsets(void **state)
{
    (void)state;
    /* valid reference */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 0, 8) ","
                                T("b", "F32", "[2]", 8, 16) "}", 16), TSAFE_OK);
    /* entry order in the header does not matter, offsets do */
    assert_int_equal(parse_text("{" T("b", "F32", "[2]", 8, 16) ","
                                T("a", "F32", "[2]", 0, 8) "}", 16), TSAFE_OK);
    /* overlap */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 0, 8) ","
                                T("b", "F32", "[2]", 4, 12) "}", 12),
                     TSAFE_E_OFFSETS);
    /* same range twice */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 0, 8) ","
                                T("b", "F32", "[2]", 0, 8) "}", 8),
                     TSAFE_E_OFFSETS);
    /* gap */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 0, 8) ","
                                T("b", "F32", "[2]", 12, 20) "}", 20),
                     TSAFE_E_OFFSETS);
    /* first tensor not at 0 */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 4, 12) "}", 12),
                     TSAFE_E_OFFSETS);
    /* end before start */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 0, 8) ","
                                T("b", "F32", "[0]", 8, 4) "}", 8),
                     TSAFE_E_OFFSETS);
    /* bytes after the last tensor (not indexed) */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 0, 8) "}", 12),
                     TSAFE_E_OFFSETS);
    /* offsets past the end of the file */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 0, 8) "}", 4),
                     TSAFE_E_TRUNCATED);
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", 0, 8) ","
                                T("b", "F32", "[4]", 8, 24) "}", 12),
                     TSAFE_E_TRUNCATED);
    /* negative offset */
    assert_int_equal(parse_text("{" T("a", "F32", "[2]", -8, 0) "}", 0),
                     TSAFE_E_FORMAT);
}

static void test_shape_and_dtype(void **state)
{
    (void)state;
    /* shape product * size disagrees with the byte range */
    assert_int_equal(parse_text("{" T("a", "F32", "[3]", 0, 8) "}", 8),
                     TSAFE_E_SHAPE);
    assert_int_equal(parse_text("{" T("a", "F16", "[2,2]", 0, 16) "}", 16),
                     TSAFE_E_SHAPE);
    /* products that overflow 64 bits */
    assert_int_equal(parse_text("{" T("a", "F32",
                                      "[4294967296,4294967296,16]", 0, 8) "}", 8),
                     TSAFE_E_SIZE_OVERFLOW);
    assert_int_equal(parse_text("{" T("a", "F64",
                                      "[4611686018427387904]", 0, 8) "}", 8),
                     TSAFE_E_SIZE_OVERFLOW);
    /* a zero dimension makes any other dimension harmless */
    assert_int_equal(parse_text("{" T("a", "F32", "[0,4611686018427387904]", 0, 0)
                                "}", 0), TSAFE_OK);
    /* unknown dtypes */
    assert_int_equal(parse_text("{" T("a", "F33", "[2]", 0, 8) "}", 8),
                     TSAFE_E_DTYPE);
    assert_int_equal(parse_text("{" T("a", "f32", "[2]", 0, 8) "}", 8),
                     TSAFE_E_DTYPE);
    /* field problems */
    assert_int_equal(parse_text("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8),
                     TSAFE_E_MISSING_FIELD);
    assert_int_equal(parse_text("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                                "\"data_offsets\":[0,8],\"x\":1}}", 8),
                     TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{" T("a", "F32", "[-2]", 0, 8) "}", 8),
                     TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{" T("a", "F32", "[2.0]", 0, 8) "}", 8),
                     TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                                "\"data_offsets\":[0]}}", 8), TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{\"a\":[1]}", 0), TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{\"__metadata__\":{\"k\":1}}", 0), TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{\"__metadata__\":{\"k\":\"v\"}}", 0), TSAFE_OK);
}

static void test_header_text(void **state)
{
    (void)state;
    assert_int_equal(parse_text("{\"a\":", 0), TSAFE_E_JSON);
    assert_int_equal(parse_text("", 0), TSAFE_E_JSON);
    assert_int_equal(parse_text("{} trailing", 0), TSAFE_E_JSON);
    assert_int_equal(parse_text("{}      ", 0), TSAFE_OK); /* space padding */
    assert_int_equal(parse_text("{" T("a", "F32", "[0]", 0, 0) ","
                                T("a", "F32", "[0]", 0, 0) "}", 0),
                     TSAFE_E_JSON); /* duplicate key */
    assert_int_equal(parse_text("[]", 0), TSAFE_E_KIND);
    assert_int_equal(parse_text("[{}]", 0), TSAFE_E_KIND);
    /* invalid UTF-8: stray byte, overlong '/', UTF-16 surrogate, > U+10FFFF,
     * truncated sequence at the end */
    assert_int_equal(parse_text("{\"\xff\":1}", 0), TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{\"\xc0\xaf\":1}", 0), TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{\"\xed\xa0\x80\":1}", 0), TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{\"\xf4\x90\x80\x80\":1}", 0), TSAFE_E_FORMAT);
    assert_int_equal(parse_text("{}\xe2\x82", 0), TSAFE_E_FORMAT);
    /* valid multi-byte names are fine */
    assert_int_equal(parse_text("{" T("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "F32",
                                      "[1]", 0, 4) "}", 4), TSAFE_OK);
    /* argument checks */
    tsafe_safetensors *st;
    assert_int_equal(tsafe_safetensors_parse(NULL, 4, &st), TSAFE_E_NULL);
    assert_int_equal(tsafe_safetensors_parse(NULL, 0, &st), TSAFE_E_TRUNCATED);
}

/* Random corruption of a valid file: any status, never a crash or leak. */
static void test_random_corruption(void **state)
{
    (void)state;
    tsafe_test_rng_init("test_safetensors");
    tsafe_safetensors_writer *w;
    assert_int_equal(tsafe_safetensors_writer_create(&w), TSAFE_OK);
    float v[12] = {0};
    uint64_t s[2] = {3, 4}, s1[1] = {5};
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "x.lora_A.weight",
                                                      TSAFE_DTYPE_F16, s, 2, v), TSAFE_OK);
    assert_int_equal(tsafe_safetensors_writer_add_f32(w, "x.lora_B.weight",
                                                      TSAFE_DTYPE_F32, s1, 1, v), TSAFE_OK);
    uint8_t *bytes;
    size_t len;
    assert_int_equal(tsafe_safetensors_writer_serialize(w, &bytes, &len), TSAFE_OK);
    int ok = 0;
    for (int it = 0; it < 3000; it++) {
        uint8_t *c = malloc(len);
        memcpy(c, bytes, len);
        int flips = 1 + (int)tsafe_test_below(3);
        for (int f = 0; f < flips; f++) {
            size_t pos = (size_t)tsafe_test_below(len);
            c[pos] = (it & 1) ? (uint8_t)tsafe_test_below(256)
                              : (uint8_t)"0123456789[]{},:\"-"[tsafe_test_below(18)];
        }
        tsafe_safetensors *st = NULL;
        if (tsafe_safetensors_parse_borrowed(c, len, &st) == TSAFE_OK) {
            ok++;
            for (size_t i = 0; i < tsafe_safetensors_tensor_count(st); i++) {
                tsafe_tensor_info ti;
                assert_int_equal(tsafe_safetensors_tensor_at(st, i, &ti), TSAFE_OK);
                const void *d;
                size_t nb;
                assert_int_equal(tsafe_safetensors_tensor_data(st, ti.name, &d, &nb),
                                 TSAFE_OK);
                volatile uint8_t sink = 0;
                for (size_t k = 0; k < nb; k++)
                    sink ^= ((const uint8_t *)d)[k];
                (void)sink;
            }
        }
        tsafe_safetensors_free(st);
        free(c);
    }
    print_message("corruption: %d of 3000 mutants still parse (data-only flips)\n", ok);
    tsafe_safetensors_bytes_free(bytes);
    tsafe_safetensors_writer_free(w);
}

static void test_dtype_names(void **state)
{
    (void)state;
    const char *names[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16",
                           "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"};
    size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    for (size_t i = 0; i < 15; i++) {
        tsafe_dtype d = tsafe_dtype_from_name(names[i]);
        assert_int_not_equal(d, TSAFE_DTYPE_INVALID);
        assert_string_equal(tsafe_dtype_name(d), names[i]);
        assert_int_equal(tsafe_dtype_size(d), sizes[i]);
    }
    assert_int_equal(tsafe_dtype_from_name("F4"), TSAFE_DTYPE_INVALID);
    assert_int_equal(tsafe_dtype_size(TSAFE_DTYPE_INVALID), 0);
}

int main(void)
{
    tsafe_test_rng_init("test_safetensors");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_all_patterns),
        cmocka_unit_test(test_bf16_all_patterns),
        cmocka_unit_test(test_f16_encode),
        cmocka_unit_test(test_bf16_encode),
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_header_cap),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_shape_and_dtype),
        cmocka_unit_test(test_header_text),
        cmocka_unit_test(test_random_corruption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
