#include "ctrl/config.h"

#include "ctrl/log.h"
#include "sched/policy_plugin.h"
#include "sched/policy_registry.h"
#include "transport/wire/packet.h"

#include <arpa/inet.h>
#include <grp.h>
#include <unistd.h>
#include <toml++/toml.h>

#include "ctrl/tenants_toml.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <set>

namespace isoroce::ctrl {
namespace {

bool is_pci_address(const std::string& d) {
  // dddd:bb:dd.f or bb:dd.f
  const std::string name = d.substr(0, d.find(','));
  return std::count(name.begin(), name.end(), ':') >= 1 && name.find('.') != std::string::npos &&
         name.rfind("net_", 0) != 0;
}

// "net_af_packet0,iface=veth0,..." (the vdev name, then its key=value pairs).
bool is_af_packet(const std::string& d) { return d.rfind("net_af_packet", 0) == 0; }

bool has_devarg(const std::string& d, const std::string& key) {
  for (size_t at = d.find(','); at != std::string::npos; at = d.find(',', at + 1))
    if (d.compare(at + 1, key.size() + 1, key + "=") == 0) return true;
  return false;
}

// The value of devarg `key` as a number; 0 if absent or not a number.
uint32_t devarg_number(const std::string& d, const std::string& key) {
  for (size_t at = d.find(','); at != std::string::npos; at = d.find(',', at + 1)) {
    if (d.compare(at + 1, key.size() + 1, key + "=") != 0) continue;
    const std::string v = d.substr(at + key.size() + 2, d.find(',', at + 1) - at - key.size() - 2);
    char* end = nullptr;
    const unsigned long n = std::strtoul(v.c_str(), &end, 10);
    return end != v.c_str() && *end == '\0' && n <= UINT32_MAX ? static_cast<uint32_t>(n) : 0;
  }
  return 0;
}

}  // namespace

sched::RnicParams default_rnic_params() {
  sched::RnicParams p;
  sched::rnic_preset(kDefaultRnicPreset, &p);
  return p;
}

namespace {

std::optional<ConfigError> check_keys(const toml::table& t, const std::string& path,
                                      std::initializer_list<std::string_view> known) {
  for (auto&& [k, v] : t) {
    if (std::find(known.begin(), known.end(), k.str()) != known.end()) continue;
    std::string list;
    for (auto n : known) list += (list.empty() ? "" : ", ") + std::string(n);
    return ConfigError{path + std::string(k.str()),
                       "unknown setting (line " + std::to_string(v.source().begin.line) +
                           "; known: " + list + ")"};
  }
  return std::nullopt;
}

template <typename T>
std::optional<ConfigError> read(const toml::table& t, const std::string& path, std::string_view key,
                                T* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return std::nullopt;
  const std::string name = path + std::string(key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!n->is_string()) return ConfigError{name, "must be a string"};
    *out = *n->value<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!n->is_boolean()) return ConfigError{name, "must be true or false"};
    *out = *n->value<bool>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!n->is_number()) return ConfigError{name, "must be a number"};
    *out = *n->value<double>();
  } else {
    if (!n->is_integer() || *n->value<int64_t>() < 0 || *n->value<int64_t>() > UINT32_MAX)
      return ConfigError{name, "must be a non-negative integer"};
    *out = static_cast<T>(*n->value<int64_t>());
  }
  return std::nullopt;
}

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::optional<ConfigError> read_policy(const toml::table& t, const std::string& path,
                                       std::optional<std::string>* out) {
  std::string s;
  if (!t.contains("policy")) return std::nullopt;
  if (auto e = read(t, path, "policy", &s)) return e;
  if (sched::find_policy(s) == nullptr)
    return ConfigError{path + "policy", "'" + s + "' is not a policy (" + sched::policy_names() + ")"};
  *out = s;
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& justitia_param_names() {
  static const std::vector<std::string> names = {
      "target99_us", "ref_period_us", "window", "token_bytes", "split_bytes", "token_ops",
      "max_tokens", "max_rate_gbps", "increase_step_gbps", "unattainable_after_s", "latency_idle_us",
      "signal", "classify", "classify_bytes", "classify_messages"};
  return names;
}

std::string set_justitia_param(sched::JustitiaParams& p, const std::string& name, const std::string& value) {
  const auto& names = justitia_param_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return "unknown parameter '" + name + "' (known: " + list + ")";
  }
  if (name == "signal" && !sched::set(p, name, value)) return "signal: '" + value + "' is not probe, passive or both";
  if (name == "classify" && !sched::set(p, name, value))
    return "classify: '" + value + "' is not declared, auto or verify";
  if (!sched::set(p, name, value)) return name + ": '" + value + "' is not a number in range for it";
  return {};
}

std::string set_justitia_param(sched::JustitiaParams& p, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos) return "'" + assignment + "' is not NAME=VALUE";
  return set_justitia_param(p, assignment.substr(0, eq), assignment.substr(eq + 1));
}

std::vector<std::pair<std::string, double>> justitia_param_values(const sched::JustitiaParams& p) {
  auto d = [](uint64_t v, double scale) { return static_cast<double>(v) / scale; };
  return {{"target99_us", d(p.target99, 1e6)},
          {"ref_period_us", d(p.ref_period, 1e6)},
          {"window", p.window},
          {"token_bytes", p.token_bytes},
          {"split_bytes", p.split_bytes},
          {"token_ops", p.token_ops},
          {"max_tokens", p.max_tokens},
          {"max_rate_gbps", d(p.max_rate_bps, 1e9)},
          {"increase_step_gbps", d(p.increase_step_bps, 1e9)},
          {"unattainable_after_s", d(p.unattainable_after, 1e12)},
          {"latency_idle_us", d(p.latency_idle, 1e6)},
          {"classify_bytes", p.classify_bytes},
          {"classify_messages", p.classify_messages}};
}

std::vector<std::pair<std::string, std::string>> justitia_param_words(const sched::JustitiaParams& p) {
  return {{"signal", std::string(sched::to_string(p.signal))}, {"classify", std::string(sched::to_string(p.classify))}};
}

namespace {

struct LimitField {
  const char* name;
  uint64_t ClientLimits::*wide;
  uint32_t ClientLimits::*narrow;
  uint64_t max;
};
const LimitField kLimits[] = {
    {"max_pds", nullptr, &ClientLimits::max_pds, UINT32_MAX},
    {"max_cqs", nullptr, &ClientLimits::max_cqs, UINT32_MAX},
    {"max_qps", nullptr, &ClientLimits::max_qps, UINT32_MAX},
    {"max_srqs", nullptr, &ClientLimits::max_srqs, UINT32_MAX},
    {"max_ahs", nullptr, &ClientLimits::max_ahs, UINT32_MAX},
    {"max_mrs", nullptr, &ClientLimits::max_mrs, UINT32_MAX},
    {"max_cqe", nullptr, &ClientLimits::max_cqe, 65535},
    {"max_wr", nullptr, &ClientLimits::max_wr, 65535},
    {"max_mr_bytes", &ClientLimits::max_mr_bytes, nullptr, uint64_t{1} << 50},
    {"max_mappings", nullptr, &ClientLimits::max_mappings, 1u << 20},
    {"max_cm_ids", nullptr, &ClientLimits::max_cm_ids, 1u << 20},
};

}  // namespace

const std::vector<std::string>& limit_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const LimitField& f : kLimits) n.push_back(f.name);
    return n;
  }();
  return names;
}

std::string set_limit(ClientLimits& l, const std::string& name, uint64_t value) {
  for (const LimitField& f : kLimits) {
    if (name != f.name) continue;
    if (value == 0 || value > f.max) return name + ": must be in 1.." + std::to_string(f.max);
    if (f.wide) l.*f.wide = value;
    else l.*f.narrow = static_cast<uint32_t>(value);
    return {};
  }
  std::string list;
  for (const auto& n : limit_names()) list += (list.empty() ? "" : ", ") + n;
  return "unknown limit '" + name + "' (known: " + list + ")";
}

std::string set_limit(ClientLimits& l, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos) return "'" + assignment + "' is not NAME=VALUE";
  const std::string v = assignment.substr(eq + 1);
  if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), ::isdigit))
    return assignment.substr(0, eq) + ": '" + v + "' is not a positive integer";
  return set_limit(l, assignment.substr(0, eq), std::stoull(v));
}

std::vector<std::pair<std::string, uint64_t>> limit_values(const ClientLimits& l) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const LimitField& f : kLimits) out.emplace_back(f.name, f.wide ? l.*f.wide : l.*f.narrow);
  return out;
}

bool parse_ip_prefix(const std::string& text, wire::IpAddr* ip, uint8_t* prefix_len) {
  const size_t slash = text.find('/');
  const std::string addr = text.substr(0, slash);
  in_addr v4{};
  in6_addr v6{};
  unsigned max_len;
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    *ip = wire::ipv4_mapped(ntohl(v4.s_addr));
    max_len = 32;
  } else if (inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    std::copy(std::begin(v6.s6_addr), std::end(v6.s6_addr), ip->begin());
    if (wire::is_ipv4_mapped(*ip)) return false;
    max_len = 128;
  } else {
    return false;
  }
  if (slash == std::string::npos) {
    *prefix_len = max_len == 32 ? 24 : 64;
    return true;
  }
  const std::string len = text.substr(slash + 1);
  if (len.empty() || len.size() > 3 || !std::all_of(len.begin(), len.end(), ::isdigit)) return false;
  const unsigned n = static_cast<unsigned>(std::stoul(len));
  if (n == 0 || n > max_len) return false;
  *prefix_len = static_cast<uint8_t>(n);
  return true;
}

namespace {

// The [limits] table.
std::optional<ConfigError> read_limits(const toml::table& t, ClientLimits* limits) {
  const toml::node* n = t.get("limits");
  if (n == nullptr) return std::nullopt;
  const toml::table* d = n->as_table();
  if (d == nullptr) return ConfigError{"limits", "must be a table of per-client limits (docs/isoroced.md)"};
  for (auto&& [k, v] : *d) {
    const std::string key = "limits." + std::string(k.str());
    if (!v.is_integer() || *v.value<int64_t>() <= 0) return ConfigError{key, "must be a positive integer"};
    if (std::string e = set_limit(*limits, std::string(k.str()), static_cast<uint64_t>(*v.value<int64_t>()));
        !e.empty())
      return ConfigError{key, e};
  }
  return std::nullopt;
}

// An octal mode: a string of octal digits ("0660") or a TOML integer (0o660).
std::optional<ConfigError> read_mode(const toml::table& t, const std::string& key, uint32_t* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return std::nullopt;
  if (auto i = n->value<int64_t>(); i && n->is_integer()) {
    if (*i < 0 || *i > 0777) return ConfigError{key, "must be a mode up to 0777 (write it \"0660\" or 0o660)"};
    *out = static_cast<uint32_t>(*i);
    return std::nullopt;
  }
  if (auto v = n->value<std::string>()) {
    if (auto m = parse_mode(*v)) {
      *out = *m;
      return std::nullopt;
    }
  }
  return ConfigError{key, "must be an octal mode such as \"0660\""};
}

}  // namespace

std::optional<uint32_t> parse_mode(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("01234567") != std::string::npos) return std::nullopt;
  const auto m = static_cast<uint32_t>(std::stoul(text, nullptr, 8));
  return m <= 0777 ? std::optional<uint32_t>(m) : std::nullopt;
}

std::optional<ConfigError> load_policy_plugin(const std::string& path) {
  const sched::PluginLoad load =
      sched::load_policy_plugin(path, [](std::string_view m) { log(LogLevel::kError, "{}", m); });
  if (!load.error.empty()) return ConfigError{"policy_plugins", load.error};
  return std::nullopt;
}

std::optional<ConfigError> load_config_file(const std::string& path, DaemonConfig* c) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return ConfigError{"--config " + path,
                       std::string(e.description()) + " (line " +
                           std::to_string(e.source().begin.line) + ")"};
  }
  if (auto e = check_keys(t, "", {"socket", "policy", "link_gbps", "mtu", "ref_peer", "port_mac", "lcores", "log_level",
                                  "file_prefix", "lanes_per_port", "idle_sleep_us", "idle_spin_us", "idle_spin_adaptive", "worker_slice_us", "loopback", "reference_echo", "eal_args", "port", "dcqcn",
                                  "justitia", "rnic", "limits", "admin_group", "socket_group",
                                  "socket_mode", "policy_plugins", "tenant"}))
    return e;
  c->tenants.clear();
  if (auto e = read_tenants(t, &c->tenants)) return e;
  // Plugins first: the policy names below may be theirs.
  if (const toml::node* n = t.get("policy_plugins")) {
    const toml::array* a = n->as_array();
    if (a == nullptr) return ConfigError{"policy_plugins", "must be an array of paths"};
    for (const auto& v : *a) {
      if (!v.is_string()) return ConfigError{"policy_plugins", "must be an array of paths"};
      if (auto e = load_policy_plugin(*v.value<std::string>())) return e;
      c->policy_plugins.push_back(*v.value<std::string>());
    }
  }
  std::optional<std::string> policy;
  for (auto e : {read(t, "", "socket", &c->socket), read(t, "", "link_gbps", &c->link_gbps),
                 read(t, "", "mtu", &c->mtu), read(t, "", "ref_peer", &c->ref_peer), read(t, "", "lcores", &c->lcores),
                 read(t, "", "port_mac", &c->port_mac),
                 read(t, "", "log_level", &c->log_level), read(t, "", "file_prefix", &c->file_prefix),
                 read(t, "", "idle_sleep_us", &c->idle_sleep_us), read(t, "", "lanes_per_port", &c->lanes_per_port),
                 read(t, "", "idle_spin_us", &c->idle_spin_us), read(t, "", "idle_spin_adaptive", &c->idle_spin_adaptive),
                 read(t, "", "worker_slice_us", &c->worker_slice_us), read(t, "", "loopback", &c->loopback),
                 read(t, "", "reference_echo", &c->reference_echo),
                 read(t, "", "admin_group", &c->admin_group), read(t, "", "socket_group", &c->socket_group),
                 read_mode(t, "socket_mode", &c->socket_mode),
                 read_policy(t, "", &policy)})
    if (e) return e;
  if (policy) c->policy = *policy;
  if (const toml::node* n = t.get("dcqcn")) {
    const toml::table* d = n->as_table();
    if (d == nullptr) return ConfigError{"dcqcn", "must be a table of DCQCN parameters (docs/dcqcn.md)"};
    for (auto&& [k, v] : *d) {
      std::string text;
      if (v.is_boolean()) text = *v.value<bool>() ? "true" : "false";
      else if (v.is_integer()) text = std::to_string(*v.value<int64_t>());
      else if (v.is_floating_point()) text = std::to_string(*v.value<double>());
      else if (v.is_string()) text = *v.value<std::string>();
      else return ConfigError{"dcqcn." + std::string(k.str()), "must be a number or a boolean"};
      if (std::string e = dcqcn::set_param(c->dcqcn, k.str(), text); !e.empty())
        return ConfigError{"dcqcn." + std::string(k.str()), e};
    }
  }
  if (const toml::node* n = t.get("justitia")) {
    const toml::table* d = n->as_table();
    if (d == nullptr) return ConfigError{"justitia", "must be a table of justitia parameters (docs/isoroced.md)"};
    for (auto&& [k, v] : *d) {
      const std::string key = "justitia." + std::string(k.str());
      std::string text;
      if (v.is_integer()) text = std::to_string(*v.value<int64_t>());
      else if (v.is_floating_point()) text = fmt_double(*v.value<double>());
      else if (v.is_string() && (k.str() == "signal" || k.str() == "classify")) text = *v.value<std::string>();
      else return ConfigError{key, "must be a number"};
      if (std::string e = set_justitia_param(c->justitia, std::string(k.str()), text); !e.empty())
        return ConfigError{key, e};
    }
  }
  if (const toml::node* n = t.get("rnic")) {
    const toml::table* d = n->as_table();
    if (d == nullptr) return ConfigError{"rnic", "must be a table of rnic parameters (docs/sched.md#rnic)"};
    if (const toml::node* p = d->get("preset")) {  // first: the other keys override it
      const std::string name = p->value<std::string>().value_or("");
      if (!sched::set(c->rnic, "preset", name))
        return ConfigError{"rnic.preset", "'" + name + "' is not a preset (cx4-roce, cx3-ib, t6-iwarp, fifo)"};
    }
    for (auto&& [k, v] : *d) {
      const std::string key = "rnic." + std::string(k.str());
      if (k.str() == "preset") continue;
      std::string text;
      if (v.is_integer()) text = std::to_string(*v.value<int64_t>());
      else if (v.is_floating_point()) text = fmt_double(*v.value<double>());
      else if (v.is_string()) text = *v.value<std::string>();
      else return ConfigError{key, "must be a number"};
      if (!sched::set(c->rnic, std::string(k.str()), text))
        return ConfigError{key, "unknown parameter or bad value '" + text + "'"};
    }
  }
  if (auto e = read_limits(t, &c->limits)) return e;
  if (const toml::node* n = t.get("eal_args")) {
    const toml::array* a = n->as_array();
    if (a == nullptr) return ConfigError{"eal_args", "must be an array of strings"};
    c->eal_args.clear();
    for (const auto& v : *a) {
      if (!v.is_string()) return ConfigError{"eal_args", "must be an array of strings"};
      c->eal_args.push_back(*v.value<std::string>());
    }
  }
  if (const toml::node* n = t.get("port")) {
    const toml::array* a = n->as_array();
    if (a == nullptr || !a->is_array_of_tables()) return ConfigError{"port", "must be [[port]] tables"};
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& pt = *a->get(i)->as_table();
      const std::string path = "port[" + std::to_string(i) + "].";
      if (auto e = check_keys(pt, path, {"devargs", "ip", "link_gbps", "policy", "mtu", "ref_peer", "lanes", "mac"})) return e;
      PortConfig p;
      for (auto e : {read(pt, path, "devargs", &p.devargs), read(pt, path, "ip", &p.ip_text),
                     read(pt, path, "link_gbps", &p.link_gbps), read(pt, path, "mtu", &p.mtu),
                     read(pt, path, "lanes", &p.lanes), read(pt, path, "mac", &p.mac),
                     read(pt, path, "ref_peer", &p.ref_peer_text),
                     read_policy(pt, path, &p.policy)})
        if (e) return e;
      c->ports.push_back(std::move(p));
    }
  }
  return std::nullopt;
}

std::optional<ConfigError> validate(DaemonConfig* c) {
  if (c->socket.empty()) return ConfigError{"socket", "must not be empty"};
  if (c->socket.size() >= 108) return ConfigError{"socket", "longer than a Unix socket path may be (107)"};
  if (c->loopback) {
    if (!c->ports.empty())
      return ConfigError{"loopback", "cannot be combined with ports (it makes its own two)"};
    for (int i = 0; i < 2; ++i) {
      PortConfig p;
      p.devargs = i == 0 ? "ring:isoroce0<->isoroce1" : "ring:isoroce1<->isoroce0";
      p.ip_text = i == 0 ? "10.0.0.1/24" : "10.0.0.2/24";
      c->ports.push_back(p);
    }
  }
  if (c->ports.empty()) return ConfigError{"port", "no port: give --port and --ip, [[port]] tables, or --loopback"};
  if (c->ports.size() > 16) return ConfigError{"port", "at most 16 ports per daemon (each gets 2^20 QP numbers)"};
  if (!(c->link_gbps > 0 && c->link_gbps <= 1000)) return ConfigError{"link_gbps", "must be in (0, 1000]"};
  const std::set<uint32_t> mtus = {256, 512, 1024, 2048, 4096};
  if (!mtus.count(c->mtu)) return ConfigError{"mtu", "must be 256, 512, 1024, 2048 or 4096"};
  if (c->port_mac != "own" && c->port_mac != "interface")
    return ConfigError{"port_mac", "'" + c->port_mac + "' is neither own (an address of each port's own) nor "
                                   "interface (the kernel interface's)"};
  const std::set<std::string> levels = {"error", "warning", "info", "debug"};
  if (!levels.count(c->log_level)) return ConfigError{"log_level", "must be error, warning, info or debug"};
  if (c->file_prefix.empty() || c->file_prefix == "." || c->file_prefix == ".." ||
      c->file_prefix.find('/') != std::string::npos)
    return ConfigError{"file_prefix", "must be a non-empty name without '/' (and not . or ..)"};
  if (c->idle_sleep_us < 10 || c->idle_sleep_us > 100'000)
    return ConfigError{"idle_sleep_us", "must be in 10..100000"};
  if (c->idle_spin_us > 100'000) return ConfigError{"idle_spin_us", "must be in 0..100000"};
  if (c->lanes_per_port < 1 || c->lanes_per_port > 16) return ConfigError{"lanes_per_port", "must be in 1..16"};
  for (size_t i = 0; i < c->ports.size(); ++i) {
    PortConfig& p = c->ports[i];
    if (p.lanes == 0) p.lanes = c->lanes_per_port;
    if (p.lanes > 16) return ConfigError{"port[" + std::to_string(i) + "].lanes", "must be in 1..16"};
  }
  if (c->worker_slice_us != 0 && (c->worker_slice_us < 100 || c->worker_slice_us > 100'000))
    return ConfigError{"worker_slice_us", "must be 0 (the kernel's default) or in 100..100000 (the kernel's bounds)"};
  if (c->lcores.empty()) return ConfigError{"lcores", "must name at least two lcores (control and one worker)"};
  if (c->socket_mode > 0777 || (c->socket_mode & 0600) != 0600)
    return ConfigError{"socket_mode", "must be an octal mode up to 0777 that lets the daemon's user read and write"};
  c->socket_gid.reset();
  if (!c->socket_group.empty()) {
    const std::string& g = c->socket_group;
    if (std::all_of(g.begin(), g.end(), ::isdigit) && g.size() < 10) {
      c->socket_gid = static_cast<uint32_t>(std::stoul(g));
    } else if (const group* gr = getgrnam(g.c_str())) {
      c->socket_gid = gr->gr_gid;
    } else if (g != kDefaultSocketGroup) {  // the default may be absent: the daemon's own group then
      return ConfigError{"socket_group", "'" + g + "' is no group of this system (a name or a number)"};
    }
  }
  c->admin_gid.reset();
  if (!c->admin_group.empty()) {
    const std::string& g = c->admin_group;
    if (std::all_of(g.begin(), g.end(), ::isdigit) && g.size() < 10) {
      c->admin_gid = static_cast<uint32_t>(std::stoul(g));
    } else if (const group* gr = getgrnam(g.c_str())) {
      c->admin_gid = gr->gr_gid;
    } else {
      return ConfigError{"admin_group", "'" + g + "' is no group of this system (a name or a number)"};
    }
  }
  if (std::string e = dcqcn::validate(c->dcqcn); !e.empty()) return ConfigError{"dcqcn", e};
  if (std::string_view e = sched::validate(c->justitia); !e.empty()) return ConfigError{"justitia", std::string(e)};
  std::set<std::string> devs;
  std::set<wire::IpAddr> ips;
  for (size_t i = 0; i < c->ports.size(); ++i) {
    PortConfig& p = c->ports[i];
    const std::string path = "port[" + std::to_string(i) + "].";
    if (p.devargs.empty()) return ConfigError{path + "devargs", "missing (a vdev such as net_ring0 or a PCI address)"};
    if (!c->loopback && !is_pci_address(p.devargs) && p.devargs.rfind("net_", 0) != 0 &&
        !is_interface_port(p.devargs))
      return ConfigError{path + "devargs", "'" + p.devargs +
                                               "' is neither a net_... vdev, a PCI address nor a network interface name"};
    if (!devs.insert(p.devargs.substr(0, p.devargs.find(','))).second)
      return ConfigError{path + "devargs", "the same device twice"};
    if (p.ip_text.empty()) return ConfigError{path + "ip", "missing (ADDR/PREFIX)"};
    if (!parse_ip_prefix(p.ip_text, &p.ip, &p.prefix_len))
      return ConfigError{path + "ip", "'" + p.ip_text + "' is not an IPv4 or IPv6 address with an optional /prefix"};
    if (!ips.insert(p.ip).second) return ConfigError{path + "ip", "the same address on two ports"};
    if (p.link_gbps == 0) p.link_gbps = c->link_gbps;
    if (!(p.link_gbps > 0 && p.link_gbps <= 1000)) return ConfigError{path + "link_gbps", "must be in (0, 1000]"};
    if (p.mtu == 0) p.mtu = c->mtu;
    if (!mtus.count(p.mtu)) return ConfigError{path + "mtu", "must be 256, 512, 1024, 2048 or 4096"};
    if (p.mac.empty()) p.mac = c->port_mac;
    if (p.mac != "own" && p.mac != "interface")
      return ConfigError{path + "mac", "'" + p.mac + "' is neither own (an address of the port's own) nor interface "
                                      "(the kernel interface's)"};
    if (is_af_packet(p.devargs) && (has_devarg(p.devargs, "framesz") || has_devarg(p.devargs, "blocksz"))) {
      // A slot size the user chose must hold the MTU's frames (the PMD would
      // drop larger frames on send and the kernel truncate them on receive).
      const uint32_t framesz = has_devarg(p.devargs, "framesz") ? devarg_number(p.devargs, "framesz")
                                                                 : kAfPacketDefaultFramesz;
      const uint32_t need = max_frame_bytes(p.mtu) + kAfPacketSlotOverhead;
      if (framesz < need)
        return ConfigError{path + "devargs", "framesz=" + std::to_string(framesz) + " holds frames of MTU " +
                                                 std::to_string(p.mtu) + " only with framesz >= " +
                                                 std::to_string(need) +
                                                 " (and a blocksz, a multiple of the page size, that holds whole frames); "
                                                 "or leave framesz and blocksz out and isoroced sizes them"};
    }
    if (!p.policy) p.policy = c->policy;
    if (p.ref_peer_text.empty()) p.ref_peer_text = c->ref_peer;
    if (!p.ref_peer_text.empty()) {
      wire::IpAddr peer{};
      uint8_t len = 0;
      if (p.ref_peer_text.find('/') != std::string::npos || !parse_ip_prefix(p.ref_peer_text, &peer, &len))
        return ConfigError{path + "ref_peer", "'" + p.ref_peer_text + "' is not an IPv4 or IPv6 address"};
      if (wire::is_ipv4_mapped(peer) != wire::is_ipv4_mapped(p.ip))
        return ConfigError{path + "ref_peer", "'" + p.ref_peer_text + "' is not of the port's address family"};
      if (peer == p.ip) return ConfigError{path + "ref_peer", "is the port's own address"};
      p.ref_peer = peer;
    }
    if (c->dcqcn.enabled && !sched::find_policy(*p.policy)->has(sched::kCapEnforcesRates))
      return ConfigError{path + "policy", "DCQCN (dcqcn.enabled) needs a rate-limiting policy (tassel, justitia), not " +
                                              *p.policy};
  }
  return std::nullopt;
}

bool is_af_xdp(const std::string& d) { return d.rfind("net_af_xdp", 0) == 0; }

std::string devarg_text(const std::string& d, const std::string& key) {
  for (size_t at = d.find(','); at != std::string::npos; at = d.find(',', at + 1)) {
    if (d.compare(at + 1, key.size() + 1, key + "=") != 0) continue;
    const size_t from = at + key.size() + 2;
    const size_t to = d.find(',', from);
    return d.substr(from, to == std::string::npos ? std::string::npos : to - from);
  }
  return "";
}

bool is_interface_port(const std::string& d) {
  if (d.empty() || d.size() >= 16 || d.rfind("net_", 0) == 0 || d == "." || d == "..") return false;
  return std::all_of(d.begin(), d.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.' || ch == '@';
  });
}

std::string interface_devargs(const std::string& iface, uint32_t mtu, bool xdp) {
  if (xdp) return "net_af_xdp_" + iface + ",iface=" + iface;
  return af_packet_devargs("net_af_packet_" + iface + ",iface=" + iface, mtu);
}

uint32_t max_frame_bytes(uint32_t mtu) { return std::max<uint32_t>(mtu + 18 + 40 + 8 + 12 + 28 + 4, 1518); }

namespace {

// The slot size (framesz) and slots per block of a net_af_packet port: the
// devargs' own, or sized for the MTU's frames in 512-byte steps so that a
// block of whole pages holds whole slots without growing large (MTU 4096:
// 4608-byte slots, 8 in a 36 KiB block), or DPDK's 2048 where those fit.
struct AfPacketSlots {
  uint32_t framesz = kAfPacketDefaultFramesz;
  uint32_t blocksz = 0;  // 0: DPDK's default (a page)
  bool derived = false;
};

AfPacketSlots af_packet_slots(const std::string& devargs, uint32_t mtu) {
  AfPacketSlots s;
  if (has_devarg(devargs, "framesz") || has_devarg(devargs, "blocksz")) {
    if (has_devarg(devargs, "framesz")) s.framesz = devarg_number(devargs, "framesz");
    return s;
  }
  const uint32_t need = max_frame_bytes(mtu) + kAfPacketSlotOverhead;
  if (need <= kAfPacketDefaultFramesz) return s;
  s.framesz = (need + 511) / 512 * 512;
  s.blocksz = std::lcm(s.framesz, static_cast<uint32_t>(sysconf(_SC_PAGESIZE)));
  s.derived = true;
  return s;
}

}  // namespace

std::string af_packet_devargs(const std::string& devargs, uint32_t mtu) {
  if (!is_af_packet(devargs)) return devargs;
  std::string d = devargs;
  const AfPacketSlots s = af_packet_slots(devargs, mtu);
  uint32_t per_block = 1;
  if (s.derived) {
    per_block = s.blocksz / s.framesz;
    d += ",framesz=" + std::to_string(s.framesz) + ",blocksz=" + std::to_string(s.blocksz);
  }
  if (!has_devarg(d, "framecnt")) {
    // kAfPacketRingPayload a ring, no more than kAfPacketFrames slots (a
    // smaller ring stays in the caches); the kernel takes whole blocks.
    const uint32_t want = std::clamp(kAfPacketRingPayload / std::max(mtu, 1u), per_block, kAfPacketFrames);
    const uint32_t frames = (want + per_block - 1) / per_block * per_block;
    d += ",framecnt=" + std::to_string(frames);
  }
  return d;
}

uint32_t af_packet_data_room(const std::string& devargs, uint32_t mtu) {
  if (!is_af_packet(devargs)) return 0;
  // The PMD copies a slot's frame area (the slot less the 32-byte tpacket2
  // header) into one mbuf.
  return af_packet_slots(devargs, mtu).framesz;
}

std::vector<std::string> eal_arguments(const DaemonConfig& c) {
  // A plain list ("0,1,2") is EAL's -l; a list that places lcores on CPUs
  // ("0@0,1@1,2@1": three lcores on two CPUs, e.g. two workers on a 2-core
  // machine) is EAL's --lcores.
  const bool mapped = c.lcores.find_first_of("@()") != std::string::npos;
  std::vector<std::string> a = {"isoroced", mapped ? "--lcores" : "-l", c.lcores, "--file-prefix", c.file_prefix};
  bool any_pci = false;
  for (const PortConfig& p : c.ports) {
    if (c.loopback) break;
    if (is_interface_port(p.devargs) || is_af_xdp(p.devargs)) continue;  // plugged after EAL starts (ctrl/devices.cc)
    if (is_pci_address(p.devargs)) {
      a.push_back("-a");
      any_pci = true;
      a.push_back(p.devargs);
    } else {
      a.push_back("--vdev");
      a.push_back(af_packet_devargs(p.devargs, p.mtu));
    }
  }
  const bool user_memory = std::any_of(c.eal_args.begin(), c.eal_args.end(), [](const std::string& s) {
    return s == "-m" || s.rfind("--socket-mem", 0) == 0 || s == "--no-huge" || s.rfind("--huge", 0) == 0;
  });
  if (!user_memory) {
    // Hugepages if the machine has free ones, plain memory otherwise (CI VMs).
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    long free_pages = 0;
    while (meminfo >> key) {
      if (key == "HugePages_Free:") {
        meminfo >> free_pages;
        break;
      }
    }
    if (free_pages == 0) a.insert(a.end(), {"--no-huge", "-m", "1024"});
  }
  if (!any_pci) a.push_back("--no-pci");
  const char* dpdk_level = c.log_level == "debug" ? "info" : c.log_level == "info" ? "notice" : c.log_level.c_str();
  a.push_back(std::string("--log-level=") + dpdk_level);
  a.insert(a.end(), c.eal_args.begin(), c.eal_args.end());
  return a;
}

}  // namespace isoroce::ctrl
