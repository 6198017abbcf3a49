#include "ctrl/op_table.h"

#include <cerrno>
#include <cstring>

#include "ctrl/session.h"

namespace isoroce::ctrl {

DeviceEntry& OpContext::dev() const { return *s.dev; }

bool OpTable::add(const OpSpec& spec) { return ops_.emplace(std::string(spec.name), spec).second; }

const OpSpec* OpTable::find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

json OpTable::dispatch(OpContext& ctx) const {
  const std::string& op = ctx.op;
  const OpSpec* spec = find(op);
  if (ctx.s.dev == nullptr && (spec == nullptr || spec->needs_device)) {
    // As before the table: unknown names that look like verbs say "open first".
    if (op.empty()) return op_fail(EINVAL, "empty op");
    return op_fail(op == "alloc_pd" || op.find('_') != std::string::npos ? ENODEV : EOPNOTSUPP,
                   "'" + op + "': open a device first, or unknown operation");
  }
  if (spec == nullptr) return op_fail(EOPNOTSUPP, "unknown operation '" + op + "'");
  if (spec->privileged && !ctx.s.privileged)
    return op_fail(EPERM, op + ": device-wide settings need root, the daemon's user or admin_group (docs/security.md)");
  return spec->handler(ctx);
}

json OpTable::help() const {
  json list = json::array();
  for (const auto& [name, spec] : ops_)
    list.push_back({{"op", name}, {"device", spec.needs_device}, {"privileged", spec.privileged},
                    {"help", std::string(spec.help)}});
  return list;
}

void register_all_ops(OpTable& t) {
  register_view_ops(t);
  register_trace_ops(t);
  register_admin_ops(t);
  register_memory_ops(t);
  register_queue_ops(t);
  register_qp_ops(t);
  register_post_ops(t);
  register_cm_ops(t);
}

json op_ok(json extra) {
  extra["ok"] = true;
  return extra;
}

json op_fail(int err, const std::string& what) {
  return {{"ok", false}, {"errno", err}, {"error", what + ": " + std::strerror(err)}};
}

std::optional<uint64_t> field_u64(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

uint64_t field_u64_or(const json& j, const char* key, uint64_t def) { return field_u64(j, key).value_or(def); }

}  // namespace isoroce::ctrl
