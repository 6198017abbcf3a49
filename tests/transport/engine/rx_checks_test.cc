// The wire is untrusted (issue 16): what an engine refuses, and that each
// refusal is counted under its reason in EngineCounters; a QP's own rx
// counters only count what it accepted.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace isoroce::transport::testing
