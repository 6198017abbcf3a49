// A flow as data: what an application posts (transport, verb, size, depth,
// QPs, class, the QP attributes it connects with), as a scenario names it.
// The simulator's and isoroce-ctl's TOML fill it (dataplane/sim/scenario.h
// re-exports these names in isoroce::sim); workload/flow.h runs it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/time.h"

namespace isoroce::workload {

using sched::Picos;

enum class Transport : uint8_t { kRc, kUd };
enum class Verb : uint8_t { kSend, kSendImm, kWrite, kWriteImm, kRead, kFetchAdd, kCmpSwap };
// kAuto: no declared class (justitia classifies it under classify = auto / verify).
enum class FlowClass : uint8_t { kLatency, kThroughput, kBandwidth, kAuto };

std::string_view to_string(Transport t);
std::string_view to_string(Verb v);
std::string_view to_string(FlowClass c);
bool parse_transport(std::string_view s, Transport* out);
bool parse_verb(std::string_view s, Verb* out);
bool parse_flow_class(std::string_view s, FlowClass* out);

inline bool is_atomic(Verb v) { return v == Verb::kFetchAdd || v == Verb::kCmpSwap; }
// The verb consumes receive work requests at the destination.
inline bool uses_receives(Verb v) {
  return v == Verb::kSend || v == Verb::kSendImm || v == Verb::kWriteImm;
}

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
  std::string tenant;             // the application's tenant (justitia shares tenants first); empty: none
  uint32_t tenant_weight = 1;     // the tenant's weight
};

// Why setup could not be done, naming the key the way a scenario file spells
// it ("flow[1].dst", "host[0].justitia").
struct SetupError {
  std::string key;
  std::string message;
  std::string to_string() const { return key.empty() ? message : key + ": " + message; }
};

inline constexpr uint32_t kUdGrh = 40;       // bytes in front of a UD receive
inline constexpr uint32_t kMaxInline = 320;  // verbs::Device::max_inline_data (rxe's)

// The receives a flow keeps posted per QP: recv_depth, or 2 * depth (at least 4).
inline uint32_t effective_recv_depth(const FlowConfig& f) {
  if (f.recv_depth) return f.recv_depth;
  return std::max<uint32_t>(4, 2 * f.depth);
}

// "IBV_WC_RETRY_EXC_ERR" for IBV_WC_RETRY_EXC_ERR, and so on.
std::string_view wc_status_name(int status);

}  // namespace isoroce::workload
