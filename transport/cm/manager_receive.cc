// Manager: what each received CM message does (IBTA vol. 1 12.9.7 state
// tables; duplicates per 12.9.8), and the checks before it.
#include <cstring>

#include "transport/cm/manager_impl.h"

namespace isoroce::cm {
namespace {

std::vector<uint8_t> bytes_of(const uint8_t* p, size_t n) { return std::vector<uint8_t>(p, p + n); }

}  // namespace

void Manager::on_mad(const Gid& src_gid, uint32_t src_qpn, std::span<const uint8_t> mad, Picos now) {
  Impl& m = *impl_;
  ++m.stats.mads_received;
  const MadHeader* h = nullptr;
  switch (check_mad(mad, &h)) {
    case MadError::kOk: break;
    case MadError::kWrongClass: ++m.stats.wrong_class; return;
    case MadError::kUnknownAttribute: ++m.stats.unknown_attribute; return;
    default: ++m.stats.malformed; return;
  }
  // CM MADs come from the peer's GSI (QP1); on RoCE nothing else may send them.
  if (src_qpn != kGsiQpn) {
    ++m.stats.malformed;
    return;
  }
  const uint8_t* p = mad.data();
  switch (static_cast<AttrId>(h->attr_id())) {
    case AttrId::kReq: m.on_req(src_gid, *msg_cast<ReqMsg>(p), now); break;
    case AttrId::kMra: m.on_mra(src_gid, *msg_cast<MraMsg>(p), now); break;
    case AttrId::kRej: m.on_rej(src_gid, *msg_cast<RejMsg>(p), now); break;
    case AttrId::kRep: m.on_rep(src_gid, *msg_cast<RepMsg>(p), now); break;
    case AttrId::kRtu: m.on_rtu(src_gid, *msg_cast<RtuMsg>(p), now); break;
    case AttrId::kDreq: m.on_dreq(src_gid, *msg_cast<DreqMsg>(p), now); break;
    case AttrId::kDrep: m.on_drep(src_gid, *msg_cast<DrepMsg>(p), now); break;
    case AttrId::kSidrReq: m.on_sidr_req(src_gid, *msg_cast<SidrReqMsg>(p), now); break;
    case AttrId::kSidrRep: m.on_sidr_rep(src_gid, *msg_cast<SidrRepMsg>(p), now); break;
    default: ++m.stats.unknown_attribute; break;
  }
}

Conn* Manager::Impl::match(const Gid& src, uint32_t our_id, uint32_t their_id) {
  Conn* c = find(our_id);
  if (!c || c->peer.gid != src || (c->peer.comm_id != 0 && c->peer.comm_id != their_id) ||
      c->state == State::kListen) {
    ++stats.unmatched;
    return nullptr;
  }
  return c;
}

void Manager::Impl::on_req(const Gid& src, const ReqMsg& r, Picos now) {
  // A duplicate (the peer retransmitted): answer with what we answered.
  if (auto it = by_remote.find({src, r.local_comm_id(), false}); it != by_remote.end()) {
    Conn& c = conns.at(it->second);
    ++stats.duplicates;
    switch (c.state) {
      case State::kReqRcvd:
        // The consumer is slow: ask the peer for more time (MRA).
        if (!c.destroyed) {
          auto mra = make_msg<MraMsg>(AttrId::kMra, c.tid);
          mra.set_local_comm_id(c.id);
          mra.set_remote_comm_id(c.peer.comm_id);
          mra.set_message_mraed(MsgKind::kReq);
          mra.set_service_timeout(cfg.mra_service_timeout);
          send(c.peer.gid, &mra);
          c.last = bytes_of(reinterpret_cast<const uint8_t*>(&mra), kMadBytes);
          c.last_dgid = c.peer.gid;
          set_state(c, State::kMraReqSent);
        }
        break;
      case State::kMraReqSent:
      case State::kRepSent:
      case State::kMraRepRcvd:
      case State::kTimewait:  // our REJ, or the REP of a connection already closed
        if (c.state != State::kTimewait || (c.last.size() == kMadBytes && c.last[17] == 0x12)) resend_last(c);
        break;
      default:
        break;  // established: a late copy
    }
    return;
  }
  // Checks of the request itself (12.6.5): a QPN, the transport and the MTU.
  if (r.local_qpn() < 2) {
    ++stats.malformed;  // QP0/QP1 never connect
    return;
  }
  const QpType type = static_cast<QpType>(r.transport_type());
  if (type != QpType::kRc && type != QpType::kUc) {
    ++stats.malformed;
    issue_rej(src, r.hdr.tid(), r.local_comm_id(), RejReason::kInvalidTransportType, MsgKind::kReq);
    return;
  }
  if (r.path_mtu() < 1 || r.path_mtu() > 5) {
    ++stats.malformed;
    issue_rej(src, r.hdr.tid(), r.local_comm_id(), RejReason::kInvalidMtu, MsgKind::kReq);
    return;
  }
  auto l = listeners.find(r.service_id());
  if (l == listeners.end()) {
    ++stats.no_listener;
    issue_rej(src, r.hdr.tid(), r.local_comm_id(), RejReason::kInvalidServiceId, MsgKind::kReq);
    return;
  }
  // Stale: the peer's QP is still part of a live connection here (it restarted).
  if (auto s = by_remote_qpn.find({src, r.local_qpn()}); s != by_remote_qpn.end()) {
    ++stats.stale;
    issue_rej(src, r.hdr.tid(), r.local_comm_id(), RejReason::kStaleConnection, MsgKind::kReq);
    Conn& old = conns.at(s->second);
    if (old.state == State::kEstablished) send_dreq(old, {}, now);
    return;
  }
  if (pending_reqs >= cfg.max_pending_reqs) {
    ++stats.overload;
    issue_rej(src, r.hdr.tid(), r.local_comm_id(), RejReason::kNoResources, MsgKind::kReq);
    return;
  }
  const Conn& listener = conns.at(l->second);
  int err = 0;
  Conn* c = alloc(listener.owner, State::kIdle, &err);
  if (!c) {
    ++stats.overload;
    issue_rej(src, r.hdr.tid(), r.local_comm_id(), RejReason::kNoResources, MsgKind::kReq);
    return;
  }
  c->passive = true;
  c->listen_id = listener.id;
  c->service_id = r.service_id();
  c->tid = r.hdr.tid();
  PeerParams& pp = c->peer;
  pp.gid = src;
  pp.qpn = r.local_qpn();
  pp.starting_psn = r.starting_psn();
  pp.comm_id = r.local_comm_id();
  pp.service_id = r.service_id();
  pp.qp_type = type;
  pp.responder_resources = r.responder_resources();
  pp.initiator_depth = r.initiator_depth();
  pp.retry_count = r.retry_count();
  pp.rnr_retry_count = r.rnr_retry_count();
  pp.path_mtu = r.path_mtu();
  pp.local_ack_timeout = r.primary_local_ack_timeout();
  pp.srq = r.srq();
  pp.end_to_end_flow_control = r.e2e_flow_control();
  pp.flow_label = r.primary_flow_label();
  pp.traffic_class = r.primary_traffic_class();
  pp.hop_limit = r.primary_hop_limit();
  pp.sl = r.primary_sl();
  pp.pkey = r.pkey();
  // Our REP waits as long as the active side says it takes to answer.
  c->remote_timeout = r.local_cm_response_timeout();
  c->max_retries = r.max_cm_retries();
  set_state(*c, State::kReqRcvd);
  register_remote(*c, false);
  register_remote_qpn(*c);
  Event e = event(*c, EventType::kReqReceived);
  e.private_data = bytes_of(r.private_data, kReqPrivateData);
  emit(*c, std::move(e));
}

void Manager::Impl::on_mra(const Gid& src, const MraMsg& r, Picos now) {
  Conn* c = match(src, r.remote_comm_id(), r.local_comm_id());
  if (!c) return;
  const Picos more = cm_timeout_picos(r.service_timeout()) + cm_timeout_picos(c->remote_timeout);
  if (r.message_mraed() == static_cast<uint8_t>(MsgKind::kReq) &&
      (c->state == State::kReqSent || c->state == State::kMraReqRcvd)) {
    c->peer.comm_id = r.local_comm_id();
    set_state(*c, State::kMraReqRcvd);
  } else if (r.message_mraed() == static_cast<uint8_t>(MsgKind::kRep) &&
             (c->state == State::kRepSent || c->state == State::kMraRepRcvd)) {
    set_state(*c, State::kMraRepRcvd);
  } else {
    ++stats.duplicates;
    return;
  }
  set_timer(*c, now + more);
  Event e = event(*c, EventType::kMraReceived);
  e.mra_service_timeout = r.service_timeout();
  e.private_data = bytes_of(r.private_data, kMraPrivateData);
  emit(*c, std::move(e));
}

void Manager::Impl::on_rej(const Gid& src, const RejMsg& r, Picos now) {
  Conn* c = nullptr;
  if (r.remote_comm_id() == 0 && r.reason() == static_cast<uint16_t>(RejReason::kTimeout)) {
    // The active side withdraws a REQ we hold before it knows our ID (it
    // timed out or its consumer gave up): found by its ID from that peer.
    auto it = by_remote.find({src, r.local_comm_id(), false});
    if (it != by_remote.end()) c = find(it->second);
    if (!c) ++stats.unmatched;
  } else {
    c = match(src, r.remote_comm_id(), r.local_comm_id());
  }
  if (!c) return;
  switch (c->state) {
    case State::kReqRcvd:    // the active side withdrew its REQ
    case State::kMraReqSent:
    case State::kReqSent:
    case State::kMraReqRcvd:
    case State::kRepSent:
    case State::kMraRepRcvd:
    case State::kRepRcvd:
    case State::kMraRepSent:
    case State::kEstablished:  // REJ after a lost RTU's REP timed out on the peer
      break;
    default:
      ++stats.duplicates;
      return;
  }
  ++stats.rejected_received;
  if (r.local_comm_id() != 0) c->peer.comm_id = r.local_comm_id();
  Event e = event(*c, EventType::kRejected);
  e.reason = static_cast<RejReason>(r.reason());
  const size_t ari = std::min<size_t>(r.ari_length(), kRejAriBytes);
  e.ari = bytes_of(r.ari, ari);
  e.private_data = bytes_of(r.private_data, kRejPrivateData);
  emit(*c, std::move(e));
  if (c->passive || r.reason() == static_cast<uint16_t>(RejReason::kStaleConnection)) enter_timewait(*c, now);
  else to_idle(*c);
}

void Manager::Impl::on_rep(const Gid& src, const RepMsg& r, Picos now) {
  Conn* c = match(src, r.remote_comm_id(), r.local_comm_id());
  if (!c) return;
  switch (c->state) {
    case State::kReqSent:
    case State::kMraReqRcvd:
      break;
    case State::kEstablished:
    case State::kTimewait:
      // Our RTU (or REJ) was lost: the peer retransmits its REP.
      ++stats.duplicates;
      if (r.local_comm_id() == c->peer.comm_id) resend_last(*c);
      return;
    default:
      ++stats.duplicates;  // the consumer has not answered yet
      return;
  }
  PeerParams& pp = c->peer;
  pp.comm_id = r.local_comm_id();
  pp.qpn = r.local_qpn();
  pp.starting_psn = r.starting_psn();
  pp.responder_resources = r.responder_resources();
  pp.initiator_depth = r.initiator_depth();
  pp.rnr_retry_count = r.rnr_retry_count();
  pp.target_ack_delay = r.target_ack_delay();
  pp.srq = r.srq();
  pp.end_to_end_flow_control = r.e2e_flow_control();
  c->tid = r.hdr.tid();
  set_state(*c, State::kRepRcvd);
  set_timer(*c, kNoDeadline);
  register_remote_qpn(*c);
  (void)now;
  Event e = event(*c, EventType::kRepReceived);
  e.private_data = bytes_of(r.private_data, kRepPrivateData);
  emit(*c, std::move(e));
}

void Manager::Impl::on_rtu(const Gid& src, const RtuMsg& r, Picos) {
  Conn* c = match(src, r.remote_comm_id(), r.local_comm_id());
  if (!c) return;
  if (c->state != State::kRepSent && c->state != State::kMraRepRcvd) {
    ++stats.duplicates;
    return;
  }
  set_state(*c, State::kEstablished);
  set_timer(*c, kNoDeadline);
  ++stats.established;
  Event e = event(*c, EventType::kEstablished);
  e.private_data = bytes_of(r.private_data, kRtuPrivateData);
  emit(*c, std::move(e));
}

void Manager::Impl::on_dreq(const Gid& src, const DreqMsg& r, Picos now) {
  Conn* c = find(r.remote_comm_id());
  if (!c || c->peer.gid != src || c->peer.comm_id != r.local_comm_id() || c->state == State::kListen) {
    // Unknown connection (we forgot it, or never had it): a DREP lets the
    // peer finish (12.9.8.4) instead of retrying for minutes.
    ++stats.unmatched;
    auto d = make_msg<DrepMsg>(AttrId::kDrep, r.hdr.tid());
    d.set_local_comm_id(r.remote_comm_id());
    d.set_remote_comm_id(r.local_comm_id());
    send(src, &d);
    return;
  }
  if (c->local_qpn != 0 && r.remote_qpn() != c->local_qpn) {
    ++stats.unmatched;  // names another QP than the connection's (12.6.10): dropped, as Linux does
    return;
  }
  c->tid = r.hdr.tid();
  switch (c->state) {
    case State::kEstablished:
    case State::kRepSent:     // our RTU never arrived, the peer is established
    case State::kMraRepRcvd: {
      set_state(*c, State::kDreqRcvd);
      set_timer(*c, kNoDeadline);
      Event e = event(*c, EventType::kDreqReceived);
      e.private_data = bytes_of(r.private_data, kDreqPrivateData);
      emit(*c, std::move(e));
      if (c->destroyed) {  // nobody to answer: answer now
        send_drep(*c, {});
        enter_timewait(*c, now);
      }
      return;
    }
    case State::kDreqSent:
      // Both ends disconnect at once: answer, and count the connection closed.
      send_drep(*c, {});
      enter_timewait(*c, now);
      emit(*c, event(*c, EventType::kDisconnected));
      return;
    case State::kTimewait:
      ++stats.duplicates;
      send_drep(*c, {});
      return;
    default:
      ++stats.duplicates;  // kDreqRcvd: the consumer will answer
      return;
  }
}

void Manager::Impl::on_drep(const Gid& src, const DrepMsg& r, Picos now) {
  Conn* c = match(src, r.remote_comm_id(), r.local_comm_id());
  if (!c) return;
  if (c->state != State::kDreqSent) {
    ++stats.duplicates;
    return;
  }
  enter_timewait(*c, now);
  Event e = event(*c, EventType::kDisconnected);
  e.private_data = bytes_of(r.private_data, kDrepPrivateData);
  emit(*c, std::move(e));
}

void Manager::Impl::on_sidr_req(const Gid& src, const SidrReqMsg& r, Picos) {
  if (auto it = by_remote.find({src, r.request_id(), true}); it != by_remote.end()) {
    Conn& c = conns.at(it->second);
    ++stats.duplicates;
    if (c.state == State::kTimewait) resend_last(c);  // our SIDR_REP was lost
    return;
  }
  auto l = listeners.find(r.service_id());
  if (l == listeners.end()) {
    ++stats.no_listener;
    auto rep = make_msg<SidrRepMsg>(AttrId::kSidrRep, r.hdr.tid());
    rep.set_request_id(r.request_id());
    rep.set_status(static_cast<uint8_t>(SidrStatus::kServiceIdNotSupported));
    rep.set_service_id(r.service_id());
    send(src, &rep);
    return;
  }
  const Conn& listener = conns.at(l->second);
  int err = 0;
  Conn* c = pending_reqs >= cfg.max_pending_reqs ? nullptr : alloc(listener.owner, State::kSidrReqRcvd, &err);
  if (!c) {
    ++stats.overload;
    return;  // the requester retries
  }
  c->passive = true;
  c->listen_id = listener.id;
  c->service_id = r.service_id();
  c->tid = r.hdr.tid();
  c->peer.gid = src;
  c->peer.comm_id = r.request_id();
  c->peer.service_id = r.service_id();
  c->peer.pkey = r.pkey();
  register_remote(*c, true);
  Event e = event(*c, EventType::kSidrReqReceived);
  e.private_data = bytes_of(r.private_data, kSidrReqPrivateData);
  emit(*c, std::move(e));
}

void Manager::Impl::on_sidr_rep(const Gid& src, const SidrRepMsg& r, Picos) {
  Conn* c = find(r.request_id());
  if (!c || c->peer.gid != src || c->state != State::kSidrReqSent) {
    ++stats.unmatched;
    return;
  }
  Event e = event(*c, EventType::kSidrRepReceived);
  e.sidr_status = static_cast<SidrStatus>(r.status());
  e.sidr_qpn = r.qpn();
  e.sidr_qkey = r.qkey();
  e.peer.qpn = r.qpn();
  e.private_data = bytes_of(r.private_data, kSidrRepPrivateData);
  emit(*c, std::move(e));
  to_idle(*c);
}

}  // namespace isoroce::cm
