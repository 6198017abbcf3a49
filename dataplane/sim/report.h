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
#include "workload/flow_report.h"

namespace isoroce::sim {

using workload::FlowReport;
using workload::LatencySummary;

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
