// The simulator's --timeseries file: CSV, one row per QP per sample period
// (docs/profiling.md): time_us, host, qpn, flow, role, rate_bps (the scheduler's limit,
// 0 = none), throughput_bps (bytes the QP sent in the period), queue_bytes (the switch's
// output queue toward the host), safe_util_bps, tokens, current99_us (justitia hosts;
// empty otherwise).
#pragma once

#include <string>

#include "tools/sim/sim_trace.h"

namespace isoroce::tools {

std::string timeseries_csv(const SimTrace& t);

}  // namespace isoroce::tools
