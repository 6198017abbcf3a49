// The parameters of the justitia policy (sched/justitia.h), as one plain struct that
// the simulator's `[host.justitia]` table, the daemon's configuration and
// `isoroce-ctl` all fill: validate() says what is wrong with a set, set() assigns one
// parameter from "name=value" text (the names of the scenario keys).
//
// Defaults are the paper's (Zhang et al., "Justitia: Software Multi-Tenancy in
// Hardware Kernel-Bypass Networks", NSDI 2022) or its public code where the paper
// gives none; docs/sched.md and docs/isolation.md say which is which.
#pragma once

#include <cstdint>
#include <string_view>

#include "sched/time.h"

namespace isoroce::sched {

// Justitia's flow classes. A QP's class and application decide which logical flow it
// belongs to; kReference is the policy's own probe (latency-class service, never
// counted as a latency flow).
// kAuto is not a class but the lack of one: "no declared class". Under
// JustitiaParams::classify = declared such a QP is a bandwidth flow (as before
// kAuto existed); under auto or verify the policy classifies it from what it
// sends (sched/flow_classifier.h).
enum class FlowClass : std::uint8_t { kLatency, kThroughput, kBandwidth, kReference, kAuto };

std::string_view to_string(FlowClass cls);
bool parse_flow_class(std::string_view text, FlowClass* cls);

// Where Current99's latencies come from (docs/sched.md, "Latency signal"):
// kProbe: the reference flow only (on_reference_latency: the driver's probe, which
// needs an isoroced peer); kPassive: the transport's own round trips of latency-class
// QPs (on_latency_sample: any peer); kBoth: both into one window.
enum class LatencySignal : std::uint8_t { kProbe, kPassive, kBoth };
// Which QPs are classified from their behaviour: kDeclared: none (a QP without a
// declared class is a bandwidth flow); kAuto: those with no declared class; kVerify:
// every QP but the policy's reference QPs, starting from the declared class.
enum class Classify : std::uint8_t { kDeclared, kAuto, kVerify };

std::string_view to_string(LatencySignal s);
std::string_view to_string(Classify c);

struct JustitiaParams {
  Picos target99 = 2'000'000;            // Target99: 2 us (the artifact's TAIL)
  Picos ref_period = 500'000'000;        // RefPeriod: a 10 B probe every 0.5 ms
  std::uint32_t window = 10'000;         // Current99 over the last 10,000 probes
  std::uint32_t token_bytes = 1'000'000; // TokenBytes with no latency flow active (1 MB)
  std::uint32_t split_bytes = 5'000;     // TokenBytes while a latency flow is active (5 KB)
  std::uint32_t token_ops = 0;           // TokenOps per token_bytes; 0: derived (docs/sched.md)
  std::uint32_t max_tokens = 5;          // tokens the generator banks at most (artifact's MAX_TOKEN)
  std::uint64_t max_rate_bps = 0;        // MaxRate; 0: the link rate
  std::uint64_t increase_step_bps = 8'000'000;  // additive increase per probe: 1 MB/s (artifact)
  Picos unattainable_after = 5 * kPicosPerSecond;  // δ; 0: never give up on Target99
  Picos latency_idle = 1'000'000'000;    // a latency flow counts as active this long after its last packet
  LatencySignal signal = LatencySignal::kProbe;  // Current99's source
  Classify classify = Classify::kDeclared;       // automatic flow classification
  std::uint32_t classify_bytes = 65'536;  // a message of at least this many wire bytes is a bandwidth message
  std::uint32_t classify_messages = 3;    // consecutive messages of another class that change a QP's class
};

// Empty if `p` is usable, else what is wrong (naming the parameter).
std::string_view validate(const JustitiaParams& p);

// Sets the parameter `name` (the scenario key: target99_us, ref_period_us, window,
// token_bytes, split_bytes, token_ops, max_tokens, max_rate_gbps, increase_step_gbps,
// unattainable_after_s, latency_idle_us, classify_bytes, classify_messages) from
// decimal text, or signal (probe, passive, both) and classify (declared, auto,
// verify) from their names. False if the name is
// unknown or the value not a number in range for it; `p` is then unchanged.
bool set(JustitiaParams& p, std::string_view name, std::string_view value);
// "name=value".
bool set(JustitiaParams& p, std::string_view assignment);

}  // namespace isoroce::sched

namespace isoroce::sched {

// What the justitia policy reports (telemetry, the simulator's JSON per host).
struct JustitiaStats {
  std::uint64_t safe_util_bps = 0;      // SafeUtil now
  std::uint64_t min_safe_util_bps = 0;  // the lowest it has been
  std::uint64_t max_rate_bps = 0;       // MaxRate
  Picos tau = 0;                        // time between two tokens now
  Picos current99 = 0;                  // Current99 (0 before the first probe)
  Picos target99 = 0;
  std::uint32_t token_bytes = 0;        // bytes a token is worth now (token_bytes or split_bytes)
  std::uint32_t token_ops = 0;          // messages a token is worth now
  std::uint32_t tokens = 0;             // banked, not yet handed out
  std::uint64_t tokens_issued = 0;      // handed to flows since the start
  std::uint32_t latency_flows = 0;      // active logical flows of each class
  std::uint32_t throughput_flows = 0;
  std::uint32_t bandwidth_flows = 0;
  std::uint64_t samples = 0;            // latencies taken into Current99 (probe and passive)
  std::uint64_t passive_samples = 0;    // of which the transport's own round trips
  std::uint64_t reclassified = 0;       // QP class changes made by classification
  std::uint64_t halvings = 0;           // multiplicative decreases
  bool unattainable = false;            // Target99 given up (after unattainable_after)
};

}  // namespace isoroce::sched
