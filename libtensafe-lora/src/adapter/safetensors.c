/* Strict safetensors reader: every length and offset of the untrusted bytes
 * is validated before any tensor byte is touched. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "detail.h"
#include "json_get.h"
#include "safetensors_internal.h"

typedef struct {
    char *name;
    tsafe_dtype dtype;
    size_t ndim;
    uint64_t *shape;
    size_t numel;
    size_t nbytes;
    size_t begin; /* offset into the data section */
    size_t end;
} st_tensor;

struct tsafe_safetensors {
    const uint8_t *bytes; /* whole file */
    size_t len;
    const uint8_t *data; /* data section */
    size_t data_len;
    uint8_t *owned;   /* malloc'd copy (parse / read fallback) */
    void *map;        /* mmap'd file */
    size_t map_len;
    st_tensor *t;     /* sorted by name */
    size_t n;
    char **meta_key;
    char **meta_val;
    size_t n_meta;
    tsafe_error_info *err; /* during parsing only (caller's, may be NULL) */
};

/* ---------------------------------------------------------------- utf-8 */

int tsafe_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) {
            k = 1;
            cp = c & 0x1f;
            min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2;
            cp = c & 0x0f;
            min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return 0;
        }
        if (n - i <= k)
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* ---------------------------------------------------------- conversions */

int tsafe_convert_to_f32(tsafe_dtype dtype, const uint8_t *raw, size_t count,
                         float *out)
{
    switch (dtype) {
    case TSAFE_DTYPE_F32:
        for (size_t i = 0; i < count; i++)
            out[i] = tsafe_load_f32le(raw + 4 * i);
        return 1;
    case TSAFE_DTYPE_F16:
        for (size_t i = 0; i < count; i++)
            out[i] = tsafe_f16_to_f32(tsafe_load_le16(raw + 2 * i));
        return 1;
    case TSAFE_DTYPE_BF16:
        for (size_t i = 0; i < count; i++)
            out[i] = tsafe_bf16_to_f32(tsafe_load_le16(raw + 2 * i));
        return 1;
    case TSAFE_DTYPE_F64:
        for (size_t i = 0; i < count; i++) {
            uint64_t u = tsafe_load_le64(raw + 8 * i);
            double d;
            memcpy(&d, &u, 8);
            out[i] = (float)d;
        }
        return 1;
    default:
        return 0;
    }
}

/* --------------------------------------------------------------- parsing */

/* A non-negative JSON integer (offsets, shape entries). */
static int json_uint(const json_t *v, uint64_t *out)
{
    json_int_t x;
    if (!tsafe_json_int_in(v, 0, (json_int_t)INT64_MAX, &x))
        return 0;
    *out = (uint64_t)x;
    return 1;
}

static tsafe_status parse_entry(const char *name, json_t *obj, st_tensor *t,
                                tsafe_error_info *err)
{
    tsafe_status st = TSAFE_OK;
    if (!json_is_object(obj))
        return tsafe_detail(err, TSAFE_E_FORMAT, "tensor '%s': entry is not a JSON object",
                            name);
    json_t *dt = json_object_get(obj, "dtype");
    json_t *sh = json_object_get(obj, "shape");
    json_t *off = json_object_get(obj, "data_offsets");
    if (!dt || !sh || !off)
        return tsafe_detail(err, TSAFE_E_MISSING_FIELD, "tensor '%s': no \"%s\"", name,
                            !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (json_object_size(obj) != 3)
        return tsafe_detail(err, TSAFE_E_FORMAT,
                            "tensor '%s': %zu fields, expected dtype, shape and "
                            "data_offsets only",
                            name, json_object_size(obj));
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) ||
        json_array_size(off) != 2)
        return tsafe_detail(err, TSAFE_E_FORMAT,
                            "tensor '%s': dtype must be a string, shape an array and "
                            "data_offsets an array of 2",
                            name);
    t->dtype = tsafe_dtype_from_name(json_string_value(dt));
    if (t->dtype == TSAFE_DTYPE_INVALID)
        return tsafe_detail(err, TSAFE_E_DTYPE, "tensor '%s': unknown dtype \"%s\"", name,
                            json_string_value(dt));
    uint64_t b, e;
    if (!json_uint(json_array_get(off, 0), &b) ||
        !json_uint(json_array_get(off, 1), &e))
        return tsafe_detail(err, TSAFE_E_FORMAT,
                            "tensor '%s': data_offsets are not two non-negative integers",
                            name);
    t->ndim = json_array_size(sh);
    size_t numel = 1;
    if (t->ndim) {
        t->shape = calloc(t->ndim, sizeof *t->shape);
        TSAFE_CHECK(t->shape, TSAFE_E_NOMEM);
    }
    for (size_t i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (!json_uint(json_array_get(sh, i), &d)) {
            st = tsafe_detail(err, TSAFE_E_FORMAT,
                              "tensor '%s': shape[%zu] is not a non-negative integer", name,
                              i);
            goto fail;
        }
        if (d > SIZE_MAX || !tsafe_mul_size(numel, (size_t)d, &numel)) {
            st = tsafe_detail(err, TSAFE_E_SIZE_OVERFLOW,
                              "tensor '%s': element count overflows at shape[%zu] = %llu",
                              name, i, (unsigned long long)d);
            goto fail;
        }
        t->shape[i] = d;
    }
    t->numel = numel;
    if (!tsafe_mul_size(numel, tsafe_dtype_size(t->dtype), &t->nbytes)) {
        st = tsafe_detail(err, TSAFE_E_SIZE_OVERFLOW,
                          "tensor '%s': %zu elements of %s overflow a size", name, numel,
                          tsafe_dtype_name(t->dtype));
        goto fail;
    }
    if (b > SIZE_MAX || e > SIZE_MAX) {
        st = tsafe_detail(err, TSAFE_E_OFFSETS, "tensor '%s': data_offsets [%llu, %llu] too large",
                          name, (unsigned long long)b, (unsigned long long)e);
        goto fail;
    }
    t->begin = (size_t)b;
    t->end = (size_t)e;
    t->name = strdup(name);
    TSAFE_CHECK(t->name, TSAFE_E_NOMEM);
    return TSAFE_OK;
fail:
    free(t->shape);
    t->shape = NULL;
    return st;
}

static int cmp_offsets(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static tsafe_status parse_metadata(tsafe_safetensors *s, json_t *meta)
{
    if (!json_is_object(meta))
        return TSAFE_E_FORMAT;
    size_t n = json_object_size(meta);
    if (n == 0)
        return TSAFE_OK;
    s->meta_key = calloc(n, sizeof *s->meta_key);
    s->meta_val = calloc(n, sizeof *s->meta_val);
    if (!s->meta_key || !s->meta_val)
        return TSAFE_E_NOMEM;
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v))
            return TSAFE_E_FORMAT;
        s->meta_key[s->n_meta] = strdup(k);
        s->meta_val[s->n_meta] = strdup(json_string_value(v));
        s->n_meta++;
        if (!s->meta_key[s->n_meta - 1] || !s->meta_val[s->n_meta - 1])
            return TSAFE_E_NOMEM;
    }
    return TSAFE_OK;
}

/* Validates s->bytes/s->len and fills the tensor table. */
/* The 8-byte little-endian header length, checked against the cap and
 * the bytes that follow; the header must be UTF-8. Sets s->data and
 * s->data_len. */
static tsafe_status read_header(tsafe_safetensors *s, const uint8_t **hdr_out, size_t *n_out)
{
    tsafe_error_info *err = s->err;
    if (s->len < 8)
        return tsafe_detail(err, TSAFE_E_TRUNCATED,
                            "%zu bytes: shorter than the 8-byte header length", s->len);
    uint64_t n = tsafe_load_le64(s->bytes);
    if (n > TSAFE_SAFETENSORS_MAX_HEADER)
        return tsafe_detail(err, TSAFE_E_HEADER_TOO_LARGE,
                            "header length %llu above the cap %u", (unsigned long long)n,
                            TSAFE_SAFETENSORS_MAX_HEADER);
    if (n > s->len - 8)
        return tsafe_detail(err, TSAFE_E_TRUNCATED,
                            "header length %llu but only %zu bytes follow it (expected "
                            "%llu, found %zu)",
                            (unsigned long long)n, s->len - 8, (unsigned long long)n,
                            s->len - 8);
    const uint8_t *hdr = s->bytes + 8;
    if (!tsafe_utf8_valid(hdr, (size_t)n))
        return tsafe_detail(err, TSAFE_E_FORMAT, "header is not valid UTF-8");
    s->data = hdr + n;
    s->data_len = s->len - 8 - (size_t)n;
    *hdr_out = hdr;
    *n_out = (size_t)n;
    return TSAFE_OK;
}

/* Offsets: sorted by start, the tensors must tile [0, data_len) exactly,
 * each spanning the bytes its dtype and shape need. */
static tsafe_status check_offsets(tsafe_safetensors *s)
{
    tsafe_error_info *err = s->err;
    if (s->n > 1)
        qsort(s->t, s->n, sizeof *s->t, cmp_offsets);
    size_t expect = 0;
    for (size_t i = 0; i < s->n; i++) {
        const st_tensor *t = &s->t[i];
        if (t->begin != expect || t->end < t->begin) {
            return tsafe_detail(err, TSAFE_E_OFFSETS,
                                "tensor '%s': data_offsets [%zu, %zu], expected it to start at "
                                "%zu (found %zu: %s)",
                                t->name, t->begin, t->end, expect, t->begin,
                                t->end < t->begin ? "end before start"
                                : t->begin > expect ? "gap"
                                                    : "overlap");
        }
        if (t->end - t->begin != t->nbytes) {
            char sh[96];
            return tsafe_detail(err, TSAFE_E_SHAPE,
                                "tensor '%s': shape %s of %s needs %zu bytes, data_offsets "
                                "[%zu, %zu] span %zu (expected %zu, found %zu)",
                                t->name, tsafe_detail_shape(sh, sizeof sh, t->shape, t->ndim),
                                tsafe_dtype_name(t->dtype), t->nbytes, t->begin, t->end,
                                t->end - t->begin, t->nbytes, t->end - t->begin);
        }
        expect = t->end;
    }
    if (expect > s->data_len) {
        return tsafe_detail(err, TSAFE_E_TRUNCATED,
                            "tensors end at byte %zu of the data section, which has %zu "
                            "(expected %zu, found %zu)",
                            expect, s->data_len, expect, s->data_len);
    }
    if (expect != s->data_len) {
        return tsafe_detail(err, TSAFE_E_OFFSETS,
                            "%zu bytes after the last tensor (data section %zu, tensors end "
                            "at %zu)",
                            s->data_len - expect, s->data_len, expect);
    }
    return TSAFE_OK;
}

static tsafe_status parse_all(tsafe_safetensors *s)
{
    tsafe_status st = TSAFE_OK;
    tsafe_error_info *err = s->err;
    json_t *root = NULL;
    const uint8_t *hdr = NULL;
    size_t n = 0;
    if ((st = read_header(s, &hdr, &n)) != TSAFE_OK)
        return st;

    json_error_t jerr;
    root = json_loadb((const char *)hdr, (size_t)n, JSON_REJECT_DUPLICATES,
                      &jerr);
    if (!root)
        return tsafe_detail(err, TSAFE_E_JSON, "header JSON, line %d column %d: %s",
                            jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        st = tsafe_detail(err, TSAFE_E_KIND, "header is JSON but not an object");
        goto fail;
    }

    size_t total = json_object_size(root);
    json_t *meta = json_object_get(root, "__metadata__");
    size_t nt = total - (meta ? 1 : 0);
    if (meta && (st = parse_metadata(s, meta)) != TSAFE_OK) {
        tsafe_detail(err, st, "\"__metadata__\" is not a map of strings to strings");
        goto fail;
    }
    if (nt) {
        s->t = calloc(nt, sizeof *s->t);
        TSAFE_CHECK(s->t, TSAFE_E_NOMEM);
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        TSAFE_TRY(parse_entry(key, val, &s->t[s->n], err));
        s->n++;
    }

    TSAFE_TRY(check_offsets(s));
    if (s->n > 1)
        qsort(s->t, s->n, sizeof *s->t, cmp_names);
fail:
    json_decref(root);
    return st;
}

void tsafe_safetensors_free(tsafe_safetensors *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->t[i].name);
        free(s->t[i].shape);
    }
    free(s->t);
    for (size_t i = 0; i < s->n_meta; i++) {
        free(s->meta_key[i]);
        free(s->meta_val[i]);
    }
    free(s->meta_key);
    free(s->meta_val);
    if (s->map)
        munmap(s->map, s->map_len);
    free(s->owned);
    free(s);
}

static tsafe_status finish(tsafe_safetensors *s, tsafe_error_info *err,
                           tsafe_safetensors **out)
{
    s->err = err;
    tsafe_status st = parse_all(s);
    s->err = NULL;
    if (st != TSAFE_OK) {
        tsafe_safetensors_free(s);
        return st;
    }
    *out = s;
    return TSAFE_OK;
}

tsafe_status tsafe_safetensors_parse_borrowed_ex(const void *data, size_t len,
                                                 tsafe_error_info *err,
                                                 tsafe_safetensors **out)
{
    if (!out || (!data && len))
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_safetensors *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    s->bytes = data ? data : (const uint8_t *)"";
    s->len = len;
    return finish(s, err, out);
}

tsafe_status tsafe_safetensors_parse_borrowed(const void *data, size_t len,
                                              tsafe_safetensors **out)
{
    return tsafe_safetensors_parse_borrowed_ex(data, len, NULL, out);
}

tsafe_status tsafe_safetensors_parse(const void *data, size_t len,
                                     tsafe_safetensors **out)
{
    if (!out || (!data && len))
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_safetensors *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    s->owned = malloc(len ? len : 1);
    if (!s->owned) {
        free(s);
        return TSAFE_E_NOMEM;
    }
    if (len)
        memcpy(s->owned, data, len);
    s->bytes = s->owned;
    s->len = len;
    return finish(s, NULL, out);
}

tsafe_status tsafe_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return TSAFE_E_IO;
    int ok = (len == 0 || fwrite(data, 1, len, f) == len);
    ok &= (fflush(f) == 0);
    ok &= (fclose(f) == 0);
    return ok ? TSAFE_OK : TSAFE_E_IO;
}

tsafe_status tsafe_safetensors_open_file(const char *path,
                                         tsafe_safetensors **out)
{
    return tsafe_safetensors_open_file_ex(path, NULL, out);
}

tsafe_status tsafe_safetensors_open_file_ex(const char *path, tsafe_error_info *err,
                                            tsafe_safetensors **out)
{
    if (!path || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_safetensors *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(s);
        return tsafe_detail(err, e == ENOENT ? TSAFE_E_NOT_FOUND : TSAFE_E_IO, "'%s': %s",
                            path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (uint64_t)sb.st_size <= SIZE_MAX) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            close(fd);
            s->map = m;
            s->map_len = (size_t)sb.st_size;
            s->bytes = m;
            s->len = s->map_len;
            return finish(s, err, out);
        }
    }
    close(fd);
    tsafe_status st = tsafe_read_file(path, SIZE_MAX / 2, &s->owned, &s->len);
    if (st != TSAFE_OK) {
        free(s);
        return tsafe_detail(err, st, "read '%s'", path);
    }
    s->bytes = s->owned;
    return finish(s, err, out);
}

/* --------------------------------------------------------------- queries */

size_t tsafe_safetensors_tensor_count(const tsafe_safetensors *s)
{
    return s ? s->n : 0;
}

static void fill_info(const st_tensor *t, tsafe_tensor_info *out)
{
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    out->shape = t->shape;
    out->numel = t->numel;
    out->nbytes = t->nbytes;
}

tsafe_status tsafe_safetensors_tensor_at(const tsafe_safetensors *s, size_t i,
                                         tsafe_tensor_info *out)
{
    if (!s || !out)
        return TSAFE_E_NULL;
    if (i >= s->n)
        return TSAFE_E_RANGE;
    fill_info(&s->t[i], out);
    return TSAFE_OK;
}

static const st_tensor *lookup(const tsafe_safetensors *s, const char *name)
{
    if (!s || !name || s->n == 0)
        return NULL;
    st_tensor key;
    memset(&key, 0, sizeof key);
    key.name = (char *)(uintptr_t)name;
    return bsearch(&key, s->t, s->n, sizeof *s->t, cmp_names);
}

tsafe_status tsafe_safetensors_find(const tsafe_safetensors *s,
                                    const char *name, tsafe_tensor_info *out)
{
    if (!s || !name)
        return TSAFE_E_NULL;
    const st_tensor *t = lookup(s, name);
    if (!t)
        return TSAFE_E_NOT_FOUND;
    if (out)
        fill_info(t, out);
    return TSAFE_OK;
}

tsafe_status tsafe_safetensors_tensor_data(const tsafe_safetensors *s,
                                           const char *name, const void **data,
                                           size_t *nbytes)
{
    if (!s || !name || !data || !nbytes)
        return TSAFE_E_NULL;
    const st_tensor *t = lookup(s, name);
    if (!t)
        return TSAFE_E_NOT_FOUND;
    *data = s->data + t->begin;
    *nbytes = t->nbytes;
    return TSAFE_OK;
}

tsafe_status tsafe_safetensors_read_f32_range(const tsafe_safetensors *s,
                                              const char *name, size_t first,
                                              size_t count, float *out)
{
    if (!s || !name || (!out && count))
        return TSAFE_E_NULL;
    const st_tensor *t = lookup(s, name);
    if (!t)
        return TSAFE_E_NOT_FOUND;
    if (t->dtype != TSAFE_DTYPE_F32 && t->dtype != TSAFE_DTYPE_F16 &&
        t->dtype != TSAFE_DTYPE_BF16 && t->dtype != TSAFE_DTYPE_F64)
        return TSAFE_E_DTYPE;
    if (first > t->numel || count > t->numel - first)
        return TSAFE_E_RANGE;
    size_t es = tsafe_dtype_size(t->dtype);
    tsafe_convert_to_f32(t->dtype, s->data + t->begin + first * es, count, out);
    return TSAFE_OK;
}

tsafe_status tsafe_safetensors_read_f32(const tsafe_safetensors *s,
                                        const char *name, float *out,
                                        size_t count)
{
    if (!s || !name)
        return TSAFE_E_NULL;
    const st_tensor *t = lookup(s, name);
    if (!t)
        return TSAFE_E_NOT_FOUND;
    if (count != t->numel)
        return TSAFE_E_ARG;
    return tsafe_safetensors_read_f32_range(s, name, 0, count, out);
}

const char *tsafe_safetensors_metadata(const tsafe_safetensors *s,
                                       const char *key)
{
    if (!s || !key)
        return NULL;
    for (size_t i = 0; i < s->n_meta; i++)
        if (strcmp(s->meta_key[i], key) == 0)
            return s->meta_val[i];
    return NULL;
}

size_t tsafe_safetensors_metadata_count(const tsafe_safetensors *s)
{
    return s ? s->n_meta : 0;
}

tsafe_status tsafe_safetensors_metadata_at(const tsafe_safetensors *s,
                                           size_t i, const char **key,
                                           const char **value)
{
    if (!s || !key || !value)
        return TSAFE_E_NULL;
    if (i >= s->n_meta)
        return TSAFE_E_RANGE;
    *key = s->meta_key[i];
    *value = s->meta_val[i];
    return TSAFE_OK;
}
