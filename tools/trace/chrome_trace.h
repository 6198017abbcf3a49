// trace::Records as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev,
// trace_processor) and chrome://tracing open: the one writer of isoroce-sim --trace,
// isoroce-ctl trace and isoroce-trace (docs/profiling.md, "The trace file").
//
// Layout (Perfetto's JSON importer wants slices on one thread to nest, so
// overlapping messages of a QP go on lanes):
//   - a process per port, "pid" = port + 1 (pid 0 is the idle process to some
//     importers), named by TraceMeta::port_names;
//   - a thread per QP, "tid" = QPN, named "QP 0x.. (label)"; a QP's messages that
//     overlap an earlier one go on lane k, "tid" = QPN + k * 2^24, "QP 0x.. #k";
//     "tid" 0 is the port's scheduler (port-wide events);
//   - a complete slice ("X") per message from its post (from the application's post
//     when the post record carries the time it waited in the ring) to its
//     completion, with its stages in args;
//   - an instant ("i") for every record: its raw fields (qp, psn, bytes, class, a,
//     b as sched/trace.h defines them) and the same decoded (departure_us, S_us,
//     F_us, phi, syndrome, ...), so readers such as isoroce-rperf get the records
//     back exactly;
//   - counters ("C"): each QP's rate limit, SafeUtil, Current99 and tokens from the
//     records, and TraceMeta::counters (the simulator's throughput and queues).
// Timestamps are microseconds printed from integer picoseconds (exact, so the same
// records give byte-identical files); events are in time order, metadata first.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "sched/trace.h"

namespace isoroce::tools {

// One sample of a counter track of a port (pid): {"name": {key: value}}.
struct TraceCounter {
  uint16_t port = 0;
  sched::Picos time = 0;
  std::string name;
  std::string key;
  double value = 0;
};

struct TraceMeta {
  std::string source;                          // otherData.generator: "isoroced", "isoroce-sim", ...
  std::map<uint16_t, std::string> port_names;  // a port missing here is "port N"
  std::map<uint64_t, std::string> qp_labels;   // port << 32 | QPN -> "flow name" in the thread's name
  uint64_t dropped = 0;                        // records lost to full rings
  uint64_t truncated = 0;                      // records over the size bound
  std::optional<uint64_t> seed;                // the simulator's seed
  std::vector<TraceCounter> counters;          // extra counter samples (any order)
};

// Writes records (any order; sorted by time, stable) to out.
void write_chrome_trace(std::ostream& out, std::span<const trace::Record> records, const TraceMeta& meta);

// The lane thread ids: QPN + lane * 2^24 (QPNs have 24 bits).
inline constexpr uint32_t kLaneShift = 24;
inline constexpr uint32_t qpn_of_tid(uint32_t tid) { return tid & ((1u << kLaneShift) - 1); }

}  // namespace isoroce::tools
