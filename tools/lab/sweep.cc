#include "tools/lab/sweep.h"

#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace isoroce::lab {

namespace {

// Parse errors travel as this exception inside this file only.
struct Failure {
  SweepError error;
};

[[noreturn]] void fail(const std::string& key, const std::string& msg, const toml::node* n = nullptr) {
  SweepError e;
  e.key = key;
  e.message = msg;
  if (n) e.line = static_cast<int>(n->source().begin.line);
  throw Failure{e};
}

// The TOML text of a scalar value (what an override writes into a scenario).
std::string scalar_text(const toml::node& n, const std::string& key) {
  if (n.is_table() || n.is_array()) fail(key, "must be a number, string or boolean", &n);
  std::ostringstream o;
  n.visit([&](const auto& v) { o << v; });
  return o.str();
}

std::vector<std::string> strings(const toml::table& t, const std::string& table_key, std::string_view k) {
  std::vector<std::string> out;
  const toml::node* n = t.get(k);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail(table_key + "." + std::string(k), "must be an array of strings", n);
  for (const toml::node& x : *a) {
    if (!x.is_string()) fail(table_key + "." + std::string(k), "must be an array of strings", &x);
    out.emplace_back(x.as_string()->get());
  }
  return out;
}

void known_keys(const toml::table& t, const std::string& key, std::initializer_list<std::string_view> known) {
  for (auto&& [k, v] : t) {
    bool ok = false;
    for (auto name : known) ok |= k.str() == name;
    if (!ok) {
      std::string list;
      for (auto name : known) list += (list.empty() ? "" : ", ") + std::string(name);
      fail(key + "." + std::string(k.str()), "unknown key (known here: " + list + ")", &v);
    }
  }
}

std::string need_string(const toml::table& t, const std::string& key, std::string_view k) {
  const toml::node* n = t.get(k);
  if (!n) fail(key + "." + std::string(k), "missing (required)", &t);
  if (!n->is_string() || n->as_string()->get().empty())
    fail(key + "." + std::string(k), "must be a non-empty string", n);
  return std::string(n->as_string()->get());
}

std::vector<Override> overrides(const toml::table& t, const std::string& key) {
  std::vector<Override> out;
  const toml::node* n = t.get("set");
  if (!n) return out;
  const toml::table* s = n->as_table();
  if (!s) fail(key + ".set", "must be a table of scenario keys", n);
  for (auto&& [k, v] : *s) out.push_back({std::string(k.str()), scalar_text(v, key + ".set." + std::string(k.str()))});
  return out;
}

const toml::array* array_of_tables(const toml::table& root, std::string_view k) {
  const toml::node* n = root.get(k);
  if (!n) return nullptr;
  const toml::array* a = n->as_array();
  if (!a || !a->is_array_of_tables()) fail(std::string(k), "must be an array of tables ([[" + std::string(k) + "]])", n);
  return a;
}

template <class Entry>
void unique_names(const std::vector<Entry>& v, const std::string& what, const toml::array* a) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!seen.insert(v[i].name).second)
      fail(what + "[" + std::to_string(i) + "].name", "\"" + v[i].name + "\" is used twice", &(*a)[i]);
}

void parse_head(const toml::table& root, Sweep& s) {
  const toml::node* n = root.get("sweep");
  if (!n) return;
  const toml::table* t = n->as_table();
  if (!t) fail("sweep", "must be a table", n);
  known_keys(*t, "sweep", {"name", "seeds", "duration_us"});
  if (t->contains("name")) s.name = need_string(*t, "sweep", "name");
  if (const toml::node* seeds = t->get("seeds")) {
    s.seeds.clear();
    if (seeds->is_integer()) {  // seeds = N: 1 .. N
      const auto count = seeds->as_integer()->get();
      if (count < 1 || count > 10'000) fail("sweep.seeds", "must be 1 .. 10000 (or an array of seeds)", seeds);
      for (long long i = 1; i <= count; ++i) s.seeds.push_back(static_cast<unsigned long long>(i));
    } else if (const toml::array* a = seeds->as_array(); a && !a->empty()) {
      for (const toml::node& x : *a) {
        if (!x.is_integer() || x.as_integer()->get() < 0) fail("sweep.seeds", "must be non-negative integers", &x);
        s.seeds.push_back(static_cast<unsigned long long>(x.as_integer()->get()));
      }
    } else {
      fail("sweep.seeds", "must be a count or a non-empty array of integers", seeds);
    }
  }
  if (const toml::node* d = t->get("duration_us")) {
    const auto v = d->value<double>();
    if (!v || *v <= 0) fail("sweep.duration_us", "must be a positive number", d);
    s.duration_us = *v;
  }
}

void parse_entries(const toml::table& root, const std::string& dir, Sweep& s) {
  const toml::array* sc = array_of_tables(root, "scenario");
  if (!sc || sc->empty()) fail("scenario", "at least one [[scenario]] is needed", &root);
  for (std::size_t i = 0; i < sc->size(); ++i) {
    const toml::table& t = *(*sc)[i].as_table();
    const std::string key = "scenario[" + std::to_string(i) + "]";
    known_keys(t, key, {"name", "file", "only", "set"});
    ScenarioEntry e{need_string(t, key, "name"), need_string(t, key, "file"), "", strings(t, key, "only"),
                    overrides(t, key)};
    std::filesystem::path p(e.file);
    e.path = p.is_absolute() ? e.file : (std::filesystem::path(dir) / p).lexically_normal().string();
    if (!std::filesystem::exists(e.path)) fail(key + ".file", "no such file: " + e.path, t.get("file"));
    s.scenarios.push_back(std::move(e));
  }
  unique_names(s.scenarios, "scenario", sc);
  if (const toml::array* po = array_of_tables(root, "policy")) {
    for (std::size_t i = 0; i < po->size(); ++i) {
      const toml::table& t = *(*po)[i].as_table();
      const std::string key = "policy[" + std::to_string(i) + "]";
      known_keys(t, key, {"name", "policy", "set"});
      PolicyEntry e{need_string(t, key, "name"), {}};
      if (t.contains("policy")) e.set.push_back({"host.policy", "\"" + need_string(t, key, "policy") + "\""});
      for (Override& o : overrides(t, key)) e.set.push_back(std::move(o));
      s.policies.push_back(std::move(e));
    }
    unique_names(s.policies, "policy", po);
  }
  if (s.policies.empty()) s.policies.push_back({"scenario", {}});  // each scenario's own policy
}

void parse_grid(const toml::table& root, Sweep& s) {
  const toml::node* n = root.get("grid");
  if (!n) return;
  const toml::table* t = n->as_table();
  if (!t) fail("grid", "must be a table of scenario keys to arrays of values", n);
  for (auto&& [k, v] : *t) {
    const std::string key = "grid." + std::string(k.str());
    const toml::array* a = v.as_array();
    if (!a || a->empty()) fail(key, "must be a non-empty array of values", &v);
    GridAxis axis{std::string(k.str()), {}};
    for (const toml::node& x : *a) axis.values.push_back(scalar_text(x, key));
    s.grid.push_back(std::move(axis));
  }
}

void parse_metrics(const toml::table& root, Sweep& s) {
  const toml::array* m = array_of_tables(root, "metric");
  if (!m || m->empty()) fail("metric", "at least one [[metric]] is needed", &root);
  for (std::size_t i = 0; i < m->size(); ++i) {
    const toml::table& t = *(*m)[i].as_table();
    const std::string key = "metric[" + std::to_string(i) + "]";
    known_keys(t, key, {"name", "flow", "host", "field", "over", "aggregate"});
    Metric x;
    x.name = need_string(t, key, "name");
    if (t.contains("host")) {
      if (t.contains("flow")) fail(key + ".host", "a metric reads a flow or a host, not both", t.get("host"));
      x.host = need_string(t, key, "host");
    } else {
      x.flow = need_string(t, key, "flow");
    }
    x.field = need_string(t, key, "field");
    if (t.contains("over")) x.over = need_string(t, key, "over");
    if (t.contains("aggregate")) x.aggregate = need_string(t, key, "aggregate");
    const bool many = !x.flow.empty() && x.flow.back() == '*';
    if (many && x.aggregate.empty())
      fail(key + ".aggregate", "missing: flow \"" + x.flow + "\" matches many flows (sum, mean, min, max, jain)", &t);
    if (!many && !x.aggregate.empty())
      fail(key + ".aggregate", "needs a flow pattern ending in '*' (\"bw*\")", t.get("aggregate"));
    if (many && !x.over.empty()) fail(key + ".over", "not with a flow pattern", t.get("over"));
    if (!x.aggregate.empty() && x.aggregate != "sum" && x.aggregate != "mean" && x.aggregate != "min" &&
        x.aggregate != "max" && x.aggregate != "jain")
      fail(key + ".aggregate", "\"" + x.aggregate + "\": sum, mean, min, max or jain", t.get("aggregate"));
    s.metrics.push_back(std::move(x));
  }
  unique_names(s.metrics, "metric", m);
  const toml::array* c = array_of_tables(root, "compare");
  if (!c) return;
  auto has = [](const auto& v, const std::string& name) {
    for (const auto& e : v)
      if (e.name == name) return true;
    return false;
  };
  for (std::size_t i = 0; i < c->size(); ++i) {
    const toml::table& t = *(*c)[i].as_table();
    const std::string key = "compare[" + std::to_string(i) + "]";
    known_keys(t, key, {"name", "metric", "scenario", "baseline", "baseline_policy", "policies", "paper"});
    Compare x;
    x.name = need_string(t, key, "name");
    x.metric = need_string(t, key, "metric");
    x.scenario = need_string(t, key, "scenario");
    if (t.contains("baseline")) x.baseline = need_string(t, key, "baseline");
    if (t.contains("baseline_policy")) x.baseline_policy = need_string(t, key, "baseline_policy");
    x.policies = strings(t, key, "policies");
    if (const toml::node* p = t.get("paper")) {
      const auto v = p->value<double>();
      if (!v || *v <= 0) fail(key + ".paper", "must be a positive number (the paper's ratio)", p);
      x.paper = *v;
    }
    if (!has(s.metrics, x.metric)) fail(key + ".metric", "no [[metric]] named \"" + x.metric + "\"", t.get("metric"));
    for (const char* k : {"scenario", "baseline"}) {
      const std::string name = k[0] == 's' ? x.scenario : x.baseline;
      if (name.empty()) continue;
      if (!has(s.scenarios, name)) fail(key + "." + k, "no [[scenario]] named \"" + name + "\"", t.get(k));
    }
    if (!x.baseline_policy.empty() && !has(s.policies, x.baseline_policy))
      fail(key + ".baseline_policy", "no [[policy]] named \"" + x.baseline_policy + "\"", t.get("baseline_policy"));
    for (const std::string& p : x.policies)
      if (!has(s.policies, p)) fail(key + ".policies", "no [[policy]] named \"" + p + "\"", t.get("policies"));
    s.compares.push_back(std::move(x));
  }
}

}  // namespace

std::string SweepError::to_string() const {
  std::string s = source;
  if (line > 0) s += ":" + std::to_string(line);
  s += ": ";
  if (!key.empty()) s += key + ": ";
  return s + message;
}

SweepParse parse_sweep(std::string_view text, std::string_view source, const std::string& dir) {
  SweepParse out;
  try {
    toml::table root = toml::parse(text, source);
    known_keys(root, "", {"sweep", "scenario", "policy", "grid", "metric", "compare"});
    Sweep& s = out.sweep;
    s.source = std::string(source);
    parse_head(root, s);
    parse_entries(root, dir, s);
    parse_grid(root, s);
    parse_metrics(root, s);
  } catch (const toml::parse_error& e) {
    out.error = SweepError{std::string(source), static_cast<int>(e.source().begin.line), "",
                           std::string(e.description())};
  } catch (Failure& f) {
    f.error.source = std::string(source);
    if (!f.error.key.empty() && f.error.key[0] == '.') f.error.key.erase(0, 1);
    out.error = std::move(f.error);
  }
  return out;
}

SweepParse load_sweep(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    SweepParse out;
    out.error = SweepError{path, 0, "", "cannot read the file"};
    return out;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_sweep(ss.str(), path, dir.empty() ? "." : dir);
}

}  // namespace isoroce::lab
