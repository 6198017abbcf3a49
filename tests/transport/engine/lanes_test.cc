// The engine's part in a port's lanes (docs/design.md, "Lanes"): QPNs in a
// lane's class (qpn_stride), objects made under the handles and keys another
// engine chose (set_next_pd/handle/mr_keys, each used once, EEXIST when
// taken), and same-device loopback frames offered to the driver first
// (set_loop_out).
#include <gtest/gtest.h>

#include <vector>

#include "transport/engine/engine.h"

namespace isoroce::transport {
namespace {

std::unique_ptr<Engine> make(uint32_t first, uint32_t stride, uint64_t seed) {
  EngineConfig c;
  c.mac = {0x02, 0, 0, 0, 0, 7};
  c.ip = wire::ipv4_mapped(0x0a000007);
  c.first_qpn = first;
  c.qpn_stride = stride;
  c.key_seed = seed;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok());
  return std::move(e.value());
}

// A QP of `type` with 4 WRs and 1 SGE each way on one CQ.
QpCreate small_qp(PdHandle pd, CqHandle cq, ibv_qp_type type) {
  QpCreate q;
  q.pd = pd;
  q.send_cq = q.recv_cq = cq;
  q.init.qp_type = type;
  q.init.cap.max_send_wr = q.init.cap.max_recv_wr = 4;
  q.init.cap.max_send_sge = q.init.cap.max_recv_sge = 1;
  return q;
}

TEST(EngineLanes, QpnsOfALaneKeepItsClass) {
  auto lane1 = make(1000 + 1, 3, 1);
  const PdHandle pd = lane1->alloc_pd().value();
  const CqHandle cq = lane1->create_cq(16).value();
  const QpCreate q = small_qp(pd, cq, IBV_QPT_RC);
  std::vector<uint32_t> qpns;
  for (int i = 0; i < 5; ++i) qpns.push_back(lane1->create_qp(q).value().value());
  lane1->destroy_qp(wire::Qpn(qpns[1]));
  qpns.push_back(lane1->create_qp(q).value().value());
  for (uint32_t n : qpns) EXPECT_EQ((n - 1000) % 3, 1u) << n;
  EXPECT_EQ(qpns[0], 1001u);
  EXPECT_EQ(qpns[4], 1013u);
}

TEST(EngineLanes, ObjectsTakeTheHandlesAndKeysTheFirstLaneChose) {
  auto lane0 = make(16, 2, 11), lane1 = make(17, 2, 99);
  // Lane 0 has objects of its own first (the daemon's), so its handles run ahead.
  (void)lane0->alloc_pd();
  (void)lane0->create_cq(4);
  const PdHandle pd = lane0->alloc_pd().value();
  lane1->set_next_pd(pd);
  EXPECT_EQ(lane1->alloc_pd().value(), pd);
  static uint8_t mem[8192];
  const verbs::MrKeys keys = lane0->reg_mr(pd, mem, sizeof mem, reinterpret_cast<uint64_t>(mem),
                                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE).value();
  lane1->set_next_mr_keys(keys);
  auto m = lane1->reg_mr(pd, mem, sizeof mem, reinterpret_cast<uint64_t>(mem),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m.value().lkey, keys.lkey);
  EXPECT_EQ(m.value().rkey, keys.rkey);
  EXPECT_EQ(lane1->mr_count(), 1u);
  // Once only: the next registration draws its own keys.
  auto other = lane1->reg_mr(pd, mem, 4096, reinterpret_cast<uint64_t>(mem), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other.value().lkey, keys.lkey);
  // Keys in use: EEXIST, and nothing registered.
  lane1->set_next_mr_keys(keys);
  EXPECT_EQ(lane1->reg_mr(pd, mem, 4096, reinterpret_cast<uint64_t>(mem), 0).err(), EEXIST);
  EXPECT_EQ(lane1->mr_count(), 2u);
  // CQ, SRQ and AH handles share one counter.
  const CqHandle cq = lane0->create_cq(8).value();
  lane1->set_next_handle(cq);
  EXPECT_EQ(lane1->create_cq(8).value(), cq);
  lane1->set_next_handle(cq);
  EXPECT_EQ(lane1->create_cq(8).err(), EEXIST);
  ibv_srq_attr sa{};
  sa.max_wr = 4;
  sa.max_sge = 1;
  const SrqHandle srq = lane0->create_srq(pd, sa).value();
  lane1->set_next_handle(srq);
  EXPECT_EQ(lane1->create_srq(pd, sa).value(), srq);
}

TEST(EngineLanes, LoopbackFramesAreOfferedToTheDriverFirst) {
  auto e = make(16, 2, 5);
  const wire::IpAddr self = e->config().ip;
  const PdHandle pd = e->alloc_pd().value();
  const CqHandle cq = e->create_cq(16).value();
  const QpCreate q = small_qp(pd, cq, IBV_QPT_UD);
  const wire::Qpn qpn = e->create_qp(q).value();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.qkey = 7;
  a.port_num = 1;
  ASSERT_EQ(e->modify_qp(qpn, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(e->modify_qp(qpn, a, IBV_QP_STATE), 0);
  a.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(e->modify_qp(qpn, a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  AhAttr ah;
  ah.dgid = self;
  const AhHandle h = e->create_ah(pd, ah).value();
  struct Out {
    std::vector<std::vector<uint8_t>> taken;
  } out;
  e->set_loop_out(
      [](void* ctx, std::span<const uint8_t> f) {
        auto& o = *static_cast<Out*>(ctx);
        o.taken.emplace_back(f.begin(), f.end());
        return true;
      },
      &out);
  static uint8_t buf[64];
  Sge sge{reinterpret_cast<uint64_t>(buf), 0, 0};
  SendWr wr;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.ah = h;
  wr.remote_qpn = 17;  // a QPN of the other lane (class 1 of stride 2)
  wr.remote_qkey = 7;
  wr.sg_list = std::span<const Sge>(&sge, 0);
  ASSERT_EQ(e->post_send(0, qpn, wr), 0);
  struct Sink : TxSink {
    std::vector<uint8_t> b;
    size_t n = 0;
    std::span<uint8_t> tx_buffer(size_t len) override { return b.assign(len, 0), b; }
    void tx_commit(Picos, size_t) override { ++n; }
  } sink;
  for (Picos t = 0; t < 1'000'000'000; t += 10'000'000) {
    e->advance(t);
    e->transmit(t, sink, 8);
  }
  EXPECT_EQ(out.taken.size(), 1u) << "the looped frame went to the driver";
  EXPECT_EQ(sink.n, 0u) << "nothing left through the port";
  EXPECT_EQ(e->counters().rx_unknown_qp, 0u) << "the engine did not receive it itself";
}

}  // namespace
}  // namespace isoroce::transport
