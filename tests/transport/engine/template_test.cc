// Header templates (wire::HeaderTemplate): an RC QP builds its frames' headers
// at each modify_qp, so a QP taken back through RESET to a new AV and dest QP
// sends with the new path; a UD QP rebuilds its template when a send goes to
// another AH or QP. Every frame is checked field by field against the path it
// was sent on, and the data arrives.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

// INIT -> RTR -> RTS to peer with an AV of our own: hop limit, traffic class,
// flow label.
void connect_av(Engine& e, Side& s, const Side& peer, const wire::IpAddr& peer_ip, const RcOptions& o,
                uint32_t my_psn, uint32_t peer_psn, uint8_t hop, uint8_t tclass, uint32_t flow) {
  connect(e, s, peer, peer_ip, o, my_psn, peer_psn, PathAttrs{hop, tclass, flow});
}

int write(Pair& net, const Side& from, const Side& to, uint32_t len, uint64_t wr_id) {
  Sge sge{from.iova, len, from.keys.lkey};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = to.iova;
  wr.rkey = to.keys.rkey;
  return net[0].post_send(net.now(), from.qpn, wr);
}

TEST(EngineTemplate, AnRcQpMovedToANewPathSendsWithTheNewHeaders) {
  Pair net;
  RcOptions o;
  Side a = make_side(net[0], o);
  Side b1 = make_side(net[1], o);
  Side b2 = make_side(net[1], o);
  for (size_t i = 0; i < a.buf.size(); ++i) a.buf[i] = static_cast<uint8_t>(i * 13);
  connect_av(net[0], a, b1, net[1].config().ip, o, 100, 900, 64, 0, 0);
  connect_av(net[1], b1, a, net[0].config().ip, o, 900, 100, 64, 0, 0);
  ASSERT_EQ(write(net, a, b1, 3000, 1), 0);
  ASSERT_TRUE(net.run());
  const size_t first = net.sent(0).size();
  ASSERT_GE(first, 3u);
  for (const auto& p : net.sent(0)) {
    EXPECT_EQ(p.dest_qp, b1.qpn);
    EXPECT_EQ(p.hop_limit, 64);
    EXPECT_EQ(p.traffic_class & 0xfc, net[0].config().dscp << 2);  // no class in the AV: the port's DSCP
    EXPECT_EQ(p.udp_sport, wire::udp_sport_for_qps(a.qpn, b1.qpn));
    EXPECT_EQ(p.dst_ip, net[1].config().ip);
    EXPECT_EQ(p.src_ip, net[0].config().ip);
  }
  EXPECT_EQ(std::memcmp(b1.buf.data(), a.buf.data(), 3000), 0);

  // Back through RESET to another QP on another path: every header field the
  // template holds changes (dest QP, hop limit, DSCP, UDP source port from the
  // flow label).
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(net[0].modify_qp(a.qpn, r, IBV_QP_STATE), 0);
  constexpr uint32_t kFlow = 0x5a5a5;
  connect_av(net[0], a, b2, net[1].config().ip, o, 2000, 7000, 9, 0x20, kFlow);
  connect_av(net[1], b2, a, net[0].config().ip, o, 7000, 2000, 64, 0, 0);
  ASSERT_EQ(write(net, a, b2, 3000, 2), 0);
  ASSERT_TRUE(net.run());
  ASSERT_GE(net.sent(0).size(), first + 3);
  for (size_t i = first; i < net.sent(0).size(); ++i) {
    const auto& p = net.sent(0)[i];
    EXPECT_EQ(p.dest_qp, b2.qpn);
    EXPECT_EQ(p.hop_limit, 9);
    EXPECT_EQ(p.traffic_class & 0xfc, 0x20);
    EXPECT_EQ(p.udp_sport, wire::udp_sport_from_flow_label(kFlow));
    EXPECT_EQ(p.psn.value() - 2000 < 3, true);
  }
  EXPECT_EQ(std::memcmp(b2.buf.data(), a.buf.data(), 3000), 0);
  std::vector<ibv_wc> wc(4);
  ASSERT_EQ(net[0].poll_cq(a.scq, wc), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(wc[i].wr_id, i + 1u);
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
  }
  // b2 acknowledged on its own template: to a, from b2's path.
  ASSERT_FALSE(net.sent(1).empty());
  EXPECT_EQ(net.sent(1).back().dest_qp, a.qpn);
  EXPECT_EQ(net.sent(1).back().udp_sport, wire::udp_sport_for_qps(b2.qpn, a.qpn));
}

TEST(EngineTemplate, AUdQpRebuildsItsTemplateForEachNewAhOrQp) {
  Pair net;
  RcOptions o;
  constexpr uint32_t kQkey = 0x1234;
  Side a = make_side(net[0], o, IBV_QPT_UD);
  to_rts_ud(net[0], a.qpn, kQkey);
  Side d[2] = {make_side(net[1], o, IBV_QPT_UD), make_side(net[1], o, IBV_QPT_UD)};
  for (auto& s : d) to_rts_ud(net[1], s.qpn, kQkey);
  AhAttr ah[2];
  ah[0].dgid = ah[1].dgid = net[1].config().ip;
  ah[0].hop_limit = 5;
  ah[1].hop_limit = 200;
  ah[1].traffic_class = 0x88;
  AhHandle h[2] = {net[0].create_ah(a.pd, ah[0]).value(), net[0].create_ah(a.pd, ah[1]).value()};
  for (int i = 0; i < 100; ++i) a.buf[i] = static_cast<uint8_t>(i + 1);
  // (AH, QP) per send: the same twice, then each change alone.
  const int plan[][2] = {{0, 0}, {0, 0}, {1, 0}, {1, 1}, {0, 1}, {0, 0}, {1, 1}};
  constexpr int kSends = sizeof(plan) / sizeof(plan[0]);
  for (int i = 0; i < kSends; ++i) {
    Side& to = d[plan[i][1]];
    Sge rs{to.iova + static_cast<uint64_t>(i) * 200, 200, to.keys.lkey};
    ASSERT_EQ(net[1].post_recv(to.qpn, RecvWr{static_cast<uint64_t>(i), std::span(&rs, 1)}), 0);
    Sge sge{a.iova, static_cast<uint32_t>(10 + i), a.keys.lkey};
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = std::span(&sge, 1);
    wr.ah = h[plan[i][0]];
    wr.remote_qpn = to.qpn.value();
    wr.remote_qkey = kQkey;
    ASSERT_EQ(net[0].post_send(0, a.qpn, wr), 0);
  }
  ASSERT_TRUE(net.run());
  ASSERT_EQ(net.sent(0).size(), static_cast<size_t>(kSends));
  for (int i = 0; i < kSends; ++i) {
    const auto& p = net.sent(0)[i];
    const Side& to = d[plan[i][1]];
    const AhAttr& x = ah[plan[i][0]];
    EXPECT_EQ(p.dest_qp, to.qpn) << i;
    EXPECT_EQ(p.hop_limit, x.hop_limit) << i;
    EXPECT_EQ(p.traffic_class & 0xfc, x.traffic_class ? x.traffic_class : net[0].config().dscp << 2) << i;
    EXPECT_EQ(p.udp_sport, wire::udp_sport_for_qps(a.qpn, to.qpn)) << i;
    EXPECT_EQ(p.payload_len, static_cast<uint32_t>(10 + i)) << i;
  }
  std::vector<ibv_wc> wc(16);
  int got = 0;
  for (auto& s : d) got += net[1].poll_cq(s.rcq, std::span(wc).subspan(got));
  EXPECT_EQ(got, kSends);
  for (int i = 0; i < got; ++i) EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
}

}  // namespace
}  // namespace isoroce::transport::testing
