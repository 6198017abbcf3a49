// Sweep files: every error names the key and line, and the CLI exits 2 on them.
#include <gtest/gtest.h>

#include <string>

#include "tests/lab/lab_util.h"
#include "tools/lab/runner.h"
#include "tools/lab/sweep.h"

namespace isoroce::lab {
namespace {

using testing::CmdResult;
using testing::run_cmd;
using testing::write_temp;

std::string scenario_path() { return write_temp("scenario.toml", testing::kLossyScenario); }

std::string good_sweep(const std::string& scenario) {
  return R"([sweep]
name = "t"
seeds = 2
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
"flow.bw.depth" = [2, 4]
[[metric]]
name = "p50"
flow = "lat"
field = "lat_us.p50"
[[compare]]
name = "inflation"
metric = "p50"
scenario = "both"
baseline = "alone"
paper = 3.82
)";
}

// Receive: a sweep with an error at a known place. Expect: not ok, and the message
// names the file, the line and the key.
void expect_error(const std::string& text, const std::string& key, int line, const std::string& what) {
  const SweepParse p = parse_sweep(text, "s.toml", "/");
  ASSERT_FALSE(p.ok()) << text;
  EXPECT_EQ(p.error->key, key) << p.error->to_string();
  if (line) {
    EXPECT_EQ(p.error->line, line) << p.error->to_string();
  }
  EXPECT_NE(p.error->to_string().find(what), std::string::npos) << p.error->to_string();
  EXPECT_EQ(p.error->to_string().rfind("s.toml:", 0), 0u) << p.error->to_string();
}

TEST(SweepParse, GoodFileAndItsPlan) {
  const std::string sc = scenario_path();
  const SweepParse p = parse_sweep(good_sweep(sc), "s.toml", "/");
  ASSERT_TRUE(p.ok()) << p.error->to_string();
  EXPECT_EQ(p.sweep.seeds, (std::vector<unsigned long long>{1, 2}));
  ASSERT_EQ(p.sweep.policies.size(), 2u);
  EXPECT_EQ(p.sweep.policies[0].set[0].path, "host.policy");
  Plan plan;
  ASSERT_FALSE(plan_sweep(p.sweep, &plan));
  EXPECT_EQ(plan.cells.size(), 2u * 2 * 2);  // scenarios x policies x depths
  EXPECT_EQ(plan.runs.size(), 2u * 2 * 2 * 2);
  const lab::Run& r = plan.runs.back();  // alone, roce, depth 4, seed 2
  EXPECT_EQ(r.seed, 2u);
  EXPECT_EQ(r.built.seed, 2u);
  ASSERT_EQ(r.built.flows.size(), 1u);
  EXPECT_EQ(r.built.hosts[0].policy, "rnic");
  EXPECT_EQ(r.built.hosts[1].rnic.pipeline_packets, 22u);
  EXPECT_EQ(plan.runs[7].built.flows[1].depth, 4u);  // both, roce, depth 4, seed 2
}

TEST(SweepParse, ErrorsNameTheKeyAndLine) {
  const std::string sc = scenario_path();
  const std::string good = good_sweep(sc);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  expect_error(with("seeds = 2", "seds = 2"), "sweep.seds", 3, "unknown key");
  expect_error(with("seeds = 2", "seeds = []"), "sweep.seeds", 3, "non-empty");
  expect_error(with("field = \"lat_us.p50\"", ""), "metric[0].field", 0, "missing");
  expect_error(with("metric = \"p50\"", "metric = \"p51\""), "compare[0].metric", 0, "no [[metric]] named \"p51\"");
  expect_error(with("baseline = \"alone\"", "baseline = \"solo\""), "compare[0].baseline", 0, "no [[scenario]]");
  expect_error(with("\"flow.bw.depth\" = [2, 4]", "\"flow.bw.depth\" = []"), "grid.flow.bw.depth", 0, "non-empty");
  expect_error(with("name = \"alone\"", "name = \"both\""), "scenario[1].name", 0, "used twice");
  expect_error(with(sc, "/nonexistent/x.toml"), "scenario[0].file", 0, "no such file");
  expect_error(with("paper = 3.82", "paper = -1"), "compare[0].paper", 0, "positive");
  expect_error(with("[[metric]]", "[[metric]"), "", 19, "");  // TOML syntax, with its line
  expect_error(with("flow = \"lat\"", "flow = \"lat\"\nhost = \"a\""), "metric[0].host", 0, "not both");
  // A host's field instead of a flow's (justitia.reclassified in classify.sweep.toml).
  const SweepParse h = parse_sweep(with("flow = \"lat\"", "host = \"a\""), "s.toml", "/");
  ASSERT_TRUE(h.ok()) << h.error->to_string();
  EXPECT_EQ(h.sweep.metrics[0].host, "a");
  EXPECT_EQ(h.sweep.metrics[0].flow, "");
}

// Receive: metrics over flow patterns ("*": every flow; "l*": lat) with each
// aggregate, beside the single flows' metrics, one run of kLossyScenario; and the
// pattern errors. Expect: sum, mean, min, max and Jain's index of the two flows'
// wire_gbps computed from the single-flow values; "l*" = lat alone; a pattern needs
// an aggregate, an aggregate needs a pattern, an unknown aggregate is named.
TEST(SweepParse, AggregatesOverFlowPatterns) {
  const std::string sc = scenario_path();
  std::string text = R"([sweep]
name = "agg"
seeds = 1
[[scenario]]
name = "both"
file = ")" + sc + R"("
[[metric]]
name = "lat"
flow = "lat"
field = "wire_gbps"
[[metric]]
name = "bw"
flow = "bw"
field = "wire_gbps"
)";
  for (const char* how : {"sum", "mean", "min", "max", "jain"})
    text += std::string("[[metric]]\nname = \"") + how + "\"\nflow = \"*\"\nfield = \"wire_gbps\"\naggregate = \"" + how +
            "\"\n";
  text += "[[metric]]\nname = \"l\"\nflow = \"l*\"\nfield = \"wire_gbps\"\naggregate = \"sum\"\n";
  const SweepParse p = parse_sweep(text, "s.toml", "/");
  ASSERT_TRUE(p.ok()) << p.error->to_string();
  Plan plan;
  ASSERT_FALSE(plan_sweep(p.sweep, &plan));
  const std::vector<RunResult> res = run_sweep(p.sweep, plan, RunOptions{.threads = 1, .on_done = {}});
  ASSERT_EQ(res.size(), 1u);
  const auto& m = res[0].metrics;
  ASSERT_EQ(m.size(), 8u);
  for (const auto& v : m) ASSERT_TRUE(v.has_value());
  const double a = *m[0], b = *m[1];
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_DOUBLE_EQ(*m[2], a + b);
  EXPECT_DOUBLE_EQ(*m[3], (a + b) / 2);
  EXPECT_DOUBLE_EQ(*m[4], std::min(a, b));
  EXPECT_DOUBLE_EQ(*m[5], std::max(a, b));
  EXPECT_DOUBLE_EQ(*m[6], (a + b) * (a + b) / (2 * (a * a + b * b)));
  EXPECT_DOUBLE_EQ(*m[7], a);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  expect_error(with("aggregate = \"sum\"", ""), "metric[2].aggregate", 0, "missing");
  expect_error(with("aggregate = \"sum\"", "aggregate = \"median\""), "metric[2].aggregate", 0, "\"median\"");
  expect_error(with("field = \"wire_gbps\"\n[[metric]]", "field = \"wire_gbps\"\naggregate = \"sum\"\n[[metric]]"),
               "metric[0].aggregate", 0, "pattern");
}

TEST(SweepParse, PlanErrorsNameTheRun) {
  const std::string sc = scenario_path();
  std::string t = good_sweep(sc);
  t.replace(t.find("\"flow.bw.depth\""), 15, "\"flow.bx.depth\"");
  SweepParse p = parse_sweep(t, "s.toml", "/");
  ASSERT_TRUE(p.ok());
  Plan plan;
  auto err = plan_sweep(p.sweep, &plan);
  ASSERT_TRUE(err);
  EXPECT_NE(err->to_string().find("flow.bx.depth: no flow named \"bx\""), std::string::npos) << err->to_string();
  t = good_sweep(sc);
  t.replace(t.find("\"cx4-roce\""), 10, "\"cx9\"");
  p = parse_sweep(t, "s.toml", "/");
  ASSERT_TRUE(p.ok());
  err = plan_sweep(p.sweep, &plan);
  ASSERT_TRUE(err);
  EXPECT_NE(err->to_string().find("host[0].rnic.preset: unknown preset \"cx9\""), std::string::npos)
      << err->to_string();
}

TEST(LabCli, BadSweepExitsTwoWithTheMessage) {
  const std::string sc = scenario_path();
  std::string t = good_sweep(sc);
  t.replace(t.find("flow = \"lat\""), 12, "flw = \"lat\"");
  CmdResult r = run_cmd(std::string(ISOROCE_LAB_TOOL) + " " + write_temp("bad.sweep.toml", t));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("metric[0].flw: unknown key"), std::string::npos) << r.out;
  r = run_cmd(std::string(ISOROCE_LAB_TOOL) + " /nonexistent.sweep.toml");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("cannot read"), std::string::npos) << r.out;
  r = run_cmd(std::string(ISOROCE_LAB_TOOL) + " --check " + write_temp("good.sweep.toml", good_sweep(sc)));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("16 runs in 8 cells"), std::string::npos) << r.out;
  r = run_cmd(std::string(ISOROCE_LAB_TOOL) + " --threads x " + write_temp("good.sweep.toml", good_sweep(sc)));
  EXPECT_EQ(r.status, 1) << r.out;
}

}  // namespace
}  // namespace isoroce::lab
