/* The client session's crypto per protocol: keys for the announced hello,
 * and each token's messages. Sealed: SHELLO when the width's keys are new
 * (first token, rotation), QUERY; RESPONSE1 -> SHARE; FINAL -> delta.
 * Plain: REQUEST; RESPONSE -> UPRIME; DELTA -> delta. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "clock.h"
#include "client_internal.h"

static int plain(const tsafe_session_client *c)
{
    return c->opts.protocol == TSAFE_SESSION_PLAIN_ZERO_MOAI;
}

tsafe_status tsafe_sess_client_keys(tsafe_session_client *c)
{
    const session_hello *h = &c->h;
    tsafe_status st;
    if (plain(c)) {
        if ((st = tsafe_lora_client_create(&h->plan, NULL, &c->pc)) != TSAFE_OK) {
            snprintf(c->end.what, sizeof c->end.what, "client cannot use the announced plan");
            return st;
        }
        for (size_t i = 0; i < h->n; i++) {
            c->all_ranks[i] = h->mod[i].rank;
            if (!(c->u[i] = malloc(h->mod[i].rank * sizeof(float))))
                return TSAFE_E_NOMEM;
        }
        return TSAFE_OK;
    }
    /* the client's own plans, from the announced public shapes and its own
     * options, never from parameters the server sends */
    for (uint32_t w = 0; w < h->n_widths; w++)
        if ((st = tsafe_sess_session_width_plan(h, w, &c->opts.sealed, &c->plan[w])) != TSAFE_OK ||
            (st = tsafe_sealed_client_create(&c->plan[w], NULL, &c->cl[w])) != TSAFE_OK) {
            snprintf(c->end.what, sizeof c->end.what,
                     "no %s plan for the server's modules of d_in %u",
                     tsafe_session_protocol_name(c->opts.protocol), h->width_d_in[w]);
            return st;
        }
    return TSAFE_OK;
}

void tsafe_sess_client_keys_free(tsafe_session_client *c)
{
    for (uint32_t w = 0; w < TSAFE_SESSION_MAX_WIDTHS; w++) {
        tsafe_sealed_client_free(c->cl[w]);
        c->cl[w] = NULL;
    }
    for (size_t i = 0; i < TSAFE_SESSION_MAX_MODULES; i++)
        if (c->u[i]) {
            sodium_memzero(c->u[i], c->all_ranks[i] * sizeof(float));
            free(c->u[i]);
            c->u[i] = NULL;
        }
    tsafe_lora_client_free(c->pc);
    c->pc = NULL;
}

/* Queues a library message (taken) with the v3 prefix of its kind. */
static tsafe_status push_msg(tsafe_session_client *c, int kind, uint8_t *msg, size_t len)
{
    uint32_t pre[2 + TSAFE_SESSION_MAX_MODULES];
    size_t np = 0;
    if (c->h.version == 3 && (kind == TSAFE_FRAME_SHELLO || kind == TSAFE_FRAME_QUERY)) {
        pre[np++] = c->w;
        if (kind == TSAFE_FRAME_QUERY) {
            pre[np++] = (uint32_t)c->n;
            for (size_t k = 0; k < c->n; k++)
                pre[np++] = c->mods[k];
        }
    }
    uint8_t bytes[4 * (2 + TSAFE_SESSION_MAX_MODULES)];
    for (size_t i = 0; i < np; i++)
        tsafe_store_le32(bytes + 4 * i, pre[i]);
    return tsafe_sess_session_outbox_push(&c->out, kind, bytes, 4 * np, msg, len, tsafe_lora_bytes_free);
}

static tsafe_status sealed_start(tsafe_session_client *c, const float *x)
{
    tsafe_sealed_client *cl = c->cl[c->w];
    uint8_t *msg = NULL;
    size_t len = 0;
    tsafe_status st;
    if (tsafe_sealed_client_needs_hello(cl)) {
        if ((st = tsafe_sealed_client_hello(cl, &msg, &len)) != TSAFE_OK ||
            (st = push_msg(c, TSAFE_FRAME_SHELLO, msg, len)) != TSAFE_OK) {
            tsafe_sess_client_failed(c, st, "hello");
            return st;
        }
        SESSION_HE(c)->bytes_up += len; /* the library counts its other messages */
        c->stats.hellos++;
    }
    if ((st = tsafe_sealed_client_query(cl, x, &msg, &len, SESSION_HE(c))) != TSAFE_OK ||
        (st = push_msg(c, TSAFE_FRAME_QUERY, msg, len)) != TSAFE_OK) {
        tsafe_sess_client_failed(c, st, "encrypt query");
        return st;
    }
    return TSAFE_OK;
}

tsafe_status tsafe_sess_client_token_start(tsafe_session_client *c, const float *x)
{
    tsafe_status st;
    if (plain(c)) {
        uint8_t *req = NULL;
        size_t len = 0;
        if ((st = tsafe_lora_client_encrypt(c->pc, x, &req, &len, SESSION_HE(c))) != TSAFE_OK ||
            (st = push_msg(c, TSAFE_FRAME_REQUEST, req, len)) != TSAFE_OK) {
            tsafe_sess_client_failed(c, st, "encrypt");
            return st;
        }
    } else if ((st = sealed_start(c, x)) != TSAFE_OK) {
        return st;
    }
    c->phase = PHASE_FIRST;
    return TSAFE_OK;
}

/* DELTA of plain ZeRo-MOAI: every module's d_out float32, in order. */
static tsafe_status plain_delta(tsafe_session_client *c)
{
    if (c->in.len != (size_t)c->h.total_out * 4) {
        snprintf(c->end.what, sizeof c->end.what, "expected DELTA of %u floats, got %u bytes",
                 c->h.total_out, c->in.len);
        return TSAFE_E_FORMAT;
    }
    const uint8_t *p = c->in.body;
    for (size_t k = 0; k < c->n; k++)
        for (uint32_t j = 0; j < c->d_outs[k]; j++, p += 4) {
            uint32_t v = tsafe_load_le32(p);
            memcpy(&c->delta[k][j], &v, 4);
        }
    return TSAFE_OK;
}

static tsafe_status plain_answer(tsafe_session_client *c, int first, const char **step)
{
    const session_hello *h = &c->h;
    tsafe_status st;
    if (!first) {
        *step = "read delta";
        return plain_delta(c);
    }
    *step = "decrypt response";
    if ((st = tsafe_lora_client_decode(c->pc, c->in.body, c->in.len, h->n, c->all_ranks, c->u,
                                       SESSION_HE(c))) != TSAFE_OK)
        return st;
    uint8_t *msg = NULL;
    size_t len = 0;
    *step = "release u'";
    st = tsafe_lora_client_release(c->pc, h->n, c->all_ranks, c->u, c->opts.dp, &msg, &len,
                                   SESSION_HE(c));
    for (size_t i = 0; i < h->n; i++)
        sodium_memzero(c->u[i], h->mod[i].rank * sizeof(float));
    return st == TSAFE_OK ? push_msg(c, TSAFE_FRAME_UPRIME, msg, len) : st;
}

static tsafe_status sealed_answer(tsafe_session_client *c, int first, const char **step)
{
    tsafe_sealed_client *cl = c->cl[c->w];
    if (!first) {
        *step = "read result";
        return tsafe_sealed_client_finish(cl, c->in.body, c->in.len, c->n, c->d_outs, c->delta,
                                          SESSION_HE(c));
    }
    uint8_t *msg = NULL;
    size_t len = 0;
    *step = "decrypt response";
    tsafe_status st = tsafe_sealed_client_respond(cl, c->in.body, c->in.len, c->n, c->ranks,
                                                  c->d_outs, c->opts.dp, c->opts.allow_no_dp,
                                                  &msg, &len, SESSION_HE(c));
    return st == TSAFE_OK ? push_msg(c, TSAFE_FRAME_SHARE, msg, len) : st;
}

tsafe_status tsafe_sess_client_token_answer(tsafe_session_client *c)
{
    int first = c->phase == PHASE_FIRST;
    int want = plain(c) ? (first ? TSAFE_FRAME_RESPONSE : TSAFE_FRAME_DELTA)
                        : (first ? TSAFE_FRAME_RESPONSE1 : TSAFE_FRAME_FINAL);
    if (c->in.kind != want) {
        snprintf(c->end.what, sizeof c->end.what, "expected %s, got %s",
                 tsafe_frame_kind_name(want), tsafe_frame_kind_name(c->in.kind));
        tsafe_sess_client_failed(c, TSAFE_E_FORMAT, first ? "receive response" : "receive result");
        return TSAFE_E_FORMAT;
    }
    const char *step = "";
    double t0 = tsafe_now_us();
    tsafe_status st = plain(c) ? plain_answer(c, first, &step) : sealed_answer(c, first, &step);
    c->stats.work_us += tsafe_now_us() - t0;
    if (st != TSAFE_OK) {
        tsafe_sess_client_failed(c, st, step);
        return st;
    }
    if (first) {
        c->phase = PHASE_SECOND;
    } else {
        c->phase = PHASE_READY;
        c->stats.tokens++;
    }
    return TSAFE_OK;
}
