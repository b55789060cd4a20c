/* NULL and out-of-range arguments to every function of tensafe/lora_two_party.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_lora_bytes_free)
{
    tsafe_lora_bytes_free(NULL);
}

CHECK_FN(tsafe_lora_client_create)
{
    tsafe_lora_client *c = NULL;
    tsafe_lora_plan bad = f->plan;
    ERR(tsafe_lora_client_create(NULL, NULL, &c));
    ERR(tsafe_lora_client_create(&f->plan, NULL, NULL));
    bad.params.n_primes = 0;
    ERR(tsafe_lora_client_create(&bad, NULL, &c));
    bad = f->plan;
    bad.cols = 0;
    ERR(tsafe_lora_client_create(&bad, NULL, &c));
    assert_null(c);
}

CHECK_FN(tsafe_lora_client_free)
{
    tsafe_lora_client_free(NULL);
}

CHECK_FN(tsafe_lora_client_encrypt)
{
    uint8_t *req = NULL;
    size_t len = 0;
    float xbig[LD];
    memcpy(xbig, f->x, sizeof xbig);
    xbig[0] = 1e9f;
    ERR(tsafe_lora_client_encrypt(NULL, f->x, &req, &len, NULL));
    ERR(tsafe_lora_client_encrypt(f->client, NULL, &req, &len, NULL));
    ERR(tsafe_lora_client_encrypt(f->client, f->x, NULL, &len, NULL));
    ERR(tsafe_lora_client_encrypt(f->client, f->x, &req, NULL, NULL));
    ERR(tsafe_lora_client_encrypt(f->client, xbig, &req, &len, NULL));
    xbig[0] = NAN;
    ERR(tsafe_lora_client_encrypt(f->client, xbig, &req, &len, NULL));
    assert_null(req);
}

CHECK_FN(tsafe_lora_client_decode)
{
    float *us[1] = {f->u}, *nulls[1] = {NULL};
    uint32_t ranks[1] = {LR}, bad_ranks[1] = {LR + 1}, zero[1] = {0};
    ERR(tsafe_lora_client_decode(NULL, f->resp, f->resp_len, 1, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, NULL, f->resp_len, 1, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, NULL, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, ranks, NULL, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, ranks, nulls, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, 0, 1, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len - 1, 1, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 0, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 2, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, SIZE_MAX, ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, bad_ranks, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, zero, us, NULL));
    ERR(tsafe_lora_client_decode(f->client, f->req, f->req_len, 1, ranks, us, NULL));
}

CHECK_FN(tsafe_lora_client_release)
{
    float u[LR] = {0.1f, 0.2f, 0.3f, 0.4f};
    float *us[1] = {u}, *nulls[1] = {NULL};
    uint32_t ranks[1] = {LR}, zero[1] = {0};
    uint8_t *msg = NULL;
    size_t len = 0;
    ERR(tsafe_lora_client_release(NULL, 1, ranks, us, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, NULL, us, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, ranks, NULL, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, ranks, nulls, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, ranks, us, NULL, NULL, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, ranks, us, NULL, &msg, NULL, NULL));
    ERR(tsafe_lora_client_release(f->client, 0, ranks, us, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, SIZE_MAX, ranks, us, NULL, &msg, &len, NULL));
    ERR(tsafe_lora_client_release(f->client, 1, zero, us, NULL, &msg, &len, NULL));
    /* NOTE: a NaN in u is released as is (the server refuses it on apply) */
    assert_null(msg);
}

CHECK_FN(tsafe_lora_server_create)
{
    tsafe_lora_server *s = NULL;
    tsafe_lora_plan bad = f->plan;
    ERR(tsafe_lora_server_create(NULL, &s));
    ERR(tsafe_lora_server_create(&f->plan, NULL));
    bad.params.log_n = 99;
    ERR(tsafe_lora_server_create(&bad, &s));
    assert_null(s);
}

CHECK_FN(tsafe_lora_server_free)
{
    tsafe_lora_server_free(NULL);
}

CHECK_FN(tsafe_lora_server_context)
{
    assert_null(tsafe_lora_server_context(NULL));
}

CHECK_FN(tsafe_lora_server_process)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    uint8_t *resp = NULL;
    size_t len = 0;
    ERR(tsafe_lora_server_process(NULL, sites, 1, f->req, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, NULL, 1, f->req, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, nulls, 1, f->req, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 0, f->req, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, SIZE_MAX, f->req, f->req_len, &resp, &len,
                                  NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, NULL, f->req_len, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->req, 0, &resp, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->req, f->req_len - 1, &resp, &len,
                                  NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->req, f->req_len, NULL, &len, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->req, f->req_len, &resp, NULL, NULL));
    ERR(tsafe_lora_server_process(f->server, sites, 1, f->resp, f->resp_len, &resp, &len,
                                  NULL));
    assert_null(resp);
}

CHECK_FN(tsafe_lora_server_response_size)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    size_t n = 1;
    ERR(tsafe_lora_server_response_size(NULL, sites, 1, &n));
    ERR(tsafe_lora_server_response_size(f->server, NULL, 1, &n));
    ERR(tsafe_lora_server_response_size(f->server, nulls, 1, &n));
    ERR(tsafe_lora_server_response_size(f->server, sites, 0, &n));
    ERR(tsafe_lora_server_response_size(f->server, sites, SIZE_MAX, &n));
    ERR(tsafe_lora_server_response_size(f->server, sites, 1, NULL));
    assert_int_equal(n, 0);
    OK(tsafe_lora_server_response_size(f->server, sites, 1, &n));
    assert_int_equal(n, f->resp_len);
}

CHECK_FN(tsafe_lora_server_process_into)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    size_t cap = f->resp_len, len = 1;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    ERR(tsafe_lora_server_process_into(NULL, sites, 1, f->req, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, NULL, 1, f->req, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, nulls, 1, f->req, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 0, f->req, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, SIZE_MAX, f->req, f->req_len, buf,
                                       cap, &len, NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, NULL, f->req_len, buf, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->req, 0, buf, cap, &len, NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->req, f->req_len - 1, buf, cap,
                                       &len, NULL));
    assert_int_equal(len, 0);
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->req, f->req_len, NULL, cap, &len,
                                       NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->req, f->req_len, buf, cap, NULL,
                                       NULL));
    IS(TSAFE_E_BUFFER_SMALL, tsafe_lora_server_process_into(f->server, sites, 1, f->req,
                                                            f->req_len, buf, cap - 1, &len,
                                                            NULL));
    assert_int_equal(len, cap); /* the size needed */
    IS(TSAFE_E_BUFFER_SMALL, tsafe_lora_server_process_into(f->server, sites, 1, f->req,
                                                            f->req_len, buf, 0, &len, NULL));
    ERR(tsafe_lora_server_process_into(f->server, sites, 1, f->resp, f->resp_len, buf, cap,
                                       &len, NULL));
    free(buf);
}

CHECK_FN(tsafe_lora_server_apply)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    float *ds[1] = {f->delta}, *nullds[1] = {NULL};
    ERR(tsafe_lora_server_apply(NULL, sites, 1, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, NULL, 1, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, nulls, 1, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 0, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, SIZE_MAX, f->umsg, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, NULL, f->umsg_len, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->umsg, 0, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->umsg, f->umsg_len - 1, ds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->umsg, f->umsg_len, NULL, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->umsg, f->umsg_len, nullds, NULL));
    ERR(tsafe_lora_server_apply(f->server, sites, 1, f->req, f->req_len, ds, NULL));
}

CHECK_FN(tsafe_lora_engine_two_party)
{
    tsafe_lora_pair pair = {f->client, f->server, NULL}, half = {NULL, f->server, NULL};
    engine_checks(f, tsafe_lora_engine_two_party(NULL), 0);
    engine_checks(f, tsafe_lora_engine_two_party(&half), 0);
    engine_checks(f, tsafe_lora_engine_two_party(&pair), 0);
}

CHECK_FN(tsafe_lora_server_use_backend)
{
    ERR(tsafe_lora_server_use_backend(NULL, NULL));
    IS(TSAFE_E_NO_DEVICE, tsafe_lora_server_use_backend(f->server, &k_failing));
    assert_string_equal(tsafe_lora_server_backend_name(f->server), "cpu"); /* kept */
    OK(tsafe_lora_server_use_backend(f->server, &k_counting));
    OK(tsafe_lora_server_use_backend(f->server, NULL));
}

CHECK_FN(tsafe_lora_server_backend_name)
{
    assert_string_equal(tsafe_lora_server_backend_name(NULL), "none");
    assert_string_equal(tsafe_lora_server_backend_name(f->server), "cpu");
}

CHECK_FN(tsafe_lora_pair_use_backend)
{
    tsafe_lora_pair empty = {NULL, NULL, NULL}, pair = {f->client, f->server, NULL};
    ERR(tsafe_lora_pair_use_backend(NULL, NULL));
    ERR(tsafe_lora_pair_use_backend(&empty, NULL));
    IS(TSAFE_E_NO_DEVICE, tsafe_lora_pair_use_backend(&pair, &k_failing));
    OK(tsafe_lora_pair_use_backend(&pair, NULL));
}

static const api_case k_lora_two_party[] = {
    ENTRY(tsafe_lora_server_use_backend), ENTRY(tsafe_lora_server_backend_name),
    ENTRY(tsafe_lora_pair_use_backend),
    ENTRY(tsafe_lora_engine_two_party),
    ENTRY(tsafe_lora_bytes_free), ENTRY(tsafe_lora_client_create),
    ENTRY(tsafe_lora_client_free), ENTRY(tsafe_lora_client_encrypt),
    ENTRY(tsafe_lora_client_decode), ENTRY(tsafe_lora_client_release),
    ENTRY(tsafe_lora_server_create), ENTRY(tsafe_lora_server_free),
    ENTRY(tsafe_lora_server_context), ENTRY(tsafe_lora_server_process),
    ENTRY(tsafe_lora_server_response_size), ENTRY(tsafe_lora_server_process_into),
    ENTRY(tsafe_lora_server_apply),
};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_two_party.h", k_lora_two_party)};
    return api_null_run("api_null_lora_two_party", tables, sizeof tables / sizeof tables[0], 0);
}
