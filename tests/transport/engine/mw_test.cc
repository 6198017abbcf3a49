// Memory windows in virtual time (IBTA 10.6.7): type 1 and type 2 windows
// bound by BIND_MW work requests, their R_Keys checked by the peer's
// responder like MR keys (range, access, PD, the binding QP), LOCAL_INV,
// SEND_WITH_INV, the bind rules and the MR that cannot go while bound.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;

uint32_t inc_rkey(uint32_t rkey) { return (rkey & 0xffffff00u) | ((rkey + 1) & 0xff); }  // ibv_inc_rkey()

struct MwPair : RcPair {
  MwPair() : RcPair(options()) {}
  static RcOptions options() {
    RcOptions o;
    o.access = kMrAccess;
    return o;
  }
  // A local operation (BIND_MW or LOCAL_INV) on side i; its completion.
  ibv_wc local(int i, const SendWr& wr) {
    EXPECT_EQ(net[i].post_send(net.now(), s[i].qpn, wr), 0);
    EXPECT_TRUE(net.run());
    auto sc = poll(i, false);
    EXPECT_EQ(sc.size(), 1u);
    return sc.empty() ? ibv_wc{} : sc[0];
  }
  ibv_wc bind(int i, uint32_t mw_rkey, uint32_t new_rkey, uint64_t off, uint64_t len, uint32_t access,
              uint32_t lkey = 0) {
    SendWr wr;
    wr.wr_id = 500;
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind = verbs::MwBind{mw_rkey, new_rkey, lkey ? lkey : s[i].keys.lkey, s[i].iova + off, len, access};
    return local(i, wr);
  }
  ibv_wc invalidate(int i, uint32_t rkey) {
    SendWr wr;
    wr.wr_id = 501;
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.invalidate_rkey = rkey;
    return local(i, wr);
  }
  // One RDMA operation from side 0 with rkey at offset off of side 1's buffer.
  ibv_wc_status remote(ibv_wr_opcode op, uint32_t rkey, uint64_t off, uint32_t len) {
    Sge sge{s[0].iova, len, s[0].keys.lkey};
    SendWr wr;
    wr.opcode = op;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = s[1].iova + off;
    wr.rkey = rkey;
    wr.compare_add = 1;
    EXPECT_EQ(net[0].post_send(net.now(), s[0].qpn, wr), 0);
    EXPECT_TRUE(net.run());
    auto sc = poll(0, false);
    return sc.size() == 1 ? sc[0].status : IBV_WC_GENERAL_ERR;
  }
};

TEST(EngineMw, Type2WindowGrantsItsRangeAndAccessOnly) {
  MwPair p;
  auto mw = p.net[1].alloc_mw(p.s[1].pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(mw.ok());
  const uint32_t key = inc_rkey(mw.value());
  const ibv_wc b = p.bind(1, mw.value(), key, 4096, 8192, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  EXPECT_EQ(b.status, IBV_WC_SUCCESS);
  EXPECT_EQ(b.opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(b.wr_id, 500u);
  p.fill(0, 0, 8192, 7);
  EXPECT_EQ(p.remote(IBV_WR_RDMA_WRITE, key, 4096, 8192), IBV_WC_SUCCESS);
  EXPECT_TRUE(p.same(0, 0, 1, 4096, 8192));
  EXPECT_EQ(p.remote(IBV_WR_ATOMIC_FETCH_AND_ADD, key, 4096 + 64, 8), IBV_WC_SUCCESS);
  // Outside the window (the MR goes on) and an access it does not grant.
  MwPair q;
  auto mw2 = q.net[1].alloc_mw(q.s[1].pd, IBV_MW_TYPE_2);
  const uint32_t key2 = inc_rkey(mw2.value());
  ASSERT_EQ(q.bind(1, mw2.value(), key2, 4096, 8192, IBV_ACCESS_REMOTE_WRITE).status, IBV_WC_SUCCESS);
  EXPECT_EQ(q.remote(IBV_WR_RDMA_WRITE, key2, 4096 + 8000, 1000), IBV_WC_REM_ACCESS_ERR);
  MwPair r;
  auto mw3 = r.net[1].alloc_mw(r.s[1].pd, IBV_MW_TYPE_2);
  const uint32_t key3 = inc_rkey(mw3.value());
  ASSERT_EQ(r.bind(1, mw3.value(), key3, 0, 8192, IBV_ACCESS_REMOTE_WRITE).status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.remote(IBV_WR_RDMA_READ, key3, 0, 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(r.net[1].counters().rx_bad_rkey, 1u);
  // The key before the bind names nothing.
  MwPair t;
  auto mw4 = t.net[1].alloc_mw(t.s[1].pd, IBV_MW_TYPE_2);
  EXPECT_EQ(t.remote(IBV_WR_RDMA_READ, mw4.value(), 0, 64), IBV_WC_REM_ACCESS_ERR) << "a free window";
}

TEST(EngineMw, LocalInvalidateAndSendWithInvalidateEndAWindow) {
  MwPair p;
  auto mw = p.net[1].alloc_mw(p.s[1].pd, IBV_MW_TYPE_2);
  uint32_t key = inc_rkey(mw.value());
  ASSERT_EQ(p.bind(1, mw.value(), key, 0, 65536, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  EXPECT_EQ(p.remote(IBV_WR_RDMA_READ, key, 0, 64), IBV_WC_SUCCESS);
  const ibv_wc inv = p.invalidate(1, key);
  EXPECT_EQ(inv.status, IBV_WC_SUCCESS);
  EXPECT_EQ(inv.opcode, IBV_WC_LOCAL_INV);
  // Bound again with the next key: the old key is dead, the new one works.
  const uint32_t key2 = inc_rkey(key);
  ASSERT_EQ(p.bind(1, key, key2, 0, 65536, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  EXPECT_EQ(p.remote(IBV_WR_RDMA_READ, key2, 0, 64), IBV_WC_SUCCESS);

  // The peer invalidates it with its SEND.
  ASSERT_EQ(p.post_recv(1, 100000, 256, 77), 0);
  Sge sge{p.s[0].iova, 100, p.s[0].keys.lkey};
  SendWr wr;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.sg_list = std::span(&sge, 1);
  wr.invalidate_rkey = key2;
  ASSERT_EQ(p.net[0].post_send(p.net.now(), p.s[0].qpn, wr), 0);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sc[0].opcode, IBV_WC_SEND);
  auto rc = p.poll(1, true);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(rc[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(rc[0].invalidated_rkey, key2);
  EXPECT_EQ(rc[0].byte_len, 100u);
  bool ieth_seen = false;
  for (const auto& pkt : p.net.sent(0)) ieth_seen |= pkt.ieth.has_value() && *pkt.ieth == key2;
  EXPECT_TRUE(ieth_seen) << "RC_SEND_ONLY_WITH_INVALIDATE with the key in its IETH";
  EXPECT_EQ(p.remote(IBV_WR_RDMA_READ, key2, 0, 64), IBV_WC_REM_ACCESS_ERR);
}

// Another application of the same engine (another PD) names this window's key
// in its LOCAL_INV: the window is not in its PD, so the invalidation fails on
// its own QP and the window keeps granting access to its owner's peer.
TEST(EngineMw, LocalInvalidateFromAnotherPdLeavesTheWindowAlone) {
  MwPair p;
  auto mw = p.net[1].alloc_mw(p.s[1].pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(mw.ok());
  const uint32_t key = inc_rkey(mw.value());
  ASSERT_EQ(p.bind(1, mw.value(), key, 0, 65536, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);

  Side other = make_side(p.net[1], MwPair::options());
  ASSERT_NE(other.pd, p.s[1].pd);
  Side far;
  far.qpn = wire::Qpn(0x99);
  connect(p.net[1], other, far, p.net[0].config().ip, MwPair::options(), 7000, 8000);
  SendWr wr;
  wr.wr_id = 9;
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.invalidate_rkey = key;
  ASSERT_EQ(p.net[1].post_send(p.net.now(), other.qpn, wr), 0);
  ASSERT_TRUE(p.net.run());
  ibv_wc wc[4];
  const int n = p.net[1].poll_cq(other.scq, wc);
  ASSERT_EQ(n, 1);
  EXPECT_NE(wc[0].status, IBV_WC_SUCCESS) << "a window of another PD";
  EXPECT_EQ(p.remote(IBV_WR_RDMA_READ, key, 0, 64), IBV_WC_SUCCESS) << "the owner's window still works";
}

TEST(EngineMw, SendWithInvalidateOfAKeyThatIsNoType2WindowFails) {
  for (int mr_key = 0; mr_key < 2; ++mr_key) {
    MwPair p;
    ASSERT_EQ(p.post_recv(1, 0, 256, 77), 0);
    Sge sge{p.s[0].iova, 10, p.s[0].keys.lkey};
    SendWr wr;
    wr.opcode = IBV_WR_SEND_WITH_INV;
    wr.sg_list = std::span(&sge, 1);
    wr.invalidate_rkey = mr_key ? p.s[1].keys.rkey : 0x12345678;  // an MR is never invalidated remotely
    ASSERT_EQ(p.net[0].post_send(p.net.now(), p.s[0].qpn, wr), 0);
    ASSERT_TRUE(p.net.run());
    auto rc = p.poll(1, true);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, IBV_WC_REM_INV_REQ_ERR);
    auto sc = p.poll(0, false);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, IBV_WC_REM_INV_REQ_ERR);
  }
}

TEST(EngineMw, Type2WindowIsTheBindingQpsOnly) {
  MwPair p;
  // A second QP pair: b on engine 1 in s[1]'s PD (so only the QP differs).
  RcOptions o = MwPair::options();
  Side a = make_side(p.net[0], o);
  Side b = make_side(p.net[1], o);
  QpCreate c;
  c.pd = p.s[1].pd;
  c.send_cq = b.scq;
  c.recv_cq = b.rcq;
  c.init.qp_type = IBV_QPT_RC;
  c.init.cap.max_send_wr = c.init.cap.max_recv_wr = 16;
  c.init.cap.max_send_sge = c.init.cap.max_recv_sge = 1;
  c.init.sq_sig_all = true;
  b.qpn = p.net[1].create_qp(c).value();
  connect(p.net[0], a, b, p.net[1].config().ip, o, 300, 400);
  connect(p.net[1], b, a, p.net[0].config().ip, o, 400, 300);
  auto mw = p.net[1].alloc_mw(p.s[1].pd, IBV_MW_TYPE_2);
  const uint32_t key = inc_rkey(mw.value());
  ASSERT_EQ(p.bind(1, mw.value(), key, 0, 4096, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  Sge sge{a.iova, 64, a.keys.lkey};
  SendWr wr;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = p.s[1].iova;
  wr.rkey = key;
  ASSERT_EQ(p.net[0].post_send(p.net.now(), a.qpn, wr), 0);
  ASSERT_TRUE(p.net.run());
  std::vector<ibv_wc> wc(4);
  ASSERT_EQ(p.net[0].poll_cq(a.scq, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << "10.6.7.2.2: a type 2 window is its QP's";
  // Through the binding QP the same read works.
  EXPECT_EQ(p.remote(IBV_WR_RDMA_READ, key, 0, 64), IBV_WC_SUCCESS);
}

TEST(EngineMw, Type1WindowRebindsWithANewKeyAndCannotBeInvalidated) {
  MwPair p;
  auto mw = p.net[1].alloc_mw(p.s[1].pd, IBV_MW_TYPE_1);
  ASSERT_TRUE(mw.ok());
  EXPECT_EQ(p.remote(IBV_WR_RDMA_READ, mw.value(), 0, 8), IBV_WC_REM_ACCESS_ERR) << "valid but empty";
  MwPair q;
  auto w1 = q.net[1].alloc_mw(q.s[1].pd, IBV_MW_TYPE_1);
  const uint32_t k1 = inc_rkey(w1.value());
  ASSERT_EQ(q.bind(1, w1.value(), k1, 0, 4096, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  EXPECT_EQ(q.remote(IBV_WR_RDMA_READ, k1, 100, 64), IBV_WC_SUCCESS);
  const uint32_t k2 = inc_rkey(k1);  // type 1 may be bound again while valid
  ASSERT_EQ(q.bind(1, k1, k2, 8192, 4096, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  EXPECT_EQ(q.remote(IBV_WR_RDMA_READ, k2, 8192, 64), IBV_WC_SUCCESS);
  const ibv_wc inv = q.invalidate(1, k2);  // o10-37.2.26
  EXPECT_EQ(inv.status, IBV_WC_LOC_QP_OP_ERR);
  EXPECT_EQ(q.net[1].query_qp(q.s[1].qpn)->state(), IBV_QPS_ERR);
  MwPair r;
  auto w2 = r.net[1].alloc_mw(r.s[1].pd, IBV_MW_TYPE_1);
  const uint32_t k3 = inc_rkey(w2.value());
  ASSERT_EQ(r.bind(1, w2.value(), k3, 0, 4096, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  ASSERT_EQ(r.bind(1, k3, inc_rkey(k3), 8192, 4096, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.remote(IBV_WR_RDMA_READ, k3, 0, 64), IBV_WC_REM_ACCESS_ERR) << "the key before the rebind";
}

TEST(EngineMw, BindRulesFailTheBindAndTheQp) {
  struct Case {
    const char* what;
    uint32_t mr_access;  // of a second MR to bind to (0: the side's own)
    uint64_t off, len;
    uint32_t access;
    bool second_bind;    // bind a type 2 window twice
  };
  const Case cases[] = {
      {"MR without MW_BIND (C10-73)", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 0, 64, IBV_ACCESS_REMOTE_READ, false},
      {"writable window on an MR without LOCAL_WRITE (C10-74)", IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_READ, 0, 64,
       IBV_ACCESS_REMOTE_WRITE, false},
      {"outside the MR (C10-75)", 0, (1 << 20) - 32, 64, IBV_ACCESS_REMOTE_READ, false},
      {"type 2 bound with length 0 (o10-37.2.40)", 0, 0, 0, IBV_ACCESS_REMOTE_READ, false},
      {"type 2 bound twice (o10-37.2.30)", 0, 0, 64, IBV_ACCESS_REMOTE_READ, true},
  };
  for (const Case& c : cases) {
    MwPair p;
    uint32_t lkey = 0;
    std::vector<uint8_t> other(8192);
    if (c.mr_access) {
      // 4 KiB at the page offset of the side's iova (an MR's address and iova share it).
      uint8_t* at = other.data() + ((p.s[1].iova - reinterpret_cast<uintptr_t>(other.data())) & 0xfff);
      auto mr = p.net[1].reg_mr(p.s[1].pd, at, 4096, p.s[1].iova, c.mr_access);
      ASSERT_TRUE(mr.ok()) << c.what;
      lkey = mr.value().lkey;
    }
    auto mw = p.net[1].alloc_mw(p.s[1].pd, IBV_MW_TYPE_2);
    uint32_t key = mw.value();
    if (c.second_bind) {
      ASSERT_EQ(p.bind(1, key, inc_rkey(key), 0, 64, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
      key = inc_rkey(key);
    }
    const ibv_wc b = p.bind(1, key, inc_rkey(key), c.off, c.len, c.access, lkey);
    EXPECT_EQ(b.status, IBV_WC_MW_BIND_ERR) << c.what;
    EXPECT_EQ(p.net[1].query_qp(p.s[1].qpn)->state(), IBV_QPS_ERR) << c.what;
  }
}

TEST(EngineMw, BindAfterWritesCompletesInOrderAndTheMrStaysWhileBound) {
  MwPair p;
  auto mw = p.net[0].alloc_mw(p.s[0].pd, IBV_MW_TYPE_2);
  const uint32_t key = inc_rkey(mw.value());
  // WRITE, BIND, WRITE in one go on side 0: completions in order.
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 5000, 0, 1), 0);
  SendWr bw;
  bw.wr_id = 2;
  bw.opcode = IBV_WR_BIND_MW;
  bw.bind = verbs::MwBind{mw.value(), key, p.s[0].keys.lkey, p.s[0].iova, 4096, IBV_ACCESS_REMOTE_READ};
  ASSERT_EQ(p.net[0].post_send(p.net.now(), p.s[0].qpn, bw), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 5000, 8192, 3), 0);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sc[i].wr_id, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(sc[i].status, IBV_WC_SUCCESS);
  }
  EXPECT_EQ(sc[1].opcode, IBV_WC_BIND_MW);
  // Side 1 reads through side 0's window.
  Sge sge{p.s[1].iova, 64, p.s[1].keys.lkey};
  SendWr rd;
  rd.opcode = IBV_WR_RDMA_READ;
  rd.sg_list = std::span(&sge, 1);
  rd.remote_addr = p.s[0].iova + 128;
  rd.rkey = key;
  ASSERT_EQ(p.net[1].post_send(p.net.now(), p.s[1].qpn, rd), 0);
  ASSERT_TRUE(p.net.run());
  auto rc = p.poll(1, false);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(p.same(0, 128, 1, 0, 64));
  EXPECT_EQ(p.net[0].dereg_mr(p.s[0].keys.lkey), EINVAL) << "a window is bound to it";
  EXPECT_EQ(p.net[0].dealloc_mw(key), 0);
  EXPECT_EQ(p.net[0].dealloc_mw(key), EINVAL);
  EXPECT_EQ(p.net[0].dereg_mr(p.s[0].keys.lkey), 0);
}

TEST(EngineMw, AllocChecksThePdAndTheType) {
  Pair net;
  const PdHandle pd = net[0].alloc_pd().value();
  EXPECT_EQ(net[0].alloc_mw(pd + 100, IBV_MW_TYPE_2).err(), EINVAL);
  EXPECT_EQ(net[0].alloc_mw(pd, 3).err(), EINVAL);
  auto mw = net[0].alloc_mw(pd, IBV_MW_TYPE_1);
  ASSERT_TRUE(mw.ok());
  EXPECT_EQ(net[0].dealloc_pd(pd), EBUSY) << "the window holds its PD";
  EXPECT_EQ(net[0].dealloc_mw(mw.value()), 0);
  EXPECT_EQ(net[0].dealloc_pd(pd), 0);
}

}  // namespace
}  // namespace isoroce::transport::testing
