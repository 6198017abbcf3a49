// isoroce-rperf: a QP's latency the way RPerf measures it, and where it went,
// from a trace (docs/profiling.md, "Latency breakdown"; the method:
// tools/rperf/breakdown.h). The trace is `isoroce-ctl trace --raw` records or
// a Chrome trace-event JSON file written by isoroce-ctl trace or isoroce-sim --trace.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <tuple>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "tools/rperf/breakdown.h"

using nlohmann::json;
namespace rp = isoroce::tools::rperf;
using isoroce::trace::Record;

namespace {

bool parse_ref(const std::string& text, rp::QpRef* q) {
  unsigned port = 0, qp = 0;
  char tail;
  if (std::sscanf(text.c_str(), "%u:%u%c", &port, &qp, &tail) != 2 || port > 0xffff) return false;
  q->port = static_cast<uint16_t>(port);
  q->qp = qp;
  return true;
}

// A Chrome trace's events as records (tools/trace/chrome_trace.h, the writer of
// isoroce-ctl trace, isoroce-sim --trace and isoroce-trace): every record is an
// instant whose args carry its raw fields; pid is the port + 1.
bool from_chrome(const std::string& text, std::vector<Record>* out, std::string* error) {
  using isoroce::trace::Event;
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.contains("traceEvents")) return *error = "neither trace records nor a Chrome trace", false;
  auto ps = [](double us) { return static_cast<isoroce::sched::Picos>(std::llround(us * 1e6)); };
  for (const json& e : j["traceEvents"]) {
    if (e.value("ph", "") != "i" || !e.contains("args")) continue;
    const json& a = e["args"];
    const std::string name = e.value("name", "");
    Record r;
    bool known = false;
    for (std::size_t i = 0; i < isoroce::trace::kEventCount; ++i)
      if (isoroce::trace::kEventNames[i] == name) r.event = static_cast<Event>(i), known = true;
    if (!known || !a.contains("qp")) continue;
    r.port = static_cast<uint16_t>(e.value("pid", 1) - 1);
    r.time = ps(e.value("ts", 0.0));
    r.qp = a.value("qp", 0u);
    r.psn = a.value("psn", 0u);
    r.bytes = a.value("bytes", 0u);
    r.cls = a.value("class", uint8_t{0});
    r.a = a.value("a", uint64_t{0});
    r.b = a.value("b", uint64_t{0});
    out->push_back(r);
  }
  return true;
}

bool load(const std::string& path, std::vector<Record>* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return *error = "cannot read '" + path + "'", false;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!text.empty() && text[0] == '{') return from_chrome(text, out, error);
  if (text.size() % sizeof(Record) != 0) return *error = "'" + path + "' is not whole 40-byte trace records", false;
  out->resize(text.size() / sizeof(Record));
  std::memcpy(out->data(), text.data(), text.size());
  return true;
}

json to_json(const rp::Percentiles& p) {
  return {{"n", p.n}, {"p50_ns", p.p50_ns}, {"p99_ns", p.p99_ns}, {"p999_ns", p.p999_ns}, {"mean_ns", p.mean_ns},
          {"max_ns", p.max_ns}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"isoroce-rperf: RPerf's RTT (T_W - T_L) and a per-stage latency breakdown from a trace "
               "(docs/profiling.md)"};
  std::string path, wire_text, loop_text, peer_text;
  bool as_json = false;
  app.add_option("TRACE", path, "isoroce-ctl trace --raw records, or a Chrome JSON trace")->required();
  app.add_option("--wire", wire_text, "PORT:QPN of the QP whose SENDs go over the wire")->required();
  app.add_option("--loopback", loop_text, "PORT:QPN of the loopback QP posted right after each (RPerf's RTT)");
  app.add_option("--peer", peer_text, "PORT:QPN of the responder's QP, if its port is in the trace");
  app.add_flag("--json", as_json, "print JSON");
  CLI11_PARSE(app, argc, argv);
  rp::QpRef wire, loop, peer;
  for (auto [text, ref, flag] : {std::tuple{&wire_text, &wire, "--wire"}, std::tuple{&loop_text, &loop, "--loopback"},
                                 std::tuple{&peer_text, &peer, "--peer"}}) {
    if (!text->empty() && !parse_ref(*text, ref)) {
      std::fprintf(stderr, "isoroce-rperf: %s '%s' is not PORT:QPN\n", flag, text->c_str());
      return 2;
    }
  }
  std::vector<Record> rs;
  std::string error;
  if (!load(path, &rs, &error)) {
    std::fprintf(stderr, "isoroce-rperf: %s\n", error.c_str());
    return 2;
  }
  const auto msgs = rp::messages(rs, wire, peer_text.empty() ? std::nullopt : std::optional(peer));
  const auto stages = rp::breakdown(msgs);
  std::optional<rp::Percentiles> rtt;
  if (!loop_text.empty()) rtt = rp::percentiles(rp::rperf_rtts(rs, wire, loop));
  if (as_json) {
    json j = {{"messages", msgs.size()}, {"stages", json::array()}};
    for (const auto& s : stages) j["stages"].push_back({{"stage", s.name}, {"latency", to_json(s.p)}});
    if (rtt) j["rperf_rtt"] = to_json(*rtt);
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{} messages of QP {}:{}\n", msgs.size(), wire.port, wire.qp);
  fmt::print("{:<12} {:>8} {:>10} {:>10} {:>10} {:>10}\n", "stage", "n", "p50 ns", "p99 ns", "p99.9 ns", "mean ns");
  auto row = [](const std::string& name, const rp::Percentiles& p) {
    fmt::print("{:<12} {:>8} {:>10.0f} {:>10.0f} {:>10.0f} {:>10.0f}\n", name, p.n, p.p50_ns, p.p99_ns, p.p999_ns,
               p.mean_ns);
  };
  for (const auto& s : stages) row(s.name, s.p);
  if (rtt) row("rperf RTT", *rtt);
  return 0;
}
