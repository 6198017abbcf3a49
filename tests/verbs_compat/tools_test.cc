// rdma-core's example programs, unmodified, under LD_PRELOAD=libisoroce-verbs.so
// against a loopback daemon (isoroce0 10.0.0.1 <-> isoroce1 10.0.0.2).
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"
#include "tests/verbs_compat/tool_runner.h"

namespace isoroce::test {
namespace {

class Tools : public DaemonSuite {
 protected:
  static void SetUpTestSuite() { start({"--loopback"}); }

  // Server on isoroce1, client on isoroce0 (they exchange QP numbers over TCP).
  std::pair<ToolResult, ToolResult> pair(const std::string& prog, const std::string& args,
                                         const std::string& gid_flag, const std::string& summary) {
    return run_pair({daemon_->socket(), "isoroce1", ""}, {daemon_->socket(), "isoroce0", ""}, "127.0.0.1", prog, args,
                    gid_flag, summary);
  }
  void pingpong(const std::string& prog, const std::string& args) {
    expect_pingpong(pair(prog, args, "-g 0", "iters in"), "::ffff:10.0.0.1", "::ffff:10.0.0.2");
  }
  // `prog -n iters args`: both exit 0, and the result rows are sane.
  void perftest(const std::string& prog, int iters, const std::string& args = "") {
    auto [client, srv] = pair(prog, "-n " + std::to_string(iters) + " " + args, "-x 0", "#bytes");
    expect_perftest_result(client, iters);
    if (srv.out.find("#bytes") != std::string::npos) expect_perftest_result(srv, iters);
  }
  // Both ends on isoroce0 (same-device loopback, docs/engine.md).
  std::pair<ToolResult, ToolResult> same_device(const std::string& prog, const std::string& args,
                                                const std::string& gid_flag, const std::string& summary) {
    return run_pair({daemon_->socket(), "isoroce0", ""}, {daemon_->socket(), "isoroce0", ""}, "127.0.0.1", prog,
                    args, gid_flag, summary);
  }
  void same_device_perftest(const std::string& prog, int iters, const std::string& args = "") {
    auto [client, srv] = same_device(prog, "-n " + std::to_string(iters) + " " + args, "-x 0", "#bytes");
    expect_perftest_result(client, iters);
    if (srv.out.find("#bytes") != std::string::npos) expect_perftest_result(srv, iters);
  }
};

TEST_F(Tools, IbvDevicesListsBothDevices) {
  ToolResult r = run_tool(daemon_->socket(), "ibv_devices");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("isoroce0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("isoroce1"), std::string::npos) << r.out;
}

TEST_F(Tools, IbvDevinfoShowsAnRxeLikePortWithTheRoceV2Gid) {
  ToolResult r = run_tool(daemon_->socket(), "ibv_devinfo -v");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* want : {"hca_id:\tisoroce0", "hca_id:\tisoroce1", "transport:\t\t\tInfiniBand (0)",
                           "state:\t\t\tPORT_ACTIVE (4)", "link_layer:\t\tEthernet",
                           "GID[  0]:\t\t::ffff:10.0.0.1, RoCE v2", "GID[  0]:\t\t::ffff:10.0.0.2, RoCE v2"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  ToolResult one = run_tool(daemon_->socket(), "ibv_devinfo -d isoroce1");
  ASSERT_EQ(one.rc, 0) << one.out;
  EXPECT_EQ(one.out.find("isoroce0"), std::string::npos) << one.out;
}

TEST_F(Tools, NoDaemonMeansNoDevicesNotACrash) {
  ToolResult r = run_tool("/tmp/isoroce-no-such.sock", "ibv_devices");
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
  ToolResult t = run_tool(daemon_->socket(), "ibv_rc_pingpong -d isoroce0 -g 0 -p 18599 -t");
  EXPECT_NE(t.rc, 0) << t.out;
  EXPECT_NE(t.out.find("isn't completion timestamp capable"), std::string::npos) << t.out;
  ToolResult o = run_tool(daemon_->socket(), "ibv_rc_pingpong -d isoroce0 -g 0 -p 18599 -o");
  EXPECT_NE(o.rc, 0) << o.out;
  EXPECT_NE(o.out.find("isn't ODP capable"), std::string::npos) << o.out;
}
TEST_F(Tools, UdPingpong) { pingpong("ibv_ud_pingpong", "-s 1000"); }
TEST_F(Tools, UdPingpongWithEvents) { pingpong("ibv_ud_pingpong", "-e -s 256"); }
TEST_F(Tools, SrqPingpong) { pingpong("ibv_srq_pingpong", ""); }
TEST_F(Tools, SrqPingpongWithEvents) { pingpong("ibv_srq_pingpong", "-e -q 4 -s 2048"); }

// perftest (it links libmlx5 and friends: the system libibverbs stays loaded).
TEST_F(Tools, PerftestWriteLatency) { perftest("ib_write_lat", 200); }
TEST_F(Tools, PerftestReadLatency) { perftest("ib_read_lat", 200); }
TEST_F(Tools, PerftestAtomicLatency) { perftest("ib_atomic_lat", 200); }
TEST_F(Tools, PerftestSendLatency) { perftest("ib_send_lat", 200); }
TEST_F(Tools, PerftestWriteBandwidth) { perftest("ib_write_bw", 500); }
TEST_F(Tools, PerftestReadBandwidth) { perftest("ib_read_bw", 200); }
TEST_F(Tools, PerftestSendBandwidthRc) { perftest("ib_send_bw", 200); }
TEST_F(Tools, PerftestSendBandwidthUd) { perftest("ib_send_bw", 200, "-c UD"); }
TEST_F(Tools, PerftestAtomicBandwidth) { perftest("ib_atomic_bw", 200); }

// Same-device loopback: server and client on one device, each addressing the
// other by the device's own GID (issue 14.1).
TEST_F(Tools, SameDeviceRcPingpong) {
  expect_pingpong(same_device("ibv_rc_pingpong", "-c -n 300", "-g 0", "iters in"), "::ffff:10.0.0.1",
                  "::ffff:10.0.0.1");
}
TEST_F(Tools, SameDeviceRcPingpongLargeWithEvents) {
  expect_pingpong(same_device("ibv_rc_pingpong", "-e -c -s 65536 -n 100", "-g 0", "iters in"), "::ffff:10.0.0.1",
                  "::ffff:10.0.0.1");
}
TEST_F(Tools, SameDeviceUdPingpong) {
  expect_pingpong(same_device("ibv_ud_pingpong", "-s 1000 -n 300", "-g 0", "iters in"), "::ffff:10.0.0.1",
                  "::ffff:10.0.0.1");
}
TEST_F(Tools, SameDevicePerftestWriteBandwidth) { same_device_perftest("ib_write_bw", 500); }
TEST_F(Tools, SameDevicePerftestSendLatency) { same_device_perftest("ib_send_lat", 200); }
TEST_F(Tools, SameDevicePerftestReadLatency) { same_device_perftest("ib_read_lat", 200); }
TEST_F(Tools, SameDevicePerftestAtomicBandwidth) { same_device_perftest("ib_atomic_bw", 200); }
TEST_F(Tools, SameDevicePerftestSendBandwidthUd) { same_device_perftest("ib_send_bw", 200, "-c UD"); }

}  // namespace
}  // namespace isoroce::test
