/* Sealed server: holds the client's public keys and reads sites; never a
 * secret key. Round 1 answers a query with masked, re-randomised, flooded
 * products; round 2 turns the client's shares into the deltas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sealed_internal.h"
#include "tsafe_check.h"

#define MAX_CHUNKS 256

struct tsafe_sealed_server {
    tsafe_sealed_plan plan;
    tsafe_bfv_context *c1, *c2;
    tsafe_bfv_public_key *pk1, *pk2;
    tsafe_sealed_tag tag;     /* session, epoch; seq = next expected */
    int have_session;
    int await_round2;         /* round 1 of tag.seq done, masks held */
    size_t n_sites;           /* of the pending token */
    tsafe_bfv_ct *x[MAX_CHUNKS];
    tsafe_bfv_ct *z[2 * MAX_CHUNKS];
    tsafe_bfv_acc *acc, *acc2;
    tsafe_bfv_sealed *res, *res2;
    uint32_t *pos;
    uint64_t *mask;
    uint64_t *R;              /* per pending site: rank masks (flat) */
    size_t R_cap;
    int64_t *last_u;          /* sealed: u + n of the last round 2 (flat) */
    size_t *off;              /* site i's masks start at R + off[i] */
    int64_t *coeff, *colsel;  /* round-2 per-token plaintext scratch */
    int64_t *noise;           /* round-2 output noise of one site (d_out_max) */

    /* The ring work runs on backends (one per round's ring) from the
     * host's factory; `direct` keeps the pre-backend calls for tests and
     * the overhead benchmark. */
    const tsafe_backend_factory *factory;
    int direct;
    tsafe_backend *be1, *be2;
    tsafe_bfv_sealer *sealer1, *sealer2;
    tsafe_buffer *pkb1, *pkb2;            /* session keys as operands */
    tsafe_buffer *xb[MAX_CHUNKS];         /* the query's chunks */
    tsafe_buffer *zb[2 * MAX_CHUNKS];     /* round 2's ciphertexts */
    tsafe_buffer **accs, **accs2;         /* one per block (round 1, 2) */
    size_t n_accs, n_accs2;
    tsafe_buffer **band;                  /* per-token round-2 plaintexts */
    size_t n_band;
    tsafe_sealed_opcache cache;
    uint8_t seed[32];                     /* tests: tsafe_sealed_server_debug_seed */
    int seeded;
    uint64_t draws;
    size_t seals1, seals2;                /* of the last token: refill targets */

    /* Round 2 prepared while the client answers round 1
     * (tsafe_sealed_server_prepare_round2, backend path): per coordinate
     * the band bit and C (flat like R, and as secret), per site its first
     * band plaintext in `band`; round 2 uses them only for the same sites. */
    uint8_t *pband;
    int64_t *pC;
    size_t *pfirst;
    const tsafe_sealed_site **psites;
    int prepared;
};

/* ------------------------------------------------------------ backends */

static void pool_free(tsafe_buffer **p, size_t n)
{
    for (size_t i = 0; p && i < n; i++)
        tsafe_buffer_free(p[i]);
    free(p);
}

static void backend_teardown(tsafe_sealed_server *s)
{
    tsafe_sealed_opcache_clear(&s->cache);
    pool_free(s->accs, s->n_accs);
    pool_free(s->accs2, s->n_accs2);
    pool_free(s->band, s->n_band);
    s->accs = s->accs2 = s->band = NULL;
    s->n_accs = s->n_accs2 = s->n_band = 0;
    for (size_t i = 0; i < MAX_CHUNKS; i++)
        tsafe_buffer_free(s->xb[i]);
    for (size_t i = 0; i < 2 * MAX_CHUNKS; i++)
        tsafe_buffer_free(s->zb[i]);
    memset(s->xb, 0, sizeof s->xb);
    memset(s->zb, 0, sizeof s->zb);
    tsafe_buffer_free(s->pkb1);
    tsafe_buffer_free(s->pkb2);
    s->pkb1 = s->pkb2 = NULL;
    tsafe_bfv_sealer_free(s->sealer1);
    tsafe_bfv_sealer_free(s->sealer2);
    s->sealer1 = s->sealer2 = NULL;
    tsafe_backend_free(s->be1);
    tsafe_backend_free(s->be2);
    s->be1 = s->be2 = NULL;
}

/* The session's public keys as operands (after accept or a new backend). */
static tsafe_status backend_keys(tsafe_sealed_server *s)
{
    /* prepared encryptions of zero belong to the old keys (a new buffer
     * may land at the old address, so do not rely on the pointer check) */
    tsafe_bfv_sealer_drop(s->sealer1);
    tsafe_bfv_sealer_drop(s->sealer2);
    tsafe_buffer_free(s->pkb1);
    tsafe_buffer_free(s->pkb2);
    s->pkb1 = s->pkb2 = NULL;
    tsafe_status st = TSAFE_OK;
    if (s->pk1)
        st = tsafe_bfv_public_key_operand(s->pk1, s->be1, &s->pkb1);
    if (st == TSAFE_OK && s->pk2)
        st = tsafe_bfv_public_key_operand(s->pk2, s->be2, &s->pkb2);
    return st;
}

static tsafe_status backend_setup(tsafe_sealed_server *s)
{
    tsafe_status st;
    TSAFE_TRY(tsafe_backend_create(s->factory, NULL, s->c1, &s->be1));
    TSAFE_TRY(tsafe_bfv_sealer_create(s->c1, s->be1, &s->sealer1));
    for (uint32_t i = 0; i < s->plan.n_chunks1; i++)
        TSAFE_TRY(tsafe_buffer_alloc(s->be1, 2, tsafe_bfv_context_limbs(s->c1), &s->xb[i]));
    if (s->c2) {
        tsafe_sealed_layout l2;
        tsafe_sealed_layout2(&s->plan, s->plan.rank, s->plan.d_out_max, &l2);
        TSAFE_TRY(tsafe_backend_create(s->factory, NULL, s->c2, &s->be2));
        TSAFE_TRY(tsafe_bfv_sealer_create(s->c2, s->be2, &s->sealer2));
        for (uint32_t i = 0; i < 2 * l2.n_chunks; i++)
            TSAFE_TRY(tsafe_buffer_alloc(s->be2, 2, tsafe_bfv_context_limbs(s->c2), &s->zb[i]));
    }
    TSAFE_TRY(backend_keys(s));
    return TSAFE_OK;
fail:
    backend_teardown(s);
    return st;
}

/* Upper bound on a message's bytes for these sites (sizes its buffer). */
static size_t message_bytes(const tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                            size_t n_sites, uint8_t kind)
{
    size_t want = 0;
    for (size_t i = 0; i < n_sites; i++)
        want += tsafe_sealed_part_bytes(&s->plan, kind, sites[i]->rank, sites[i]->d_out);
    return want;
}

/* At least n buffers of polys x (every limb of b's ring) in *pool
 * (accumulators, or the per-token plaintexts: used once, no operands). */
static tsafe_status pool_reserve(tsafe_backend *b, tsafe_buffer ***pool, size_t *have,
                                 size_t n, size_t polys)
{
    if (n <= *have)
        return TSAFE_OK;
    tsafe_buffer **p = realloc(*pool, n * sizeof *p);
    if (!p)
        return TSAFE_E_NOMEM;
    *pool = p;
    for (; *have < n; (*have)++) {
        tsafe_status st = tsafe_buffer_alloc(b, polys, tsafe_backend_max_limbs(b), &p[*have]);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_server_use_backend(tsafe_sealed_server *s,
                                             const tsafe_backend_factory *f)
{
    TSAFE_REQUIRE(s, TSAFE_E_NULL);
    const tsafe_backend_factory *old = s->factory;
    backend_teardown(s);
    s->factory = f;
    tsafe_status st = backend_setup(s);
    if (st != TSAFE_OK) { /* fall back to what worked before */
        s->factory = old;
        if (backend_setup(s) != TSAFE_OK)
            s->direct = 1; /* no backend at all: the direct path still answers */
    }
    return st;
}

tsafe_status tsafe_sealed_server_set_direct(tsafe_sealed_server *s, int on)
{
    TSAFE_REQUIRE(s, TSAFE_E_NULL);
    TSAFE_REQUIRE(on || s->be1, TSAFE_E_STATE);
    s->direct = on != 0;
    return TSAFE_OK;
}

const char *tsafe_sealed_server_backend_name(const tsafe_sealed_server *s)
{
    return !s ? "none" : s->direct ? "direct" : tsafe_backend_name(s->be1);
}

void tsafe_sealed_server_debug_seed(tsafe_sealed_server *s, const uint8_t *seed)
{
    if (!s)
        return;
    s->seeded = seed != NULL;
    if (seed)
        memcpy(s->seed, seed, 32);
    s->draws = 0;
}

/* The next sealing seed: NULL (the CSPRNG) unless a test seeded us. */
static const uint8_t *next_seed(tsafe_sealed_server *s, uint8_t out[32])
{
    if (!s->seeded)
        return NULL;
    uint8_t ctr[8];
    for (int i = 0; i < 8; i++)
        ctr[i] = (uint8_t)(s->draws >> (8 * i));
    s->draws++;
    crypto_generichash(out, 32, ctr, sizeof ctr, s->seed, 32);
    return out;
}

/* Fresh uniform masks (R). */
static void draw_masks(tsafe_sealed_server *s, uint64_t *R, size_t n)
{
    if (!s->seeded) {
        randombytes_buf(R, n * sizeof *R);
        return;
    }
    uint8_t k[32];
    next_seed(s, k);
    randombytes_buf_deterministic(R, n * sizeof *R, k);
}

/* The output noise of one site (sealed_internal.h): noise[j] =
 * round(sum_i B_q[j][i] z_i), z_i Gaussian of sd
 * tsafe_sealed_out_noise_sd(rank) clamped at TSAFE_SEALED_OUT_NOISE_TAIL
 * sd (Box-Muller on 53-bit uniforms from the CSPRNG, or the test seed).
 * It smooths the lattice of the outputs and is not a DP mechanism: any sd
 * at least the smoothing parameter serves, so the sampler's float
 * rounding does not matter. A zero B gives zero noise (delta = 0). */
static void draw_out_noise(tsafe_sealed_server *s, const tsafe_sealed_site *site)
{
    uint32_t rank = site->rank;
    uint64_t u[1026];
    double z[1026];
    draw_masks(s, u, rank + 1);
    double sd = tsafe_sealed_out_noise_sd(rank), lim = TSAFE_SEALED_OUT_NOISE_TAIL * sd;
    for (uint32_t i = 0; i < rank; i += 2) {
        double a = ((double)(u[i] >> 11) + 1) * 0x1p-53; /* (0, 1] */
        double b = (double)(u[i + 1] >> 11) * 0x1p-53;
        double rad = sd * sqrt(-2 * log(a));
        z[i] = fmin(fmax(rad * cos(2 * M_PI * b), -lim), lim);
        z[i + 1] = fmin(fmax(rad * sin(2 * M_PI * b), -lim), lim);
    }
    for (uint32_t j = 0; j < site->d_out; j++) {
        const int64_t *row = site->bq + (size_t)j * rank;
        double acc = 0;
        for (uint32_t i = 0; i < rank; i++)
            acc += (double)row[i] * z[i];
        s->noise[j] = (int64_t)llround(acc);
    }
    sodium_memzero(u, sizeof u);
    sodium_memzero(z, sizeof z);
}

tsafe_status tsafe_sealed_server_refill(tsafe_sealed_server *s, tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(s, TSAFE_E_NULL);
    if (s->direct || !s->have_session || !s->pkb1)
        return TSAFE_OK; /* nothing to prepare for */
    double t0 = tsafe_lora_now_us();
    uint8_t sd[32];
    tsafe_status st = tsafe_bfv_sealer_prepare(s->sealer1, s->pkb1, s->seals1,
                                               next_seed(s, sd));
    if (st == TSAFE_OK && s->sealer2 && s->pkb2)
        st = tsafe_bfv_sealer_prepare(s->sealer2, s->pkb2, s->seals2, next_seed(s, sd));
    if (stats)
        stats->offline_us += tsafe_lora_now_us() - t0;
    return st;
}

/* The pending token's masks and what was derived from them (C and the
 * band of a prepared round 2) are as secret as R: wiped together. */
static void wipe_masks(tsafe_sealed_server *s)
{
    if (s->R)
        sodium_memzero(s->R, s->R_cap * sizeof *s->R);
    if (s->pC)
        sodium_memzero(s->pC, s->R_cap * sizeof *s->pC);
    if (s->pband)
        sodium_memzero(s->pband, s->R_cap);
    /* the last block's sealing masks (t/2 - R, then B_q C) and the band's
     * columns of B_q with their encoding: all derived from R */
    size_t n = (size_t)1 << s->plan.r1.log_n; /* not c1's: freed before this at free */
    if (s->mask)
        sodium_memzero(s->mask, n * sizeof *s->mask);
    if (s->colsel)
        sodium_memzero(s->colsel, (size_t)s->plan.d_out_max * s->plan.rank * sizeof *s->colsel);
    if (s->coeff)
        sodium_memzero(s->coeff, n * sizeof *s->coeff);
    if (s->noise)
        sodium_memzero(s->noise, s->plan.d_out_max * sizeof *s->noise);
}

void tsafe_sealed_server_free(tsafe_sealed_server *s)
{
    if (!s)
        return;
    wipe_masks(s);
    if (s->last_u) /* sealed: u + n, kept for tsafe_sealed_server_last_u */
        sodium_memzero(s->last_u, s->R_cap * sizeof *s->last_u);
    backend_teardown(s);
    for (size_t i = 0; i < MAX_CHUNKS; i++)
        tsafe_bfv_ct_free(s->x[i]);
    for (size_t i = 0; i < 2 * MAX_CHUNKS; i++)
        tsafe_bfv_ct_free(s->z[i]);
    tsafe_bfv_acc_free(s->acc);
    tsafe_bfv_acc_free(s->acc2);
    tsafe_bfv_sealed_free(s->res);
    tsafe_bfv_sealed_free(s->res2);
    tsafe_bfv_public_key_free(s->pk1);
    tsafe_bfv_public_key_free(s->pk2);
    tsafe_bfv_context_free(s->c1);
    tsafe_bfv_context_free(s->c2);
    free(s->R);
    free(s->pC);
    free(s->pband);
    free(s->pfirst);
    free(s->psites);
    free(s->last_u);
    free(s->off);
    free(s->pos);
    free(s->mask);
    free(s->coeff);
    free(s->colsel);
    free(s->noise);
    free(s);
}

tsafe_status tsafe_sealed_server_create(const tsafe_sealed_plan *plan,
                                        tsafe_sealed_server **out)
{
    TSAFE_REQUIRE(plan && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_status st = tsafe_sealed_plan_check(plan);
    if (st != TSAFE_OK)
        return st;
    tsafe_sealed_server *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    s->plan = *plan;
    TSAFE_TRY(tsafe_sealed_contexts(plan, &s->c1, &s->c2));
    size_t n = tsafe_bfv_context_n(s->c1);
    TSAFE_CHECK(plan->n_chunks1 <= MAX_CHUNKS, TSAFE_E_RANGE);
    for (uint32_t i = 0; i < plan->n_chunks1; i++)
        TSAFE_TRY(tsafe_bfv_ct_create(s->c1, &s->x[i]));
    TSAFE_TRY(tsafe_bfv_acc_create(s->c1, &s->acc));
    TSAFE_TRY(tsafe_bfv_sealed_create(s->c1, n, &s->res));
    s->pos = malloc(n * sizeof *s->pos);
    s->mask = malloc(n * sizeof *s->mask);
    s->off = calloc(TSAFE_MSG_MAX_SITES + 1, sizeof *s->off);
    TSAFE_CHECK(s->pos && s->mask && s->off, TSAFE_E_NOMEM);
    if (plan->mode == TSAFE_SEALED_PRIVATE) {
        tsafe_sealed_layout l2;
        tsafe_sealed_layout2(plan, plan->rank, plan->d_out_max, &l2);
        TSAFE_CHECK(l2.n_chunks <= MAX_CHUNKS, TSAFE_E_RANGE);
        for (uint32_t i = 0; i < 2 * l2.n_chunks; i++)
            TSAFE_TRY(tsafe_bfv_ct_create(s->c2, &s->z[i]));
        TSAFE_TRY(tsafe_bfv_acc_create(s->c2, &s->acc2));
        TSAFE_TRY(tsafe_bfv_sealed_create(s->c2, n, &s->res2));
        s->coeff = malloc(n * sizeof *s->coeff);
        s->colsel = malloc((size_t)plan->d_out_max * plan->rank * sizeof *s->colsel);
        s->noise = malloc((size_t)plan->d_out_max * sizeof *s->noise);
        s->pfirst = calloc(TSAFE_MSG_MAX_SITES, sizeof *s->pfirst);
        s->psites = calloc(TSAFE_MSG_MAX_SITES, sizeof *s->psites);
        TSAFE_CHECK(s->coeff && s->colsel && s->noise && s->pfirst && s->psites, TSAFE_E_NOMEM);
    }
    TSAFE_TRY(backend_setup(s)); /* the CPU backend until the host picks one */
    *out = s;
    return TSAFE_OK;
fail:
    tsafe_sealed_server_free(s);
    return st;
}

tsafe_status tsafe_sealed_server_accept(tsafe_sealed_server *s,
                                        const uint8_t *hello, size_t len)
{
    TSAFE_REQUIRE(s && hello, TSAFE_E_NULL);
    tsafe_rbuf r = {hello, len, 0};
    tsafe_status st = tsafe_rbuf_header(&r, TSAFE_MSG_SEALED_HELLO);
    if (st != TSAFE_OK)
        return st;
    const uint8_t *fp, *sess, *k1, *k2 = NULL;
    uint32_t epoch;
    uint8_t mine[32];
    if (!(fp = tsafe_rbuf_take(&r, 32)) || !(sess = tsafe_rbuf_take(&r, TSAFE_SEALED_SESSION_BYTES)) ||
        !tsafe_rbuf_u32(&r, &epoch))
        return TSAFE_E_TRUNCATED;
    tsafe_sealed_plan_fingerprint(&s->plan, mine);
    if (sodium_memcmp(fp, mine, 32) != 0)
        return TSAFE_E_PARAMS_MISMATCH;
    size_t l1 = tsafe_bfv_public_key_bytes(s->c1);
    size_t l2 = s->c2 ? tsafe_bfv_public_key_bytes(s->c2) : 0;
    if (!(k1 = tsafe_rbuf_take(&r, l1)) || (s->c2 && !(k2 = tsafe_rbuf_take(&r, l2))))
        return TSAFE_E_TRUNCATED;
    if (r.pos != len)
        return TSAFE_E_FORMAT;
    /* a re-key of the current session must move to a later epoch */
    if (s->have_session && memcmp(sess, s->tag.session, TSAFE_SEALED_SESSION_BYTES) == 0 &&
        epoch <= s->tag.epoch)
        return TSAFE_E_REPLAY;
    tsafe_bfv_public_key *p1 = NULL, *p2 = NULL;
    if ((st = tsafe_bfv_public_key_read(s->c1, k1, l1, &p1)) != TSAFE_OK)
        return st;
    if (s->c2 && (st = tsafe_bfv_public_key_read(s->c2, k2, l2, &p2)) != TSAFE_OK) {
        tsafe_bfv_public_key_free(p1);
        return st;
    }
    tsafe_bfv_public_key_free(s->pk1);
    tsafe_bfv_public_key_free(s->pk2);
    s->pk1 = p1;
    s->pk2 = p2;
    if (s->be1 && (st = backend_keys(s)) != TSAFE_OK) {
        s->have_session = 0; /* no half-installed session */
        return st;
    }
    memcpy(s->tag.session, sess, TSAFE_SEALED_SESSION_BYTES);
    s->tag.epoch = epoch;
    s->tag.seq = 0;
    s->have_session = 1;
    s->await_round2 = 0;
    return TSAFE_OK;
}

static tsafe_status check_sites(const tsafe_sealed_server *s,
                                const tsafe_sealed_site *const *sites, size_t n)
{
    TSAFE_REQUIRE(sites, TSAFE_E_NULL);
    TSAFE_REQUIRE(n >= 1 && n <= TSAFE_MSG_MAX_SITES, TSAFE_E_RANGE);
    uint8_t a[32], b[32];
    tsafe_sealed_plan_fingerprint(&s->plan, a);
    for (size_t i = 0; i < n; i++) {
        TSAFE_REQUIRE(sites[i], TSAFE_E_NULL);
        tsafe_sealed_plan_fingerprint(&sites[i]->plan, b);
        TSAFE_REQUIRE(memcmp(a, b, 32) == 0, TSAFE_E_PARAMS_MISMATCH);
    }
    return TSAFE_OK;
}

/* Round 2 and its preparation: the sites of the pending round 1, whose
 * ranks laid out its masks (s->off). */
static tsafe_status check_pending(const tsafe_sealed_server *s,
                                  const tsafe_sealed_site *const *sites, size_t n)
{
    tsafe_status st = check_sites(s, sites, n);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(s->have_session && s->await_round2, TSAFE_E_STATE);
    TSAFE_REQUIRE(n == s->n_sites, TSAFE_E_RANGE);
    for (size_t i = 0; i < n; i++)
        TSAFE_REQUIRE(sites[i]->rank == s->off[i + 1] - s->off[i], TSAFE_E_RANGE);
    return TSAFE_OK;
}

static tsafe_status reserve_R(tsafe_sealed_server *s, size_t need)
{
    if (need <= s->R_cap)
        return TSAFE_OK;
    wipe_masks(s);
    free(s->R);
    free(s->pC);
    free(s->pband);
    free(s->last_u);
    s->R = malloc(need * sizeof *s->R);
    s->last_u = calloc(need, sizeof *s->last_u);
    int priv = s->plan.mode == TSAFE_SEALED_PRIVATE;
    s->pC = priv ? malloc(need * sizeof *s->pC) : NULL;
    s->pband = priv ? malloc(need) : NULL;
    s->R_cap = s->R && s->last_u && (!priv || (s->pC && s->pband)) ? need : 0;
    return s->R_cap ? TSAFE_OK : TSAFE_E_NOMEM;
}

/* Write a sealed result for n_reads reads into w. */
static tsafe_status put_sealed(const tsafe_bfv_context *ctx, const tsafe_bfv_sealed *res,
                               size_t reads, tsafe_wbuf *w)
{
    size_t need = tsafe_bfv_sealed_bytes(ctx, reads);
    uint8_t *p = tsafe_wbuf_reserve(w, need);
    if (!p)
        return TSAFE_E_NOMEM;
    return tsafe_bfv_sealed_write(ctx, res, p, need);
}

/* Seal block b of layout l (reads at the block's rows, masks in s->mask)
 * into w: the direct accumulator, or a backend accumulator. */
static tsafe_status seal_block(tsafe_sealed_server *s, const tsafe_bfv_context *ctx,
                               tsafe_bfv_acc *acc, const tsafe_bfv_public_key *pk,
                               tsafe_bfv_sealed *res, const tsafe_sealed_layout *l,
                               uint32_t b, uint32_t flood, tsafe_wbuf *w)
{
    uint8_t sd[32];
    uint32_t reads = tsafe_sealed_block_reads(l, b, s->pos);
    tsafe_status st = tsafe_bfv_seal(ctx, acc, pk, s->pos, s->mask, reads, flood,
                                     next_seed(s, sd), res);
    return st == TSAFE_OK ? put_sealed(ctx, res, reads, w) : st;
}

static tsafe_status seal_block_on(tsafe_sealed_server *s, const tsafe_bfv_context *ctx,
                                  tsafe_bfv_sealer *sealer, tsafe_buffer *acc,
                                  const tsafe_buffer *pk, tsafe_bfv_sealed *res,
                                  const tsafe_sealed_layout *l, uint32_t b,
                                  uint32_t flood, tsafe_wbuf *w)
{
    uint8_t sd[32];
    uint32_t reads = tsafe_sealed_block_reads(l, b, s->pos);
    tsafe_status st = tsafe_bfv_seal_buffer(sealer, acc, pk, s->pos, s->mask, reads,
                                            flood, next_seed(s, sd), res);
    return st == TSAFE_OK ? put_sealed(ctx, res, reads, w) : st;
}

/* Round 1's products on the backend: every block of every site is one job
 * of one tsafe_backend_mul_acc call (the batched entry point); accs[j] is
 * block j in site-major order. */
static tsafe_status round1_products(tsafe_sealed_server *s,
                                    const tsafe_sealed_site *const *sites,
                                    size_t n_sites, const tsafe_sealed_operands **ops)
{
    size_t jobs = 0;
    for (size_t i = 0; i < n_sites; i++)
        jobs += sites[i]->l1.n_blocks;
    tsafe_status st = pool_reserve(s->be1, &s->accs, &s->n_accs, jobs, 2);
    if (st != TSAFE_OK)
        return st;
    uint32_t nc = s->plan.n_chunks1;
    tsafe_backend_mac *job = malloc(jobs * sizeof *job);
    const tsafe_buffer **terms = malloc(2 * jobs * nc * sizeof *terms);
    if (!job || !terms) {
        free(job);
        free(terms);
        return TSAFE_E_NOMEM;
    }
    size_t j = 0;
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        const tsafe_sealed_layout *l = &sites[i]->l1;
        for (uint32_t b = 0; b < l->n_blocks && st == TSAFE_OK; b++, j++) {
            const tsafe_buffer **a = terms + 2 * j * nc, **w = a + nc;
            for (uint32_t c = 0; c < l->n_chunks; c++) {
                a[c] = s->xb[c];
                w[c] = ops[i]->o1[(size_t)c * l->n_blocks + b];
            }
            job[j] = (tsafe_backend_mac){s->accs[j], l->n_chunks, a, w, 1};
        }
    }
    if (st == TSAFE_OK)
        st = tsafe_backend_mul_acc(s->be1, job, jobs);
    free(job);
    free(terms);
    return st;
}

static tsafe_status round1(tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                           size_t n_sites, const uint8_t *query, size_t len,
                           uint8_t **response, size_t *out_len, tsafe_lora_stats *stats);
tsafe_status tsafe_sealed_server_round1(tsafe_sealed_server *s,
                                        const tsafe_sealed_site *const *sites,
                                        size_t n_sites, const uint8_t *query,
                                        size_t len, uint8_t **response,
                                        size_t *out_len, tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(s && query && response && out_len, TSAFE_E_NULL);
    *response = NULL;
    *out_len = 0;
    tsafe_status st = check_sites(s, sites, n_sites);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(s->have_session, TSAFE_E_STATE);
    /* one query per sequence number: while its round 2 is pending, the
     * same query again is a replay (a fresh one would carry seq + 1) */
    TSAFE_REQUIRE(!s->await_round2, TSAFE_E_REPLAY);
    st = round1(s, sites, n_sites, query, len, response, out_len, stats);
    if (st != TSAFE_OK) /* no token pending; the session stays (round 2 ends it) */
        wipe_masks(s);
    return st;
}

static tsafe_status round1(tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                           size_t n_sites, const uint8_t *query, size_t len,
                           uint8_t **response, size_t *out_len, tsafe_lora_stats *stats)
{
    tsafe_status st;
    double t0 = tsafe_lora_now_us();
    tsafe_rbuf r = {query, len, 0};
    if ((st = tsafe_rbuf_header(&r, TSAFE_MSG_SEALED_QUERY)) != TSAFE_OK ||
        (st = tsafe_sealed_get_tag(&r, &s->tag)) != TSAFE_OK)
        return st;
    uint32_t nc;
    if (!tsafe_rbuf_u32(&r, &nc))
        return TSAFE_E_TRUNCATED;
    if (nc != s->plan.n_chunks1)
        return TSAFE_E_FORMAT;
    size_t ctl = tsafe_bfv_ct_bytes(s->c1);
    for (uint32_t c = 0; c < nc; c++) {
        const uint8_t *p = tsafe_rbuf_take(&r, ctl);
        if (!p)
            return TSAFE_E_TRUNCATED;
        st = s->direct ? tsafe_bfv_ct_read(s->c1, p, ctl, s->x[c])
                       : tsafe_bfv_ct_read_buffer(s->c1, p, ctl, s->xb[c]);
        if (st != TSAFE_OK)
            return st;
    }
    if (r.pos != len)
        return TSAFE_E_FORMAT;
    size_t total = 0;
    for (size_t i = 0; i < n_sites; i++) {
        s->off[i] = total;
        total += sites[i]->rank;
    }
    s->off[n_sites] = total;
    if ((st = reserve_R(s, total)) != TSAFE_OK)
        return st;
    uint64_t t = 1ull << s->plan.r1.t_bits, half = t >> 1;
    draw_masks(s, s->R, total);
    for (size_t i = 0; i < total; i++)
        s->R[i] &= t - 1;

    double prod_us = 0;
    const tsafe_sealed_operands *ops[TSAFE_MSG_MAX_SITES];
    if (!s->direct) {
        double p0 = tsafe_lora_now_us();
        for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++)
            st = tsafe_sealed_opcache_get(&s->cache, s->be1, s->be2, sites[i], &ops[i]);
        if (st == TSAFE_OK)
            st = round1_products(s, sites, n_sites, ops);
        if (st != TSAFE_OK)
            return st;
        prod_us += tsafe_lora_now_us() - p0;
    }
    tsafe_wbuf w = {0};
    tsafe_wbuf_presize(&w, message_bytes(s, sites, n_sites, TSAFE_MSG_SEALED_RESPONSE1));
    tsafe_wbuf_header(&w, TSAFE_MSG_SEALED_RESPONSE1);
    tsafe_sealed_put_tag(&w, &s->tag);
    tsafe_wbuf_u32(&w, (uint32_t)n_sites);
    const uint64_t *R = s->R;
    size_t j = 0; /* backend accumulator of the block */
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        const tsafe_sealed_site *site = sites[i];
        const tsafe_sealed_layout *l = &site->l1;
        tsafe_wbuf_u32(&w, site->rank);
        tsafe_wbuf_u32(&w, site->d_out);
        if (s->plan.mode == TSAFE_SEALED)
            tsafe_wbuf_f64(&w, site->scale_a); /* the client's DP calibration */
        else
            tsafe_wbuf_u32(&w, site->trunc_bits); /* checked by the client */
        for (uint32_t b = 0; b < l->n_blocks && st == TSAFE_OK; b++, j++) {
            if (s->direct) {
                double p0 = tsafe_lora_now_us();
                tsafe_bfv_acc_zero(s->acc);
                for (uint32_t c = 0; c < l->n_chunks && st == TSAFE_OK; c++)
                    st = tsafe_bfv_acc_mul_add(s->acc, s->x[c],
                                               site->p1[(size_t)c * l->n_blocks + b]);
                prod_us += tsafe_lora_now_us() - p0;
            }
            /* the client decrypts v = u + t/2 - R mod t: uniform */
            uint32_t reads = tsafe_sealed_block_reads(l, b, NULL);
            for (uint32_t k = 0; k < reads; k++)
                s->mask[k] = (half - R[b * l->rows + k]) & (t - 1);
            if (st == TSAFE_OK)
                st = s->direct ? seal_block(s, s->c1, s->acc, s->pk1, s->res, l, b,
                                            s->plan.flood1, &w)
                               : seal_block_on(s, s->c1, s->sealer1, s->accs[j], s->pkb1,
                                               s->res, l, b, s->plan.flood1, &w);
        }
        R += site->rank;
    }
    if (st == TSAFE_OK && w.failed)
        st = TSAFE_E_NOMEM;
    if (st != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    s->await_round2 = 1;
    s->prepared = 0;
    s->n_sites = n_sites;
    s->seals1 = j; /* blocks sealed: what refill prepares for the next token */
    *response = w.buf;
    *out_len = w.len;
    if (stats) {
        stats->products_us += prod_us;
        stats->reduce_us += tsafe_lora_now_us() - t0 - prod_us;
        stats->he_ops += (uint64_t)n_sites * s->plan.n_chunks1;
    }
    return TSAFE_OK;
}

/* out[j] = sum over k (in order) of bt[k d_out + j] u[k], in doubles: each
 * output the same products and sums in the same order on either path (the
 * AVX-512 one keeps 32 outputs in registers, no fused multiply-add), so
 * both give the same bits. */
static void bt_times_u_scalar(const float *bt, const double *u, uint32_t rank,
                              uint32_t from, uint32_t d_out, double *out)
{
    for (uint32_t j = from; j < d_out; j++) {
        double acc = 0;
        for (uint32_t k = 0; k < rank; k++)
            acc += (double)bt[(size_t)k * d_out + j] * u[k];
        out[j] = acc;
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx512f"))) static uint32_t bt_times_u_avx512(
    const float *bt, const double *u, uint32_t rank, uint32_t d_out, double *out)
{
    uint32_t j = 0;
    for (; j + 32 <= d_out; j += 32) {
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (uint32_t k = 0; k < rank; k++) {
            const float *b = bt + (size_t)k * d_out + j;
            __m512d uk = _mm512_set1_pd(u[k]);
            a0 = _mm512_add_pd(a0, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(b)), uk));
            a1 = _mm512_add_pd(a1, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(b + 8)), uk));
            a2 = _mm512_add_pd(a2, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(b + 16)), uk));
            a3 = _mm512_add_pd(a3, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(b + 24)), uk));
        }
        _mm512_storeu_pd(out + j, a0);
        _mm512_storeu_pd(out + j + 8, a1);
        _mm512_storeu_pd(out + j + 16, a2);
        _mm512_storeu_pd(out + j + 24, a3);
    }
    return j;
}
#endif

static void bt_times_u(const float *bt, const double *u, uint32_t rank, uint32_t d_out,
                       double *out)
{
    uint32_t from = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (__builtin_cpu_supports("avx512f"))
        from = bt_times_u_avx512(bt, u, rank, d_out, out);
#endif
    bt_times_u_scalar(bt, u, rank, from, d_out, out);
}

/* sealed: shares (+ noise) -> u + n -> delta' = s B' (u + n), in clear */
static tsafe_status round2_sealed(tsafe_sealed_server *s,
                                  const tsafe_sealed_site *const *sites,
                                  size_t n_sites, tsafe_rbuf *r, tsafe_wbuf *w)
{
    uint64_t t = 1ull << s->plan.r1.t_bits, half = t >> 1;
    const uint64_t *R = s->R;
    int64_t *U = s->last_u;
    for (size_t i = 0; i < n_sites; i++) {
        const tsafe_sealed_site *site = sites[i];
        uint32_t rank;
        if (!tsafe_rbuf_u32(r, &rank))
            return TSAFE_E_TRUNCATED;
        if (rank != site->rank)
            return TSAFE_E_FORMAT;
        for (uint32_t k = 0; k < rank; k++) {
            uint64_t v;
            if (!tsafe_rbuf_u64(r, &v))
                return TSAFE_E_TRUNCATED;
            if (v >= t)
                return TSAFE_E_FORMAT;
            uint64_t y = (v + R[k] + half) & (t - 1);
            U[k] = y >= half ? (int64_t)y - (int64_t)t : (int64_t)y;
        }
        tsafe_wbuf_u32(w, site->d_out);
        double *ud = malloc(((size_t)rank + site->d_out) * sizeof *ud), *out = ud + rank;
        if (!ud)
            return TSAFE_E_NOMEM;
        for (uint32_t k = 0; k < rank; k++)
            ud[k] = (double)U[k];
        bt_times_u(site->bprime, ud, rank, site->d_out, out);
        for (uint32_t j = 0; j < site->d_out; j++)
            tsafe_wbuf_f32(w, (float)out[j]);
        free(ud);
        R += rank;
        U += rank;
    }
    return TSAFE_OK;
}

/* A site's band (coordinates whose wrap the server cannot decide from R
 * alone) and the constants C of u~ = floor(v/2^k) + band*d + C, from its
 * masks R. */
static void band_and_c(const tsafe_sealed_plan *p, const tsafe_sealed_site *site,
                       const uint64_t *R, uint8_t *band, int64_t *C)
{
    int64_t t = (int64_t)1 << p->r1.t_bits, half = t / 2;
    for (uint32_t k = 0; k < site->rank; k++) {
        int64_t Rk = (int64_t)R[k], U = site->u_bound[k];
        band[k] = Rk > half - U && Rk <= half + U;
        int64_t known = !band[k] && Rk > half + U;
        /* + 1: the two floors lose 1 on average; this centres u~ */
        C[k] = tsafe_sealed_floor_shift(Rk - half - (known ? t : 0), site->trunc_bits) + 1;
    }
}

/* s->colsel = the band's columns of B_q, the rest zero (a mask per
 * column: no branch on the random band). */
static void select_band_columns(tsafe_sealed_server *s, const tsafe_sealed_site *site,
                                const uint8_t *band)
{
    uint32_t rank = site->rank;
    int64_t keep[1024];
    for (uint32_t k = 0; k < rank; k++)
        keep[k] = band[k] ? -1 : 0;
    for (uint32_t j = 0; j < site->d_out; j++)
        for (uint32_t k = 0; k < rank; k++)
            s->colsel[(size_t)j * rank + k] = site->bq[(size_t)j * rank + k] & keep[k];
}

/* The per-token band plaintexts of a site on the backend, one per block
 * and wrap chunk (block-major) into band[first..] (the pool holds at least
 * first + n_chunks * n_blocks entries). Every chunk gets one, also when
 * none of its coordinates is in the band (a zero plaintext): the work of
 * round 2 must not depend on R, or its timing would tell the client which
 * chunks hold band coordinates, i.e. something of R and so of u. */
static tsafe_status build_band_plains(tsafe_sealed_server *s, const tsafe_sealed_site *site,
                                      const uint8_t *band, size_t first)
{
    const tsafe_sealed_layout *l = &site->l2;
    size_t n = tsafe_bfv_context_n(s->c2), used = first;
    select_band_columns(s, site, band);
    tsafe_status st = TSAFE_OK;
    for (uint32_t b = 0; b < l->n_blocks && st == TSAFE_OK; b++)
        for (uint32_t c = 0; c < l->n_chunks && st == TSAFE_OK; c++) {
            tsafe_sealed_encode_block(l, s->colsel, site->rank, c, b, s->coeff, n);
            st = tsafe_bfv_plain_encode_buffer(s->c2, s->coeff, n, s->band[used++]);
        }
    return st;
}

/* Round 2's products of one site on the backend: per block the share
 * chunks times the fixed B_q blocks and the wrap chunks times their band
 * plaintexts (band[first..], built by build_band_plains), as one
 * multiply-accumulate call. */
static tsafe_status round2_products(tsafe_sealed_server *s, const tsafe_sealed_site *site,
                                    const tsafe_sealed_operands *ops, size_t first)
{
    const tsafe_sealed_layout *l = &site->l2;
    size_t nb = l->n_blocks, nc = l->n_chunks;
    tsafe_status st = pool_reserve(s->be2, &s->accs2, &s->n_accs2, nb, 2);
    if (st != TSAFE_OK)
        return st;
    tsafe_backend_mac *job = malloc(nb * sizeof *job);
    const tsafe_buffer **terms = malloc(2 * nb * 2 * nc * sizeof *terms);
    if (!job || !terms) {
        free(job);
        free(terms);
        return TSAFE_E_NOMEM;
    }
    size_t used = first;
    for (uint32_t b = 0; b < nb; b++) {
        const tsafe_buffer **a = terms + 2 * b * 2 * nc, **w = a + 2 * nc;
        size_t k = 0;
        for (uint32_t c = 0; c < nc; c++, k++) {
            a[k] = s->zb[c];
            w[k] = ops->o2[(size_t)c * nb + b];
        }
        for (uint32_t c = 0; c < nc; c++, k++) {
            a[k] = s->zb[nc + c];
            w[k] = s->band[used++];
        }
        job[b] = (tsafe_backend_mac){s->accs2[b], k, a, w, 1};
    }
    st = tsafe_backend_mul_acc(s->be2, job, nb);
    free(job);
    free(terms);
    return st;
}

tsafe_status tsafe_sealed_server_prepare_round2(tsafe_sealed_server *s,
                                                const tsafe_sealed_site *const *sites,
                                                size_t n_sites, tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(s, TSAFE_E_NULL);
    tsafe_status st = check_pending(s, sites, n_sites);
    if (st != TSAFE_OK)
        return st;
    if (s->plan.mode != TSAFE_SEALED_PRIVATE || s->direct || s->prepared)
        return TSAFE_OK; /* nothing to prepare, or done */
    double t0 = tsafe_lora_now_us();
    size_t total = 0;
    for (size_t i = 0; i < n_sites; i++) {
        const tsafe_sealed_site *site = sites[i];
        size_t o = s->off[i];
        band_and_c(&s->plan, site, s->R + o, s->pband + o, s->pC + o);
        s->pfirst[i] = total;
        total += (size_t)site->l2.n_chunks * site->l2.n_blocks;
    }
    st = pool_reserve(s->be2, &s->band, &s->n_band, total, 1);
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        st = build_band_plains(s, sites[i], s->pband + s->off[i], s->pfirst[i]);
        s->psites[i] = sites[i];
    }
    /* Round 2's encryptions of zero are left to the sealings (or to
     * tsafe_sealed_server_refill): prepared here they cost twice the band
     * work, more than the client's answer takes on a fast link (measured
     * on 127.0.0.1: the share then waits for the server). */
    s->prepared = st == TSAFE_OK;
    if (stats)
        stats->offline_us += tsafe_lora_now_us() - t0;
    return st;
}

/* sealed-private: Enc(floor(v/2^k)), Enc(d) -> Enc(B_q u~), with
 * u~ = floor(v/2^k) + band * d + C (see docs/THREAT_MODEL.md: the band is
 * where the server cannot tell whether v + R wrapped; there the client's
 * second representative d = -(t/2^k)[v >= t/2] is used). The band work
 * comes from tsafe_sealed_server_prepare_round2 when it ran for these
 * sites, else it is done here. */
static tsafe_status round2_private(tsafe_sealed_server *s,
                                   const tsafe_sealed_site *const *sites,
                                   size_t n_sites, tsafe_rbuf *r, tsafe_wbuf *w,
                                   double *prod_us)
{
    const tsafe_sealed_plan *p = &s->plan;
    uint64_t t2 = 1ull << p->r2.t_bits;
    size_t n = tsafe_bfv_context_n(s->c2), ctl = tsafe_bfv_ct_bytes(s->c2);
    uint32_t flood2 = tsafe_sealed_flood2(p);
    int prepared = s->prepared && !s->direct;
    for (size_t i = 0; prepared && i < n_sites; i++)
        prepared = sites[i] == s->psites[i];
    tsafe_status st = TSAFE_OK;
    int64_t C_here[1024];
    uint8_t band_here[1024];
    for (size_t i = 0; i < n_sites && st == TSAFE_OK; i++) {
        const tsafe_sealed_site *site = sites[i];
        const tsafe_sealed_layout *l = &site->l2;
        uint32_t rank, ncts;
        if (!tsafe_rbuf_u32(r, &rank) || !tsafe_rbuf_u32(r, &ncts))
            return TSAFE_E_TRUNCATED;
        if (rank != site->rank || ncts != 2 * l->n_chunks)
            return TSAFE_E_FORMAT;
        for (uint32_t c = 0; c < ncts; c++) {
            const uint8_t *b = tsafe_rbuf_take(r, ctl);
            if (!b)
                return TSAFE_E_TRUNCATED;
            st = s->direct ? tsafe_bfv_ct_read(s->c2, b, ctl, s->z[c])
                           : tsafe_bfv_ct_read_buffer(s->c2, b, ctl, s->zb[c]);
            if (st != TSAFE_OK)
                return st;
        }
        const uint8_t *band = prepared ? s->pband + s->off[i] : band_here;
        const int64_t *C = prepared ? s->pC + s->off[i] : C_here;
        if (!prepared)
            band_and_c(p, site, s->R + s->off[i], band_here, C_here);
        tsafe_wbuf_u32(w, site->d_out);
        tsafe_wbuf_f64(w, site->scale_b * ldexp(1.0, (int)site->trunc_bits));
        tsafe_wbuf_bytes(w, site->row_exp, site->d_out);
        draw_out_noise(s, site);
        if (!s->direct) {
            double p0 = tsafe_lora_now_us();
            const tsafe_sealed_operands *ops;
            st = tsafe_sealed_opcache_get(&s->cache, s->be1, s->be2, site, &ops);
            if (st == TSAFE_OK && !prepared) {
                st = pool_reserve(s->be2, &s->band, &s->n_band,
                                  (size_t)l->n_chunks * l->n_blocks, 1);
                if (st == TSAFE_OK)
                    st = build_band_plains(s, site, band, 0);
            }
            if (st == TSAFE_OK)
                st = round2_products(s, site, ops, prepared ? s->pfirst[i] : 0);
            *prod_us += tsafe_lora_now_us() - p0;
        } else {
            select_band_columns(s, site, band);
        }
        for (uint32_t b = 0; b < l->n_blocks && st == TSAFE_OK; b++) {
            if (s->direct) {
                double p0 = tsafe_lora_now_us();
                tsafe_bfv_acc *acc = s->acc2;
                tsafe_bfv_acc_zero(acc);
                for (uint32_t c = 0; c < l->n_chunks && st == TSAFE_OK; c++)
                    st = tsafe_bfv_acc_mul_add(acc, s->z[c], site->p2[(size_t)c * l->n_blocks + b]);
                for (uint32_t c = 0; c < l->n_chunks && st == TSAFE_OK; c++) {
                    tsafe_bfv_plain *pd; /* every chunk, band or not: see build_band_plains */
                    tsafe_sealed_encode_block(l, s->colsel, rank, c, b, s->coeff, n);
                    if ((st = tsafe_bfv_plain_create(s->c2, s->coeff, n, &pd)) == TSAFE_OK)
                        st = tsafe_bfv_acc_mul_add(acc, s->z[l->n_chunks + c], pd);
                    tsafe_bfv_plain_free(pd);
                }
                *prod_us += tsafe_lora_now_us() - p0;
            }
            uint32_t reads = tsafe_sealed_block_reads(l, b, NULL);
            const int64_t *noise = s->noise + (size_t)b * l->rows;
            for (uint32_t k = 0; k < reads; k++) {
                const int64_t *row = site->bq + (size_t)(b * l->rows + k) * rank;
                /* B_q C mod t2: t2 is a power of two below 2^64, so the sum
                 * wrapping mod 2^64 keeps it (and vectorises, unlike the
                 * 128-bit sum and division it replaces) */
                uint64_t acc_c = 0;
                for (uint32_t q = 0; q < rank; q++)
                    acc_c += (uint64_t)row[q] * (uint64_t)C[q];
                s->mask[k] = (acc_c + (uint64_t)noise[k]) & (t2 - 1);
            }
            if (st == TSAFE_OK)
                st = s->direct ? seal_block(s, s->c2, s->acc2, s->pk2, s->res2, l, b, flood2, w)
                               : seal_block_on(s, s->c2, s->sealer2, s->accs2[b], s->pkb2,
                                               s->res2, l, b, flood2, w);
        }
    }
    sodium_memzero(C_here, sizeof C_here);
    sodium_memzero(band_here, sizeof band_here);
    return st;
}

static tsafe_status round2(tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                           size_t n_sites, const uint8_t *msg, size_t len, uint8_t **out,
                           size_t *out_len, tsafe_lora_stats *stats);

/* A message that fails ends the session (a new hello starts another): the
 * masks go at once, so a client cannot try several second messages
 * against one token's masks. */
static void abort_session(tsafe_sealed_server *s)
{
    wipe_masks(s);
    s->prepared = 0;
    s->await_round2 = 0;
    s->have_session = 0;
}

tsafe_status tsafe_sealed_server_round2(tsafe_sealed_server *s,
                                        const tsafe_sealed_site *const *sites,
                                        size_t n_sites, const uint8_t *msg,
                                        size_t len, uint8_t **out, size_t *out_len,
                                        tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(s && msg && out && out_len, TSAFE_E_NULL);
    *out = NULL;
    *out_len = 0;
    tsafe_status st = check_pending(s, sites, n_sites);
    if (st != TSAFE_OK)
        return st;
    st = round2(s, sites, n_sites, msg, len, out, out_len, stats);
    if (st != TSAFE_OK)
        abort_session(s);
    return st;
}

/* Round 2 of a pending token (check_pending passed). */
static tsafe_status round2(tsafe_sealed_server *s, const tsafe_sealed_site *const *sites,
                           size_t n_sites, const uint8_t *msg, size_t len, uint8_t **out,
                           size_t *out_len, tsafe_lora_stats *stats)
{
    tsafe_status st;
    double t0 = tsafe_lora_now_us(), prod_us = 0;
    int priv = s->plan.mode == TSAFE_SEALED_PRIVATE;
    tsafe_rbuf r = {msg, len, 0};
    uint32_t ns;
    if ((st = tsafe_rbuf_header(&r, priv ? TSAFE_MSG_SEALED_SHARE_CT
                                         : TSAFE_MSG_SEALED_SHARE)) != TSAFE_OK ||
        (st = tsafe_sealed_get_tag(&r, &s->tag)) != TSAFE_OK)
        return st;
    if (!tsafe_rbuf_u32(&r, &ns))
        return TSAFE_E_TRUNCATED;
    if (ns != n_sites)
        return TSAFE_E_FORMAT;
    tsafe_wbuf w = {0};
    uint8_t kind = priv ? TSAFE_MSG_SEALED_RESPONSE2 : TSAFE_MSG_SEALED_DELTA;
    tsafe_wbuf_presize(&w, message_bytes(s, sites, n_sites, kind));
    tsafe_wbuf_header(&w, kind);
    tsafe_sealed_put_tag(&w, &s->tag);
    tsafe_wbuf_u32(&w, (uint32_t)n_sites);
    st = priv ? round2_private(s, sites, n_sites, &r, &w, &prod_us)
              : round2_sealed(s, sites, n_sites, &r, &w);
    if (priv && st == TSAFE_OK) {
        s->seals2 = 0;
        for (size_t i = 0; i < n_sites; i++)
            s->seals2 += sites[i]->l2.n_blocks;
    }
    if (st == TSAFE_OK && r.pos != len)
        st = TSAFE_E_FORMAT;
    if (st == TSAFE_OK && w.failed)
        st = TSAFE_E_NOMEM;
    if (st != TSAFE_OK) {
        free(w.buf);
        return st;
    }
    /* the token is done: its masks go, the next query must be seq + 1 */
    wipe_masks(s);
    s->prepared = 0;
    s->await_round2 = 0;
    s->tag.seq++;
    *out = w.buf;
    *out_len = w.len;
    if (stats) {
        stats->products_us += prod_us;
        stats->bu_us += tsafe_lora_now_us() - t0 - prod_us;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_server_last_u(const tsafe_sealed_server *s, size_t site,
                                        int64_t *u, size_t n)
{
    TSAFE_REQUIRE(s && u, TSAFE_E_NULL);
    TSAFE_REQUIRE(s->plan.mode == TSAFE_SEALED, TSAFE_E_STATE);
    TSAFE_REQUIRE(s->last_u && site < s->n_sites &&
                      n == s->off[site + 1] - s->off[site], TSAFE_E_RANGE);
    memcpy(u, s->last_u + s->off[site], n * sizeof *u);
    return TSAFE_OK;
}

void tsafe_sealed_put_tag(tsafe_wbuf *w, const tsafe_sealed_tag *t)
{
    tsafe_wbuf_bytes(w, t->session, TSAFE_SEALED_SESSION_BYTES);
    tsafe_wbuf_u32(w, t->epoch);
    tsafe_wbuf_u64(w, t->seq);
}

tsafe_status tsafe_sealed_get_tag(tsafe_rbuf *r, const tsafe_sealed_tag *want)
{
    const uint8_t *sess = tsafe_rbuf_take(r, TSAFE_SEALED_SESSION_BYTES);
    uint32_t epoch;
    uint64_t seq;
    if (!sess || !tsafe_rbuf_u32(r, &epoch) || !tsafe_rbuf_u64(r, &seq))
        return TSAFE_E_TRUNCATED;
    if (memcmp(sess, want->session, TSAFE_SEALED_SESSION_BYTES) != 0 ||
        epoch != want->epoch || seq != want->seq)
        return TSAFE_E_REPLAY;
    return TSAFE_OK;
}

size_t tsafe_sealed_server_secrets_(const tsafe_sealed_server *s, tsafe_sealed_secret *out,
                                    size_t max)
{
    if (!s || !out)
        return 0;
    size_t n = tsafe_bfv_context_n(s->c1), k = 0;
    const tsafe_sealed_secret all[] = {
        {"R", s->R, s->R_cap * sizeof *s->R},
        {"pC", s->pC, s->pC ? s->R_cap * sizeof *s->pC : 0},
        {"pband", s->pband, s->pband ? s->R_cap : 0},
        {"mask", s->mask, n * sizeof *s->mask},
        {"colsel", s->colsel,
         s->colsel ? (size_t)s->plan.d_out_max * s->plan.rank * sizeof *s->colsel : 0},
        {"coeff", s->coeff, s->coeff ? n * sizeof *s->coeff : 0},
    };
    for (size_t i = 0; i < sizeof all / sizeof *all && k < max; i++)
        if (all[i].p && all[i].bytes)
            out[k++] = all[i];
    return k;
}
