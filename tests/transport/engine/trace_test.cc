// Engine tracing (sched/trace.h): the events of a known exchange, in order, naming
// QPNs (never scheduler ids) with their class; the mask filters; detach stops it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

using trace::Event;

struct Recorder final : trace::Sink {
  void record(const trace::Record& r) override { records.push_back(r); }
  std::vector<trace::Record> records;
  std::string names() const {
    std::string s;
    for (const auto& r : records) s += std::string(trace::name(r.event)) + " ";
    return s;
  }
};

TEST(EngineTrace, SendOfThreePacketsGivesItsEventsInOrder) {
  RcPair p;
  Recorder rec;
  p.net[0].attach_trace(&rec, trace::kAllEvents, 3);
  ASSERT_EQ(p.post_recv(1, 0, 4096, 9), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 3000, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  // Fifo on a 100 Gb/s link with no lookahead: post and activation at 0, then each
  // packet granted when the link is free and built at once, then the responder's ACK
  // of the last PSN and the completion.
  EXPECT_EQ(rec.names(),
            "post activate grant frame_tx grant frame_tx grant frame_tx frame_rx ack completion ");
  const uint32_t qpn = p.s[0].qpn.value();
  for (const auto& r : rec.records) {
    EXPECT_EQ(r.qp, qpn) << trace::name(r.event);
    EXPECT_EQ(r.port, 3u);
    EXPECT_EQ(r.cls, static_cast<uint8_t>(sched::FlowClass::kBandwidth));
  }
  const auto& R = rec.records;
  ASSERT_EQ(R.size(), 11u);
  EXPECT_EQ(R[0].time, 0u);
  EXPECT_EQ(R[0].bytes, 3000u);
  EXPECT_EQ(R[0].a, static_cast<uint64_t>(IBV_WR_SEND));
  EXPECT_EQ(R[0].psn, 0u);  // message id: the QP's first post
  EXPECT_EQ(R[1].time, 0u);
  EXPECT_EQ(R[1].bytes, R[2].bytes);  // activated with its first packet's size
  // Grants back to back on the link (10 ps a bit at 100 Gb/s), each frame built at
  // its grant and stamped with its departure.
  Picos departure = 0;
  for (int k = 0; k < 3; ++k) {
    const trace::Record& g = R[2 + 2 * k];
    const trace::Record& f = R[3 + 2 * k];
    EXPECT_EQ(g.time, departure) << k;
    EXPECT_EQ(g.a, departure) << k;
    EXPECT_EQ(g.b, 0u);  // data
    EXPECT_EQ(f.time, departure);
    EXPECT_EQ(f.psn, 100u + k);  // RcOptions::psn0
    EXPECT_EQ(f.bytes + 24, g.bytes);  // the grant counts preamble, FCS and gap
    departure += static_cast<Picos>(g.bytes) * 8 * 10;
  }
  EXPECT_EQ(R[3].a, wire::op::kRcSendFirst);
  EXPECT_EQ(R[5].a, wire::op::kRcSendMiddle);
  EXPECT_EQ(R[7].a, wire::op::kRcSendLast);
  EXPECT_EQ(R[9].psn, 102u);
  EXPECT_EQ(R[10].psn, 0u);
  EXPECT_EQ(R[10].a, static_cast<uint64_t>(IBV_WC_SUCCESS));
  EXPECT_EQ(R[10].b, static_cast<uint64_t>(IBV_WC_SEND));
  EXPECT_EQ(R[10].time, R[8].time);  // written by the receive of the ACK
  for (size_t i = 1; i < R.size(); ++i)
    if (R[i].event != Event::kFrameTx) EXPECT_GE(R[i].time, R[i - 1].time) << i;
}

TEST(EngineTrace, MaskClassAndDetach) {
  RcPair p;
  Recorder rec;
  ASSERT_EQ(p.net[0].set_qp_class(0, p.s[0].qpn, sched::FlowClass::kLatency, 1, 1), 0);
  p.net[0].attach_trace(&rec, trace::bit(Event::kGrant) | trace::bit(Event::kCompletion), 0);
  ASSERT_EQ(p.post_recv(1, 0, 64, 9), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 64, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(rec.names(), "grant completion ");
  for (const auto& r : rec.records) EXPECT_EQ(r.cls, static_cast<uint8_t>(sched::FlowClass::kLatency));
  p.net[0].attach_trace(nullptr, trace::kAllEvents, 0);
  ASSERT_EQ(p.post_recv(1, 0, 64, 10), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 64, 0, 2), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(rec.records.size(), 2u);
  EXPECT_EQ(p.net[0].scheduler().tracer().mask(), 0u);
}

TEST(EngineTrace, RefusedFramesAreDropsWithTheirReason) {
  RcPair p;
  Recorder rec;
  p.net[1].attach_trace(&rec, trace::bit(Event::kDrop), 0);
  // Every frame engine 0 sends gets its ICRC broken.
  p.net.set_hook([](int from, std::vector<uint8_t>& f) {
    if (from == 0) f.back() ^= 1;
    return Fate::kDeliver;
  });
  ASSERT_EQ(p.post_recv(1, 0, 64, 9), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 64, 0, 1), 0);
  p.net.run_until(100'000'000);  // 100 us: before the retransmission timer
  ASSERT_EQ(rec.records.size(), 1u);
  EXPECT_EQ(rec.records[0].a, static_cast<uint64_t>(DropReason::kBadIcrc));
  EXPECT_EQ(rec.records[0].qp, p.s[1].qpn.value());
}

}  // namespace
}  // namespace isoroce::transport::testing
