/* Two-party HE-LoRA: client and server exchange only serialized bytes;
 * results match the plaintext reference; corrupted or mismatched messages
 * are refused with an error and change nothing; DP release and budget. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_two_party.h"
#include "support/tsafe_test_lora.h"
#include "support/tsafe_test_rng.h"



typedef struct {
    tsafe_lora_plan plan;
    tsafe_lora_client *client;
    tsafe_lora_server *server;
    tsafe_lora_site *site;
    float *A, *B, *x;
    uint32_t d, r, dout;
} party;

static void party_open(party *p, const tsafe_lora_plan *plan)
{
    memset(p, 0, sizeof *p);
    p->plan = *plan;
    p->d = plan->d_in;
    p->r = plan->rank;
    p->dout = p->d;
    p->A = tsafe_test_rand_floats((size_t)p->r * p->d, 0.05);
    p->B = tsafe_test_rand_floats((size_t)p->dout * p->r, 0.05);
    p->x = tsafe_test_rand_floats(p->d, 1.0);
    assert_int_equal(tsafe_lora_client_create(plan, NULL, &p->client), TSAFE_OK);
    assert_int_equal(tsafe_lora_server_create(plan, &p->server), TSAFE_OK);
    assert_int_equal(tsafe_lora_site_create(tsafe_lora_server_context(p->server), plan, p->A,
                                            p->B, p->dout, 2.0f, &p->site), TSAFE_OK);
}

static void party_close(party *p)
{
    tsafe_lora_site_free(p->site);
    tsafe_lora_server_free(p->server);
    tsafe_lora_client_free(p->client);
    free(p->A); free(p->B); free(p->x);
}

/* One full exchange; returns the relative L2 error of delta. */
static double exchange(party *p, tsafe_dp_session *dp, tsafe_lora_stats *st)
{
    uint8_t *req = NULL, *resp = NULL, *umsg = NULL;
    size_t req_len = 0, resp_len = 0, umsg_len = 0;
    const tsafe_lora_site *sites[1] = {p->site};
    float *u = malloc(p->r * sizeof *u), *delta = malloc(p->dout * sizeof *delta);
    float *us[1] = {u}, *ds[1] = {delta};
    uint32_t ranks[1] = {p->r};
    assert_int_equal(tsafe_lora_client_encrypt(p->client, p->x, &req, &req_len, st), TSAFE_OK);
    assert_int_equal(tsafe_lora_server_process(p->server, sites, 1, req, req_len, &resp,
                                               &resp_len, st), TSAFE_OK);
    assert_int_equal(tsafe_lora_client_decode(p->client, resp, resp_len, 1, ranks, us, st),
                     TSAFE_OK);
    assert_int_equal(tsafe_lora_client_release(p->client, 1, ranks, us, dp, &umsg, &umsg_len, st),
                     TSAFE_OK);
    assert_int_equal(tsafe_lora_server_apply(p->server, sites, 1, umsg, umsg_len, ds, st),
                     TSAFE_OK);
    double *want = malloc(p->dout * sizeof *want);
    tsafe_test_ref_delta(p->A, p->B, p->x, p->r, p->d, p->dout, 2.0, want);
    double e = tsafe_test_rel_l2(delta, want, p->dout);
    tsafe_lora_bytes_free(req);
    tsafe_lora_bytes_free(resp);
    tsafe_lora_bytes_free(umsg);
    free(u); free(delta); free(want);
    return e;
}

static void test_exchange_matches_plaintext(void **state)
{
    (void)state;
    static const uint32_t dims[] = {1536, 2048}, ranks[] = {8, 16, 32};
    for (int di = 0; di < 2; di++)
        for (int ri = 0; ri < 3; ri++)
            for (int pi = 0; pi < 2; pi++) {
                tsafe_lora_plan plan;
                if (pi == 0)
                    assert_int_equal(tsafe_lora_plan_preset("seed-n16384", dims[di], ranks[ri],
                                                            1.0, 0.05, &plan), TSAFE_OK);
                else
                    assert_int_equal(tsafe_lora_plan_auto(dims[di], ranks[ri], 1.0, 0.05, 1e-6,
                                                          &plan), TSAFE_OK);
                party p;
                party_open(&p, &plan);
                tsafe_lora_stats st;
                memset(&st, 0, sizeof st);
                double e = exchange(&p, NULL, &st);
                print_message("two-party %-16s d=%u r=%u: rel L2 %.3g, up %llu B, down %llu B\n",
                              plan.name, dims[di], ranks[ri], e,
                              (unsigned long long)st.bytes_up, (unsigned long long)st.bytes_down);
                assert_true(e <= 1e-5);
                assert_int_equal(st.he_ops, plan.n_batches);
                party_close(&p);
            }
}

/* process_into writes exactly the bytes process returns, into the
 * caller's buffer reused across requests; response_size predicts them;
 * a short buffer reports the size needed; a rejected request leaves
 * *out_len 0. */
static void test_process_into(void **state)
{
    (void)state;
    tsafe_lora_plan plan;
    assert_int_equal(tsafe_lora_plan_auto(512, 16, 1.0, 0.05, 1e-6, &plan), TSAFE_OK);
    party p;
    party_open(&p, &plan);
    const tsafe_lora_site *sites[2] = {p.site, p.site};
    size_t need = 0;
    assert_int_equal(tsafe_lora_server_response_size(p.server, sites, 2, &need), TSAFE_OK);
    uint8_t *buf = malloc(need + 16);
    assert_non_null(buf);
    for (int round = 0; round < 3; round++) {
        uint8_t *req = NULL, *resp = NULL;
        size_t req_len = 0, resp_len = 0, len = 0;
        assert_int_equal(tsafe_lora_client_encrypt(p.client, p.x, &req, &req_len, NULL),
                         TSAFE_OK);
        assert_int_equal(tsafe_lora_server_process(p.server, sites, 2, req, req_len, &resp,
                                                   &resp_len, NULL), TSAFE_OK);
        assert_int_equal(resp_len, need);
        assert_int_equal(tsafe_lora_server_process_into(p.server, sites, 2, req, req_len, buf,
                                                        need - 1, &len, NULL),
                         TSAFE_E_BUFFER_SMALL);
        assert_int_equal(len, need);
        memset(buf, 0xA5, need + 16);
        assert_int_equal(tsafe_lora_server_process_into(p.server, sites, 2, req, req_len, buf,
                                                        need + 16, &len, NULL), TSAFE_OK);
        assert_int_equal(len, need);
        assert_memory_equal(buf, resp, need);
        for (size_t i = need; i < need + 16; i++) /* nothing written past the response */
            assert_int_equal(buf[i], 0xA5);
        /* the response decodes like any other */
        float u[2][16];
        float *us[2] = {u[0], u[1]};
        uint32_t ranks[2] = {p.r, p.r};
        assert_int_equal(tsafe_lora_client_decode(p.client, buf, len, 2, ranks, us, NULL),
                         TSAFE_OK);
        assert_memory_equal(u[0], u[1], p.r * sizeof(float));
        assert_int_not_equal(tsafe_lora_server_process_into(p.server, sites, 2, req,
                                                            req_len - 1, buf, need, &len, NULL),
                             TSAFE_OK);
        assert_int_equal(len, 0);
        tsafe_lora_bytes_free(req);
        tsafe_lora_bytes_free(resp);
    }
    free(buf);
    party_close(&p);
}

/* Corrupt every region of each message: always an error, never a crash,
 * and the delta buffer is untouched on a rejected u' message. */
static void test_corrupted_messages(void **state)
{
    (void)state;
    tsafe_lora_plan plan;
    assert_int_equal(tsafe_lora_plan_auto(256, 8, 1.0, 0.05, 1e-6, &plan), TSAFE_OK);
    party p;
    party_open(&p, &plan);
    const tsafe_lora_site *sites[1] = {p.site};
    uint32_t ranks[1] = {p.r}, bad_ranks[1] = {p.r + 1};
    float u[8], delta[256];
    float *us[1] = {u}, *ds[1] = {delta};
    uint8_t *req = NULL, *resp = NULL, *umsg = NULL, *out = NULL;
    size_t req_len, resp_len, umsg_len, out_len;
    assert_int_equal(tsafe_lora_client_encrypt(p.client, p.x, &req, &req_len, NULL), TSAFE_OK);
    assert_int_equal(tsafe_lora_server_process(p.server, sites, 1, req, req_len, &resp,
                                               &resp_len, NULL), TSAFE_OK);
    assert_int_equal(tsafe_lora_client_decode(p.client, resp, resp_len, 1, ranks, us, NULL),
                     TSAFE_OK);
    assert_int_equal(tsafe_lora_client_release(p.client, 1, ranks, us, NULL, &umsg, &umsg_len,
                                               NULL), TSAFE_OK);
    /* truncations */
    for (size_t t = 0; t < req_len; t += 1 + t / 16) {
        assert_int_not_equal(tsafe_lora_server_process(p.server, sites, 1, req, t, &out,
                                                       &out_len, NULL), TSAFE_OK);
        assert_null(out);
    }
    for (size_t t = 0; t < resp_len; t += 1 + t / 16)
        assert_int_not_equal(tsafe_lora_client_decode(p.client, resp, t, 1, ranks, us, NULL),
                             TSAFE_OK);
    for (size_t t = 0; t < umsg_len; t++)
        assert_int_not_equal(tsafe_lora_server_apply(p.server, sites, 1, umsg, t, ds, NULL),
                             TSAFE_OK);
    /* header and framing bytes */
    for (size_t i = 0; i < 16; i++) {
        uint8_t *c = malloc(req_len);
        memcpy(c, req, req_len);
        c[i] ^= 0x5a;
        assert_int_not_equal(tsafe_lora_server_process(p.server, sites, 1, c, req_len, &out,
                                                       &out_len, NULL), TSAFE_OK);
        free(c);
    }
    /* a u' message with a NaN or a wrong rank leaves delta untouched */
    for (size_t i = 0; i < 256; i++) delta[i] = 7.0f;
    uint8_t *c = malloc(umsg_len);
    memcpy(c, umsg, umsg_len);
    memset(c + umsg_len - 4, 0xff, 4); /* last float -> NaN */
    assert_int_equal(tsafe_lora_server_apply(p.server, sites, 1, c, umsg_len, ds, NULL),
                     TSAFE_E_FORMAT);
    memcpy(c, umsg, umsg_len);
    c[12] ^= 1; /* rank field */
    assert_int_equal(tsafe_lora_server_apply(p.server, sites, 1, c, umsg_len, ds, NULL),
                     TSAFE_E_FORMAT);
    for (size_t i = 0; i < 256; i++) assert_true(delta[i] == 7.0f);
    free(c);
    /* wrong message kind where another is expected */
    assert_int_equal(tsafe_lora_server_process(p.server, sites, 1, umsg, umsg_len, &out,
                                               &out_len, NULL), TSAFE_E_KIND);
    assert_int_equal(tsafe_lora_client_decode(p.client, req, req_len, 1, ranks, us, NULL),
                     TSAFE_E_KIND);
    /* mismatched rank expectations and site counts */
    assert_int_equal(tsafe_lora_client_decode(p.client, resp, resp_len, 1, bad_ranks, us, NULL),
                     TSAFE_E_FORMAT);
    assert_int_equal(tsafe_lora_client_decode(p.client, resp, resp_len, 2, ranks, us, NULL),
                     TSAFE_E_FORMAT);
    /* a request from a client of other parameters: fingerprint mismatch */
    tsafe_lora_plan other;
    assert_int_equal(tsafe_lora_plan_preset("seed-n16384", 256, 8, 1.0, 0.05, &other), TSAFE_OK);
    tsafe_lora_client *oc = NULL;
    uint8_t *oreq = NULL;
    size_t oreq_len;
    assert_int_equal(tsafe_lora_client_create(&other, NULL, &oc), TSAFE_OK);
    assert_int_equal(tsafe_lora_client_encrypt(oc, p.x, &oreq, &oreq_len, NULL), TSAFE_OK);
    assert_int_equal(tsafe_lora_server_process(p.server, sites, 1, oreq, oreq_len, &out,
                                               &out_len, NULL), TSAFE_E_PARAMS_MISMATCH);
    tsafe_lora_bytes_free(oreq);
    tsafe_lora_client_free(oc);
    tsafe_lora_bytes_free(req);
    tsafe_lora_bytes_free(resp);
    tsafe_lora_bytes_free(umsg);
    party_close(&p);
}

static void test_dp_release(void **state)
{
    (void)state;
    tsafe_lora_plan plan;
    assert_int_equal(tsafe_lora_plan_auto(512, 8, 1.0, 0.05, 1e-6, &plan), TSAFE_OK);
    party p;
    party_open(&p, &plan);
    tsafe_dp_params dpp;
    memset(&dpp, 0, sizeof dpp);
    dpp.clip_norm = 10.0;
    dpp.eps = 1.0;
    dpp.delta = 1e-6;
    dpp.eps_total = 3.0;
    dpp.delta_total = 1e-5;
    tsafe_dp_session *dp = NULL;
    assert_int_equal(tsafe_dp_session_create(&dpp, &dp), TSAFE_OK);
    tsafe_dp_stats ds;
    assert_int_equal(tsafe_dp_session_stats(dp, &ds), TSAFE_OK);
    uint64_t allowed = ds.releases_left;
    assert_true(allowed >= 1);
    /* with noise the result differs from the exact one, until the budget ends */
    for (uint64_t i = 0; i < allowed; i++) {
        double e = exchange(&p, dp, NULL);
        assert_true(e > 1e-5);
    }
    uint8_t *req = NULL, *resp = NULL, *umsg = NULL;
    size_t req_len, resp_len, umsg_len;
    const tsafe_lora_site *sites[1] = {p.site};
    uint32_t ranks[1] = {p.r};
    float u[8], *us[1] = {u};
    assert_int_equal(tsafe_lora_client_encrypt(p.client, p.x, &req, &req_len, NULL), TSAFE_OK);
    assert_int_equal(tsafe_lora_server_process(p.server, sites, 1, req, req_len, &resp,
                                               &resp_len, NULL), TSAFE_OK);
    assert_int_equal(tsafe_lora_client_decode(p.client, resp, resp_len, 1, ranks, us, NULL),
                     TSAFE_OK);
    assert_int_equal(tsafe_lora_client_release(p.client, 1, ranks, us, dp, &umsg, &umsg_len,
                                               NULL), TSAFE_E_BUDGET);
    assert_null(umsg);
    tsafe_lora_bytes_free(req);
    tsafe_lora_bytes_free(resp);
    tsafe_dp_session_free(dp);
    party_close(&p);
}

int main(void)
{
    tsafe_test_rng_init("lora_two_party");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange_matches_plaintext),
        cmocka_unit_test(test_corrupted_messages),
        cmocka_unit_test(test_process_into),
        cmocka_unit_test(test_dp_release),
    };
    return cmocka_run_group_tests_name("lora_two_party", tests, NULL, NULL);
}
