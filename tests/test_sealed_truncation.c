/* Every sealed message cut short at every byte is refused with exactly
 * TSAFE_E_TRUNCATED, and one byte too long with exactly TSAFE_E_FORMAT, by
 * the side that reads it (issue 24). The sweep runs over whatever
 * messages the protocol produces for one token in each mode (hello, query,
 * response 1, share, final message): no offsets of the layout are written
 * here, so it follows the format as it changes. A refused response,
 * share or final message ends its session (issue 19); the test puts the
 * receiver back where it was after each cut (white-box for the client,
 * hello + query again for the server), then the whole message is accepted.
 * Prefixes near the end (where an off-by-one reader would step past the
 * end) are handed over in buffers of exactly their length, so ASan builds
 * also see an over-read. Also: a share value outside [0, t) is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../libtensafe-lora/src/sealed/sealed_internal.h"

#include "tensafe/lora_sealed.h"
#include "support/tsafe_test_rng.h"

enum { D_IN = 48, RANK = 4, D_OUT = 8, EXACT_TAIL = 64 };

typedef struct {
    tsafe_sealed_plan plan;
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    tsafe_sealed_site *site;
    const uint8_t *hello, *query; /* to re-open the server's token */
    size_t hello_len, query_len;
} world;

static const uint32_t k_rank = RANK, k_dout = D_OUT;

/* One receiver of a message. */
typedef tsafe_status (*receive_fn)(world *w, const uint8_t *msg, size_t len, uint8_t **out,
                                   size_t *out_len);

static tsafe_status recv_hello(world *w, const uint8_t *m, size_t l, uint8_t **o, size_t *ol)
{
    *o = NULL, *ol = 0;
    return tsafe_sealed_server_accept(w->s, m, l);
}

static tsafe_status recv_query(world *w, const uint8_t *m, size_t l, uint8_t **o, size_t *ol)
{
    const tsafe_sealed_site *ss = w->site;
    return tsafe_sealed_server_round1(w->s, &ss, 1, m, l, o, ol, NULL);
}

static tsafe_status recv_response1(world *w, const uint8_t *m, size_t l, uint8_t **o,
                                   size_t *ol)
{
    tsafe_status st =
        tsafe_sealed_client_respond(w->c, m, l, 1, &k_rank, &k_dout, NULL, 1, o, ol, NULL);
    if (st != TSAFE_OK)
        w->c->state = QUERIED; /* undo the session's end: the next cut */
    return st;
}

static tsafe_status recv_share(world *w, const uint8_t *m, size_t l, uint8_t **o, size_t *ol)
{
    const tsafe_sealed_site *ss = w->site;
    tsafe_status st = tsafe_sealed_server_round2(w->s, &ss, 1, m, l, o, ol, NULL);
    if (st != TSAFE_OK) { /* the session ended: open it again, round 1 again */
        uint8_t *r;
        size_t rl;
        tsafe_sealed_server_free(w->s);
        assert_int_equal(tsafe_sealed_server_create(&w->plan, &w->s), TSAFE_OK);
        assert_int_equal(tsafe_sealed_server_accept(w->s, w->hello, w->hello_len), TSAFE_OK);
        assert_int_equal(tsafe_sealed_server_round1(w->s, &ss, 1, w->query, w->query_len, &r,
                                                    &rl, NULL), TSAFE_OK);
        tsafe_lora_bytes_free(r);
    }
    return st;
}

static tsafe_status recv_final(world *w, const uint8_t *m, size_t l, uint8_t **o, size_t *ol)
{
    static float d[D_OUT];
    float *dp = d;
    *o = NULL, *ol = 0;
    tsafe_status st = tsafe_sealed_client_finish(w->c, m, l, 1, &k_dout, &dp, NULL);
    if (st != TSAFE_OK)
        w->c->state = RESPONDED; /* undo the session's end: the next cut */
    return st;
}

/* Every prefix of msg refused with TSAFE_E_TRUNCATED, msg plus a byte with
 * TSAFE_E_FORMAT; then msg itself delivered (its answer in *out).
 * stride > 1: every prefix in the first and last SWEEP_EDGE bytes (the
 * headers, and each length field near the end), every stride-th between
 * -- for the share, whose every refusal ends the server's session and
 * costs a new server, hello and round 1 (a checked plan's share is 56 KB
 * of ciphertexts read by one length check). */
enum { SWEEP_EDGE = 4096 };
static void sweep(world *w, const char *what, receive_fn fn, const uint8_t *msg, size_t len,
                  size_t stride, uint8_t **out, size_t *out_len)
{
    uint8_t *o;
    size_t ol;
    size_t wrong = 0, first_wrong = 0, tried = 0;
    tsafe_status first_st = TSAFE_OK;
    for (size_t cut = 0; cut < len; cut++) {
        if (stride > 1 && cut >= SWEEP_EDGE && cut + SWEEP_EDGE + EXACT_TAIL < len &&
            cut % stride)
            continue;
        tried++;
        uint8_t *exact = NULL;
        const uint8_t *m = msg;
        if (cut + EXACT_TAIL >= len) { /* a buffer of exactly cut bytes */
            exact = malloc(cut ? cut : 1);
            assert_non_null(exact);
            memcpy(exact, msg, cut);
            m = exact;
        }
        tsafe_status st = fn(w, m, cut, &o, &ol);
        free(exact);
        if (st == TSAFE_OK)
            tsafe_lora_bytes_free(o);
        if (st != TSAFE_E_TRUNCATED && wrong++ == 0) {
            first_wrong = cut;
            first_st = st;
        }
    }
    if (wrong)
        print_message("%s (%zu bytes): %zu prefixes not refused as truncated, the first "
                      "%zu bytes long (%s)\n", what, len, wrong, first_wrong,
                      tsafe_strerror(first_st));
    assert_int_equal(wrong, 0);
    uint8_t *longer = malloc(len + 1);
    assert_non_null(longer);
    memcpy(longer, msg, len);
    longer[len] = (uint8_t)tsafe_test_below(256);
    tsafe_status st = fn(w, longer, len + 1, &o, &ol);
    free(longer);
    if (st == TSAFE_OK)
        tsafe_lora_bytes_free(o);
    if (st != TSAFE_E_FORMAT)
        print_message("%s one byte too long: %s\n", what, tsafe_strerror(st));
    assert_int_equal(st, TSAFE_E_FORMAT);
    assert_int_equal(fn(w, msg, len, out, out_len), TSAFE_OK);
    printf("# %s: %zu bytes, %s cut refused as truncated (%zu tried)\n", what, len,
           stride > 1 ? "every tried" : "every", tried);
}

/* A random adapter and x, a client and a server (no hello yet). */
static const float *world_open(world *w, tsafe_sealed_mode mode)
{
    static float A[RANK * D_IN], B[D_OUT * RANK], x[D_IN];
    for (size_t i = 0; i < RANK * D_IN; i++)
        A[i] = tsafe_test_uniform_float(-1, 1);
    for (size_t i = 0; i < D_OUT * RANK; i++)
        B[i] = tsafe_test_uniform_float(-1, 1);
    for (size_t i = 0; i < D_IN; i++)
        x[i] = tsafe_test_uniform_float(-1, 1);
    /* the opt-in sealed mode needs (sealed-private ignores it) */
    const tsafe_sealed_opts o = {.semi_honest = 1};
    assert_int_equal(tsafe_sealed_plan_derive(mode, D_IN, RANK, D_OUT, &o, &w->plan), TSAFE_OK);
    assert_int_equal(tsafe_sealed_site_create(&w->plan, A, B, RANK, D_OUT, 1.0f, &w->site),
                     TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_create(&w->plan, NULL, &w->c), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(&w->plan, &w->s), TSAFE_OK);
    return x;
}

static void world_close(world *w)
{
    tsafe_sealed_client_free(w->c);
    tsafe_sealed_server_free(w->s);
    tsafe_sealed_site_free(w->site);
}

static void sweep_token(tsafe_sealed_mode mode)
{
    world w;
    const float *x = world_open(&w, mode);
    uint8_t *h, *q, *r1, *sh, *r2, *none;
    size_t hl, ql, r1l, shl, r2l, nl;
    assert_int_equal(tsafe_sealed_client_hello(w.c, &h, &hl), TSAFE_OK);
    sweep(&w, "hello", recv_hello, h, hl, 1, &none, &nl);
    assert_int_equal(tsafe_sealed_client_query(w.c, x, &q, &ql, NULL), TSAFE_OK);
    w.hello = h, w.hello_len = hl, w.query = q, w.query_len = ql;
    sweep(&w, "query", recv_query, q, ql, 1, &r1, &r1l);
    sweep(&w, "response 1", recv_response1, r1, r1l, 1, &sh, &shl);
    sweep(&w, mode == TSAFE_SEALED ? "share" : "encrypted share", recv_share, sh, shl, 13, &r2,
          &r2l);
    sweep(&w, mode == TSAFE_SEALED ? "delta" : "response 2", recv_final, r2, r2l, 1, &none, &nl);
    tsafe_lora_bytes_free(h);
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(r1);
    tsafe_lora_bytes_free(sh);
    tsafe_lora_bytes_free(r2);
    world_close(&w);
}

static void private_messages(void **state)
{
    (void)state;
    sweep_token(TSAFE_SEALED_PRIVATE);
}

static void sealed_messages(void **state)
{
    (void)state;
    sweep_token(TSAFE_SEALED);
}

/* sealed: a share value must be a residue mod t (the last RANK u64 of the
 * share message are the values; read from the end). */
static void share_out_of_range(void **state)
{
    (void)state;
    world w;
    const float *x = world_open(&w, TSAFE_SEALED);
    uint8_t *h, *q, *r1, *sh, *r2;
    size_t hl, ql, r1l, shl, r2l;
    assert_int_equal(tsafe_sealed_client_hello(w.c, &h, &hl), TSAFE_OK);
    assert_int_equal(recv_hello(&w, h, hl, &r2, &r2l), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_query(w.c, x, &q, &ql, NULL), TSAFE_OK);
    w.hello = h, w.hello_len = hl, w.query = q, w.query_len = ql;
    assert_int_equal(recv_query(&w, q, ql, &r1, &r1l), TSAFE_OK);
    assert_int_equal(recv_response1(&w, r1, r1l, &sh, &shl), TSAFE_OK);
    uint64_t t = 1ull << w.plan.r1.t_bits;
    uint32_t k = (uint32_t)tsafe_test_below(RANK);
    uint8_t *v = sh + shl - 8u * RANK + 8u * k, keep[8];
    memcpy(keep, v, 8);
    uint64_t bad = t + tsafe_test_below(t);
    for (int b = 0; b < 8; b++)
        v[b] = (uint8_t)(bad >> (8 * b));
    assert_int_equal(recv_share(&w, sh, shl, &r2, &r2l), TSAFE_E_FORMAT);
    memcpy(v, keep, 8);
    assert_int_equal(recv_share(&w, sh, shl, &r2, &r2l), TSAFE_OK);
    tsafe_lora_bytes_free(h);
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(r1);
    tsafe_lora_bytes_free(sh);
    tsafe_lora_bytes_free(r2);
    world_close(&w);
}

int main(void)
{
    tsafe_test_rng_init("sealed_truncation");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(private_messages),
        cmocka_unit_test(sealed_messages),
        cmocka_unit_test(share_out_of_range),
    };
    return cmocka_run_group_tests_name("sealed_truncation", tests, NULL, NULL);
}
