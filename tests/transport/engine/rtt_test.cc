// Passive round trips (completer.cc, docs/sched.md "Latency signal"): the
// requester times one single-packet request per QP from when it became ready on an
// idle QP to the response that covers it, never a retransmitted PSN (Karn), and
// gives each round trip to the scheduler. Checked against the virtual-time
// schedule of two engines joined by a 1 us link.
#include <gtest/gtest.h>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

constexpr Picos kDelay = 1'000'000;  // Pair's link, each way

// Receive: one 16 B WRITE, one 16 B READ, one fetch-and-add, each alone on an idle
// link. Expect: each a round trip of exactly 2 us (the request departs when posted,
// the peer answers when it arrives); a 4-packet WRITE gives none.
TEST(EnginePassiveRtt, ExactOnAnIdleLink) {
  RcPair p;
  const QpCounters* c = p.net[0].qp_counters(p.s[0].qpn);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 16, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(c->rtt_samples, 1u);
  EXPECT_EQ(c->last_rtt, 2 * kDelay);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 64, 16, 64, 2), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(c->rtt_samples, 2u);
  EXPECT_EQ(c->last_rtt, 2 * kDelay);
  ASSERT_EQ(p.post(0, IBV_WR_ATOMIC_FETCH_AND_ADD, 128, 8, 128, 3), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(c->rtt_samples, 3u);
  EXPECT_EQ(c->last_rtt, 2 * kDelay);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 4096, 0, 4), 0);  // MTU 1024: 4 packets
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(c->rtt_samples, 3u);
  EXPECT_EQ(p.poll(0, false).size(), 4u);
}

// Receive: a second QP posts a 64 KB WRITE, then the first QP a 16 B WRITE, both at
// time 0 (fifo: one whole message per turn). Expect: the 16 B WRITE leaves after the
// 64 packets of the other QP and its round trip is that wait plus 2 us exactly
// (it counts the time behind other QPs, as the reference probe's message does);
// the 64 KB message, whose last packet waited behind its own, gives none.
TEST(EnginePassiveRtt, CountsTheWaitBehindOtherQps) {
  RcOptions o;
  RcPair p(o);
  Side a = make_side(p.net[0], o), b = make_side(p.net[1], o);
  connect(p.net[0], a, b, p.net[1].config().ip, o, 300, 7000);
  connect(p.net[1], b, a, p.net[0].config().ip, o, 7000, 300);
  Sge big{a.iova, 65'536, a.keys.lkey};
  SendWr wr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = std::span(&big, 1);
  wr.remote_addr = b.iova;
  wr.rkey = b.keys.rkey;
  ASSERT_EQ(p.net[0].post_send(0, a.qpn, wr), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 16, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  Picos departed = sched::kNever;
  int big_packets = 0;
  for (size_t i = 0; i < p.net.sent(0).size(); ++i) {
    const wire::RocePacket& pkt = p.net.sent(0)[i];
    if (pkt.dest_qp == p.s[1].qpn) departed = p.net.departures(0)[i];
    if (pkt.dest_qp == b.qpn) ++big_packets;
  }
  EXPECT_EQ(big_packets, 64);
  ASSERT_NE(departed, sched::kNever);
  EXPECT_GT(departed, 64 * 80'000u);  // behind 64 packets of over 1 KB at 100 Gb/s
  const QpCounters* c = p.net[0].qp_counters(p.s[0].qpn);
  EXPECT_EQ(c->rtt_samples, 1u);
  EXPECT_EQ(c->last_rtt, departed + 2 * kDelay);
  EXPECT_EQ(p.net[0].qp_counters(a.qpn)->rtt_samples, 0u);
}

// Receive: the first transmission of a 16 B WRITE is lost; it is sent again after
// the ACK timeout (4.096 us x 2^8). Expect (Karn): no round trip for it, although
// an ACK covers it; the next WRITE is timed again, 2 us.
TEST(EnginePassiveRtt, RetransmittedRequestsAreNotTimed) {
  RcPair p;
  bool dropped = false;
  p.net.set_hook([&](int from, std::vector<uint8_t>&) {
    if (from != 0 || dropped) return Fate::kDeliver;
    dropped = true;
    return Fate::kDrop;
  });
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 16, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  const QpCounters* c = p.net[0].qp_counters(p.s[0].qpn);
  EXPECT_EQ(c->retransmits, 1u);
  ASSERT_EQ(p.poll(0, false).size(), 1u);
  EXPECT_EQ(c->rtt_samples, 0u);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 16, 0, 2), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(c->rtt_samples, 1u);
  EXPECT_EQ(c->last_rtt, 2 * kDelay);
}

// Receive: five 16 B WRITEs one after another on a latency-class QP of a justitia
// engine, under each signal, and on a bandwidth-class QP. Expect: the scheduler
// takes the five round trips (Current99 2 us) under passive and both, none under
// probe, and none from a bandwidth-class QP.
TEST(EnginePassiveRtt, RoundTripsReachTheJustitiaScheduler) {
  for (auto sig : {sched::LatencySignal::kProbe, sched::LatencySignal::kPassive, sched::LatencySignal::kBoth}) {
    for (auto cls : {sched::FlowClass::kLatency, sched::FlowClass::kBandwidth}) {
      EngineConfig base;
      base.policy = "justitia";
      base.justitia.signal = sig;
      RcPair p({}, base);
      ASSERT_EQ(p.net[0].set_qp_class(0, p.s[0].qpn, cls, 1, 1), 0);
      for (int k = 0; k < 5; ++k) {
        ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 16, 0, k), 0);
        ASSERT_TRUE(p.net.run());
      }
      EXPECT_EQ(p.net[0].qp_counters(p.s[0].qpn)->rtt_samples, 5u);
      const sched::JustitiaStats* s = p.net[0].scheduler().justitia_stats();
      ASSERT_NE(s, nullptr);
      const bool taken = sig != sched::LatencySignal::kProbe && cls == sched::FlowClass::kLatency;
      EXPECT_EQ(s->passive_samples, taken ? 5u : 0u) << to_string(sig) << " " << to_string(cls);
      EXPECT_EQ(s->current99, taken ? 2 * kDelay : 0u);
    }
  }
}

}  // namespace
}  // namespace isoroce::transport::testing
