/* Sockets and signals of the network commands (net_socket.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "net_socket.h"

volatile sig_atomic_t net_stop;

static void on_signal(int sig)
{
    (void)sig;
    net_stop = 1;
}

void net_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: blocking calls return EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void net_set_timeouts(int fd, double seconds)
{
    struct timeval tv;
    tv.tv_sec = (time_t)seconds;
    tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static struct sockaddr_in loopback(uint32_t port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* 127.0.0.1 only */
    return a;
}

int net_listen_local(uint32_t port, uint16_t *bound, int *fd_out, char *what, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(what, cap, "socket: %s", strerror(errno));
        return TSAFE_E_IO;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = loopback(port);
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        snprintf(what, cap, "listen on 127.0.0.1:%u: %s", port, strerror(errno));
        close(fd);
        return TSAFE_E_IO;
    }
    *bound = ntohs(a.sin_port);
    *fd_out = fd;
    return TSAFE_OK;
}

int net_connect_local(uint32_t port, double timeout, int *fd_out, char *what, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(what, cap, "socket: %s", strerror(errno));
        return TSAFE_E_IO;
    }
    net_set_timeouts(fd, timeout);
    struct sockaddr_in a = loopback(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        snprintf(what, cap, "connect to 127.0.0.1:%u: %s", port, strerror(errno));
        close(fd);
        return TSAFE_E_IO;
    }
    *fd_out = fd;
    return TSAFE_OK;
}

static long conn_send(void *user, const uint8_t *d, size_t n)
{
    net_conn *c = user;
    for (;;) {
        ssize_t w = send(c->fd, d, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR && !net_stop)
            continue;
        if (w > 0)
            c->bytes_out += (uint64_t)w;
        return (long)w;
    }
}

static long conn_recv(void *user, uint8_t *d, size_t n)
{
    net_conn *c = user;
    for (;;) {
        ssize_t r = recv(c->fd, d, n, 0);
        if (r < 0 && errno == EINTR && !net_stop)
            continue;
        if (r > 0)
            c->bytes_in += (uint64_t)r;
        return (long)r;
    }
}

tsafe_session_transport net_transport(net_conn *c)
{
    tsafe_session_transport t = {c, conn_send, conn_recv};
    return t;
}
