#include "ctrl/reference_flow.h"

#include "transport/engine/rc_connect.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace isoroce::ctrl {
namespace {

constexpr uint32_t kRegion = 64;

std::string failed(const char* what, int err) { return std::string(what) + " failed: " + std::strerror(err); }

// INIT -> RTR -> RTS towards (peer_ip, peer_qpn); 0 or the errno.
int connect(transport::Engine& e, wire::Qpn self, const wire::IpAddr& peer_ip, uint32_t peer_qpn, uint32_t sq_psn,
            uint32_t rq_psn) {
  transport::RcPath p;
  p.peer_ip = peer_ip;
  p.peer_qpn = peer_qpn;
  p.sq_psn = sq_psn;
  p.rq_psn = rq_psn;
  p.mtu = IBV_MTU_256;  // a probe is 10 bytes: any MTU both ports take
  return transport::connect_rc(e, self, p);
}

}  // namespace

ReferenceFlow::ReferenceFlow(dataplane::Device& src, dataplane::Device& dst, sched::Picos period)
    : src_(src), dst_(dst), period_(std::max<sched::Picos>(period, 1)),
      local_(new uint8_t[kRegion]()), remote_(new uint8_t[kRegion]()) {
  std::random_device rd;
  src_psn_ = rd() & wire::kMask24;
  dst_psn_ = rd() & wire::kMask24;
}

ReferenceFlow::~ReferenceFlow() = default;

std::string ReferenceFlow::create_src() {
  transport::Engine& e = src_.engine();
  auto pd = e.alloc_pd();
  if (!pd.ok()) return failed("alloc_pd", pd.err());
  s_.pd = pd.value(), s_.has_pd = true;
  auto cq = e.create_cq(4);
  if (!cq.ok()) return failed("create_cq", cq.err());
  s_.cq = cq.value(), s_.has_cq = true;
  auto mr = e.reg_mr(s_.pd, local_.get(), kRegion, reinterpret_cast<uint64_t>(local_.get()), IBV_ACCESS_LOCAL_WRITE);
  if (!mr.ok()) return failed("reg_mr", mr.err());
  s_.lkey = mr.value().lkey, s_.rkey = mr.value().rkey, s_.has_mr = true;
  transport::QpCreate qc;
  qc.pd = s_.pd;
  qc.send_cq = qc.recv_cq = s_.cq;
  qc.init.qp_type = IBV_QPT_RC;
  qc.init.cap.max_send_wr = 2;
  qc.init.cap.max_recv_wr = 1;
  qc.init.cap.max_send_sge = 1;
  qc.init.cap.max_recv_sge = 1;
  qc.init.cap.max_inline_data = kProbeBytes;
  auto qp = e.create_qp(qc);
  if (!qp.ok()) return failed("create_qp", qp.err());
  s_.qpn = qp.value().value(), s_.has_qp = true;
  stats_.src_qpn = s_.qpn;
  return {};
}

std::string ReferenceFlow::create_dst() {
  transport::Engine& e = dst_.engine();
  auto pd = e.alloc_pd();
  if (!pd.ok()) return failed("alloc_pd (peer)", pd.err());
  d_.pd = pd.value(), d_.has_pd = true;
  auto cq = e.create_cq(4);
  if (!cq.ok()) return failed("create_cq (peer)", cq.err());
  d_.cq = cq.value(), d_.has_cq = true;
  auto mr = e.reg_mr(d_.pd, remote_.get(), kRegion, reinterpret_cast<uint64_t>(remote_.get()),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr.ok()) return failed("reg_mr (peer)", mr.err());
  d_.lkey = mr.value().lkey, d_.rkey = mr.value().rkey, d_.has_mr = true;
  transport::QpCreate qc;
  qc.pd = d_.pd;
  qc.send_cq = qc.recv_cq = d_.cq;
  qc.init.qp_type = IBV_QPT_RC;
  qc.init.cap.max_send_wr = 1;
  qc.init.cap.max_recv_wr = 1;
  qc.init.cap.max_send_sge = 1;
  qc.init.cap.max_recv_sge = 1;
  auto qp = e.create_qp(qc);
  if (!qp.ok()) return failed("create_qp (peer)", qp.err());
  d_.qpn = qp.value().value(), d_.has_qp = true;
  stats_.dst_qpn = d_.qpn;
  return {};
}

std::string ReferenceFlow::connect_dst() {
  transport::Engine& e = dst_.engine();
  if (int rc = connect(e, wire::Qpn(d_.qpn), src_.config().ip, s_.qpn, dst_psn_, src_psn_))
    return failed("modify_qp (peer)", rc);
  // Its ACKs are the probe's too (other policies ignore the class).
  e.set_qp_class(0, wire::Qpn(d_.qpn), sched::FlowClass::kReference, kApp, 1);
  return {};
}

std::string ReferenceFlow::connect_src(sched::Picos now) {
  transport::Engine& e = src_.engine();
  if (int rc = connect(e, wire::Qpn(s_.qpn), dst_.config().ip, d_.qpn, src_psn_, dst_psn_))
    return failed("modify_qp", rc);
  if (int rc = e.set_qp_class(now, wire::Qpn(s_.qpn), sched::FlowClass::kReference, kApp, 1))
    return failed("set_qp_class", rc);
  stats_.running = true;
  next_due_ = now;
  src_.add_hook(this);
  hooked_ = true;
  return {};
}

void ReferenceFlow::destroy_src() {
  if (hooked_) src_.remove_hook(this), hooked_ = false;
  stats_.running = false;
  transport::Engine& e = src_.engine();
  if (s_.has_qp) e.destroy_qp(wire::Qpn(s_.qpn));
  if (s_.has_cq) e.destroy_cq(s_.cq);
  if (s_.has_mr) e.dereg_mr(s_.lkey);
  if (s_.has_pd) e.dealloc_pd(s_.pd);
  s_ = End{};
}

void ReferenceFlow::destroy_dst() {
  transport::Engine& e = dst_.engine();
  if (d_.has_qp) e.destroy_qp(wire::Qpn(d_.qpn));
  if (d_.has_cq) e.destroy_cq(d_.cq);
  if (d_.has_mr) e.dereg_mr(d_.lkey);
  if (d_.has_pd) e.dealloc_pd(d_.pd);
  d_ = End{};
}

void ReferenceFlow::post(sched::Picos now) {
  std::memset(local_.get(), static_cast<int>(seq_ & 0xff), kProbeBytes);
  transport::Sge sge{reinterpret_cast<uint64_t>(local_.get()), kProbeBytes, s_.lkey};
  transport::SendWr wr;
  wr.wr_id = seq_++;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  wr.remote_addr = reinterpret_cast<uint64_t>(remote_.get());
  wr.rkey = d_.rkey;
  if (src_.engine().post_send(now, wire::Qpn(s_.qpn), wr) != 0) {
    ++stats_.errors;
    return;  // queue full or the QP left RTS: try again at the next period
  }
  ++stats_.posted;
  outstanding_ = true;
  posted_at_ = now;
}

unsigned ReferenceFlow::poll(sched::Picos now) {
  if (!stats_.running) return 0;
  unsigned work = 0;
  transport::Engine& e = src_.engine();
  if (outstanding_) {
    ibv_wc wc[2];
    const int n = e.poll_cq(s_.cq, wc);
    for (int i = 0; i < n; ++i) {
      ++work;
      if (wc[i].opcode != IBV_WC_RDMA_WRITE && wc[i].status == IBV_WC_SUCCESS) continue;
      outstanding_ = false;
      if (wc[i].status != IBV_WC_SUCCESS) {
        ++stats_.errors;
        stats_.failed = true;
        stats_.running = false;  // the QP is in ERR: the flow is over (the daemon says so)
        return work;
      }
      const sched::Picos lat = now - posted_at_;
      e.add_reference_latency(now, lat);
      ++stats_.completed;
      stats_.last = lat;
      stats_.min = stats_.completed == 1 ? lat : std::min(stats_.min, lat);
      stats_.max = std::max(stats_.max, lat);
    }
  }
  if (!outstanding_ && now >= next_due_) {
    post(now);
    next_due_ += period_;
    if (next_due_ <= now) next_due_ = now + period_;  // late: no burst of catch-up probes
    ++work;
  }
  return work;
}

sched::Picos ReferenceFlow::next_deadline() const {
  if (!stats_.running || outstanding_) return sched::kNever;  // the ACK arrives as received work
  return next_due_;
}

}  // namespace isoroce::ctrl
