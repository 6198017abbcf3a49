// trace::Records as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev)
// and chrome://tracing open (docs/profiling.md). Used by `isoroce-ctl trace`
// for the daemon's records; written so the simulator's records fit too.
//
// Layout: a process per port (named by TraceMeta::port_names), a thread per QP
// ("QP n"; records about the whole port go to thread 0, "port"); a complete
// slice ("X") per message from its post to its completion, matched by (port,
// QP, message id); an instant ("i") for every other event with all fields in
// its args; counters ("C") for rates (rate, dcqcn_cut, dcqcn_increase) and
// justitia's SafeUtil and tokens. Timestamps are microseconds with picosecond
// decimals, printed from the integer picoseconds, so the same records give
// byte-identical files.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <span>
#include <string>

#include "sched/trace.h"

namespace isoroce::tools {

struct TraceMeta {
  std::map<uint16_t, std::string> port_names;  // a port missing here is "port N"
  std::string source;                          // "isoroced", "isoroce-sim", ...
  uint64_t dropped = 0;                        // records lost to full rings
  uint64_t truncated = 0;                      // records over the size bound
};

// Writes records (any order; sorted by time, stable) to out.
void write_chrome_trace(std::ostream& out, std::span<const trace::Record> records, const TraceMeta& meta);

}  // namespace isoroce::tools
