// isoroce-bench-engine: what the transport engine costs per packet, requester and
// responder on one core, against the codec and memcpy floors measured in the same
// run (issue 3). bench/engine/run.sh prints the ratios.
//
//   BM_Engine/<verb>/<size>  two Engines (10.0.0.1 requester, 10.0.0.2 responder),
//                            one RC QP pair brought to RTS with ibv_modify_qp masks,
//                            path MTU 4096, fifo policy, 400 Gb/s links, 16 work
//                            requests outstanding (all signaled; SEND keeps 32
//                            receives posted). One iteration is one step of the
//                            driver: jump the virtual clock to the engines' next
//                            deadline, advance both, transmit up to 32 frames each
//                            way into a reusable 32-buffer pool, deliver them to the
//                            peer, poll the CQs and post again.
//   BM_BuildParse/<size>     the codec floor: for each data packet of the same
//                            message, build_frame (gather copy, headers, ICRC),
//                            parse_frame (headers, ICRC check) and the scatter copy
//                            into the destination buffer.
//   BM_BuildParseFused/<size> the same with each payload byte read once per side:
//                            the build copies and folds the ICRC in one pass, the
//                            parse skips the ICRC, which the copy out checks.
//   BM_BuildParseFusedBurst/<size> BM_BuildParseFused in bursts of 32 frames through a
//                            pool laid out as BM_Engine's (build 32, then parse and
//                            copy 32): the same codec work with a driver's buffers.
//   BM_ProtocolFloor/<verb>/<size> the codec work each verb's messages need by the
//                            engine's design (a READ's request; a WRITE's first packet
//                            checked before it is stored), per data packet.
//   BM_ProtocolFloor/<verb>_pool/4096 the same with the frames in kCallFrames
//                            buffers in turn, as many as BM_Engine's transmit call
//                            fills at 4 KB (its counter frames_per_call): the cold
//                            frame lines a driver's burst costs, which the
//                            one-buffer floor never pays.
//   BM_MemcpyFrames/<size>   the copy floor: the same two copies per data packet
//                            (source -> frame, frame -> destination), nothing else.
//   BM_Engine/<verb>_traced/<size>  the same with a trace sink that counts records
//                            attached to both engines with every event on
//                            (sched/trace.h): the cost of tracing, per event
//                            (counter events_per_frame); BM_Engine/<verb> is tracing off.
//   BM_SimEvents             (built when dataplane/sim is present) events of the
//                            simulator per second of wall time, see sim_bench.cc.
//
// items/s: BM_Engine counts frames moved in both directions (data, ACKs, READ
// requests); the baselines count data packets. The counter s_per_data_pkt is the
// engine's time per data packet (WRITE/SEND requests, READ responses), the unit
// the baselines' items share. bytes/s: message payload completed.
#include <benchmark/benchmark.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/engine/pool_sink.h"
#include "transport/engine/engine.h"
#include "transport/wire/build.h"
#include "transport/wire/icrc.h"
#include "transport/wire/parse.h"

namespace isoroce::transport::bench {
namespace {

constexpr uint64_t kLinkBps = 400'000'000'000;  // 400 Gb/s
constexpr Picos kLookahead = 1'000'000;         // 1 us of departures per transmit call
constexpr uint32_t kMtu = 4096;
constexpr uint32_t kWindow = 16;       // work requests outstanding
constexpr uint32_t kRecvDepth = 32;    // receives kept posted for SEND
constexpr uint64_t kRemoteIova = 0x7f0000000000;
constexpr uint64_t kLocalIova = 0x10000000;
// The 4 KB data frames one transmit call gives: the departures that start within
// kLookahead at kLinkBps, a frame taking 4096 B of payload, 74 B of headers and
// ICRC and 24 B of FCS, preamble and gap on the wire (12 at 400 Gb/s and 1 us;
// BM_Engine's counter frames_per_call shows what the engine did).
constexpr size_t kCallFrames =
    static_cast<size_t>((kLinkBps / 8 * kLookahead / 1'000'000'000'000 + 4194 - 1) / 4194);
static_assert(kCallFrames >= 1 && kCallFrames <= kBurst);

uint32_t data_packets(uint64_t size) { return size == 0 ? 1 : static_cast<uint32_t>((size + kMtu - 1) / kMtu); }

struct Side {
  std::unique_ptr<Engine> engine;
  PdHandle pd = 0;
  CqHandle send_cq = 0;
  CqHandle recv_cq = 0;
  wire::Qpn qpn;
  // Page-aligned: an MR's iova and address share their offset in the page.
  std::unique_ptr<uint8_t, decltype(&std::free)> buf{nullptr, &std::free};
  verbs::MrKeys keys{};
};

EngineConfig engine_config(uint32_t ip, uint8_t mac_last, uint32_t seed) {
  EngineConfig c;
  c.mac = {0x02, 0, 0, 0, 0, mac_last};
  c.ip = wire::ipv4_mapped(ip);
  c.key_seed = seed;
  c.qpn_seed = seed;
  c.policy = "fifo";
  c.link_bps = kLinkBps;
  c.sched_lookahead = kLookahead;
  c.max_qps = 16;
  c.active_mtu = IBV_MTU_4096;
  return c;
}

// Returns an error message, or nullptr.
const char* set_up_side(Side& s, const EngineConfig& config, uint64_t buf_bytes, uint64_t iova) {
  auto e = Engine::create(config);
  if (!e.ok()) return "Engine::create failed";
  s.engine = std::move(e.value());
  auto pd = s.engine->alloc_pd();
  if (!pd.ok()) return "alloc_pd failed";
  s.pd = pd.value();
  auto scq = s.engine->create_cq(256);
  auto rcq = s.engine->create_cq(256);
  if (!scq.ok() || !rcq.ok()) return "create_cq failed";
  s.send_cq = scq.value();
  s.recv_cq = rcq.value();
  const size_t bytes = (std::max<uint64_t>(buf_bytes, 64) + 4095) & ~size_t{4095};
  s.buf.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)));
  if (!s.buf) return "aligned_alloc failed";
  std::memset(s.buf.get(), 0x5a, bytes);
  auto mr = s.engine->reg_mr(s.pd, s.buf.get(), bytes, iova,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr.ok()) return "reg_mr failed";
  s.keys = mr.value();
  QpCreate qc;
  qc.pd = s.pd;
  qc.send_cq = s.send_cq;
  qc.recv_cq = s.recv_cq;
  qc.init.qp_type = IBV_QPT_RC;
  qc.init.cap.max_send_wr = 64;
  qc.init.cap.max_recv_wr = 64;
  qc.init.cap.max_send_sge = 1;
  qc.init.cap.max_recv_sge = 1;
  auto qpn = s.engine->create_qp(qc);
  if (!qpn.ok()) return "create_qp failed";
  s.qpn = qpn.value();
  return nullptr;
}

// RESET -> INIT -> RTR -> RTS with the attribute masks an ibverbs program uses.
const char* connect(Side& self, const Side& peer, uint32_t my_psn, uint32_t peer_psn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (self.engine->modify_qp(self.qpn, a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    return "modify_qp(INIT) failed";
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer.qpn.value();
  a.rq_psn = peer_psn;
  a.max_dest_rd_atomic = kWindow;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  const wire::IpAddr& dgid = peer.engine->config().ip;
  std::memcpy(a.ah_attr.grh.dgid.raw, dgid.data(), 16);
  if (self.engine->modify_qp(self.qpn, a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    return "modify_qp(RTR) failed";
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;  // 67 ms: never expires while ACKs flow
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = my_psn;
  a.max_rd_atomic = kWindow;
  if (self.engine->modify_qp(self.qpn, a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    return "modify_qp(RTS) failed";
  }
  return nullptr;
}

// The requester (a) and responder (b) and the loop that moves frames between them.
class Pair {
 public:
  Pair(ibv_wr_opcode verb, uint64_t size) : verb_(verb), size_(size) {}

  const char* set_up() {
    if (const char* e = set_up_side(a_, engine_config(0x0a000001, 1, 1), size_, kLocalIova)) return e;
    if (const char* e = set_up_side(b_, engine_config(0x0a000002, 2, 2), size_, kRemoteIova)) return e;
    a_.engine->set_neighbor(b_.engine->config().ip, b_.engine->config().mac);
    b_.engine->set_neighbor(a_.engine->config().ip, a_.engine->config().mac);
    if (const char* e = connect(a_, b_, 0xfff000, 0x123400)) return e;  // a's PSNs wrap during the run
    if (const char* e = connect(b_, a_, 0x123400, 0xfff000)) return e;
    if (verb_ == IBV_WR_SEND) {
      for (uint32_t i = 0; i < kRecvDepth; ++i) {
        if (!post_recv()) return "post_recv failed";
      }
    }
    for (uint32_t i = 0; i < kWindow; ++i) {
      if (!post_send()) return "post_send failed";
    }
    return nullptr;
  }

  // One driver step; nullptr or what went wrong.
  const char* step() {
    const Picos t = std::min(a_.engine->next_deadline(), b_.engine->next_deadline());
    if (t == sched::kNever) return "stalled: neither engine has anything to do";
    now_ = std::max(now_, t);
    a_.engine->advance(now_);
    b_.engine->advance(now_);
    move(a_, b_);
    move(b_, a_);
    return poll();
  }

  void trace(trace::Sink* sink) {
    a_.engine->attach_trace(sink, trace::kAllEvents, 0);
    b_.engine->attach_trace(sink, trace::kAllEvents, 1);
  }
  uint64_t frames() const { return frames_; }
  uint64_t data_calls() const { return data_calls_; }
  uint64_t data_call_frames() const { return data_call_frames_; }
  uint64_t messages() const { return messages_; }
  Picos now() const { return now_; }
  const EngineCounters& requester() const { return a_.engine->counters(); }
  const EngineCounters& responder() const { return b_.engine->counters(); }

 private:
  bool post_send() {
    const Sge sge{kLocalIova, static_cast<uint32_t>(size_), a_.keys.lkey};
    SendWr wr;
    wr.wr_id = posted_++;
    wr.opcode = verb_;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = kRemoteIova;
    wr.rkey = b_.keys.rkey;
    return a_.engine->post_send(now_, a_.qpn, wr) == 0;
  }

  bool post_recv() {
    const Sge sge{kRemoteIova, static_cast<uint32_t>(size_), b_.keys.lkey};
    RecvWr wr;
    wr.sg_list = std::span(&sge, 1);
    return b_.engine->post_recv(b_.qpn, wr) == 0;
  }

  void move(Side& from, Side& to) {
    sink_.clear();
    from.engine->transmit(now_, sink_, kBurst);
    for (size_t i = 0; i < sink_.count(); ++i) {
      now_ = std::max(now_, sink_.departure(i));  // zero propagation delay
      to.engine->receive(now_, sink_.frame(i));
    }
    frames_ += sink_.count();
    // Data frames go a -> b (WRITE, SEND) or b -> a (READ responses).
    if (sink_.count() != 0 && (&from == &a_) == (verb_ != IBV_WR_RDMA_READ)) {
      ++data_calls_;
      data_call_frames_ += sink_.count();
    }
  }

  const char* poll() {
    std::array<ibv_wc, 32> wc;
    const int n = a_.engine->poll_cq(a_.send_cq, wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != size_) return "send completion in error";
      ++messages_;
      if (!post_send()) return "post_send failed";
    }
    if (verb_ == IBV_WR_SEND) {
      const int r = b_.engine->poll_cq(b_.recv_cq, wc);
      for (int i = 0; i < r; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != size_) return "receive completion in error";
        if (!post_recv()) return "post_recv failed";
      }
    }
    return nullptr;
  }

  ibv_wr_opcode verb_;
  uint64_t size_;
  Side a_, b_;
  PoolSink sink_;
  Picos now_ = 0;
  uint64_t posted_ = 0;
  uint64_t frames_ = 0;
  uint64_t data_calls_ = 0;        // transmit() calls on the data's way that gave frames
  uint64_t data_call_frames_ = 0;  // and the frames they gave
  uint64_t messages_ = 0;
};

// A trace sink that only counts: what is left is the cost of emitting.
class CountingSink final : public trace::Sink {
 public:
  void record(const trace::Record& r) override {
    ++count_;
    benchmark::DoNotOptimize(r.time);
  }
  uint64_t count() const { return count_; }

 private:
  uint64_t count_ = 0;
};

void BM_Engine(benchmark::State& state, ibv_wr_opcode verb, bool traced) {
  const auto size = static_cast<uint64_t>(state.range(0));
  auto pair = std::make_unique<Pair>(verb, size);
  if (const char* e = pair->set_up()) {
    state.SkipWithError(e);
    return;
  }
  CountingSink sink;
  if (traced) pair->trace(&sink);
  // Warm up: fill the pipeline and reach steady state.
  for (int i = 0; i < 2'000 && pair->messages() < 4 * kWindow; ++i) {
    if (const char* e = pair->step()) {
      state.SkipWithError(e);
      return;
    }
  }
  const uint64_t frames0 = pair->frames();
  const uint64_t calls0 = pair->data_calls();
  const uint64_t call_frames0 = pair->data_call_frames();
  const uint64_t msgs0 = pair->messages();
  const Picos t0 = pair->now();
  for (auto _ : state) {
    if (const char* e = pair->step()) {
      state.SkipWithError(e);
      break;
    }
  }
  const double frames = static_cast<double>(pair->frames() - frames0);
  const double msgs = static_cast<double>(pair->messages() - msgs0);
  const double data_pkts = msgs * data_packets(size);
  state.SetItemsProcessed(static_cast<int64_t>(frames));
  state.SetBytesProcessed(static_cast<int64_t>(msgs * static_cast<double>(size)));
  using C = benchmark::Counter;
  state.counters["s_per_data_pkt"] = C(data_pkts, C::kIsRate | C::kInvert);
  state.counters["frames_per_msg"] = msgs > 0 ? frames / msgs : 0;
  const double calls = static_cast<double>(pair->data_calls() - calls0);
  state.counters["frames_per_call"] =
      calls > 0 ? static_cast<double>(pair->data_call_frames() - call_frames0) / calls : 0;
  const Picos vt = pair->now() - t0;
  state.counters["virtual_gbps"] = vt > 0 ? msgs * static_cast<double>(size) * 8e3 / static_cast<double>(vt) : 0;
  const EngineCounters& r = pair->requester();
  const EngineCounters& s = pair->responder();
  state.counters["retransmits"] = static_cast<double>(r.retransmits + s.retransmits);
  state.counters["dropped"] = static_cast<double>(r.rx_dropped + s.rx_dropped);
  if (traced) state.counters["events_per_frame"] = frames > 0 ? static_cast<double>(sink.count()) / frames : 0;
}

// The data packets of one message as a requester sends them (WRITE opcodes).
struct PacketPlan {
  uint8_t opcode;
  size_t offset;
  size_t len;
};

std::vector<PacketPlan> plan(uint64_t size) {
  std::vector<PacketPlan> p;
  const uint32_t n = data_packets(size);
  for (uint32_t i = 0; i < n; ++i) {
    const size_t off = static_cast<size_t>(i) * kMtu;
    const size_t len = std::min<size_t>(kMtu, size - off);
    uint8_t op = wire::op::kRcWriteMiddle;
    if (n == 1) op = wire::op::kRcWriteOnly;
    else if (i == 0) op = wire::op::kRcWriteFirst;
    else if (i == n - 1) op = wire::op::kRcWriteLast;
    p.push_back({op, off, len});
  }
  return p;
}

// The frame the codec floors build: one RC connection's addresses and QP.
wire::FrameSpec floor_spec() {
  wire::FrameSpec s;
  s.dst_mac = {0x02, 0, 0, 0, 0, 2};
  s.src_mac = {0x02, 0, 0, 0, 0, 1};
  s.src_ip = wire::ipv4_mapped(0x0a000001);
  s.dst_ip = wire::ipv4_mapped(0x0a000002);
  s.traffic_class = 26 << 2 | 2;
  s.dest_qp = wire::Qpn(0x123);
  return s;
}

// Packet `p` of a WRITE of `size` bytes from `src` into `s`: its opcode and PSN,
// AckReq on the message's last packet, the RETH on its first.
inline void plan_packet(wire::FrameSpec& s, const PacketPlan& p, uint32_t psn, uint64_t size,
                        std::span<const uint8_t> src) {
  s.opcode = p.opcode;
  s.psn = wire::Psn(psn & 0xffffff);
  s.ack_req = p.opcode == wire::op::kRcWriteOnly || p.opcode == wire::op::kRcWriteLast;
  if (p.opcode == wire::op::kRcWriteOnly || p.opcode == wire::op::kRcWriteFirst) {
    s.reth = wire::RethFields{kRemoteIova, 0x1234, static_cast<uint32_t>(size)};
  } else {
    s.reth.reset();
  }
  s.payload = src.subspan(p.offset, p.len);
}

// The fused receive: frame `f` parsed without its ICRC, the payload copied to `to`
// with the ICRC folded on the way and checked; false if either failed.
inline bool fused_receive(std::span<uint8_t> f, uint8_t* to) {
  static constexpr wire::ParseOptions kNoIcrc{.verify_icrc = false};
  const wire::ParseResult r = wire::parse_frame(f, kNoIcrc);
  const uint8_t* payload = f.data() + r.pkt.payload_offset;
  wire::Crc32Fold crc = wire::icrc_fold_begin(f, r.pkt.l3_offset, r.pkt.payload_offset);
  wire::crc32_fold_copy(crc, to, payload, r.pkt.payload_len);
  wire::crc32_fold(crc, payload + r.pkt.payload_len, r.pkt.pad);
  return r.ok() && wire::icrc_finish(wire::crc32_fold_register(crc)) == r.pkt.icrc;
}

void report_baseline(benchmark::State& state, uint64_t size, size_t packets) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * packets));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_BuildParse(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  const std::vector<PacketPlan> pkts = plan(size);
  std::vector<uint8_t> src(size, 0x5a), dst(size, 0);
  std::vector<uint8_t> frame(kFrameBuf);
  wire::FrameSpec s = floor_spec();
  uint32_t psn = 0;
  for (auto _ : state) {
    for (const PacketPlan& p : pkts) {
      plan_packet(s, p, psn++, size, src);
      const wire::BuildResult b = wire::build_frame(s, frame);
      const wire::ParseResult r = wire::parse_frame(std::span(frame).first(b.len));
      if (!r.ok()) {
        state.SkipWithError("parse_frame failed");
        return;
      }
      const size_t hdr = b.len - wire::kIcrcBytes - wire::pad_for(p.len) - p.len;
      std::memcpy(dst.data() + p.offset, frame.data() + hdr, r.pkt.payload_len);
      benchmark::ClobberMemory();
    }
  }
  report_baseline(state, size, pkts.size());
}

// The codec floor with each payload byte read once per side: build_frame (which
// copies the payload into the frame and folds it into the ICRC in one pass),
// parse_frame without the ICRC check, and the copy into the destination with the
// ICRC checked on the way (what the engine's responder does for a WRITE).
void BM_BuildParseFused(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  const std::vector<PacketPlan> pkts = plan(size);
  std::vector<uint8_t> src(size, 0x5a), dst(size, 0);
  std::vector<uint8_t> frame(kFrameBuf);
  wire::FrameSpec s = floor_spec();
  uint32_t psn = 0;
  for (auto _ : state) {
    for (const PacketPlan& p : pkts) {
      plan_packet(s, p, psn++, size, src);
      const wire::BuildResult b = wire::build_frame(s, frame);
      const std::span<uint8_t> f = std::span(frame).first(b.len);
      if (!fused_receive(f, dst.data() + p.offset)) {
        state.SkipWithError("parse or ICRC failed");
        return;
      }
      benchmark::ClobberMemory();
    }
  }
  report_baseline(state, size, pkts.size());
}

// BM_BuildParseFused with BM_Engine's frame pool: kBurst frames built into kBurst
// buffers kFrameBuf apart (the pool's 139 KB do not fit in L1), then each parsed and
// copied out, the message's packets taken in turn across bursts (a 4 KB message is
// one packet of the burst). What the same codec work costs with the buffers a burst
// of a driver's mbufs would use: the floor's own buffer stays in L1 from build to copy.
void BM_BuildParseFusedBurst(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  const std::vector<PacketPlan> pkts = plan(size);
  std::vector<uint8_t> src(size, 0x5a), dst(size, 0);
  std::vector<uint8_t> pool(kBurst * kFrameBuf);
  std::array<size_t, kBurst> lens{};
  std::array<size_t, kBurst> which{};
  wire::FrameSpec s = floor_spec();
  uint32_t psn = 0;
  size_t next = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; ++i) {
      const PacketPlan& p = pkts[next];
      which[i] = next;
      next = next + 1 == pkts.size() ? 0 : next + 1;
      plan_packet(s, p, psn++, size, src);
      lens[i] = wire::build_frame(s, std::span(pool).subspan(i * kFrameBuf, kFrameBuf)).len;
    }
    benchmark::ClobberMemory();
    for (size_t i = 0; i < kBurst; ++i) {
      const PacketPlan& p = pkts[which[i]];
      const std::span<uint8_t> f = std::span(pool).subspan(i * kFrameBuf, lens[i]);
      if (!fused_receive(f, dst.data() + p.offset)) {
        state.SkipWithError("parse or ICRC failed");
        return;
      }
      benchmark::ClobberMemory();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBurst));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBurst * std::min<uint64_t>(size, kMtu)));
}

// The data packets of one message of `verb` (IBV_WR_SEND, IBV_WR_RDMA_WRITE, or
// IBV_WR_RDMA_READ for its responses), with the opcodes the requester or responder
// gives them.
std::vector<PacketPlan> plan(ibv_wr_opcode verb, uint64_t size) {
  std::vector<PacketPlan> p = plan(size);
  namespace op = wire::op;
  for (PacketPlan& q : p) {
    const bool only = q.opcode == op::kRcWriteOnly, first = q.opcode == op::kRcWriteFirst,
               last = q.opcode == op::kRcWriteLast;
    if (verb == IBV_WR_SEND) {
      q.opcode = only ? op::kRcSendOnly : first ? op::kRcSendFirst : last ? op::kRcSendLast : op::kRcSendMiddle;
    } else if (verb == IBV_WR_RDMA_READ) {
      q.opcode = only    ? op::kRcReadResponseOnly
                 : first ? op::kRcReadResponseFirst
                 : last  ? op::kRcReadResponseLast
                         : op::kRcReadResponseMiddle;
    }
  }
  return p;
}

// Packet `p` of a message of `size` bytes from `src` into `s`, with the extension
// headers its opcode carries: a WRITE's RETH on its first packet, a READ
// response's AETH on its first, last or only one; AckReq on a request's last.
inline void plan_packet(wire::FrameSpec& s, ibv_wr_opcode verb, const PacketPlan& p, uint32_t psn,
                        uint64_t size, std::span<const uint8_t> src) {
  if (verb == IBV_WR_RDMA_WRITE) return plan_packet(s, p, psn, size, src);
  namespace op = wire::op;
  s.opcode = p.opcode;
  s.psn = wire::Psn(psn & 0xffffff);
  s.reth.reset();
  s.aeth.reset();
  if (verb == IBV_WR_SEND) {
    s.ack_req = p.opcode == op::kRcSendOnly || p.opcode == op::kRcSendLast;
  } else {
    s.ack_req = false;
    if (p.opcode != op::kRcReadResponseMiddle) s.aeth = wire::AethFields{0x1f, psn & 0xffffff};
  }
  s.payload = src.subspan(p.offset, p.len);
}

// The protocol floor: the codec work the engine's protocol needs for each message
// of `verb`, payload bytes read once per side except where the engine's design
// reads them twice:
//   write  the data packets as BM_BuildParseFused, except that a FIRST or ONLY
//          packet's ICRC is checked on its own before the copy (the engine's rule:
//          a corrupted RETH must not write memory);
//   send   the data packets with SEND opcodes (no RETH), fused on both sides;
//   read   the READ request (BTH + RETH, no payload) built and parsed with its
//          ICRC, then the response packets (AETH on the first, last or only one)
//          fused on both sides.
// ACKs are left out: a responder may coalesce them (IBTA 9.7.5.2.1), and the
// engine's count against the engine. items/s: data packets (WRITE or SEND
// packets, READ responses), the unit of BM_Engine's s_per_data_pkt; the floor for
// a message of one packet, which BM_BuildParseFused leaves out for READ and WRITE.
// pool_frames: the data frames go into that many buffers of a PoolSink's layout in
// turn (1: one buffer that stays in L1; kCallFrames: as many as one of BM_Engine's
// transmit calls fills at 4 KB, its counter frames_per_call, so that the floor
// writes and reads the same number of cold lines per frame as the engine's driver).
void BM_ProtocolFloor(benchmark::State& state, ibv_wr_opcode verb, size_t pool_frames) {
  const auto size = static_cast<uint64_t>(state.range(0));
  const std::vector<PacketPlan> pkts = plan(verb, size);
  std::vector<uint8_t> src(size, 0x5a), dst(size, 0);
  std::vector<uint8_t> frame(kFrameBuf);
  std::vector<uint8_t> pool(pool_frames * kFrameBuf);
  size_t next_buf = 0;
  wire::FrameSpec s = floor_spec();
  wire::FrameSpec req = floor_spec();
  req.opcode = wire::op::kRcReadRequest;
  req.ack_req = true;
  req.reth = wire::RethFields{kRemoteIova, 0x1234, static_cast<uint32_t>(size)};
  uint32_t psn = 0;
  for (auto _ : state) {
    if (verb == IBV_WR_RDMA_READ) {
      req.psn = wire::Psn(psn & 0xffffff);
      const wire::BuildResult b = wire::build_frame(req, frame);
      const wire::ParseResult r = wire::parse_frame(std::span(frame).first(b.len));
      if (!r.ok()) {
        state.SkipWithError("READ request: parse_frame failed");
        return;
      }
      benchmark::DoNotOptimize(r.pkt.reth);
      benchmark::ClobberMemory();
    }
    for (const PacketPlan& p : pkts) {
      plan_packet(s, verb, p, psn++, size, src);
      const std::span<uint8_t> buf = std::span(pool).subspan(next_buf * kFrameBuf, kFrameBuf);
      next_buf = next_buf + 1 == pool_frames ? 0 : next_buf + 1;
      const wire::BuildResult b = wire::build_frame(s, buf);
      const std::span<uint8_t> f = buf.first(b.len);
      if (verb == IBV_WR_RDMA_WRITE && s.reth) {
        const wire::ParseResult r = wire::parse_frame(f);
        if (!r.ok()) {
          state.SkipWithError("parse_frame failed");
          return;
        }
        std::memcpy(dst.data() + p.offset, f.data() + r.pkt.payload_offset, r.pkt.payload_len);
      } else if (!fused_receive(f, dst.data() + p.offset)) {
        state.SkipWithError("parse or ICRC failed");
        return;
      }
      benchmark::ClobberMemory();
    }
  }
  report_baseline(state, size, pkts.size());
  state.counters["frame_buffers"] = static_cast<double>(pool_frames);
}

void BM_MemcpyFrames(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  const std::vector<PacketPlan> pkts = plan(size);
  std::vector<uint8_t> src(size, 0x5a), dst(size, 0);
  std::vector<uint8_t> frame(kFrameBuf);
  constexpr size_t kHdr = 14 + 20 + 8 + 12 + 16;  // Ethernet, IPv4, UDP, BTH, RETH
  for (auto _ : state) {
    for (const PacketPlan& p : pkts) {
      std::memcpy(frame.data() + kHdr, src.data() + p.offset, p.len);
      benchmark::ClobberMemory();
      std::memcpy(dst.data() + p.offset, frame.data() + kHdr, p.len);
      benchmark::ClobberMemory();
    }
  }
  report_baseline(state, size, pkts.size());
}

void sizes(benchmark::internal::Benchmark* b) {
  // 64 KB: ib_write_bw's message (16 packets, source and destination in L2); 1 MB
  // (256 packets, beyond L2).
  for (int64_t n : {64, 4096, 65536, 1 << 20}) b->Arg(n);
}

BENCHMARK_CAPTURE(BM_Engine, write, IBV_WR_RDMA_WRITE, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Engine, send, IBV_WR_SEND, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Engine, read, IBV_WR_RDMA_READ, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Engine, write_traced, IBV_WR_RDMA_WRITE, true)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Engine, send_traced, IBV_WR_SEND, true)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Engine, read_traced, IBV_WR_RDMA_READ, true)->Apply(sizes);
BENCHMARK(BM_BuildParse)->Apply(sizes);
BENCHMARK(BM_BuildParseFused)->Apply(sizes);
BENCHMARK(BM_BuildParseFusedBurst)->Apply(sizes);
BENCHMARK(BM_MemcpyFrames)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ProtocolFloor, write, IBV_WR_RDMA_WRITE, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ProtocolFloor, send, IBV_WR_SEND, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ProtocolFloor, read, IBV_WR_RDMA_READ, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ProtocolFloor, write_pool, IBV_WR_RDMA_WRITE, kCallFrames)->Arg(4096);
BENCHMARK_CAPTURE(BM_ProtocolFloor, send_pool, IBV_WR_SEND, kCallFrames)->Arg(4096);
BENCHMARK_CAPTURE(BM_ProtocolFloor, read_pool, IBV_WR_RDMA_READ, kCallFrames)->Arg(4096);

}  // namespace
}  // namespace isoroce::transport::bench

BENCHMARK_MAIN();
