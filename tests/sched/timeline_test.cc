// The timeline against a reference (a sorted multiset of start times): QPs inserted
// at random distances, from picoseconds to beyond the wheels (heap), released as
// system time advances by random steps, some removed on the way.
#include "sched/timeline.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

namespace isoroce::sched {
namespace {

constexpr Picos slot_start(Picos s) { return s & ~(Timeline::kSlotPicos - 1); }

struct Harness {
  explicit Harness(std::uint32_t n) : qps(n) {}
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

// Receive: random inserts, removals and advances. Expect: exactly the QPs whose slot
// starts at or before V are released, each once; next_start() is a lower bound of
// the earliest start and lies after V.
TEST(Timeline, MatchesReferenceUnderRandomOps) {
  constexpr std::uint32_t kQps = 4'000;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    Harness h(kQps);
    std::vector<bool> on(kQps, false);
    std::uint64_t released = 0, via_heap = 0;
    for (int step = 0; step < 60'000; ++step) {
      const std::uint32_t qp = rng() % kQps;
      const int op = rng() % 10;
      if (op < 5 && !on[qp]) {
        const Picos start = h.v + random_distance(rng);
        if (h.insert(qp, start)) {
          on[qp] = true;
          if (h.qps[qp].where_ == Where::kHeap) ++via_heap;
        } else {
          ASSERT_LE(slot_start(start), h.v) << "refused a QP not yet due";
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
        for (std::uint32_t i : due) ASSERT_TRUE(got.insert(i).second) << "released twice: " << i;
        std::set<std::uint32_t> want;
        while (!h.ref.empty() && slot_start(h.ref.begin()->first) <= h.v) {
          want.insert(h.ref.begin()->second);
          h.ref.erase(h.ref.begin());
        }
        ASSERT_EQ(got, want) << "seed " << seed << " step " << step << " v " << h.v;
        for (std::uint32_t i : got) on[i] = false;
        released += got.size();
      }
      const Picos next = h.timeline.next_start();
      if (h.ref.empty()) {
        ASSERT_EQ(next, kNever);
        ASSERT_TRUE(h.timeline.empty());
      } else {
        ASSERT_LE(next, h.ref.begin()->first);
        ASSERT_GT(next, h.v);
      }
    }
    EXPECT_GT(released, 10'000u);
    EXPECT_GT(via_heap, 100u);
  }
}

// Expect: a QP inserted 20 s ahead goes to the heap, and is released by one advance
// that jumps straight past it (no slot-by-slot walk), not before.
TEST(Timeline, FarFutureThroughHeap) {
  Harness h(2);
  ASSERT_TRUE(h.insert(0, 20'000'000'000'000));
  ASSERT_TRUE(h.insert(1, 1'000));
  EXPECT_EQ(h.qps[0].where_, Where::kHeap);
  EXPECT_EQ(h.qps[1].where_, Where::kWheel0);
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

}  // namespace
}  // namespace isoroce::sched
