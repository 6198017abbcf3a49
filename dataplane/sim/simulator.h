// The deterministic simulator: a Scenario's hosts (one transport::Engine each),
// its fabric (dataplane/sim/fabric.h) and its flows (applications that post
// work requests, check every byte and atomic result, and measure latency), all
// driven by one event queue in virtual time (picoseconds). Single-threaded; the
// same scenario and seed give the same SimReport, wall_ms aside.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "dataplane/sim/report.h"
#include "dataplane/sim/scenario.h"
#include "sched/trace.h"
#include "workload/flow.h"
#include "workload/reference_probe.h"

namespace isoroce::sim {

namespace detail {
struct World;
}

// A frame seen at a host's NIC: sent (at its departure on the uplink) or
// received (when it reached the host, after the fabric's faults).
struct TapFrame {
  Picos time = 0;
  uint32_t host = 0;
  bool tx = true;
  std::span<const uint8_t> bytes;
};
using FrameTap = std::function<void(const TapFrame&)>;
using ProbeTap = std::function<void(uint32_t host, const workload::ProbeMark&)>;

// The state of the run at one instant (Simulator::set_sampler).
struct QpSample {
  uint32_t host = 0;
  uint32_t qpn = 0;
  int32_t flow = -1;          // the scenario's flow index; -1: the host's reference probe
  bool requester = false;
  uint64_t rate_bps = 0;      // the scheduler's limit (DCQCN's and the user's); 0: none
  uint64_t tx_bytes = 0;      // frames the QP sent so far (transport::QpCounters)
  uint64_t rx_bytes = 0;
};
struct HostSample {
  uint64_t queue_bytes = 0;   // the switch's output queue toward the host
  bool justitia = false;      // the two below are set
  uint64_t safe_util_bps = 0;
  uint32_t tokens = 0;        // whole tokens banked
  Picos current99 = 0;
};
struct SimSample {
  Picos time = 0;
  std::vector<HostSample> hosts;  // by host index
  std::vector<QpSample> qps;      // by host, then QPN
};
using Sampler = std::function<void(const SimSample&)>;

class Simulator {
 public:
  // Validates the scenario and builds everything (engines, QPs in RTS, memory).
  // nullptr and *error filled if the scenario is invalid or setup fails.
  static std::unique_ptr<Simulator> create(const Scenario& scenario, ScenarioError* error);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Runs until duration, or until every flow has finished and the fabric is
  // empty. Call once.
  SimReport run();

  // Called for every frame a host sends and receives (for captures). Set before run().
  void set_tap(FrameTap tap);
  // Called for every post and completion of a justitia host's reference probe
  // (host: its index). Set before run().
  void set_probe_tap(ProbeTap tap);
  // Records the trace events of `mask` of every host's engine and scheduler
  // (sched/trace.h) into `sink`, with the host index as the port. Set before run().
  void set_trace(trace::Sink* sink, trace::EventMask mask);
  // Calls `sampler` at 0, period, 2 period ... while the run lasts, and once at its
  // end. Sampling changes nothing in the run. Set before run().
  void set_sampler(Picos period, Sampler sampler);

 private:
  explicit Simulator(std::unique_ptr<detail::World> world);
  std::unique_ptr<detail::World> world_;
};

// "IBV_WC_RETRY_EXC_ERR" for IBV_WC_RETRY_EXC_ERR, and so on.
using workload::wc_status_name;

// Where flow `flow` of the scenario runs (hosts: the scenario's, in its order)
// and what the scenario decides for it: its seed, path MTU and application.
// The simulator and isoroce-ctl run place flows alike.
workload::FlowPlace flow_place(const Scenario& s, uint32_t flow, std::span<workload::FlowHost* const> hosts);

}  // namespace isoroce::sim
