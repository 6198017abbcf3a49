// The rnic presets against the Justitia paper's Fig. 1 (a 16 B WRITE beside one 1 MB
// WRITE flow: latency median and p99 over alone), within stated tolerances, on the
// calibration scenarios of bench/justitia/calibration (3 seeds, 6 ms).
#include <gtest/gtest.h>

#include <string>

#include "tools/lab/runner.h"
#include "tools/lab/sweep.h"
#include "tools/lab/table.h"

namespace isoroce::lab {
namespace {

struct Case {
  const char* family;  // calibration/<family>.toml
  const char* preset;
  double paper_p50, paper_p99;
  double tol_p50, tol_p99;  // relative
};

std::string sweep_text(const Case& c) {
  const std::string file = std::string(ISOROCE_CALIBRATION) + "/" + c.family + ".toml";
  return R"([sweep]
seeds = 3
duration_us = 6000
[[scenario]]
name = "alone"
file = ")" + file + R"("
only = ["lat"]
[[scenario]]
name = "beside"
file = ")" + file + R"("
only = ["lat", "bw"]
[[policy]]
name = "preset"
set = { "host.policy" = "rnic", "host.rnic.preset" = ")" + c.preset + R"(" }
[[policy]]
name = "fifo"
policy = "fifo"
[[metric]]
name = "p50"
flow = "lat"
field = "lat_us.p50"
[[metric]]
name = "p99"
flow = "lat"
field = "lat_us.p99"
[[compare]]
name = "p50"
metric = "p50"
scenario = "beside"
baseline = "alone"
[[compare]]
name = "p99"
metric = "p99"
scenario = "beside"
baseline = "alone"
)";
}

class Calibration : public ::testing::TestWithParam<Case> {};

// Receive: the preset's lat-alone and lat-beside-bw runs. Expect: the median and p99
// inflation within the tolerance of the paper's; whole-message fifo at least 50x.
TEST_P(Calibration, HeadlineFigureWithinTolerance) {
  const Case& c = GetParam();
  const SweepParse p = parse_sweep(sweep_text(c), c.preset, "/");
  ASSERT_TRUE(p.ok()) << p.error->to_string();
  Plan plan;
  ASSERT_FALSE(plan_sweep(p.sweep, &plan));
  const auto results = run_sweep(p.sweep, plan, {.threads = 2, .on_done = {}});
  const Table t = tabulate(p.sweep, plan, results);
  int checked = 0;
  for (const Row& r : t.rows) {
    if (r.kind != "compare") continue;
    ASSERT_TRUE(r.has_value);
    const bool preset = plan.cells[r.cell].policy == 0;
    if (!preset) {
      EXPECT_GT(r.value.mean, 50.0) << r.name << ": fifo";
      continue;
    }
    const bool median = r.name == "p50";
    const double paper = median ? c.paper_p50 : c.paper_p99;
    const double tol = median ? c.tol_p50 : c.tol_p99;
    EXPECT_NEAR(r.value.mean / paper, 1.0, tol) << c.preset << " " << r.name << ": " << r.value.mean << "x, paper "
                                                << paper << "x";
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// Tolerances: 5%, except the iWARP median: one 1 KB packet at 40 Gb/s is already
// 0.1x of the 2.08 us alone latency, so 1.11x is out of reach of packet round robin
// (the preset gives 1.29x; docs/isolation.md).
INSTANTIATE_TEST_SUITE_P(Presets, Calibration,
                         ::testing::Values(Case{"roce", "cx4-roce", 3.82, 4.0, 0.05, 0.05},
                                           Case{"ib", "cx3-ib", 1.85, 2.23, 0.05, 0.05},
                                           Case{"iwarp", "t6-iwarp", 1.11, 95.0, 0.20, 0.05}),
                         [](const auto& info) {
                           std::string s = info.param.preset;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace isoroce::lab
