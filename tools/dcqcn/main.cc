// isoroce-dcqcn: replays a CNP arrival schedule through the DCQCN reaction
// point alone and prints the rate trajectory, for tuning parameters.
//
//   isoroce-dcqcn --line-gbps 100 --cnp-us 0,50,52,400 --until-us 3000
//                 [--param NAME=VALUE ...] [--preset hpcc] [--json] [--alpha]
//                 [--packet-bytes N] [--list-params]
//
// The sender is backlogged: it sends packets of --packet-bytes back to back at
// its current rate, which is what the byte counter counts. Exit status: 0 ok,
// 1 bad arguments. Manual: docs/dcqcn.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <charconv>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "transport/dcqcn/reaction_point.h"

namespace {

using isoroce::dcqcn::Event;
using isoroce::dcqcn::EventKind;
using isoroce::sched::Picos;

struct Recorder : isoroce::dcqcn::EventSink {
  void on_event(const Event& e) override { events.push_back(e); }
  std::vector<Event> events;
};

// "0,50,52.5,400" -> picoseconds, non-decreasing. Empty string on success.
std::string parse_times(const std::string& text, std::vector<Picos>* out) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    std::string item = text.substr(pos, comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    double us = 0;
    auto r = std::from_chars(item.data(), item.data() + item.size(), us);
    if (item.empty() || r.ec != std::errc() || r.ptr != item.data() + item.size() || !std::isfinite(us) || us < 0)
      return "--cnp-us: \"" + item + "\" is not a time in microseconds >= 0";
    const Picos t = static_cast<Picos>(std::llround(us * 1e6));
    if (!out->empty() && t < out->back()) return "--cnp-us: times must not decrease (" + item + ")";
    out->push_back(t);
    pos = comma + 1;
  }
  return {};
}

// HPCC simulation/run.py "dcqcn" settings, scaled to the line rate as run.py does.
std::vector<std::string> hpcc_preset(double line_gbps) {
  return {"alpha_update_us=1", "rate_decrease_period_us=4", "rp_timer_us=300", "g=0.00390625",
          "fast_recovery_stages=1", fmt::format("ai_mbps={}", 5 * line_gbps / 25),
          fmt::format("hai_mbps={}", 50 * line_gbps / 25), "min_rate_mbps=1000", "clamp_target=false",
          "byte_counter_bytes=0", "initial_alpha=1", "rate_on_first_cnp_mbps=0"};
}

}  // namespace

// Long on purpose: every option with its binding and check, read top to bottom (CLI11).
int main(int argc, char** argv) {
  namespace dcqcn = isoroce::dcqcn;
  CLI::App app{"isoroce-dcqcn: the DCQCN reaction point alone, driven by a CNP schedule; prints the rate "
               "trajectory. Manual: docs/dcqcn.md"};
  double line_gbps = 100, until_us = 3000;
  std::string cnp_text;
  std::vector<std::string> params;
  std::string preset;
  bool json = false, show_alpha = false, list = false;
  uint32_t packet_bytes = 4154;  // a 4096-byte RoCEv2 WRITE MIDDLE over IPv4 plus Ethernet overhead
  app.add_option("--line-gbps", line_gbps, "line rate, Gb/s (default 100)")->check(CLI::Range(0.001, 1600.0));
  app.add_option("--cnp-us", cnp_text, "CNP arrival times, us, comma-separated, non-decreasing (e.g. 0,50,52,400)");
  app.add_option("--until-us", until_us, "stop at this time, us (default 3000)")->check(CLI::Range(0.0, 1e9));
  app.add_option("--param", params, "NAME=VALUE, repeatable (see --list-params)");
  app.add_option("--preset", preset, "start from a parameter set: hpcc (HPCC run.py dcqcn) or nvidia (defaults)")
      ->check(CLI::IsMember({"hpcc", "nvidia"}));
  app.add_option("--packet-bytes", packet_bytes, "bytes per packet of the backlogged sender (byte counter)")
      ->check(CLI::Range(64u, 10000u));
  app.add_flag("--json", json, "print the events as JSON");
  app.add_flag("--alpha", show_alpha, "include the alpha updates in the table (always in --json)");
  app.add_flag("--list-params", list, "list every parameter with unit, default and mlx5 knob, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  dcqcn::Params p;
  p.enabled = true;
  if (list) {
    fmt::print("{:<26} {:>14} {:<6} {:<42} {}\n", "parameter", "default", "unit", "mlx5 knob", "meaning");
    for (const auto& i : dcqcn::param_table())
      fmt::print("{:<26} {:>14} {:<6} {:<42} {}\n", i.name, dcqcn::get_param(dcqcn::Params{}, i.name), i.unit,
                 i.mlx5_knob, i.description);
    return 0;
  }
  if (cnp_text.empty()) {
    fmt::print(stderr, "isoroce-dcqcn: --cnp-us is required (e.g. --cnp-us 0,50,52,400); see --help\n");
    return 1;
  }
  std::vector<std::string> all;
  if (preset == "hpcc") all = hpcc_preset(line_gbps);
  all.insert(all.end(), params.begin(), params.end());
  for (const auto& nv : all) {
    if (auto e = dcqcn::set_param(p, nv); !e.empty()) {
      fmt::print(stderr, "isoroce-dcqcn: --param {}: {}\n", nv, e);
      return 1;
    }
  }
  if (auto e = dcqcn::validate(p); !e.empty()) {
    fmt::print(stderr, "isoroce-dcqcn: {}\n", e);
    return 1;
  }
  std::vector<Picos> cnps;
  if (auto e = parse_times(cnp_text, &cnps); !e.empty()) {
    fmt::print(stderr, "isoroce-dcqcn: {}\n", e);
    return 1;
  }

  const uint64_t line_bps = static_cast<uint64_t>(std::llround(line_gbps * 1e9));
  const Picos until = static_cast<Picos>(std::llround(until_us * 1e6));
  dcqcn::ReactionPoint rp(&p, line_bps);
  Recorder rec;
  rp.set_trace(&rec);
  // Event loop: the next CNP, the next packet of the backlogged sender (only
  // with a byte counter), the reaction point's own deadline.
  size_t next_cnp = 0;
  Picos next_pkt = p.byte_counter_bytes ? 0 : isoroce::sched::kNever;
  for (;;) {
    Picos t = std::min(rp.next_deadline(), next_pkt);
    if (next_cnp < cnps.size()) t = std::min(t, cnps[next_cnp]);
    if (t == isoroce::sched::kNever || t > until) break;
    rp.advance(t);
    while (next_cnp < cnps.size() && cnps[next_cnp] == t) {
      rp.on_cnp(t);
      ++next_cnp;
    }
    if (next_pkt == t) {
      rp.on_sent(t, packet_bytes);
      next_pkt = t + isoroce::sched::duration(packet_bytes, isoroce::sched::byte_cost(std::max<uint64_t>(1, rp.rate_bps())));
    }
  }
  rp.advance(until);

  auto round_to = [](double v, int d) {
    const double s = std::pow(10.0, d);
    return std::round(v * s) / s;
  };
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& e : rec.events)
      out.push_back({{"t_us", round_to(static_cast<double>(e.t) / 1e6, 6)},
                     {"event", dcqcn::to_string(e.kind)},
                     {"rate_gbps", round_to(e.rate_bps / 1e9, 6)},
                     {"target_gbps", round_to(e.target_bps / 1e9, 6)},
                     {"alpha", round_to(e.alpha, 9)}});
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("{:>12} {:<14} {:>12} {:>12} {:>10}\n", "t_us", "event", "rate_gbps", "target_gbps", "alpha");
  for (const auto& e : rec.events) {
    if (e.kind == EventKind::kAlpha && !show_alpha) continue;
    fmt::print("{:>12.3f} {:<14} {:>12.4f} {:>12.4f} {:>10.6f}\n", static_cast<double>(e.t) / 1e6,
               dcqcn::to_string(e.kind), e.rate_bps / 1e9, e.target_bps / 1e9, e.alpha);
  }
  fmt::print("at {:.3f} us: rate {:.4f} Gb/s, target {:.4f} Gb/s, alpha {:.6f}; {} CNPs, {} cuts, {} increases\n",
             until_us, rp.rate() / 1e9, rp.target() / 1e9, rp.alpha(), rp.counters().cnps, rp.counters().decreases,
             rp.counters().increases);
  return 0;
}
