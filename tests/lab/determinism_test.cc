// A sweep's table does not depend on the thread count: the same sweep with 1 and 2
// worker threads gives byte-identical CSV and JSON.
#include <gtest/gtest.h>

#include <string>

#include "tests/lab/lab_util.h"
#include "tools/lab/runner.h"
#include "tools/lab/sweep.h"
#include "tools/lab/table.h"

namespace isoroce::lab {
namespace {

std::string sweep_text(const std::string& scenario) {
  return R"([sweep]
seeds = 3
[[scenario]]
name = "both"
file = ")" + scenario + R"("
[[scenario]]
name = "alone"
file = ")" + scenario + R"("
only = ["lat"]
[[policy]]
name = "fifo"
policy = "fifo"
[[policy]]
name = "roce"
set = { "host.policy" = "rnic", "host.rnic.preset" = "cx4-roce" }
[grid]
"flow.bw.depth" = [1, 4]
[[metric]]
name = "p99"
flow = "lat"
field = "lat_us.p99"
[[metric]]
name = "bw"
flow = "bw"
field = "goodput_gbps"
[[compare]]
name = "inflation"
metric = "p99"
scenario = "both"
baseline = "alone"
)";
}

struct Output {
  std::string csv, json;
};

Output run_with(const Sweep& sweep, unsigned threads) {
  Plan plan;
  EXPECT_FALSE(plan_sweep(sweep, &plan));
  RunOptions opts;
  opts.threads = threads;
  std::size_t finished = 0;
  opts.on_done = [&](const lab::Run&, const RunResult& r, std::size_t done) {
    EXPECT_TRUE(r.integrity_ok) << r.failure;
    finished = done;
  };
  const auto results = run_sweep(sweep, plan, opts);
  EXPECT_EQ(finished, plan.runs.size());
  const Table t = tabulate(sweep, plan, results);
  return {to_csv(sweep, plan, t), to_json(sweep, plan, t).dump(2)};
}

// Receive: 24 runs (2 scenarios x 2 policies x 2 depths x 3 seeds) on a lossy link,
// once on 1 thread, once on 2. Expect: the same bytes; the seeds differ (some
// confidence interval is not 0), so the comparison is not trivially equal.
TEST(SweepDeterminism, OneAndTwoThreadsGiveTheSameTable) {
  const std::string sc = testing::write_temp("det.toml", testing::kLossyScenario);
  const SweepParse p = parse_sweep(sweep_text(sc), "det.sweep.toml", "/");
  ASSERT_TRUE(p.ok()) << p.error->to_string();
  const Output one = run_with(p.sweep, 1);
  const Output two = run_with(p.sweep, 2);
  EXPECT_EQ(one.csv, two.csv);
  EXPECT_EQ(one.json, two.json);
  EXPECT_NE(one.csv.find("compare,both,roce,4,inflation,3,"), std::string::npos) << one.csv;
  bool spread = false;  // some metric differs across seeds
  std::size_t rows = 0;
  for (std::size_t at = one.csv.find('\n'); at != std::string::npos && at + 1 < one.csv.size();
       at = one.csv.find('\n', at + 1)) {
    ++rows;
    const std::string line = one.csv.substr(at + 1, one.csv.find('\n', at + 1) - at - 1);
    // kind,scenario,policy,depth,name,n,mean,ci95,...
    std::size_t f = 0, pos = 0;
    while (f < 7 && pos != std::string::npos) pos = line.find(',', pos) + 1, ++f;
    if (pos != 0 && line.substr(pos, line.find(',', pos) - pos) != "0") spread = true;
  }
  EXPECT_EQ(rows, 8u * 2 - 4 + 4);  // p99 in 8 cells, bw in the 4 "both" cells, 4 compares
  EXPECT_TRUE(spread) << one.csv;
}

// Receive: the CLI on the same sweep with --threads 1 and 2, and CI=true. Expect:
// the same CSV on stdout, and nothing on stderr (no progress without a terminal).
TEST(SweepDeterminism, CliOutputsMatchAndStayQuiet) {
  const std::string sc = testing::write_temp("detcli.toml", testing::kLossyScenario);
  const std::string sw = testing::write_temp("detcli.sweep.toml", sweep_text(sc));
  const std::string tool = ISOROCE_LAB_TOOL;
  const auto a = testing::run_cmd("CI=true " + tool + " --threads 1 " + sw);
  const auto b = testing::run_cmd("CI=true " + tool + " --threads 2 " + sw);
  EXPECT_EQ(a.status, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind("kind,scenario,policy,flow.bw.depth,name,n,mean,ci95", 0), 0u) << a.out;
}

}  // namespace
}  // namespace isoroce::lab
