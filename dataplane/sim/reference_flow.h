// The justitia policy's reference flow (Justitia's "reference flow"): a tiny RC QP
// pair from a host to a peer host that posts a 10-byte RDMA WRITE every RefPeriod
// and hands each latency, post to completion, to the host engine's scheduler
// (Engine::add_reference_latency), which keeps Current99 and adjusts SafeUtil.
// One probe is outstanding at a time: a probe due while the last one is still out
// is posted when it completes. Its QP is of class kReference: served like a
// latency-class QP, never counted as a latency flow.
#pragma once

#include <optional>
#include <vector>

#include "dataplane/sim/sim_internal.h"

namespace isoroce::sim::detail {

class ReferenceFlow {
 public:
  static constexpr uint32_t kProbeBytes = 10;

  ReferenceFlow(World& w, uint32_t index, Host* src, Host* dst);
  std::optional<ScenarioError> setup();  // at time 0: CQ, memory, QP pair to RTS
  void on_probe_event(Picos now);        // EventKind::kRefProbe
  void on_completion(Picos now, const ibv_wc& wc);
  uint64_t probes() const { return lat_.size(); }
  LatencySummary latency() const;

 private:
  void post(Picos now);

  World& w_;
  uint32_t index_;
  Host* src_;
  Host* dst_;
  Picos period_;
  transport::CqHandle cq_ = 0;
  Region local_, remote_;
  wire::Qpn qpn_;
  bool outstanding_ = false;
  bool due_ = false;
  bool failed_ = false;
  Picos posted_at_ = 0;
  uint64_t seq_ = 0;
  std::vector<Picos> lat_;
};

}  // namespace isoroce::sim::detail
