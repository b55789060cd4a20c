// A C++ host that serves two-party HE-LoRA sessions through the library
// (tensafe/lora_session.h) on its own poll() loop: non-blocking sockets on
// 127.0.0.1, one tsafe_session_server per connection, many at once. The
// library owns the protocol (framing, hello, rounds, key rotation); this
// file owns the sockets and decides when each session's work runs (here
// in line, one step at a time; a real host could hand work() to a pool).
//
//   session_host                         self test: a built-in adapter, two
//                                        client threads, deltas checked
//   session_host --adapter DIR [--port P] [--port-file F] [--sessions N]
//                                        serve a PEFT directory's modules
//                                        (sealed-private) to `tensafe client`
//                                        until N sessions ended (default 2)
//
// A production host serves only signed packages (tsafe_lora_adapter_load_
// package) and sets deadlines per connection; both are left out here.
// Build: c++ -std=c++17 -O2 -o session_host session_host.cpp $(pkg-config --cflags --libs tensafe-lora) -pthread
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tensafe/tensafe.h>
#include <tensafe/lora_session.h>

namespace {

void check(tsafe_status st, const char *what)
{
    if (st != TSAFE_OK)
        throw std::runtime_error(std::string(what) + ": " + tsafe_strerror(st));
}

struct AdapterFree {
    void operator()(tsafe_lora_adapter *a) const { tsafe_lora_adapter_free(a); }
};
struct ServiceFree {
    void operator()(tsafe_session_service *s) const { tsafe_session_service_free(s); }
};
struct ServerFree {
    void operator()(tsafe_session_server *s) const { tsafe_session_server_free(s); }
};
struct ClientFree {
    void operator()(tsafe_session_client *c) const { tsafe_session_client_free(c); }
};
using Adapter = std::unique_ptr<tsafe_lora_adapter, AdapterFree>;
using Service = std::unique_ptr<tsafe_session_service, ServiceFree>;
using Server = std::unique_ptr<tsafe_session_server, ServerFree>;
using Client = std::unique_ptr<tsafe_session_client, ClientFree>;

// The modules of the adapter that read the first module's input width:
// `tensafe client` sends one query for all of them (hello version 2).
std::vector<tsafe_lora_module_info> modules_of(const tsafe_lora_adapter *ad)
{
    std::vector<tsafe_lora_module_info> out;
    for (size_t i = 0; i < tsafe_lora_adapter_module_count(ad); i++) {
        tsafe_lora_module_info m;
        check(tsafe_lora_adapter_module(ad, i, &m), "module");
        if (out.empty() || m.in_dim == out[0].in_dim)
            out.push_back(m);
    }
    if (out.empty())
        throw std::runtime_error("the adapter has no module");
    return out;
}

Service make_service(const std::vector<tsafe_lora_module_info> &mods)
{
    std::vector<tsafe_session_module> sm;
    for (const auto &m : mods)
        sm.push_back({m.name, m.A, m.B, uint32_t(m.in_dim), uint32_t(m.rank), uint32_t(m.out_dim),
                      float(m.scale)});
    tsafe_session_service_opts so{};
    so.protocol = TSAFE_SESSION_SEALED_PRIVATE;
    tsafe_session_service *raw = nullptr;
    check(tsafe_session_service_create(&so, sm.data(), sm.size(), &raw), "service");
    return Service(raw);
}

// --------------------------------------------------------- the loop

struct Conn {
    int fd;
    unsigned id;
    Server s;
    std::vector<uint8_t> in; // read, not yet taken by the session
};

void nonblocking(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int listen_local(uint16_t port, uint16_t *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (sockaddr *)&a, &al) != 0)
        throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
    nonblocking(fd);
    *bound = ntohs(a.sin_port);
    return fd;
}

// Sends what the session has queued until the socket would block.
void pump_out(Conn &c)
{
    for (;;) {
        const uint8_t *d;
        size_t n;
        tsafe_session_server_output(c.s.get(), &d, &n);
        if (!n)
            return;
        ssize_t w = send(c.fd, d, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (w <= 0) {
            tsafe_session_server_abort(c.s.get(), TSAFE_E_IO, "send failed");
            return;
        }
        tsafe_session_server_sent(c.s.get(), size_t(w));
    }
}

// Feeds what was read; reads more only when the session took it all.
void pump_in(Conn &c, bool readable)
{
    if (c.in.empty() && readable) {
        uint8_t buf[65536];
        ssize_t r = recv(c.fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            tsafe_session_server_abort(c.s.get(), TSAFE_E_IO, "connection closed");
            return;
        }
        if (r > 0)
            c.in.assign(buf, buf + r);
    }
    if (c.in.empty())
        return;
    size_t used = 0;
    if (tsafe_session_server_feed(c.s.get(), c.in.data(), c.in.size(), &used) != TSAFE_OK)
        return; // wants() says FAILED; its ERROR is queued
    c.in.erase(c.in.begin(), c.in.begin() + long(used));
}

// Ends a session: its line, then the socket. Returns 1 when it failed.
int finish(Conn &c)
{
    tsafe_session_stats st;
    tsafe_session_server_stats(c.s.get(), &st);
    int failed = (tsafe_session_server_wants(c.s.get()) & TSAFE_SESSION_FAILED) != 0;
    std::printf("session %u: %s, %llu tokens, %.1f KiB in, %.1f KiB out, %.3f ms/token of HE "
                "work%s%s\n",
                c.id, failed ? "failed" : "done", (unsigned long long)st.tokens,
                double(st.bytes_in) / 1024, double(st.bytes_out) / 1024,
                st.tokens ? st.work_us / 1e3 / double(st.tokens) : 0.0, failed ? ": " : "",
                failed ? tsafe_session_server_what(c.s.get()) : "");
    std::fflush(stdout);
    close(c.fd);
    return failed;
}

// Serves until `sessions` connections ended; returns the failed count.
int serve(const tsafe_session_service *svc, int lfd, unsigned sessions)
{
    std::vector<Conn> conns;
    unsigned accepted = 0, ended = 0;
    int failures = 0;
    while (ended < sessions) {
        bool busy = false;
        for (auto &c : conns) { // one work step per session per turn
            unsigned w = tsafe_session_server_wants(c.s.get());
            if ((w & TSAFE_SESSION_WANT_WORK) && !(w & TSAFE_SESSION_WANT_WRITE)) {
                tsafe_status st = tsafe_session_server_work(c.s.get());
                (void)st; // a failed step leaves its ERROR queued
                pump_in(c, false); // bytes held back while the step waited
                busy = true;
            }
        }
        std::vector<pollfd> pfd;
        pfd.push_back({lfd, short(accepted < sessions ? POLLIN : 0), 0});
        for (auto &c : conns) {
            unsigned w = tsafe_session_server_wants(c.s.get());
            short ev = 0;
            if (w & TSAFE_SESSION_WANT_WRITE)
                ev |= POLLOUT;
            if ((w & TSAFE_SESSION_WANT_READ) && c.in.empty())
                ev |= POLLIN;
            pfd.push_back({c.fd, ev, 0});
        }
        if (poll(pfd.data(), pfd.size(), busy ? 0 : 1000) < 0 && errno != EINTR)
            throw std::runtime_error("poll");
        if (pfd[0].revents & POLLIN) {
            int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd >= 0) {
                nonblocking(fd);
                tsafe_session_server *raw = nullptr;
                check(tsafe_session_server_create(svc, nullptr, &raw), "session");
                conns.push_back({fd, ++accepted, Server(raw), {}});
                pfd.push_back({fd, POLLOUT, POLLOUT}); // send its HELLO now
            }
        }
        for (size_t i = 0; i < conns.size(); i++) {
            Conn &c = conns[i];
            short re = pfd[i + 1].revents;
            if (re & POLLOUT)
                pump_out(c);
            if (re & (POLLIN | POLLHUP | POLLERR))
                pump_in(c, true);
        }
        for (size_t i = 0; i < conns.size();) {
            unsigned w = tsafe_session_server_wants(conns[i].s.get());
            if ((w & (TSAFE_SESSION_DONE | TSAFE_SESSION_FAILED)) &&
                !(w & TSAFE_SESSION_WANT_WRITE)) {
                failures += finish(conns[i]);
                conns.erase(conns.begin() + long(i));
                ended++;
            } else {
                i++;
            }
        }
    }
    return failures;
}

// -------------------------------------------------------- self test

// Deterministic values in [-1, 1) (a 32-bit LCG): the self test needs no
// randomness, only inputs without structure.
float lcg(uint32_t &state)
{
    state = state * 1664525u + 1013904223u;
    return float(state >> 8) / float(1u << 23) - 1.0f;
}

long sock_send(void *u, const uint8_t *d, size_t n)
{
    return long(send(*static_cast<int *>(u), d, n, MSG_NOSIGNAL));
}
long sock_recv(void *u, uint8_t *d, size_t n) { return long(recv(*static_cast<int *>(u), d, n, 0)); }

// One client over 127.0.0.1: `tokens` rows, each against the plaintext
// reference. Returns the largest relative L2 error (or 1e9 on failure).
double client_run(uint16_t port, const std::vector<tsafe_lora_module_info> &mods, int seed,
                  int tokens)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (sockaddr *)&a, sizeof a) != 0)
        return 1e9;
    tsafe_session_client_opts co{};
    co.protocol = TSAFE_SESSION_SEALED_PRIVATE;
    tsafe_session_client *raw = nullptr;
    double worst = 1e9;
    tsafe_session_transport t{&fd, sock_send, sock_recv};
    if (tsafe_session_client_create(&co, nullptr, &raw) == TSAFE_OK) {
        Client c(raw);
        if (tsafe_session_client_connect(c.get(), &t) == TSAFE_OK) {
            worst = 0;
            size_t d = mods[0].in_dim;
            for (int k = 0; k < tokens && worst < 1e9; k++) {
                std::vector<float> x(d);
                uint32_t state = uint32_t(1000 * seed + k);
                for (size_t j = 0; j < d; j++)
                    x[j] = lcg(state);
                std::vector<std::vector<float>> got, want;
                std::vector<float *> outs;
                for (const auto &m : mods) {
                    got.emplace_back(m.out_dim);
                    want.emplace_back(m.out_dim);
                    outs.push_back(got.back().data());
                }
                if (tsafe_session_client_delta(c.get(), &t, nullptr, 0, x.data(), outs.data()) !=
                    TSAFE_OK) {
                    std::fprintf(stderr, "client %d: %s\n", seed, tsafe_session_client_what(c.get()));
                    worst = 1e9;
                    break;
                }
                for (size_t i = 0; i < mods.size(); i++) {
                    check(tsafe_lora_module_apply(&mods[i], x.data(), want[i].data()), "reference");
                    double num = 0, den = 0;
                    for (size_t j = 0; j < mods[i].out_dim; j++) {
                        num += double(got[i][j] - want[i][j]) * (got[i][j] - want[i][j]);
                        den += double(want[i][j]) * want[i][j];
                    }
                    worst = std::fmax(worst, std::sqrt(num / den));
                }
            }
            if (tsafe_session_client_bye(c.get(), &t) != TSAFE_OK)
                worst = 1e9;
        }
    }
    close(fd);
    return worst;
}

Adapter builtin_adapter()
{
    tsafe_lora_config cfg{};
    cfg.r = 8;
    cfg.lora_alpha = 16;
    tsafe_lora_adapter *raw = nullptr;
    check(tsafe_lora_adapter_create(&cfg, &raw), "adapter");
    Adapter ad(raw);
    const size_t d = 256, r = 8;
    const char *names[] = {"layers.0.self_attn.q_proj", "layers.0.self_attn.v_proj"};
    for (int k = 0; k < 2; k++) {
        std::vector<float> A(r * d), B(d * r);
        uint32_t state = uint32_t(k + 1);
        for (auto &v : A)
            v = 0.05f * lcg(state);
        for (auto &v : B)
            v = 0.03f * lcg(state);
        check(tsafe_lora_adapter_add_module(ad.get(), names[k], r, d, d, A.data(), B.data(), 16),
              "add module");
    }
    return ad;
}

int self_test()
{
    Adapter ad = builtin_adapter();
    auto mods = modules_of(ad.get());
    Service svc = make_service(mods);
    uint16_t port = 0;
    int lfd = listen_local(0, &port);
    double err[2] = {1e9, 1e9};
    std::thread c0([&] { err[0] = client_run(port, mods, 1, 3); });
    std::thread c1([&] { err[1] = client_run(port, mods, 2, 3); });
    int failures = serve(svc.get(), lfd, 2);
    c0.join();
    c1.join();
    close(lfd);
    std::printf("session_host: two concurrent clients over 127.0.0.1:%u, worst rel L2 error "
                "%.2e and %.2e, %d failed sessions\n",
                port, err[0], err[1], failures);
    return failures == 0 && err[0] < 1e-3 && err[1] < 1e-3 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    try {
        const char *adapter = nullptr, *port_file = nullptr;
        unsigned port = 0, sessions = 2;
        for (int i = 1; i + 1 < argc; i += 2) {
            std::string k = argv[i];
            if (k == "--adapter")
                adapter = argv[i + 1];
            else if (k == "--port")
                port = unsigned(std::stoul(argv[i + 1]));
            else if (k == "--port-file")
                port_file = argv[i + 1];
            else if (k == "--sessions")
                sessions = unsigned(std::stoul(argv[i + 1]));
            else
                throw std::runtime_error("unknown option " + k);
        }
        if (argc % 2 == 0)
            throw std::runtime_error("options come in pairs (see the header comment)");
        if (!adapter)
            return self_test();
        tsafe_lora_adapter *raw = nullptr;
        check(tsafe_lora_adapter_load_peft(adapter, &raw), "load adapter");
        Adapter ad(raw);
        auto mods = modules_of(ad.get());
        Service svc = make_service(mods);
        uint16_t bound = 0;
        int lfd = listen_local(uint16_t(port), &bound);
        std::printf("session_host: serving %zu modules (d_in %zu, sealed-private) on "
                    "127.0.0.1:%u\n",
                    mods.size(), mods[0].in_dim, bound);
        std::fflush(stdout);
        if (port_file) {
            std::string tmp = std::string(port_file) + ".tmp";
            FILE *f = std::fopen(tmp.c_str(), "w");
            if (!f || std::fprintf(f, "%u\n", bound) < 0 || std::fclose(f) != 0 ||
                std::rename(tmp.c_str(), port_file) != 0)
                throw std::runtime_error("port file");
        }
        int failures = serve(svc.get(), lfd, sessions);
        close(lfd);
        return failures ? 1 : 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "session_host: %s\n", e.what());
        return 1;
    }
}
