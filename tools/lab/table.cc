#include "tools/lab/table.h"

#include <fmt/format.h>

#include <cmath>

namespace isoroce::lab {

namespace {

// Student's t, two-sided 95%, by degrees of freedom 1 .. 30; 1.96 beyond.
constexpr double kT95[] = {12.706, 4.303, 2.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                           2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                           2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};

std::string num(double v) { return fmt::format("{:.6g}", v); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// The cell of the same grid point with another scenario and policy.
std::optional<std::size_t> find_cell(const Plan& plan, std::size_t scenario, std::size_t policy,
                                     const std::vector<std::size_t>& point) {
  for (std::size_t c = 0; c < plan.cells.size(); ++c) {
    const Cell& x = plan.cells[c];
    if (x.scenario == scenario && x.policy == policy && x.point == point) return c;
  }
  return std::nullopt;
}

std::size_t index_of(const auto& v, const std::string& name) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i].name == name) return i;
  return v.size();
}

}  // namespace

Stat stat(const std::vector<double>& xs) {
  Stat s;
  s.n = xs.size();
  if (xs.empty()) return s;
  double sum = 0;
  s.min = s.max = xs[0];
  for (double x : xs) {
    sum += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean = sum / static_cast<double>(s.n);
  if (s.n < 2) return s;
  double ss = 0;
  for (double x : xs) ss += (x - s.mean) * (x - s.mean);
  const double sd = std::sqrt(ss / static_cast<double>(s.n - 1));
  const double t = s.n - 1 <= std::size(kT95) ? kT95[s.n - 2] : 1.96;
  s.ci95 = t * sd / std::sqrt(static_cast<double>(s.n));
  if (s.ci95 < 1e-9 * std::abs(s.mean)) s.ci95 = 0;  // identical samples summed in another order
  return s;
}

Table tabulate(const Sweep& sweep, const Plan& plan, const std::vector<RunResult>& results) {
  Table t;
  // values[cell][metric] over the seeds, in run order.
  std::vector<std::vector<std::vector<double>>> values(plan.cells.size(),
                                                       std::vector<std::vector<double>>(sweep.metrics.size()));
  for (std::size_t r = 0; r < plan.runs.size(); ++r)
    for (std::size_t m = 0; m < sweep.metrics.size(); ++m)
      if (results[r].metrics.size() > m && results[r].metrics[m])
        values[plan.runs[r].cell][m].push_back(*results[r].metrics[m]);
  std::vector<std::vector<Stat>> stats(plan.cells.size());
  for (std::size_t c = 0; c < plan.cells.size(); ++c) {
    for (std::size_t m = 0; m < sweep.metrics.size(); ++m) {
      stats[c].push_back(stat(values[c][m]));
      if (values[c][m].empty()) continue;
      t.rows.push_back({"metric", c, sweep.metrics[m].name, stats[c][m], 0, 0, true});
    }
  }
  for (const Compare& cmp : sweep.compares) {
    const std::size_t m = index_of(sweep.metrics, cmp.metric);
    const std::size_t s = index_of(sweep.scenarios, cmp.scenario);
    const std::size_t b = index_of(sweep.scenarios, cmp.baseline);
    for (std::size_t c = 0; c < plan.cells.size(); ++c) {
      const Cell& cell = plan.cells[c];
      if (cell.scenario != s) continue;
      const std::string& pname = sweep.policies[cell.policy].name;
      bool wanted = cmp.policies.empty();
      for (const std::string& p : cmp.policies) wanted |= p == pname;
      if (!wanted) continue;
      const std::size_t bp = cmp.baseline_policy.empty() ? cell.policy : index_of(sweep.policies, cmp.baseline_policy);
      Row row{"compare", c, cmp.name, {}, cmp.paper, 0, false};
      if (cmp.baseline.empty() && stats[c][m].n) {
        row.has_value = true;
        row.value = stats[c][m];
        if (cmp.paper > 0) row.error_pct = (row.value.mean / cmp.paper - 1) * 100;
        t.rows.push_back(row);
        continue;
      }
      const auto base = cmp.baseline.empty() ? std::nullopt : find_cell(plan, b, bp, cell.point);
      if (base && stats[c][m].n && stats[*base][m].n && stats[*base][m].mean != 0) {
        row.has_value = true;
        row.value.n = std::min(stats[c][m].n, stats[*base][m].n);
        row.value.mean = stats[c][m].mean / stats[*base][m].mean;
        row.value.min = row.value.max = row.value.mean;
        // Relative errors of the two means add (first order).
        row.value.ci95 = row.value.mean * (stats[c][m].ci95 / std::abs(stats[c][m].mean) +
                                           stats[*base][m].ci95 / std::abs(stats[*base][m].mean));
        if (cmp.paper > 0) row.error_pct = (row.value.mean / cmp.paper - 1) * 100;
      }
      t.rows.push_back(row);
    }
  }
  return t;
}

std::string to_csv(const Sweep& sweep, const Plan& plan, const Table& t) {
  std::string out = "kind,scenario,policy";
  for (const GridAxis& a : sweep.grid) out += "," + csv_field(a.path);
  out += ",name,n,mean,ci95,min,max,paper,error_pct\n";
  for (const Row& r : t.rows) {
    const Cell& c = plan.cells[r.cell];
    out += r.kind + "," + csv_field(sweep.scenarios[c.scenario].name) + "," + csv_field(sweep.policies[c.policy].name);
    for (std::size_t a = 0; a < sweep.grid.size(); ++a) out += "," + csv_field(sweep.grid[a].values[c.point[a]]);
    out += "," + csv_field(r.name) + ",";
    if (r.has_value)
      out += std::to_string(r.value.n) + "," + num(r.value.mean) + "," + num(r.value.ci95) + "," + num(r.value.min) +
             "," + num(r.value.max);
    else
      out += ",,,,";
    out += "," + (r.paper > 0 ? num(r.paper) : "") + "," + (r.paper > 0 && r.has_value ? num(r.error_pct) : "") + "\n";
  }
  return out;
}

nlohmann::ordered_json to_json(const Sweep& sweep, const Plan& plan, const Table& t) {
  nlohmann::ordered_json j;
  j["sweep"] = sweep.name;
  j["seeds"] = sweep.seeds;
  j["runs"] = plan.runs.size();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const Row& r : t.rows) {
    const Cell& c = plan.cells[r.cell];
    nlohmann::ordered_json x;
    x["kind"] = r.kind;
    x["scenario"] = sweep.scenarios[c.scenario].name;
    x["policy"] = sweep.policies[c.policy].name;
    nlohmann::ordered_json params = nlohmann::ordered_json::object();
    for (std::size_t a = 0; a < sweep.grid.size(); ++a) params[sweep.grid[a].path] = sweep.grid[a].values[c.point[a]];
    x["params"] = params;
    x["name"] = r.name;
    if (r.has_value) {
      x["n"] = r.value.n;
      x["mean"] = r.value.mean;
      x["ci95"] = r.value.ci95;
      x["min"] = r.value.min;
      x["max"] = r.value.max;
    } else {
      x["mean"] = nullptr;
    }
    if (r.paper > 0) {
      x["paper"] = r.paper;
      if (r.has_value) x["error_pct"] = r.error_pct;
    }
    rows.push_back(std::move(x));
  }
  j["rows"] = std::move(rows);
  return j;
}

}  // namespace isoroce::lab
