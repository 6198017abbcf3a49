// SpinGovernor: an idle worker spins its full spin only while most idle gaps
// would have been caught by it (dataplane/dpdk/spin_governor.h).
#include "dataplane/dpdk/spin_governor.h"

#include <gtest/gtest.h>

#include <random>

namespace isoroce::dataplane {
namespace {

constexpr sched::Picos kUs = 1'000'000;

TEST(SpinGovernor, PingPongOnItsOwnCoreKeepsTheFullSpin) {
  // Turns shorter than the spin (a ping-pong the worker's spin catches).
  SpinGovernor g(20 * kUs, 1 * kUs, true);
  for (int i = 0; i < 1000; ++i) g.on_gap((3 + i % 10) * kUs);
  EXPECT_TRUE(g.full());
  EXPECT_EQ(g.spin(), 20 * kUs);
  EXPECT_EQ(g.to_short(), 0u);
}

TEST(SpinGovernor, GapsLongerThanTheSpinMakeItShortAndShortGapsBringItBack) {
  SpinGovernor g(20 * kUs, 1 * kUs, true);
  // Four long gaps leave 4 of 8 caught: short.
  for (int i = 0; i < 3; ++i) {
    g.on_gap(100 * kUs);
    EXPECT_TRUE(g.full()) << i;
  }
  g.on_gap(100 * kUs);
  EXPECT_FALSE(g.full());
  EXPECT_EQ(g.spin(), 1 * kUs);
  EXPECT_EQ(g.to_short(), 1u);
  // Hysteresis: it stays short until 7 of the last 8 gaps were short.
  for (int i = 0; i < 6; ++i) {
    g.on_gap(5 * kUs);
    EXPECT_FALSE(g.full()) << i;
  }
  g.on_gap(5 * kUs);
  EXPECT_TRUE(g.full());
  EXPECT_EQ(g.spin(), 20 * kUs);
  // A gap exactly the spin counts as caught.
  for (int i = 0; i < 8; ++i) g.on_gap(20 * kUs);
  EXPECT_TRUE(g.full());
}

TEST(SpinGovernor, MostlyLongGapsStayShortWhateverTheOrder) {
  // Two daemons on one core: two of three gaps longer than the spin.
  std::mt19937 rng(20);
  SpinGovernor g(20 * kUs, 1 * kUs, true);
  int full = 0;
  for (int i = 0; i < 3000; ++i) {
    g.on_gap(rng() % 3 == 0 ? 5 * kUs : 80 * kUs);
    full += g.full();
  }
  EXPECT_LT(full, 3000 / 20) << "full spinning in " << full << " of 3000 gaps";
}

TEST(SpinGovernor, OffOrPassesOnlyNeverChanges) {
  SpinGovernor off(20 * kUs, 1 * kUs, false);
  SpinGovernor passes(0, 1 * kUs, true);  // idle_spin_us = 0: 2000 empty passes
  for (int i = 0; i < 100; ++i) {
    off.on_gap(1000 * kUs);
    passes.on_gap(1000 * kUs);
  }
  EXPECT_TRUE(off.full());
  EXPECT_EQ(off.spin(), 20 * kUs);
  EXPECT_EQ(passes.spin(), 0u);
  // The short spin never exceeds the full one.
  SpinGovernor tiny(500'000, 1 * kUs, true);
  for (int i = 0; i < 8; ++i) tiny.on_gap(1000 * kUs);
  EXPECT_EQ(tiny.spin(), 500'000u);
}

}  // namespace
}  // namespace isoroce::dataplane
