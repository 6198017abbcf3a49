// Each kernel port kind at each RoCE MTU it carries (issue 20): two isoroceds in
// two network namespaces joined by a veth, on net_af_packet, on net_af_xdp and
// on a bare interface name (`--port IFACE`: AF_XDP, else AF_PACKET), with
// WRITEs of several MTUs crossing intact; the MTUs a kind cannot carry are
// refused with a message naming what to change. Root only (skips otherwise).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <tuple>
#include <thread>
#include <string>
#include <vector>

#include "tests/daemon/harness.h"
#include "tests/daemon/netns_pair.h"

namespace isoroce::test {
namespace {

constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

struct Side {
  std::unique_ptr<Verbs> v;
  uint32_t cq = 0, qp = 0;
  Buffer* buf = nullptr;
  std::string dev = "isoroce0";  // the device its stats are under
};

class PortKinds : public ::testing::Test {
 protected:
  void SetUp() override {
    net_ = std::make_unique<NetnsPair>("xdp");
    std::string why;
    switch (net_->make(&why)) {
      case NetnsPair::Made::kOk: break;
      case NetnsPair::Made::kSkip: GTEST_SKIP() << why;
      case NetnsPair::Made::kFail: FAIL() << why;
    }
  }
  void TearDown() override {
    a_ = {};
    b_ = {};
    for (auto* d : {&daemon_a_, &daemon_b_, &extra_}) {
      if (*d) {
        EXPECT_EQ((*d)->stop(), 0) << (*d)->log();
      }
      d->reset();
    }
    std::string why;
    if (net_) {
      EXPECT_TRUE(net_->destroy(&why)) << why;
    }
  }

  void set_veth_mtu(uint32_t mtu) {
    int st = 0;
    for (auto [ns, veth] : {std::pair{net_->ns_a, net_->veth_a}, std::pair{net_->ns_b, net_->veth_b}}) {
      const std::string out = run("/usr/sbin/ip -n " + ns + " link set " + veth + " mtu " + std::to_string(mtu), &st);
      ASSERT_EQ(st, 0) << out;
    }
  }

  // isoroced on `devargs` (a vdev or an interface name) in namespace ns.
  static std::unique_ptr<DaemonProcess> daemon(const std::string& ns, const std::string& devargs,
                                               const std::string& ip, uint32_t mtu,
                                               const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"--port", devargs, "--ip", ip + "/24", "--policy", "fifo", "--mtu",
                                     std::to_string(mtu)};
    args.insert(args.end(), more.begin(), more.end());
    args.insert(args.end(), {"--", "--no-huge", "-m", "256"});
    return std::make_unique<DaemonProcess>(args, ns);
  }

  // Both daemons, each on its veth as `kind` says: "af_packet", "af_xdp", "iface".
  void start(const std::string& kind, uint32_t mtu) {
    auto devargs = [&](const std::string& veth) {
      if (kind == "af_packet") return "net_af_packet0,iface=" + veth;
      if (kind == "af_xdp") return "net_af_xdp0,iface=" + veth;
      return veth;
    };
    daemon_a_ = daemon(net_->ns_a, devargs(net_->veth_a), kDaemonA, mtu);
    ASSERT_TRUE(daemon_a_->ok()) << daemon_a_->log();
    daemon_b_ = daemon(net_->ns_b, devargs(net_->veth_b), kDaemonB, mtu);
    ASSERT_TRUE(daemon_b_->ok()) << daemon_b_->log();
  }

  void connect(uint32_t path_mtu) {
    for (auto [s, d] : {std::pair{&a_, daemon_a_.get()}, std::pair{&b_, daemon_b_.get()}}) {
      s->v = std::make_unique<Verbs>(d->socket(), "isoroce0");
      ASSERT_TRUE(s->v->ok());
      s->cq = s->v->create_cq(256);
      s->qp = s->v->create_qp(s->cq, "rc", 64);
      s->buf = s->v->reg(1 << 20, kAll);
      ASSERT_TRUE(s->cq && s->qp && s->buf);
    }
    json r = a_.v->connect_rc(a_.qp, kDaemonB, b_.qp, 100, 9000, 14, 7, path_mtu);
    ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
    r = b_.v->connect_rc(b_.qp, kDaemonA, a_.qp, 9000, 100, 14, 7, path_mtu);
    ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  }

  // WRITEs of one byte, of the MTU and around it, of several MTUs and of 64 KB
  // from x to y, every byte checked; the 64 KB one goes in MTU-sized packets.
  void writes(Side& x, Side& y, uint32_t mtu, uint32_t seed) {
    std::mt19937 rng(seed);
    uint64_t off = 0, id = 1;
    for (uint32_t len : {1u, mtu - 1, mtu, mtu + 1, 3 * mtu + 7, 65536u}) {
      for (uint32_t i = 0; i < len; ++i) x.buf->data[off + i] = static_cast<uint8_t>(rng());
      const json before = x.v->call({{"op", "stats"}})["stats"][x.dev]["engine"];
      ASSERT_TRUE(x.v->post_send(x.qp, {{"wr_id", id++}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                        {"sg", {sge(*x.buf, off, len)}}, {"remote_addr", y.buf->iova() + off},
                                        {"rkey", y.buf->rkey}})["ok"].get<bool>());
      auto wc = x.v->wait(x.cq, 1);
      ASSERT_EQ(wc.size(), 1u) << "write of " << len;
      EXPECT_EQ(wc[0]["status"], 0) << wc[0].dump();
      EXPECT_EQ(std::memcmp(x.buf->data + off, y.buf->data + off, len), 0) << "write of " << len << " B, mtu " << mtu;
      if (len == 65536u) {
        const json after = x.v->call({{"op", "stats"}})["stats"][x.dev]["engine"];
        const double frames = after["tx_frames"].get<double>() - before["tx_frames"].get<double>();
        const double bytes = after["tx_bytes"].get<double>() - before["tx_bytes"].get<double>();
        EXPECT_GE(frames, 65536.0 / mtu) << after.dump();
        EXPECT_GT(bytes / frames, mtu) << "packets smaller than the path MTU " << mtu << ": " << after.dump();
      }
      off += (len + 4095) & ~4095u;
    }
  }

  // The veths carry exactly what the RoCE MTU needs (IP packets of mtu + 92
  // bytes, 1116 for 1024: less than a cloud NIC's 1400): a veth takes a native
  // XDP program only if its peer's MTU fits a page (about 3500), and the
  // daemon checks the interface's MTU itself.
  void both_ways(const std::string& kind, uint32_t mtu) {
    ASSERT_NO_FATAL_FAILURE(set_veth_mtu(mtu + 92));
    ASSERT_NO_FATAL_FAILURE(start(kind, mtu));
    ASSERT_NO_FATAL_FAILURE(connect(mtu));
    // The idle worker blocks on the port's kernel socket (AF_PACKET's ring
    // socket, or the XDP socket), found behind DPDK's back.
    for (Side* s : {&a_, &b_}) {
      const json st = s->v->call({{"op", "status"}});
      ASSERT_TRUE(st["ok"].get<bool>()) << st.dump();
      EXPECT_EQ(st["status"]["workers"][0]["wait_fds"], 1) << st.dump();
    }
    ASSERT_NO_FATAL_FAILURE(writes(a_, b_, mtu, mtu + 1));
    ASSERT_NO_FATAL_FAILURE(writes(b_, a_, mtu, mtu + 2));
    // Every source of the worker's work is signalled (the port's socket; no
    // shared-memory ring without a doorbell): a quiet worker sleeps to its
    // next deadline, not a quarter of the quiet time.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (Side* s : {&a_, &b_}) {
      const json st = s->v->call({{"op", "status"}});
      EXPECT_GT(st["status"]["workers"][0]["signalled_sleeps"].get<uint64_t>(), 0u) << st.dump();
    }
  }

  std::unique_ptr<NetnsPair> net_;
  std::unique_ptr<DaemonProcess> daemon_a_, daemon_b_, extra_;
  Side a_, b_;
};

TEST_F(PortKinds, AfPacketCarriesMtu1024) { both_ways("af_packet", 1024); }
TEST_F(PortKinds, AfPacketCarriesMtu2048) { both_ways("af_packet", 2048); }
TEST_F(PortKinds, AfPacketCarriesMtu4096) { both_ways("af_packet", 4096); }
TEST_F(PortKinds, AfXdpCarriesMtu1024) { both_ways("af_xdp", 1024); }
TEST_F(PortKinds, AfXdpCarriesMtu2048) { both_ways("af_xdp", 2048); }

// DPDK 22.11's AF_XDP driver holds a frame in one page-sized UMEM chunk: MTU
// 4096 is refused by name, with what to use instead.
TEST_F(PortKinds, AfXdpRefusesMtu4096NamingTheAlternative) {
  ASSERT_NO_FATAL_FAILURE(set_veth_mtu(4188));
  auto d = daemon(net_->ns_a, "net_af_xdp0,iface=" + net_->veth_a, kDaemonA, 4096);
  EXPECT_FALSE(d->ok());
  const std::string log = d->log();
  EXPECT_NE(log.find("net_af_xdp takes at most"), std::string::npos) << log;
  EXPECT_NE(log.find("choose mtu 2048 or less, or use net_af_packet"), std::string::npos) << log;
}

// A net_af_xdp port's mbufs are its UMEM. DPDK 22.11's driver registers the
// pool's first `populated_size` objects' length as UMEM, and an ordinary pool
// under --no-huge leaves most of each 4 KiB page empty, so the last ~40 % of
// its mbufs lay outside: the kernel dropped every frame sent from one (and
// every receive buffer in one) without a count DPDK reports. One worker kept
// reusing the first mbufs; lanes on two workers cycle the whole pool, and
// lost most frames. Two lanes a side on two workers, a QP on each lane, 64 KB
// WRITEs on both at once: every byte lands, and every frame DPDK counts as
// sent reached the veth (its kernel TX counters).
TEST_F(PortKinds, AfXdpWithLanesOnTwoWorkersLosesNoFrame) {
  ASSERT_NO_FATAL_FAILURE(set_veth_mtu(1024 + 92));
  const std::vector<std::string> lanes = {"--lanes-per-port", "2", "--lcores", "0@0,1@1,2@1"};
  daemon_a_ = daemon(net_->ns_a, "net_af_xdp0,iface=" + net_->veth_a, kDaemonA, 1024, lanes);
  ASSERT_TRUE(daemon_a_->ok()) << daemon_a_->log();
  daemon_b_ = daemon(net_->ns_b, "net_af_xdp0,iface=" + net_->veth_b, kDaemonB, 1024, lanes);
  ASSERT_TRUE(daemon_b_->ok()) << daemon_b_->log();
  struct Two {
    std::unique_ptr<Verbs> v;
    uint32_t cq[2] = {}, qp[2] = {};
    Buffer* buf = nullptr;
  } a, b;
  constexpr uint32_t kLen = 65536, kPerQp = 24, kRounds = 12;
  for (auto [t, d] : {std::pair{&a, daemon_a_.get()}, std::pair{&b, daemon_b_.get()}}) {
    t->v = std::make_unique<Verbs>(d->socket(), "isoroce0");
    ASSERT_TRUE(t->v->ok());
    for (int k = 0; k < 2; ++k) {
      t->cq[k] = t->v->create_cq(256);
      t->qp[k] = t->v->create_qp(t->cq[k], "rc", 64);
      ASSERT_TRUE(t->cq[k] && t->qp[k]);
    }
    t->buf = t->v->reg(2 * kPerQp * kLen, kAll);
    ASSERT_NE(t->buf, nullptr);
    const json lanes_now = t->v->call({{"op", "stats"}})["stats"]["isoroce0"]["lanes"];
    ASSERT_EQ(lanes_now.size(), 2u) << lanes_now.dump();
    // Lane 0 also holds the daemon's own QPs (the CM's): one of ours each.
    EXPECT_EQ(lanes_now[1]["qps"], 1) << "one QP on each lane: " << lanes_now.dump();
  }
  for (int k = 0; k < 2; ++k) {
    json r = a.v->connect_rc(a.qp[k], kDaemonB, b.qp[k], 100, 9000, 14, 7, 1024);
    ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
    r = b.v->connect_rc(b.qp[k], kDaemonA, a.qp[k], 9000, 100, 14, 7, 1024);
    ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  }
  // Rounds enough to cycle every mbuf of the pool (about 12,500 with two
  // lanes) through the lcores' caches a few times: 36,864 data frames.
  std::mt19937 rng(20);
  for (uint32_t round = 0; round < kRounds; ++round) {
    for (uint64_t i = 0; i < 2ull * kPerQp * kLen; i += 8) a.buf->data[i] = static_cast<uint8_t>(rng());
    for (uint32_t i = 0; i < kPerQp; ++i)
      for (int k = 0; k < 2; ++k) {
        const uint64_t off = (static_cast<uint64_t>(k) * kPerQp + i) * kLen;
        ASSERT_TRUE(a.v->post_send(a.qp[k], {{"wr_id", i}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                             {"sg", {sge(*a.buf, off, kLen)}}, {"remote_addr", b.buf->iova() + off},
                                             {"rkey", b.buf->rkey}})["ok"].get<bool>());
      }
    for (int k = 0; k < 2; ++k) {
      auto wc = a.v->wait(a.cq[k], kPerQp, 30000);
      ASSERT_EQ(wc.size(), kPerQp) << "lane " << k << ", round " << round;
      for (const json& c : wc) ASSERT_EQ(c["status"], 0) << c.dump();
    }
  }
  EXPECT_EQ(std::memcmp(a.buf->data, b.buf->data, 2ull * kPerQp * kLen), 0);
  // Every frame DPDK sent reached the veth: its TX packets count the frames
  // the peer's XDP took, its TX dropped those the peer had no room for.
  const json port = a.v->call({{"op", "stats"}})["stats"]["isoroce0"]["port"];
  int st = 0;
  const std::string out = run("/usr/sbin/ip -j -s -n " + net_->ns_a + " link show " + net_->veth_a, &st);
  ASSERT_EQ(st, 0) << out;
  const json tx = json::parse(out)[0]["stats64"]["tx"];
  const uint64_t sent = port["tx_packets"].get<uint64_t>();
  EXPECT_GE(sent, uint64_t{kRounds} * 2 * kPerQp * kLen / 1024) << port.dump();
  EXPECT_LE(sent, tx["packets"].get<uint64_t>() + tx["dropped"].get<uint64_t>())
      << "frames DPDK counted as sent never reached the veth: " << port.dump() << " " << tx.dump();
}

// net_tap and net_memif carry MTU 1024 at most (their PMDs cap the frame at
// 1522 and 1518 bytes whatever the interface or pkt_buffer_size): 2048 is
// refused naming that limit, not an interface MTU that would not help.
TEST_F(PortKinds, TapAndMemifRefuseMtu2048NamingTheirDriversLimit) {
  auto tap = daemon(net_->ns_a, "net_tap0,iface=xdptap0", kDaemonA, 2048);
  EXPECT_FALSE(tap->ok());
  EXPECT_NE(tap->log().find("net_tap takes at most 1522"), std::string::npos) << tap->log();
  EXPECT_NE(tap->log().find("tap driver caps the MTU at 1500"), std::string::npos) << tap->log();
  tap.reset();
  const std::string sock = "/tmp/isoroce-xdp-memif-" + std::to_string(getpid()) + ".sock";
  auto memif = daemon(net_->ns_a, "net_memif0,role=server,socket=" + sock, kDaemonA, 2048);
  EXPECT_FALSE(memif->ok());
  EXPECT_NE(memif->log().find("net_memif takes at most 1518"), std::string::npos) << memif->log();
  memif.reset();
  unlink(sock.c_str());
  // MTU 1024 fits both.
  tap = daemon(net_->ns_a, "net_tap0,iface=xdptap0", kDaemonA, 1024);
  EXPECT_TRUE(tap->ok()) << tap->log();
}

// A bare interface name: AF_XDP at MTU 1024 and 2048, AF_PACKET at 4096 (with
// the reason in the log).
TEST_F(PortKinds, InterfaceNamePicksAfXdp) {
  ASSERT_NO_FATAL_FAILURE(both_ways("iface", 2048));
  EXPECT_NE(daemon_a_->log().find("through AF_XDP (net_af_xdp_irA"), std::string::npos) << daemon_a_->log();
  EXPECT_NE(daemon_b_->log().find("through AF_XDP (net_af_xdp_irB"), std::string::npos) << daemon_b_->log();
  // veth has no zero-copy AF_XDP: the kernel bound the socket in copy mode.
  EXPECT_NE(daemon_a_->log().find("AF_XDP socket bound in copy mode"), std::string::npos) << daemon_a_->log();
}

TEST_F(PortKinds, InterfaceNameUsesAfPacketForMtu4096) {
  ASSERT_NO_FATAL_FAILURE(both_ways("iface", 4096));
  EXPECT_NE(daemon_a_->log().find("through AF_PACKET: mtu 4096 needs frames larger"), std::string::npos)
      << daemon_a_->log();
  EXPECT_NE(daemon_a_->log().find("framesz=4608"), std::string::npos) << daemon_a_->log();
}

// AF_XDP that does not come up (a veth takes no XDP program while its peer's
// MTU is larger than a page) falls back to AF_PACKET and says why.
TEST_F(PortKinds, InterfaceNameFallsBackToAfPacketWhenAfXdpFails) {
  ASSERT_NO_FATAL_FAILURE(set_veth_mtu(5000));
  ASSERT_NO_FATAL_FAILURE(start("iface", 1024));
  for (auto* d : {daemon_a_.get(), daemon_b_.get()}) {
    EXPECT_NE(d->log().find("AF_XDP did not come up"), std::string::npos) << d->log();
    EXPECT_NE(d->log().find("using AF_PACKET instead"), std::string::npos) << d->log();
  }
  ASSERT_NO_FATAL_FAILURE(connect(1024));
  ASSERT_NO_FATAL_FAILURE(writes(a_, b_, 1024, 5));
}

// An interface whose XDP program belongs to another AF_XDP user (a second
// daemon on the same veth) is left alone: the second daemon takes AF_PACKET
// without trying AF_XDP (DPDK's driver would detach the first one's program),
// and an explicit net_af_xdp port there is refused by name; the first pair
// still carries traffic.
TEST_F(PortKinds, InterfaceHeldByAnotherAfXdpUserIsLeftAlone) {
  ASSERT_NO_FATAL_FAILURE(start("iface", 1024));
  extra_ = daemon(net_->ns_a, net_->veth_a, "10.9.0.21", 1024);
  ASSERT_TRUE(extra_->ok()) << extra_->log();
  EXPECT_NE(extra_->log().find("already has an XDP program"), std::string::npos) << extra_->log();
  EXPECT_NE(extra_->log().find("through AF_PACKET (net_af_packet_irA"), std::string::npos) << extra_->log();
  auto refused = daemon(net_->ns_a, "net_af_xdp1,iface=" + net_->veth_a, "10.9.0.22", 1024);
  EXPECT_FALSE(refused->ok());
  EXPECT_NE(refused->log().find("already has an XDP program"), std::string::npos) << refused->log();
  refused.reset();
  ASSERT_NO_FATAL_FAILURE(connect(1024));
  ASSERT_NO_FATAL_FAILURE(writes(a_, b_, 1024, 5));
  ASSERT_NO_FATAL_FAILURE(writes(b_, a_, 1024, 6));
}

// A net_af_packet port's Ethernet address of its own (docs/isoroced.md, "An
// address of its own"; docs/performance.md, "The kernel's IP stack off the
// daemon's frames"). Sharing the interface's address, every RoCE frame the
// AF_PACKET tap took went on into the kernel's IP stack (ip_rcv, a route
// lookup, ip_error: 12 % of the worker's CPU on a veth); to an address of its
// own the kernel marks the frame for another host and ip_rcv drops it before
// counting it. Two daemons in namespaces isoroce-otherhost{a,b}-PID.
class PortMac : public PortKinds {
 protected:
  void SetUp() override {
    net_ = std::make_unique<NetnsPair>("otherhost");
    std::string why;
    switch (net_->make(&why)) {
      case NetnsPair::Made::kOk: break;
      case NetnsPair::Made::kSkip: GTEST_SKIP() << why;
      case NetnsPair::Made::kFail: FAIL() << why;
    }
  }

  // The namespace's IP counters (/proc/net/snmp, "Ip:" lines).
  std::map<std::string, uint64_t> ip_counters(const std::string& ns) {
    int st = 0;
    const std::string out = run(ns_exec(ns) + "cat /proc/net/snmp", &st);
    EXPECT_EQ(st, 0) << out;
    std::vector<std::vector<std::string>> ip_lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Ip: ", 0) != 0) continue;
      std::istringstream words(line.substr(4));
      ip_lines.emplace_back(std::istream_iterator<std::string>(words), std::istream_iterator<std::string>());
    }
    std::map<std::string, uint64_t> c;
    if (ip_lines.size() != 2 || ip_lines[0].size() != ip_lines[1].size()) {
      ADD_FAILURE() << out;
      return c;
    }
    for (size_t i = 0; i < ip_lines[0].size(); ++i) c[ip_lines[0][i]] = std::stoull(ip_lines[1][i]);
    return c;
  }

  // Frames the kernel dropped on the veth as meant for another host
  // (`ip -s -s link`, "RX errors: otherhost").
  uint64_t otherhost(const std::string& ns, const std::string& veth) {
    int st = 0;
    const std::string out = run("/usr/sbin/ip -j -s -s -n " + ns + " link show " + veth, &st);
    EXPECT_EQ(st, 0) << out;
    const json rx = st == 0 ? json::parse(out)[0]["stats64"]["rx"] : json::object();
    return rx.contains("otherhost") ? rx["otherhost"].get<uint64_t>() : 0;
  }

  json link(const std::string& ns, const std::string& veth) {
    int st = 0;
    const std::string out = run("/usr/sbin/ip -j -d -n " + ns + " link show " + veth, &st);
    EXPECT_EQ(st, 0) << out;
    return st == 0 ? json::parse(out)[0] : json::object();
  }

  std::string neighbor_mac(const std::string& ns, const std::string& ip) {
    int st = 0;
    const std::string out = run("/usr/sbin/ip -j -n " + ns + " neigh show " + ip, &st);
    const json j = st == 0 ? json::parse(out) : json::array();
    return j.size() == 1 && j[0].contains("lladdr") ? j[0]["lladdr"].get<std::string>() : "";
  }

  // Both daemons on net_af_packet with `port_mac`; the kernels ping each
  // other and the daemons across the veth; WRITEs both ways; returns how many
  // IP packets the kernels of both namespaces received meanwhile, the frames
  // they dropped as meant for another host, and the RoCE frames the daemons sent.
  void traffic(const std::string& port_mac, uint64_t* kernel_ip_packets, uint64_t* dropped_otherhost,
               uint64_t* roce_frames) {
    ASSERT_NO_FATAL_FAILURE(set_veth_mtu(1024 + 92));
    const std::vector<std::string> more = {"--port-mac", port_mac};
    daemon_a_ = daemon(net_->ns_a, "net_af_packet0,iface=" + net_->veth_a, kDaemonA, 1024, more);
    ASSERT_TRUE(daemon_a_->ok()) << daemon_a_->log();
    daemon_b_ = daemon(net_->ns_b, "net_af_packet0,iface=" + net_->veth_b, kDaemonB, 1024, more);
    ASSERT_TRUE(daemon_b_->ok()) << daemon_b_->log();
    // The kernels' own traffic on the veths, and ARP and ping to the ports.
    int st = 0;
    for (auto [ns, to] : {std::pair{net_->ns_a, kKernelB}, std::pair{net_->ns_a, kDaemonB},
                          std::pair{net_->ns_b, kKernelA}, std::pair{net_->ns_b, kDaemonA}}) {
      const std::string out = run(ns_exec(ns) + "ping -c 2 -i 0.2 -W 2 " + to, &st);
      EXPECT_EQ(st, 0) << ns << " to " << to << ": " << out;
    }
    ASSERT_NO_FATAL_FAILURE(connect(1024));
    const auto a0 = ip_counters(net_->ns_a), b0 = ip_counters(net_->ns_b);
    const uint64_t oh0 = otherhost(net_->ns_a, net_->veth_a) + otherhost(net_->ns_b, net_->veth_b);
    const json sa0 = a_.v->call({{"op", "stats"}})["stats"]["isoroce0"]["port"];
    const json sb0 = b_.v->call({{"op", "stats"}})["stats"]["isoroce0"]["port"];
    ASSERT_NO_FATAL_FAILURE(writes(a_, b_, 1024, 31));
    ASSERT_NO_FATAL_FAILURE(writes(b_, a_, 1024, 32));
    const auto a1 = ip_counters(net_->ns_a), b1 = ip_counters(net_->ns_b);
    *dropped_otherhost = otherhost(net_->ns_a, net_->veth_a) + otherhost(net_->ns_b, net_->veth_b) - oh0;
    const json sa1 = a_.v->call({{"op", "stats"}})["stats"]["isoroce0"]["port"];
    const json sb1 = b_.v->call({{"op", "stats"}})["stats"]["isoroce0"]["port"];
    *kernel_ip_packets = a1.at("InReceives") - a0.at("InReceives") + b1.at("InReceives") - b0.at("InReceives");
    *roce_frames = sa1["tx_packets"].get<uint64_t>() - sa0["tx_packets"].get<uint64_t>() +
                   sb1["tx_packets"].get<uint64_t>() - sb0["tx_packets"].get<uint64_t>();
    std::printf("--port-mac %s: %llu RoCE frames sent, the kernels received %llu IP packets and dropped %llu frames "
                "as another host's\n", port_mac.c_str(), static_cast<unsigned long long>(*roce_frames),
                static_cast<unsigned long long>(*kernel_ip_packets), static_cast<unsigned long long>(*dropped_otherhost));
  }
};

// The default (--port-mac own): each port answers ARP with its own address,
// the peers send to it, and the kernels' IP stacks receive none of the RoCE
// frames while their own traffic and pings to the ports still flow; the
// interface is promiscuous (a veth has no unicast filter) only while the
// daemon runs.
TEST_F(PortMac, OwnAddressKeepsRoceFramesOutOfTheKernelsIpStack) {
  uint64_t kernel = 0, dropped = 0, roce = 0;
  ASSERT_NO_FATAL_FAILURE(traffic("own", &kernel, &dropped, &roce));
  EXPECT_GT(roce, 140u);
  EXPECT_LE(kernel, 4u) << roce << " RoCE frames sent";
  EXPECT_GE(dropped, roce) << "the kernels dropped fewer frames as another host's than the daemons sent";
  for (auto [v, ns, veth, peer_ns, ip] :
       {std::tuple{a_.v.get(), net_->ns_a, net_->veth_a, net_->ns_b, kDaemonA},
        std::tuple{b_.v.get(), net_->ns_b, net_->veth_b, net_->ns_a, kDaemonB}}) {
    const json l = link(ns, veth);
    const std::string own = v->device().value("mac", ""), iface = v->device().value("interface_mac", "");
    EXPECT_EQ(iface, l["address"].get<std::string>()) << v->device().dump();
    EXPECT_NE(own, iface) << v->device().dump();
    EXPECT_EQ(neighbor_mac(peer_ns, ip), own) << "the peer's kernel resolved " << ip;
    EXPECT_EQ(l["promiscuity"], 1) << l.dump();
  }
  EXPECT_NE(daemon_a_->log().find("of its own beside the interface's"), std::string::npos) << daemon_a_->log();
  // The daemon's exit closes its socket, and the kernel takes the address out
  // of the interface's filter again.
  a_ = {};
  EXPECT_EQ(daemon_a_->stop(), 0) << daemon_a_->log();
  daemon_a_.reset();
  EXPECT_EQ(link(net_->ns_a, net_->veth_a)["promiscuity"], 0);
}

// A macvlan hands its AF_PACKET sockets only frames to its own address (it
// takes its lower device's frames by destination), so a port there keeps the
// interface's address, says why, and carries WRITEs both ways.
TEST_F(PortMac, MacvlanKeepsTheInterfacesAddress) {
  ASSERT_NO_FATAL_FAILURE(set_veth_mtu(1024 + 92));
  int st = 0;
  for (const std::string cmd : {"link add link " + net_->veth_a + " name ohmv0 type macvlan mode bridge",
                                std::string("link set ohmv0 up")}) {
    const std::string out = run("/usr/sbin/ip -n " + net_->ns_a + " " + cmd, &st);
    if (st != 0 && cmd.find("macvlan") != std::string::npos) GTEST_SKIP() << "no macvlan here: " << out;
    ASSERT_EQ(st, 0) << cmd << ": " << out;
  }
  daemon_a_ = daemon(net_->ns_a, "net_af_packet0,iface=ohmv0", kDaemonA, 1024);
  ASSERT_TRUE(daemon_a_->ok()) << daemon_a_->log();
  daemon_b_ = daemon(net_->ns_b, "net_af_packet0,iface=" + net_->veth_b, kDaemonB, 1024);
  ASSERT_TRUE(daemon_b_->ok()) << daemon_b_->log();
  EXPECT_NE(daemon_a_->log().find("keeping the interface's Ethernet address"), std::string::npos) << daemon_a_->log();
  EXPECT_NE(daemon_a_->log().find("a macvlan interface receives only frames to its own address"), std::string::npos)
      << daemon_a_->log();
  ASSERT_NO_FATAL_FAILURE(connect(1024));
  EXPECT_EQ(a_.v->device().value("mac", "x"), link(net_->ns_a, "ohmv0")["address"].get<std::string>());
  EXPECT_NE(b_.v->device().value("mac", ""), b_.v->device().value("interface_mac", ""));
  ASSERT_NO_FATAL_FAILURE(writes(a_, b_, 1024, 41));
  ASSERT_NO_FATAL_FAILURE(writes(b_, a_, 1024, 42));
}

// --port-mac interface, the old way: every RoCE frame went through the
// kernels' IP stacks too (what the test above would have seen before).
TEST_F(PortMac, InterfaceAddressSendsEveryRoceFrameThroughTheKernelsIpStack) {
  uint64_t kernel = 0, dropped = 0, roce = 0;
  ASSERT_NO_FATAL_FAILURE(traffic("interface", &kernel, &dropped, &roce));
  EXPECT_GT(roce, 140u);
  EXPECT_GE(kernel, roce) << "the kernels received fewer IP packets than the daemons sent RoCE frames";
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(a_.v->device()["mac"], link(net_->ns_a, net_->veth_a)["address"]) << a_.v->device().dump();
  EXPECT_EQ(link(net_->ns_a, net_->veth_a)["promiscuity"], 0);
}

// The kernel I/O path at a larger RoCE MTU (docs/performance.md, "64 KB WRITEs
// against kernel TCP"): one daemon on both ends of a veth; at a smaller MTU
// than the interfaces carry the daemon says what would be faster; at 2048,
// with a worker lcore per port (the layout that helped while other processes
// loaded the CPUs), WRITEs cross both ways. Namespaces isoroce-kpath{a,b}-PID.
class KernelPath : public PortKinds {
 protected:
  void SetUp() override {
    net_ = std::make_unique<NetnsPair>("kpath");
    std::string why;
    switch (net_->make(&why)) {
      case NetnsPair::Made::kOk: break;
      case NetnsPair::Made::kSkip: GTEST_SKIP() << why;
      case NetnsPair::Made::kFail: FAIL() << why;
    }
    // A second veth pair, both ends in namespace A, at the MTU that RoCE MTU
    // 2048 needs (IP packets of 2140 bytes).
    int st = 0;
    for (const std::string cmd : {"link add kp1 type veth peer name kp2", "link set kp1 mtu 2140 up",
                                  "link set kp2 mtu 2140 up"}) {
      const std::string out = run("/usr/sbin/ip -n " + net_->ns_a + " " + cmd, &st);
      ASSERT_EQ(st, 0) << cmd << ": " << out;
    }
  }

  static std::unique_ptr<DaemonProcess> two_ports(const std::string& ns, uint32_t mtu, const std::string& lcores) {
    std::vector<std::string> args = {"--port", "kp1", "--ip", "10.77.9.1/24", "--port", "kp2", "--ip", "10.77.9.2/24",
                                     "--policy", "fifo", "--mtu", std::to_string(mtu)};
    if (!lcores.empty()) args.insert(args.end(), {"--lcores", lcores});
    args.insert(args.end(), {"--", "--no-huge", "-m", "256"});
    return std::make_unique<DaemonProcess>(args, ns);
  }
};

TEST_F(KernelPath, HintsTheLargerMtuThenCarriesWritesAtItWithAWorkerPerPort) {
  // mtu 1024 on interfaces that carry 2048: the hint.
  daemon_a_ = two_ports(net_->ns_a, 1024, "");
  ASSERT_TRUE(daemon_a_->ok()) << daemon_a_->log();
  std::string log = daemon_a_->log();
  EXPECT_NE(log.find("through AF_XDP (net_af_xdp_kp1"), std::string::npos) << log;
  EXPECT_NE(log.find("isoroce0: interface MTU 2140 carries RoCE mtu 2048 (2048 on this driver at most)"),
            std::string::npos) << log;
  EXPECT_NE(log.find("set --mtu 2048 if the peers' interfaces carry it too"), std::string::npos) << log;
  EXPECT_EQ(daemon_a_->stop(), 0) << log;
  daemon_a_.reset();

  // A worker per port at mtu 2048: no hint, two workers, WRITEs both ways.
  daemon_a_ = two_ports(net_->ns_a, 2048, "0@0,1@1,2@1");
  ASSERT_TRUE(daemon_a_->ok()) << daemon_a_->log();
  log = daemon_a_->log();
  EXPECT_EQ(log.find("carries RoCE mtu"), std::string::npos) << log;
  for (auto [s, dev] : {std::pair{&a_, "isoroce0"}, std::pair{&b_, "isoroce1"}}) {
    s->dev = dev;
    s->v = std::make_unique<Verbs>(daemon_a_->socket(), dev);
    ASSERT_TRUE(s->v->ok());
    s->cq = s->v->create_cq(256);
    s->qp = s->v->create_qp(s->cq, "rc", 64);
    s->buf = s->v->reg(1 << 20, kAll);
    ASSERT_TRUE(s->cq && s->qp && s->buf);
  }
  const json st = a_.v->call({{"op", "status"}});
  ASSERT_TRUE(st["ok"].get<bool>()) << st.dump();
  EXPECT_EQ(st["status"]["workers"].size(), 2u) << st.dump();
  json r = a_.v->connect_rc(a_.qp, "10.77.9.2", b_.qp, 100, 9000, 14, 7, 2048);
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  r = b_.v->connect_rc(b_.qp, "10.77.9.1", a_.qp, 9000, 100, 14, 7, 2048);
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  ASSERT_NO_FATAL_FAILURE(writes(a_, b_, 2048, 11));
  ASSERT_NO_FATAL_FAILURE(writes(b_, a_, 2048, 12));
}

}  // namespace
}  // namespace isoroce::test
