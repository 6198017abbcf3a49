// Behaviour of the tassel policy: rate changes, control packets, the link model,
// batching, QPs without limits, deactivation, memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "fake_link.h"
#include "sched/scheduler.h"
#include "sched/tassel.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;
constexpr Picos kUs = 1'000'000;
constexpr Picos kMs = 1'000'000'000;

double rel_error(double got, double want) { return std::fabs(got - want) / want; }

FakeLink::SizeRule fixed(std::uint32_t bytes) {
  return [bytes](QpId, std::uint64_t) { return Packet{bytes, true}; };
}

// Receive: QP 0 at 2 Gb/s, QP 1 at 10 Mb/s, QP 2 at 100 Kb/s, QP 3 without limit.
// At 20 ms: QP 0 -> 7 Gb/s, QP 1 -> 200 Kb/s, QP 2 -> 1 Gb/s, QP 3 -> 5 Gb/s.
// Expect: each within 0.5% of its limit in each phase (QP 3: the leftover of the
// link before, its new limit after).
TEST(Tassel, RateChangedMidRun) {
  Config config{.link_bps = kLink, .max_qps = 4};
  auto sched = make_scheduler("tassel", config);
  const std::vector<std::uint64_t> before = {2'000'000'000, 10'000'000, 100'000, kUnlimited};
  const std::vector<std::uint64_t> after = {7'000'000'000, 200'000, 1'000'000'000, 5'000'000'000};
  for (QpId q = 0; q < 4; ++q) sched->set_rate(0, q, before[q]);
  FakeLink link(*sched, config, fixed(64));
  for (QpId q = 0; q < 4; ++q) link.start(q);
  link.open_window(0);
  link.run_until(20 * kMs);
  const double leftover = kLink - 2e9 - 10e6 - 100e3;
  for (QpId q = 0; q < 4; ++q) {
    const double want = before[q] == kUnlimited ? leftover : static_cast<double>(before[q]);
    EXPECT_LT(rel_error(link.record_of(q).rate_bps(), want), 0.005) << "before, qp " << q;
  }
  for (QpId q = 0; q < 4; ++q) sched->set_rate(link.now(), q, after[q]);
  EXPECT_EQ(sched->rate(2), after[2]);
  // From the next packet: QP 2's packet timed at 100 Kb/s (5 ms) still waits.
  link.open_window(26 * kMs);
  link.run_until(60 * kMs);
  for (QpId q = 0; q < 4; ++q) {
    const double got = link.record_of(q).rate_bps();
    std::printf("  qp %u: %.6f Gb/s after the change (limit %.6f)\n", q, got / 1e9, after[q] / 1e9);
    EXPECT_LT(rel_error(got, static_cast<double>(after[q])), 0.005) << "after, qp " << q;
  }
}

// Receive: a QP limited to 100 Kb/s with 64 B data packets backlogged, and 100
// control packets for it at 1 ms. Expect: the control packets all leave at 1 ms,
// back to back at link speed, ahead of data; the data keeps its 100 Kb/s.
TEST(Tassel, ControlPacketsBypassRateLimit) {
  Config config{.link_bps = kLink, .max_qps = 1};
  auto sched = make_scheduler("tassel", config);
  sched->set_rate(0, 0, 100'000);
  FakeLink link(*sched, config, fixed(64));
  link.keep_log(true);
  link.start(0);
  link.run_until(kMs);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(sched->enqueue_control(link.now(), 0, 64));
  link.run_until(100 * kMs);
  std::vector<Grant> control;
  for (const Grant& g : link.log()) {
    if (g.kind == GrantKind::kControl) control.push_back(g);
  }
  ASSERT_EQ(control.size(), 100u);
  EXPECT_EQ(control.front().departure, kMs);
  EXPECT_EQ(control.back().departure, kMs + 99 * 5'120);  // 64 B at 100 Gb/s each
  EXPECT_EQ(link.record_of(0).packets, 20u);  // 0, 5.12, ... 97.28 ms
}

// Receive: an unlimited QP saturating the link and a control packet of 1000 B every
// microsecond. Expect: control packets leave within one data packet of their arrival,
// and data gets exactly the rest of the link (control counts against it).
TEST(Tassel, ControlPacketsCountAgainstLink) {
  Config config{.link_bps = kLink, .max_qps = 2};
  auto sched = make_scheduler("tassel", config);
  FakeLink link(*sched, config, fixed(1'000));
  link.keep_log(true);
  link.start(0);
  for (Picos t = 0; t < 1'000 * kUs; t += kUs) {
    link.run_until(t);
    ASSERT_TRUE(sched->enqueue_control(t, 1, 1'000));
  }
  link.run_until(1'000 * kUs);
  std::uint64_t control = 0;
  Picos worst_wait = 0;
  for (const Grant& g : link.log()) {
    if (g.kind != GrantKind::kControl) continue;
    ++control;
    worst_wait = std::max(worst_wait, g.departure % kUs);
  }
  EXPECT_EQ(control, 1'000u);
  EXPECT_LE(worst_wait, 80'000u);  // one 1000 B packet at 100 Gb/s
  // 1 ms of link = 12.5 MB: 1 MB of control, the rest data.
  const double data = static_cast<double>(link.record_of(0).bytes);
  EXPECT_NEAR(data, 12'500'000 - 1'000'000, 2'000);
}

// Receive: an unlimited QP with 4 KB packets. Expect: after one grant at 0 the link is
// busy for 327.68 ns: dequeue returns nothing before, next_deadline says when.
TEST(Tassel, NeverDequeuesWhileLinkBusy) {
  Config config{.link_bps = kLink, .max_qps = 1};
  auto sched = make_scheduler("tassel", config);
  FakeLink link(*sched, config, fixed(4'096));
  struct Endless : PacketSource {
    Packet on_grant(QpId, std::uint32_t) override { return {4'096, true}; }
  } src;
  sched->activate(0, 0, {4'096, true});
  Grant out[8];
  EXPECT_EQ(sched->dequeue(0, out, src), 1u);
  EXPECT_EQ(sched->dequeue(100, out, src), 0u);
  EXPECT_EQ(sched->dequeue(327'679, out, src), 0u);
  EXPECT_EQ(sched->next_deadline(), 327'680u);
  EXPECT_EQ(sched->dequeue(327'680, out, src), 1u);
  EXPECT_EQ(out[0].departure, 327'680u);
}

// Receive: at 0, QP 0 (1 Gb/s, 1000 B: F = 8 us) and QP 1 (50 Gb/s, 1000 B:
// F = 160 ns) become active, in either order; both are eligible. Expect: QP 1, the
// smaller finish time, goes first; then QP 0. QP 1's second packet (S =
// 160 ns) is not eligible before 160 ns even though its F (320 ns) is smaller than
// anything else: at 80 ns QP 0 goes, and QP 1 goes again at 160 ns.
TEST(Tassel, SmallestFinishAmongEligibleGoesFirst) {
  for (bool slow_first : {true, false}) {
    Config config{.link_bps = kLink, .max_qps = 2};
    auto sched = make_scheduler("tassel", config);
    sched->set_rate(0, 0, 1'000'000'000);
    sched->set_rate(0, 1, 50'000'000'000);
    FakeLink link(*sched, config, fixed(1'000));
    link.keep_log(true);
    link.start(slow_first ? 0 : 1);
    link.start(slow_first ? 1 : 0);
    link.run_until(200'000);
    const auto& log = link.log();
    ASSERT_GE(log.size(), 3u);
    EXPECT_EQ(log[0].qp, 1u) << "slow first: " << slow_first;
    EXPECT_EQ(log[0].departure, 0u);
    EXPECT_EQ(log[1].qp, 0u) << "slow first: " << slow_first;
    EXPECT_EQ(log[1].departure, 80'000u);
    EXPECT_EQ(log[2].qp, 1u) << "slow first: " << slow_first;
    EXPECT_EQ(log[2].departure, 160'000u);
  }
}

// Receive: lookahead 1 us; eight unlimited QPs with 1000 B packets. Expect: one
// dequeue grants the 13 packets departing in [0, 1 us], round robin over the QPs,
// 80 ns apart; the next one grants nothing until the link frees.
TEST(Tassel, BatchAcrossQpsWithinLookahead) {
  Config config{.link_bps = kLink, .max_qps = 8, .lookahead = kUs};
  auto sched = make_scheduler("tassel", config);
  struct Endless : PacketSource {
    Packet on_grant(QpId, std::uint32_t) override { return {1'000, true}; }
  } src;
  for (QpId q = 0; q < 8; ++q) sched->activate(0, q, {1'000, true});
  Grant out[32];
  ASSERT_EQ(sched->dequeue(0, out, src), 13u);
  for (std::size_t i = 0; i < 13; ++i) {
    EXPECT_EQ(out[i].qp, i % 8);
    EXPECT_EQ(out[i].departure, i * 80'000);
  }
  EXPECT_EQ(sched->dequeue(0, out, src), 0u);
  EXPECT_EQ(sched->next_deadline(), 13 * 80'000u);
}

// Receive: lookahead 10 us; one QP limited to 10 Gb/s with 1000 B packets (800 ns
// each). Expect: a batch of 13 packets spaced by 800 ns, never back to back.
TEST(Tassel, BatchNeverExceedsQpRate) {
  Config config{.link_bps = kLink, .max_qps = 1, .lookahead = 10 * kUs};
  auto sched = make_scheduler("tassel", config);
  sched->set_rate(0, 0, 10'000'000'000);
  struct Endless : PacketSource {
    Packet on_grant(QpId, std::uint32_t) override { return {1'000, true}; }
  } src;
  sched->activate(0, 0, {1'000, true});
  Grant out[32];
  ASSERT_EQ(sched->dequeue(0, out, src), 13u);
  for (std::size_t i = 0; i < 13; ++i) EXPECT_EQ(out[i].departure, i * 800'000);
}

// Receive: three QPs limited to 10, 20, 30 Gb/s and two without limit, 1500 B packets.
// Expect: the limited ones get their limits, the unlimited ones split the other
// 40 Gb/s evenly, the link is full.
TEST(Tassel, WorkConservingAcrossUnlimitedQps) {
  Config config{.link_bps = kLink, .max_qps = 5};
  auto sched = make_scheduler("tassel", config);
  const std::vector<std::uint64_t> rates = {10'000'000'000, 20'000'000'000, 30'000'000'000, kUnlimited, kUnlimited};
  for (QpId q = 0; q < 5; ++q) sched->set_rate(0, q, rates[q]);
  FakeLink link(*sched, config, fixed(1'500));
  for (QpId q = 0; q < 5; ++q) link.start(q);
  link.open_window(100 * kUs);
  link.close_window(10 * kMs);
  link.run_until(10 * kMs);
  for (QpId q = 0; q < 5; ++q) {
    const double want = rates[q] == kUnlimited ? 20e9 : static_cast<double>(rates[q]);
    EXPECT_LT(rel_error(link.record_of(q).rate_bps(), want), 0.005) << "qp " << q;
  }
  EXPECT_NEAR(static_cast<double>(link.window_total_bytes()) * 8 / 9.9e-3, 1e11, 1e11 * 0.001);
}

// Receive: QPs parked on each structure (fine and middle wheel, heap, eligible pool,
// round robin), then deactivated. Expect: none of them is granted again, the
// scheduler ends empty, and a reactivated QP is not charged for its dropped packet.
TEST(Tassel, DeactivateFromEveryStructure) {
  Config config{.link_bps = kLink, .max_qps = 8};
  TasselScheduler sched(config);
  struct Counting : PacketSource {
    std::map<QpId, int> grants;
    Packet on_grant(QpId qp, std::uint32_t) override {
      ++grants[qp];
      return {4'096, true};
    }
  } src;
  sched.set_rate(0, 1, 1'000'000'000);   // 32.8 us per packet: middle wheel
  sched.set_rate(0, 2, 1'000);           // 32.8 s per packet: heap
  sched.set_rate(0, 3, 40'000'000'000);  // 819 ns: fine or middle wheel
  sched.set_rate(0, 4, 29'000'000'000);
  sched.set_rate(0, 5, 29'000'000'000);  // 99% of the link booked: the pool fills at times
  for (QpId q = 1; q < 6; ++q) sched.activate(0, q, {4'096, true});
  sched.activate(0, 0, {4'096, true});  // unlimited: round robin
  Grant out[1];
  Picos now = 0;
  std::map<Where, int> seen;
  for (int step = 0; step < 100'000; ++step) {
    now = sched.next_deadline();
    sched.dequeue(now, out, src);
    seen.clear();
    for (QpId q = 0; q < 6; ++q) ++seen[sched.where(q)];
    if (src.grants.size() == 6 && seen[Where::kWheel0] && seen[Where::kPool]) break;
  }
  EXPECT_GE(seen[Where::kWheel0], 1);
  EXPECT_GE(seen[Where::kWheel1], 1);
  EXPECT_EQ(seen[Where::kHeap], 1);
  EXPECT_GE(seen[Where::kPool], 1);
  EXPECT_EQ(seen[Where::kUnlimited], 1);
  EXPECT_EQ(sched.active_qps(), 6u);
  const auto granted = src.grants;
  for (QpId q = 0; q < 6; ++q) sched.deactivate(now, q);
  EXPECT_EQ(sched.active_qps(), 0u);
  EXPECT_EQ(sched.active_limited_bps(), 0u);
  EXPECT_EQ(sched.next_deadline(), kNever);
  for (Picos t = now; t < 100 * kMs; t += kMs) EXPECT_EQ(sched.dequeue(t, out, src), 0u);
  EXPECT_EQ(src.grants, granted);
  // QP 1 dropped a packet due to start within 32.8 us (one packet at 1 Gb/s): activated
  // again, it starts then, not one packet time later.
  sched.activate(now, 1, {64, true});
  const Picos ready = sched.next_deadline();
  EXPECT_LE(ready, now + 32'768'000);
  EXPECT_EQ(sched.dequeue(ready, out, src), 1u);
  EXPECT_EQ(out[0].qp, 1u);
}

// Expect: the scheduler keeps at most 64 bytes per QP, and fixed structures of a few
// hundred KB that do not grow with the QP count. Tassel's fixed part is mostly the
// worst case of its wheel buckets: one partly filled bucket for each of the 8192
// middle and coarse slots (at most 8192 x 64 B, reserved, touched only when used).
TEST(Tassel, MemoryPerQp) {
  Config config{.max_qps = 16'384};
  auto tassel = make_scheduler("tassel", config);
  auto fifo = make_scheduler("fifo", config);
  std::printf("  tassel: %zu B per QP + %zu B; fifo: %zu B per QP + %zu B\n", tassel->bytes_per_qp(),
              tassel->fixed_bytes(), fifo->bytes_per_qp(), fifo->fixed_bytes());
  RecordProperty("tassel_bytes_per_qp", static_cast<int>(tassel->bytes_per_qp()));
  EXPECT_LE(tassel->bytes_per_qp(), 64u);
  EXPECT_LE(fifo->bytes_per_qp(), 64u);
  EXPECT_LT(tassel->fixed_bytes(), 640u * 1024);
  auto big = make_scheduler("tassel", Config{.max_qps = 1u << 20});
  EXPECT_EQ(big->bytes_per_qp(), tassel->bytes_per_qp());
  EXPECT_LE(big->fixed_bytes(), tassel->fixed_bytes());
}

TEST(Scheduler, FactoryAndPolicyNames) {
  for (const char* name : {"fifo", "tassel", "justitia"}) {
    auto s = make_scheduler(name, Config{});
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->name(), name);
  }
  EXPECT_EQ(make_scheduler("justice", Config{}), nullptr);
  EXPECT_EQ(make_scheduler("tassel", Config{.link_bps = 0}), nullptr);
  EXPECT_FALSE(validate(Config{.max_qps = 0}).empty());
  EXPECT_TRUE(validate(Config{}).empty());
}

// Receive: activate for a QP out of range, twice for one QP, with 0 bytes.
// Expect: ignored, nothing granted twice.
TEST(Tassel, IgnoresBadActivations) {
  Config config{.link_bps = kLink, .max_qps = 2};
  auto sched = make_scheduler("tassel", config);
  struct Once : PacketSource {
    Packet on_grant(QpId, std::uint32_t) override { return {}; }
  } src;
  sched->activate(0, 7, {64, true});
  sched->activate(0, 1, {0, true});
  sched->activate(0, 0, {64, true});
  sched->activate(0, 0, {64, true});
  EXPECT_FALSE(sched->enqueue_control(0, 9, 64));
  Grant out[8];
  EXPECT_EQ(sched->dequeue(0, out, src), 1u);
  EXPECT_EQ(sched->dequeue(kMs, out, src), 0u);
  EXPECT_EQ(sched->active_qps(), 0u);
}

// Receive: a QP at 1 Mb/s sends a 4096 B packet at 0 (its next may start at
// 32.768 ms); at 1 us its limit goes to 10 Gb/s (congestion control recovering).
// Expect: the wait left shrinks by the same factor: the next packet at
// 1 us + (32.768 ms - 1 us) / 10^4, not at 32.768 ms. A slower limit does not
// stretch a wait already computed.
TEST(Tassel, FasterLimitShortensTheWaitAhead) {
  Config config{.link_bps = kLink, .max_qps = 1};
  auto sched = make_scheduler("tassel", config);
  sched->set_rate(0, 0, 1'000'000);
  struct Endless : PacketSource {
    Packet on_grant(QpId, std::uint32_t) override { return {4'096, true}; }
  } src;
  sched->activate(0, 0, {4'096, true});
  Grant out[4];
  ASSERT_EQ(sched->dequeue(0, out, src), 1u);
  EXPECT_EQ(out[0].departure, 0u);
  EXPECT_GT(sched->next_deadline(), 30 * kMs);  // the wheel's resolution: not exact this far ahead
  sched->set_rate(kUs, 0, 10'000'000'000);
  const Picos want = kUs + (32'768'000'000 - kUs) / 10'000;
  EXPECT_LT(sched->next_deadline(), 2 * want);
  std::size_t n = 0;
  for (int i = 0; i < 100 && n == 0; ++i) n = sched->dequeue(std::max(kUs, sched->next_deadline()), out, src);
  ASSERT_EQ(n, 1u);
  EXPECT_NEAR(static_cast<double>(out[0].departure), static_cast<double>(want), 1'000.0);
  // Slower again: the next start (F of that packet at 10 Gb/s) is kept.
  const Picos next = sched->next_deadline();
  sched->set_rate(out[0].departure + 1, 0, 1'000'000);
  EXPECT_EQ(sched->next_deadline(), next);
  EXPECT_LT(next, want + 10 * kUs);
}

}  // namespace
}  // namespace isoroce::sched

