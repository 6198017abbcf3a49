// The packets of a long message after its first: a WRITE's or SEND's middle and
// last packets go through the responder's checks fused into one function
// (resp_continues) and a READ's middle responses skip the completer's steps
// (on_response), each taken only when every step would pass. Each test feeds such
// packets by hand, in order and not (a gap, a duplicate, a corrupted copy, a
// length past the message, another message's opcode), and checks the answer, the
// bytes and the completions are what the steps give.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMtu = 1024;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) { return pattern_bytes(n, seed, 7); }

// The frame of f with one byte flipped, `from_end` bytes before its end.
std::vector<wire::RocePacket> receive_corrupt(Dut& d, const wire::FrameSpec& f, size_t from_end) {
  return d.receive_corrupt(f, from_end, 0x08);
}

// Posts a one-SGE work request from the DUT's buffer at `local`.
int post_one(Dut& d, ibv_wr_opcode op, uint64_t local, uint32_t len, uint64_t remote, uint32_t rkey, uint64_t wr_id) {
  const Sge sge{d.s.iova + local, len, d.s.keys.lkey};
  return d.net[1].post_send(d.now, d.s.qpn, one_sge_wr(sge, op, remote, rkey, wr_id));
}

// Steps the DUT, from one deadline to the next, until it has sent `n` packets
// or `steps` steps went by; what it sent.
Capture transmit_until(Dut& d, size_t n, int steps) {
  Capture c;
  for (int i = 0; i < steps && c.pkts.size() < n; ++i) {
    d.net[1].advance(d.now);
    d.net[1].transmit(d.now, c, 64);
    d.now = std::max(d.now, d.net[1].next_deadline());
  }
  return c;
}

// An engine whose scheduler grants a burst of packets per transmit (a lookahead of
// 10 us, as a port's driver runs it), so one dequeue takes several packets of a QP:
// each after the first is the one the grant before derived (next_request). With
// no lookahead a dequeue grants one packet and every packet is peeked afresh.
EngineConfig bursts() {
  EngineConfig c;
  c.sched_lookahead = 10'000'000;
  return c;
}

// A message's first packet was taken; then either a short middle packet (PSN 501,
// half an MTU: a fatal NAK queued, not yet sent) or the QP moved to ERR (`err`),
// then the full middle packet 501 of `data`, received straight (no transmit in
// between). What the responder sent after.
std::vector<wire::RocePacket> interrupt_then_continue(Dut& d, uint8_t middle, std::span<const uint8_t> data, bool err) {
  auto deliver = [&d](const wire::FrameSpec& f) {
    std::vector<uint8_t> v(wire::frame_size(f));
    EXPECT_TRUE(wire::build_frame(f, v).ok());
    d.now += 1'000'000;
    d.net[1].receive(d.now, v);
  };
  if (err) {
    d.move_to_err();
  } else {
    auto bad = d.spec(middle, 501);
    bad.payload = data.subspan(kMtu, kMtu / 2);
    deliver(bad);
  }
  auto good = d.spec(middle, 501);
  good.payload = data.subspan(kMtu, kMtu);
  deliver(good);
  return d.drain();
}

// A receive of `len` bytes at offset `at` of the buffer (wr_id), then a SEND's first
// packet (PSN 500, no AckReq) carrying `payload`: taken, nothing sent.
void start_send(Dut& d, uint64_t at, uint32_t len, uint64_t wr_id, std::span<const uint8_t> payload) {
  const Sge sge{d.s.iova + at, len, d.s.keys.lkey};
  RecvWr rwr;
  rwr.wr_id = wr_id;
  rwr.sg_list = std::span(&sge, 1);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, rwr), 0);
  auto first = d.spec(wire::op::kRcSendFirst, 500);
  first.payload = payload;
  first.ack_req = false;
  EXPECT_TRUE(d.receive(first).empty());
}

bool is_ack(const wire::RocePacket& p, uint32_t psn) {
  return p.opcode == wire::op::kRcAck && syndrome(p) >> 5 == 0 && p.psn.value() == psn;
}

// A WRITE of 3.5 MTUs: its middle packets one by one, with a gap, a corrupted
// copy and a duplicate in between. Only the in-order intact packets store, each at
// its place; the gap is NAKed once, the corrupted copy dropped unanswered, the
// duplicate acknowledged again and not stored again.
TEST(EngineLongMessage, WriteMiddlePacketsStoreOnlyInOrderAndIntact) {
  Dut d;
  const std::vector<uint8_t> data = pattern(3 * kMtu + 512, 3);
  const std::span<const uint8_t> all(data);
  const uint64_t off = 256;  // into the DUT's region
  const std::vector<uint8_t> other = pattern(kMtu, 99);
  auto first = d.spec(wire::op::kRcWriteFirst, 500);
  first.reth = wire::RethFields{d.s.iova + off, d.s.keys.rkey, static_cast<uint32_t>(data.size())};
  first.payload = all.first(kMtu);
  first.ack_req = false;
  EXPECT_TRUE(d.receive(first).empty());

  // A gap: the second middle packet before the first.
  auto m2 = d.spec(wire::op::kRcWriteMiddle, 502);
  m2.payload = all.subspan(2 * kMtu, kMtu);
  auto out = d.receive(m2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x60);  // NAK, PSN sequence error
  EXPECT_EQ(out[0].psn.value(), 501u);
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(off + kMtu, 2 * kMtu), 0)) << "a packet after a gap stored";

  // The first middle packet with a payload byte flipped: dropped, nothing answered.
  auto m1 = d.spec(wire::op::kRcWriteMiddle, 501);
  m1.payload = all.subspan(kMtu, kMtu);
  EXPECT_TRUE(receive_corrupt(d, m1, 100).empty());
  EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);

  // Intact: stored and acknowledged (AckReq).
  out = d.receive(m1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], 501));
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 2 * kMtu, d.s.buf.begin() + off));

  // A duplicate with other bytes: acknowledged again, not stored.
  auto dup = m1;
  dup.payload = other;
  out = d.receive(dup);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], 501));
  EXPECT_EQ(d.net[1].counters().rx_duplicates, 1u);
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 2 * kMtu, d.s.buf.begin() + off));

  // The rest, in order: every byte where it belongs, nothing past the message.
  m2.ack_req = false;
  EXPECT_TRUE(d.receive(m2).empty());
  auto last = d.spec(wire::op::kRcWriteLast, 503);
  last.payload = all.subspan(3 * kMtu);
  out = d.receive(last);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], 503));
  EXPECT_EQ(out[0].aeth->msn, 1u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + off));
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(off + data.size(), kMtu), 0));
  EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_RTS);
}

// A WRITE's middle packet at the expected PSN right behind one that earned a fatal
// NAK (a middle packet of half an MTU), before that NAK left: nothing is stored
// (the responder takes nothing once a fatal NAK is queued, 9.9.2); and one after
// the QP was moved to ERR mid-WRITE: nothing is stored either.
TEST(EngineLongMessage, WriteMiddleBehindAFatalNakOrInErrStoresNothing) {
  for (const bool err : {false, true}) {
    SCOPED_TRACE(err ? "QP moved to ERR" : "behind a fatal NAK");
    Dut d;
    const std::vector<uint8_t> data = pattern(3 * kMtu, 9);
    auto first = d.spec(wire::op::kRcWriteFirst, 500);
    first.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, 3 * kMtu};
    first.payload = std::span(data).first(kMtu);
    first.ack_req = false;
    EXPECT_TRUE(d.receive(first).empty());
    const auto out = interrupt_then_continue(d, wire::op::kRcWriteMiddle, data, err);
    if (!err) {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(syndrome(out[0]), 0x61);  // NAK, invalid request
    }
    EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(kMtu, 2 * kMtu), 0)) << "stored past the first packet";
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// Two gaps in one WRITE, an in-order middle packet between them: each gap gets its
// sequence-error NAK (one per gap: the in-order packet ends the first, 9.7.5.1.2).
TEST(EngineLongMessage, EachGapInAWriteIsNakedOnce) {
  Dut d;
  const std::vector<uint8_t> data = pattern(5 * kMtu, 17);
  auto first = d.spec(wire::op::kRcWriteFirst, 500);
  first.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, 5 * kMtu};
  first.payload = std::span(data).first(kMtu);
  first.ack_req = false;
  EXPECT_TRUE(d.receive(first).empty());
  auto middle = [&](uint32_t i) {
    auto f = d.spec(wire::op::kRcWriteMiddle, 500 + i);
    f.payload = std::span(data).subspan(i * kMtu, kMtu);
    f.ack_req = false;
    return f;
  };
  for (int gap = 0; gap < 2; ++gap) {
    SCOPED_TRACE(gap);
    const auto nak = d.receive(middle(3));  // 501 (or 502) missing
    ASSERT_EQ(nak.size(), 1u);
    EXPECT_EQ(syndrome(nak[0]), 0x60);  // NAK, PSN sequence error
    EXPECT_TRUE(d.receive(middle(3)).empty()) << "the same gap NAKed twice";
    EXPECT_TRUE(d.receive(middle(1 + gap)).empty());  // in order
  }
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 3 * kMtu, d.s.buf.begin()));
}

// The same for a SEND: each gap gets its NAK, and an in-order middle packet asking
// for an ACK (AckReq) gets one, for its PSN.
TEST(EngineLongMessage, EachGapInASendIsNakedOnceAndAnAckReqAnswered) {
  Dut d;
  const std::vector<uint8_t> data = pattern(5 * kMtu, 19);
  const uint64_t at = 8192;
  start_send(d, at, 5 * kMtu, 4, std::span<const uint8_t>(data).first(kMtu));
  auto middle = [&](uint32_t i, bool ack_req) {
    auto f = d.spec(wire::op::kRcSendMiddle, 500 + i);
    f.payload = std::span(data).subspan(i * kMtu, kMtu);
    f.ack_req = ack_req;
    return f;
  };
  for (uint32_t gap = 0; gap < 2; ++gap) {
    SCOPED_TRACE(gap);
    const auto nak = d.receive(middle(3, false));  // 501 (or 502) missing
    ASSERT_EQ(nak.size(), 1u);
    EXPECT_EQ(syndrome(nak[0]), 0x60);  // NAK, PSN sequence error
    EXPECT_TRUE(d.receive(middle(3, false)).empty()) << "the same gap NAKed twice";
    const auto ack = d.receive(middle(1 + gap, true));  // in order, AckReq
    ASSERT_EQ(ack.size(), 1u);
    EXPECT_TRUE(is_ack(ack[0], 501 + gap));
  }
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 3 * kMtu, d.s.buf.begin() + at));
}

// A WRITE's last packet of two MTUs that ends exactly what the RETH announced:
// longer than the path MTU, an Invalid Request NAK, nothing stored past the first.
TEST(EngineLongMessage, WriteLastLongerThanTheMtuIsNakedAndStoresNothing) {
  Dut d;
  const std::vector<uint8_t> data = pattern(3 * kMtu, 13);
  auto first = d.spec(wire::op::kRcWriteFirst, 500);
  first.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, 3 * kMtu};
  first.payload = std::span(data).first(kMtu);
  first.ack_req = false;
  EXPECT_TRUE(d.receive(first).empty());
  auto last = d.spec(wire::op::kRcWriteLast, 501);
  last.payload = std::span(data).subspan(kMtu, 2 * kMtu);
  const auto out = d.receive(last);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x61);  // NAK, invalid request
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(kMtu, 2 * kMtu), 0)) << "stored past the first packet";
}

// A middle packet when the RETH left less than an MTU, and a last packet shorter
// than what is left: each an Invalid Request NAK (9.7.5.1.4), nothing stored
// past the message, the QP in ERR.
TEST(EngineLongMessage, WriteMiddlePastItsRethIsNakedAndStoresNothing) {
  for (const bool short_last : {false, true}) {
    SCOPED_TRACE(short_last ? "last packet shorter than the rest" : "middle packet past the RETH");
    Dut d;
    const std::vector<uint8_t> data = pattern(2 * kMtu, 5);
    auto first = d.spec(wire::op::kRcWriteFirst, 500);
    // 1.5 MTUs announced; or 3 MTUs with a last packet of one after the first.
    first.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, short_last ? 3 * kMtu : kMtu + kMtu / 2};
    first.payload = std::span(data).first(kMtu);
    first.ack_req = false;
    EXPECT_TRUE(d.receive(first).empty());
    auto next = d.spec(short_last ? wire::op::kRcWriteLast : wire::op::kRcWriteMiddle, 501);
    next.payload = std::span(data).subspan(kMtu);
    auto out = d.receive(next);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(syndrome(out[0]), 0x61);  // NAK, invalid request
    EXPECT_EQ(out[0].psn.value(), 501u);
    EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(kMtu, 2 * kMtu), 0)) << "stored past the first packet";
    EXPECT_EQ(d.net[1].counters().rx_bad_length, 1u);
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// A WRITE's middle packet while a SEND is in progress (and a SEND's while a WRITE
// is): an Invalid Request NAK (9.7.5.1.3), nothing stored.
TEST(EngineLongMessage, MiddlePacketOfTheOtherKindIsAnInvalidRequest) {
  for (const bool write_first : {false, true}) {
    SCOPED_TRACE(write_first ? "SEND middle inside a WRITE" : "WRITE middle inside a SEND");
    Dut d;
    const std::vector<uint8_t> data = pattern(kMtu, 9);
    const Sge sge{d.s.iova + 65536, 4 * kMtu, d.s.keys.lkey};
    RecvWr rwr;
    rwr.wr_id = 7;
    rwr.sg_list = std::span(&sge, 1);
    ASSERT_EQ(d.net[1].post_recv(d.s.qpn, rwr), 0);
    auto first = d.spec(write_first ? wire::op::kRcWriteFirst : wire::op::kRcSendFirst, 500);
    if (write_first) first.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, 3 * kMtu};
    first.payload = data;
    first.ack_req = false;
    EXPECT_TRUE(d.receive(first).empty());
    auto m = d.spec(write_first ? wire::op::kRcSendMiddle : wire::op::kRcWriteMiddle, 501);
    m.payload = data;
    auto out = d.receive(m);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(syndrome(out[0]), 0x61);
    EXPECT_EQ(d.net[1].counters().rx_bad_opcode_sequence, 1u);
    EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(kMtu, kMtu), 0));
    EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(65536 + kMtu, kMtu), 0));
  }
}

std::vector<ibv_wc> poll(Dut& d, CqHandle cq) {
  std::vector<ibv_wc> wc(16);
  wc.resize(static_cast<size_t>(std::max(d.net[1].poll_cq(cq, wc), 0)));
  return wc;
}

// A SEND of 2.5 MTUs into one receive, with a corrupted middle packet and a gap:
// the receive completes once, with every byte, after the intact packets in order.
TEST(EngineLongMessage, SendMiddlePacketsFillTheReceiveOnlyInOrderAndIntact) {
  Dut d;
  const std::vector<uint8_t> data = pattern(2 * kMtu + 512, 11);
  const std::span<const uint8_t> all(data);
  const uint64_t at = 8192;
  start_send(d, at, 4 * kMtu, 42, all.first(kMtu));
  auto m = d.spec(wire::op::kRcSendMiddle, 501);
  m.payload = all.subspan(kMtu, kMtu);
  m.ack_req = false;
  EXPECT_TRUE(receive_corrupt(d, m, 200).empty());
  EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);
  auto last = d.spec(wire::op::kRcSendLast, 502);
  last.payload = all.subspan(2 * kMtu);
  auto out = d.receive(last);  // the gap left by the dropped middle packet
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x60);
  EXPECT_EQ(out[0].psn.value(), 501u);
  EXPECT_TRUE(poll(d, d.s.rcq).empty());
  EXPECT_TRUE(d.receive(m).empty());
  out = d.receive(last);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], 502));
  const auto wc = poll(d, d.s.rcq);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].wr_id, 42u);
  EXPECT_EQ(wc[0].byte_len, data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + at));
}

// Three SENDs of three packets each into three receives: one SGE in the DUT's
// region, three SGEs in another region, one SGE in the first region again. Each
// message lands in its own receive (the receive's SGEs are checked whole once per
// receive, and every receive taken is checked again). The second message's first
// packet is CE-marked, so its ICRC is checked before anything and its receive is
// taken by the resource step, not by the copy.
TEST(EngineLongMessage, SendsLandInTheirOwnReceivesInOtherRegions) {
  Dut d;
  const uint32_t access = IBV_ACCESS_LOCAL_WRITE;
  std::vector<uint8_t> other(8 * kMtu, 0);
  const uint64_t io = 0x40000000 + (reinterpret_cast<uint64_t>(other.data()) & 0xfff);
  const auto ko = d.net[1].reg_mr(d.s.pd, other.data(), other.size(), io, access);
  ASSERT_TRUE(ko.ok());
  const Sge one{d.s.iova + 8192, 4 * kMtu, d.s.keys.lkey};
  const Sge three[3] = {{io + 100, 1000, ko.value().lkey}, {io + 2000, 1500, ko.value().lkey},
                        {io + 5000, 2000, ko.value().lkey}};
  const Sge again{d.s.iova + 40000, 4 * kMtu, d.s.keys.lkey};
  RecvWr r1, r2, r3;
  r1.sg_list = std::span(&one, 1);
  r2.sg_list = std::span(three, 3);
  r3.sg_list = std::span(&again, 1);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, r1), 0);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, r2), 0);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, r3), 0);
  const std::vector<uint8_t> a = pattern(2 * kMtu + 300, 31), b = pattern(2 * kMtu + 400, 37),
                             c = pattern(2 * kMtu + 500, 41);
  uint32_t psn = 500;
  for (const auto* m : {&a, &b, &c}) {
    const std::span<const uint8_t> all(*m);
    auto f = d.spec(wire::op::kRcSendFirst, psn++);
    f.payload = all.first(kMtu);
    f.ack_req = false;
    if (m == &b) f.traffic_class = 0x03;  // CE
    d.receive(f);  // (a CNP, if DCQCN were on)
    auto mid = d.spec(wire::op::kRcSendMiddle, psn++);
    mid.payload = all.subspan(kMtu, kMtu);
    mid.ack_req = false;
    EXPECT_TRUE(d.receive(mid).empty());
    auto last = d.spec(wire::op::kRcSendLast, psn++);
    last.payload = all.subspan(2 * kMtu);
    const auto out = d.receive(last);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_ack(out[0], psn - 1));
  }
  const auto wc = poll(d, d.s.rcq);
  ASSERT_EQ(wc.size(), 3u);
  for (const ibv_wc& w : wc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].byte_len, b.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), d.s.buf.begin() + 8192));
  EXPECT_TRUE(std::equal(c.begin(), c.end(), d.s.buf.begin() + 40000));
  // b across the three SGEs of the other region, nothing between them.
  std::vector<uint8_t> got;
  for (const Sge& s : three) {
    const auto* p = other.data() + (s.addr - io);
    got.insert(got.end(), p, p + s.length);
  }
  EXPECT_TRUE(std::equal(b.begin(), b.end(), got.begin()));
  EXPECT_TRUE(all_equal(std::span(other).first(100), 0));
  EXPECT_TRUE(all_equal(std::span(other).subspan(1100, 900), 0));
  EXPECT_TRUE(all_equal(std::span(other).subspan(3500, 1500), 0));
}

// A SEND's middle packet past the end of its receive: the receive completes with
// IBV_WC_LOC_LEN_ERR and the packet is an Invalid Request NAK; nothing is stored
// past the receive's buffer.
TEST(EngineLongMessage, SendMiddlePastTheReceiveIsALengthError) {
  Dut d;
  const std::vector<uint8_t> data = pattern(kMtu, 13);
  const uint64_t at = 8192;
  start_send(d, at, kMtu + kMtu / 2, 9, data);
  auto m = d.spec(wire::op::kRcSendMiddle, 501);
  m.payload = data;
  auto out = d.receive(m);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x61);
  const auto wc = poll(d, d.s.rcq);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(at + kMtu, kMtu), 0));
}

// A SEND's middle packet of half an MTU: an Invalid Request NAK (9.7.5.1.4); and
// the intact middle packet at the same PSN right behind it, before that NAK left,
// is not taken (the responder takes nothing once a fatal NAK is queued). In the
// second case the QP was moved to ERR after the first packet: the middle packet
// is not taken either.
TEST(EngineLongMessage, SendMiddleShortOrBehindAFatalNakOrInErrIsNotTaken) {
  for (const bool err : {false, true}) {
    SCOPED_TRACE(err ? "QP moved to ERR" : "short middle packet, then the intact one");
    Dut d;
    const std::vector<uint8_t> data = pattern(3 * kMtu, 21);
    const uint64_t at = 8192;
    start_send(d, at, 3 * kMtu, 9, std::span<const uint8_t>(data).first(kMtu));
    const auto out = interrupt_then_continue(d, wire::op::kRcSendMiddle, data, err);
    if (!err) {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(syndrome(out[0]), 0x61);  // NAK, invalid request
      EXPECT_EQ(out[0].psn.value(), 501u);
    }
    EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(at + kMtu + kMtu / 2, kMtu + kMtu / 2), 0))
        << "stored past the short packet";
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// The DUT's WRITE of 40 MTUs and a bit, from one SGE and from three: its packets
// as the requester builds them past the first (opcode, PSN, AckReq every 16th packet
// and on the last, the RETH only on the first, each packet's bytes).
TEST(EngineLongMessage, WritePacketsCarryTheirOpcodePsnAckReqAndBytes) {
  for (const int nsge : {1, 3}) {
    SCOPED_TRACE(nsge == 1 ? "one SGE" : "three SGEs");
    Dut d({}, bursts());
    const uint32_t len = 40 * kMtu + 100;
    const std::vector<uint8_t> data = pattern(len, 29);
    std::copy(data.begin(), data.end(), d.s.buf.begin() + 4096);
    std::vector<Sge> sges;
    if (nsge == 1) {
      sges.push_back({d.s.iova + 4096, len, d.s.keys.lkey});
    } else {
      sges.push_back({d.s.iova + 4096, 3000, d.s.keys.lkey});
      sges.push_back({d.s.iova + 4096 + 3000, 20000, d.s.keys.lkey});
      sges.push_back({d.s.iova + 4096 + 23000, len - 23000, d.s.keys.lkey});
    }
    SendWr wr;
    wr.wr_id = 5;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = sges;
    wr.remote_addr = 0x7000000;
    wr.rkey = 0x5555;
    ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, wr), 0);
    const Capture c = transmit_until(d, 41, 1000);
    ASSERT_EQ(c.pkts.size(), 41u);
    const uint32_t psn0 = c.pkts[0].psn.value();
    for (uint32_t i = 0; i < 41; ++i) {
      SCOPED_TRACE(i);
      const wire::RocePacket& p = c.pkts[i];
      EXPECT_EQ(p.opcode, i == 0    ? wire::op::kRcWriteFirst
                          : i == 40 ? wire::op::kRcWriteLast
                                    : wire::op::kRcWriteMiddle);
      EXPECT_EQ(p.psn.value(), (psn0 + i) & 0xffffff);
      EXPECT_EQ(p.ack_req, i == 15 || i == 31 || i == 40);
      EXPECT_EQ(p.reth.has_value(), i == 0);
      const uint32_t n = i == 40 ? 100 : kMtu;
      ASSERT_EQ(p.payload_len, n);
      EXPECT_TRUE(std::equal(data.begin() + i * kMtu, data.begin() + i * kMtu + n,
                             c.frames[i].begin() + static_cast<std::ptrdiff_t>(p.payload_offset)));
      // The grant's frame length (what the scheduler charged and the buffer asked
      // for) is the frame's: a middle packet's next is derived from it.
      EXPECT_EQ(c.hints[i], c.frames[i].size());
    }
    EXPECT_EQ(c.pkts[0].reth->dma_len, len);
  }
}

// The DUT's SENDs of 40 MTUs and a bit with immediate data and with invalidate,
// from three SGEs: FIRST, 39 MIDDLEs and the LAST of its kind (the immediate or
// the key on it alone), PSNs, AckReq, each packet's bytes and its frame length as
// the grant charged it. (Past its first packet the requester derives each packet
// from the one before: next_request.)
TEST(EngineLongMessage, SendPacketsCarryTheirOpcodePsnAndLastHeader) {
  for (const ibv_wr_opcode op : {IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV}) {
    SCOPED_TRACE(op == IBV_WR_SEND_WITH_IMM ? "with immediate" : "with invalidate");
    Dut d({}, bursts());
    const uint32_t len = 40 * kMtu + 100;
    const std::vector<uint8_t> data = pattern(len, 41);
    std::copy(data.begin(), data.end(), d.s.buf.begin() + 8192);
    const std::vector<Sge> sges{{d.s.iova + 8192, 5000, d.s.keys.lkey},
                                {d.s.iova + 8192 + 5000, 30000, d.s.keys.lkey},
                                {d.s.iova + 8192 + 35000, len - 35000, d.s.keys.lkey}};
    SendWr wr;
    wr.wr_id = 6;
    wr.opcode = op;
    wr.sg_list = sges;
    wr.imm_data = 0x11223344;
    wr.invalidate_rkey = 0x4242;
    ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, wr), 0);
    const Capture c = transmit_until(d, 41, 1000);
    ASSERT_EQ(c.pkts.size(), 41u);
    const uint32_t psn0 = c.pkts[0].psn.value();
    const uint8_t last_op = op == IBV_WR_SEND_WITH_IMM ? wire::op::kRcSendLastImm : wire::op::kRcSendLastInv;
    for (uint32_t i = 0; i < 41; ++i) {
      SCOPED_TRACE(i);
      const wire::RocePacket& p = c.pkts[i];
      EXPECT_EQ(p.opcode, i == 0 ? wire::op::kRcSendFirst : i == 40 ? last_op : wire::op::kRcSendMiddle);
      EXPECT_EQ(p.psn.value(), (psn0 + i) & 0xffffff);
      EXPECT_EQ(p.ack_req, i == 15 || i == 31 || i == 40);
      EXPECT_EQ(p.imm.has_value(), i == 40 && op == IBV_WR_SEND_WITH_IMM);
      EXPECT_EQ(p.ieth.has_value(), i == 40 && op == IBV_WR_SEND_WITH_INV);
      const uint32_t n = i == 40 ? 100 : kMtu;
      ASSERT_EQ(p.payload_len, n);
      EXPECT_TRUE(std::equal(data.begin() + i * kMtu, data.begin() + i * kMtu + n,
                             c.frames[i].begin() + static_cast<std::ptrdiff_t>(p.payload_offset)));
      EXPECT_EQ(c.hints[i], c.frames[i].size());
    }
    if (op == IBV_WR_SEND_WITH_IMM) {
      EXPECT_EQ(htonl(*c.pkts[40].imm), 0x11223344u);  // the WR's bytes as they are (network order)
    } else {
      EXPECT_EQ(*c.pkts[40].ieth, 0x4242u);
    }
  }
}

// A WRITE of 10 packets sent in one burst, then a sequence-error NAK for its third:
// the requester goes back and sends packets 2..9 again in one burst (each after the
// first derived from the one before), each counted as a retransmission.
TEST(EngineLongMessage, GoBackNInOneBurstCountsEveryPacketSentAgain) {
  Dut d({}, bursts());
  const std::vector<uint8_t> data = pattern(10 * kMtu, 3);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  ASSERT_EQ(post_one(d, IBV_WR_RDMA_WRITE, 0, 10 * kMtu, 0x7000000, 0x5555, 1), 0);
  const Capture c = transmit_until(d, 10, 100);
  ASSERT_EQ(c.pkts.size(), 10u);
  EXPECT_EQ(d.net[1].counters().retransmits, 0u);
  const uint32_t psn0 = c.pkts[0].psn.value();
  auto nak = d.spec(wire::op::kRcAck, psn0 + 2);
  nak.aeth = wire::AethFields{0x60, 0};  // NAK, PSN sequence error: expected psn0 + 2
  const auto again = d.receive(nak);
  ASSERT_GE(again.size(), 8u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(again[i].psn.value(), psn0 + 2 + i);
  EXPECT_EQ(d.net[1].counters().retransmits, 8u);
}

// A sink that keeps only the furthest PSN (from the first frame's) and whether a
// frame went back (a retransmission).
class PsnReach final : public TxSink {
 public:
  std::span<uint8_t> tx_buffer(size_t len) override {
    buf_.resize(len);
    return buf_;
  }
  void tx_commit(Picos, size_t len) override {
    auto r = wire::parse_frame(std::span(buf_).first(len));
    ASSERT_TRUE(r.ok());
    if (frames++ == 0) first = r.pkt.psn;
    const int32_t k = psn_diff(r.pkt.psn, first);
    if (k < furthest) went_back = true;
    furthest = std::max(furthest, k);
  }
  uint64_t frames = 0;
  wire::Psn first;
  int32_t furthest = -1;
  bool went_back = false;

 private:
  std::vector<uint8_t> buf_;
};

// No ACK ever comes: the requester sends 2^16 PSNs (its window of unacknowledged
// PSNs) of 66 WRITEs of 1000 packets each and stops there, inside a WR and inside
// a dequeue (bursts of 50 frames, so the window's end falls inside one: there the
// next packet of a WR is derived from the one taken, next_request, which checks the
// window too).
TEST(EngineLongMessage, RequesterStopsAtItsWindowOfUnacknowledgedPsns) {
  RcOptions o;
  o.timeout = 0;  // no retransmission timer: nothing but the window stops it
  EngineConfig cfg;
  cfg.sched_lookahead = 20'000'000;  // 20 us: a transmit grants its 50 frames at once
  Dut d(o, cfg);
  const Sge sge{d.s.iova, 1000 * kMtu, d.s.keys.lkey};
  for (uint64_t i = 0; i < 66; ++i) {
    ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, one_sge_wr(sge, IBV_WR_RDMA_WRITE, 0x7000000, 0x5555, i)), 0);
  }
  PsnReach c;
  // Steps of 20 us, each transmit's dequeue granting 50 frames at once.
  for (int i = 0; i < 20000 && !c.went_back && c.frames < 70000; ++i) {
    d.net[1].advance(d.now);
    d.net[1].transmit(d.now, c, 50);
    d.now += 20'000'000;
  }
  EXPECT_FALSE(c.went_back);
  EXPECT_EQ(c.furthest, (1 << 16) - 1);
}

// The DUT answers a READ of two MTUs from one region; the same request again (a
// duplicate, same PSN) names another region: the responses come from that one. (A
// READ's R_Key is checked once for the whole READ and the MR kept for its later
// packets: the duplicate's new range and key must not use what was kept.)
TEST(EngineLongMessage, DuplicateReadOfAnotherRegionIsAnsweredFromThatRegion) {
  Dut d;
  const uint32_t access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  std::vector<uint8_t> a(2 * kMtu, 0x11), b(2 * kMtu, 0x22);
  const uint64_t ia = 0x20000000 + (reinterpret_cast<uint64_t>(a.data()) & 0xfff);
  const uint64_t ib = 0x30000000 + (reinterpret_cast<uint64_t>(b.data()) & 0xfff);
  const auto ka = d.net[1].reg_mr(d.s.pd, a.data(), a.size(), ia, access);
  const auto kb = d.net[1].reg_mr(d.s.pd, b.data(), b.size(), ib, access);
  ASSERT_TRUE(ka.ok() && kb.ok());
  for (const bool second : {false, true}) {
    SCOPED_TRACE(second ? "the duplicate, region b" : "region a");
    auto f = d.spec(wire::op::kRcReadRequest, 500);
    f.reth = second ? wire::RethFields{ib, kb.value().rkey, 2 * kMtu} : wire::RethFields{ia, ka.value().rkey, 2 * kMtu};
    d.now += 1'000'000;
    std::vector<uint8_t> frame(wire::frame_size(f));
    ASSERT_TRUE(wire::build_frame(f, frame).ok());
    d.net[1].receive(d.now, frame);
    const Capture c = transmit_until(d, 2, 100);
    ASSERT_EQ(c.pkts.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ(c.pkts[i].payload_len, kMtu);
      const auto* p = c.frames[i].data() + c.pkts[i].payload_offset;
      EXPECT_TRUE(all_equal(std::span(p, kMtu), second ? 0x22 : 0x11)) << "response " << i;
    }
  }
  EXPECT_EQ(d.net[1].counters().rx_duplicates, 1u);
}

// The DUT's READ of n MTUs from the test's memory: posted, and the request it sent.
struct Read {
  wire::RocePacket req;
  uint64_t local = 0;  // offset in the DUT's buffer
};

Read post_read(Dut& d, uint32_t n, uint64_t local, uint64_t wr_id = 1) {
  EXPECT_EQ(post_one(d, IBV_WR_RDMA_READ, local, n * kMtu, 0x5000000, 0x1234, wr_id), 0);
  const auto out = d.drain();
  EXPECT_EQ(out.size(), 1u);
  Read r;
  if (!out.empty()) r.req = out.back();
  r.local = local;
  return r;
}

wire::FrameSpec response(Dut& d, uint8_t opcode, uint32_t psn, std::span<const uint8_t> payload) {
  auto f = d.spec(opcode, psn);
  f.ack_req = false;
  f.aeth = wire::AethFields{0x1f, 1};
  f.payload = payload;
  return f;
}

// A READ of three MTUs answered with a corrupted middle response, a duplicate of
// the first and then the intact ones: only those land, and the READ completes once
// with every byte.
TEST(EngineLongMessage, ReadMiddleResponsesLandOnlyInOrderAndIntact) {
  Dut d;
  const std::vector<uint8_t> data = pattern(3 * kMtu, 17);
  const std::span<const uint8_t> all(data);
  const Read r = post_read(d, 3, 4096);
  ASSERT_EQ(r.req.opcode, wire::op::kRcReadRequest);
  const uint32_t p = r.req.psn.value();
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseFirst, p, all.first(kMtu))).empty());
  EXPECT_TRUE(receive_corrupt(d, response(d, wire::op::kRcReadResponseMiddle, p + 1, all.subspan(kMtu, kMtu)), 50)
                  .empty());
  EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);
  const std::vector<uint8_t> other = pattern(kMtu, 200);
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseFirst, p, other)).empty());  // a duplicate
  // (The corrupted response's bytes may have reached the buffer, whose contents are
  // undefined until the READ completes; the duplicate's must not have.)
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + kMtu, d.s.buf.begin() + r.local));
  EXPECT_TRUE(poll(d, d.s.scq).empty());
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseMiddle, p + 1, all.subspan(kMtu, kMtu))).empty());
  EXPECT_TRUE(poll(d, d.s.scq).empty());
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseLast, p + 2, all.subspan(2 * kMtu))).empty());
  const auto wc = poll(d, d.s.scq);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].byte_len, data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + r.local));
  EXPECT_EQ(d.net[1].counters().retransmits, 0u);
}

// A READ of three MTUs into three SGEs (1000 bytes, 2000 bytes, the rest, apart
// from each other): each response's bytes land across the SGEs in order, nothing
// between them. (A READ of one SGE copies each response as one piece.)
TEST(EngineLongMessage, ReadIntoThreeSgesScattersEachResponse) {
  Dut d;
  const std::vector<uint8_t> data = pattern(3 * kMtu, 23);
  const std::span<const uint8_t> all(data);
  const uint64_t at[3] = {4096, 8192, 16384};
  const uint32_t len[3] = {1000, 2000, 3 * kMtu - 3000};
  std::vector<Sge> sges;
  for (int i = 0; i < 3; ++i) sges.push_back({d.s.iova + at[i], len[i], d.s.keys.lkey});
  SendWr wr;
  wr.wr_id = 8;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.sg_list = sges;
  wr.remote_addr = 0x5000000;
  wr.rkey = 0x1234;
  ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, wr), 0);
  const auto req = d.drain();
  ASSERT_EQ(req.size(), 1u);
  const uint32_t p = req[0].psn.value();
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseFirst, p, all.first(kMtu))).empty());
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseMiddle, p + 1, all.subspan(kMtu, kMtu))).empty());
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseLast, p + 2, all.subspan(2 * kMtu))).empty());
  const auto wc = poll(d, d.s.scq);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  uint64_t off = 0;
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(std::equal(data.begin() + off, data.begin() + off + len[i], d.s.buf.begin() + at[i]));
    EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(at[i] + len[i], 64), 0)) << "stored past the SGE";
    off += len[i];
  }
}

// A middle response lost: the next one is out of order, not copied, and the READ
// is asked again from the first missing byte (9.7.5.2.2), once.
TEST(EngineLongMessage, ReadResponseAfterAGapReissuesTheReadFromTheMissingByte) {
  Dut d;
  const std::vector<uint8_t> data = pattern(3 * kMtu, 19);
  const std::span<const uint8_t> all(data);
  const Read r = post_read(d, 3, 4096);
  const uint32_t p = r.req.psn.value();
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseFirst, p, all.first(kMtu))).empty());
  const auto out = d.receive(response(d, wire::op::kRcReadResponseLast, p + 2, all.subspan(2 * kMtu)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode, wire::op::kRcReadRequest);
  EXPECT_EQ(out[0].psn.value(), p + 1);
  ASSERT_TRUE(out[0].reth.has_value());
  EXPECT_EQ(out[0].reth->va, r.req.reth->va + kMtu);
  EXPECT_EQ(out[0].reth->dma_len, 2 * kMtu);
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(r.local + 2 * kMtu, kMtu), 0)) << "stored after a gap";
  EXPECT_TRUE(poll(d, d.s.scq).empty());
}

// A WRITE not yet acknowledged, then a READ: the READ's first response
// acknowledges the WRITE (9.7.5.2.2), which completes at once, before the READ's
// middle and last responses; each of those lands where it belongs.
TEST(EngineLongMessage, ReadResponseAcknowledgesTheWriteBeforeIt) {
  Dut d;
  const std::vector<uint8_t> data = pattern(3 * kMtu, 23);
  const std::span<const uint8_t> all(data);
  ASSERT_EQ(post_one(d, IBV_WR_RDMA_WRITE, 0, 64, 0x6000000, 0x4321, 100), 0);
  const auto sent = d.drain();
  ASSERT_EQ(sent.size(), 1u);
  const Read r = post_read(d, 3, 4096, 101);
  const uint32_t p = r.req.psn.value();
  EXPECT_EQ(p, sent[0].psn.value() + 1);
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseFirst, p, all.first(kMtu))).empty());
  auto wc = poll(d, d.s.scq);
  ASSERT_EQ(wc.size(), 1u) << "the WRITE waits for the READ's last response";
  EXPECT_EQ(wc[0].wr_id, 100u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseMiddle, p + 1, all.subspan(kMtu, kMtu))).empty());
  EXPECT_TRUE(d.receive(response(d, wire::op::kRcReadResponseLast, p + 2, all.subspan(2 * kMtu))).empty());
  wc = poll(d, d.s.scq);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 101u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + r.local));
}

// A receive whose one SGE reaches past the end of its region (8 MTUs named, 4
// registered): its whole-SGE check fails, so each middle packet's piece is checked
// on its own (the walk), and a SEND of 3 MTUs, all inside the region, lands and
// completes. Then a second SEND of 3 MTUs into a receive of another region: its
// bytes go there (the first receive's check is not the second's).
TEST(EngineLongMessage, SendMiddleIntoAReceiveLongerThanItsRegionUsesThePiecesChecks) {
  Dut d;
  std::vector<uint8_t> region(4 * kMtu, 0);
  const uint64_t iova = 0x50000000 + (reinterpret_cast<uint64_t>(region.data()) & 0xfff);
  const auto k = d.net[1].reg_mr(d.s.pd, region.data(), region.size(), iova, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(k.ok());
  const Sge sge{iova, 8 * kMtu, k.value().lkey};
  RecvWr rwr;
  rwr.wr_id = 1;
  rwr.sg_list = std::span(&sge, 1);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, rwr), 0);
  const Sge sge2{d.s.iova + 65536, 4 * kMtu, d.s.keys.lkey};
  rwr.wr_id = 2;
  rwr.sg_list = std::span(&sge2, 1);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, rwr), 0);
  const std::vector<uint8_t> data = pattern(3 * kMtu, 37);
  const std::span<const uint8_t> all(data);
  for (uint32_t m = 0; m < 2; ++m) {
    SCOPED_TRACE(m);
    const uint32_t psn = 500 + 3 * m;
    auto first = d.spec(wire::op::kRcSendFirst, psn);
    first.ack_req = false;
    first.payload = all.first(kMtu);
    EXPECT_TRUE(d.receive(first).empty());
    auto mid = d.spec(wire::op::kRcSendMiddle, psn + 1);
    mid.ack_req = false;
    mid.payload = all.subspan(kMtu, kMtu);
    EXPECT_TRUE(d.receive(mid).empty());
    auto last = d.spec(wire::op::kRcSendLast, psn + 2);
    last.payload = all.subspan(2 * kMtu);
    const auto out = d.receive(last);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_ack(out[0], psn + 2));
    const auto wc = poll(d, d.s.rcq);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, m + 1);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[0].byte_len, 3 * kMtu);
  }
  EXPECT_TRUE(std::equal(data.begin(), data.end(), region.begin()));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + 65536));
  EXPECT_TRUE(all_equal(std::span(region).subspan(3 * kMtu), 0));
}

}  // namespace
}  // namespace isoroce::transport::testing
