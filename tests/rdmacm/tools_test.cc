// Unmodified librdmacm programs (rdmacm-utils 44, perftest -R) on isoroce
// through LD_PRELOAD="libisoroce-rdmacm.so libisoroce-verbs.so", in three
// topologies (docs/rdma_cm.md):
//   TwoPorts   — one `isoroced --loopback`: server on isoroce1 (10.0.0.2),
//                client on isoroce0 (10.0.0.1), joined in-process;
//   SameDevice — the same daemon, both ends on isoroce0 (same-device loopback);
//   TwoDaemons — two daemons in two network namespaces over a veth
//                (tests/daemon/netns_pair.h; root only, skips otherwise).
// The connection is IB CM on QP1 of each device (REQ/REP/RTU, DREQ/DREP,
// SIDR for udaddy).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "ctrl/client.h"

#include "tests/daemon/harness.h"
#include "tests/daemon/netns_pair.h"
#include "tests/rdmacm/cm_runner.h"

namespace isoroce::test {
namespace {

enum class Topo { kTwoPorts, kSameDevice, kTwoDaemons };

struct Env {
  std::unique_ptr<DaemonProcess> loop;
  std::unique_ptr<NetnsPair> net;
  std::unique_ptr<DaemonProcess> a, b;
  std::string net_error;
  bool net_skip = false, net_ready = false;
};
Env& env() {
  static Env* e = new Env;
  return *e;
}

struct Where {
  CmEndpoint server, client;
  std::string server_addr, client_addr, server_dev, client_dev;
};

int next_port() {
  static int port = 19700;
  return ++port;
}

class CmTools : public ::testing::TestWithParam<Topo> {
 protected:
  static void TearDownTestSuite() {
    Env& e = env();
    for (auto* d : {&e.loop, &e.a, &e.b})
      if (*d) {
        EXPECT_EQ((*d)->stop(), 0) << (*d)->log();
        d->reset();
      }
    if (e.net) {
      std::string why;
      EXPECT_TRUE(e.net->destroy(&why)) << why;
      e.net.reset();
    }
  }

  void SetUp() override {
    Env& e = env();
    if (GetParam() == Topo::kTwoDaemons) {
      if (!e.net) {
        e.net = std::make_unique<NetnsPair>("rcm");
        switch (e.net->make(&e.net_error)) {
          case NetnsPair::Made::kOk:
            e.a = e.net->start_daemon_a();
            e.b = e.net->start_daemon_b();
            e.net_ready = e.a->ok() && e.b->ok();
            if (!e.net_ready) e.net_error = "daemon A:\n" + e.a->log() + "\ndaemon B:\n" + e.b->log();
            break;
          case NetnsPair::Made::kSkip: e.net_skip = true; break;
          case NetnsPair::Made::kFail: break;
        }
      }
      if (e.net_skip) GTEST_SKIP() << e.net_error;
      ASSERT_TRUE(e.net_ready) << e.net_error;
      w_ = {{e.b->socket(), e.net->ns_b}, {e.a->socket(), e.net->ns_a}, kDaemonB, kDaemonA, "isoroce0", "isoroce0"};
      return;
    }
    if (!e.loop) e.loop = std::make_unique<DaemonProcess>(std::vector<std::string>{"--loopback"});
    ASSERT_TRUE(e.loop->ok()) << e.loop->log();
    if (GetParam() == Topo::kTwoPorts)
      w_ = {{e.loop->socket(), ""}, {e.loop->socket(), ""}, "10.0.0.2", "10.0.0.1", "isoroce1", "isoroce0"};
    else
      w_ = {{e.loop->socket(), ""}, {e.loop->socket(), ""}, "10.0.0.1", "10.0.0.1", "isoroce0", "isoroce0"};
  }

  void TearDown() override {
    if (!HasFailure()) return;
    Env& e = env();
    if (GetParam() == Topo::kTwoDaemons && e.net_ready)
      std::printf("daemon A log:\n%s\ndaemon B log:\n%s\n", e.a->log().c_str(), e.b->log().c_str());
    else if (e.loop)
      std::printf("daemon log:\n%s\n", e.loop->log().c_str());
  }

  // The client's source address option ("-I ADDR", "-b ADDR"): only where
  // the source picks another device than the destination would.
  std::string src(const std::string& flag) const {
    return GetParam() == Topo::kTwoPorts ? " " + flag + " " + w_.client_addr : "";
  }
  // For programs without a source option (rdma_client, perftest -R).
  std::string src_env() const {
    return GetParam() == Topo::kTwoPorts ? "ISOROCE_CM_SOURCE=" + w_.client_addr : "";
  }

  void rping(int size, int count) {
    const std::string p = " -p " + std::to_string(next_port());
    const std::string common = p + " -C " + std::to_string(count) + " -S " + std::to_string(size) + " -V";
    auto [cli, srv] = run_cm_pair(w_.server, "rping -s -a " + w_.server_addr + common, w_.client,
                                  "rping -c -v -a " + w_.server_addr + src("-I") + common);
    // -v prints each ping's data: every one arrived (and -V verified it on both sides).
    EXPECT_EQ(count_lines(cli.out, "ping data: rdma-ping-"), count) << cli.out;
  }

  void perftest(const std::string& prog, int iters) {
    const std::string p = " -p " + std::to_string(next_port()) + " -n " + std::to_string(iters);
    auto [cli, srv] = run_cm_pair(w_.server, prog + " -R -d " + w_.server_dev + p, w_.client,
                                  prog + " -R -d " + w_.client_dev + p + " " + w_.server_addr, {.client_env = src_env()});
    EXPECT_NE(cli.out.find("#bytes"), std::string::npos) << cli.out;
  }

  Where w_;
};

TEST_P(CmTools, RpingVerifiesSmallMessages) { rping(64, 50); }
TEST_P(CmTools, RpingVerifiesPageSizedMessages) { rping(4096, 20); }
TEST_P(CmTools, RpingVerifiesLargeMessages) { rping(60000, 5); }  // rping -S takes 23..65535

TEST_P(CmTools, UcmatoseFourConnections) {
  const std::string p = " -p " + std::to_string(next_port()) + " -c 4 -C 10 -S 200";
  auto [cli, srv] = run_cm_pair(w_.server, "ucmatose -b " + w_.server_addr + p, w_.client,
                                "ucmatose -s " + w_.server_addr + src("-b") + p);
  EXPECT_NE(cli.out.find("test complete"), std::string::npos) << cli.out;
  EXPECT_NE(srv.out.find("test complete"), std::string::npos) << srv.out;
}

TEST_P(CmTools, UcmatoseMigratesItsIds) {
  const std::string p = " -p " + std::to_string(next_port()) + " -c 2 -C 5";
  auto [cli, srv] = run_cm_pair(w_.server, "ucmatose -b " + w_.server_addr + p, w_.client,
                                "ucmatose -m -s " + w_.server_addr + src("-b") + p);
  EXPECT_NE(cli.out.find("test complete"), std::string::npos) << cli.out;
}

TEST_P(CmTools, UdaddyResolvesWithSidr) {
  auto [cli, srv] = run_cm_pair(w_.server, "udaddy -b " + w_.server_addr + " -c 2 -C 10", w_.client,
                                "udaddy -s " + w_.server_addr + src("-b") + " -c 2 -C 10");
  EXPECT_NE(cli.out.find("test complete"), std::string::npos) << cli.out;
  EXPECT_NE(srv.out.find("test complete"), std::string::npos) << srv.out;
}

TEST_P(CmTools, RdmaServerAndClient) {
  const std::string p = " -p " + std::to_string(next_port());
  auto [cli, srv] = run_cm_pair(w_.server, "rdma_server -s " + w_.server_addr + p, w_.client,
                                "rdma_client -s " + w_.server_addr + p, {.client_env = src_env()});
  EXPECT_NE(cli.out.find("rdma_client: end 0"), std::string::npos) << cli.out;
  EXPECT_NE(srv.out.find("rdma_server: end 0"), std::string::npos) << srv.out;
}

TEST_P(CmTools, RdmaXserverAndXclient) {
  const std::string p = " -p " + std::to_string(next_port());
  auto [cli, srv] = run_cm_pair(w_.server, "rdma_xserver" + p, w_.client, "rdma_xclient -s " + w_.server_addr + p,
                                {.client_env = src_env()});
  EXPECT_NE(cli.out.find("end 0"), std::string::npos) << cli.out;
  EXPECT_NE(srv.out.find("end 0"), std::string::npos) << srv.out;
}

TEST_P(CmTools, CmtimeFiftyConnections) {
  const std::string p = " -p " + std::to_string(next_port()) + " -c 50";
  // cmtime's server serves until killed; its rdma_create_qp calls share one
  // init attribute, so later QPs use the first id's CQs (as with librdmacm)
  // and destroying those CQs is EBUSY, which cmtime ignores.
  CmPairOptions o;
  o.server_runs_forever = true;
  o.server_timeout_s = 10;  // 5 s was too short for 50 connections at load 9 (client 6 s)
  o.allowed_complaint = "destroy_cq: Device or resource busy";
  auto [cli, srv] = run_cm_pair(w_.server, "cmtime -b " + w_.server_addr + p, w_.client,
                                "cmtime -s " + w_.server_addr + src("-b") + p, o);
  // Every step completed for all 50 (cmtime prints its table only then).
  EXPECT_NE(cli.out.find("connect      :"), std::string::npos) << cli.out;
  EXPECT_EQ(cli.out.find("failure"), std::string::npos) << cli.out;
  EXPECT_EQ(cli.out.find("event:"), std::string::npos) << cli.out;
  std::printf("%s\n", cli.out.c_str());
}

TEST_P(CmTools, PerftestSendLatency) { perftest("ib_send_lat", 200); }
TEST_P(CmTools, PerftestWriteBandwidth) { perftest("ib_write_bw", 200); }
TEST_P(CmTools, PerftestReadLatency) { perftest("ib_read_lat", 200); }

INSTANTIATE_TEST_SUITE_P(, CmTools, ::testing::Values(Topo::kTwoPorts, Topo::kSameDevice, Topo::kTwoDaemons),
                         [](const ::testing::TestParamInfo<Topo>& i) {
                           return i.param == Topo::kTwoPorts ? "TwoPorts"
                                  : i.param == Topo::kSameDevice ? "SameDevice" : "TwoDaemons";
                         });

// IPv6: the same programs between two daemons with IPv6 addresses (GIDs are
// the addresses themselves; the REQ's rdma_cm header carries IPv6).
class CmToolsIpv6 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    net_ = new NetnsPair("rcm6");
    switch (net_->make(&error_)) {
      case NetnsPair::Made::kOk:
        a_ = net_->start_daemon_a({}, "fd00:9::11/64").release();
        b_ = net_->start_daemon_b({}, "fd00:9::12/64").release();
        ready_ = a_->ok() && b_->ok();
        if (!ready_) error_ = "daemon A:\n" + a_->log() + "\ndaemon B:\n" + b_->log();
        break;
      case NetnsPair::Made::kSkip: skip_ = true; break;
      case NetnsPair::Made::kFail: break;
    }
  }
  static void TearDownTestSuite() {
    for (DaemonProcess** d : {&a_, &b_}) {
      if (*d) {
        EXPECT_EQ((*d)->stop(), 0) << (*d)->log();
      }
      delete *d;
      *d = nullptr;
    }
    if (net_) {
      std::string why;
      EXPECT_TRUE(net_->destroy(&why)) << why;
      delete net_;
      net_ = nullptr;
    }
  }
  void SetUp() override {
    if (skip_) GTEST_SKIP() << error_;
    ASSERT_TRUE(ready_) << error_;
  }
  void TearDown() override {
    if (HasFailure() && ready_) std::printf("daemon A log:\n%s\ndaemon B log:\n%s\n", a_->log().c_str(), b_->log().c_str());
  }
  static CmEndpoint a() { return {a_->socket(), net_->ns_a}; }
  static CmEndpoint b() { return {b_->socket(), net_->ns_b}; }
  static NetnsPair* net_;
  static DaemonProcess *a_, *b_;
  static std::string error_;
  static bool skip_, ready_;
};
NetnsPair* CmToolsIpv6::net_ = nullptr;
DaemonProcess* CmToolsIpv6::a_ = nullptr;
DaemonProcess* CmToolsIpv6::b_ = nullptr;
std::string CmToolsIpv6::error_;
bool CmToolsIpv6::skip_ = false, CmToolsIpv6::ready_ = false;

// (rping resolves its address with getaddrinfo(3), which refuses IPv6 in
// namespaces whose links have IPv6 off; these resolve through rdma_getaddrinfo.)
TEST_F(CmToolsIpv6, RdmaServerAndClient) {
  const std::string p = " -p " + std::to_string(next_port());
  auto [cli, srv] = run_cm_pair(b(), "rdma_server -s fd00:9::12" + p, a(), "rdma_client -s fd00:9::12" + p);
  EXPECT_NE(cli.out.find("rdma_client: end 0"), std::string::npos) << cli.out;
}

TEST_F(CmToolsIpv6, UcmatoseTwoConnections) {
  const std::string p = " -p " + std::to_string(next_port()) + " -c 2 -C 5";
  auto [cli, srv] = run_cm_pair(b(), "ucmatose -f ipv6 -b fd00:9::12" + p, a(), "ucmatose -f ipv6 -s fd00:9::12" + p);
  EXPECT_NE(cli.out.find("test complete"), std::string::npos) << cli.out;
}

TEST_F(CmToolsIpv6, UdaddyResolvesWithSidr) {
  auto [cli, srv] = run_cm_pair(b(), "udaddy -f ipv6 -b fd00:9::12 -c 1 -C 5", a(), "udaddy -f ipv6 -s fd00:9::12 -c 1 -C 5");
  EXPECT_NE(cli.out.find("test complete"), std::string::npos) << cli.out;
}

// Malformed and hostile CM MADs through the wire (tests/interop/hostile_cm.py
// in namespace A, from an address of its kernel, as RoCEv2 UD frames to QP1
// of daemon B) while an rping server listens on B: B keeps serving (that
// rping server then gets its verified connection from A) and counts every
// kind of drop in its "stats" (cm counters, docs/cm.md).
class CmHostileWire : public ::testing::Test {
 protected:
  static constexpr const char* kAttacker = "10.9.0.98";
  void SetUp() override {
    net_ = std::make_unique<NetnsPair>("hcm");
    std::string why;
    switch (net_->make(&why)) {
      case NetnsPair::Made::kOk: break;
      case NetnsPair::Made::kSkip: GTEST_SKIP() << why;
      case NetnsPair::Made::kFail: FAIL() << why;
    }
    int st;
    run(ns_exec(net_->ns_a) + "ip addr add " + kAttacker + "/24 dev " + net_->veth_a, &st);
    ASSERT_EQ(st, 0);
    a_ = net_->start_daemon_a();
    b_ = net_->start_daemon_b();
    ASSERT_TRUE(a_->ok()) << a_->log();
    ASSERT_TRUE(b_->ok()) << b_->log();
  }
  void TearDown() override {
    if (HasFailure() && a_ && b_)
      std::printf("daemon A log:\n%s\ndaemon B log:\n%s\n", a_->log().c_str(), b_->log().c_str());
    for (auto* d : {&a_, &b_})
      if (*d) {
        EXPECT_EQ((*d)->stop(), 0) << (*d)->log();
        d->reset();
      }
    if (net_) {
      std::string why;
      EXPECT_TRUE(net_->destroy(&why)) << why;
    }
  }
  std::string mac(const std::string& ns, const std::string& veth) {
    int st;
    return run(ns_exec(ns) + "cat /sys/class/net/" + veth + "/address", &st).substr(0, 17);
  }
  // Daemon B's counters of isoroce0: "cm" (QP1, the Manager) or "engine".
  json stats(const char* part = "cm") {
    std::string err;
    auto cl = ctrl::Client::connect(b_->socket(), &err);
    if (!cl) return json::object();
    json r = cl->call({{"op", "stats"}});
    if (!r.contains("stats") || !r["stats"].contains("isoroce0")) return json::object();
    return r["stats"]["isoroce0"].value(part, json::object());
  }
  json cm_stats() { return stats("cm"); }
  json attack(int listen_port, const std::vector<std::string>& attacks) {
    const json cfg = {{"iface", net_->veth_a},       {"src_mac", mac(net_->ns_a, net_->veth_a)},
                      {"dst_mac", mac(net_->ns_b, net_->veth_b)}, {"dst_ip", kDaemonB},
                      {"own_ip", kAttacker},         {"listen_port", listen_port},
                      {"unknown_port", listen_port + 1}};
    const std::string path = "/tmp/isoroce-hostile-cm-" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << cfg.dump();
    std::string cmd = ns_exec(net_->ns_a) + "/usr/bin/python3 " ISOROCE_SOURCE_DIR "/tests/interop/hostile_cm.py " + path;
    for (const auto& a : attacks) cmd += " " + a;
    int st;
    const std::string out = run(cmd + " 2>&1", &st);
    unlink(path.c_str());
    EXPECT_EQ(st, 0) << out;
    const size_t brace = out.rfind('{');
    const json j = json::parse(brace == std::string::npos ? std::string("x") : out.substr(brace), nullptr, false);
    EXPECT_TRUE(j.is_object()) << out;
    return j.is_object() ? j : json::object();
  }
  std::unique_ptr<NetnsPair> net_;
  std::unique_ptr<DaemonProcess> a_, b_;
};

TEST_F(CmHostileWire, BadMadsAreCountedAndTheDaemonKeepsServing) {
  const int port = next_port();
  const CmEndpoint a{a_->socket(), net_->ns_a}, b{b_->socket(), net_->ns_b};
  const std::string common = " -p " + std::to_string(port) + " -C 10 -S 64 -V";
  auto server = std::async(std::launch::async, [&] { return run_cm(b, "rping -s -a " + std::string(kDaemonB) + common, 60); });
  // The server listens once daemon B has its id.
  bool listening = false;
  for (int k = 0; k < 100 && !listening; ++k) {
    std::string err;
    auto cl = ctrl::Client::connect(b_->socket(), &err);
    json ids = cl ? cl->call({{"op", "cm_ids"}}) : json::object();
    for (const auto& id : ids.value("cm_ids", json::array())) listening |= id.value("listening", false);
    if (!listening) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(listening) << "rping -s did not listen on daemon B";
  const json before = cm_stats(), engine_before = stats("engine");
  const json sent = attack(port, {"truncated", "bad_base_version", "bad_class", "bad_class_version", "bad_method",
                                  "bad_attribute", "oversized", "bad_qkey", "req_unknown_service", "duplicate_req",
                                  "req_qp1", "dreq_unknown", "rep_unknown", "rtu_unknown"});
  ASSERT_EQ(sent.value("duplicate_req", 0), 3) << sent.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const json after = cm_stats(), engine_after = stats("engine");
  auto moved = [&](const char* k) { return after.value(k, uint64_t{0}) - before.value(k, uint64_t{0}); };
  auto engine_moved = [&](const char* k) {
    return engine_after.value(k, uint64_t{0}) - engine_before.value(k, uint64_t{0});
  };
  std::printf("engine counters before %s\nafter %s\n", engine_before.dump().c_str(), engine_after.dump().c_str());
  // The frames QP1 never sees: a wrong Q_Key, a SEND longer than its receive buffers.
  EXPECT_GE(engine_moved("rx_ud_qkey_mismatch"), 1u);
  const uint64_t sent_total = [&] {
    uint64_t n = 0;
    for (const auto& [k, v] : sent.items()) n += v.get<uint64_t>();
    return n;
  }();
  EXPECT_EQ(moved("recv_errors"), 1u) << "the frame longer than a MAD";
  EXPECT_EQ(moved("received"), sent_total - 2) << "every other frame reached the CM";
  std::printf("sent %s\nCM counters before %s\nafter %s\n", sent.dump().c_str(), before.dump().c_str(),
              after.dump().c_str());
  // truncated (5) + base version (3) + class version (3) + method (2) + REQ from QP 1.
  EXPECT_GE(moved("malformed"), 5u + 3 + 3 + 2 + 1);
  EXPECT_GE(moved("short_received"), 5u);
  EXPECT_EQ(moved("wrong_class"), 4u);
  EXPECT_EQ(moved("unknown_attribute"), 5u);
  EXPECT_EQ(moved("no_listener"), 1u);
  EXPECT_GE(moved("duplicates"), 2u);       // the copies of the refused REQ
  EXPECT_GE(moved("unmatched"), 8u + 4 + 4);  // DREQs, REPs, RTUs for nobody
  EXPECT_GE(moved("rejected_sent"), 2u);    // unknown service; no rdma_cm header
  EXPECT_EQ(moved("established"), 0u);
  // Still serving: a real connection to the same listener.
  const CmResult cli = run_cm(a, "rping -c -v -a " + std::string(kDaemonB) + common, 30);
  const CmResult srv = server.get();
  EXPECT_EQ(cli.rc, 0) << cli.out << "\nserver:\n" << srv.out;
  EXPECT_EQ(srv.rc, 0) << srv.out;
  EXPECT_EQ(count_lines(cli.out, "ping data: rdma-ping-"), 10) << cli.out;
  EXPECT_EQ(count_lines(srv.out, "CONNECT_REQUEST") + count_lines(srv.out, "connect request"), 0)
      << "no hostile REQ reached the application: " << srv.out;
  EXPECT_EQ(cm_stats().value("established", uint64_t{0}) - after.value("established", uint64_t{0}), 1u);
}

}  // namespace
}  // namespace isoroce::test
