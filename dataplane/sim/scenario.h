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

namespace isoroce::sim {

enum class Transport : uint8_t { kRc, kUd };
enum class Verb : uint8_t { kSend, kSendImm, kWrite, kWriteImm, kRead, kFetchAdd, kCmpSwap };
enum class FlowClass : uint8_t { kLatency, kThroughput, kBandwidth };

std::string_view to_string(Transport t);
std::string_view to_string(Verb v);
std::string_view to_string(FlowClass c);
bool parse_transport(std::string_view s, Transport* out);
bool parse_verb(std::string_view s, Verb* out);
bool parse_flow_class(std::string_view s, FlowClass* out);
// "16B", "4KB", "1MB", "2GB" (binary multiples, case-insensitive unit, a bare
// number is bytes). False on anything else or overflow.
bool parse_size(std::string_view s, uint64_t* out);
// Dotted IPv4 (kept IPv4-mapped) or IPv6 text.
bool parse_ip(std::string_view s, wire::IpAddr* out);

inline bool is_atomic(Verb v) { return v == Verb::kFetchAdd || v == Verb::kCmpSwap; }
// The verb consumes receive work requests at the destination.
inline bool uses_receives(Verb v) {
  return v == Verb::kSend || v == Verb::kSendImm || v == Verb::kWriteImm;
}

struct HostConfig {
  std::string name;
  std::string ip_text;
  wire::IpAddr ip{};
  uint64_t link_bps = 100'000'000'000;
  sched::Policy policy = sched::Policy::kFifo;
  Picos msg_cost = 0;  // between a flow deciding to post and the post, per message
  uint32_t mtu = 4096;  // the port's active MTU (jumbo frames on every link)
  dcqcn::Params dcqcn;  // [host.dcqcn]; enabled needs policy tassel
  uint64_t max_msgs_per_sec = 0;  // max_mops: the NIC's message rate (0: no limit; fifo, justitia)
  sched::JustitiaParams justitia;  // [host.justitia], policy "justitia"
  std::string ref_peer;            // the reference flow's peer (empty: the first other host)
  // A live host (isoroce-ctl run): a device of a running isoroced instead of a
  // simulated one. Its address and MTU come from the daemon.
  std::string socket;
  std::string device = "isoroce0";
  bool live() const { return !socket.empty(); }
};

struct FlowConfig {
  std::string name;
  std::string src;
  std::vector<std::string> dst;  // several only for UD
  Transport transport = Transport::kRc;
  Verb verb = Verb::kWrite;
  uint64_t size = 0;
  std::optional<uint64_t> count;  // none: until duration
  uint32_t depth = 1;             // outstanding work requests per QP
  uint32_t qps = 1;
  FlowClass cls = FlowClass::kBandwidth;
  Picos start = 0;
  uint32_t mtu = 0;               // RC path MTU 256..4096 (0: the smaller port MTU of src and dst)
  uint8_t timeout = 8;            // local ACK timeout exponent: 4.096 us * 2^timeout
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;          // 7: infinite
  uint8_t min_rnr_timer = 1;      // IBTA encoding: 1 = 0.01 ms
  uint32_t max_rd_atomic = 16;    // initiator depth and responder resources
  uint64_t rate_bps = 0;          // whole flow, split evenly over its QPs (0: none)
  bool post_recv = true;          // false: the destination never posts receives
  Picos post_recv_delay = 0;      // receives are posted this long after start
  bool use_srq = false;
  uint32_t recv_depth = 0;        // receives kept posted per QP (0: automatic)
  std::optional<uint32_t> start_psn;  // none: random from the seed, per QP
  bool inline_data = false;       // IBV_SEND_INLINE (send/write verbs, size <= kMaxInline)
  std::string app;                // application (justitia: its QPs of one class are one flow); empty: the flow itself
  uint32_t weight = 1;            // the application's token weight (justitia)
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
};

struct ScenarioError {
  std::string key;      // "flow[1].dst"
  std::string message;  // "no host named \"z\""
  std::string to_string() const { return key.empty() ? message : key + ": " + message; }
};

// Limits validate() enforces.
inline constexpr uint64_t kMaxMessageSize = 1ull << 30;
inline constexpr uint64_t kMaxBufferBytes = 2ull << 30;  // all flows' buffers together
inline constexpr uint32_t kMaxDepth = 4096;
inline constexpr uint32_t kMaxQpsPerFlow = 1024;
inline constexpr uint32_t kMaxQpsPerHost = 4000;
inline constexpr uint32_t kMaxWrPerFlowSide = 16384;  // depth * qps, recv_depth * qps
inline constexpr size_t kMaxHosts = 4096;
inline constexpr uint32_t kUdGrh = 40;  // bytes in front of a UD receive
inline constexpr uint32_t kMaxInline = 320;  // verbs::Device::max_inline_data (rxe's)

// The receives a flow keeps posted per QP: recv_depth, or 2 * depth (at least 4).
uint32_t effective_recv_depth(const FlowConfig& f);
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
