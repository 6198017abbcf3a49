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
  std::vector<trace::Record> of(Event e) const {
    std::vector<trace::Record> out;
    for (const auto& r : records)
      if (r.event == e) out.push_back(r);
    return out;
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
    if (R[i].event != Event::kFrameTx) {
      EXPECT_GE(R[i].time, R[i - 1].time) << i;
    }
}

// The size the scheduler is told for each packet (frame_len(): each opcode's header
// bytes from a table, the payload, its pad) is the size of the frame then built, on
// both sides (requests, READ responses, ACKs), for every verb and payload lengths
// with every pad.
TEST(EngineTrace, EveryGrantIsTheSizeOfTheFrameBuilt) {
  RcPair p;
  Recorder rec[2];
  for (int i = 0; i < 2; ++i) {
    p.net[i].attach_trace(&rec[i], trace::bit(Event::kGrant) | trace::bit(Event::kFrameTx), static_cast<uint16_t>(i));
  }
  uint64_t id = 1;
  for (uint32_t len : {0u, 1u, 2u, 3u, 4u, 5u, 63u, 255u, 1023u, 1024u, 1025u, 2051u, 3000u}) {
    for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
                             IBV_WR_RDMA_READ}) {
      if (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM) {
        ASSERT_EQ(p.post_recv(1, 0, 4096, id), 0);
      }
      ASSERT_EQ(p.post(0, op, 0, len, 8192, id++), 0);
      ASSERT_TRUE(p.net.run());
    }
  }
  size_t frames = 0;
  for (int i = 0; i < 2; ++i) {
    const auto& R = rec[i].records;
    for (size_t k = 0; k < R.size(); ++k) {
      if (R[k].event != Event::kFrameTx) continue;
      ASSERT_GT(k, 0u);
      ASSERT_EQ(R[k - 1].event, Event::kGrant) << "side " << i << " record " << k;
      EXPECT_EQ(R[k].bytes + 24, R[k - 1].bytes) << "side " << i << " opcode " << R[k].a;
      ++frames;
    }
  }
  EXPECT_GT(frames, 13u * 5u * 2u);
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

// Sets CE on an ECN-capable IPv4 frame and fixes the header checksum.
void mark_ce(std::vector<uint8_t>& f) {
  uint8_t& tos = f[14 + 1];
  if ((tos & 3) == 0) return;
  tos |= 3;
  f[14 + 10] = f[14 + 11] = 0;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (f[14 + i] << 8) | f[14 + i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  const uint16_t c = static_cast<uint16_t>(~sum);
  f[14 + 10] = c >> 8;
  f[14 + 11] = c & 0xff;
}

// DCQCN: the first 100 data frames marked CE. The receiver traces each CNP it
// sends, the sender each CNP it gets, every cut (rate and alpha) and increase of
// its reaction point, and the scheduler's rate changes that follow.
TEST(EngineTrace, DcqcnCnpsCutsAndIncreases) {
  EngineConfig c;
  c.policy = "tassel";
  c.dcqcn.enabled = true;
  c.dcqcn.min_rate_mbps = 1000;
  RcOptions o;
  o.buf_bytes = 1 << 20;
  RcPair p(o, c);
  Recorder tx, rx;
  p.net[0].attach_trace(&tx, trace::kAllEvents, 0);
  p.net[1].attach_trace(&rx, trace::bit(Event::kCnp), 1);
  int marked = 0;
  p.net.set_hook([&marked](int from, std::vector<uint8_t>& f) {
    if (from == 0 && marked < 100) {
      mark_ce(f);
      ++marked;
    }
    return Fate::kDeliver;
  });
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 1 << 20, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  const auto sent = rx.records;
  const auto got = tx.of(Event::kCnp);
  ASSERT_GT(sent.size(), 0u);
  EXPECT_EQ(sent.size(), p.net[1].counters().cnps_sent);
  EXPECT_EQ(got.size(), p.net[0].counters().cnps_received);
  for (const auto& r : sent) EXPECT_EQ(r.a, 0u);  // sent
  for (const auto& r : got) EXPECT_EQ(r.a, 1u);   // received
  const auto cuts = tx.of(Event::kDcqcnCut);
  const auto ups = tx.of(Event::kDcqcnIncrease);
  const QpDcqcnState st = p.net[0].qp_dcqcn(p.s[0].qpn);
  EXPECT_EQ(cuts.size(), st.decreases);
  EXPECT_GT(cuts.size(), 0u);
  EXPECT_GT(ups.size(), 0u);
  EXPECT_LT(cuts[0].a, 100'000'000'000u);
  EXPECT_GT(cuts[0].b, 0u);  // alpha
  // Every rate the reaction point chose reached the scheduler as a rate event.
  const auto rates = tx.of(Event::kRate);
  ASSERT_FALSE(rates.empty());
  for (const auto& cut : cuts) {
    bool found = false;
    for (const auto& r : rates) found |= r.time == cut.time && r.a == cut.a;
    EXPECT_TRUE(found) << "cut at " << cut.time << " to " << cut.a;
  }
}

}  // namespace
}  // namespace isoroce::transport::testing
