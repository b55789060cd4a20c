/* Compute backends: where batched RNS polynomial work runs (CPU here, CUDA in
 * libtensafe-he-cuda). Users see opaque handles only; backend authors include
 * tensafe/backend_impl.h.
 *
 * A backend serves one ring: the data primes of a CKKS context
 * (tsafe_backend_cpu_create) or the two primes of an exact BFV context
 * (tsafe_backend_cpu_create_bfv, the sealed protocol). The LoRA and MoE
 * server paths do their ring work through a backend that the host chooses
 * with a tsafe_backend_factory (NULL: the CPU backend).
 *
 * Data layout of a backend buffer: `n_polys` polynomials, each `n_limbs`
 * RNS limbs of N uint64_t words (limb i is modulo prime i of the ring),
 * polynomial-major: word (p * n_limbs + i) * N + k.
 *
 * Thread safety: a backend and its buffers belong to one thread at a time.
 * Ownership: tsafe_backend_free releases the backend; buffers must be freed
 * before it. The backend borrows its context (which must outlive it). */
#ifndef TENSAFE_BACKEND_H
#define TENSAFE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/bfv.h"
#include "tensafe/ckks.h"
#include "tensafe/cpu_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsafe_backend tsafe_backend;
typedef struct tsafe_buffer tsafe_buffer;

/* The portable CPU backend (scalar / IFMA arithmetic as the context chose). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_cpu_create(
    const tsafe_context *ctx, tsafe_backend **out);
/* The CPU backend over the two primes of an exact (BFV) context. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_cpu_create_bfv(
    const tsafe_bfv_context *ctx, tsafe_backend **out);
TSAFE_API void tsafe_backend_free(tsafe_backend *b);
TSAFE_API const char *tsafe_backend_name(const tsafe_backend *b);
/* Degree N and number of limbs a buffer may have (0 for NULL). */
TSAFE_API size_t tsafe_backend_n(const tsafe_backend *b);
TSAFE_API uint32_t tsafe_backend_max_limbs(const tsafe_backend *b);

/* How a server object obtains its backends: create() is called once per
 * ring the object uses, with exactly one of ckks / bfv non-NULL, and the
 * object frees what it got with tsafe_backend_free. The factory (and user)
 * must outlive the objects created with it. A NULL factory pointer means
 * the CPU backend (tsafe_backend_cpu_factory). */
typedef struct tsafe_backend_factory {
    const char *name;
    tsafe_status (*create)(void *user, const tsafe_context *ckks,
                           const tsafe_bfv_context *bfv, tsafe_backend **out);
    void *user;
} tsafe_backend_factory;
TSAFE_API const tsafe_backend_factory *tsafe_backend_cpu_factory(void);
/* A CPU factory whose backends run the independent parts of a batch on
 * pool's threads: the jobs (and limbs) of a tsafe_backend_mul_acc whose
 * jobs read no other job's accumulator, the transforms of an NTT of many
 * polynomials. Same results, bit for bit, as tsafe_backend_cpu_factory.
 * Fills *out (user = pool, borrowed: it must outlive the backends); pool
 * NULL: one thread. Each backend is still one thread's at a time; many
 * backends may share one pool. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_cpu_factory_pool(
    tsafe_cpu_pool *pool, tsafe_backend_factory *out);
/* f->create(f->user, ckks, bfv, out) with the checks (f NULL: CPU). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_create(
    const tsafe_backend_factory *f, const tsafe_context *ckks,
    const tsafe_bfv_context *bfv, tsafe_backend **out);

/* Buffers of n_polys x n_limbs x N words. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_buffer_alloc(
    tsafe_backend *b, size_t n_polys, uint32_t n_limbs, tsafe_buffer **out);
/* A fixed right operand of tsafe_backend_mul_acc (plaintexts, public keys):
 * written once by tsafe_buffer_upload, which lets the backend precompute
 * what makes products by it cheap (the CPU backend: Shoup quotients). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_buffer_alloc_operand(
    tsafe_backend *b, size_t n_polys, uint32_t n_limbs, tsafe_buffer **out);
TSAFE_API void tsafe_buffer_free(tsafe_buffer *buf);
TSAFE_API size_t tsafe_buffer_words(const tsafe_buffer *buf);
TSAFE_API size_t tsafe_buffer_polys(const tsafe_buffer *buf);
TSAFE_API uint32_t tsafe_buffer_limbs(const tsafe_buffer *buf);
/* The buffer's words when the backend keeps them in host memory (the CPU
 * backend), so that a caller may fill or read them in place instead of
 * copying through upload/download; NULL otherwise and for operands. Values
 * written there must be reduced (< q_i): nothing checks them. */
TSAFE_API uint64_t *tsafe_buffer_host_words(tsafe_buffer *buf);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_buffer_upload(
    tsafe_buffer *dst, const uint64_t *src, size_t words);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_buffer_download(
    const tsafe_buffer *src, uint64_t *dst, size_t words);

/* Batched forward / inverse negacyclic NTT of every polynomial and limb. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_ntt_forward(
    tsafe_backend *b, tsafe_buffer *buf);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_ntt_inverse(
    tsafe_backend *b, tsafe_buffer *buf);

/* Element-wise out = a (op) b mod q_i; shapes must match (b may have one
 * polynomial, then broadcast over a's polynomials). out may alias a. */
typedef enum tsafe_elementwise_op {
    TSAFE_OP_ADD = 0,
    TSAFE_OP_SUB = 1,
    TSAFE_OP_MUL = 2
} tsafe_elementwise_op;
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_elementwise(
    tsafe_backend *b, tsafe_elementwise_op op, tsafe_buffer *out,
    const tsafe_buffer *a, const tsafe_buffer *bb);

/* Rescale (NTT form in, NTT form out): divide by the last limb's prime with
 * rounding; out has one limb fewer. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_rescale(
    tsafe_backend *b, tsafe_buffer *out, const tsafe_buffer *in);

/* Multiply-accumulate: for each job, acc += sum_k a[k] (*) w[k] mod q_i,
 * element-wise (NTT form). acc has P polynomials and L limbs; every a[k]
 * and w[k] has L limbs and P or 1 polynomials (1: broadcast). w[k] is best
 * an operand buffer (tsafe_buffer_alloc_operand) when it is used again (a
 * plaintext of the adapter); a plain buffer used once skips the operand's
 * precomputation (a per-token plaintext). No a[k] is an operand, and
 * neither is acc. One call carries the
 * products of many accumulators (sites, blocks, clients): a GPU backend
 * runs them as one batch. Jobs must not share an accumulator; they run in
 * order (a job that reads an earlier job's accumulator as a term sees it
 * updated, a later one's as it was). Accumulators have at most 16
 * polynomials (TSAFE_E_RANGE). */
typedef struct tsafe_backend_mac {
    tsafe_buffer *acc;
    size_t n_terms;
    const tsafe_buffer *const *a;
    const tsafe_buffer *const *w;
    int assign; /* 1: acc = the sum (old contents ignored; no zeroing pass);
                   0 (the default of a {acc, n, a, w} initializer): acc += */
} tsafe_backend_mac;
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_mul_acc(
    tsafe_backend *b, const tsafe_backend_mac *jobs, size_t n_jobs);

/* Modulus switch in coefficient form: out = round(in / q_last) mod q_i for
 * the first L-1 limbs (round half up: floor((x + (q_last-1)/2) / q_last),
 * x the CRT value in [0, Q)); out has one limb fewer than in. The BFV
 * response switch Q -> q0; the same rounding as tsafe_backend_rescale. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_mod_switch(
    tsafe_backend *b, tsafe_buffer *out, const tsafe_buffer *in);

/* Coefficients of polynomial `poly` of an NTT-form buffer at a few
 * positions, the buffer left as it is: out[i * n_pos + k] = coefficient
 * pos[k] of limb i, reduced (n_limbs * n_pos words, host memory). What the
 * inverse NTT would give, for less work when the positions are few (the CPU
 * backend: positions c + m l with N/m <= 64 cost N products per limb, a
 * sealed block's read rows have that shape). TSAFE_E_UNSUPPORTED when the
 * backend has no such operation; TSAFE_E_RANGE for poly or a position out
 * of range. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_ntt_read(
    tsafe_backend *b, const tsafe_buffer *buf, size_t poly, const uint32_t *pos,
    size_t n_pos, uint64_t *out);

/* Optional: wait for queued work (no-op on synchronous backends). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_synchronize(
    tsafe_backend *b);

/* Optional: record a fixed-shape pipeline once and replay it (CUDA graphs
 * on the CUDA backend: tensafe/cuda.h states the capture rules). Between
 * begin and end the backend's NTT / element-wise / rescale / mul_acc /
 * mod_switch calls are recorded instead of run; launch replays them on
 * the same buffers. TSAFE_E_UNSUPPORTED on a backend without graphs (the
 * CPU backend: run the calls instead). Same thread rules as the backend. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_graph_begin(tsafe_backend *b);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_graph_end(tsafe_backend *b);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_graph_launch(tsafe_backend *b);

#ifdef __cplusplus
}
#endif
#endif
