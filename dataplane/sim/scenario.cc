#include "dataplane/sim/scenario.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <set>

#include "sched/policy_registry.h"

namespace isoroce::sim {

namespace {

std::string flow_key(size_t i, std::string_view field) {
  return "flow[" + std::to_string(i) + "]." + std::string(field);
}
std::string host_key(size_t i, std::string_view field) {
  return "host[" + std::to_string(i) + "]." + std::string(field);
}
std::string quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  out.append(s);
  out.push_back('"');
  return out;
}

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return false;
  return true;
}

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

bool parse_size(std::string_view s, uint64_t* out) {
  uint64_t v = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p == s.data()) return false;
  std::string unit(p, end);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  unsigned shift;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "KB" || unit == "K" || unit == "KIB") shift = 10;
  else if (unit == "MB" || unit == "M" || unit == "MIB") shift = 20;
  else if (unit == "GB" || unit == "G" || unit == "GIB") shift = 30;
  else return false;
  if (shift && v > (~0ull >> shift)) return false;
  *out = v << shift;
  return true;
}

bool parse_ip(std::string_view s, wire::IpAddr* out) {
  const std::string str(s);
  in_addr v4{};
  if (inet_pton(AF_INET, str.c_str(), &v4) == 1) {
    *out = wire::ipv4_mapped(ntohl(v4.s_addr));
    return true;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, str.c_str(), &v6) == 1) {
    std::copy(std::begin(v6.s6_addr), std::end(v6.s6_addr), out->begin());
    return true;
  }
  return false;
}

wire::MacAddr host_mac(size_t i) {
  const auto n = static_cast<uint32_t>(i + 1);
  return {0x02, 0x00, 0x00, 0x00, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
}

namespace {
bool valid_mtu(uint32_t m) { return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096; }
uint32_t port_mtu(const Scenario& s, const std::string& host) {
  for (const auto& h : s.hosts)
    if (h.name == host) return h.mtu;
  return 4096;
}
uint32_t path_port_mtu(const Scenario& s, const FlowConfig& f) {
  uint32_t m = port_mtu(s, f.src);
  for (const auto& d : f.dst) m = std::min(m, port_mtu(s, d));
  return m;
}
}  // namespace

uint32_t effective_mtu(const Scenario& s, const FlowConfig& f) {
  if (f.transport == Transport::kUd || f.mtu == 0) return path_port_mtu(s, f);
  return f.mtu;
}

uint64_t flow_buffer_bytes(const FlowConfig& f) {
  const uint64_t slot = round_up(std::max<uint64_t>(f.size, 8), 64);
  const uint64_t slots = static_cast<uint64_t>(f.depth) * f.qps;
  uint64_t bytes = slot * slots;  // requester side
  const uint64_t ndst = std::max<size_t>(f.dst.size(), 1);
  if (f.transport == Transport::kUd) {
    bytes += ndst * f.qps * effective_recv_depth(f) * round_up(f.size + kUdGrh, 64);
    return bytes;
  }
  if (is_atomic(f.verb)) return bytes + 8ull * f.qps;
  if (f.verb != Verb::kSend && f.verb != Verb::kSendImm) bytes += slot * slots;  // remote slots
  if (f.verb == Verb::kSend || f.verb == Verb::kSendImm)
    bytes += slot * static_cast<uint64_t>(f.qps) * effective_recv_depth(f);
  return bytes;
}

std::optional<ScenarioError> validate(const Scenario& s) {
  auto err = [](std::string key, std::string msg) {
    return std::optional<ScenarioError>(ScenarioError{std::move(key), std::move(msg)});
  };
  if (s.duration == 0) return err("duration_us", "must be above 0");
  if (s.buffer_bytes == 0) return err("switch.buffer_kb", "must be above 0");
  if (s.ecn.enabled) {
    if (s.ecn.kmin_bytes > s.ecn.kmax_bytes) return err("switch.ecn.kmin_kb", "is above kmax_kb");
    if (!(s.ecn.pmax >= 0.0 && s.ecn.pmax <= 1.0))
      return err("switch.ecn.pmax", "must be in [0, 1]");
  }
  const std::pair<const char*, const FaultRate*> faults[] = {
      {"loss", &s.faults.loss},
      {"corrupt", &s.faults.corrupt},
      {"duplicate", &s.faults.duplicate},
      {"reorder", &s.faults.reorder}};
  for (const auto& [name, f] : faults) {
    if (!(f->p >= 0.0 && f->p <= 1.0))
      return err(std::string("faults.") + name, "must be a probability in [0, 1]");
    if (f->burst == 0) return err(std::string("faults.") + name + "_burst", "must be at least 1");
  }
  if (s.pfc.enabled) {
    if (s.pfc.xoff_bytes == 0) return err("switch.pfc.xoff_kb", "must be above 0");
    if (s.pfc.xon_bytes > s.pfc.xoff_bytes) return err("switch.pfc.xon_kb", "is above xoff_kb");
    if (s.pfc.xoff_bytes >= s.buffer_bytes) return err("switch.pfc.xoff_kb", "must be below buffer_kb");
  }
  if (s.faults.reorder.p > 0 && s.faults.reorder_delay == 0)
    return err("faults.reorder_delay_ns", "must be above 0 when reorder is on");

  if (s.hosts.empty()) return err("host", "a scenario needs at least one [[host]]");
  if (s.hosts.size() > kMaxHosts)
    return err("host", "at most " + std::to_string(kMaxHosts) + " hosts");
  for (size_t i = 0; i < s.hosts.size(); ++i) {
    const HostConfig& h = s.hosts[i];
    if (!valid_name(h.name))
      return err(host_key(i, "name"),
                 "must be 1 to 64 letters, digits, '_', '-' or '.' (got " + quoted(h.name) + ")");
    if (h.link_bps == 0) return err(host_key(i, "link_gbps"), "must be above 0");
    const sched::PolicyOps* policy = sched::find_policy(h.policy);
    if (policy == nullptr)
      return err(host_key(i, "policy"), "unknown policy " + quoted(h.policy) + " (one of " + sched::policy_names() + ")");
    if (h.dcqcn.enabled && !policy->has(sched::kCapEnforcesRates))
      return err(host_key(i, "dcqcn.enabled"), "DCQCN needs a rate-limiting policy: set policy = \"tassel\" (" +
                                                   h.policy + " ignores rate limits)");
    if (auto e = dcqcn::validate(h.dcqcn); !e.empty()) return err(host_key(i, "dcqcn"), e);
    if (h.link_bps > 1'600'000'000'000ull) return err(host_key(i, "link_gbps"), "above 1600");
    if (!valid_mtu(h.mtu)) return err(host_key(i, "mtu"), "must be 256, 512, 1024, 2048 or 4096");
    if (h.max_msgs_per_sec != 0 && !policy->has(sched::kCapMessageRate))
      return err(host_key(i, "max_mops"), "the " + h.policy + " policy does not model the message rate (use fifo or justitia)");
    if (auto why = sched::validate(h.justitia); !why.empty()) return err(host_key(i, "justitia"), std::string(why));
    if (auto why = sched::validate(h.rnic); !why.empty()) return err(host_key(i, "rnic"), std::string(why));
    if (h.live() != s.hosts[0].live())
      return err(host_key(i, "socket"), "either every host names a daemon (socket) or none does");
    for (size_t j = 0; j < i; ++j) {
      if (s.hosts[j].name == h.name)
        return err(host_key(i, "name"), "duplicate host name " + quoted(h.name));
      if (h.live() && h.socket == s.hosts[j].socket && h.device == s.hosts[j].device)
        return err(host_key(i, "device"), "the same device as host " + quoted(s.hosts[j].name));
      if (h.live() && h.ip == wire::IpAddr{}) continue;  // filled from the daemon later
      if (s.hosts[j].ip == h.ip)
        return err(host_key(i, "ip"), "duplicate address " + quoted(h.ip_text) + " (also host " +
                                          quoted(s.hosts[j].name) + ")");
    }
  }
  auto find_host = [&](const std::string& name) -> int {
    for (size_t i = 0; i < s.hosts.size(); ++i)
      if (s.hosts[i].name == name) return static_cast<int>(i);
    return -1;
  };
  for (size_t i = 0; i < s.hosts.size(); ++i) {
    const HostConfig& h = s.hosts[i];
    if (h.ref_peer.empty()) continue;
    const int peer = find_host(h.ref_peer);
    if (peer < 0) return err(host_key(i, "justitia.ref_peer"), "no host named " + quoted(h.ref_peer));
    if (static_cast<size_t>(peer) == i) return err(host_key(i, "justitia.ref_peer"), "is the host itself");
    if (wire::is_ipv4_mapped(s.hosts[peer].ip) != wire::is_ipv4_mapped(h.ip))
      return err(host_key(i, "justitia.ref_peer"), "has an address of another family");
  }

  if (s.flows.empty()) return err("flow", "a scenario needs at least one [[flow]]");
  std::vector<uint32_t> qps_per_host(s.hosts.size(), 0);
  uint64_t total_bytes = 0;
  std::set<std::string> names;
  for (size_t i = 0; i < s.flows.size(); ++i) {
    const FlowConfig& f = s.flows[i];
    if (!valid_name(f.name))
      return err(flow_key(i, "name"),
                 "must be 1 to 64 letters, digits, '_', '-' or '.' (got " + quoted(f.name) + ")");
    if (!names.insert(f.name).second)
      return err(flow_key(i, "name"), "duplicate flow name " + quoted(f.name));
    const int src = find_host(f.src);
    if (src < 0) return err(flow_key(i, "src"), "no host named " + quoted(f.src));
    if (f.dst.empty()) return err(flow_key(i, "dst"), "names no host");
    if (f.dst.size() > 1 && f.transport != Transport::kUd)
      return err(flow_key(i, "dst"), "several destinations need transport = \"ud\"");
    for (size_t d = 0; d < f.dst.size(); ++d) {
      const int dst = find_host(f.dst[d]);
      if (dst < 0) return err(flow_key(i, "dst"), "no host named " + quoted(f.dst[d]));
      if (dst == src)
        return err(flow_key(i, "dst"), quoted(f.dst[d]) + " is the source host (no loopback)");
      if (wire::is_ipv4_mapped(s.hosts[src].ip) != wire::is_ipv4_mapped(s.hosts[dst].ip))
        return err(flow_key(i, "dst"), "source and destination addresses are of different families");
      for (size_t e = 0; e < d; ++e)
        if (f.dst[e] == f.dst[d]) return err(flow_key(i, "dst"), "names " + quoted(f.dst[d]) + " twice");
      qps_per_host[dst] += f.qps;
    }
    qps_per_host[src] += f.qps;
    if (f.transport == Transport::kUd && f.verb != Verb::kSend && f.verb != Verb::kSendImm)
      return err(flow_key(i, "verb"), "UD only has send and send_imm (got " +
                                          quoted(to_string(f.verb)) + ")");
    if (f.size == 0) return err(flow_key(i, "size"), "must be above 0");
    if (f.size > kMaxMessageSize) return err(flow_key(i, "size"), "above 1GB");
    if (is_atomic(f.verb) && f.size != 8)
      return err(flow_key(i, "size"), "atomics are 8 bytes (got " + std::to_string(f.size) + ")");
    if (f.mtu != 0 && !valid_mtu(f.mtu))
      return err(flow_key(i, "mtu"), "must be 256, 512, 1024, 2048 or 4096");
    if (f.mtu != 0 && f.transport == Transport::kUd)
      return err(flow_key(i, "mtu"), "UD QPs use the port MTU (set host.mtu)");
    if (f.mtu > path_port_mtu(s, f))
      return err(flow_key(i, "mtu"), "above the port MTU of its hosts (" +
                                         std::to_string(path_port_mtu(s, f)) + ")");
    if (f.transport == Transport::kUd) {
      const uint32_t mtu = effective_mtu(s, f);
      if (f.size > mtu)
        return err(flow_key(i, "size"), "a UD message must fit one MTU (" + std::to_string(f.size) +
                                            " > port MTU " + std::to_string(mtu) + ")");
      if (f.size < 8)
        return err(flow_key(i, "size"), "UD messages carry the simulator's 8-byte message id: at least 8B");
    }
    if (f.count && *f.count == 0) return err(flow_key(i, "count"), "must be above 0 (leave it out to run until duration_us)");
    if (f.depth == 0) return err(flow_key(i, "depth"), "must be above 0");
    if (f.depth > kMaxDepth) return err(flow_key(i, "depth"), "above " + std::to_string(kMaxDepth));
    if (f.qps == 0) return err(flow_key(i, "qps"), "must be above 0");
    if (f.qps > kMaxQpsPerFlow) return err(flow_key(i, "qps"), "above " + std::to_string(kMaxQpsPerFlow));
    if (static_cast<uint64_t>(f.depth) * f.qps > kMaxWrPerFlowSide)
      return err(flow_key(i, "depth"), "depth * qps above " + std::to_string(kMaxWrPerFlowSide));
    if (static_cast<uint64_t>(effective_recv_depth(f)) * f.qps > kMaxWrPerFlowSide)
      return err(flow_key(i, "recv_depth"), "recv_depth * qps above " + std::to_string(kMaxWrPerFlowSide));
    if (f.recv_depth > kMaxDepth) return err(flow_key(i, "recv_depth"), "above " + std::to_string(kMaxDepth));
    if (f.start >= s.duration) return err(flow_key(i, "start_us"), "at or after duration_us");
    if (f.timeout > 31) return err(flow_key(i, "timeout"), "must be 0..31");
    if (f.retry_cnt > 7) return err(flow_key(i, "retry_cnt"), "must be 0..7");
    if (f.rnr_retry > 7) return err(flow_key(i, "rnr_retry"), "must be 0..7 (7: infinite)");
    if (f.min_rnr_timer > 31) return err(flow_key(i, "min_rnr_timer"), "must be 0..31");
    if (f.max_rd_atomic == 0 || f.max_rd_atomic > 128)
      return err(flow_key(i, "max_rd_atomic"), "must be 1..128");
    if (f.start_psn && *f.start_psn > wire::kMask24)
      return err(flow_key(i, "start_psn"), "must be a 24-bit PSN (0..16777215)");
    if (f.inline_data && (f.verb == Verb::kRead || is_atomic(f.verb)))
      return err(flow_key(i, "inline"), "only send and write verbs carry inline data");
    if (f.inline_data && f.size > kMaxInline)
      return err(flow_key(i, "inline"), "inline data is at most " + std::to_string(kMaxInline) + " bytes (size " +
                                            std::to_string(f.size) + ")");
    if (!f.app.empty() && !valid_name(f.app))
      return err(flow_key(i, "app"), "must be 1 to 64 letters, digits, '_', '-' or '.' (got " + quoted(f.app) + ")");
    if (f.weight == 0) return err(flow_key(i, "weight"), "must be at least 1");
    for (size_t j = 0; j < i && !f.app.empty(); ++j)
      if (s.flows[j].app == f.app && s.flows[j].weight != f.weight)
        return err(flow_key(i, "weight"), "differs from flow " + quoted(s.flows[j].name) + " of the same app");
    if (!f.tenant.empty() && !valid_name(f.tenant))
      return err(flow_key(i, "tenant"), "must be 1 to 64 letters, digits, '_', '-' or '.' (got " + quoted(f.tenant) + ")");
    if (f.tenant_weight == 0) return err(flow_key(i, "tenant_weight"), "must be at least 1");
    for (size_t j = 0; j < i; ++j) {
      const FlowConfig& g = s.flows[j];
      if (!f.tenant.empty() && g.tenant == f.tenant && g.tenant_weight != f.tenant_weight)
        return err(flow_key(i, "tenant_weight"), "differs from flow " + quoted(g.name) + " of the same tenant");
      if (!f.app.empty() && g.app == f.app && g.tenant != f.tenant)
        return err(flow_key(i, "tenant"), "differs from flow " + quoted(g.name) + " of the same app");
    }
    if (f.use_srq && !uses_receives(f.verb))
      return err(flow_key(i, "use_srq"), quoted(to_string(f.verb)) + " consumes no receives");
    total_bytes += flow_buffer_bytes(f);
    if (total_bytes > kMaxBufferBytes)
      return err(flow_key(i, "size"), "the flows need more than 2GB of buffers (size * depth * qps)");
  }
  for (size_t h = 0; h < s.hosts.size(); ++h)
    if (qps_per_host[h] > kMaxQpsPerHost)
      return err(host_key(h, "name"), "host " + quoted(s.hosts[h].name) + " has " +
                                          std::to_string(qps_per_host[h]) + " QPs, above " +
                                          std::to_string(kMaxQpsPerHost));
  return std::nullopt;
}

FabricConfig fabric_config(const Scenario& s) {
  FabricConfig c;
  for (size_t i = 0; i < s.hosts.size(); ++i)
    c.ports.push_back(PortConfig{s.hosts[i].link_bps, host_mac(i)});
  c.link_delay = s.link_delay;
  c.buffer_bytes = s.buffer_bytes;
  c.ecn = s.ecn;
  c.pfc = s.pfc;
  c.faults = s.faults;
  c.seed = s.seed;
  return c;
}

}  // namespace isoroce::sim
