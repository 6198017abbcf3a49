// Scenario files: TOML (toml++) into sim::Scenario. Every key is checked: an
// unknown key at any level, a value of the wrong type or range, and anything
// sim::validate() finds impossible is an error that names the key (and the line).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dataplane/sim/scenario.h"

namespace isoroce::tools {

struct ScenarioParseError {
  std::string key;  // "flow[1].verb"
  std::string message;
  int line = 0;     // 0 if unknown
  std::string source;
  // "scenario.toml:12: flow[1].verb: unknown value ..."
  std::string to_string() const;
};

struct ScenarioParse {
  sim::Scenario scenario;
  std::optional<ScenarioParseError> error;
  bool ok() const { return !error.has_value(); }
};

// Parses and validates. `source` names the text in messages.
ScenarioParse parse_scenario(std::string_view toml_text, std::string_view source = "scenario");
ScenarioParse load_scenario(const std::string& path);

// The scenario as a TOML file parse_scenario() reads back to the same values
// (every key written, defaults included): for reproducing generated scenarios.
std::string scenario_to_toml(const sim::Scenario& s);

}  // namespace isoroce::tools
