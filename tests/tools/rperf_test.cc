// isoroce-rperf's arithmetic (tools/rperf/breakdown.h) on a schedule whose
// every instant is known: RTT = T_W - T_L per pair, the stages of each
// message, nearest-rank percentiles.
#include <gtest/gtest.h>

#include "tools/rperf/breakdown.h"

namespace isoroce::tools::rperf {
namespace {

using E = trace::Event;
constexpr Picos kNs = 1000;

trace::Record rec(Picos t, E e, uint16_t port, uint32_t qp, uint32_t psn = 0, uint64_t a = 0, uint64_t b = 0) {
  trace::Record r;
  r.time = t;
  r.event = e;
  r.port = port;
  r.qp = qp;
  r.psn = psn;
  r.a = a;
  r.b = b;
  return r;
}

// Message k of the wire QP (port 0, QP 16) to the responder (port 1, QP 32),
// starting at base: scheduler wait s ns, wire 500 ns, responder 100 ns,
// return 500 ns, completion 50 ns. The loopback QP (port 0, QP 17) posted 1 ns
// later completes after loop ns.
void message(std::vector<trace::Record>& rs, uint32_t k, Picos base, Picos s, Picos loop) {
  const Picos tx = base + s * kNs;
  rs.push_back(rec(base, E::kPost, 0, 16, k));
  rs.push_back(rec(base + 1 * kNs, E::kPost, 0, 17, k));
  rs.push_back(rec(base, E::kGrant, 0, 16, 0, tx, 0));          // data grant, departs at tx
  rs.push_back(rec(tx, E::kFrameTx, 0, 16, k, 0x04));            // SEND only
  rs.push_back(rec(tx + 500 * kNs, E::kFrameRx, 1, 32, k, 0x04));
  rs.push_back(rec(tx + 510 * kNs, E::kGrant, 1, 32, 0, tx + 600 * kNs, 1));  // control grant: not the message's
  rs.push_back(rec(tx + 600 * kNs, E::kFrameTx, 1, 32, k, 0x11));             // ACKNOWLEDGE
  rs.push_back(rec(tx + 1100 * kNs, E::kAck, 0, 16, k));
  rs.push_back(rec(tx + 1150 * kNs, E::kCompletion, 0, 16, k, 0));
  rs.push_back(rec(base + loop * kNs, E::kCompletion, 0, 17, k, 0));
}

TEST(Rperf, StagesOfAKnownSchedule) {
  std::vector<trace::Record> rs;
  message(rs, 0, 0, 200, 300);
  message(rs, 1, 10'000 * kNs, 0, 100);
  const auto msgs = messages(rs, {0, 16}, QpRef{1, 32});
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(*msgs[0].grant, 200 * kNs);
  EXPECT_EQ(*msgs[1].resp_ack_tx, 10'000 * kNs + 600 * kNs);
  const auto st = breakdown(msgs);
  ASSERT_EQ(st.size(), 6u);
  const std::vector<std::string> names = {"scheduler", "wire", "responder", "return", "completion", "total"};
  const std::vector<double> p50 = {0, 500, 100, 500, 50, 1150};      // nearest rank of 2: the smaller
  const std::vector<double> p99 = {200, 500, 100, 500, 50, 1350};
  for (size_t i = 0; i < st.size(); ++i) {
    EXPECT_EQ(st[i].name, names[i]);
    EXPECT_EQ(st[i].p.n, 2u) << names[i];
    EXPECT_DOUBLE_EQ(st[i].p.p50_ns, p50[i]) << names[i];
    EXPECT_DOUBLE_EQ(st[i].p.p99_ns, p99[i]) << names[i];
  }
}

// RPerf's claim 1: the local queueing delay cancels. Message 0 waited 200 ns
// in the scheduler and its loopback completed 300 ns after the post (the same
// wait plus 100 ns of loopback path); message 1 waited nothing and its
// loopback took 100 ns: both RTTs are 1150 - 100 = 1050 ns, while post to
// completion differs by the 200 ns.
TEST(Rperf, RttIsWireCompletionMinusLoopbackCompletion) {
  std::vector<trace::Record> rs;
  message(rs, 0, 0, 200, 300);  // T_W = 200 + 1150, T_L = 300
  message(rs, 1, 10'000 * kNs, 0, 100);
  const auto rtt = rperf_rtts(rs, {0, 16}, {0, 17});
  ASSERT_EQ(rtt.size(), 2u);
  EXPECT_EQ(rtt[0], 1050 * kNs);
  EXPECT_EQ(rtt[1], 1050 * kNs);
}

TEST(Rperf, WithoutTheResponderTheNetworkIsOneStage) {
  std::vector<trace::Record> rs;
  message(rs, 0, 0, 200, 300);
  const auto st = breakdown(messages(rs, {0, 16}, std::nullopt));
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[1].name, "network");
  EXPECT_DOUBLE_EQ(st[1].p.p50_ns, 1100);
}

// A closed loop posts the next message at the instant the last completes;
// records of that instant in any order go to the right message.
TEST(Rperf, AMessageEndingWhenTheNextStartsKeepsItsAck) {
  std::vector<trace::Record> rs;
  rs.push_back(rec(1000 * kNs, E::kGrant, 0, 16, 0, 1000 * kNs, 0));  // message 1's, before its post
  rs.push_back(rec(1000 * kNs, E::kFrameTx, 0, 16, 1, 0x04));
  rs.push_back(rec(1000 * kNs, E::kPost, 0, 16, 1));
  rs.push_back(rec(1000 * kNs, E::kCompletion, 0, 16, 0, 0));
  rs.push_back(rec(1000 * kNs, E::kAck, 0, 16, 0));
  rs.push_back(rec(0, E::kPost, 0, 16, 0));
  rs.push_back(rec(0, E::kGrant, 0, 16, 0, 0, 0));
  rs.push_back(rec(0, E::kFrameTx, 0, 16, 0, 0x04));
  const auto msgs = messages(rs, {0, 16}, std::nullopt);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(*msgs[0].ack, 1000 * kNs);
  EXPECT_EQ(*msgs[0].completion, 1000 * kNs);
  EXPECT_EQ(*msgs[1].grant, 1000 * kNs);
  EXPECT_EQ(*msgs[1].tx, 1000 * kNs);
  EXPECT_FALSE(msgs[1].ack);
}

TEST(Rperf, NearestRankPercentiles) {
  std::vector<Picos> v;
  for (Picos i = 1; i <= 1000; ++i) v.push_back(i * kNs);
  const Percentiles p = percentiles(v);
  EXPECT_EQ(p.n, 1000u);
  EXPECT_DOUBLE_EQ(p.p50_ns, 500);
  EXPECT_DOUBLE_EQ(p.p99_ns, 990);
  EXPECT_DOUBLE_EQ(p.p999_ns, 999);
  EXPECT_DOUBLE_EQ(p.max_ns, 1000);
  EXPECT_DOUBLE_EQ(p.mean_ns, 500.5);
  EXPECT_EQ(percentiles({}).n, 0u);
}

// The ring stage: posts that carry the time they waited in the application's ring
// (the post record's b) give a "ring" stage first, and "total" runs from the
// application's post.
TEST(Rperf, RingStageFromThePostRecord) {
  std::vector<trace::Record> rs;
  message(rs, 0, 0, 200, 300);
  message(rs, 1, 10'000 * kNs, 0, 100);
  rs[0].b = 3000 * kNs;                  // message 0 waited 3 us in the ring
  rs[rs.size() / 2].b = 1000 * kNs;      // message 1, 1 us
  ASSERT_EQ(rs[rs.size() / 2].event, E::kPost);
  const auto st = breakdown(messages(rs, {0, 16}, QpRef{1, 32}));
  ASSERT_EQ(st.size(), 7u);
  EXPECT_EQ(st[0].name, "ring");
  EXPECT_DOUBLE_EQ(st[0].p.p50_ns, 1000);
  EXPECT_DOUBLE_EQ(st[0].p.p99_ns, 3000);
  EXPECT_EQ(st[6].name, "total");
  EXPECT_DOUBLE_EQ(st[6].p.p50_ns, 1150 + 1000);
  EXPECT_DOUBLE_EQ(st[6].p.p99_ns, 1350 + 3000);
}

}  // namespace
}  // namespace isoroce::tools::rperf
