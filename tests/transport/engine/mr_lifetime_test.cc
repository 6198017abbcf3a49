// Issue 16 item 1: a memory region deregistered while an operation still uses
// it. After Engine::dereg_mr() returns, the engine never touches that MR's
// memory again (the daemon unmaps it right after): each path that uses an MR
// across packets stops with the error rxe and the spec give. Also the RETH
// lengths no message may have.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMtu = 1024;

// A registered buffer besides a Side's own.
struct Region {
  std::vector<uint8_t> buf;
  uint64_t iova = 0;
  verbs::MrKeys keys{};
};

Region reg(Engine& e, PdHandle pd, size_t len, uint32_t access, uint64_t iova_base, uint8_t fill = 0) {
  Region r;
  r.buf.assign(len, fill);
  r.iova = iova_base + (reinterpret_cast<uint64_t>(r.buf.data()) & 0xfff);
  auto mr = e.reg_mr(pd, r.buf.data(), len, r.iova, access);
  EXPECT_TRUE(mr.ok()) << mr.err();
  r.keys = mr.value();
  return r;
}

// The exploit of the issue: client A's WRITE is under way into client B's MR;
// B deregisters it; client C registers a region without remote access. The
// rest of A's WRITE must land nowhere: NAK remote access error, QP to ERR.
TEST(EngineMrLifetime, WriteContinuingIntoADeregisteredMrIsNakedAndWritesNothing) {
  Dut d;
  Region b = reg(d.net[1], d.s.pd, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0x20000000);
  std::vector<uint8_t> first(kMtu, 0x11), middle(kMtu, 0x22);
  auto f = d.spec(wire::op::kRcWriteFirst, 500);
  f.reth = wire::RethFields{b.iova, b.keys.rkey, 3 * kMtu};
  f.payload = first;
  f.ack_req = false;
  EXPECT_TRUE(d.receive(f).empty());
  EXPECT_TRUE(all_equal(std::span(b.buf).first(kMtu), 0x11));

  ASSERT_EQ(d.net[1].dereg_mr(b.keys.lkey), 0);
  const PdHandle other = d.net[1].alloc_pd().value();
  Region c = reg(d.net[1], other, 8192, IBV_ACCESS_LOCAL_WRITE, 0x20000000);

  auto m = d.spec(wire::op::kRcWriteMiddle, 501);
  m.payload = middle;
  auto out = d.receive(m);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x62);  // NAK, remote access error
  EXPECT_EQ(out[0].psn.value(), 501u);
  EXPECT_TRUE(all_equal(std::span(b.buf).subspan(kMtu), 0)) << "written after dereg_mr";
  EXPECT_TRUE(all_equal(c.buf, 0)) << "written into another client's region";
  EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
}

// Deregistered and registered again in the same PD with the same access: a
// new registration, not the one the WRITE FIRST named.
TEST(EngineMrLifetime, WriteContinuingIntoAReRegisteredRegionIsNaked) {
  Dut d;
  const uint32_t access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  Region b = reg(d.net[1], d.s.pd, 8192, access, 0x20000000);
  std::vector<uint8_t> data(kMtu, 0x33);
  auto f = d.spec(wire::op::kRcWriteFirst, 500);
  f.reth = wire::RethFields{b.iova, b.keys.rkey, 2 * kMtu};
  f.payload = data;
  f.ack_req = false;
  EXPECT_TRUE(d.receive(f).empty());
  ASSERT_EQ(d.net[1].dereg_mr(b.keys.lkey), 0);
  ASSERT_TRUE(d.net[1].reg_mr(d.s.pd, b.buf.data(), b.buf.size(), b.iova, access).ok());
  auto l = d.spec(wire::op::kRcWriteLast, 501);
  l.payload = data;
  auto out = d.receive(l);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x62);
  EXPECT_TRUE(all_equal(std::span(b.buf).subspan(kMtu), 0));
}

TEST(EngineMrLifetime, RethLongerThanAMessageIsAnInvalidRequestNak) {
  Dut d;
  // A region that claims 4 GB (nothing beyond its first page is touched).
  std::vector<uint8_t> page(4096, 0);
  auto mr = d.net[1].reg_mr(d.s.pd, page.data(), 1ull << 32, reinterpret_cast<uint64_t>(page.data()),
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_TRUE(mr.ok());
  std::vector<uint8_t> data(kMtu, 0x44);
  auto f = d.spec(wire::op::kRcWriteFirst, 500);
  f.reth = wire::RethFields{reinterpret_cast<uint64_t>(page.data()), mr.value().rkey, (1u << 31) + 1};
  f.payload = data;
  auto out = d.receive(f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x61);  // NAK, invalid request
  EXPECT_TRUE(all_equal(page, 0));
}

TEST(EngineMrLifetime, ReadOfTwoGigabytesFromASmallRegionIsARemoteAccessNak) {
  Dut d;
  auto f = d.spec(wire::op::kRcReadRequest, 500);
  f.reth = wire::RethFields{d.s.iova, d.s.keys.rkey, 1u << 31};
  auto out = d.receive(f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode, wire::op::kRcAck);
  EXPECT_EQ(syndrome(out[0]), 0x62);
}

// Runs the pair until engine `from` has sent at least n frames.
void run_frames(RcPair& p, int from, size_t n) {
  for (int i = 0; i < 10000 && p.net.sent(from).size() < n; ++i) p.net.run_until(p.net.now() + 100'000);
}

RcOptions slow_link() {
  RcOptions o;
  o.timeout = 4;
  o.retry_cnt = 2;
  return o;
}

// 100 Mb/s links: a 64 KB message lasts about 5 ms.
EngineConfig slow_port() {
  EngineConfig c;
  c.link_bps = 100'000'000;
  return c;
}

TEST(EngineMrLifetime, SendWhoseLocalMrIsDeregisteredMidMessageFailsWithLocalProtectionError) {
  RcPair p(slow_link(), slow_port());
  Region src = reg(p.net[0], p.s[0].pd, 64 * 1024, IBV_ACCESS_LOCAL_WRITE, 0x30000000, 0x55);
  Sge sge{src.iova, 64 * 1024, src.keys.lkey};
  ASSERT_EQ(post_write_to_peer(p, sge, 7), 0);
  run_frames(p, 0, 4);
  const size_t before = p.net.sent(0).size();
  ASSERT_LT(before, 64u) << "the message ended before the dereg";
  ASSERT_EQ(p.net[0].dereg_mr(src.keys.lkey), 0);
  std::fill(src.buf.begin(), src.buf.end(), 0xee);  // what the engine must not read any more
  ASSERT_TRUE(p.net.run());
  ASSERT_NO_FATAL_FAILURE(expect_lone_protection_error(p, 7u));
  EXPECT_EQ(std::count(p.s[1].buf.begin(), p.s[1].buf.end(), 0xee), 0);
}

// Posts on engine 0 a READ of len bytes from (remote_addr, rkey) into the
// local (iova, lkey).
int post_read(RcPair& p, uint64_t iova, uint32_t len, uint32_t lkey, uint64_t remote_addr, uint32_t rkey,
              uint64_t wr_id = 0) {
  const Sge sge{iova, len, lkey};
  return p.net[0].post_send(p.net.now(), p.s[0].qpn, one_sge_wr(sge, IBV_WR_RDMA_READ, remote_addr, rkey, wr_id));
}

// Deregisters engine 0's dst, marks its bytes and runs the pair out: the one
// WR completes with IBV_WC_LOC_PROT_ERR and nothing lands in dst after the dereg.
void dereg_then_expect_local_error(RcPair& p, Region& dst) {
  ASSERT_EQ(p.net[0].dereg_mr(dst.keys.lkey), 0);
  std::fill(dst.buf.begin(), dst.buf.end(), 0xee);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_TRUE(all_equal(dst.buf, 0xee));
}

TEST(EngineMrLifetime, ReadWhoseRemoteMrIsDeregisteredMidResponseIsARemoteAccessError) {
  RcPair p(slow_link(), slow_port());
  Region src = reg(p.net[1], p.s[1].pd, 64 * 1024,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 0x30000000, 0x66);
  ASSERT_EQ(post_read(p, p.s[0].iova, 64 * 1024, p.s[0].keys.lkey, src.iova, src.keys.rkey, 8), 0);
  run_frames(p, 1, 4);
  ASSERT_LT(p.net.sent(1).size(), 64u);
  ASSERT_EQ(p.net[1].dereg_mr(src.keys.lkey), 0);
  std::fill(src.buf.begin(), src.buf.end(), 0xee);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(std::count(p.s[0].buf.begin(), p.s[0].buf.end(), 0xee), 0);
  EXPECT_EQ(p.net[1].query_qp(p.s[1].qpn)->state(), IBV_QPS_ERR);
}

TEST(EngineMrLifetime, ReadWhoseLocalMrIsDeregisteredMidResponseFailsLocally) {
  RcPair p(slow_link(), slow_port());
  Region dst = reg(p.net[0], p.s[0].pd, 64 * 1024, IBV_ACCESS_LOCAL_WRITE, 0x30000000);
  ASSERT_EQ(post_read(p, dst.iova, 64 * 1024, dst.keys.lkey, p.s[1].iova, p.s[1].keys.rkey), 0);
  run_frames(p, 1, 4);
  dereg_then_expect_local_error(p, dst);
}

TEST(EngineMrLifetime, ReceiveWhoseMrIsDeregisteredMidSendFailsBothSides) {
  RcPair p(slow_link(), slow_port());
  Region dst = reg(p.net[1], p.s[1].pd, 64 * 1024, IBV_ACCESS_LOCAL_WRITE, 0x30000000);
  Sge rsge{dst.iova, 64 * 1024, dst.keys.lkey};
  ASSERT_EQ(p.net[1].post_recv(p.s[1].qpn, RecvWr{5, std::span(&rsge, 1)}), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 64 * 1024, 0, 6), 0);
  run_frames(p, 0, 4);
  ASSERT_EQ(p.net[1].dereg_mr(dst.keys.lkey), 0);
  std::fill(dst.buf.begin(), dst.buf.end(), 0xee);
  ASSERT_TRUE(p.net.run());
  auto rc = p.poll(1, true);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_LOC_PROT_ERR);
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_REM_OP_ERR);
  EXPECT_TRUE(all_equal(dst.buf, 0xee));
}

TEST(EngineMrLifetime, UdSendWhoseMrIsDeregisteredBeforeTransmitFails) {
  Pair net;
  RcOptions o;
  Side a = make_side(net[0], o, IBV_QPT_UD);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qkey = 1;
  ASSERT_EQ(net[0].modify_qp(a.qpn, at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  at = {};
  at.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(net[0].modify_qp(a.qpn, at, IBV_QP_STATE), 0);
  at.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(net[0].modify_qp(a.qpn, at, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  AhAttr ah;
  ah.dgid = net[1].config().ip;
  auto h = net[0].create_ah(a.pd, ah);
  ASSERT_TRUE(h.ok());
  Region src = reg(net[0], a.pd, 4096, IBV_ACCESS_LOCAL_WRITE, 0x30000000);
  for (uint64_t id : {1, 2}) {
    Sge sge{src.iova, 500, src.keys.lkey};
    SendWr wr;
    wr.wr_id = id;
    wr.sg_list = std::span(&sge, 1);
    wr.ah = h.value();
    wr.remote_qpn = 0x99;
    wr.remote_qkey = 1;
    ASSERT_EQ(net[0].post_send(0, a.qpn, wr), 0);
  }
  ASSERT_EQ(net[0].dereg_mr(src.keys.lkey), 0);
  ASSERT_TRUE(net.run());
  std::vector<ibv_wc> wc(4);
  ASSERT_EQ(net[0].poll_cq(a.scq, wc), 2);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(net[0].query_qp(a.qpn)->state(), IBV_QPS_SQE);
  EXPECT_TRUE(net.sent(0).empty());
}

// The L_Key of a work request is checked once, at post; a packet uses what the
// check found only while no MR was deregistered since (Engine: SendWqe::mr_deregs).
// Deregistered and registered again between the post and the first packet: the
// WR's L_Key names nothing now, so the WR fails and nothing of the buffer leaves.
TEST(EngineMrLifetime, WriteWhoseLocalMrIsReRegisteredBetweenPostAndTransmitFails) {
  RcPair p(slow_link(), slow_port());
  Region src = reg(p.net[0], p.s[0].pd, 8192, IBV_ACCESS_LOCAL_WRITE, 0x30000000, 0x55);
  Sge sge{src.iova, 8192, src.keys.lkey};
  ASSERT_EQ(post_write_to_peer(p, sge, 9), 0);
  ASSERT_EQ(p.net[0].dereg_mr(src.keys.lkey), 0);
  std::fill(src.buf.begin(), src.buf.end(), 0xee);
  auto again = p.net[0].reg_mr(p.s[0].pd, src.buf.data(), src.buf.size(), src.iova, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(p.net.run());
  ASSERT_NO_FATAL_FAILURE(expect_lone_protection_error(p, 9u));
  EXPECT_EQ(std::count(p.s[1].buf.begin(), p.s[1].buf.end(), 0xee), 0);
  EXPECT_EQ(std::count(p.s[1].buf.begin(), p.s[1].buf.end(), 0x55), 0);
}

// The same for a READ's destination: the responses find no region to write.
TEST(EngineMrLifetime, ReadWhoseLocalMrIsDeregisteredBetweenPostAndResponseFails) {
  RcPair p(slow_link(), slow_port());
  Region dst = reg(p.net[0], p.s[0].pd, 8192, IBV_ACCESS_LOCAL_WRITE, 0x30000000);
  std::fill(p.s[1].buf.begin(), p.s[1].buf.begin() + 8192, 0x42);
  ASSERT_EQ(post_read(p, dst.iova, 8192, dst.keys.lkey, p.s[1].iova, p.s[1].keys.rkey), 0);
  dereg_then_expect_local_error(p, dst);
}

// Another MR deregistered after the post: the WR's own regions are still there,
// so its packets check their SGEs again, pass, and the data arrives whole.
// Two SGEs from two regions at unrelated iovas (one zero-based) whose pieces
// straddle packets: each piece is read from where its own region maps it.
TEST(EngineMrLifetime, OtherMrsDeregisteredAfterPostLeaveTheWrWhole) {
  for (bool dereg_other : {false, true}) {
    SCOPED_TRACE(dereg_other ? "another MR deregistered after the post" : "no dereg");
    RcPair p(slow_link(), slow_port());
    Region a = reg(p.net[0], p.s[0].pd, 3000, IBV_ACCESS_LOCAL_WRITE, 0x30000000);
    Region b;
    b.buf.resize(5000);
    auto mb = p.net[0].reg_mr(p.s[0].pd, b.buf.data(), b.buf.size(), 0,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
    ASSERT_TRUE(mb.ok());
    b.keys = mb.value();
    Region other = reg(p.net[0], p.s[0].pd, 4096, IBV_ACCESS_LOCAL_WRITE, 0x50000000);
    for (size_t i = 0; i < a.buf.size(); ++i) a.buf[i] = static_cast<uint8_t>(i * 7 + 1);
    for (size_t i = 0; i < b.buf.size(); ++i) b.buf[i] = static_cast<uint8_t>(i * 13 + 5);
    Sge sges[2] = {{a.iova + 100, 2500, a.keys.lkey}, {200, 4000, b.keys.lkey}};
    SendWr wr;
    wr.wr_id = 11;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = std::span(sges, 2);
    wr.remote_addr = p.s[1].iova + 64;
    wr.rkey = p.s[1].keys.rkey;
    ASSERT_EQ(p.net[0].post_send(p.net.now(), p.s[0].qpn, wr), 0);
    if (dereg_other) {
      ASSERT_EQ(p.net[0].dereg_mr(other.keys.lkey), 0);
    }
    ASSERT_TRUE(p.net.run());
    auto sc = p.poll(0, false);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(std::memcmp(p.s[1].buf.data() + 64, a.buf.data() + 100, 2500), 0);
    EXPECT_EQ(std::memcmp(p.s[1].buf.data() + 64 + 2500, b.buf.data() + 200, 4000), 0);
  }
}

}  // namespace
}  // namespace isoroce::transport::testing
