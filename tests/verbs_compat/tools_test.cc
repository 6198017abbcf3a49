// rdma-core's example programs, unmodified, under LD_PRELOAD=libisoroce-verbs.so
// against a loopback daemon (isoroce0 10.0.0.1 <-> isoroce1 10.0.0.2).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <utility>

#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

struct Result {
  int rc = -1;
  std::string out;
};

Result sh(const std::string& socket, const std::string& cmd) {
  const std::string full = "LD_PRELOAD=" ISOROCE_VERBS_LIB " ISOROCE_SOCKET=" + socket + " timeout 60 " + cmd + " 2>&1";
  Result r;
  FILE* p = popen(full.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class Tools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new DaemonProcess({"--loopback"}); }
  static void TearDownTestSuite() {
    if (daemon_) EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->log(); }

  // Server on isoroce1, client on isoroce0 (they exchange QP numbers over
  // TCP); gid_flag picks GID 0 ("-g 0" for the examples, "-x 0" for perftest).
  // Both must exit 0 without a complaint from the library; the client prints
  // `summary` (perftest's passive side prints no table for READ and atomics).
  std::pair<Result, Result> pair(const std::string& prog, const std::string& args, const std::string& gid_flag,
                                 const std::string& summary) {
    static int port = 18600;
    const std::string common = " " + gid_flag + " -p " + std::to_string(++port) + " " + args;
    auto server = std::async(std::launch::async, [&] { return sh(daemon_->socket(), prog + " -d isoroce1" + common); });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    Result client;
    for (int attempt = 0; attempt < 10; ++attempt) {
      client = sh(daemon_->socket(), prog + " -d isoroce0" + common + " 127.0.0.1");
      if (client.rc == 0 || client.out.find("onnect") == std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    Result srv = server.get();
    EXPECT_EQ(client.rc, 0) << client.out;
    EXPECT_EQ(srv.rc, 0) << srv.out;
    EXPECT_NE(client.out.find(summary), std::string::npos) << client.out;
    for (const Result* r : {&client, &srv}) {
      EXPECT_EQ(r->out.find("isoroce-verbs:"), std::string::npos) << "the library complained:\n" << r->out;
    }
    return {client, srv};
  }
  void pingpong(const std::string& prog, const std::string& args) {
    auto [client, srv] = pair(prog, args, "-g 0", "iters in");
    EXPECT_NE(client.out.find("bytes in"), std::string::npos) << client.out;
    EXPECT_NE(srv.out.find("iters in"), std::string::npos) << srv.out;
    EXPECT_NE(client.out.find("GID ::ffff:10.0.0.1"), std::string::npos) << client.out;
    EXPECT_NE(srv.out.find("GID ::ffff:10.0.0.2"), std::string::npos) << srv.out;
  }
  void perftest(const std::string& prog, const std::string& args) { pair(prog, args, "-x 0", "#bytes"); }
  static DaemonProcess* daemon_;
};
DaemonProcess* Tools::daemon_ = nullptr;

TEST_F(Tools, IbvDevicesListsBothDevices) {
  Result r = sh(daemon_->socket(), "ibv_devices");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("isoroce0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("isoroce1"), std::string::npos) << r.out;
}

TEST_F(Tools, IbvDevinfoShowsAnRxeLikePortWithTheRoceV2Gid) {
  Result r = sh(daemon_->socket(), "ibv_devinfo -v");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* want : {"hca_id:\tisoroce0", "hca_id:\tisoroce1", "transport:\t\t\tInfiniBand (0)",
                           "state:\t\t\tPORT_ACTIVE (4)", "link_layer:\t\tEthernet",
                           "GID[  0]:\t\t::ffff:10.0.0.1, RoCE v2", "GID[  0]:\t\t::ffff:10.0.0.2, RoCE v2"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  Result one = sh(daemon_->socket(), "ibv_devinfo -d isoroce1");
  ASSERT_EQ(one.rc, 0) << one.out;
  EXPECT_EQ(one.out.find("isoroce0"), std::string::npos) << one.out;
}

TEST_F(Tools, NoDaemonMeansNoDevicesNotACrash) {
  Result r = sh("/tmp/isoroce-no-such.sock", "ibv_devices");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("isoroce-verbs: no daemon"), std::string::npos) << r.out;
}

TEST_F(Tools, RcPingpongBusyPolling) { pingpong("ibv_rc_pingpong", ""); }
TEST_F(Tools, RcPingpongWithEvents) { pingpong("ibv_rc_pingpong", "-e"); }
TEST_F(Tools, RcPingpongInlineSize) { pingpong("ibv_rc_pingpong", "-s 16 -n 500"); }
TEST_F(Tools, RcPingpongLargeMessagesWithEvents) { pingpong("ibv_rc_pingpong", "-e -s 65536 -n 200"); }
TEST_F(Tools, RcPingpongOddSizeMtu2048) { pingpong("ibv_rc_pingpong", "-s 3001 -m 2048 -n 300"); }
// -N: ibv_create_qp_ex with send_ops_flags and ibv_wr_send/ibv_wr_set_sge (qp_ex.cc); -c checks the bytes.
TEST_F(Tools, RcPingpongNewPostSendApi) { pingpong("ibv_rc_pingpong", "-N -c -n 300"); }
TEST_F(Tools, RcPingpongNewPostSendApiWithEvents) { pingpong("ibv_rc_pingpong", "-N -c -e -s 3000 -n 200"); }

// What ibv_query_device_ex reports is what programs act on: no completion
// timestamps, no ODP — ibv_rc_pingpong says so and stops before connecting.
TEST_F(Tools, RcPingpongSeesNoTimestampsAndNoOdp) {
  Result t = sh(daemon_->socket(), "ibv_rc_pingpong -d isoroce0 -g 0 -p 18599 -t");
  EXPECT_NE(t.rc, 0) << t.out;
  EXPECT_NE(t.out.find("isn't completion timestamp capable"), std::string::npos) << t.out;
  Result o = sh(daemon_->socket(), "ibv_rc_pingpong -d isoroce0 -g 0 -p 18599 -o");
  EXPECT_NE(o.rc, 0) << o.out;
  EXPECT_NE(o.out.find("isn't ODP capable"), std::string::npos) << o.out;
}
TEST_F(Tools, UdPingpong) { pingpong("ibv_ud_pingpong", "-s 1000"); }
TEST_F(Tools, UdPingpongWithEvents) { pingpong("ibv_ud_pingpong", "-e -s 256"); }
TEST_F(Tools, SrqPingpong) { pingpong("ibv_srq_pingpong", ""); }
TEST_F(Tools, SrqPingpongWithEvents) { pingpong("ibv_srq_pingpong", "-e -q 4 -s 2048"); }

// perftest (it links libmlx5 and friends: the system libibverbs stays loaded).
TEST_F(Tools, PerftestWriteLatency) { perftest("ib_write_lat", "-n 200"); }
TEST_F(Tools, PerftestReadLatency) { perftest("ib_read_lat", "-n 200"); }
TEST_F(Tools, PerftestAtomicLatency) { perftest("ib_atomic_lat", "-n 200"); }
TEST_F(Tools, PerftestSendLatency) { perftest("ib_send_lat", "-n 200"); }
TEST_F(Tools, PerftestWriteBandwidth) { perftest("ib_write_bw", "-n 500"); }
TEST_F(Tools, PerftestReadBandwidth) { perftest("ib_read_bw", "-n 200"); }
TEST_F(Tools, PerftestSendBandwidthRc) { perftest("ib_send_bw", "-n 200"); }
TEST_F(Tools, PerftestSendBandwidthUd) { perftest("ib_send_bw", "-n 200 -c UD"); }

}  // namespace
}  // namespace isoroce::test
