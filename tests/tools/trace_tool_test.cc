// isoroce-trace (tools/trace/main.cc): raw records in, the Chrome JSON of
// tools/trace/chrome_trace.h out, filtered by event and QP; bad input is a clear
// error.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sched/trace.h"

namespace isoroce::tools {
namespace {

int run(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  out->clear();
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int st = p ? pclose(p) : -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("isoroce-trace-tool-" + std::to_string(getpid()) + name)).string();
}

TEST(TraceTool, RawRecordsToFilteredJson) {
  std::vector<trace::Record> rs;
  for (uint32_t i = 0; i < 6; ++i) {
    trace::Record r;
    r.time = i * 1'000'000;
    r.event = i % 2 ? trace::Event::kGrant : trace::Event::kFrameTx;
    r.qp = 16 + i % 3;
    r.port = 0;
    rs.push_back(r);
  }
  const std::string raw = temp(".raw"), json_path = temp(".json");
  std::ofstream(raw, std::ios::binary).write(reinterpret_cast<const char*>(rs.data()), rs.size() * sizeof rs[0]);
  std::string out;
  ASSERT_EQ(run(std::string(ISOROCE_TRACE_TOOL) + " " + raw + " --events grant --qp 17 --names dev0 --out " + json_path,
                &out), 0) << out;
  std::ifstream in(json_path);
  const auto j = nlohmann::json::parse(in);
  int instants = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") EXPECT_EQ(e["args"]["name"], "dev0");
    if (e["ph"] != "i") continue;
    ++instants;
    EXPECT_EQ(e["name"], "grant");
    EXPECT_EQ(e["tid"], 17);
    EXPECT_EQ(e["pid"], 1);
  }
  EXPECT_EQ(instants, 1);  // record 1 (QP 17, grant); record 4 is QP 17's frame_tx
  EXPECT_EQ(j["otherData"]["generator"], "isoroce-trace");
  // Bad events, a torn file, an unreadable or unwritable path.
  EXPECT_EQ(run(std::string(ISOROCE_TRACE_TOOL) + " " + raw + " --events grant,bogus", &out), 2);
  EXPECT_NE(out.find("unknown trace event 'bogus'"), std::string::npos) << out;
  std::ofstream(raw, std::ios::binary | std::ios::app) << "x";
  EXPECT_EQ(run(std::string(ISOROCE_TRACE_TOOL) + " " + raw, &out), 2);
  EXPECT_NE(out.find("not whole 40-byte trace records"), std::string::npos) << out;
  EXPECT_EQ(run(std::string(ISOROCE_TRACE_TOOL) + " /nonexistent/x.raw", &out), 1);
  EXPECT_NE(out.find("cannot read"), std::string::npos) << out;
  std::remove(raw.c_str());
  std::remove(json_path.c_str());
}

// Receive: grants of QPN 17 on two ports (devices number QPs alike). Expect: a bare
// --qp 17 is refused naming both (dev0/17, dev1/17); --qp dev1/17 (a --names name)
// and --qp 1/17 (a port number) keep port 1's only; an unknown device is refused.
TEST(TraceTool, QpnsThatRepeatAcrossPortsAreNamedWithTheirDevice) {
  std::vector<trace::Record> rs;
  for (uint16_t port = 0; port < 2; ++port) {
    trace::Record r;
    r.time = (port + 1) * 1'000'000;
    r.event = trace::Event::kGrant;
    r.qp = 17;
    r.port = port;
    rs.push_back(r);
  }
  const std::string raw = temp("-2.raw"), json_path = temp("-2.json");
  std::ofstream(raw, std::ios::binary).write(reinterpret_cast<const char*>(rs.data()), rs.size() * sizeof rs[0]);
  const std::string tool = std::string(ISOROCE_TRACE_TOOL) + " " + raw + " --names dev0,dev1 --out " + json_path;
  std::string out;
  EXPECT_EQ(run(tool + " --qp 17", &out), 2);
  EXPECT_NE(out.find("--qp 17 is ambiguous: 2 ports have it (dev0/17, dev1/17); name one as DEVICE/QPN"),
            std::string::npos) << out;
  for (const char* q : {"dev1/17", "1/17"}) {
    ASSERT_EQ(run(tool + " --qp " + q, &out), 0) << q << ": " << out;
    std::ifstream in(json_path);
    const auto j = nlohmann::json::parse(in);
    int grants = 0;
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] != "i") continue;
      ++grants;
      EXPECT_EQ(e["pid"], 2) << q;  // port 1
    }
    EXPECT_EQ(grants, 1) << q;
  }
  EXPECT_EQ(run(tool + " --qp dev7/17", &out), 2);
  EXPECT_NE(out.find("no port 'dev7'"), std::string::npos) << out;
  std::remove(raw.c_str());
  std::remove(json_path.c_str());
}

}  // namespace
}  // namespace isoroce::tools
