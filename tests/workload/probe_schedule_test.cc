// The same reference probe under the simulator and under isoroced's driver:
// the simulator runs a justitia host's probe beside traffic that queues its
// ACKs (so some probes are late and some are not); then the daemon's poll-loop
// driving (tests/workload/probe_drivers.h, what ctrl/reference_flow.h does on
// every pass of dataplane::Device::poll) runs the probe over an engine pair
// whose ACKs arrive exactly when the simulator's did. Every post and
// completion must be at the same instant: one probe, one schedule.
#include <gtest/gtest.h>

#include "dataplane/sim/simulator.h"
#include "tests/workload/probe_drivers.h"
#include "tools/sim/scenario_toml.h"

namespace isoroce::workload::testing {
namespace {

constexpr Picos kUs = 1'000'000;

const char* kScenario = R"(
duration_us = 1000
[[host]]
name = "a"
ip = "10.0.0.1"
policy = "justitia"
[host.justitia]
ref_period_us = 10
[[host]]
name = "b"
ip = "10.0.0.2"
link_gbps = 1
[[flow]]
name = "burst0"
src = "b"
dst = ["a"]
verb = "write"
size = "16KB"
count = 1
start_us = 100
[[flow]]
name = "burst1"
src = "b"
dst = ["a"]
verb = "write"
size = "16KB"
count = 1
start_us = 400
[[flow]]
name = "burst2"
src = "b"
dst = ["a"]
verb = "write"
size = "16KB"
count = 1
start_us = 700
)";

TEST(ProbeSchedule, SimulatorAndDaemonDriverPostAndCompleteAtTheSameInstants) {
  auto parsed = tools::parse_scenario(kScenario, "test");
  ASSERT_TRUE(parsed.ok()) << (parsed.error ? parsed.error->to_string() : "");
  sim::ScenarioError err;
  auto simulator = sim::Simulator::create(parsed.scenario, &err);
  ASSERT_TRUE(simulator) << err.to_string();
  std::vector<ProbeMark> sim_marks;
  simulator->set_probe_tap([&](uint32_t host, const ProbeMark& m) {
    if (host == 0) sim_marks.push_back(m);
  });
  const sim::SimReport report = simulator->run();
  const Picos end = static_cast<Picos>(report.virtual_us * 1e6);

  std::vector<Picos> completions;
  size_t late = 0, on_grid = 0;
  for (const auto& m : sim_marks) {
    ASSERT_NE(m.kind, ProbeMark::kError);
    if (m.kind == ProbeMark::kComplete) completions.push_back(m.time);
    if (m.kind == ProbeMark::kPost) (m.time % (10 * kUs) == 0 ? on_grid : late)++;
  }
  // The run exercises both halves of the rule.
  ASSERT_GT(on_grid, 5u);
  ASSERT_GT(late, 5u);

  // The daemon's driver, its ACKs at the simulator's completion instants.
  Wire w([&, acks = size_t{0}](int from, Picos departure) mutable {
    if (from == 0) return departure;
    return acks < completions.size() ? completions[acks++] : kNever;
  });
  ProbeRig rig(w, 10 * kUs);
  run_polled(w, rig.probe, end);
  // The simulator stops at `end`: compare what both saw by then.
  std::vector<ProbeMark> daemon_marks;
  for (const auto& m : rig.marks)
    if (m.time <= end) daemon_marks.push_back(m);
  while (!sim_marks.empty() && sim_marks.back().time > end) sim_marks.pop_back();
  ASSERT_GT(sim_marks.size(), 40u);
  EXPECT_EQ(daemon_marks, sim_marks);
}

}  // namespace
}  // namespace isoroce::workload::testing
