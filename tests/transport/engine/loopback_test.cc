// Same-device loopback in virtual time: QPs of one engine addressed by the
// port's own GID (no neighbour entry). Every verb and the error paths behave
// as between two engines, every frame is granted by the port's scheduler, and
// none reaches the driver's sink.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

// One engine and a sink that records what would have left through the port.
class Loop : private TxSink {
 public:
  explicit Loop(EngineConfig c = {}) {
    c.mac = {0x02, 0, 0, 0, 0, 9};
    c.ip = ip4(0x0a000009);
    c.key_seed = 55;
    c.qpn_seed = 3;
    auto e = Engine::create(c);
    EXPECT_TRUE(e.ok());
    eng_ = std::move(e.value());
  }
  Engine& engine() { return *eng_; }
  Picos now() const { return now_; }
  size_t left_port() const { return committed_; }

  // Runs until nothing is due (or until); false on hitting the event cap.
  bool run(Picos until = 10'000'000'000'000ull, size_t max_events = 5'000'000) {
    for (size_t ev = 0; ev < max_events; ++ev) {
      eng_->advance(now_);
      eng_->transmit(now_, *this, 64);
      const Picos next = eng_->next_deadline();
      if (next == sched::kNever || next > until) return true;
      now_ = std::max(now_, next);
    }
    return false;
  }
  void run_until(Picos t) { run(t); now_ = std::max(now_, t); }
  // One pass of a worker: what is due, one transmit (which receives the looped
  // frames at its end), then the clock to the next deadline.
  void step() {
    eng_->advance(now_);
    eng_->transmit(now_, *this, 64);
    if (const Picos next = eng_->next_deadline(); next != sched::kNever) now_ = std::max(now_, next);
  }

 private:
  std::span<uint8_t> tx_buffer(size_t len) override {
    buf_.assign(len, 0);
    return buf_;
  }
  void tx_commit(Picos, size_t) override { ++committed_; }

  std::unique_ptr<Engine> eng_;
  Picos now_ = 0;
  size_t committed_ = 0;
  std::vector<uint8_t> buf_;
};

// Two RC QPs of one engine connected to each other through the own GID.
struct LoopRc {
  explicit LoopRc(const RcOptions& o = {}, EngineConfig c = {}) : net(c) {
    s[0] = make_side(net.engine(), o);
    s[1] = make_side(net.engine(), o);
    const wire::IpAddr self = net.engine().config().ip;
    connect(net.engine(), s[0], s[1], self, o, o.psn0, o.psn1);
    connect(net.engine(), s[1], s[0], self, o, o.psn1, o.psn0);
  }
  int post(int i, ibv_wr_opcode op, uint64_t local_off, uint32_t len, uint64_t remote_off = 0,
           uint64_t wr_id = 0, uint32_t rkey = 0) {
    Sge sge{s[i].iova + local_off, len, s[i].keys.lkey};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.sg_list = std::span(&sge, len ? 1 : 0);
    wr.remote_addr = s[1 - i].iova + remote_off;
    wr.rkey = rkey ? rkey : s[1 - i].keys.rkey;
    wr.imm_data = htonl(0x55aa);
    wr.compare_add = 5;
    return net.engine().post_send(net.now(), s[i].qpn, wr);
  }
  int post_recv(int i, uint64_t off, uint32_t len, uint64_t wr_id = 0) {
    Sge sge{s[i].iova + off, len, s[i].keys.lkey};
    return net.engine().post_recv(s[i].qpn, RecvWr{wr_id, std::span(&sge, 1)});
  }
  std::vector<ibv_wc> poll(int i, bool recv) {
    std::vector<ibv_wc> out(4096);
    const int n = net.engine().poll_cq(recv ? s[i].rcq : s[i].scq, out);
    out.resize(std::max(n, 0));
    return out;
  }
  void fill(int i, uint64_t off, size_t len, uint32_t seed) {
    std::mt19937 rng(seed);
    for (size_t k = 0; k < len; ++k) s[i].buf[off + k] = static_cast<uint8_t>(rng());
  }
  bool same(int a, uint64_t a_off, int b, uint64_t b_off, size_t len) const {
    return std::memcmp(s[a].buf.data() + a_off, s[b].buf.data() + b_off, len) == 0;
  }

  Loop net;
  Side s[2];
};

TEST(EngineLoopback, TheOwnGidNeedsNoNeighbour) {
  Loop net;
  Engine& e = net.engine();
  const PdHandle pd = e.alloc_pd().value();
  AhAttr ah;
  ah.dgid = e.config().ip;
  EXPECT_TRUE(e.create_ah(pd, ah).ok());
  ah.dgid = ip4(0x0a000063);  // another address still needs ARP's answer
  auto other = e.create_ah(pd, ah);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.err(), EHOSTUNREACH);
}

TEST(EngineLoopback, RcEveryVerbBetweenTwoQpsOfOneDevice) {
  LoopRc p;
  p.fill(0, 0, 300000, 1);
  p.fill(1, 500000, 70000, 2);
  uint64_t v = 40;
  std::memcpy(p.s[1].buf.data() + 800000, &v, 8);
  ASSERT_EQ(p.post_recv(1, 900000, 20000, 11), 0);
  ASSERT_EQ(p.post_recv(1, 0, 0, 12), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND_WITH_IMM, 0, 10000, 0, 1), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 200000, 100000, 2), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE_WITH_IMM, 200000, 5, 400000, 3), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 600000, 70000, 500000, 4), 0);
  ASSERT_EQ(p.post(0, IBV_WR_ATOMIC_FETCH_AND_ADD, 700000, 8, 800000, 5), 0);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 5u);
  for (size_t i = 0; i < sc.size(); ++i) {
    EXPECT_EQ(sc[i].status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(sc[i].wr_id, i + 1);
  }
  auto rc = p.poll(1, true);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].byte_len, 10000u);
  EXPECT_EQ(rc[0].src_qp, p.s[0].qpn.value());
  EXPECT_EQ(rc[1].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_TRUE(p.same(0, 0, 1, 900000, 10000));
  EXPECT_TRUE(p.same(0, 0, 1, 100000, 200000));
  EXPECT_TRUE(p.same(0, 200000, 1, 400000, 5));
  EXPECT_TRUE(p.same(0, 600000, 1, 500000, 70000));
  uint64_t orig = 0, now = 0;
  std::memcpy(&orig, p.s[0].buf.data() + 700000, 8);
  std::memcpy(&now, p.s[1].buf.data() + 800000, 8);
  EXPECT_EQ(orig, 40u);
  EXPECT_EQ(now, 45u);
  EXPECT_EQ(p.net.left_port(), 0u) << "loopback frames never reach the driver";
  const EngineCounters& c = p.net.engine().counters();
  EXPECT_GT(c.tx_loopback, 200u);
  EXPECT_EQ(c.tx_loopback, c.tx_frames);
  EXPECT_EQ(c.rx_frames, c.tx_frames);
  EXPECT_EQ(c.rx_dropped, 0u);
  EXPECT_GT(c.acks_sent, 0u);
}

TEST(EngineLoopback, AQpConnectedToItself) {
  RcOptions o;
  Loop net;
  Side s = make_side(net.engine(), o);
  connect(net.engine(), s, s, net.engine().config().ip, o, 7, 7);
  for (int i = 0; i < 4096; ++i) s.buf[i] = static_cast<uint8_t>(i * 3);
  Sge rsge{s.iova + 10000, 100, s.keys.lkey};
  ASSERT_EQ(net.engine().post_recv(s.qpn, RecvWr{9, std::span(&rsge, 1)}), 0);
  Sge sge{s.iova, 4096, s.keys.lkey};
  SendWr w;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.sg_list = std::span(&sge, 1);
  w.remote_addr = s.iova + 65536;
  w.rkey = s.keys.rkey;
  ASSERT_EQ(net.engine().post_send(0, s.qpn, w), 0);
  Sge small{s.iova, 100, s.keys.lkey};
  w.opcode = IBV_WR_SEND;
  w.sg_list = std::span(&small, 1);
  ASSERT_EQ(net.engine().post_send(0, s.qpn, w), 0);
  ASSERT_TRUE(net.run());
  std::vector<ibv_wc> wc(8);
  ASSERT_EQ(net.engine().poll_cq(s.scq, wc), 2);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(s.buf.data(), s.buf.data() + 65536, 4096), 0);
  EXPECT_EQ(std::memcmp(s.buf.data(), s.buf.data() + 10000, 100), 0);
}

TEST(EngineLoopback, BadRkeyAndOutOfBoundsAreRemoteAccessErrors) {
  for (int out_of_bounds = 0; out_of_bounds < 2; ++out_of_bounds) {
    LoopRc p;
    if (out_of_bounds) {
      ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 4096, p.s[1].buf.size() - 100, 1), 0);
    } else {
      ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 0, 64, 0, 1, p.s[1].keys.rkey ^ 0x100), 0);
    }
    ASSERT_TRUE(p.net.run());
    auto sc = p.poll(0, false);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, IBV_WC_REM_ACCESS_ERR) << out_of_bounds;
    EXPECT_EQ(p.net.engine().counters().rx_bad_rkey, 1u);
    EXPECT_EQ(p.net.engine().query_qp(p.s[0].qpn)->state(), IBV_QPS_ERR);
    EXPECT_EQ(p.net.engine().query_qp(p.s[1].qpn)->state(), IBV_QPS_ERR);  // 9.9.3.1.2: responder too
    EXPECT_EQ(p.net.left_port(), 0u);
  }
}

TEST(EngineLoopback, RnrWaitsThenExhausts) {
  RcOptions o;
  o.rnr_retry = 7;  // forever
  LoopRc p(o);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 100, 0, 1), 0);
  p.net.run_until(2'000'000'000);  // 2 ms of RNR NAKs
  EXPECT_GT(p.net.engine().counters().rnr_naks_received, 3u);
  EXPECT_TRUE(p.poll(0, false).empty());
  ASSERT_EQ(p.post_recv(1, 0, 100, 2), 0);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);

  o.rnr_retry = 2;
  LoopRc q(o);
  ASSERT_EQ(q.post(0, IBV_WR_SEND, 0, 100, 0, 1), 0);
  ASSERT_TRUE(q.net.run());
  sc = q.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(q.net.engine().counters().rnr_naks_received, 3u);
}

TEST(EngineLoopback, UdDatagramToAQpOfTheSameDevice) {
  Loop net;
  Engine& e = net.engine();
  RcOptions o;
  Side a = make_side(e, o, IBV_QPT_UD);
  Side b = make_side(e, o, IBV_QPT_UD);
  for (Side* s : {&a, &b}) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = 0x1111;
    ASSERT_EQ(e.modify_qp(s->qpn, at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    at = {};
    at.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(e.modify_qp(s->qpn, at, IBV_QP_STATE), 0);
    at.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(e.modify_qp(s->qpn, at, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }
  Sge rsge{b.iova, 2000, b.keys.lkey};
  ASSERT_EQ(e.post_recv(b.qpn, RecvWr{5, std::span(&rsge, 1)}), 0);
  AhAttr ah;
  ah.dgid = e.config().ip;
  auto h = e.create_ah(a.pd, ah);
  ASSERT_TRUE(h.ok());
  for (int i = 0; i < 900; ++i) a.buf[i] = static_cast<uint8_t>(i * 5);
  Sge sge{a.iova, 900, a.keys.lkey};
  SendWr wr;
  wr.wr_id = 1;
  wr.sg_list = std::span(&sge, 1);
  wr.ah = h.value();
  wr.remote_qpn = b.qpn.value();
  wr.remote_qkey = 0x1111;
  ASSERT_EQ(e.post_send(0, a.qpn, wr), 0);
  wr.wr_id = 2;
  wr.remote_qkey = 0x2222;  // wrong Q_Key: dropped as from another device
  ASSERT_EQ(e.post_send(0, a.qpn, wr), 0);
  ASSERT_TRUE(net.run());
  std::vector<ibv_wc> wc(4);
  ASSERT_EQ(e.poll_cq(a.scq, wc), 2);
  ASSERT_EQ(e.poll_cq(b.rcq, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].byte_len, 940u);
  EXPECT_EQ(wc[0].src_qp, a.qpn.value());
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_GRH);
  EXPECT_EQ(std::memcmp(b.buf.data() + 40, a.buf.data(), 900), 0);
  EXPECT_EQ(e.counters().rx_ud_qkey_mismatch, 1u);
  EXPECT_EQ(net.left_port(), 0u);
}

// The loop is behind the scheduler: a QP's rate limit paces its looped frames
// as it paces frames to the wire.
TEST(EngineLoopback, LoopedFramesArePacedByTheScheduler) {
  EngineConfig c;
  c.policy = "tassel";
  LoopRc p({}, c);
  ASSERT_EQ(p.net.engine().set_qp_rate(0, p.s[0].qpn, 1'000'000'000), 0);  // 1 Gbit/s
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 500000, 0, 1), 0);
  // 500 kB (and their headers) at 1 Gbit/s take over 4 ms; at the line rate
  // (100 Gbit/s) well under 0.5 ms.
  p.net.run_until(4'000'000'000ull);
  EXPECT_TRUE(p.poll(0, false).empty());
  p.net.run_until(6'000'000'000ull);
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
  LoopRc fast({}, c);
  ASSERT_EQ(fast.post(0, IBV_WR_RDMA_WRITE, 0, 500000, 0, 1), 0);
  fast.net.run_until(500'000'000ull);
  EXPECT_EQ(fast.poll(0, false).size(), 1u);
}

// An engine with a peer on the wire and two QPs talking through its own GID:
// only the peer's frames leave through the port.
// ibv_rc_pingpong on one device: the receiving QP is destroyed between two worker
// passes, right after the pass that completed its receive; the ACK it owed still
// reaches the sending QP of the same engine.
TEST(EngineLoopback, AQpDestroyedRightAfterItsLastReceiveStillAcknowledgesIt) {
  LoopRc p;
  ASSERT_EQ(p.post_recv(1, 0, 4096, 7), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 3000, 0, 1), 0);
  std::vector<ibv_wc> got;
  for (int i = 0; i < 100 && got.empty(); ++i) {
    p.net.step();
    got = p.poll(1, true);
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  ASSERT_EQ(p.net.engine().destroy_qp(p.s[1].qpn), 0);
  ASSERT_TRUE(p.net.run());
  const auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(p.net.engine().counters().retransmits, 0u);
  EXPECT_EQ(p.net.left_port(), 0u);
}

TEST(EngineLoopback, FramesToANeighbourStillLeave) {
  RcPair p;
  RcOptions o;
  Engine& e = p.net[0];
  Side a = make_side(e, o), b = make_side(e, o);
  connect(e, a, b, e.config().ip, o, 1, 2);
  connect(e, b, a, e.config().ip, o, 2, 1);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 10000, 0, 1), 0);
  Sge sge{a.iova, 10000, a.keys.lkey};
  SendWr w;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.sg_list = std::span(&sge, 1);
  w.remote_addr = b.iova;
  w.rkey = b.keys.rkey;
  ASSERT_EQ(e.post_send(0, a.qpn, w), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(p.poll(0, false).size(), 1u);
  std::vector<ibv_wc> wc(4);
  ASSERT_EQ(e.poll_cq(a.scq, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_GT(e.counters().tx_loopback, 0u);
  for (const auto& pkt : p.net.sent(0)) EXPECT_EQ(pkt.dst_ip, p.net[1].config().ip);
  EXPECT_EQ(p.net.sent(0).size() + e.counters().tx_loopback, e.counters().tx_frames);
}

}  // namespace
}  // namespace isoroce::transport::testing
