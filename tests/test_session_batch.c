/* tsafe_session_server_work_batch and the session pool: every message of
 * several sessions (different modules and widths, both sealed protocols
 * and plain ZeRo-MOAI) is byte for byte the one that work() one session
 * at a time gives. Each client's bytes go to two servers of the same
 * seed: A runs work() per session on a service without threads, B runs
 * one work_batch per step over a 2-thread pool on a service with the pool
 * (sealings over threads, pooled CPU backends). The deltas are checked
 * against the plaintext reference too. Argument errors of work_batch. In
 * the TSan suites of .ci/run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/tsafe_test_lora.h"
#include "support/tsafe_test_rng.h"
#include "tensafe/tensafe.h"
#include "../libtensafe-lora/src/session/server_internal.h"
#include "../libtensafe-lora/src/sealed/sealed_internal.h"

#define D 64
#define D2 96
/* the session keeps its failure; the checks read it from wants/status */
#define IGNORE_STATUS(call) do { tsafe_status ign_ = (call); (void)ign_; } while (0)
#define NMOD 4
#define SESSIONS 3
#define TOKENS 3

static const uint32_t k_rank[NMOD] = {8, 4, 6, 5};
static const uint32_t k_dout[NMOD] = {64, 32, 48, 40};
static const uint32_t k_din[NMOD] = {D, D, D2, D2};
static const char *const k_name[NMOD] = {"q_proj", "v_proj", "down_proj", "up_proj"};

typedef struct {
    tsafe_session_module m[NMOD];
    float *A[NMOD], *B[NMOD];
    size_t n;
} fixture;

static void fixture_make(fixture *f, int widths)
{
    memset(f, 0, sizeof *f);
    f->n = widths ? NMOD : 2; /* plain: one width */
    for (size_t k = 0; k < f->n; k++) {
        f->A[k] = tsafe_test_rand_floats((size_t)k_rank[k] * k_din[k], 0.05);
        f->B[k] = tsafe_test_rand_floats((size_t)k_dout[k] * k_rank[k], 0.05);
        f->m[k] = (tsafe_session_module){k_name[k], f->A[k], f->B[k], k_din[k], k_rank[k],
                                         k_dout[k], 0.5f + (float)k};
    }
}

static void fixture_free(fixture *f)
{
    for (size_t k = 0; k < f->n; k++) {
        free(f->A[k]);
        free(f->B[k]);
    }
}

typedef struct {
    tsafe_session_service *svc[2]; /* A: no threads, B: the pool */
    tsafe_session_server *s[2][SESSIONS];
    tsafe_session_client *c[SESSIONS];
    tsafe_cpu_pool *pool;
    tsafe_session_protocol p;
    int alone; /* B's batches: 1 session each, else all at once */
} rig;

static tsafe_lora_plan g_plain_plan;

/* The same server seed for A's and B's session k (sealed modes). */
static void seed_sessions(rig *r)
{
    for (size_t k = 0; k < SESSIONS; k++) {
        uint8_t seed[32];
        tsafe_test_seed32(seed);
        for (int v = 0; v < 2; v++)
            for (uint32_t w = 0; w < TSAFE_SESSION_MAX_WIDTHS; w++)
                if (r->s[v][k]->srv[w])
                    tsafe_sealed_server_debug_seed(r->s[v][k]->srv[w], seed);
    }
}

/* Client k's bytes into both servers (each must take the same count). */
static int client_out(rig *r, size_t k)
{
    const uint8_t *d;
    size_t n, used[2];
    tsafe_session_client_output(r->c[k], &d, &n);
    if (!n)
        return 0;
    for (int v = 0; v < 2; v++)
        assert_int_equal(tsafe_session_server_feed(r->s[v][k], d, n, &used[v]), TSAFE_OK);
    assert_int_equal(used[0], used[1]);
    tsafe_session_client_sent(r->c[k], used[0]);
    return used[0] > 0;
}

/* Server k's bytes: B's equal to A's; A's go to the client. */
static int server_out(rig *r, size_t k)
{
    const uint8_t *a, *b;
    size_t na, nb, used;
    tsafe_session_server_output(r->s[0][k], &a, &na);
    tsafe_session_server_output(r->s[1][k], &b, &nb);
    assert_int_equal(na, nb);
    if (!na)
        return 0;
    assert_memory_equal(a, b, na);
    IGNORE_STATUS(tsafe_session_client_feed(r->c[k], a, na, &used));
    tsafe_session_server_sent(r->s[0][k], used);
    tsafe_session_server_sent(r->s[1][k], used);
    return used > 0;
}

/* Until nothing moves: bytes both ways, then A's steps one by one and B's
 * in one batch call per step. */
static void drive(rig *r)
{
    for (int moved = 1; moved;) {
        moved = 0;
        for (size_t k = 0; k < SESSIONS; k++) {
            while (server_out(r, k) | client_out(r, k))
                moved = 1;
        }
        int work = 0;
        for (size_t k = 0; k < SESSIONS; k++) {
            unsigned wa = tsafe_session_server_wants(r->s[0][k]);
            unsigned wb = tsafe_session_server_wants(r->s[1][k]);
            assert_int_equal(wa, wb);
            if (wa & TSAFE_SESSION_WANT_WORK) {
                assert_int_equal(tsafe_session_server_work(r->s[0][k]), TSAFE_OK);
                work = 1;
            }
        }
        if (work && r->alone) /* a lone session: its sealings over the threads */
            for (size_t k = 0; k < SESSIONS; k++)
                assert_int_equal(tsafe_session_server_work_batch(&r->s[1][k], 1, r->pool),
                                 TSAFE_OK);
        else if (work) /* sessions over the threads, each one's work in line */
            assert_int_equal(tsafe_session_server_work_batch(r->s[1], SESSIONS, r->pool),
                             TSAFE_OK);
        moved |= work;
    }
}

static void rig_open(rig *r, const fixture *f, tsafe_session_protocol p, int per_query)
{
    memset(r, 0, sizeof *r);
    r->p = p;
    assert_int_equal(tsafe_cpu_pool_create(2, &r->pool), TSAFE_OK);
    tsafe_session_service_opts so = {.protocol = p, .per_query = per_query};
    so.sealed.semi_honest = p == TSAFE_SESSION_SEALED;
    if (p == TSAFE_SESSION_PLAIN_ZERO_MOAI) {
        assert_int_equal(tsafe_lora_plan_auto(D, 8, 1.0, 0.05, 1e-6, &g_plain_plan), TSAFE_OK);
        so.plain_plan = &g_plain_plan;
    }
    assert_int_equal(tsafe_session_service_create(&so, f->m, f->n, &r->svc[0]), TSAFE_OK);
    so.pool = r->pool;
    assert_int_equal(tsafe_session_service_create(&so, f->m, f->n, &r->svc[1]), TSAFE_OK);
    tsafe_session_client_opts co = {.protocol = p, .per_query = per_query,
                                    .allow_no_dp = p == TSAFE_SESSION_SEALED};
    co.sealed = so.sealed;
    for (size_t k = 0; k < SESSIONS; k++) {
        for (int v = 0; v < 2; v++)
            assert_int_equal(tsafe_session_server_create(r->svc[v], NULL, &r->s[v][k]),
                             TSAFE_OK);
        assert_int_equal(tsafe_session_client_create(&co, NULL, &r->c[k]), TSAFE_OK);
    }
    seed_sessions(r);
    drive(r);
    for (size_t k = 0; k < SESSIONS; k++)
        assert_true(tsafe_session_client_wants(r->c[k]) & TSAFE_SESSION_READY);
}

static void rig_close(rig *r)
{
    for (size_t k = 0; k < SESSIONS; k++) {
        for (int v = 0; v < 2; v++)
            tsafe_session_server_free(r->s[v][k]);
        tsafe_session_client_free(r->c[k]);
    }
    for (int v = 0; v < 2; v++)
        tsafe_session_service_free(r->svc[v]);
    tsafe_cpu_pool_free(r->pool);
}

/* Session k's modules of one token: per query, those of width k % 2 (all
 * of them for k = 0, one for the others); else every module. */
static size_t token_mods(const fixture *f, size_t k, int per_query, uint32_t *mods)
{
    if (!per_query)
        return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < f->n; i++)
        if (k_din[i] == (k % 2 ? D2 : D) && (k == 0 || n == 0))
            mods[n++] = i;
    return n;
}

static void run_tokens(rig *r, const fixture *f, int per_query)
{
    float delta[SESSIONS][NMOD][64], *out[SESSIONS][NMOD];
    uint32_t mods[SESSIONS][NMOD];
    size_t n[SESSIONS];
    float *x = tsafe_test_rand_floats(D2, 1.0);
    for (int t = 0; t < TOKENS; t++) {
        r->alone = t % 2;
        for (size_t k = 0; k < SESSIONS; k++) {
            n[k] = token_mods(f, k, per_query, mods[k]);
            for (size_t i = 0; i < NMOD; i++)
                out[k][i] = delta[k][i];
            assert_int_equal(tsafe_session_client_submit(r->c[k], n[k] ? mods[k] : NULL, n[k],
                                                         x, out[k]),
                             TSAFE_OK);
        }
        drive(r);
        for (size_t k = 0; k < SESSIONS; k++) {
            assert_true(tsafe_session_client_wants(r->c[k]) & TSAFE_SESSION_READY);
            size_t cnt = n[k] ? n[k] : f->n;
            for (size_t i = 0; i < cnt; i++) {
                const tsafe_session_module *m = &f->m[n[k] ? mods[k][i] : i];
                double want[64];
                tsafe_test_ref_delta(m->A, m->B, x, m->rank, m->d_in, m->d_out, m->scale,
                                     want);
                assert_true(tsafe_test_rel_l2(out[k][i], want, m->d_out) < 0.05);
            }
        }
    }
    free(x);
}

static void batch_case(tsafe_session_protocol p, int per_query)
{
    fixture f;
    fixture_make(&f, per_query);
    rig r;
    rig_open(&r, &f, p, per_query);
    run_tokens(&r, &f, per_query);
    rig_close(&r);
    fixture_free(&f);
}

static void test_batch_sealed(void **state)
{
    (void)state;
    batch_case(TSAFE_SESSION_SEALED, 1);
    batch_case(TSAFE_SESSION_SEALED, 0);
}

static void test_batch_sealed_private(void **state)
{
    (void)state;
    batch_case(TSAFE_SESSION_SEALED_PRIVATE, 1);
    batch_case(TSAFE_SESSION_SEALED_PRIVATE, 0);
}

static void test_batch_plain(void **state)
{
    (void)state;
    batch_case(TSAFE_SESSION_PLAIN_ZERO_MOAI, 0);
}

static void test_batch_args(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 0);
    rig r;
    rig_open(&r, &f, TSAFE_SESSION_SEALED_PRIVATE, 0);
    tsafe_session_server *twice[2] = {r.s[1][0], r.s[1][0]};
    assert_int_equal(tsafe_session_server_work_batch(twice, 2, r.pool), TSAFE_E_ARG);
    tsafe_session_server *hole[2] = {r.s[1][0], NULL};
    assert_int_equal(tsafe_session_server_work_batch(hole, 2, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_session_server_work_batch(NULL, 1, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_session_server_work_batch(NULL, 0, NULL), TSAFE_OK);
    /* nothing pending: nothing runs, nothing fails */
    assert_int_equal(tsafe_session_server_work_batch(r.s[1], SESSIONS, r.pool), TSAFE_OK);
    for (size_t k = 0; k < SESSIONS; k++)
        assert_int_equal(tsafe_session_server_status(r.s[1][k]), TSAFE_OK);
    rig_close(&r);
    fixture_free(&f);
}

/* A token of more sites than the server's operand cache holds (64): the
 * first sites' operands must not be evicted before their products (they
 * were, on 2b82b56: wrong deltas for the first sites, no error). */
static void test_many_sites_one_token(void **state)
{
    (void)state;
    enum { N = 70, R = 4, O = 16 };
    tsafe_session_module m[N];
    char name[N][16];
    float *A[N], *B[N];
    for (int k = 0; k < N; k++) {
        snprintf(name[k], sizeof name[k], "m%d", k);
        A[k] = tsafe_test_rand_floats((size_t)R * D, 0.05);
        B[k] = tsafe_test_rand_floats((size_t)O * R, 0.05);
        m[k] = (tsafe_session_module){name[k], A[k], B[k], D, R, O, 1.0f};
    }
    const tsafe_session_protocol modes[2] = {TSAFE_SESSION_SEALED,
                                             TSAFE_SESSION_SEALED_PRIVATE};
    float *x = tsafe_test_rand_floats(D, 1.0);
    for (int p = 0; p < 2; p++) {
        tsafe_session_service_opts so = {.protocol = modes[p]};
        so.sealed.semi_honest = modes[p] == TSAFE_SESSION_SEALED;
        tsafe_session_service *svc = NULL;
        assert_int_equal(tsafe_session_service_create(&so, m, N, &svc), TSAFE_OK);
        tsafe_session_server *s = NULL;
        tsafe_session_client *c = NULL;
        tsafe_session_client_opts co = {.protocol = modes[p],
                                        .allow_no_dp = modes[p] == TSAFE_SESSION_SEALED};
        co.sealed = so.sealed;
        assert_int_equal(tsafe_session_server_create(svc, NULL, &s), TSAFE_OK);
        assert_int_equal(tsafe_session_client_create(&co, NULL, &c), TSAFE_OK);
        assert_int_equal(tsafe_session_pump(s, c), TSAFE_OK);
        static float delta[N][O];
        float *out[N];
        for (int k = 0; k < N; k++)
            out[k] = delta[k];
        assert_int_equal(tsafe_session_client_submit(c, NULL, 0, x, out), TSAFE_OK);
        assert_int_equal(tsafe_session_pump(s, c), TSAFE_OK);
        for (int k = 0; k < N; k++) {
            double want[O];
            tsafe_test_ref_delta(A[k], B[k], x, R, D, O, 1.0f, want);
            assert_true(tsafe_test_rel_l2(delta[k], want, O) < 0.05);
        }
        tsafe_session_server_free(s);
        tsafe_session_client_free(c);
        tsafe_session_service_free(svc);
    }
    free(x);
    for (int k = 0; k < N; k++) {
        free(A[k]);
        free(B[k]);
    }
}

int main(void)
{
    tsafe_test_rng_init("session_batch");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_sealed),
        cmocka_unit_test(test_batch_sealed_private),
        cmocka_unit_test(test_batch_plain),
        cmocka_unit_test(test_batch_args),
        cmocka_unit_test(test_many_sites_one_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
