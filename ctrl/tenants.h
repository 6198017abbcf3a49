// Tenants on the daemon (issue 19, docs/isolation.md "Tenants"): the [[tenant]]
// tables of the configuration (a name, a weight, and rules: the uids and process
// names whose QPs are the tenant's) and the daemon's numbering of tenant names for
// the schedulers (sched::Scheduler::set_tenant). A QP's tenant is, in order: a rule
// that matches its client (the operator's word wins), the client's declaration
// (create_qp's "tenant", from ISOROCE_TENANT), `isoroce-ctl set-tenant`; none
// otherwise. Thread-safe (telemetry reads weights from its own thread).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace isoroce::ctrl {

struct TenantRule {
  std::string name;
  uint32_t weight = 1;
  std::vector<uint32_t> uids;       // the QPs of clients of these users
  std::vector<std::string> comms;   // ... or of processes of these names (/proc/PID/comm)
};

// Whether `name` may name a tenant: 1 to 64 of [A-Za-z0-9_.-].
bool valid_tenant_name(const std::string& name);

// Empty if the transmit policy called `policy` applies tenants (sched::kCapTenants:
// justitia, tassel), else why it does not: a QP's tenant is then recorded (isoroce-ctl
// qp, sched's per-tenant bytes) and ignored by the scheduler. fifo and rnic model a
// hardware RNIC, which arbitrates per QP and has no tenants; plugins get no tenant
// event (ABI 1).
std::string tenants_ignored_by(const std::string& policy);

class Tenants {
 public:
  void set_rules(std::vector<TenantRule> rules);
  // The tenant of the first rule matching a client of `uid` running `comm`; "" if none.
  std::string match(uint32_t uid, const std::string& comm) const;
  // The scheduler's id of tenant `name` (1, 2, ... in order of first use; never 0).
  uint32_t id(const std::string& name);
  // Its weight: set_weight's, else its rule's, else 1.
  uint32_t weight(const std::string& name) const;
  void set_weight(const std::string& name, uint32_t weight);
  // True the first time for (device, tenant): the daemon logs that a policy ignores
  // tenants once per device and tenant, not per QP.
  bool first_ignored(const std::string& device, const std::string& tenant);

 private:
  mutable std::mutex mu_;
  std::vector<TenantRule> rules_;
  std::map<std::string, uint32_t> ids_;
  std::map<std::string, uint32_t> weights_;
  std::map<std::string, bool> ignored_;  // "device/tenant" already logged
};

}  // namespace isoroce::ctrl
