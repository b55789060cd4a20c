/* The portable CPU backend: host memory, the context's NTT tables (scalar or
 * IFMA as the context chose), synchronous. */
#include <stdlib.h>
#include <string.h>

#include "tensafe/backend_impl.h"
#include "../ckks/ckks_internal.h"
#include "tsafe_check.h"

static const char *cpu_name(tsafe_backend *b) { return "cpu"; }

static void cpu_destroy(tsafe_backend *b) { (void)b; }

static tsafe_status cpu_alloc(tsafe_backend *b, size_t words, void **mem)
{
    *mem = calloc(words, sizeof(uint64_t));
    return *mem ? TSAFE_OK : TSAFE_E_NOMEM;
}

static void cpu_free(tsafe_backend *b, void *mem) { free(mem); }

static tsafe_status cpu_upload(tsafe_backend *b, void *mem, const uint64_t *src,
                               size_t words)
{
    memcpy(mem, src, words * sizeof *src);
    return TSAFE_OK;
}

static tsafe_status cpu_download(tsafe_backend *b, const void *mem,
                                 uint64_t *dst, size_t words)
{
    memcpy(dst, mem, words * sizeof *dst);
    return TSAFE_OK;
}

static tsafe_status cpu_ntt(tsafe_backend *b, void *mem, size_t n_polys,
                            uint32_t n_limbs, int inverse)
{
    const tsafe_context *c = b->he;
    uint64_t *w = mem;
    for (size_t p = 0; p < n_polys; p++)
        for (uint32_t i = 0; i < n_limbs; i++) {
            uint64_t *l = w + (p * n_limbs + i) * c->n;
            if (inverse)
                tsafe_ntt_inverse(&c->ntt[i], l);
            else
                tsafe_ntt_forward(&c->ntt[i], l);
        }
    return TSAFE_OK;
}

static tsafe_status cpu_ntt_fwd(tsafe_backend *b, void *mem, size_t n_polys,
                                uint32_t n_limbs)
{
    return cpu_ntt(b, mem, n_polys, n_limbs, 0);
}

static tsafe_status cpu_ntt_inv(tsafe_backend *b, void *mem, size_t n_polys,
                                uint32_t n_limbs)
{
    return cpu_ntt(b, mem, n_polys, n_limbs, 1);
}

static tsafe_status cpu_elementwise(tsafe_backend *b, tsafe_elementwise_op op,
                                    void *out, const void *a, const void *bb,
                                    size_t n_polys, size_t b_polys,
                                    uint32_t n_limbs)
{
    const tsafe_context *c = b->he;
    size_t n = c->n;
    for (size_t p = 0; p < n_polys; p++)
        for (uint32_t i = 0; i < n_limbs; i++) {
            size_t off = (p * n_limbs + i) * n;
            size_t boff = ((b_polys == 1 ? 0 : p) * n_limbs + i) * n;
            uint64_t *o = (uint64_t *)out + off;
            const uint64_t *x = (const uint64_t *)a + off;
            const uint64_t *y = (const uint64_t *)bb + boff;
            switch (op) {
            case TSAFE_OP_ADD: tsafe_vec_add(o, x, y, n, c->mod[i].q); break;
            case TSAFE_OP_SUB: tsafe_vec_sub(o, x, y, n, c->mod[i].q); break;
            case TSAFE_OP_MUL: tsafe_vec_mul(o, x, y, n, &c->mod[i]); break;
            }
        }
    return TSAFE_OK;
}

static tsafe_status cpu_rescale(tsafe_backend *b, void *out, const void *in,
                                size_t n_polys, uint32_t n_limbs_in)
{
    const tsafe_context *c = b->he;
    size_t n = c->n;
    uint32_t level = n_limbs_in - 1;
    uint64_t *scratch = malloc(2 * n * sizeof *scratch);
    uint64_t *tmp = malloc((size_t)level * n * sizeof *tmp);
    if (!scratch || !tmp) {
        free(scratch);
        free(tmp);
        return TSAFE_E_NOMEM;
    }
    for (size_t p = 0; p < n_polys; p++) {
        const uint64_t *src = (const uint64_t *)in + p * n_limbs_in * n;
        tsafe_poly_rescale(c, src, level, tmp, scratch);
        memcpy((uint64_t *)out + p * level * n, tmp, (size_t)level * n * sizeof *tmp);
    }
    free(scratch);
    free(tmp);
    return TSAFE_OK;
}

static const struct tsafe_backend_i k_cpu_iface = {
    .get_name = cpu_name,
    .destroy = cpu_destroy,
    .buffer_alloc = cpu_alloc,
    .buffer_free = cpu_free,
    .buffer_upload = cpu_upload,
    .buffer_download = cpu_download,
    .ntt_forward = cpu_ntt_fwd,
    .ntt_inverse = cpu_ntt_inv,
    .elementwise = cpu_elementwise,
    .rescale = cpu_rescale,
    .synchronize = NULL,
    .graph_begin = NULL,
    .graph_end = NULL,
    .graph_launch = NULL,
};

tsafe_status tsafe_backend_cpu_create(const tsafe_context *ctx,
                                      tsafe_backend **out)
{
    TSAFE_REQUIRE(ctx && out, TSAFE_E_NULL);
    return tsafe_backend_init(out, TSAFE_BACKEND_API_VERSION, &k_cpu_iface,
                              NULL, ctx);
}
