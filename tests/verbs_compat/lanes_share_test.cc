// How a port's lanes share its link (docs/isoroced.md, "Lanes";
// dataplane/dpdk/lane_share.h), with unmodified ib_write_bw under
// LD_PRELOAD=libisoroce-verbs.so against `isoroced --loopback
// --lanes-per-port 2 --link-gbps 0.01 --mtu 4096` on two workers: one QP
// alone on a lane has the whole link in its scheduler and sends at more than
// half of it (a fixed 1/2 split paced it at half at most: 0.49 of the link
// measured with the split before), and two QPs on the two lanes have half
// each, together never above the link. Rates are each lane's engine tx_bytes
// (whole frames, as the link model counts them) over 1.5 s while the tools
// run. Why 10 Mb/s: each paced frame is a sleep of the worker, and on this
// loaded 2-CPU VM a sleep ends up to ~0.8 ms late, time the link model does
// not give back (at 0.3 Gb/s a lane alone reached 0.45-0.8 of the link under
// load 7, at 10 Mb/s, 3.3 ms per 4 KB frame, 0.85-0.95).
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"
#include "tests/verbs_compat/tool_runner.h"

namespace isoroce::test {
namespace {

constexpr double kLinkBps = 0.01e9;

class LanesShare : public DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    start({"--loopback", "--lanes-per-port", "2", "--lcores", "0@0,1@1,2@0", "--link-gbps", "0.01", "--mtu", "4096"});
  }

  static uint64_t tx_bytes(Verbs& v, int lane) {
    return v.call({{"op", "stats"}})["stats"]["isoroce0"]["lanes"][lane]["engine"]["tx_bytes"].get<uint64_t>();
  }
  // isoroce0's lanes' send rates (bits/s) over `window`, once both `busy`
  // lanes have sent for a while.
  static std::vector<double> rates(Verbs& v, const std::vector<int>& busy, std::chrono::milliseconds window) {
    const auto t_start = std::chrono::steady_clock::now();
    for (int lane : busy) {  // the tools connect and start (at most 20 s)
      const uint64_t b0 = tx_bytes(v, lane);
      while (tx_bytes(v, lane) < b0 + 500'000 && std::chrono::steady_clock::now() - t_start < std::chrono::seconds(20))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const uint64_t a0 = tx_bytes(v, 0), a1 = tx_bytes(v, 1);
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(window);
    const uint64_t b0 = tx_bytes(v, 0), b1 = tx_bytes(v, 1);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<double> r{static_cast<double>(b0 - a0) * 8 / s, static_cast<double>(b1 - a1) * 8 / s};
    std::cout << "isoroce0's lanes sent " << r[0] / 1e9 << " and " << r[1] / 1e9 << " Gb/s of " << kLinkBps / 1e9
              << std::endl;
    return r;
  }
  // ib_write_bw for `seconds`, server on isoroce1, client on isoroce0: 32
  // WRITEs of 1 MB in flight keep its QP backlogged through the round trips
  // (perftest's default, 64 KB with completions every 100, leaves gaps that
  // bound the rate below the link here, with no doorbell on a port with lanes).
  static std::future<std::pair<ToolResult, ToolResult>> write_bw(int seconds) {
    const std::string socket = daemon_->socket();
    return std::async(std::launch::async, [socket, seconds] {
      return run_pair({socket, "isoroce1", ""}, {socket, "isoroce0", ""}, "127.0.0.1", "ib_write_bw",
                      "-s 65536 -t 16 -D " + std::to_string(seconds), "-x 0", "#bytes");
    });
  }
};

TEST_F(LanesShare, OneQpAloneOnALaneSendsAtTheWholeLink) {
  // The first QPs of each port go to lane 0 (the lane with the fewest).
  Verbs v(daemon_->socket(), "isoroce0");
  auto tool = write_bw(5);
  const std::vector<double> r = rates(v, {0}, std::chrono::milliseconds(1500));
  const json lanes = v.call({{"op", "stats"}})["stats"]["isoroce0"]["lanes"];
  tool.get();
  // Its scheduler has the whole link; the idle lane keeps what it would get busy.
  EXPECT_EQ(lanes[0].value("link_bps", uint64_t{0}), 10'000'000u) << lanes.dump();
  EXPECT_EQ(lanes[0].value("backlog", uint64_t{0}), 1u) << lanes.dump();
  EXPECT_EQ(lanes[1].value("link_bps", uint64_t{0}), 5'000'000u) << lanes.dump();
  // A fixed split paces it at half the link at most.
  EXPECT_GT(r[0], 0.6 * kLinkBps) << "lane 0 alone: " << lanes.dump();
  EXPECT_LT(r[0], 1.05 * kLinkBps) << lanes.dump();
  EXPECT_LT(r[1], 0.05 * kLinkBps);
}

TEST_F(LanesShare, TwoQpsOnTheTwoLanesShareTheLink) {
  Verbs v(daemon_->socket(), "isoroce0");
  auto first = write_bw(6);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto second = write_bw(6);  // its QPs go to the other lane (the fewest QPs)
  const std::vector<double> r = rates(v, {0, 1}, std::chrono::milliseconds(1500));
  const json lanes = v.call({{"op", "stats"}})["stats"]["isoroce0"]["lanes"];
  first.get();
  second.get();
  // Both busy with one QP each: half the link each, the split's sum the link.
  EXPECT_EQ(lanes[0].value("backlog", uint64_t{0}), 1u) << lanes.dump();
  EXPECT_EQ(lanes[1].value("backlog", uint64_t{0}), 1u) << lanes.dump();
  EXPECT_EQ(lanes[0].value("link_bps", uint64_t{0}), 5'000'000u) << lanes.dump();
  EXPECT_EQ(lanes[1].value("link_bps", uint64_t{0}), 5'000'000u) << lanes.dump();
  // Both send (as fast as the machine lets them), together never above the link.
  EXPECT_GT(r[0], 0.1 * kLinkBps) << lanes.dump();
  EXPECT_GT(r[1], 0.1 * kLinkBps) << lanes.dump();
  EXPECT_LT(r[0] + r[1], 1.05 * kLinkBps) << "the lanes together above the link: " << lanes.dump();
}

}  // namespace
}  // namespace isoroce::test
