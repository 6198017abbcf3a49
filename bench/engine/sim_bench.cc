// BM_SimEvents: simulator events per second of wall time (issue 3), built into
// isoroce-bench-engine when dataplane/sim's isoroce_sim library exists.
//
// A fixed scenario through the library API (dataplane/sim/simulator.h): two
// hosts at 100 Gb/s behind the switch, 1 us links, fifo policy, path MTU 1024,
// three RC flows: a -> b WRITE 64 KB x 400 (depth 8), b -> a SEND 4 KB x 2000
// (depth 8), a -> b READ 256 B x 2000 (depth 4). Arg: 0 clean links, 1 with 1%
// loss on every link. One iteration builds the simulator (not timed), runs it
// to the end and checks that every flow finished intact. items/s: events per
// second of the process's CPU time (wall time on an idle core: the run is
// single-threaded and does no I/O); virtual_per_wall: simulated seconds per
// such second.
#include <benchmark/benchmark.h>

#include <string>
#include <string_view>
#include <utility>

#include "dataplane/sim/simulator.h"

namespace isoroce::sim::bench {
namespace {

Scenario scenario(bool lossy) {
  Scenario s;
  s.seed = 1;
  s.duration = 100'000'000'000;  // 100 ms; the flows finish well before
  s.link_delay = 1'000'000;
  if (lossy) s.faults.loss.p = 0.01;
  for (const std::string_view ip : {std::string_view("10.0.0.1"), std::string_view("10.0.0.2")}) {
    HostConfig h;
    h.name = std::string(1, static_cast<char>('a' + s.hosts.size()));
    h.ip_text = std::string(ip);
    parse_ip(ip, &h.ip);
    h.link_bps = 100'000'000'000;
    h.policy = "fifo";
    h.mtu = 1024;  // 1500-byte Ethernet, as rxe chooses
    s.hosts.push_back(std::move(h));
  }
  auto flow = [&](const char* name, const char* src, const char* dst, Verb verb, uint64_t size,
                  uint64_t count, uint32_t depth) {
    FlowConfig f;
    f.name = name;
    f.src = src;
    f.dst = {dst};
    f.transport = Transport::kRc;
    f.verb = verb;
    f.size = size;
    f.count = count;
    f.depth = depth;
    f.mtu = 1024;
    s.flows.push_back(f);
  };
  flow("write", "a", "b", Verb::kWrite, 64 << 10, 400, 8);
  flow("send", "b", "a", Verb::kSend, 4 << 10, 2000, 8);
  flow("read", "a", "b", Verb::kRead, 256, 2000, 4);
  return s;
}

void BM_SimEvents(benchmark::State& state) {
  const Scenario s = scenario(state.range(0) != 0);
  uint64_t events = 0;
  double virtual_us = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ScenarioError err;
    auto sim = Simulator::create(s, &err);
    if (!sim) {
      std::string why = "scenario: ";
      why += err.to_string();
      state.SkipWithError(why.c_str());
      return;
    }
    state.ResumeTiming();
    const SimReport r = sim->run();
    state.PauseTiming();
    bool ok = r.all_finished;
    for (const FlowReport& f : r.flows) ok = ok && f.integrity_ok && f.errors == 0;
    if (!ok) {
      state.SkipWithError("a flow did not finish, failed its integrity check or had errors");
      return;
    }
    events += r.events;
    virtual_us += r.virtual_us;
    sim.reset();  // teardown is not timed either
    state.ResumeTiming();
  }
  using C = benchmark::Counter;
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["events_per_run"] = C(static_cast<double>(events), C::kAvgIterations);
  state.counters["virtual_per_wall"] = C(virtual_us * 1e-6, C::kIsRate);
}

BENCHMARK(BM_SimEvents)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace isoroce::sim::bench
