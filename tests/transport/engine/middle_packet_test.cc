// A WRITE's or SEND's middle packets on the transmit side (the eleventh pass): a
// grant of a middle packet takes it and moves the QP's next descriptor on in place
// (take_middle_request) while the next is again a middle one inside the window, and
// build_request builds it from the template without the extension headers' tests.
// Each test sends long messages in bursts (several packets per dequeue, so each
// packet after a QP's first of a dequeue is the one its grant before derived) and
// checks every packet's opcode, PSN, AckReq, SE bit and bytes, the grant's frame
// length, and the retransmission counts, at the shortcut's boundaries: a message of
// three packets (one middle), the ACK request of every nth packet, the SE bit of a
// solicited SEND, a retransmission pass that ends inside a burst.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMtu = 1024;

// An engine whose dequeue grants a burst (10 us of departures per transmit).
EngineConfig bursts(uint32_t ack_req_every = 16) {
  EngineConfig c;
  c.sched_lookahead = 10'000'000;
  c.ack_req_every = ack_req_every;
  return c;
}

// Steps the DUT until it has sent `n` packets (at most `max_frames` per transmit) or
// `steps` steps went by.
void transmit_into(Dut& d, Capture& c, size_t n, size_t max_frames, int steps = 1000) {
  for (int i = 0; i < steps && c.pkts.size() < n; ++i) {
    d.net[1].advance(d.now);
    d.net[1].transmit(d.now, c, std::min(max_frames, n - c.pkts.size()));
    d.now = std::max(d.now, d.net[1].next_deadline());
  }
}

int post(Dut& d, ibv_wr_opcode op, uint64_t local, uint32_t len, uint64_t wr_id, uint32_t flags = 0) {
  const Sge sge{d.s.iova + local, len, d.s.keys.lkey};
  SendWr wr = one_sge_wr(sge, op, 0x7000000 + local, 0x5555, wr_id);
  wr.send_flags = flags;
  wr.imm_data = 0x01020304;
  return d.net[1].post_send(d.now, d.s.qpn, wr);
}

// The packet's payload is bytes [off, off + n) of the DUT's buffer.
bool carries(const Dut& d, const Capture& c, size_t i, uint64_t off, uint32_t n) {
  const wire::RocePacket& p = c.pkts[i];
  return p.payload_len == n && std::equal(d.s.buf.begin() + static_cast<std::ptrdiff_t>(off),
                                          d.s.buf.begin() + static_cast<std::ptrdiff_t>(off + n),
                                          c.frames[i].begin() + static_cast<std::ptrdiff_t>(p.payload_offset));
}

// WRITEs of 3 (first, one middle, last), 2 (no middle) and 12 MTUs + 7 bytes, one
// after the other in bursts of 32, with an ACK asked every 1, 3 (the division), 4
// (the mask) and 5 packets: each packet's opcode, PSN, AckReq (every nth of its
// message, and its last), bytes and charged frame length.
TEST(EngineMiddlePacket, EachPacketOfBackToBackWritesCarriesItsOwnFields) {
  for (const uint32_t every : {1u, 3u, 4u, 5u}) {
    SCOPED_TRACE(every);
    Dut d({}, bursts(every));
    for (size_t i = 0; i < d.s.buf.size(); ++i) d.s.buf[i] = static_cast<uint8_t>(i * 13 + i / 4096);
    const std::vector<uint32_t> lens{3 * kMtu, 2 * kMtu, 12 * kMtu + 7};
    uint64_t local = 0;
    std::vector<uint64_t> starts;
    for (size_t m = 0; m < lens.size(); ++m) {
      starts.push_back(local);
      ASSERT_EQ(post(d, IBV_WR_RDMA_WRITE, local, lens[m], m), 0);
      local += lens[m] + 4096;
    }
    Capture c;
    transmit_into(d, c, 18, 32);
    ASSERT_EQ(c.pkts.size(), 18u);
    const uint32_t psn0 = c.pkts[0].psn.value();
    size_t k = 0;
    for (size_t m = 0; m < lens.size(); ++m) {
      const uint32_t n = (lens[m] + kMtu - 1) / kMtu;
      for (uint32_t i = 0; i < n; ++i, ++k) {
        SCOPED_TRACE(k);
        const wire::RocePacket& p = c.pkts[k];
        EXPECT_EQ(p.opcode, i == 0       ? wire::op::kRcWriteFirst
                            : i + 1 == n ? wire::op::kRcWriteLast
                                         : wire::op::kRcWriteMiddle);
        EXPECT_EQ(p.psn.value(), (psn0 + k) & 0xffffff);
        EXPECT_EQ(p.ack_req, i + 1 == n || (i + 1) % every == 0);
        EXPECT_FALSE(p.solicited);
        EXPECT_EQ(p.reth.has_value(), i == 0);
        EXPECT_TRUE(carries(d, c, k, starts[m] + i * kMtu, std::min(kMtu, lens[m] - i * kMtu)));
        EXPECT_EQ(c.hints[k], c.frames[k].size());
      }
    }
  }
}

// A solicited SEND of 6 MTUs and a solicited WRITE with immediate of 4: the SE bit
// on the last packet alone (9.2.3: SEND Last and RDMA WRITE Last with Immediate),
// never on a middle one.
TEST(EngineMiddlePacket, OnlyTheLastPacketOfASolicitedMessageCarriesSe) {
  Dut d({}, bursts());
  std::fill(d.s.buf.begin(), d.s.buf.end(), uint8_t{0x5a});
  ASSERT_EQ(post(d, IBV_WR_SEND, 0, 6 * kMtu, 1, IBV_SEND_SOLICITED), 0);
  ASSERT_EQ(post(d, IBV_WR_RDMA_WRITE_WITH_IMM, 65536, 4 * kMtu, 2, IBV_SEND_SOLICITED), 0);
  Capture c;
  transmit_into(d, c, 10, 32);
  ASSERT_EQ(c.pkts.size(), 10u);
  for (size_t k = 0; k < 10; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(c.pkts[k].solicited, k == 5 || k == 9);
    EXPECT_EQ(c.pkts[k].opcode, k == 0   ? wire::op::kRcSendFirst
                                : k < 5  ? wire::op::kRcSendMiddle
                                : k == 5 ? wire::op::kRcSendLast
                                : k == 6 ? wire::op::kRcWriteFirst
                                : k < 9  ? wire::op::kRcWriteMiddle
                                         : wire::op::kRcWriteLastImm);
    EXPECT_EQ(c.pkts[k].imm.has_value(), k == 9);
    EXPECT_EQ(c.pkts[k].payload_len, kMtu);
  }
}

// A WRITE of 12 packets of which 6 went out (one transmit of 6 frames), then a
// sequence-error NAK for its third: one burst sends packets 2..11, the first four
// again (counted as retransmissions, engine and QP) and the rest for the first
// time (not counted): the retransmission flag of each derived middle packet ends
// where the pass reaches the highest PSN sent.
TEST(EngineMiddlePacket, ARetransmissionPassEndsInsideABurst) {
  Dut d({}, bursts());
  for (size_t i = 0; i < 12 * kMtu; ++i) d.s.buf[i] = static_cast<uint8_t>(i * 5 + i / kMtu);
  ASSERT_EQ(post(d, IBV_WR_RDMA_WRITE, 0, 12 * kMtu, 1), 0);
  Capture c;
  d.net[1].advance(d.now);
  d.net[1].transmit(d.now, c, 6);
  ASSERT_EQ(c.pkts.size(), 6u);
  const uint32_t psn0 = c.pkts[0].psn.value();
  auto nak = d.spec(wire::op::kRcAck, psn0 + 2);
  nak.aeth = wire::AethFields{0x60, 0};  // NAK, PSN sequence error: expected psn0 + 2
  std::vector<uint8_t> frame(wire::frame_size(nak));
  ASSERT_TRUE(wire::build_frame(nak, frame).ok());
  d.now += 1'000'000;
  d.net[1].receive(d.now, frame);
  Capture again;
  d.net[1].advance(d.now);
  d.net[1].transmit(d.now, again, 32);  // one dequeue: 10 packets in 10 us
  ASSERT_EQ(again.pkts.size(), 10u);
  for (uint32_t i = 0; i < 10; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(again.pkts[i].psn.value(), (psn0 + 2 + i) & 0xffffff);
    EXPECT_EQ(again.pkts[i].opcode, i == 9 ? wire::op::kRcWriteLast : wire::op::kRcWriteMiddle);
    EXPECT_TRUE(carries(d, again, i, (2 + i) * kMtu, kMtu));
  }
  EXPECT_EQ(d.net[1].counters().retransmits, 4u);
  EXPECT_EQ(d.net[1].qp_counters(d.s.qpn)->retransmits, 4u);
}

// READ requests of 3 MTUs (first, one MIDDLE, last), 2 MTUs (no MIDDLE) and 9 MTUs
// + 5 bytes at the DUT, delivered before it transmits, answered in bursts: each
// response's opcode, PSN, AETH (first and last only), length,
// bytes and charged frame length (a MIDDLE response's next is derived in place,
// take_middle_response).
TEST(EngineMiddlePacket, EachResponseOfBackToBackReadsCarriesItsOwnFields) {
  Dut d({}, bursts());
  for (size_t i = 0; i < d.s.buf.size(); ++i) d.s.buf[i] = static_cast<uint8_t>(i * 11 + i / 1000);
  const std::vector<uint32_t> lens{3 * kMtu, 2 * kMtu, 9 * kMtu + 5};
  const std::vector<uint64_t> offs{100, 40000, 90000};
  uint32_t psn = 500;
  for (size_t m = 0; m < lens.size(); ++m) {
    auto f = d.spec(wire::op::kRcReadRequest, psn);
    f.ack_req = false;
    f.reth = wire::RethFields{d.s.iova + offs[m], d.s.keys.rkey, lens[m]};
    std::vector<uint8_t> v(wire::frame_size(f));
    ASSERT_TRUE(wire::build_frame(f, v).ok());
    d.net[1].receive(d.now, v);
    psn += (lens[m] + kMtu - 1) / kMtu;
  }
  Capture c;
  for (int i = 0; i < 100 && c.pkts.size() < 15; ++i) {
    d.net[1].advance(d.now);
    d.net[1].transmit(d.now, c, 64);
    d.now = std::max(d.now, d.net[1].next_deadline());
  }
  ASSERT_EQ(c.pkts.size(), 15u);
  size_t k = 0;
  for (size_t m = 0; m < lens.size(); ++m) {
    const uint32_t n = (lens[m] + kMtu - 1) / kMtu;
    for (uint32_t i = 0; i < n; ++i, ++k) {
      SCOPED_TRACE(k);
      const wire::RocePacket& p = c.pkts[k];
      EXPECT_EQ(p.opcode, i == 0       ? wire::op::kRcReadResponseFirst
                          : i + 1 == n ? wire::op::kRcReadResponseLast
                                       : wire::op::kRcReadResponseMiddle);
      EXPECT_EQ(p.psn.value(), 500 + k);
      EXPECT_EQ(p.aeth.has_value(), i == 0 || i + 1 == n);
      EXPECT_TRUE(carries(d, c, k, offs[m] + i * kMtu, std::min(kMtu, lens[m] - i * kMtu)));
      EXPECT_EQ(c.hints[k], c.frames[k].size());
    }
  }
}

}  // namespace
}  // namespace isoroce::transport::testing
