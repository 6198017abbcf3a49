// workload::ReferenceProbe over two engines in virtual time: the schedule
// docs/design.md decides ("Justitia's reference flow"), refused posts, error
// completions, and the same schedule under the daemon's poll-loop driving and
// the simulator's event driving.
#include <gtest/gtest.h>

#include "tests/workload/probe_drivers.h"

namespace isoroce::workload::testing {
namespace {

constexpr Picos kUs = 1'000'000;

std::vector<ProbeMark> of_kind(const std::vector<ProbeMark>& marks, ProbeMark::Kind k) {
  std::vector<ProbeMark> out;
  for (const auto& m : marks)
    if (m.kind == k) out.push_back(m);
  return out;
}

// The rule: probe 0 at the start; probe k+1 at the first grid point after
// probe k's post, or at probe k's completion if that is later.
void expect_schedule(const std::vector<ProbeMark>& marks, Picos period) {
  const auto posts = of_kind(marks, ProbeMark::kPost);
  const auto done = of_kind(marks, ProbeMark::kComplete);
  ASSERT_FALSE(posts.empty());
  EXPECT_EQ(posts[0].time, 0u);
  for (size_t k = 0; k + 1 < posts.size(); ++k) {
    ASSERT_LT(k, done.size());
    EXPECT_EQ(done[k].seq, k);
    const Picos due = (posts[k].time / period + 1) * period;
    EXPECT_EQ(posts[k + 1].time, std::max(due, done[k].time)) << "probe " << k + 1;
    EXPECT_EQ(posts[k + 1].seq, k + 1);
  }
}

// ACKs of even probes take 25 us (late by more than two periods), of odd ones 1 us.
Wire::Arrival alternating() {
  return [acks = uint64_t{0}](int from, Picos departure) mutable {
    if (from == 0) return departure + 1 * kUs;
    return departure + (acks++ % 2 == 0 ? 25 * kUs : 1 * kUs);
  };
}

TEST(ReferenceProbe, PostsOnTheGridWhenEachProbeCompletesInTime) {
  Wire w([](int, Picos d) { return d + 1 * kUs; });
  ProbeRig rig(w, 10 * kUs);
  run_polled(w, rig.probe, 95 * kUs);
  const auto posts = of_kind(rig.marks, ProbeMark::kPost);
  ASSERT_EQ(posts.size(), 10u);
  for (size_t k = 0; k < posts.size(); ++k) EXPECT_EQ(posts[k].time, k * 10 * kUs);
  expect_schedule(rig.marks, 10 * kUs);
  const ProbeStats& s = rig.probe.stats();
  EXPECT_EQ(s.completed, 10u);
  EXPECT_GE(s.min, 2 * kUs);  // one microsecond each way
  EXPECT_LT(s.max, 3 * kUs);
  EXPECT_EQ(s.errors, 0u);
}

TEST(ReferenceProbe, LateProbeGoesOutAtCompletionThenTheGridResumesWithoutABurst) {
  Wire w(alternating());
  ProbeRig rig(w, 10 * kUs);
  run_polled(w, rig.probe, 200 * kUs);
  expect_schedule(rig.marks, 10 * kUs);
  const auto posts = of_kind(rig.marks, ProbeMark::kPost);
  // Probe 1 goes when probe 0 completes (26 us: 1 us there, 25 back), probe 2
  // at the next grid point (30 us), not at the 10 and 20 us it missed.
  ASSERT_GE(posts.size(), 3u);
  EXPECT_EQ(posts[1].time, 26 * kUs);
  EXPECT_EQ(posts[2].time, 30 * kUs);
  EXPECT_LT(posts.size(), 14u);  // one per 2 + 1 periods, never a catch-up burst
}

TEST(ReferenceProbe, RefusedPostIsCountedAndTriedAgainAtTheNextGridPoint) {
  Wire w([](int, Picos d) { return d + 1 * kUs; });
  ProbeRig rig(w, 10 * kUs);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;  // posts now fail with EINVAL
  ASSERT_EQ(w.engine(0).modify_qp(wire::Qpn(rig.probe.stats().src_qpn), a, IBV_QP_STATE), 0);
  run_polled(w, rig.probe, 35 * kUs);
  const auto refused = of_kind(rig.marks, ProbeMark::kRefused);
  ASSERT_EQ(refused.size(), 4u);
  for (size_t k = 0; k < refused.size(); ++k) EXPECT_EQ(refused[k].time, k * 10 * kUs);
  EXPECT_EQ(rig.probe.stats().errors, 4u);
  EXPECT_EQ(rig.probe.stats().posted, 0u);
  EXPECT_TRUE(rig.probe.stats().running);
}

TEST(ReferenceProbe, ErrorCompletionEndsTheProbe) {
  Wire w([](int, Picos d) { return d + 1 * kUs; });
  ProbeRig rig(w, 10 * kUs, /*dst_rkey_xor=*/0x100);  // the WRITE gets a remote access NAK
  run_polled(w, rig.probe, 100 * kUs);
  ASSERT_EQ(rig.marks.size(), 2u);
  EXPECT_EQ(rig.marks[0].kind, ProbeMark::kPost);
  EXPECT_EQ(rig.marks[1].kind, ProbeMark::kError);
  const ProbeStats& s = rig.probe.stats();
  EXPECT_TRUE(s.failed);
  EXPECT_FALSE(s.running);
  EXPECT_EQ(s.completed, 0u);
  EXPECT_EQ(rig.probe.next_deadline(), kNever);
}

TEST(ReferenceProbe, PollLoopAndEventsGiveTheSameSchedule) {
  Wire polled_wire(alternating()), evented_wire(alternating());
  ProbeRig polled(polled_wire, 10 * kUs), evented(evented_wire, 10 * kUs);
  run_polled(polled_wire, polled.probe, 300 * kUs);
  run_evented(evented_wire, evented.probe, 300 * kUs);
  ASSERT_GT(polled.marks.size(), 20u);
  EXPECT_EQ(polled.marks, evented.marks);
  expect_schedule(evented.marks, 10 * kUs);
}

}  // namespace
}  // namespace isoroce::workload::testing
