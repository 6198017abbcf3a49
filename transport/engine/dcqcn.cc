// DCQCN in the engine: the notification point (a CE-marked data packet makes
// its QP send a CNP to the sender, at most one per min_time_between_cnps_us)
// and the wiring of each QP's reaction point (transport/dcqcn/) to the port
// scheduler's per-QP rate limit. docs/dcqcn.md, docs/engine.md.
#include <algorithm>

#include "transport/engine/engine_impl.h"

namespace isoroce::transport::detail {

uint32_t EngineImpl::cnp_frame_bytes() const { return frame_len(wire::op::kCnp, 0) + kEthWireOverhead; }

void EngineImpl::np_check_ce(Picos now, QpCtx& q, const wire::RocePacket& pkt) {
  // CE on a data packet (a request or a READ response) of an RC QP from its
  // peer; never on an ACK or a CNP.
  const wire::OpcodeInfo& op = *pkt.op;
  if (op.transport == wire::Transport::kRc && q.qp.type() == IBV_QPT_RC && pkt.src_ip == q.peer.ip &&
      op.kind != wire::OpKind::kAck && op.kind != wire::OpKind::kAtomicAck) {
    np_on_ce(now, q);
  } else if (op.transport == wire::Transport::kUd && q.qp.type() == IBV_QPT_UD && pkt.deth &&
             pkt.deth->qkey == q.qp.attr().qkey) {
    // UD: the CNP goes to the datagram's source QP, at its address (the
    // neighbour entry's MAC, else the frame's source MAC).
    Peer src;
    src.ip = pkt.src_ip;
    auto it = neighbors_.find(pkt.src_ip);
    src.mac = it != neighbors_.end() ? it->second : pkt.src_mac;
    np_on_ce(now, q, &src, pkt.deth->src_qp);
  }
}

void EngineImpl::np_on_ce(Picos now, QpCtx& q, const Peer* ud_peer, uint32_t ud_qpn) {
  ++counters_.ce_received;
  ++q.ce_received;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return;
  // A CNP already waiting covers this packet too; otherwise one per period.
  const Picos gap = dcqcn::us_to_picos(config_.dcqcn.min_time_between_cnps_us);
  if (q.cnp_queued ||
      (q.last_cnp != sched::kNever && config_.dcqcn.min_time_between_cnps_us > 0 && now < q.last_cnp + gap)) {
    ++counters_.cnps_suppressed;
    return;
  }
  if (!sched_->enqueue_control(now, q.slot, cnp_frame_bytes())) {
    ++counters_.cnps_suppressed;
    return;
  }
  q.cnp_queued = true;
  q.last_cnp = now;
  if (ud_peer != nullptr) {
    q.cnp_peer = *ud_peer;
    q.cnp_qpn = ud_qpn;
  }
}

// Opcode 0x81, BECN, dest QP = the sender's QPN, 16 reserved bytes, ICRC
// (IBTA annex A17.9.3); DSCP cnp_dscp, not ECN-capable.
size_t EngineImpl::build_cnp(QpCtx& q, std::span<uint8_t> out) {
  q.cnp_queued = false;
  const bool ud = q.qp.type() == IBV_QPT_UD;
  wire::FrameSpec& spec = frame_spec(q, ud ? q.cnp_peer : q.peer, wire::op::kCnp, wire::Psn(0),
                                    ud ? q.cnp_qpn : q.qp.dest_qpn().value(), false);
  spec.traffic_class = static_cast<uint8_t>(config_.dcqcn.cnp_dscp << 2);
  spec.becn = true;
  spec.ack_req = false;
  const wire::BuildResult r = wire::build_frame(spec, out);
  if (!r.ok()) return 0;
  ++counters_.cnps_sent;
  ++q.cnps_sent;
  return r.len;
}

void EngineImpl::on_cnp(Picos now, QpCtx& q) {
  trace(now, trace::Event::kCnp, q, 0, 0, 1);
  ++counters_.cnps_received;
  ++q.cnps_received;
  if (!config_.dcqcn.enabled) return;
  if (!q.rp.configured()) q.rp = dcqcn::ReactionPoint(&config_.dcqcn, config_.link_bps);
  q.rp.on_cnp(now);
  apply_rate(now, q);
  if (q.rp.next_deadline() != sched::kNever) schedule_timer(q, q.rp.next_deadline());
}

void EngineImpl::dcqcn_timer(Picos now, QpCtx& q) {
  if (!q.rp.configured()) return;
  if (q.rp.advance(now)) apply_rate(now, q);
  if (q.rp.next_deadline() != sched::kNever) schedule_timer(q, q.rp.next_deadline());
}

void EngineImpl::apply_rate(Picos now, QpCtx& q) {
  if (trace_.mask() != 0 && q.rp.configured()) [[unlikely]] {
    const dcqcn::RpCounters& c = q.rp.counters();
    if (c.decreases != q.traced_cuts)
      trace(now, trace::Event::kDcqcnCut, q, 0, 0, q.rp.rate_bps(),
            static_cast<uint64_t>(q.rp.alpha() * (1 << 20)));
    if (c.increases != q.traced_increases)
      trace(now, trace::Event::kDcqcnIncrease, q, 0, 0, q.rp.rate_bps(), q.rp.target_bps());
    q.traced_cuts = c.decreases;
    q.traced_increases = c.increases;
  }
  uint64_t bps = q.user_rate_bps;
  if (q.rp.configured() && q.rp.limiting()) {
    const uint64_t cc = std::max<uint64_t>(1, q.rp.rate_bps());
    bps = bps == sched::kUnlimited ? cc : std::min(bps, cc);
  }
  if (bps == q.applied_rate_bps) return;
  q.applied_rate_bps = bps;
  sched_->set_rate(now, q.slot, bps);
}

QpDcqcnState EngineImpl::qp_dcqcn(wire::Qpn qpn) const {
  QpDcqcnState s;
  const QpCtx* q = find_qp(qpn);
  if (q == nullptr) return s;
  s.ce_received = q->ce_received;
  s.cnps_sent = q->cnps_sent;
  s.cnps_received = q->cnps_received;
  if (q->rp.configured()) {
    s.limiting = q->rp.limiting();
    s.rate_bps = q->rp.rate_bps();
    s.target_bps = q->rp.target_bps();
    s.alpha = q->rp.alpha();
    s.decreases = q->rp.counters().decreases;
    s.increases = q->rp.counters().increases;
  } else {
    s.rate_bps = s.target_bps = config_.link_bps;
  }
  return s;
}

}  // namespace isoroce::transport::detail
