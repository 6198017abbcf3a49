// Unmodified perftest under LD_PRELOAD=libisoroce-verbs.so against
// `isoroced --loopback --lanes-per-port 2` on two workers (docs/isoroced.md,
// "Lanes"): WRITE, SEND and READ bandwidth between QPs of different lanes, of
// the same lane, and between the two lanes of one port, through the
// shared-memory rings each lane's pump moves.
#include <gtest/gtest.h>

#include <string>

#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"
#include "tests/verbs_compat/tool_runner.h"

namespace isoroce::test {
namespace {

class LanesTools : public DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    start({"--loopback", "--lanes-per-port", "2", "--lcores", "0@0,1@1,2@0"});
  }

  static json lane(const std::string& dev, int k) {
    Verbs v(daemon_->socket(), dev);
    return v.call({{"op", "stats"}})["stats"][dev]["lanes"][k];
  }
  // WRITE, SEND and READ bandwidth, server on `server_dev`, client on `client_dev`.
  static void three(const std::string& server_dev, const std::string& client_dev) {
    for (const char* prog : {"ib_write_bw", "ib_send_bw", "ib_read_bw"}) {
      SCOPED_TRACE(prog);
      auto [client, srv] = run_pair({daemon_->socket(), server_dev, ""}, {daemon_->socket(), client_dev, ""},
                                    "127.0.0.1", prog, "-n 2000 -s 4096", "-x 0", "#bytes");
      expect_perftest_result(client, 2000);
    }
  }
};

TEST_F(LanesTools, PerftestBetweenQpsOfDifferentLanes) {
  // A QP held on isoroce1's lane 0: perftest's server QP goes to lane 1, its
  // client's to isoroce0's lane 0.
  Verbs hold(daemon_->socket(), "isoroce1");
  ASSERT_NE(hold.create_qp(hold.create_cq()), 0u);
  const uint64_t sent = lane("isoroce0", 0)["shm"]["send_wqes"].get<uint64_t>();
  const uint64_t rx1 = lane("isoroce1", 1)["rx_frames"].get<uint64_t>();
  three("isoroce1", "isoroce0");
  EXPECT_GE(lane("isoroce0", 0)["shm"]["send_wqes"].get<uint64_t>(), sent + 3 * 2000) << "lane 0 posted the sends";
  EXPECT_GT(lane("isoroce1", 1)["rx_frames"].get<uint64_t>(), rx1 + 3 * 2000) << "lane 1 received them";
}

TEST_F(LanesTools, PerftestBetweenQpsOfTheSameLane) {
  // A QP held on lane 0 of both ports: both of perftest's go to lane 1.
  Verbs h0(daemon_->socket(), "isoroce0"), h1(daemon_->socket(), "isoroce1");
  ASSERT_NE(h0.create_qp(h0.create_cq()), 0u);
  ASSERT_NE(h1.create_qp(h1.create_cq()), 0u);
  const uint64_t sent = lane("isoroce0", 1)["shm"]["send_wqes"].get<uint64_t>();
  const uint64_t rx1 = lane("isoroce1", 1)["rx_frames"].get<uint64_t>();
  three("isoroce1", "isoroce0");
  EXPECT_GE(lane("isoroce0", 1)["shm"]["send_wqes"].get<uint64_t>(), sent + 3 * 2000);
  EXPECT_GT(lane("isoroce1", 1)["rx_frames"].get<uint64_t>(), rx1 + 3 * 2000);
}

TEST_F(LanesTools, PerftestBetweenTheTwoLanesOfOnePort) {
  // Both ends on isoroce0: the first QP made goes to lane 0, the second to
  // lane 1, and their frames loop back from one lane to the other.
  const uint64_t looped = lane("isoroce0", 0)["looped_out"].get<uint64_t>() +
                          lane("isoroce0", 1)["looped_out"].get<uint64_t>();
  three("isoroce0", "isoroce0");
  EXPECT_GT(lane("isoroce0", 0)["looped_out"].get<uint64_t>() + lane("isoroce0", 1)["looped_out"].get<uint64_t>(),
            looped + 3 * 2000);
}

}  // namespace
}  // namespace isoroce::test
