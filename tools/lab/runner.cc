#include "tools/lab/runner.h"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <toml++/toml.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "dataplane/sim/simulator.h"
#include "tools/sim/report_format.h"
#include "tools/sim/scenario_toml.h"

namespace isoroce::lab {

namespace {

// Parse the TOML text of one value ("8", "\"rnic\"") into a node.
std::optional<toml::table> value_node(const std::string& text) {
  try {
    return toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

// Sets `rest` (dotted) inside table t to the value, creating sub-tables.
void set_in(toml::table& t, std::string_view rest, const toml::node& value) {
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos) {
    t.insert_or_assign(rest, value);
    return;
  }
  const std::string_view head = rest.substr(0, dot);
  if (!t.get(head) || !t.get(head)->is_table()) t.insert_or_assign(head, toml::table{});
  set_in(*t.get(head)->as_table(), rest.substr(dot + 1), value);
}

// Applies one override; empty, or what is wrong.
std::string apply(toml::table& root, const Override& o) {
  const auto v = value_node(o.value);
  if (!v) return "not a TOML value: " + o.value;
  const toml::node& value = *v->get("v");
  const std::string_view path = o.path;
  for (std::string_view arr : {"host", "flow"}) {
    if (!path.starts_with(std::string(arr) + ".")) continue;
    toml::array* a = root.get(arr) ? root.get(arr)->as_array() : nullptr;
    if (!a) return "the scenario has no [[" + std::string(arr) + "]]";
    std::string_view rest = path.substr(arr.size() + 1);
    if (arr == "host") {
      for (toml::node& h : *a) set_in(*h.as_table(), rest, value);
      return {};
    }
    const std::size_t dot = rest.find('.');
    if (dot == std::string_view::npos) return "flow keys are flow.NAME.KEY (or flow.*.KEY)";
    const std::string_view name = rest.substr(0, dot);
    bool found = false;
    for (toml::node& f : *a) {
      const auto fname = (*f.as_table())["name"].value<std::string>();
      if (name == "*" || fname == name) {
        set_in(*f.as_table(), rest.substr(dot + 1), value);
        found = true;
      }
    }
    return found ? std::string{} : "no flow named \"" + std::string(name) + "\"";
  }
  set_in(root, path, value);
  return {};
}

std::string keep_only(toml::table& root, const std::vector<std::string>& only) {
  toml::array* a = root.get("flow") ? root.get("flow")->as_array() : nullptr;
  if (!a) return "the scenario has no [[flow]]";
  for (const std::string& name : only) {
    bool found = false;
    for (toml::node& f : *a) found |= (*f.as_table())["name"].value<std::string>() == name;
    if (!found) return "only: no flow named \"" + name + "\"";
  }
  toml::array kept;
  for (toml::node& f : *a) {
    const auto fname = (*f.as_table())["name"].value<std::string>();
    for (const std::string& name : only)
      if (fname == name) kept.push_back(f);
  }
  root.insert_or_assign("flow", std::move(kept));
  return {};
}

std::optional<double> field(const nlohmann::ordered_json& flows, const std::string& flow, const std::string& path) {
  for (const auto& f : flows) {
    if (f.value("name", "") != flow) continue;
    const nlohmann::ordered_json* n = &f;
    std::string_view rest = path;
    while (!rest.empty()) {
      const std::size_t dot = rest.find('.');
      const std::string k(rest.substr(0, dot));
      if (!n->is_object() || !n->contains(k)) return std::nullopt;
      n = &(*n)[k];
      rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
    }
    if (!n->is_number()) return std::nullopt;
    return n->get<double>();
  }
  return std::nullopt;
}

// Metric::aggregate over the flows whose name starts with `prefix`; nullopt if none
// has the field.
std::optional<double> aggregate(const nlohmann::ordered_json& flows, const std::string& prefix,
                                const std::string& path, const std::string& how) {
  std::vector<double> xs;
  for (const auto& f : flows) {
    const std::string name = f.value("name", "");
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (std::optional<double> v = field(flows, name, path)) xs.push_back(*v);
  }
  if (xs.empty()) return std::nullopt;
  double sum = 0, sq = 0, lo = xs[0], hi = xs[0];
  for (double x : xs) {
    sum += x;
    sq += x * x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  if (how == "sum") return sum;
  if (how == "mean") return sum / static_cast<double>(xs.size());
  if (how == "min") return lo;
  if (how == "max") return hi;
  return sq == 0 ? std::nullopt : std::optional<double>(sum * sum / (static_cast<double>(xs.size()) * sq));  // jain
}

RunResult run_one(const Sweep& sweep, const Run& run) {
  RunResult r;
  const auto t0 = std::chrono::steady_clock::now();
  sim::ScenarioError err;
  auto simulator = sim::Simulator::create(run.built, &err);
  if (!simulator) {
    r.integrity_ok = false;
    r.failure = err.to_string();
    return r;
  }
  const sim::SimReport report = simulator->run();
  tools::ReportOptions opts;
  opts.wall_time = false;
  const nlohmann::ordered_json j = tools::report_to_json(report, opts);
  for (const auto& f : j["flows"]) {
    if (!f.value("integrity_ok", true) || f.value("errors", 0) != 0) {
      r.integrity_ok = false;
      r.failure = "flow " + f.value("name", std::string("?")) + " failed its integrity check or ended in errors";
    }
  }
  for (const Metric& m : sweep.metrics) {
    const char* list = m.host.empty() ? "flows" : "hosts";
    if (!m.aggregate.empty()) {
      r.metrics.push_back(aggregate(j["flows"], m.flow.substr(0, m.flow.size() - 1), m.field, m.aggregate));
      continue;
    }
    std::optional<double> v = field(j[list], m.host.empty() ? m.flow : m.host, m.field);
    if (v && !m.over.empty()) {
      const std::optional<double> d = field(j[list], m.over, m.field);
      v = d && *d != 0 ? std::optional<double>(*v / *d) : std::nullopt;
    }
    r.metrics.push_back(v);
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

std::string describe(const Sweep& sweep, const Run& run) {
  std::string s = sweep.scenarios[run.scenario].name + " " + sweep.policies[run.policy].name;
  for (std::size_t a = 0; a < sweep.grid.size(); ++a)
    s += " " + sweep.grid[a].path + "=" + sweep.grid[a].values[run.point[a]];
  return s + " seed " + std::to_string(run.seed);
}

std::optional<SweepError> plan_sweep(const Sweep& sweep, Plan* plan) {
  std::map<std::string, toml::table> files;
  for (const ScenarioEntry& sc : sweep.scenarios) {
    if (files.count(sc.path)) continue;
    try {
      files.emplace(sc.path, toml::parse_file(sc.path));
    } catch (const toml::parse_error& e) {
      return SweepError{sc.path, static_cast<int>(e.source().begin.line), "", std::string(e.description())};
    }
  }
  std::size_t points = 1;
  for (const GridAxis& a : sweep.grid) points *= a.values.size();
  for (std::size_t s = 0; s < sweep.scenarios.size(); ++s) {
    for (std::size_t p = 0; p < sweep.policies.size(); ++p) {
      for (std::size_t g = 0; g < points; ++g) {
        Cell cell{s, p, {}};
        for (std::size_t a = 0, rest = g; a < sweep.grid.size(); ++a) {
          cell.point.push_back(rest % sweep.grid[a].values.size());
          rest /= sweep.grid[a].values.size();
        }
        for (unsigned long long seed : sweep.seeds) {
          Run run{plan->cells.size(), s, p, cell.point, seed, {}};
          const ScenarioEntry& sc = sweep.scenarios[s];
          toml::table root = files.at(sc.path);
          std::vector<Override> all = sc.set;
          for (const Override& o : sweep.policies[p].set) all.push_back(o);
          for (std::size_t a = 0; a < sweep.grid.size(); ++a)
            all.push_back({sweep.grid[a].path, sweep.grid[a].values[cell.point[a]]});
          all.push_back({"seed", std::to_string(seed)});
          if (sweep.duration_us) {
            std::ostringstream d;
            d << *sweep.duration_us;
            all.push_back({"duration_us", d.str()});
          }
          // Overrides first, then `only`: a grid axis may name a flow some scenarios leave out.
          std::string why;
          for (const Override& o : all) {
            why = apply(root, o);
            if (!why.empty()) {
              why = o.path + ": " + why;
              break;
            }
          }
          if (why.empty() && !sc.only.empty()) why = keep_only(root, sc.only);
          if (why.empty()) {
            std::ostringstream text;
            text << root;
            tools::ScenarioParse parsed = tools::parse_scenario(text.str(), sc.path);
            if (!parsed.ok()) why = parsed.error->key + ": " + parsed.error->message;
            else run.built = std::move(parsed.scenario);
          }
          if (!why.empty()) return SweepError{sweep.source, 0, "", describe(sweep, run) + ": " + why};
          plan->runs.push_back(std::move(run));
        }
        plan->cells.push_back(std::move(cell));
      }
    }
  }
  return std::nullopt;
}

std::vector<RunResult> run_sweep(const Sweep& sweep, const Plan& plan, const RunOptions& opts) {
  std::vector<RunResult> results(plan.runs.size());
  std::mutex mu;
  std::size_t done = 0;
  const int threads = opts.threads ? static_cast<int>(opts.threads) : tbb::task_arena::automatic;
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, plan.runs.size(), 1), [&](const auto& range) {
      for (std::size_t i = range.begin(); i != range.end(); ++i) {
        results[i] = run_one(sweep, plan.runs[i]);
        std::lock_guard lock(mu);
        ++done;
        if (opts.on_done) opts.on_done(plan.runs[i], results[i], done);
      }
    });
  });
  // The join as ThreadSanitizer sees it: libtbb is not instrumented, so the wait in
  // parallel_for orders nothing for TSan; every worker wrote its results before its
  // last unlock of mu, and this lock orders all of that before the caller's reads
  // (docs/isoroce-lab.md, "ThreadSanitizer"). Costs one uncontended lock.
  { std::lock_guard lock(mu); }
  return results;
}

}  // namespace isoroce::lab
