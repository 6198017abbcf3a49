#include "sched/eligible_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <vector>

namespace isoroce::sched {
namespace {

constexpr Picos bucket(Picos f) { return f >> EligiblePool::kBucketLog2; }

// Receive: QPs with finish times spread over less than the pool's span, pushed in
// random order. Expect: popped in order of finish time to the bucket, FIFO within one.
TEST(EligiblePool, PopsSmallestFinishFirst) {
  std::mt19937_64 rng(11);
  constexpr std::uint32_t kQps = 3'000;
  std::vector<QpSlot> qps(kQps);
  EligiblePool pool;
  const Picos base = 123'456'789;
  for (std::uint32_t i = 0; i < kQps; ++i) qps[i].time_ = base + rng() % (EligiblePool::kSpan / 2);
  for (std::uint32_t i = 0; i < kQps; ++i) pool.push(qps.data(), i);
  // All keys fit one span: the calendar moves back as smaller ones arrive.
  std::vector<std::uint32_t> order;
  for (std::uint32_t qp = pool.pop(qps.data()); qp != kNil; qp = pool.pop(qps.data())) order.push_back(qp);
  ASSERT_EQ(order.size(), kQps);
  for (std::size_t k = 1; k < order.size(); ++k) {
    const Picos a = bucket(qps[order[k - 1]].time_);
    const Picos b = bucket(qps[order[k]].time_);
    ASSERT_LE(a, b) << "at " << k;
    if (a == b) {
      ASSERT_LT(order[k - 1], order[k]) << "FIFO within a bucket";
    }
  }
  EXPECT_TRUE(pool.empty());
}

// Expect: finish times beyond the span are served after every nearer one; finish
// times behind the smallest one first; remove() takes a QP out anywhere.
TEST(EligiblePool, ClampsAndRemoves) {
  std::vector<QpSlot> qps(4);
  EligiblePool pool;
  qps[0].time_ = 1'000'000;
  qps[1].time_ = 1'000'000 + 10 * EligiblePool::kSpan;  // slow QP
  qps[2].time_ = 1'000'000 + 50'000;
  qps[3].time_ = 10;  // overdue: the span from it no longer covers QP 1's bucket
  for (std::uint32_t i = 0; i < 4; ++i) pool.push(qps.data(), i);
  EXPECT_EQ(pool.size(qps.data()), 4u);
  EXPECT_EQ(pool.pop(qps.data()), 0u);
  EXPECT_EQ(pool.pop(qps.data()), 3u);  // clamped into the first bucket, behind 0
  pool.remove(qps.data(), 2);
  EXPECT_EQ(qps[2].where_, Where::kIdle);
  EXPECT_EQ(pool.pop(qps.data()), 1u);
  EXPECT_EQ(pool.pop(qps.data()), kNil);
}

// Expect: a smaller finish time pushed after a larger one still pops first when the
// calendar can move back to it.
TEST(EligiblePool, MovesBackForSmallerFinish) {
  std::vector<QpSlot> qps(3);
  EligiblePool pool;
  qps[0].time_ = 8'000'000;  // 8 us
  qps[1].time_ = 160'000;    // 160 ns
  qps[2].time_ = 4'000'000;
  for (std::uint32_t i = 0; i < 3; ++i) pool.push(qps.data(), i);
  EXPECT_EQ(pool.pop(qps.data()), 1u);
  EXPECT_EQ(pool.pop(qps.data()), 2u);
  EXPECT_EQ(pool.pop(qps.data()), 0u);
}

// The calendar as it was before its first bucket got its own FIFO (issue 20, fifth
// pass), written plainly: FIFO buckets by key, the same window rules. The pool must pop
// exactly what this pops.
class ReferenceCalendar {
 public:
  void push(std::uint32_t qp, Picos f) {
    std::uint64_t key = f >> EligiblePool::kBucketLog2;
    if (count_ == 0) {
      first_ = last_ = key;
    } else if (key < first_) {
      if (last_ - key <= kMask) {
        first_ = key;
      } else {
        key = first_;
      }
    } else if (key - first_ > kMask) {
      key = first_ + kMask;
    }
    last_ = std::max(last_, key);
    buckets_[key].push_back(qp);  // every key held lies in [first_, first_ + kMask]
    key_[qp] = key;
    ++count_;
  }
  std::uint32_t pop() {
    if (count_ == 0) return kNil;
    auto it = buckets_.begin();
    first_ = it->first;
    const std::uint32_t qp = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) buckets_.erase(it);
    --count_;
    return qp;
  }
  void remove(std::uint32_t qp) {
    auto it = buckets_.find(key_[qp]);
    it->second.erase(std::find(it->second.begin(), it->second.end(), qp));
    if (it->second.empty()) buckets_.erase(it);
    --count_;
  }

 private:
  static constexpr std::uint64_t kMask = 4095;
  std::map<std::uint64_t, std::deque<std::uint32_t>> buckets_;  // by key, not by slot
  std::map<std::uint32_t, std::uint64_t> key_;
  std::uint64_t first_ = 0;
  std::uint64_t last_ = 0;
  std::size_t count_ = 0;
};

// Receive: random pushes (finish times just behind, at, inside and far beyond the
// window, so that keys clamp to the first and last buckets and the calendar moves
// back), pops and removals. Expect: the same QPs popped in the same order as the
// single-array calendar, and the first bucket's array slot always empty (its QPs are
// in the pool's separate FIFO).
TEST(EligiblePool, FirstBucketFifoMatchesSingleArrayCalendar) {
  std::mt19937_64 rng(29);
  constexpr std::uint32_t kQps = 512;
  std::vector<QpSlot> qps(kQps);
  std::vector<bool> in(kQps, false);
  std::vector<std::uint32_t> held;
  EligiblePool pool;
  ReferenceCalendar ref;
  Picos v = 1'000'000'000;  // where finish times are drawn around; creeps forward
  std::uint64_t pops = 0, removes = 0;
  for (int step = 0; step < 400'000; ++step) {
    const std::uint64_t op = rng() % 16;
    if (op < 8) {
      const std::uint32_t qp = static_cast<std::uint32_t>(rng() % kQps);
      if (in[qp]) continue;
      Picos f;
      switch (rng() % 5) {
        case 0: f = v - rng() % (2 * EligiblePool::kSpan); break;           // behind
        case 1: f = v + rng() % 20'000; break;                             // near
        case 2: f = v + rng() % EligiblePool::kSpan; break;                // inside
        case 3: f = v + EligiblePool::kSpan + rng() % (4 * EligiblePool::kSpan); break;  // beyond
        default: f = v + rng() % (1u << EligiblePool::kBucketLog2); break;  // same bucket
      }
      qps[qp].time_ = f;
      pool.push(qps.data(), qp);
      ref.push(qp, f);
      in[qp] = true;
      held.push_back(qp);
    } else if (op < 15) {
      const std::uint32_t a = pool.pop(qps.data());
      const std::uint32_t b = ref.pop();
      ASSERT_EQ(a, b) << "pop " << pops << " at step " << step;
      if (a != kNil) {
        in[a] = false;
        held.erase(std::find(held.begin(), held.end(), a));
        ++pops;
      }
    } else if (!held.empty()) {
      const std::size_t k = rng() % held.size();
      const std::uint32_t qp = held[k];
      pool.remove(qps.data(), qp);
      ref.remove(qp);
      in[qp] = false;
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      ++removes;
    }
    ASSERT_TRUE(pool.first_slot_empty()) << "at step " << step;
    ASSERT_EQ(pool.empty(), held.empty());
    if (step % 16 == 0) ASSERT_EQ(pool.size(qps.data()), held.size());
    v += rng() % 3'000;
  }
  for (std::uint32_t a = pool.pop(qps.data()); a != kNil; a = pool.pop(qps.data())) ASSERT_EQ(a, ref.pop());
  EXPECT_EQ(ref.pop(), kNil);
  EXPECT_GT(pops, 100'000u);
  EXPECT_GT(removes, 10'000u);
}

}  // namespace
}  // namespace isoroce::sched
