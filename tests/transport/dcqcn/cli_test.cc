// isoroce-dcqcn the binary: --help, errors with a non-zero exit, the JSON events.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace {

struct CmdResult {
  int status = -1;
  std::string out;
};

CmdResult run(const std::string& args, bool with_stderr = true) {
  CmdResult r;
  FILE* p = popen((std::string(ISOROCE_DCQCN_TOOL) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(DcqcnCli, HelpAndListParams) {
  auto h = run("--help");
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("--cnp-us"), std::string::npos);
  auto l = run("--list-params");
  EXPECT_EQ(l.status, 0);
  EXPECT_NE(l.out.find("rp_time_reset"), std::string::npos);
  EXPECT_NE(l.out.find("np_min_time_between_cnps"), std::string::npos);
}

TEST(DcqcnCli, BadInputExitsNonZeroWithAMessage) {
  for (const char* args : {"--cnp-us 0,abc", "--cnp-us 5,1", "--cnp-us 0 --param nope=1", "--cnp-us 0 --param g",
                           "--cnp-us 0 --line-gbps 0", "", "--cnp-us 0 --preset nope"}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_FALSE(r.out.empty()) << args;
  }
  EXPECT_NE(run("--cnp-us 0 --param g=2").out.find("g: must be in (0, 1]"), std::string::npos);
}

TEST(DcqcnCli, JsonTrajectoryMatchesTheHpccModel) {
  auto r = run("--line-gbps 100 --cnp-us 0 --until-us 1000 --preset hpcc --json", false);
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  std::vector<std::pair<double, double>> rates;  // (t, rate) of non-alpha events
  size_t alpha = 0;
  for (const auto& e : j) {
    for (const char* k : {"t_us", "event", "rate_gbps", "target_gbps", "alpha"}) ASSERT_TRUE(e.contains(k)) << k;
    if (e["event"] == "alpha") ++alpha;
    else rates.emplace_back(e["t_us"].get<double>(), e["rate_gbps"].get<double>());
  }
  EXPECT_EQ(alpha, 1000u);
  ASSERT_EQ(rates.size(), 5u);  // cnp, decrease, fast_recovery, additive, hyper
  const double want[][2] = {{0, 100}, {4, 50.8}, {304, 75.4}, {604, 87.7}, {904, 93.8}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_DOUBLE_EQ(rates[i].first, want[i][0]);
    EXPECT_NEAR(rates[i].second, want[i][1], want[i][1] * 0.01);
  }
}

TEST(DcqcnCli, ByteCounterEventsAppearWhenEnabled) {
  auto r = run("--cnp-us 0 --until-us 100 --param byte_counter_bytes=100000 --json", false);
  ASSERT_EQ(r.status, 0);
  auto j = nlohmann::json::parse(r.out);
  size_t bc = 0;
  for (const auto& e : j) bc += e["event"] == "byte_counter";
  EXPECT_GT(bc, 0u);
  auto off = nlohmann::json::parse(run("--cnp-us 0 --until-us 100 --param byte_counter_bytes=0 --json", false).out);
  for (const auto& e : off) EXPECT_NE(e["event"], "byte_counter");
}

}  // namespace
