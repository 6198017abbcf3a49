// The simulator's --trace file: Chrome trace-event JSON, which ui.perfetto.dev and
// trace_processor load (docs/profiling.md documents the layout):
//   - a process per host ("pid": host index + 1), a thread per QP ("tid": its QPN)
//     and thread 0 for the port's scheduler;
//   - a complete slice ("ph": "X") per message from its post to its completion, with
//     its stages in "args";
//   - instant events ("ph": "i") for activations, eligibility, grants, tokens,
//     frames received, ACKs, NAKs, CNPs, retransmissions, drops;
//   - counters ("ph": "C"): each QP's rate limit and throughput, the switch queue
//     toward the host, SafeUtil, Current99 and the tokens banked.
// "ts" and "dur" are microseconds (picosecond precision), from virtual time 0.
#pragma once

#include <nlohmann/json.hpp>

#include "tools/sim/sim_trace.h"

namespace isoroce::tools {

nlohmann::json chrome_trace(const SimTrace& t);

}  // namespace isoroce::tools
