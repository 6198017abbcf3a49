// Objects and verbs: what the application calls. Errnos follow libibverbs and
// rxe (rxe_verbs.c) unless transport/verbs/README.md says otherwise.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sched/policy_registry.h"
#include "transport/engine/engine_impl.h"
#include "transport/engine/memory.h"
#include "transport/verbs/ah.h"

namespace isoroce::transport {

using detail::EngineImpl;

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  sched::Config sc;
  sc.link_bps = config.link_bps;
  sc.max_qps = config.max_qps;
  sc.lookahead = config.sched_lookahead;
  sc.catch_up = config.sched_catch_up;
  sc.max_msgs_per_sec = config.max_msgs_per_sec;
  sc.justitia = config.justitia;
  sc.rnic = config.rnic;
  if (!sched::validate(sc).empty() || config.max_qps == 0 ||
      config.max_qps > config.device.max_qp || verbs::mtu_bytes(config.active_mtu) == 0) {
    return Result<std::unique_ptr<Engine>>::error(EINVAL);
  }
  const sched::PolicyOps* policy = sched::find_policy(config.policy);
  if (policy == nullptr) return Result<std::unique_ptr<Engine>>::error(EINVAL);
  // DCQCN's rates need a policy that enforces them (fifo records and ignores limits).
  if (config.dcqcn.enabled &&
      (!policy->has(sched::kCapEnforcesRates) || !dcqcn::validate(config.dcqcn).empty())) {
    return Result<std::unique_ptr<Engine>>::error(EINVAL);
  }
  auto sched = policy->create(sc);
  if (!sched) return Result<std::unique_ptr<Engine>>::error(EINVAL);
  return std::unique_ptr<Engine>(new EngineImpl(config, std::move(sched)));
}

namespace detail {

EngineImpl::EngineImpl(const EngineConfig& config, std::unique_ptr<sched::Scheduler> sched)
    : config_(config),
      sched_(std::move(sched)),
      mrs_(config.key_seed),
      windows_(std::make_shared<Windows>(config.key_seed)),
      slots_(config.max_qps),
      gen_(config.max_qps, 0),
      next_qpn_(config.first_qpn ? config.first_qpn & 0xffffff : 16 + (config.qpn_seed * 2654435761u) % 0x100) {
  free_slots_.reserve(config.max_qps);
  for (uint32_t i = config.max_qps; i-- > 0;) free_slots_.push_back(i);
  granted_.resize(kGrantBurst);  // the grants of one dequeue (grants_); more grow it
  for (unsigned op = 0; op < 256; ++op) {
    frame_header_bytes_[op] = static_cast<uint16_t>(
        wire::frame_size(wire::is_ipv4_mapped(config_.ip), false, static_cast<uint8_t>(op), 0));
  }
}

void EngineImpl::set_neighbor(const wire::IpAddr& ip, const wire::MacAddr& mac) {
  neighbors_[ip] = mac;
}

bool EngineImpl::resolve_peer(const AhAttr& ah, Peer* peer) const {
  // The port's own address needs no neighbour: its frames loop back (transmit()).
  const bool self = ah.dgid == config_.ip;
  auto it = neighbors_.find(ah.dgid);
  if (!self && it == neighbors_.end()) return false;
  if (wire::is_ipv4_mapped(ah.dgid) != wire::is_ipv4_mapped(config_.ip)) return false;
  peer->ip = ah.dgid;
  peer->mac = self ? config_.mac : it->second;
  peer->traffic_class = ah.traffic_class;
  peer->hop_limit = ah.hop_limit == 0 ? 64 : ah.hop_limit;
  peer->flow_label = ah.flow_label;
  return true;
}

// ---- PD, MR --------------------------------------------------------------

uint32_t EngineImpl::take_handle() {
  if (forced_handle_ == 0) return next_handle_++;
  const uint32_t h = forced_handle_;
  forced_handle_ = 0;
  if (cqs_.count(h) || srqs_.count(h) || ahs_.count(h)) return 0;
  if (h >= next_handle_) next_handle_ = h + 1;
  return h;
}

Result<PdHandle> EngineImpl::alloc_pd() { return pds_.alloc(config_.device); }

int EngineImpl::dealloc_pd(PdHandle pd) { return pds_.dealloc(pd); }

Result<verbs::MrKeys> EngineImpl::reg_mr(PdHandle pd, void* addr, uint64_t length, uint64_t iova,
                                         uint32_t access) {
  if (addr == nullptr) return Result<verbs::MrKeys>::error(EINVAL);
  // No MR key may equal a memory window's (the two tables draw keys apart).
  const auto lock = lock_windows();
  const verbs::MwTable& mws = windows_->table;
  for (;;) {
    auto r = mrs_.reg(config_.device, pds_, pd, reinterpret_cast<uint64_t>(addr), length, iova, access);
    if (!r.ok() || (!mws.has_key(r.value().rkey) && !mws.has_key(r.value().lkey))) return r;
    mrs_.dereg(pds_, r.value().lkey);
  }
}

int EngineImpl::dereg_mr(uint32_t lkey) {
  {
    const auto lock = lock_windows();
    if (windows_->table.mr_has_windows(lkey)) return EINVAL;  // rxe_dereg_mr(): windows still bound
  }
  window_hit_.mr = nullptr;
  return mrs_.dereg(pds_, lkey);
}

// Memory windows: windows.cc.

// ---- CQ ------------------------------------------------------------------

Result<CqHandle> EngineImpl::create_cq(int cqe) {
  auto cq = verbs::Cq::create(config_.device, cqe);
  if (!cq.ok()) return Result<CqHandle>::error(cq.err());
  const CqHandle h = take_handle();
  if (h == 0) return Result<CqHandle>::error(EEXIST);
  cqs_.emplace(h, std::make_unique<CqCtx>(CqCtx{cq.value(), Ring<ibv_wc>(cq.value().capacity())}));
  return h;
}

int EngineImpl::destroy_cq(CqHandle cq) {
  auto it = cqs_.find(cq);
  if (it == cqs_.end()) return EINVAL;
  if (cq_users_[cq] != 0) return EBUSY;
  if (cq_cache_ == it->second.get()) cq_cache_ = nullptr;
  cqs_.erase(it);
  cq_users_.erase(cq);
  return 0;
}

CqCtx* EngineImpl::find_cq_slow(CqHandle cq) {
  // Handles are never reused and destroy_cq() forgets the cached one.
  auto it = cqs_.find(cq);
  if (it == cqs_.end()) return nullptr;
  cq_cache_handle_ = cq;
  cq_cache_ = it->second.get();
  return cq_cache_;
}

int EngineImpl::poll_cq(CqHandle cq, std::span<ibv_wc> out) {
  CqCtx* cp = find_cq(cq);
  if (cp == nullptr) return -EINVAL;
  CqCtx& c = *cp;
  size_t n = 0;
  while (n < out.size() && !c.entries.empty()) {
    out[n++] = c.entries.front();
    c.entries.pop();
  }
  c.cq.pop(static_cast<uint32_t>(n));
  return static_cast<int>(n);
}

uint32_t EngineImpl::cq_queued(CqHandle cq) const {
  const auto it = cqs_.find(cq);
  return it == cqs_.end() ? 0 : static_cast<uint32_t>(it->second->entries.size());
}

int EngineImpl::resize_cq(CqHandle cq, int cqe, uint32_t outside) {
  auto it = cqs_.find(cq);
  if (it == cqs_.end()) return EINVAL;
  CqCtx& c = *it->second;
  if (int err = c.cq.resize(config_.device, cqe, outside)) return err;
  c.entries.set_capacity(c.cq.capacity());
  return 0;
}

void EngineImpl::cq_overrun(CqHandle cq, const CqCtx& c) {
  // CQ overrun (IBTA 11.4.2.1): the completion is lost, the consumer is told.
  ++counters_.cq_overruns;
  if (c.cq.count() == c.cq.capacity()) events_.push_back({AsyncEventType::kCqError, cq});
}

void EngineImpl::complete(CqHandle cq, const ibv_wc& wc, uint32_t msg_id) {
  ibv_wc* slot = cq_slot(cq);
  if (slot == nullptr) return;
  *slot = wc;
  if (trace_.on(trace::Event::kCompletion)) [[unlikely]] {
    const QpCtx* q = find_qp(wire::Qpn(wc.qp_num));
    trace_.emit(trace_now_, trace::Event::kCompletion, wc.qp_num, msg_id, wc.byte_len,
                q ? q->cls : static_cast<uint8_t>(sched::FlowClass::kBandwidth), wc.status, wc.opcode);
  }
  if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
    if (QpCtx* q = find_qp(wire::Qpn(wc.qp_num))) ++q->stats.errors;
  }
}

namespace {

ibv_wc_opcode wc_opcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
    case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
    default: return IBV_WC_SEND;
  }
}

}  // namespace

void EngineImpl::complete_send(QpCtx& q, const SendWqe& w, ibv_wc_status status) {
  sched_->on_completion(tx_now_, q.slot, w.length);  // every WQE, signaled or not (a policy event)
  if (status == IBV_WC_SUCCESS) [[likely]] {
    if (!w.signaled) return;  // errors always complete (IBTA 10.7.2.2)
    // complete()'s work for a successful completion, the entry written in place: the
    // fields below and zeros (no ibv_wc built and copied).
    ibv_wc* wc = cq_slot(q.send_cq);
    if (wc == nullptr) [[unlikely]] return;
    *wc = ibv_wc{};
    wc->wr_id = w.wr_id;
    wc->status = IBV_WC_SUCCESS;
    wc->opcode = wc_opcode(w.opcode);
    wc->qp_num = q.qp.qpn().value();
    wc->byte_len = verbs::is_atomic(w.opcode) ? 8 : static_cast<uint32_t>(w.length);
    if (trace_.on(trace::Event::kCompletion)) [[unlikely]] {
      trace_.emit(trace_now_, trace::Event::kCompletion, wc->qp_num, w.msg_id, wc->byte_len, q.cls, wc->status,
                  wc->opcode);
    }
    return;
  }
  // An error completion: no byte count.
  ibv_wc wc{};
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = wc_opcode(w.opcode);
  wc.qp_num = q.qp.qpn().value();
  complete(q.send_cq, wc, w.msg_id);
}

// ---- SRQ -----------------------------------------------------------------

Result<SrqHandle> EngineImpl::create_srq(PdHandle pd, const ibv_srq_attr& attr) {
  if (!pds_.exists(pd)) return Result<SrqHandle>::error(EINVAL);
  auto srq = verbs::Srq::create(config_.device, attr);
  if (!srq.ok()) return Result<SrqHandle>::error(srq.err());
  const SrqHandle h = take_handle();
  if (h == 0) return Result<SrqHandle>::error(EEXIST);
  srqs_.emplace(h, std::make_unique<SrqCtx>(SrqCtx{srq.value(), pd, Ring<RecvWqe>(attr.max_wr)}));
  pds_.get(pd);
  return h;
}

int EngineImpl::modify_srq(SrqHandle srq, const ibv_srq_attr& attr, uint32_t mask) {
  auto it = srqs_.find(srq);
  if (it == srqs_.end()) return EINVAL;
  SrqCtx& s = *it->second;
  if (int err = s.srq.modify(config_.device, attr, mask); err != 0) return err;
  s.queue.set_capacity(s.srq.attr().max_wr);
  return 0;
}

int EngineImpl::destroy_srq(SrqHandle srq) {
  auto it = srqs_.find(srq);
  if (it == srqs_.end()) return EINVAL;
  if (srq_users_[srq] != 0) return EBUSY;
  pds_.put(it->second->pd);
  srqs_.erase(it);
  srq_users_.erase(srq);
  return 0;
}

// ---- AH ------------------------------------------------------------------

Result<AhHandle> EngineImpl::create_ah(PdHandle pd, const AhAttr& attr) {
  if (!pds_.exists(pd)) return Result<AhHandle>::error(EINVAL);
  if (ahs_.size() >= config_.device.max_ah) return Result<AhHandle>::error(ENOMEM);
  Peer peer;
  if (!resolve_peer(attr, &peer)) return Result<AhHandle>::error(EHOSTUNREACH);
  const AhHandle h = take_handle();
  if (h == 0) return Result<AhHandle>::error(EEXIST);
  ahs_.emplace(h, AhCtx{pd, peer});
  pds_.get(pd);
  return h;
}

int EngineImpl::destroy_ah(AhHandle ah) {
  auto it = ahs_.find(ah);
  if (it == ahs_.end()) return EINVAL;
  pds_.put(it->second.pd);
  ahs_.erase(it);
  return 0;
}

// ---- QP ------------------------------------------------------------------

// The slot of the last QP found is tried first: a flow's frames, posts and
// completions name the same QP again and again (the hash lookup was 2% of a 4 KB
// WRITE's cost). The cached slot is checked, never trusted: a slot holds at most
// one live QP and QPNs of live QPs are unique, so a slot whose QP has this QPN is
// the answer whatever happened since it was cached.
QpCtx* EngineImpl::find_qp_slow(wire::Qpn qpn) const {
  auto it = slot_by_qpn_.find(qpn.value());
  if (it == slot_by_qpn_.end()) return nullptr;
  qp_cache_slot_ = it->second;
  return slots_[it->second].get();
}

const QpCtx* EngineImpl::find_qp(wire::Qpn qpn) const {
  if (qp_cache_slot_ < slots_.size()) {
    const QpCtx* q = slots_[qp_cache_slot_].get();
    if (q != nullptr && q->qp.qpn() == qpn) return q;
  }
  return find_qp_slow(qpn);
}

const verbs::Qp* EngineImpl::query_qp(wire::Qpn qpn) const {
  const QpCtx* q = find_qp(qpn);
  return q ? &q->qp : nullptr;
}

std::vector<wire::Qpn> EngineImpl::qp_numbers() const {
  std::vector<wire::Qpn> out;
  for (const auto& q : slots_)
    if (q) out.push_back(q->qp.qpn());
  return out;
}

const QpCounters* EngineImpl::qp_counters(wire::Qpn qpn) const {
  const QpCtx* q = find_qp(qpn);
  return q ? &q->stats : nullptr;
}

uint64_t EngineImpl::qp_rate(wire::Qpn qpn) const {
  const QpCtx* q = find_qp(qpn);
  return q ? sched_->rate(q->slot) : 0;
}

Result<wire::Qpn> EngineImpl::create_qp(const QpCreate& c) {
  using R = Result<wire::Qpn>;
  if (!pds_.exists(c.pd) || !cqs_.count(c.send_cq) || !cqs_.count(c.recv_cq)) return R::error(EINVAL);
  if (c.use_srq && !srqs_.count(c.srq)) return R::error(EINVAL);
  if (free_slots_.empty()) return R::error(ENOMEM);
  verbs::QpInitAttr init = c.init;
  init.has_srq = c.use_srq;
  // Find a free QPN (24 bits, never 0 or 1: QP0/QP1 are the special QPs).
  uint32_t qpn = next_qpn_;
  if (c.qpn != 0) {
    if (c.qpn < 1 || c.qpn > 0xffffff) return R::error(EINVAL);  // 1: the GSI (ctrl/cm_agent.h)
    if (slot_by_qpn_.count(c.qpn)) return R::error(EEXIST);
    qpn = c.qpn;
  } else {
    const uint32_t step = std::max(1u, config_.qpn_stride);
    while (qpn < 2 || slot_by_qpn_.count(qpn)) qpn = (qpn + step) & 0xffffff;
  }
  auto qp = verbs::Qp::create(config_.device, wire::Qpn(qpn), init);
  if (!qp.ok()) return R::error(qp.err());
  if (c.qpn == 0) next_qpn_ = (qpn + std::max(1u, config_.qpn_stride)) & 0xffffff;

  const uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  auto ctx = std::make_unique<QpCtx>(std::move(qp.value()));
  ctx->slot = slot;
  ctx->pd = c.pd;
  ctx->send_cq = c.send_cq;
  ctx->recv_cq = c.recv_cq;
  ctx->use_srq = c.use_srq;
  ctx->srq = c.srq;
  ctx->sq = Ring<SendWqe>(std::max(1u, ctx->qp.cap().max_send_wr));
  ctx->rq = Ring<RecvWqe>(c.use_srq ? 1 : std::max(1u, ctx->qp.cap().max_recv_wr));
  ++gen_[slot];
  slots_[slot] = std::move(ctx);
  slot_by_qpn_[qpn] = slot;
  pds_.get(c.pd);
  ++cq_users_[c.send_cq];
  ++cq_users_[c.recv_cq];
  if (c.use_srq) ++srq_users_[c.srq];
  return wire::Qpn(qpn);
}

int EngineImpl::destroy_qp(wire::Qpn qpn) {
  auto it = slot_by_qpn_.find(qpn.value());
  if (it == slot_by_qpn_.end()) return EINVAL;
  const uint32_t slot = it->second;
  QpCtx& q = *slots_[slot];
  send_parting_ack(q);
  sched_->deactivate(tx_now_, slot);
  sched_->set_rate(tx_now_, slot, sched::kUnlimited);
  sched_->set_class(tx_now_, slot, sched::FlowClass::kAuto, sched::kOwnApp, 1);  // the slot's next QP starts afresh, undeclared
  pds_.put(q.pd);
  --cq_users_[q.send_cq];
  --cq_users_[q.recv_cq];
  if (q.use_srq) --srq_users_[q.srq];
  ++gen_[slot];  // stale timers of this slot are recognised and ignored
  slots_[slot].reset();
  slot_by_qpn_.erase(it);
  free_slots_.push_back(slot);
  return 0;
}

// An ACK the responder owes (a request with AckReq taken, its ACK still waiting for a
// grant) is built now and sent by the next transmit(), outside the scheduler: an
// application may destroy its QP as soon as it has polled the receive, and without
// the ACK the peer's last message would time out into "retry exceeded" (rxe and
// hardware RNICs send it first). Frames to the port's own address loop back as
// always; beyond kMaxParting waiting frames the peer recovers through its retries
// as from a lost frame.
void EngineImpl::send_parting_ack(QpCtx& q) {
  if (q.qp.type() != IBV_QPT_RC || !q.resp.ack_pending || q.resp.nak_syndrome || q.resp.failed) return;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return;
  const size_t len_hint = ack_frame_bytes() - kEthWireOverhead;
  const bool to_self = same_ip(q.peer.ip, config_.ip);
  std::span<uint8_t> buf;
  if (to_self) {
    buf = loop_buffer(len_hint);
  } else {
    if (parting_lens_.size() >= kMaxParting) {
      ++counters_.tx_no_buffer;
      return;
    }
    const size_t i = parting_lens_.size();
    if (parting_frames_.size() <= i) parting_frames_.emplace_back();
    parting_frames_[i].resize(len_hint);
    buf = parting_frames_[i];
  }
  const size_t len = build_control(tx_now_, q, buf);
  if (len == 0) return;
  if (trace_.mask() != 0) [[unlikely]] trace_frame_tx(tx_now_, q, buf.first(len));
  (to_self ? loop_lens_ : parting_lens_).push_back(len);
  if (to_self) ++counters_.tx_loopback;
  ++counters_.tx_frames;
  counters_.tx_bytes += len;
}

// The parting ACKs of QPs destroyed since the last transmit() (send_parting_ack).
size_t EngineImpl::transmit_parting(Picos now, TxSink& sink) {
  size_t sent = 0;
  for (size_t i = 0; i < parting_lens_.size(); ++i) {
    const size_t len = parting_lens_[i];
    std::span<uint8_t> buf = sink.tx_buffer(len);
    if (buf.size() < len) {
      ++counters_.tx_no_buffer;
      continue;
    }
    std::memcpy(buf.data(), parting_frames_[i].data(), len);
    sink.tx_commit(now, len);
    ++sent;
  }
  parting_lens_.clear();
  return sent;
}

int EngineImpl::modify_qp(wire::Qpn qpn, const ibv_qp_attr& attr, uint32_t mask) {
  QpCtx* q = find_qp(qpn);
  if (q == nullptr) return EINVAL;
  Peer peer = q->peer;
  if ((mask & IBV_QP_AV) && q->qp.type() == IBV_QPT_RC) {
    AhAttr ah;
    std::memcpy(ah.dgid.data(), attr.ah_attr.grh.dgid.raw, 16);
    ah.traffic_class = attr.ah_attr.grh.traffic_class;
    ah.hop_limit = attr.ah_attr.grh.hop_limit;
    ah.flow_label = attr.ah_attr.grh.flow_label;
    ah.sl = attr.ah_attr.sl;
    if (attr.ah_attr.is_global && !resolve_peer(ah, &peer)) return EHOSTUNREACH;
  }
  if ((mask & IBV_QP_PATH_MTU) && attr.path_mtu > config_.active_mtu) return EINVAL;
  const ibv_qp_state from = q->qp.state();
  if (int err = q->qp.modify(config_.device, attr, mask); err != 0) return err;
  q->peer = peer;
  on_state_change(tx_now_, *q, from);
  return 0;
}

void EngineImpl::on_state_change(Picos now, QpCtx& q, ibv_qp_state from) {
  const ibv_qp_state to = q.qp.state();
  const ibv_qp_attr& a = q.qp.attr();
  if (to == IBV_QPS_RESET) {
    reset_qp(q);
    return;
  }
  if (to == IBV_QPS_ERR) {
    if (from != IBV_QPS_ERR) enter_error(now, q);
    return;
  }
  if (q.qp.type() == IBV_QPT_UD) {
    q.mtu = verbs::mtu_bytes(config_.active_mtu);
  } else {
    q.mtu = verbs::mtu_bytes(a.path_mtu);
    q.udp_sport = q.peer.flow_label ? wire::udp_sport_from_flow_label(q.peer.flow_label)
                                    : wire::udp_sport_for_qps(q.qp.qpn(), q.qp.dest_qpn());
    make_template(q, q.peer, q.qp.dest_qpn().value(), q.udp_sport, &q.tx_tmpl);
  }
  if (to == IBV_QPS_RTR && from == IBV_QPS_INIT) {
    q.resp.psn = q.qp.rq_psn();
    q.resp.acked_psn = q.resp.psn - 1;
    q.resp.resources.assign(2 * std::max<uint32_t>(1, a.max_dest_rd_atomic), RespResource{});
  }
  if (to == IBV_QPS_RTS && from == IBV_QPS_RTR) {
    q.req.psn = q.qp.sq_psn();
    q.req.max_psn = q.req.psn;
    q.comp.psn = q.req.psn;
    q.req.wqe = q.sq.head();
    q.req.pkt = 0;
    q.comp.retry_left = a.retry_cnt;
    q.comp.rnr_retry_left = a.rnr_retry;
  }
  if (to == IBV_QPS_RTS || to == IBV_QPS_SQD) kick(now, q);
}

void EngineImpl::reset_qp(QpCtx& q) {
  sched_->deactivate(tx_now_, q.slot);
  QpCtx fresh(std::move(q.qp));
  fresh.slot = q.slot;
  fresh.pd = q.pd;
  fresh.send_cq = q.send_cq;
  fresh.recv_cq = q.recv_cq;
  fresh.use_srq = q.use_srq;
  fresh.srq = q.srq;
  fresh.sq = Ring<SendWqe>(q.sq.capacity());
  fresh.rq = Ring<RecvWqe>(q.rq.capacity());
  // The rate limit outlives a reset; DCQCN's state does not.
  fresh.user_rate_bps = q.user_rate_bps;
  fresh.applied_rate_bps = q.applied_rate_bps;
  ++gen_[q.slot];
  q = std::move(fresh);
  apply_rate(tx_now_, q);
}

void EngineImpl::enter_error(Picos now, QpCtx& q) {
  (void)now;
  sched_->deactivate(tx_now_, q.slot);
  ++gen_[q.slot];  // cancels timers
  q.comp.ack_deadline = sched::kNever;
  flush(q);
}

void EngineImpl::flush(QpCtx& q) {
  // IBTA 10.3.1 / 11.4.2.1: every outstanding WR completes with a flush error.
  while (!q.sq.empty()) {
    SendWqe& w = q.sq.front();
    complete_send(q, w, IBV_WC_WR_FLUSH_ERR);
    q.sq.pop();
  }
  q.req.wqe = q.sq.head();
  q.req.rd_atomic_inflight = 0;
  auto flush_recv = [&](const RecvWqe& r) {
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = r.local_error != IBV_WC_SUCCESS ? r.local_error : IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = q.qp.qpn().value();
    complete(q.recv_cq, wc);
  };
  if (q.resp.have_recv && !q.use_srq) flush_recv(q.resp.cur_recv);
  q.resp.have_recv = false;
  while (!q.rq.empty()) {
    flush_recv(q.rq.front());
    q.rq.pop();
  }
  q.resp.in_msg = ResponderState::InMsg::kNone;
  q.resp.queue = {};
}

int EngineImpl::set_qp_rate(Picos now, wire::Qpn qpn, uint64_t bps) {
  QpCtx* q = find_qp(qpn);
  if (q == nullptr) return EINVAL;
  q->user_rate_bps = bps;
  q->applied_rate_bps = ~uint64_t{0};  // always pass it on, as before DCQCN
  apply_rate(now, *q);
  return 0;
}

int EngineImpl::set_qp_class(Picos now, wire::Qpn qpn, sched::FlowClass cls, uint32_t app, uint32_t weight) {
  QpCtx* q = find_qp(qpn);
  if (q == nullptr || weight == 0) return EINVAL;
  sched_->set_class(now, q->slot, cls, app, weight);
  q->cls = static_cast<uint8_t>(cls);
  // Soft admission (Justitia): admitted, but the application is told.
  const sched::JustitiaStats* js = sched_->justitia_stats();
  if (cls == sched::FlowClass::kLatency && js != nullptr && js->current99 > js->target99)
    events_.push_back({AsyncEventType::kLatencyTargetMissed, qpn.value()});
  return 0;
}

int EngineImpl::set_qp_tenant(Picos now, wire::Qpn qpn, uint32_t tenant, uint32_t weight) {
  QpCtx* q = find_qp(qpn);
  if (q == nullptr || weight == 0) return EINVAL;
  sched_->set_tenant(now, q->slot, tenant, weight);
  return 0;
}

void EngineImpl::add_reference_latency(Picos now, Picos latency) { sched_->on_reference_latency(now, latency); }

std::vector<AsyncEvent> EngineImpl::take_async_events() {
  std::vector<AsyncEvent> out;
  out.swap(events_);
  return out;
}

}  // namespace detail
}  // namespace isoroce::transport
