/* NULL and out-of-range arguments to every function of tensafe/lora_session.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

/* One sealed-private service over the fixture's adapter, a server session
 * of it and a client session (not connected). */
static void session_objects(fixture *f, tsafe_session_service **svc, tsafe_session_server **s,
                            tsafe_session_client **c)
{
    tsafe_session_module m = {"q_proj", f->A, f->B, LD, LR, LD, 1.0f};
    tsafe_session_service_opts so = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    tsafe_session_client_opts co = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    OK(tsafe_session_service_create(&so, &m, 1, svc));
    OK(tsafe_session_server_create(*svc, NULL, s));
    OK(tsafe_session_client_create(&co, NULL, c));
}

static void session_free(tsafe_session_service *svc, tsafe_session_server *s,
                         tsafe_session_client *c)
{
    tsafe_session_client_free(c);
    tsafe_session_server_free(s);
    tsafe_session_service_free(svc);
}

CHECK_FN(tsafe_session_protocol_name)
{
    (void)f;
    assert_string_equal(tsafe_session_protocol_name((tsafe_session_protocol)99), "unknown");
    assert_string_equal(tsafe_session_protocol_name(TSAFE_SESSION_SEALED), "sealed");
}

CHECK_FN(tsafe_session_service_create)
{
    tsafe_session_service *svc = (tsafe_session_service *)1;
    tsafe_session_module m = {"q_proj", f->A, f->B, LD, LR, LD, 1.0f};
    tsafe_session_service_opts so = {.protocol = TSAFE_SESSION_SEALED_PRIVATE};
    IS(TSAFE_E_NULL, tsafe_session_service_create(NULL, &m, 1, &svc));
    assert_null(svc);
    IS(TSAFE_E_NULL, tsafe_session_service_create(&so, NULL, 1, &svc));
    IS(TSAFE_E_NULL, tsafe_session_service_create(&so, &m, 1, NULL));
    IS(TSAFE_E_RANGE, tsafe_session_service_create(&so, &m, 0, &svc));
    so.protocol = (tsafe_session_protocol)7;
    IS(TSAFE_E_ARG, tsafe_session_service_create(&so, &m, 1, &svc));
    so.protocol = TSAFE_SESSION_PLAIN_ZERO_MOAI; /* needs its CKKS plan */
    IS(TSAFE_E_NULL, tsafe_session_service_create(&so, &m, 1, &svc));
    so.protocol = TSAFE_SESSION_SEALED; /* needs semi_honest */
    IS(TSAFE_E_INSECURE, tsafe_session_service_create(&so, &m, 1, &svc));
    so.protocol = TSAFE_SESSION_SEALED_PRIVATE;
    m.name = NULL;
    IS(TSAFE_E_NULL, tsafe_session_service_create(&so, &m, 1, &svc));
    m.name = "bad\nname";
    IS(TSAFE_E_ARG, tsafe_session_service_create(&so, &m, 1, &svc));
    m.name = "q";
    m.rank = 0;
    IS(TSAFE_E_ARG, tsafe_session_service_create(&so, &m, 1, &svc));
}

CHECK_FN(tsafe_session_service_free) { (void)f; tsafe_session_service_free(NULL); }

CHECK_FN(tsafe_session_service_widths)
{
    (void)f;
    assert_int_equal(tsafe_session_service_widths(NULL), 0);
    assert_int_equal(tsafe_session_service_hello_version(NULL), 0);
}

CHECK_FN(tsafe_session_service_hello_version)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    assert_int_equal(tsafe_session_service_hello_version(svc), 2);
    assert_int_equal(tsafe_session_service_widths(svc), 1);
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_service_plan)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    tsafe_sealed_plan p;
    size_t n;
    IS(TSAFE_E_NULL, tsafe_session_service_plan(NULL, 0, &p, &n));
    IS(TSAFE_E_NULL, tsafe_session_service_plan(svc, 0, NULL, &n));
    IS(TSAFE_E_NULL, tsafe_session_service_plan(svc, 0, &p, NULL));
    IS(TSAFE_E_RANGE, tsafe_session_service_plan(svc, 1, &p, &n));
    OK(tsafe_session_service_plan(svc, 0, &p, &n));
    assert_int_equal(n, 1);
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_create)
{
    tsafe_session_server *s = (tsafe_session_server *)1;
    (void)f;
    IS(TSAFE_E_NULL, tsafe_session_server_create(NULL, NULL, &s));
    assert_null(s);
    IS(TSAFE_E_NULL, tsafe_session_server_create(NULL, NULL, NULL));
}

CHECK_FN(tsafe_session_server_free) { (void)f; tsafe_session_server_free(NULL); }

/* The calls of either machine that take a NULL session. */
CHECK_FN(tsafe_session_server_feed)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    size_t used = 7;
    uint8_t b[1] = {0};
    IS(TSAFE_E_NULL, tsafe_session_server_feed(NULL, b, 1, &used));
    IS(TSAFE_E_NULL, tsafe_session_server_feed(s, NULL, 1, &used));
    IS(TSAFE_E_NULL, tsafe_session_server_feed(s, b, 1, NULL));
    OK(tsafe_session_server_feed(s, NULL, 0, &used));
    assert_int_equal(used, 0);
    IS(TSAFE_E_NULL, tsafe_session_client_feed(NULL, b, 1, &used));
    IS(TSAFE_E_NULL, tsafe_session_client_feed(c, NULL, 1, &used));
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_output)
{
    (void)f;
    const uint8_t *d = (const uint8_t *)1;
    size_t n = 5;
    tsafe_session_server_output(NULL, &d, &n);
    assert_null(d);
    assert_int_equal(n, 0);
    tsafe_session_server_output(NULL, NULL, NULL);
    tsafe_session_client_output(NULL, &d, &n);
    assert_int_equal(n, 0);
    tsafe_session_server_sent(NULL, 3);
    tsafe_session_client_sent(NULL, 3);
}

CHECK_FN(tsafe_session_server_sent) { check_tsafe_session_server_output(f); }

CHECK_FN(tsafe_session_server_wants)
{
    (void)f;
    assert_int_equal(tsafe_session_server_wants(NULL), TSAFE_SESSION_FAILED);
    assert_int_equal(tsafe_session_client_wants(NULL), TSAFE_SESSION_FAILED);
}

/* a NULL entry and a session listed twice refused; n 0 and a session
 * with nothing pending are no work */
CHECK_FN(tsafe_session_server_work_batch)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    IS(TSAFE_E_NULL, tsafe_session_server_work_batch(NULL, 1, NULL));
    OK(tsafe_session_server_work_batch(NULL, 0, NULL));
    tsafe_session_server *const none[1] = {NULL};
    IS(TSAFE_E_NULL, tsafe_session_server_work_batch(none, 1, NULL));
    tsafe_session_server *const twice[2] = {s, s};
    IS(TSAFE_E_ARG, tsafe_session_server_work_batch(twice, 2, NULL));
    OK(tsafe_session_server_work_batch(&s, 1, NULL));
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_work)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    IS(TSAFE_E_NULL, tsafe_session_server_work(NULL));
    OK(tsafe_session_server_work(s)); /* nothing pending */
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_abort)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    tsafe_session_server_abort(NULL, TSAFE_E_IO, NULL);
    tsafe_session_client_abort(NULL, TSAFE_E_IO, NULL);
    tsafe_session_server_abort(s, TSAFE_E_STATE, NULL);
    IS(TSAFE_E_STATE, tsafe_session_server_status(s));
    assert_true(tsafe_session_server_wants(s) & TSAFE_SESSION_FAILED);
    tsafe_session_client_abort(c, TSAFE_E_RANGE, "host");
    IS(TSAFE_E_RANGE, tsafe_session_client_status(c));
    assert_string_equal(tsafe_session_client_what(c), "host");
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_server_status)
{
    (void)f;
    IS(TSAFE_E_NULL, tsafe_session_server_status(NULL));
    IS(TSAFE_E_NULL, tsafe_session_client_status(NULL));
}

CHECK_FN(tsafe_session_server_what)
{
    (void)f;
    assert_string_equal(tsafe_session_server_what(NULL), "");
    assert_string_equal(tsafe_session_client_what(NULL), "");
}

CHECK_FN(tsafe_session_server_stats)
{
    (void)f;
    tsafe_session_stats st;
    tsafe_session_server_stats(NULL, &st);
    assert_int_equal(st.tokens, 0);
    tsafe_session_server_stats(NULL, NULL);
    tsafe_session_client_stats(NULL, &st);
    tsafe_session_client_stats(NULL, NULL);
}

CHECK_FN(tsafe_session_client_create)
{
    (void)f;
    tsafe_session_client *c = (tsafe_session_client *)1;
    tsafe_session_client_opts co = {.protocol = TSAFE_SESSION_SEALED};
    IS(TSAFE_E_NULL, tsafe_session_client_create(NULL, NULL, &c));
    assert_null(c);
    IS(TSAFE_E_NULL, tsafe_session_client_create(&co, NULL, NULL));
    IS(TSAFE_E_ARG, tsafe_session_client_create(&co, NULL, &c)); /* no DP, no allow_no_dp */
    co.allow_no_dp = 1;
    IS(TSAFE_E_INSECURE, tsafe_session_client_create(&co, NULL, &c));
    co.protocol = TSAFE_SESSION_PLAIN_ZERO_MOAI;
    co.per_query = 1;
    IS(TSAFE_E_ARG, tsafe_session_client_create(&co, NULL, &c));
}

CHECK_FN(tsafe_session_client_free) { (void)f; tsafe_session_client_free(NULL); }
CHECK_FN(tsafe_session_client_feed) { check_tsafe_session_server_feed(f); }
CHECK_FN(tsafe_session_client_output) { check_tsafe_session_server_output(f); }
CHECK_FN(tsafe_session_client_sent) { check_tsafe_session_server_output(f); }
CHECK_FN(tsafe_session_client_wants) { check_tsafe_session_server_wants(f); }
CHECK_FN(tsafe_session_client_abort) { check_tsafe_session_server_abort(f); }
CHECK_FN(tsafe_session_client_status) { check_tsafe_session_server_status(f); }
CHECK_FN(tsafe_session_client_what) { check_tsafe_session_server_what(f); }
CHECK_FN(tsafe_session_client_stats) { check_tsafe_session_server_stats(f); }

/* Before the hello: nothing to read, nothing to submit. */
CHECK_FN(tsafe_session_client_modules)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    const char *name;
    uint32_t a, b, d;
    tsafe_sealed_plan sp;
    float *out[1] = {f->delta};
    assert_int_equal(tsafe_session_client_modules(NULL), 0);
    assert_int_equal(tsafe_session_client_modules(c), 0);
    IS(TSAFE_E_NULL, tsafe_session_client_module(NULL, 0, &name, &a, &b, &d));
    IS(TSAFE_E_NULL, tsafe_session_client_module(c, 0, NULL, &a, &b, &d));
    IS(TSAFE_E_STATE, tsafe_session_client_module(c, 0, &name, &a, &b, &d));
    IS(TSAFE_E_NULL, tsafe_session_client_plan(NULL, 0, &sp, NULL));
    IS(TSAFE_E_STATE, tsafe_session_client_plan(c, 0, &sp, NULL));
    IS(TSAFE_E_NULL, tsafe_session_client_submit(NULL, NULL, 0, f->x, out));
    IS(TSAFE_E_NULL, tsafe_session_client_submit(c, NULL, 0, NULL, out));
    IS(TSAFE_E_NULL, tsafe_session_client_submit(c, NULL, 0, f->x, NULL));
    IS(TSAFE_E_STATE, tsafe_session_client_submit(c, NULL, 0, f->x, out));
    IS(TSAFE_E_NULL, tsafe_session_client_close(NULL));
    IS(TSAFE_E_STATE, tsafe_session_client_close(c));
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_client_module) { check_tsafe_session_client_modules(f); }
CHECK_FN(tsafe_session_client_plan) { check_tsafe_session_client_modules(f); }
CHECK_FN(tsafe_session_client_submit) { check_tsafe_session_client_modules(f); }
CHECK_FN(tsafe_session_client_close) { check_tsafe_session_client_modules(f); }

CHECK_FN(tsafe_session_server_run)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    tsafe_session_transport t = {NULL, NULL, NULL};
    float *out[1] = {f->delta};
    IS(TSAFE_E_NULL, tsafe_session_server_run(NULL, &t));
    IS(TSAFE_E_NULL, tsafe_session_server_run(s, NULL));
    IS(TSAFE_E_NULL, tsafe_session_server_run(s, &t)); /* no callbacks */
    IS(TSAFE_E_NULL, tsafe_session_client_connect(NULL, &t));
    IS(TSAFE_E_NULL, tsafe_session_client_connect(c, &t));
    IS(TSAFE_E_NULL, tsafe_session_client_delta(c, NULL, NULL, 0, f->x, out));
    IS(TSAFE_E_NULL, tsafe_session_client_bye(c, &t));
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_pump)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    IS(TSAFE_E_NULL, tsafe_session_pump(NULL, c));
    IS(TSAFE_E_NULL, tsafe_session_pump(s, NULL));
    OK(tsafe_session_pump(s, c)); /* the hello: the client is READY */
    assert_true(tsafe_session_client_wants(c) & TSAFE_SESSION_READY);
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_client_connect) { check_tsafe_session_server_run(f); }
CHECK_FN(tsafe_session_client_delta) { check_tsafe_session_server_run(f); }
CHECK_FN(tsafe_session_client_bye) { check_tsafe_session_server_run(f); }

CHECK_FN(tsafe_session_server_create_select)
{
    tsafe_session_service *svc;
    tsafe_session_server *s;
    tsafe_session_client *c;
    session_objects(f, &svc, &s, &c);
    tsafe_session_server *sel = (tsafe_session_server *)1;
    const tsafe_session_service *one[1] = {svc}, *two[2] = {svc, svc}, *hole[1] = {NULL};
    IS(TSAFE_E_NULL, tsafe_session_server_create_select(NULL, 1, NULL, &sel));
    assert_null(sel);
    IS(TSAFE_E_NULL, tsafe_session_server_create_select(one, 1, NULL, NULL));
    IS(TSAFE_E_NULL, tsafe_session_server_create_select(hole, 1, NULL, &sel));
    IS(TSAFE_E_RANGE, tsafe_session_server_create_select(one, 0, NULL, &sel));
    IS(TSAFE_E_RANGE, tsafe_session_server_create_select(one, TSAFE_SESSION_MAX_MODULES + 1,
                                                         NULL, &sel));
    IS(TSAFE_E_ARG, tsafe_session_server_create_select(two, 2, NULL, &sel)); /* no ids */
    OK(tsafe_session_server_create_select(one, 1, NULL, &sel));
    tsafe_session_server_free(sel);
    session_free(svc, s, c);
}

CHECK_FN(tsafe_session_service_adapter_id)
{
    (void)f;
    assert_string_equal(tsafe_session_service_adapter_id(NULL), "");
    assert_string_equal(tsafe_session_server_adapter_id(NULL), "");
}

CHECK_FN(tsafe_session_server_adapter_id) { check_tsafe_session_service_adapter_id(f); }

CHECK_FN(tsafe_session_server_partial)
{
    (void)f;
    assert_int_equal(tsafe_session_server_partial(NULL), 0);
    assert_int_equal(tsafe_session_server_idle(NULL), 1);
}

CHECK_FN(tsafe_session_server_idle) { check_tsafe_session_server_partial(f); }

CHECK_FN(tsafe_session_error_frame)
{
    (void)f;
    uint8_t b[TSAFE_SESSION_ERROR_FRAME];
    assert_int_equal(tsafe_session_error_frame(TSAFE_E_STATE, "x", NULL, sizeof b), 0);
    assert_int_equal(tsafe_session_error_frame(TSAFE_E_STATE, "x", b, sizeof b - 1), 0);
    assert_true(tsafe_session_error_frame(TSAFE_E_STATE, NULL, b, sizeof b) > 16);
}

static const api_case k_lora_session[] = {
    ENTRY(tsafe_session_protocol_name), ENTRY(tsafe_session_service_create),
    ENTRY(tsafe_session_service_free), ENTRY(tsafe_session_service_widths),
    ENTRY(tsafe_session_service_hello_version), ENTRY(tsafe_session_service_plan),
    ENTRY(tsafe_session_server_create), ENTRY(tsafe_session_server_free),
    ENTRY(tsafe_session_server_feed), ENTRY(tsafe_session_server_output),
    ENTRY(tsafe_session_server_sent), ENTRY(tsafe_session_server_wants),
    ENTRY(tsafe_session_server_work), ENTRY(tsafe_session_server_work_batch), ENTRY(tsafe_session_server_abort),
    ENTRY(tsafe_session_server_status), ENTRY(tsafe_session_server_what),
    ENTRY(tsafe_session_server_stats), ENTRY(tsafe_session_client_create),
    ENTRY(tsafe_session_client_free), ENTRY(tsafe_session_client_feed),
    ENTRY(tsafe_session_client_output), ENTRY(tsafe_session_client_sent),
    ENTRY(tsafe_session_client_wants), ENTRY(tsafe_session_client_modules),
    ENTRY(tsafe_session_client_module), ENTRY(tsafe_session_client_plan),
    ENTRY(tsafe_session_client_submit), ENTRY(tsafe_session_client_close),
    ENTRY(tsafe_session_client_abort), ENTRY(tsafe_session_client_status),
    ENTRY(tsafe_session_client_what), ENTRY(tsafe_session_client_stats),
    ENTRY(tsafe_session_pump), ENTRY(tsafe_session_server_run),
    ENTRY(tsafe_session_client_connect),
    ENTRY(tsafe_session_client_delta), ENTRY(tsafe_session_client_bye),
    ENTRY(tsafe_session_server_create_select), ENTRY(tsafe_session_service_adapter_id),
    ENTRY(tsafe_session_server_adapter_id), ENTRY(tsafe_session_server_partial),
    ENTRY(tsafe_session_server_idle), ENTRY(tsafe_session_error_frame),
};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_session.h", k_lora_session)};
    return api_null_run("api_null_lora_session", tables, sizeof tables / sizeof tables[0], 0);
}
