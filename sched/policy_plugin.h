// Loading a policy plugin: a shared object built against sched/policy_api.h.
// load_policy_plugin dlopens it, looks up isoroce_policy_entry, checks the ABI
// version and the table, and registers the policy under its name (the registry
// refuses a name already taken). Plugins are never unloaded. Loading the same file
// again (same canonical path) does nothing and succeeds.
//
// Only the operator loads code: isoroced from its command line or configuration
// file, isoroce-sim from its command line or the scenario ([[plugin]]); no client
// request can (docs/security.md). Library target isoroce_sched_plugin (libdl).
#pragma once

#include <string>

#include "sched/plugin_scheduler.h"

namespace isoroce::sched {

struct PluginLoad {
  std::string error;  // empty: loaded (or already loaded)
  std::string name;   // the policy's name
};

// `log` hears the policy's faults (PluginScheduler); empty: stderr.
PluginLoad load_policy_plugin(const std::string& path, PolicyLog log = {});

}  // namespace isoroce::sched
