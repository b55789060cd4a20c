/* The server session's state, shared by server.c (intake and dispatch),
 * server_sealed.c and server_plain.c (the work of each protocol). */
#ifndef TSAFE_SESSION_SERVER_INTERNAL_H
#define TSAFE_SESSION_SERVER_INTERNAL_H

#include "session_internal.h"

typedef enum {
    WORK_NONE = 0,
    WORK_ROUND1,   /* sealed: QUERY -> RESPONSE1 */
    WORK_PREPARE,  /* sealed-private: round 2's own part, optional */
    WORK_ROUND2,   /* sealed: SHARE -> FINAL */
    WORK_PROCESS,  /* plain: REQUEST -> RESPONSE */
    WORK_APPLY     /* plain: UPRIME -> DELTA */
} server_work;

struct tsafe_session_server {
    const tsafe_session_service *svc; /* NULL until a SELECT chose one */
    const tsafe_session_service *const *choices; /* several: the host's */
    size_t n_choices;
    int select_ok; /* a SELECT may still come (nothing else came yet) */
    tsafe_session_limits lim;
    uint32_t max_frame;
    session_inbox in;
    session_outbox out;
    session_end end;
    tsafe_session_stats stats;
    server_work work;
    int await_second; /* a token is between its two rounds */
    /* sealed: one server (keys, epoch, sequence) per width */
    tsafe_sealed_server *srv[TSAFE_SESSION_MAX_WIDTHS];
    uint32_t w;                 /* the token's width */
    const tsafe_sealed_site *sel[TSAFE_SESSION_MAX_MODULES];
    size_t n_sel;
    size_t msg_off;             /* prefix bytes before the library message */
    /* the sealed pair: the sites of the next token, and its stats */
    const tsafe_sealed_site *const *token_sites;
    size_t n_token_sites;
    tsafe_lora_stats *he_sink;
    /* plain: buffers reused for every token */
    uint8_t *resp, *dbytes;
    float *dflat;
    float *deltas[TSAFE_SESSION_MAX_MODULES];
};

/* The frame in s->in is of the protocol's kinds: dispatch it (cheap steps
 * at once, rounds left as s->work). */
void tsafe_sess_server_sealed_frame(tsafe_session_server *s);
tsafe_status tsafe_sess_server_sealed_work(tsafe_session_server *s);
tsafe_status tsafe_sess_server_sealed_open(tsafe_session_server *s);
void tsafe_sess_server_sealed_close(tsafe_session_server *s);
void tsafe_sess_server_plain_frame(tsafe_session_server *s);
tsafe_status tsafe_sess_server_plain_work(tsafe_session_server *s);
tsafe_status tsafe_sess_server_plain_open(tsafe_session_server *s);
void tsafe_sess_server_plain_close(tsafe_session_server *s);
/* The limit check before a token's first round: 1 when the token may run,
 * else the session ended (DONE) with an ERROR for the peer. */
int tsafe_sess_server_token_allowed(tsafe_session_server *s);
/* A zeroed session with its limits; then open serves svc: the
 * protocol's state and the queued HELLO (server.c). */
tsafe_status tsafe_sess_server_alloc(const tsafe_session_limits *lim, tsafe_session_server **out);
tsafe_status tsafe_sess_server_open(tsafe_session_server *s, const tsafe_session_service *svc);
/* The SELECT frame in s->in (select.c). */
void tsafe_sess_server_select(tsafe_session_server *s);
/* A frame that is not expected now (nor ERROR, nor BYE). */
void tsafe_sess_server_unexpected(tsafe_session_server *s, const char *want);

#endif
