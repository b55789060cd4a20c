/* Domain step-gate, table-driven: no keyword -> fallback, ties -> first
 * listed domain, multi-word keywords, whole words only ("bankrupt" is not
 * "bank"), mixed case, punctuation and UTF-8 neighbours, decide_every K and
 * hysteresis, malformed keyword JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensafe/moe.h"

#define FB TSAFE_STEPGATE_FALLBACK
#define BANK 0
#define INV 1

static void test_default_classify(void **state)
{
    (void)state;
    tsafe_stepgate *g = NULL;
    assert_int_equal(tsafe_stepgate_create_default(&g), TSAFE_OK);
    assert_int_equal(tsafe_stepgate_domain_count(g), 2);
    assert_string_equal(tsafe_stepgate_domain_name(g, BANK), "banking");
    assert_string_equal(tsafe_stepgate_domain_adapter(g, INV), "investment");
    assert_string_equal(tsafe_stepgate_domain_adapter(g, FB), "shared");
    assert_null(tsafe_stepgate_domain_name(g, 2));
    assert_null(tsafe_stepgate_domain_name(g, -2));
    static const struct {
        const char *text;
        int32_t want;
        uint32_t bank, inv;
    } cases[] = {
        {"", FB, 0, 0},
        {"What is the weather like today?", FB, 0, 0}, /* the seeds said banking */
        {"I need a loan", BANK, 1, 0},
        {"LOAN", BANK, 1, 0},
        {"Mortgage?", BANK, 1, 0},
        {"mOrTgAgE", BANK, 1, 0},
        {"bankrupt companies", FB, 0, 0},
        {"banks", FB, 0, 0},
        {"the bank's policy", BANK, 1, 0},
        {"(bank)", BANK, 1, 0},
        {"bank,loan.deposit;credit!", BANK, 4, 0},
        {"bank_account", FB, 0, 0},
        {"bank1 1bank", FB, 0, 0},
        {"rechecking", FB, 0, 0},
        {"checking account", BANK, 1, 0},
        {"interest rate", BANK, 1, 0},
        {"Interest   RATE", BANK, 1, 0},
        {"interest\n\trate", BANK, 1, 0},
        {"interest-rate", FB, 0, 0},
        {"interestrate", FB, 0, 0},
        {"interest rates", FB, 0, 0},
        {"interest", FB, 0, 0},
        {"stock and bond", INV, 0, 2},
        {"ETF", INV, 0, 1},
        {"etfs", FB, 0, 0},
        {"Risk-free", INV, 0, 1},
        {"bank stock", BANK, 1, 1},   /* tie: banking is listed first */
        {"stock bank", BANK, 1, 1},   /* ... regardless of text order */
        {"loan loan stock", BANK, 2, 1},
        {"loan stock stock", INV, 1, 2},
        {"invest investing investment", INV, 0, 1},
        /* UTF-8 neighbours */
        {"\xc3\xbc" "bank", FB, 0, 0},                   /* übank */
        {"bank\xc3\xb6", FB, 0, 0},                      /* banko-umlaut */
        {"\xe6\x97\xa5\xe6\x9c\xac" "bank", FB, 0, 0},   /* CJK letters */
        {"bank\xe2\x80\x94loan", BANK, 2, 0},            /* em dash */
        {"\xc2\xab" "bank\xc2\xbb", BANK, 1, 0},         /* guillemets */
        {"bank\xc2\xa0loan", BANK, 2, 0},                /* no-break space */
        {"\xe3\x80\x82" "bank\xe3\x80\x81", BANK, 1, 0}, /* CJK full stop, comma */
        {"\xe2\x80\x9c" "Stock\xe2\x80\x9d", INV, 0, 1}, /* curly quotes */
        {"\xff" "bank", FB, 0, 0},                       /* invalid byte */
        {"bank\xe2\x80", FB, 0, 0},                      /* truncated sequence */
        {"\x80" "bank", FB, 0, 0},                       /* stray continuation */
        {"caf\xc3\xa9 bank", BANK, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *t = cases[i].text;
        int32_t dom = 99;
        uint32_t sc[2] = {77, 77};
        assert_int_equal(tsafe_stepgate_classify(g, t, strlen(t), &dom), TSAFE_OK);
        assert_int_equal(tsafe_stepgate_score(g, t, strlen(t), sc, 2), TSAFE_OK);
        if (dom != cases[i].want || sc[0] != cases[i].bank || sc[1] != cases[i].inv)
            fail_msg("case %zu \"%s\": domain %d (want %d), scores %u/%u (want %u/%u)", i, t,
                     dom, cases[i].want, sc[0], sc[1], cases[i].bank, cases[i].inv);
    }
    /* length-bounded: text after len is ignored */
    int32_t dom;
    assert_int_equal(tsafe_stepgate_classify(g, "bankrupt", 4, &dom), TSAFE_OK);
    assert_int_equal(dom, BANK);
    uint32_t sc[2];
    assert_int_equal(tsafe_stepgate_score(g, "x", 1, sc, 1), TSAFE_E_BUFFER_SMALL);
    assert_int_equal(tsafe_stepgate_classify(g, NULL, 3, &dom), TSAFE_E_NULL);
    assert_int_equal(tsafe_stepgate_classify(g, NULL, 0, &dom), TSAFE_OK);
    assert_int_equal(dom, FB);
    tsafe_stepgate_free(g);
    tsafe_stepgate_free(NULL);
}

static tsafe_stepgate *gate_json(const char *json)
{
    tsafe_stepgate *g = NULL;
    tsafe_status st = tsafe_stepgate_create_json(json, strlen(json), &g);
    if (st != TSAFE_OK)
        fail_msg("gate json: %d", (int)st);
    return g;
}

static void test_custom_json(void **state)
{
    (void)state;
    /* investment listed first now wins ties; adapter defaults to the name;
     * keywords are normalised (case, surrounding and inner whitespace);
     * non-ASCII bytes compare exactly */
    tsafe_stepgate *g = gate_json(
        "{\"domains\":["
        "{\"name\":\"investment\",\"keywords\":[\"stock\"]},"
        "{\"name\":\"banking\",\"adapter\":\"bank-v2\",\"keywords\":[\"bank\","
        "\"  Interest \\t  Rate \"]},"
        "{\"name\":\"es\",\"keywords\":[\"cr\\u00e9dito\",\"pr\\u00e9stamo hipotecario\"]}],"
        "\"fallback\":\"general\",\"decide_every\":4,\"hysteresis\":3}");
    assert_string_equal(tsafe_stepgate_domain_adapter(g, 0), "investment");
    assert_string_equal(tsafe_stepgate_domain_adapter(g, 1), "bank-v2");
    assert_string_equal(tsafe_stepgate_domain_adapter(g, FB), "general");
    assert_int_equal(tsafe_stepgate_decide_every(g), 4);
    assert_int_equal(tsafe_stepgate_hysteresis(g), 3);
    static const struct {
        const char *text;
        int32_t want;
    } cases[] = {
        {"bank stock", 0},
        {"interest rate", 1},
        {"INTEREST rate", 1},
        {"Cr\xc3\xa9" "dito", 2},        /* ASCII C folded, é exact */
        {"CR\xc3\x89" "DITO", FB},       /* É is not folded */
        {"pr\xc3\xa9stamo   hipotecario", 2},
        {"nothing here", FB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t dom;
        assert_int_equal(tsafe_stepgate_classify(g, cases[i].text, strlen(cases[i].text), &dom),
                         TSAFE_OK);
        if (dom != cases[i].want)
            fail_msg("case %zu: %d want %d", i, dom, cases[i].want);
    }
    tsafe_stepgate_free(g);

    /* load from a file */
    char path[] = "/tmp/tsafe_stepgate_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *j = "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"alpha\"]}]}";
    assert_int_equal(write(fd, j, strlen(j)), (ssize_t)strlen(j));
    close(fd);
    g = NULL;
    assert_int_equal(tsafe_stepgate_load_json(path, &g), TSAFE_OK);
    assert_string_equal(tsafe_stepgate_domain_adapter(g, FB), "shared"); /* default */
    assert_int_equal(tsafe_stepgate_decide_every(g), 0);
    assert_int_equal(tsafe_stepgate_hysteresis(g), 1);
    tsafe_stepgate_free(g);
    unlink(path);
    assert_int_equal(tsafe_stepgate_load_json(path, &g), TSAFE_E_NOT_FOUND);
    assert_null(g);
}

static void test_malformed_json(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        tsafe_status want;
    } cases[] = {
        {"not json", TSAFE_E_JSON},
        {"", TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[\"x\"]}]", TSAFE_E_JSON}, /* truncated */
        {"[]", TSAFE_E_JSON},
        {"{}", TSAFE_E_MISSING_FIELD},
        {"{\"domains\":{}}", TSAFE_E_JSON},
        {"{\"domains\":[]}", TSAFE_E_PARAMS},
        {"{\"domains\":[1]}", TSAFE_E_JSON},
        {"{\"domains\":[{\"keywords\":[\"a\"]}]}", TSAFE_E_MISSING_FIELD},
        {"{\"domains\":[{\"name\":\"a\"}]}", TSAFE_E_MISSING_FIELD},
        {"{\"domains\":[{\"name\":5,\"keywords\":[]}]}", TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"\",\"keywords\":[]}]}", TSAFE_E_PARAMS},
        {"{\"domains\":[{\"name\":\"a\",\"adapter\":[],\"keywords\":[]}]}", TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":\"bank\"}]}", TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[1]}]}", TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[\"ok\",null]}]}", TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[\"  \"]}]}", TSAFE_E_PARAMS},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[\"\"]}]}", TSAFE_E_PARAMS},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[\"a\\u0000b\"]}]}", TSAFE_E_JSON}, /* jansson refuses NUL */
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[]},{\"name\":\"a\",\"keywords\":[]}]}",
         TSAFE_E_PARAMS},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[]}],\"decide_every\":-1}",
         TSAFE_E_PARAMS},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[]}],\"decide_every\":\"3\"}",
         TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[]}],\"hysteresis\":1.5}", TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[]}],\"fallback\":3}", TSAFE_E_JSON},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[]}],\"fallback\":\"\"}", TSAFE_E_PARAMS},
        {"{\"domains\":[{\"name\":\"a\",\"keywords\":[]}],\"domains\":[]}", TSAFE_E_JSON},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tsafe_stepgate *g = (tsafe_stepgate *)(uintptr_t)1;
        tsafe_status st = tsafe_stepgate_create_json(cases[i].json, strlen(cases[i].json), &g);
        if (st != cases[i].want)
            fail_msg("case %zu (%s): %d want %d", i, cases[i].json, (int)st,
                     (int)cases[i].want);
        assert_null(g);
    }
    /* limits: a 257-byte keyword, 257 domains */
    char *big = malloc(20000);
    assert_non_null(big);
    char kw[258];
    memset(kw, 'k', 257);
    kw[257] = '\0';
    snprintf(big, 20000, "{\"domains\":[{\"name\":\"a\",\"keywords\":[\"%s\"]}]}", kw);
    tsafe_stepgate *g = NULL;
    assert_int_equal(tsafe_stepgate_create_json(big, strlen(big), &g), TSAFE_E_PARAMS);
    size_t o = (size_t)snprintf(big, 20000, "{\"domains\":[");
    for (int i = 0; i < 257; i++)
        o += (size_t)snprintf(big + o, 20000 - o, "%s{\"name\":\"d%d\",\"keywords\":[]}",
                              i ? "," : "", i);
    snprintf(big + o, 20000 - o, "]}");
    assert_int_equal(tsafe_stepgate_create_json(big, strlen(big), &g), TSAFE_E_PARAMS);
    free(big);
    assert_int_equal(tsafe_stepgate_create_json(NULL, 0, &g), TSAFE_E_NULL);
}

/* A scripted generation: after each step, the expected domain and switch. */
typedef struct step {
    const char *token;
    int32_t domain;
    int switched;
} step;

static void run_script(const char *json, const char *prompt, int32_t start, const step *s,
                       size_t n)
{
    tsafe_stepgate *g = gate_json(json);
    tsafe_stepgate_session *ss = NULL;
    assert_int_equal(tsafe_stepgate_session_create(g, &ss), TSAFE_OK);
    int32_t dom;
    int sw;
    assert_int_equal(tsafe_stepgate_session_step(ss, "x", 1, &dom, &sw), TSAFE_E_STATE);
    assert_int_equal(tsafe_stepgate_session_begin(ss, prompt, strlen(prompt), &dom), TSAFE_OK);
    assert_int_equal(dom, start);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(
            tsafe_stepgate_session_step(ss, s[i].token, strlen(s[i].token), &dom, &sw),
            TSAFE_OK);
        if (dom != s[i].domain || sw != s[i].switched)
            fail_msg("step %zu (\"%s\"): domain %d switched %d, want %d %d", i, s[i].token, dom,
                     sw, s[i].domain, s[i].switched);
        assert_int_equal(tsafe_stepgate_session_domain(ss), dom);
    }
    /* begin again resets the request */
    assert_int_equal(tsafe_stepgate_session_begin(ss, "", 0, &dom), TSAFE_OK);
    assert_int_equal(dom, FB);
    tsafe_stepgate_session_free(ss);
    tsafe_stepgate_free(g);
}

#define GATE(k, h)                                                                       \
    "{\"domains\":[{\"name\":\"banking\",\"keywords\":[\"bank\",\"loan\",\"mortgage\","   \
    "\"deposit\",\"interest rate\"]},{\"name\":\"investment\",\"keywords\":[\"stock\","   \
    "\"bond\",\"etf\"]}],\"decide_every\":" #k ",\"hysteresis\":" #h "}"

static void test_sessions(void **state)
{
    (void)state;
    /* K = 2, H = 2: switch only on a lead of 2 at even steps */
    static const step s1[] = {
        {" and", BANK, 0},       /* 1 */
        {" stock", BANK, 0},     /* 2: 1-1 tie, stays */
        {" bond", BANK, 0},      /* 3: no decision */
        {" etf", INV, 1},        /* 4: 1 vs 3 -> switch */
        {" loan", INV, 0},       /* 5 */
        {" bank", INV, 0},       /* 6: 3 vs 3 -> stays */
        {" mortgage", INV, 0},   /* 7 */
        {" deposit", BANK, 1},   /* 8: 5 vs 3 -> switch back */
    };
    run_script(GATE(2, 2), "I have a loan", BANK, s1, sizeof s1 / sizeof s1[0]);

    /* from the fallback (counts as 0), H = 2 */
    static const step s2[] = {{" bank", FB, 0}, {" loan", BANK, 1}, {" stock", BANK, 0}};
    run_script(GATE(1, 2), "hello there", FB, s2, 3);

    /* H = 0 behaves as 1: a tie never switches, one more does */
    static const step s3[] = {{" stock", BANK, 0}, {" bond", INV, 1}, {" loan", INV, 0}};
    run_script(GATE(1, 0), "loan", BANK, s3, 3);

    /* a multi-word keyword split across tokens */
    static const step s4[] = {{" rate", BANK, 1}};
    run_script(GATE(1, 1), "what about the interest", FB, s4, 1);

    /* K = 3: decisions only at steps 3, 6, ... */
    static const step s5[] = {{"loan", FB, 0}, {" x", FB, 0}, {" y", BANK, 1},
                              {" stock stock", BANK, 0}, {" z", BANK, 0}, {" w", INV, 1}};
    run_script(GATE(3, 1), "", FB, s5, 6);

    /* K = 0 (the default gate): decided at request start only */
    static const step s6[] = {{" stock", BANK, 0}, {" bond etf", BANK, 0}, {" etf", BANK, 0}};
    run_script(GATE(0, 1), "bank", BANK, s6, 3);

    /* a word completed by a later token stops matching */
    static const step s7[] = {{"bank", BANK, 1}, {"rupt stock", INV, 1}};
    run_script(GATE(1, 1), "", FB, s7, 2);

    tsafe_stepgate_session *ss = NULL;
    assert_int_equal(tsafe_stepgate_session_create(NULL, &ss), TSAFE_E_NULL);
    assert_int_equal(tsafe_stepgate_session_domain(NULL), FB);
    tsafe_stepgate_session_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_classify),
        cmocka_unit_test(test_custom_json),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_sessions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
