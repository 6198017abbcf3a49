// The sweep's results as one table: per cell (scenario, policy, grid point) and
// metric, the mean over seeds with its 95% confidence interval (Student's t); per
// comparison, the ratio of two cells' means beside the paper's ratio and the error.
// Written as CSV and JSON; the same results give the same bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/lab/runner.h"
#include "tools/lab/sweep.h"

namespace isoroce::lab {

struct Stat {
  std::size_t n = 0;
  double mean = 0, ci95 = 0, min = 0, max = 0;
};

// Mean and the half-width of its 95% confidence interval (0 for one sample).
Stat stat(const std::vector<double>& xs);

struct Row {
  std::string kind;  // "metric" or "compare"
  std::size_t cell = 0;
  std::string name;
  Stat value;
  double paper = 0;      // compare rows with a paper ratio
  double error_pct = 0;  // (value / paper - 1) x 100
  bool has_value = false;
};

struct Table {
  std::vector<Row> rows;
};

Table tabulate(const Sweep& sweep, const Plan& plan, const std::vector<RunResult>& results);
std::string to_csv(const Sweep& sweep, const Plan& plan, const Table& t);
nlohmann::ordered_json to_json(const Sweep& sweep, const Plan& plan, const Table& t);

}  // namespace isoroce::lab
