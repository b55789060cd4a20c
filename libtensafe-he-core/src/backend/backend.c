/* Backend dispatch: checks shapes and forwards to the vtable. */
#include <stdlib.h>

#include "tensafe/backend_impl.h"
#include "../bfv/bfv_internal.h"
#include "../ckks/ckks_internal.h"
#include "tsafe_check.h"

static tsafe_status backend_init(tsafe_backend **out, int api_version,
                                 const struct tsafe_backend_i *iface, void *state,
                                 const tsafe_context *he, const tsafe_bfv_context *bfv)
{
    TSAFE_REQUIRE(out && iface && (he || bfv), TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(api_version == TSAFE_BACKEND_API_VERSION, TSAFE_E_VERSION);
    TSAFE_REQUIRE(iface->get_name && iface->destroy && iface->buffer_alloc &&
                      iface->buffer_free && iface->buffer_upload &&
                      iface->buffer_download && iface->ntt_forward &&
                      iface->ntt_inverse && iface->elementwise && iface->rescale,
                  TSAFE_E_ARG);
    /* an operand representation of its own needs all three slots */
    TSAFE_REQUIRE(!iface->operand_alloc == !iface->operand_upload &&
                      !iface->operand_alloc == !iface->operand_free,
                  TSAFE_E_ARG);
    tsafe_backend *b = calloc(1, sizeof *b);
    TSAFE_REQUIRE(b, TSAFE_E_NOMEM);
    b->api_version = api_version;
    b->iface = iface;
    b->ctx = state;
    b->he = he;
    b->bfv = bfv;
    b->ring = he ? &he->ring : &bfv->ring;
    *out = b;
    return TSAFE_OK;
}

tsafe_status tsafe_backend_init(tsafe_backend **out, int api_version,
                                const struct tsafe_backend_i *iface,
                                void *state, const tsafe_context *he)
{
    TSAFE_REQUIRE(he, TSAFE_E_NULL);
    return backend_init(out, api_version, iface, state, he, NULL);
}

tsafe_status tsafe_backend_init_bfv(tsafe_backend **out, int api_version,
                                    const struct tsafe_backend_i *iface,
                                    void *state, const tsafe_bfv_context *bfv)
{
    TSAFE_REQUIRE(bfv, TSAFE_E_NULL);
    return backend_init(out, api_version, iface, state, NULL, bfv);
}

void tsafe_backend_free(tsafe_backend *b)
{
    if (!b)
        return;
    b->iface->destroy(b);
    free(b->read_scratch); /* public ciphertext words: nothing to wipe */
    free(b);
}

const char *tsafe_backend_name(const tsafe_backend *b)
{
    return b ? b->iface->get_name((tsafe_backend *)b) : "none";
}

size_t tsafe_backend_n(const tsafe_backend *b) { return b ? b->ring->n : 0; }

uint32_t tsafe_backend_max_limbs(const tsafe_backend *b)
{
    return b ? b->ring->n_limbs : 0;
}

uint32_t tsafe_backend_log_n(const tsafe_backend *b)
{
    return b ? b->ring->log_n : 0;
}

uint64_t tsafe_backend_prime(const tsafe_backend *b, uint32_t i)
{
    return b && i < b->ring->n_limbs ? b->ring->mod[i].q : 0;
}

uint64_t tsafe_backend_psi(const tsafe_backend *b, uint32_t i)
{
    return b && i < b->ring->n_limbs ? b->ring->ntt[i].psi : 0;
}

static tsafe_status cpu_factory_create(void *user, const tsafe_context *ckks,
                                       const tsafe_bfv_context *bfv,
                                       tsafe_backend **out)
{
    (void)user;
    return ckks ? tsafe_backend_cpu_create(ckks, out)
                : tsafe_backend_cpu_create_bfv(bfv, out);
}

static const tsafe_backend_factory k_cpu_factory = {"cpu", cpu_factory_create, NULL};

const tsafe_backend_factory *tsafe_backend_cpu_factory(void) { return &k_cpu_factory; }

tsafe_status tsafe_backend_create(const tsafe_backend_factory *f,
                                  const tsafe_context *ckks,
                                  const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(!ckks != !bfv, TSAFE_E_ARG);
    if (!f)
        f = &k_cpu_factory;
    TSAFE_REQUIRE(f->create, TSAFE_E_NULL);
    tsafe_status st = f->create(f->user, ckks, bfv, out);
    if (st != TSAFE_OK)
        *out = NULL;
    else if (!*out)
        return TSAFE_E_STATE; /* a factory that reported success with nothing */
    return st;
}

static tsafe_status buffer_alloc(tsafe_backend *b, size_t n_polys,
                                 uint32_t n_limbs, int operand, tsafe_buffer **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(b, TSAFE_E_NULL);
    TSAFE_REQUIRE(n_polys > 0 && n_limbs > 0 && n_limbs <= b->ring->n_limbs,
                  TSAFE_E_RANGE);
    size_t n = b->ring->n;
    TSAFE_REQUIRE(n_polys <= SIZE_MAX / n / n_limbs / sizeof(uint64_t),
                  TSAFE_E_SIZE_OVERFLOW);
    tsafe_buffer *buf = calloc(1, sizeof *buf);
    TSAFE_REQUIRE(buf, TSAFE_E_NOMEM);
    size_t words = n_polys * n_limbs * n;
    tsafe_status st = operand && b->iface->operand_alloc
                          ? b->iface->operand_alloc(b, words, &buf->mem)
                          : b->iface->buffer_alloc(b, words, &buf->mem);
    if (st != TSAFE_OK) {
        free(buf);
        return st;
    }
    buf->backend = b;
    buf->n_polys = n_polys;
    buf->n_limbs = n_limbs;
    buf->operand = operand;
    *out = buf;
    return TSAFE_OK;
}

tsafe_status tsafe_buffer_alloc(tsafe_backend *b, size_t n_polys,
                                uint32_t n_limbs, tsafe_buffer **out)
{
    return buffer_alloc(b, n_polys, n_limbs, 0, out);
}

tsafe_status tsafe_buffer_alloc_operand(tsafe_backend *b, size_t n_polys,
                                        uint32_t n_limbs, tsafe_buffer **out)
{
    return buffer_alloc(b, n_polys, n_limbs, 1, out);
}

void tsafe_buffer_free(tsafe_buffer *buf)
{
    if (!buf)
        return;
    const struct tsafe_backend_i *f = buf->backend->iface;
    if (buf->operand && f->operand_free)
        f->operand_free(buf->backend, buf->mem); /* borrowed: the header only */
    else if (!buf->borrowed)
        f->buffer_free(buf->backend, buf->mem);
    free(buf);
}

size_t tsafe_buffer_words(const tsafe_buffer *buf)
{
    return buf ? buf->n_polys * buf->n_limbs * buf->backend->ring->n : 0;
}

size_t tsafe_buffer_polys(const tsafe_buffer *buf) { return buf ? buf->n_polys : 0; }

uint32_t tsafe_buffer_limbs(const tsafe_buffer *buf) { return buf ? buf->n_limbs : 0; }

uint64_t *tsafe_buffer_host_words(tsafe_buffer *buf)
{
    if (!buf || buf->operand || !buf->backend->iface->host_words)
        return NULL;
    return buf->backend->iface->host_words(buf->backend, buf->mem);
}

tsafe_status tsafe_buffer_upload(tsafe_buffer *dst, const uint64_t *src,
                                 size_t words)
{
    TSAFE_REQUIRE(dst && src, TSAFE_E_NULL);
    TSAFE_REQUIRE(words == tsafe_buffer_words(dst), TSAFE_E_RANGE);
    /* values must be reduced: check on the host before they reach a device
     * (vectorised: a device backend's host side checks every word it
     * uploads, share ciphertexts included) */
    const struct tsafe_ring_view *c = dst->backend->ring;
    for (size_t p = 0; p < dst->n_polys; p++)
        for (uint32_t i = 0; i < dst->n_limbs; i++)
            TSAFE_REQUIRE(tsafe_vec_all_below(src + (p * dst->n_limbs + i) * c->n, c->n,
                                              c->mod[i].q),
                          TSAFE_E_VALUE_RANGE);
    const struct tsafe_backend_i *f = dst->backend->iface;
    TSAFE_REQUIRE(!dst->borrowed, TSAFE_E_ARG); /* another object's memory */
    if (dst->operand && f->operand_upload)
        return f->operand_upload(dst->backend, dst->mem, src, dst->n_polys,
                                 dst->n_limbs);
    return f->buffer_upload(dst->backend, dst->mem, src, words);
}

tsafe_status tsafe_buffer_download(const tsafe_buffer *src, uint64_t *dst,
                                   size_t words)
{
    TSAFE_REQUIRE(src && dst, TSAFE_E_NULL);
    TSAFE_REQUIRE(words == tsafe_buffer_words(src), TSAFE_E_RANGE);
    /* an operand's memory may hold the backend's precomputation */
    TSAFE_REQUIRE(!src->operand || !src->backend->iface->operand_alloc, TSAFE_E_UNSUPPORTED);
    return src->backend->iface->buffer_download(src->backend, src->mem, dst, words);
}

tsafe_status tsafe_backend_ntt_forward(tsafe_backend *b, tsafe_buffer *buf)
{
    TSAFE_REQUIRE(b && buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(buf->backend == b && !buf->operand, TSAFE_E_ARG);
    return b->iface->ntt_forward(b, buf->mem, buf->n_polys, buf->n_limbs);
}

tsafe_status tsafe_backend_ntt_inverse(tsafe_backend *b, tsafe_buffer *buf)
{
    TSAFE_REQUIRE(b && buf, TSAFE_E_NULL);
    TSAFE_REQUIRE(buf->backend == b && !buf->operand, TSAFE_E_ARG);
    return b->iface->ntt_inverse(b, buf->mem, buf->n_polys, buf->n_limbs);
}

tsafe_status tsafe_backend_elementwise(tsafe_backend *b, tsafe_elementwise_op op,
                                       tsafe_buffer *out, const tsafe_buffer *a,
                                       const tsafe_buffer *bb)
{
    TSAFE_REQUIRE(b && out && a && bb, TSAFE_E_NULL);
    TSAFE_REQUIRE(out->backend == b && a->backend == b && bb->backend == b,
                  TSAFE_E_ARG);
    /* operands are right sides of mul_acc only (their representation is
     * the backend's) */
    TSAFE_REQUIRE(!out->operand && !a->operand && !bb->operand, TSAFE_E_ARG);
    TSAFE_REQUIRE(op == TSAFE_OP_ADD || op == TSAFE_OP_SUB || op == TSAFE_OP_MUL,
                  TSAFE_E_ARG);
    TSAFE_REQUIRE(out->n_polys == a->n_polys && out->n_limbs == a->n_limbs &&
                      bb->n_limbs == a->n_limbs &&
                      (bb->n_polys == a->n_polys || bb->n_polys == 1),
                  TSAFE_E_RANGE);
    return b->iface->elementwise(b, op, out->mem, a->mem, bb->mem, a->n_polys,
                                 bb->n_polys, a->n_limbs);
}

/* The shapes of an operation that drops the last limb (rescale, switch). */
static tsafe_status check_drop_limb(const tsafe_backend *b, const tsafe_buffer *out,
                                    const tsafe_buffer *in)
{
    TSAFE_REQUIRE(b && out && in, TSAFE_E_NULL);
    TSAFE_REQUIRE(out->backend == b && in->backend == b && !out->operand && !in->operand,
                  TSAFE_E_ARG);
    TSAFE_REQUIRE(in->n_limbs >= 2, TSAFE_E_LEVEL);
    TSAFE_REQUIRE(out->n_polys == in->n_polys && out->n_limbs + 1 == in->n_limbs,
                  TSAFE_E_RANGE);
    return TSAFE_OK;
}

tsafe_status tsafe_backend_rescale(tsafe_backend *b, tsafe_buffer *out,
                                   const tsafe_buffer *in)
{
    tsafe_status st = check_drop_limb(b, out, in);
    return st != TSAFE_OK ? st
                          : b->iface->rescale(b, out->mem, in->mem, in->n_polys, in->n_limbs);
}

tsafe_status tsafe_backend_mul_acc(tsafe_backend *b, const tsafe_backend_mac *jobs,
                                   size_t n_jobs)
{
    TSAFE_REQUIRE(b && (jobs || n_jobs == 0), TSAFE_E_NULL);
    for (size_t j = 0; j < n_jobs; j++) {
        const tsafe_backend_mac *m = &jobs[j];
        TSAFE_REQUIRE(m->acc && (m->n_terms == 0 || (m->a && m->w)), TSAFE_E_NULL);
        TSAFE_REQUIRE(m->acc->backend == b && !m->acc->operand, TSAFE_E_ARG);
        size_t P = m->acc->n_polys;
        uint32_t L = m->acc->n_limbs;
        TSAFE_REQUIRE(P <= 16, TSAFE_E_RANGE); /* every backend: one limit */
        for (size_t k = 0; k < m->n_terms; k++) {
            const tsafe_buffer *a = m->a[k], *w = m->w[k];
            TSAFE_REQUIRE(a && w, TSAFE_E_NULL);
            TSAFE_REQUIRE(a->backend == b && w->backend == b && a != m->acc &&
                              w != m->acc && !a->operand,
                          TSAFE_E_ARG);
            TSAFE_REQUIRE(a->n_limbs == L && w->n_limbs == L &&
                              (a->n_polys == P || a->n_polys == 1) &&
                              (w->n_polys == P || w->n_polys == 1),
                          TSAFE_E_RANGE);
        }
        for (size_t i = 0; i < j; i++) /* each job owns its accumulator */
            TSAFE_REQUIRE(jobs[i].acc != m->acc, TSAFE_E_ARG);
    }
    if (n_jobs == 0)
        return TSAFE_OK;
    TSAFE_REQUIRE(b->iface->mul_acc, TSAFE_E_UNSUPPORTED);
    return b->iface->mul_acc(b, jobs, n_jobs);
}

tsafe_status tsafe_backend_mod_switch(tsafe_backend *b, tsafe_buffer *out,
                                      const tsafe_buffer *in)
{
    tsafe_status st = check_drop_limb(b, out, in);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(b->iface->mod_switch, TSAFE_E_UNSUPPORTED);
    return b->iface->mod_switch(b, out->mem, in->mem, in->n_polys, in->n_limbs);
}

tsafe_status tsafe_backend_ntt_read(tsafe_backend *b, const tsafe_buffer *buf, size_t poly,
                                    const uint32_t *pos, size_t n_pos, uint64_t *out)
{
    TSAFE_REQUIRE(b && buf && (pos || n_pos == 0) && (out || n_pos == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(buf->backend == b && !buf->operand, TSAFE_E_ARG);
    TSAFE_REQUIRE(poly < buf->n_polys, TSAFE_E_RANGE);
    size_t n = b->ring->n;
    for (size_t k = 0; k < n_pos; k++)
        TSAFE_REQUIRE(pos[k] < n, TSAFE_E_RANGE);
    TSAFE_REQUIRE(b->iface->ntt_read, TSAFE_E_UNSUPPORTED);
    if (n_pos == 0)
        return TSAFE_OK;
    /* a polynomial view: buffer memory is a flat array of words (API 3) */
    const uint64_t *mem = (const uint64_t *)buf->mem + poly * buf->n_limbs * n;
    return b->iface->ntt_read(b, mem, buf->n_limbs, pos, n_pos, out);
}

tsafe_status tsafe_backend_synchronize(tsafe_backend *b)
{
    TSAFE_REQUIRE(b, TSAFE_E_NULL);
    return b->iface->synchronize ? b->iface->synchronize(b) : TSAFE_OK;
}

tsafe_status tsafe_backend_graph_begin(tsafe_backend *b)
{
    TSAFE_REQUIRE(b, TSAFE_E_NULL);
    return b->iface->graph_begin ? b->iface->graph_begin(b) : TSAFE_E_UNSUPPORTED;
}

tsafe_status tsafe_backend_graph_end(tsafe_backend *b)
{
    TSAFE_REQUIRE(b, TSAFE_E_NULL);
    return b->iface->graph_end ? b->iface->graph_end(b) : TSAFE_E_UNSUPPORTED;
}

tsafe_status tsafe_backend_graph_launch(tsafe_backend *b)
{
    TSAFE_REQUIRE(b, TSAFE_E_NULL);
    return b->iface->graph_launch ? b->iface->graph_launch(b) : TSAFE_E_UNSUPPORTED;
}
