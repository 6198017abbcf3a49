// isoroce-trace: `isoroce-ctl trace --raw` records (trace::Record, 40 bytes each)
// as the Chrome trace-event JSON every isoroce tool writes (tools/trace/chrome_trace.h,
// docs/profiling.md), filtered by event and QP.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

#include "tools/trace/chrome_trace.h"

int main(int argc, char** argv) {
  namespace trace = isoroce::trace;
  CLI::App app{"isoroce-trace: raw trace records (isoroce-ctl trace --raw) as Chrome trace-event JSON for Perfetto "
               "(docs/profiling.md)"};
  std::string in_path, out_path = "-", events = "all", names;
  std::vector<uint32_t> qps;
  app.add_option("RAW", in_path, "records written by isoroce-ctl trace --raw")->required();
  app.add_option("--out", out_path, "the JSON file ('-': standard output)");
  app.add_option("--events", events, "only these events (comma-separated names, or all)");
  app.add_option("--qp", qps, "only records of these QPNs (and the ports' own)");
  app.add_option("--names", names, "port names, comma-separated in port order (default: port N)");
  CLI11_PARSE(app, argc, argv);
  trace::EventMask mask = 0;
  std::string error;
  if (!trace::parse_events(events, &mask, &error)) {
    std::fprintf(stderr, "isoroce-trace: --events: %s\n", error.c_str());
    return 2;
  }
  std::ifstream in(in_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "isoroce-trace: cannot read '%s'\n", in_path.c_str());
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() % sizeof(trace::Record) != 0) {
    std::fprintf(stderr, "isoroce-trace: '%s' is not whole %zu-byte trace records\n", in_path.c_str(),
                 sizeof(trace::Record));
    return 2;
  }
  std::vector<trace::Record> rs;
  for (size_t off = 0; off < text.size(); off += sizeof(trace::Record)) {
    trace::Record r;
    std::memcpy(&r, text.data() + off, sizeof r);
    if (static_cast<size_t>(r.event) >= trace::kEventCount) {
      std::fprintf(stderr, "isoroce-trace: record %zu has no known event (%u)\n", off / sizeof r,
                   static_cast<unsigned>(r.event));
      return 2;
    }
    if (!(mask & trace::bit(r.event))) continue;
    if (!qps.empty() && r.qp != trace::kNoQp && std::find(qps.begin(), qps.end(), r.qp) == qps.end()) continue;
    rs.push_back(r);
  }
  isoroce::tools::TraceMeta meta;
  meta.source = "isoroce-trace";
  uint16_t port = 0;
  for (size_t pos = 0; !names.empty() && pos <= names.size(); ++port) {
    const size_t comma = std::min(names.find(',', pos), names.size());
    meta.port_names[port] = names.substr(pos, comma - pos);
    pos = comma + 1;
  }
  std::ofstream file;
  if (out_path != "-") {
    file.open(out_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      std::fprintf(stderr, "isoroce-trace: cannot write '%s'\n", out_path.c_str());
      return 1;
    }
  }
  std::ostream& out = out_path == "-" ? std::cout : file;
  isoroce::tools::write_chrome_trace(out, rs, meta);
  out.flush();
  if (!out) {
    std::fprintf(stderr, "isoroce-trace: writing '%s' failed\n", out_path.c_str());
    return 1;
  }
  return 0;
}
