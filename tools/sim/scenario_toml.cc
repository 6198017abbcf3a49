#include "tools/sim/scenario_toml.h"

#include <toml++/toml.h>

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "sched/policy_plugin.h"
#include "sched/policy_registry.h"

namespace isoroce::tools {

namespace {

using sim::Picos;

// Thrown inside this file only, caught by parse_scenario().
struct Fail {
  ScenarioParseError e;
};

[[noreturn]] void fail(const std::string& key, const std::string& msg, const toml::node* n = nullptr) {
  ScenarioParseError e;
  e.key = key;
  e.message = msg;
  if (n) e.line = static_cast<int>(n->source().begin.line);
  throw Fail{e};
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

// A table whose keys are all known; fields are read by name.
class Table {
 public:
  Table(const toml::table& t, std::string path, std::initializer_list<std::string_view> known)
      : t_(t), path_(std::move(path)) {
    for (auto&& [k, v] : t_) {
      bool ok = false;
      for (auto name : known) ok |= (k.str() == name);
      if (!ok) {
        std::string list;
        for (auto name : known) list += (list.empty() ? "" : ", ") + std::string(name);
        fail(key(k.str()), "unknown key (known here: " + list + ")", &v);
      }
    }
  }

  std::string key(std::string_view k) const { return path_.empty() ? std::string(k) : path_ + "." + std::string(k); }
  const toml::node* get(std::string_view k) const { return t_.get(k); }
  bool has(std::string_view k) const { return t_.contains(k); }
  const toml::table& raw() const { return t_; }

  std::string string(std::string_view k, std::optional<std::string> def = std::nullopt) const {
    const toml::node* n = get(k);
    if (!n) {
      if (def) return *def;
      fail(key(k), "missing (required)", &t_);
    }
    if (!n->is_string()) fail(key(k), "must be a string, not " + type_name(*n), n);
    return std::string(n->as_string()->get());
  }

  // A number (integer or float) in [lo, hi].
  double number(std::string_view k, double def, double lo, double hi) const {
    const toml::node* n = get(k);
    if (!n) return def;
    double v;
    if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else if (n->is_floating_point()) v = n->as_floating_point()->get();
    else fail(key(k), "must be a number, not " + type_name(*n), n);
    if (!std::isfinite(v) || v < lo || v > hi)
      fail(key(k), "must be in [" + fmt(lo) + ", " + fmt(hi) + "] (got " + fmt(v) + ")", n);
    return v;
  }

  int64_t integer(std::string_view k, int64_t def, int64_t lo, int64_t hi) const {
    const toml::node* n = get(k);
    if (!n) return def;
    if (!n->is_integer()) fail(key(k), "must be an integer, not " + type_name(*n), n);
    const int64_t v = n->as_integer()->get();
    if (v < lo || v > hi)
      fail(key(k), "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                       std::to_string(v) + ")", n);
    return v;
  }

  bool boolean(std::string_view k, bool def) const {
    const toml::node* n = get(k);
    if (!n) return def;
    if (!n->is_boolean()) fail(key(k), "must be true or false, not " + type_name(*n), n);
    return n->as_boolean()->get();
  }

  const toml::table* table(std::string_view k) const {
    const toml::node* n = get(k);
    if (!n) return nullptr;
    if (!n->is_table()) fail(key(k), "must be a table, not " + type_name(*n), n);
    return n->as_table();
  }

  static std::string fmt(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }

 private:
  const toml::table& t_;
  std::string path_;
};

Picos to_picos(double v, double scale) { return static_cast<Picos>(std::llround(v * scale)); }

template <typename E>
E enum_value(const Table& t, std::string_view k, std::string_view def, bool (*parse)(std::string_view, E*),
             std::string_view choices) {
  const std::string s = t.string(k, std::string(def));
  E e{};
  if (!parse(s, &e)) fail(t.key(k), "unknown value \"" + s + "\" (one of " + std::string(choices) + ")", t.get(k));
  return e;
}

void parse_switch(const Table& top, sim::Scenario& s) {
  const toml::table* raw = top.table("switch");
  if (!raw) return;
  Table t(*raw, "switch", {"buffer_kb", "ecn", "pfc"});
  s.buffer_bytes = static_cast<uint64_t>(std::llround(t.number("buffer_kb", 4096, 1.0 / 1024, 1 << 20) * 1024));
  if (const toml::table* e = t.table("ecn")) {
    Table ecn(*e, "switch.ecn", {"kmin_kb", "kmax_kb", "pmax", "at"});
    for (auto k : {"kmin_kb", "kmax_kb", "pmax"})
      if (!ecn.has(k)) fail(ecn.key(k), "missing (ecn needs kmin_kb, kmax_kb and pmax)", t.get("ecn"));
    s.ecn.enabled = true;
    s.ecn.kmin_bytes = static_cast<uint64_t>(std::llround(ecn.number("kmin_kb", 0, 0, 1 << 20) * 1024));
    s.ecn.kmax_bytes = static_cast<uint64_t>(std::llround(ecn.number("kmax_kb", 0, 0, 1 << 20) * 1024));
    s.ecn.pmax = ecn.number("pmax", 0, 0, 1);
    const std::string at = ecn.string("at", std::string("enqueue"));
    if (at != "enqueue" && at != "dequeue")
      fail(ecn.key("at"), "unknown value \"" + at + "\" (one of enqueue, dequeue)", ecn.get("at"));
    s.ecn.on_dequeue = at == "dequeue";
    if (s.ecn.kmin_bytes > s.ecn.kmax_bytes) fail(ecn.key("kmin_kb"), "is above kmax_kb", ecn.get("kmin_kb"));
  }
  if (const toml::table* p = t.table("pfc")) {
    Table pfc(*p, "switch.pfc", {"xoff_kb", "xon_kb"});
    for (auto k : {"xoff_kb", "xon_kb"})
      if (!pfc.has(k)) fail(pfc.key(k), "missing (pfc needs xoff_kb and xon_kb)", t.get("pfc"));
    s.pfc.enabled = true;
    s.pfc.xoff_bytes = static_cast<uint64_t>(std::llround(pfc.number("xoff_kb", 0, 1.0 / 1024, 1 << 20) * 1024));
    s.pfc.xon_bytes = static_cast<uint64_t>(std::llround(pfc.number("xon_kb", 0, 0, 1 << 20) * 1024));
    if (s.pfc.xon_bytes > s.pfc.xoff_bytes) fail(pfc.key("xon_kb"), "is above xoff_kb", pfc.get("xon_kb"));
  }
}

// [host.dcqcn]: every dcqcn::Params name, typed (booleans for switches, numbers
// otherwise), set through the parser the daemon and isoroce-dcqcn share.
void parse_dcqcn(const Table& host, sim::HostConfig& h) {
  const toml::table* raw = host.table("dcqcn");
  if (!raw) return;
  const std::string path = host.key("dcqcn");
  for (auto&& [k, v] : *raw) {
    const std::string name(k.str());
    const dcqcn::ParamInfo* info = nullptr;
    for (const auto& i : dcqcn::param_table())
      if (i.name == name) info = &i;
    if (!info) {
      std::string list;
      for (const auto& i : dcqcn::param_table()) list += (list.empty() ? "" : ", ") + std::string(i.name);
      fail(path + "." + name, "unknown key (known here: " + list + ")", &v);
    }
    std::string text;
    if (info->type == dcqcn::ParamType::kBool) {
      if (!v.is_boolean()) fail(path + "." + name, "must be true or false, not " + type_name(v), &v);
      text = v.as_boolean()->get() ? "true" : "false";
    } else if (v.is_integer()) {
      text = std::to_string(v.as_integer()->get());
    } else if (v.is_floating_point()) {
      if (info->type == dcqcn::ParamType::kUint) fail(path + "." + name, "must be an integer", &v);
      std::ostringstream o;
      o.precision(17);
      o << v.as_floating_point()->get();
      text = o.str();
    } else {
      fail(path + "." + name, "must be a number, not " + type_name(v), &v);
    }
    if (auto e = dcqcn::set_param(h.dcqcn, name, text); !e.empty()) {
      // The parser names the parameter first ("g: must be in ..."); keep the message part.
      const size_t colon = e.find(": ");
      fail(path + "." + name, colon == std::string::npos ? e : e.substr(colon + 2), &v);
    }
  }
}

void parse_faults(const Table& top, sim::Scenario& s) {
  const toml::table* raw = top.table("faults");
  if (!raw) return;
  Table t(*raw, "faults",
          {"loss", "reorder", "duplicate", "corrupt", "loss_burst", "reorder_burst", "duplicate_burst",
           "corrupt_burst", "reorder_delay_ns"});
  auto rate = [&](const char* name, sim::FaultRate& r) {
    r.p = t.number(name, 0, 0, 1);
    r.burst = static_cast<uint32_t>(t.integer(std::string(name) + "_burst", 1, 1, 1'000'000));
  };
  rate("loss", s.faults.loss);
  rate("reorder", s.faults.reorder);
  rate("duplicate", s.faults.duplicate);
  rate("corrupt", s.faults.corrupt);
  s.faults.reorder_delay = to_picos(t.number("reorder_delay_ns", 5000, 0.001, 1e9), 1e3);
}

std::string exact(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

// [host.justitia]: sched::JustitiaParams by name (sched::set), plus ref_peer.
void parse_justitia(const Table& host, sim::HostConfig& h) {
  const toml::table* raw = host.table("justitia");
  if (!raw) return;
  Table t(*raw, host.key("justitia"),
          {"target99_us", "ref_period_us", "window", "token_bytes", "split_bytes", "token_ops", "max_tokens",
           "max_rate_gbps", "increase_step_gbps", "unattainable_after_s", "latency_idle_us", "ref_peer",
           "signal", "classify", "classify_bytes", "classify_messages"});
  for (auto&& [k, v] : *raw) {
    const std::string name(k.str());
    if (name == "ref_peer") {
      h.ref_peer = t.string("ref_peer");
      continue;
    }
    if (name == "signal" || name == "classify") {  // names, not numbers
      const std::string text = t.string(name);
      if (!sched::set(h.justitia, name, text))
        fail(t.key(name), "'" + text + (name == "signal" ? "' (probe, passive, both)" : "' (declared, auto, verify)"), &v);
      continue;
    }
    const double x = t.number(name, 0, 0, 1e12);
    if (!sched::set(h.justitia, name, exact(x)))
      fail(t.key(name), "invalid value " + exact(x) + " (counts must be whole numbers)", &v);
  }
  if (auto why = sched::validate(h.justitia); !why.empty()) fail(host.key("justitia"), std::string(why), raw);
}

// [host.rnic]: sched::RnicParams; `preset` first, then each parameter over it.
void parse_rnic(const Table& host, sim::HostConfig& h) {
  const toml::table* raw = host.table("rnic");
  if (!raw) return;
  Table t(*raw, host.key("rnic"),
          {"preset", "batch_packets", "pipeline_packets", "pipeline_jitter_packets", "seed", "message_burst_bytes",
           "max_mops"});
  if (t.has("preset")) {
    const std::string name = t.string("preset");
    if (!sched::rnic_preset(name, &h.rnic)) {
      std::string names;
      for (std::string_view n : sched::rnic_preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
      fail(t.key("preset"), "unknown preset \"" + name + "\" (" + names + ")", t.get("preset"));
    }
  }
  for (auto&& [k, v] : *raw) {
    const std::string name(k.str());
    if (name == "preset") continue;
    std::string text;
    if (name == "message_burst_bytes" && v.is_string()) text = t.string(name);
    else text = exact(t.number(name, 0, 0, 1e18));
    if (!sched::set(h.rnic, name, text)) fail(t.key(name), "invalid value " + text, &v);
  }
}

void parse_host(const toml::table& raw, size_t i, sim::Scenario& s) {
  if (raw.contains("socket")) {
    // A daemon's device (isoroce-ctl run): everything else is the daemon's.
    Table t(raw, "host[" + std::to_string(i) + "]", {"name", "socket", "device", "msg_cost_ns"});
    sim::HostConfig h;
    h.name = t.string("name");
    h.socket = t.string("socket");
    h.device = t.string("device", "isoroce0");
    if (h.socket.empty()) fail(t.key("socket"), "must name isoroced's control socket", t.get("socket"));
    h.msg_cost = to_picos(t.number("msg_cost_ns", 0, 0, 1e9), 1e3);
    s.hosts.push_back(std::move(h));
    return;
  }
  Table t(raw, "host[" + std::to_string(i) + "]",
          {"name", "ip", "link_gbps", "policy", "msg_cost_ns", "mtu", "max_mops", "justitia", "rnic", "dcqcn"});
  sim::HostConfig h;
  h.name = t.string("name");
  h.ip_text = t.string("ip");
  if (!sim::parse_ip(h.ip_text, &h.ip))
    fail(t.key("ip"), "\"" + h.ip_text + "\" is not an IPv4 or IPv6 address", t.get("ip"));
  h.link_bps = static_cast<uint64_t>(std::llround(t.number("link_gbps", 100, 0.001, 1600) * 1e9));
  h.policy = t.string("policy", "fifo");  // sim::validate checks it against the registry
  h.msg_cost = to_picos(t.number("msg_cost_ns", 0, 0, 1e9), 1e3);
  h.mtu = static_cast<uint32_t>(t.integer("mtu", 4096, 256, 4096));
  h.max_msgs_per_sec = static_cast<uint64_t>(std::llround(t.number("max_mops", 0, 0, 1e6) * 1e6));
  parse_justitia(t, h);
  parse_rnic(t, h);
  parse_dcqcn(t, h);
  s.hosts.push_back(std::move(h));
}

void parse_flow(const toml::table& raw, size_t i, sim::Scenario& s) {
  Table t(raw, "flow[" + std::to_string(i) + "]",
          {"name", "src", "dst", "transport", "verb", "size", "count", "depth", "qps", "class", "start_us", "mtu",
           "timeout", "retry_cnt", "rnr_retry", "min_rnr_timer", "max_rd_atomic", "rate_gbps", "post_recv",
           "post_recv_delay_us", "use_srq", "recv_depth", "start_psn", "inline", "app", "weight", "tenant", "tenant_weight"});
  sim::FlowConfig f;
  f.name = t.string("name");
  f.src = t.string("src");
  const toml::node* dst = t.get("dst");
  if (!dst) fail(t.key("dst"), "missing (required)", &t.raw());
  if (dst->is_string()) {
    f.dst.emplace_back(dst->as_string()->get());
  } else if (dst->is_array()) {
    for (const auto& e : *dst->as_array()) {
      if (!e.is_string()) fail(t.key("dst"), "must be a host name or a list of host names", &e);
      f.dst.emplace_back(e.as_string()->get());
    }
    if (f.dst.empty()) fail(t.key("dst"), "is an empty list", dst);
  } else {
    fail(t.key("dst"), "must be a host name or a list of host names, not " + type_name(*dst), dst);
  }
  f.transport = enum_value<sim::Transport>(t, "transport", "rc", sim::parse_transport, "rc, ud");
  if (!t.has("verb")) fail(t.key("verb"), "missing (required)", &t.raw());
  f.verb = enum_value<sim::Verb>(t, "verb", "", sim::parse_verb,
                                 "send, send_imm, write, write_imm, read, fetch_add, cmp_swap");
  if (const toml::node* n = t.get("size")) {
    if (n->is_integer()) {
      if (n->as_integer()->get() < 0) fail(t.key("size"), "must not be negative", n);
      f.size = static_cast<uint64_t>(n->as_integer()->get());
    } else if (n->is_string()) {
      const std::string v(n->as_string()->get());
      if (!sim::parse_size(v, &f.size))
        fail(t.key("size"), "\"" + v + "\" is not a size (like \"16B\", \"4KB\", \"1MB\")", n);
    } else {
      fail(t.key("size"), "must be a size string (\"4KB\") or a number of bytes, not " + type_name(*n), n);
    }
  } else if (sim::is_atomic(f.verb)) {
    f.size = 8;
  } else {
    fail(t.key("size"), "missing (required for " + std::string(sim::to_string(f.verb)) + ")", &t.raw());
  }
  if (t.has("count")) f.count = static_cast<uint64_t>(t.integer("count", 0, 0, int64_t{1} << 40));
  f.depth = static_cast<uint32_t>(t.integer("depth", 1, 0, sim::kMaxDepth));
  f.qps = static_cast<uint32_t>(t.integer("qps", 1, 0, sim::kMaxQpsPerFlow));
  f.cls = enum_value<sim::FlowClass>(t, "class", "bandwidth", sim::parse_flow_class,
                                     "latency, throughput, bandwidth, auto");
  f.start = to_picos(t.number("start_us", 0, 0, 1e8), 1e6);
  f.mtu = static_cast<uint32_t>(t.integer("mtu", 0, 256, 4096));
  f.timeout = static_cast<uint8_t>(t.integer("timeout", 8, 0, 31));
  f.retry_cnt = static_cast<uint8_t>(t.integer("retry_cnt", 7, 0, 7));
  f.rnr_retry = static_cast<uint8_t>(t.integer("rnr_retry", 7, 0, 7));
  f.min_rnr_timer = static_cast<uint8_t>(t.integer("min_rnr_timer", 1, 0, 31));
  f.max_rd_atomic = static_cast<uint32_t>(t.integer("max_rd_atomic", 16, 1, 128));
  f.rate_bps = static_cast<uint64_t>(std::llround(t.number("rate_gbps", 0, 0, 1600) * 1e9));
  f.post_recv = t.boolean("post_recv", true);
  f.post_recv_delay = to_picos(t.number("post_recv_delay_us", 0, 0, 1e8), 1e6);
  f.use_srq = t.boolean("use_srq", false);
  f.recv_depth = static_cast<uint32_t>(t.integer("recv_depth", 0, 1, sim::kMaxDepth));
  if (t.has("start_psn")) f.start_psn = static_cast<uint32_t>(t.integer("start_psn", 0, 0, 0xffffff));
  f.inline_data = t.boolean("inline", false);
  f.app = t.string("app", std::string());
  f.weight = static_cast<uint32_t>(t.integer("weight", 1, 1, 1'000'000));
  f.tenant = t.string("tenant", std::string());
  f.tenant_weight = static_cast<uint32_t>(t.integer("tenant_weight", 1, 1, 1'000'000));
  s.flows.push_back(std::move(f));
}

// [[host]] / [[flow]]: an array of tables.
// [[plugin]] path = "x.so": loads a policy plugin (relative to the scenario's folder).
void parse_plugin(const toml::table& raw, size_t i, std::string_view source, sim::Scenario& s) {
  Table t(raw, "plugin[" + std::to_string(i) + "]", {"path"});
  if (!t.has("path")) fail(t.key("path"), "missing (the plugin's shared object)", &raw);
  const std::string path = t.string("path");
  std::string file = path;
  const size_t slash = source.rfind('/');
  if (!path.empty() && path[0] != '/' && slash != std::string_view::npos)
    file = std::string(source.substr(0, slash + 1)) + path;
  const sched::PluginLoad load = sched::load_policy_plugin(file);
  if (!load.error.empty()) fail(t.key("path"), load.error, t.get("path"));
  s.plugins.push_back(path);
}

// [[tenant]]: a tenant's weight, given once for all its flows (as isoroced.toml's
// [[tenant]] gives it for all its QPs). Every flow of the tenant gets it; a flow that
// says another tenant_weight, or a tenant no flow names, is refused.
void parse_tenant(const toml::table& raw, size_t i, sim::Scenario& s) {
  Table t(raw, "tenant[" + std::to_string(i) + "]", {"name", "weight"});
  if (!t.has("name")) fail(t.key("name"), "missing (the tenant of flows' tenant = ...)", &raw);
  const std::string name = t.string("name");
  const auto weight = static_cast<uint32_t>(t.integer("weight", 1, 1, 1'000'000));
  bool named = false;
  for (auto& f : s.flows) {
    if (f.tenant != name) continue;
    named = true;
    if (f.tenant_weight != 1 && f.tenant_weight != weight)
      fail(t.key("weight"), "flow \"" + f.name + "\" says tenant_weight = " + std::to_string(f.tenant_weight),
           t.get("weight"));
    f.tenant_weight = weight;
  }
  if (!named) fail(t.key("name"), "no flow has tenant = \"" + name + "\"", t.get("name"));
}

const toml::array* table_array(const Table& top, std::string_view k) {
  const toml::node* n = top.get(k);
  if (!n) return nullptr;
  if (!n->is_array_of_tables())
    fail(std::string(k), "must be an array of tables ([[" + std::string(k) + "]])", n);
  return n->as_array();
}

}  // namespace

std::string ScenarioParseError::to_string() const {
  std::string out = source;
  if (line > 0) {
    out += ':';
    out += std::to_string(line);
  }
  if (!out.empty()) out += ": ";
  if (!key.empty()) {
    out += key;
    out += ": ";
  }
  out += message;
  return out;
}

ScenarioParse parse_scenario(std::string_view text, std::string_view source) {
  ScenarioParse out;
  try {
    toml::table root;
    try {
      root = toml::parse(text, source);
    } catch (const toml::parse_error& e) {
      ScenarioParseError pe;
      pe.message = "TOML syntax: " + std::string(e.description());
      pe.line = static_cast<int>(e.source().begin.line);
      pe.source = std::string(source);
      out.error = pe;
      return out;
    }
    Table top(root, "", {"seed", "duration_us", "link_delay_ns", "switch", "faults", "plugin", "host", "flow", "tenant"});
    sim::Scenario& s = out.scenario;
    if (const toml::array* plugins = table_array(top, "plugin"))  // before the hosts name their policies
      for (size_t i = 0; i < plugins->size(); ++i) parse_plugin(*plugins->get(i)->as_table(), i, source, s);
    s.seed = static_cast<uint64_t>(top.integer("seed", 1, 0, INT64_MAX));
    s.duration = to_picos(top.number("duration_us", 20000, 0.001, 1e8), 1e6);
    s.link_delay = to_picos(top.number("link_delay_ns", 1000, 0, 1e9), 1e3);
    parse_switch(top, s);
    parse_faults(top, s);
    if (const toml::array* hosts = table_array(top, "host"))
      for (size_t i = 0; i < hosts->size(); ++i) parse_host(*hosts->get(i)->as_table(), i, s);
    if (const toml::array* flows = table_array(top, "flow"))
      for (size_t i = 0; i < flows->size(); ++i) parse_flow(*flows->get(i)->as_table(), i, s);
    if (const toml::array* tenants = table_array(top, "tenant"))  // after the flows it weighs
      for (size_t i = 0; i < tenants->size(); ++i) parse_tenant(*tenants->get(i)->as_table(), i, s);

    if (auto e = sim::validate(s)) {
      ScenarioParseError pe;
      pe.key = e->key;
      pe.message = e->message;
      // Point at the line of the offending table when the key names one.
      const toml::node* n = nullptr;
      auto indexed = [&](std::string_view prefix, std::string_view arr) {
        if (e->key.rfind(prefix, 0) != 0) return;
        const size_t idx = std::stoul(e->key.substr(prefix.size()));
        if (const toml::array* a = root.get_as<toml::array>(arr); a && idx < a->size()) {
          const toml::table* t = a->get(idx)->as_table();
          const std::string field = e->key.substr(e->key.find("].") == std::string::npos ? e->key.size()
                                                                                       : e->key.find("].") + 2);
          n = t ? t->get(field) : nullptr;
          if (!n) n = a->get(idx);
        }
      };
      indexed("flow[", "flow");
      indexed("host[", "host");
      if (!n && !e->key.empty() && e->key.find('[') == std::string::npos) n = root.at_path(e->key).node();
      if (n) pe.line = static_cast<int>(n->source().begin.line);
      pe.source = std::string(source);
      out.error = pe;
    }
  } catch (Fail& f) {
    f.e.source = std::string(source);
    out.error = f.e;
  }
  return out;
}

ScenarioParse load_scenario(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ScenarioParse out;
    out.error = ScenarioParseError{"", "cannot open the scenario file", 0, path};
    return out;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), path);
}

namespace {
std::string num(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  std::string s = o.str();
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}
std::string q(std::string_view v) { return "\"" + std::string(v) + "\""; }
std::string us(Picos p) { return num(static_cast<double>(p) / 1e6); }
}  // namespace

std::string scenario_to_toml(const sim::Scenario& s) {
  std::ostringstream o;
  o << "seed = " << s.seed << "\n";
  o << "duration_us = " << us(s.duration) << "\n";
  o << "link_delay_ns = " << num(static_cast<double>(s.link_delay) / 1e3) << "\n";
  o << "\n[switch]\nbuffer_kb = " << num(static_cast<double>(s.buffer_bytes) / 1024) << "\n";
  if (s.ecn.enabled)
    o << "ecn = { kmin_kb = " << num(static_cast<double>(s.ecn.kmin_bytes) / 1024)
      << ", kmax_kb = " << num(static_cast<double>(s.ecn.kmax_bytes) / 1024) << ", pmax = " << num(s.ecn.pmax)
      << (s.ecn.on_dequeue ? ", at = \"dequeue\"" : "") << " }\n";
  if (s.pfc.enabled)
    o << "pfc = { xoff_kb = " << num(static_cast<double>(s.pfc.xoff_bytes) / 1024)
      << ", xon_kb = " << num(static_cast<double>(s.pfc.xon_bytes) / 1024) << " }\n";
  for (const std::string& p : s.plugins) o << "\n[[plugin]]\npath = " << q(p) << "\n";
  o << "\n[faults]\n";
  const std::pair<const char*, const sim::FaultRate*> faults[] = {
      {"loss", &s.faults.loss}, {"reorder", &s.faults.reorder},
      {"duplicate", &s.faults.duplicate}, {"corrupt", &s.faults.corrupt}};
  for (const auto& [name, f] : faults) o << name << " = " << num(f->p) << "\n" << name << "_burst = " << f->burst << "\n";
  o << "reorder_delay_ns = " << num(static_cast<double>(s.faults.reorder_delay) / 1e3) << "\n";
  for (const auto& h : s.hosts) {
    o << "\n[[host]]\nname = " << q(h.name) << "\nip = " << q(h.ip_text)
      << "\nlink_gbps = " << num(static_cast<double>(h.link_bps) / 1e9) << "\npolicy = " << q(h.policy)
      << "\nmsg_cost_ns = " << num(static_cast<double>(h.msg_cost) / 1e3) << "\nmtu = " << h.mtu << "\n";
    if (h.max_msgs_per_sec) o << "max_mops = " << num(static_cast<double>(h.max_msgs_per_sec) / 1e6) << "\n";
    bool custom = h.dcqcn.enabled;
    for (const auto& i : dcqcn::param_table())
      custom |= dcqcn::get_param(h.dcqcn, i.name) != dcqcn::get_param(dcqcn::Params{}, i.name);
    if (custom) {
      o << "[host.dcqcn]\n";
      for (const auto& i : dcqcn::param_table()) o << i.name << " = " << dcqcn::get_param(h.dcqcn, i.name) << "\n";
    }
    if (const sched::PolicyOps* ops = sched::find_policy(h.policy); ops && ops->has(sched::kCapReferenceLatency)) {
      const sched::JustitiaParams& p = h.justitia;
      o << "\n[host.justitia]\ntarget99_us = " << us(p.target99) << "\nref_period_us = " << us(p.ref_period)
        << "\nwindow = " << p.window << "\ntoken_bytes = " << p.token_bytes << "\nsplit_bytes = " << p.split_bytes
        << "\ntoken_ops = " << p.token_ops << "\nmax_tokens = " << p.max_tokens
        << "\nmax_rate_gbps = " << num(static_cast<double>(p.max_rate_bps) / 1e9)
        << "\nincrease_step_gbps = " << num(static_cast<double>(p.increase_step_bps) / 1e9)
        << "\nunattainable_after_s = " << num(static_cast<double>(p.unattainable_after) / 1e12)
        << "\nlatency_idle_us = " << us(p.latency_idle) << "\nsignal = " << q(sched::to_string(p.signal))
        << "\nclassify = " << q(sched::to_string(p.classify)) << "\nclassify_bytes = " << p.classify_bytes
        << "\nclassify_messages = " << p.classify_messages << "\n";
      if (!h.ref_peer.empty()) o << "ref_peer = " << q(h.ref_peer) << "\n";
    }
    if (h.policy == "rnic") {
      const sched::RnicParams& p = h.rnic;
      o << "\n[host.rnic]\nbatch_packets = " << p.batch_packets << "\npipeline_packets = " << p.pipeline_packets
        << "\npipeline_jitter_packets = " << p.pipeline_jitter_packets << "\nseed = " << p.seed
        << "\nmessage_burst_bytes = "
        << (p.message_burst_bytes == sched::kWholeMessage ? q("whole") : std::to_string(p.message_burst_bytes))
        << "\nmax_mops = " << num(static_cast<double>(p.max_msgs_per_sec) / 1e6) << "\n";
    }
  }
  for (const auto& f : s.flows) {
    o << "\n[[flow]]\nname = " << q(f.name) << "\nsrc = " << q(f.src) << "\ndst = ";
    if (f.dst.size() == 1) {
      o << q(f.dst[0]);
    } else {
      o << "[";
      for (size_t i = 0; i < f.dst.size(); ++i) o << (i ? ", " : "") << q(f.dst[i]);
      o << "]";
    }
    o << "\ntransport = " << q(sim::to_string(f.transport)) << "\nverb = " << q(sim::to_string(f.verb))
      << "\nsize = " << f.size << "\n";
    if (f.count) o << "count = " << *f.count << "\n";
    o << "depth = " << f.depth << "\nqps = " << f.qps << "\nclass = " << q(sim::to_string(f.cls))
      << "\nstart_us = " << us(f.start) << "\n";
    if (f.mtu) o << "mtu = " << f.mtu << "\n";
    if (f.transport == sim::Transport::kRc)
      o << "timeout = " << int{f.timeout} << "\nretry_cnt = " << int{f.retry_cnt} << "\nrnr_retry = "
        << int{f.rnr_retry} << "\nmin_rnr_timer = " << int{f.min_rnr_timer} << "\nmax_rd_atomic = "
        << f.max_rd_atomic << "\n";
    if (f.rate_bps) o << "rate_gbps = " << num(static_cast<double>(f.rate_bps) / 1e9) << "\n";
    o << "post_recv = " << (f.post_recv ? "true" : "false") << "\npost_recv_delay_us = " << us(f.post_recv_delay)
      << "\nuse_srq = " << (f.use_srq ? "true" : "false") << "\n";
    if (f.recv_depth) o << "recv_depth = " << f.recv_depth << "\n";
    if (f.start_psn) o << "start_psn = " << *f.start_psn << "\n";
    if (f.inline_data) o << "inline = true\n";
    if (!f.app.empty()) o << "app = " << q(f.app) << "\n";
    if (f.weight != 1) o << "weight = " << f.weight << "\n";
    if (!f.tenant.empty()) o << "tenant = " << q(f.tenant) << "\n";
    if (f.tenant_weight != 1) o << "tenant_weight = " << f.tenant_weight << "\n";
  }
  return o.str();
}

}  // namespace isoroce::tools
