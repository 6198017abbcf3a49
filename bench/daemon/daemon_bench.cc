// isoroce-bench-daemon: RC WRITE message rate and goodput between the two ports
// of a loopback pair, measured three ways in one run, with ratios:
//
//   ctl     the real daemon (isoroced --loopback, one worker lcore), driven
//           through its control socket: every post_send and poll_cq is a JSON
//           round trip, as the current client library does it.
//   inproc  the daemon's data path alone: two dataplane::Devices on the same
//           in-process net_ring pair (Port::make_ring_pair), one thread calling
//           Device::poll on both and posting to the engines directly.
//   raw     the floor: the same ring pair with rte_eth_tx_burst/rx_burst only,
//           32-packet bursts of 64 B and 1 KB frames (payload copied into each
//           mbuf on the way in, as a sender must).
//
// WRITEs of 64 B, 4 KB and 64 KB, `--window` outstanding (default 64), path MTU
// 1024, fifo policy, emulated links of --link-gbps (default 400, so the pacer is
// not the limit). Ratios: message rate of 64 B WRITEs against raw 64 B packets
// per second; goodput of 4 KB/64 KB WRITEs against raw 1 KB frames' payload
// goodput (1 KB is the RoCE MTU: the same number of frames per byte).
//
//   isoroce-bench-daemon [--seconds S] [--window N] [--link-gbps G] [--only ctl|inproc|raw]
#include <infiniband/verbs.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/dpdk/clock.h"
#include "dataplane/dpdk/device.h"
#include "dataplane/dpdk/port.h"
#include "tests/daemon/harness.h"
#include "tests/daemon/shm_client.h"
#include "transport/engine/engine.h"

namespace {

using Clock = std::chrono::steady_clock;
using isoroce::test::json;

struct Options {
  double seconds = 2.0;
  uint32_t window = 64;
  double link_gbps = 400;
  std::string only;
};

struct Result {
  double msgs_per_s = 0;  // messages (or packets, raw) per second
  double gbps = 0;        // payload goodput
};

constexpr uint32_t kSizes[] = {64, 4096, 65536};

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// ---- ctl: the daemon through its socket ------------------------------------

bool bench_ctl(const Options& o, std::map<uint32_t, Result>* out) {
  char gbps[32];
  std::snprintf(gbps, sizeof gbps, "%g", o.link_gbps);
  isoroce::test::DaemonProcess d({"--loopback", "--link-gbps", gbps, "--lcores", "0,1"});
  if (!d.ok()) {
    std::fprintf(stderr, "ctl: isoroced did not start:\n%s\n", d.log().c_str());
    return false;
  }
  constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  auto va = std::make_unique<isoroce::test::Verbs>(d.socket(), "isoroce0");
  auto vb = std::make_unique<isoroce::test::Verbs>(d.socket(), "isoroce1");
  isoroce::test::Verbs& a = *va;
  isoroce::test::Verbs& b = *vb;
  const uint32_t cq_a = a.create_cq(1024), cq_b = b.create_cq(1024);
  const uint32_t qa = a.create_qp(cq_a, "rc", o.window), qb = b.create_qp(cq_b, "rc", o.window);
  isoroce::test::Buffer* ba = a.reg(1 << 20, kAll);
  isoroce::test::Buffer* bb = b.reg(1 << 20, kAll);
  if (!a.ok() || !b.ok() || !qa || !qb || !ba || !bb ||
      !a.connect_rc(qa, "10.0.0.2", qb, 1, 2)["ok"].get<bool>() ||
      !b.connect_rc(qb, "10.0.0.1", qa, 2, 1)["ok"].get<bool>()) {
    std::fprintf(stderr, "ctl: setting up the QP pair failed\n%s\n", d.log().c_str());
    return false;
  }
  for (uint32_t size : kSizes) {
    const json wr = {{"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                     {"sg", {isoroce::test::sge(*ba, 0, size)}}, {"remote_addr", bb->iova()}, {"rkey", bb->rkey}};
    auto post = [&](uint64_t id) {
      json w = wr;
      w["wr_id"] = id;
      return a.post_send(qa, w)["ok"].get<bool>();
    };
    uint64_t posted = 0, done = 0, counted = 0;
    for (; posted < o.window; ++posted)
      if (!post(posted)) return false;
    Clock::time_point t0{};
    const auto start = Clock::now();
    bool measuring = false;
    for (;;) {
      json r = a.call({{"op", "poll_cq"}, {"cq", cq_a}, {"max", 64}});
      if (!r["ok"].get<bool>()) return false;
      for (const json& wc : r["wc"]) {
        if (wc["status"] != 0) {
          std::fprintf(stderr, "ctl: completion in error: %s\n", wc.dump().c_str());
          return false;
        }
        ++done;
        if (measuring) ++counted;
        if (!post(posted++)) return false;
      }
      const auto now = Clock::now();
      if (!measuring && secs(start, now) > 0.3) {  // warm-up
        measuring = true;
        t0 = now;
      }
      if (measuring && secs(t0, now) >= o.seconds) {
        const double s = secs(t0, now);
        (*out)[size] = {counted / s, counted * size * 8.0 / s / 1e9};
        break;
      }
    }
    // Drain what is outstanding before the next size.
    const size_t left = posted - done;
    if (a.wait(cq_a, left, 10000).size() != left) return false;
  }
  va.reset();  // the clients go before the daemon stops
  vb.reset();
  d.stop();
  return true;
}

// ---- shm: the daemon through the shared-memory queues ----------------------
// What libisoroce-verbs does: WQEs written into the SQ ring, completions read
// from the CQ ring, no request on the socket after setup.

bool bench_shm(const Options& o, std::map<uint32_t, Result>* out) {
  char gbps[32];
  std::snprintf(gbps, sizeof gbps, "%g", o.link_gbps);
  isoroce::test::DaemonProcess d({"--loopback", "--link-gbps", gbps, "--lcores", "0,1"});
  if (!d.ok()) {
    std::fprintf(stderr, "shm: isoroced did not start:\n%s\n", d.log().c_str());
    return false;
  }
  isoroce::test::ShmEnd a = isoroce::test::make_end(d.socket(), "isoroce0", false, o.window);
  isoroce::test::ShmEnd b = isoroce::test::make_end(d.socket(), "isoroce1", false, o.window);
  if (!a.qpn || !b.qpn || !a.buf || !b.buf || !a.v->connect_rc(a.qpn, "10.0.0.2", b.qpn, 1, 2)["ok"].get<bool>() ||
      !b.v->connect_rc(b.qpn, "10.0.0.1", a.qpn, 2, 1)["ok"].get<bool>()) {
    std::fprintf(stderr, "shm: setting up the QP pair failed\n%s\n", d.log().c_str());
    return false;
  }
  for (uint32_t size : kSizes) {
    auto post = [&](uint64_t id) {
      isoroce::test::post_send(a.sq, id, IBV_WR_RDMA_WRITE, a.buf->iova(), size, a.buf->lkey, b.buf->iova(),
                               b.buf->rkey);
    };
    uint64_t posted = 0, done = 0, counted = 0;
    for (; posted < o.window; ++posted) post(posted);
    Clock::time_point t0{};
    const auto start = Clock::now();
    bool measuring = false;
    for (;;) {
      const uint32_t prod = isoroce::shm::producer(a.cq_ring.base).load(std::memory_order_acquire);
      uint32_t cons = isoroce::shm::consumer(a.cq_ring.base).load(std::memory_order_relaxed);
      for (; cons != prod; cons = (cons + 1) & a.cq_ring.mask()) {
        ib_uverbs_wc wc;
        std::memcpy(&wc, a.cq_ring.at(cons), sizeof wc);
        if (wc.status != IBV_WC_SUCCESS) {
          std::fprintf(stderr, "shm: completion in error: status %u\n", wc.status);
          return false;
        }
        ++done;
        if (measuring) ++counted;
      }
      isoroce::shm::consumer(a.cq_ring.base).store(cons, std::memory_order_release);
      while (posted - done < o.window) post(posted++);
      const auto now = Clock::now();
      if (!measuring && secs(start, now) > 0.3) {
        measuring = true;
        t0 = now;
      }
      if (measuring && secs(t0, now) >= o.seconds) {
        const double s = secs(t0, now);
        (*out)[size] = {counted / s, counted * size * 8.0 / s / 1e9};
        break;
      }
    }
    if (isoroce::test::poll(a.cq_ring, posted - done, 10000).size() != posted - done) return false;
  }
  a.v.reset();
  b.v.reset();
  d.stop();
  return true;
}

// ---- inproc: two Devices on the ring pair, one thread ----------------------

struct Side {
  std::unique_ptr<isoroce::dataplane::Device> dev;
  isoroce::transport::PdHandle pd = 0;
  isoroce::transport::CqHandle cq = 0;
  isoroce::wire::Qpn qpn;
  void* buf = nullptr;
  isoroce::verbs::MrKeys keys{};
};

bool make_side(Side& s, const std::string& name, uint16_t port_id, uint32_t ip, double link_gbps) {
  std::string err;
  auto port = isoroce::dataplane::Port::open(name, port_id, 1518 + 64, 0, &err);
  if (!port) {
    std::fprintf(stderr, "inproc: %s\n", err.c_str());
    return false;
  }
  isoroce::dataplane::DeviceConfig dc;
  dc.name = name;
  dc.ip = isoroce::wire::ipv4_mapped(ip);
  dc.link_bps = static_cast<uint64_t>(link_gbps * 1e9);
  dc.mtu = IBV_MTU_1024;
  dc.key_seed = ip;
  dc.qpn_seed = ip & 0xff;
  s.dev = isoroce::dataplane::Device::create(dc, std::move(port), &err);
  if (!s.dev) return false;
  auto& e = s.dev->engine();
  s.pd = e.alloc_pd().value();
  s.cq = e.create_cq(4096).value();
  s.buf = std::aligned_alloc(4096, 1 << 20);
  std::memset(s.buf, 0x5a, 1 << 20);
  auto mr = e.reg_mr(s.pd, s.buf, 1 << 20, reinterpret_cast<uint64_t>(s.buf),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr.ok()) return false;
  s.keys = mr.value();
  isoroce::transport::QpCreate qc;
  qc.pd = s.pd;
  qc.send_cq = s.cq;
  qc.recv_cq = s.cq;
  qc.init.qp_type = IBV_QPT_RC;
  qc.init.cap.max_send_wr = 256;
  qc.init.cap.max_recv_wr = 256;
  qc.init.cap.max_send_sge = 1;
  qc.init.cap.max_recv_sge = 1;
  auto q = e.create_qp(qc);
  if (!q.ok()) return false;
  s.qpn = q.value();
  return true;
}

bool connect(Side& self, Side& peer, uint32_t my_psn, uint32_t peer_psn) {
  auto& e = self.dev->engine();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (e.modify_qp(self.qpn, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return false;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qpn.value();
  a.rq_psn = peer_psn;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer.dev->config().ip.data(), 16);
  if (e.modify_qp(self.qpn, a,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return false;
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = my_psn;
  a.max_rd_atomic = 16;
  return e.modify_qp(self.qpn, a,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

bool bench_inproc(const Options& o, std::map<uint32_t, Result>* out) {
  uint16_t pa, pb;
  std::string err;
  if (!isoroce::dataplane::Port::make_ring_pair("bench0", "bench1", &pa, &pb, &err)) {
    std::fprintf(stderr, "inproc: %s\n", err.c_str());
    return false;
  }
  Side a, b;
  if (!make_side(a, "bench0", pa, 0x0a000001, o.link_gbps) || !make_side(b, "bench1", pb, 0x0a000002, o.link_gbps))
    return false;
  // What ARP would have learnt.
  a.dev->net().set_neighbor(b.dev->config().ip, b.dev->port().mac());
  b.dev->net().set_neighbor(a.dev->config().ip, a.dev->port().mac());
  a.dev->engine().set_neighbor(b.dev->config().ip, b.dev->port().mac());
  b.dev->engine().set_neighbor(a.dev->config().ip, a.dev->port().mac());
  if (!connect(a, b, 1, 2) || !connect(b, a, 2, 1)) {
    std::fprintf(stderr, "inproc: connecting the QPs failed\n");
    return false;
  }
  isoroce::dataplane::TscClock clock;
  for (uint32_t size : kSizes) {
    const isoroce::transport::Sge sge{reinterpret_cast<uint64_t>(a.buf), size, a.keys.lkey};
    isoroce::transport::SendWr wr;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = reinterpret_cast<uint64_t>(b.buf);
    wr.rkey = b.keys.rkey;
    uint64_t posted = 0, done = 0, counted = 0;
    for (; posted < o.window; ++posted) {
      wr.wr_id = posted;
      if (a.dev->engine().post_send(clock.now(), a.qpn, wr) != 0) return false;
    }
    const auto start = Clock::now();
    Clock::time_point t0{};
    bool measuring = false;
    ibv_wc wc[64];
    for (uint64_t iter = 0;; ++iter) {
      const auto now = clock.now();
      a.dev->poll(now);
      b.dev->poll(now);
      const int n = a.dev->engine().poll_cq(a.cq, wc);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
          std::fprintf(stderr, "inproc: completion status %d\n", wc[i].status);
          return false;
        }
        ++done;
        if (measuring) ++counted;
        wr.wr_id = posted++;
        if (a.dev->engine().post_send(now, a.qpn, wr) != 0) return false;
      }
      if ((iter & 255) == 0) {
        const auto t = Clock::now();
        if (!measuring && secs(start, t) > 0.3) {
          measuring = true;
          t0 = t;
        }
        if (measuring && secs(t0, t) >= o.seconds) {
          const double s = secs(t0, t);
          (*out)[size] = {counted / s, counted * size * 8.0 / s / 1e9};
          break;
        }
      }
    }
    // Drain.
    for (int spins = 0; done < posted && spins < 10'000'000; ++spins) {
      const auto now = clock.now();
      a.dev->poll(now);
      b.dev->poll(now);
      const int n = a.dev->engine().poll_cq(a.cq, wc);
      if (n > 0) done += static_cast<uint64_t>(n);
    }
    if (done != posted) return false;
  }
  const auto& pc = a.dev->port().counters();
  std::printf("inproc port bench0: tx %llu frames, tx_dropped %llu, retransmits %llu\n",
              static_cast<unsigned long long>(pc.tx_packets), static_cast<unsigned long long>(pc.tx_dropped),
              static_cast<unsigned long long>(a.dev->engine().counters().retransmits));
  return true;
}

// ---- raw: tx_burst/rx_burst on the same kind of ring pair ------------------

bool bench_raw(const Options& o, std::map<uint32_t, Result>* out) {
  uint16_t pa, pb;
  std::string err;
  if (!isoroce::dataplane::Port::make_ring_pair("raw0", "raw1", &pa, &pb, &err)) {
    std::fprintf(stderr, "raw: %s\n", err.c_str());
    return false;
  }
  rte_mempool* pool = rte_pktmbuf_pool_create("raw_pool", 8191, 256, 0, 2048 + RTE_PKTMBUF_HEADROOM,
                                              static_cast<int>(rte_socket_id()));
  if (pool == nullptr) return false;
  rte_eth_conf conf{};
  for (uint16_t p : {pa, pb}) {
    if (rte_eth_dev_configure(p, 1, 1, &conf) != 0 ||
        rte_eth_rx_queue_setup(p, 0, 1024, static_cast<unsigned>(rte_socket_id()), nullptr, pool) != 0 ||
        rte_eth_tx_queue_setup(p, 0, 1024, static_cast<unsigned>(rte_socket_id()), nullptr) != 0 ||
        rte_eth_dev_start(p) != 0) {
      std::fprintf(stderr, "raw: port setup failed\n");
      return false;
    }
  }
  std::vector<uint8_t> payload(2048, 0xab);
  for (uint32_t size : {64u, 1024u}) {
    constexpr uint16_t kBurst = 32;
    rte_mbuf* tx[kBurst];
    rte_mbuf* rx[kBurst];
    uint64_t moved = 0;
    const auto t0 = Clock::now();
    double s = 0;
    for (uint64_t iter = 0;; ++iter) {
      if (rte_pktmbuf_alloc_bulk(pool, tx, kBurst) != 0) return false;
      for (rte_mbuf* m : tx) {
        std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), payload.data(), size);
        m->data_len = static_cast<uint16_t>(size);
        m->pkt_len = size;
      }
      uint16_t sent = rte_eth_tx_burst(pa, 0, tx, kBurst);
      if (sent < kBurst) rte_pktmbuf_free_bulk(tx + sent, kBurst - sent);
      const uint16_t got = rte_eth_rx_burst(pb, 0, rx, kBurst);
      moved += got;
      rte_pktmbuf_free_bulk(rx, got);
      if ((iter & 1023) == 0 && (s = secs(t0, Clock::now())) >= o.seconds) break;
    }
    (*out)[size] = {moved / s, moved * size * 8.0 / s / 1e9};
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds") o.seconds = std::atof(next());
    else if (a == "--window") o.window = static_cast<uint32_t>(std::atoi(next()));
    else if (a == "--link-gbps") o.link_gbps = std::atof(next());
    else if (a == "--only") o.only = next();
    else {
      std::fprintf(stderr,
                   "usage: isoroce-bench-daemon [--seconds S] [--window N] [--link-gbps G] [--only ctl|shm|inproc|raw]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (o.seconds <= 0 || o.window == 0 || o.window > 256 || o.link_gbps <= 0) {
    std::fprintf(stderr, "bad --seconds, --window (1..256) or --link-gbps\n");
    return 2;
  }
  std::map<uint32_t, Result> ctl, shmq, inproc, raw;
  // The daemon first: it must not inherit this process's EAL lcore affinity.
  if ((o.only.empty() || o.only == "ctl") && !bench_ctl(o, &ctl)) return 1;
  if ((o.only.empty() || o.only == "shm") && !bench_shm(o, &shmq)) return 1;
  if (o.only.empty() || o.only == "inproc" || o.only == "raw") {
    const std::string prefix = "isoroce_bench_" + std::to_string(getpid());
    std::vector<std::string> eal = {"isoroce-bench-daemon", "-l", "1", "--no-huge", "-m", "512", "--no-pci",
                                    "--file-prefix", prefix, "--log-level=warning", "--no-telemetry"};
    std::vector<char*> v;
    for (auto& s : eal) v.push_back(s.data());
    if (rte_eal_init(static_cast<int>(v.size()), v.data()) < 0) {
      std::fprintf(stderr, "rte_eal_init failed\n");
      return 1;
    }
    if ((o.only.empty() || o.only == "inproc") && !bench_inproc(o, &inproc)) return 1;
    if ((o.only.empty() || o.only == "raw") && !bench_raw(o, &raw)) return 1;
  }
  std::printf("\nRC WRITE, window %u, path MTU 1024, links %g Gb/s, %.1f s per point\n", o.window, o.link_gbps,
              o.seconds);
  std::printf("%-8s %-7s %14s %12s\n", "path", "size", "msgs/s", "Gb/s");
  for (auto& [name, m] : {std::pair{"ctl", &ctl}, std::pair{"shm", &shmq}, std::pair{"inproc", &inproc}}) {
    for (auto& [size, r] : *m) std::printf("%-8s %-7u %14.0f %12.3f\n", name, size, r.msgs_per_s, r.gbps);
  }
  for (auto& [size, r] : raw) std::printf("%-8s %-7u %14.0f %12.3f   (packets)\n", "raw", size, r.msgs_per_s, r.gbps);
  if (!raw.empty()) {
    std::printf("\nratios (ours / raw): 64 B msgs/s vs raw 64 B pkts/s; goodput vs raw 1 KB payload Gb/s\n");
    for (auto& [name, m] : {std::pair{"ctl", &ctl}, std::pair{"shm", &shmq}, std::pair{"inproc", &inproc}}) {
      if (m->empty()) continue;
      std::printf("%-8s 64B %.4f   4KB %.4f   64KB %.4f\n", name, (*m)[64].msgs_per_s / raw[64].msgs_per_s,
                  (*m)[4096].gbps / raw[1024].gbps, (*m)[65536].gbps / raw[1024].gbps);
    }
  }
  return 0;
}
