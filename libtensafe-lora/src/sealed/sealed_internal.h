/* Sealed protocol internals shared by plan.c, site.c, client.c, server.c
 * and pair.c (libtensafe-lora/src/sealed). */
#ifndef TSAFE_SEALED_INTERNAL_H
#define TSAFE_SEALED_INTERNAL_H

#include <sodium.h>

#include "tensafe/bfv_backend.h"
#include "tensafe/lora_sealed.h"

/* v into a BLAKE2b state as 4 little-endian bytes (the plan fingerprint,
 * the rounding key's derivation: rounding.c). */
void tsafe_sealed_hash_u32(crypto_generichash_state *h, uint32_t v);

/* Coefficient layout of one sealed product: an input vector of length
 * len cut into chunks of `chunk`, an output of `outs` rows in blocks of
 * rows = N / chunk; row o of a block is read at o*chunk + chunk - 1. */
typedef struct tsafe_sealed_layout {
    uint32_t chunk, n_chunks;
    uint32_t rows, n_blocks;
    uint32_t outs;
} tsafe_sealed_layout;

void tsafe_sealed_layout_make(uint32_t n, uint32_t len, uint32_t chunk,
                              uint32_t outs, tsafe_sealed_layout *l);
/* Number of reads in block b and their positions (pos: rows entries). */
uint32_t tsafe_sealed_block_reads(const tsafe_sealed_layout *l, uint32_t b,
                                  uint32_t *pos);

/* Largest |value| of a signed b-bit quantized number: 2^(b-1) - 1. */
static inline int64_t tsafe_sealed_qmax(uint32_t bits)
{
    return ((int64_t)1 << (bits - 1)) - 1;
}

/* Coefficients of the plaintext for chunk c, block b of the matrix m
 * (outs x width, row-major): row o of the block holds row b*rows + o,
 * its entries for inputs c*chunk + j reversed (coefficient n entries). */
void tsafe_sealed_encode_block(const tsafe_sealed_layout *l, const int64_t *m,
                               uint32_t width, uint32_t c, uint32_t b,
                               int64_t *coeff, size_t n);

/* The L2 bound of the client's quantized x: ||x_q||_2 <= X2 = x_max
 * sqrt(d_in), so |u_i| <= ||A_q,i||_2 X2 <= a_max x_max d_in = the plan's
 * U (Cauchy-Schwarz). Both sides compute it with this one expression. */
static inline double tsafe_sealed_x2(const tsafe_sealed_plan *p)
{
    return (double)tsafe_sealed_qmax(p->x_bits) * __builtin_sqrt((double)p->d_in);
}

/* sealed-private output noise (THREAT_MODEL.md, "Lattice"): round 2 adds
 * round(B_q z) to the outputs, z a fresh Gaussian vector with one
 * coordinate per coordinate of u~ (clamped at TSAFE_SEALED_OUT_NOISE_TAIL
 * sd), so the client decrypts round(B_q (u~ + z)): u~ + z is no longer a
 * point of Z^r, and an sd of at least the smoothing parameter of Z^r
 * (eta_eps(Z^r) = sqrt(ln(2r(1 + 1/eps))/pi) as a Gaussian parameter;
 * tsafe_sealed_out_noise_sd, eps = 2^-40) hides which lattice point it came
 * from. It costs about as much as five more truncation roundings. The
 * plan reserves room for an sd up to TSAFE_SEALED_OUT_NOISE_SD. */
#define TSAFE_SEALED_OUT_NOISE_SD 1.5
#define TSAFE_SEALED_OUT_NOISE_TAIL 10.0
static inline double tsafe_sealed_out_noise_sd(uint32_t rank)
{
    const double pi = 3.14159265358979323846;
    return __builtin_sqrt(__builtin_log(2.0 * rank * (1.0 + 0x1p40)) / pi) / __builtin_sqrt(2 * pi);
}

/* sealed-private's noise bounds take the rows of A_q (round 1) and of B_q
 * (round 2) at a root mean square of at most a_max (b_max) /
 * TSAFE_SEALED_RMS_RATIO (site.c scales them so): trained weights are
 * near Gaussian (max/rms about 4 over a row), and the two bits this saves
 * in flooding go to a wider A and to u~'s precision. */
#define TSAFE_SEALED_RMS_RATIO 4.0

/* Default widths: the plan takes the pair of these whose error model is
 * smallest for its shapes, on the smallest ring with room (plan.c). A
 * up to 13 bits in sealed mode (its rows are bounded entry by entry), B
 * in sealed-private only. */
/* The precision the planner aims at (relative L2 of delta, its model):
 * it takes N = 8192 only when N = 4096 has no plan that models this. */
#define TSAFE_SEALED_TARGET_REL_ERROR 1e-3
#define TSAFE_SEALED_A_BITS_MIN 12u
#define TSAFE_SEALED_A_BITS_MAX 16u
#define TSAFE_SEALED_B_BITS_MIN 12u
#define TSAFE_SEALED_B_BITS_MAX 15u

/* The smallest shift a site may take in sealed-private: its round-1
 * plaintexts carry A_q 2^(K - k) (K = the plan's trunc_bits), at most
 * 2^TSAFE_SEALED_LIFT_MAX, which keeps them below the plaintexts' 2^40
 * (|A_q| <= 2^21: a_max sqrt(d_in) / RMS_RATIO) and inside the plan's
 * round-1 noise bound (plan.c). */
#define TSAFE_SEALED_LIFT_MAX 15u
static inline uint32_t tsafe_sealed_k_min(const tsafe_sealed_plan *p)
{
    return p->trunc_bits > TSAFE_SEALED_LIFT_MAX ? p->trunc_bits - TSAFE_SEALED_LIFT_MAX : 0;
}

/* Checked reads (plan.checks; sealed-private's default, opts.unchecked_shares
 * leaves them out; docs/PROTOCOL.md,
 * "Checked shares"). Round 1 multiplies each block's product by its own
 * fresh W(X) = sum_m w_m X^(m chunk1), w_m uniform in [-CHECK_G, CHECK_G),
 * sums them and reads rows 0..checks-1: check c is sum over the blocks of
 * sum_o K[c][o] u_o over the block's rows, K[c][o] = w_(c-o), or
 * -w_(c-o+rows1) when o > c (negacyclic: chunk1 divides N in a checked
 * plan, so a wrapped term lands on a read). Round 2 takes [f; f_e] (rank
 * + checks inputs) and applies [B_q - H K | H], H fresh with
 * entries uniform in [-2^h_bits, 2^h_bits): an honest client's checks
 * differ from K f by the reads' rounding only, an offset of the share
 * meets a fresh mask. Both ranges have an even number of values, so
 * their parities are uniform (the modular projection of
 * MALICIOUS_CLIENT.md works on parities). */
#define TSAFE_SEALED_CHECK_G 32
/* The size of H against B_q that the fold aims at: rho^2 = checks E[H^2]
 * E[w^2] / E[b^2] (a shifted read's mask over the entry it would read). */
#define TSAFE_SEALED_CHECK_RHO 1.5
/* The server redraws a token's H and w until every round-2 block's H K
 * (the B_q part) has a Frobenius norm of at most FRO times its expected
 * rms (tsafe_sealed_check_hk_rms) times sqrt(entries): the plan's noise
 * bound takes that, not the worst case (about 12 times larger). */
#define TSAFE_SEALED_CHECK_FRO 1.5
double tsafe_sealed_check_hk_rms(const tsafe_sealed_plan *p);
/* E[w^2] of w uniform in [-CHECK_G, CHECK_G). */
double tsafe_sealed_check_w_mean_square(void);
/* K[c][o] of one block (its rows1 entries wb; the sign of the negacyclic
 * wrap past its rows): w_(c-o), or -w_(c-o+rows1) when o > c. */
static inline int32_t tsafe_sealed_check_entry(const int8_t *wb, uint32_t rows1, uint32_t c,
                                               uint32_t o)
{
    return o <= c ? wb[c - o] : -wb[c + rows1 - o];
}
/* Layout of a site's checked result: the round-1 chunk, reads at rows
 * 0..checks-1 (one result a site). */
void tsafe_sealed_layout_checks(const tsafe_sealed_plan *p, tsafe_sealed_layout *l);
/* H's entries lie in [-2^h, 2^h): h for the plan's b_bits. */
uint32_t tsafe_sealed_check_h_bits(const tsafe_sealed_plan *p);
/* K (checks x rank, row-major) of a site from its blocks' w (rows1 each). */
void tsafe_sealed_check_matrix(const tsafe_sealed_plan *p, uint32_t rank, const int8_t *w,
                               int32_t *K);

/* Round-2 flooding bits for a site with d_out outputs. */
uint32_t tsafe_sealed_flood2(const tsafe_sealed_plan *p);
/* Layouts of a site's two products. */
void tsafe_sealed_layout1(const tsafe_sealed_plan *p, uint32_t rank,
                          tsafe_sealed_layout *l);
void tsafe_sealed_layout2(const tsafe_sealed_plan *p, uint32_t rank,
                          uint32_t d_out, tsafe_sealed_layout *l);
/* An upper bound on the bytes of one site's part of a message of this
 * kind (TSAFE_MSG_SEALED_*; for the query, whose part is shared, rank and
 * d_out are ignored), header and tag included: writers size their buffer
 * with it before they write. 0 for shapes the plan does not cover. */
size_t tsafe_sealed_part_bytes(const tsafe_sealed_plan *p, uint8_t kind,
                               uint32_t rank, uint32_t d_out);
/* BLAKE2b-256 of the plan's fields (carried by every hello). */
void tsafe_sealed_plan_fingerprint(const tsafe_sealed_plan *p, uint8_t out[32]);

/* A row exponent that marks a zero row of B_q: delta_j = 0 exactly. */
#define TSAFE_SEALED_ROW_ZERO 255u

struct tsafe_sealed_site {
    uint64_t id;               /* unique per process: keys backend caches */
    tsafe_sealed_plan plan;
    uint32_t rank, d_out;
    float scale;
    double scale_a;            /* sealed: A ~ scale_a * A_q (one per site:
                                  the client calibrates its DP noise by it) */
    double *row_scale;         /* sealed-private: row i of A ~ row_scale[i] A_q,i
                                  (kept by the server: never sent) */
    float *bprime;             /* rank x d_out (B transposed): scale * B * diag(row scales) */
    int64_t *bq;               /* d_out x rank quantized (sealed-private) */
    double scale_b;            /* sealed-private: row j of B' ~ scale_b 2^-row_exp[j] B_q,j */
    uint8_t *row_exp;          /* sealed-private: d_out exponents (<= 63, or
                                  TSAFE_SEALED_ROW_ZERO), sent */
    uint32_t trunc_bits;       /* sealed-private: k of this site, in [k_min, plan's] */
    tsafe_bfv_context *ctx1, *ctx2;
    int borrowed_ctx;          /* contexts belong to the caller (pair lane) */
    tsafe_bfv_plain **p1;      /* n_chunks1 x n_blocks1 */
    tsafe_bfv_plain **p2;      /* v-chunks x blocks (B_q, fixed) */
    tsafe_sealed_layout l1, l2;
};

/* tsafe_sealed_site_create on contexts the caller built for plan with
 * tsafe_sealed_contexts and keeps alive longer than the site (NULL c1:
 * the site builds its own). Saves the prime search per site. */
tsafe_status tsafe_sealed_site_build(const tsafe_sealed_plan *plan,
                                     const tsafe_bfv_context *c1,
                                     const tsafe_bfv_context *c2, const float *A,
                                     const float *B, uint32_t rank, uint32_t d_out,
                                     float scale, tsafe_sealed_site **out);

/* w[d_out * rank]: the offsets of B_q's stochastic rounding, uniform in
 * [0, 1), from a stream keyed by the process's rounding key and seeded
 * by the adapter's inputs (rounding.c). */
tsafe_status tsafe_sealed_rounding_offsets(const float *A, const float *B, uint32_t rank,
                                           uint32_t d_in, uint32_t d_out, float scale,
                                           double *w);

/* A site's plaintexts as operand buffers on a server's backends, cached by
 * site id (an address may be reused after a free; an id never is). On the
 * CPU backend the buffers borrow the site's storage, so an entry must not
 * be used after its site is freed -- its id then never matches again. */
typedef struct tsafe_sealed_operands {
    uint64_t site_id;          /* 0: empty */
    uint64_t last_use;
    size_t n1, n2;
    tsafe_buffer **o1, **o2;   /* round 1 (p1), round 2 (p2) */
} tsafe_sealed_operands;

#define TSAFE_SEALED_OPERAND_CACHE 64

typedef struct tsafe_sealed_opcache {
    tsafe_sealed_operands e[TSAFE_SEALED_OPERAND_CACHE];
    uint64_t clock;
} tsafe_sealed_opcache;

/* The site's operands on b1 (round 1) and b2 (round 2, NULL in sealed
 * mode), built on first use; the least recently used entry makes room. */
tsafe_status tsafe_sealed_opcache_get(tsafe_sealed_opcache *c, tsafe_backend *b1,
                                      tsafe_backend *b2, const tsafe_sealed_site *site,
                                      const tsafe_sealed_operands **out);
void tsafe_sealed_opcache_clear(tsafe_sealed_opcache *c);

/* Tests only: derive the server's masks and sealing randomness from seed
 * (32 bytes) so that two servers given the same messages answer with the
 * same bytes (the direct and backend paths are compared that way). NULL
 * returns to the CSPRNG. Never for deployment: masks must be unpredictable. */
void tsafe_sealed_server_debug_seed(tsafe_sealed_server *s, const uint8_t *seed);

/* Tests only (white-box wipe checks): the server's buffers that hold its
 * masks or what derives from them, as (name, address, bytes); returns how
 * many were written to out (at most max). The addresses are borrowed. */
typedef struct tsafe_sealed_secret {
    const char *name;
    const void *p;
    size_t bytes;
} tsafe_sealed_secret;
size_t tsafe_sealed_server_secrets_(const tsafe_sealed_server *s, tsafe_sealed_secret *out,
                                    size_t max);

/* The protocol's contexts for a plan (round 2 NULL in sealed mode). */
tsafe_status tsafe_sealed_contexts(const tsafe_sealed_plan *p,
                                   tsafe_bfv_context **c1,
                                   tsafe_bfv_context **c2);

/* Common message prefix after the header: session id, key epoch, token
 * sequence number. */
typedef struct tsafe_sealed_tag {
    uint8_t session[TSAFE_SEALED_SESSION_BYTES];
    uint32_t epoch;
    uint64_t seq;
} tsafe_sealed_tag;

/* The client (here, not in client.c, so that white-box attack tests read
 * its key the way a curious client would). States of a token: */
enum { IDLE = 0, QUERIED = 1, RESPONDED = 2, FAILED = 3 };

struct tsafe_sealed_client {
    tsafe_sealed_plan plan;
    tsafe_bfv_context *c1, *c2;
    tsafe_bfv_secret_key *sk1, *sk2;
    tsafe_bfv_public_key *pk1, *pk2;
    tsafe_sealed_tag tag;
    uint32_t tokens;        /* finished under the current key */
    int needs_hello;
    int state;
    size_t n_sites;         /* of the pending token */
    double sx;              /* x ~ sx * x_q (never leaves the client) */
    int64_t *xq;            /* d_in; holds x: wiped */
    int64_t *z;             /* N scratch; holds shares: wiped */
    uint64_t *m;            /* N decrypted values: wiped */
    uint32_t *pos;
    tsafe_bfv_ct *ct1, *ct2;
    tsafe_bfv_sealed *res1, *res2;
};

/* Message framing shared by client and server. */
#include "../wire/wire.h"
void tsafe_sealed_put_tag(tsafe_wbuf *w, const tsafe_sealed_tag *t);
/* Reads the tag and refuses (TSAFE_E_REPLAY) one that is not `want`. */
tsafe_status tsafe_sealed_get_tag(tsafe_rbuf *r, const tsafe_sealed_tag *want);

#endif
