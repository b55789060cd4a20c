/* The concurrent server of `tensafe serve` (docs/SERVING.md): one libevent
 * loop on the calling (I/O) thread moves bytes between sockets and server
 * sessions; a worker pool (serve_pool.h) runs their work() steps. A slow
 * or silent peer costs only its own session: nothing blocks the loop, and
 * deadlines close what stalls. */
#ifndef TENSAFE_TOOL_SERVE_LOOP_H
#define TENSAFE_TOOL_SERVE_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/lora_session.h"

/* What a host sets (0: the default or none, as noted). */
typedef struct {
    unsigned workers;       /* work() threads (0: one per online core) */
    unsigned max_sessions;  /* open sessions; more get ERROR and close (0: 256) */
    uint32_t max_message;   /* largest frame accepted (0: the protocol's 64 MiB) */
    double idle_timeout;    /* s without a byte in or out (0: none) */
    double message_timeout; /* s for one whole frame in, or one answer out (0: none) */
    double accept_timeout;  /* s with no session and no connection: error (0: none) */
    int send_buffer;        /* SO_SNDBUF of each connection, bytes (0: the kernel's) */
    int once;               /* serve one connection, then stop */
    uint64_t requests;      /* stop after this many tokens in all (0: none) */
} serve_limits;

/* One finished session, for metering (called on the I/O thread). */
typedef struct {
    unsigned id;
    const tsafe_session_server *s; /* stats, status, what, adapter id */
    uint64_t bytes_in, bytes_out;  /* socket bytes */
    double ms;                     /* open to close */
} serve_session_end;

typedef struct {
    unsigned sessions, failed, refused; /* refused: over --max-sessions */
    unsigned closed_by_drain;           /* closed between tokens by the drain */
    unsigned probes; /* connections closed by the peer before a byte (health checks) */
    uint64_t tokens, he_ops;
    int drained; /* ended by SIGTERM/SIGINT */
} serve_totals;

/* Serves connections accepted on the listening socket lfd (made
 * non-blocking here; closed at the end) with sessions over svcs (n of
 * them, one chosen by the client's SELECT when n > 1) until SIGTERM or
 * SIGINT (a drain: new connections are refused, sessions close at their
 * next token boundary), --once, or the --requests count. on_end(user, e)
 * for each session. Returns 0, or a tsafe_status with what set (the loop
 * or the pool could not start, the accept timeout). */
int serve_loop_run(int lfd, const tsafe_session_service *const *svcs, size_t n,
                   const serve_limits *lim, void (*on_end)(void *user, const serve_session_end *e),
                   void *user, serve_totals *tot, char *what, size_t cap);

#endif
