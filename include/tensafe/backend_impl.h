/* For backend authors only (not included by tensafe.h): the backend vtable
 * and the context facts a backend needs to produce results identical to the
 * CPU backend. A backend fills a `static const struct tsafe_backend_i` with
 * designated initialisers; optional slots may be NULL (the dispatcher then
 * falls back or reports TSAFE_E_UNSUPPORTED). A backend whose api_version
 * differs from TSAFE_BACKEND_API_VERSION is refused. */
#ifndef TENSAFE_BACKEND_IMPL_H
#define TENSAFE_BACKEND_IMPL_H

#include "tensafe/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSAFE_BACKEND_API_VERSION 1

struct tsafe_backend_i {
    /* required */
    const char *(*get_name)(tsafe_backend *b);
    void (*destroy)(tsafe_backend *b);
    tsafe_status (*buffer_alloc)(tsafe_backend *b, size_t words, void **mem);
    void (*buffer_free)(tsafe_backend *b, void *mem);
    tsafe_status (*buffer_upload)(tsafe_backend *b, void *mem,
                                  const uint64_t *src, size_t words);
    tsafe_status (*buffer_download)(tsafe_backend *b, const void *mem,
                                    uint64_t *dst, size_t words);
    tsafe_status (*ntt_forward)(tsafe_backend *b, void *mem, size_t n_polys,
                                uint32_t n_limbs);
    tsafe_status (*ntt_inverse)(tsafe_backend *b, void *mem, size_t n_polys,
                                uint32_t n_limbs);
    /* b_polys is n_polys or 1 (broadcast) */
    tsafe_status (*elementwise)(tsafe_backend *b, tsafe_elementwise_op op,
                                void *out, const void *a, const void *bb,
                                size_t n_polys, size_t b_polys,
                                uint32_t n_limbs);
    tsafe_status (*rescale)(tsafe_backend *b, void *out, const void *in,
                            size_t n_polys, uint32_t n_limbs_in);
    /* optional (NULL = synchronous / unsupported) */
    tsafe_status (*synchronize)(tsafe_backend *b);
    tsafe_status (*graph_begin)(tsafe_backend *b);
    tsafe_status (*graph_end)(tsafe_backend *b);
    tsafe_status (*graph_launch)(tsafe_backend *b);
};

struct tsafe_backend {
    int api_version;
    const struct tsafe_backend_i *iface;
    void *ctx;                 /* backend-private state */
    const tsafe_context *he;   /* borrowed CKKS context */
};

struct tsafe_buffer {
    tsafe_backend *backend;
    void *mem;                 /* backend-owned memory */
    size_t n_polys;
    uint32_t n_limbs;
};

/* Context facts for backends: the primitive 2N-th root psi_i used by the
 * CPU NTT for prime i (so another backend's NTT values are identical), and
 * the NTT output order: forward NTT output index k holds the evaluation at
 * psi^(2*bitrev(k)+1) (bit-reversed order), inverse takes that order back to
 * natural coefficient order; all outputs fully reduced to [0, q). */
TSAFE_API uint64_t tsafe_context_psi(const tsafe_context *ctx, uint32_t i);
TSAFE_API uint32_t tsafe_context_log_n(const tsafe_context *ctx);

/* Wrap a backend-private state into a backend handle after checking the
 * api_version; used by backend constructors. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_init(
    tsafe_backend **out, int api_version, const struct tsafe_backend_i *iface,
    void *state, const tsafe_context *he);

#ifdef __cplusplus
}
#endif
#endif
