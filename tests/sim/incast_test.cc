// DCQCN against the simulated switch: the incast examples (8 senders at 100
// Gb/s into one 100 Gb/s port) with DCQCN, without it (tail drops at the buffer
// limit) and with PFC instead (pauses, no drops); the queue statistics; the
// [host.dcqcn] and PFC scenario keys.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/sim/sim_util.h"

namespace isoroce::sim::testing {
namespace {

const std::string kExamples = ISOROCE_SIM_EXAMPLES;

Scenario example(const std::string& name) {
  auto p = tools::load_scenario(kExamples + "/" + name);
  EXPECT_TRUE(p.ok()) << (p.error ? p.error->to_string() : "");
  return p.scenario;
}

double jain(const SimReport& r) {
  double sum = 0, sq = 0;
  for (const auto& f : r.flows) {
    sum += f.goodput_gbps;
    sq += f.goodput_gbps * f.goodput_gbps;
  }
  return sq == 0 ? 0 : sum * sum / (static_cast<double>(r.flows.size()) * sq);
}

// Bytes of completed messages over the run, in Gb/s.
double total_goodput_gbps(const SimReport& r) {
  double bytes = 0;
  for (const auto& f : r.flows) bytes += static_cast<double>(f.bytes);
  return bytes * 8 / (r.virtual_us * 1e3);
}

constexpr size_t kReceiverPort = 8;  // host "r"

TEST(Incast, WithDcqcnQueueStaysBelowKmaxFairAndFull) {
  const Scenario s = example("incast_dcqcn.toml");
  const SimReport r = run_scenario(s);
  const PortStats& port = r.fabric.ports[kReceiverPort];
  std::printf("  dcqcn: goodput %.2f Gb/s, Jain %.4f, queue p50 %.0f KB p99 %.0f KB max %.0f KB, drops %lu\n",
              total_goodput_gbps(r), jain(r), port.queue_p50_bytes / 1024, port.queue_p99_bytes / 1024,
              port.max_queue_bytes / 1024.0, static_cast<unsigned long>(port.drops));
  EXPECT_LT(port.queue_p99_bytes, static_cast<double>(s.ecn.kmax_bytes));
  EXPECT_GE(jain(r), 0.95);
  EXPECT_GE(total_goodput_gbps(r), 90.0);
  EXPECT_EQ(port.drops, 0u);
  for (const auto& f : r.flows) EXPECT_TRUE(f.integrity_ok) << describe(f);
  // The loop ran: the receiver sent CNPs, every sender was cut.
  EXPECT_GT(r.hosts[kReceiverPort].engine.cnps_sent, 0u);
  for (size_t h = 0; h < 8; ++h) {
    EXPECT_GT(r.hosts[h].engine.cnps_received, 0u) << r.hosts[h].name;
    ASSERT_FALSE(r.hosts[h].dcqcn_qps.empty());
    EXPECT_GT(r.hosts[h].dcqcn_qps[0].state.decreases, 0u);
  }
}

TEST(Incast, WithoutDcqcnQueueSitsAtTheBufferAndDrops) {
  const Scenario s = example("incast_no_dcqcn.toml");
  const SimReport r = run_scenario(s);
  const PortStats& port = r.fabric.ports[kReceiverPort];
  std::printf("  none: goodput %.2f Gb/s, Jain %.4f, queue p50 %.0f KB p99 %.0f KB, drops %lu\n",
              total_goodput_gbps(r), jain(r), port.queue_p50_bytes / 1024, port.queue_p99_bytes / 1024,
              static_cast<unsigned long>(port.drops));
  EXPECT_GE(port.queue_p50_bytes, 0.9 * static_cast<double>(s.buffer_bytes));
  EXPECT_GT(port.drops, 0u);
  EXPECT_EQ(r.hosts[kReceiverPort].engine.cnps_sent, 0u);
  for (const auto& f : r.flows) EXPECT_TRUE(f.integrity_ok) << describe(f);
}

TEST(Incast, WithPfcQueueSitsAtTheBufferAndPausesInsteadOfDropping) {
  const Scenario s = example("incast_pfc.toml");
  ASSERT_TRUE(s.pfc.enabled);
  const SimReport r = run_scenario(s);
  const PortStats& port = r.fabric.ports[kReceiverPort];
  Picos paused = 0;
  uint64_t pauses = 0;
  for (size_t h = 0; h < 8; ++h) {
    paused += r.fabric.ports[h].pause_time;
    pauses += r.fabric.ports[h].pauses;
    EXPECT_GT(r.fabric.ports[h].pause_time, 0u) << "sender " << h << " was paused";
  }
  std::printf("  pfc: goodput %.2f Gb/s, queue p50 %.0f KB, %lu pauses, %.0f us paused in all\n",
              total_goodput_gbps(r), port.queue_p50_bytes / 1024, static_cast<unsigned long>(pauses),
              static_cast<double>(paused) / 1e6);
  EXPECT_GE(port.queue_p50_bytes, 0.9 * static_cast<double>(s.buffer_bytes));
  EXPECT_EQ(port.drops, 0u);
  EXPECT_EQ(r.fabric.ports[kReceiverPort].pauses, 0u) << "the receiver's ingress carries only ACKs";
  EXPECT_GE(total_goodput_gbps(r), 90.0) << "lossless: the link stays busy";
  for (const auto& f : r.flows) EXPECT_TRUE(f.integrity_ok) << describe(f);
}

// The Justitia paper's incast case (section 6.7), neither vs DCQCN only
// (docs/isolation.md; the Justitia rows come with the justitia policy).
// Expect: with DCQCN the latency flow's p99 falls several times and nothing is
// dropped; without it the switch drops and the bulk flows exhaust their retries.
TEST(Incast, JustitiaCaseNeitherVersusDcqcn) {
  const SimReport neither = run_scenario(example("incast_justitia_neither.toml"));
  const SimReport dcqcn = run_scenario(example("incast_justitia_dcqcn.toml"));
  const FlowReport& ln = flow(neither, "lat");
  const FlowReport& ld = flow(dcqcn, "lat");
  std::printf("  latency flow p50/p99 us: neither %.1f/%.1f, dcqcn %.1f/%.1f\n", ln.lat.p50_us, ln.lat.p99_us,
              ld.lat.p50_us, ld.lat.p99_us);
  EXPECT_LT(ld.lat.p99_us * 4, ln.lat.p99_us);
  EXPECT_GT(ld.messages, 4 * ln.messages);
  EXPECT_GT(neither.fabric.ports[5].drops, 0u);
  EXPECT_EQ(dcqcn.fabric.ports[5].drops, 0u);
  // With DCQCN the four bulk senders share the port evenly on the wire.
  std::vector<double> gbps;
  for (size_t h = 0; h < 4; ++h)
    gbps.push_back(static_cast<double>(dcqcn.fabric.uplinks[h].bytes) * 8 / (dcqcn.virtual_us * 1e3));
  double sum = 0, sq = 0;
  for (double g : gbps) sum += g, sq += g * g;
  EXPECT_GE(sum * sum / (4 * sq), 0.95);
  EXPECT_GE(sum, 90.0);
  for (const auto& f : dcqcn.flows) EXPECT_EQ(f.errors, 0u) << describe(f);
}

TEST(Incast, DcqcnRunIsDeterministic) {
  Scenario s = example("incast_dcqcn.toml");
  s.duration = 2'000'000'000;  // 2 ms
  tools::ReportOptions o;
  o.wall_time = false;
  const std::string a = tools::report_to_json(run_scenario(s), o).dump();
  const std::string b = tools::report_to_json(run_scenario(s), o).dump();
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("\"dcqcn\""), std::string::npos);
  EXPECT_NE(a.find("\"queue_kb\""), std::string::npos);
}

TEST(QueueHistogram, TimeWeightedPercentiles) {
  QueueHistogram h;
  h.bucket = 1024;
  h.buckets = 100;
  // Empty for 50 ps, 10 KB for 40 ps, 50 KB for 10 ps.
  h.record(50, 10 * 1024);
  h.record(90, 50 * 1024);
  h.record(100, 0);
  EXPECT_EQ(h.percentile(0.5, 100), 0);
  EXPECT_EQ(h.percentile(0.51, 100), 11 * 1024);  // the upper edge of the 10 KB bucket
  EXPECT_EQ(h.percentile(0.9, 100), 11 * 1024);
  EXPECT_EQ(h.percentile(0.95, 100), 50 * 1024) << "capped at the longest queue seen";
  EXPECT_EQ(h.max_len, 50u * 1024);
}

const char* kHead = R"(
[switch]
buffer_kb = 1024
[[host]]
name = "a"
ip = "10.0.0.1"
policy = "tassel"
[host.dcqcn]
enabled = true
g = 0.00390625
byte_counter_bytes = 0
[[host]]
name = "b"
ip = "10.0.0.2"
[[flow]]
name = "w"
src = "a"
dst = "b"
verb = "write"
size = "4KB"
count = 1
)";

TEST(DcqcnScenario, KeysParseIntoTheHostsParams) {
  const Scenario s = parse_ok(kHead);
  EXPECT_TRUE(s.hosts[0].dcqcn.enabled);
  EXPECT_DOUBLE_EQ(s.hosts[0].dcqcn.g, 1.0 / 256);
  EXPECT_EQ(s.hosts[0].dcqcn.byte_counter_bytes, 0u);
  EXPECT_FALSE(s.hosts[1].dcqcn.enabled);
  // The dump round-trips them.
  const Scenario again = parse_ok(tools::scenario_to_toml(s));
  EXPECT_TRUE(again.hosts[0].dcqcn.enabled);
  EXPECT_DOUBLE_EQ(again.hosts[0].dcqcn.g, 1.0 / 256);
  EXPECT_EQ(tools::scenario_to_toml(again), tools::scenario_to_toml(s));
}

TEST(DcqcnScenario, BadKeysNameTheKey) {
  auto error = [](const std::string& text) {
    auto p = tools::parse_scenario(text, "t.toml");
    return p.ok() ? std::string("ok") : p.error->to_string();
  };
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kHead;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_NE(error(with("g = 0.00390625", "gg = 1")).find("host[0].dcqcn.gg: unknown key"), std::string::npos);
  EXPECT_NE(error(with("g = 0.00390625", "g = 2")).find("host[0].dcqcn.g: must be in (0, 1]"), std::string::npos);
  EXPECT_NE(error(with("g = 0.00390625", "g = \"x\"")).find("host[0].dcqcn.g: must be a number"),
            std::string::npos);
  EXPECT_NE(error(with("enabled = true", "enabled = 1")).find("host[0].dcqcn.enabled: must be true or false"),
            std::string::npos);
  EXPECT_NE(error(with("byte_counter_bytes = 0", "byte_counter_bytes = 1.5")).find("must be an integer"),
            std::string::npos);
  const std::string fifo = error(with("policy = \"tassel\"", "policy = \"fifo\""));
  EXPECT_NE(fifo.find("host[0].dcqcn.enabled: DCQCN needs a rate-limiting policy"), std::string::npos) << fifo;
  // PFC and ECN keys.
  EXPECT_NE(error(with("buffer_kb = 1024", "buffer_kb = 1024\npfc = { xoff_kb = 100, xon_kb = 200 }"))
                .find("switch.pfc.xon_kb: is above xoff_kb"),
            std::string::npos);
  EXPECT_NE(error(with("buffer_kb = 1024", "buffer_kb = 1024\npfc = { xoff_kb = 100 }")).find("switch.pfc.xon_kb: missing"),
            std::string::npos);
  EXPECT_NE(error(with("buffer_kb = 1024", "buffer_kb = 1024\npfc = { xoff_kb = 2000, xon_kb = 10 }"))
                .find("switch.pfc.xoff_kb: must be below buffer_kb"),
            std::string::npos);
  EXPECT_NE(error(with("buffer_kb = 1024", "buffer_kb = 1024\necn = { kmin_kb = 1, kmax_kb = 2, pmax = 1, at = \"x\" }"))
                .find("switch.ecn.at: unknown value"),
            std::string::npos);
  EXPECT_EQ(error(with("buffer_kb = 1024", "buffer_kb = 1024\npfc = { xoff_kb = 100, xon_kb = 50 }")), "ok");
}

}  // namespace
}  // namespace isoroce::sim::testing
