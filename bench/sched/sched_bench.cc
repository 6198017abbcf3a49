// isoroce-bench-sched: packets per second through the tassel scheduler against two
// baselines in the same run (issue 4). Every QP is always backlogged with 64 B
// packets; limits are drawn uniformly from 0.5x to 1.5x of 95% of the link over the
// QP count (seeded), so the link runs 95% full. The clock is virtual: each step jumps
// to the scheduler's next deadline and dequeues a batch of up to 32 packets departing
// within the next microsecond. One packet = one dequeue + one re-enqueue of its QP.
//   BM_Tassel       the timing-wheel scheduler of sched/
//   BM_TasselTenants  the same with its QPs in 16 tenants (the share tree)
//   BM_HeapWF2Q     the same WF2Q+ on two std::priority_queue binary heaps
//   BM_TokenBucket  a token bucket per QP, polled round robin
// Arg: active QPs. items/s: packets/s. link_util: share of the virtual link used.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "bench/sched/heap_wf2q.h"
#include "bench/sched/token_bucket.h"
#include "sched/tassel.h"

namespace isoroce::sched::bench {
namespace {

constexpr std::uint64_t kLink = 100'000'000'000;
constexpr std::uint32_t kBytes = 64;
constexpr Picos kLookahead = 1'000'000;  // 1 us
constexpr std::size_t kBatch = 32;

struct Endless final : PacketSource {
  Packet on_grant(QpId, std::uint32_t) override { return {kBytes, true}; }
};

Config bench_config(std::uint32_t qps) {
  return Config{.link_bps = kLink, .max_qps = qps, .lookahead = kLookahead};
}

template <class S>
void set_rates(S& sched, std::uint32_t qps) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> spread(0.5, 1.5);
  const double fair = 0.95 * static_cast<double>(kLink) / qps;
  for (QpId q = 0; q < qps; ++q) {
    sched.set_rate(q, static_cast<std::uint64_t>(fair * spread(rng)));
  }
}

// QPs start at random instants of one mean packet gap, as unsynchronized senders do;
// `step(t)` runs the scheduler up to time t.
template <class S, class Step>
void start_staggered(S& sched, std::uint32_t qps, Step step) {
  std::mt19937_64 rng(43);
  const Picos mean_gap = static_cast<Picos>(qps * (kBytes * 8e12 / (0.95 * kLink)));
  std::vector<std::pair<Picos, QpId>> starts(qps);
  for (QpId q = 0; q < qps; ++q) starts[q] = {rng() % (mean_gap + 1), q};
  std::sort(starts.begin(), starts.end());
  for (auto [t, q] : starts) {
    step(t);
    sched.activate(t, q, {kBytes, true});
  }
}

void report(benchmark::State& state, std::uint64_t packets, Picos start, Picos end, std::size_t bytes_per_qp) {
  state.SetItemsProcessed(static_cast<std::int64_t>(packets));
  state.counters["link_util"] =
      end > start ? static_cast<double>(packets) * kBytes * 8e12 / (static_cast<double>(kLink) * (end - start)) : 0;
  state.counters["B_per_qp"] = static_cast<double>(bytes_per_qp);
}

// Drives a scheduler with next_deadline(): Tassel and the heap baseline.
// events: a trace record counter (BM_TasselTraced), reported per packet.
template <class S>
void run_deadline_driven(benchmark::State& state, S& sched, const std::uint64_t* events = nullptr) {
  const auto qps = static_cast<std::uint32_t>(state.range(0));
  set_rates(sched, qps);
  Endless src;
  Grant out[kBatch];
  Picos now = 0;
  auto step = [&] {
    now = std::max(now, sched.next_deadline());
    return sched.dequeue(now, out, src);
  };
  start_staggered(sched, qps, [&](Picos t) {
    while (sched.next_deadline() <= t) step();
    now = std::max(now, t);
  });
  for (std::uint64_t p = 0; p < 2 * static_cast<std::uint64_t>(qps) + 100'000;) p += step();
  const Picos start = now;
  const std::uint64_t events0 = events ? *events : 0;
  std::uint64_t packets = 0;
  for (auto _ : state) {
    packets += step();
    benchmark::DoNotOptimize(out[0]);
  }
  report(state, packets, start, now, sched.bytes_per_qp());
  if (events && packets) state.counters["events_per_pkt"] = static_cast<double>(*events - events0) / packets;
}

// Adapts TasselScheduler's interface (now, qp, bps) to set_up's.
struct TasselAdapter {
  explicit TasselAdapter(const Config& c) : sched(c) {}
  void set_rate(QpId qp, std::uint64_t bps) { sched.set_rate(0, qp, bps); }
  void activate(Picos now, QpId qp, Packet p) { sched.activate(now, qp, p); }
  std::size_t dequeue(Picos now, std::span<Grant> out, PacketSource& src) { return sched.dequeue(now, out, src); }
  Picos next_deadline() const { return sched.next_deadline(); }
  std::size_t bytes_per_qp() const { return sched.bytes_per_qp(); }
  TasselScheduler sched;
};

void BM_Tassel(benchmark::State& state) {
  const auto qps = static_cast<std::uint32_t>(state.range(0));
  auto sched = std::make_unique<TasselAdapter>(bench_config(qps));
  run_deadline_driven(state, *sched);
}

// BM_Tassel with every QP in one of 16 tenants (weights 1 to 4), 4 applications
// per tenant: the share tree decides among the QPs that may send (sched/share_tree.h).
// The limits are the same as BM_Tassel's, so the link is not oversubscribed and the
// cost measured is the tree's, not a different schedule's.
void BM_TasselTenants(benchmark::State& state) {
  const auto qps = static_cast<std::uint32_t>(state.range(0));
  auto sched = std::make_unique<TasselAdapter>(bench_config(qps));
  for (QpId q = 0; q < qps; ++q) {
    sched->sched.set_class(0, q, FlowClass::kBandwidth, q % 64, 1);
    sched->sched.set_tenant(0, q, 1 + q % 16, 1 + q % 4);
  }
  run_deadline_driven(state, *sched);
}

// A trace sink that only counts: what is left is the cost of emitting.
class CountingSink final : public trace::Sink {
 public:
  void record(const trace::Record& r) override {
    ++count;
    benchmark::DoNotOptimize(r.time);
  }
  std::uint64_t count = 0;
};

// BM_Tassel with every trace event recorded into a counting sink (sched/trace.h);
// BM_Tassel is the same run with tracing off. events_per_pkt: records per grant.
void BM_TasselTraced(benchmark::State& state) {
  const auto qps = static_cast<std::uint32_t>(state.range(0));
  auto sched = std::make_unique<TasselAdapter>(bench_config(qps));
  CountingSink sink;
  sched->sched.attach_trace(&sink, trace::kAllEvents, 0);
  run_deadline_driven(state, *sched, &sink.count);
}

void BM_HeapWF2Q(benchmark::State& state) {
  const auto qps = static_cast<std::uint32_t>(state.range(0));
  auto sched = std::make_unique<HeapWf2q>(bench_config(qps));
  run_deadline_driven(state, *sched);
}

void BM_TokenBucket(benchmark::State& state) {
  const auto qps = static_cast<std::uint32_t>(state.range(0));
  auto sched = std::make_unique<TokenBucketRr>(bench_config(qps));
  set_rates(*sched, qps);
  Endless src;
  Grant out[kBatch];
  Picos now = 0;
  const Picos poll = duration(kBytes, byte_cost(kLink));  // nothing ready: poll again a packet later
  auto step = [&] {
    now = std::max(now, sched->link_free_at());
    const std::size_t n = sched->dequeue(now, out, src);
    if (n == 0) now += poll;
    return n;
  };
  start_staggered(*sched, qps, [&](Picos t) { now = std::max(now, t); });
  // Polling is O(QPs) per packet here: warm up by steps, not by rounds of all QPs.
  for (int i = 0; i < 1'000; ++i) step();
  const Picos start = now;
  std::uint64_t packets = 0;
  for (auto _ : state) {
    packets += step();
    benchmark::DoNotOptimize(out[0]);
  }
  report(state, packets, start, now, sched->bytes_per_qp());
  state.counters["empty_scans"] = static_cast<double>(sched->empty_scans());
}

void qp_counts(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1, 1'024, 16'384, 1'048'576}) b->Arg(n);
}

BENCHMARK(BM_Tassel)->Apply(qp_counts);
BENCHMARK(BM_TasselTraced)->Apply(qp_counts);
BENCHMARK(BM_TasselTenants)->Apply(qp_counts);
BENCHMARK(BM_HeapWF2Q)->Apply(qp_counts);
BENCHMARK(BM_TokenBucket)->Apply(qp_counts);

}  // namespace
}  // namespace isoroce::sched::bench

BENCHMARK_MAIN();
