// Runs a sweep: every (scenario, policy, grid point, seed) is one isoroce-sim run in
// virtual time, on oneTBB worker threads. Each run owns its whole world (the
// simulator keeps no global mutable state: docs/isoroce-lab.md), results are stored
// by run index, so they are the same for any thread count.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/sim/scenario.h"
#include "tools/lab/sweep.h"

namespace isoroce::lab {

// One run of the grid; `cell` indexes (scenario, policy, grid point).
struct Run {
  std::size_t cell = 0;
  std::size_t scenario = 0, policy = 0;
  std::vector<std::size_t> point;  // index into each grid axis's values
  unsigned long long seed = 0;
  sim::Scenario built;             // the scenario with every override applied
};

struct Cell {
  std::size_t scenario = 0, policy = 0;
  std::vector<std::size_t> point;
};

struct RunResult {
  std::vector<std::optional<double>> metrics;  // per Sweep::metrics; empty if the flow is absent
  bool integrity_ok = true;
  std::string failure;  // a flow with errors or a broken integrity check
  double wall_s = 0;    // progress only; never in the tables
};

struct Plan {
  std::vector<Cell> cells;
  std::vector<Run> runs;
};

// Builds every run's scenario (overrides applied, then parsed and validated as
// isoroce-sim would); an error names the run and the key.
std::optional<SweepError> plan_sweep(const Sweep& sweep, Plan* plan);

// "roce-lat cx4-roce host.rnic.batch_packets=4 seed 1"
std::string describe(const Sweep& sweep, const Run& run);

struct RunOptions {
  unsigned threads = 0;  // 0: every hardware thread
  // Called as each run finishes (serialised), with how many have finished.
  std::function<void(const Run&, const RunResult&, std::size_t done)> on_done;
};

std::vector<RunResult> run_sweep(const Sweep& sweep, const Plan& plan, const RunOptions& opts);

}  // namespace isoroce::lab
