// Memory windows on a port with lanes (docs/design.md, "Lanes";
// transport/engine/windows.h): the engines of one port's lanes share one
// table of windows (Engine::share_windows). In virtual time: engine 1 of an
// RcPair is lane 1 of the target port, `lane0` an engine beside it holding
// the same PD and MR under the same handle, keys and registration id, with a
// QP of its own. A window allocated and bound in one lane is used by a peer
// through a QP of the other, invalidated from either, and the MR it is bound
// to cannot be deregistered in any lane.
#include <gtest/gtest.h>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;

uint32_t inc_rkey(uint32_t rkey) { return (rkey & 0xffffff00u) | ((rkey + 1) & 0xff); }  // ibv_inc_rkey()

class NullTx final : public TxSink {
 public:
  std::span<uint8_t> tx_buffer(size_t len) override {
    buf_.assign(len, 0);
    return buf_;
  }
  void tx_commit(Picos, size_t) override {}

 private:
  std::vector<uint8_t> buf_;
};

struct LanePort {
  RcPair p{options()};
  std::unique_ptr<Engine> lane0;
  Side s0;  // lane 0's QP, in the PD and with the MR of side 1
  NullTx tx;

  static RcOptions options() {
    RcOptions o;
    o.access = kMrAccess;
    return o;
  }
  LanePort() {
    EngineConfig c;
    c.mac = p.net[1].config().mac;
    c.ip = p.net[1].config().ip;
    c.key_seed = 555;  // its own keys, unless told
    c.first_qpn = 2000;
    auto e = Engine::create(c);
    EXPECT_TRUE(e.ok());
    lane0 = std::move(e.value());
    p.net[1].share_windows(*lane0);
    lane0->set_neighbor(p.net[0].config().ip, p.net[0].config().mac);
    // The objects of side 1 made again in lane 0 under its handle and keys, as ctrl/lane_objects.cc does.
    lane0->set_next_pd(p.s[1].pd);
    s0.pd = lane0->alloc_pd().value();
    EXPECT_EQ(s0.pd, p.s[1].pd);
    lane0->set_next_mr_keys(p.s[1].keys);
    auto mr = lane0->reg_mr(s0.pd, p.s[1].buf.data(), p.s[1].buf.size(), p.s[1].iova, kMrAccess);
    EXPECT_TRUE(mr.ok());
    EXPECT_EQ(mr.value().id, p.s[1].keys.id) << "the same registration id in every lane";
    s0.keys = mr.value();
    s0.iova = p.s[1].iova;
    s0.scq = s0.rcq = lane0->create_cq(64).value();
    QpCreate q;
    q.pd = s0.pd;
    q.send_cq = q.recv_cq = s0.scq;
    q.init.qp_type = IBV_QPT_RC;
    q.init.cap.max_send_wr = q.init.cap.max_recv_wr = 16;
    q.init.cap.max_send_sge = q.init.cap.max_recv_sge = 1;
    s0.qpn = lane0->create_qp(q).value();
    connect(*lane0, s0, p.s[0], p.net[0].config().ip, options(), 1, 1);
  }
  // A BIND_MW or LOCAL_INV on lane 0's QP; its completion.
  ibv_wc lane0_local(const SendWr& wr) {
    EXPECT_EQ(lane0->post_send(p.net.now(), s0.qpn, wr), 0);
    lane0->advance(p.net.now());
    lane0->transmit(p.net.now(), tx, 64);
    std::vector<ibv_wc> wc(4);
    const int n = lane0->poll_cq(s0.scq, wc);
    EXPECT_EQ(n, 1);
    return n == 1 ? wc[0] : ibv_wc{};
  }
  ibv_wc lane0_bind(uint32_t mw_rkey, uint32_t new_rkey, uint64_t off, uint64_t len, uint32_t access) {
    SendWr wr;
    wr.wr_id = 600;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind = verbs::MwBind{mw_rkey, new_rkey, s0.keys.lkey, s0.iova + off, len, access};
    return lane0_local(wr);
  }
  ibv_wc lane0_invalidate(uint32_t rkey) {
    SendWr wr;
    wr.wr_id = 601;
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = rkey;
    return lane0_local(wr);
  }
  // A BIND_MW on lane 1's QP (side 1).
  ibv_wc lane1_bind(uint32_t mw_rkey, uint32_t new_rkey, uint64_t off, uint64_t len, uint32_t access) {
    SendWr wr;
    wr.wr_id = 700;
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind = verbs::MwBind{mw_rkey, new_rkey, p.s[1].keys.lkey, p.s[1].iova + off, len, access};
    EXPECT_EQ(p.net[1].post_send(p.net.now(), p.s[1].qpn, wr), 0);
    EXPECT_TRUE(p.net.run());
    auto sc = p.poll(1, false);
    EXPECT_EQ(sc.size(), 1u);
    return sc.empty() ? ibv_wc{} : sc[0];
  }
  // The peer (side 0) accesses lane 1's QP with rkey at offset off of the buffer.
  ibv_wc_status remote(ibv_wr_opcode op, uint32_t rkey, uint64_t off, uint32_t len, uint64_t local_off = 0) {
    Sge sge{p.s[0].iova + local_off, len, p.s[0].keys.lkey};
    SendWr wr;
    wr.opcode = op;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = p.s[1].iova + off;
    wr.rkey = rkey;
    wr.compare_add = 1;
    EXPECT_EQ(p.net[0].post_send(p.net.now(), p.s[0].qpn, wr), 0);
    EXPECT_TRUE(p.net.run());
    auto sc = p.poll(0, false);
    return sc.size() == 1 ? sc[0].status : IBV_WC_GENERAL_ERR;
  }
};

TEST(EngineLanes, AType1WindowBoundInOneLaneIsUsedThroughAQpOfTheOther) {
  LanePort l;
  auto mw = l.lane0->alloc_mw(l.s0.pd, IBV_MW_TYPE_1);
  ASSERT_TRUE(mw.ok());
  EXPECT_EQ(l.p.net[1].mw_count(), 1u) << "one table: allocated in lane 0, there in lane 1";
  const uint32_t k1 = inc_rkey(mw.value());
  const ibv_wc b = l.lane0_bind(mw.value(), k1, 4096, 16384, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(b.status, IBV_WC_SUCCESS);
  EXPECT_EQ(b.opcode, IBV_WC_BIND_MW);
  // A multi-packet WRITE and READ through lane 1's QP, bytes checked.
  l.p.fill(0, 0, 16384, 21);
  EXPECT_EQ(l.remote(IBV_WR_RDMA_WRITE, k1, 4096, 16384), IBV_WC_SUCCESS);
  EXPECT_TRUE(l.p.same(0, 0, 1, 4096, 16384));
  l.p.fill(1, 4096 + 100, 5000, 22);
  EXPECT_EQ(l.remote(IBV_WR_RDMA_READ, k1, 4096 + 100, 5000, 65536), IBV_WC_SUCCESS);
  EXPECT_TRUE(l.p.same(0, 65536, 1, 4096 + 100, 5000));
  // The MR cannot go in either lane while the window is bound to it.
  EXPECT_EQ(l.p.net[1].dereg_mr(l.p.s[1].keys.lkey), EINVAL);
  EXPECT_EQ(l.lane0->dereg_mr(l.s0.keys.lkey), EINVAL);
  // Rebound in lane 1 with the next key: lane 1 grants the new range under the
  // new key and nothing under the old, and so does lane 0's table (one table).
  const uint32_t k2 = inc_rkey(k1);
  ASSERT_EQ(l.lane1_bind(k1, k2, 0, 4096, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  EXPECT_EQ(l.remote(IBV_WR_RDMA_READ, k2, 0, 64), IBV_WC_SUCCESS);
  EXPECT_EQ(l.lane0_invalidate(k2).status, IBV_WC_LOC_QP_OP_ERR) << "o10-37.2.26: not a type 2 window";
  EXPECT_EQ(l.remote(IBV_WR_RDMA_READ, k1, 4096, 64), IBV_WC_REM_ACCESS_ERR) << "the key before the rebind";
  EXPECT_EQ(l.lane0->dealloc_mw(k2), 0);
  EXPECT_EQ(l.p.net[1].mw_count(), 0u);
  EXPECT_EQ(l.p.net[1].dereg_mr(l.p.s[1].keys.lkey), 0);
  EXPECT_EQ(l.lane0->dereg_mr(l.s0.keys.lkey), 0);
}

TEST(EngineLanes, AType2WindowBoundInOneLaneIsInvalidatedFromTheOther) {
  LanePort l;
  auto mw = l.lane0->alloc_mw(l.s0.pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(mw.ok());
  const uint32_t key = inc_rkey(mw.value());
  // Bound by lane 1's QP: the peer's QP reaches it through that QP.
  ASSERT_EQ(l.lane1_bind(mw.value(), key, 0, 8192, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC).status,
            IBV_WC_SUCCESS);
  l.p.fill(0, 0, 8192, 5);
  EXPECT_EQ(l.remote(IBV_WR_RDMA_WRITE, key, 0, 8192), IBV_WC_SUCCESS);
  EXPECT_TRUE(l.p.same(0, 0, 1, 0, 8192));
  EXPECT_EQ(l.remote(IBV_WR_ATOMIC_FETCH_AND_ADD, key, 64, 8, 100000), IBV_WC_SUCCESS);
  EXPECT_EQ(l.lane0->dereg_mr(l.s0.keys.lkey), EINVAL);
  // LOCAL_INV by a QP of lane 0 (same PD): in force in lane 1 at its completion.
  const ibv_wc inv = l.lane0_invalidate(key);
  EXPECT_EQ(inv.status, IBV_WC_SUCCESS);
  EXPECT_EQ(inv.opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(l.remote(IBV_WR_RDMA_WRITE, key, 0, 64), IBV_WC_REM_ACCESS_ERR);
  // Free again, it holds the MR in neither lane.
  EXPECT_EQ(l.p.net[1].dereg_mr(l.p.s[1].keys.lkey), 0);
  EXPECT_EQ(l.lane0->dereg_mr(l.s0.keys.lkey), 0);
}

TEST(EngineLanes, AType2WindowIsItsBindingQpsInEveryLane) {
  LanePort l;
  auto mw = l.lane0->alloc_mw(l.s0.pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(mw.ok());
  const uint32_t key = inc_rkey(mw.value());
  // Bound by lane 0's QP: lane 1's QP (the peer's partner) may not use it.
  ASSERT_EQ(l.lane0_bind(mw.value(), key, 0, 8192, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  EXPECT_EQ(l.remote(IBV_WR_RDMA_READ, key, 0, 64), IBV_WC_REM_ACCESS_ERR) << "10.6.7.2.2";
  EXPECT_EQ(l.lane0->dealloc_mw(key), 0);
  EXPECT_EQ(l.p.net[1].mw_count(), 0u);
}

// A rebind in the other lane while a message through the window is in
// progress in this one: its next packet (a WRITE's middle packet, a READ's
// response) looks the window up again and finds the key gone, as with one lane.
TEST(EngineLanes, ARebindInTheOtherLaneStopsAMessageInProgressAtItsNextPacket) {
  for (const ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
    SCOPED_TRACE(op == IBV_WR_RDMA_WRITE ? "WRITE" : "READ");
    LanePort l;
    auto mw = l.lane0->alloc_mw(l.s0.pd, IBV_MW_TYPE_1);
    ASSERT_TRUE(mw.ok());
    const uint32_t k1 = inc_rkey(mw.value());
    ASSERT_EQ(l.lane0_bind(mw.value(), k1, 0, 65536, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ).status,
              IBV_WC_SUCCESS);
    int received = 0;
    ibv_wc rebound{};
    l.p.net.set_after_receive([&](int to) {
      if (to != 1 || ++received != 1) return;
      // Lane 1 took the WRITE's first packet or the READ request; lane 0 binds
      // the window again (same range, the next key) before lane 1 goes on.
      rebound = l.lane0_bind(k1, inc_rkey(k1), 0, 65536, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    });
    EXPECT_EQ(l.remote(op, k1, 0, 16384), IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(rebound.status, IBV_WC_SUCCESS);
    EXPECT_EQ(rebound.opcode, IBV_WC_BIND_MW);
    l.p.net.set_after_receive(nullptr);
  }
}

}  // namespace
}  // namespace isoroce::transport::testing
