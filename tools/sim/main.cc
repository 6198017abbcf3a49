// isoroce-sim: run a scenario of hosts, a switch and flows in virtual time.
//
//   isoroce-sim SCENARIO.toml [--json] [--seed N] [--no-wall] [--check]
//               [--pcap FILE] [--pcap-rx FILE] [--pcap-classic] [--dump] [--policy P]
//               [--only FLOW,...] [--trace FILE] [--trace-events LIST]
//               [--timeseries FILE.csv] [--period-us N]
//               [--justitia NAME=VALUE ...]
//               [--policy-plugin SO]...
//   isoroce-sim --policies [--policy-plugin SO]...
//
// Exit status: 0 the run completed with every flow's integrity intact; 1 bad
// scenario or arguments, or an output file that cannot be written; 2 a bad
// --trace-events list; 3 some flow's integrity check failed.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/sim/simulator.h"
#include "sched/policy_plugin.h"
#include "sched/policy_registry.h"
#include "tools/sim/pcap_writer.h"
#include "tools/sim/pcapng_writer.h"
#include "tools/sim/sim_trace.h"
#include "tools/sim/timeseries.h"
#include "tools/sim/report_format.h"
#include "tools/sim/scenario_toml.h"

// Long on purpose: every option with its binding and check, read top to bottom (CLI11).
int main(int argc, char** argv) {
  using namespace isoroce;
  CLI::App app{"isoroce-sim: deterministic RoCEv2 fabric simulator (hosts with the isoroce engine, "
               "one switch, faulty links) in virtual time. Manual: docs/isoroce-sim.md"};
  std::string path;
  bool json = false, no_wall = false, check = false, dump = false;
  std::string pcap_tx, pcap_rx;
  std::optional<uint64_t> seed;
  std::string policy_override;
  std::vector<std::string> only, plugins;
  std::vector<std::string> justitia;
  bool list_policies = false;
  app.add_option("scenario", path, "scenario file (TOML)");
  app.add_option("--policy-plugin", plugins, "load a policy plugin (a shared object, sched/policy_api.h; repeat)");
  app.add_flag("--policies", list_policies, "list the policies (built-in and loaded) and exit");
  app.add_flag("--json", json, "print the report as JSON");
  app.add_option("--seed", seed, "override the scenario's seed");
  app.add_flag("--no-wall", no_wall, "leave the wall-clock time out (byte-identical output per seed)");
  app.add_flag("--check", check, "validate the scenario and exit");
  app.add_flag("--dump", dump, "print the scenario with every default filled in, and exit");
  app.add_option("--policy", policy_override, "set every host's policy (fifo, tassel, justitia, rnic, or a plugin's)");
  app.add_option("--justitia", justitia,
                 "set a [host.justitia] parameter NAME=VALUE on every host, e.g. signal=passive, classify=verify (repeat)");
  app.add_option("--only", only, "keep only these flows (by name; repeat or comma-separate)")->delimiter(',');
  app.add_option("--pcap", pcap_tx,
                 "write every frame the hosts send to FILE (pcapng: an interface per host, virtual ns, "
                 "a comment with the scheduling decision per frame)");
  app.add_option("--pcap-rx", pcap_rx, "write every frame the hosts receive (after faults) to FILE (pcapng)");
  bool pcap_classic = false;
  app.add_flag("--pcap-classic", pcap_classic, "write --pcap/--pcap-rx as classic pcap (no interfaces, no comments)");
  std::string trace_file, trace_events = "all", timeseries_file;
  double period_us = 10;
  app.add_option("--trace", trace_file, "write a Perfetto-loadable trace (Chrome JSON) to FILE (docs/profiling.md)");
  app.add_option("--trace-events", trace_events, "events in --trace: comma-separated names or all (default)");
  app.add_option("--timeseries", timeseries_file, "write rates, throughput, queue and SafeUtil per QP to FILE.csv");
  app.add_option("--period-us", period_us, "sample period of --timeseries and --trace counters (default 10)")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  for (const std::string& so : plugins) {
    const sched::PluginLoad load = sched::load_policy_plugin(so);
    if (!load.error.empty()) {
      fmt::print(stderr, "isoroce-sim: --policy-plugin: {}\n", load.error);
      return 1;
    }
  }
  if (list_policies) {
    for (const sched::PolicyOps* p : sched::policies())
      fmt::print("{:<20} v{:<3} {:<10} {}\n", p->name, p->version, p->origin == "built-in" ? "built-in" : "plugin",
                 p->description);
    return 0;
  }
  if (path.empty()) {
    fmt::print(stderr, "isoroce-sim: a scenario file is required (--help)\n");
    return 1;
  }
  tools::ScenarioParse parsed = tools::load_scenario(path);
  if (!parsed.ok()) {
    fmt::print(stderr, "isoroce-sim: {}\n", parsed.error->to_string());
    return 1;
  }
  if (parsed.scenario.hosts[0].live()) {
    fmt::print(stderr, "isoroce-sim: {}: its hosts name daemons (socket = ...): run it with isoroce-ctl run\n", path);
    return 1;
  }
  if (seed) parsed.scenario.seed = *seed;
  if (!policy_override.empty()) {
    if (sched::find_policy(policy_override) == nullptr) {
      fmt::print(stderr, "isoroce-sim: --policy: unknown policy \"{}\" ({})\n", policy_override, sched::policy_names());
      return 1;
    }
    for (auto& h : parsed.scenario.hosts) h.policy = policy_override;
  }
  for (const std::string& kv : justitia) {
    for (auto& h : parsed.scenario.hosts) {
      if (!sched::set(h.justitia, kv) || !sched::validate(h.justitia).empty()) {
        fmt::print(stderr, "isoroce-sim: --justitia: \"{}\" is not NAME=VALUE of a [host.justitia] parameter in range\n", kv);
        return 1;
      }
    }
  }
  if (!only.empty()) {
    std::vector<sim::FlowConfig> kept;
    for (const auto& name : only) {
      bool found = false;
      for (const auto& f : parsed.scenario.flows)
        if (f.name == name) {
          kept.push_back(f);
          found = true;
        }
      if (!found) {
        fmt::print(stderr, "isoroce-sim: --only: no flow named \"{}\"\n", name);
        return 1;
      }
    }
    parsed.scenario.flows = std::move(kept);
  }
  if (dump) {
    fmt::print("{}", tools::scenario_to_toml(parsed.scenario));
    return 0;
  }
  sim::ScenarioError err;
  auto simulator = sim::Simulator::create(parsed.scenario, &err);
  if (!simulator) {
    fmt::print(stderr, "isoroce-sim: {}: {}\n", path, err.to_string());
    return 1;
  }
  if (check) {
    fmt::print("{}: ok ({} hosts, {} flows)\n", path, parsed.scenario.hosts.size(),
               parsed.scenario.flows.size());
    return 0;
  }
  trace::EventMask trace_mask = 0;
  if (!trace_file.empty()) {
    std::string why;
    if (!trace::parse_events(trace_events, &trace_mask, &why)) {
      fmt::print(stderr, "isoroce-sim: --trace-events: {}\n", why);
      return 2;
    }
  }
  // Output files are created now, so a path that cannot be written fails before the run.
  std::ofstream trace_out, series_out;
  for (auto [file, out] : {std::pair{&trace_file, &trace_out}, std::pair{&timeseries_file, &series_out}}) {
    if (file->empty()) continue;
    out->open(*file, std::ios::binary | std::ios::trunc);
    if (!*out) {
      fmt::print(stderr, "isoroce-sim: cannot write {}: {}\n", *file, std::strerror(errno));
      return 1;
    }
  }
  const bool comments = !pcap_tx.empty() && !pcap_classic;
  tools::SimTrace recorder(parsed.scenario, trace_mask, comments);
  if (trace_mask != 0 || comments)
    simulator->set_trace(&recorder, trace_mask | (comments ? tools::kDecisionEvents : 0));
  if (!trace_file.empty() || !timeseries_file.empty())
    simulator->set_sampler(static_cast<sched::Picos>(period_us * 1e6),
                           [&](const sim::SimSample& s) { recorder.add_sample(s); });
  tools::PcapWriter tx_cap, rx_cap;
  tools::PcapngWriter tx_ng, rx_ng;
  std::vector<std::string> interfaces;
  for (const auto& h : parsed.scenario.hosts) interfaces.push_back("host " + h.name);
  for (auto [file, cap, ng] : {std::tuple{&pcap_tx, &tx_cap, &tx_ng}, std::tuple{&pcap_rx, &rx_cap, &rx_ng}}) {
    std::string why;
    if (!file->empty() && !(pcap_classic ? cap->open(*file, why) : ng->open(*file, interfaces, why))) {
      fmt::print(stderr, "isoroce-sim: cannot write {}: {}\n", *file, why);
      return 1;
    }
  }
  if (!pcap_tx.empty() || !pcap_rx.empty()) {
    simulator->set_tap([&](const sim::TapFrame& f) {
      if (pcap_classic) (f.tx ? tx_cap : rx_cap).write(f.time / 1000, f.bytes);
      else if (f.tx) tx_ng.write(f.host, f.time / 1000, f.bytes, true, recorder.tx_comment(f.host));
      else rx_ng.write(f.host, f.time / 1000, f.bytes, false);
    });
  }
  const sim::SimReport report = simulator->run();
  if (!trace_file.empty()) tools::write_chrome_trace(trace_out, recorder.records(), recorder.chrome_meta());
  if (!timeseries_file.empty()) series_out << tools::timeseries_csv(recorder);
  for (auto [file, out] : {std::pair{&trace_file, &trace_out}, std::pair{&timeseries_file, &series_out}}) {
    if (file->empty()) continue;
    out->close();
    if (!*out) {
      fmt::print(stderr, "isoroce-sim: writing {} failed\n", *file);
      return 1;
    }
  }
  if ((!pcap_tx.empty() && !tx_ng.ok()) || (!pcap_rx.empty() && !rx_ng.ok())) {
    fmt::print(stderr, "isoroce-sim: writing the capture failed\n");
    return 1;
  }
  tools::ReportOptions opts;
  opts.wall_time = !no_wall;
  if (json) fmt::print("{}\n", tools::report_to_json(report, opts).dump(2));
  else fmt::print("{}", tools::report_to_table(report, opts));
  for (const auto& f : report.flows)
    if (!f.integrity_ok) return 3;
  return 0;
}
