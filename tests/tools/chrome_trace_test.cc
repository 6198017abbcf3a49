// tools/trace/chrome_trace.h, the one Chrome trace-event writer (isoroce-sim --trace,
// isoroce-ctl trace, isoroce-trace): valid JSON with exactly the expected events,
// the fields Perfetto's JSON importer reads (pid/tid integers, pid = port + 1, "X"
// slices that nest on every thread, instant scope, counters with numeric args,
// metadata names), exact timestamps, Tassel's Phi, the ring stage, and the same
// bytes for the same records.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <infiniband/verbs.h>

#include <map>
#include <set>
#include <sstream>

#include "tools/trace/chrome_trace.h"
#include "transport/wire/opcode.h"

namespace isoroce::tools {
namespace {

using E = trace::Event;
using nlohmann::json;

trace::Record rec(sched::Picos t, E e, uint32_t qp, uint32_t psn, uint64_t a = 0, uint64_t b = 0) {
  trace::Record r;
  r.time = t;
  r.event = e;
  r.qp = qp;
  r.psn = psn;
  r.a = a;
  r.b = b;
  r.port = 1;
  r.bytes = 64;
  return r;
}

std::string write(const std::vector<trace::Record>& rs, TraceMeta meta = {}) {
  meta.port_names[1] = "isoroce1 \"x\"";
  meta.source = "test";
  meta.dropped = 7;
  std::ostringstream out;
  write_chrome_trace(out, rs, meta);
  return out.str();
}

// What Perfetto's JSON importer needs of every event; slices of a thread nest.
void check_perfetto_fields(const json& j) {
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> slices;
  double last_ts = 0;
  bool meta_done = false;
  for (const json& e : j["traceEvents"]) {
    ASSERT_TRUE(e["pid"].is_number_integer() && e["pid"].get<int64_t>() >= 1) << e.dump();
    ASSERT_TRUE(e["tid"].is_number_integer()) << e.dump();
    ASSERT_TRUE(e["name"].is_string()) << e.dump();
    const std::string ph = e["ph"];
    if (ph == "M") {
      EXPECT_FALSE(meta_done) << "metadata first";
      continue;
    }
    meta_done = true;
    ASSERT_TRUE(e["ts"].is_number()) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), last_ts) << "time order";
    last_ts = e["ts"];
    if (ph == "X") {
      ASSERT_TRUE(e["dur"].is_number()) << e.dump();
      slices[{e["pid"], e["tid"]}].push_back({e["ts"], e["ts"].get<double>() + e["dur"].get<double>()});
    } else if (ph == "i") {
      EXPECT_TRUE(e["s"] == "t" || e["s"] == "p") << e.dump();
    } else if (ph == "C") {
      ASSERT_EQ(e["args"].size(), 1u) << e.dump();
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << e.dump();
    } else {
      ADD_FAILURE() << e.dump();
    }
  }
  for (const auto& [track, ss] : slices)
    for (size_t i = 1; i < ss.size(); ++i) EXPECT_LE(ss[i - 1].second, ss[i].first) << "overlap on tid " << track.second;
}

TEST(ChromeTrace, ExactlyTheExpectedEvents) {
  // Out of order on purpose: the writer sorts by time.
  trace::Record post = rec(1'000'000, E::kPost, 16, 0, IBV_WR_SEND, 250'000);  // waited 0.25 us in the ring
  const std::vector<trace::Record> rs = {rec(2'500'123, E::kCompletion, 16, 0), post,
                                         rec(1'200'000, E::kRate, 16, 0, 5'000'000'000),
                                         rec(1'500'000, E::kGrant, 0xffffffff, 0, 1'600'000)};
  const std::string text = write(rs);
  const json j = json::parse(text);
  check_perfetto_fields(j);
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  EXPECT_EQ(j["otherData"]["dropped"], 7);
  EXPECT_EQ(j["otherData"]["generator"], "test");
  std::vector<std::string> seen;
  for (const json& e : j["traceEvents"]) {
    std::string s = e["ph"].get<std::string>() + ":" + e["name"].get<std::string>();
    if (e["ph"] == "M") s += ":" + e["args"].value("name", std::string());
    seen.push_back(s);
  }
  const std::vector<std::string> want = {
      "M:process_name:isoroce1 \"x\"", "M:process_sort_index:", "M:thread_name:scheduler (port)",
      "M:thread_name:QP isoroce1 \"x\"/16 (0x10)", "X:SEND 64 B", "i:post",
      "i:rate",                        "C:rate limit QP isoroce1 \"x\"/16 (0x10)", "i:grant",
      "i:completion"};
  EXPECT_EQ(seen, want);
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      EXPECT_EQ(e["pid"], 2);  // port 1
      EXPECT_EQ(e["tid"], 16);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.75);  // from the application's post
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1.750123);
      EXPECT_DOUBLE_EQ(e["args"]["ring_us"].get<double>(), 0.25);
    }
    if (e["name"] == "grant") {
      EXPECT_EQ(e["s"], "p");
      EXPECT_EQ(e["tid"], 0);
      EXPECT_EQ(e["args"]["qp"], 0xffffffffu);
      EXPECT_DOUBLE_EQ(e["args"]["departure_us"].get<double>(), 1.6);
    }
    if (e["ph"] == "C") EXPECT_DOUBLE_EQ(e["args"]["Gbps"].get<double>(), 5.0);
  }
  EXPECT_NE(text.find("\"ts\":2.500123"), std::string::npos);
}

// Tassel's Phi rides in eligible's psn (Q16.16) and is shown decoded.
TEST(ChromeTrace, EligibleShowsSFAndPhi) {
  const json j = json::parse(write({rec(3'000'000, E::kEligible, 5, trace::phi_q16(150, 100), 2'000'000, 2'400'000)}));
  int n = 0;
  for (const json& e : j["traceEvents"]) {
    if (e["name"] != "eligible") continue;
    ++n;
    EXPECT_DOUBLE_EQ(e["args"]["phi"].get<double>(), 1.5);
    EXPECT_DOUBLE_EQ(e["args"]["S_us"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(e["args"]["F_us"].get<double>(), 2.4);
    EXPECT_EQ(e["args"]["psn"], 98304);
  }
  EXPECT_EQ(n, 1);
}

// Four outstanding messages of one QP overlap: Perfetto drops slices that do not
// nest, so they go on lanes (tid QPN + k * 2^24) with their own thread names.
TEST(ChromeTrace, OverlappingMessagesGoOnLanes) {
  std::vector<trace::Record> rs;
  for (uint32_t m = 0; m < 4; ++m) rs.push_back(rec(m * 1'000'000, E::kPost, 16, m, IBV_WR_RDMA_WRITE));
  for (uint32_t m = 0; m < 4; ++m) rs.push_back(rec(10'000'000 + m * 1'000'000, E::kCompletion, 16, m));
  const json j = json::parse(write(rs));
  check_perfetto_fields(j);
  std::map<int64_t, std::string> threads;
  int slices = 0;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["tid"]] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    EXPECT_EQ(qpn_of_tid(e["tid"].get<uint32_t>()), 16u);
    EXPECT_EQ(e["tid"].get<uint32_t>() >> kLaneShift, e["args"]["msg_id"].get<uint32_t>());
    ++slices;
  }
  EXPECT_EQ(slices, 4);
  EXPECT_EQ(threads[16], "QP isoroce1 \"x\"/16 (0x10)");
  EXPECT_EQ(threads[16 + (3 << 24)], "QP isoroce1 \"x\"/16 (0x10) #3");
}

// Receive: QPN 16 on two devices (every device numbers its own QPs), both rate-limited.
// Expect: two tracks and two counters, each named with its device (issue 19: a QP is
// named unambiguously wherever QPNs repeat), in the device's own process.
TEST(ChromeTrace, TheSameQpnOnTwoDevicesIsNamedWithItsDevice) {
  trace::Record a = rec(1'000'000, E::kRate, 16, 0, 5'000'000'000);
  trace::Record b = rec(2'000'000, E::kRate, 16, 0, 5'000'000'000);
  a.port = 0;
  TraceMeta meta;
  meta.port_names[0] = "isoroce0";
  const json j = json::parse(write({a, b}, meta));
  std::set<std::pair<int, std::string>> threads, counters;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 16) threads.insert({e["pid"].get<int>(), e["args"]["name"].get<std::string>()});
    if (e["ph"] == "C") counters.insert({e["pid"].get<int>(), e["name"].get<std::string>()});
  }
  const std::set<std::pair<int, std::string>> want_threads = {{1, "QP isoroce0/16 (0x10)"},
                                                              {2, "QP isoroce1 \"x\"/16 (0x10)"}};
  EXPECT_EQ(threads, want_threads);
  const std::set<std::pair<int, std::string>> want_counters = {{1, "rate limit QP isoroce0/16 (0x10)"},
                                                               {2, "rate limit QP isoroce1 \"x\"/16 (0x10)"}};
  EXPECT_EQ(counters, want_counters);
}

// The message's stages from its frames: a first frame, a middle one, a last one.
TEST(ChromeTrace, MessageStagesFromItsFrames) {
  namespace op = wire::op;
  const std::vector<trace::Record> rs = {
      rec(1'000'000, E::kPost, 16, 0, IBV_WR_RDMA_WRITE), rec(3'000'000, E::kFrameTx, 16, 100, op::kRcWriteFirst),
      rec(4'000'000, E::kFrameTx, 16, 101, op::kRcWriteMiddle), rec(5'000'000, E::kFrameTx, 16, 102, op::kRcWriteLast),
      rec(9'000'000, E::kCompletion, 16, 0)};
  const json j = json::parse(write(rs));
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    EXPECT_EQ(e["args"]["frames"], 3);
    EXPECT_DOUBLE_EQ(e["args"]["post_to_first_tx_us"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(e["args"]["first_to_last_tx_us"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(e["args"]["last_tx_to_completion_us"].get<double>(), 4.0);
  }
}

TEST(ChromeTrace, TheSameRecordsGiveTheSameBytes) {
  std::vector<trace::Record> rs;
  for (uint32_t i = 0; i < 100; ++i) rs.push_back(rec(i * 977 % 5000, E::kFrameTx, 16 + i % 3, i));
  EXPECT_EQ(write(rs), write(rs));
}

}  // namespace
}  // namespace isoroce::tools
