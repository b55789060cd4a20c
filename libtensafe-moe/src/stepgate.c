/* Domain step-gate: keyword lists per domain adapter, whole-word ASCII
 * case-insensitive matching that is UTF-8 safe, decisions at request start
 * or every K tokens with hysteresis, fallback adapter when nothing matches. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json_get.h"
#include "moe_internal.h"

#define SG_MAX_DOMAINS 256u
#define SG_MAX_KEYWORDS 4096u
#define SG_MAX_STR 256u
#define SG_MAX_FILE (4u << 20)
#define SG_MAX_SESSION_TEXT (16u << 20)

typedef struct sg_keyword {
    char *text; /* ASCII-lowercased, whitespace runs -> one ' ', trimmed */
    size_t len;
} sg_keyword;

typedef struct sg_domain {
    char *name;
    char *adapter;
    sg_keyword *kw;
    size_t n_kw;
} sg_domain;

struct tsafe_stepgate {
    sg_domain *dom;
    size_t n_dom;
    char *fallback;
    uint32_t decide_every;
    uint32_t hysteresis;
};

struct tsafe_stepgate_session {
    const tsafe_stepgate *gate;
    char *buf;
    size_t len, cap;
    uint32_t *scores;
    uint64_t steps;
    int32_t domain;
    int begun;
};

/* ---------------------------------------------------------------- text */

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static unsigned char fold(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

#define CP_INVALID 0xFFFFFFFFu

/* Decode one UTF-8 sequence at s[0..n); *adv = bytes used (1 if invalid). */
static uint32_t utf8_decode(const unsigned char *s, size_t n, size_t *adv)
{
    unsigned char c = s[0];
    *adv = 1;
    if (c < 0x80)
        return c;
    size_t need;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return CP_INVALID;
    }
    if (n < need)
        return CP_INVALID;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return CP_INVALID;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return CP_INVALID;
    *adv = need;
    return cp;
}

static int cp_is_word(uint32_t cp)
{
    if (cp == CP_INVALID)
        return 1; /* never create a match next to undecodable bytes */
    if (cp < 0x80)
        return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               (cp >= '0' && cp <= '9') || cp == '_';
    if (cp <= 0xBF) /* C1 controls, Latin-1 punctuation and symbols */
        return cp == 0xAA || cp == 0xB5 || cp == 0xBA;
    if (cp == 0xD7 || cp == 0xF7)
        return 0;
    if ((cp >= 0x2000 && cp <= 0x206F) || (cp >= 0x3000 && cp <= 0x303F) || cp == 0xFEFF)
        return 0;
    return 1;
}

/* Is the character that starts at t[i] a word character? */
static int word_after(const unsigned char *t, size_t len, size_t i)
{
    size_t adv;
    return i < len && cp_is_word(utf8_decode(t + i, len - i, &adv));
}

/* Is the character that ends just before t[i] a word character? */
static int word_before(const unsigned char *t, size_t i)
{
    if (i == 0)
        return 0;
    if (t[i - 1] < 0x80)
        return cp_is_word(t[i - 1]);
    size_t j = i - 1, back = 0;
    while (j > 0 && back < 3 && (t[j] & 0xC0) == 0x80)
        j--, back++;
    size_t adv;
    uint32_t cp = utf8_decode(t + j, i - j, &adv);
    if (cp == CP_INVALID || j + adv != i)
        return 1;
    return cp_is_word(cp);
}

/* Length of the match of kw at t[i], or 0. */
static size_t match_at(const unsigned char *t, size_t len, size_t i, const sg_keyword *kw)
{
    size_t j = i;
    for (size_t p = 0; p < kw->len; p++) {
        unsigned char k = (unsigned char)kw->text[p];
        if (k == ' ') {
            if (j >= len || !is_space(t[j]))
                return 0;
            while (j < len && is_space(t[j]))
                j++;
        } else {
            if (j >= len || fold(t[j]) != k)
                return 0;
            j++;
        }
    }
    if (word_after(t, len, j))
        return 0;
    return j - i;
}

static uint32_t count_keyword(const unsigned char *t, size_t len, const sg_keyword *kw)
{
    uint32_t n = 0;
    const unsigned char first = (unsigned char)kw->text[0];
    for (size_t i = 0; i < len; i++) {
        if (fold(t[i]) != first)
            continue;
        if (word_before(t, i))
            continue;
        if (match_at(t, len, i, kw) > 0 && n < UINT32_MAX)
            n++;
    }
    return n;
}

static void score_all(const tsafe_stepgate *g, const char *text, size_t len, uint32_t *scores)
{
    const unsigned char *t = (const unsigned char *)text;
    for (size_t d = 0; d < g->n_dom; d++) {
        uint64_t s = 0;
        for (size_t k = 0; k < g->dom[d].n_kw; k++)
            s += count_keyword(t, len, &g->dom[d].kw[k]);
        scores[d] = s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
    }
}

/* Highest score; ties to the first listed; all zero -> fallback. */
static int32_t best_domain(const uint32_t *scores, size_t n)
{
    int32_t best = TSAFE_STEPGATE_FALLBACK;
    uint32_t bs = 0;
    for (size_t i = 0; i < n; i++)
        if (scores[i] > bs) {
            bs = scores[i];
            best = (int32_t)i;
        }
    return best;
}

/* ---------------------------------------------------------------- config */

void tsafe_stepgate_free(tsafe_stepgate *g)
{
    if (g == NULL)
        return;
    for (size_t d = 0; d < g->n_dom; d++) {
        for (size_t k = 0; k < g->dom[d].n_kw; k++)
            free(g->dom[d].kw[k].text);
        free(g->dom[d].kw);
        free(g->dom[d].name);
        free(g->dom[d].adapter);
    }
    free(g->dom);
    free(g->fallback);
    free(g);
}

/* A JSON string of 1..SG_MAX_STR bytes without NUL, copied. */
static tsafe_status dup_string(json_t *v, char **out)
{
    if (!json_is_string(v))
        return TSAFE_E_JSON;
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n == 0 || n > SG_MAX_STR || memchr(s, '\0', n) != NULL)
        return TSAFE_E_PARAMS;
    char *c = malloc(n + 1);
    if (c == NULL)
        return TSAFE_E_NOMEM;
    memcpy(c, s, n + 1);
    *out = c;
    return TSAFE_OK;
}

static tsafe_status normalise_keyword(json_t *v, sg_keyword *kw)
{
    if (!json_is_string(v))
        return TSAFE_E_JSON;
    size_t n = json_string_length(v);
    const unsigned char *s = (const unsigned char *)json_string_value(v);
    if (n > SG_MAX_STR || memchr(s, '\0', n) != NULL)
        return TSAFE_E_PARAMS;
    char *c = malloc(n + 1);
    if (c == NULL)
        return TSAFE_E_NOMEM;
    size_t o = 0;
    int pending_space = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_space(s[i])) {
            pending_space = o > 0;
            continue;
        }
        if (pending_space)
            c[o++] = ' ';
        pending_space = 0;
        c[o++] = (char)fold(s[i]);
    }
    c[o] = '\0';
    if (o == 0) {
        free(c);
        return TSAFE_E_PARAMS;
    }
    kw->text = c;
    kw->len = o;
    return TSAFE_OK;
}

static tsafe_status parse_domain(json_t *o, sg_domain *d)
{
    tsafe_status st;
    if (!json_is_object(o))
        return TSAFE_E_JSON;
    json_t *name = json_object_get(o, "name");
    json_t *adapter = json_object_get(o, "adapter");
    json_t *kws = json_object_get(o, "keywords");
    if (name == NULL || kws == NULL)
        return TSAFE_E_MISSING_FIELD;
    if ((st = dup_string(name, &d->name)) != TSAFE_OK)
        return st;
    if (adapter != NULL && !json_is_null(adapter))
        st = dup_string(adapter, &d->adapter);
    else
        st = dup_string(name, &d->adapter);
    if (st != TSAFE_OK)
        return st;
    if (!json_is_array(kws))
        return TSAFE_E_JSON;
    size_t n = json_array_size(kws);
    if (n > SG_MAX_KEYWORDS)
        return TSAFE_E_PARAMS;
    if (n > 0) {
        d->kw = calloc(n, sizeof *d->kw);
        if (d->kw == NULL)
            return TSAFE_E_NOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        if ((st = normalise_keyword(json_array_get(kws, k), &d->kw[k])) != TSAFE_OK)
            return st;
        d->n_kw++;
    }
    return TSAFE_OK;
}

static tsafe_status parse_gate(json_t *root, tsafe_stepgate *g)
{
    tsafe_status st;
    if (!json_is_object(root))
        return TSAFE_E_JSON;
    json_t *doms = json_object_get(root, "domains");
    if (doms == NULL)
        return TSAFE_E_MISSING_FIELD;
    if (!json_is_array(doms))
        return TSAFE_E_JSON;
    size_t n = json_array_size(doms);
    if (n == 0 || n > SG_MAX_DOMAINS)
        return TSAFE_E_PARAMS;
    g->dom = calloc(n, sizeof *g->dom);
    if (g->dom == NULL)
        return TSAFE_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        g->n_dom++; /* counted first so free() releases a half-parsed domain */
        if ((st = parse_domain(json_array_get(doms, i), &g->dom[i])) != TSAFE_OK)
            return st;
        for (size_t j = 0; j < i; j++)
            if (strcmp(g->dom[j].name, g->dom[i].name) == 0)
                return TSAFE_E_PARAMS;
    }
    json_t *fb = json_object_get(root, "fallback");
    if (fb != NULL && !json_is_null(fb))
        st = dup_string(fb, &g->fallback);
    else {
        g->fallback = strdup("shared");
        st = g->fallback != NULL ? TSAFE_OK : TSAFE_E_NOMEM;
    }
    if (st != TSAFE_OK)
        return st;
    if ((st = tsafe_json_u32(root, "decide_every", 0, 0, &g->decide_every)) != TSAFE_OK)
        return st;
    return tsafe_json_u32(root, "hysteresis", 0, 1, &g->hysteresis);
}

tsafe_status tsafe_stepgate_create_json(const char *text, size_t len, tsafe_stepgate **out)
{
    TSAFE_REQUIRE(text != NULL && out != NULL, TSAFE_E_NULL);
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return TSAFE_E_JSON;
    tsafe_stepgate *g = calloc(1, sizeof *g);
    tsafe_status st = g != NULL ? parse_gate(root, g) : TSAFE_E_NOMEM;
    json_decref(root);
    if (st != TSAFE_OK) {
        tsafe_stepgate_free(g);
        return st;
    }
    *out = g;
    return TSAFE_OK;
}

tsafe_status tsafe_stepgate_load_json(const char *path, tsafe_stepgate **out)
{
    TSAFE_REQUIRE(path != NULL && out != NULL, TSAFE_E_NULL);
    *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    tsafe_status st = tsafe_read_file(path, SG_MAX_FILE, &buf, &len);
    if (st != TSAFE_OK)
        return st;
    st = tsafe_stepgate_create_json((const char *)buf, len, out);
    free(buf);
    return st;
}

static const char k_default_json[] =
    "{\"domains\":["
    "{\"name\":\"banking\",\"adapter\":\"banking\",\"keywords\":[\"bank\",\"deposit\","
    "\"loan\",\"mortgage\",\"credit\",\"savings\",\"checking\",\"interest rate\","
    "\"refinance\"]},"
    "{\"name\":\"investment\",\"adapter\":\"investment\",\"keywords\":[\"invest\","
    "\"portfolio\",\"stock\",\"bond\",\"etf\",\"dividend\",\"market\",\"allocation\","
    "\"risk\"]}],"
    "\"fallback\":\"shared\",\"decide_every\":0,\"hysteresis\":1}";

tsafe_status tsafe_stepgate_create_default(tsafe_stepgate **out)
{
    return tsafe_stepgate_create_json(k_default_json, sizeof k_default_json - 1, out);
}

size_t tsafe_stepgate_domain_count(const tsafe_stepgate *g)
{
    return g != NULL ? g->n_dom : 0;
}

const char *tsafe_stepgate_domain_name(const tsafe_stepgate *g, int32_t i)
{
    if (g == NULL)
        return NULL;
    if (i == TSAFE_STEPGATE_FALLBACK)
        return g->fallback;
    return i >= 0 && (size_t)i < g->n_dom ? g->dom[i].name : NULL;
}

const char *tsafe_stepgate_domain_adapter(const tsafe_stepgate *g, int32_t i)
{
    if (g == NULL)
        return NULL;
    if (i == TSAFE_STEPGATE_FALLBACK)
        return g->fallback;
    return i >= 0 && (size_t)i < g->n_dom ? g->dom[i].adapter : NULL;
}

uint32_t tsafe_stepgate_decide_every(const tsafe_stepgate *g)
{
    return g != NULL ? g->decide_every : 0;
}

uint32_t tsafe_stepgate_hysteresis(const tsafe_stepgate *g)
{
    return g != NULL ? g->hysteresis : 0;
}

tsafe_status tsafe_stepgate_score(const tsafe_stepgate *g, const char *text, size_t len,
                                  uint32_t *scores, size_t n_scores)
{
    TSAFE_REQUIRE(g != NULL && scores != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(len == 0 || text != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(n_scores >= g->n_dom, TSAFE_E_BUFFER_SMALL);
    score_all(g, text, len, scores);
    return TSAFE_OK;
}

tsafe_status tsafe_stepgate_classify(const tsafe_stepgate *g, const char *text, size_t len,
                                     int32_t *domain)
{
    TSAFE_REQUIRE(g != NULL && domain != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(len == 0 || text != NULL, TSAFE_E_NULL);
    uint32_t *scores = malloc(g->n_dom * sizeof *scores);
    if (scores == NULL)
        return TSAFE_E_NOMEM;
    score_all(g, text, len, scores);
    *domain = best_domain(scores, g->n_dom);
    free(scores);
    return TSAFE_OK;
}

/* ---------------------------------------------------------------- session */

tsafe_status tsafe_stepgate_session_create(const tsafe_stepgate *g, tsafe_stepgate_session **out)
{
    TSAFE_REQUIRE(g != NULL && out != NULL, TSAFE_E_NULL);
    *out = NULL;
    tsafe_stepgate_session *s = calloc(1, sizeof *s);
    if (s == NULL)
        return TSAFE_E_NOMEM;
    s->scores = calloc(g->n_dom, sizeof *s->scores);
    if (s->scores == NULL) {
        free(s);
        return TSAFE_E_NOMEM;
    }
    s->gate = g;
    s->domain = TSAFE_STEPGATE_FALLBACK;
    *out = s;
    return TSAFE_OK;
}

void tsafe_stepgate_session_free(tsafe_stepgate_session *s)
{
    if (s == NULL)
        return;
    free(s->buf);
    free(s->scores);
    free(s);
}

static tsafe_status append(tsafe_stepgate_session *s, const char *text, size_t len)
{
    if (len == 0)
        return TSAFE_OK;
    if (len > SG_MAX_SESSION_TEXT || s->len > SG_MAX_SESSION_TEXT - len)
        return TSAFE_E_RANGE;
    if (s->len + len > s->cap) {
        size_t nc = s->cap ? s->cap : 256;
        while (nc < s->len + len)
            nc *= 2;
        char *nb = realloc(s->buf, nc);
        if (nb == NULL)
            return TSAFE_E_NOMEM;
        s->buf = nb;
        s->cap = nc;
    }
    memcpy(s->buf + s->len, text, len);
    s->len += len;
    return TSAFE_OK;
}

tsafe_status tsafe_stepgate_session_begin(tsafe_stepgate_session *s, const char *prompt,
                                          size_t len, int32_t *domain)
{
    TSAFE_REQUIRE(s != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(len == 0 || prompt != NULL, TSAFE_E_NULL);
    s->len = 0;
    s->steps = 0;
    s->begun = 0;
    s->domain = TSAFE_STEPGATE_FALLBACK;
    tsafe_status st = append(s, prompt, len);
    if (st != TSAFE_OK)
        return st;
    score_all(s->gate, s->buf, s->len, s->scores);
    s->domain = best_domain(s->scores, s->gate->n_dom);
    s->begun = 1;
    if (domain != NULL)
        *domain = s->domain;
    return TSAFE_OK;
}

tsafe_status tsafe_stepgate_session_step(tsafe_stepgate_session *s, const char *token,
                                         size_t len, int32_t *domain, int *switched)
{
    TSAFE_REQUIRE(s != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(len == 0 || token != NULL, TSAFE_E_NULL);
    TSAFE_REQUIRE(s->begun, TSAFE_E_STATE);
    const tsafe_stepgate *g = s->gate;
    int sw = 0;
    tsafe_status st = append(s, token, len);
    if (st != TSAFE_OK)
        return st;
    s->steps++;
    if (g->decide_every > 0 && s->steps % g->decide_every == 0) {
        score_all(g, s->buf, s->len, s->scores);
        int32_t cand = best_domain(s->scores, g->n_dom);
        uint32_t cur = s->domain == TSAFE_STEPGATE_FALLBACK ? 0 : s->scores[s->domain];
        uint32_t margin = g->hysteresis > 0 ? g->hysteresis : 1;
        if (cand != TSAFE_STEPGATE_FALLBACK && cand != s->domain &&
            s->scores[cand] > cur && s->scores[cand] - cur >= margin) {
            s->domain = cand;
            sw = 1;
        }
    }
    if (domain != NULL)
        *domain = s->domain;
    if (switched != NULL)
        *switched = sw;
    return TSAFE_OK;
}

int32_t tsafe_stepgate_session_domain(const tsafe_stepgate_session *s)
{
    return s != NULL ? s->domain : TSAFE_STEPGATE_FALLBACK;
}
