// Manager: commands, timers and outputs. Received messages: manager_receive.cc.
#include "transport/cm/manager.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/cm/manager_impl.h"

namespace isoroce::cm {
namespace {

bool fits24(uint32_t v) { return v <= 0xffffff; }

void copy_pdata(uint8_t* dst, std::span<const uint8_t> src) {
  if (!src.empty()) std::memcpy(dst, src.data(), src.size());
}

}  // namespace

// ---- Impl: plumbing ----

Manager::Impl::Impl(const ManagerConfig& c) : cfg(c), rng(c.seed ? c.seed : 1) {
  tid_hi = static_cast<uint32_t>(next_random());
}

uint64_t Manager::Impl::next_random() {
  // xorshift64*: deterministic for a seed, good enough to make IDs unpredictable across restarts
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1Dull;
}

Conn* Manager::Impl::find(Id id) {
  auto it = conns.find(id);
  return it == conns.end() ? nullptr : &it->second;
}

Conn* Manager::Impl::alloc(uint64_t owner, State s, int* err) {
  if (conns.size() >= cfg.max_ids) {
    *err = ENOMEM;
    return nullptr;
  }
  Id id;
  do id = static_cast<Id>(next_random() >> 32);
  while (id == 0 || conns.count(id));
  Conn& c = conns[id];
  c.id = id;
  c.owner = owner;
  c.state = s;
  return &c;
}

void Manager::Impl::set_state(Conn& c, State s) {
  const bool was_pending = c.passive && (c.state == State::kReqRcvd || c.state == State::kMraReqSent);
  const bool is_pending = c.passive && (s == State::kReqRcvd || s == State::kMraReqSent);
  if (was_pending && !is_pending) --pending_reqs;
  if (!was_pending && is_pending) ++pending_reqs;
  c.state = s;
  // A connection leaves the stale-connection table when it closes.
  if (s == State::kTimewait || s == State::kIdle) unregister_remote_qpn(c);
}

void Manager::Impl::erase(Conn& c) {
  if (c.state == State::kListen) listeners.erase(c.service_id);
  set_state(c, State::kIdle);
  set_timer(c, kNoDeadline);
  if (c.remote_key) {
    auto it = by_remote.find(c.remote_tuple);
    if (it != by_remote.end() && it->second == c.id) by_remote.erase(it);
  }
  conns.erase(c.id);
}

void Manager::Impl::set_timer(Conn& c, Picos deadline) {
  if (c.deadline != kNoDeadline) timers.erase({c.deadline, c.id});
  c.deadline = deadline;
  if (deadline != kNoDeadline) timers.insert({deadline, c.id});
}

void Manager::Impl::register_remote(Conn& c, bool sidr) {
  c.remote_tuple = {c.peer.gid, c.peer.comm_id, sidr};
  by_remote[c.remote_tuple] = c.id;
  c.remote_key = true;
}

void Manager::Impl::register_remote_qpn(Conn& c) {
  if (c.remote_qpn_key) return;
  by_remote_qpn[{c.peer.gid, c.peer.qpn}] = c.id;
  c.remote_qpn_key = true;
}

void Manager::Impl::unregister_remote_qpn(Conn& c) {
  if (!c.remote_qpn_key) return;
  auto it = by_remote_qpn.find({c.peer.gid, c.peer.qpn});
  if (it != by_remote_qpn.end() && it->second == c.id) by_remote_qpn.erase(it);
  c.remote_qpn_key = false;
}

void Manager::Impl::send(const Gid& dgid, const void* msg) {
  OutMad m;
  m.dgid = dgid;
  m.pkey = cfg.pkey;
  m.bytes.assign(static_cast<const uint8_t*>(msg), static_cast<const uint8_t*>(msg) + kMadBytes);
  mads.push_back(std::move(m));
  ++stats.mads_sent;
}

void Manager::Impl::send_tracked(Conn& c, const void* msg, Picos now, Picos period, int retries) {
  send(c.peer.gid, msg);
  c.last.assign(static_cast<const uint8_t*>(msg), static_cast<const uint8_t*>(msg) + kMadBytes);
  c.last_dgid = c.peer.gid;
  c.retries_left = retries;
  c.period = period;
  set_timer(c, period == 0 ? kNoDeadline : now + period);
}

void Manager::Impl::resend_last(Conn& c) {
  if (c.last.size() != kMadBytes) return;
  send(c.last_dgid, c.last.data());
  ++stats.retransmits;
}

Event Manager::Impl::event(const Conn& c, EventType t) const {
  Event e;
  e.type = t;
  e.id = c.id;
  e.listen_id = c.listen_id;
  e.owner = c.owner;
  e.peer = c.peer;
  return e;
}

void Manager::Impl::emit(Conn& c, Event e) {
  if (c.destroyed) return;
  events.push_back(std::move(e));
}

void Manager::Impl::send_rej(Conn& c, RejReason reason, MsgKind kind, std::span<const uint8_t> ari,
                             std::span<const uint8_t> pdata) {
  auto m = make_msg<RejMsg>(AttrId::kRej, c.tid);
  m.set_local_comm_id(c.id);
  m.set_remote_comm_id(c.peer.comm_id);
  m.set_message_rejected(kind);
  m.set_reason(static_cast<uint16_t>(reason));
  m.set_ari_length(static_cast<uint8_t>(ari.size()));
  copy_pdata(m.ari, ari);
  copy_pdata(m.private_data, pdata);
  send(c.peer.gid, &m);
  // Remembered (not retransmitted): a duplicate of what it answers gets it again.
  c.last.assign(reinterpret_cast<const uint8_t*>(&m), reinterpret_cast<const uint8_t*>(&m) + kMadBytes);
  c.last_dgid = c.peer.gid;
  ++stats.rejected_sent;
}

void Manager::Impl::withdraw_req(Conn& c) {
  // REJ "timeout", message "other", our CA GUID as ARI (as Linux's CM sends
  // it): the passive side finds the REQ it holds by (our GID, our comm ID).
  uint8_t guid[8];
  for (int k = 0; k < 8; ++k) guid[k] = static_cast<uint8_t>(cfg.ca_guid >> (56 - 8 * k));
  send_rej(c, RejReason::kTimeout, MsgKind::kOther, guid, {});
}

void Manager::Impl::issue_rej(const Gid& dgid, uint64_t tid, uint32_t remote_comm_id, RejReason reason,
                              MsgKind kind) {
  auto m = make_msg<RejMsg>(AttrId::kRej, tid);
  m.set_remote_comm_id(remote_comm_id);
  m.set_message_rejected(kind);
  m.set_reason(static_cast<uint16_t>(reason));
  send(dgid, &m);
  ++stats.rejected_sent;
}

void Manager::Impl::send_dreq(Conn& c, std::span<const uint8_t> pdata, Picos now) {
  c.tid = new_tid();
  auto m = make_msg<DreqMsg>(AttrId::kDreq, c.tid);
  m.set_local_comm_id(c.id);
  m.set_remote_comm_id(c.peer.comm_id);
  m.set_remote_qpn(c.peer.qpn);
  copy_pdata(m.private_data, pdata);
  set_state(c, State::kDreqSent);
  send_tracked(c, &m, now, cm_timeout_picos(c.remote_timeout), c.max_retries);
}

void Manager::Impl::send_drep(Conn& c, std::span<const uint8_t> pdata) {
  auto m = make_msg<DrepMsg>(AttrId::kDrep, c.tid);
  m.set_local_comm_id(c.id);
  m.set_remote_comm_id(c.peer.comm_id);
  copy_pdata(m.private_data, pdata);
  send(c.peer.gid, &m);
  c.last.assign(reinterpret_cast<const uint8_t*>(&m), reinterpret_cast<const uint8_t*>(&m) + kMadBytes);
  c.last_dgid = c.peer.gid;
}

void Manager::Impl::enter_timewait(Conn& c, Picos now) {
  set_state(c, State::kTimewait);
  c.retries_left = 0;
  set_timer(c, now + cfg.timewait);
}

void Manager::Impl::to_idle(Conn& c) {
  if (c.destroyed) {
    erase(c);
    return;
  }
  set_state(c, State::kIdle);
  set_timer(c, kNoDeadline);
}

void Manager::Impl::on_timeout(Conn& c, Picos now) {
  c.deadline = kNoDeadline;  // already out of timers
  if (c.state == State::kTimewait) {
    if (c.destroyed) {
      erase(c);
      return;
    }
    set_state(c, State::kIdle);
    emit(c, event(c, EventType::kTimewaitExit));
    return;
  }
  const bool retransmits = c.state == State::kReqSent || c.state == State::kRepSent ||
                           c.state == State::kDreqSent || c.state == State::kSidrReqSent;
  if (retransmits && c.retries_left > 0) {
    --c.retries_left;
    resend_last(c);
    set_timer(c, now + c.period);
    return;
  }
  ++stats.timeouts;
  switch (c.state) {
    case State::kReqSent:
    case State::kMraReqRcvd:
      withdraw_req(c);
      emit(c, event(c, EventType::kUnreachable));
      to_idle(c);
      break;
    case State::kRepSent:
    case State::kMraRepRcvd:
      send_rej(c, RejReason::kTimeout, MsgKind::kRep, {}, {});
      emit(c, event(c, EventType::kUnreachable));
      // Duplicates of the REQ get the REJ during timewait.
      enter_timewait(c, now);
      break;
    case State::kDreqSent: {
      Event e = event(c, EventType::kDisconnected);
      e.timed_out = true;
      emit(c, std::move(e));
      enter_timewait(c, now);
      break;
    }
    case State::kSidrReqSent:
      emit(c, event(c, EventType::kUnreachable));
      to_idle(c);
      break;
    default:
      break;
  }
}

// ---- Manager ----

Manager::Manager(const ManagerConfig& config) : impl_(std::make_unique<Impl>(config)) {}
Manager::~Manager() = default;

const ManagerConfig& Manager::config() const { return impl_->cfg; }
const ManagerStats& Manager::stats() const { return impl_->stats; }

int Manager::listen(uint64_t owner, uint64_t service_id, Id* id) {
  Impl& m = *impl_;
  if (m.listeners.count(service_id)) return EBUSY;
  int err = 0;
  Conn* c = m.alloc(owner, State::kListen, &err);
  if (!c) return err;
  c->service_id = service_id;
  m.listeners[service_id] = c->id;
  *id = c->id;
  return 0;
}

int Manager::connect(uint64_t owner, const ConnectParams& p, Picos now, Id* id) {
  Impl& m = *impl_;
  if (!fits24(p.qpn) || !fits24(p.starting_psn) || p.path_mtu < 1 || p.path_mtu > 5 ||
      p.private_data.size() > kReqPrivateData || p.retry_count > 7 || p.rnr_retry_count > 7 ||
      p.remote_cm_response_timeout > 31 || p.local_cm_response_timeout > 31 || p.max_cm_retries > 15 ||
      p.local_ack_timeout > 31 || p.flow_label > 0xfffff || p.sl > 15 ||
      (p.qp_type != QpType::kRc && p.qp_type != QpType::kUc))
    return EINVAL;
  int err = 0;
  Conn* c = m.alloc(owner, State::kReqSent, &err);
  if (!c) return err;
  c->service_id = p.service_id;
  c->local_qpn = p.qpn;
  c->peer.gid = p.peer_gid;
  c->peer.service_id = p.service_id;
  c->peer.qp_type = p.qp_type;
  c->peer.path_mtu = p.path_mtu;
  c->remote_timeout = p.remote_cm_response_timeout;
  c->max_retries = p.max_cm_retries;
  c->tid = m.new_tid();
  auto r = make_msg<ReqMsg>(AttrId::kReq, c->tid);
  r.set_local_comm_id(c->id);
  r.set_service_id(p.service_id);
  r.set_local_ca_guid(m.cfg.ca_guid);
  r.set_local_qpn(p.qpn);
  r.set_responder_resources(p.responder_resources);
  r.set_initiator_depth(p.initiator_depth);
  r.set_remote_cm_response_timeout(p.remote_cm_response_timeout);
  r.set_transport_type(static_cast<uint8_t>(p.qp_type));
  r.set_e2e_flow_control(p.end_to_end_flow_control);
  r.set_starting_psn(p.starting_psn);
  r.set_local_cm_response_timeout(p.local_cm_response_timeout);
  r.set_retry_count(p.retry_count);
  r.set_pkey(m.cfg.pkey);
  r.set_path_mtu(p.path_mtu);
  r.set_rnr_retry_count(p.rnr_retry_count);
  r.set_max_cm_retries(p.max_cm_retries);
  r.set_srq(p.srq);
  r.set_primary_local_lid(kPermissiveLid);
  r.set_primary_remote_lid(kPermissiveLid);
  r.set_primary_local_gid(m.cfg.local_gid);
  r.set_primary_remote_gid(p.peer_gid);
  r.set_primary_flow_label_rate(p.flow_label, 3);  // packet rate 3: 10 Gb/s
  r.set_primary_traffic_class(p.traffic_class);
  r.set_primary_hop_limit(p.hop_limit);
  r.set_primary_sl(p.sl);
  r.set_primary_local_ack_timeout(p.local_ack_timeout);
  copy_pdata(r.private_data, p.private_data);
  m.send_tracked(*c, &r, now, cm_timeout_picos(p.remote_cm_response_timeout), p.max_cm_retries);
  *id = c->id;
  return 0;
}

int Manager::accept(Id id, const AcceptParams& p, Picos now) {
  Impl& m = *impl_;
  Conn* c = m.find(id);
  if (!c || c->destroyed) return ENOENT;
  if (c->state != State::kReqRcvd && c->state != State::kMraReqSent) return EPROTO;
  if (!fits24(p.qpn) || !fits24(p.starting_psn) || p.rnr_retry_count > 7 || p.target_ack_delay > 31 ||
      p.private_data.size() > kRepPrivateData)
    return EINVAL;
  c->local_qpn = p.qpn;
  auto r = make_msg<RepMsg>(AttrId::kRep, c->tid);
  r.set_local_comm_id(c->id);
  r.set_remote_comm_id(c->peer.comm_id);
  r.set_local_qpn(p.qpn);
  r.set_starting_psn(p.starting_psn);
  r.set_responder_resources(p.responder_resources);
  r.set_initiator_depth(p.initiator_depth);
  r.set_target_ack_delay(p.target_ack_delay);
  r.set_failover_accepted(p.failover_accepted ? 1 : 0);
  r.set_e2e_flow_control(p.end_to_end_flow_control);
  r.set_rnr_retry_count(p.rnr_retry_count);
  r.set_srq(p.srq);
  r.set_local_ca_guid(m.cfg.ca_guid);
  copy_pdata(r.private_data, p.private_data);
  m.set_state(*c, State::kRepSent);
  m.send_tracked(*c, &r, now, cm_timeout_picos(c->remote_timeout), c->max_retries);
  return 0;
}

int Manager::reject(Id id, const RejectParams& p, Picos now) {
  Impl& m = *impl_;
  Conn* c = m.find(id);
  if (!c || c->destroyed) return ENOENT;
  if (p.ari.size() > kRejAriBytes || p.private_data.size() > kRejPrivateData) return EINVAL;
  MsgKind kind;
  switch (c->state) {
    case State::kReqRcvd:
    case State::kMraReqSent: kind = MsgKind::kReq; break;
    case State::kRepRcvd:
    case State::kMraRepSent: kind = MsgKind::kRep; break;
    default: return EPROTO;
  }
  m.send_rej(*c, p.reason, kind, p.ari, p.private_data);
  // Passive: timewait answers duplicate REQs with the same REJ. Active: idle.
  if (c->passive) m.enter_timewait(*c, now);
  else m.to_idle(*c);
  return 0;
}

int Manager::send_mra(Id id, uint8_t service_timeout, std::span<const uint8_t> private_data, Picos) {
  Impl& m = *impl_;
  Conn* c = m.find(id);
  if (!c || c->destroyed) return ENOENT;
  if (service_timeout > 31 || private_data.size() > kMraPrivateData) return EINVAL;
  MsgKind kind;
  State next;
  if (c->state == State::kReqRcvd || c->state == State::kMraReqSent) kind = MsgKind::kReq, next = State::kMraReqSent;
  else if (c->state == State::kRepRcvd || c->state == State::kMraRepSent) kind = MsgKind::kRep, next = State::kMraRepSent;
  else return EPROTO;
  auto r = make_msg<MraMsg>(AttrId::kMra, c->tid);
  r.set_local_comm_id(c->id);
  r.set_remote_comm_id(c->peer.comm_id);
  r.set_message_mraed(kind);
  r.set_service_timeout(service_timeout);
  copy_pdata(r.private_data, private_data);
  m.send(c->peer.gid, &r);
  c->last.assign(reinterpret_cast<const uint8_t*>(&r), reinterpret_cast<const uint8_t*>(&r) + kMadBytes);
  c->last_dgid = c->peer.gid;
  m.set_state(*c, next);
  return 0;
}

int Manager::establish(Id id, std::span<const uint8_t> private_data, Picos) {
  Impl& m = *impl_;
  Conn* c = m.find(id);
  if (!c || c->destroyed) return ENOENT;
  if (c->state != State::kRepRcvd && c->state != State::kMraRepSent) return EPROTO;
  if (private_data.size() > kRtuPrivateData) return EINVAL;
  auto r = make_msg<RtuMsg>(AttrId::kRtu, c->tid);
  r.set_local_comm_id(c->id);
  r.set_remote_comm_id(c->peer.comm_id);
  copy_pdata(r.private_data, private_data);
  m.send(c->peer.gid, &r);
  // Kept: a duplicate REP (our RTU was lost) gets it again.
  c->last.assign(reinterpret_cast<const uint8_t*>(&r), reinterpret_cast<const uint8_t*>(&r) + kMadBytes);
  c->last_dgid = c->peer.gid;
  m.set_state(*c, State::kEstablished);
  m.set_timer(*c, kNoDeadline);
  ++m.stats.established;
  return 0;
}

int Manager::notify_established(Id id, Picos) {
  Impl& m = *impl_;
  Conn* c = m.find(id);
  if (!c || c->destroyed) return ENOENT;
  if (c->state == State::kEstablished) return 0;
  if (c->state != State::kRepSent && c->state != State::kMraRepRcvd) return EPROTO;
  m.set_state(*c, State::kEstablished);
  m.set_timer(*c, kNoDeadline);
  ++m.stats.established;
  m.emit(*c, m.event(*c, EventType::kEstablished));
  return 0;
}

int Manager::disconnect(Id id, std::span<const uint8_t> private_data, Picos now) {
  Impl& m = *impl_;
  Conn* c = m.find(id);
  if (!c || c->destroyed) return ENOENT;
  switch (c->state) {
    case State::kEstablished:
    case State::kRepSent:      // the RTU may be lost: the peer may be established
    case State::kMraRepRcvd:
      if (private_data.size() > kDreqPrivateData) return EINVAL;
      m.send_dreq(*c, private_data, now);
      return 0;
    case State::kDreqRcvd:
      if (private_data.size() > kDrepPrivateData) return EINVAL;
      m.send_drep(*c, private_data);
      m.enter_timewait(*c, now);
      m.emit(*c, m.event(*c, EventType::kDisconnected));
      return 0;
    case State::kReqSent:
    case State::kMraReqRcvd:
    case State::kReqRcvd:
    case State::kMraReqSent:
    case State::kRepRcvd:
    case State::kMraRepSent:
    case State::kDreqSent:
    case State::kTimewait:
      // As Linux (ib_send_cm_dreq and ib_send_cm_drep refuse every other
      // state and rdma_disconnect ignores that): nothing on the wire, no
      // event; a handshake under way goes on and its outcome is the event
      // (REP, REJ or kUnreachable), a disconnect under way finishes.
      return 0;
    default:
      return EPROTO;
  }
}

int Manager::sidr_resolve(uint64_t owner, const SidrParams& p, Picos now, Id* id) {
  Impl& m = *impl_;
  if (p.timeout > 31 || p.max_retries > 15 || p.private_data.size() > kSidrReqPrivateData) return EINVAL;
  int err = 0;
  Conn* c = m.alloc(owner, State::kSidrReqSent, &err);
  if (!c) return err;
  c->service_id = p.service_id;
  c->peer.gid = p.peer_gid;
  c->peer.service_id = p.service_id;
  c->tid = m.new_tid();
  auto r = make_msg<SidrReqMsg>(AttrId::kSidrReq, c->tid);
  r.set_request_id(c->id);
  r.set_pkey(m.cfg.pkey);
  r.set_service_id(p.service_id);
  copy_pdata(r.private_data, p.private_data);
  m.send_tracked(*c, &r, now, cm_timeout_picos(p.timeout), p.max_retries);
  *id = c->id;
  return 0;
}

int Manager::sidr_reply(Id id, const SidrReplyParams& p, Picos now) {
  Impl& m = *impl_;
  Conn* c = m.find(id);
  if (!c || c->destroyed) return ENOENT;
  if (c->state != State::kSidrReqRcvd) return EPROTO;
  if (!fits24(p.qpn) || p.private_data.size() > kSidrRepPrivateData) return EINVAL;
  auto r = make_msg<SidrRepMsg>(AttrId::kSidrRep, c->tid);
  r.set_request_id(c->peer.comm_id);
  r.set_status(static_cast<uint8_t>(p.status));
  r.set_service_id(c->service_id);
  if (p.status == SidrStatus::kValid) {
    r.set_qpn(p.qpn);
    r.set_qkey(p.qkey);
  }
  copy_pdata(r.private_data, p.private_data);
  m.send(c->peer.gid, &r);
  c->last.assign(reinterpret_cast<const uint8_t*>(&r), reinterpret_cast<const uint8_t*>(&r) + kMadBytes);
  c->last_dgid = c->peer.gid;
  // Kept through timewait to answer a duplicate SIDR_REQ; gone for the consumer.
  c->destroyed = true;
  m.enter_timewait(*c, now);
  return 0;
}

int Manager::destroy(Id id, Picos now) {
  Impl& m = *impl_;
  Conn* c = m.find(id);
  if (!c || c->destroyed) return ENOENT;
  c->destroyed = true;
  switch (c->state) {
    case State::kListen:
      m.erase(*c);
      break;
    case State::kReqSent:
    case State::kMraReqRcvd:
      m.withdraw_req(*c);
      m.erase(*c);
      break;
    case State::kReqRcvd:
    case State::kMraReqSent:
      m.send_rej(*c, RejReason::kConsumerReject, MsgKind::kReq, {}, {});
      m.enter_timewait(*c, now);
      break;
    case State::kRepSent:
    case State::kMraRepRcvd:
      m.send_rej(*c, RejReason::kConsumerReject, MsgKind::kRep, {}, {});
      m.enter_timewait(*c, now);
      break;
    case State::kRepRcvd:
    case State::kMraRepSent:
      m.send_rej(*c, RejReason::kConsumerReject, MsgKind::kRep, {}, {});
      m.enter_timewait(*c, now);
      break;
    case State::kEstablished:
      m.send_dreq(*c, {}, now);
      break;
    case State::kDreqRcvd:
      m.send_drep(*c, {});
      m.enter_timewait(*c, now);
      break;
    case State::kDreqSent:
    case State::kTimewait:
      break;  // finishes by itself, then is erased
    case State::kSidrReqRcvd: {
      SidrReplyParams rej;
      rej.status = SidrStatus::kRejected;
      c->destroyed = false;
      sidr_reply(id, rej, now);
      break;
    }
    case State::kSidrReqSent:
    case State::kIdle:
      m.erase(*c);
      break;
  }
  return 0;
}

size_t Manager::destroy_owner(uint64_t owner, Picos now) {
  std::vector<Id> ids;
  for (const auto& [id, c] : impl_->conns)
    if (c.owner == owner && !c.destroyed) ids.push_back(id);
  for (Id id : ids) destroy(id, now);
  return ids.size();
}

void Manager::on_timer(Picos now) {
  Impl& m = *impl_;
  while (!m.timers.empty() && m.timers.begin()->first <= now) {
    const Id id = m.timers.begin()->second;
    m.timers.erase(m.timers.begin());
    if (Conn* c = m.find(id)) m.on_timeout(*c, now);
  }
}

Picos Manager::next_deadline() const {
  return impl_->timers.empty() ? kNoDeadline : impl_->timers.begin()->first;
}

bool Manager::pop_mad(OutMad* out) {
  if (impl_->mads.empty()) return false;
  *out = std::move(impl_->mads.front());
  impl_->mads.pop_front();
  return true;
}

bool Manager::pop_event(Event* out) {
  if (impl_->events.empty()) return false;
  *out = std::move(impl_->events.front());
  impl_->events.pop_front();
  return true;
}

bool Manager::has_events() const { return !impl_->events.empty(); }

bool Manager::state(Id id, State* s) const {
  const Conn* c = impl_->find(id);
  if (!c || c->destroyed) return false;
  *s = c->state;
  return true;
}

bool Manager::peer(Id id, PeerParams* p) const {
  const Conn* c = impl_->find(id);
  if (!c || c->destroyed) return false;
  *p = c->peer;
  return true;
}

size_t Manager::live_ids() const { return impl_->conns.size(); }

}  // namespace isoroce::cm
