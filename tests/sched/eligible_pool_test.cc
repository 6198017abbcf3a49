#include "sched/eligible_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_EQ(pool.size(), 4u);
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

}  // namespace
}  // namespace isoroce::sched
