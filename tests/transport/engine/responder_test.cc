// The responder and completer with hand-built packets: "Receive X / Expect Y"
// steps against one engine whose peer is this test. Also the engine's
// robustness against anything a peer can send.
#include <gtest/gtest.h>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

TEST(EngineResponder, InOrderWriteIsAcknowledgedWithItsPsn) {
  Dut d;
  const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto out = d.receive(d.write_only(500, 0, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode, wire::op::kRcAck);
  EXPECT_EQ(out[0].psn.value(), 500u);
  EXPECT_EQ(syndrome(out[0]), 0x1f);  // ACK, credits invalid
  EXPECT_EQ(out[0].aeth->msn, 1u);
  EXPECT_EQ(out[0].dest_qp.value(), 0x77u);
  EXPECT_EQ(std::memcmp(d.s.buf.data(), data, 8), 0);
}

TEST(EngineResponder, GapIsNakedOnceWithTheExpectedPsn) {
  Dut d;
  const uint8_t data[4] = {9, 9, 9, 9};
  auto out = d.receive(d.write_only(502, 0, data));  // expected 500
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x60);  // NAK, PSN sequence error
  EXPECT_EQ(out[0].psn.value(), 500u);
  EXPECT_TRUE(d.receive(d.write_only(503, 0, data)).empty()) << "one NAK per gap";
  EXPECT_EQ(d.s.buf[0], 0) << "nothing out of order is written";
  auto ok = d.receive(d.write_only(500, 0, data));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(syndrome(ok[0]), 0x1f);
  EXPECT_EQ(d.net[1].counters().rx_out_of_sequence, 2u);
}

TEST(EngineResponder, DuplicateWriteIsAcknowledgedAgainNotWrittenAgain) {
  Dut d;
  const uint8_t a[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2};
  d.receive(d.write_only(500, 0, a));
  d.receive(d.write_only(501, 100, a));
  auto out = d.receive(d.write_only(500, 0, b));  // a duplicate with other bytes
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x1f);
  EXPECT_EQ(out[0].psn.value(), 501u);  // coalesced: everything through 501
  EXPECT_EQ(d.s.buf[0], 1);
}

TEST(EngineResponder, DuplicateAtomicIsAnsweredFromTheSavedResult) {
  Dut d;
  uint64_t v = 5;
  std::memcpy(d.s.buf.data() + 64, &v, 8);
  auto f = d.spec(wire::op::kRcFetchAdd, 500);
  f.atomic = wire::AtomicFields{d.s.iova + 64, d.s.keys.rkey, 10, 0};
  auto first = d.receive(f);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].opcode, wire::op::kRcAtomicAck);
  EXPECT_EQ(*first[0].atomic_ack, 5u);
  auto again = d.receive(f);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(*again[0].atomic_ack, 5u);
  std::memcpy(&v, d.s.buf.data() + 64, 8);
  EXPECT_EQ(v, 15u) << "executed once";
}

TEST(EngineResponder, DuplicateReadIsExecutedAgainFromItsPsn) {
  Dut d;
  for (int i = 0; i < 3000; ++i) d.s.buf[i] = static_cast<uint8_t>(i);
  auto f = d.spec(wire::op::kRcReadRequest, 500);
  f.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, 3000};
  auto out = d.receive(f);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].opcode, wire::op::kRcReadResponseFirst);
  EXPECT_EQ(out[2].opcode, wire::op::kRcReadResponseLast);
  EXPECT_EQ(out[2].psn.value(), 502u);
  // The requester lost the last two: it asks again from PSN 501, byte 1024.
  f.psn = wire::Psn(501);
  f.reth = wire::RethFields{d.s.iova + 1024, d.s.keys.rkey, 3000 - 1024};
  auto again = d.receive(f);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].psn.value(), 501u);
  EXPECT_EQ(again[0].opcode, wire::op::kRcReadResponseFirst);
  EXPECT_EQ(again[1].payload_len, 3000u - 2048);
}

TEST(EngineResponder, DuplicateReadCancelsTheQueuedResponsesOfLaterReads) {
  // Receive READ A (PSN 500-502) and READ B (503-505); A's responses leave, B's
  // wait. Receive A again from 502 (its last response was lost). Expect: A's
  // 502 at once, not behind B's responses, which the requester would discard;
  // B's come when the requester asks for B again.
  Dut d;
  auto a = d.spec(wire::op::kRcReadRequest, 500);
  a.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, 3000};
  auto b = d.spec(wire::op::kRcReadRequest, 503);
  b.reth = wire::RethFields{d.s.iova + 4096, d.s.keys.rkey, 3000};
  for (const auto* f : {&a, &b}) {
    std::vector<uint8_t> frame(wire::frame_size(*f));
    ASSERT_TRUE(wire::build_frame(*f, frame).ok());
    d.net[1].receive(d.now, frame);
  }
  Capture first;
  for (int i = 0; i < 10 && first.pkts.size() < 3; ++i) {
    d.net[1].transmit(d.now, first, 3 - first.pkts.size());
    d.now = std::max(d.now, d.net[1].next_deadline());
  }
  ASSERT_EQ(first.pkts.size(), 3u);
  EXPECT_EQ(first.pkts[2].psn.value(), 502u);

  a.psn = wire::Psn(502);
  a.reth = wire::RethFields{d.s.iova + 2048, d.s.keys.rkey, 3000 - 2048};
  auto again = d.receive(a);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].psn.value(), 502u);
  EXPECT_EQ(again[0].opcode, wire::op::kRcReadResponseOnly);
  EXPECT_EQ(d.net[1].counters().responses_cancelled, 1u);

  auto b_again = d.receive(b);
  ASSERT_EQ(b_again.size(), 3u);
  EXPECT_EQ(b_again[0].psn.value(), 503u);
  EXPECT_EQ(b_again[2].psn.value(), 505u);
}

TEST(EngineResponder, BadRkeyIsARemoteAccessNakAndTheQpFails) {
  Dut d;
  const uint8_t data[4] = {1, 2, 3, 4};
  auto f = d.write_only(500, 0, data);
  f.reth->rkey ^= 1;
  auto out = d.receive(f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x62);  // NAK, remote access error
  EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  auto events = d.net[1].take_async_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, AsyncEventType::kQpFatal);
}

TEST(EngineResponder, WritePastTheRegionIsARemoteAccessNak) {
  Dut d;
  std::vector<uint8_t> data(16, 7);
  auto out = d.receive(d.write_only(500, d.s.buf.size() - 8, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x62);
}

TEST(EngineResponder, MisalignedAtomicIsAnInvalidRequestNak) {
  Dut d;
  auto f = d.spec(wire::op::kRcCompareSwap, 500);
  f.atomic = wire::AtomicFields{d.s.iova + 4, d.s.keys.rkey, 1, 0};
  auto out = d.receive(f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x61);
}

TEST(EngineResponder, SendWithoutAReceiveIsAnRnrNakWithTheTimer) {
  Dut d;
  const uint8_t data[4] = {1, 2, 3, 4};
  auto f = d.spec(wire::op::kRcSendOnly, 500);
  f.payload = data;
  auto out = d.receive(f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x20 | d.opt.min_rnr_timer);
  EXPECT_EQ(out[0].psn.value(), 500u);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, RecvWr{1, {}}), 0);  // a zero-length receive
  f.payload = {};
  auto ok = d.receive(f);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(syndrome(ok[0]), 0x1f);
}

TEST(EngineResponder, OpcodeOutOfSequenceIsAnInvalidRequestNak) {
  Dut d;
  std::vector<uint8_t> data(1024, 1);
  auto f = d.spec(wire::op::kRcWriteMiddle, 500);  // no WRITE FIRST before it
  f.payload = data;
  auto out = d.receive(f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x61);
}

TEST(EngineResponder, ShortMiddlePacketIsAnInvalidRequestNak) {
  Dut d;
  std::vector<uint8_t> data(1024, 1);
  auto f = d.spec(wire::op::kRcWriteFirst, 500);
  f.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, 4096};
  f.payload = data;
  f.ack_req = false;
  EXPECT_TRUE(d.receive(f).empty());
  auto m = d.spec(wire::op::kRcWriteMiddle, 501);
  m.payload = std::span(data).first(1000);
  auto out = d.receive(m);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x61);
}

TEST(EngineResponder, PacketsFromAnotherAddressAreIgnored) {
  Dut d;
  const uint8_t data[4] = {1, 2, 3, 4};
  auto f = d.write_only(500, 0, data);
  f.src_ip = ip4(0x0a0000fe);
  EXPECT_TRUE(d.receive(f).empty());
  EXPECT_EQ(d.s.buf[0], 0);
  EXPECT_EQ(d.net[1].counters().rx_dropped, 1u);
}

TEST(EngineRobustness, RandomAndMutatedFramesNeverCrashOrCorrupt) {
  Dut d;
  std::mt19937_64 rng(7);
  const uint8_t data[64] = {};
  std::vector<uint8_t> good(wire::frame_size(d.write_only(500, 0, data)));
  ASSERT_TRUE(wire::build_frame(d.write_only(500, 0, data), good).ok());
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> f;
    if (i % 2) {
      f.resize(rng() % 200);
      for (auto& b : f) b = static_cast<uint8_t>(rng());
    } else {
      f = good;
      for (int k = 0; k < 3; ++k) f[rng() % f.size()] ^= static_cast<uint8_t>(rng());
    }
    d.net[1].receive(d.now, f);
  }
  d.drain();
  // The QP still works (a mutation confined to fields outside the ICRC may
  // have delivered PSN 500 already; 501 is in order either way).
  const uint8_t x[4] = {4, 3, 2, 1};
  d.receive(d.write_only(500, 200, x));
  auto out = d.receive(d.write_only(501, 300, x));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x1f);
  EXPECT_EQ(d.s.buf[300], 4);
  EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_RTS);
  EXPECT_GT(d.net[1].counters().rx_parse_errors, 19000u);
}

}  // namespace
}  // namespace isoroce::transport::testing
