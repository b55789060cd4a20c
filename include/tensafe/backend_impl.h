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

/* 2: rings (CKKS or BFV), operands, mul_acc, mod_switch, host_words.
 * 3: ntt_read (optional), and polynomial views: the `mem` of ntt_forward,
 *    ntt_inverse, elementwise, mod_switch and host_words may point into an
 *    allocation at a polynomial boundary (the BFV sealer works on c1 of a
 *    ciphertext buffer alone), so buffer memory must be one flat array of
 *    words (a host or device address), as both built-in backends have.
 * 4: seal_batch (optional): a BFV sealer's ring work for many sealings in
 *    one call (the GPU's case: one pass over every site of a round).
 * 5: ct_read (optional): ciphertexts read into buffers, c1 expanded from
 *    its seed by the backend (the GPU's case: no ChaCha20 on the host). */
#define TSAFE_BACKEND_API_VERSION 5

struct tsafe_ring_view; /* internal: degree, primes, NTT tables */

/* One ciphertext for the ct_read slot: its bytes' c0 (host, L limbs, NTT
 * form, reduced: the reader checked them) and the 32-byte seed of c1. */
typedef struct tsafe_backend_ct_job {
    void *mem;            /* a 2 x L buffer of the backend's: c0, then c1 */
    const uint64_t *c0;   /* L x N words */
    const uint8_t *seed;  /* 32 bytes */
} tsafe_backend_ct_job;

/* One sealing of a seal_batch call (BFV rings; tsafe_bfv_seal_batch draws
 * r, e1 and the read additions on the host and fills these). */
typedef struct tsafe_backend_seal_job {
    void *acc;            /* 2 polys x L limbs, NTT form; consumed */
    const int8_t *r;      /* N: the ternary r of the encryption of zero */
    /* its error e1 on c1 (coefficient form), expanded by the backend:
     * e1[k] = popcount(v & 0x1FFFFF) - popcount((v >> 21) & 0x1FFFFF),
     * v the little-endian 6 bytes at offset e1_off + 6 k of the ChaCha20
     * keystream (DJB's: 64-bit block counter from 0, 64-bit nonce) of key
     * e1_key (32 bytes, secret) and nonce e1_stream (little-endian) */
    const uint8_t *e1_key;
    uint64_t e1_off, e1_stream;
    const uint32_t *pos;  /* n_reads distinct positions < N */
    const uint64_t *add;  /* L x n_reads (limb-major): residues added to c0
                             at pos (error, flood, scaled mask) */
    size_t n_reads;
    uint64_t *c1;         /* out, host: N words mod q0 */
    uint64_t *c0;         /* out, host: n_reads words mod q0 */
} tsafe_backend_seal_job;

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
    /* needed by the LoRA / MoE server paths (NULL: TSAFE_E_UNSUPPORTED) */
    /* acc += sum a (*) w per job; shapes checked by the dispatcher */
    tsafe_status (*mul_acc)(tsafe_backend *b, const tsafe_backend_mac *jobs,
                            size_t n_jobs);
    /* coefficient-form switch dropping the last of n_limbs_in limbs */
    tsafe_status (*mod_switch)(tsafe_backend *b, void *out, const void *in,
                               size_t n_polys, uint32_t n_limbs_in);
    /* optional (NULL = synchronous / unsupported / plain buffers) */
    tsafe_status (*synchronize)(tsafe_backend *b);
    /* operand buffers: NULL = buffer_alloc / buffer_upload / buffer_free
     * (all three or none: a backend-specific operand representation) */
    tsafe_status (*operand_alloc)(tsafe_backend *b, size_t words, void **mem);
    tsafe_status (*operand_upload)(tsafe_backend *b, void *mem,
                                   const uint64_t *src, size_t n_polys,
                                   uint32_t n_limbs);
    void (*operand_free)(tsafe_backend *b, void *mem);
    /* host address of a (non-operand) buffer's words, or NULL */
    uint64_t *(*host_words)(tsafe_backend *b, void *mem);
    tsafe_status (*graph_begin)(tsafe_backend *b);
    tsafe_status (*graph_end)(tsafe_backend *b);
    tsafe_status (*graph_launch)(tsafe_backend *b);
    /* optional (3): out[i * n_pos + k] = coefficient pos[k] (< N, checked)
     * of limb i of the NTT-form polynomial at mem (n_limbs limbs), reduced,
     * leaving mem as it was; NULL = callers take the inverse NTT */
    tsafe_status (*ntt_read)(tsafe_backend *b, const void *mem, uint32_t n_limbs,
                             const uint32_t *pos, size_t n_pos, uint64_t *out);
    /* optional (4), BFV rings: n_jobs sealings in one call. Per job, with
     * pk (2 x L operand, NTT form): acc + NTT(r) (*) pk, inverse NTT, e1
     * added to c1, add[] to c0 at pos, the switch Q -> q0 (limb by limb as
     * mod_switch); c1 and c0 at pos land in the job's host arrays, fully
     * reduced, the words tsafe_bfv_seal gives for the same draws. The
     * accumulators are left unspecified. Returns when the outputs are
     * written. NULL = one tsafe_bfv_seal_buffer per job. */
    tsafe_status (*seal_batch)(tsafe_backend *b, const void *pk,
                               const tsafe_backend_seal_job *jobs, size_t n_jobs);
    /* optional (5), BFV rings: n ciphertexts into their buffers, c0 from
     * the job's words and c1 expanded from its seed by
     * tsafe_bfv_expand_a's rule (limb i: ChaCha20 with key = seed, nonce
     * = stream + i, block counter from 0; each candidate the next
     * ceil(bits_i / 8) bytes little-endian, masked to bits_i, kept when
     * below q_i), the words the host gives. May return with the work
     * queued (the host words are not read after it returns). NULL = c1
     * expanded on the host and uploaded. */
    tsafe_status (*ct_read)(tsafe_backend *b, const tsafe_backend_ct_job *jobs, size_t n,
                            uint64_t stream);
};

struct tsafe_backend {
    int api_version;
    const struct tsafe_backend_i *iface;
    void *ctx;                 /* backend-private state */
    const tsafe_context *he;   /* borrowed CKKS context, or NULL */
    const tsafe_bfv_context *bfv; /* borrowed BFV context, or NULL */
    const struct tsafe_ring_view *ring; /* the one of he or bfv */
    /* the core's, not the implementation's: where tsafe_bfv_ct_read_buffers
     * parses c0 before a ct_read call, kept between calls (a token's shares
     * are megabytes: a fresh allocation each call faulted its pages in) */
    uint64_t *read_scratch;
    size_t read_scratch_words;
};

struct tsafe_buffer {
    tsafe_backend *backend;
    void *mem;                 /* backend-owned memory */
    size_t n_polys;
    uint32_t n_limbs;
    int operand;               /* allocated by tsafe_buffer_alloc_operand */
    int borrowed;              /* mem belongs to another object (not freed) */
};

/* Context facts for backends: the primitive 2N-th root psi_i used by the
 * CPU NTT for prime i (so another backend's NTT values are identical), and
 * the NTT output order: forward NTT output index k holds the evaluation at
 * psi^(2*bitrev(k)+1) (bit-reversed order), inverse takes that order back to
 * natural coefficient order; all outputs fully reduced to [0, q). */
TSAFE_API uint64_t tsafe_context_psi(const tsafe_context *ctx, uint32_t i);
TSAFE_API uint32_t tsafe_context_log_n(const tsafe_context *ctx);

/* The same facts for the backend's ring (CKKS or BFV): log2 N, the prime
 * and psi of limb i < tsafe_backend_max_limbs (0 out of range). Backends
 * build their tables from these, never from the context's own type. */
TSAFE_API uint32_t tsafe_backend_log_n(const tsafe_backend *b);
TSAFE_API uint64_t tsafe_backend_prime(const tsafe_backend *b, uint32_t i);
TSAFE_API uint64_t tsafe_backend_psi(const tsafe_backend *b, uint32_t i);

/* Wrap a backend-private state into a backend handle after checking the
 * api_version; used by backend constructors. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_init(
    tsafe_backend **out, int api_version, const struct tsafe_backend_i *iface,
    void *state, const tsafe_context *he);
/* The same for a backend over an exact (BFV) context's ring. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_init_bfv(
    tsafe_backend **out, int api_version, const struct tsafe_backend_i *iface,
    void *state, const tsafe_bfv_context *bfv);

#ifdef __cplusplus
}
#endif
#endif
