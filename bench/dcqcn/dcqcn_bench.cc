// isoroce-bench-dcqcn: what DCQCN costs per packet on the transmit path,
// against the same engines without DCQCN in the same run (issue 8).
//
//   BM_Transmit/<mode>  two Engines (tassel policy, 100 Gb/s, path MTU 4096,
//                       lookahead 1 us): a requester keeps sixteen 64 KB WRITEs
//                       outstanding to a responder. One iteration is one driver
//                       step: jump the virtual clock to the next deadline,
//                       advance both, transmit up to 32 frames each way, deliver,
//                       poll, post. Modes:
//                         0 baseline   DCQCN disabled
//                         1 idle       DCQCN enabled, no congestion: the reaction
//                                      point is never engaged
//                         2 active     DCQCN enabled, a CNP reaches the requester
//                                      every 4 us of virtual time and the byte
//                                      counter is 1 byte: every data packet sent
//                                      is a rate increase event and a new limit
//                                      in the scheduler (counter rate_changes_per_pkt)
//   BM_RpOnSent/<mode>  the reaction point alone, per packet sent: 0 not limiting
//                       (the inline early return), 1 recovering with a byte counter
//                       event and a rate change on every packet.
// The counter s_per_data_pkt is the time per data packet; run.sh prints the
// ratios against the baseline.
#include <benchmark/benchmark.h>
#include <infiniband/verbs.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/dcqcn/reaction_point.h"
#include "bench/engine/pool_sink.h"
#include "transport/engine/engine.h"
#include "transport/wire/build.h"

namespace isoroce::transport::bench {
namespace {

constexpr uint64_t kLinkBps = 100'000'000'000;
constexpr uint64_t kSize = 64 << 10;
constexpr uint32_t kWindow = 16;
constexpr uint64_t kRemoteIova = 0x7f0000000000;
constexpr uint64_t kLocalIova = 0x10000000;
constexpr Picos kCnpEvery = 4'000'000;  // 4 us

struct Side {
  std::unique_ptr<Engine> engine;
  CqHandle cq = 0;
  wire::Qpn qpn;
  std::unique_ptr<uint8_t, decltype(&std::free)> buf{nullptr, &std::free};
  verbs::MrKeys keys{};
};

const char* set_up(Side& s, int mode, uint32_t ip, uint8_t mac, uint64_t iova) {
  EngineConfig c;
  c.mac = {0x02, 0, 0, 0, 0, mac};
  c.ip = wire::ipv4_mapped(ip);
  c.key_seed = c.qpn_seed = mac;
  c.policy = "tassel";
  c.link_bps = kLinkBps;
  c.sched_lookahead = 1'000'000;
  c.max_qps = 16;
  c.active_mtu = IBV_MTU_4096;
  c.dcqcn.enabled = mode != 0;
  if (mode == 2) {
    c.dcqcn.byte_counter_bytes = 1;
    c.dcqcn.min_rate_mbps = 10'000;
  }
  auto e = Engine::create(c);
  if (!e.ok()) return "Engine::create failed";
  s.engine = std::move(e.value());
  const PdHandle pd = s.engine->alloc_pd().value();
  s.cq = s.engine->create_cq(256).value();
  s.buf.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, kSize)));
  std::memset(s.buf.get(), 0x5a, kSize);
  auto mr = s.engine->reg_mr(pd, s.buf.get(), kSize, iova,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr.ok()) return "reg_mr failed";
  s.keys = mr.value();
  QpCreate qc;
  qc.pd = pd;
  qc.send_cq = qc.recv_cq = s.cq;
  qc.init.qp_type = IBV_QPT_RC;
  qc.init.cap.max_send_wr = 64;
  qc.init.cap.max_recv_wr = 64;
  qc.init.cap.max_send_sge = 1;
  qc.init.cap.max_recv_sge = 1;
  auto q = s.engine->create_qp(qc);
  if (!q.ok()) return "create_qp failed";
  s.qpn = q.value();
  return nullptr;
}

const char* connect(Side& self, const Side& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (self.engine->modify_qp(self.qpn, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return "INIT failed";
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer.qpn.value();
  a.rq_psn = 1000;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer.engine->config().ip.data(), 16);
  if (self.engine->modify_qp(self.qpn, a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return "RTR failed";
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 1000;
  a.max_rd_atomic = 16;
  if (self.engine->modify_qp(self.qpn, a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    return "RTS failed";
  return nullptr;
}

class Pair {
 public:
  explicit Pair(int mode) : mode_(mode) {}

  const char* set_up_all() {
    if (const char* e = set_up(a_, mode_, 0x0a000001, 1, kLocalIova)) return e;
    if (const char* e = set_up(b_, mode_, 0x0a000002, 2, kRemoteIova)) return e;
    a_.engine->set_neighbor(b_.engine->config().ip, b_.engine->config().mac);
    b_.engine->set_neighbor(a_.engine->config().ip, a_.engine->config().mac);
    if (const char* e = connect(a_, b_)) return e;
    if (const char* e = connect(b_, a_)) return e;
    // The CNP the responder's notification point would send to the requester.
    wire::FrameSpec f;
    f.src_mac = b_.engine->config().mac;
    f.dst_mac = a_.engine->config().mac;
    f.src_ip = b_.engine->config().ip;
    f.dst_ip = a_.engine->config().ip;
    f.traffic_class = 48 << 2;
    f.opcode = wire::op::kCnp;
    f.becn = true;
    f.dest_qp = a_.qpn;
    cnp_.resize(wire::frame_size(f));
    if (!wire::build_frame(f, cnp_).ok()) return "CNP build failed";
    for (uint32_t i = 0; i < kWindow; ++i)
      if (!post()) return "post_send failed";
    return nullptr;
  }

  const char* step() {
    const Picos t = std::min(a_.engine->next_deadline(), b_.engine->next_deadline());
    if (t == sched::kNever) return "stalled";
    now_ = std::max(now_, t);
    if (mode_ == 2 && now_ >= next_cnp_) {
      a_.engine->receive(now_, cnp_);
      next_cnp_ = now_ + kCnpEvery;
    }
    a_.engine->advance(now_);
    b_.engine->advance(now_);
    move(a_, b_);
    move(b_, a_);
    std::array<ibv_wc, 32> wc;
    const int n = a_.engine->poll_cq(a_.cq, wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return "completion in error";
      ++messages_;
      if (!post()) return "post_send failed";
    }
    return nullptr;
  }

  uint64_t messages() const { return messages_; }
  uint64_t rate_changes() const {
    const QpDcqcnState s = a_.engine->qp_dcqcn(a_.qpn);
    return s.increases + s.decreases;
  }

 private:
  bool post() {
    const Sge sge{kLocalIova, static_cast<uint32_t>(kSize), a_.keys.lkey};
    SendWr wr;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = kRemoteIova;
    wr.rkey = b_.keys.rkey;
    return a_.engine->post_send(now_, a_.qpn, wr) == 0;
  }
  void move(Side& from, Side& to) {
    sink_.clear();
    from.engine->transmit(now_, sink_, kBurst);
    for (size_t i = 0; i < sink_.count(); ++i) {
      now_ = std::max(now_, sink_.departure(i));
      to.engine->receive(now_, sink_.frame(i));
    }
  }

  int mode_;
  Side a_, b_;
  PoolSink sink_;
  std::vector<uint8_t> cnp_;
  Picos now_ = 0, next_cnp_ = 0;
  uint64_t messages_ = 0;
};

void BM_Transmit(benchmark::State& state) {
  auto pair = std::make_unique<Pair>(static_cast<int>(state.range(0)));
  if (const char* e = pair->set_up_all()) {
    state.SkipWithError(e);
    return;
  }
  for (int i = 0; i < 2'000 && pair->messages() < 4 * kWindow; ++i) {
    if (const char* e = pair->step()) {
      state.SkipWithError(e);
      return;
    }
  }
  const uint64_t m0 = pair->messages(), c0 = pair->rate_changes();
  for (auto _ : state) {
    if (const char* e = pair->step()) {
      state.SkipWithError(e);
      break;
    }
  }
  const double pkts = static_cast<double>(pair->messages() - m0) * (kSize / 4096);
  using C = benchmark::Counter;
  state.SetItemsProcessed(static_cast<int64_t>(pkts));
  state.counters["s_per_data_pkt"] = C(pkts, C::kIsRate | C::kInvert);
  state.counters["rate_changes_per_pkt"] = pkts > 0 ? static_cast<double>(pair->rate_changes() - c0) / pkts : 0;
}
BENCHMARK(BM_Transmit)->Arg(0)->Arg(1)->Arg(2);

void BM_RpOnSent(benchmark::State& state) {
  dcqcn::Params p;
  p.byte_counter_bytes = 1;
  p.min_rate_mbps = 1000;
  dcqcn::ReactionPoint rp(&p, kLinkBps);
  Picos now = 0;
  uint64_t changes = 0;
  const bool active = state.range(0) == 1;
  for (auto _ : state) {
    now += 330'000;  // a 4 KB packet at 100 Gb/s
    if (active && !rp.recovering()) {
      rp.on_cnp(now);
      rp.advance(now + 4'000'000);
    }
    changes += rp.on_sent(now, 4154);
    benchmark::DoNotOptimize(rp);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["rate_changes_per_pkt"] = static_cast<double>(changes) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_RpOnSent)->Arg(0)->Arg(1);

}  // namespace
}  // namespace isoroce::transport::bench

BENCHMARK_MAIN();
