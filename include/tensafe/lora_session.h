/* Two-party sessions: the protocol of `tensafe serve` / `tensafe client`
 * (docs/PROTOCOL.md, "TCP framing" and "Sessions") as a library, so that a
 * host that embeds the SDK serves and queries HE-LoRA deltas without the
 * tool. A session owns the framing, the hello (versions 1 to 3), the module
 * list, the round order, key rotation and the round-2 preparation, in the
 * three protocols: sealed-private (the default), sealed, plain ZeRo-MOAI.
 *
 * A session is a non-blocking state machine; the host owns the transport:
 *
 *   feed(bytes received)    -> consumed count (0 while work is pending)
 *   output() / sent(n)      -> bytes to send, and how many went out
 *   wants()                 -> READ | WRITE | WORK | READY | DONE | FAILED
 *   work()                  -> the expensive step (server rounds), run
 *                              when the host's scheduler chooses
 *
 * A host's loop: write while WRITE is set, run work() when WORK is set
 * (after the writes: the round-2 preparation then overlaps the client's
 * turn), read and feed while READ is set; close on DONE or FAILED once
 * WRITE is clear (an ERROR frame may still be queued). Nothing in a
 * session blocks, sleeps, reads a clock for a deadline or touches a
 * global: deadlines, sockets and threads are the host's. The blocking
 * helpers at the end run the same machine over send/recv callbacks.
 *
 * Errors: a session that fails queues one ERROR frame for the peer (a
 * status and a short text, never secret data) and reports the detailed
 * status and a description to the host (tsafe_session_*_what). Any bytes
 * fed (truncated, garbage, oversized, out of order) end in such an error,
 * never in a crash, an over-read or an allocation above the frame cap.
 *
 * Ownership and threads:
 * - tsafe_session_service: the served modules, their prepared sites,
 *   plans and hello. Immutable after create; shared by any number of
 *   server sessions on any threads; must outlive them.
 * - tsafe_session_server / tsafe_session_client: one per connection, with
 *   its own keys, epochs, token count, limits and metering. Not
 *   thread-safe: one thread at a time per session (different sessions may
 *   run on different threads at once; plain ZeRo-MOAI sessions of one
 *   service serialize their work() on a lock in the service, whose CKKS
 *   server they share).
 * - Pointers returned by output() stay valid until the next call on that
 *   session. The deltas a client writes (submit) are the host's buffers and
 *   must stay valid until the token ends (READY, DONE or FAILED). */
#ifndef TENSAFE_LORA_SESSION_H
#define TENSAFE_LORA_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/backend.h"
#include "tensafe/lora_dp.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_sealed.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tsafe_session_protocol {
    TSAFE_SESSION_SEALED = 1,          /* = TSAFE_SEALED */
    TSAFE_SESSION_SEALED_PRIVATE = 2,  /* = TSAFE_SEALED_PRIVATE */
    TSAFE_SESSION_PLAIN_ZERO_MOAI = 3  /* the seeds' CKKS protocol, parity only */
} tsafe_session_protocol;

/* "sealed", "sealed-private", "plain-zero-moai", "unknown". Static. */
TSAFE_API const char *tsafe_session_protocol_name(tsafe_session_protocol p);

#define TSAFE_SESSION_MAX_MODULES 256u
#define TSAFE_SESSION_MAX_WIDTHS 8u   /* distinct d_in of one service */
#define TSAFE_SESSION_MAX_NAME 1024u  /* module name bytes (printable ASCII) */
#define TSAFE_SESSION_MAX_FRAME ((uint32_t)64 << 20) /* protocol's frame cap */
#define TSAFE_SESSION_MAX_ADAPTER_ID 128u /* adapter id bytes (printable ASCII, no space) */
#define TSAFE_SESSION_ERROR_FRAME 416u   /* bytes of the largest ERROR frame */

/* wants() flags. */
#define TSAFE_SESSION_WANT_READ 1u   /* feed more bytes */
#define TSAFE_SESSION_WANT_WRITE 2u  /* output() has bytes to send */
#define TSAFE_SESSION_WANT_WORK 4u   /* work() has a step to run */
#define TSAFE_SESSION_READY 8u       /* client: hello read, no token running */
#define TSAFE_SESSION_DONE 16u       /* ended cleanly (BYE, or the token limit) */
#define TSAFE_SESSION_FAILED 32u     /* ended with an error (status/what) */

/* Host-set limits of one session (zero = default). */
typedef struct tsafe_session_limits {
    uint32_t max_frame;  /* largest frame accepted, bytes (default and
                            ceiling: TSAFE_SESSION_MAX_FRAME) */
    uint64_t max_tokens; /* server: tokens (queries) served, then the next
                            query gets ERROR "request limit of this server
                            reached" and the session ends DONE; 0: none */
} tsafe_session_limits;

/* Metering of one session (per session; add them up for a host). */
typedef struct tsafe_session_stats {
    uint64_t tokens;      /* finished tokens (queries under hello v3) */
    uint64_t hellos;      /* SHELLOs (key epochs) */
    uint64_t bytes_in, bytes_out; /* transport bytes, frame headers included */
    double work_us;       /* server: rounds; client: its own crypto */
    double ahead_us;      /* server: round-2 preparation (while the client works) */
    int limit_reached;    /* server: ended by max_tokens */
    tsafe_lora_stats he;  /* the library's per-step counters */
} tsafe_session_stats;

/* ------------------------------------------------------------ service */

/* One served module: A (rank x d_in) and B (d_out x rank) row-major,
 * copied at create; name borrowed until create returns. */
typedef struct tsafe_session_module {
    const char *name;
    const float *A, *B;
    uint32_t d_in, rank, d_out;
    float scale;
} tsafe_session_module;

typedef struct tsafe_session_service_opts {
    tsafe_session_protocol protocol;
    /* 1: hello version 3 (sealed modes): each query names its width and
     * modules. Implied when the modules take several d_in. 0: version 2
     * (sealed; one query for every module) or 1 (plain). */
    int per_query;
    /* sealed modes: x/a/b bits and semi_honest (required for sealed);
     * sites_per_query is set by the service (PROTOCOL.md, Plan). The
     * client must be given the same bits: the hello carries shapes only. */
    tsafe_sealed_opts sealed;
    /* plain ZeRo-MOAI: the CKKS plan (from tsafe_lora_plan_auto or a
     * preset) for the modules; copied. Required there, ignored otherwise. */
    const tsafe_lora_plan *plain_plan;
    /* Where the ring work runs (NULL: CPU); must outlive the service. */
    const tsafe_backend_factory *backend;
    /* The id a client names in its SELECT to be served this service
     * (docs/PROTOCOL.md, "Several adapters per server"); copied; NULL or
     * "": none. 1..TSAFE_SESSION_MAX_ADAPTER_ID bytes 0x21..0x7e. */
    const char *adapter_id;
    /* Threads for the sessions' ring work (NULL: one; borrowed, must
     * outlive the service): a sealed round seals its blocks on them
     * (tsafe_sealed_server_use_pool) and, with backend NULL, the CPU
     * backends split their batched products over them
     * (tsafe_backend_cpu_factory_pool). Give the same pool to
     * tsafe_session_server_work_batch. Same bytes as without. */
    tsafe_cpu_pool *pool;
} tsafe_session_service_opts;

typedef struct tsafe_session_service tsafe_session_service;

/* Derives the plans (one per input width), prepares every module and
 * encodes the hello. TSAFE_E_INSECURE for sealed without semi_honest;
 * backend failures (TSAFE_E_NO_DEVICE, ...) are reported here. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_service_create(
    const tsafe_session_service_opts *opts, const tsafe_session_module *modules,
    size_t n_modules, tsafe_session_service **out);
TSAFE_API void tsafe_session_service_free(tsafe_session_service *svc);
/* Input widths (1 .. TSAFE_SESSION_MAX_WIDTHS; 1 in plain) and the sealed
 * plan of width w with its module count (sealed modes). */
TSAFE_API size_t tsafe_session_service_widths(const tsafe_session_service *svc);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_service_plan(
    const tsafe_session_service *svc, size_t w, tsafe_sealed_plan *plan,
    size_t *n_modules);
/* The hello version the service speaks (1, 2 or 3). */
TSAFE_API uint32_t tsafe_session_service_hello_version(const tsafe_session_service *svc);
/* The service's adapter id ("" when none; borrowed from svc). */
TSAFE_API const char *tsafe_session_service_adapter_id(const tsafe_session_service *svc);

/* ------------------------------------------------------------- server */

typedef struct tsafe_session_server tsafe_session_server;

/* A session for one connection; its HELLO is queued at once (WRITE).
 * lim may be NULL. svc is borrowed and must outlive the session. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_server_create(
    const tsafe_session_service *svc, const tsafe_session_limits *lim,
    tsafe_session_server **out);
/* A session for one connection that serves one of n services (1 ..
 * TSAFE_SESSION_MAX_MODULES), the one whose adapter id the client names
 * in a SELECT frame before anything else; the chosen service's HELLO is
 * queued then. An unknown id ends the session with ERROR
 * TSAFE_E_NOT_FOUND. With n == 1 the HELLO is queued at once (clients
 * that send no SELECT are served) and a SELECT, when one comes first,
 * must name that service's id. The ids of n > 1 services must be set and
 * distinct (TSAFE_E_ARG). svcs (the array and the services) is borrowed
 * and must outlive the session. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_server_create_select(
    const tsafe_session_service *const *svcs, size_t n, const tsafe_session_limits *lim,
    tsafe_session_server **out);
TSAFE_API void tsafe_session_server_free(tsafe_session_server *s);
/* Takes up to len bytes; *used says how many. A complete frame that needs
 * work() stops the intake, and so do answers not yet sent (plain
 * ZeRo-MOAI: any; sealed: two): *used may be < len; feed the rest after
 * work() and the writes. TSAFE_OK unless the session failed now or before (wants() then
 * says FAILED; the peer's ERROR may be queued). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_server_feed(
    tsafe_session_server *s, const uint8_t *data, size_t len, size_t *used);
/* The next bytes to send (len 0: none); borrowed until the next call. */
TSAFE_API void tsafe_session_server_output(tsafe_session_server *s, const uint8_t **data,
                                           size_t *len);
/* n (<= the len output() gave) bytes went out. */
TSAFE_API void tsafe_session_server_sent(tsafe_session_server *s, size_t n);
TSAFE_API unsigned tsafe_session_server_wants(const tsafe_session_server *s);
/* The pending step: round 1 or 2 of a sealed token (then the round-2
 * preparation, a step of its own), or the plain products / apply. The
 * only call that does HE work. TSAFE_OK with nothing pending. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_server_work(tsafe_session_server *s);
/* The pending steps of many sessions in one call (the work() of each of
 * s[0..n) that has one; the others are skipped), spread over pool's
 * threads (NULL: one after the other here). Every session gets the bytes
 * work() would give it, and keeps its own failure (status/wants); the
 * call fails only for its arguments: TSAFE_E_NULL for a NULL entry,
 * TSAFE_E_ARG for a session listed twice. Give the service a pooled CPU
 * factory (tsafe_backend_cpu_factory_pool) on the same pool and a lone
 * session's step spreads its batched products over the threads too (a
 * token's sites are one batched call already).
 * Threads: the sessions must not be used by any other thread during the
 * call; pool may be shared with other callers (its batches take turns). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_server_work_batch(
    tsafe_session_server *const *s, size_t n, tsafe_cpu_pool *pool);
/* The host ends the session (a timeout, a shutdown): st and what are
 * reported to the peer in an ERROR frame when there is still a transport
 * (send it), and kept as the session's failure. */
TSAFE_API void tsafe_session_server_abort(tsafe_session_server *s, tsafe_status st,
                                          const char *what);
/* The failure status (TSAFE_OK while none) and its description
 * (borrowed; "" while none). */
TSAFE_API tsafe_status tsafe_session_server_status(const tsafe_session_server *s);
TSAFE_API const char *tsafe_session_server_what(const tsafe_session_server *s);
TSAFE_API void tsafe_session_server_stats(const tsafe_session_server *s,
                                          tsafe_session_stats *out);
/* For a host's deadlines and drain: the bytes of a frame received in part
 * (0 at a frame boundary), and whether the session is between tokens (1:
 * no frame in part, no step pending, no token between its rounds, nothing
 * left to send; closing it now cuts no token). NULL: 0 and 1. */
TSAFE_API size_t tsafe_session_server_partial(const tsafe_session_server *s);
TSAFE_API int tsafe_session_server_idle(const tsafe_session_server *s);
/* The adapter id of the service this session serves ("" while none is
 * chosen, or without an id; borrowed). */
TSAFE_API const char *tsafe_session_server_adapter_id(const tsafe_session_server *s);

/* An ERROR frame (st, msg truncated to the protocol's 400 bytes) into out,
 * for a host that refuses a connection without a session (too many
 * sessions, shutting down). Returns its length, 0 when cap <
 * TSAFE_SESSION_ERROR_FRAME or out is NULL. msg NULL: tsafe_strerror. */
TSAFE_API size_t tsafe_session_error_frame(tsafe_status st, const char *msg, uint8_t *out,
                                           size_t cap);

/* ------------------------------------------------------------- client */

typedef struct tsafe_session_client_opts {
    tsafe_session_protocol protocol; /* refused: a server of another one */
    /* 0: one query for every module (hello 1 or 2; version 3 refused),
     * 1: queries name their modules (hello 3 only). */
    int per_query;
    tsafe_sealed_opts sealed;  /* bits, rotate_after, semi_honest (sealed) */
    tsafe_dp_session *dp;      /* borrowed; sealed / plain releases */
    int allow_no_dp;           /* sealed: release u without noise */
    /* The adapter to be served (borrowed until create; NULL: none): a
     * SELECT frame naming it is queued first (WRITE), before the HELLO is
     * read. A server of several adapters needs it; one of a single adapter
     * checks it against its own. */
    const char *adapter_id;
} tsafe_session_client_opts;

typedef struct tsafe_session_client tsafe_session_client;

/* A client awaiting the server's hello (READ). Fresh keys, never sent. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_create(
    const tsafe_session_client_opts *opts, const tsafe_session_limits *lim,
    tsafe_session_client **out);
TSAFE_API void tsafe_session_client_free(tsafe_session_client *c);
/* As the server's feed/output/sent/wants. The client's crypto (decrypt,
 * respond, finish) runs inside feed when its frame completes. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_feed(
    tsafe_session_client *c, const uint8_t *data, size_t len, size_t *used);
TSAFE_API void tsafe_session_client_output(tsafe_session_client *c, const uint8_t **data,
                                           size_t *len);
TSAFE_API void tsafe_session_client_sent(tsafe_session_client *c, size_t n);
TSAFE_API unsigned tsafe_session_client_wants(const tsafe_session_client *c);
/* After READY: the announced modules (n) and module i (name borrowed from
 * the client). */
TSAFE_API size_t tsafe_session_client_modules(const tsafe_session_client *c);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_module(
    const tsafe_session_client *c, size_t i, const char **name, uint32_t *d_in,
    uint32_t *rank, uint32_t *d_out);
/* The plans the client derived (sealed) or was announced (plain), to
 * print; *sealed / *plain: whichever the protocol has. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_plan(
    const tsafe_session_client *c, size_t w, tsafe_sealed_plan *sealed,
    tsafe_lora_plan *plain);
/* Starts a token when READY: x (d_in floats of the modules, copied now)
 * and delta[k] (d_out of module mods[k]; the host's, written when the
 * token ends). mods NULL with n 0: every module, in the hello's order
 * (per_query 0); per_query 1: n distinct modules of one width. Queues
 * SHELLO (first token, key rotation) and QUERY (or REQUEST). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_submit(
    tsafe_session_client *c, const uint32_t *mods, size_t n, const float *x,
    float *const *delta);
/* Queues BYE when READY; DONE once it is sent. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_close(tsafe_session_client *c);
TSAFE_API void tsafe_session_client_abort(tsafe_session_client *c, tsafe_status st,
                                          const char *what);
TSAFE_API tsafe_status tsafe_session_client_status(const tsafe_session_client *c);
TSAFE_API const char *tsafe_session_client_what(const tsafe_session_client *c);
TSAFE_API void tsafe_session_client_stats(const tsafe_session_client *c,
                                          tsafe_session_stats *out);

/* ------------------------------------------------ in-memory transport */

/* Both ends in this thread (tests, benchmarks, in-process pairs): moves
 * frames between s and c (without copying a whole library message) and
 * runs s's work until nothing moves, e.g. until a submitted token is done
 * (the client READY) or either side failed. TSAFE_OK, or the failed
 * side's status (client first). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_pump(tsafe_session_server *s,
                                                          tsafe_session_client *c);

/* ------------------------------------------------- blocking helpers */

/* A blocking byte transport: send/recv return the bytes moved (> 0), 0
 * for a closed peer (recv), or < 0 for an error (timeouts included). */
typedef struct tsafe_session_transport {
    void *user;
    long (*send)(void *user, const uint8_t *data, size_t len);
    long (*recv)(void *user, uint8_t *data, size_t cap);
} tsafe_session_transport;

/* Runs a server session to its end (DONE or FAILED), running work() in
 * line. TSAFE_OK after DONE; else the session's status (TSAFE_E_IO when
 * the transport failed, the description in tsafe_session_server_what). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_server_run(
    tsafe_session_server *s, const tsafe_session_transport *t);
/* Reads the hello: until READY (TSAFE_OK) or FAILED. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_connect(
    tsafe_session_client *c, const tsafe_session_transport *t);
/* One token (submit, then until READY again). */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_delta(
    tsafe_session_client *c, const tsafe_session_transport *t, const uint32_t *mods,
    size_t n, const float *x, float *const *delta);
/* BYE, flushed; after a failure (abort) it sends the queued ERROR
 * instead and returns the session's status. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_session_client_bye(
    tsafe_session_client *c, const tsafe_session_transport *t);

#ifdef __cplusplus
}
#endif
#endif
