#include "dataplane/sim/reference_flow.h"

#include <string>

namespace isoroce::sim::detail {

ReferenceFlow::ReferenceFlow(World& w, uint32_t index, Host* src, Host* dst)
    : w_(w), index_(index), src_(src), dst_(dst), probe_(src->config().justitia.ref_period) {}

std::optional<ScenarioError> ReferenceFlow::setup() {
  const std::string key = "host[" + std::to_string(src_->index()) + "].justitia";
  if (auto e = src_->alloc_region(64, IBV_ACCESS_LOCAL_WRITE, &local_)) return e;
  if (auto e = dst_->alloc_region(64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &remote_)) return e;
  Rng rng(component_seed(w_.scenario.seed, component::kFlow + 0x10000 + index_));
  auto end = [&](Host* h, const Region& r) {
    workload::ProbeEnd e;
    e.engine = &h->engine();
    e.pd = h->pd();
    e.ip = h->ip();
    e.mem = r.at(0);
    e.iova = r.va(0);
    e.lkey = r.lkey;
    e.rkey = r.rkey;
    e.psn = static_cast<uint32_t>(rng.next()) & wire::kMask24;
    return e;
  };
  const workload::ProbeEnd src = end(src_, local_);
  const workload::ProbeEnd dst = end(dst_, remote_);
  std::string error = probe_.create_src(src);
  if (error.empty()) error = probe_.create_dst(dst);
  if (error.empty()) error = probe_.connect_dst();
  if (error.empty()) error = probe_.connect_src(0);
  if (!error.empty()) return ScenarioError{key, "reference flow: " + error};
  src_->bind_cq(probe_.src_cq(), this);
  return std::nullopt;
}

void ReferenceFlow::on_probe_event(Picos now) {
  w_.events.push(now + probe_.period(), EventKind::kRefProbe, index_);
  if (probe_.on_time(now).posted) src_->request_service(now);
}

void ReferenceFlow::on_completion(Picos now, const ibv_wc& wc) {
  const workload::ProbeStep s = probe_.on_completion(now, wc);
  if (s.latency) lat_.push_back(*s.latency);
  if (s.posted) src_->request_service(now);
}

}  // namespace isoroce::sim::detail
