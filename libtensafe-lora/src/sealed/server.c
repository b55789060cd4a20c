/* Sealed server: its state, the session's keys and the backends its ring
 * work runs on; it holds the client's public keys and never a secret key.
 * The rounds are in server_round1.c and server_round2.c. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "clock.h"
#include "server_internal.h"
#include "tsafe_check.h"

/* ------------------------------------------------------------ backends */

static void pool_free(tsafe_buffer **p, size_t n)
{
    for (size_t i = 0; p && i < n; i++)
        tsafe_buffer_free(p[i]);
    free(p);
}

static void backend_teardown(tsafe_sealed_server *s)
{
    tsafe_sealed_sealq_free(&s->sealq); /* its slots are the factory's */
    tsafe_sealed_opcache_clear(&s->cache);
    pool_free(s->accs, s->n_accs);
    pool_free(s->accs2, s->n_accs2);
    s->accs = s->accs2 = NULL;
    s->n_accs = s->n_accs2 = 0;
    for (size_t i = 0; i < TSAFE_SEALED_MAX_CHUNKS; i++)
        tsafe_buffer_free(s->xb[i]);
    pool_free(s->zb, s->n_zb);
    s->zb = NULL;
    s->n_zb = 0;
    pool_free(s->wb, s->n_wb);
    pool_free(s->ptb, s->n_ptb);
    s->wb = s->ptb = NULL;
    s->n_wb = s->n_ptb = 0;
    memset(s->xb, 0, sizeof s->xb);
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
    tsafe_sealed_sealq_drop_keys(&s->sealq);
    s->key_gen++;
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
    if (s->c2) { /* round 2's share ciphertexts: a pool grown per token */
        TSAFE_TRY(tsafe_backend_create(s->factory, NULL, s->c2, &s->be2));
        TSAFE_TRY(tsafe_bfv_sealer_create(s->c2, s->be2, &s->sealer2));
    }
    TSAFE_TRY(backend_keys(s));
    return TSAFE_OK;
fail:
    backend_teardown(s);
    return st;
}

/* Accumulators, or the per-token plaintexts: used once, no operands. */
tsafe_status tsafe_sealed_pool_reserve(tsafe_backend *b, tsafe_buffer ***pool, size_t *have,
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
            backend_teardown(s); /* no backend at all: the rounds refuse (TSAFE_E_STATE) */
    }
    return st;
}

tsafe_status tsafe_sealed_server_use_pool(tsafe_sealed_server *s, tsafe_cpu_pool *pool)
{
    TSAFE_REQUIRE(s, TSAFE_E_NULL);
    s->pool = pool;
    return TSAFE_OK;
}

const char *tsafe_sealed_server_backend_name(const tsafe_sealed_server *s)
{
    return !s ? "none" : tsafe_backend_name(s->be1);
}

void tsafe_sealed_server_debug_seed(tsafe_sealed_server *s, const uint8_t *seed)
{
    if (!s)
        return;
    s->draws.seeded = seed != NULL;
    if (seed)
        memcpy(s->draws.seed, seed, 32);
    s->draws.n = 0;
}

tsafe_status tsafe_sealed_server_refill(tsafe_sealed_server *s, tsafe_lora_stats *stats)
{
    TSAFE_REQUIRE(s, TSAFE_E_NULL);
    if (!s->have_session || !s->pkb1)
        return TSAFE_OK; /* nothing to prepare for */
    double t0 = tsafe_now_us();
    uint8_t sd[32];
    tsafe_status st = tsafe_bfv_sealer_prepare(s->sealer1, s->pkb1, s->seals1,
                                               tsafe_sealed_next_seed(&s->draws, sd));
    if (st == TSAFE_OK && s->sealer2 && s->pkb2)
        st = tsafe_bfv_sealer_prepare(s->sealer2, s->pkb2, s->seals2,
                                      tsafe_sealed_next_seed(&s->draws, sd));
    if (stats)
        stats->offline_us += tsafe_now_us() - t0;
    return st;
}

/* The pending token's masks and what was derived from them (round 2's
 * constants C) are as secret as R: wiped together. */
void tsafe_sealed_server_wipe_masks(tsafe_sealed_server *s)
{
    if (s->R)
        sodium_memzero(s->R, s->R_cap * sizeof *s->R);
    if (s->C)
        sodium_memzero(s->C, s->R_cap * sizeof *s->C);
    if (s->W)
        sodium_memzero(s->W, s->W_cap);
    /* the last block's sealing masks (t/2 - R, then B_q C): derived from R */
    size_t n = (size_t)1 << s->plan.r1.log_n; /* not c1's: freed before this at free */
    if (s->mask)
        sodium_memzero(s->mask, n * sizeof *s->mask);
}

void tsafe_sealed_server_free(tsafe_sealed_server *s)
{
    if (!s)
        return;
    tsafe_sealed_server_wipe_masks(s);
    if (s->last_u) /* sealed: u + n, kept for tsafe_sealed_server_last_u */
        sodium_memzero(s->last_u, s->R_cap * sizeof *s->last_u);
    backend_teardown(s);
    tsafe_bfv_sealed_free(s->res);
    tsafe_bfv_sealed_free(s->res2);
    tsafe_bfv_public_key_free(s->pk1);
    tsafe_bfv_public_key_free(s->pk2);
    tsafe_bfv_context_free(s->c1);
    tsafe_bfv_context_free(s->c2);
    free(s->R);
    free(s->C);
    free(s->W);
    free(s->last_u);
    free(s->off);
    free(s->pos);
    free(s->mask);
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
    TSAFE_CHECK(plan->n_chunks1 <= TSAFE_SEALED_MAX_CHUNKS, TSAFE_E_RANGE);
    TSAFE_TRY(tsafe_bfv_sealed_create(s->c1, n, &s->res));
    s->pos = malloc(n * sizeof *s->pos);
    s->mask = malloc(n * sizeof *s->mask);
    s->off = calloc(TSAFE_MSG_MAX_SITES + 1, sizeof *s->off);
    TSAFE_CHECK(s->pos && s->mask && s->off, TSAFE_E_NOMEM);
    if (plan->mode == TSAFE_SEALED_PRIVATE) {
        tsafe_sealed_layout l2;
        tsafe_sealed_layout2(plan, plan->rank, plan->d_out_max, &l2);
        TSAFE_CHECK(l2.n_chunks <= TSAFE_SEALED_MAX_CHUNKS, TSAFE_E_RANGE);
        TSAFE_TRY(tsafe_bfv_sealed_create(s->c2, n, &s->res2));
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

tsafe_status tsafe_sealed_server_check_sites(const tsafe_sealed_server *s,
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
tsafe_status tsafe_sealed_server_check_pending(const tsafe_sealed_server *s,
                                               const tsafe_sealed_site *const *sites, size_t n)
{
    tsafe_status st = tsafe_sealed_server_check_sites(s, sites, n);
    if (st != TSAFE_OK)
        return st;
    TSAFE_REQUIRE(s->have_session && s->await_round2, TSAFE_E_STATE);
    TSAFE_REQUIRE(n == s->n_sites, TSAFE_E_RANGE);
    for (size_t i = 0; i < n; i++)
        TSAFE_REQUIRE(tsafe_sealed_site_reads1(&s->plan, sites[i]) == s->off[i + 1] - s->off[i],
                      TSAFE_E_RANGE);
    return TSAFE_OK;
}

tsafe_status tsafe_sealed_server_reserve_R(tsafe_sealed_server *s, size_t need)
{
    if (need <= s->R_cap)
        return TSAFE_OK;
    tsafe_sealed_server_wipe_masks(s);
    free(s->R);
    free(s->C);
    free(s->last_u);
    s->R = malloc(need * sizeof *s->R);
    s->last_u = calloc(need, sizeof *s->last_u);
    int priv = s->plan.mode == TSAFE_SEALED_PRIVATE;
    s->C = priv ? malloc(need * sizeof *s->C) : NULL;
    s->R_cap = s->R && s->last_u && (!priv || s->C) ? need : 0;
    return s->R_cap ? TSAFE_OK : TSAFE_E_NOMEM;
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

size_t tsafe_sealed_server_secrets_(const tsafe_sealed_server *s, tsafe_sealed_secret *out,
                                    size_t max)
{
    if (!s || !out)
        return 0;
    size_t n = tsafe_bfv_context_n(s->c1), k = 0;
    const tsafe_sealed_secret all[] = {
        {"R", s->R, s->R_cap * sizeof *s->R},
        {"C", s->C, s->C ? s->R_cap * sizeof *s->C : 0},
        {"W", s->W, s->W_cap},
        {"mask", s->mask, n * sizeof *s->mask},
        {"sealq.mask", s->sealq.mask, s->sealq.wcap * sizeof *s->sealq.mask},
    };
    for (size_t i = 0; i < sizeof all / sizeof *all && k < max; i++)
        if (all[i].p && all[i].bytes)
            out[k++] = all[i];
    return k;
}
