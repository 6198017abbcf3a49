#include "workload/reference_probe.h"

#include <algorithm>
#include <cstring>

#include "workload/app_id.h"
#include "workload/rc_connect.h"

namespace isoroce::workload {
namespace {

std::string failed(const char* what, int err) { return std::string(what) + " failed: " + std::strerror(err); }

verbs::Result<wire::Qpn> make_qp(transport::Engine& e, transport::PdHandle pd, transport::CqHandle cq,
                                 uint32_t max_send_wr, uint32_t max_inline) {
  transport::QpCreate qc;
  qc.pd = pd;
  qc.send_cq = qc.recv_cq = cq;
  qc.init.qp_type = IBV_QPT_RC;
  qc.init.cap.max_send_wr = max_send_wr;
  qc.init.cap.max_recv_wr = 1;
  qc.init.cap.max_send_sge = 1;
  qc.init.cap.max_recv_sge = 1;
  qc.init.cap.max_inline_data = max_inline;
  return e.create_qp(qc);
}

// INIT -> RTR -> RTS towards the other end; 0 or the errno.
int connect(const ProbeEnd& self, uint32_t self_qpn, const ProbeEnd& peer, uint32_t peer_qpn) {
  RcPath p;
  p.peer_ip = peer.ip;
  p.peer_qpn = peer_qpn;
  p.sq_psn = self.psn;
  p.rq_psn = peer.psn;
  p.mtu = IBV_MTU_256;  // a probe is 10 bytes: any MTU both ports take
  return connect_rc(*self.engine, wire::Qpn(self_qpn), p);
}

}  // namespace

ReferenceProbe::ReferenceProbe(Picos period) : period_(std::max<Picos>(period, 1)) {}

std::string ReferenceProbe::create_src(const ProbeEnd& src) {
  src_ = src;
  transport::Engine& e = *src_.engine;
  auto cq = e.create_cq(4);
  if (!cq.ok()) return failed("create_cq", cq.err());
  src_cq_ = cq.value(), has_src_cq_ = true;
  auto qp = make_qp(e, src_.pd, src_cq_, 2, kProbeBytes);
  if (!qp.ok()) return failed("create_qp", qp.err());
  stats_.src_qpn = qp.value().value(), has_src_qp_ = true;
  return {};
}

std::string ReferenceProbe::create_dst(const ProbeEnd& dst) {
  dst_ = dst;
  transport::Engine& e = *dst_.engine;
  auto cq = e.create_cq(4);
  if (!cq.ok()) return failed("create_cq (peer)", cq.err());
  dst_cq_ = cq.value(), has_dst_cq_ = true;
  auto qp = make_qp(e, dst_.pd, dst_cq_, 1, 0);
  if (!qp.ok()) return failed("create_qp (peer)", qp.err());
  stats_.dst_qpn = qp.value().value(), has_dst_qp_ = true;
  return {};
}

std::string ReferenceProbe::connect_dst() {
  if (int rc = connect(dst_, stats_.dst_qpn, src_, stats_.src_qpn)) return failed("modify_qp (peer)", rc);
  // Its ACKs are the probe's too. Only the peer's policy reads the class (the
  // others accept and ignore it), so a refusal changes nothing for the probe.
  dst_.engine->set_qp_class(0, wire::Qpn(stats_.dst_qpn), sched::FlowClass::kReference, kReferenceApp, 1);
  return {};
}

std::string ReferenceProbe::connect_src(Picos now) {
  transport::Engine& e = *src_.engine;
  if (int rc = connect(src_, stats_.src_qpn, dst_, stats_.dst_qpn)) return failed("modify_qp", rc);
  if (int rc = e.set_qp_class(now, wire::Qpn(stats_.src_qpn), sched::FlowClass::kReference, kReferenceApp, 1))
    return failed("set_qp_class", rc);
  stats_.running = true;
  next_due_ = now;
  return {};
}

void ReferenceProbe::destroy_src() {
  stats_.running = false;
  outstanding_ = false;
  if (has_src_qp_) src_.engine->destroy_qp(wire::Qpn(stats_.src_qpn));
  if (has_src_cq_) src_.engine->destroy_cq(src_cq_);
  has_src_qp_ = has_src_cq_ = false;
}

void ReferenceProbe::destroy_dst() {
  if (has_dst_qp_) dst_.engine->destroy_qp(wire::Qpn(stats_.dst_qpn));
  if (has_dst_cq_) dst_.engine->destroy_cq(dst_cq_);
  has_dst_qp_ = has_dst_cq_ = false;
}

bool ReferenceProbe::post(Picos now) {
  // The next probe is due at the first grid point after now.
  next_due_ += period_ * ((now - next_due_) / period_ + 1);
  const uint64_t seq = seq_++;
  std::memset(src_.mem, static_cast<int>(seq & 0xff), kProbeBytes);
  transport::Sge sge{reinterpret_cast<uintptr_t>(src_.mem), kProbeBytes, src_.lkey};
  transport::SendWr wr;
  wr.wr_id = seq;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  wr.remote_addr = dst_.iova;
  wr.rkey = dst_.rkey;
  if (src_.engine->post_send(now, wire::Qpn(stats_.src_qpn), wr) != 0) {
    ++stats_.errors;  // queue full or the QP left RTS: try again at the next grid point
    mark(now, ProbeMark::kRefused, seq);
    return false;
  }
  ++stats_.posted;
  outstanding_ = true;
  posted_at_ = now;
  mark(now, ProbeMark::kPost, seq);
  return true;
}

ProbeStep ReferenceProbe::on_time(Picos now) {
  ProbeStep s;
  if (!stats_.running || outstanding_ || now < next_due_) return s;
  s.posted = post(now);
  ++s.work;
  return s;
}

ProbeStep ReferenceProbe::on_completion(Picos now, const ibv_wc& wc) {
  ProbeStep s;
  if (!stats_.running || !outstanding_) return s;
  if (wc.status == IBV_WC_SUCCESS && wc.opcode != IBV_WC_RDMA_WRITE) return s;
  outstanding_ = false;
  if (wc.status != IBV_WC_SUCCESS) {
    ++stats_.errors;
    stats_.failed = true;
    stats_.running = false;  // the QP is in ERR: the flow is over (the driver says so)
    mark(now, ProbeMark::kError, wc.wr_id);
    return s;
  }
  const Picos lat = now - posted_at_;
  src_.engine->add_reference_latency(now, lat);
  ++stats_.completed;
  stats_.last = lat;
  stats_.min = stats_.completed == 1 ? lat : std::min(stats_.min, lat);
  stats_.max = std::max(stats_.max, lat);
  s.latency = lat;
  mark(now, ProbeMark::kComplete, wc.wr_id);
  if (now >= next_due_) {  // due while this one was out: late, now
    s.posted = post(now);
    ++s.work;
  }
  return s;
}

ProbeStep ReferenceProbe::poll(Picos now) {
  ProbeStep s;
  if (!stats_.running) return s;
  if (outstanding_) {
    ibv_wc wc[2];
    const int n = src_.engine->poll_cq(src_cq_, wc);
    for (int i = 0; i < n; ++i) {
      const ProbeStep c = on_completion(now, wc[i]);
      ++s.work;
      s.work += c.work;
      s.posted = s.posted || c.posted;
      if (c.latency) s.latency = c.latency;
    }
  }
  const ProbeStep t = on_time(now);
  s.posted = s.posted || t.posted;
  s.work += t.work;
  return s;
}

Picos ReferenceProbe::next_deadline() const {
  if (!stats_.running || outstanding_) return sched::kNever;
  return next_due_;
}

}  // namespace isoroce::workload
