/* The server's HELLO, versions 1 to 3 (docs/PROTOCOL.md): encoded from a
 * service's modules, parsed and checked from an untrusted server. Every
 * length is checked against the remaining bytes, every shape against its
 * range, and nothing may follow the module list. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"
#include "tensafe/ckks.h"

#define MAX_DIM (1u << 24)
#define MAX_RANK 65536u

uint32_t tsafe_sess_session_widths(session_hello *h)
{
    uint32_t nw = 0;
    for (size_t i = 0; i < h->n; i++) {
        uint32_t w = 0;
        while (w < nw && h->width_d_in[w] != h->mod[i].d_in)
            w++;
        if (w == nw) {
            if (nw == TSAFE_SESSION_MAX_WIDTHS)
                return h->n_widths = 0;
            h->width_d_in[nw++] = h->mod[i].d_in;
        }
        h->mod_width[i] = w;
    }
    return h->n_widths = nw;
}

static void put_name(tsafe_wbuf *w, const char *s)
{
    tsafe_wbuf_u32(w, (uint32_t)strlen(s));
    tsafe_wbuf_bytes(w, s, strlen(s));
}

/* Version 1's plan fields (explicit primes: the client builds the same
 * context). */
static tsafe_status encode_plan(const tsafe_lora_plan *p, tsafe_wbuf *w)
{
    uint8_t pb[1024];
    size_t pn = 0;
    tsafe_status st = tsafe_params_serialize(&p->params, pb, sizeof pb, &pn);
    if (st != TSAFE_OK)
        return st;
    tsafe_wbuf_u32(w, (uint32_t)pn);
    tsafe_wbuf_bytes(w, pb, pn);
    tsafe_wbuf_u32(w, p->level);
    tsafe_wbuf_u32(w, p->response_level);
    tsafe_wbuf_f64(w, p->scale_x);
    tsafe_wbuf_f64(w, p->scale_a);
    const uint32_t u[] = {p->d_in, p->rank, p->half, p->cols, p->n_batches};
    for (size_t i = 0; i < 5; i++)
        tsafe_wbuf_u32(w, u[i]);
    tsafe_wbuf_f64(w, p->max_abs_x);
    tsafe_wbuf_f64(w, p->max_abs_a);
    tsafe_wbuf_f64(w, p->expected_error);
    tsafe_wbuf_f64(w, p->cost);
    put_name(w, p->name);
    return TSAFE_OK;
}

tsafe_status tsafe_sess_session_hello_encode(const session_hello *h, tsafe_wbuf *w)
{
    tsafe_wbuf_u32(w, h->version);
    if (h->version == 1) {
        tsafe_status st = encode_plan(&h->plan, w);
        if (st != TSAFE_OK)
            return st;
    } else {
        tsafe_wbuf_u32(w, h->protocol);
        if (h->version == 2)
            tsafe_wbuf_u32(w, h->mod[0].d_in);
    }
    tsafe_wbuf_u32(w, (uint32_t)h->n);
    for (size_t i = 0; i < h->n; i++) {
        put_name(w, h->mod[i].name);
        if (h->version == 3)
            tsafe_wbuf_u32(w, h->mod[i].d_in);
        tsafe_wbuf_u32(w, h->mod[i].rank);
        tsafe_wbuf_u32(w, h->mod[i].d_out);
    }
    return w->failed ? TSAFE_E_NOMEM : TSAFE_OK;
}

/* ------------------------------------------------------------ decode */

typedef struct {
    tsafe_rbuf r;
    int bad;
} reader;

static uint32_t rd_u32(reader *d)
{
    uint32_t v = 0;
    if (!d->bad && !tsafe_rbuf_u32(&d->r, &v))
        d->bad = 1;
    return d->bad ? 0 : v;
}

static double rd_f64(reader *d)
{
    double v = 0;
    if (!d->bad && !tsafe_rbuf_f64(&d->r, &v))
        d->bad = 1;
    return d->bad ? 0 : v;
}

/* 1..max printable ASCII bytes into out (max + 1). */
static int rd_name(reader *d, char *out, size_t max)
{
    uint32_t n = rd_u32(d);
    const uint8_t *p = !d->bad && n && n <= max ? tsafe_rbuf_take(&d->r, n) : NULL;
    if (!p) {
        d->bad = 1;
        return 0;
    }
    for (uint32_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] > 0x7e) {
            d->bad = 1;
            return 0;
        }
    memcpy(out, p, n);
    out[n] = 0;
    return 1;
}

static int finite_pos(double v, double max) { return isfinite(v) && v > 0 && v <= max; }

/* The v1 plan's fields against each other and the ring. */
static int plan_consistent(const tsafe_lora_plan *p)
{
    uint64_t slots = p->params.log_n >= TSAFE_MIN_LOG_N && p->params.log_n <= TSAFE_MAX_LOG_N
                         ? (uint64_t)1 << (p->params.log_n - 1)
                         : 0;
    return slots && p->d_in && p->d_in <= MAX_DIM && p->rank && p->rank <= MAX_RANK &&
           p->half == (p->d_in + 1) / 2 && p->cols && !(p->cols & (p->cols - 1)) &&
           (uint64_t)p->cols * p->half <= slots &&
           p->n_batches == (p->rank + p->cols - 1) / p->cols &&
           p->response_level <= p->level && p->level < p->params.n_primes &&
           finite_pos(p->scale_x, 0x1p62) && finite_pos(p->scale_a, 0x1p62) &&
           finite_pos(p->max_abs_x, 1e12) && finite_pos(p->max_abs_a, 1e12) &&
           isfinite(p->expected_error) && isfinite(p->cost);
}

static tsafe_status decode_plan(reader *d, tsafe_lora_plan *p, char *what, size_t cap)
{
    memset(p, 0, sizeof *p);
    uint32_t pn = rd_u32(d);
    const uint8_t *pb = !d->bad && pn <= 4096 ? tsafe_rbuf_take(&d->r, pn) : NULL;
    if (!pb)
        return TSAFE_E_FORMAT;
    tsafe_status st = tsafe_params_deserialize(pb, pn, &p->params);
    if (st != TSAFE_OK) {
        snprintf(what, cap, "server hello: parameter set");
        return st;
    }
    if (p->params.flags & TSAFE_PARAMS_INSECURE_FOR_TESTS) {
        snprintf(what, cap, "server announced an insecure parameter set");
        return TSAFE_E_INSECURE;
    }
    p->level = rd_u32(d);
    p->response_level = rd_u32(d);
    p->scale_x = rd_f64(d);
    p->scale_a = rd_f64(d);
    uint32_t *u[] = {&p->d_in, &p->rank, &p->half, &p->cols, &p->n_batches};
    for (size_t i = 0; i < 5; i++)
        *u[i] = rd_u32(d);
    p->max_abs_x = rd_f64(d);
    p->max_abs_a = rd_f64(d);
    p->expected_error = rd_f64(d);
    p->cost = rd_f64(d);
    if (!rd_name(d, p->name, sizeof p->name - 1))
        return TSAFE_E_FORMAT;
    if (!plan_consistent(p)) {
        snprintf(what, cap, "server hello: plan fields are inconsistent");
        return TSAFE_E_PARAMS;
    }
    double lq = 0;
    for (uint32_t i = 0; i < p->params.n_primes; i++)
        lq += p->params.primes[i] ? log2((double)p->params.primes[i]) : p->params.prime_bits[i];
    p->log2_q = lq;
    p->max_log2_q = tsafe_params_max_log_q(p->params.log_n);
    return TSAFE_OK;
}

/* The module list (to the end of the message): v2 modules all take d_in,
 * v3 modules carry theirs; rank <= max_rank. */
static tsafe_status decode_modules(reader *d, session_hello *h, uint32_t d_in,
                                   uint32_t max_rank, char *what, size_t cap)
{
    uint32_t n = rd_u32(d);
    if (d->bad || n == 0 || n > TSAFE_SESSION_MAX_MODULES) {
        snprintf(what, cap, "server hello: module count");
        return d->bad ? TSAFE_E_TRUNCATED : TSAFE_E_FORMAT;
    }
    if (!(h->mod = calloc(n, sizeof *h->mod)))
        return TSAFE_E_NOMEM;
    h->n = n;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        session_module_shape *m = &h->mod[i];
        if (!rd_name(d, m->name, TSAFE_SESSION_MAX_NAME))
            return TSAFE_E_FORMAT;
        m->d_in = h->version == 3 ? rd_u32(d) : d_in;
        m->rank = rd_u32(d);
        m->d_out = rd_u32(d);
        if (d->bad || !m->d_in || m->d_in > MAX_DIM || !m->rank || m->rank > max_rank ||
            !m->d_out || m->d_out > MAX_DIM) {
            snprintf(what, cap, "server hello: module %u (d_in, rank or d_out out of range)", i);
            return TSAFE_E_FORMAT;
        }
        total += m->d_out;
    }
    if (total * 4 > TSAFE_FRAME_MAX) {
        snprintf(what, cap, "server hello: output of %llu floats per row is above the frame cap",
                 (unsigned long long)total);
        return TSAFE_E_RANGE;
    }
    h->total_out = (uint32_t)total;
    if (d->r.pos != d->r.len) {
        snprintf(what, cap, "server hello has %zu trailing bytes", d->r.len - d->r.pos);
        return TSAFE_E_FORMAT;
    }
    if (!tsafe_sess_session_widths(h)) {
        snprintf(what, cap, "server hello: more than %u input widths", TSAFE_SESSION_MAX_WIDTHS);
        return TSAFE_E_RANGE;
    }
    return TSAFE_OK;
}

uint32_t tsafe_sess_session_hello_peek(const uint8_t *b, size_t len, uint32_t *protocol)
{
    uint32_t v = len >= 4 ? tsafe_load_le32(b) : 0;
    *protocol = 0;
    if (v == 1)
        *protocol = TSAFE_SESSION_PLAIN_ZERO_MOAI;
    else if ((v == 2 || v == 3) && len >= 8) {
        uint32_t m = tsafe_load_le32(b + 4);
        *protocol = m == TSAFE_SESSION_SEALED || m == TSAFE_SESSION_SEALED_PRIVATE ? m : 0;
    }
    return v >= 1 && v <= 3 ? v : 0;
}

tsafe_status tsafe_sess_session_hello_decode(const uint8_t *b, size_t len, session_hello *h, char *what,
                                  size_t cap)
{
    reader d = {{b, len, 0}, 0};
    memset(h, 0, sizeof *h);
    snprintf(what, cap, "server hello is malformed");
    h->version = rd_u32(&d);
    if (d.bad)
        return TSAFE_E_TRUNCATED;
    if (h->version < 1 || h->version > 3) {
        snprintf(what, cap, "server hello has an unknown version");
        return TSAFE_E_VERSION;
    }
    uint32_t d_in = 0, max_rank = MAX_RANK;
    tsafe_status st;
    if (h->version == 1) {
        h->protocol = TSAFE_SESSION_PLAIN_ZERO_MOAI;
        if ((st = decode_plan(&d, &h->plan, what, cap)) != TSAFE_OK)
            return st;
        d_in = h->plan.d_in;
        max_rank = h->plan.rank;
    } else {
        h->protocol = rd_u32(&d);
        d_in = h->version == 2 ? rd_u32(&d) : 1;
        if (d.bad)
            return TSAFE_E_TRUNCATED;
        if ((h->protocol != TSAFE_SESSION_SEALED &&
             h->protocol != TSAFE_SESSION_SEALED_PRIVATE) || !d_in || d_in > MAX_DIM) {
            snprintf(what, cap, "server hello: mode %u or d_in %u out of range", h->protocol,
                     d_in);
            return TSAFE_E_FORMAT;
        }
    }
    return decode_modules(&d, h, d_in, max_rank, what, cap);
}

void tsafe_sess_session_hello_free(session_hello *h)
{
    free(h->mod);
    h->mod = NULL;
    h->n = 0;
}

tsafe_status tsafe_sess_session_width_plan(const session_hello *h, uint32_t w,
                                const tsafe_sealed_opts *base, tsafe_sealed_plan *plan)
{
    uint32_t r = 0, o = 0;
    for (size_t i = 0; i < h->n; i++)
        if (h->mod_width[i] == w) {
            r = h->mod[i].rank > r ? h->mod[i].rank : r;
            o = h->mod[i].d_out > o ? h->mod[i].d_out : o;
        }
    tsafe_sealed_opts opts = *base;
    /* v2: every module reads the one query of a token; v3: a query
     * carries the few modules that read one x (the default split) */
    opts.sites_per_query = h->version == 3 ? 0 : (uint32_t)h->n;
    return tsafe_sealed_plan_derive((tsafe_sealed_mode)h->protocol, h->width_d_in[w], r, o,
                                    &opts, plan);
}
