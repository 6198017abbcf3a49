// The control socket's operations, one handler each, registered in a table
// with its name, whether it needs an opened device and its help text (the way
// DPDK's rte_telemetry_register_cmd does). The dispatcher knows nothing of any
// operation; handlers are plain functions of an OpContext, so tests/ctrl runs
// each one without a socket.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace isoroce::ctrl {

using nlohmann::json;

class Control;
struct DeviceEntry;
struct Session;

struct OpContext {
  Control& ctl;
  Session& s;
  const std::string& op;
  const json& req;
  std::vector<int>& fds;  // received with the request; handlers dup what they keep
  DeviceEntry& dev() const;  // the opened device (needs_device operations only)
};

using OpHandler = json (*)(OpContext& ctx);

struct OpSpec {
  std::string_view name;
  OpHandler handler;
  bool needs_device;      // refused with ENODEV before "open"
  std::string_view help;  // one line: what it does, its fields
  bool privileged = false;  // device-wide: refused with EPERM unless the client is privileged
};

class OpTable {
 public:
  // false if the name is taken.
  bool add(const OpSpec& spec);
  const OpSpec* find(std::string_view name) const;
  // Runs req's operation; an unknown one, one needing a device before "open"
  // and a privileged one from an unprivileged client are refused here.
  json dispatch(OpContext& ctx) const;
  // [{op, device, privileged, help}] in name order.
  json help() const;

 private:
  std::map<std::string, OpSpec, std::less<>> ops_;
};

// The operations of each group (ops_*.cc), and all of them.
void register_view_ops(OpTable& t);
void register_admin_ops(OpTable& t);
void register_memory_ops(OpTable& t);
void register_queue_ops(OpTable& t);
void register_qp_ops(OpTable& t);
void register_post_ops(OpTable& t);
void register_trace_ops(OpTable& t);
void register_cm_ops(OpTable& t);
void register_all_ops(OpTable& t);

// Replies.
json op_ok(json extra = json::object());
json op_fail(int err, const std::string& what);  // {"ok": false, "errno", "error": what + strerror}
// A request's unsigned field, or nullopt / def.
std::optional<uint64_t> field_u64(const json& j, const char* key);
uint64_t field_u64_or(const json& j, const char* key, uint64_t def);

}  // namespace isoroce::ctrl
