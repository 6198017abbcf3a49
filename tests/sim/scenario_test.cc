// Scenario files: every bad key, value or impossible scenario is an error that
// names the key; good files give the values they say.
#include <gtest/gtest.h>

#include "tests/sim/sim_util.h"

namespace isoroce::sim {
namespace {

const char* kBase = R"(seed = 3
duration_us = 5000
link_delay_ns = 500
[switch]
buffer_kb = 512
ecn = { kmin_kb = 40, kmax_kb = 200, pmax = 0.2 }
[faults]
loss = 0.01
loss_burst = 2
reorder = 0.02
reorder_delay_ns = 3000
duplicate = 0.0
corrupt = 0.001
[[host]]
name = "a"
ip = "10.0.0.1"
link_gbps = 100
policy = "fifo"
[[host]]
name = "b"
ip = "10.0.0.2"
link_gbps = 25
policy = "tassel"
msg_cost_ns = 250
[[flow]]
name = "lat"
src = "a"
dst = "b"
transport = "rc"
verb = "write"
size = "16B"
count = 100
depth = 1
qps = 1
class = "latency"
start_us = 10
)";

TEST(ScenarioToml, GoodFileGivesItsValues) {
  const Scenario s = testing::parse_ok(kBase);
  EXPECT_EQ(s.seed, 3u);
  EXPECT_EQ(s.duration, 5000ull * 1'000'000);
  EXPECT_EQ(s.link_delay, 500'000u);
  EXPECT_EQ(s.buffer_bytes, 512u * 1024);
  EXPECT_TRUE(s.ecn.enabled);
  EXPECT_EQ(s.ecn.kmin_bytes, 40u * 1024);
  EXPECT_EQ(s.ecn.kmax_bytes, 200u * 1024);
  EXPECT_DOUBLE_EQ(s.ecn.pmax, 0.2);
  EXPECT_DOUBLE_EQ(s.faults.loss.p, 0.01);
  EXPECT_EQ(s.faults.loss.burst, 2u);
  EXPECT_EQ(s.faults.reorder_delay, 3'000'000u);
  ASSERT_EQ(s.hosts.size(), 2u);
  EXPECT_EQ(s.hosts[1].link_bps, 25'000'000'000u);
  EXPECT_EQ(s.hosts[1].policy, "tassel");
  EXPECT_EQ(s.hosts[1].msg_cost, 250'000u);
  EXPECT_EQ(s.hosts[0].ip, wire::ipv4_mapped(0x0a000001));
  ASSERT_EQ(s.flows.size(), 1u);
  const FlowConfig& f = s.flows[0];
  EXPECT_EQ(f.size, 16u);
  EXPECT_EQ(*f.count, 100u);
  EXPECT_EQ(f.cls, FlowClass::kLatency);
  EXPECT_EQ(f.start, 10'000'000u);
  EXPECT_EQ(effective_mtu(s, f), 4096u);
  EXPECT_FALSE(f.start_psn);
}

TEST(ScenarioToml, SizesAndAddresses) {
  uint64_t v = 0;
  EXPECT_TRUE(parse_size("16B", &v)); EXPECT_EQ(v, 16u);
  EXPECT_TRUE(parse_size("4KB", &v)); EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(parse_size("1MB", &v)); EXPECT_EQ(v, 1u << 20);
  EXPECT_TRUE(parse_size("2gb", &v)); EXPECT_EQ(v, 2ull << 30);
  EXPECT_TRUE(parse_size("100", &v)); EXPECT_EQ(v, 100u);
  EXPECT_FALSE(parse_size("4XB", &v));
  EXPECT_FALSE(parse_size("KB", &v));
  EXPECT_FALSE(parse_size("-1B", &v));
  EXPECT_FALSE(parse_size("99999999999999999999B", &v));
  wire::IpAddr ip{};
  EXPECT_TRUE(parse_ip("fd00::1", &ip));
  EXPECT_FALSE(wire::is_ipv4_mapped(ip));
  EXPECT_FALSE(parse_ip("10.0.0.300", &ip));
}

struct BadCase {
  const char* name;
  const char* from;  // text in kBase to replace ("" appends `to`, "^" puts it first)
  const char* to;
  const char* key;   // the error must name this key
};

const BadCase kBad[] = {
    {"unknown_top_key", "^", "bogus = 1\n", "bogus"},
    {"unknown_switch_key", "buffer_kb = 512", "buffer_kb = 512\nbuffers = 3", "switch.buffers"},
    {"unknown_ecn_key", "pmax = 0.2", "pmax = 0.2, kmid_kb = 3", "switch.ecn.kmid_kb"},
    {"ecn_missing_pmax", ", pmax = 0.2", "", "switch.ecn.pmax"},
    {"ecn_kmin_above_kmax", "kmin_kb = 40", "kmin_kb = 400", "switch.ecn.kmin_kb"},
    {"ecn_pmax_range", "pmax = 0.2", "pmax = 1.2", "switch.ecn.pmax"},
    {"unknown_fault_key", "loss = 0.01", "loss = 0.01\nlosss = 0.2", "faults.losss"},
    {"fault_probability_range", "loss = 0.01", "loss = 1.5", "faults.loss"},
    {"fault_burst_zero", "loss_burst = 2", "loss_burst = 0", "faults.loss_burst"},
    {"fault_wrong_type", "reorder = 0.02", "reorder = \"often\"", "faults.reorder"},
    {"unknown_host_key", "policy = \"fifo\"", "policy = \"fifo\"\ncolor = \"red\"", "host[0].color"},
    {"bad_policy", "policy = \"tassel\"", "policy = \"justice\"", "host[1].policy"},
    {"rnic_bad_preset", "policy = \"fifo\"", "policy = \"rnic\"\n[host.rnic]\npreset = \"cx9\"", "host[0].rnic.preset"},
    {"rnic_zero_batch", "policy = \"fifo\"", "policy = \"rnic\"\n[host.rnic]\nbatch_packets = 0", "host[0].rnic.batch_packets"},
    {"rnic_unknown_key", "policy = \"fifo\"", "policy = \"rnic\"\n[host.rnic]\nbatch = 2", "host[0].rnic.batch"},
    {"bad_ip", "ip = \"10.0.0.2\"", "ip = \"10.0.0.256\"", "host[1].ip"},
    {"duplicate_ip", "ip = \"10.0.0.2\"", "ip = \"10.0.0.1\"", "host[1].ip"},
    {"duplicate_host_name", "name = \"b\"", "name = \"a\"", "host[1].name"},
    {"zero_link_rate", "link_gbps = 25", "link_gbps = 0", "host[1].link_gbps"},
    {"host_missing_ip", "ip = \"10.0.0.2\"\n", "", "host[1].ip"},
    {"unknown_flow_key", "start_us = 10", "start_us = 10\ncolour = 1", "flow[0].colour"},
    {"unknown_src_host", "src = \"a\"", "src = \"z\"", "flow[0].src"},
    {"unknown_dst_host", "dst = \"b\"", "dst = \"q\"", "flow[0].dst"},
    {"dst_is_src", "dst = \"b\"", "dst = \"a\"", "flow[0].dst"},
    {"rc_many_dst", "dst = \"b\"", "dst = [\"b\", \"a\"]", "flow[0].dst"},
    {"bad_verb", "verb = \"write\"", "verb = \"wrte\"", "flow[0].verb"},
    {"bad_transport", "transport = \"rc\"", "transport = \"uc\"", "flow[0].transport"},
    {"ud_write", "transport = \"rc\"", "transport = \"ud\"", "flow[0].verb"},
    {"size_zero", "size = \"16B\"", "size = \"0B\"", "flow[0].size"},
    {"size_garbage", "size = \"16B\"", "size = \"sixteen\"", "flow[0].size"},
    {"size_missing", "size = \"16B\"\n", "", "flow[0].size"},
    {"atomic_size", "verb = \"write\"", "verb = \"fetch_add\"", "flow[0].size"},
    {"depth_zero", "depth = 1", "depth = 0", "flow[0].depth"},
    {"qps_zero", "qps = 1", "qps = 0", "flow[0].qps"},
    {"count_zero", "count = 100", "count = 0", "flow[0].count"},
    {"count_float", "count = 100", "count = 1.5", "flow[0].count"},
    {"bad_class", "class = \"latency\"", "class = \"urgent\"", "flow[0].class"},
    {"bad_mtu", "class = \"latency\"", "class = \"latency\"\nmtu = 1500", "flow[0].mtu"},
    {"start_after_end", "start_us = 10", "start_us = 9000", "flow[0].start_us"},
    {"retry_cnt_range", "start_us = 10", "start_us = 10\nretry_cnt = 8", "flow[0].retry_cnt"},
    {"start_psn_range", "start_us = 10", "start_us = 10\nstart_psn = 16777216", "flow[0].start_psn"},
    {"inline_too_big", "start_us = 10", "start_us = 10\ninline = true\nsize_unused = 1", "flow[0].size_unused"},
    {"inline_for_read", "verb = \"write\"", "verb = \"read\"\ninline = true", "flow[0].inline"},
    {"srq_for_write", "start_us = 10", "start_us = 10\nuse_srq = true", "flow[0].use_srq"},
    {"duplicate_flow_name", "", "[[flow]]\nname = \"lat\"\nsrc = \"a\"\ndst = \"b\"\nverb = \"read\"\nsize = \"1KB\"\n",
     "flow[1].name"},
    {"flow_missing_verb", "verb = \"write\"\n", "", "flow[0].verb"},
    {"duration_zero", "duration_us = 5000", "duration_us = 0", "duration_us"},
    {"negative_delay", "link_delay_ns = 500", "link_delay_ns = -5", "link_delay_ns"},
    {"seed_string", "seed = 3", "seed = \"x\"", "seed"},
    {"syntax_error", "seed = 3", "seed = = 3", ""},
};

class BadScenario : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadScenario, ErrorNamesTheKey) {
  const BadCase& c = GetParam();
  std::string text = kBase;
  if (*c.from == '\0') {
    text += c.to;
  } else if (std::string(c.from) == "^") {
    text = c.to + text;
  } else {
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, std::strlen(c.from), c.to);
  }
  const auto p = tools::parse_scenario(text, "bad.toml");
  ASSERT_FALSE(p.ok()) << c.name << " was accepted";
  const std::string msg = p.error->to_string();
  EXPECT_EQ(p.error->key, c.key) << msg;
  EXPECT_NE(msg.find("bad.toml"), std::string::npos) << msg;
  if (*c.key) {
    EXPECT_NE(msg.find(c.key), std::string::npos) << msg;
  }
  EXPECT_GT(p.error->line, 0) << msg;
}

INSTANTIATE_TEST_SUITE_P(Cases, BadScenario, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ScenarioToml, DumpParsesBackToTheSameScenario) {
  Scenario s = testing::parse_ok(kBase);
  s.flows[0].start_psn = 16777200;
  s.flows[0].rate_bps = 12'500'000'000;
  s.flows[0].recv_depth = 3;
  const std::string once = tools::scenario_to_toml(s);
  const Scenario back = testing::parse_ok(once);
  EXPECT_EQ(tools::scenario_to_toml(back), once);
  EXPECT_EQ(back.flows[0].start_psn, s.flows[0].start_psn);
  EXPECT_EQ(back.flows[0].rate_bps, s.flows[0].rate_bps);
  EXPECT_EQ(back.faults.reorder_delay, s.faults.reorder_delay);
  EXPECT_EQ(back.hosts[1].msg_cost, s.hosts[1].msg_cost);
}

// Receive: [host.rnic] with a preset and one parameter over it. Expect: the preset's
// values with the override, and --dump writes them back the same.
TEST(ScenarioToml, RnicPresetAndOverride) {
  std::string text = kBase;
  text.replace(text.find("policy = \"fifo\""), 15,
               "policy = \"rnic\"\n[host.rnic]\npreset = \"cx4-roce\"\nbatch_packets = 3\nmessage_burst_bytes = \"whole\"");
  const Scenario s = testing::parse_ok(text);
  EXPECT_EQ(s.hosts[0].policy, "rnic");
  EXPECT_EQ(s.hosts[0].rnic.batch_packets, 3u);
  EXPECT_EQ(s.hosts[0].rnic.pipeline_packets, 22u);
  EXPECT_EQ(s.hosts[0].rnic.pipeline_jitter_packets, 4u);
  EXPECT_EQ(s.hosts[0].rnic.message_burst_bytes, sched::kWholeMessage);
  const std::string once = tools::scenario_to_toml(s);
  const Scenario back = testing::parse_ok(once);
  EXPECT_EQ(tools::scenario_to_toml(back), once);
  EXPECT_EQ(back.hosts[0].rnic.batch_packets, 3u);
  EXPECT_EQ(back.hosts[0].rnic.message_burst_bytes, sched::kWholeMessage);
}

TEST(ScenarioValidate, UdLimits) {
  Scenario s = testing::parse_ok(kBase);
  s.flows[0].transport = Transport::kUd;
  s.flows[0].verb = Verb::kSend;
  s.flows[0].size = 8192;
  auto e = validate(s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->key, "flow[0].size");
  EXPECT_NE(e->message.find("MTU"), std::string::npos);
  s.hosts[1].mtu = 1024;
  s.flows[0].size = 2048;
  e = validate(s);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("1024"), std::string::npos) << e->message;
  s.flows[0].size = 1024;
  EXPECT_FALSE(validate(s));
  s.flows[0].size = 4;
  ASSERT_TRUE(validate(s));
  EXPECT_EQ(validate(s)->key, "flow[0].size");
}

TEST(ScenarioValidate, BufferLimitAndNoHostsOrFlows) {
  Scenario s = testing::parse_ok(kBase);
  s.flows[0].size = 1ull << 30;
  s.flows[0].depth = 4;
  auto e = validate(s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->key, "flow[0].size");
  s = testing::parse_ok(kBase);
  s.flows.clear();
  ASSERT_TRUE(validate(s));
  EXPECT_EQ(validate(s)->key, "flow");
  s.hosts.clear();
  EXPECT_EQ(validate(s)->key, "host");
}

}  // namespace
}  // namespace isoroce::sim
