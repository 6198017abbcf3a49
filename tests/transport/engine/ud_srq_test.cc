// UD datagrams (GRH, Q_Key, no receive, many destinations) and shared
// receive queues (RC receives from an SRQ, the limit event).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kQkey = 0x11111111;

TEST(EngineUd, DatagramsToManyQpsWithGrhAndQkeyCheck) {
  Pair net;
  RcOptions o;
  Side a = make_side(net[0], o, IBV_QPT_UD);
  to_rts_ud(net[0], a.qpn, kQkey);
  std::vector<Side> dst;
  for (int i = 0; i < 8; ++i) {
    dst.push_back(make_side(net[1], o, IBV_QPT_UD));
    to_rts_ud(net[1], dst.back().qpn, i == 7 ? 0x2222 : kQkey);  // the last has another Q_Key
    Sge sge{dst.back().iova, 2000, dst.back().keys.lkey};
    ASSERT_EQ(net[1].post_recv(dst.back().qpn, RecvWr{static_cast<uint64_t>(i), std::span(&sge, 1)}), 0);
  }
  AhAttr ah;
  ah.dgid = net[1].config().ip;
  auto h = net[0].create_ah(a.pd, ah);
  ASSERT_TRUE(h.ok());
  for (int i = 0; i < 1000; ++i) a.buf[i] = static_cast<uint8_t>(i * 7);
  for (int i = 0; i < 8; ++i) {
    Sge sge{a.iova + static_cast<uint64_t>(i) * 10, 900, a.keys.lkey};
    SendWr wr;
    wr.wr_id = 100 + i;
    wr.opcode = i % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
    wr.imm_data = htonl(0xabc);
    wr.sg_list = std::span(&sge, 1);
    wr.ah = h.value();
    wr.remote_qpn = dst[i].qpn.value();
    wr.remote_qkey = i == 6 ? 0x80000000 : kQkey;  // high bit: the QP's own Q_Key
    ASSERT_EQ(net[0].post_send(0, a.qpn, wr), 0);
  }
  ASSERT_TRUE(net.run());
  std::vector<ibv_wc> wc(16);
  ASSERT_EQ(net[0].poll_cq(a.scq, wc), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
  for (int i = 0; i < 8; ++i) {
    std::vector<ibv_wc> r(4);
    const int n = net[1].poll_cq(dst[i].rcq, r);
    if (i == 7) {
      EXPECT_EQ(n, 0) << "wrong Q_Key is dropped";
      continue;
    }
    ASSERT_EQ(n, 1) << i;
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(r[0].byte_len, 940u);
    EXPECT_TRUE(r[0].wc_flags & IBV_WC_GRH);
    EXPECT_EQ(r[0].src_qp, a.qpn.value());
    EXPECT_EQ(static_cast<bool>(r[0].wc_flags & IBV_WC_WITH_IMM), i % 2 == 1);
    // GRH: the IPv4 header in bytes 20..39, source address 10.0.0.1.
    EXPECT_EQ(dst[i].buf[20], 0x45);
    EXPECT_EQ(dst[i].buf[20 + 12], 10);
    EXPECT_EQ(dst[i].buf[20 + 15], 1);
    EXPECT_EQ(std::memcmp(dst[i].buf.data() + 40, a.buf.data() + i * 10, 900), 0);
  }
  EXPECT_EQ(net[1].counters().rx_ud_qkey_mismatch, 1u);
}

TEST(EngineUd, NoReceiveDropsAndOversizeIsRejected) {
  Pair net;
  RcOptions o;
  Side a = make_side(net[0], o, IBV_QPT_UD), b = make_side(net[1], o, IBV_QPT_UD);
  to_rts_ud(net[0], a.qpn, kQkey);
  to_rts_ud(net[1], b.qpn, kQkey);
  AhAttr ah;
  ah.dgid = net[1].config().ip;
  auto h = net[0].create_ah(a.pd, ah);
  Sge sge{a.iova, 100, a.keys.lkey};
  SendWr wr;
  wr.sg_list = std::span(&sge, 1);
  wr.ah = h.value();
  wr.remote_qpn = b.qpn.value();
  wr.remote_qkey = kQkey;
  ASSERT_EQ(net[0].post_send(0, a.qpn, wr), 0);
  ASSERT_TRUE(net.run());
  EXPECT_EQ(net[1].counters().rx_ud_no_receive, 1u);
  sge.length = 1025;  // above the 1024-byte MTU
  EXPECT_EQ(net[0].post_send(0, a.qpn, wr), EINVAL);
  wr.opcode = IBV_WR_RDMA_WRITE;
  sge.length = 10;
  EXPECT_EQ(net[0].post_send(0, a.qpn, wr), EINVAL);
  AhAttr unknown;
  unknown.dgid = ip4(0x0a0000ee);
  EXPECT_EQ(net[0].create_ah(a.pd, unknown).err(), EHOSTUNREACH);
}

// The trust boundary of DESIGN.md: a UD WR may only name an AH of its QP's
// PD (rxe_get_av()); the engine refuses it at post with EINVAL.
TEST(EngineUd, AnAhOfAnotherPdIsRefusedAtPost) {
  Pair net;
  RcOptions o;
  Side a = make_side(net[0], o, IBV_QPT_UD);
  to_rts_ud(net[0], a.qpn, kQkey);
  AhAttr ah;
  ah.dgid = net[1].config().ip;
  const PdHandle other = net[0].alloc_pd().value();
  auto theirs = net[0].create_ah(other, ah);
  auto ours = net[0].create_ah(a.pd, ah);
  ASSERT_TRUE(theirs.ok() && ours.ok());
  Sge sge{a.iova, 100, a.keys.lkey};
  SendWr wr;
  wr.sg_list = std::span(&sge, 1);
  wr.ah = theirs.value();
  wr.remote_qpn = 0x99;
  wr.remote_qkey = kQkey;
  EXPECT_EQ(net[0].post_send(0, a.qpn, wr), EINVAL);
  wr.ah = ours.value();
  EXPECT_EQ(net[0].post_send(0, a.qpn, wr), 0);
  ASSERT_TRUE(net.run());
  EXPECT_EQ(net.sent(0).size(), 1u);
}

TEST(EngineSrq, RcReceivesComeFromTheSrqAndTheLimitFires) {
  Pair net;
  RcOptions o;
  Side a = make_side(net[0], o);
  SrqHandle srq_h = 0;
  Side b = make_srq_side(net[1], 16, &srq_h);
  ASSERT_FALSE(::testing::Test::HasFailure());
  ibv_srq_attr sa{};
  connect(net[0], a, b, net[1].config().ip, o, 1, 2);
  connect(net[1], b, a, net[0].config().ip, o, 2, 1);
  for (int i = 0; i < 6; ++i) {
    Sge sge{b.iova + i * 1000, 1000, b.keys.lkey};
    ASSERT_EQ(net[1].post_srq_recv(srq_h, RecvWr{static_cast<uint64_t>(i), std::span(&sge, 1)}), 0);
  }
  sa.srq_limit = 3;
  ASSERT_EQ(net[1].modify_srq(srq_h, sa, IBV_SRQ_LIMIT), 0);
  EXPECT_EQ(net[1].post_recv(b.qpn, RecvWr{}), EINVAL) << "receives go to the SRQ";
  EXPECT_EQ(net[1].destroy_srq(srq_h), EBUSY);
  for (int i = 0; i < 4; ++i) {
    Sge sge{a.iova, 100, a.keys.lkey};
    SendWr wr;
    wr.sg_list = std::span(&sge, 1);
    ASSERT_EQ(net[0].post_send(0, a.qpn, wr), 0);
  }
  ASSERT_TRUE(net.run());
  std::vector<ibv_wc> wc(8);
  ASSERT_EQ(net[1].poll_cq(b.rcq, wc), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(wc[i].wr_id, static_cast<uint64_t>(i));
  auto ev = net[1].take_async_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::kSrqLimitReached);
}

TEST(EngineCq, OverrunLosesTheCompletionAndRaisesAnEvent) {
  RcOptions o;
  RcPair p(o);
  // A CQ of 2 entries on a new QP pair would need more plumbing; use the
  // send CQ's capacity of 4096 with 4097 unpolled completions instead.
  for (int round = 0; round < 17; ++round) {
    for (int i = 0; i < 256 && round * 256 + i < 4097; ++i) {
      ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 1), 0);
    }
    ASSERT_TRUE(p.net.run());
  }
  EXPECT_EQ(p.net[0].counters().cq_overruns, 1u);
  auto ev = p.net[0].take_async_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::kCqError);
  EXPECT_EQ(p.poll(0, false).size(), 4096u);
}

}  // namespace
}  // namespace isoroce::transport::testing
