// What a flow measured: messages, goodput, latency, wire counters, errors and
// the integrity checks. Plain data; the simulator's report and isoroce-ctl
// run's carry one per flow (dataplane/sim/report.h re-exports these names).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "workload/flow_config.h"

namespace isoroce::workload {

struct LatencySummary {
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0, mean_us = 0;
};

// Nearest-rank percentiles, the maximum and the mean of `picos` (any order).
LatencySummary summarize(std::span<const Picos> picos);

struct FlowReport {
  std::string name;
  std::string src;
  std::vector<std::string> dst;
  Transport transport = Transport::kRc;
  Verb verb = Verb::kWrite;
  FlowClass cls = FlowClass::kBandwidth;
  uint64_t size = 0;
  uint32_t qps = 0, depth = 0;

  uint64_t messages = 0;  // work requests completed successfully at the requester
  uint64_t bytes = 0;     // messages * size
  double goodput_gbps = 0;
  double msgs_per_sec = 0;
  double wire_gbps = 0;   // link rate of its data frames (headers included, unfinished messages too)
  LatencySummary lat;     // post to requester completion

  // Seen on the wire (frames this flow's QPs sent), so per flow even when
  // several flows share a host.
  uint64_t retransmits = 0;  // request packets with a PSN the QP had sent before
  uint64_t naks = 0;         // NAKs (PSN sequence error, invalid request, access, operation)
  uint64_t rnr_naks = 0;

  uint64_t errors = 0;  // work completions with an error status, both sides
  std::map<std::string, uint64_t> error_statuses;  // "IBV_WC_RETRY_EXC_ERR" -> n

  bool integrity_ok = true;
  uint64_t integrity_checked = 0;   // messages and atomics whose bytes were checked
  uint64_t integrity_failures = 0;
  std::string first_failure;        // what the first failure was

  uint64_t delivered = 0;       // receive completions at the destination(s)
  uint64_t ud_duplicates = 0;   // UD datagrams received more than once (the fabric duplicates)

  bool finished = false;  // every message completed, or the flow stopped on an error
  double start_us = 0;
  double end_us = 0;      // last completion, or the end of the run
};

}  // namespace isoroce::workload
