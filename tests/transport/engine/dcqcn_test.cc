// DCQCN in the engine. Notification point with hand-built packets ("Receive X
// / Expect Y" against one engine whose peers are this test): CNP format, one
// CNP per min_time_between_cnps_us per QP, the right QP (RC and UD), never for
// CE on an ACK or a CNP. Reaction point: a CNP cuts the QP's rate, and two engines with
// every data frame marked CE slow down and recover.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "tests/transport/engine/pair.h"
#include "transport/wire/build.h"

namespace isoroce::transport::testing {
namespace {

constexpr Picos kUs = 1'000'000;

class Capture : public TxSink {
 public:
  std::span<uint8_t> tx_buffer(size_t len) override {
    buf_.assign(len, 0);
    return buf_;
  }
  void tx_commit(Picos, size_t len) override {
    buf_.resize(len);
    auto r = wire::parse_frame(buf_);
    EXPECT_TRUE(r.ok()) << "malformed frame";
    EXPECT_TRUE(r.pkt.icrc_ok);
    pkts.push_back(r.pkt);
    lens.push_back(len);
  }
  std::vector<wire::RocePacket> pkts;
  std::vector<size_t> lens;

 private:
  std::vector<uint8_t> buf_;
};

EngineConfig dcqcn_config(bool enabled = true) {
  EngineConfig c;
  c.policy = "tassel";
  c.dcqcn.enabled = enabled;
  return c;
}

// Engine 1 is the device under test with two RC QPs; the test plays their
// peers (QPNs 0x77 and 0x88 on engine 0's address).
struct Np {
  explicit Np(EngineConfig c = dcqcn_config()) : net(c) {
    a = make_side(net[1], opt);
    b = make_side(net[1], opt);
    peer_a.qpn = wire::Qpn(0x77);
    peer_b.qpn = wire::Qpn(0x88);
    connect(net[1], a, peer_a, net[0].config().ip, opt, 9000, 500);
    connect(net[1], b, peer_b, net[0].config().ip, opt, 9000, 800);
  }

  wire::FrameSpec spec(const Side& to, uint8_t opcode, uint32_t psn, uint8_t ecn) {
    wire::FrameSpec f;
    f.src_mac = net[0].config().mac;
    f.dst_mac = net[1].config().mac;
    f.src_ip = net[0].config().ip;
    f.dst_ip = net[1].config().ip;
    f.traffic_class = static_cast<uint8_t>(26 << 2 | ecn);
    f.opcode = opcode;
    f.dest_qp = to.qpn;
    f.psn = wire::Psn(psn);
    return f;
  }
  wire::FrameSpec write(const Side& to, uint32_t psn, uint8_t ecn) {
    static const uint8_t data[16] = {};
    auto f = spec(to, wire::op::kRcWriteOnly, psn, ecn);
    f.ack_req = true;
    f.reth = wire::RethFields{to.iova, to.keys.rkey, sizeof data};
    f.payload = data;
    return f;
  }
  // Receive the frame at t, then collect what the engine sends by t + 100 ns.
  std::vector<wire::RocePacket> receive_at(Picos t, const wire::FrameSpec& f) {
    std::vector<uint8_t> frame(wire::frame_size(f));
    EXPECT_TRUE(wire::build_frame(f, frame).ok());
    net[1].receive(t, frame);
    Capture c;
    net[1].advance(t);
    for (Picos s = t; s <= t + 100'000; s += 10'000) net[1].transmit(s, c, 64);
    last_lens = c.lens;
    return c.pkts;
  }
  static size_t count(const std::vector<wire::RocePacket>& v, uint8_t opcode) {
    size_t n = 0;
    for (const auto& p : v) n += p.opcode == opcode;
    return n;
  }

  Pair net;
  RcOptions opt;
  Side a, b, peer_a, peer_b;
  std::vector<size_t> last_lens;
};

TEST(EngineDcqcnNp, CeOnAWriteSendsOneCnpAheadOfTheAck) {
  Np n;
  // Receive: WRITE with CE on QP a.
  auto out = n.receive_at(10 * kUs, n.write(n.a, 500, 0x3));
  // Expect: a CNP, then the ACK.
  ASSERT_EQ(out.size(), 2u);
  const wire::RocePacket& cnp = out[0];
  EXPECT_EQ(cnp.opcode, 0x81);
  EXPECT_TRUE(cnp.becn);
  EXPECT_EQ(cnp.dest_qp.value(), 0x77u) << "to the sender's QP";
  EXPECT_EQ(cnp.dscp(), 48);
  EXPECT_EQ(cnp.ecn(), 0) << "CNPs are not ECN-capable";
  EXPECT_EQ(cnp.dst_ip, n.net[0].config().ip);
  EXPECT_EQ(cnp.payload_offset - cnp.bth_offset, 12u + 16u) << "BTH + 16 reserved bytes";
  EXPECT_EQ(n.last_lens[0], 14u + 20 + 8 + 12 + 16 + 4);
  EXPECT_EQ(out[1].opcode, wire::op::kRcAck);
  EXPECT_EQ(n.net[1].counters().cnps_sent, 1u);
  EXPECT_EQ(n.net[1].counters().ce_received, 1u);
  EXPECT_EQ(n.net[1].qp_dcqcn(n.a.qpn).cnps_sent, 1u);
  EXPECT_EQ(n.net[1].qp_dcqcn(n.b.qpn).cnps_sent, 0u);
}

TEST(EngineDcqcnNp, NoCnpWithoutCe) {
  Np n;
  for (uint8_t ecn : {0x0, 0x1, 0x2}) {
    auto out = n.receive_at((10 + ecn) * kUs, n.write(n.a, 500 + ecn, ecn));
    EXPECT_EQ(Np::count(out, 0x81), 0u) << int{ecn};
    EXPECT_EQ(Np::count(out, wire::op::kRcAck), 1u);
  }
  EXPECT_EQ(n.net[1].counters().cnps_sent, 0u);
}

TEST(EngineDcqcnNp, AtMostOneCnpPerMinTimePerQp) {
  Np n;  // min_time_between_cnps_us = 4
  size_t cnps = 0;
  std::vector<Picos> at;
  // Receive: a CE-marked WRITE every microsecond for 10 us.
  for (uint32_t i = 0; i < 10; ++i) {
    auto out = n.receive_at(100 * kUs + i * kUs, n.write(n.a, 500 + i, 0x3));
    if (Np::count(out, 0x81)) at.push_back(i);
    cnps += Np::count(out, 0x81);
  }
  // Expect: CNPs at 0, 4 and 8 us.
  EXPECT_EQ(cnps, 3u);
  EXPECT_EQ(at, (std::vector<Picos>{0, 4, 8}));
  EXPECT_EQ(n.net[1].counters().cnps_suppressed, 7u);
  // The other QP has its own budget: CE on b at 9.5 us gets a CNP at once.
  auto out = n.receive_at(100 * kUs + 9 * kUs + kUs / 2, n.write(n.b, 800, 0x3));
  ASSERT_EQ(Np::count(out, 0x81), 1u);
  EXPECT_EQ(out[0].dest_qp.value(), 0x88u) << "the CNP names b's sender";
}

TEST(EngineDcqcnNp, MinTimeZeroAnswersEveryCePacket) {
  EngineConfig c = dcqcn_config();
  c.dcqcn.min_time_between_cnps_us = 0;
  Np n(c);
  for (uint32_t i = 0; i < 5; ++i)
    EXPECT_EQ(Np::count(n.receive_at((10 + i) * kUs, n.write(n.a, 500 + i, 0x3)), 0x81), 1u);
}

TEST(EngineDcqcnNp, CeOnAnAckOrACnpNeverTriggersACnp) {
  Np n;
  // QP a sends a WRITE so an ACK is expected.
  std::vector<uint8_t> data(64, 7);
  Sge sge{n.a.iova, 64, n.a.keys.lkey};
  SendWr wr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = 0x1000;
  wr.rkey = 1;
  ASSERT_EQ(n.net[1].post_send(kUs, n.a.qpn, wr), 0);
  Capture c;
  n.net[1].transmit(kUs, c, 64);
  ASSERT_EQ(c.pkts.size(), 1u);
  // Receive: the ACK for it, marked CE.
  auto ack = n.spec(n.a, wire::op::kRcAck, 9000, 0x3);
  ack.aeth = wire::AethFields{0x1f, 1};
  auto out = n.receive_at(5 * kUs, ack);
  EXPECT_EQ(Np::count(out, 0x81), 0u);
  // Receive: a CNP marked CE.
  auto cnp = n.spec(n.a, wire::op::kCnp, 0, 0x3);
  cnp.becn = true;
  out = n.receive_at(6 * kUs, cnp);
  EXPECT_EQ(Np::count(out, 0x81), 0u);
  EXPECT_EQ(n.net[1].counters().cnps_sent, 0u);
  EXPECT_EQ(n.net[1].counters().ce_received, 0u);
  EXPECT_EQ(n.net[1].counters().cnps_received, 1u);
}

TEST(EngineDcqcnNp, DisabledSendsNoCnp) {
  Np n(dcqcn_config(false));
  auto out = n.receive_at(10 * kUs, n.write(n.a, 500, 0x3));
  EXPECT_EQ(Np::count(out, 0x81), 0u);
  EXPECT_EQ(n.net[1].counters().cnps_sent, 0u);
}

TEST(EngineDcqcnNp, CeOnAUdDatagramSendsACnpToItsSourceQp) {
  Np n;
  Side u = make_side(n.net[1], n.opt, IBV_QPT_UD);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = 0x1234;
  ASSERT_EQ(n.net[1].modify_qp(u.qpn, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(n.net[1].modify_qp(u.qpn, a, IBV_QP_STATE), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(n.net[1].modify_qp(u.qpn, a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  static const uint8_t data[8] = {};
  auto dgram = [&](uint32_t qkey) {
    auto f = n.spec(u, wire::op::kUdSendOnly, 1, 0x3);
    f.deth = wire::DethFields{qkey, 0x99};
    f.payload = data;
    return f;
  };
  // Receive: a CE-marked datagram with a wrong Q_Key; Expect: no CNP.
  EXPECT_EQ(Np::count(n.receive_at(10 * kUs, dgram(0x4321)), 0x81), 0u);
  // Receive: one with the QP's Q_Key from QP 0x99; Expect: a CNP to 0x99 at its address.
  auto out = n.receive_at(20 * kUs, dgram(0x1234));
  ASSERT_EQ(Np::count(out, 0x81), 1u);
  EXPECT_EQ(out[0].dest_qp.value(), 0x99u);
  EXPECT_EQ(out[0].dst_ip, n.net[0].config().ip);
  EXPECT_EQ(out[0].dst_mac, n.net[0].config().mac);
  EXPECT_EQ(n.net[1].qp_dcqcn(u.qpn).cnps_sent, 1u);
  // Receive: a CNP for the UD QP; Expect: its rate is cut at the next check.
  auto cnp = n.spec(u, wire::op::kCnp, 0, 0);
  cnp.becn = true;
  n.receive_at(30 * kUs, cnp);
  n.net[1].advance(34 * kUs);
  EXPECT_TRUE(n.net[1].qp_dcqcn(u.qpn).limiting);
  EXPECT_EQ(n.net[1].qp_dcqcn(u.qpn).decreases, 1u);
}

TEST(EngineDcqcnRp, CnpCutsTheQpsRateAtTheNextCheck) {
  Np n;
  auto cnp = n.spec(n.a, wire::op::kCnp, 0, 0);
  cnp.becn = true;
  n.receive_at(10 * kUs, cnp);
  // Expect: not cut yet (first check 4 us after the first CNP), then cut.
  EXPECT_EQ(n.net[1].qp_dcqcn(n.a.qpn).rate_bps, n.net[1].config().link_bps);
  EXPECT_EQ(n.net[1].next_deadline(), 14 * kUs);
  n.net[1].advance(14 * kUs);
  const QpDcqcnState s = n.net[1].qp_dcqcn(n.a.qpn);
  EXPECT_TRUE(s.limiting);
  EXPECT_EQ(s.decreases, 1u);
  EXPECT_EQ(s.cnps_received, 1u);
  // alpha = 1023/1024 decayed 4 times by g = 5/1024: rate = 100 (1 - alpha/2).
  double alpha = 1023.0 / 1024;
  for (int i = 0; i < 4; ++i) alpha *= 1 - 5.0 / 1024;
  EXPECT_NEAR(static_cast<double>(s.rate_bps), 100e9 * (1 - alpha / 2), 1);
  // The other QP is untouched.
  EXPECT_FALSE(n.net[1].qp_dcqcn(n.b.qpn).limiting);
}

TEST(EngineDcqcnRp, CnpFromAnotherAddressIsDropped) {
  Np n;
  auto cnp = n.spec(n.a, wire::op::kCnp, 0, 0);
  cnp.becn = true;
  cnp.src_ip = ip4(0x0a0000ff);
  n.receive_at(10 * kUs, cnp);
  n.net[1].advance(20 * kUs);
  EXPECT_EQ(n.net[1].counters().cnps_received, 0u);
  EXPECT_FALSE(n.net[1].qp_dcqcn(n.a.qpn).limiting);
}

TEST(EngineDcqcn, CreateRefusesDcqcnWithFifo) {
  EngineConfig c = dcqcn_config();
  c.policy = "fifo";
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.err(), EINVAL);
  c.policy = "tassel";
  c.dcqcn.g = 0;
  EXPECT_FALSE(Engine::create(c).ok());
  c.dcqcn.g = 0.5;
  EXPECT_TRUE(Engine::create(c).ok());
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

// Two engines; the first 300 data frames from engine 0 are marked CE on the
// way: engine 1 answers with CNPs, engine 0's QP slows down, recovers, and the
// transfer completes.
Picos write_time(bool mark, uint64_t* cnps_received, uint64_t* min_rate) {
  EngineConfig c = dcqcn_config();
  c.dcqcn.min_rate_mbps = 1000;
  Pair net(c);
  RcOptions o;
  o.buf_bytes = 2 << 20;
  Side s0 = make_side(net[0], o), s1 = make_side(net[1], o);
  connect(net[0], s0, s1, net[1].config().ip, o, 100, 5000);
  connect(net[1], s1, s0, net[0].config().ip, o, 5000, 100);
  int marked = 0;
  if (mark) net.set_hook([&marked](int from, std::vector<uint8_t>& f) {
    if (from == 0 && marked < 300) {
      mark_ce(f);
      ++marked;
    }
    return Fate::kDeliver;
  });
  Sge sge{s0.iova, static_cast<uint32_t>(o.buf_bytes), s0.keys.lkey};
  SendWr wr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = s1.iova;
  wr.rkey = s1.keys.rkey;
  EXPECT_EQ(net[0].post_send(0, s0.qpn, wr), 0);
  *min_rate = ~uint64_t{0};
  Picos done = 0;
  for (Picos t = 0; t < 20'000 * kUs && done == 0; t += 5 * kUs) {
    net.run_until(t);
    *min_rate = std::min(*min_rate, net[0].qp_dcqcn(s0.qpn).rate_bps);
    ibv_wc wc[4];
    if (net[0].poll_cq(s0.scq, wc) > 0) {
      EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
      done = t;
    }
  }
  *cnps_received = net[0].counters().cnps_received;
  EXPECT_EQ(net[1].counters().cnps_sent, *cnps_received);
  return done;
}

TEST(EngineDcqcnRp, MarkedFlowSlowsDownAndCompletes) {
  uint64_t cnps = 0, min_rate = 0;
  const Picos clean = write_time(false, &cnps, &min_rate);
  EXPECT_EQ(cnps, 0u);
  EXPECT_EQ(min_rate, 100'000'000'000u);
  ASSERT_GT(clean, 0u);
  const Picos marked = write_time(true, &cnps, &min_rate);
  ASSERT_GT(marked, 0u) << "the transfer completes";
  EXPECT_GT(cnps, 3u);
  EXPECT_LT(min_rate, 30'000'000'000u) << "CE drives the rate down";
  EXPECT_GT(marked, clean + clean / 5);
  std::printf("clean %.1f us, marked %.1f us, %lu CNPs, lowest rate %.2f Gb/s\n", clean / 1e6, marked / 1e6,
              static_cast<unsigned long>(cnps), min_rate / 1e9);
}

}  // namespace
}  // namespace isoroce::transport::testing
