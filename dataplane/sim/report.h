// What a simulation run measured: per flow, per host (the engine's counters),
// the switch and the links, and the run itself. Plain data; tools/sim turns it
// into a table or JSON.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dataplane/sim/fabric.h"
#include "dataplane/sim/scenario.h"
#include "transport/engine/engine.h"

namespace isoroce::sim {

struct LatencySummary {
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0, mean_us = 0;
};

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

// One QP's DCQCN state at the end of the run.
struct QpDcqcnReport {
  uint32_t qpn = 0;
  std::string flow;
  bool requester = false;  // the flow's source side (the sender of its data)
  transport::QpDcqcnState state;
};

struct HostReport {
  std::string name;
  transport::EngineCounters engine;
  uint64_t stalls = 0;  // the engine asked to be called again at a time not after now
  bool dcqcn = false;   // DCQCN enabled on this host
  std::vector<QpDcqcnReport> dcqcn_qps;  // by QPN, when enabled
  // Policy justitia: the scheduler's state at the end, the reference flow, soft admission.
  bool has_justitia = false;
  sched::JustitiaStats justitia;
  uint64_t ref_probes = 0;          // reference latencies measured
  LatencySummary ref_latency;       // of all of them
  uint64_t admission_warnings = 0;  // latency QPs created while Current99 > Target99
  std::vector<std::string> log;     // one line per warning
};

struct SimReport {
  uint64_t seed = 0;
  std::vector<FlowReport> flows;
  std::vector<HostReport> hosts;  // in scenario order; switch port i is host i's
  FabricStats fabric;
  uint64_t events = 0;
  double virtual_us = 0;
  double wall_ms = 0;
  bool all_finished = false;  // every flow with a count finished before duration_us
};

}  // namespace isoroce::sim
