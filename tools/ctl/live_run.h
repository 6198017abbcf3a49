// isoroce-ctl run: the simulator's scenarios on running daemons. Each
// [[host]] names a daemon's device (socket, device); the flows are the
// simulator's flow generator (workload/flow.h) driven in real time,
// its memory shared with the daemons as memfds, every byte and atomic result
// checked the same way. Verbs go over the control socket, one request each.
#pragma once

#include <optional>
#include <string>

#include "dataplane/sim/report.h"
#include "dataplane/sim/scenario.h"

namespace isoroce::tools {

// The report (wall-clock microseconds where the simulator has virtual ones),
// or nullopt and *error when the daemons cannot be reached or setup fails.
std::optional<sim::SimReport> run_live(sim::Scenario scenario, std::string* error);

}  // namespace isoroce::tools
