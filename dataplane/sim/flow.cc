// A flow: an application that posts work requests over its QPs, keeps `depth`
// outstanding per QP, checks every byte it receives or writes and every atomic
// result, and measures latency from post to completion.
#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <string>

#include "dataplane/sim/pattern.h"
#include "dataplane/sim/sim_internal.h"
#include "transport/engine/rc_connect.h"
#include "dataplane/sim/simulator.h"

namespace isoroce::sim::detail {

namespace {

constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

ibv_mtu mtu_enum(uint32_t mtu) {
  switch (mtu) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
  }
}

// RC request opcodes (IBTA table 38): SEND*, RDMA WRITE*, RDMA READ request,
// the atomics, SEND with invalidate.
bool is_rc_request(uint8_t op) {
  return op <= 0x0c || op == 0x13 || op == 0x14 || op == 0x16 || op == 0x17;
}

ibv_wc_opcode expected_wc_opcode(Verb v) {
  switch (v) {
    case Verb::kSend:
    case Verb::kSendImm: return IBV_WC_SEND;
    case Verb::kWrite:
    case Verb::kWriteImm: return IBV_WC_RDMA_WRITE;
    case Verb::kRead: return IBV_WC_RDMA_READ;
    case Verb::kFetchAdd: return IBV_WC_FETCH_ADD;
    case Verb::kCmpSwap: return IBV_WC_COMP_SWAP;
  }
  return IBV_WC_SEND;
}

uint32_t imm_of(uint64_t msg) { return htonl(static_cast<uint32_t>(msg)); }

}  // namespace

Flow::Flow(World& w, uint32_t index, const FlowConfig& cfg)
    : w_(w), index_(index), cfg_(cfg),
      rng_(component_seed(w.scenario.seed, component::kFlow + index)) {
  key_ = rng_.next();
  slot_ = round_up(std::max<uint64_t>(cfg_.size, 8), 64);
  ud_slot_ = round_up(cfg_.size + kUdGrh, 64);
  recv_depth_ = effective_recv_depth(cfg_);
  mtu_ = effective_mtu(w.scenario, cfg_);
}

std::optional<ScenarioError> Flow::fail(const std::string& what, int err) const {
  return ScenarioError{"flow[" + std::to_string(index_) + "]",
                       what + " failed: " + std::strerror(err) + " (errno " + std::to_string(err) + ")"};
}

std::optional<ScenarioError> Flow::setup() {
  auto host_of = [&](const std::string& name) -> FlowHost* {
    for (FlowHost* h : w_.flow_hosts)
      if (h->config().name == name) return h;
    return nullptr;
  };
  src_ = host_of(cfg_.src);
  FlowVerbs& se = src_->verbs();
  const uint32_t nq = cfg_.qps, depth = cfg_.depth;

  auto cq = se.create_cq(static_cast<int>(nq * depth + 16));
  if (!cq.ok()) return fail("create_cq (source)", cq.err());
  src_cq_ = cq.value();
  src_->bind_cq(src_cq_, this, -1);
  if (auto e = src_->alloc_region(slot_ * nq * depth, IBV_ACCESS_LOCAL_WRITE, &local_)) return e;

  dst_.resize(cfg_.dst.size());
  for (size_t d = 0; d < cfg_.dst.size(); ++d) {
    Dst& dst = dst_[d];
    dst.host = host_of(cfg_.dst[d]);
    FlowVerbs& de = dst.host->verbs();
    auto dcq = de.create_cq(static_cast<int>(nq * recv_depth_ + 16));
    if (!dcq.ok()) return fail("create_cq (destination)", dcq.err());
    dst.cq = dcq.value();
    dst.host->bind_cq(dst.cq, this, static_cast<int>(d));
    uint64_t target = 0;
    if (cfg_.transport == Transport::kRc) {
      if (is_atomic(cfg_.verb)) target = 8ull * nq;
      else if (cfg_.verb != Verb::kSend && cfg_.verb != Verb::kSendImm) target = slot_ * nq * depth;
    }
    if (target)
      if (auto e = dst.host->alloc_region(target, kRemoteAccess, &dst.target)) return e;
    if (uses_receives(cfg_.verb) && cfg_.verb != Verb::kWriteImm)
      if (auto e = dst.host->alloc_region(recv_slot_bytes() * nq * recv_depth_, IBV_ACCESS_LOCAL_WRITE,
                                          &dst.recv))
        return e;
    if (cfg_.use_srq) {
      ibv_srq_attr a{};
      a.max_wr = nq * recv_depth_;
      a.max_sge = 1;
      auto srq = de.create_srq(dst.host->pd(), a);
      if (!srq.ok()) return fail("create_srq", srq.err());
      dst.srq = srq.value();
      dst.has_srq = true;
    }
  }

  qps_.resize(nq);
  for (uint32_t q = 0; q < nq; ++q) {
    Qp& qp = qps_[q];
    for (size_t d = 0; d < dst_.size(); ++d)
      qp.start_psn.push_back(wire::Psn(cfg_.start_psn ? *cfg_.start_psn : static_cast<uint32_t>(rng_.next())));
    qp.cas_base = rng_.next();
  }
  fa_init_ = rng_.next();
  if (cfg_.transport == Transport::kUd) {
    if (auto e = setup_ud()) return e;
  } else {
    for (uint32_t q = 0; q < nq; ++q)
      if (auto e = setup_rc(q)) return e;
  }

  // Initial remote values: the atomics' counters.
  if (cfg_.transport == Transport::kRc && is_atomic(cfg_.verb)) {
    Dst& d = dst_[0];
    if (cfg_.verb == Verb::kFetchAdd) std::memcpy(d.target.at(0), &fa_init_, 8);
    else
      for (uint32_t q = 0; q < nq; ++q) std::memcpy(d.target.at(8ull * q), &qps_[q].cas_base, 8);
  }
  if (cfg_.rate_bps) {
    const uint64_t per_qp = std::max<uint64_t>(1, cfg_.rate_bps / nq);
    for (auto& qp : qps_)
      if (int rc = se.set_qp_rate(0, qp.src_qpn, per_qp)) return fail("set_qp_rate", rc);
  }
  return std::nullopt;
}

std::optional<ScenarioError> Flow::setup_rc(uint32_t q) {
  Qp& qp = qps_[q];
  Dst& dst = dst_[0];
  FlowVerbs& se = src_->verbs();
  FlowVerbs& de = dst.host->verbs();

  transport::QpCreate c;
  c.pd = src_->pd();
  c.send_cq = c.recv_cq = src_cq_;
  c.init.qp_type = IBV_QPT_RC;
  c.init.cap.max_send_wr = cfg_.depth;
  c.init.cap.max_recv_wr = 1;
  c.init.cap.max_send_sge = 1;
  c.init.cap.max_recv_sge = 1;
  if (cfg_.inline_data) c.init.cap.max_inline_data = static_cast<uint32_t>(cfg_.size);
  auto sq = se.create_qp(c);
  if (!sq.ok()) return fail("create_qp (source)", sq.err());
  qp.src_qpn = sq.value();

  transport::QpCreate dc;
  dc.pd = dst.host->pd();
  dc.send_cq = dc.recv_cq = dst.cq;
  dc.init.qp_type = IBV_QPT_RC;
  dc.init.cap.max_send_wr = 1;
  dc.init.cap.max_recv_wr = dst.has_srq ? 0 : recv_depth_;
  dc.init.cap.max_send_sge = 1;
  dc.init.cap.max_recv_sge = 1;
  dc.use_srq = dst.has_srq;
  dc.srq = dst.srq;
  auto dq = de.create_qp(dc);
  if (!dq.ok()) return fail("create_qp (destination)", dq.err());
  qp.dst_qpn.push_back(dq.value());
  const wire::Psn dst_psn(static_cast<uint32_t>(rng_.next()));

  // The application's view: INIT, RTR, RTS with the masks IBTA table 91 asks for.
  auto connect = [&](FlowVerbs& e, wire::Qpn self, const wire::IpAddr& peer_ip, wire::Qpn peer,
                     wire::Psn sq_psn, wire::Psn rq_psn) {
    transport::RcPath p;
    p.peer_ip = peer_ip;
    p.peer_qpn = peer.value();
    p.sq_psn = sq_psn.value();
    p.rq_psn = rq_psn.value();
    p.mtu = mtu_enum(effective_mtu(w_.scenario, cfg_));
    p.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    p.max_rd_atomic = static_cast<uint8_t>(cfg_.max_rd_atomic);
    p.min_rnr_timer = cfg_.min_rnr_timer;
    p.timeout = cfg_.timeout;
    p.retry_cnt = cfg_.retry_cnt;
    p.rnr_retry = cfg_.rnr_retry;
    return transport::connect_rc(e, self, p);
  };
  if (int rc = connect(se, qp.src_qpn, dst.host->config().ip, qp.dst_qpn[0], qp.start_psn[0], dst_psn))
    return fail("modify_qp (source, RESET to RTS)", rc);
  if (int rc = connect(de, qp.dst_qpn[0], src_->config().ip, qp.src_qpn, dst_psn, qp.start_psn[0]))
    return fail("modify_qp (destination, RESET to RTS)", rc);

  src_qp_of_[qp.src_qpn.value()] = q;
  dst.qp_of[qp.dst_qpn[0].value()] = q;
  w_.qps[World::qp_key(src_->index(), qp.src_qpn.value())] = QpRef{index_, q, true};
  w_.qps[World::qp_key(dst.host->index(), qp.dst_qpn[0].value())] = QpRef{index_, q, false};
  return std::nullopt;
}

std::optional<ScenarioError> Flow::setup_ud() {
  FlowVerbs& se = src_->verbs();
  for (size_t d = 0; d < dst_.size(); ++d) {
    transport::AhAttr ah;
    ah.dgid = dst_[d].host->config().ip;
    auto h = se.create_ah(src_->pd(), ah);
    if (!h.ok()) return fail("create_ah", h.err());
    ah_.push_back(h.value());
  }
  auto bring_up = [&](FlowVerbs& e, wire::Qpn self, wire::Psn psn) -> int {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qkey = kQkey;
    if (int rc = e.modify_qp(self, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return rc;
    a = {};
    a.qp_state = IBV_QPS_RTR;
    if (int rc = e.modify_qp(self, a, IBV_QP_STATE)) return rc;
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn.value();
    return e.modify_qp(self, a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  };
  for (uint32_t q = 0; q < cfg_.qps; ++q) {
    Qp& qp = qps_[q];
    transport::QpCreate c;
    c.pd = src_->pd();
    c.send_cq = c.recv_cq = src_cq_;
    c.init.qp_type = IBV_QPT_UD;
    c.init.cap.max_send_wr = cfg_.depth;
    c.init.cap.max_recv_wr = 1;
    c.init.cap.max_send_sge = 1;
    c.init.cap.max_recv_sge = 1;
    if (cfg_.inline_data) c.init.cap.max_inline_data = static_cast<uint32_t>(cfg_.size);
    auto sq = se.create_qp(c);
    if (!sq.ok()) return fail("create_qp (UD source)", sq.err());
    qp.src_qpn = sq.value();
    if (int rc = bring_up(se, qp.src_qpn, qp.start_psn[0])) return fail("modify_qp (UD source)", rc);
    src_qp_of_[qp.src_qpn.value()] = q;
    w_.qps[World::qp_key(src_->index(), qp.src_qpn.value())] = QpRef{index_, q, true};
    for (size_t d = 0; d < dst_.size(); ++d) {
      Dst& dst = dst_[d];
      transport::QpCreate dc;
      dc.pd = dst.host->pd();
      dc.send_cq = dc.recv_cq = dst.cq;
      dc.init.qp_type = IBV_QPT_UD;
      dc.init.cap.max_send_wr = 1;
      dc.init.cap.max_recv_wr = dst.has_srq ? 0 : recv_depth_;
      dc.init.cap.max_send_sge = 1;
      dc.init.cap.max_recv_sge = 1;
      dc.use_srq = dst.has_srq;
      dc.srq = dst.srq;
      auto dq = dst.host->verbs().create_qp(dc);
      if (!dq.ok()) return fail("create_qp (UD destination)", dq.err());
      qp.dst_qpn.push_back(dq.value());
      if (int rc = bring_up(dst.host->verbs(), dq.value(), wire::Psn(static_cast<uint32_t>(rng_.next()))))
        return fail("modify_qp (UD destination)", rc);
      dst.qp_of[dq.value().value()] = q;
      w_.qps[World::qp_key(dst.host->index(), dq.value().value())] = QpRef{index_, q, false};
    }
  }
  return std::nullopt;
}

uint32_t Flow::app_id() const {
  if (cfg_.app.empty()) return 0x8000'0000u | index_;
  for (uint32_t i = 0; i < w_.scenario.flows.size(); ++i)
    if (w_.scenario.flows[i].app == cfg_.app) return i;  // the first flow of the application
  return index_;
}

static_assert(static_cast<int>(FlowClass::kLatency) == static_cast<int>(sched::FlowClass::kLatency) &&
              static_cast<int>(FlowClass::kThroughput) == static_cast<int>(sched::FlowClass::kThroughput) &&
              static_cast<int>(FlowClass::kBandwidth) == static_cast<int>(sched::FlowClass::kBandwidth));

// The flow's class and application, given to the engines when the application
// starts (so justitia's soft admission sees Current99 at that moment). The
// responder's QPs too: READ responses and atomic ACKs leave through its scheduler.
void Flow::classify(Picos now) {
  const uint32_t app = app_id();
  const auto cls = static_cast<sched::FlowClass>(cfg_.cls);
  for (auto& qp : qps_) {
    int rc = src_->verbs().set_qp_class(now, qp.src_qpn, cls, app, cfg_.weight);
    if (rc == 0 && cfg_.transport == Transport::kRc)
      rc = dst_[0].host->verbs().set_qp_class(now, qp.dst_qpn[0], cls, app, cfg_.weight);
    if (rc != 0) {
      error_statuses_[std::string("set_qp_class: ") + std::strerror(rc)]++;
      ++errors_;
    }
  }
  src_->collect_events();
}

void Flow::start(Picos now) {
  started_ = true;
  classify(now);
  if (uses_receives(cfg_.verb) && cfg_.post_recv) {
    if (cfg_.post_recv_delay == 0) start_receives(now);
    else w_.events.push(now + cfg_.post_recv_delay, EventKind::kFlowRecvStart, index_);
  }
  for (uint32_t q = 0; q < cfg_.qps; ++q) reserve_more(now, q);
  maybe_finish(now);
}

void Flow::start_receives(Picos now) {
  for (uint32_t d = 0; d < dst_.size(); ++d) {
    for (uint32_t q = 0; q < cfg_.qps; ++q)
      for (uint32_t r = 0; r < recv_depth_; ++r) post_recv_slot(now, d, q, uint64_t{q} * recv_depth_ + r);
    dst_[d].host->request_service(now);
  }
}

void Flow::post_recv_slot(Picos /*now*/, uint32_t d, uint32_t q, uint64_t slot) {
  Dst& dst = dst_[d];
  transport::Sge sge;
  transport::RecvWr wr;
  wr.wr_id = slot;
  if (cfg_.verb != Verb::kWriteImm) {
    const uint64_t bytes = recv_slot_bytes();
    sge.addr = dst.recv.va(slot * bytes);
    sge.length = static_cast<uint32_t>(cfg_.transport == Transport::kUd ? cfg_.size + kUdGrh : cfg_.size);
    sge.lkey = dst.recv.lkey;
    std::memset(dst.recv.at(slot * bytes), 0xa5, sge.length);  // stale bytes never pass
    wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  }
  const int rc = dst.has_srq ? dst.host->verbs().post_srq_recv(dst.srq, wr)
                             : dst.host->verbs().post_recv(qps_[q].dst_qpn[d], wr);
  if (rc != 0) {
    error_statuses_[std::string("post_recv: ") + std::strerror(rc)]++;
    ++errors_;
    stop();
  }
}

void Flow::reserve_more(Picos now, uint32_t q) {
  Qp& qp = qps_[q];
  while (more_to_send() && qp.outstanding.size() < cfg_.depth) {
    Outstanding o;
    o.msg = reserved_++;
    o.seq = qp.seq++;
    o.dst = static_cast<uint32_t>(o.seq % dst_.size());
    o.posted_at = 0;
    qp.outstanding.push_back(o);
    ++qp.unposted;
    src_->app_post(now, this, q);
  }
}

void Flow::post(Picos now, uint32_t q) {
  Qp& qp = qps_[q];
  const size_t idx = qp.outstanding.size() - qp.unposted;
  --qp.unposted;
  if (stopped_) {  // decided before the flow stopped: never posted
    qp.outstanding.erase(qp.outstanding.begin() + static_cast<std::ptrdiff_t>(idx));
    maybe_finish(now);
    return;
  }
  Outstanding& o = qp.outstanding[idx];
  o.posted_at = now;
  const uint64_t off = local_off(q, o.seq);
  transport::Sge sge{local_.va(off), static_cast<uint32_t>(cfg_.size), local_.lkey};
  // Inline data is read from the process's memory (ibv_post_send(3): the
  // address is a virtual address, no MR needed); our iovas are not pointers.
  if (cfg_.inline_data) sge.addr = reinterpret_cast<uintptr_t>(local_.at(off));
  transport::SendWr wr;
  wr.wr_id = o.msg;
  wr.send_flags = IBV_SEND_SIGNALED | (cfg_.inline_data ? IBV_SEND_INLINE : 0);
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  Dst& dst = dst_[o.dst];
  switch (cfg_.verb) {
    case Verb::kSend:
    case Verb::kSendImm:
      fill_pattern(local_.at(off), cfg_.size, key_, o.msg);
      wr.opcode = cfg_.verb == Verb::kSend ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM;
      wr.imm_data = imm_of(o.msg);
      if (cfg_.transport == Transport::kRc) {
        qp.awaiting_recv.emplace_back(o.msg, o.seq);
      } else {
        wr.ah = ah_[o.dst];
        wr.remote_qpn = qp.dst_qpn[o.dst].value();
        wr.remote_qkey = kQkey;
        if (ud_dst_of_.size() <= o.msg) {
          ud_dst_of_.resize(o.msg + 1);
          ud_received_.resize(o.msg + 1);
        }
        ud_dst_of_[o.msg] = static_cast<uint16_t>(o.dst);
      }
      break;
    case Verb::kWrite:
    case Verb::kWriteImm:
      fill_pattern(local_.at(off), cfg_.size, key_, o.msg);
      wr.opcode = cfg_.verb == Verb::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = imm_of(o.msg);
      wr.remote_addr = dst.target.va(off);
      wr.rkey = dst.target.rkey;
      if (cfg_.verb == Verb::kWriteImm) qp.awaiting_recv.emplace_back(o.msg, o.seq);
      break;
    case Verb::kRead:
      // The remote application prepares the bytes this message reads.
      fill_pattern(dst.target.at(off), cfg_.size, key_, o.msg);
      std::memset(local_.at(off), 0x5a, cfg_.size);
      wr.opcode = IBV_WR_RDMA_READ;
      wr.remote_addr = dst.target.va(off);
      wr.rkey = dst.target.rkey;
      break;
    case Verb::kFetchAdd:
    case Verb::kCmpSwap: {
      const uint64_t poison = ~(fa_init_ + o.msg);
      std::memcpy(local_.at(off), &poison, 8);
      wr.rkey = dst.target.rkey;
      if (cfg_.verb == Verb::kFetchAdd) {
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.remote_addr = dst.target.va(0);
        wr.compare_add = 1;
      } else {
        wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        wr.remote_addr = dst.target.va(8ull * q);
        wr.compare_add = qp.cas_base + o.seq;
        wr.swap = qp.cas_base + o.seq + 1;
      }
      break;
    }
  }
  const int rc = src_->verbs().post_send(now, qp.src_qpn, wr);
  // Inline data belongs to the engine once posted: the application may reuse
  // the buffer at once (here it scribbles over it, so a late read shows).
  if (rc == 0 && cfg_.inline_data) std::memset(local_.at(off), 0xee, cfg_.size);
  if (rc != 0) {
    error_statuses_[std::string("post_send: ") + std::strerror(rc)]++;
    ++errors_;
    if (!qp.awaiting_recv.empty() && qp.awaiting_recv.back().first == o.msg) qp.awaiting_recv.pop_back();
    qp.outstanding.erase(qp.outstanding.begin() + static_cast<std::ptrdiff_t>(idx));
    stop();
    maybe_finish(now);
  }
}

void Flow::on_completion(Picos now, int side, const ibv_wc& wc) {
  if (side < 0) on_requester_completion(now, wc);
  else on_receive_completion(now, static_cast<uint32_t>(side), wc);
}

void Flow::count_error(int status) {
  ++errors_;
  ++error_statuses_[std::string(wc_status_name(status))];
}

void Flow::integrity_failure(const std::string& what) {
  ++failures_;
  if (first_failure_.empty()) first_failure_ = what;
}

void Flow::stop() { stopped_ = true; }

uint64_t Flow::outstanding_total() const {
  uint64_t n = 0;
  for (const auto& qp : qps_) n += qp.outstanding.size();
  return n;
}

void Flow::maybe_finish(Picos now) {
  if (finished_ || !started_ || more_to_send() || outstanding_total() != 0) return;
  finished_ = true;
  finish_time_ = now;
  --w_.unfinished;
}

void Flow::on_requester_completion(Picos now, const ibv_wc& wc) {
  auto it = src_qp_of_.find(wc.qp_num);
  if (it == src_qp_of_.end()) {
    integrity_failure("completion for unknown QP " + std::to_string(wc.qp_num));
    return;
  }
  const uint32_t q = it->second;
  Qp& qp = qps_[q];
  const size_t posted = qp.outstanding.size() - qp.unposted;
  if (posted == 0) {
    if (wc.status != IBV_WC_SUCCESS) count_error(wc.status);
    else integrity_failure("send completion with nothing outstanding (wr_id " + std::to_string(wc.wr_id) + ")");
    return;
  }
  const Outstanding o = qp.outstanding.front();
  qp.outstanding.pop_front();
  if (wc.status != IBV_WC_SUCCESS) {
    count_error(wc.status);
    stop();
    maybe_finish(now);
    return;
  }
  if (wc.wr_id != o.msg) {
    integrity_failure("completion out of order: wr_id " + std::to_string(wc.wr_id) + ", expected " +
                      std::to_string(o.msg));
  }
  if (wc.opcode != expected_wc_opcode(cfg_.verb))
    integrity_failure("message " + std::to_string(o.msg) + ": wc.opcode " + std::to_string(wc.opcode));
  const uint64_t off = local_off(q, o.seq);
  Dst& dst = dst_[o.dst];
  switch (cfg_.verb) {
    case Verb::kSend:
    case Verb::kSendImm:
      break;  // checked at the receiver
    case Verb::kWrite:
    case Verb::kWriteImm:
      ++checked_;
      if (!check_pattern(dst.target.at(off), cfg_.size, key_, o.msg))
        integrity_failure("WRITE " + std::to_string(o.msg) + ": remote bytes differ at completion");
      break;
    case Verb::kRead:
      ++checked_;
      if (!check_pattern(local_.at(off), cfg_.size, key_, o.msg))
        integrity_failure("READ " + std::to_string(o.msg) + ": local bytes differ at completion");
      break;
    case Verb::kFetchAdd: {
      ++checked_;
      uint64_t orig;
      std::memcpy(&orig, local_.at(off), 8);
      const uint64_t k = orig - fa_init_;
      if (k >= reserved_ || (k < fa_seen_.size() && fa_seen_[k]) || (cfg_.qps == 1 && k != o.msg)) {
        integrity_failure("FETCH_ADD " + std::to_string(o.msg) + ": original value init+" + std::to_string(k));
      } else {
        if (fa_seen_.size() <= k) fa_seen_.resize(k + 1);
        fa_seen_[k] = true;
      }
      break;
    }
    case Verb::kCmpSwap: {
      ++checked_;
      uint64_t orig;
      std::memcpy(&orig, local_.at(off), 8);
      if (orig != qp.cas_base + o.seq)
        integrity_failure("CMP_SWAP " + std::to_string(o.msg) + ": returned base+" +
                          std::to_string(orig - qp.cas_base) + ", expected base+" + std::to_string(o.seq));
      break;
    }
  }
  ++messages_;
  ++qp.completed;
  lat_.push_back(now - o.posted_at);
  reserve_more(now, q);
  maybe_finish(now);
}

void Flow::on_receive_completion(Picos now, uint32_t d, const ibv_wc& wc) {
  Dst& dst = dst_[d];
  if (wc.status != IBV_WC_SUCCESS) {
    count_error(wc.status);
    return;
  }
  auto it = dst.qp_of.find(wc.qp_num);
  if (it == dst.qp_of.end()) {
    integrity_failure("receive completion for unknown QP " + std::to_string(wc.qp_num));
    return;
  }
  const uint32_t q = it->second;
  Qp& qp = qps_[q];
  const uint64_t slot = wc.wr_id;
  const uint8_t* buf = cfg_.verb == Verb::kWriteImm ? nullptr : dst.recv.at(slot * recv_slot_bytes());
  ++delivered_;
  ++checked_;
  if (cfg_.transport == Transport::kUd) {
    if (wc.opcode != IBV_WC_RECV) integrity_failure("UD receive: wc.opcode " + std::to_string(wc.opcode));
    if (wc.byte_len != cfg_.size + kUdGrh)
      integrity_failure("UD receive: byte_len " + std::to_string(wc.byte_len) + ", expected " +
                        std::to_string(cfg_.size + kUdGrh));
    if (!(wc.wc_flags & IBV_WC_GRH)) integrity_failure("UD receive without IBV_WC_GRH");
    if (wc.src_qp != qp.src_qpn.value())
      integrity_failure("UD receive: src_qp " + std::to_string(wc.src_qp) + ", expected " +
                        std::to_string(qp.src_qpn.value()));
    const uint8_t* payload = buf + kUdGrh;
    const uint64_t m = pattern_id(payload);
    if (m >= ud_dst_of_.size() || ud_dst_of_[m] != d) {
      integrity_failure("UD receive: message id " + std::to_string(m) + " was not sent here");
    } else {
      if (!check_pattern(payload, cfg_.size, key_, m))
        integrity_failure("UD message " + std::to_string(m) + ": bytes differ");
      if (cfg_.verb == Verb::kSendImm &&
          (!(wc.wc_flags & IBV_WC_WITH_IMM) || wc.imm_data != imm_of(m)))
        integrity_failure("UD message " + std::to_string(m) + ": immediate data missing or wrong");
      if (ud_received_[m]++ > 0) ++ud_dups_;
    }
  } else {
    if (qp.awaiting_recv.empty()) {
      integrity_failure("receive completion with no message due (duplicate delivery?)");
    } else {
      const auto [m, seq] = qp.awaiting_recv.front();
      qp.awaiting_recv.pop_front();
      const bool imm = cfg_.verb != Verb::kSend;
      const ibv_wc_opcode want = cfg_.verb == Verb::kWriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
      if (wc.opcode != want) integrity_failure("message " + std::to_string(m) + ": receive wc.opcode " + std::to_string(wc.opcode));
      if (wc.byte_len != cfg_.size)
        integrity_failure("message " + std::to_string(m) + ": byte_len " + std::to_string(wc.byte_len));
      if (imm && (!(wc.wc_flags & IBV_WC_WITH_IMM) || wc.imm_data != imm_of(m)))
        integrity_failure("message " + std::to_string(m) + ": immediate data missing or wrong");
      const uint8_t* data = cfg_.verb == Verb::kWriteImm ? dst.target.at(local_off(q, seq)) : buf;
      if (!check_pattern(data, cfg_.size, key_, m))
        integrity_failure("message " + std::to_string(m) + ": received bytes differ (receive " +
                          std::to_string(delivered_) + ")");
    }
  }
  post_recv_slot(now, d, q, slot);  // the receiving application goes on
}

void Flow::on_tx_frame(const QpRef& ref, const BthView& bth) {
  Qp& qp = qps_[ref.qp];
  if (!ref.requester) {
    // A request going to the responder: a retransmission if its PSN is not
    // new. A READ request covers one PSN per response packet.
    if (cfg_.transport != Transport::kRc || !is_rc_request(bth.opcode)) return;
    const wire::Psn psn(bth.psn);
    uint32_t covers = 1;
    if (bth.opcode == 0x0c && bth.read_dma_len > 0) covers = (bth.read_dma_len + mtu_ - 1) / mtu_;
    if (qp.psn_seen && psn.before(qp.next_psn)) ++retransmits_;
    const wire::Psn next = psn + covers;
    if (!qp.psn_seen || next.after(qp.next_psn)) qp.next_psn = next;
    qp.psn_seen = true;
    return;
  }
  if (bth.opcode == 0x11 && bth.aeth_syndrome) {
    const uint8_t kind = *bth.aeth_syndrome >> 5;
    if (kind == 1) ++rnr_naks_;
    else if (kind == 3) ++naks_;
  }
}

void Flow::count_wire(const QpRef& ref, const BthView& bth, size_t frame_len) {
  // Toward the responder: requests (or UD sends); from it: READ responses (0x0d..0x10).
  const bool data = !ref.requester || (bth.opcode >= 0x0d && bth.opcode <= 0x10);
  if (data) wire_bytes_ += frame_len + 24;  // preamble, FCS, inter-frame gap: what the link carries
}

FlowReport Flow::report(Picos run_end) const {
  FlowReport r;
  r.name = cfg_.name;
  r.src = cfg_.src;
  r.dst = cfg_.dst;
  r.transport = cfg_.transport;
  r.verb = cfg_.verb;
  r.cls = cfg_.cls;
  r.size = cfg_.size;
  r.qps = cfg_.qps;
  r.depth = cfg_.depth;
  r.messages = messages_;
  r.bytes = messages_ * cfg_.size;
  const Picos t0 = cfg_.start;
  const Picos t1 = finished_ ? finish_time_ : run_end;
  if (t1 > t0) {
    const double ps = static_cast<double>(t1 - t0);
    r.goodput_gbps = static_cast<double>(r.bytes) * 8.0 * 1000.0 / ps;
    r.msgs_per_sec = static_cast<double>(messages_) * 1e12 / ps;
    r.wire_gbps = static_cast<double>(wire_bytes_) * 8.0 * 1000.0 / ps;
  }
  if (!lat_.empty()) {
    std::vector<Picos> v = lat_;
    std::sort(v.begin(), v.end());
    auto rank = [&](double p) {
      size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
      i = std::clamp<size_t>(i, 1, v.size());
      return static_cast<double>(v[i - 1]) / 1e6;
    };
    r.lat.p50_us = rank(0.50);
    r.lat.p99_us = rank(0.99);
    r.lat.p999_us = rank(0.999);
    r.lat.max_us = static_cast<double>(v.back()) / 1e6;
    long double sum = 0;
    for (Picos p : v) sum += p;
    r.lat.mean_us = static_cast<double>(sum / v.size() / 1e6);
  }
  r.retransmits = retransmits_;
  r.naks = naks_;
  r.rnr_naks = rnr_naks_;
  r.errors = errors_;
  r.error_statuses = error_statuses_;
  r.integrity_checked = checked_;
  r.integrity_failures = failures_;
  r.first_failure = first_failure_;
  // Atomics: the counters must hold exactly what the completed operations did
  // (only decidable when none failed, as a failed one may or may not have run).
  if (cfg_.transport == Transport::kRc && is_atomic(cfg_.verb) && errors_ == 0 && outstanding_total() == 0) {
    const Dst& d = dst_[0];
    if (cfg_.verb == Verb::kFetchAdd) {
      uint64_t v;
      std::memcpy(&v, d.target.at(0), 8);
      if (v != fa_init_ + messages_) {
        ++r.integrity_failures;
        if (r.first_failure.empty())
          r.first_failure = "FETCH_ADD counter is init+" + std::to_string(v - fa_init_) + " after " +
                            std::to_string(messages_) + " adds";
      }
    } else {
      for (uint32_t q = 0; q < cfg_.qps; ++q) {
        uint64_t v;
        std::memcpy(&v, d.target.at(8ull * q), 8);
        if (v != qps_[q].cas_base + qps_[q].completed) {
          ++r.integrity_failures;
          if (r.first_failure.empty())
            r.first_failure = "CMP_SWAP counter of QP " + std::to_string(q) + " is base+" +
                              std::to_string(v - qps_[q].cas_base);
        }
      }
    }
  }
  r.integrity_ok = r.integrity_failures == 0;
  r.delivered = delivered_;
  r.ud_duplicates = ud_dups_;
  r.finished = finished_;
  r.start_us = static_cast<double>(t0) / 1e6;
  r.end_us = static_cast<double>(t1) / 1e6;
  return r;
}

}  // namespace isoroce::sim::detail
