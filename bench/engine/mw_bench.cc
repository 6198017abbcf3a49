// isoroce-bench-mw: what a remote access costs the engines when its R_Key is a
// memory window's rather than an MR's, on a port with one lane and on a port
// with lanes (transport/engine/windows.h: the lanes' engines share one table
// of windows and take its lock for each window-keyed access; an MR-keyed
// access never touches it). docs/performance.md, "Memory windows on lanes".
//
//   BM_Access/<verb>_<key>_<lanes>/<size>  two engines (requester, responder),
//       one RC QP pair at path MTU 4096, fifo policy, 16 WRITEs or READs of
//       <size> bytes outstanding, driven as bench/engine's BM_Engine is (jump
//       to the next deadline, advance, transmit 32 frames each way, deliver,
//       poll, post again). <key>: mr (the MR's R_Key) or mw (a type 1 window
//       over the whole MR, bound by a BIND_MW of the responder's QP). <lanes>:
//       1 (the responder's own table, no lock) or 2 (the responder shares its
//       windows with a second engine, as lane 1 of a two-lane port does: the
//       lock is taken, uncontended). Counter s_per_msg: wall time per
//       message, requester and responder together.
#include <benchmark/benchmark.h>
#include <infiniband/verbs.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/engine/pool_sink.h"
#include "transport/engine/engine.h"

namespace isoroce::transport::bench {
namespace {

constexpr uint32_t kWindow = 16;
constexpr uint64_t kIova = 0x10000000;
constexpr size_t kBytes = 1 << 20;

struct Side {
  std::unique_ptr<Engine> e;
  PdHandle pd = 0;
  CqHandle cq = 0;
  wire::Qpn qpn;
  std::unique_ptr<uint8_t, decltype(&std::free)> buf{nullptr, &std::free};
  verbs::MrKeys keys{};
};

std::unique_ptr<Engine> engine(uint32_t ip, uint8_t mac, uint32_t seed) {
  EngineConfig c;
  c.mac = {0x02, 0, 0, 0, 0, mac};
  c.ip = wire::ipv4_mapped(ip);
  c.key_seed = c.qpn_seed = seed;
  c.policy = "fifo";
  c.link_bps = 400'000'000'000;
  c.sched_lookahead = 1'000'000;
  c.max_qps = 16;
  c.active_mtu = IBV_MTU_4096;
  auto e = Engine::create(c);
  return e.ok() ? std::move(e.value()) : nullptr;
}

bool side(Side& s, std::unique_ptr<Engine> e) {
  if (!e) return false;
  s.e = std::move(e);
  s.pd = s.e->alloc_pd().value();
  s.cq = s.e->create_cq(256).value();
  s.buf.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, kBytes)));
  std::memset(s.buf.get(), 0x5a, kBytes);
  auto mr = s.e->reg_mr(s.pd, s.buf.get(), kBytes, kIova,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
  if (!mr.ok()) return false;
  s.keys = mr.value();
  QpCreate q;
  q.pd = s.pd;
  q.send_cq = q.recv_cq = s.cq;
  q.init.qp_type = IBV_QPT_RC;
  q.init.cap.max_send_wr = q.init.cap.max_recv_wr = 64;
  q.init.cap.max_send_sge = q.init.cap.max_recv_sge = 1;
  auto qpn = s.e->create_qp(q);
  if (!qpn.ok()) return false;
  s.qpn = qpn.value();
  return true;
}

bool connect(Side& self, const Side& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (self.e->modify_qp(self.qpn, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return false;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer.qpn.value();
  a.rq_psn = 1;
  a.max_dest_rd_atomic = kWindow;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer.e->config().ip.data(), 16);
  if (self.e->modify_qp(self.qpn, a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 1;
  a.max_rd_atomic = kWindow;
  return self.e->modify_qp(self.qpn, a,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                               IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

void BM_Access(benchmark::State& state, ibv_wr_opcode verb, bool window, int lanes) {
  const auto size = static_cast<uint32_t>(state.range(0));
  Side a, b;
  std::unique_ptr<Engine> other_lane;
  if (!side(a, engine(0x0a000001, 1, 1)) || !side(b, engine(0x0a000002, 2, 2)))
    return state.SkipWithError("set-up failed");
  if (lanes > 1) {  // b is lane 1 of a port whose lane 0 owns the windows
    other_lane = engine(0x0a000002, 2, 3);
    b.e->share_windows(*other_lane);
  }
  a.e->set_neighbor(b.e->config().ip, b.e->config().mac);
  b.e->set_neighbor(a.e->config().ip, a.e->config().mac);
  if (!connect(a, b) || !connect(b, a)) return state.SkipWithError("connect failed");
  PoolSink sink;
  Picos now = 0;
  auto move = [&](Side& from, Side& to) {
    sink.clear();
    from.e->transmit(now, sink, kBurst);
    for (size_t i = 0; i < sink.count(); ++i) {
      now = std::max(now, sink.departure(i));
      to.e->receive(now, sink.frame(i));
    }
  };
  uint32_t rkey = b.keys.rkey;
  if (window) {
    auto mw = b.e->alloc_mw(b.pd, IBV_MW_TYPE_1);
    if (!mw.ok()) return state.SkipWithError("alloc_mw failed");
    SendWr w;
    w.opcode = IBV_WR_BIND_MW;
    w.send_flags = IBV_SEND_SIGNALED;
    rkey = (mw.value() & 0xffffff00u) | ((mw.value() + 1) & 0xff);
    w.bind = verbs::MwBind{mw.value(), rkey, b.keys.lkey, kIova, kBytes,
                           IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
    if (b.e->post_send(now, b.qpn, w) != 0) return state.SkipWithError("bind post failed");
    b.e->advance(now);
    move(b, a);
    std::array<ibv_wc, 4> wc;
    if (b.e->poll_cq(b.cq, wc) != 1 || wc[0].status != IBV_WC_SUCCESS) return state.SkipWithError("bind failed");
  }
  uint64_t posted = 0, done = 0;
  auto post = [&] {
    const Sge sge{kIova + (posted % 8) * 65536, size, a.keys.lkey};
    SendWr wr;
    wr.wr_id = posted++;
    wr.opcode = verb;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = kIova + (posted % 8) * 65536;
    wr.rkey = rkey;
    return a.e->post_send(now, a.qpn, wr) == 0;
  };
  for (uint32_t i = 0; i < kWindow; ++i)
    if (!post()) return state.SkipWithError("post_send failed");
  auto step = [&]() -> const char* {
    const Picos t = std::min(a.e->next_deadline(), b.e->next_deadline());
    if (t == sched::kNever) return "stalled";
    now = std::max(now, t);
    a.e->advance(now);
    b.e->advance(now);
    move(a, b);
    move(b, a);
    std::array<ibv_wc, 32> wc;
    const int n = a.e->poll_cq(a.cq, wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return "completion in error";
      ++done;
      if (!post()) return "post_send failed";
    }
    return nullptr;
  };
  for (int i = 0; i < 2000 && done < 4 * kWindow; ++i)
    if (const char* e = step()) return state.SkipWithError(e);
  const uint64_t done0 = done;
  for (auto _ : state)
    if (const char* e = step()) return state.SkipWithError(e);
  const double msgs = static_cast<double>(done - done0);
  state.SetBytesProcessed(static_cast<int64_t>(msgs * size));
  using C = benchmark::Counter;
  state.counters["s_per_msg"] = C(msgs, C::kIsRate | C::kInvert);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {64, 65536}) b->Arg(n);
}

BENCHMARK_CAPTURE(BM_Access, write_mr_1, IBV_WR_RDMA_WRITE, false, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Access, write_mw_1, IBV_WR_RDMA_WRITE, true, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Access, write_mr_2, IBV_WR_RDMA_WRITE, false, 2)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Access, write_mw_2, IBV_WR_RDMA_WRITE, true, 2)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Access, read_mr_1, IBV_WR_RDMA_READ, false, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Access, read_mw_1, IBV_WR_RDMA_READ, true, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Access, read_mr_2, IBV_WR_RDMA_READ, false, 2)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Access, read_mw_2, IBV_WR_RDMA_READ, true, 2)->Apply(sizes);

}  // namespace
}  // namespace isoroce::transport::bench

BENCHMARK_MAIN();
