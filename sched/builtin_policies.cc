// The built-in policies: registered through the same door as plugins
// (policy_registry.h). A new built-in policy is one entry here.
#include <memory>

#include "sched/fifo.h"
#include "sched/justitia.h"
#include "sched/policy_registry.h"
#include "sched/rnic.h"
#include "sched/tassel.h"

namespace isoroce::sched::detail {

std::vector<PolicyOps> builtin_policies() {
  std::vector<PolicyOps> out;
  out.push_back({"fifo", "hardware RNIC baseline: round robin over QPs, one whole message each", 1,
                 kCapMessageRate, "built-in",
                 [](const Config& c) -> std::unique_ptr<Scheduler> { return std::make_unique<FifoScheduler>(c); }});
  out.push_back({"tassel", "per-QP rate limits (WF2Q+ on a timing wheel), work-conserving otherwise", 1,
                 kCapEnforcesRates | kCapTenants, "built-in",
                 [](const Config& c) -> std::unique_ptr<Scheduler> { return std::make_unique<TasselScheduler>(c); }});
  out.push_back({"justitia",
                 "Justitia isolation: latency QPs unpaced, the others on multi-resource tokens (SafeUtil from the "
                 "reference flow)",
                 1, kCapEnforcesRates | kCapReferenceLatency | kCapMessageRate | kCapTenants, "built-in",
                 [](const Config& c) -> std::unique_ptr<Scheduler> {
                   if (!validate(c.justitia).empty()) return nullptr;
                   return std::make_unique<JustitiaScheduler>(c);
                 }});
  // Its message rate is its own parameter (RnicParams::max_msgs_per_sec), not
  // Config::max_msgs_per_sec; it records rate limits and ignores them, as fifo.
  out.push_back({"rnic",
                 "hardware RNIC arbitration: packet round robin with a WQE fetch batch and a bounded transmit "
                 "pipeline, presets per NIC family (rnic.h)",
                 1, 0, "built-in",
                 [](const Config& c) -> std::unique_ptr<Scheduler> {
                   if (!validate(c.rnic).empty()) return nullptr;
                   return std::make_unique<RnicScheduler>(c);
                 }});
  return out;
}

}  // namespace isoroce::sched::detail
