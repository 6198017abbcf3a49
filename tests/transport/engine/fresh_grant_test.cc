// A fresh one-packet message's grant on the transmit side (the thirteenth pass): a
// grant of a WRITE's or SEND's ONLY packet, or of a READ request, of a WR not yet
// started, which the QP's previous grant of the same dequeue peeked as its next,
// takes it in one pass (take_fresh_request) and peeks the next WR; a retransmitted
// one (its WR started) goes the long way (grant_other, take_request).
// Each test sends in bursts (a 10 us lookahead, several packets of the QP per
// dequeue) and checks every packet's opcode, PSN, AckReq, SE bit, extension headers,
// bytes and the grant's frame length, at the shortcut's boundaries: one-packet
// messages of every kind mixed with a long one and READs (whose request takes every
// response PSN), the initiator depth and a fence inside a burst, a go-back-N pass over
// one-packet messages followed by fresh ones in the same burst.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMtu = 1024;
constexpr uint64_t kRemote = 0x7000000;

// An engine whose dequeue grants a burst (10 us of departures per transmit).
EngineConfig bursts(uint32_t ack_req_every = 16) {
  EngineConfig c;
  c.sched_lookahead = 10'000'000;
  c.ack_req_every = ack_req_every;
  return c;
}

struct Msg {
  ibv_wr_opcode op;
  uint64_t local;
  uint32_t len;
  uint32_t flags = 0;
};

int post(Dut& d, const Msg& m, uint64_t wr_id) {
  const Sge sge{d.s.iova + m.local, m.len, d.s.keys.lkey};
  SendWr wr = one_sge_wr(sge, m.op, kRemote + m.local, 0x5555, wr_id);
  wr.send_flags = m.flags;
  wr.imm_data = 0x01020304;
  wr.invalidate_rkey = 0x4242;
  return d.net[1].post_send(d.now, d.s.qpn, wr);
}

// One transmit call (one dequeue) of at most `max_frames` frames.
void burst(Dut& d, Capture& c, size_t max_frames = 64) {
  d.net[1].advance(d.now);
  d.net[1].transmit(d.now, c, max_frames);
}

// The packet's payload is bytes [off, off + n) of the DUT's buffer.
bool carries(const Dut& d, const Capture& c, size_t i, uint64_t off, uint32_t n) {
  const wire::RocePacket& p = c.pkts[i];
  return p.payload_len == n && std::equal(d.s.buf.begin() + static_cast<std::ptrdiff_t>(off),
                                          d.s.buf.begin() + static_cast<std::ptrdiff_t>(off + n),
                                          c.frames[i].begin() + static_cast<std::ptrdiff_t>(p.payload_offset));
}

bool is_write(ibv_wr_opcode op) { return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM; }
bool has_imm(ibv_wr_opcode op) { return op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND_WITH_IMM; }

// Checks the packets of `msgs` sent in order from c.pkts[from] on with consecutive
// PSNs from psn0 (a READ request takes one PSN per response packet); answers the
// PSN after the last.
uint32_t expect_messages(const Dut& d, const Capture& c, size_t from, uint32_t psn0, const std::vector<Msg>& msgs,
                         uint32_t every) {
  size_t k = from;
  uint32_t psn = psn0;
  for (size_t m = 0; m < msgs.size(); ++m) {
    SCOPED_TRACE(m);
    const Msg& g = msgs[m];
    const uint32_t n = g.len == 0 ? 1 : (g.len + kMtu - 1) / kMtu;
    if (g.op == IBV_WR_RDMA_READ) {
      EXPECT_LT(k, c.pkts.size());
      if (k >= c.pkts.size()) return psn;
      const wire::RocePacket& p = c.pkts[k];
      EXPECT_EQ(p.opcode, wire::op::kRcReadRequest);
      EXPECT_EQ(p.psn.value(), psn & 0xffffff);
      EXPECT_FALSE(p.solicited);
      EXPECT_TRUE(p.reth.has_value());
      if (p.reth) {
        EXPECT_EQ(p.reth->va, kRemote + g.local);
        EXPECT_EQ(p.reth->rkey, 0x5555u);
        EXPECT_EQ(p.reth->dma_len, g.len);
      }
      EXPECT_EQ(p.payload_len, 0u);
      EXPECT_EQ(c.hints[k], c.frames[k].size());
      ++k;
      psn += n;
      continue;
    }
    for (uint32_t i = 0; i < n; ++i, ++k, ++psn) {
      SCOPED_TRACE(i);
      EXPECT_LT(k, c.pkts.size());
      if (k >= c.pkts.size()) return psn;
      const wire::RocePacket& p = c.pkts[k];
      const bool first = i == 0, last = i + 1 == n, write = is_write(g.op);
      const bool imm = has_imm(g.op) && last, inv = g.op == IBV_WR_SEND_WITH_INV && last;
      uint8_t op = 0;
      if (first && last) {
        op = write  ? (imm ? wire::op::kRcWriteOnlyImm : wire::op::kRcWriteOnly)
             : inv  ? wire::op::kRcSendOnlyInv
             : imm  ? wire::op::kRcSendOnlyImm
                    : wire::op::kRcSendOnly;
      } else if (first) {
        op = write ? wire::op::kRcWriteFirst : wire::op::kRcSendFirst;
      } else if (!last) {
        op = write ? wire::op::kRcWriteMiddle : wire::op::kRcSendMiddle;
      } else {
        op = write  ? (imm ? wire::op::kRcWriteLastImm : wire::op::kRcWriteLast)
             : inv  ? wire::op::kRcSendLastInv
             : imm  ? wire::op::kRcSendLastImm
                    : wire::op::kRcSendLast;
      }
      EXPECT_EQ(p.opcode, op);
      EXPECT_EQ(p.psn.value(), psn & 0xffffff);
      EXPECT_EQ(p.ack_req, last || (i + 1) % every == 0);
      // The SE bit on the last packet of a solicited message (9.2.3 asks it of a SEND
      // and a WRITE with immediate; the engine sets it on a plain WRITE's too).
      EXPECT_EQ(p.solicited, last && (g.flags & IBV_SEND_SOLICITED) != 0);
      EXPECT_EQ(p.reth.has_value(), write && first);
      if (write && first && p.reth) {
        EXPECT_EQ(p.reth->va, kRemote + g.local);
        EXPECT_EQ(p.reth->dma_len, g.len);
      }
      EXPECT_EQ(p.imm.has_value(), imm);
      if (p.imm) {
        EXPECT_EQ(*p.imm, 0x04030201u);  // imm_data is in network order
      }
      EXPECT_EQ(p.ieth.has_value(), inv);
      if (p.ieth) {
        EXPECT_EQ(*p.ieth, 0x4242u);
      }
      EXPECT_TRUE(carries(d, c, k, g.local + i * kMtu, std::min(kMtu, g.len - std::min(g.len, i * kMtu))));
      EXPECT_EQ(c.hints[k], c.frames[k].size());
    }
  }
  EXPECT_EQ(k, c.pkts.size());
  return psn;
}

// One-packet messages of every kind (WRITE, WRITE with immediate, SEND, SEND with
// immediate, with invalidate, of 0, 7, 1000 and an MTU of bytes, solicited or not),
// a WRITE of 3 MTUs + 1 and READs of 1 and 3 MTUs (one request each, 1 and 3 PSNs)
// among them, all in one burst, with an ACK asked every 1 and 4 packets: each
// packet's own fields, and no retransmission counted.
TEST(EngineFreshGrant, EachPacketOfBackToBackOnePacketMessagesCarriesItsOwnFields) {
  const std::vector<Msg> msgs{
      {IBV_WR_RDMA_WRITE, 0, 1000},
      {IBV_WR_SEND, 4096, kMtu},
      {IBV_WR_RDMA_WRITE_WITH_IMM, 8192, 7, IBV_SEND_SOLICITED},
      {IBV_WR_SEND_WITH_IMM, 12288, 0},
      {IBV_WR_RDMA_READ, 16384, 3 * kMtu},
      {IBV_WR_SEND_WITH_INV, 24576, 100, IBV_SEND_SOLICITED},
      {IBV_WR_RDMA_WRITE, 28672, 0},
      {IBV_WR_RDMA_WRITE, 32768, 3 * kMtu + 1},
      {IBV_WR_SEND, 40960, 7, IBV_SEND_SOLICITED},
      {IBV_WR_RDMA_READ, 45056, kMtu},
      {IBV_WR_RDMA_WRITE, 49152, kMtu, IBV_SEND_SOLICITED},
      {IBV_WR_RDMA_READ, 53248, 1},
      {IBV_WR_SEND, 57344, 1000},
  };
  for (const uint32_t every : {1u, 4u}) {
    SCOPED_TRACE(every);
    Dut d({}, bursts(every));
    for (size_t i = 0; i < d.s.buf.size(); ++i) d.s.buf[i] = static_cast<uint8_t>(i * 7 + i / 4096);
    for (size_t m = 0; m < msgs.size(); ++m) ASSERT_EQ(post(d, msgs[m], m), 0);
    Capture c;
    burst(d, c);
    ASSERT_EQ(c.pkts.size(), 16u);
    expect_messages(d, c, 0, c.pkts[0].psn.value(), msgs, every);
    EXPECT_EQ(d.net[1].counters().retransmits, 0u);
    EXPECT_EQ(d.net[1].qp_counters(d.s.qpn)->retransmits, 0u);
  }
}

// The initiator depth (max_rd_atomic 2) and a fence inside one burst: of READ, READ,
// READ, WRITE, only the first two READ requests go (the third waits for a response,
// the WRITE behind it in order); after one response the third READ and the WRITE go.
// Then a READ and a fenced WRITE: the WRITE waits for the READ's response.
TEST(EngineFreshGrant, TheInitiatorDepthAndAFenceStopABurst) {
  RcOptions o;
  o.max_rd_atomic = 2;
  Dut d(o, bursts());
  for (size_t i = 0; i < d.s.buf.size(); ++i) d.s.buf[i] = static_cast<uint8_t>(i * 3 + 1);
  const std::vector<Msg> msgs{{IBV_WR_RDMA_READ, 0, 100},
                              {IBV_WR_RDMA_READ, 4096, 2 * kMtu},
                              {IBV_WR_RDMA_READ, 12288, 200},
                              {IBV_WR_RDMA_WRITE, 16384, 300}};
  for (size_t m = 0; m < msgs.size(); ++m) ASSERT_EQ(post(d, msgs[m], m), 0);
  Capture c;
  burst(d, c);
  ASSERT_EQ(c.pkts.size(), 2u);
  const uint32_t psn0 = c.pkts[0].psn.value();
  uint32_t psn = expect_messages(d, c, 0, psn0, {msgs[0], msgs[1]}, 16);
  EXPECT_EQ(psn, psn0 + 3);
  // The first READ's response: one READ outstanding, so the third goes, and the WRITE.
  // A READ's one response of n bytes at psn, delivered to x.
  auto answer_read = [](Dut& x, uint32_t at, size_t n) {
    auto resp = x.spec(wire::op::kRcReadResponseOnly, at);
    resp.ack_req = false;
    resp.aeth = wire::AethFields{0x1f, 1};
    const std::vector<uint8_t> bytes(n, 0x3c);
    resp.payload = bytes;
    x.deliver(resp);
  };
  answer_read(d, psn0, 100);
  Capture c2;
  burst(d, c2);
  ASSERT_EQ(c2.pkts.size(), 2u);
  psn = expect_messages(d, c2, 0, psn, {msgs[2], msgs[3]}, 16);
  // A READ and a fenced WRITE behind it (IBTA 10.8.3.3), on a QP with no READ
  // outstanding: the WRITE waits while the READ is outstanding, then goes.
  Dut f({}, bursts());
  const std::vector<Msg> more{{IBV_WR_RDMA_READ, 20480, 10}, {IBV_WR_RDMA_WRITE, 24576, 20, IBV_SEND_FENCE}};
  for (size_t m = 0; m < more.size(); ++m) ASSERT_EQ(post(f, more[m], 10 + m), 0);
  Capture c3;
  burst(f, c3);
  ASSERT_EQ(c3.pkts.size(), 1u);
  const uint32_t fpsn = c3.pkts[0].psn.value();
  psn = expect_messages(f, c3, 0, fpsn, {more[0]}, 16);
  answer_read(f, fpsn, 10);
  Capture c4;
  burst(f, c4);
  ASSERT_EQ(c4.pkts.size(), 1u);
  expect_messages(f, c4, 0, psn, {more[1]}, 16);
  EXPECT_EQ(d.net[1].counters().retransmits, 0u);
}

// Four one-packet WRITEs sent in one burst, then a sequence-error NAK for the second
// and two more WRITEs posted: one burst sends the second to the fourth again (their
// WRs started: the long way, counted as retransmissions, engine and QP) and the two
// new ones for the first time (fresh: not counted), with their own PSNs and bytes.
TEST(EngineFreshGrant, AGoBackNPassOverOnePacketMessagesThenFreshOnesInOneBurst) {
  Dut d({}, bursts());
  for (size_t i = 0; i < d.s.buf.size(); ++i) d.s.buf[i] = static_cast<uint8_t>(i * 5 + i / 999);
  std::vector<Msg> msgs;
  for (uint64_t m = 0; m < 6; ++m) msgs.push_back({m % 2 == 0 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND, m * 4096, 900});
  for (size_t m = 0; m < 4; ++m) ASSERT_EQ(post(d, msgs[m], m), 0);
  Capture c;
  burst(d, c);
  ASSERT_EQ(c.pkts.size(), 4u);
  const uint32_t psn0 = c.pkts[0].psn.value();
  expect_messages(d, c, 0, psn0, {msgs.begin(), msgs.begin() + 4}, 16);
  auto nak = d.spec(wire::op::kRcAck, psn0 + 1);
  nak.aeth = wire::AethFields{0x60, 0};  // NAK, PSN sequence error: expected psn0 + 1
  d.now += 1'000'000;
  d.deliver(nak);
  for (size_t m = 4; m < 6; ++m) ASSERT_EQ(post(d, msgs[m], m), 0);
  Capture again;
  burst(d, again);
  ASSERT_EQ(again.pkts.size(), 5u);
  expect_messages(d, again, 0, psn0 + 1, {msgs.begin() + 1, msgs.end()}, 16);
  EXPECT_EQ(d.net[1].counters().retransmits, 3u);
  EXPECT_EQ(d.net[1].qp_counters(d.s.qpn)->retransmits, 3u);
  // All six acknowledged: six completions in order, in success.
  d.deliver(d.ack(psn0 + 5, 0x1f, 2));
  std::vector<ibv_wc> wc(8);
  ASSERT_EQ(d.net[1].poll_cq(d.s.scq, wc), 6);
  for (size_t m = 0; m < 6; ++m) {
    EXPECT_EQ(wc[m].wr_id, m);
    EXPECT_EQ(wc[m].status, IBV_WC_SUCCESS);
  }
}

// A local operation behind one-packet WRITEs: WRITE, WRITE, LOCAL_INV of a bound
// window, WRITE in one burst. The second WRITE's grant (in one pass) peeks the
// LOCAL_INV, which takes no packet: the QP is kicked after the dequeue, which runs
// the invalidation and activates the last WRITE, sent in the next transmit without
// anything received meanwhile. All four complete in order once acknowledged.
TEST(EngineFreshGrant, ALocalOperationBehindAOnePacketMessageRunsAfterTheDequeue) {
  RcOptions o;
  o.access |= IBV_ACCESS_MW_BIND;
  Dut d(o, bursts());
  const uint32_t key = d.bind_type2_window(IBV_ACCESS_REMOTE_WRITE, 4096);
  ASSERT_NE(key, 0u);
  for (size_t i = 0; i < d.s.buf.size(); ++i) d.s.buf[i] = static_cast<uint8_t>(i * 9 + 2);
  const std::vector<Msg> writes{
      {IBV_WR_RDMA_WRITE, 0, 500}, {IBV_WR_RDMA_WRITE, 4096, 600}, {IBV_WR_RDMA_WRITE, 8192, 700}};
  ASSERT_EQ(post(d, writes[0], 10), 0);
  ASSERT_EQ(post(d, writes[1], 11), 0);
  SendWr inv;
  inv.wr_id = 12;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = key;
  ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, inv), 0);
  ASSERT_EQ(post(d, writes[2], 13), 0);
  Capture c;
  burst(d, c);
  ASSERT_EQ(c.pkts.size(), 2u);
  const uint32_t psn0 = c.pkts[0].psn.value();
  d.now = std::max(d.now, d.net[1].next_deadline());
  burst(d, c);
  ASSERT_EQ(c.pkts.size(), 3u);
  expect_messages(d, c, 0, psn0, writes, 16);
  d.deliver(d.ack(psn0 + 2, 0x1f, 2));
  std::vector<ibv_wc> wc(8);
  ASSERT_EQ(d.net[1].poll_cq(d.s.scq, wc), 4);
  for (size_t m = 0; m < 4; ++m) {
    EXPECT_EQ(wc[m].wr_id, 10 + m);
    EXPECT_EQ(wc[m].status, IBV_WC_SUCCESS);
  }
}

// READ requests of 100, 0, an MTU, 3 MTUs + 1, 1 and 50 bytes at the DUT, then a
// WRITE ONLY asking for an ACK, delivered before it transmits, answered in bursts:
// each response's opcode (ONLY for the one-packet READs, taken in one pass), PSN,
// AETH, bytes and frame length, then the WRITE's ACK after the last response.
TEST(EngineFreshGrant, EachResponseOfBackToBackOnePacketReadsCarriesItsOwnFields) {
  for (const size_t max_frames : {size_t{64}, size_t{3}}) {
    SCOPED_TRACE(max_frames);
    Dut d({}, bursts());
    for (size_t i = 0; i < d.s.buf.size(); ++i) d.s.buf[i] = static_cast<uint8_t>(i * 11 + i / 777);
    const std::vector<uint32_t> lens{100, 0, kMtu, 3 * kMtu + 1, 1, 50};
    const std::vector<uint64_t> offs{100, 5000, 9000, 20000, 40000, 50000};
    uint32_t psn = 500;
    for (size_t m = 0; m < lens.size(); ++m) {
      auto f = d.spec(wire::op::kRcReadRequest, psn);
      f.ack_req = false;
      f.reth = wire::RethFields{d.s.iova + offs[m], d.s.keys.rkey, lens[m]};
      d.deliver(f);
      psn += lens[m] == 0 ? 1 : (lens[m] + kMtu - 1) / kMtu;
    }
    const std::vector<uint8_t> data(300, 0x6b);
    d.deliver(d.write_only(psn, 60000, data));
    Capture c;
    // The first transmit call: one dequeue (a 10 us lookahead) grants every response,
    // each READ's after the one before (the next response peeked at each grant).
    burst(d, c, max_frames);
    ASSERT_EQ(c.pkts.size(), std::min<size_t>(max_frames, 9));
    for (int i = 0; i < 100 && c.pkts.size() < 10; ++i) {
      burst(d, c, max_frames);
      d.now = std::max(d.now, d.net[1].next_deadline());
    }
    ASSERT_EQ(c.pkts.size(), 10u);
    size_t k = 0;
    for (size_t m = 0; m < lens.size(); ++m) {
      const uint32_t n = lens[m] == 0 ? 1 : (lens[m] + kMtu - 1) / kMtu;
      for (uint32_t i = 0; i < n; ++i, ++k) {
        SCOPED_TRACE(k);
        const wire::RocePacket& p = c.pkts[k];
        EXPECT_EQ(p.opcode, n == 1       ? wire::op::kRcReadResponseOnly
                            : i == 0     ? wire::op::kRcReadResponseFirst
                            : i + 1 == n ? wire::op::kRcReadResponseLast
                                         : wire::op::kRcReadResponseMiddle);
        EXPECT_EQ(p.psn.value(), 500 + k);
        EXPECT_EQ(p.aeth.has_value(), i == 0 || i + 1 == n);
        EXPECT_TRUE(carries(d, c, k, offs[m] + i * kMtu, std::min(kMtu, lens[m] - std::min(lens[m], i * kMtu))));
        EXPECT_EQ(c.hints[k], c.frames[k].size());
      }
    }
    EXPECT_EQ(c.pkts[9].opcode, wire::op::kRcAck);
    EXPECT_EQ(c.pkts[9].psn.value(), psn);
    EXPECT_TRUE(std::all_of(d.s.buf.begin() + 60000, d.s.buf.begin() + 60300, [](uint8_t b) { return b == 0x6b; }));
  }
}

// READs of 100 and 200 bytes answered (ONLY responses, the second taken in one
// pass), then the second asked again (a duplicate, 9.7.5.1.1): its resource, done,
// is executed again and answered with the same bytes.
TEST(EngineFreshGrant, ADuplicateOfAOnePacketReadIsAnsweredAgain) {
  Dut d({}, bursts());
  for (size_t i = 0; i < d.s.buf.size(); ++i) d.s.buf[i] = static_cast<uint8_t>(i * 17 + 3);
  for (uint32_t m = 0; m < 2; ++m) {
    auto f = d.spec(wire::op::kRcReadRequest, 500 + m);
    f.ack_req = false;
    f.reth = wire::RethFields{d.s.iova + 1000 * m, d.s.keys.rkey, 100 * (m + 1)};
    d.deliver(f);
  }
  Capture c;
  burst(d, c);
  ASSERT_EQ(c.pkts.size(), 2u);
  auto dup = d.spec(wire::op::kRcReadRequest, 501);
  dup.ack_req = false;
  dup.reth = wire::RethFields{d.s.iova + 1000, d.s.keys.rkey, 200};
  d.deliver(dup);
  d.now = std::max(d.now, d.net[1].next_deadline());
  burst(d, c);
  ASSERT_EQ(c.pkts.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(c.pkts[k].opcode, wire::op::kRcReadResponseOnly);
    EXPECT_EQ(c.pkts[k].psn.value(), k == 0 ? 500u : 501u);
    EXPECT_TRUE(carries(d, c, k, k == 0 ? 0 : 1000, k == 0 ? 100 : 200));
  }
}

// The peer's READs of 100 and 200 bytes and a WRITE ONLY asking for an ACK arrive
// while the DUT has a WRITE of 20 MTUs of its own posted; transmits of 4 frames: the
// two responses and the WRITE's first two packets, then the ACK first (queued after
// the last response's grant, a control frame), then the rest of the WRITE.
TEST(EngineFreshGrant, TheAckWaitingBehindOnePacketResponsesGoesRightAfterThem) {
  Dut d({}, bursts());
  for (uint32_t m = 0; m < 2; ++m) {
    auto f = d.spec(wire::op::kRcReadRequest, 500 + m);
    f.ack_req = false;
    f.reth = wire::RethFields{d.s.iova + 1000 * m, d.s.keys.rkey, 100 * (m + 1)};
    d.deliver(f);
  }
  const std::vector<uint8_t> data(30, 0x11);
  d.deliver(d.write_only(502, 70000, data));
  ASSERT_EQ(post(d, {IBV_WR_RDMA_WRITE, 100000, 20 * kMtu}, 1), 0);
  Capture c;
  burst(d, c, 4);
  ASSERT_EQ(c.pkts.size(), 4u);
  EXPECT_EQ(c.pkts[0].opcode, wire::op::kRcReadResponseOnly);
  EXPECT_EQ(c.pkts[1].opcode, wire::op::kRcReadResponseOnly);
  EXPECT_EQ(c.pkts[2].opcode, wire::op::kRcWriteFirst);
  EXPECT_EQ(c.pkts[3].opcode, wire::op::kRcWriteMiddle);
  burst(d, c, 4);
  ASSERT_EQ(c.pkts.size(), 8u);
  EXPECT_EQ(c.pkts[4].opcode, wire::op::kRcAck);
  EXPECT_EQ(c.pkts[4].psn.value(), 502u);
  EXPECT_EQ(c.pkts[5].opcode, wire::op::kRcWriteMiddle);
}

}  // namespace
}  // namespace isoroce::transport::testing
