// Scheduler::set_link_bps: every built-in policy's link model takes a new rate
// from the next packet on (a port's lanes share its link so,
// dataplane/dpdk/lane_share.h), on a fake clock.
#include <gtest/gtest.h>

#include <string>

#include "sched/policy_registry.h"
#include "sched/scheduler.h"

namespace isoroce::sched {
namespace {

// One QP endlessly backlogged with 1000 B packets.
class Backlog : public PacketSource {
 public:
  Packet on_grant(QpId, std::uint32_t) override { return {1'000, true}; }
};

// Bytes granted with departures in [now, end), dequeuing at every deadline.
std::uint64_t run(Scheduler& s, Backlog& src, Picos* now, Picos end) {
  Grant out[16];
  std::uint64_t bytes = 0;
  while (true) {
    const Picos d = s.next_deadline();
    if (d == kNever || d >= end) break;
    *now = std::max(*now, d);
    const std::size_t n = s.dequeue(*now, out, src);
    for (std::size_t i = 0; i < n; ++i)
      if (out[i].departure < end) bytes += out[i].bytes;
  }
  *now = end;
  return bytes;
}

class LinkRate : public ::testing::TestWithParam<std::string> {};

TEST_P(LinkRate, SetLinkBpsPacesFromTheNextPacket) {
  constexpr std::uint64_t kLink = 8'000'000'000;  // 1 ns per byte
  constexpr Picos kMs = 1'000'000'000;
  const Config config{.link_bps = kLink, .max_qps = 4};
  auto s = make_scheduler(GetParam(), config);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->link_bps(), kLink);
  Backlog src;
  Picos now = 0;
  s->activate(now, 0, {1'000, true});
  const std::uint64_t full = run(*s, src, &now, kMs);
  EXPECT_NEAR(static_cast<double>(full), 1e6, 2e4) << "1 ms at 8 Gb/s";
  s->set_link_bps(now, kLink / 4);
  EXPECT_EQ(s->link_bps(), kLink / 4);
  const std::uint64_t quarter = run(*s, src, &now, 2 * kMs);
  EXPECT_NEAR(static_cast<double>(quarter), 2.5e5, 2e4) << "1 ms at 2 Gb/s";
  s->set_link_bps(now, 0);  // ignored
  EXPECT_EQ(s->link_bps(), kLink / 4);
  s->set_link_bps(now, kLink);
  const std::uint64_t back = run(*s, src, &now, 3 * kMs);
  EXPECT_NEAR(static_cast<double>(back), 1e6, 2e4) << "the whole link again";
}

INSTANTIATE_TEST_SUITE_P(BuiltIn, LinkRate, ::testing::Values("fifo", "tassel", "justitia", "rnic"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace isoroce::sched
