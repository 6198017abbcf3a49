// The wire is untrusted (issue 16): what an engine refuses, and that each
// refusal is counted under its reason in EngineCounters; a QP's own rx
// counters only count what it accepted.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

TEST(EngineRxChecks, RcPacketFromAnotherAddressIsNotAcceptedNorCountedByTheQp) {
  Dut d;
  const uint8_t data[4] = {1, 2, 3, 4};
  auto f = d.write_only(500, 0, data);
  f.src_ip = ip4(0x0a0000fe);
  EXPECT_TRUE(d.receive(f).empty());
  EXPECT_EQ(d.s.buf[0], 0);
  EXPECT_EQ(d.net[1].counters().rx_wrong_source, 1u);
  EXPECT_EQ(d.net[1].counters().rx_dropped, 1u);
  const QpCounters* qc = d.net[1].qp_counters(d.s.qpn);
  ASSERT_NE(qc, nullptr);
  EXPECT_EQ(qc->rx_packets, 0u) << "a stranger inflated the QP's counters";
  EXPECT_EQ(qc->rx_bytes, 0u);
  // The peer's packet is accepted and counted.
  EXPECT_EQ(d.receive(d.write_only(500, 0, data)).size(), 1u);
  EXPECT_EQ(qc->rx_packets, 1u);
  EXPECT_GT(qc->rx_bytes, 0u);
}

TEST(EngineRxChecks, CnpFromAnotherAddressIsNotAcceptedNorCounted) {
  Dut d;
  auto f = d.spec(wire::op::kCnp, 0);
  f.src_ip = ip4(0x0a0000fe);
  f.ack_req = false;
  f.becn = true;
  EXPECT_TRUE(d.receive(f).empty());
  EXPECT_EQ(d.net[1].counters().rx_wrong_source, 1u);
  EXPECT_EQ(d.net[1].qp_counters(d.s.qpn)->rx_packets, 0u);
}

TEST(EngineRxChecks, EachRefusalIsCountedUnderItsReason) {
  Dut d;
  const uint8_t data[4] = {1, 2, 3, 4};
  const EngineCounters& c = d.net[1].counters();

  // Bad ICRC.
  auto good = d.write_only(500, 0, data);
  std::vector<uint8_t> frame(wire::frame_size(good));
  ASSERT_TRUE(wire::build_frame(good, frame).ok());
  frame[frame.size() - 6] ^= 0x5a;  // a payload byte: the ICRC no longer matches
  d.net[1].receive(d.now, frame);
  EXPECT_EQ(c.rx_bad_icrc, 1u);
  EXPECT_EQ(c.rx_parse_errors, 1u);

  // Another destination address; an unknown QPN; UD to an RC QP.
  auto other = d.write_only(500, 0, data);
  other.dst_ip = ip4(0x0a000077);
  EXPECT_TRUE(d.receive(other).empty());
  EXPECT_EQ(c.rx_not_for_port, 1u);
  auto unknown = d.write_only(500, 0, data);
  unknown.dest_qp = wire::Qpn(0x123456);
  EXPECT_TRUE(d.receive(unknown).empty());
  EXPECT_EQ(c.rx_unknown_qp, 1u);
  auto ud = d.spec(wire::op::kUdSendOnly, 500);
  ud.deth = wire::DethFields{1, 0x77};
  ud.payload = data;
  EXPECT_TRUE(d.receive(ud).empty());
  EXPECT_EQ(c.rx_wrong_transport, 1u);

  // An ACK for a PSN this QP never sent.
  auto ack = d.spec(wire::op::kRcAck, 9000 + 50);
  ack.aeth = wire::AethFields{0x1f, 1};
  EXPECT_TRUE(d.receive(ack).empty());
  EXPECT_EQ(c.rx_psn_out_of_window, 1u);

  EXPECT_EQ(c.rx_dropped, 5u);
  EXPECT_EQ(d.net[1].qp_counters(d.s.qpn)->rx_packets, 1u) << "only the ACK from the peer";
  EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_RTS);
}

TEST(EngineRxChecks, RejectedRequestsAreCountedByReason) {
  std::vector<uint8_t> mtu(1024, 1);
  {
    Dut d;  // MIDDLE without FIRST
    auto f = d.spec(wire::op::kRcWriteMiddle, 500);
    f.payload = mtu;
    EXPECT_EQ(syndrome(d.receive(f).at(0)), 0x61);
    EXPECT_EQ(d.net[1].counters().rx_bad_opcode_sequence, 1u);
  }
  {
    Dut d;  // a WRITE ONLY longer than its RETH
    auto f = d.write_only(500, 0, mtu);
    f.reth->dma_len = 100;
    EXPECT_EQ(syndrome(d.receive(f).at(0)), 0x61);
    EXPECT_EQ(d.net[1].counters().rx_bad_length, 1u);
  }
  {
    Dut d;  // a wrong R_Key
    auto f = d.write_only(500, 0, mtu);
    f.reth->rkey ^= 1;
    EXPECT_EQ(syndrome(d.receive(f).at(0)), 0x62);
    EXPECT_EQ(d.net[1].counters().rx_bad_rkey, 1u);
  }
  {
    Dut d;  // a misaligned atomic
    auto f = d.spec(wire::op::kRcFetchAdd, 500);
    f.atomic = wire::AtomicFields{d.s.iova + 4, d.s.keys.rkey, 1, 0};
    EXPECT_EQ(syndrome(d.receive(f).at(0)), 0x61);
    EXPECT_EQ(d.net[1].counters().rx_invalid_request, 1u);
  }
}

// A WRITE's middle and last packets (256 B and up) have their ICRC checked while
// the payload is copied into the MR (docs/design.md, "Each payload byte is read
// once per side"). A corrupted one is dropped as a bad ICRC before any state
// changes: no ACK, no NAK, the QP's counters untouched, the expected PSN
// unchanged (the good copy is then accepted), and a corrupted header never turns
// into a NAK.
TEST(EngineRxChecks, DeferredIcrcDropsACorruptWriteBeforeAnyStateChange) {
  Dut d;
  std::vector<uint8_t> data(2048);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::span<const uint8_t> first_half(data.data(), 1024), second_half(data.data() + 1024, 1024);
  const EngineCounters& c = d.net[1].counters();
  const QpCounters* qc = d.net[1].qp_counters(d.s.qpn);
  ASSERT_NE(qc, nullptr);
  auto send_corrupt = [&](const wire::FrameSpec& f, size_t byte_from_end) {
    return d.receive_corrupt(f, byte_from_end, 0x10);
  };
  auto first = d.spec(wire::op::kRcWriteFirst, 500);
  first.reth = wire::RethFields{d.s.iova + 64, d.s.keys.rkey, static_cast<uint32_t>(data.size())};
  first.payload = first_half;
  first.ack_req = false;
  d.receive(first);
  EXPECT_EQ(qc->rx_packets, 1u);
  const uint64_t rx_bytes = qc->rx_bytes;
  auto last = d.spec(wire::op::kRcWriteLast, 501);
  last.payload = second_half;
  // A payload byte of the last packet: the copy happens, the check fails, nothing else.
  EXPECT_TRUE(send_corrupt(last, 100).empty()) << "a corrupted WRITE was answered";
  EXPECT_EQ(c.rx_bad_icrc, 1u);
  EXPECT_EQ(c.rx_dropped, 1u);
  EXPECT_EQ(qc->rx_packets, 1u);
  EXPECT_EQ(qc->rx_bytes, rx_bytes);
  // Its PSN (a header byte): a NAK (PSN sequence error) would follow if the ICRC
  // were not checked before the PSN.
  const size_t bth_psn_from_end = wire::kIcrcBytes + second_half.size() + 1;
  EXPECT_TRUE(send_corrupt(last, bth_psn_from_end).empty()) << "a corrupted PSN was NAKed";
  EXPECT_EQ(c.rx_bad_icrc, 2u);
  EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_RTS);
  // The PSN did not move: the intact packet is the expected one, executed and ACKed,
  // and it rewrites every byte its corrupted copy may have stored.
  const auto acks = d.receive(last);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].opcode, wire::op::kRcAck);
  EXPECT_EQ(syndrome(acks[0]) >> 5, 0) << "not an ACK";
  EXPECT_EQ(acks[0].psn.value(), 501u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + 64));
  EXPECT_EQ(qc->rx_packets, 2u);
  EXPECT_EQ(c.rx_bad_icrc, 2u);
}

// A SEND (256 B and up, first and only packets too) is copied into its receive's
// buffer while its ICRC is checked, and the receive is taken only after the check
// passed: a corrupted SEND is dropped with nothing consumed or answered (not even an
// RNR NAK when no receive is posted), and the intact copy then completes the first
// receive posted.
TEST(EngineRxChecks, DeferredIcrcDropsACorruptSendBeforeTakingItsReceive) {
  std::vector<uint8_t> data(1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + 5);
  auto corrupt = [&](Dut& d, const wire::FrameSpec& f, size_t byte_from_end) {
    std::vector<uint8_t> frame(wire::frame_size(f));
    EXPECT_TRUE(wire::build_frame(f, frame).ok());
    frame[frame.size() - byte_from_end] ^= 0x08;
    d.now += 1'000'000;
    d.net[1].receive(d.now, frame);
    return d.drain();
  };
  auto poll = [](Dut& d) {
    std::vector<ibv_wc> wc(8);
    wc.resize(static_cast<size_t>(std::max(d.net[1].poll_cq(d.s.rcq, wc), 0)));
    return wc;
  };
  {
    Dut d;
    auto f = d.spec(wire::op::kRcSendOnly, 500);
    f.payload = data;
    f.ack_req = true;
    // No receive posted: an intact SEND would get an RNR NAK.
    EXPECT_TRUE(corrupt(d, f, 200).empty()) << "a corrupted SEND was answered";
    EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);
    EXPECT_EQ(d.net[1].counters().rnr_naks_sent, 0u);
    for (uint64_t id : {1u, 2u}) {
      Sge sge{d.s.iova + (id - 1) * 4096, 2048, d.s.keys.lkey};
      ASSERT_EQ(d.net[1].post_recv(d.s.qpn, RecvWr{id, std::span(&sge, 1)}), 0);
    }
    // A payload byte, then the PSN (a header byte: a NAK would follow if the ICRC
    // were checked after the PSN).
    EXPECT_TRUE(corrupt(d, f, 200).empty()) << "a corrupted SEND was answered";
    EXPECT_TRUE(corrupt(d, f, wire::kIcrcBytes + data.size() + 1).empty()) << "a corrupted PSN was NAKed";
    EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 3u);
    EXPECT_TRUE(poll(d).empty()) << "a corrupted SEND completed a receive";
    EXPECT_EQ(d.net[1].qp_counters(d.s.qpn)->rx_packets, 0u);
    const auto acks = d.receive(f);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].opcode, wire::op::kRcAck);
    EXPECT_EQ(syndrome(acks[0]) >> 5, 0) << "not an ACK";
    const auto wc = poll(d);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 1u) << "the corrupted copies consumed a receive";
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[0].byte_len, data.size());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin()));
  }
  {
    // A SEND larger than the receive: the plain check, then the length error as before.
    Dut d;
    Sge sge{d.s.iova, 512, d.s.keys.lkey};
    ASSERT_EQ(d.net[1].post_recv(d.s.qpn, RecvWr{7, std::span(&sge, 1)}), 0);
    auto f = d.spec(wire::op::kRcSendOnly, 500);
    f.payload = data;
    EXPECT_TRUE(corrupt(d, f, 200).empty());
    EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);
    EXPECT_TRUE(poll(d).empty());
    const auto naks = d.receive(f);
    ASSERT_EQ(naks.size(), 1u);
    EXPECT_EQ(syndrome(naks[0]), 0x61) << "Invalid Request NAK";
    const auto wc = poll(d);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR);
  }
}

// A first or only packet names its target in the RETH, which the ICRC protects:
// a flipped address bit must not store the payload anywhere (IBTA 9.8.2: a packet
// that fails the ICRC has no effect), so these are checked before the copy.
TEST(EngineRxChecks, ACorruptRethStoresNothing) {
  Dut d;
  std::vector<uint8_t> data(1024, 0x5c);
  const auto good = d.write_only(500, 0, data);
  std::vector<uint8_t> frame(wire::frame_size(good));
  ASSERT_TRUE(wire::build_frame(good, frame).ok());
  // The RETH's VA is its first 8 bytes, big-endian: flip a bit of its second-lowest
  // byte, so the corrupted address (iova + 4096) is still inside the MR.
  const size_t va_byte_from_end = wire::kIcrcBytes + data.size() + 16 - 6;
  frame[frame.size() - va_byte_from_end] ^= 0x10;
  d.now += 1'000'000;
  d.net[1].receive(d.now, frame);
  EXPECT_TRUE(d.drain().empty());
  EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);
  EXPECT_TRUE(std::all_of(d.s.buf.begin(), d.s.buf.end(), [](uint8_t b) { return b == 0; }))
      << "a WRITE that failed its ICRC stored bytes";
}

// A small WRITE (checked at receive) and a large one (checked at the copy) with a
// flipped bit in the same place are refused the same way.
TEST(EngineRxChecks, SmallAndLargeWritesFailTheirIcrcAlike) {
  for (const size_t len : {16u, 4096u}) {
    Dut d;
    std::vector<uint8_t> data(len, 0x42);
    auto f = d.write_only(500, 0, data);
    std::vector<uint8_t> frame(wire::frame_size(f));
    ASSERT_TRUE(wire::build_frame(f, frame).ok());
    frame[frame.size() - wire::kIcrcBytes - 1] ^= 1;
    d.now += 1'000'000;
    d.net[1].receive(d.now, frame);
    EXPECT_TRUE(d.drain().empty()) << len;
    EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u) << len;
    EXPECT_EQ(d.net[1].counters().rx_parse_errors, 1u) << len;
    EXPECT_EQ(d.net[1].qp_counters(d.s.qpn)->rx_packets, 0u) << len;
  }
}

}  // namespace
}  // namespace isoroce::transport::testing
