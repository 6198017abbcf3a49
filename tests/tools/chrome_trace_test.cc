// tools/trace/chrome_trace.h: records as Chrome trace-event JSON that parses,
// names its tracks, makes a slice per message, and is byte-identical for the
// same records.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "tools/trace/chrome_trace.h"

namespace isoroce::tools {
namespace {

using E = trace::Event;

trace::Record rec(sched::Picos t, E e, uint32_t qp, uint32_t psn, uint64_t a = 0) {
  trace::Record r;
  r.time = t;
  r.event = e;
  r.qp = qp;
  r.psn = psn;
  r.a = a;
  r.port = 1;
  r.bytes = 64;
  return r;
}

std::string write(const std::vector<trace::Record>& rs) {
  TraceMeta meta;
  meta.port_names[1] = "isoroce1";
  meta.source = "test";
  meta.dropped = 7;
  std::ostringstream out;
  write_chrome_trace(out, rs, meta);
  return out.str();
}

TEST(ChromeTrace, TracksSlicesInstantsAndCounters) {
  // Out of order on purpose: the writer sorts by time.
  const std::vector<trace::Record> rs = {rec(2'500'123, E::kCompletion, 16, 0), rec(1'000'000, E::kPost, 16, 0),
                                         rec(1'200'000, E::kRate, 16, 0, 5'000'000'000),
                                         rec(1'500'000, E::kGrant, 0xffffffff, 0)};
  const std::string text = write(rs);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  EXPECT_EQ(j["otherData"]["dropped"], 7);
  int names = 0, slices = 0, instants = 0, counters = 0;
  double last_instant = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M") {
      ++names;
      if (e["name"] == "process_name") EXPECT_EQ(e["args"]["name"], "isoroce1");
    } else if (ph == "X") {
      ++slices;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1.500123);
      EXPECT_EQ(e["tid"], 16);
    } else if (ph == "i") {
      ++instants;
      EXPECT_LE(last_instant, e["ts"].get<double>());
      last_instant = e["ts"].get<double>();
    } else if (ph == "C") {
      ++counters;
      EXPECT_EQ(e["args"]["value"], 5'000'000'000u);
    }
  }
  EXPECT_EQ(names, 3);  // the port, QP 16, the port's own track
  EXPECT_EQ(slices, 1);
  EXPECT_EQ(instants, 4);
  EXPECT_EQ(counters, 1);
  EXPECT_NE(text.find("\"ts\":2.500123"), std::string::npos);
}

TEST(ChromeTrace, TheSameRecordsGiveTheSameBytes) {
  std::vector<trace::Record> rs;
  for (uint32_t i = 0; i < 100; ++i) rs.push_back(rec(i * 977 % 5000, E::kFrameTx, 16 + i % 3, i));
  EXPECT_EQ(write(rs), write(rs));
}

}  // namespace
}  // namespace isoroce::tools
