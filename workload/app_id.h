// Application ids as the engines' schedulers see them (set_qp_class's `app`):
// justitia splits tokens between applications, so every QP says whose it is.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "workload/flow_config.h"

namespace isoroce::workload {

// The justitia policy's own "application": its reference probes (RC and the
// daemon's UD echo) and their peers' ends. Not sched::kOwnApp, not a flow.
inline constexpr uint32_t kReferenceApp = 0xffff'fffe;

// Flow `index` of `flows`: flows naming the same `app` share the id of the
// first of them; a flow with no `app` is an application of its own.
inline uint32_t flow_app_id(std::span<const FlowConfig> flows, uint32_t index) {
  const FlowConfig& f = flows[index];
  if (f.app.empty()) return 0x8000'0000u | index;
  for (uint32_t i = 0; i < flows.size(); ++i)
    if (flows[i].app == f.app) return i;  // the first flow of the application
  return index;
}

// A tenant's id as the engines' schedulers see it (set_qp_tenant's `tenant`): FNV-1a
// of its name, so every host numbers a tenant alike; sched::kNoTenant (0) for none.
inline uint32_t tenant_id(std::string_view name) {
  if (name.empty()) return 0;
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h == 0 ? 1 : h;
}

}  // namespace isoroce::workload
