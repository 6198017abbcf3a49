// libFuzzer target: a peer that sends anything to a connected RC QP and a UD
// QP. The input is read as a sequence of packet descriptions (opcode, PSN
// offset, keys, addresses, lengths, payload), each built into a frame with a
// valid ICRC so it reaches the responder and completer logic, not just the
// parser. The engine also has work of its own in flight (WRITE, READ, atomic,
// SEND), so responses meet a live completer. ASan/UBSan catch memory errors;
// the canaries around the registered buffer catch writes outside the MR. The
// last input byte picks the engine: fifo, or tassel with DCQCN (CE and CNPs).
#include <arpa/inet.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/engine/engine.h"
#include "transport/wire/build.h"
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

constexpr size_t kBuf = 64 * 1024;
constexpr size_t kGuard = 4096;
constexpr uint8_t kCanary = 0xa5;

class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  uint32_t u32() { return u8() | u8() << 8 | u8() << 16 | static_cast<uint32_t>(u8()) << 24; }
  uint64_t u64() { return u32() | static_cast<uint64_t>(u32()) << 32; }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

class Sink : public TxSink {
 public:
  std::span<uint8_t> tx_buffer(size_t len) override {
    buf_.resize(len);
    return buf_;
  }
  void tx_commit(Picos, size_t len) override {
    buf_.resize(len);
    if (!wire::parse_frame(buf_).ok()) std::abort();  // the engine must never send garbage
  }

 private:
  std::vector<uint8_t> buf_;
};

struct World {
  std::unique_ptr<Engine> e;
  std::vector<uint8_t> mem = std::vector<uint8_t>(kBuf + 2 * kGuard, kCanary);
  uint8_t* buf = mem.data() + kGuard;
  uint64_t iova = 0x100000;
  verbs::MrKeys keys{};
  wire::Qpn rc, ud;
  CqHandle cq = 0;
  wire::IpAddr peer_ip = wire::ipv4_mapped(0x0a000002);
  wire::MacAddr peer_mac = {2, 0, 0, 0, 0, 2};
  Picos now = 0;

  // dcqcn: tassel policy with DCQCN on (CNPs out for CE, reaction to CNPs in,
  // a small byte counter), else the default fifo engine.
  explicit World(bool dcqcn) {
    EngineConfig c;
    c.ip = wire::ipv4_mapped(0x0a000001);
    c.mac = {2, 0, 0, 0, 0, 1};
    c.max_qps = 16;
    if (dcqcn) {
      c.policy = sched::Policy::kTassel;
      c.dcqcn.enabled = true;
      c.dcqcn.byte_counter_bytes = 4096;
      c.dcqcn.min_time_between_cnps_us = 0;
    }
    e = std::move(Engine::create(c).value());
    e->set_neighbor(peer_ip, peer_mac);
    const PdHandle pd = e->alloc_pd().value();
    cq = e->create_cq(256).value();
    iova = 0x100000 + (reinterpret_cast<uint64_t>(buf) & 0xfff);
    keys = e->reg_mr(pd, buf, kBuf, iova,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC)
               .value();
    QpCreate qc;
    qc.pd = pd;
    qc.send_cq = cq;
    qc.recv_cq = cq;
    qc.init.cap = {64, 64, 2, 2, 64};
    rc = e->create_qp(qc).value();
    qc.init.qp_type = IBV_QPT_UD;
    ud = e->create_qp(qc).value();
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    e->modify_qp(rc, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, peer_ip.data(), 16);
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = 0x99;
    a.rq_psn = 100;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    e->modify_qp(rc, a,
                 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 4;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 1000;
    a.max_rd_atomic = 4;
    e->modify_qp(rc, a,
                 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                     IBV_QP_MAX_QP_RD_ATOMIC);
    a = {};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = 7;
    e->modify_qp(ud, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    e->modify_qp(ud, a, IBV_QP_STATE);
    a.qp_state = IBV_QPS_RTS;
    e->modify_qp(ud, a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    // Work of our own: receives and one of each request.
    for (int i = 0; i < 4; ++i) {
      Sge s{iova + 4096 * i, 4096, keys.lkey};
      e->post_recv(rc, RecvWr{static_cast<uint64_t>(i), std::span(&s, 1)});
      e->post_recv(ud, RecvWr{static_cast<uint64_t>(i), std::span(&s, 1)});
    }
    const ibv_wr_opcode ops[] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_FETCH_AND_ADD,
                                 IBV_WR_SEND};
    for (ibv_wr_opcode op : ops) {
      const bool atomic = op == IBV_WR_ATOMIC_FETCH_AND_ADD;
      Sge s{iova + 32768, atomic ? 8u : 3000u, keys.lkey};
      SendWr wr;
      wr.opcode = op;
      wr.sg_list = std::span(&s, 1);
      wr.remote_addr = 0x5000;
      wr.rkey = 0x1234;
      e->post_send(now, rc, wr);
    }
  }

  void step(Picos dt) {
    now += dt;
    e->advance(now);
    Sink sink;
    e->transmit(now, sink, 64);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World w(size > 0 && (data[size - 1] & 1));
  Reader r(data, size);
  std::vector<uint8_t> payload, frame;
  while (!r.empty()) {
    const uint8_t op = kOpcodes[r.u8() % sizeof kOpcodes];
    const uint8_t flags = r.u8();
    wire::FrameSpec f;
    f.src_mac = w.peer_mac;
    f.dst_mac = {2, 0, 0, 0, 0, 1};
    f.src_ip = (flags & 1) ? wire::ipv4_mapped(r.u32()) : w.peer_ip;
    f.dst_ip = wire::ipv4_mapped(0x0a000001);
    f.opcode = op;
    f.ack_req = flags & 2;
    f.dest_qp = (flags & 4) ? wire::Qpn(r.u32()) : (op >= wire::op::kUdSendOnly && op < 0x80 ? w.ud : w.rc);
    // PSNs near what each side expects, so the sequence logic is exercised.
    const int32_t delta = static_cast<int8_t>(r.u8());
    f.traffic_class = static_cast<uint8_t>(26 << 2 | (delta & 3));  // ECN from the same byte: CE sometimes
    const bool response = op >= wire::op::kRcReadResponseFirst && op <= wire::op::kRcAtomicAck;
    f.psn = wire::Psn((response ? 1000u : 100u) + static_cast<uint32_t>(delta));
    const uint64_t va = (flags & 8) ? r.u64() : w.iova + (r.u32() % (kBuf + 64)) - 32;
    const uint32_t rkey = (flags & 16) ? r.u32() : w.keys.rkey;
    const uint32_t len = r.u32() % 70000;
    f.reth = wire::RethFields{va, rkey, len};
    f.aeth = wire::AethFields{r.u8(), r.u32() & 0xffffff};
    f.deth = wire::DethFields{(flags & 32) ? r.u32() : 7u, r.u32() & 0xffffff};
    f.imm = r.u32();
    f.ieth = r.u32();
    f.atomic = wire::AtomicFields{(flags & 64) ? va : (w.iova + (va & 0xff8) % kBuf), rkey, r.u64(), r.u64()};
    f.atomic_ack = r.u64();
    const bool has_payload = wire::opcode_info(op).has_payload();
    payload.assign(has_payload ? (r.u8() % 5) * 256 + r.u8() % 8 : 0, 0x5c);
    f.payload = payload;
    frame.resize(wire::frame_size(f));
    if (!wire::build_frame(f, frame).ok()) continue;
    if (flags & 128) frame[r.u32() % frame.size()] ^= r.u8();  // sometimes broken
    w.e->receive(w.now, frame);
    w.step(static_cast<Picos>(r.u8()) * 1'000'000);  // up to 255 us
    ibv_wc wc[16];
    w.e->poll_cq(w.cq, wc);
  }
  for (int i = 0; i < 50; ++i) w.step(100'000'000);  // let timers run out
  for (size_t i = 0; i < kGuard; ++i) {
    if (w.mem[i] != kCanary || w.mem[kGuard + kBuf + i] != kCanary) std::abort();
  }
  return 0;
}
