// isoroce-bench-cm: the time from nothing to the first completed SEND of a
// new rdma_cm connection through isoroced, beside a kernel TCP connect and
// first message on loopback measured in the same run (bench/cm/README.md).
//
// rdma_cm (the endpoint API of rdma_cma.h/rdma_verbs.h, linked against
// libisoroce-rdmacm and libisoroce-verbs): a server thread listens on
// --server (isoroce1 of `isoroced --loopback`); per iteration the client,
// bound to --client (isoroce0), times
//   ep      rdma_create_ep (address and route resolution, its QP)
//   reg     rdma_reg_msgs of a 64-byte buffer
//   connect rdma_connect (REQ, REP, RTU on QP1 of both devices)
//   send    rdma_post_send of 64 bytes (signaled) until rdma_get_send_comp
//           (the responder's ACK: one round trip)
// then disconnects and destroys everything (not timed).
// TCP: per iteration socket(), connect() to a listener on --tcp, send() of
// 64 bytes and recv() of the listener's 1-byte answer (one round trip too).
//
// Prints median / p10 / p90 in microseconds and the ratio rdma_cm : TCP.
//
// --role serve / --role connect split the two sides over two processes, for
// two daemons (each process reaches the daemon of its ISOROCE_SOCKET, in its
// own network namespace): `serve` only listens and serves --iters
// connections; `connect` runs the client and the TCP baseline.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

struct Opts {
  int iters = 200;
  std::string server = "10.0.0.2", client = "10.0.0.1", port = "19650", tcp = "127.0.0.1";
  std::string role = "both";  // both (one process, one daemon), serve, connect
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

ibv_qp_init_attr qp_attr() {
  ibv_qp_init_attr a{};
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;
  return a;
}

rdma_addrinfo* addrinfo(const Opts& o, bool passive) {
  rdma_addrinfo hints{}, *res = nullptr;
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_flags = passive ? RAI_PASSIVE | RAI_NUMERICHOST : RAI_NUMERICHOST;
  sockaddr_in src{};
  if (!passive) {
    src.sin_family = AF_INET;
    inet_pton(AF_INET, o.client.c_str(), &src.sin_addr);
    hints.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
    hints.ai_src_len = sizeof src;
  }
  if (rdma_getaddrinfo(o.server.c_str(), o.port.c_str(), &hints, &res) != 0) die("rdma_getaddrinfo");
  return res;
}

// Serves iters connections: a receive posted before the accept, its
// completion, then the client's disconnect.
void rdma_server(const Opts& o, rdma_cm_id* listen, std::atomic<bool>* failed) {
  char buf[64];
  for (int k = 0; k < o.iters; ++k) {
    rdma_cm_id* id = nullptr;
    if (rdma_get_request(listen, &id) != 0) return perror("rdma_get_request"), failed->store(true);
    ibv_mr* mr = rdma_reg_msgs(id, buf, sizeof buf);
    if (!mr || rdma_post_recv(id, nullptr, buf, sizeof buf, mr) != 0) return perror("server post_recv"), failed->store(true);
    if (rdma_accept(id, nullptr) != 0) return perror("rdma_accept"), failed->store(true);
    ibv_wc wc{};
    if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
      return std::fprintf(stderr, "server: receive failed\n"), failed->store(true);
    rdma_disconnect(id);  // waits for the client's (sync id)
    rdma_dereg_mr(mr);
    rdma_destroy_ep(id);
  }
}

struct Steps {
  std::vector<double> ep, reg, connect, send, total;
};

void rdma_client(const Opts& o, Steps* s) {
  char buf[64];
  std::memset(buf, 0x5a, sizeof buf);
  for (int k = 0; k < o.iters; ++k) {
    rdma_addrinfo* res = addrinfo(o, false);
    ibv_qp_init_attr attr = qp_attr();
    rdma_cm_id* id = nullptr;
    const auto t0 = Clock::now();
    int tries = 0;
    while (rdma_create_ep(&id, res, nullptr, &attr) != 0)
      if (++tries > 50) die("rdma_create_ep");
    const auto t1 = Clock::now();
    ibv_mr* mr = rdma_reg_msgs(id, buf, sizeof buf);
    if (!mr) die("rdma_reg_msgs");
    const auto t2 = Clock::now();
    if (rdma_connect(id, nullptr) != 0) die("rdma_connect");
    const auto t3 = Clock::now();
    if (rdma_post_send(id, nullptr, buf, sizeof buf, mr, IBV_SEND_SIGNALED) != 0) die("rdma_post_send");
    ibv_wc wc{};
    if (rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS) {
      std::fprintf(stderr, "client: send failed (%s)\n", ibv_wc_status_str(wc.status));
      std::exit(1);
    }
    const auto t4 = Clock::now();
    s->ep.push_back(us(t0, t1));
    s->reg.push_back(us(t1, t2));
    s->connect.push_back(us(t2, t3));
    s->send.push_back(us(t3, t4));
    s->total.push_back(us(t0, t4));
    rdma_disconnect(id);
    rdma_dereg_mr(mr);
    rdma_destroy_ep(id);
    rdma_freeaddrinfo(res);
  }
}

std::vector<double> tcp_run(const Opts& o) {
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, o.tcp.c_str(), &a.sin_addr);
  const int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 64) != 0) die("tcp listen");
  socklen_t al = sizeof a;
  getsockname(l, reinterpret_cast<sockaddr*>(&a), &al);
  std::thread server([&] {
    char buf[64];
    for (int k = 0; k < o.iters; ++k) {
      const int c = accept(l, nullptr, nullptr);
      if (c < 0) die("accept");
      size_t got = 0;
      while (got < sizeof buf) {
        const ssize_t n = recv(c, buf + got, sizeof buf - got, 0);
        if (n <= 0) die("server recv");
        got += static_cast<size_t>(n);
      }
      if (send(c, buf, 1, 0) != 1) die("server send");
      close(c);
    }
  });
  std::vector<double> t;
  char buf[64];
  std::memset(buf, 0x5a, sizeof buf);
  for (int k = 0; k < o.iters; ++k) {
    const auto t0 = Clock::now();
    const int c = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
    if (send(c, buf, sizeof buf, 0) != static_cast<ssize_t>(sizeof buf)) die("send");
    char r;
    if (recv(c, &r, 1, 0) != 1) die("recv");
    t.push_back(us(t0, Clock::now()));
    close(c);
  }
  server.join();
  close(l);
  return t;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

void row(const char* name, const std::vector<double>& v) {
  std::printf("%-40s %10.1f %10.1f %10.1f\n", name, pct(v, 0.5), pct(v, 0.1), pct(v, 0.9));
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int k = 1; k + 1 < argc; k += 2) {
    const std::string f = argv[k], v = argv[k + 1];
    if (f == "--iters") o.iters = std::atoi(v.c_str());
    else if (f == "--server") o.server = v;
    else if (f == "--client") o.client = v;
    else if (f == "--port") o.port = v;
    else if (f == "--tcp") o.tcp = v;
    else if (f == "--role" && (v == "both" || v == "serve" || v == "connect")) o.role = v;
    else {
      std::fprintf(stderr,
                   "usage: %s [--iters N] [--server ADDR] [--client ADDR] [--port P] [--tcp ADDR]"
                   " [--role both|serve|connect]\n",
                   argv[0]);
      return 2;
    }
  }
  std::atomic<bool> failed{false};
  rdma_addrinfo* pres = nullptr;
  rdma_cm_id* listen = nullptr;
  std::thread server;
  if (o.role != "connect") {
    pres = addrinfo(o, true);
    ibv_qp_init_attr attr = qp_attr();
    if (rdma_create_ep(&listen, pres, nullptr, &attr) != 0) die("rdma_create_ep (passive)");
    if (rdma_listen(listen, 16) != 0) die("rdma_listen");
    if (o.role == "serve") std::printf("listening on %s port %s\n", o.server.c_str(), o.port.c_str()), std::fflush(stdout);
    server = std::thread(rdma_server, std::cref(o), listen, &failed);
  }
  Steps s;
  if (o.role != "serve") rdma_client(o, &s);
  if (server.joinable()) server.join();
  if (listen) rdma_destroy_ep(listen);
  if (pres) rdma_freeaddrinfo(pres);
  if (failed) return 1;
  if (o.role == "serve") return 0;
  const std::vector<double> tcp = tcp_run(o);
  std::printf("%d connections each; microseconds\n", o.iters);
  std::printf("%-40s %10s %10s %10s\n", "step", "median", "p10", "p90");
  row("rdma_cm: rdma_create_ep (addr, route, QP)", s.ep);
  row("rdma_cm: rdma_reg_msgs", s.reg);
  row("rdma_cm: rdma_connect (REQ/REP/RTU)", s.connect);
  row("rdma_cm: first SEND until its completion", s.send);
  row("rdma_cm: total, nothing to first SEND", s.total);
  row("kernel TCP: connect + send + 1-byte reply", tcp);
  std::printf("ratio rdma_cm total / TCP (medians): %.1f\n", pct(s.total, 0.5) / pct(tcp, 0.5));
  return 0;
}
