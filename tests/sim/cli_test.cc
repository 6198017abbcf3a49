// isoroce-sim the binary: bad input exits non-zero naming the key; --json is
// JSON with the documented fields; --no-wall output is byte-identical per seed;
// every shipped example scenario parses and runs.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/sim/sim_util.h"
#include "tests/temp_path.h"

namespace isoroce::sim {
namespace {

struct CmdResult {
  int status = -1;
  std::string out;
};

// Runs a command, stdout and stderr together.
CmdResult run(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = isoroce::test::temp_path("isoroce-sim-test-", name);
  std::ofstream(path) << text;
  return path;
}

const std::string kTool = ISOROCE_SIM_TOOL;

const char* kGood = R"(seed = 4
duration_us = 10000
[faults]
loss = 0.01
[[host]]
name = "a"
ip = "10.0.0.1"
[[host]]
name = "b"
ip = "10.0.0.2"
[[flow]]
name = "w"
src = "a"
dst = "b"
verb = "write"
size = "4KB"
count = 50
depth = 2
)";

TEST(Cli, BadKeyExitsNonZeroNamingTheKey) {
  std::string text = kGood;
  text.replace(text.find("depth = 2"), 9, "dept = 2");
  const CmdResult r = run(kTool + " " + write_temp("bad.toml", text));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("flow[0].dept"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown key"), std::string::npos) << r.out;
}

TEST(Cli, ImpossibleScenarioAndMissingFile) {
  std::string text = kGood;
  text.replace(text.find("dst = \"b\""), 9, "dst = \"zz\"");
  CmdResult r = run(kTool + " " + write_temp("nohost.toml", text));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("flow[0].dst"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("zz"), std::string::npos) << r.out;
  r = run(kTool + " /nonexistent/scenario.toml");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("cannot open"), std::string::npos) << r.out;
  r = run(kTool + " " + write_temp("good0.toml", kGood) + " --seed notanumber");
  EXPECT_NE(r.status, 0);
  r = run(kTool);
  EXPECT_NE(r.status, 0);
}

TEST(Cli, HelpAndCheck) {
  CmdResult r = run(kTool + " --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--json"), std::string::npos);
  EXPECT_NE(r.out.find("--seed"), std::string::npos);
  r = run(kTool + " --check " + write_temp("good1.toml", kGood));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("ok"), std::string::npos);
}

TEST(Cli, JsonReportHasTheDocumentedFields) {
  const CmdResult r = run(kTool + " --json " + write_temp("good2.toml", kGood));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["flows"].size(), 1u);
  const auto& f = j["flows"][0];
  for (const char* k : {"name", "messages", "bytes", "goodput_gbps", "msgs_per_sec", "lat_us", "retransmits",
                        "naks", "rnr_naks", "errors", "integrity_ok"})
    EXPECT_TRUE(f.contains(k)) << k;
  for (const char* k : {"p50", "p99", "p999", "max"}) EXPECT_TRUE(f["lat_us"].contains(k)) << k;
  EXPECT_EQ(f["name"], "w");
  EXPECT_EQ(f["messages"], 50);
  EXPECT_EQ(f["bytes"], 50 * 4096);
  EXPECT_EQ(f["integrity_ok"], true);
  for (const char* k : {"events", "virtual_us", "wall_ms"}) EXPECT_TRUE(j["sim"].contains(k)) << k;
  EXPECT_TRUE(j.contains("hosts"));
  EXPECT_TRUE(j.contains("switch"));
}

TEST(Cli, NoWallOutputIsByteIdenticalPerSeed) {
  const std::string path = write_temp("good3.toml", kGood);
  const CmdResult a = run(kTool + " --json --no-wall " + path);
  const CmdResult b = run(kTool + " --json --no-wall " + path);
  const CmdResult c = run(kTool + " --json --no-wall --seed 5 " + path);
  ASSERT_EQ(a.status, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(a.out.find("wall_ms"), std::string::npos);
  const CmdResult t1 = run(kTool + " --no-wall " + path), t2 = run(kTool + " --no-wall " + path);
  EXPECT_EQ(t1.out, t2.out);
  EXPECT_NE(t1.out.find("integrity"), std::string::npos);
}

TEST(Examples, EveryShippedScenarioRuns) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(ISOROCE_SIM_EXAMPLES)) {
    if (e.path().extension() != ".toml") continue;
    ++n;
    SCOPED_TRACE(e.path().string());
    const auto parsed = tools::load_scenario(e.path().string());
    ASSERT_TRUE(parsed.ok()) << parsed.error->to_string();
    const SimReport r = testing::run_scenario(parsed.scenario);
    for (const auto& f : r.flows) EXPECT_TRUE(f.integrity_ok) << testing::describe(f);
    EXPECT_GT(r.events, 0u);
  }
  EXPECT_GE(n, 3u);
}

}  // namespace
}  // namespace isoroce::sim
