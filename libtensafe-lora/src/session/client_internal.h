/* The client session's state, shared by client.c (intake, hello, order)
 * and client_token.c (the crypto of a token in each protocol). */
#ifndef TSAFE_SESSION_CLIENT_INTERNAL_H
#define TSAFE_SESSION_CLIENT_INTERNAL_H

#include "session_internal.h"

typedef enum {
    PHASE_HELLO = 0, /* awaiting the server's HELLO */
    PHASE_READY,     /* no token running */
    PHASE_FIRST,     /* awaiting RESPONSE1 / RESPONSE */
    PHASE_SECOND,    /* awaiting FINAL / DELTA */
    PHASE_BYE        /* BYE queued */
} client_phase;

struct tsafe_session_client {
    tsafe_session_client_opts opts;
    uint32_t max_frame;
    session_inbox in;
    session_outbox out;
    session_end end;
    tsafe_session_stats stats;
    client_phase phase;
    session_hello h;
    /* sealed: one plan and client (keys, epoch) per width */
    tsafe_sealed_plan plan[TSAFE_SESSION_MAX_WIDTHS];
    tsafe_sealed_client *cl[TSAFE_SESSION_MAX_WIDTHS];
    /* plain */
    tsafe_lora_client *pc;
    float *u[TSAFE_SESSION_MAX_MODULES];
    uint32_t all_ranks[TSAFE_SESSION_MAX_MODULES];
    /* the running token */
    uint32_t w;
    size_t n;
    uint32_t mods[TSAFE_SESSION_MAX_MODULES];
    uint32_t ranks[TSAFE_SESSION_MAX_MODULES], d_outs[TSAFE_SESSION_MAX_MODULES];
    float *delta[TSAFE_SESSION_MAX_MODULES];
    tsafe_lora_stats *he_sink; /* the sealed pair's stats */
};

/* The keys for the hello just read (a plan per width, or the CKKS one). */
tsafe_status tsafe_sess_client_keys(tsafe_session_client *c);
void tsafe_sess_client_keys_free(tsafe_session_client *c);
/* submit's crypto: the first message(s) of a token, queued. */
tsafe_status tsafe_sess_client_token_start(tsafe_session_client *c, const float *x);
/* The answer frame of the phase in c->in: the next message or the delta. */
tsafe_status tsafe_sess_client_token_answer(tsafe_session_client *c);
/* Queues the SELECT naming id (select.c); TSAFE_E_ARG for a bad id. */
tsafe_status tsafe_sess_client_select(tsafe_session_client *c, const char *id);
/* A step failed: an ERROR for the server (unless the transport or the
 * server ended it) and the session's description "<step>: <why>". */
void tsafe_sess_client_failed(tsafe_session_client *c, tsafe_status st, const char *step);

#endif
