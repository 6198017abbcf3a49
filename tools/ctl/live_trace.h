// `isoroce-ctl trace`: a live trace of a running isoroced (docs/profiling.md,
// "On the daemon"). Checks the event list and the output file first (exit 2),
// starts the daemon's trace (ctrl/trace_session.h), waits, stops it, and turns
// the records of the memfd the daemon filled into Chrome trace-event JSON.
#pragma once

#include <cstdint>
#include <string>

namespace isoroce::tools {

struct LiveTraceArgs {
  std::string socket;
  double seconds = 1;
  std::string out;
  std::string device;      // "": every device
  std::string qp;          // "": every QP; DEVICE/QPN or a QPN (ctrl::parse_qp_name)
  std::string events = "all";
  uint64_t ring_records = 0;  // 0: the daemon's default
  uint64_t max_records = 0;   // 0: the daemon's default
  bool raw = false;        // write the 40-byte records as they are, not JSON
  bool json = false;       // print the summary as JSON
};

// The exit status: 0, 1 (the daemon refused or failed), 2 (bad arguments, unwritable file).
int run_live_trace(const LiveTraceArgs& a);

}  // namespace isoroce::tools
