// SpinGovernor: an idle worker spins its full spin only while most idle gaps
// would have been caught by it (dataplane/dpdk/spin_governor.h).
#include "dataplane/dpdk/spin_governor.h"

#include <gtest/gtest.h>

#include <random>

namespace isoroce::dataplane {
namespace {

constexpr sched::Picos kUs = 1'000'000;

// One idle phase as the worker has it: begin, then the gap until work.
void phase(SpinGovernor& g, sched::Picos gap) {
  g.begin_gap();
  g.on_gap(gap);
}

TEST(SpinGovernor, PingPongOnItsOwnCoreKeepsTheFullSpin) {
  // Turns shorter than the spin (a ping-pong the worker's spin catches).
  SpinGovernor g(20 * kUs, 1 * kUs, true);
  for (int i = 0; i < 1000; ++i) phase(g, (3 + i % 10) * kUs);
  EXPECT_TRUE(g.full());
  EXPECT_EQ(g.spin(), 20 * kUs);
  EXPECT_EQ(g.to_short(), 0u);
}

TEST(SpinGovernor, GapsLongerThanTheSpinMakeItShortAndShortGapsBringItBack) {
  SpinGovernor g(20 * kUs, 1 * kUs, true);
  // Four long gaps leave 4 of 8 caught: short.
  for (int i = 0; i < 3; ++i) {
    phase(g, 100 * kUs);
    EXPECT_TRUE(g.full()) << i;
  }
  phase(g, 100 * kUs);
  EXPECT_FALSE(g.full());
  EXPECT_EQ(g.spin(), 1 * kUs);
  EXPECT_EQ(g.to_short(), 1u);
  // Hysteresis: it stays short until 7 of the last 8 counted gaps were short;
  // while short only every 4th phase (a full-spin probe) is counted, so
  // seven probes of short gaps (28 phases) bring it back, not one less.
  for (int i = 0; i < 27; ++i) {
    phase(g, 5 * kUs);
    EXPECT_FALSE(g.full()) << i;
  }
  phase(g, 5 * kUs);
  EXPECT_TRUE(g.full());
  EXPECT_EQ(g.spin(), 20 * kUs);
  // A gap exactly the spin counts as caught.
  for (int i = 0; i < 8; ++i) phase(g, 20 * kUs);
  EXPECT_TRUE(g.full());
}

TEST(SpinGovernor, WhileShortOnlyProbesSpinFullAndOnlyTheyCount) {
  SpinGovernor g(20 * kUs, 1 * kUs, true);
  for (int i = 0; i < 8; ++i) phase(g, 100 * kUs);
  ASSERT_FALSE(g.full());
  // A worker woken from its sleep sees gaps of its wakeup (30 us here) even
  // when the work came at once: those gaps are not counted, the probes'
  // exact ones (3 us, caught by their full spin) are.
  int probes = 0, phases = 0;
  while (!g.full() && phases < 100) {
    g.begin_gap();
    const bool probe = g.spin() == 20 * kUs;
    probes += probe;
    g.on_gap(probe ? 3 * kUs : 30 * kUs);
    ++phases;
  }
  EXPECT_TRUE(g.full()) << phases;
  EXPECT_EQ(probes * 4, phases);
  EXPECT_EQ(probes, 7);  // 7 of the last 8 counted gaps caught
}

TEST(SpinGovernor, MostlyLongGapsStayShortWhateverTheOrder) {
  // Two daemons on one core: two of three gaps longer than the spin.
  std::mt19937 rng(20);
  SpinGovernor g(20 * kUs, 1 * kUs, true);
  int full = 0;
  for (int i = 0; i < 3000; ++i) {
    phase(g, rng() % 3 == 0 ? 5 * kUs : 80 * kUs);
    full += g.full();
  }
  EXPECT_LT(full, 3000 / 20) << "full spinning in " << full << " of 3000 gaps";
}

TEST(SpinGovernor, OffOrPassesOnlyNeverChanges) {
  SpinGovernor off(20 * kUs, 1 * kUs, false);
  SpinGovernor passes(0, 1 * kUs, true);  // idle_spin_us = 0: 2000 empty passes
  for (int i = 0; i < 100; ++i) {
    phase(off, 1000 * kUs);
    phase(passes, 1000 * kUs);
  }
  EXPECT_TRUE(off.full());
  EXPECT_EQ(off.spin(), 20 * kUs);
  EXPECT_EQ(passes.spin(), 0u);
  // The short spin never exceeds the full one.
  SpinGovernor tiny(500'000, 1 * kUs, true);
  for (int i = 0; i < 8; ++i) phase(tiny, 1000 * kUs);
  EXPECT_EQ(tiny.spin(), 500'000u);
}

}  // namespace
}  // namespace isoroce::dataplane
