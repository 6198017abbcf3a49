// Policies by name. Every transmit-scheduling policy, built in or loaded from a
// shared object, is one PolicyOps entry (name, description, version, capabilities,
// factory), in the spirit of Linux's struct Qdisc_ops and DPDK's RTE_PMD_REGISTER_*:
// drivers create a scheduler by name (make_scheduler("justitia", config)) and ask
// the entry what the policy does (caps) instead of knowing any policy.
//
// Built-in policies are listed in builtin_policies.cc and registered on first use;
// plugins (sched/policy_plugin.h) add theirs at start. Entries are never removed, so
// a PolicyOps* stays valid for the life of the process. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sched/scheduler.h"

namespace isoroce::sched {

// What a policy does that its drivers must know (PolicyOps::caps).
enum PolicyCap : std::uint32_t {
  kCapEnforcesRates = 1u << 0,     // set_rate limits are enforced (DCQCN needs this)
  kCapReferenceLatency = 1u << 1,  // uses on_reference_latency: the driver runs the reference flow
  kCapMessageRate = 1u << 2,       // models Config::max_msgs_per_sec
  // Applies set_tenant (tenants share above applications). Without it a QP's tenant
  // is recorded by the drivers and ignored by the scheduler: fifo and rnic model a
  // hardware RNIC, which has no tenants; plugins (ABI 1 has no tenant event).
  kCapTenants = 1u << 3,
};

// Makes the policy's scheduler; nullptr if `config` is unusable for it.
using PolicyFactory = std::function<std::unique_ptr<Scheduler>(const Config& config)>;

struct PolicyOps {
  std::string name;          // 1 to 32 of [A-Za-z0-9_.-]
  std::string description;   // one line, for --help and isoroce-ctl
  std::uint32_t version = 1;  // the policy's own version
  std::uint32_t caps = 0;    // PolicyCap bits
  std::string origin = "built-in";  // or the plugin's path
  PolicyFactory create;

  bool has(PolicyCap cap) const { return (caps & cap) != 0; }
};

// Registers `ops`: empty, or what is wrong (bad name, no factory, the name is taken).
std::string register_policy(PolicyOps ops);

// The policy called `name`; nullptr if there is none.
const PolicyOps* find_policy(std::string_view name);

// Every registered policy, by name.
std::vector<const PolicyOps*> policies();

// "fifo, justitia, tassel": the registered names, for messages.
std::string policy_names();

// A scheduler of the policy called `name`; nullptr if there is no such policy or
// the policy refuses `config` (validate(config) not empty, for one).
std::unique_ptr<Scheduler> make_scheduler(std::string_view name, const Config& config);

// Whether `name` may name a policy (1 to 32 of [A-Za-z0-9_.-]).
bool valid_policy_name(std::string_view name);

namespace detail {
// builtin_policies.cc: the built-in entries, registered on the registry's first use.
std::vector<PolicyOps> builtin_policies();
}  // namespace detail

}  // namespace isoroce::sched
