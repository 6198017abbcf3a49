#include "tools/sim/report_format.h"

#include <fmt/format.h>

namespace isoroce::tools {

using nlohmann::ordered_json;

namespace {

// Fixed decimals, so JSON numbers do not carry binary noise (and stay stable).
double round_to(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

ordered_json engine_json(const transport::EngineCounters& c) {
  return ordered_json{{"rx_frames", c.rx_frames},
                      {"rx_dropped", c.rx_dropped},
                      {"rx_parse_errors", c.rx_parse_errors},
                      {"rx_unknown_qp", c.rx_unknown_qp},
                      {"rx_bad_state", c.rx_bad_state},
                      {"rx_duplicates", c.rx_duplicates},
                      {"rx_out_of_sequence", c.rx_out_of_sequence},
                      {"rx_ud_qkey_mismatch", c.rx_ud_qkey_mismatch},
                      {"rx_ud_no_receive", c.rx_ud_no_receive},
                      {"tx_frames", c.tx_frames},
                      {"tx_bytes", c.tx_bytes},
                      {"tx_no_buffer", c.tx_no_buffer},
                      {"retransmits", c.retransmits},
                      {"timeouts", c.timeouts},
                      {"naks_sent", c.naks_sent},
                      {"naks_received", c.naks_received},
                      {"rnr_naks_sent", c.rnr_naks_sent},
                      {"rnr_naks_received", c.rnr_naks_received},
                      {"acks_sent", c.acks_sent},
                      {"cq_overruns", c.cq_overruns},
                      {"ce_received", c.ce_received},
                      {"cnps_sent", c.cnps_sent},
                      {"cnps_suppressed", c.cnps_suppressed},
                      {"cnps_received", c.cnps_received}};
}

ordered_json link_json(const sim::LinkStats& l) {
  return ordered_json{{"frames", l.frames},         {"bytes", l.bytes},
                      {"lost", l.lost},             {"corrupted", l.corrupted},
                      {"duplicated", l.duplicated}, {"reordered", l.reordered}};
}

ordered_json queue_json(double p50, double p99, uint64_t max) {
  return ordered_json{{"p50", round_to(p50 / 1024, 3)},
                      {"p99", round_to(p99 / 1024, 3)},
                      {"max", round_to(static_cast<double>(max) / 1024, 3)}};
}

ordered_json dcqcn_json(const sim::HostReport& h) {
  ordered_json qps = ordered_json::array();
  for (const auto& q : h.dcqcn_qps) {
    const auto& s = q.state;
    qps.push_back(ordered_json{{"qpn", q.qpn},
                               {"flow", q.flow},
                               {"side", q.requester ? "src" : "dst"},
                               {"limiting", s.limiting},
                               {"rate_gbps", round_to(static_cast<double>(s.rate_bps) / 1e9, 6)},
                               {"target_gbps", round_to(static_cast<double>(s.target_bps) / 1e9, 6)},
                               {"alpha", round_to(s.alpha, 9)},
                               {"ce_received", s.ce_received},
                               {"cnps_sent", s.cnps_sent},
                               {"cnps_received", s.cnps_received},
                               {"decreases", s.decreases},
                               {"increases", s.increases}});
  }
  return ordered_json{{"cnps_sent", h.engine.cnps_sent}, {"cnps_received", h.engine.cnps_received}, {"qps", qps}};
}

ordered_json justitia_json(const sim::HostReport& h) {
  const sched::JustitiaStats& j = h.justitia;
  auto us = [](sched::Picos p) { return round_to(static_cast<double>(p) / 1e6, 4); };
  auto gbps = [](uint64_t bps) { return round_to(static_cast<double>(bps) / 1e9, 4); };
  ordered_json lat{{"p50", round_to(h.ref_latency.p50_us, 4)},
                   {"p99", round_to(h.ref_latency.p99_us, 4)},
                   {"max", round_to(h.ref_latency.max_us, 4)}};
  return ordered_json{{"safe_util_gbps", gbps(j.safe_util_bps)},
                      {"min_safe_util_gbps", gbps(j.min_safe_util_bps)},
                      {"max_rate_gbps", gbps(j.max_rate_bps)},
                      {"tau_us", us(j.tau)},
                      {"current99_us", us(j.current99)},
                      {"target99_us", us(j.target99)},
                      {"token_bytes", j.token_bytes},
                      {"token_ops", j.token_ops},
                      {"tokens", j.tokens},
                      {"tokens_issued", j.tokens_issued},
                      {"latency_flows", j.latency_flows},
                      {"throughput_flows", j.throughput_flows},
                      {"bandwidth_flows", j.bandwidth_flows},
                      {"samples", j.samples},
                      {"passive_samples", j.passive_samples},
                      {"reclassified", j.reclassified},
                      {"halvings", j.halvings},
                      {"unattainable", j.unattainable},
                      {"ref_probes", h.ref_probes},
                      {"ref_lat_us", lat},
                      {"admission_warnings", h.admission_warnings}};
}

}  // namespace

ordered_json report_to_json(const sim::SimReport& r, const ReportOptions& opts) {
  ordered_json flows = ordered_json::array();
  for (const auto& f : r.flows) {
    ordered_json statuses = ordered_json::object();
    for (const auto& [k, v] : f.error_statuses) statuses[k] = v;
    ordered_json j{
        {"name", f.name},
        {"src", f.src},
        {"dst", f.dst.size() == 1 ? ordered_json(f.dst[0]) : ordered_json(f.dst)},
        {"transport", sim::to_string(f.transport)},
        {"verb", sim::to_string(f.verb)},
        {"class", sim::to_string(f.cls)},
        {"size", f.size},
        {"qps", f.qps},
        {"depth", f.depth},
        {"messages", f.messages},
        {"bytes", f.bytes},
        {"goodput_gbps", round_to(f.goodput_gbps, 4)},
        {"msgs_per_sec", round_to(f.msgs_per_sec, 1)},
        {"wire_gbps", round_to(f.wire_gbps, 4)},
        {"lat_us",
         {{"p50", round_to(f.lat.p50_us, 4)},
          {"p99", round_to(f.lat.p99_us, 4)},
          {"p999", round_to(f.lat.p999_us, 4)},
          {"max", round_to(f.lat.max_us, 4)},
          {"mean", round_to(f.lat.mean_us, 4)}}},
        {"retransmits", f.retransmits},
        {"naks", f.naks},
        {"rnr_naks", f.rnr_naks},
        {"errors", f.errors},
        {"error_statuses", statuses},
        {"integrity_ok", f.integrity_ok},
        {"integrity_checked", f.integrity_checked},
        {"integrity_failures", f.integrity_failures},
        {"delivered", f.delivered},
        {"finished", f.finished},
        {"start_us", round_to(f.start_us, 6)},
        {"end_us", round_to(f.end_us, 6)},
    };
    if (f.transport == sim::Transport::kUd) j["ud_duplicates"] = f.ud_duplicates;
    if (!f.first_failure.empty()) j["first_failure"] = f.first_failure;
    flows.push_back(std::move(j));
  }

  ordered_json hosts = ordered_json::array();
  ordered_json ports = ordered_json::array();
  uint64_t drops = 0, marks = 0, pauses = 0;
  sim::Picos pause_time = 0;
  sim::PortStats worst;  // the port with the largest p99 queue
  sim::LinkStats faults;
  for (size_t i = 0; i < r.hosts.size(); ++i) {
    const auto& h = r.hosts[i];
    ordered_json hj{{"name", h.name}, {"engine", engine_json(h.engine)}, {"stalls", h.stalls}};
    if (h.dcqcn) hj["dcqcn"] = dcqcn_json(h);
    if (h.has_justitia) hj["justitia"] = justitia_json(h);
    hosts.push_back(std::move(hj));
    if (i < r.fabric.ports.size()) {
      const auto& p = r.fabric.ports[i];
      drops += p.drops;
      marks += p.ecn_marked;
      pauses += p.pauses;
      pause_time += p.pause_time;
      if (p.queue_p99_bytes > worst.queue_p99_bytes ||
          (p.queue_p99_bytes == worst.queue_p99_bytes && p.max_queue_bytes > worst.max_queue_bytes))
        worst = p;
      ports.push_back(ordered_json{{"to", h.name},
                                   {"tx_frames", p.tx_frames},
                                   {"tx_bytes", p.tx_bytes},
                                   {"drops", p.drops},
                                   {"ecn_marked", p.ecn_marked},
                                   {"max_queue_bytes", p.max_queue_bytes},
                                   {"queue_kb", queue_json(p.queue_p50_bytes, p.queue_p99_bytes, p.max_queue_bytes)},
                                   {"pauses", p.pauses},
                                   {"pause_us", round_to(static_cast<double>(p.pause_time) / 1e6, 6)},
                                   {"uplink", link_json(r.fabric.uplinks[i])},
                                   {"downlink", link_json(r.fabric.downlinks[i])}});
      for (const auto* l : {&r.fabric.uplinks[i], &r.fabric.downlinks[i]}) {
        faults.lost += l->lost;
        faults.corrupted += l->corrupted;
        faults.duplicated += l->duplicated;
        faults.reordered += l->reordered;
      }
    }
  }
  ordered_json sim{{"seed", r.seed},
                   {"events", r.events},
                   {"virtual_us", round_to(r.virtual_us, 6)},
                   {"all_finished", r.all_finished}};
  if (opts.wall_time) sim["wall_ms"] = round_to(r.wall_ms, 3);
  return ordered_json{
      {"flows", flows},
      {"sim", sim},
      {"hosts", hosts},
      {"switch",
       {{"drops", drops},
        {"ecn_marked", marks},
        {"queue_kb", queue_json(worst.queue_p50_bytes, worst.queue_p99_bytes, worst.max_queue_bytes)},
        {"pauses", pauses},
        {"pause_us", round_to(static_cast<double>(pause_time) / 1e6, 6)},
        {"unknown_destination", r.fabric.unknown_destination},
        {"ports", ports}}},
      {"faults",
       {{"lost", faults.lost},
        {"corrupted", faults.corrupted},
        {"duplicated", faults.duplicated},
        {"reordered", faults.reordered}}},
  };
}

std::string report_to_table(const sim::SimReport& r, const ReportOptions& opts) {
  std::string out;
  out += fmt::format("{:<14} {:<10} {:>8} {:>9} {:>9} {:>11} {:>9} {:>9} {:>9} {:>9} {:>6} {:>5} {:>5} {:>6} {}\n",
                     "flow", "verb", "size", "messages", "goodput", "msgs/s", "p50 us", "p99 us", "p999 us",
                     "max us", "retx", "naks", "rnr", "errors", "integrity");
  for (const auto& f : r.flows) {
    std::string size = f.size >= (1u << 20) && f.size % (1u << 20) == 0 ? fmt::format("{}MB", f.size >> 20)
                       : f.size >= 1024 && f.size % 1024 == 0        ? fmt::format("{}KB", f.size >> 10)
                                                                      : fmt::format("{}B", f.size);
    std::string verb = fmt::format("{}/{}", sim::to_string(f.transport), sim::to_string(f.verb));
    std::string integrity = f.integrity_ok ? "ok" : fmt::format("FAILED ({})", f.first_failure);
    if (!f.finished && f.errors == 0) integrity += "";
    out += fmt::format("{:<14} {:<10} {:>8} {:>9} {:>9.3f} {:>11.0f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>6} {:>5} {:>5} {:>6} {}\n",
                       f.name, verb, size, f.messages, f.goodput_gbps, f.msgs_per_sec, f.lat.p50_us, f.lat.p99_us,
                       f.lat.p999_us, f.lat.max_us, f.retransmits, f.naks, f.rnr_naks, f.errors, integrity);
    for (const auto& [k, v] : f.error_statuses) out += fmt::format("{:<14}   error {} x{}\n", "", k, v);
    if (f.transport == sim::Transport::kUd)
      out += fmt::format("{:<14}   delivered {} of {} ({} duplicates)\n", "", f.delivered, f.messages,
                         f.ud_duplicates);
  }
  out += "(goodput in Gb/s)\n";
  uint64_t drops = 0, marks = 0, lost = 0, corrupted = 0, dup = 0, reord = 0;
  for (const auto& p : r.fabric.ports) {
    drops += p.drops;
    marks += p.ecn_marked;
  }
  for (const auto* v : {&r.fabric.uplinks, &r.fabric.downlinks})
    for (const auto& l : *v) {
      lost += l.lost;
      corrupted += l.corrupted;
      dup += l.duplicated;
      reord += l.reordered;
    }
  if (opts.live) {
    out += fmt::format("live: {} flows on daemons, {:.1f} ms wall clock", r.flows.size(), r.wall_ms);
    out += r.all_finished ? ", all flows finished\n" : ", stopped at duration_us\n";
    return out;
  }
  out += fmt::format("switch: {} tail drops, {} ECN marks; links: {} lost, {} corrupted, {} duplicated, {} reordered\n",
                     drops, marks, lost, corrupted, dup, reord);
  {
    double p50 = 0, p99 = 0;
    uint64_t max = 0, pauses = 0;
    sim::Picos pause_time = 0;
    for (const auto& p : r.fabric.ports) {
      if (p.queue_p99_bytes > p99 || (p.queue_p99_bytes == p99 && p.max_queue_bytes > max)) {
        p50 = p.queue_p50_bytes;
        p99 = p.queue_p99_bytes;
        max = p.max_queue_bytes;
      }
      pauses += p.pauses;
      pause_time += p.pause_time;
    }
    out += fmt::format("switch queue (worst port, KB over time): p50 {:.1f}, p99 {:.1f}, max {:.1f}", p50 / 1024,
                       p99 / 1024, static_cast<double>(max) / 1024);
    if (pauses) out += fmt::format("; PFC: {} pauses, {:.3f} us paused", pauses, static_cast<double>(pause_time) / 1e6);
    out += "\n";
  }
  for (const auto& h : r.hosts) {
    if (!h.dcqcn) continue;
    out += fmt::format("dcqcn {}: {} CNPs sent, {} received", h.name, h.engine.cnps_sent, h.engine.cnps_received);
    for (const auto& q : h.dcqcn_qps)
      if (q.requester && q.state.cnps_received)
        out += fmt::format("; {} qp {:#x} {:.3f} Gb/s (alpha {:.4f}, {} cuts)", q.flow, q.qpn,
                           static_cast<double>(q.state.rate_bps) / 1e9, q.state.alpha, q.state.decreases);
    out += "\n";
  }
  for (const auto& h : r.hosts) {
    if (!h.has_justitia) continue;
    const sched::JustitiaStats& j = h.justitia;
    out += fmt::format("justitia {}: SafeUtil {:.3f} Gb/s (min {:.3f}), tau {:.3f} us, Current99 {:.3f} us "
                       "(Target99 {:.3f}), {} tokens issued, {} samples ({} passive), {} halvings{}{}\n",
                       h.name, j.safe_util_bps / 1e9, j.min_safe_util_bps / 1e9, j.tau / 1e6, j.current99 / 1e6,
                       j.target99 / 1e6, j.tokens_issued, j.samples, j.passive_samples, j.halvings,
                       j.reclassified ? fmt::format(", {} QPs reclassified", j.reclassified) : "",
                       j.unattainable ? ", Target99 given up" : "");
  }
  for (const auto& h : r.hosts)
    for (const auto& line : h.log) {
      out += line;
      out += "\n";
    }
  out += fmt::format("sim: seed {}, {} events, {:.3f} us virtual", r.seed, r.events, r.virtual_us);
  if (opts.wall_time) out += fmt::format(", {:.1f} ms wall", r.wall_ms);
  out += r.all_finished ? ", all flows finished\n" : ", stopped at duration_us\n";
  return out;
}

}  // namespace isoroce::tools
