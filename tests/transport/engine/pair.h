// Two engines joined by one full-duplex link in virtual time, for protocol
// tests. Each engine's frames leave at the departure its scheduler grants,
// arrive after the link delay, and pass through an optional per-frame hook
// that may drop, corrupt or duplicate them (seeded, so every run is the same).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "transport/engine/engine.h"
#include "transport/wire/parse.h"

namespace isoroce::transport::testing {

inline wire::IpAddr ip4(uint32_t v) { return wire::ipv4_mapped(v); }

struct Frame {
  int to;  // engine index
  std::vector<uint8_t> bytes;
};

// What a hook does with a frame in flight.
enum class Fate { kDeliver, kDrop, kDuplicate, kDelay /* 3 us late: reordered */ };

class Pair : private TxSink {
 public:
  using Hook = std::function<Fate(int from, std::vector<uint8_t>& frame)>;

  explicit Pair(EngineConfig base = {}, Picos delay = 1'000'000 /* 1 us */) : delay_(delay) {
    for (int i = 0; i < 2; ++i) {
      EngineConfig c = base;
      c.mac = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(i + 1)};
      c.ip = ip4(0x0a000001 + i);
      c.key_seed = 100 + i;
      c.qpn_seed = 7 + i;
      auto e = Engine::create(c);
      EXPECT_TRUE(e.ok());
      eng_[i] = std::move(e.value());
    }
    eng_[0]->set_neighbor(eng_[1]->config().ip, eng_[1]->config().mac);
    eng_[1]->set_neighbor(eng_[0]->config().ip, eng_[0]->config().mac);
  }

  Engine& operator[](int i) { return *eng_[i]; }
  Picos now() const { return now_; }
  void set_hook(Hook h) { hook_ = std::move(h); }
  // Called after each frame an engine received, before either transmits again (what
  // an application does between two passes of the daemon's worker).
  void set_after_receive(std::function<void(int to)> f) { after_receive_ = std::move(f); }
  // Every frame that left engine `from`, parsed, in order, and its departure.
  const std::vector<wire::RocePacket>& sent(int from) const { return sent_[from]; }
  const std::vector<Picos>& departures(int from) const { return departures_[from]; }

  // Runs until nothing happens or `until`; returns false on hitting the event cap.
  bool run(Picos until = 10'000'000'000'000ull, size_t max_events = 5'000'000) {
    for (size_t ev = 0; ev < max_events; ++ev) {
      for (int i = 0; i < 2; ++i) {
        eng_[i]->advance(now_);
        from_ = i;
        eng_[i]->transmit(now_, *this, 64);
      }
      Picos next = std::min(eng_[0]->next_deadline(), eng_[1]->next_deadline());
      if (!inflight_.empty()) next = std::min(next, inflight_.begin()->first.first);
      if (next == sched::kNever || next > until) return true;
      now_ = std::max(now_, next);
      while (!inflight_.empty() && inflight_.begin()->first.first <= now_) {
        Frame f = std::move(inflight_.begin()->second);
        inflight_.erase(inflight_.begin());
        eng_[f.to]->receive(now_, f.bytes);
        if (after_receive_) after_receive_(f.to);
      }
    }
    return false;
  }

  // Steps the clock forward to t and runs what is due.
  void run_until(Picos t) { run(t); now_ = std::max(now_, t); }

 private:
  std::span<uint8_t> tx_buffer(size_t len) override {
    buf_.assign(len, 0);
    return buf_;
  }
  void tx_commit(Picos departure, size_t len) override {
    buf_.resize(len);
    auto parsed = wire::parse_frame(buf_);
    EXPECT_TRUE(parsed.ok()) << "engine sent a malformed frame";
    sent_[from_].push_back(parsed.pkt);
    departures_[from_].push_back(std::max(departure, now_));
    const int to = 1 - from_;
    Fate fate = hook_ ? hook_(from_, buf_) : Fate::kDeliver;
    if (fate == Fate::kDrop) return;
    const Picos at = std::max(departure, now_) + delay_ + (fate == Fate::kDelay ? 3'000'000 : 0);
    inflight_.emplace(std::make_pair(at, seq_++), Frame{to, buf_});
    if (fate == Fate::kDuplicate) inflight_.emplace(std::make_pair(at + 1000, seq_++), Frame{to, buf_});
  }

  std::unique_ptr<Engine> eng_[2];
  Picos delay_;
  Picos now_ = 0;
  uint64_t seq_ = 0;
  int from_ = 0;
  std::vector<uint8_t> buf_;
  std::map<std::pair<Picos, uint64_t>, Frame> inflight_;
  std::vector<wire::RocePacket> sent_[2];
  std::vector<Picos> departures_[2];
  Hook hook_;
  std::function<void(int)> after_receive_;
};

// One side of a connection: PD, CQs, a QP and a registered buffer.
struct Side {
  PdHandle pd = 0;
  CqHandle scq = 0, rcq = 0;
  wire::Qpn qpn;
  std::vector<uint8_t> buf;
  verbs::MrKeys keys{};
  uint64_t iova = 0;
};

struct RcOptions {
  ibv_mtu mtu = IBV_MTU_1024;
  uint32_t psn0 = 100, psn1 = 5000;
  uint8_t timeout = 8;       // 1 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t max_rd_atomic = 16;
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  size_t buf_bytes = 1 << 20;
  uint32_t access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                    IBV_ACCESS_REMOTE_ATOMIC;
  bool sq_sig_all = true;
};

inline Side make_side(Engine& e, const RcOptions& o, ibv_qp_type type = IBV_QPT_RC) {
  Side s;
  s.pd = e.alloc_pd().value();
  s.scq = e.create_cq(4096).value();
  s.rcq = e.create_cq(4096).value();
  s.buf.assign(o.buf_bytes, 0);
  s.iova = 0x10000000 + (reinterpret_cast<uint64_t>(s.buf.data()) & 0xfff);  // same page offset
  auto mr = e.reg_mr(s.pd, s.buf.data(), s.buf.size(), s.iova, o.access);
  EXPECT_TRUE(mr.ok()) << mr.err();
  s.keys = mr.value();
  QpCreate c;
  c.pd = s.pd;
  c.send_cq = s.scq;
  c.recv_cq = s.rcq;
  c.init.qp_type = type;
  c.init.cap.max_send_wr = o.max_send_wr;
  c.init.cap.max_recv_wr = o.max_recv_wr;
  c.init.cap.max_send_sge = 4;
  c.init.cap.max_recv_sge = 4;
  c.init.cap.max_inline_data = 256;
  c.init.sq_sig_all = o.sq_sig_all;
  auto q = e.create_qp(c);
  EXPECT_TRUE(q.ok()) << q.err();
  s.qpn = q.value();
  return s;
}

// A side whose RC QP takes its receives from an SRQ of max_wr receives of one SGE
// (its limit not armed): PD, CQs, 64 KB registered for local writes, the QP. *srq
// is the SRQ; a failure is a test failure (the caller asserts !HasFailure()).
inline Side make_srq_side(Engine& e, uint32_t max_wr, SrqHandle* srq) {
  Side b;
  b.pd = e.alloc_pd().value();
  b.scq = e.create_cq(64).value();
  b.rcq = e.create_cq(64).value();
  b.buf.assign(1 << 16, 0);
  b.iova = 0x10000000 + (reinterpret_cast<uint64_t>(b.buf.data()) & 0xfff);
  b.keys = e.reg_mr(b.pd, b.buf.data(), b.buf.size(), b.iova, IBV_ACCESS_LOCAL_WRITE).value();
  ibv_srq_attr sa{};
  sa.max_wr = max_wr;
  sa.max_sge = 1;
  auto s = e.create_srq(b.pd, sa);
  EXPECT_TRUE(s.ok()) << s.err();
  if (!s.ok()) return b;
  *srq = s.value();
  QpCreate c;
  c.pd = b.pd;
  c.send_cq = b.scq;
  c.recv_cq = b.rcq;
  c.use_srq = true;
  c.srq = *srq;
  c.init.cap.max_send_wr = 16;
  c.init.cap.max_send_sge = 1;
  auto q = e.create_qp(c);
  EXPECT_TRUE(q.ok()) << q.err();
  if (q.ok()) b.qpn = q.value();
  return b;
}

// The address vector's fields beyond the peer's address.
struct PathAttrs {
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
};

// INIT -> RTR -> RTS with the attribute masks an application passes.
inline void connect(Engine& e, Side& s, const Side& peer, const wire::IpAddr& peer_ip,
                    const RcOptions& o, uint32_t my_psn, uint32_t peer_psn, const PathAttrs& path = {}) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ASSERT_EQ(e.modify_qp(s.qpn, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer_ip.data(), 16);
  a.ah_attr.grh.hop_limit = path.hop_limit;
  a.ah_attr.grh.traffic_class = path.traffic_class;
  a.ah_attr.grh.flow_label = path.flow_label;
  a.path_mtu = o.mtu;
  a.dest_qp_num = peer.qpn.value();
  a.rq_psn = peer_psn;
  a.max_dest_rd_atomic = o.max_rd_atomic;
  a.min_rnr_timer = o.min_rnr_timer;
  ASSERT_EQ(e.modify_qp(s.qpn, a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  a.sq_psn = my_psn;
  a.max_rd_atomic = o.max_rd_atomic;
  ASSERT_EQ(e.modify_qp(s.qpn, a,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
            0);
}

// A UD QP: RESET -> INIT (with its Q_Key) -> RTR -> RTS.
inline void to_rts_ud(Engine& e, wire::Qpn qpn, uint32_t qkey) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  ASSERT_EQ(e.modify_qp(qpn, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(e.modify_qp(qpn, a, IBV_QP_STATE), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 1;
  ASSERT_EQ(e.modify_qp(qpn, a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
}

// A connected RC pair: side 0 on engine 0, side 1 on engine 1.
struct RcPair {
  explicit RcPair(const RcOptions& o = {}, EngineConfig base = {}) : net(base), opt(o) {
    s[0] = make_side(net[0], o);
    s[1] = make_side(net[1], o);
    connect(net[0], s[0], s[1], net[1].config().ip, o, o.psn0, o.psn1);
    connect(net[1], s[1], s[0], net[0].config().ip, o, o.psn1, o.psn0);
  }

  // Posts on side i; returns the errno.
  int post(int i, ibv_wr_opcode op, uint64_t local_off, uint32_t len, uint64_t remote_off = 0,
           uint64_t wr_id = 0, uint32_t flags = 0) {
    Sge sge{s[i].iova + local_off, len, s[i].keys.lkey};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.sg_list = std::span(&sge, len ? 1 : 0);
    wr.remote_addr = s[1 - i].iova + remote_off;
    wr.rkey = s[1 - i].keys.rkey;
    wr.imm_data = htonl(0x1234abcd);
    return net[i].post_send(net.now(), s[i].qpn, wr);
  }
  int post_recv(int i, uint64_t off, uint32_t len, uint64_t wr_id = 0) {
    Sge sge{s[i].iova + off, len, s[i].keys.lkey};
    RecvWr wr{wr_id, std::span(&sge, 1)};
    return net[i].post_recv(s[i].qpn, wr);
  }
  std::vector<ibv_wc> poll(int i, bool recv) {
    std::vector<ibv_wc> out(4096);
    int n = net[i].poll_cq(recv ? s[i].rcq : s[i].scq, out);
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

  Pair net;
  RcOptions opt;
  Side s[2];
};

// Side 0's only completion is wr_id's, failed with IBV_WC_LOC_PROT_ERR, and its
// QP went to ERR.
inline void expect_lone_protection_error(RcPair& p, uint64_t wr_id) {
  const auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, wr_id);
  EXPECT_EQ(sc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(p.net[0].query_qp(p.s[0].qpn)->state(), IBV_QPS_ERR);
}

// A work request of the one SGE `sge` (which must outlive the post).
inline SendWr one_sge_wr(const Sge& sge, ibv_wr_opcode op, uint64_t remote_addr, uint32_t rkey, uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  return wr;
}

// Side 0 posts an RDMA WRITE of `sge` into side 1's buffer; post_send's result.
inline int post_write_to_peer(RcPair& p, const Sge& sge, uint64_t wr_id) {
  return p.net[0].post_send(p.net.now(), p.s[0].qpn,
                            one_sge_wr(sge, IBV_WR_RDMA_WRITE, p.s[1].iova, p.s[1].keys.rkey, wr_id));
}

}  // namespace isoroce::transport::testing
