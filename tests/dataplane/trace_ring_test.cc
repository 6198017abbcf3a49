// dataplane::TraceRing: the live trace's per-device ring (one producer, the
// worker; one consumer, the control thread). Order, overflow counted and not
// fatal, the QP filter, and a producer thread against a consumer thread.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "dataplane/dpdk/trace_ring.h"

namespace isoroce::dataplane {
namespace {

trace::Record rec(uint64_t i, uint32_t qp = 16) {
  trace::Record r;
  r.time = i * 1000;
  r.a = i;
  r.qp = qp;
  r.event = trace::Event::kGrant;
  return r;
}

std::vector<uint64_t> drain_all(TraceRing& ring) {
  std::vector<uint64_t> got;
  ring.drain([&](const trace::Record& r) { got.push_back(r.a); });
  return got;
}

TEST(TraceRing, CapacityIsAPowerOfTwo) {
  EXPECT_EQ(TraceRing(1).capacity(), 2u);
  EXPECT_EQ(TraceRing(5).capacity(), 8u);
  EXPECT_EQ(TraceRing(64).capacity(), 64u);
}

TEST(TraceRing, DrainsInOrderAndFreesTheSlots) {
  TraceRing ring(4);
  for (uint64_t i = 0; i < 3; ++i) ring.record(rec(i));
  EXPECT_EQ(drain_all(ring), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_TRUE(drain_all(ring).empty());
  // The indices wrap the mask: the freed slots take the next records.
  for (uint64_t i = 3; i < 7; ++i) ring.record(rec(i));
  EXPECT_EQ(drain_all(ring), (std::vector<uint64_t>{3, 4, 5, 6}));
  EXPECT_EQ(ring.dropped(), 0u);
  EXPECT_EQ(ring.recorded(), 7u);
}

TEST(TraceRing, AFullRingCountsWhatItDropsAndKeepsTheOldest) {
  TraceRing ring(2);
  for (uint64_t i = 0; i < 5; ++i) ring.record(rec(i));
  EXPECT_EQ(ring.dropped(), 3u);
  EXPECT_EQ(drain_all(ring), (std::vector<uint64_t>{0, 1}));
  // Drained, it records again.
  ring.record(rec(9));
  EXPECT_EQ(drain_all(ring), (std::vector<uint64_t>{9}));
  EXPECT_EQ(ring.dropped(), 3u);
}

TEST(TraceRing, AQpFilterKeepsOnlyThatQp) {
  TraceRing ring(8, 17);
  ring.record(rec(1, 16));
  ring.record(rec(2, 17));
  ring.record(rec(3, 0xffffffff));
  EXPECT_EQ(drain_all(ring), (std::vector<uint64_t>{2}));
  EXPECT_EQ(ring.dropped(), 0u);  // filtered is not dropped
}

// A producer thread against a consumer thread: every record arrives once, in
// order, or is counted as dropped; none is torn.
TEST(TraceRing, ProducerAndConsumerThreadsLoseNothingUncounted) {
  constexpr uint64_t kN = 2'000'000;
  TraceRing ring(1024);
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN; ++i) ring.record(rec(i));
  });
  std::vector<uint64_t> got;
  got.reserve(kN);
  bool torn = false;
  auto take = [&] {
    ring.drain([&](const trace::Record& r) {
      torn |= r.time != r.a * 1000;
      got.push_back(r.a);
    });
  };
  while (ring.recorded() + ring.dropped() < kN) take();
  producer.join();
  take();
  EXPECT_FALSE(torn);
  EXPECT_EQ(got.size() + ring.dropped(), kN);
  for (size_t i = 1; i < got.size(); ++i) ASSERT_LT(got[i - 1], got[i]) << i;
}

}  // namespace
}  // namespace isoroce::dataplane
