// isoroce-sim's profiling outputs (docs/profiling.md): --trace is Chrome trace-event
// JSON that follows the documented schema; --pcap is pcapng whose every frame tshark
// decodes as InfiniBand, with a valid ICRC and the scheduling decision as comment;
// --timeseries is one row per QP per period; all three are byte-identical per seed
// and leave the run unchanged; a bad event list or an unwritable file is an error.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sched/trace.h"
#include "transport/wire/parse.h"

#include "tests/temp_path.h"

namespace isoroce::sim {
namespace {

struct CmdResult {
  int status = -1;
  std::string out;
};

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

std::string temp(const std::string& name) {
  return isoroce::test::temp_path("isoroce-trace-test-", name);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kTool = ISOROCE_SIM_TOOL;

// A latency flow beside a rate-limited bandwidth flow on tassel, with a little loss
// so NAKs and retransmissions appear.
const char* kScenario = R"(seed = 3
duration_us = 300
[faults]
loss = 0.01
[[host]]
name = "a"
ip = "10.0.0.1"
policy = "tassel"
[[host]]
name = "b"
ip = "10.0.0.2"
policy = "tassel"
[[flow]]
name = "lat"
src = "a"
dst = "b"
verb = "write"
size = "64B"
depth = 1
class = "latency"
[[flow]]
name = "bw"
src = "a"
dst = "b"
verb = "write"
size = "64KB"
depth = 4
rate_gbps = 40
)";

class TraceCli : public ::testing::Test {
 protected:
  void SetUp() override {
    scenario_ = temp("s.toml");
    std::ofstream(scenario_) << kScenario;
  }
  std::string outputs(const std::string& tag) {
    return " --trace " + temp(tag + ".json") + " --timeseries " + temp(tag + ".csv") + " --pcap " +
           temp(tag + ".pcapng") + " --pcap-rx " + temp(tag + "-rx.pcapng") + " --period-us 5 ";
  }
  std::string scenario_;
};

// The documented schema: required keys per "ph", names known, ts non-decreasing
// on every track (pid, tid) and for every counter.
void check_schema(const nlohmann::json& doc, bool slices = true) {
  ASSERT_TRUE(doc.is_object());
  ASSERT_TRUE(doc.contains("traceEvents") && doc["traceEvents"].is_array());
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  std::set<std::string> instants;
  for (const auto n : trace::kEventNames) instants.insert(std::string(n));
  std::map<std::pair<int64_t, int64_t>, double> last_ts;
  std::map<std::pair<int64_t, std::string>, double> last_counter;
  std::map<std::string, int> phs;
  for (const auto& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e["ph"].is_string()) << e.dump();
    ASSERT_TRUE(e.contains("pid") && e["pid"].is_number_integer()) << e.dump();
    ASSERT_TRUE(e.contains("tid") && e["tid"].is_number_integer()) << e.dump();
    ASSERT_TRUE(e.contains("name") && e["name"].is_string()) << e.dump();
    const std::string ph = e["ph"];
    ++phs[ph];
    if (ph == "M") {
      ASSERT_TRUE(e["args"].is_object()) << e.dump();
      const std::string n = e["name"];
      EXPECT_TRUE(n == "process_name" || n == "thread_name" || n == "process_sort_index") << n;
      if (n != "process_sort_index") {
        EXPECT_TRUE(e["args"]["name"].is_string()) << e.dump();
      }
      continue;
    }
    ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e.dump();
    const double ts = e["ts"];
    EXPECT_GE(ts, 0.0);
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur") && e["dur"].is_number()) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      for (const char* k : {"msg_id", "bytes", "status", "class"}) EXPECT_TRUE(e["args"].contains(k)) << k;
    } else if (ph == "i") {
      ASSERT_TRUE(e.contains("s")) << e.dump();
      EXPECT_TRUE(e["s"] == "t" || e["s"] == "p") << e.dump();
      EXPECT_TRUE(instants.count(e["name"])) << e.dump();
      ASSERT_TRUE(e["args"].is_object());
    } else if (ph == "C") {
      ASSERT_TRUE(e["args"].is_object() && !e["args"].empty()) << e.dump();
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << e.dump();
      const auto key = std::make_pair(e["pid"].get<int64_t>(), e["name"].get<std::string>());
      if (last_counter.count(key)) EXPECT_GE(ts, last_counter[key]) << e.dump();
      last_counter[key] = ts;
      continue;
    } else {
      ADD_FAILURE() << "unknown ph " << ph;
    }
    const auto track = std::make_pair(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
    if (last_ts.count(track)) EXPECT_GE(ts, last_ts[track]) << e.dump();
    last_ts[track] = ts;
  }
  EXPECT_GT(phs["M"], 0);
  EXPECT_EQ(phs["X"] > 0, slices);
  EXPECT_GT(phs["i"], 0);
  EXPECT_GT(phs["C"], 0);
}

TEST_F(TraceCli, TraceFollowsTheSchemaAndHasEachMessagesStages) {
  const CmdResult r = run(kTool + " --no-wall " + scenario_ + outputs("a"));
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(slurp(temp("a.json")));
  check_schema(doc);
  std::map<std::string, int> names;
  int slices = 0, lost = 0;
  for (const auto& e : doc["traceEvents"]) {
    ++names[e["name"].get<std::string>()];
    if (e["name"] == "drop" && e["args"]["reason"] == 17) ++lost;  // FabricDrop::kLinkLoss
    if (e["ph"] != "X") continue;
    ++slices;
    const auto& a = e["args"];
    ASSERT_TRUE(a.contains("post_to_first_tx_us")) << e.dump();
    const double sum = a["post_to_first_tx_us"].get<double>() + a["first_to_last_tx_us"].get<double>() +
                       a["last_tx_to_completion_us"].get<double>();
    EXPECT_NEAR(sum, e["dur"].get<double>(), 1e-6) << e.dump();
  }
  EXPECT_GT(slices, 10);
  for (const char* n : {"post", "activate", "eligible", "grant", "frame_tx", "frame_rx", "ack", "rate"})
    EXPECT_TRUE(n == std::string("post") || n == std::string("rate") || names[n] > 0) << n;
  EXPECT_GT(names["switch queue to host"], 0);
  // The loss shows as NAKs or retransmissions.
  EXPECT_GT(names["nak"] + names["retransmit"], 0);
  EXPECT_GT(lost, 0);
}

TEST_F(TraceCli, EventFilterKeepsOnlyTheListedEvents) {
  const CmdResult r = run(kTool + " --no-wall " + scenario_ + " --trace " + temp("f.json") +
                          " --trace-events grant,cnp");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(slurp(temp("f.json")));
  check_schema(doc, false);  // no post or completion kept: no message slices
  int grants = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "i") continue;
    EXPECT_EQ(e["name"], "grant") << e.dump();
    ++grants;
  }
  EXPECT_GT(grants, 0);
}

TEST_F(TraceCli, OutputsAreByteIdenticalPerSeedAndChangeNothing) {
  const CmdResult a = run(kTool + " --json --no-wall " + scenario_ + outputs("d1"));
  const CmdResult b = run(kTool + " --json --no-wall " + scenario_ + outputs("d2"));
  const CmdResult plain = run(kTool + " --json --no-wall " + scenario_);
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out, plain.out);  // tracing and sampling do not change the run
  for (const char* ext : {".json", ".csv", ".pcapng", "-rx.pcapng"}) {
    const std::string x = slurp(temp(std::string("d1") + ext)), y = slurp(temp(std::string("d2") + ext));
    EXPECT_FALSE(x.empty()) << ext;
    EXPECT_TRUE(x == y) << ext << " differs between two runs of one seed";
  }
  const CmdResult c = run(kTool + " --json --no-wall --seed 9 " + scenario_ + outputs("d3"));
  EXPECT_NE(slurp(temp("d1.csv")), slurp(temp("d3.csv")));
}

TEST_F(TraceCli, TimeseriesHasARowPerQpPerPeriod) {
  ASSERT_EQ(run(kTool + " --no-wall " + scenario_ + outputs("t")).status, 0);
  std::ifstream in(temp("t.csv"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "time_us,host,qpn,flow,role,rate_bps,throughput_bps,queue_bytes,safe_util_bps,tokens,current99_us");
  std::map<std::string, int> rows_at;
  bool limited = false;
  uint64_t max_bw = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) f.push_back(c);
    ASSERT_GE(f.size(), 8u) << line;
    ++rows_at[f[0]];
    if (f[3] == "bw" && f[4] == "requester") {
      limited |= f[5] == "40000000000";
      max_bw = std::max<uint64_t>(max_bw, std::stoull(f[6]));
    }
  }
  EXPECT_TRUE(limited);
  EXPECT_GT(max_bw, 30'000'000'000u);
  EXPECT_LE(max_bw, 41'000'000'000u);  // the limit holds in every period
  EXPECT_GE(rows_at.size(), 59u);      // 300 us / 5 us
  EXPECT_EQ(rows_at["5.000"], 4);      // two QPs on each side
}

// pcapng blocks, read back by hand: every Enhanced Packet Block's frame.
struct Epb {
  uint32_t iface;
  uint64_t ts;
  std::vector<uint8_t> frame;
  std::string comment;
};
std::vector<Epb> read_pcapng(const std::string& bytes, uint32_t* interfaces) {
  std::vector<Epb> out;
  *interfaces = 0;
  size_t off = 0;
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  while (off + 12 <= bytes.size()) {
    const uint32_t type = u32(off), len = u32(off + 4);
    EXPECT_EQ(len % 4, 0u);
    EXPECT_EQ(u32(off + len - 4), len);
    if (type == 1) ++*interfaces;
    if (type == 6) {
      Epb e;
      e.iface = u32(off + 8);
      e.ts = uint64_t{u32(off + 12)} << 32 | u32(off + 16);
      const uint32_t cap = u32(off + 20);
      e.frame.assign(bytes.begin() + off + 28, bytes.begin() + off + 28 + cap);
      size_t o = off + 28 + ((cap + 3) & ~3u);
      while (o + 4 <= off + len - 4) {
        uint16_t code, olen;
        std::memcpy(&code, bytes.data() + o, 2);
        std::memcpy(&olen, bytes.data() + o + 2, 2);
        if (code == 0) break;
        if (code == 1) e.comment.assign(bytes.data() + o + 4, olen);
        o += 4 + ((olen + 3u) & ~3u);
      }
      out.push_back(std::move(e));
    }
    off += len;
  }
  EXPECT_EQ(off, bytes.size());
  return out;
}

TEST_F(TraceCli, PcapngFramesHaveAValidIcrcAndTheirDecision) {
  ASSERT_EQ(run(kTool + " --no-wall " + scenario_ + outputs("p")).status, 0);
  uint32_t interfaces = 0;
  std::vector<Epb> frames = read_pcapng(slurp(temp("p.pcapng")), &interfaces);
  EXPECT_EQ(interfaces, 2u);
  ASSERT_GT(frames.size(), 50u);
  std::set<uint32_t> ifaces;
  uint64_t last = 0;
  for (Epb& e : frames) {
    const wire::ParseResult r = wire::parse_frame(std::span<uint8_t>(e.frame));
    ASSERT_TRUE(r.ok()) << "frame at " << e.ts;
    EXPECT_TRUE(r.pkt.icrc_ok);
    EXPECT_EQ(e.comment.rfind("isoroce policy=tassel; ", 0), 0u) << e.comment;
    EXPECT_GE(e.ts, last);
    last = e.ts;
    ifaces.insert(e.iface);
  }
  EXPECT_EQ(ifaces, (std::set<uint32_t>{0, 1}));  // a's data, b's ACKs
  // tshark decodes every frame as InfiniBand and shows the comments.
  const CmdResult t = run("tshark -r " + temp("p.pcapng") + " -T fields -e frame.protocols -e frame.comment");
  ASSERT_EQ(t.status, 0) << t.out;
  std::stringstream ss(t.out);
  size_t n = 0, rate = 0, phi = 0;
  for (std::string line; std::getline(ss, line);) {
    if (line.find("eth:ethertype:ip:udp:infiniband") != 0) continue;  // tshark's own warnings
    ++n;
    EXPECT_NE(line.find("isoroce policy=tassel"), std::string::npos) << line;
    const bool limited = line.find("rate limit 40.000 Gb/s") != std::string::npos;
    rate += limited;
    // Tassel's S, F and Phi of the limited QP's packets: only it has a limit, Phi = 40/100.
    if (limited) EXPECT_NE(line.find(" phi 0.4000"), std::string::npos) << line;
    phi += line.find("; S ") != std::string::npos && line.find(" us F ") != std::string::npos;
  }
  EXPECT_EQ(n, frames.size());
  EXPECT_GT(rate, 0u);
  EXPECT_EQ(phi, rate);
  const CmdResult v = run("tshark -r " + temp("p.pcapng") + " -c 1 -V");
  EXPECT_NE(v.out.find("Packet comments"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("InfiniBand"), std::string::npos);
  // Received frames: inbound, no comment.
  std::vector<Epb> rx = read_pcapng(slurp(temp("p-rx.pcapng")), &interfaces);
  ASSERT_FALSE(rx.empty());
  for (const Epb& e : rx) EXPECT_TRUE(e.comment.empty());
}

// Justitia's comments carry the tokens banked when the frame was released.
TEST_F(TraceCli, JustitiaCommentsCarryTokens) {
  ASSERT_EQ(run(kTool + " --no-wall --policy justitia " + scenario_ + " --pcap " + temp("j.pcapng")).status, 0);
  const CmdResult t = run("tshark -r " + temp("j.pcapng") + " -T fields -e frame.comment");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("isoroce policy=justitia; waited "), std::string::npos) << t.out.substr(0, 2000);
  EXPECT_NE(t.out.find("; tokens "), std::string::npos) << t.out.substr(0, 2000);
}

TEST_F(TraceCli, BadEventListAndUnwritableFilesAreClearErrors) {
  const CmdResult bad = run(kTool + " " + scenario_ + " --trace " + temp("x.json") + " --trace-events grant,bogus");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("unknown trace event 'bogus'"), std::string::npos) << bad.out;
  for (const char* opt : {"--trace", "--timeseries", "--pcap"}) {
    const CmdResult r = run(kTool + " " + scenario_ + " " + opt + " /nonexistent-dir/out");
    EXPECT_EQ(r.status, 1) << opt << r.out;
    EXPECT_NE(r.out.find("cannot write /nonexistent-dir/out"), std::string::npos) << opt << r.out;
  }
  const CmdResult classic = run(kTool + " " + scenario_ + " --pcap-classic --pcap " + temp("c.pcap"));
  EXPECT_EQ(classic.status, 0) << classic.out;
  const std::string c = slurp(temp("c.pcap"));
  ASSERT_GE(c.size(), 4u);
  uint32_t magic;
  std::memcpy(&magic, c.data(), 4);
  EXPECT_EQ(magic, 0xa1b23c4du);
}

}  // namespace
}  // namespace isoroce::sim
