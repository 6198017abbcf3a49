// The rnic policy: packet round robin with a fetch batch, message bursts and a
// transmit pipeline, checked grant by grant on a fake clock.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_link.h"
#include "sched/policy_registry.h"
#include "sched/rnic.h"
#include "sched/scheduler.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;
constexpr Picos k1000B = 80'000;  // 1000 B at 100 Gb/s

Config rnic_config(std::uint32_t qps, RnicParams p) {
  return Config{.link_bps = kLink, .max_qps = qps, .rnic = p};
}

std::string order(const FakeLink& link, std::size_t from = 0) {
  std::string s;
  for (std::size_t i = from; i < link.log().size(); ++i) s += static_cast<char>('A' + link.log()[i].qp);
  return s;
}

// Receive: A and B, each 8 one-packet messages, batch 3. Expect: AAABBBAAABBBAABB:
// a turn is 3 packets, across message ends; never idle.
TEST(Rnic, BatchIsPacketsPerTurnAcrossMessages) {
  const Config config = rnic_config(2, {.batch_packets = 3});
  auto sched = make_scheduler("rnic", config);
  ASSERT_NE(sched, nullptr);
  EXPECT_EQ(sched->name(), "rnic");
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return i < 8 ? Packet{1'000, true} : Packet{}; });
  link.keep_log(true);
  link.start(0);
  link.start(1);
  link.run_until(kNever - 1);
  EXPECT_EQ(order(link), "AAABBBAAABBBAABB");
  for (std::size_t i = 0; i < link.log().size(); ++i) EXPECT_EQ(link.log()[i].departure, i * k1000B);
}

// Receive: A backlogged alone; B becomes ready while A's packet 2 is on the link;
// pipeline 3, batch 1. Expect: A's packets 3, 4, 5 (already in the pipeline) go
// first, then B, then A and B alternate.
TEST(Rnic, PipelineDelaysANewQpByItsDepth) {
  const Config config = rnic_config(2, {.batch_packets = 1, .pipeline_packets = 3});
  auto sched = make_scheduler("rnic", config);
  FakeLink link(*sched, config, [](QpId q, std::uint64_t i) {
    return i < (q == 0 ? 20u : 3u) ? Packet{1'000, true} : Packet{};
  });
  link.keep_log(true);
  link.start(0);
  link.run_until(2 * k1000B);  // A's packets 0, 1, 2 granted; 2 is on the link
  ASSERT_EQ(link.log().size(), 3u);
  link.start(1);
  link.run_until(kNever - 1);
  EXPECT_EQ(order(link), "AAAAAABABAB" + std::string(12, 'A'));
  EXPECT_EQ(link.log()[6].departure, 6 * k1000B);  // B's first packet: 4 packets after it was ready
}

// Receive: B ready while A is alone, pipeline 3, then A goes idle after one more
// packet. Expect: B is not held for packets that never come: it follows at once.
TEST(Rnic, PipelineHoldsNothingWhenTheOthersRunDry) {
  const Config config = rnic_config(2, {.batch_packets = 1, .pipeline_packets = 3});
  auto sched = make_scheduler("rnic", config);
  FakeLink link(*sched, config, [](QpId q, std::uint64_t i) {
    return i < (q == 0 ? 2u : 2u) ? Packet{1'000, true} : Packet{};
  });
  link.keep_log(true);
  link.start(0);
  link.run_until(0);  // A's packet 0 on the link
  link.start(1);
  link.run_until(kNever - 1);
  EXPECT_EQ(order(link), "AABB");
  EXPECT_EQ(link.log()[2].departure, 2 * k1000B);
}

// Receive: A and B each two messages of 6 packets, burst 2500 B, batch 1. Expect: a
// QP starting a message sends 3 packets (3000 B >= 2500) in its turn, then one per turn.
TEST(Rnic, MessageBurstKeepsTheTurn) {
  const Config config = rnic_config(2, {.batch_packets = 1, .message_burst_bytes = 2'500});
  auto sched = make_scheduler("rnic", config);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) {
    return i < 12 ? Packet{1'000, i % 6 == 5} : Packet{};
  });
  link.keep_log(true);
  link.start(0);
  link.start(1);
  link.run_until(kNever - 1);
  // A: msg1 p0-2 burst; B: msg1 p0-2; A p3; B p3; A p4; B p4; A p5 (ends) ; B p5;
  // A msg2 p0-2 burst ...
  EXPECT_EQ(order(link), "AAABBBABABAB" "AAABBBABABAB");
}

// Receive: the same random mix of messages under fifo and under rnic with batch 1,
// pipeline 0 and whole-message bursts. Expect: identical grants.
TEST(Rnic, WholeMessageBurstIsFifo) {
  auto sizes = [](QpId q, std::uint64_t i) {
    if (i >= 40) return Packet{};
    const std::uint32_t len = 1 + (q * 7 + i * 13) % 5;  // message length in packets
    return Packet{static_cast<std::uint32_t>(64 + (q * 131 + i * 977) % 4000), (i % len) == len - 1};
  };
  Config fifo_config{.link_bps = kLink, .max_qps = 4};
  const Config rnic = rnic_config(4, {.batch_packets = 1, .pipeline_packets = 0, .message_burst_bytes = kWholeMessage});
  auto a = make_scheduler("fifo", fifo_config);
  auto b = make_scheduler("rnic", rnic);
  FakeLink la(*a, fifo_config, sizes), lb(*b, rnic, sizes);
  la.keep_log(true);
  lb.keep_log(true);
  for (QpId q = 0; q < 4; ++q) la.start(q), lb.start(q);
  la.run_until(kNever - 1);
  lb.run_until(kNever - 1);
  ASSERT_EQ(la.log().size(), lb.log().size());
  ASSERT_EQ(la.log().size(), 160u);
  for (std::size_t i = 0; i < la.log().size(); ++i) {
    EXPECT_EQ(la.log()[i].qp, lb.log()[i].qp) << i;
    EXPECT_EQ(la.log()[i].departure, lb.log()[i].departure) << i;
  }
}

// Receive: the message processor at 1 M msgs/s from the params. Expect: 1 us apart.
TEST(Rnic, MessageProcessorFromParams) {
  const Config config = rnic_config(1, {.max_msgs_per_sec = 1'000'000});
  auto sched = make_scheduler("rnic", config);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return i < 3 ? Packet{64, true} : Packet{}; });
  link.keep_log(true);
  link.start(0);
  link.run_until(kNever - 1);
  ASSERT_EQ(link.log().size(), 3u);
  EXPECT_EQ(link.log()[1].departure, 1'000'000u);
  EXPECT_EQ(link.log()[2].departure, 2'000'000u);
}

TEST(RnicParams, PresetsAndSet) {
  for (std::string_view name : rnic_preset_names()) {
    RnicParams p;
    ASSERT_TRUE(rnic_preset(name, &p)) << name;
    EXPECT_TRUE(validate(p).empty()) << name;
  }
  RnicParams p;
  EXPECT_TRUE(set(p, "preset=fifo"));
  EXPECT_EQ(p.message_burst_bytes, kWholeMessage);
  EXPECT_TRUE(set(p, "batch_packets=4"));
  EXPECT_EQ(p.batch_packets, 4u);
  EXPECT_TRUE(set(p, "message_burst_bytes=65536"));
  EXPECT_EQ(p.message_burst_bytes, 65'536u);
  EXPECT_TRUE(set(p, "max_mops", "2.5"));
  EXPECT_EQ(p.max_msgs_per_sec, 2'500'000u);
  const RnicParams before = p;
  EXPECT_FALSE(set(p, "batch_packets=0"));
  EXPECT_FALSE(set(p, "batch_packets=1.5"));
  EXPECT_FALSE(set(p, "preset=cx9"));
  EXPECT_FALSE(set(p, "nonsense=1"));
  EXPECT_FALSE(set(p, "pipeline_packets"));
  EXPECT_EQ(p.batch_packets, before.batch_packets);
  EXPECT_EQ(make_scheduler("rnic", rnic_config(1, {.batch_packets = 0})), nullptr);
  const PolicyOps* ops = find_policy("rnic");
  ASSERT_NE(ops, nullptr);
  EXPECT_FALSE(ops->has(kCapEnforcesRates)) << "DCQCN is refused with rnic, as with fifo";
}

}  // namespace
}  // namespace isoroce::sched

namespace isoroce::sched {
namespace {

// Receive: B becomes ready beside a backlogged A, pipeline 2 with jitter 3, 64 seeds.
// Expect: B's first packet always 2 .. 5 packets after it was ready (beyond the one on
// the link), every wait in that range seen, and the same seed gives the same wait.
TEST(Rnic, PipelineJitterIsBoundedAndSeeded) {
  auto first_b = [](std::uint64_t seed) {
    const Config config = rnic_config(2, {.pipeline_packets = 2, .pipeline_jitter_packets = 3, .seed = seed});
    auto sched = make_scheduler("rnic", config);
    FakeLink link(*sched, config, [](QpId q, std::uint64_t i) {
      return i < (q == 0 ? 40u : 1u) ? Packet{1'000, true} : Packet{};
    });
    link.keep_log(true);
    link.start(0);
    link.run_until(0);  // A's packet 0 on the link
    link.start(1);
    link.run_until(kNever - 1);
    for (std::size_t i = 0; i < link.log().size(); ++i)
      if (link.log()[i].qp == 1) return i - 1;  // A's packets between
    return std::size_t{999};
  };
  std::vector<int> seen(6);
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    const std::size_t w = first_b(seed);
    ASSERT_GE(w, 2u);
    ASSERT_LE(w, 5u);
    ++seen[w];
    EXPECT_EQ(first_b(seed), w);
  }
  for (std::size_t w = 2; w <= 5; ++w) EXPECT_GT(seen[w], 0) << w;
}

}  // namespace
}  // namespace isoroce::sched

namespace isoroce::sched {
namespace {

// Receive: A in the middle of a 3-packet batch is deactivated (reset), B pending
// behind the pipeline is deactivated too. Expect: C's turn starts afresh, nothing of
// A or B leaves, and the counts follow.
TEST(Rnic, DeactivateMidTurnAndWhilePending) {
  const Config config = rnic_config(3, {.batch_packets = 3, .pipeline_packets = 2});
  auto sched = make_scheduler("rnic", config);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return i < 6 ? Packet{1'000, true} : Packet{}; });
  link.keep_log(true);
  link.start(0);
  link.run_until(0);  // A: packet 0 on the link
  link.start(1);      // B pending (pipeline 2)
  EXPECT_EQ(sched->active_qps(), 2u);
  sched->deactivate(link.now(), 1);
  sched->deactivate(link.now(), 0);
  EXPECT_EQ(sched->active_qps(), 0u);
  EXPECT_FALSE(sched->active(0));
  EXPECT_EQ(sched->next_deadline(), kNever);
  link.start(2);
  link.run_until(kNever - 1);
  EXPECT_EQ(order(link), "A" "CCCCCC");
}

}  // namespace
}  // namespace isoroce::sched
