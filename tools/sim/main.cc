// isoroce-sim: run a scenario of hosts, a switch and flows in virtual time.
//
//   isoroce-sim SCENARIO.toml [--json] [--seed N] [--no-wall] [--check]
//               [--pcap FILE] [--pcap-rx FILE] [--dump] [--policy P] [--only FLOW,...]
//
// Exit status: 0 the run completed with every flow's integrity intact; 1 bad
// scenario or arguments; 3 some flow's integrity check failed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/sim/simulator.h"
#include "tools/sim/pcap_writer.h"
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
  std::vector<std::string> only;
  app.add_option("scenario", path, "scenario file (TOML)")->required();
  app.add_flag("--json", json, "print the report as JSON");
  app.add_option("--seed", seed, "override the scenario's seed");
  app.add_flag("--no-wall", no_wall, "leave the wall-clock time out (byte-identical output per seed)");
  app.add_flag("--check", check, "validate the scenario and exit");
  app.add_flag("--dump", dump, "print the scenario with every default filled in, and exit");
  app.add_option("--policy", policy_override, "set every host's policy (fifo, tassel, justitia, rnic)");
  app.add_option("--only", only, "keep only these flows (by name; repeat or comma-separate)")->delimiter(',');
  app.add_option("--pcap", pcap_tx, "write every frame the hosts send to FILE (pcap, virtual ns)");
  app.add_option("--pcap-rx", pcap_rx, "write every frame the hosts receive (after faults) to FILE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
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
    sched::Policy p;
    if (!sched::parse_policy(policy_override, &p)) {
      fmt::print(stderr, "isoroce-sim: --policy: unknown policy \"{}\" (fifo, tassel, justitia, rnic)\n", policy_override);
      return 1;
    }
    for (auto& h : parsed.scenario.hosts) h.policy = p;
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
  tools::PcapWriter tx_cap, rx_cap;
  for (auto [file, cap] : {std::pair{&pcap_tx, &tx_cap}, std::pair{&pcap_rx, &rx_cap}}) {
    std::string why;
    if (!file->empty() && !cap->open(*file, why)) {
      fmt::print(stderr, "isoroce-sim: cannot write {}: {}\n", *file, why);
      return 1;
    }
  }
  if (!pcap_tx.empty() || !pcap_rx.empty()) {
    simulator->set_tap([&](const sim::TapFrame& f) {
      (f.tx ? tx_cap : rx_cap).write(f.time / 1000, f.bytes);
    });
  }
  const sim::SimReport report = simulator->run();
  tools::ReportOptions opts;
  opts.wall_time = !no_wall;
  if (json) fmt::print("{}\n", tools::report_to_json(report, opts).dump(2));
  else fmt::print("{}", tools::report_to_table(report, opts));
  for (const auto& f : report.flows)
    if (!f.integrity_ok) return 3;
  return 0;
}
