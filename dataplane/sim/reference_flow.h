// The simulator's driver of the justitia policy's reference flow
// (workload/reference_probe.h, the probe isoroced runs too): a probe from a
// host to its ref_peer host, a timer event at every grid point
// (EventKind::kRefProbe) and the completions of its CQ from the host's poll.
// The memory comes from the hosts (deterministic iovas), the PSNs from the
// scenario's seed; each latency is kept for the host's report.
#pragma once

#include <optional>
#include <vector>

#include "dataplane/sim/sim_internal.h"
#include "workload/reference_probe.h"

namespace isoroce::sim::detail {

class ReferenceFlow {
 public:
  ReferenceFlow(World& w, uint32_t index, Host* src, Host* dst);
  std::optional<ScenarioError> setup();  // at time 0: memory, CQs, QP pair to RTS
  void on_probe_event(Picos now);        // EventKind::kRefProbe
  void on_completion(Picos now, const ibv_wc& wc);
  uint64_t probes() const { return lat_.size(); }
  LatencySummary latency() const { return workload::summarize(lat_); }
  workload::ReferenceProbe& probe() { return probe_; }
  uint32_t host() const { return src_->index(); }

 private:
  World& w_;
  uint32_t index_;
  Host* src_;
  Host* dst_;
  workload::ReferenceProbe probe_;
  Region local_, remote_;
  std::vector<Picos> lat_;
};

}  // namespace isoroce::sim::detail
