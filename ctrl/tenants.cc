#include "ctrl/tenants.h"

#include <algorithm>

#include "ctrl/tenants_toml.h"
#include "sched/policy_registry.h"

namespace isoroce::ctrl {

bool valid_tenant_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

std::optional<ConfigError> read_tenants(const toml::table& t, std::vector<TenantRule>* out) {
  const toml::node* n = t.get("tenant");
  if (n == nullptr) return std::nullopt;
  const toml::array* a = n->as_array();
  if (a == nullptr) return ConfigError{"tenant", "must be an array of tables ([[tenant]], docs/isoroced.md)"};
  for (size_t i = 0; i < a->size(); ++i) {
    const std::string at = "tenant[" + std::to_string(i) + "]";
    const toml::table* e = a->get(i)->as_table();
    if (e == nullptr) return ConfigError{at, "must be a table"};
    TenantRule r;
    for (auto&& [k, v] : *e) {
      const std::string key = at + "." + std::string(k.str());
      if (k.str() == "name") {
        if (!v.is_string() || !valid_tenant_name(*v.value<std::string>()))
          return ConfigError{key, "must be 1 to 64 letters, digits, '_', '-' or '.'"};
        r.name = *v.value<std::string>();
      } else if (k.str() == "weight") {
        if (!v.is_integer() || *v.value<int64_t>() < 1 || *v.value<int64_t>() > 1'000'000)
          return ConfigError{key, "must be an integer from 1 to 1000000"};
        r.weight = static_cast<uint32_t>(*v.value<int64_t>());
      } else if (k.str() == "uids" || k.str() == "comms") {
        const toml::array* l = v.as_array();
        if (l == nullptr) return ConfigError{key, "must be an array"};
        for (const auto& x : *l) {
          if (k.str() == "uids") {
            if (!x.is_integer() || *x.value<int64_t>() < 0 || *x.value<int64_t>() > UINT32_MAX)
              return ConfigError{key, "must be an array of user ids"};
            r.uids.push_back(static_cast<uint32_t>(*x.value<int64_t>()));
          } else {
            if (!x.is_string()) return ConfigError{key, "must be an array of process names"};
            r.comms.push_back(*x.value<std::string>());
          }
        }
      } else {
        return ConfigError{key, "unknown setting (known: name, weight, uids, comms)"};
      }
    }
    if (r.name.empty()) return ConfigError{at + ".name", "missing"};
    for (const TenantRule& o : *out)
      if (o.name == r.name) return ConfigError{at + ".name", "'" + r.name + "' is given twice"};
    out->push_back(std::move(r));
  }
  return std::nullopt;
}

void Tenants::set_rules(std::vector<TenantRule> rules) {
  std::lock_guard lock(mu_);
  rules_ = std::move(rules);
}

std::string Tenants::match(uint32_t uid, const std::string& comm) const {
  std::lock_guard lock(mu_);
  for (const TenantRule& r : rules_) {
    if (std::find(r.uids.begin(), r.uids.end(), uid) != r.uids.end()) return r.name;
    if (std::find(r.comms.begin(), r.comms.end(), comm) != r.comms.end()) return r.name;
  }
  return {};
}

uint32_t Tenants::id(const std::string& name) {
  std::lock_guard lock(mu_);
  auto [it, added] = ids_.emplace(name, static_cast<uint32_t>(ids_.size() + 1));
  return it->second;
}

uint32_t Tenants::weight(const std::string& name) const {
  std::lock_guard lock(mu_);
  if (auto it = weights_.find(name); it != weights_.end()) return it->second;
  for (const TenantRule& r : rules_)
    if (r.name == name) return r.weight;
  return 1;
}

void Tenants::set_weight(const std::string& name, uint32_t weight) {
  std::lock_guard lock(mu_);
  weights_[name] = weight;
}

std::string tenants_ignored_by(const std::string& policy) {
  const sched::PolicyOps* p = sched::find_policy(policy);
  if (p != nullptr && p->has(sched::kCapTenants)) return {};
  if (policy == "fifo" || policy == "rnic")
    return "policy " + policy + " models a hardware RNIC, which arbitrates per QP and has no tenants: the tenant is "
           "recorded, not enforced (justitia and tassel enforce tenants; docs/isolation.md)";
  return "policy " + policy + " does not apply tenants (a plugin gets no tenant event): the tenant is recorded, "
         "not enforced (justitia and tassel enforce tenants; docs/isolation.md)";
}

bool Tenants::first_ignored(const std::string& device, const std::string& tenant) {
  std::lock_guard lock(mu_);
  return ignored_.emplace(device + "/" + tenant, true).second;
}

}  // namespace isoroce::ctrl
