// The reaction point alone, stepping a fake clock: the HPCC ns-3 Mellanox
// model's trajectory, alpha, cuts, fast recovery, additive/hyper increase, the
// byte counter, and the return to line rate.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "transport/dcqcn/reaction_point.h"

namespace isoroce::dcqcn {
namespace {

constexpr Picos kUs = 1'000'000;
constexpr uint64_t k100G = 100'000'000'000;

// HPCC simulation/run.py, cc "dcqcn", at 100 Gb/s: alpha every 1 us, cut check
// every 4 us, timer 300 us, g = 1/256, one fast recovery stage, AI 20 Mb/s,
// HAI 200 Mb/s, min rate 1000 Mb/s, no clamp, no byte counter, alpha starts at 1.
Params hpcc_run_py() {
  Params p;
  p.enabled = true;
  p.alpha_update_us = 1;
  p.rate_decrease_period_us = 4;
  p.rp_timer_us = 300;
  p.g = 1.0 / 256;
  p.fast_recovery_stages = 1;
  p.ai_mbps = 20;
  p.hai_mbps = 200;
  p.min_rate_mbps = 1000;
  p.clamp_target = false;
  p.byte_counter_bytes = 0;
  p.initial_alpha = 1;
  p.rate_on_first_cnp_mbps = 0;
  return p;
}

struct Recorder : EventSink {
  void on_event(const Event& e) override { events.push_back(e); }
  std::vector<Event> events;
  size_t count(EventKind k) const {
    size_t n = 0;
    for (const auto& e : events) n += e.kind == k;
    return n;
  }
};

// Runs the reaction point to `t` and returns its rate in Gb/s.
double rate_at(ReactionPoint& rp, Picos t) {
  rp.advance(t);
  return rp.rate() / 1e9;
}

TEST(ReactionPoint, OneCnpAt100GMatchesTheHpccModel) {
  const Params p = hpcc_run_py();
  ReactionPoint rp(&p, k100G);
  // Receive: one CNP at t = 0.
  rp.on_cnp(0);
  // Expect: the rate holds until the first cut check, at 4 us.
  EXPECT_EQ(rate_at(rp, 4 * kUs - 1), 100.0);
  // Expect: the HPCC model's trajectory within 1%.
  EXPECT_NEAR(rate_at(rp, 4 * kUs), 50.8, 0.508);
  EXPECT_NEAR(rate_at(rp, 304 * kUs), 75.4, 0.754);
  EXPECT_NEAR(rate_at(rp, 604 * kUs), 87.7, 0.877);
  EXPECT_NEAR(rate_at(rp, 904 * kUs), 93.8, 0.938);
  // And exactly what the model computes: alpha decays 4 times before the cut.
  const double a = std::pow(1 - 1.0 / 256, 4);
  const double r4 = 100 * (1 - a / 2);
  EXPECT_NEAR(ReactionPoint(rp).rate() / 1e9, (((r4 + 100) / 2 + 100) / 2 + 100) / 2, 1e-9);
  EXPECT_EQ(rp.counters().decreases, 1u);
  EXPECT_EQ(rp.counters().increases, 3u);
}

TEST(ReactionPoint, PhasesFollowTheStageCount) {
  const Params p = hpcc_run_py();
  ReactionPoint rp(&p, k100G);
  Recorder rec;
  rp.set_trace(&rec);
  rp.on_cnp(0);
  rp.advance(1300 * kUs);
  std::vector<EventKind> kinds;
  for (const auto& e : rec.events)
    if (e.kind != EventKind::kAlpha) kinds.push_back(e.kind);
  // Receive: CNP; Expect: cut at 4 us, then fast recovery (stage 0), additive
  // (stage 1 = F), hyper from stage 2 on.
  ASSERT_GE(kinds.size(), 6u);
  EXPECT_EQ(kinds[0], EventKind::kCnp);
  EXPECT_EQ(kinds[1], EventKind::kDecrease);
  EXPECT_EQ(kinds[2], EventKind::kFastRecovery);
  EXPECT_EQ(kinds[3], EventKind::kAdditive);
  EXPECT_EQ(kinds[4], EventKind::kHyper);
  EXPECT_EQ(kinds[5], EventKind::kHyper);
  // One alpha event per microsecond since the CNP.
  EXPECT_EQ(rec.count(EventKind::kAlpha), 1300u);
  EXPECT_EQ(rec.events[1].t, 1 * kUs);
  EXPECT_EQ(rec.events[1].kind, EventKind::kAlpha);
}

TEST(ReactionPoint, TracedAndLazyAlphaAgree) {
  const Params p = hpcc_run_py();
  ReactionPoint lazy(&p, k100G), traced(&p, k100G);
  Recorder rec;
  traced.set_trace(&rec);
  for (Picos t : {Picos{0}, 50 * kUs, 52 * kUs, 400 * kUs, 2000 * kUs}) {
    lazy.on_cnp(t);
    traced.on_cnp(t);
  }
  lazy.advance(3000 * kUs);
  traced.advance(3000 * kUs);
  EXPECT_EQ(lazy.rate(), traced.rate());
  EXPECT_EQ(lazy.alpha(), traced.alpha());
  EXPECT_EQ(lazy.target(), traced.target());
}

TEST(ReactionPoint, CnpsInAPeriodRaiseAlphaAndCutOncePerPeriod) {
  const Params p = hpcc_run_py();
  ReactionPoint rp(&p, k100G);
  rp.on_cnp(0);
  // Receive: CNPs every 0.5 us from 1 us to 8 us (a CNP at an update's own
  // instant comes after it: the update at 1 us sees none).
  for (Picos t = kUs; t <= 8 * kUs; t += kUs / 2) rp.on_cnp(t);
  rp.advance(8 * kUs);
  // Expect: exactly two cuts (4 us and 8 us), alpha pushed back up by g each update.
  EXPECT_EQ(rp.counters().decreases, 2u);
  double a = 1;
  a = (1 - p.g) * a;  // 1 us: the first CNP does not count, the one at 1 us is after
  for (int k = 2; k <= 8; ++k) a = (1 - p.g) * a + p.g;
  EXPECT_NEAR(rp.alpha(), a, 1e-12);
  // A CNP at 8.5 us: the next check is at 12 us, not earlier.
  rp.on_cnp(8 * kUs + kUs / 2);
  EXPECT_EQ(rp.next_deadline(), 12 * kUs);
}

TEST(ReactionPoint, MinRateBoundsCuts) {
  Params p = hpcc_run_py();
  p.min_rate_mbps = 40'000;
  ReactionPoint rp(&p, k100G);
  for (Picos t = 0; t <= 100 * kUs; t += kUs) rp.on_cnp(t);
  rp.advance(100 * kUs);
  EXPECT_EQ(rp.rate_bps(), 40'000'000'000u);
}

TEST(ReactionPoint, ClampTargetSetsTargetOnEveryCut) {
  const Params p = hpcc_run_py();
  Params pc = hpcc_run_py();
  pc.clamp_target = true;
  ReactionPoint loose(&p, k100G);
  ReactionPoint clamped(&pc, k100G);
  for (auto* rp : {&loose, &clamped}) {
    rp->on_cnp(0);
    rp->on_cnp(5 * kUs);
    rp->advance(10 * kUs);
  }
  // Expect: without clamping the target stays at line rate (no timer increase
  // between the two cuts); with it the target is the rate before the second cut.
  EXPECT_EQ(loose.target_bps(), k100G);
  EXPECT_LT(clamped.target_bps(), 51'000'000'000u);
  EXPECT_LT(clamped.rate(), loose.rate() + 1);
}

TEST(ReactionPoint, RateOnFirstCnp) {
  Params p = hpcc_run_py();
  p.rate_on_first_cnp_mbps = 30'000;
  ReactionPoint rp(&p, k100G);
  EXPECT_TRUE(rp.on_cnp(0));
  EXPECT_EQ(rp.rate_bps(), 30'000'000'000u);
  EXPECT_EQ(rp.target_bps(), 30'000'000'000u);
}

TEST(ReactionPoint, ByteCounterDrivesIncreases) {
  Params p = hpcc_run_py();
  p.byte_counter_bytes = 100'000;
  ReactionPoint rp(&p, k100G);
  Recorder rec;
  rp.set_trace(&rec);
  rp.on_cnp(0);
  rp.advance(4 * kUs);
  const double cut = rp.rate();
  // Receive: 99,999 bytes sent; Expect: nothing.
  EXPECT_FALSE(rp.on_sent(5 * kUs, 99'999));
  // One more byte: a byte counter event, fast recovery (both stages 0 < F = 1).
  EXPECT_TRUE(rp.on_sent(6 * kUs, 1));
  EXPECT_NEAR(rp.rate(), (cut + 100e9) / 2, 1);
  EXPECT_EQ(rec.count(EventKind::kByteCounter), 1u);
  EXPECT_EQ(rec.count(EventKind::kFastRecovery), 1u);
  // More byte events with the timer stage still 0: max(T, B) >= F, min < F:
  // additive increase, never hyper until the timer also passes F.
  for (int i = 0; i < 5; ++i) rp.on_sent(7 * kUs + i, 100'000);
  EXPECT_EQ(rec.count(EventKind::kAdditive), 5u);
  EXPECT_EQ(rec.count(EventKind::kHyper), 0u);
  EXPECT_EQ(rp.counters().byte_counter_events, 6u);
}

TEST(ReactionPoint, ByteCounterIsOffWithoutACut) {
  Params p = hpcc_run_py();
  p.byte_counter_bytes = 1000;
  ReactionPoint rp(&p, k100G);
  EXPECT_FALSE(rp.on_sent(0, 1'000'000));
  EXPECT_EQ(rp.counters().byte_counter_events, 0u);
  EXPECT_EQ(rp.next_deadline(), sched::kNever);
}

TEST(ReactionPoint, RecoversToLineRateThenIdlesAndStartsAfresh) {
  const Params p = hpcc_run_py();
  ReactionPoint rp(&p, k100G);
  rp.on_cnp(0);
  Picos t = 0;
  while (rp.limiting() && t < 100'000 * kUs) {
    t = rp.next_deadline();
    ASSERT_NE(t, sched::kNever);
    rp.advance(t);
  }
  EXPECT_FALSE(rp.limiting());
  EXPECT_EQ(rp.rate_bps(), k100G);
  EXPECT_EQ(rp.next_deadline(), sched::kNever);
  // Receive: a CNP much later; Expect: a first CNP again (alpha = initial, cut at +4 us).
  const Picos later = t + 777 * kUs;
  rp.on_cnp(later);
  EXPECT_EQ(rp.alpha(), 1.0);
  EXPECT_EQ(rp.next_deadline(), later + 4 * kUs);
  rp.advance(later + 4 * kUs);
  EXPECT_NEAR(rp.rate() / 1e9, 50.78, 0.01);
}

TEST(ReactionPoint, UnconfiguredIsInert) {
  ReactionPoint rp;
  EXPECT_FALSE(rp.configured());
  EXPECT_EQ(rp.next_deadline(), sched::kNever);
}

}  // namespace
}  // namespace isoroce::dcqcn
