/* llama2.c forward pass in float32 (run.c semantics), with LoRA hooks. */
#include "llama2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "bytes.h"
#include "io.h"

#define L2_HEADER_INTS 7
#define L2_MAX_DIM 65536u
#define L2_MAX_VOCAB (1u << 20)
#define L2_MAX_SEQ 65536u

struct l2_model {
    l2_config c;
    float *data; /* the whole file after the header */
    const float *tok_emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final,
        *wcls;
};

struct l2_state {
    const l2_model *m;
    float *x, *xb, *xb2, *hb, *hb2, *q, *k, *v, *att, *logits, *key_cache, *value_cache;
};

void l2_group_slots(l2_group g, l2_proj *first, uint32_t *count)
{
    static const l2_proj f[] = {L2_Q, L2_O, L2_GATE, L2_DOWN};
    static const uint32_t n[] = {3, 1, 2, 1};
    *first = f[g];
    *count = n[g];
}

const char *l2_proj_name(l2_proj p)
{
    static const char *n[] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                              "gate_proj", "up_proj", "down_proj"};
    return p < L2_N_PROJ ? n[p] : "?";
}

uint32_t l2_proj_in(const l2_config *c, l2_proj p) { return p == L2_DOWN ? c->hidden_dim : c->dim; }

uint32_t l2_proj_out(const l2_config *c, l2_proj p)
{
    switch (p) {
    case L2_K:
    case L2_V:
        return c->kv_dim;
    case L2_GATE:
    case L2_UP:
        return c->hidden_dim;
    default:
        return c->dim;
    }
}

static tsafe_status config_check(const int32_t h[L2_HEADER_INTS], l2_config *c)
{
    for (int i = 0; i < L2_HEADER_INTS; i++)
        if (h[i] == 0 || (i != 5 && h[i] < 0))
            return TSAFE_E_FORMAT;
    c->dim = (uint32_t)h[0];
    c->hidden_dim = (uint32_t)h[1];
    c->n_layers = (uint32_t)h[2];
    c->n_heads = (uint32_t)h[3];
    c->n_kv_heads = (uint32_t)h[4];
    c->shared_classifier = h[5] > 0;
    c->vocab_size = (uint32_t)(h[5] > 0 ? h[5] : -(int64_t)h[5]);
    c->seq_len = (uint32_t)h[6];
    if (c->dim > L2_MAX_DIM || c->hidden_dim > L2_MAX_DIM || c->n_layers > 1024 ||
        c->vocab_size > L2_MAX_VOCAB || c->seq_len > L2_MAX_SEQ || c->dim % c->n_heads ||
        c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads)
        return TSAFE_E_FORMAT;
    c->head_size = c->dim / c->n_heads;
    if (c->head_size % 2)
        return TSAFE_E_FORMAT;
    c->kv_dim = c->head_size * c->n_kv_heads;
    return TSAFE_OK;
}

/* Floats the file must hold after the header (all below 2^40 by the
 * bounds of config_check). */
static uint64_t weights_count(const l2_config *c)
{
    uint64_t d = c->dim, hd = c->hidden_dim, L = c->n_layers, kv = c->kv_dim;
    uint64_t n = (uint64_t)c->vocab_size * d + L * d * 2 + L * d * d * 2 + L * kv * d * 2 +
                 L * d * hd * 3 + d + (uint64_t)c->seq_len * c->head_size;
    return c->shared_classifier ? n : n + (uint64_t)c->vocab_size * d;
}

static void map_weights(l2_model *m)
{
    const l2_config *c = &m->c;
    size_t d = c->dim, hd = c->hidden_dim, L = c->n_layers, kv = c->kv_dim;
    const float *p = m->data;
    m->tok_emb = p, p += (size_t)c->vocab_size * d;
    m->rms_att = p, p += L * d;
    m->wq = p, p += L * d * d;
    m->wk = p, p += L * kv * d;
    m->wv = p, p += L * kv * d;
    m->wo = p, p += L * d * d;
    m->rms_ffn = p, p += L * d;
    m->w1 = p, p += L * hd * d;
    m->w2 = p, p += L * d * hd;
    m->w3 = p, p += L * hd * d;
    m->rms_final = p, p += d;
    p += (size_t)c->seq_len * c->head_size; /* RoPE tables of run.c's legacy export */
    m->wcls = c->shared_classifier ? m->tok_emb : p;
}

tsafe_status l2_model_load(const char *path, l2_model **out)
{
    if (!path || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    tsafe_status st = io_read_file(path, IO_MAX_FILE, &buf, &len);
    if (st != TSAFE_OK)
        return st;
    int32_t h[L2_HEADER_INTS];
    l2_config c;
    if (len < sizeof h) {
        free(buf);
        return TSAFE_E_TRUNCATED;
    }
    for (int i = 0; i < L2_HEADER_INTS; i++)
        h[i] = (int32_t)tsafe_load_le32(buf + 4 * i);
    if ((st = config_check(h, &c)) != TSAFE_OK) {
        free(buf);
        return st;
    }
    uint64_t n = weights_count(&c);
    if ((uint64_t)(len - sizeof h) != n * 4) {
        free(buf);
        return TSAFE_E_SHAPE;
    }
    l2_model *m = calloc(1, sizeof *m);
    float *data = malloc((size_t)n * sizeof *data);
    if (!m || !data) {
        free(m);
        free(data);
        free(buf);
        return TSAFE_E_NOMEM;
    }
    for (uint64_t i = 0; i < n; i++) {
        data[i] = tsafe_load_f32le(buf + sizeof h + 4 * i);
        if (!isfinite(data[i]))
            st = TSAFE_E_VALUE_RANGE;
    }
    free(buf);
    if (st != TSAFE_OK) {
        free(data);
        free(m);
        return st;
    }
    m->c = c;
    m->data = data;
    map_weights(m);
    *out = m;
    return TSAFE_OK;
}

void l2_model_free(l2_model *m)
{
    if (!m)
        return;
    free(m->data);
    free(m);
}

const l2_config *l2_model_config(const l2_model *m) { return &m->c; }

tsafe_status l2_state_create(const l2_model *m, l2_state **out)
{
    if (!m || !out)
        return TSAFE_E_NULL;
    const l2_config *c = &m->c;
    l2_state *s = calloc(1, sizeof *s);
    if (!s)
        return TSAFE_E_NOMEM;
    size_t cache = (size_t)c->n_layers * c->seq_len * c->kv_dim;
    s->m = m;
    s->x = calloc(c->dim, sizeof(float));
    s->xb = calloc(c->dim, sizeof(float));
    s->xb2 = calloc(c->dim, sizeof(float));
    s->hb = calloc(c->hidden_dim, sizeof(float));
    s->hb2 = calloc(c->hidden_dim, sizeof(float));
    s->q = calloc(c->dim, sizeof(float));
    s->k = calloc(c->kv_dim, sizeof(float));
    s->v = calloc(c->kv_dim, sizeof(float));
    s->att = calloc((size_t)c->n_heads * c->seq_len, sizeof(float));
    s->logits = calloc(c->vocab_size, sizeof(float));
    s->key_cache = calloc(cache, sizeof(float));
    s->value_cache = calloc(cache, sizeof(float));
    if (!s->x || !s->xb || !s->xb2 || !s->hb || !s->hb2 || !s->q || !s->k || !s->v || !s->att ||
        !s->logits || !s->key_cache || !s->value_cache) {
        l2_state_free(s);
        return TSAFE_E_NOMEM;
    }
    *out = s;
    return TSAFE_OK;
}

void l2_state_free(l2_state *s)
{
    if (!s)
        return;
    float *p[] = {s->x,   s->xb,  s->xb2, s->hb,     s->hb2,       s->q,
                  s->k,   s->v,   s->att, s->logits, s->key_cache, s->value_cache};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    free(s);
}

static void rmsnorm(float *o, const float *x, const float *w, uint32_t n)
{
    float ss = 0;
    for (uint32_t j = 0; j < n; j++)
        ss += x[j] * x[j];
    ss = 1.0f / sqrtf(ss / (float)n + 1e-5f);
    for (uint32_t j = 0; j < n; j++)
        o[j] = w[j] * (ss * x[j]);
}

/* y = W x, W [rows x cols] row-major. */
static void matvec(float *y, const float *W, const float *x, uint32_t rows, uint32_t cols)
{
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)rows, (int)cols, 1.0f, W, (int)cols, x, 1, 0.0f,
                y, 1);
}

static void softmax(float *x, uint32_t n)
{
    float mx = x[0], sum = 0;
    for (uint32_t i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (uint32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    for (uint32_t i = 0; i < n; i++)
        x[i] /= sum;
}

/* run.c's RoPE: adjacent pairs, frequency by position within the head. */
static void rope(const l2_config *c, float *q, float *k, uint32_t pos)
{
    for (uint32_t i = 0; i < c->dim; i += 2) {
        uint32_t hd = i % c->head_size;
        float freq = 1.0f / powf(10000.0f, (float)hd / (float)c->head_size);
        float val = (float)pos * freq, fcr = cosf(val), fci = sinf(val);
        for (int v = 0; v < (i < c->kv_dim ? 2 : 1); v++) {
            float *vec = v == 0 ? q : k;
            float v0 = vec[i], v1 = vec[i + 1];
            vec[i] = v0 * fcr - v1 * fci;
            vec[i + 1] = v0 * fci + v1 * fcr;
        }
    }
}

/* Multi-head attention of s->q against the cached keys and values up to
 * pos, into s->xb (grouped-query: kv head = head / (n_heads/n_kv_heads)). */
static void attention(l2_state *s, uint32_t l, uint32_t pos)
{
    const l2_config *c = &s->m->c;
    size_t loff = (size_t)l * c->seq_len * c->kv_dim;
    uint32_t kv_mul = c->n_heads / c->n_kv_heads, hs = c->head_size;
    for (uint32_t h = 0; h < c->n_heads; h++) {
        const float *q = s->q + (size_t)h * hs;
        float *att = s->att + (size_t)h * c->seq_len;
        for (uint32_t t = 0; t <= pos; t++) {
            const float *k = s->key_cache + loff + (size_t)t * c->kv_dim + (h / kv_mul) * hs;
            float score = 0;
            for (uint32_t i = 0; i < hs; i++)
                score += q[i] * k[i];
            att[t] = score / sqrtf((float)hs);
        }
        softmax(att, pos + 1);
        float *xb = s->xb + (size_t)h * hs;
        memset(xb, 0, hs * sizeof *xb);
        for (uint32_t t = 0; t <= pos; t++) {
            const float *v = s->value_cache + loff + (size_t)t * c->kv_dim + (h / kv_mul) * hs;
            for (uint32_t i = 0; i < hs; i++)
                xb[i] += att[t] * v[i];
        }
    }
}

static tsafe_status layer_attention(l2_state *s, uint32_t l, uint32_t pos, l2_hook hook,
                                    void *user)
{
    const l2_model *m = s->m;
    const l2_config *c = &m->c;
    size_t d = c->dim, kv = c->kv_dim;
    tsafe_status st;
    rmsnorm(s->xb, s->x, m->rms_att + l * d, c->dim);
    matvec(s->q, m->wq + l * d * d, s->xb, c->dim, c->dim);
    matvec(s->k, m->wk + l * kv * d, s->xb, c->kv_dim, c->dim);
    matvec(s->v, m->wv + l * kv * d, s->xb, c->kv_dim, c->dim);
    float *qkv[] = {s->q, s->k, s->v};
    if (hook && (st = hook(user, l, L2_QKV, s->xb, qkv)) != TSAFE_OK)
        return st;
    rope(c, s->q, s->k, pos);
    size_t at = (size_t)l * c->seq_len * kv + (size_t)pos * kv;
    memcpy(s->key_cache + at, s->k, kv * sizeof(float));
    memcpy(s->value_cache + at, s->v, kv * sizeof(float));
    attention(s, l, pos);
    matvec(s->xb2, m->wo + l * d * d, s->xb, c->dim, c->dim);
    float *o[] = {s->xb2};
    if (hook && (st = hook(user, l, L2_ATT_O, s->xb, o)) != TSAFE_OK)
        return st;
    for (uint32_t i = 0; i < c->dim; i++)
        s->x[i] += s->xb2[i];
    return TSAFE_OK;
}

static tsafe_status layer_ffn(l2_state *s, uint32_t l, l2_hook hook, void *user)
{
    const l2_model *m = s->m;
    const l2_config *c = &m->c;
    size_t d = c->dim, hd = c->hidden_dim;
    tsafe_status st;
    rmsnorm(s->xb, s->x, m->rms_ffn + l * d, c->dim);
    matvec(s->hb, m->w1 + l * hd * d, s->xb, c->hidden_dim, c->dim);
    matvec(s->hb2, m->w3 + l * hd * d, s->xb, c->hidden_dim, c->dim);
    float *gu[] = {s->hb, s->hb2};
    if (hook && (st = hook(user, l, L2_GATE_UP, s->xb, gu)) != TSAFE_OK)
        return st;
    for (uint32_t i = 0; i < c->hidden_dim; i++) {
        float g = s->hb[i];
        s->hb[i] = g * (1.0f / (1.0f + expf(-g))) * s->hb2[i];
    }
    matvec(s->xb, m->w2 + l * d * hd, s->hb, c->dim, c->hidden_dim);
    float *dn[] = {s->xb};
    if (hook && (st = hook(user, l, L2_FFN_DOWN, s->hb, dn)) != TSAFE_OK)
        return st;
    for (uint32_t i = 0; i < c->dim; i++)
        s->x[i] += s->xb[i];
    return TSAFE_OK;
}

tsafe_status l2_forward(l2_state *s, uint32_t token, uint32_t pos, l2_hook hook, void *user,
                        const float **logits)
{
    if (!s || !logits)
        return TSAFE_E_NULL;
    const l2_model *m = s->m;
    const l2_config *c = &m->c;
    if (token >= c->vocab_size || pos >= c->seq_len)
        return TSAFE_E_RANGE;
    memcpy(s->x, m->tok_emb + (size_t)token * c->dim, c->dim * sizeof(float));
    tsafe_status st;
    for (uint32_t l = 0; l < c->n_layers; l++)
        if ((st = layer_attention(s, l, pos, hook, user)) != TSAFE_OK ||
            (st = layer_ffn(s, l, hook, user)) != TSAFE_OK)
            return st;
    rmsnorm(s->x, s->x, m->rms_final, c->dim);
    matvec(s->logits, m->wcls, s->x, c->vocab_size, c->dim);
    *logits = s->logits;
    return TSAFE_OK;
}
