/* The sealed server's state, shared by its files: server.c (state, keys,
 * backends), server_round1.c, server_round2.c; and the pieces of a round
 * that do no ring work (draws.c, masks.c, codec.c), which the host
 * reference of tests/reference/ calls too so that it differs from the
 * server only in how the ring work is done. */
#ifndef TSAFE_SEALED_SERVER_INTERNAL_H
#define TSAFE_SEALED_SERVER_INTERNAL_H

#include "sealed_internal.h"

#define TSAFE_SEALED_MAX_CHUNKS 256

/* ------------------------------------------------------------- draws.c */

/* The server's randomness: the CSPRNG, or (tests only,
 * tsafe_sealed_server_debug_seed) a stream derived from a seed so that two
 * servers given the same messages answer with the same bytes. */
typedef struct tsafe_sealed_draws {
    uint8_t seed[32];
    int seeded;
    uint64_t n;
} tsafe_sealed_draws;

/* The next sealing seed into out: NULL (the CSPRNG) unless seeded. */
const uint8_t *tsafe_sealed_next_seed(tsafe_sealed_draws *d, uint8_t out[32]);
/* n fresh uniform 64-bit masks. */
void tsafe_sealed_draw_masks(tsafe_sealed_draws *d, uint64_t *R, size_t n);
/* sealed-private: the output noise of one site into noise (d_out):
 * tsafe_sealed_draw_out_z (the rank Gaussians, in the draws' order) then
 * tsafe_sealed_out_noise (noise = round(B_q z), no draws: any thread). */
void tsafe_sealed_draw_out_noise(tsafe_sealed_draws *d, const tsafe_sealed_site *site,
                                 int64_t *noise);
void tsafe_sealed_draw_out_z(tsafe_sealed_draws *d, uint32_t rank, double *z);
void tsafe_sealed_out_noise(const tsafe_sealed_site *site, const double *z, int64_t *noise);
/* The sum of row[i] z[i] in doubles in a fixed order that eight vector
 * lanes keep: lane l sums the products i = l, l + 8, ... in turn, then
 * (s0 + s4) + (s2 + s6) ... as written in draws.c; every path computing
 * the output noise uses this order, so all give the same bits. */
double tsafe_sealed_row_dot(const int64_t *row, const double *z, uint32_t rank);

/* ------------------------------------------------------------- masks.c */

/* Round 1, block b of layout l: mask[k] = t/2 - R[b rows + k] mod t, so
 * that the client decrypts v = u + t/2 - R mod t (uniform). Returns the
 * block's reads. */
uint32_t tsafe_sealed_round1_masks(const tsafe_sealed_plan *p, const tsafe_sealed_layout *l,
                                   uint32_t b, const uint64_t *R, uint64_t *mask);
/* sealed-private: the constants C of u~ = f + C mod t2 (f the client's
 * read of round 1, t/2 - R + u / 2^k), from a site's masks R (rank
 * entries, then a checked plan's checks): C = R - t/2 mod t. */
void tsafe_sealed_round2_c(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                           const uint64_t *R, int64_t *C);
/* Round 2, block b: mask[k] = (B_q C + noise) mod t2 for the block's
 * reads (returned). */
uint32_t tsafe_sealed_round2_masks(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                                   uint32_t b, const int64_t *C, const int64_t *noise,
                                   uint64_t *mask);
/* The same masks with their output noise in one pass over the block's
 * rows of B_q: mask[k] = (B_q C + round(B_q z)) mod t2, the bits of
 * tsafe_sealed_out_noise then tsafe_sealed_round2_masks (B_q is read once,
 * not twice; eight entries of a row a step with AVX-512 when vector != 0
 * and the CPU has it -- test_sealed_properties compares the paths).
 * Returns the block's reads. */
uint32_t tsafe_sealed_round2_noise_masks(const tsafe_sealed_plan *p,
                                         const tsafe_sealed_site *site, uint32_t b,
                                         const int64_t *C, const double *z, uint64_t *mask,
                                         int vector);
/* sealed round 2: share v (< t, checked by the caller) and mask R -> the
 * signed u + n. */
int64_t tsafe_sealed_unmask(const tsafe_sealed_plan *p, uint64_t v, uint64_t R);

/* ------------------------------------------------------------ checks.c */

/* Round 1 of a checked plan: a site's w (its round-1 blocks x rows1
 * entries), each block's redrawn until sum K^2 <= KAPPA times its mean. */
#define TSAFE_SEALED_CHECK_KAPPA 1.6
void tsafe_sealed_draw_checks_w(tsafe_sealed_draws *d, const tsafe_sealed_plan *p,
                                uint32_t rank, int8_t *w);
/* W(X) of one block (its rows1 entries wb) as n coefficients. */
void tsafe_sealed_check_poly(const tsafe_sealed_plan *p, const int8_t *wb, int64_t *coeff,
                             size_t n);
/* Round 2: H (d_out x m) drawn from seed, each round-2 block's redrawn
 * until its H K is within the plan's bound, and M = [B_q - H K | H]
 * (d_out x (rank + m)). TSAFE_E_CRYPTO if no draw of 4096 fits. */
tsafe_status tsafe_sealed_fold_matrix(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                                      const uint8_t seed[32], const int32_t *K, int16_t *H,
                                      int64_t *M);
/* v = C_e - K C mod t2 (m entries): the fold's part of the masks. */
void tsafe_sealed_fold_constants(const tsafe_sealed_plan *p, uint32_t rank, const int32_t *K,
                                 const int64_t *C, uint64_t *v);
/* mask[k] += H_o v (mod t2) for block b's reads (o = b rows + k). */
void tsafe_sealed_fold_masks(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                             uint32_t b, const int16_t *H, const uint64_t *v, uint64_t *mask);

/* ------------------------------------------------------------- codec.c */

/* Upper bound on a message's bytes for these sites (sizes its buffer). */
size_t tsafe_sealed_message_bytes(const tsafe_sealed_plan *p,
                                  const tsafe_sealed_site *const *sites, size_t n_sites,
                                  uint8_t kind);
/* A sealed result of `reads` reads appended to w. */
tsafe_status tsafe_sealed_put_sealed(const tsafe_bfv_context *ctx, const tsafe_bfv_sealed *res,
                                     size_t reads, tsafe_wbuf *w);
/* Response 1's per-site header (rank, d_out, then in sealed mode scale_a). */
void tsafe_sealed_put_site1(tsafe_wbuf *w, const tsafe_sealed_plan *p,
                            const tsafe_sealed_site *site);
/* Response 2's per-site header (sealed-private): d_out, scale, exponents. */
void tsafe_sealed_put_site2(tsafe_wbuf *w, const tsafe_sealed_site *site);
/* The ciphertext count of a query (the tag already read) checked against
 * the plan. */
tsafe_status tsafe_sealed_get_chunks(tsafe_rbuf *r, const tsafe_sealed_plan *p);
/* A share-ciphertext site header (rank, count) checked against the site. */
tsafe_status tsafe_sealed_get_site2(tsafe_rbuf *r, const tsafe_sealed_site *site);

/* -------------------------------------------------------- seal_batch.c */

/* The sealings of a round are queued as the round writes its message
 * (seed drawn, positions and masks copied, bytes reserved in order) and
 * run at its end (tsafe_sealed_server_seal_flush): in one backend call
 * when the backend seals in batches (tsafe_bfv_sealer_batches: a GPU),
 * else over the threads of the server's pool when it has one: the bytes
 * are those of sealing in line, whatever thread sealed what. */
#define TSAFE_SEALED_MAX_SLOTS 15 /* extra threads a round's sealings use */
/* Round 2 (sealed-private) flushes once this many sealings are queued:
 * enough blocks to share over the threads, few accumulators held. */
#define TSAFE_SEALED_ROUND2_QUEUE 16
/* ... and on a backend that seals in batches (device memory, one call) */
#define TSAFE_SEALED_ROUND2_QUEUE_BATCHED 128

typedef struct {
    tsafe_buffer *acc;
    const uint64_t *host; /* acc's words (host backends), else NULL */
    size_t first;         /* its positions and masks at pos / mask + first */
    uint32_t reads;
    size_t off;           /* its bytes in the message */
    uint8_t seed[32];
    int seeded;           /* 0: the sealing draws from the CSPRNG */
} tsafe_sealed_seal_job;

/* What another thread seals with: its own backend (from the server's
 * factory), sealer, key operand and accumulator (a copy of the job's). */
typedef struct {
    tsafe_backend *be;
    tsafe_bfv_sealer *sealer;
    tsafe_buffer *pk, *acc;
    tsafe_bfv_sealed *res;
    uint64_t key_gen; /* pk is of the server's keys of that generation */
} tsafe_sealed_slot;

typedef struct {
    tsafe_sealed_seal_job *job;
    size_t n, cap;
    uint32_t *pos;
    uint64_t *mask; /* derived from R: as secret, wiped by the flush */
    size_t words, wcap;
    /* the round's ring (every queued job has the same) */
    int ring; /* 1 or 2 */
    const tsafe_bfv_context *ctx;
    tsafe_bfv_sealer *sealer;
    const tsafe_buffer *pk;
    tsafe_bfv_sealed *res;
    uint32_t flood;
    tsafe_sealed_slot slot[2][TSAFE_SEALED_MAX_SLOTS];
    /* a batching backend's results, one per queued job (per ring) */
    tsafe_bfv_sealed **bres[2];
    size_t n_bres[2];
} tsafe_sealed_sealq;

struct tsafe_sealed_server;
/* Runs the queued sealings into w's reserved bytes and empties the queue;
 * the first failure in queue order. */
tsafe_status tsafe_sealed_server_seal_flush(struct tsafe_sealed_server *s, tsafe_wbuf *w);
/* Queued job j's masks (its reads' words), to be written after queueing
 * and before the flush; valid until the next job is queued. */
uint64_t *tsafe_sealed_sealq_masks(tsafe_sealed_sealq *q, size_t j);
/* Frees the queue and the slots (their backends come from the factory). */
void tsafe_sealed_sealq_free(tsafe_sealed_sealq *q);
/* Drops the queued sealings (a failed round), their masks wiped. */
void tsafe_sealed_sealq_discard(tsafe_sealed_sealq *q);
/* Frees the slots' key operands (new keys). */
void tsafe_sealed_sealq_drop_keys(tsafe_sealed_sealq *q);

/* ------------------------------------------------------------ server.c */

struct tsafe_sealed_server {
    tsafe_sealed_plan plan;
    tsafe_bfv_context *c1, *c2;
    tsafe_bfv_public_key *pk1, *pk2;
    tsafe_sealed_tag tag;     /* session, epoch; seq = next expected */
    int have_session;
    int await_round2;         /* round 1 of tag.seq done, masks held */
    size_t n_sites;           /* of the pending token */
    tsafe_bfv_sealed *res, *res2;
    uint32_t *pos;
    uint64_t *mask;
    uint64_t *R;              /* per pending site: rank masks (flat) */
    size_t R_cap;
    int64_t *last_u;          /* sealed: u + n of the last round 2 (flat) */
    size_t *off;              /* site i's masks start at R + off[i] */

    /* The ring work runs on backends (one per round's ring) from the
     * host's factory (the CPU backend by default). */
    const tsafe_backend_factory *factory;
    tsafe_backend *be1, *be2;
    tsafe_bfv_sealer *sealer1, *sealer2;
    tsafe_buffer *pkb1, *pkb2;                          /* session keys as operands */
    tsafe_buffer *xb[TSAFE_SEALED_MAX_CHUNKS];          /* the query's chunks */
    tsafe_buffer **zb;                    /* round 2's share ciphertexts */
    size_t n_zb;
    tsafe_buffer **accs, **accs2;         /* one per block (round 1, 2) */
    size_t n_accs, n_accs2;
    tsafe_sealed_opcache cache;
    tsafe_sealed_draws draws;
    size_t seals1, seals2;                /* of the last token: refill targets */
    tsafe_cpu_pool *pool;                 /* borrowed: threads for the sealings */
    tsafe_sealed_sealq sealq;             /* the round's queued sealings */
    uint64_t key_gen;                     /* +1 at every new key operand */
    int64_t *C;                           /* sealed-private: round 2's
                                             constants (flat like R, as secret) */
    /* checked plans: the pending token's w (per site its round-1 blocks
     * x rows1, flat; secret like R), W(X) per block on be1, and round 2's
     * per-token plaintexts of [B_q - H K | H] on be2 */
    int8_t *W;
    size_t W_cap;
    tsafe_buffer **wb, **ptb;
    size_t n_wb, n_ptb;
};

/* Masks a site takes in round 1: its rank, then its checked reads. */
static inline uint32_t tsafe_sealed_site_reads1(const tsafe_sealed_plan *p,
                                                const tsafe_sealed_site *site)
{
    return site->rank + p->checks;
}

/* At least n buffers of polys x (every limb of b's ring) in *pool. */
tsafe_status tsafe_sealed_pool_reserve(tsafe_backend *b, tsafe_buffer ***pool, size_t *have,
                                       size_t n, size_t polys);
/* The sites of a round: present, of this server's plan. */
tsafe_status tsafe_sealed_server_check_sites(const tsafe_sealed_server *s,
                                             const tsafe_sealed_site *const *sites, size_t n);
/* Round 2 and its preparation: the sites of the pending round 1. */
tsafe_status tsafe_sealed_server_check_pending(const tsafe_sealed_server *s,
                                               const tsafe_sealed_site *const *sites, size_t n);
/* Room for `need` masks (and what derives from them). */
tsafe_status tsafe_sealed_server_reserve_R(tsafe_sealed_server *s, size_t need);
/* Wipes the pending token's masks and everything derived from them. */
void tsafe_sealed_server_wipe_masks(tsafe_sealed_server *s);
/* Queues the sealing of block b of layout l (reads at the block's rows,
 * masks in s->mask) from the backend accumulator acc, its bytes reserved
 * in w; the round runs tsafe_sealed_server_seal_flush before it returns.
 * acc must stay as it is until then. Queued job j's masks stay writable
 * (tsafe_sealed_sealq_masks) until the flush. */
tsafe_status tsafe_sealed_server_seal(tsafe_sealed_server *s, const tsafe_bfv_context *ctx,
                                      tsafe_bfv_sealer *sealer, tsafe_buffer *acc,
                                      const tsafe_buffer *pk, tsafe_bfv_sealed *res,
                                      const tsafe_sealed_layout *l, uint32_t b,
                                      uint32_t flood, tsafe_wbuf *w);

#endif
