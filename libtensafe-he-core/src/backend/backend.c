/* Backend dispatch: checks shapes and forwards to the vtable. */
#include <stdlib.h>

#include "tensafe/backend_impl.h"
#include "../ckks/ckks_internal.h"
#include "tsafe_check.h"

tsafe_status tsafe_backend_init(tsafe_backend **out, int api_version,
                                const struct tsafe_backend_i *iface,
                                void *state, const tsafe_context *he)
{
    TSAFE_REQUIRE(out && iface && he, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(api_version == TSAFE_BACKEND_API_VERSION, TSAFE_E_VERSION);
    TSAFE_REQUIRE(iface->get_name && iface->destroy && iface->buffer_alloc &&
                      iface->buffer_free && iface->buffer_upload &&
                      iface->buffer_download && iface->ntt_forward &&
                      iface->ntt_inverse && iface->elementwise && iface->rescale,
                  TSAFE_E_ARG);
    tsafe_backend *b = calloc(1, sizeof *b);
    TSAFE_REQUIRE(b, TSAFE_E_NOMEM);
    b->api_version = api_version;
    b->iface = iface;
    b->ctx = state;
    b->he = he;
    *out = b;
    return TSAFE_OK;
}

void tsafe_backend_free(tsafe_backend *b)
{
    if (!b)
        return;
    b->iface->destroy(b);
    free(b);
}

const char *tsafe_backend_name(const tsafe_backend *b)
{
    return b ? b->iface->get_name((tsafe_backend *)b) : "none";
}

tsafe_status tsafe_buffer_alloc(tsafe_backend *b, size_t n_polys,
                                uint32_t n_limbs, tsafe_buffer **out)
{
    TSAFE_REQUIRE(b && out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(n_polys > 0 && n_limbs > 0 && n_limbs <= b->he->n_data,
                  TSAFE_E_RANGE);
    size_t n = b->he->n;
    TSAFE_REQUIRE(n_polys <= SIZE_MAX / n / n_limbs / sizeof(uint64_t),
                  TSAFE_E_SIZE_OVERFLOW);
    tsafe_buffer *buf = calloc(1, sizeof *buf);
    TSAFE_REQUIRE(buf, TSAFE_E_NOMEM);
    tsafe_status st = b->iface->buffer_alloc(b, n_polys * n_limbs * n, &buf->mem);
    if (st != TSAFE_OK) {
        free(buf);
        return st;
    }
    buf->backend = b;
    buf->n_polys = n_polys;
    buf->n_limbs = n_limbs;
    *out = buf;
    return TSAFE_OK;
}

void tsafe_buffer_free(tsafe_buffer *buf)
{
    if (!buf)
        return;
    buf->backend->iface->buffer_free(buf->backend, buf->mem);
    free(buf);
}

size_t tsafe_buffer_words(const tsafe_buffer *buf)
{
    return buf ? buf->n_polys * buf->n_limbs * buf->backend->he->n : 0;
}

tsafe_status tsafe_buffer_upload(tsafe_buffer *dst, const uint64_t *src,
                                 size_t words)
{
    TSAFE_REQUIRE(dst && src, TSAFE_E_NULL);
    TSAFE_REQUIRE(words == tsafe_buffer_words(dst), TSAFE_E_RANGE);
    /* values must be reduced: check on the host before they reach a device */
    const tsafe_context *c = dst->backend->he;
    for (size_t p = 0; p < dst->n_polys; p++)
        for (uint32_t i = 0; i < dst->n_limbs; i++) {
            const uint64_t *l = src + (p * dst->n_limbs + i) * c->n;
            for (size_t k = 0; k < c->n; k++)
                TSAFE_REQUIRE(l[k] < c->mod[i].q, TSAFE_E_VALUE_RANGE);
        }
    return dst->backend->iface->buffer_upload(dst->backend, dst->mem, src, words);
}

tsafe_status tsafe_buffer_download(const tsafe_buffer *src, uint64_t *dst,
                                   size_t words)
{
    TSAFE_REQUIRE(src && dst, TSAFE_E_NULL);
    TSAFE_REQUIRE(words == tsafe_buffer_words(src), TSAFE_E_RANGE);
    return src->backend->iface->buffer_download(src->backend, src->mem, dst, words);
}

tsafe_status tsafe_backend_ntt_forward(tsafe_backend *b, tsafe_buffer *buf)
{
    TSAFE_REQUIRE(b && buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(buf->backend == b, TSAFE_E_ARG);
    return b->iface->ntt_forward(b, buf->mem, buf->n_polys, buf->n_limbs);
}

tsafe_status tsafe_backend_ntt_inverse(tsafe_backend *b, tsafe_buffer *buf)
{
    TSAFE_REQUIRE(b && buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(buf->backend == b, TSAFE_E_ARG);
    return b->iface->ntt_inverse(b, buf->mem, buf->n_polys, buf->n_limbs);
}

tsafe_status tsafe_backend_elementwise(tsafe_backend *b, tsafe_elementwise_op op,
                                       tsafe_buffer *out, const tsafe_buffer *a,
                                       const tsafe_buffer *bb)
{
    TSAFE_REQUIRE(b && out && a && bb, TSAFE_E_NULL);
    TSAFE_REQUIRE(out->backend == b && a->backend == b && bb->backend == b,
                  TSAFE_E_ARG);
    TSAFE_REQUIRE(op == TSAFE_OP_ADD || op == TSAFE_OP_SUB || op == TSAFE_OP_MUL,
                  TSAFE_E_ARG);
    TSAFE_REQUIRE(out->n_polys == a->n_polys && out->n_limbs == a->n_limbs &&
                      bb->n_limbs == a->n_limbs &&
                      (bb->n_polys == a->n_polys || bb->n_polys == 1),
                  TSAFE_E_RANGE);
    return b->iface->elementwise(b, op, out->mem, a->mem, bb->mem, a->n_polys,
                                 bb->n_polys, a->n_limbs);
}

tsafe_status tsafe_backend_rescale(tsafe_backend *b, tsafe_buffer *out,
                                   const tsafe_buffer *in)
{
    TSAFE_REQUIRE(b && out && in, TSAFE_E_NULL);
    TSAFE_REQUIRE(out->backend == b && in->backend == b, TSAFE_E_ARG);
    TSAFE_REQUIRE(in->n_limbs >= 2, TSAFE_E_LEVEL);
    TSAFE_REQUIRE(out->n_polys == in->n_polys && out->n_limbs + 1 == in->n_limbs,
                  TSAFE_E_RANGE);
    return b->iface->rescale(b, out->mem, in->mem, in->n_polys, in->n_limbs);
}

tsafe_status tsafe_backend_synchronize(tsafe_backend *b)
{
    TSAFE_REQUIRE(b, TSAFE_E_NULL);
    return b->iface->synchronize ? b->iface->synchronize(b) : TSAFE_OK;
}
