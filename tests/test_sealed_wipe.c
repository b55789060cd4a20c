/* White-box wipe checks of the sealed client and server (issue 24): every
 * buffer they keep between calls that held x, its quantized copy, shares,
 * masks or decrypted values is all zeros once the call that used it
 * returns -- on success and on the error exits after the buffer was
 * written. What this proves: the long-lived buffers hold no copy. It says
 * nothing about registers, the stack or freed heap blocks (the same limit
 * as test_encode's scratch check). The client's struct is in
 * sealed_internal.h; the server's buffers come from
 * tsafe_sealed_server_secrets_. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_sealed.h"
#include "support/tsafe_test_rng.h"
#include "../libtensafe-lora/src/sealed/sealed_internal.h"

enum { D_IN = 96, RANK = 8, D_OUT = 600 }; /* d_out > rows: several round-2 blocks */

static size_t nonzero(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    size_t nz = 0;
    for (size_t i = 0; b && i < bytes; i++)
        nz += b[i] != 0;
    return nz;
}

static void assert_wiped(const char *what, const char *after, const void *p, size_t bytes)
{
    size_t nz = nonzero(p, bytes);
    if (nz)
        print_message("after %s: %s holds %zu non-zero bytes of %zu\n", after, what, nz, bytes);
    assert_int_equal(nz, 0);
}

static void client_wiped(const tsafe_sealed_client *c, const char *after)
{
    size_t n = tsafe_bfv_context_n(c->c1);
    assert_wiped("client xq (x quantized)", after, c->xq, c->plan.d_in * sizeof *c->xq);
    assert_wiped("client z (shares)", after, c->z, n * sizeof *c->z);
    assert_wiped("client m (decrypted values)", after, c->m, n * sizeof *c->m);
}

/* what = NULL: every buffer wiped; else only that one is checked to hold
 * something (the hook sees the real buffers). */
static void server_wiped(const tsafe_sealed_server *s, const char *after)
{
    tsafe_sealed_secret sec[16];
    size_t k = tsafe_sealed_server_secrets_(s, sec, 16);
    assert_true(k >= 2); /* at least R and the sealing masks */
    for (size_t i = 0; i < k; i++)
        assert_wiped(sec[i].name, after, sec[i].p, sec[i].bytes);
}

static size_t server_secret_bytes(const tsafe_sealed_server *s, const char *name)
{
    tsafe_sealed_secret sec[16];
    size_t k = tsafe_sealed_server_secrets_(s, sec, 16);
    for (size_t i = 0; i < k; i++)
        if (strcmp(sec[i].name, name) == 0)
            return nonzero(sec[i].p, sec[i].bytes);
    return 0;
}

typedef struct {
    tsafe_sealed_plan plan;
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    tsafe_sealed_site *site;
} world;

/* 1: sealed-private plans leave out their checked shares
 * (opts.unchecked_shares; by default they check them) */
static int g_unchecked;

static void world_open(world *w, tsafe_sealed_mode mode)
{
    static float A[RANK * D_IN], B[D_OUT * RANK];
    for (size_t i = 0; i < RANK * D_IN; i++)
        A[i] = tsafe_test_uniform_float(-1, 1);
    for (size_t i = 0; i < D_OUT * RANK; i++)
        B[i] = tsafe_test_uniform_float(-1, 1);
    /* the opt-in sealed mode needs (sealed-private ignores it) */
    const tsafe_sealed_opts o = {.semi_honest = 1, .unchecked_shares = (uint32_t)g_unchecked};
    assert_int_equal(tsafe_sealed_plan_derive(mode, D_IN, RANK, D_OUT, &o, &w->plan), TSAFE_OK);
    assert_int_equal(tsafe_sealed_site_create(&w->plan, A, B, RANK, D_OUT, 1.0f, &w->site),
                     TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_create(&w->plan, NULL, &w->c), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(&w->plan, &w->s), TSAFE_OK);
    uint8_t *h;
    size_t hl;
    assert_int_equal(tsafe_sealed_client_hello(w->c, &h, &hl), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(w->s, h, hl), TSAFE_OK);
    tsafe_lora_bytes_free(h);
}

static void world_close(world *w)
{
    tsafe_sealed_client_free(w->c);
    tsafe_sealed_server_free(w->s);
    tsafe_sealed_site_free(w->site);
}

/* Tokens through every call, wipes checked after each. Token 1 fails its
 * respond (response cut short by one byte: the blocks before the cut were
 * decrypted), token 2 its round 2 (share cut short), token 3 its finish;
 * a failure ends the session (issue 19), so each of them is followed by
 * a new session. prepare: the server prepares round 2 between the rounds. */
static void tokens_leave_nothing(tsafe_sealed_mode mode, int prepare)
{
    world w;
    world_open(&w, mode);
    const tsafe_sealed_site *ss = w.site;
    const uint32_t rank = RANK, d_out = D_OUT;
    static float x[D_IN], d[D_OUT];
    float *dp = d;
    for (int tok = 0; tok < 4; tok++) {
        if (tok > 1) { /* the previous token ended its session */
            world_close(&w);
            world_open(&w, mode);
            ss = w.site;
        }
        for (int j = 0; j < D_IN; j++)
            x[j] = tsafe_test_uniform_float(-1, 1);
        uint8_t *q, *r1, *sh, *r2;
        size_t ql, r1l, shl, r2l;
        assert_int_equal(tsafe_sealed_client_query(w.c, x, &q, &ql, NULL), TSAFE_OK);
        client_wiped(w.c, "query");
        assert_int_equal(tsafe_sealed_server_round1(w.s, &ss, 1, q, ql, &r1, &r1l, NULL),
                         TSAFE_OK);
        assert_true(server_secret_bytes(w.s, "R") > 0); /* the hook sees the masks */
        if (w.plan.checks) /* and a checked plan's W */
            assert_true(server_secret_bytes(w.s, "W") > 0);
        if (prepare)
            assert_int_equal(tsafe_sealed_server_prepare_round2(w.s, &ss, 1, NULL), TSAFE_OK);
        if (tok == 1) {
            assert_int_not_equal(tsafe_sealed_client_respond(w.c, r1, r1l - 1, 1, &rank, &d_out,
                                                             NULL, 1, &sh, &shl, NULL),
                                 TSAFE_OK);
            client_wiped(w.c, "a refused respond");
            assert_int_equal(tsafe_sealed_client_failed(w.c), 1);
            tsafe_lora_bytes_free(q);
            tsafe_lora_bytes_free(r1);
            continue;
        }
        assert_int_equal(tsafe_sealed_client_respond(w.c, r1, r1l, 1, &rank, &d_out, NULL, 1, &sh,
                                                     &shl, NULL), TSAFE_OK);
        client_wiped(w.c, "respond");
        if (tok == 2) {
            assert_int_not_equal(tsafe_sealed_server_round2(w.s, &ss, 1, sh, shl - 1, &r2, &r2l,
                                                            NULL),
                                 TSAFE_OK);
            server_wiped(w.s, "a refused round 2");
            tsafe_lora_bytes_free(q);
            tsafe_lora_bytes_free(r1);
            tsafe_lora_bytes_free(sh);
            continue;
        }
        assert_int_equal(tsafe_sealed_server_round2(w.s, &ss, 1, sh, shl, &r2, &r2l, NULL),
                         TSAFE_OK);
        server_wiped(w.s, "round 2");
        if (tok == 3 && mode == TSAFE_SEALED_PRIVATE) {
            assert_int_not_equal(tsafe_sealed_client_finish(w.c, r2, r2l - 1, 1, &d_out, &dp,
                                                            NULL),
                                 TSAFE_OK);
            client_wiped(w.c, "a refused finish");
            tsafe_lora_bytes_free(q);
            tsafe_lora_bytes_free(r1);
            tsafe_lora_bytes_free(sh);
            tsafe_lora_bytes_free(r2);
            continue;
        }
        assert_int_equal(tsafe_sealed_client_finish(w.c, r2, r2l, 1, &d_out, &dp, NULL),
                         TSAFE_OK);
        client_wiped(w.c, "finish");
        tsafe_lora_bytes_free(q);
        tsafe_lora_bytes_free(r1);
        tsafe_lora_bytes_free(sh);
        tsafe_lora_bytes_free(r2);
    }
    world_close(&w);
}

static void private_backend_prepared(void **state)
{
    (void)state;
    tokens_leave_nothing(TSAFE_SEALED_PRIVATE, 1);
}

static void private_backend(void **state)
{
    (void)state;
    tokens_leave_nothing(TSAFE_SEALED_PRIVATE, 0);
}

static void private_unchecked(void **state)
{
    (void)state;
    g_unchecked = 1;
    tokens_leave_nothing(TSAFE_SEALED_PRIVATE, 0);
    g_unchecked = 0;
}

static void sealed_backend(void **state)
{
    (void)state;
    tokens_leave_nothing(TSAFE_SEALED, 0);
}

int main(void)
{
    tsafe_test_rng_init("sealed_wipe");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(private_backend_prepared),
        cmocka_unit_test(private_backend),
        cmocka_unit_test(sealed_backend),
        cmocka_unit_test(private_unchecked),
    };
    return cmocka_run_group_tests_name("sealed_wipe", tests, NULL, NULL);
}
