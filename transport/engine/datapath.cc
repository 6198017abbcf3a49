// The engine's data path: received frames to the QP that owns them, timers,
// and transmission through the port scheduler. A QP is active in the
// scheduler while it has a packet ready; each grant takes that packet's
// descriptor (on_grant, during the scheduler's dequeue) and the frame is built
// right after the dequeue, straight into the driver's buffer.
#include <algorithm>
#include <array>

#include <cstring>

#include "transport/engine/engine_impl.h"
#include "transport/wire/icrc.h"
#include "transport/wire/parse.h"

namespace isoroce::transport::detail {

wire::FrameSpec& EngineImpl::frame_spec(const QpCtx& q, const Peer& peer, uint8_t opcode,
                                        wire::Psn psn, uint32_t dest_qpn, bool data) {
  // The per-frame fields, then the path's (what a header template holds).
  wire::FrameSpec& s = frame_fields(peer, opcode, psn, data);
  s.dst_mac = peer.mac;
  s.src_mac = config_.mac;
  s.vlan_tci.reset();
  s.src_ip = config_.ip;
  s.dst_ip = peer.ip;
  s.hop_limit = peer.hop_limit;
  s.flow_label = peer.flow_label;
  s.ip_id = 0;
  s.dont_fragment = true;
  s.udp_sport = q.udp_sport;
  s.pkey = 0xffff;
  s.dest_qp = wire::Qpn(dest_qpn);
  s.payload = {};
  return s;
}

void EngineImpl::make_template(const QpCtx& q, const Peer& peer, uint32_t dest_qpn, uint16_t sport,
                               wire::HeaderTemplate* t) {
  wire::FrameSpec& s = frame_spec(q, peer, wire::op::kRcAck, wire::Psn(0), dest_qpn, false);
  s.udp_sport = sport;
  (void)wire::make_header_template(s, t);  // not built on a mixed pair: frames use the whole spec
}

// The address family is the port's (resolve_peer() refuses a mixed pair) and
// the engine sends untagged frames.
void EngineImpl::receive(Picos now, std::span<uint8_t> frame) {
  if (now > tx_now_) tx_now_ = now;
  if (now > trace_now_) trace_now_ = now;
  ++counters_.rx_frames;
  // The ICRC is checked here, except for a WRITE's payload packets bound for one of
  // our RC QPs from its peer: those are checked while the payload is copied into the
  // MR (resp_execute_write), so each payload byte is read once.
  static constexpr wire::ParseOptions kNoIcrc{.verify_icrc = false};
  wire::ParseResult r = wire::parse_frame(frame, kNoIcrc);
  QpCtx* pending_qp = nullptr;  // the QP of a frame whose ICRC is checked at the copy
  if (r.ok()) {
    pending_qp = icrc_deferrable(r.pkt);
    if (pending_qp != nullptr) {
      // icrc_deferrable() made every check below that such a frame must pass (for
      // the port, its QP an RC QP, from that QP's peer, RC transport, not CE-marked):
      // straight to the QP, as below.
      QpCtx& q = *pending_qp;
      trace(now, trace::Event::kFrameRx, q, r.pkt.psn.value(), static_cast<uint32_t>(frame.size()), r.pkt.opcode);
      count_rx(q, frame.size());
      if (r.pkt.op->kind == wire::OpKind::kReadResponse) {
        on_response(now, q, r.pkt, frame, true);
      } else if (r.pkt.op->kind == wire::OpKind::kWrite && rx_write_continues(now, q, r.pkt, frame)) {
        // A WRITE's middle or last packet in order (most packets of a long WRITE).
      } else if (r.pkt.opcode == wire::op::kRcSendMiddle && rx_send_continues(now, q, r.pkt, frame)) {
        // A SEND's middle packet in order.
      } else if ((r.pkt.opcode == wire::op::kRcSendOnly || r.pkt.opcode == wire::op::kRcSendFirst ||
                  r.pkt.opcode == wire::op::kRcSendOnlyImm) &&
                 rx_send_first(now, q, r.pkt, frame)) {
        // A SEND's first or only packet in order into the next receive (every packet of
        // a one-packet SEND).
      } else {
        on_request(now, q, r.pkt, frame, true);
      }
      return;
    }
    if (wire::icrc_compute(frame, r.pkt.l3_offset, frame.size() - wire::kIcrcBytes) != r.pkt.icrc) {
      r.error = wire::ParseError::kBadIcrc;
    }
  }
  if (!r.ok()) {
    ++counters_.rx_parse_errors;
    const bool icrc = r.error == wire::ParseError::kBadIcrc;
    if (icrc) ++counters_.rx_bad_icrc;
    ++counters_.rx_dropped;
    trace_drop(now, r.pkt.dest_qp.value(), frame.size(), icrc ? DropReason::kBadIcrc : DropReason::kParseError);
    return;
  }
  const wire::RocePacket& pkt = r.pkt;
  if (!same_ip(pkt.dst_ip, config_.ip) || (pkt.pkey & 0x7fff) != 0x7fff) {
    ++counters_.rx_not_for_port;
    ++counters_.rx_dropped;
    trace_drop(now, pkt.dest_qp.value(), frame.size(), DropReason::kNotForPort);
    return;
  }
  QpCtx* q = find_qp(pkt.dest_qp);
  if (q == nullptr) {
    ++counters_.rx_unknown_qp;
    ++counters_.rx_dropped;
    trace_drop(now, pkt.dest_qp.value(), frame.size(), DropReason::kUnknownQp);
    return;
  }
  trace(now, trace::Event::kFrameRx, *q, pkt.psn.value(), static_cast<uint32_t>(frame.size()), pkt.opcode);
  // A QP's rx_packets/rx_bytes count what it accepts, so nobody else on the
  // link can inflate them (issue 16.9a).
  const wire::OpcodeInfo& op = *pkt.op;
  if (op.transport == wire::Transport::kCnp) {
    // A CNP for one of our RC QPs from its peer, or for a UD QP (which has no
    // peer): the reaction point (dcqcn.cc).
    if ((q->qp.type() == IBV_QPT_RC && same_ip(pkt.src_ip, q->peer.ip)) || q->qp.type() == IBV_QPT_UD) {
      count_rx(*q, frame.size());
      on_cnp(now, *q);
      return;
    }
    ++counters_.rx_wrong_source;
    ++counters_.rx_dropped;
    trace_drop(now, pkt.dest_qp.value(), frame.size(), DropReason::kWrongSource);
    return;
  }
  if (config_.dcqcn.enabled && pkt.ecn() == 0x3) [[unlikely]] np_check_ce(now, *q, pkt);
  switch (op.transport) {
    case wire::Transport::kUd:
      if (q->qp.type() != IBV_QPT_UD) break;
      on_ud(now, *q, pkt, frame);  // counts it once the Q_Key matched
      return;
    case wire::Transport::kRc:
      if (q->qp.type() != IBV_QPT_RC) break;
      // An RC QP talks to one peer (9.6.1.5.1: the source must match the path).
      if (!same_ip(pkt.src_ip, q->peer.ip)) {
        ++counters_.rx_wrong_source;
        ++counters_.rx_dropped;
        trace_drop(now, pkt.dest_qp.value(), frame.size(), DropReason::kWrongSource);
        return;
      }
      count_rx(*q, frame.size());
      if (op.kind == wire::OpKind::kAck || op.kind == wire::OpKind::kAtomicAck ||
          op.kind == wire::OpKind::kReadResponse) {
        on_response(now, *q, pkt, frame);
      } else if ((pkt.opcode == wire::op::kRcWriteOnly || pkt.opcode == wire::op::kRcWriteFirst) &&
                 rx_write_first(now, *q, pkt, frame)) {
        // A WRITE's first or only packet in order, every check passing (every packet
        // of a one-packet WRITE), its ICRC checked above.
      } else if (pkt.opcode == wire::op::kRcReadRequest && rx_read_request(now, *q, pkt)) {
        // A READ request in order, every check passing, a resource free.
      } else {
        on_request(now, *q, pkt, frame);
      }
      return;
    default:
      break;  // UC is not handled by this engine
  }
  ++counters_.rx_wrong_transport;
  ++counters_.rx_dropped;
  trace_drop(now, pkt.dest_qp.value(), frame.size(), DropReason::kWrongTransport);
}

QpCtx* EngineImpl::icrc_deferrable(const wire::RocePacket& pkt) {
  // Worth it from a few hundred bytes; every check receive() makes before handing an
  // RC request to its QP passes, so no frame is dropped or counted there unchecked.
  // Of a WRITE, only the middle and last packets: their target address comes from
  // the QP's state, so a corrupt one writes only bytes of the range its
  // retransmission rewrites. A first or only packet names its address in the RETH,
  // which the ICRC protects too: a flipped bit there must not store anywhere before
  // the check (IBTA 9.8.2: a packet failing the ICRC is dropped, with no effect).
  constexpr uint32_t kMinPayload = 256;
  const wire::OpcodeInfo& op = *pkt.op;
  // A SEND's packets, first and only ones too: where their payload goes comes from
  // the receive WQE, never from the packet (resp_execute_send copies into the
  // receive's buffer, checks, and only then takes the receive).
  const bool write = op.kind == wire::OpKind::kWrite && !pkt.imm && !op.is_first();
  const bool send = op.kind == wire::OpKind::kSend;
  // A READ response: it goes into the buffer of the READ its PSN belongs to
  // (EngineImpl::read_response_copy_and_check).
  const bool read_response = op.kind == wire::OpKind::kReadResponse;
  if (op.transport != wire::Transport::kRc || !(write || send || read_response) ||
      pkt.payload_len < kMinPayload) {
    return nullptr;
  }
  if (!same_ip(pkt.dst_ip, config_.ip) || (pkt.pkey & 0x7fff) != 0x7fff || pkt.ecn() == 0x3) return nullptr;
  QpCtx* q = find_qp(pkt.dest_qp);
  return q != nullptr && q->qp.type() == IBV_QPT_RC && same_ip(pkt.src_ip, q->peer.ip) ? q : nullptr;
}

void EngineImpl::drop_bad_icrc(Picos now, QpCtx& q, const wire::RocePacket& pkt, size_t frame_bytes) {
  ++counters_.rx_parse_errors;
  ++counters_.rx_bad_icrc;
  ++counters_.rx_dropped;
  --q.stats.rx_packets;
  q.stats.rx_bytes -= frame_bytes;
  trace_drop(now, pkt.dest_qp.value(), frame_bytes, DropReason::kBadIcrc);
}

void EngineImpl::schedule_timer(QpCtx& q, Picos when) {
  if (when >= q.timer_at) return;  // an earlier wake-up is queued; it re-queues this one
  q.timer_at = when;
  timers_.push({when, q.slot, gen_[q.slot]});
}

void EngineImpl::advance(Picos now) {
  if (now > tx_now_) tx_now_ = now;
  if (now > trace_now_) trace_now_ = now;
  while (!timers_.empty() && timers_.top().when <= now) {
    const Timer t = timers_.top();
    timers_.pop();
    QpCtx* q = slots_[t.slot].get();
    if (q == nullptr || gen_[t.slot] != t.generation) continue;
    if (q->timer_at == t.when) q->timer_at = sched::kNever;
    on_timer(now, *q);
    if (config_.dcqcn.enabled) dcqcn_timer(now, *q);
  }
}

Picos EngineImpl::next_deadline() const {
  Picos t = sched_->next_deadline();
  if (!timers_.empty()) t = std::min(t, timers_.top().when);
  return t;
}

void EngineImpl::peek(Picos now, QpCtx& q, TxDesc& d) {
  // Responses first: peek_response() has one whenever the queue holds one (and
  // is not called, nor d cleared twice, when it does not: once per grant).
  if (!q.resp.queue.empty()) {
    peek_response(q, d);
    return;
  }
  if (q.qp.type() == IBV_QPT_UD) {
    peek_ud(q, d);
  } else {
    peek_request(now, q, d);
  }
}

void EngineImpl::kick(Picos now, QpCtx& q) {
  if (q.sq_unusual) [[unlikely]] {
    if (q.sq.empty()) {
      q.sq_unusual = false;  // nothing queued can be a local operation or failed
    } else if (kick_unusual(now, q)) {
      return;
    }
  }
  if (q.ud_send_failed) [[unlikely]] {
    ud_send_queue_error(now, q);
    return;
  }
  if (sched_->active(q.slot)) return;
  TxDesc d;
  peek(now, q, d);
  if (d.kind == TxKind::kNone) return;
  const bool ends = wire::opcode_info(d.opcode).is_last() || d.kind == TxKind::kUdSend;
  // A request that starts a message on an idle QP waits behind no packet of its own.
  q.req.ready_fresh = d.kind == TxKind::kRequest && d.offset == 0 && !d.retransmit;
  q.req.ready_psn = d.psn;
  q.req.ready_at = now;
  sched_->activate(now, q.slot, {d.frame_len + kEthWireOverhead, ends});
}

bool EngineImpl::kick_unusual(Picos now, QpCtx& q) {
  if (q.req.wqe < q.sq.tail() && q.sq[q.req.wqe].is_local_op()) run_local_ops(now, q);
  // A WR that lost its local MR mid-message (lose_local_mr) completes in
  // error once it is the oldest; the QP moves to ERR.
  if (!q.sq.empty() && q.sq.front().state == WqeState::kStarted &&
      q.sq.front().local_error != IBV_WC_SUCCESS) [[unlikely]] {
    fail_request(now, q, q.sq.front().local_error);
    return true;
  }
  // A WR whose SGEs failed their check completes in error when it is next.
  if (q.req.wqe < q.sq.tail() && q.req.pkt == 0 && q.sq[q.req.wqe].local_error != IBV_WC_SUCCESS &&
      q.sq[q.req.wqe].state == WqeState::kQueued &&
      (q.qp.state() == IBV_QPS_RTS || q.qp.state() == IBV_QPS_SQD) && q.req.wqe == q.sq.head()) {
    SendWqe& w = q.sq.front();
    complete_send(q, w, w.local_error);
    q.sq.pop();
    q.req.wqe = q.sq.head();
    if (q.qp.type() == IBV_QPT_RC) {
      q.qp.set_error();
      enter_error(now, q);
      events_.push_back({AsyncEventType::kQpFatal, q.qp.qpn().value()});
    } else {
      ud_send_queue_error(now, q);
    }
    return true;
  }
  return false;
}

inline const TxDesc* EngineImpl::take_middle_request(QpCtx& q, const TxDesc& d) {
  // take_request(q, d): the WR started at its first packet (q.req.pkt > 0), is no
  // READ or atomic, and goes on after d (q.req.pkt + 1 < w.npkts when d was peeked
  // or derived, and nothing but grants ran since), so the count does not wrap.
  if (d.retransmit) {
    ++counters_.retransmits;
    ++q.stats.retransmits;
  }
  ++q.req.psn;
  ++q.req.pkt;
  if (q.req.psn.after(q.req.max_psn)) q.req.max_psn = q.req.psn;
  if (q.comp.ack_deadline == sched::kNever) [[unlikely]] arm_ack_timer(tx_now_, q);
  // next_request(q, d, q.tx_next) when the next packet is again a middle one inside
  // the window: d's opcode, length (the MTU) and frame length; its own PSN, offset,
  // AckReq and retransmission flag.
  const SendWqe& w = q.sq[d.wqe];
  if (q.req.pkt + 1 < w.npkts && psn_diff(q.req.psn, q.comp.psn) < kMaxOutstanding) [[likely]] {
    TxDesc& n = q.tx_next;
    n.psn = q.req.psn;
    n.offset = static_cast<uint64_t>(q.req.pkt) * q.mtu;
    n.ack_req = ack_due(q.req.pkt, config_.ack_req_every);
    n.retransmit = q.req.psn.before(q.req.max_psn);
    return &n;
  }
  return next_after_middle(q, d);
}

inline const TxDesc* EngineImpl::take_middle_response(QpCtx& q, const TxDesc& d) {
  // take_response(q, d): a MIDDLE response is not its resource's last packet (r.sent +
  // 1 < r.npkts when d was peeked or derived, and nothing but grants ran since), so
  // the resource stays queued at the front with more to send.
  RespResource& r = q.resp.resources[d.resource];
  ++r.sent;
  TxDesc& n = q.tx_next;
  if (r.sent + 1 < r.npkts) [[likely]] {
    // next_response(q, d, n) for another MIDDLE: one packet on, the MTU's length and
    // the same frame (a MIDDLE's length is the MTU).
    n.psn = d.psn + 1;
    n.offset = d.offset + q.mtu;
    return &n;
  }
  next_response(q, d, n);
  return &n;
}

inline const TxDesc* EngineImpl::take_fresh_request(QpCtx& q, const TxDesc& d) {
  // take_request(q, d) for the only request packet of a WR not yet started (a WRITE's
  // or SEND's ONLY packet, or a READ request at its first response PSN): the WR
  // starts (its packet count 1, a READ's the responses' count), one PSN (a READ's
  // every response PSN) is taken and the requester moves to the next WR.
  SendWqe& w = q.sq[d.wqe];
  const bool read = d.opcode == wire::op::kRcReadRequest;
  w.state = WqeState::kStarted;
  w.first_psn = q.req.psn;
  if (read) {
    w.npkts = packets_for(w.length, q.mtu);
    ++q.req.rd_atomic_inflight;
  } else {
    w.npkts = 1;
  }
  if (d.retransmit) [[unlikely]] {
    ++counters_.retransmits;
    ++q.stats.retransmits;
  }
  q.req.psn += w.npkts;
  ++q.req.wqe;
  if (q.req.psn.after(q.req.max_psn)) q.req.max_psn = q.req.psn;
  if (q.comp.ack_deadline == sched::kNever) arm_ack_timer(tx_now_, q);
  // grant_other()'s next: the QP's next WR peeked (no response is queued: d's peek
  // found none, and none is queued during a dequeue; an RC QP).
  TxDesc& n = q.tx_next;
  peek_request(tx_now_, q, n);
  if (n.kind == TxKind::kNone) {
    after_grant_.push_back(q.slot);
    return nullptr;
  }
  return &n;
}

inline const TxDesc* EngineImpl::take_only_response(QpCtx& q, const TxDesc& d) {
  // take_response(q, d) for a READ's only response (r.sent 0 and r.npkts 1 when d was
  // peeked, and nothing but grants ran since): the resource is done and leaves the
  // queue's front.
  RespResource& r = q.resp.resources[d.resource];
  ++r.sent;
  r.queued = false;
  q.resp.queue.pop();
  // grant_other()'s next (the resource is no longer queued): peek(), the next queued
  // response if any, else the requester's next packet (an RC QP), with the ACK
  // take_response() queues after the last response.
  TxDesc& n = q.tx_next;
  if (!q.resp.queue.empty()) {
    peek_response(q, n);
  } else {
    if (q.resp.ack_pending && !q.resp.ctrl_queued) after_grant_.push_back(q.slot);
    peek_request(tx_now_, q, n);
  }
  if (n.kind == TxKind::kNone) {
    after_grant_.push_back(q.slot);
    return nullptr;
  }
  return &n;
}

sched::Packet EngineImpl::on_grant(sched::QpId slot, uint32_t bytes) {
  (void)bytes;
  QpCtx* q = slots_[slot].get();
  // Most packets of a long message are MIDDLE ones, which the QP's previous grant of
  // this dequeue derived into tx_next: taken in one pass; any other grant goes the
  // long way. Either way the answer is the QP's next descriptor (nullptr: none),
  // turned into the scheduler's Packet at one place.
  const TxDesc* next = nullptr;
  bool taken = false;
  if (q != nullptr && q->tx_next_epoch == grant_epoch_ && granted_n_ < kGrantBurst) [[likely]] {
    const TxDesc& t = q->tx_next;
    if (t.kind == TxKind::kRequest &&
        (t.opcode == wire::op::kRcWriteMiddle || t.opcode == wire::op::kRcSendMiddle)) [[likely]] {
      TxDesc& d = granted_[granted_n_++];
      d = t;
      next = take_middle_request(*q, d);
      taken = true;
    } else if (t.kind == TxKind::kRequest && t.opcode < 32 && ((kFreshOpcodes >> t.opcode) & 1) != 0 &&
               q->sq[t.wqe].state == WqeState::kQueued) {
      // A fresh one-packet message's ONLY packet or a fresh READ request (its WR not
      // started, so q->req.pkt is 0), peeked by the QP's previous grant of this
      // dequeue (its next WR): taken in one pass. A WR started (a retransmission, a
      // READ re-issued mid-read) goes the long way.
      TxDesc& d = granted_[granted_n_++];
      d = t;
      next = take_fresh_request(*q, d);
      taken = true;
    } else if (t.kind == TxKind::kResponse && t.opcode == wire::op::kRcReadResponseMiddle) {
      // A READ's MIDDLE response, derived likewise (next_response).
      TxDesc& d = granted_[granted_n_++];
      d = t;
      next = take_middle_response(*q, d);
      taken = true;
    } else if (t.kind == TxKind::kResponse && t.opcode == wire::op::kRcReadResponseOnly) {
      // A READ's only response (a one-packet READ), peeked by the QP's previous grant
      // of this dequeue: taken in one pass.
      TxDesc& d = granted_[granted_n_++];
      d = t;
      next = take_only_response(*q, d);
      taken = true;
    }
  }
  if (!taken) next = grant_other(slot, q);
  if (next == nullptr) return {};
  return {next->frame_len + kEthWireOverhead, wire::opcode_info(next->opcode).is_last() || next->kind == TxKind::kUdSend};
}

// Inline here, in grant_other(), its one caller (a call of its own was ~15
// instructions a packet of its ~65).
inline void EngineImpl::take_request(QpCtx& q, const TxDesc& d) {
  SendWqe& w = q.sq[d.wqe];
  const uint32_t mtu = q.mtu;
  if (q.req.pkt == 0 && w.state == WqeState::kQueued) {
    w.state = WqeState::kStarted;
    w.first_psn = q.req.psn;
    w.npkts = packets_for(w.length, mtu);
    if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) w.npkts = 1;
  }
  // READ and atomic requests are one packet each, also when re-issued mid-read.
  if (w.is_read_or_atomic()) ++q.req.rd_atomic_inflight;
  if (d.retransmit) {
    ++counters_.retransmits;
    ++q.stats.retransmits;
  }
  if (w.opcode == IBV_WR_RDMA_READ) {
    // The request covers every response PSN from here to the end of the read.
    q.req.psn += w.npkts - q.req.pkt;
    q.req.pkt = 0;
    ++q.req.wqe;
  } else {
    ++q.req.psn;
    if (++q.req.pkt >= w.npkts) {
      q.req.pkt = 0;
      ++q.req.wqe;
    }
  }
  if (q.req.psn.after(q.req.max_psn)) q.req.max_psn = q.req.psn;
  if (q.comp.ack_deadline == sched::kNever) arm_ack_timer(tx_now_, q);
}

[[gnu::always_inline]] inline const TxDesc* EngineImpl::grant_other(sched::QpId slot, QpCtx* q) {
  if (granted_n_ >= kGrantBurst && granted_n_ == granted_.size()) [[unlikely]] granted_.emplace_back();
  TxDesc& d = granted_[granted_n_++];
  // Every reader of a granted descriptor tests its kind first (transmit(): its QP,
  // then the kind), and the peek or copy below writes every field it reads.
  d.kind = TxKind::kNone;
  if (q == nullptr) return nullptr;
  // The packet this grant takes is the one the QP's previous grant of this dequeue
  // peeked as its next (nothing but grants runs during a dequeue, and a grant
  // changes only its own QP), so it is not peeked twice.
  if (q->tx_next_epoch == grant_epoch_) {
    d = q->tx_next;
  } else {
    peek(tx_now_, *q, d);
  }
  if (d.kind == TxKind::kNone) {
    after_grant_.push_back(slot);
    return nullptr;
  }
  switch (d.kind) {
    case TxKind::kRequest: take_request(*q, d); break;
    case TxKind::kResponse: take_response(*q, d); break;
    case TxKind::kUdSend:
      ++q->req.psn;
      ++q->req.wqe;
      break;
    case TxKind::kNone: break;
  }
  TxDesc& next = q->tx_next;
  if (d.kind == TxKind::kRequest && q->req.wqe == d.wqe) [[likely]] {
    // Still inside d's WR (a WRITE's or SEND's next packet): derived from d. (No
    // response can be queued: d's peek found none, and none is queued during a
    // dequeue.)
    next_request(*q, d, next);
  } else if (d.kind == TxKind::kResponse && q->resp.resources[d.resource].queued) {
    // A READ response whose resource has more to send (take_response left it at the
    // queue's front): its next response, derived from d.
    next_response(*q, d, next);
  } else {
    peek(tx_now_, *q, next);
  }
  q->tx_next_epoch = grant_epoch_;
  if (next.kind == TxKind::kNone) {
    after_grant_.push_back(slot);  // e.g. a local error to complete, or an ACK to queue
    return nullptr;
  }
  return &next;
}

// Inline here, in transmit(), its one caller; the long way in requester.cc.
inline size_t EngineImpl::build_request(QpCtx& q, const TxDesc& d, std::span<uint8_t> out) {
  // The RC SEND and WRITE opcodes, 0x00 (SEND FIRST) .. 0x0b (WRITE ONLY with
  // immediate), and READ requests (0x0c): no IETH, no AtomicETH. SEND with
  // invalidate (0x16, 0x17) and atomics go the long way.
  if (d.opcode > wire::op::kRcReadRequest) return build_request_other(q, d, out);
  SendWqe& w = q.sq[d.wqe];
  // A READ request carries no payload (its SGEs are the responses' target); a SEND's
  // or WRITE's payload is one piece of a WR of one SGE checked at post.
  const bool read = d.opcode == wire::op::kRcReadRequest;
  if (q.tx_tmpl.valid() && (read || (!w.is_inline && w.sges.size() == 1 && w.mr_deregs == mrs_.deregs())))
      [[likely]] {
    // A packet of a WRITE or SEND (every packet of a one-packet message, the middle
    // packets of a long one) or a READ request from its QP's template: the long way
    // below with what it finds for such a packet, the tests of the headers these
    // never carry (IETH, AtomicETH) left out, and a MIDDLE's (no extension header,
    // not solicited: not a last packet) too.
    wire::FrameSpec& spec = frame_fields(q.peer, d.opcode, d.psn, true);
    spec.ack_req = d.ack_req;
    if (d.opcode != wire::op::kRcWriteMiddle && d.opcode != wire::op::kRcSendMiddle) {
      const wire::OpcodeInfo& op = wire::opcode_info(d.opcode);
      spec.solicited = (w.send_flags & IBV_SEND_SOLICITED) && op.is_last();
      if (op.has(wire::kHdrReth)) {
        spec.reth = wire::RethFields{w.remote_addr + d.offset, w.rkey, static_cast<uint32_t>(w.length - d.offset)};
      }
      if (op.has(wire::kHdrImmDt)) spec.imm = wire::load_be32(reinterpret_cast<const uint8_t*>(&w.imm_data));
    }
    // The payload: one piece of the SGE (none for an empty message or a READ).
    std::span<const uint8_t> piece;
    std::span<const std::span<const uint8_t>> pieces;
    if (d.length > 0) [[likely]] {
      piece = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(w.sges[0].addr + d.offset + w.sge_bias[0]),
                                       d.length);
      pieces = std::span(&piece, 1);
    }
    const wire::BuildResult r = wire::build_frame_templated(q.tx_tmpl, spec, pieces, out);
    return r.ok() ? r.len : 0;
  }
  return build_request_other(q, d, out);
}

size_t EngineImpl::transmit(Picos now, TxSink& sink, size_t max_frames) {
  if (now > tx_now_) tx_now_ = now;
  if (now > trace_now_) trace_now_ = now;
  size_t sent = parting_lens_.empty() ? 0 : transmit_parting(now, sink);
  std::array<sched::Grant, kGrantBurst>& grants = grants_;
  while (sent < max_frames) {
    const size_t want = std::min(grants.size(), max_frames - sent);
    granted_n_ = 0;
    after_grant_.clear();
    ++grant_epoch_;
    const size_t n = sched_->dequeue(now, std::span(grants.data(), want), *this);
    size_t next_desc = 0;
    for (size_t i = 0; i < n; ++i) {
      const sched::Grant& g = grants[i];
      QpCtx* q = slots_[g.qp].get();
      // granted_ does not change until the next dequeue (no copy of the descriptor).
      static const TxDesc kControl{};
      const TxDesc& d = g.kind == sched::GrantKind::kData ? granted_[next_desc++] : kControl;
      if (q == nullptr) continue;
      // A control grant is the QP's CNP if one is queued and the grant has its size.
      const bool cnp = g.kind == sched::GrantKind::kControl && q->cnp_queued && g.bytes == cnp_frame_bytes();
      const size_t len_hint = g.kind == sched::GrantKind::kControl
                                  ? (cnp ? cnp_frame_bytes() : ack_frame_bytes()) - kEthWireOverhead
                                  : d.frame_len;
      if (g.kind == sched::GrantKind::kData && d.kind == TxKind::kNone) continue;
      // A frame to the port's own address loops back (docs/engine.md,
      // "Same-device loopback"): scheduled like any frame, then received
      // instead of sent, into a buffer of the engine's own.
      const bool to_self = same_ip((d.kind == TxKind::kRequest ? q->peer : tx_peer(*q, d, cnp)).ip, config_.ip);
      std::span<uint8_t> buf = to_self ? loop_buffer(len_hint) : sink.tx_buffer(len_hint);
      if (buf.size() < len_hint) {
        ++counters_.tx_no_buffer;
        if (g.kind == sched::GrantKind::kControl) (cnp ? q->cnp_queued : q->resp.ctrl_queued) = false;
        if (d.kind == TxKind::kUdSend) {  // the datagram is lost, the send still completes
          complete_send(*q, q->sq[d.wqe], IBV_WC_SUCCESS);
          q->sq.pop();
        }
        continue;
      }
      size_t len = 0;
      switch (d.kind) {
        case TxKind::kNone: len = cnp ? build_cnp(*q, buf) : build_control(now, *q, buf); break;
        case TxKind::kRequest: len = build_request(*q, d, buf); break;
        case TxKind::kResponse: len = build_response(*q, d, buf); break;
        case TxKind::kUdSend: len = send_ud(*q, d, buf); break;
      }
      if (len == 0) continue;
      if (d.kind != TxKind::kNone) dcqcn_sent(now, *q, len + kEthWireOverhead);
      if (trace_.mask() != 0) [[unlikely]] {
        if (cnp) trace(now, trace::Event::kCnp, *q, 0, static_cast<uint32_t>(len), 0);
        trace_frame_tx(g.departure, *q, buf.first(len));
      }
      // time_request() returns at once unless a fresh request waits to be timed.
      if (d.kind == TxKind::kRequest && q->req.ready_fresh && !q->comp.timed) time_request(*q, d);
      if (to_self) {
        loop_lens_.push_back(len);
        ++counters_.tx_loopback;
      } else {
        sink.tx_commit(g.departure, len);
      }
      ++counters_.tx_frames;
      counters_.tx_bytes += len;
      ++q->stats.tx_packets;
      q->stats.tx_bytes += len;
      ++sent;
    }
    for (uint32_t slot : after_grant_) {
      QpCtx* q = slots_[slot].get();
      if (q == nullptr) continue;
      if (q->resp.ack_pending && !q->resp.ctrl_queued && q->resp.queue.empty() &&
          sched_->enqueue_control(now, slot, ack_frame_bytes())) {
        q->resp.ctrl_queued = true;
      }
      kick(now, *q);
    }
    if (n < want) break;
  }
  deliver_looped(now);
  return sent;
}

const Peer& EngineImpl::tx_peer(const QpCtx& q, const TxDesc& d, bool cnp) const {
  if (d.kind == TxKind::kUdSend) return q.sq[d.wqe].ud_peer;
  if (cnp && q.qp.type() == IBV_QPT_UD) return q.cnp_peer;
  return q.peer;
}

std::span<uint8_t> EngineImpl::loop_buffer(size_t len) {
  const size_t i = loop_lens_.size();
  if (loop_frames_.size() <= i) loop_frames_.emplace_back();
  if (loop_frames_[i].size() < len) loop_frames_[i].resize(len);
  return loop_frames_[i];
}

// The looped frames of this transmit, received once the grants are done (the
// receive path may activate QPs in the scheduler; never during its dequeue).
// A frame that makes the responder answer a frame to the port again is sent
// by a later transmit(), through the scheduler, like any response.
void EngineImpl::deliver_looped(Picos now) {
  for (size_t i = 0; i < loop_lens_.size(); ++i) {
    std::span<uint8_t> frame(loop_frames_[i].data(), loop_lens_[i]);
    if (loop_out_ != nullptr && loop_out_(loop_ctx_, frame)) continue;  // another lane's QP
    receive(now, frame);
  }
  loop_lens_.clear();
}

}  // namespace isoroce::transport::detail
