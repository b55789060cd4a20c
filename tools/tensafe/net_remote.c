/* The v3 client of `tensafe generate --server` (net_remote.h): a library
 * client session that names its modules per query, over a socket. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_remote.h"
#include "net_socket.h"

struct net_remote {
    net_conn c;
    tsafe_session_transport t;
    tsafe_session_client *s;
};

tsafe_status net_remote_open(uint32_t port, double timeout, io_mode mode, tsafe_dp_session *dp,
                             int no_dp, int unchecked, net_remote **out, char *what, size_t cap)
{
    *out = NULL;
    if (mode != IO_MODE_SEALED && mode != IO_MODE_SEALED_PRIVATE) {
        snprintf(what, cap, "--server needs --mode sealed or sealed-private");
        return TSAFE_E_ARG;
    }
    signal(SIGPIPE, SIG_IGN);
    net_remote *r = calloc(1, sizeof *r);
    if (!r)
        return TSAFE_E_NOMEM;
    r->c.fd = -1;
    tsafe_session_client_opts co = {
        .protocol = mode == IO_MODE_SEALED ? TSAFE_SESSION_SEALED : TSAFE_SESSION_SEALED_PRIVATE,
        .per_query = 1,
        .dp = dp,
        .allow_no_dp = no_dp};
    co.sealed.semi_honest = mode == IO_MODE_SEALED;
    co.sealed.unchecked_shares = (uint32_t)(unchecked && mode == IO_MODE_SEALED_PRIVATE);
    tsafe_status st = tsafe_session_client_create(&co, NULL, &r->s);
    if (st == TSAFE_OK)
        st = net_connect_local(port, timeout, &r->c.fd, what, cap);
    if (st == TSAFE_OK) {
        r->t = net_transport(&r->c);
        if ((st = tsafe_session_client_connect(r->s, &r->t)) != TSAFE_OK)
            snprintf(what, cap, "%s", tsafe_session_client_what(r->s));
    }
    if (st != TSAFE_OK) {
        net_remote_close(r);
        return st;
    }
    *out = r;
    return TSAFE_OK;
}

void net_remote_close(net_remote *r)
{
    if (!r)
        return;
    if (r->c.fd >= 0) {
        tsafe_status st = tsafe_session_client_bye(r->s, &r->t);
        (void)st; /* closing either way */
        close(r->c.fd);
    }
    tsafe_session_client_free(r->s);
    free(r);
}

size_t net_remote_count(const net_remote *r) { return r ? tsafe_session_client_modules(r->s) : 0; }

const char *net_remote_module(const net_remote *r, size_t i, uint32_t *d_in, uint32_t *rank,
                              uint32_t *d_out)
{
    const char *name = NULL;
    if (tsafe_session_client_module(r->s, i, &name, d_in, rank, d_out) != TSAFE_OK)
        return NULL;
    return name;
}

tsafe_status net_remote_delta(net_remote *r, const uint32_t *mods, size_t n, const float *x,
                              float *const *delta, tsafe_lora_stats *stats, char *what,
                              size_t cap)
{
    if (!r || !mods || !x || !delta || n == 0)
        return TSAFE_E_ARG;
    uint64_t up = r->c.bytes_out, down = r->c.bytes_in;
    tsafe_status st = tsafe_session_client_delta(r->s, &r->t, mods, n, x, delta);
    if (stats) {
        stats->bytes_up += r->c.bytes_out - up;
        stats->bytes_down += r->c.bytes_in - down;
        stats->tokens++;
    }
    if (st == TSAFE_E_ARG)
        snprintf(what, cap, "modules of one query must share one input width");
    else if (st != TSAFE_OK) {
        const char *name = NULL;
        uint32_t a, b, c;
        if (mods[0] >= net_remote_count(r) ||
            tsafe_session_client_module(r->s, mods[0], &name, &a, &b, &c) != TSAFE_OK)
            name = "?";
        snprintf(what, cap, "server 127.0.0.1: modules %s..: %s", name,
                 tsafe_session_client_what(r->s)[0] ? tsafe_session_client_what(r->s)
                                                     : tsafe_strerror(st));
    }
    return st;
}
