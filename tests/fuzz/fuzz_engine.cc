// libFuzzer target: two engines with real state, and a wire between them that
// the input controls. Node A (10.0.0.1) and node B (10.0.0.2) each have a PD,
// a CQ, two MRs (one of them deregistered and registered again by the input,
// with work still outstanding), an RC QP connected to the other's and a UD QP
// with an AH to the other's. Before the input runs, both have receives posted
// and requests in flight: WRITE, READ, both atomics, SEND.
//
// The input is a sequence of commands (one byte each, then its operands):
// deliver the next frame one node sent to the other, deliver it with a header
// byte changed (ICRC resealed, so it reaches the transport, or not), replay
// it, drop it, inject a frame built from fields of the input (any opcode,
// PSN near the expected one, keys and addresses valid or not, sometimes from
// another source address), post sends of every opcode with lengths and keys
// from the input, post receives, advance the clock (small steps and jumps past
// every timer), poll, move a QP to ERR and back, dereg/reg the second MR.
//
// Checked: ASan/UBSan (memory errors, UB), every frame an engine sends parses
// (wire::parse_frame), and the canaries around each node's memory (no write
// outside an MR). The last input byte picks the policy: fifo, or tassel with
// DCQCN (CE marks in the input's traffic classes, CNPs both ways).
#include <arpa/inet.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "transport/engine/engine.h"
#include "transport/wire/build.h"
#include "transport/wire/icrc.h"
#include "transport/wire/parse.h"

using namespace isoroce;
using namespace isoroce::transport;

namespace {

constexpr uint8_t kOpcodes[] = {
    wire::op::kRcSendFirst, wire::op::kRcSendMiddle, wire::op::kRcSendLast,
    wire::op::kRcSendLastImm, wire::op::kRcSendOnly, wire::op::kRcSendOnlyImm,
    wire::op::kRcWriteFirst, wire::op::kRcWriteMiddle, wire::op::kRcWriteLast,
    wire::op::kRcWriteLastImm, wire::op::kRcWriteOnly, wire::op::kRcWriteOnlyImm,
    wire::op::kRcReadRequest, wire::op::kRcReadResponseFirst, wire::op::kRcReadResponseMiddle,
    wire::op::kRcReadResponseLast, wire::op::kRcReadResponseOnly, wire::op::kRcAck,
    wire::op::kRcAtomicAck, wire::op::kRcCompareSwap, wire::op::kRcFetchAdd,
    wire::op::kRcSendLastInv, wire::op::kUdSendOnly, wire::op::kUdSendOnlyImm, wire::op::kCnp};

constexpr ibv_wr_opcode kWrOps[] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,
                                    IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
                                    IBV_WR_ATOMIC_FETCH_AND_ADD};

constexpr size_t kBuf = 64 * 1024;
constexpr size_t kGuard = 4096;
constexpr uint8_t kCanary = 0xa5;
constexpr size_t kMaxQueued = 256;  // frames on the wire each way
constexpr uint32_t kRqPsn = 100, kSqPsn = 1000;

class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
  uint32_t u32() { return u16() | static_cast<uint32_t>(u16()) << 16; }
  uint64_t u64() { return u32() | static_cast<uint64_t>(u32()) << 32; }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

// Frames an engine transmits: checked, then queued on the wire.
class Wire : public TxSink {
 public:
  std::span<uint8_t> tx_buffer(size_t len) override {
    buf_.resize(len);
    return buf_;
  }
  void tx_commit(Picos, size_t len) override {
    buf_.resize(len);
    if (!wire::parse_frame(buf_).ok()) std::abort();  // the engine must never send garbage
    if (frames.size() == kMaxQueued) frames.pop_front();
    frames.push_back(buf_);
  }
  std::deque<std::vector<uint8_t>> frames;

 private:
  std::vector<uint8_t> buf_;
};

struct Node {
  std::unique_ptr<Engine> e;
  std::vector<uint8_t> mem = std::vector<uint8_t>(2 * kBuf + 3 * kGuard, kCanary);
  uint8_t* buf = mem.data() + kGuard;               // MR 1
  uint8_t* buf2 = mem.data() + 2 * kGuard + kBuf;   // MR 2 (dereg/reg by the input)
  uint64_t iova = 0, iova2 = 0;
  verbs::MrKeys keys{}, keys2{};
  bool mr2 = false;
  PdHandle pd = 0;
  CqHandle cq = 0;
  wire::Qpn rc, ud;
  AhHandle ah = 0;
  wire::IpAddr ip;
  wire::MacAddr mac;
  Wire out;

  bool canaries_intact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (mem[i] != kCanary || mem[kGuard + kBuf + i] != kCanary || mem[2 * kGuard + 2 * kBuf + i] != kCanary)
        return false;
    }
    return true;
  }
};

constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC;

void make_node(Node& n, uint32_t host, bool dcqcn) {
  EngineConfig c;
  n.ip = wire::ipv4_mapped(0x0a000000 | host);
  n.mac = {2, 0, 0, 0, 0, static_cast<uint8_t>(host)};
  c.ip = n.ip;
  c.mac = n.mac;
  c.max_qps = 16;
  c.qpn_seed = host;
  c.key_seed = host;
  if (dcqcn) {
    c.policy = "tassel";
    c.dcqcn.enabled = true;
    c.dcqcn.byte_counter_bytes = 4096;
    c.dcqcn.min_time_between_cnps_us = 0;
  }
  n.e = std::move(Engine::create(c).value());
  n.pd = n.e->alloc_pd().value();
  n.cq = n.e->create_cq(512).value();
  n.iova = 0x100000 * host + (reinterpret_cast<uint64_t>(n.buf) & 0xfff);
  n.iova2 = n.iova + 0x80000;
  n.keys = n.e->reg_mr(n.pd, n.buf, kBuf, n.iova, kAll).value();
  n.keys2 = n.e->reg_mr(n.pd, n.buf2, kBuf, n.iova2, kAll).value();
  n.mr2 = true;
  QpCreate qc;
  qc.pd = n.pd;
  qc.send_cq = n.cq;
  qc.recv_cq = n.cq;
  qc.init.cap = {64, 64, 2, 2, 64};
  n.rc = n.e->create_qp(qc).value();
  qc.init.qp_type = IBV_QPT_UD;
  n.ud = n.e->create_qp(qc).value();
}

void connect(Node& n, const Node& peer) {
  n.e->set_neighbor(peer.ip, peer.mac);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  n.e->modify_qp(n.rc, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer.ip.data(), 16);
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.rc.value();
  a.rq_psn = kRqPsn;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 1;
  n.e->modify_qp(n.rc, a,
                 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 4;
  a.retry_cnt = 3;
  a.rnr_retry = 3;
  a.sq_psn = kRqPsn;  // the peer expects kRqPsn
  a.max_rd_atomic = 4;
  n.e->modify_qp(n.rc, a,
                 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                     IBV_QP_MAX_QP_RD_ATOMIC);
  a = {};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = 7;
  n.e->modify_qp(n.ud, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  n.e->modify_qp(n.ud, a, IBV_QP_STATE);
  a.qp_state = IBV_QPS_RTS;
  n.e->modify_qp(n.ud, a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  AhAttr ah;
  ah.dgid = peer.ip;
  n.ah = n.e->create_ah(n.pd, ah).value();
}

struct World {
  Node n[2];
  Picos now = 0;

  explicit World(bool dcqcn) {
    make_node(n[0], 1, dcqcn);
    make_node(n[1], 2, dcqcn);
    connect(n[0], n[1]);
    connect(n[1], n[0]);
    for (int side = 0; side < 2; ++side) {
      Node& x = n[side];
      for (uint32_t i = 0; i < 8; ++i) {
        Sge s{x.iova + 4096 * i, 4096, x.keys.lkey};
        x.e->post_recv(x.rc, RecvWr{i, std::span(&s, 1)});
        x.e->post_recv(x.ud, RecvWr{i, std::span(&s, 1)});
      }
      const Node& peer = n[1 - side];
      for (ibv_wr_opcode op : kWrOps) post(x, peer, op, 32768, 3000, false, 0, true);
    }
  }

  // A send WR: local bytes at offset `off` of MR 1 (or MR 2), `len` long
  // (atomics: 8), to the peer's MR at the same offset unless `rkey` is given.
  int post(Node& x, const Node& peer, ibv_wr_opcode op, uint32_t off, uint32_t len, bool mr2, uint32_t rkey,
           bool rc) {
    const bool atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
    Sge s{(mr2 ? x.iova2 : x.iova) + off, atomic ? 8u : len, mr2 ? x.keys2.lkey : x.keys.lkey};
    SendWr wr;
    wr.wr_id = off;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&s, 1);
    wr.remote_addr = peer.iova + (atomic ? off & ~7u : off);
    wr.rkey = rkey ? rkey : peer.keys.rkey;
    wr.compare_add = off;
    wr.swap = len;
    wr.ah = x.ah;
    wr.remote_qpn = peer.ud.value();
    wr.remote_qkey = 7;
    return x.e->post_send(now, rc ? x.rc : x.ud, wr);
  }

  void step(Picos dt) {
    now += dt;
    for (Node& x : n) {
      x.e->advance(now);
      x.e->transmit(now, x.out, 64);
    }
  }

  // A frame from the input's fields to node `to`, as if from its peer.
  void inject(Reader& r, int to) {
    Node& x = n[to];
    const Node& peer = n[1 - to];
    const uint8_t op = kOpcodes[r.u8() % sizeof kOpcodes];
    const uint8_t flags = r.u8();
    wire::FrameSpec f;
    f.src_mac = peer.mac;
    f.dst_mac = x.mac;
    f.src_ip = (flags & 1) ? wire::ipv4_mapped(r.u32()) : peer.ip;
    f.dst_ip = x.ip;
    f.opcode = op;
    f.ack_req = flags & 2;
    const bool ud = op >= wire::op::kUdSendOnly && op < 0x80;
    f.dest_qp = (flags & 4) ? wire::Qpn(r.u32()) : (ud ? x.ud : x.rc);
    const int32_t delta = static_cast<int8_t>(r.u8());
    f.traffic_class = static_cast<uint8_t>(26 << 2 | (delta & 3));  // ECN from the same byte: CE sometimes
    f.psn = wire::Psn(kRqPsn + static_cast<uint32_t>(delta) + r.u8() * 4u);
    const uint64_t va = (flags & 8) ? r.u64() : x.iova + (r.u32() % (kBuf + 64)) - 32;
    const uint32_t rkey = (flags & 16) ? r.u32() : x.keys.rkey;
    const uint32_t len = (flags & 64) ? r.u32() : r.u32() % 70000;  // sometimes 2 GB and more
    f.reth = wire::RethFields{va, rkey, len};
    f.aeth = wire::AethFields{r.u8(), r.u32() & 0xffffff};
    f.deth = wire::DethFields{(flags & 32) ? r.u32() : 7u, peer.ud.value()};
    f.imm = r.u32();
    f.ieth = r.u32();
    f.atomic = wire::AtomicFields{va & ~uint64_t{7}, rkey, r.u64(), r.u64()};
    f.atomic_ack = r.u64();
    std::vector<uint8_t> payload(wire::opcode_info(op).has_payload() ? (r.u8() % 5) * 256 + r.u8() % 8 : 0, 0x5c);
    f.payload = payload;
    std::vector<uint8_t> frame(wire::frame_size(f));
    if (!wire::build_frame(f, frame).ok()) return;
    if (flags & 128) frame[r.u32() % frame.size()] ^= r.u8();  // sometimes broken
    x.e->receive(now, frame);
  }

  // What the wire does with the next frame node `from` sent.
  void wire_op(Reader& r, int from, uint8_t what) {
    auto& q = n[from].out.frames;
    if (q.empty()) return;
    std::vector<uint8_t> frame = q.front();
    if (what != 3) q.pop_front();  // 3: a replay, the original stays
    if (what == 2) return;         // dropped
    if (what == 1 && frame.size() > 14 + 20 + 8 + 12 + 4) {
      // A header byte changed (BTH onwards), the ICRC resealed or not.
      const size_t at = 14 + 20 + 8 + r.u8() % 28;
      if (at < frame.size() - 4) frame[at] ^= r.u8() | 1;
      if (r.u8() & 1) wire::icrc_seal(frame, 14, frame.size() - 4);
    }
    n[1 - from].e->receive(now, frame);
  }

  void run(Reader& r) {
    ibv_wc wc[16];
    while (!r.empty()) {
      const uint8_t cmd = r.u8();
      const int side = cmd >> 7;
      Node& x = n[side];
      switch (cmd & 15) {
        case 0: case 1: case 2: case 3: case 4: case 5:
          wire_op(r, side, (cmd & 15) < 3 ? 0 : (cmd & 15) - 2);
          break;
        case 6: case 7:
          inject(r, side);
          break;
        case 8: {
          const uint8_t o = r.u8();
          const uint32_t off = r.u16() % kBuf, len = r.u16() % 9000;
          post(x, n[1 - side], kWrOps[o % std::size(kWrOps)], off, len, o & 0x80, (o & 0x40) ? r.u32() : 0,
               !(o & 0x20));
          break;
        }
        case 9: {
          const uint32_t off = r.u16() % kBuf;
          Sge s{x.iova + off, r.u16(), x.keys.lkey};
          x.e->post_recv((r.u8() & 1) ? x.ud : x.rc, RecvWr{off, std::span(&s, 1)});
          break;
        }
        case 10:
          step(static_cast<Picos>(r.u16()) * 10'000);  // up to 655 us
          break;
        case 11:
          step(static_cast<Picos>(1) << (30 + r.u8() % 14));  // 1 ms .. 8 s: every timer
          break;
        case 12:
          x.e->poll_cq(x.cq, wc);
          break;
        case 13: {
          ibv_qp_attr a{};
          a.qp_state = (r.u8() & 1) ? IBV_QPS_ERR : IBV_QPS_RTS;
          x.e->modify_qp((r.u8() & 1) ? x.ud : x.rc, a, IBV_QP_STATE);
          break;
        }
        case 14:
          if (x.mr2) {
            x.e->dereg_mr(x.keys2.lkey);
            x.mr2 = false;
          } else if (auto k = x.e->reg_mr(x.pd, x.buf2, kBuf, x.iova2, kAll); k.ok()) {
            x.keys2 = k.value();
            x.mr2 = true;
          }
          break;
        default:
          step(1'000'000);
          break;
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World w(size > 0 && (data[size - 1] & 1));
  Reader r(data, size);
  w.run(r);
  // Let the timers run out and the wire drain.
  ibv_wc wc[16];
  for (int i = 0; i < 64; ++i) {
    for (int side = 0; side < 2; ++side) {
      auto& q = w.n[side].out.frames;
      while (!q.empty()) {
        w.n[1 - side].e->receive(w.now, q.front());
        q.pop_front();
      }
      while (w.n[side].e->poll_cq(w.n[side].cq, wc) > 0) {
      }
    }
    w.step(100'000'000);
  }
  for (const Node& x : w.n)
    if (!x.canaries_intact()) std::abort();
  return 0;
}
