/* Sockets, signals and the session transport of `tensafe serve`, `tensafe
 * client` and `tensafe generate --server` (127.0.0.1 only). The protocol
 * itself is the library's (tensafe/lora_session.h). */
#ifndef TENSAFE_TOOL_NET_SOCKET_H
#define TENSAFE_TOOL_NET_SOCKET_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "tensafe/lora_session.h"

/* Set by SIGINT/SIGTERM (net_install_signals): blocking calls return. */
extern volatile sig_atomic_t net_stop;

/* One connection: the socket and what moved over it. */
typedef struct {
    int fd;
    uint64_t bytes_in, bytes_out;
} net_conn;

/* SIGINT/SIGTERM set net_stop (no SA_RESTART), SIGPIPE ignored. */
void net_install_signals(void);
/* Send/receive timeouts of seconds, TCP_NODELAY. */
void net_set_timeouts(int fd, double seconds);
/* A listening socket on 127.0.0.1:port (0: any free one), *bound its port.
 * TSAFE_E_IO with a description in what. */
int net_listen_local(uint32_t port, uint16_t *bound, int *fd, char *what, size_t cap);
int net_connect_local(uint32_t port, double timeout, int *fd, char *what, size_t cap);
/* The session transport over c (send/recv that retry EINTR unless
 * net_stop, count bytes). */
tsafe_session_transport net_transport(net_conn *c);
#endif
