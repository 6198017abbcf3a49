// isoroce-rperf-probe --serve and --connect (probe_remote.h): one text line
// each way over TCP.
#include "tools/rperf/probe_remote.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "isoroce/verbs_ext.h"

namespace isoroce::tools::rperf_probe {

static std::string gid_hex(const ibv_gid& g) {
  std::string out;
  char b[3];
  for (uint8_t x : g.raw) std::snprintf(b, sizeof b, "%02x", x), out += b;
  return out;
}

static bool parse_gid(const char* hex, ibv_gid* g) {
  if (std::strlen(hex) != 32) return false;
  for (int i = 0; i < 16; ++i)
    if (std::sscanf(hex + 2 * i, "%2hhx", &g->raw[i]) != 1) return false;
  return true;
}

static std::string read_line(int fd) {
  std::string line;
  char c;
  while (line.size() < 256 && read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

static void write_line(int fd, const std::string& line) {
  const std::string l = line + "\n";
  if (write(fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) fail("write to the peer", errno);
}

// The client's side of the exchange: connects (retrying for 10 s while the
// server is not listening yet), sends ours, returns the server's.
Remote exchange(const std::string& host_port, const Remote& ours, int* fd_out) {
  const auto colon = host_port.rfind(':');
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &res)) {
    std::fprintf(stderr, "isoroce-rperf-probe: --connect %s: %s\n", host_port.c_str(), gai_strerror(e));
    std::exit(kExitSetup);
  }
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) break;
    const int e = errno;
    close(fd), fd = -1;
    if (attempt == 99) fail("connect to " + host_port, e);
    usleep(100000);
  }
  freeaddrinfo(res);
  char line[256];
  std::snprintf(line, sizeof line, "%u %u %u %u %s", ours.wire_qpn, ours.bg_qpn, ours.bg_bytes, ours.size,
                gid_hex(ours.gid).c_str());
  write_line(fd, line);
  Remote r;
  char gid[64] = "";
  const std::string reply = read_line(fd);
  if (std::sscanf(reply.c_str(), "%u %u %lu %u %63s", &r.wire_qpn, &r.bg_qpn, &r.bg_addr, &r.bg_rkey, gid) != 5 ||
      !parse_gid(gid, &r.gid)) {
    std::fprintf(stderr, "isoroce-rperf-probe: %s answered '%s', not a --serve reply\n", host_port.c_str(),
                 reply.c_str());
    std::exit(kExitSetup);
  }
  *fd_out = fd;
  return r;
}

// --serve: P's side for one client: the wire responder (receives reposted as
// they complete) and the background WRITE target, until the client hangs up.
int serve(const Options& o) {
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(o.serve_port));
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(ls, 1) != 0)
    fail("listen on TCP port " + std::to_string(o.serve_port), errno);
  Dev p = open_dev(o.device, o.gid_index);
  const int fd = accept(ls, nullptr, nullptr);
  if (fd < 0) fail("accept", errno);
  Remote c;
  char gid[64] = "";
  const std::string req = read_line(fd);
  if (std::sscanf(req.c_str(), "%u %u %u %u %63s", &c.wire_qpn, &c.bg_qpn, &c.bg_bytes, &c.size, gid) != 5 ||
      !parse_gid(gid, &c.gid) || c.size == 0 || c.size > (1u << 20) || c.bg_bytes > (1u << 30)) {
    std::fprintf(stderr, "isoroce-rperf-probe: the client sent '%s'\n", req.c_str());
    return kExitSetup;
  }
  ibv_cq *rcq = make_cq(p, 2 * kRecvDepth), *scq = make_cq(p, 16);
  ibv_qp* resp = make_qp(p, scq, rcq, 4);
  if (o.classes) isoroce_qp_set_class_if_present(resp, ISOROCE_CLASS_LATENCY);
  Mem sink, dst;
  reg(p, sink, c.size, IBV_ACCESS_LOCAL_WRITE);
  connect(p, resp, c.gid, c.wire_qpn, o.gid_index);
  for (uint32_t i = 0; i < kRecvDepth; ++i) post_recv(resp, sink, c.size);
  ibv_qp* bg = nullptr;
  if (c.bg_qpn != 0) {
    bg = make_qp(p, scq, scq, 1);
    reg(p, dst, c.bg_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    connect(p, bg, c.gid, c.bg_qpn, o.gid_index);
  }
  char line[256];
  std::snprintf(line, sizeof line, "%u %u %lu %u %s", resp->qp_num, bg ? bg->qp_num : 0,
                bg ? reinterpret_cast<uint64_t>(dst.bytes.data()) : 0, bg ? dst.mr->rkey : 0, gid_hex(p.gid).c_str());
  write_line(fd, line);
  for (;;) {
    refill(rcq, resp, sink, c.size);
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 0) > 0) break;  // the client's end of the run (or its death)
    const timespec ts{0, 10000};
    nanosleep(&ts, nullptr);
  }
  return 0;
}

}  // namespace isoroce::tools::rperf_probe
