// How a port's lanes share its link (dataplane/dpdk/lane_share.h): the split
// by backlog, and each lane's LaneRate driven in virtual time.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "dataplane/dpdk/lane_share.h"

namespace isoroce::dataplane {
namespace {

constexpr uint64_t kLink = 10'000'000'000;

std::vector<uint64_t> split(uint64_t link, const std::vector<uint32_t>& d) {
  std::vector<uint64_t> out(d.size(), 1234);
  split_link(link, d, out);
  return out;
}

TEST(LaneShare, OneBusyLaneGetsTheWholeLink) {
  EXPECT_EQ(split(kLink, {3, 0}), (std::vector<uint64_t>{kLink, 0}));
  EXPECT_EQ(split(kLink, {0, 0, 1, 0}), (std::vector<uint64_t>{0, 0, kLink, 0}));
  // A lane's own rate counts its demand as at least 1: busy alone, or idle
  // beside idle lanes, it has the whole link.
  EXPECT_EQ(lane_rate(kLink, std::vector<uint32_t>{1, 0}, 0), kLink);
  EXPECT_EQ(lane_rate(kLink, std::vector<uint32_t>{0, 0}, 1), kLink);
  EXPECT_EQ(split(kLink, {0, 0}), (std::vector<uint64_t>{0, 0})) << "nobody busy: nothing given";
}

TEST(LaneShare, BusyLanesSplitByTheirBacklog) {
  EXPECT_EQ(split(kLink, {1, 1}), (std::vector<uint64_t>{kLink / 2, kLink / 2}));
  EXPECT_EQ(split(kLink, {3, 1}), (std::vector<uint64_t>{kLink * 3 / 4, kLink / 4})) << "each QP a quarter";
  EXPECT_EQ(split(kLink, {2, 0, 6, 2}), (std::vector<uint64_t>{kLink / 5, 0, kLink * 3 / 5, kLink / 5}));
  // An idle lane's standby rate: what it gets as soon as one of its QPs is backlogged.
  EXPECT_EQ(lane_rate(kLink, std::vector<uint32_t>{3, 0}, 1), kLink / 4);
}

TEST(LaneShare, BusyLanesAddUpToTheLinkAndNeverMore) {
  std::mt19937 rng(20);
  for (int round = 0; round < 2000; ++round) {
    const unsigned n = 2 + rng() % (LaneShare::kMaxLanes - 1);
    const uint64_t link = 1 + rng() % 400'000'000'000ull;  // odd rates too: the rounding's remainder
    std::vector<uint32_t> d(n);
    for (auto& x : d) x = rng() % 3 == 0 ? 0 : rng() % (round % 2 ? 5 : 70'000);
    const std::vector<uint64_t> out = split(link, d);
    const bool busy = std::any_of(d.begin(), d.end(), [](uint32_t x) { return x != 0; });
    EXPECT_EQ(std::accumulate(out.begin(), out.end(), uint64_t{0}), busy ? link : 0) << round;
    for (unsigned k = 0; k < n; ++k) {
      if (d[k] == 0) {
        EXPECT_EQ(out[k], 0u);
      }
      // Each busy lane within one bps of link * demand / total (the busiest also has the remainder).
      const uint64_t total = std::accumulate(d.begin(), d.end(), uint64_t{0});
      if (d[k] != 0) {
        const auto fair = static_cast<uint64_t>(static_cast<unsigned __int128>(link) * d[k] / total);
        EXPECT_GE(out[k], fair);
        EXPECT_LE(out[k], fair + n);
      }
    }
  }
}

// Two lanes' LaneRates, their workers' passes in virtual time: rates follow
// the backlog within a period, an idle lane's share goes to the busy one and
// comes back when it turns busy.
TEST(LaneShare, AnIdleLanesShareReturnsWhenItTurnsBusy) {
  constexpr sched::Picos P = LaneRate::kPeriod;
  LaneShare share(2);
  LaneRate a(share, 0, kLink), b(share, 1, kLink);
  uint64_t rate_a = 0, rate_b = 0;
  auto pass = [&](sched::Picos now, uint32_t backlog_a, uint32_t backlog_b) {
    if (uint64_t r = a.tick(now, backlog_a)) rate_a = r;
    if (uint64_t r = b.tick(now, backlog_b)) rate_b = r;
  };
  pass(0, 0, 0);
  EXPECT_EQ(rate_a, kLink);
  EXPECT_EQ(rate_b, kLink) << "both idle: each would have the whole link";
  // A's one QP backlogged: at once (it turned busy) A has the whole link, and B's
  // standby rate, at its next period, is what it would get busy: half.
  pass(1'000, 1, 0);
  EXPECT_EQ(rate_a, kLink);
  for (sched::Picos t = 2'000; t <= 3 * P; t += 1'000) pass(t, 1, 0);
  EXPECT_EQ(rate_a, kLink) << "the idle lane gives its share away";
  EXPECT_EQ(rate_b, kLink / 2);
  EXPECT_EQ(share.rate(0), kLink);
  EXPECT_EQ(share.demand(0), 1u);
  // B turns busy: it publishes at once; A halves within one period.
  const sched::Picos t0 = 3 * P + 500;
  pass(t0, 1, 1);
  EXPECT_EQ(rate_b, kLink / 2);
  sched::Picos t = t0;
  while (rate_a != kLink / 2 && t < t0 + 2 * P) pass(t += 1'000, 1, 1);
  EXPECT_EQ(rate_a, kLink / 2);
  EXPECT_LE(t - t0, P + 1'000) << "within one period";
  // Three QPs on A, one on B: 3/4 and 1/4 after a period each.
  for (t += 1'000; t < t0 + 6 * P; t += 1'000) pass(t, 3, 1);
  EXPECT_EQ(rate_a, kLink * 3 / 4);
  EXPECT_EQ(rate_b, kLink / 4);
  EXPECT_EQ(share.rate(0) + share.rate(1), kLink);
  // B idle for good: A has the whole link again within three periods (B's
  // period that saw backlog ends, B's next publishes 0, then A's period).
  const sched::Picos t1 = t;
  while (rate_a != kLink && t < t1 + 6 * P) pass(t += 1'000, 3, 0);
  EXPECT_EQ(rate_a, kLink);
  EXPECT_LE(t - t1, 3 * P + 1'000);
  // Between periods a tick changes nothing (the pass's cost is a compare).
  EXPECT_EQ(a.tick(t + 1, 3), 0u);
  // A replaced engine (reset) gets its rate on the next pass.
  a.reset();
  EXPECT_EQ(a.tick(t + 2, 3), kLink);
}

}  // namespace
}  // namespace isoroce::dataplane
