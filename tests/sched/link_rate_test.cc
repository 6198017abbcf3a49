// Every built-in policy's link model, on a fake clock: Scheduler::set_link_bps takes
// a new rate from the next packet on (a port's lanes share its link so,
// dataplane/dpdk/lane_share.h), and Config::catch_up gives a late caller the link
// time it slept through.
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

// Packets of 4000 B, ready while `left` lasts (then the QP has nothing more).
class Limited : public PacketSource {
 public:
  explicit Limited(std::uint64_t packets) : left_(packets) {}
  Packet on_grant(QpId, std::uint32_t) override { return {--left_ != 0 ? 4'000u : 0u, true}; }

 private:
  std::uint64_t left_;
};

struct LateRun {
  std::uint64_t bytes = 0;    // granted with departures before the end
  Picos min_gap = kNever;     // between consecutive departures
  Picos most_early = 0;       // how far before its call's now a departure was
};

// A caller that comes `late` after each deadline the scheduler gave, for `span` of
// time, what a worker whose sleeps end late on a loaded host does; after a full
// batch it calls again at once, as the worker's loop does.
LateRun run_late(Scheduler& s, PacketSource& src, Picos* now, Picos span, Picos late) {
  const Picos end = *now + span;
  Grant out[16];
  LateRun r;
  Picos last = kNever;
  bool full = false;
  while (true) {
    const Picos d = s.next_deadline();
    if (d == kNever || d >= end) break;
    *now = std::max(*now, full ? d : d + late);
    const std::size_t n = s.dequeue(*now, out, src);
    full = n == std::size(out);
    for (std::size_t i = 0; i < n; ++i) {
      const Picos dep = out[i].departure;
      if (dep < end) r.bytes += out[i].bytes;
      if (last != kNever) r.min_gap = std::min(r.min_gap, dep - last);
      last = dep;
      if (dep < *now) r.most_early = std::max(r.most_early, *now - dep);
    }
  }
  return r;
}

// Config::catch_up: at 2 Gb/s (16 us per 4000 B packet) a caller 300 us late at
// every deadline still fills the link, never faster than its rate, never starting a
// packet more than catch_up before the call; without it the same caller gets a
// fraction. A QP that becomes ready after the link went idle starts at its call.
TEST_P(LinkRate, ALateCallerCatchesUpWhatWasDue) {
  constexpr std::uint64_t kLink = 2'000'000'000;
  constexpr Picos kUs = 1'000'000, kMs = 1'000 * kUs;
  constexpr Picos kPacket = 16 * kUs;
  constexpr double kLinkBytesPer100Ms = 2e9 / 8 / 10;
  for (const Picos catch_up : {Picos{0}, kMs}) {
    SCOPED_TRACE(catch_up);
    const Config config{.link_bps = kLink, .max_qps = 4, .lookahead = 20 * kUs, .catch_up = catch_up};
    auto s = make_scheduler(GetParam(), config);
    ASSERT_NE(s, nullptr);
    Limited src(1'000'000);
    Picos now = 0;
    s->activate(now, 0, {4'000, true});
    const LateRun r = run_late(*s, src, &now, 100 * kMs, 300 * kUs);
    EXPECT_GE(r.min_gap, kPacket) << "faster than the link";
    EXPECT_LE(r.most_early, catch_up);
    if (catch_up == 0) {
      EXPECT_LT(static_cast<double>(r.bytes), 0.5 * kLinkBytesPer100Ms) << "late time is lost";
    } else {
      EXPECT_GE(static_cast<double>(r.bytes), 0.97 * kLinkBytesPer100Ms) << "late time caught up";
    }
  }
  // Idle, then a QP becomes ready and its call comes late: nothing was due before it.
  const Config config{.link_bps = kLink, .max_qps = 4, .lookahead = 20 * kUs, .catch_up = kMs};
  auto s = make_scheduler(GetParam(), config);
  Limited once(2);
  Picos now = 0;
  s->activate(now, 0, {4'000, true});
  run_late(*s, once, &now, 10 * kMs, 300 * kUs);
  ASSERT_EQ(s->next_deadline(), kNever);
  now += 50 * kMs;
  Limited again(2);
  s->activate(now, 1, {4'000, true});
  Grant out[4];
  const Picos call = now + 300 * kUs;
  ASSERT_EQ(s->dequeue(call, out, again), 2u);
  EXPECT_EQ(out[0].departure, call);
  EXPECT_EQ(out[1].departure, call + kPacket);
  // A backlogged QP taken away (a QP destroyed) leaves nothing due: the next QP,
  // ready later, starts at its late call, not at the old deadline.
  Limited endless(1'000'000);
  const Picos busy = call + kMs;
  s->activate(busy, 2, {4'000, true});
  ASSERT_GT(s->dequeue(busy, out, endless), 0u);
  ASSERT_NE(s->next_deadline(), kNever);
  s->deactivate(busy, 2);
  const Picos later = busy + 5 * kMs;
  Limited third(2);
  s->activate(later, 3, {4'000, true});
  ASSERT_EQ(s->dequeue(later + 300 * kUs, out, third), 2u);
  EXPECT_EQ(out[0].departure, later + 300 * kUs);
}

INSTANTIATE_TEST_SUITE_P(BuiltIn, LinkRate, ::testing::Values("fifo", "tassel", "justitia", "rnic"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace isoroce::sched
