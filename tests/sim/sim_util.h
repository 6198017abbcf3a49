// Helpers for simulator tests: scenarios from TOML text, run to a report.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "dataplane/sim/simulator.h"
#include "tools/sim/report_format.h"
#include "tools/sim/scenario_toml.h"

namespace isoroce::sim::testing {

inline Scenario parse_ok(const std::string& toml) {
  auto p = tools::parse_scenario(toml, "test");
  EXPECT_TRUE(p.ok()) << (p.error ? p.error->to_string() : "") << "\n" << toml;
  return p.scenario;
}

inline SimReport run_scenario(const Scenario& s) {
  ScenarioError err;
  auto sim = Simulator::create(s, &err);
  EXPECT_TRUE(sim) << err.to_string();
  if (!sim) return {};
  return sim->run();
}

inline SimReport run_toml(const std::string& toml) { return run_scenario(parse_ok(toml)); }

inline std::string two_hosts(const std::string& head = "") {
  return head + R"(
[[host]]
name = "a"
ip = "10.0.0.1"
[[host]]
name = "b"
ip = "10.0.0.2"
)";
}

inline const FlowReport& flow(const SimReport& r, const std::string& name) {
  for (const auto& f : r.flows)
    if (f.name == name) return f;
  ADD_FAILURE() << "no flow " << name;
  static FlowReport none;
  return none;
}

inline std::string describe(const FlowReport& f) {
  std::string s = f.name + ": messages " + std::to_string(f.messages) + ", errors " + std::to_string(f.errors);
  for (const auto& [k, v] : f.error_statuses) s += " " + k + "x" + std::to_string(v);
  s += ", retransmits " + std::to_string(f.retransmits) + ", naks " + std::to_string(f.naks) + ", rnr " +
       std::to_string(f.rnr_naks) + ", delivered " + std::to_string(f.delivered) +
       ", finished " + (f.finished ? "yes" : "no");
  if (!f.first_failure.empty()) s += ", first failure: " + f.first_failure;
  return s;
}

}  // namespace isoroce::sim::testing
