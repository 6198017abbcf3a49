// A simulation scenario as plain data: the fabric, the hosts and the flows
// (applications) that run on them. tools/sim fills it from TOML; tests fill it
// directly. validate() says what is impossible about it, naming the key the
// way the TOML file spells it ("flow[2].size", "switch.ecn.kmin_kb").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/sim/fabric.h"
#include "sched/scheduler.h"
#include "transport/dcqcn/params.h"
#include "transport/wire/packet.h"
#include "workload/flow_config.h"

namespace isoroce::sim {

// The flow model is the workload layer's (workload/flow_config.h); scenarios
// name it with the simulator's words.
using workload::FlowClass;
using workload::FlowConfig;
using workload::Transport;
using workload::Verb;
using workload::effective_recv_depth;
using workload::is_atomic;
using workload::kMaxInline;
using workload::kUdGrh;
using workload::parse_flow_class;
using workload::parse_transport;
using workload::parse_verb;
using workload::to_string;
using workload::uses_receives;
using ScenarioError = workload::SetupError;

// "16B", "4KB", "1MB", "2GB" (binary multiples, case-insensitive unit, a bare
// number is bytes). False on anything else or overflow.
bool parse_size(std::string_view s, uint64_t* out);
// Dotted IPv4 (kept IPv4-mapped) or IPv6 text.
bool parse_ip(std::string_view s, wire::IpAddr* out);

struct HostConfig {
  std::string name;
  std::string ip_text;
  wire::IpAddr ip{};
  uint64_t link_bps = 100'000'000'000;
  std::string policy = "fifo";  // a registered policy (sched/policy_registry.h)
  Picos msg_cost = 0;  // between a flow deciding to post and the post, per message
  uint32_t mtu = 4096;  // the port's active MTU (jumbo frames on every link)
  dcqcn::Params dcqcn;  // [host.dcqcn]; enabled needs a policy that enforces rates
  uint64_t max_msgs_per_sec = 0;  // max_mops: the NIC's message rate (0: no limit; policies with kCapMessageRate)
  sched::JustitiaParams justitia;  // [host.justitia], policy "justitia"
  sched::RnicParams rnic;          // [host.rnic], policy "rnic"
  std::string ref_peer;            // the reference flow's peer (empty: the first other host)
  // A live host (isoroce-ctl run): a device of a running isoroced instead of a
  // simulated one. Its address and MTU come from the daemon.
  std::string socket;
  std::string device = "isoroce0";
  bool live() const { return !socket.empty(); }
};

struct Scenario {
  uint64_t seed = 1;
  Picos duration = 20'000'000'000;  // 20 ms
  Picos link_delay = 1'000'000;     // 1 us
  uint64_t buffer_bytes = 4 << 20;  // per switch output port
  EcnConfig ecn;
  FaultConfig faults;
  std::vector<HostConfig> hosts;
  std::vector<FlowConfig> flows;
  PfcConfig pfc;  // [switch] pfc = { xoff_kb, xon_kb }
  // [[plugin]] path = "...": policy plugins the scenario's tool loaded (sched/policy_plugin.h)
  // before reading the hosts, as given (relative paths: to the scenario file's folder).
  std::vector<std::string> plugins;
};

// Limits validate() enforces.
inline constexpr uint64_t kMaxMessageSize = 1ull << 30;
inline constexpr uint64_t kMaxBufferBytes = 2ull << 30;  // all flows' buffers together
inline constexpr uint32_t kMaxDepth = 4096;
inline constexpr uint32_t kMaxQpsPerFlow = 1024;
inline constexpr uint32_t kMaxQpsPerHost = 4000;
inline constexpr uint32_t kMaxWrPerFlowSide = 16384;  // depth * qps, recv_depth * qps
inline constexpr size_t kMaxHosts = 4096;

// The path MTU a flow uses: its mtu, or the smallest port MTU on its path. UD
// QPs always use the port MTU (min over source and destinations).
uint32_t effective_mtu(const Scenario& s, const FlowConfig& f);
// Buffer bytes the simulator allocates for a flow (both sides).
uint64_t flow_buffer_bytes(const FlowConfig& f);

// nullopt if the scenario can run.
std::optional<ScenarioError> validate(const Scenario& s);

// The fabric a scenario describes (after validate()).
FabricConfig fabric_config(const Scenario& s);
wire::MacAddr host_mac(size_t host_index);

}  // namespace isoroce::sim
