/* Sessions (internal): the pieces every server and client session is made
 * of. inbox.c assembles frames from fed bytes, outbox.c queues frames to
 * send, hello.c encodes and checks the hellos, service.c holds what a
 * server serves, server*.c and client*.c are the two state machines,
 * blocking.c drives them over send/recv callbacks. */
#ifndef TSAFE_SESSION_INTERNAL_H
#define TSAFE_SESSION_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tensafe/lora_session.h"
#include "tensafe/lora_two_party.h"

#include "../wire/frame.h"
#include "../wire/wire.h"

#define SESSION_WHAT 512

/* ------------------------------------------------------------- inbox */

/* One frame being received. The body buffer is kept (and grown) across
 * frames: tokens of megabytes then reuse the same pages. */
typedef struct {
    uint8_t hdr[TSAFE_FRAME_HEADER];
    size_t hdr_got;
    uint8_t *body;
    size_t cap;
    uint32_t len, got;
    int kind;
    int ready; /* a whole frame is in hdr/body, not yet taken */
    /* a frame moved in without a copy (memory.c): body is another
     * buffer, freed by ext_free at release; spare keeps the usual one */
    void (*ext_free)(uint8_t *);
    uint8_t *spare;
} session_inbox;

/* Takes bytes until a frame is complete (then stops: ready = 1). A bad
 * header fails with its status and description. */
tsafe_status tsafe_sess_session_inbox_feed(session_inbox *in, uint32_t max, const uint8_t *data,
                                size_t len, size_t *used, char *what, size_t cap);
void tsafe_sess_session_inbox_release(session_inbox *in); /* the frame was handled */
void tsafe_sess_session_inbox_free(session_inbox *in);

/* ------------------------------------------------------------ outbox */

#define OUTBOX_SLOTS 4
#define OUTBOX_PREFIX (TSAFE_FRAME_HEADER + 8 + 4 * TSAFE_SESSION_MAX_MODULES)

/* A queued frame: header (and the v3 prefix, or a small body) in head,
 * then an optional body (owned: freed by free_body when sent). */
typedef struct {
    uint8_t head[OUTBOX_PREFIX + 4 + TSAFE_FRAME_ERROR_TEXT];
    size_t head_len;
    uint8_t *body;
    size_t body_len;
    void (*free_body)(uint8_t *);
    size_t off; /* bytes of head + body already sent */
} outbox_frame;

typedef struct {
    outbox_frame slot[OUTBOX_SLOTS];
    size_t first, count;
    uint64_t *bytes_out; /* metering */
} session_outbox;

/* Queues kind with prefix (copied) then body (taken: free_body, or NULL
 * for a borrowed body that outlives the send). TSAFE_E_STATE when full. */
tsafe_status tsafe_sess_session_outbox_push(session_outbox *o, int kind, const uint8_t *prefix,
                                 size_t prefix_len, uint8_t *body, size_t body_len,
                                 void (*free_body)(uint8_t *));
void tsafe_sess_session_outbox_error(session_outbox *o, tsafe_status st, const char *msg);
void tsafe_sess_session_outbox_peek(const session_outbox *o, const uint8_t **data, size_t *len);
void tsafe_sess_session_outbox_sent(session_outbox *o, size_t n);
int tsafe_sess_session_outbox_empty(const session_outbox *o);
void tsafe_sess_session_outbox_free(session_outbox *o);

/* ------------------------------------------------------------- hello */

typedef struct {
    char name[TSAFE_SESSION_MAX_NAME + 1];
    uint32_t d_in, rank, d_out;
} session_module_shape;

/* What a hello announces (and the width of each module, numbered in order
 * of first appearance). */
typedef struct {
    uint32_t version;     /* 1 plain, 2 sealed, 3 sealed with widths */
    uint32_t protocol;    /* tsafe_session_protocol */
    tsafe_lora_plan plan; /* version 1 */
    size_t n;
    session_module_shape *mod; /* n entries, malloc'd */
    uint32_t n_widths;
    uint32_t width_d_in[TSAFE_SESSION_MAX_WIDTHS];
    uint32_t mod_width[TSAFE_SESSION_MAX_MODULES];
    uint32_t total_out;
} session_hello;

/* Widths of mod[0..n) by first appearance; 0 when above the maximum. */
uint32_t tsafe_sess_session_widths(session_hello *h);
tsafe_status tsafe_sess_session_hello_encode(const session_hello *h, tsafe_wbuf *w);
/* Parses an untrusted hello (any version); the caller then checks the
 * version and protocol it accepts. Frees nothing on failure but h->mod. */
tsafe_status tsafe_sess_session_hello_decode(const uint8_t *b, size_t len, session_hello *h, char *what,
                                  size_t cap);
void tsafe_sess_session_hello_free(session_hello *h);
/* The version and protocol of a hello, read before the rest (0: unknown). */
uint32_t tsafe_sess_session_hello_peek(const uint8_t *b, size_t len, uint32_t *protocol);
/* Width w's sealed plan as both sides derive it (PROTOCOL.md, Plan). */
tsafe_status tsafe_sess_session_width_plan(const session_hello *h, uint32_t w,
                                const tsafe_sealed_opts *base, tsafe_sealed_plan *plan);

/* ----------------------------------------------------------- service */

struct tsafe_session_service {
    tsafe_session_service_opts opts;
    session_hello hello;
    uint8_t *hello_bytes;
    size_t hello_len;
    tsafe_sealed_plan plan[TSAFE_SESSION_MAX_WIDTHS];
    tsafe_sealed_site **ssite;      /* sealed: one per module */
    tsafe_lora_server *plain;       /* plain: the shared CKKS server */
    tsafe_lora_site **psite;        /* plain: one per module */
    size_t plain_resp;              /* plain: response bytes (every token) */
    pthread_mutex_t plain_lock;     /* plain: work() of its sessions */
    char adapter_id[TSAFE_SESSION_MAX_ADAPTER_ID + 1]; /* "" when none */
    tsafe_backend_factory pooled;   /* opts.pool without opts.backend */
};

/* 1 when id[0..len) is an adapter id (1..TSAFE_SESSION_MAX_ADAPTER_ID
 * bytes 0x21..0x7e). select.c. */
int tsafe_sess_adapter_id_ok(const char *id, size_t len);

/* --------------------------------------------------- session errors */

/* What both machines share: the fail state and its description. */
typedef struct {
    tsafe_status st;
    int failed, done;
    char what[SESSION_WHAT];
} session_end;

void tsafe_sess_session_fail(session_end *e, session_outbox *o, tsafe_status st, const char *peer_msg,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
unsigned tsafe_sess_session_wants(const session_end *e, const session_outbox *o, int work, int ready);
uint32_t tsafe_sess_session_max_frame(const tsafe_session_limits *lim);

/* ------------------------------------------------ in-process use */

/* Where a machine's library calls count (the sealed pair sums both ends
 * into the caller's stats). */
#define SESSION_HE(m) ((m)->he_sink ? (m)->he_sink : &(m)->stats.he)

/* Moves the first queued frame of o into in when it can go whole without
 * a copy (no prefix, an owned body, nothing of it sent); 1 when moved. */
int tsafe_sess_session_move_frame(session_outbox *o, session_inbox *in);
/* 1 when the server session takes a new frame now (not failed or done,
 * no step pending, its answers sent). */
int tsafe_sess_session_server_accepting(const tsafe_session_server *s);
/* The machines' handling of a complete frame in their inbox. */
void tsafe_sess_session_server_took_frame(tsafe_session_server *s);
void tsafe_sess_session_client_took_frame(tsafe_session_client *c);

/* In-process sessions of one sealed plan (the sealed pair): no HELLO
 * frame (both ends hold the plan); the sites and their shapes are given
 * per token. The service is the caller's (zeroed, see service_for_plan). */
void tsafe_sess_session_service_for_plan(tsafe_session_service *svc, const tsafe_sealed_plan *plan);
tsafe_sealed_server *tsafe_sess_session_server_sealed(tsafe_session_server *s);
void tsafe_sess_session_server_token_sites(tsafe_session_server *s, const tsafe_sealed_site *const *sites,
                                size_t n);
tsafe_status tsafe_sess_session_client_open_plan(const tsafe_sealed_plan *plan, tsafe_dp_session *dp,
                                      int allow_no_dp, tsafe_session_client **out);
tsafe_status tsafe_sess_session_client_submit_shapes(tsafe_session_client *c, size_t n,
                                          const uint32_t *ranks, const uint32_t *d_outs,
                                          const float *x, float *const *delta);
void tsafe_sess_session_server_stats_sink(tsafe_session_server *s, tsafe_lora_stats *sink);
void tsafe_sess_session_client_stats_sink(tsafe_session_client *c, tsafe_lora_stats *sink);

#endif
