// isoroce-trace: `isoroce-ctl trace --raw` records (trace::Record, 40 bytes each)
// as the Chrome trace-event JSON every isoroce tool writes (tools/trace/chrome_trace.h,
// docs/profiling.md), filtered by event and QP.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tools/trace/chrome_trace.h"

int main(int argc, char** argv) {
  namespace trace = isoroce::trace;
  CLI::App app{"isoroce-trace: raw trace records (isoroce-ctl trace --raw) as Chrome trace-event JSON for Perfetto "
               "(docs/profiling.md)"};
  std::string in_path, out_path = "-", events = "all", names;
  std::vector<std::string> qp_names;
  app.add_option("RAW", in_path, "records written by isoroce-ctl trace --raw")->required();
  app.add_option("--out", out_path, "the JSON file ('-': standard output)");
  app.add_option("--events", events, "only these events (comma-separated names, or all)");
  app.add_option("--qp", qp_names,
                 "only records of these QPs (and the ports' own): DEVICE/QPN (a --names name or a port number), or a "
                 "QPN that only one port has");
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
  isoroce::tools::TraceMeta meta;
  meta.source = "isoroce-trace";
  uint16_t port = 0;
  for (size_t pos = 0; !names.empty() && pos <= names.size(); ++port) {
    const size_t comma = std::min(names.find(',', pos), names.size());
    meta.port_names[port] = names.substr(pos, comma - pos);
    pos = comma + 1;
  }
  std::vector<trace::Record> all;
  for (size_t off = 0; off < text.size(); off += sizeof(trace::Record)) {
    trace::Record r;
    std::memcpy(&r, text.data() + off, sizeof r);
    if (static_cast<size_t>(r.event) >= trace::kEventCount) {
      std::fprintf(stderr, "isoroce-trace: record %zu has no known event (%u)\n", off / sizeof r,
                   static_cast<unsigned>(r.event));
      return 2;
    }
    all.push_back(r);
  }
  // The QPs asked for, as (port, QPN): QPNs repeat across ports (devices), so a bare
  // QPN must be one that only one port's records have (issue 19).
  std::vector<std::pair<uint16_t, uint32_t>> qps;
  for (const std::string& q : qp_names) {
    std::string dev;
    uint32_t qpn = 0;
    const size_t slash = q.find('/');
    const std::string num = slash == std::string::npos ? q : q.substr(slash + 1);
    char* end = nullptr;
    const unsigned long v = num.empty() ? 0 : std::strtoul(num.c_str(), &end, 0);
    if (num.empty() || *end != '\0' || v > 0xffffff || (slash != std::string::npos && slash == 0)) {
      std::fprintf(stderr, "isoroce-trace: --qp '%s' is not a QP (DEVICE/QPN or a QPN)\n", q.c_str());
      return 2;
    }
    qpn = static_cast<uint32_t>(v);
    if (slash != std::string::npos) {
      dev = q.substr(0, slash);
      int found = -1;
      for (const auto& [p, name] : meta.port_names)
        if (name == dev) found = p;
      if (found < 0 && !dev.empty() && std::all_of(dev.begin(), dev.end(), ::isdigit) && dev.size() < 6)
        found = std::stoi(dev);
      if (found < 0 || found > 0xffff) {
        std::fprintf(stderr, "isoroce-trace: --qp '%s': no port '%s' (--names gives them names)\n", q.c_str(),
                     dev.c_str());
        return 2;
      }
      qps.push_back({static_cast<uint16_t>(found), qpn});
      continue;
    }
    std::vector<uint16_t> ports;
    for (const trace::Record& r : all)
      if (r.qp == qpn && std::find(ports.begin(), ports.end(), r.port) == ports.end()) ports.push_back(r.port);
    if (ports.size() > 1) {
      std::string list;
      std::sort(ports.begin(), ports.end());
      for (uint16_t p : ports) {
        auto it = meta.port_names.find(p);
        list += (list.empty() ? "" : ", ") + (it != meta.port_names.end() ? it->second : std::to_string(p)) + "/" +
                std::to_string(qpn);
      }
      std::fprintf(stderr, "isoroce-trace: --qp %s is ambiguous: %zu ports have it (%s); name one as DEVICE/QPN\n",
                   q.c_str(), ports.size(), list.c_str());
      return 2;
    }
    qps.push_back({ports.empty() ? uint16_t{0} : ports[0], qpn});
  }
  std::vector<trace::Record> rs;
  for (const trace::Record& r : all) {
    if (!(mask & trace::bit(r.event))) continue;
    if (!qps.empty() && r.qp != trace::kNoQp &&
        std::find(qps.begin(), qps.end(), std::pair<uint16_t, uint32_t>{r.port, r.qp}) == qps.end())
      continue;
    rs.push_back(r);
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
