// The timeline against a reference (a sorted multiset of start times): QPs inserted
// at random distances, from picoseconds to beyond the wheels (heap), released as
// system time advances by random steps, some removed on the way.
#include "sched/timeline.h"

#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace isoroce::sched {
namespace {

constexpr Picos slot_start(Picos s) { return s & ~(Timeline::kSlotPicos - 1); }

struct Harness {
  explicit Harness(std::uint32_t n) : qps(n), timeline(n) {}
  std::vector<QpSlot> qps;
  Timeline timeline;
  std::set<std::pair<Picos, std::uint32_t>> ref;  // (start, qp) of QPs on the timeline
  std::vector<bool> on;
  Picos v = 0;

  // Returns true if stored, false if immediately due.
  bool insert(std::uint32_t qp, Picos start) {
    qps[qp].time_ = start;
    if (!timeline.insert(qps.data(), qp)) return false;
    ref.insert({start, qp});
    return true;
  }
};

Picos random_distance(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0: return rng() % 2'000;                    // within a few fine slots
    case 1: return rng() % 300'000;                  // fine level
    case 2: return rng() % 1'000'000'000;            // middle level
    case 3: return rng() % 4'000'000'000'000;        // coarse level
    case 4: return 4'000'000'000'000 + rng() % 20'000'000'000'000;  // beyond: heap
    default: return 0;
  }
}

Picos random_step(std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0: return rng() % 100;
    case 1: return rng() % 100'000;
    case 2: return rng() % 100'000'000;
    case 3: return rng() % 2'000'000'000'000;
    default: return 0;
  }
}

// Starts within a few middle and coarse slots, so that each slot holds a chain of
// many buckets and removals land inside chains.
Picos clustered_distance(std::mt19937_64& rng) {
  constexpr Picos kMiddle = Picos{1} << 18;  // 262 ns
  constexpr Picos kCoarse = Picos{1} << 30;  // 1.07 ms
  switch (rng() % 4) {
    case 0: return rng() % 2'000;
    case 1: return (1 + rng() % 3) * kMiddle + rng() % 64;
    case 2: return (1 + rng() % 3) * kCoarse + rng() % kMiddle;
    default: return 5'000 * kCoarse + rng() % 5;  // heap
  }
}

// Runs random inserts (at distance(rng) from V), removals and advances against the
// reference; returns {QPs released, QPs that went through the heap}.
template <class Distance>
std::pair<std::uint64_t, std::uint64_t> run_random_ops(std::uint64_t seed, std::uint32_t qps, int steps,
                                                       Distance distance) {
  std::mt19937_64 rng(seed);
  Harness h(qps);
  std::vector<bool> on(qps, false);
  std::uint64_t released = 0, via_heap = 0;
  for (int step = 0; step < steps; ++step) {
    const std::uint32_t qp = rng() % qps;
    const int op = rng() % 10;
    if (op < 5 && !on[qp]) {
      const Picos start = h.v + distance(rng);
      if (h.insert(qp, start)) {
        on[qp] = true;
        if (h.timeline.where(h.qps.data(), qp) == Where::kHeap) ++via_heap;
      } else {
        EXPECT_LE(slot_start(start), h.v) << "refused a QP not yet due";
      }
    } else if (op == 5 && on[qp]) {
      h.timeline.remove(h.qps.data(), qp);
      h.ref.erase({h.qps[qp].time_, qp});
      on[qp] = false;
    } else {
      h.v += random_step(rng);
      std::vector<std::uint32_t> due;
      h.timeline.advance(h.qps.data(), h.v, [&](std::uint32_t i) { due.push_back(i); });
      std::set<std::uint32_t> got;
      for (std::uint32_t i : due) EXPECT_TRUE(got.insert(i).second) << "released twice: " << i;
      std::set<std::uint32_t> want;
      while (!h.ref.empty() && slot_start(h.ref.begin()->first) <= h.v) {
        want.insert(h.ref.begin()->second);
        h.ref.erase(h.ref.begin());
      }
      EXPECT_EQ(got, want) << "seed " << seed << " step " << step << " v " << h.v;
      if (got != want) return {released, via_heap};
      for (std::uint32_t i : got) on[i] = false;
      released += got.size();
    }
    const Picos next = h.timeline.next_start();
    if (h.ref.empty()) {
      EXPECT_EQ(next, kNever);
      EXPECT_TRUE(h.timeline.empty());
    } else {
      EXPECT_LE(next, h.ref.begin()->first);
      EXPECT_GT(next, h.v);
    }
    EXPECT_LE(h.timeline.bucket_bytes_touched(), h.timeline.bucket_bytes_reserved());
    if (step % 4 == 0) EXPECT_TRUE(h.timeline.fine_level_consistent()) << "seed " << seed << " step " << step;
    if (testing::Test::HasFailure()) break;
  }
  return {released, via_heap};
}

// Receive: random inserts, removals and advances. Expect: exactly the QPs whose slot
// starts at or before V are released, each once; next_start() is a lower bound of
// the earliest start and lies after V.
TEST(Timeline, MatchesReferenceUnderRandomOps) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto [released, via_heap] = run_random_ops(seed, 4'000, 60'000, random_distance);
    EXPECT_GT(released, 10'000u);
    EXPECT_GT(via_heap, 100u);
  }
}

// Receive: the same with starts crowded into a few slots (chains of many buckets,
// removals from their middle). Expect: the same.
TEST(Timeline, MatchesReferenceWithCrowdedSlots) {
  for (std::uint64_t seed : {4u, 5u}) {
    const auto [released, via_heap] = run_random_ops(seed, 3'000, 60'000, clustered_distance);
    EXPECT_GT(released, 10'000u);
    EXPECT_GT(via_heap, 100u);
  }
}

// Receive: the worst case for buckets: every middle and coarse slot holding a single
// QP (a bucket each, nearly empty), the other QPs crowded into one slot; then time
// runs past all of them. Expect: the buckets stay within what the timeline reserved,
// and every QP is released once.
TEST(Timeline, WorstCaseStaysWithinReservedBuckets) {
  constexpr std::uint32_t kQps = 20'000;
  constexpr Picos kMiddle = Picos{1} << 18;
  constexpr Picos kCoarse = Picos{1} << 30;
  Harness h(kQps);
  std::uint32_t qp = 0;
  for (Picos k = 1; k < 4'096; ++k) ASSERT_TRUE(h.insert(qp++, k * kMiddle));  // middle slots
  for (Picos k = 1; k < 4'096; ++k) ASSERT_TRUE(h.insert(qp++, k * kCoarse));  // coarse slots
  for (; qp < kQps; ++qp) ASSERT_TRUE(h.insert(qp, 5 * kMiddle + qp));         // one long chain
  EXPECT_LE(h.timeline.bucket_bytes_touched(), h.timeline.bucket_bytes_reserved());
  std::vector<int> times(kQps, 0);
  for (Picos v = 0; v < 4'097 * kCoarse; v += v < kCoarse ? kMiddle / 3 : kCoarse / 5) {
    h.timeline.advance(h.qps.data(), v, [&](std::uint32_t i) { ++times[i]; });
    ASSERT_LE(h.timeline.bucket_bytes_touched(), h.timeline.bucket_bytes_reserved());
  }
  for (std::uint32_t i = 0; i < kQps; ++i) ASSERT_EQ(times[i], 1) << "qp " << i;
  EXPECT_TRUE(h.timeline.empty());
}

// Expect: a QP inserted 20 s ahead goes to the heap, and is released by one advance
// that jumps straight past it (no slot-by-slot walk), not before.
TEST(Timeline, FarFutureThroughHeap) {
  Harness h(2);
  ASSERT_TRUE(h.insert(0, 20'000'000'000'000));
  ASSERT_TRUE(h.insert(1, 1'000));
  EXPECT_EQ(h.timeline.where(h.qps.data(), 0), Where::kHeap);
  EXPECT_EQ(h.timeline.where(h.qps.data(), 1), Where::kWheel0);
  std::vector<std::uint32_t> due;
  auto collect = [&](std::uint32_t i) { due.push_back(i); };
  h.timeline.advance(h.qps.data(), 19'999'999'999'000, collect);
  EXPECT_EQ(due, std::vector<std::uint32_t>{1});
  EXPECT_LE(h.timeline.next_start(), 20'000'000'000'000u);
  EXPECT_GT(h.timeline.next_start(), 19'999'999'999'000u);
  due.clear();
  h.timeline.advance(h.qps.data(), 20'000'000'000'000, collect);
  EXPECT_EQ(due, std::vector<std::uint32_t>{0});
  EXPECT_TRUE(h.timeline.empty());
}

// Receive: QPs due within the next few middle slots (262 ns each), inserted a few at
// a time while system time creeps forward by fractions of a middle slot, sometimes
// jumping over empty middle slots without a release, and some removed (among them
// the earliest). Released fine slots keep their bits until the cursor enters
// another middle slot (timeline.h), so this walks every way of leaving one: a
// release, a cascade, the fast path over an empty slot. Expect: each advance releases
// exactly the QPs due, in order of their slots, each once; empty() and next_start()
// are exact about an empty timeline.
TEST(Timeline, ReleasesInSlotOrderAcrossMiddleSlots) {
  constexpr Picos kMiddle = Picos{1} << 18;
  for (std::uint64_t seed : {21u, 22u, 23u}) {
    std::mt19937_64 rng(seed);
    constexpr std::uint32_t kQps = 512;
    Harness h(kQps);
    std::vector<bool> on(kQps, false);
    std::uint64_t released = 0, removed_first = 0;
    for (int step = 0; step < 40'000; ++step) {
      const int op = rng() % 8;
      if (op < 4) {
        const std::uint32_t qp = rng() % kQps;
        if (on[qp]) continue;
        const Picos ahead = rng() % 4 == 0 ? rng() % 3'000 : rng() % (5 * kMiddle);
        on[qp] = h.insert(qp, h.v + ahead);
      } else if (op == 4 && !h.ref.empty()) {
        // Remove the earliest QP half the time (its slot may be next_due_), else any.
        auto it = h.ref.begin();
        if (rng() % 2 == 0) {
          std::advance(it, rng() % h.ref.size());
        } else {
          ++removed_first;
        }
        const std::uint32_t qp = it->second;
        h.timeline.remove(h.qps.data(), qp);
        h.ref.erase(it);
        on[qp] = false;
      } else {
        h.v += rng() % 8 == 0 ? (1 + rng() % 3) * kMiddle + rng() % kMiddle : rng() % (kMiddle / 8);
        std::vector<std::uint32_t> got;
        h.timeline.advance(h.qps.data(), h.v, [&](std::uint32_t i) { got.push_back(i); });
        std::vector<std::uint32_t> want;
        while (!h.ref.empty() && slot_start(h.ref.begin()->first) <= h.v) {
          want.push_back(h.ref.begin()->second);
          h.ref.erase(h.ref.begin());
        }
        for (std::size_t k = 1; k < got.size(); ++k)
          ASSERT_LE(slot_start(h.qps[got[k - 1]].time_), slot_start(h.qps[got[k]].time_))
              << "seed " << seed << " step " << step << ": released out of slot order";
        std::set<std::uint32_t> got_set(got.begin(), got.end());
        ASSERT_EQ(got_set.size(), got.size()) << "released twice, seed " << seed << " step " << step;
        ASSERT_EQ(got_set, std::set<std::uint32_t>(want.begin(), want.end())) << "seed " << seed << " step " << step;
        for (std::uint32_t i : got) on[i] = false;
        released += got.size();
      }
      ASSERT_EQ(h.timeline.empty(), h.ref.empty()) << "seed " << seed << " step " << step;
      if (h.ref.empty()) {
        ASSERT_EQ(h.timeline.next_start(), kNever);
      } else {
        ASSERT_LE(h.timeline.next_start(), h.ref.begin()->first);
      }
    }
    EXPECT_GT(released, 10'000u);
    EXPECT_GT(removed_first, 1'000u);
  }
}

}  // namespace
}  // namespace isoroce::sched
