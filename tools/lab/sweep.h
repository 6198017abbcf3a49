// A sweep file (TOML) as data: scenarios x policies x a parameter grid x seeds, the
// metrics read from every run's report, and the comparisons against the papers'
// ratios (docs/isoroce-lab.md has the format). parse_sweep() checks every key and
// every scenario override before anything runs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace isoroce::lab {

// One override of a scenario key: "duration_us", "host.mtu" (every host),
// "host.rnic.preset", "flow.bw.depth" (the flow named bw), "flow.*.depth".
// The value is TOML text ("8", "\"rnic\"", "2.5", "true").
struct Override {
  std::string path;
  std::string value;
};

struct ScenarioEntry {
  std::string name;
  std::string file;                // as written in the sweep file
  std::string path;                // resolved against the sweep file's folder
  std::vector<std::string> only;   // keep only these flows (empty: all)
  std::vector<Override> set;
};

struct PolicyEntry {
  std::string name;
  std::vector<Override> set;  // `policy = "x"` is host.policy = "x"
};

struct GridAxis {
  std::string path;                 // a scenario key, as Override::path
  std::vector<std::string> values;  // TOML text of each value
};

struct Metric {
  std::string name;
  std::string flow;   // the flow whose report field is read
  std::string host;   // or (instead of flow) the host's: "justitia.reclassified"
  std::string field;  // dotted path in its JSON report: "lat_us.p99", "wire_gbps"
  std::string over;   // if set: the value is flow.field / over.field
  // With `flow` ending in '*' ("bw*": every flow whose name starts with "bw"): how the
  // matched flows' fields are combined: "sum", "mean", "min", "max" or "jain" (Jain's
  // fairness index, (sum x)^2 / (n sum x^2)). Required then, refused otherwise.
  std::string aggregate;
};

struct Compare {
  std::string name;
  std::string metric;
  std::string scenario;         // the run
  std::string baseline;         // the scenario divided by (same grid point); empty: the metric itself
  std::string baseline_policy;  // empty: the same policy as the run
  std::vector<std::string> policies;  // empty: every policy
  double paper = 0;             // the paper's ratio; 0: none
};

struct Sweep {
  std::string name;
  std::string source;  // the sweep file
  std::vector<unsigned long long> seeds{1};
  std::optional<double> duration_us;
  std::vector<ScenarioEntry> scenarios;
  std::vector<PolicyEntry> policies;
  std::vector<GridAxis> grid;
  std::vector<Metric> metrics;
  std::vector<Compare> compares;
};

struct SweepError {
  std::string source;
  int line = 0;  // 0: unknown
  std::string key;
  std::string message;
  std::string to_string() const;  // "file.toml:12: metric[0].flow: missing (required)"
};

struct SweepParse {
  Sweep sweep;
  std::optional<SweepError> error;
  bool ok() const { return !error; }
};

// `dir` resolves scenario files (the sweep file's folder).
SweepParse parse_sweep(std::string_view text, std::string_view source, const std::string& dir);
SweepParse load_sweep(const std::string& path);

}  // namespace isoroce::lab
