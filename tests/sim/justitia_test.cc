// Justitia in the simulator: the acceptance tests of issue 7, in virtual time, on the
// scenarios of bench/scenarios/justitia/ (shortened), each run under fifo, under
// justitia and with the flow alone. Every comparison is also made the other way
// (fifo shows the anomaly), so each test fails if the policy stops isolating.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <string>
#include <vector>

#include "sim_util.h"

namespace isoroce::sim {
namespace {

using testing::flow;
using testing::parse_ok;
using testing::run_scenario;

constexpr Picos kUs = 1'000'000;

Scenario load(const std::string& file) {
  auto p = tools::load_scenario(std::string(ISOROCE_JUSTITIA_SCENARIOS) + "/" + file);
  EXPECT_TRUE(p.ok()) << (p.error ? p.error->to_string() : "");
  return p.scenario;
}

Scenario with_policy(Scenario s, const std::string& p) {
  for (auto& h : s.hosts) h.policy = p;
  return s;
}

Scenario only(Scenario s, const std::vector<std::string>& names) {
  std::vector<FlowConfig> kept;
  for (const auto& n : names)
    for (const auto& f : s.flows)
      if (f.name == n) kept.push_back(f);
  EXPECT_EQ(kept.size(), names.size());
  s.flows = kept;
  return s;
}

void set_target(Scenario& s, double target_us) {
  for (auto& h : s.hosts) h.justitia.target99 = static_cast<Picos>(std::llround(target_us * 1e6));
}

double total_goodput(const SimReport& r) {
  double g = 0;
  for (const auto& f : r.flows) g += f.goodput_gbps;
  return g;
}

void expect_clean(const SimReport& r) {
  for (const auto& f : r.flows) {
    EXPECT_TRUE(f.integrity_ok) << testing::describe(f);
    EXPECT_EQ(f.errors, 0u) << testing::describe(f);
  }
}

// Fig. 1 and 9. A 16 B latency flow beside a 1 MB bandwidth flow. Expect: under fifo
// its p99 is at least 5x its alone p99; under justitia with Target99 = alone p99 +
// 20% it is within 1.5x of alone, and the bandwidth flow keeps 45% of the link.
TEST(JustitiaAcceptance, LatencyFlowBesideBandwidthFlow) {
  Scenario s = load("fig01_latency_vs_bandwidth.toml");
  s.duration = 4'000 * kUs;
  const SimReport alone = run_scenario(only(with_policy(s, "fifo"), {"lat"}));
  const SimReport fifo = run_scenario(with_policy(s, "fifo"));
  const double alone_p99 = flow(alone, "lat").lat.p99_us;
  set_target(s, alone_p99 * 1.2);
  const SimReport just = run_scenario(with_policy(s, "justitia"));
  expect_clean(fifo);
  expect_clean(just);
  ASSERT_GT(flow(alone, "lat").messages, 500u);
  ASSERT_GT(flow(just, "lat").messages, 500u);
  EXPECT_GE(flow(fifo, "lat").lat.p99_us, 5 * alone_p99);
  EXPECT_LE(flow(just, "lat").lat.p99_us, 1.5 * alone_p99);
  EXPECT_GE(flow(just, "bw").goodput_gbps, 45.0);
  // The policy saw the miss and paced: SafeUtil went down to the floor, no lower.
  ASSERT_TRUE(just.hosts[0].has_justitia);
  EXPECT_EQ(just.hosts[0].justitia.min_safe_util_bps, 50'000'000'000u);
  EXPECT_GT(just.hosts[0].ref_probes, 5u);
}

// Fig. 10: with a loose Target99 SafeUtil returns to MaxRate and the bandwidth flow
// gets more than under the strict target, while latency stays isolated.
TEST(JustitiaAcceptance, LooseTargetGivesBandwidthBack) {
  Scenario strict = load("fig01_latency_vs_bandwidth.toml");
  Scenario loose = load("fig10_loose_target.toml");
  strict.duration = loose.duration = 6'000 * kUs;
  const SimReport a = run_scenario(strict);
  const SimReport b = run_scenario(loose);
  expect_clean(b);
  EXPECT_EQ(b.hosts[0].justitia.safe_util_bps, 100'000'000'000u);
  EXPECT_EQ(a.hosts[0].justitia.safe_util_bps, 50'000'000'000u);
  // Measured on the wire: 8 MB in flight make completed-message goodput coarse here.
  EXPECT_GT(flow(b, "bw").wire_gbps, flow(a, "bw").wire_gbps + 10.0);
  EXPECT_LE(flow(b, "lat").lat.p99_us, 1.5 * 4.032);
}

// Fig. 2 and 12. Throughput flow (16 B, 64 outstanding) beside a bandwidth flow.
// Expect: under justitia each gets at least 45% of what it gets alone; under fifo
// the throughput flow does not.
TEST(JustitiaAcceptance, ThroughputFlowBesideBandwidthFlow) {
  Scenario s = load("fig02_throughput_vs_bandwidth.toml");
  s.duration = 3'000 * kUs;
  const Scenario f = with_policy(s, "fifo");
  const double tput_alone = flow(run_scenario(only(f, {"tput"})), "tput").msgs_per_sec;
  const double bw_alone = flow(run_scenario(only(f, {"bw"})), "bw").goodput_gbps;
  const SimReport fifo = run_scenario(f);
  const SimReport just = run_scenario(with_policy(s, "justitia"));
  expect_clean(just);
  EXPECT_GT(tput_alone, 9e6);  // the NIC's message rate (max_mops = 10) is the limit
  EXPECT_GE(flow(just, "tput").msgs_per_sec, 0.45 * tput_alone);
  EXPECT_GE(flow(just, "bw").goodput_gbps, 0.45 * bw_alone);
  EXPECT_LT(flow(fifo, "tput").msgs_per_sec, 0.1 * tput_alone);
}

double share_gap(const SimReport& r, const std::string& x, const std::string& y) {
  const double a = flow(r, x).wire_gbps, b = flow(r, y).wire_gbps;
  return std::abs(a - b) / std::max(a, b);
}

// Fig. 5 and 11. Bandwidth flows of 1 MB and of 64 MB messages (the bench uses
// 256 MB), and applications on 1 and on 4 QPs. Expect: under justitia their link
// shares are within 5% of each other; under fifo they are not.
TEST(JustitiaAcceptance, SharesIndependentOfMessageSizeAndQps) {
  Scenario sizes = load("fig05_message_sizes.toml");
  sizes.duration = 4'000 * kUs;
  for (auto& f : sizes.flows)
    if (f.name == "big") f.size = 64ull << 20;
  Scenario qps = load("fig11_qps.toml");
  qps.duration = 3'000 * kUs;
  for (auto [s, x, y] : {std::tuple{&sizes, "small", "big"}, std::tuple{&qps, "one_qp", "four_qps"}}) {
    const SimReport just = run_scenario(with_policy(*s, "justitia"));
    const SimReport fifo = run_scenario(with_policy(*s, "fifo"));
    expect_clean(just);
    EXPECT_LE(share_gap(just, x, y), 0.05) << x << " " << flow(just, x).wire_gbps << " vs " << flow(just, y).wire_gbps;
    EXPECT_GT(share_gap(fifo, x, y), 0.5) << x;
    // With no latency flow, justitia's total goodput is within 3% of fifo's.
    EXPECT_GE(total_goodput(just), 0.97 * total_goodput(fifo)) << x;
    double wire = 0;
    for (const auto& f : just.flows) wire += f.wire_gbps;
    EXPECT_GE(wire, 97.0) << x;  // the link stays full
  }
}

// Fig. 3: 4 bandwidth applications, no latency flow. Expect: total goodput within 3%
// of fifo's (over 20 ms: goodput counts completed messages, and round robin over 4
// applications leaves up to 4 MB half sent at the end). With a latency flow: fifo
// hurts it more the more bandwidth flows there are; justitia keeps it within 2.5x of
// alone even with 16 (SafeUtil's floor is 16/17 of the link then).
TEST(JustitiaAcceptance, ManyBandwidthFlows) {
  Scenario s = load("fig03_04_many_bandwidth.toml");
  s.duration = 20'000 * kUs;
  const SimReport four_fifo = run_scenario(only(with_policy(s, "fifo"), {"bw1", "bw2", "bw3", "bw4"}));
  const SimReport four_just = run_scenario(only(with_policy(s, "justitia"), {"bw1", "bw2", "bw3", "bw4"}));
  EXPECT_GE(total_goodput(four_just), 0.97 * total_goodput(four_fifo));
  s.duration = 2'000 * kUs;
  std::vector<std::string> names = {"lat"};
  for (int i = 1; i <= 16; ++i) names.push_back("bw" + std::to_string(i));
  const SimReport fifo = run_scenario(only(with_policy(s, "fifo"), names));
  const SimReport just = run_scenario(only(with_policy(s, "justitia"), names));
  expect_clean(just);
  EXPECT_GE(flow(fifo, "lat").lat.p99_us, 100.0);
  EXPECT_LE(flow(just, "lat").lat.p99_us, 2.5 * 4.032);
  double wire = 0;
  for (const auto& f : just.flows) wire += f.wire_gbps;
  EXPECT_GE(wire, 90.0);  // SafeUtil's floor: 16/17 of 100 Gb/s
}

// READ responses leave through the responder's scheduler and take tokens there: a
// bandwidth READ flow from a (served by b) and a latency WRITE flow from b to a. The
// latency flow shares b's NIC with the READ responses. Expect: fifo at b delays it by
// whole 1 MB responses; justitia at b keeps it within 1.5x of alone.
TEST(JustitiaAcceptance, ReadResponsesArePacedAtTheResponder) {
  Scenario s = load("fig01_latency_vs_bandwidth.toml");
  s.duration = 3'000 * kUs;
  for (auto& f : s.flows) {
    if (f.name == "lat") std::swap(f.src, f.dst[0]);
    if (f.name == "bw") f.verb = Verb::kRead;
  }
  const SimReport alone = run_scenario(only(with_policy(s, "fifo"), {"lat"}));
  const double alone_p99 = flow(alone, "lat").lat.p99_us;
  set_target(s, alone_p99 * 1.2);
  const SimReport fifo = run_scenario(with_policy(s, "fifo"));
  const SimReport just = run_scenario(with_policy(s, "justitia"));
  expect_clean(just);
  EXPECT_GE(flow(fifo, "lat").lat.p99_us, 5 * alone_p99);
  EXPECT_LE(flow(just, "lat").lat.p99_us, 1.5 * alone_p99);
  EXPECT_GE(flow(just, "bw").goodput_gbps, 45.0);
  EXPECT_GT(just.hosts[1].justitia.tokens_issued, 100u);  // b paced the responses
}

// Soft admission: a latency flow starting while Current99 > Target99 raises an async
// event (counted, and a log line); with a loose target it does not.
TEST(JustitiaAcceptance, SoftAdmission) {
  Scenario s = load("fig01_latency_vs_bandwidth.toml");
  s.duration = 1'500 * kUs;
  const SimReport tight = run_scenario(s);
  EXPECT_GE(tight.hosts[0].admission_warnings, 1u);
  ASSERT_FALSE(tight.hosts[0].log.empty());
  EXPECT_NE(tight.hosts[0].log[0].find("Target99"), std::string::npos);
  set_target(s, 1'000);
  const SimReport loose = run_scenario(s);
  EXPECT_EQ(loose.hosts[0].admission_warnings, 0u);
  EXPECT_GT(flow(tight, "lat").messages, 0u);  // soft: admitted all the same
}

// Same scenario and seed, same report (the reference flow and tokens are deterministic).
TEST(JustitiaAcceptance, Deterministic) {
  Scenario s = load("fig02_throughput_vs_bandwidth.toml");
  s.duration = 500 * kUs;
  tools::ReportOptions o;
  o.wall_time = false;
  EXPECT_EQ(tools::report_to_json(run_scenario(s), o).dump(), tools::report_to_json(run_scenario(s), o).dump());
}

// isoroce-sim --policy and --only: one scenario under another policy, a flow alone.
TEST(JustitiaScenario, CliPolicyAndOnly) {
  auto run = [](const std::string& args, std::string* out) {
    FILE* p = popen((std::string(ISOROCE_SIM_TOOL) + " " + ISOROCE_JUSTITIA_SCENARIOS +
                     "/fig01_latency_vs_bandwidth.toml --json --no-wall " + args + " 2>&1").c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  std::string out;
  ASSERT_EQ(run("--policy fifo --only lat", &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["flows"].size(), 1u);
  EXPECT_EQ(j["flows"][0]["name"], "lat");
  EXPECT_FALSE(j["hosts"][0].contains("justitia"));
  out.clear();
  ASSERT_EQ(run("", &out), 0) << out;
  EXPECT_TRUE(nlohmann::json::parse(out)["hosts"][0].contains("justitia"));
  out.clear();
  EXPECT_EQ(run("--policy wfq", &out), 1);
  EXPECT_NE(out.find("unknown policy"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(run("--only nosuch", &out), 1);
  EXPECT_NE(out.find("no flow named"), std::string::npos) << out;
}

TEST(JustitiaScenario, KeysParseValidateAndDump) {
  const std::string base = R"(
[[host]]
name = "a"
ip = "10.0.0.1"
policy = "justitia"
max_mops = 2.5
[host.justitia]
target99_us = 7.5
ref_period_us = 100
window = 500
token_bytes = 500000
split_bytes = 4000
token_ops = 300
unattainable_after_s = 0.5
increase_step_gbps = 0.25
ref_peer = "b"
[[host]]
name = "b"
ip = "10.0.0.2"
[[flow]]
name = "x"
src = "a"
dst = "b"
verb = "write"
size = "4KB"
app = "kv"
weight = 3
)";
  const Scenario s = parse_ok(base);
  ASSERT_EQ(s.hosts.size(), 2u);
  const auto& h = s.hosts[0];
  EXPECT_EQ(h.policy, "justitia");
  EXPECT_EQ(h.max_msgs_per_sec, 2'500'000u);
  EXPECT_EQ(h.justitia.target99, 7'500'000u);
  EXPECT_EQ(h.justitia.ref_period, 100 * kUs);
  EXPECT_EQ(h.justitia.window, 500u);
  EXPECT_EQ(h.justitia.token_bytes, 500'000u);
  EXPECT_EQ(h.justitia.split_bytes, 4'000u);
  EXPECT_EQ(h.justitia.token_ops, 300u);
  EXPECT_EQ(h.justitia.unattainable_after, 500'000'000'000u);
  EXPECT_EQ(h.justitia.increase_step_bps, 250'000'000u);
  EXPECT_EQ(h.ref_peer, "b");
  EXPECT_EQ(s.flows[0].app, "kv");
  EXPECT_EQ(s.flows[0].weight, 3u);
  // --dump prints it back, and that parses to the same values.
  const Scenario again = parse_ok(tools::scenario_to_toml(s));
  EXPECT_EQ(again.hosts[0].justitia.target99, h.justitia.target99);
  EXPECT_EQ(again.hosts[0].justitia.increase_step_bps, h.justitia.increase_step_bps);
  EXPECT_EQ(again.hosts[0].max_msgs_per_sec, h.max_msgs_per_sec);
  EXPECT_EQ(again.flows[0].app, "kv");
  EXPECT_EQ(again.flows[0].weight, 3u);

  auto error_of = [](std::string toml) {
    auto p = tools::parse_scenario(toml, "t");
    return p.error ? p.error->to_string() : std::string();
  };
  auto replace = [&](std::string from, std::string to) {
    std::string t = base;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  EXPECT_NE(error_of(replace("window = 500", "windw = 500")).find("host[0].justitia.windw: unknown key"), std::string::npos);
  EXPECT_NE(error_of(replace("window = 500", "window = 2.5")).find("host[0].justitia.window"), std::string::npos);
  EXPECT_NE(error_of(replace("split_bytes = 4000", "split_bytes = 600000")).find("split_bytes"), std::string::npos);
  EXPECT_NE(error_of(replace("ref_peer = \"b\"", "ref_peer = \"z\"")).find("no host named"), std::string::npos);
  EXPECT_NE(error_of(replace("policy = \"justitia\"", "policy = \"tassel\"")).find("max_mops"), std::string::npos);
  EXPECT_NE(error_of(replace("weight = 3", "weight = 0")).find("weight"), std::string::npos);
  EXPECT_NE(error_of(replace("policy = \"justitia\"", "policy = \"wfq\"")).find("justitia"), std::string::npos);
}

}  // namespace
}  // namespace isoroce::sim
