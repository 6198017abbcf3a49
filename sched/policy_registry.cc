#include "sched/policy_registry.h"

#include <map>
#include <mutex>

namespace isoroce::sched {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<PolicyOps>, std::less<>> by_name;  // entries never move

  std::string add(PolicyOps ops) {
    if (!valid_policy_name(ops.name))
      return "'" + ops.name + "' is not a policy name (1 to 32 letters, digits, '_', '.' or '-')";
    if (!ops.create) return "policy '" + ops.name + "' has no factory";
    std::lock_guard lock(mu);
    if (auto it = by_name.find(ops.name); it != by_name.end())
      return "policy '" + ops.name + "' is already registered (" + it->second->origin + ")";
    std::string name = ops.name;
    by_name.emplace(std::move(name), std::make_unique<PolicyOps>(std::move(ops)));
    return {};
  }
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: plugins' factories may outlive static destruction
    for (PolicyOps& ops : detail::builtin_policies()) reg->add(std::move(ops));
    return reg;
  }();
  return *r;
}

}  // namespace

bool valid_policy_name(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return false;
  return true;
}

std::string register_policy(PolicyOps ops) { return registry().add(std::move(ops)); }

const PolicyOps* find_policy(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second.get();
}

std::vector<const PolicyOps*> policies() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<const PolicyOps*> out;
  for (const auto& [name, ops] : r.by_name) out.push_back(ops.get());
  return out;
}

std::string policy_names() {
  std::string out;
  for (const PolicyOps* ops : policies()) out += (out.empty() ? "" : ", ") + ops->name;
  return out;
}

std::unique_ptr<Scheduler> make_scheduler(std::string_view name, const Config& config) {
  const PolicyOps* ops = find_policy(name);
  if (ops == nullptr || !validate(config).empty()) return nullptr;
  return ops->create(config);
}

}  // namespace isoroce::sched
