/* safetensors writer: tensors in name order, header padded to 8 bytes. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "safetensors_internal.h"

typedef struct {
    char *name;
    tsafe_dtype dtype;
    size_t ndim;
    uint64_t *shape;
    uint8_t *data;
    size_t nbytes;
} wr_tensor;

struct tsafe_safetensors_writer {
    wr_tensor *t;
    size_t n, cap;
    json_t *meta;  /* object of strings */
    json_t *names; /* set of tensor names (O(1) duplicate check) */
};

tsafe_status tsafe_safetensors_writer_create(tsafe_safetensors_writer **out)
{
    if (!out)
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_safetensors_writer *w = calloc(1, sizeof *w);
    if (!w)
        return TSAFE_E_NOMEM;
    w->meta = json_object();
    w->names = json_object();
    if (!w->meta || !w->names) {
        json_decref(w->meta);
        json_decref(w->names);
        free(w);
        return TSAFE_E_NOMEM;
    }
    *out = w;
    return TSAFE_OK;
}

void tsafe_safetensors_writer_free(tsafe_safetensors_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].shape);
        free(w->t[i].data);
    }
    free(w->t);
    json_decref(w->meta);
    json_decref(w->names);
    free(w);
}

static tsafe_status check_new(const tsafe_safetensors_writer *w,
                              const char *name, tsafe_dtype dtype,
                              const uint64_t *shape, size_t ndim,
                              size_t *nbytes)
{
    if (!name[0] || strcmp(name, "__metadata__") == 0 ||
        !tsafe_utf8_valid((const uint8_t *)name, strlen(name)))
        return TSAFE_E_ARG;
    if (json_object_get(w->names, name))
        return TSAFE_E_ARG;
    size_t es = tsafe_dtype_size(dtype);
    if (es == 0)
        return TSAFE_E_DTYPE;
    if (ndim && !shape)
        return TSAFE_E_NULL;
    size_t numel = 1;
    for (size_t i = 0; i < ndim; i++) {
        if (shape[i] > SIZE_MAX || shape[i] > (uint64_t)INT64_MAX ||
            !tsafe_mul_size(numel, (size_t)shape[i], &numel))
            return TSAFE_E_SIZE_OVERFLOW;
    }
    if (!tsafe_mul_size(numel, es, nbytes))
        return TSAFE_E_SIZE_OVERFLOW;
    return TSAFE_OK;
}

/* Appends an entry that takes ownership of `data` on success. */
static tsafe_status append(tsafe_safetensors_writer *w, const char *name,
                           tsafe_dtype dtype, const uint64_t *shape,
                           size_t ndim, uint8_t *data, size_t nbytes)
{
    if (json_object_set_new(w->names, name, json_null()) != 0)
        return TSAFE_E_NOMEM;
    if (w->n == w->cap) {
        size_t nc = w->cap ? 2 * w->cap : 8;
        wr_tensor *nt = realloc(w->t, nc * sizeof *nt);
        if (!nt) {
            json_object_del(w->names, name);
            return TSAFE_E_NOMEM;
        }
        w->t = nt;
        w->cap = nc;
    }
    wr_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (ndim)
        t->shape = malloc(ndim * sizeof *t->shape);
    if (!t->name || (ndim && !t->shape)) {
        free(t->name);
        free(t->shape);
        json_object_del(w->names, name);
        return TSAFE_E_NOMEM;
    }
    if (ndim)
        memcpy(t->shape, shape, ndim * sizeof *shape);
    t->dtype = dtype;
    t->ndim = ndim;
    t->data = data;
    t->nbytes = nbytes;
    w->n++;
    return TSAFE_OK;
}

tsafe_status tsafe_safetensors_writer_add(tsafe_safetensors_writer *w,
                                          const char *name, tsafe_dtype dtype,
                                          const uint64_t *shape, size_t ndim,
                                          const void *data, size_t nbytes)
{
    if (!w || !name || (!data && nbytes))
        return TSAFE_E_NULL;
    size_t want;
    tsafe_status st = check_new(w, name, dtype, shape, ndim, &want);
    if (st != TSAFE_OK)
        return st;
    if (want != nbytes)
        return TSAFE_E_SHAPE;
    uint8_t *copy = malloc(nbytes ? nbytes : 1);
    if (!copy)
        return TSAFE_E_NOMEM;
    if (nbytes)
        memcpy(copy, data, nbytes);
    st = append(w, name, dtype, shape, ndim, copy, nbytes);
    if (st != TSAFE_OK)
        free(copy);
    return st;
}

tsafe_status tsafe_safetensors_writer_add_f32(tsafe_safetensors_writer *w,
                                              const char *name,
                                              tsafe_dtype dtype,
                                              const uint64_t *shape,
                                              size_t ndim, const float *values)
{
    if (!w || !name)
        return TSAFE_E_NULL;
    if (dtype != TSAFE_DTYPE_F32 && dtype != TSAFE_DTYPE_F16 &&
        dtype != TSAFE_DTYPE_BF16 && dtype != TSAFE_DTYPE_F64)
        return TSAFE_E_DTYPE;
    size_t nbytes;
    tsafe_status st = check_new(w, name, dtype, shape, ndim, &nbytes);
    if (st != TSAFE_OK)
        return st;
    size_t es = tsafe_dtype_size(dtype), numel = nbytes / es;
    if (numel && !values)
        return TSAFE_E_NULL;
    uint8_t *buf = malloc(nbytes ? nbytes : 1);
    if (!buf)
        return TSAFE_E_NOMEM;
    for (size_t i = 0; i < numel; i++) {
        uint64_t bits;
        if (dtype == TSAFE_DTYPE_F32) {
            uint32_t u;
            memcpy(&u, &values[i], 4);
            bits = u;
        } else if (dtype == TSAFE_DTYPE_F64) {
            double d = values[i];
            memcpy(&bits, &d, 8);
        } else if (dtype == TSAFE_DTYPE_F16) {
            bits = tsafe_f32_to_f16(values[i]);
        } else {
            bits = tsafe_f32_to_bf16(values[i]);
        }
        if (es == 2)
            tsafe_store_le16(buf + i * es, (uint16_t)bits);
        else if (es == 4)
            tsafe_store_le32(buf + i * es, (uint32_t)bits);
        else
            tsafe_store_le64(buf + i * es, bits);
    }
    st = append(w, name, dtype, shape, ndim, buf, nbytes);
    if (st != TSAFE_OK)
        free(buf);
    return st;
}

tsafe_status tsafe_safetensors_writer_set_metadata(tsafe_safetensors_writer *w,
                                                   const char *key,
                                                   const char *value)
{
    if (!w || !key || !value)
        return TSAFE_E_NULL;
    if (!tsafe_utf8_valid((const uint8_t *)key, strlen(key)) ||
        !tsafe_utf8_valid((const uint8_t *)value, strlen(value)))
        return TSAFE_E_ARG;
    json_t *s = json_string(value);
    if (!s || json_object_set_new(w->meta, key, s) != 0)
        return TSAFE_E_NOMEM;
    return TSAFE_OK;
}

static int cmp_idx(const void *a, const void *b, void *ctx)
{
    const wr_tensor *t = ctx;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

tsafe_status tsafe_safetensors_writer_serialize(
    const tsafe_safetensors_writer *w, uint8_t **bytes, size_t *len)
{
    if (!w || !bytes || !len)
        return TSAFE_E_NULL;
    *bytes = NULL;
    *len = 0;
    tsafe_status st = TSAFE_OK;
    size_t *order = NULL;
    json_t *root = NULL;
    char *hdr = NULL;
    uint8_t *buf = NULL;

    order = malloc((w->n ? w->n : 1) * sizeof *order);
    root = json_object();
    TSAFE_CHECK(order && root, TSAFE_E_NOMEM);
    for (size_t i = 0; i < w->n; i++)
        order[i] = i;
    qsort_r(order, w->n, sizeof *order, cmp_idx, w->t);

    if (json_object_size(w->meta))
        TSAFE_CHECK(json_object_set(root, "__metadata__", w->meta) == 0,
                 TSAFE_E_NOMEM);
    size_t off = 0;
    for (size_t k = 0; k < w->n; k++) {
        const wr_tensor *t = &w->t[order[k]];
        json_t *e = json_object(), *sh = json_array(), *of = json_array();
        int ok = e && sh && of;
        for (size_t d = 0; ok && d < t->ndim; d++)
            ok = json_array_append_new(sh, json_integer((json_int_t)t->shape[d])) == 0;
        TSAFE_CHECK(off <= (size_t)INT64_MAX - t->nbytes, TSAFE_E_SIZE_OVERFLOW);
        ok = ok && json_array_append_new(of, json_integer((json_int_t)off)) == 0 &&
             json_array_append_new(of, json_integer((json_int_t)(off + t->nbytes))) == 0;
        ok = ok && json_object_set_new(e, "dtype",
                                       json_string(tsafe_dtype_name(t->dtype))) == 0;
        ok = ok && json_object_set(e, "shape", sh) == 0 &&
             json_object_set(e, "data_offsets", of) == 0;
        json_decref(sh);
        json_decref(of);
        if (ok && json_object_set_new(root, t->name, e) == 0) {
            off += t->nbytes;
            continue;
        }
        if (!ok)
            json_decref(e);
        TSAFE_CHECK(0, TSAFE_E_NOMEM);
    }
    hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    TSAFE_CHECK(hdr, TSAFE_E_NOMEM);
    size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
    TSAFE_CHECK(padded <= TSAFE_SAFETENSORS_MAX_HEADER, TSAFE_E_HEADER_TOO_LARGE);
    size_t total = 8 + padded;
    TSAFE_CHECK(off <= SIZE_MAX - total, TSAFE_E_SIZE_OVERFLOW);
    total += off;
    buf = malloc(total);
    TSAFE_CHECK(buf, TSAFE_E_NOMEM);
    tsafe_store_le64(buf, (uint64_t)padded);
    memcpy(buf + 8, hdr, hl);
    memset(buf + 8 + hl, ' ', padded - hl);
    size_t pos = 8 + padded;
    for (size_t k = 0; k < w->n; k++) {
        const wr_tensor *t = &w->t[order[k]];
        if (t->nbytes)
            memcpy(buf + pos, t->data, t->nbytes);
        pos += t->nbytes;
    }
    *bytes = buf;
    *len = total;
    buf = NULL;
fail:
    free(buf);
    free(hdr);
    json_decref(root);
    free(order);
    return st;
}

tsafe_status tsafe_safetensors_writer_write_file(
    const tsafe_safetensors_writer *w, const char *path)
{
    if (!w || !path)
        return TSAFE_E_NULL;
    uint8_t *b;
    size_t n;
    tsafe_status st = tsafe_safetensors_writer_serialize(w, &b, &n);
    if (st != TSAFE_OK)
        return st;
    st = tsafe_write_file(path, b, n);
    free(b);
    return st;
}

void tsafe_safetensors_bytes_free(void *bytes)
{
    free(bytes);
}
