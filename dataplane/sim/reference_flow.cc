#include "dataplane/sim/reference_flow.h"

#include "transport/engine/rc_connect.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace isoroce::sim::detail {

namespace {
constexpr uint32_t kRefApp = 0xffff'fffe;  // the policy's own "application" (not sched::kOwnApp)
}  // namespace

ReferenceFlow::ReferenceFlow(World& w, uint32_t index, Host* src, Host* dst)
    : w_(w), index_(index), src_(src), dst_(dst), period_(src->config().justitia.ref_period) {}

std::optional<ScenarioError> ReferenceFlow::setup() {
  const std::string key = "host[" + std::to_string(src_->index()) + "].justitia";
  auto fail = [&](const char* what, int err) {
    return ScenarioError{key, std::string("reference flow: ") + what + " failed: " + std::strerror(err)};
  };
  transport::Engine& se = src_->engine();
  transport::Engine& de = dst_->engine();
  auto cq = se.create_cq(4);
  if (!cq.ok()) return fail("create_cq", cq.err());
  cq_ = cq.value();
  src_->bind_cq(cq_, this);
  auto dcq = de.create_cq(4);
  if (!dcq.ok()) return fail("create_cq (peer)", dcq.err());
  if (auto e = src_->alloc_region(64, IBV_ACCESS_LOCAL_WRITE, &local_)) return e;
  if (auto e = dst_->alloc_region(64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &remote_)) return e;

  auto make_qp = [&](transport::Engine& e, transport::PdHandle pd, transport::CqHandle c) {
    transport::QpCreate qc;
    qc.pd = pd;
    qc.send_cq = qc.recv_cq = c;
    qc.init.qp_type = IBV_QPT_RC;
    qc.init.cap.max_send_wr = 2;
    qc.init.cap.max_recv_wr = 1;
    qc.init.cap.max_send_sge = 1;
    qc.init.cap.max_recv_sge = 1;
    qc.init.cap.max_inline_data = kProbeBytes;
    return e.create_qp(qc);
  };
  auto sq = make_qp(se, src_->pd(), cq_);
  if (!sq.ok()) return fail("create_qp", sq.err());
  auto dq = make_qp(de, dst_->pd(), dcq.value());
  if (!dq.ok()) return fail("create_qp (peer)", dq.err());
  qpn_ = sq.value();
  Rng rng(component_seed(w_.scenario.seed, component::kFlow + 0x10000 + index_));
  const wire::Psn spsn(static_cast<uint32_t>(rng.next()) & wire::kMask24);
  const wire::Psn dpsn(static_cast<uint32_t>(rng.next()) & wire::kMask24);
  auto connect = [](transport::Engine& e, wire::Qpn self, const wire::IpAddr& peer_ip, wire::Qpn peer,
                    wire::Psn sq_psn, wire::Psn rq_psn) {
    transport::RcPath p;
    p.peer_ip = peer_ip;
    p.peer_qpn = peer.value();
    p.sq_psn = sq_psn.value();
    p.rq_psn = rq_psn.value();
    return transport::connect_rc(e, self, p);
  };
  if (int rc = connect(se, qpn_, dst_->config().ip, dq.value(), spsn, dpsn)) return fail("modify_qp", rc);
  if (int rc = connect(de, dq.value(), src_->config().ip, qpn_, dpsn, spsn)) return fail("modify_qp (peer)", rc);
  if (int rc = se.set_qp_class(0, qpn_, sched::FlowClass::kReference, kRefApp, 1)) return fail("set_qp_class", rc);
  return std::nullopt;
}

void ReferenceFlow::on_probe_event(Picos now) {
  w_.events.push(now + period_, EventKind::kRefProbe, index_);
  if (failed_) return;
  if (outstanding_) {
    due_ = true;  // posted when the last one completes
    return;
  }
  post(now);
}

void ReferenceFlow::post(Picos now) {
  std::memset(local_.at(0), static_cast<int>(seq_ & 0xff), kProbeBytes);
  transport::Sge sge{reinterpret_cast<uintptr_t>(local_.at(0)), kProbeBytes, local_.lkey};
  transport::SendWr wr;
  wr.wr_id = seq_++;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  wr.remote_addr = remote_.va(0);
  wr.rkey = remote_.rkey;
  if (src_->engine().post_send(now, qpn_, wr) != 0) {
    failed_ = true;
    return;
  }
  outstanding_ = true;
  posted_at_ = now;
  src_->request_service(now);
}

void ReferenceFlow::on_completion(Picos now, const ibv_wc& wc) {
  outstanding_ = false;
  if (wc.status != IBV_WC_SUCCESS) {
    failed_ = true;
    return;
  }
  lat_.push_back(now - posted_at_);
  src_->engine().add_reference_latency(now, now - posted_at_);
  if (due_) {
    due_ = false;
    post(now);
  }
}

LatencySummary ReferenceFlow::latency() const {
  LatencySummary s;
  if (lat_.empty()) return s;
  std::vector<Picos> v = lat_;
  std::sort(v.begin(), v.end());
  auto rank = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    i = std::clamp<size_t>(i, 1, v.size());
    return static_cast<double>(v[i - 1]) / 1e6;
  };
  s.p50_us = rank(0.5);
  s.p99_us = rank(0.99);
  s.p999_us = rank(0.999);
  s.max_us = static_cast<double>(v.back()) / 1e6;
  long double sum = 0;
  for (Picos p : v) sum += p;
  s.mean_us = static_cast<double>(sum / v.size() / 1e6);
  return s;
}

}  // namespace isoroce::sim::detail
