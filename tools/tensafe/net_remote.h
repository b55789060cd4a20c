/* The client side of `tensafe serve` for hosts that run a whole model
 * (`tensafe generate --server`): one connection to a server that serves
 * modules of several input widths (HELLO version 3, docs/PROTOCOL.md), a
 * sealed client per width, and one sealed exchange (QUERY -> RESPONSE1,
 * SHARE -> FINAL) per call for any subset of the modules that read the
 * same x: the library's client session with per-query modules
 * (tensafe/lora_session.h) over a socket (net_remote.c).
 * Ownership: net_remote from net_remote_open, closed by net_remote_close
 * (NULL ok), which says BYE. Not thread-safe. */
#ifndef TENSAFE_TOOL_NET_REMOTE_H
#define TENSAFE_TOOL_NET_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"

typedef struct net_remote net_remote;

/* Connects to 127.0.0.1:port, reads the server's hello (refused unless it
 * serves mode, a sealed one, in version 3) and derives one plan per width.
 * dp (borrowed, sealed only) or no_dp as for `tensafe client`; unchecked:
 * sealed-private plans without checked shares (a server started with
 * --unchecked-shares). */
tsafe_status net_remote_open(uint32_t port, double timeout, io_mode mode, tsafe_dp_session *dp,
                             int no_dp, int unchecked, net_remote **out, char *what, size_t cap);
void net_remote_close(net_remote *r);
size_t net_remote_count(const net_remote *r);
/* Module i as announced: canonical name (borrowed), input width, rank and
 * output width. */
const char *net_remote_module(const net_remote *r, size_t i, uint32_t *d_in, uint32_t *rank,
                              uint32_t *d_out);
/* delta[k] (d_out of module mods[k]) for n modules sharing x (all of one
 * width, distinct). Bytes go to stats->bytes_up / bytes_down. */
tsafe_status net_remote_delta(net_remote *r, const uint32_t *mods, size_t n, const float *x,
                              float *const *delta, tsafe_lora_stats *stats, char *what,
                              size_t cap);

#endif
