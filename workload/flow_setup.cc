// A flow's setup: CQs, memory, SRQs, address handles and QPs brought to RTS
// with the attribute masks an application uses, on its source and its
// destinations (workload/flow.h).
#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "workload/flow.h"
#include "workload/rc_connect.h"

namespace isoroce::workload {

namespace {

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

}  // namespace

Flow::Flow(FlowDriver& driver, uint32_t index, const FlowConfig& cfg, const FlowPlace& place)
    : driver_(driver), index_(index), cfg_(cfg), place_(place), rng_(place.seed) {
  key_ = rng_();
  slot_ = round_up(std::max<uint64_t>(cfg_.size, 8), 64);
  ud_slot_ = round_up(cfg_.size + kUdGrh, 64);
  recv_depth_ = effective_recv_depth(cfg_);
  mtu_ = place.mtu;
}

std::optional<SetupError> Flow::fail(const std::string& what, int err) const {
  return SetupError{"flow[" + std::to_string(index_) + "]",
                    what + " failed: " + std::strerror(err) + " (errno " + std::to_string(err) + ")"};
}

std::optional<SetupError> Flow::setup() {
  src_ = place_.src;
  FlowVerbs& se = src_->verbs();
  const uint32_t nq = cfg_.qps, depth = cfg_.depth;

  auto cq = se.create_cq(static_cast<int>(nq * depth + 16));
  if (!cq.ok()) return fail("create_cq (source)", cq.err());
  src_cq_ = cq.value();
  src_->bind_cq(src_cq_, this, -1);
  if (auto e = src_->alloc_region(slot_ * nq * depth, IBV_ACCESS_LOCAL_WRITE, &local_)) return e;

  dst_.resize(cfg_.dst.size());
  for (uint32_t d = 0; d < dst_.size(); ++d)
    if (auto e = setup_dst(d)) return e;

  qps_.resize(nq);
  for (uint32_t q = 0; q < nq; ++q) {
    Qp& qp = qps_[q];
    for (size_t d = 0; d < dst_.size(); ++d)
      qp.start_psn.push_back(wire::Psn(cfg_.start_psn ? *cfg_.start_psn : static_cast<uint32_t>(rng_())));
    qp.cas_base = rng_();
  }
  fa_init_ = rng_();
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

// A destination's CQ, memory (RC targets, receive buffers) and SRQ.
std::optional<SetupError> Flow::setup_dst(uint32_t d) {
  const uint32_t nq = cfg_.qps, depth = cfg_.depth;
  Dst& dst = dst_[d];
  dst.host = place_.dst[d];
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
  return std::nullopt;
}

// The source QP of every flow: the flow's CQ, depth and inline size, one SGE.
transport::QpCreate Flow::source_qp(ibv_qp_type type) const {
  transport::QpCreate c;
  c.pd = src_->pd();
  c.send_cq = c.recv_cq = src_cq_;
  c.init.qp_type = type;
  c.init.cap.max_send_wr = cfg_.depth;
  c.init.cap.max_recv_wr = 1;
  c.init.cap.max_send_sge = 1;
  c.init.cap.max_recv_sge = 1;
  if (cfg_.inline_data) c.init.cap.max_inline_data = static_cast<uint32_t>(cfg_.size);
  return c;
}

std::optional<SetupError> Flow::setup_rc(uint32_t q) {
  Qp& qp = qps_[q];
  Dst& dst = dst_[0];
  FlowVerbs& se = src_->verbs();
  FlowVerbs& de = dst.host->verbs();

  const transport::QpCreate c = source_qp(IBV_QPT_RC);
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
  const wire::Psn dst_psn(static_cast<uint32_t>(rng_()));

  // The application's view: INIT, RTR, RTS with the masks IBTA table 91 asks for.
  auto connect = [&](FlowVerbs& e, wire::Qpn self, const wire::IpAddr& peer_ip, wire::Qpn peer,
                     wire::Psn sq_psn, wire::Psn rq_psn) {
    RcPath p;
    p.peer_ip = peer_ip;
    p.peer_qpn = peer.value();
    p.sq_psn = sq_psn.value();
    p.rq_psn = rq_psn.value();
    p.mtu = mtu_enum(mtu_);
    p.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    p.max_rd_atomic = static_cast<uint8_t>(cfg_.max_rd_atomic);
    p.min_rnr_timer = cfg_.min_rnr_timer;
    p.timeout = cfg_.timeout;
    p.retry_cnt = cfg_.retry_cnt;
    p.rnr_retry = cfg_.rnr_retry;
    return connect_rc(e, self, p);
  };
  if (int rc = connect(se, qp.src_qpn, dst.host->ip(), qp.dst_qpn[0], qp.start_psn[0], dst_psn))
    return fail("modify_qp (source, RESET to RTS)", rc);
  if (int rc = connect(de, qp.dst_qpn[0], src_->ip(), qp.src_qpn, dst_psn, qp.start_psn[0]))
    return fail("modify_qp (destination, RESET to RTS)", rc);

  src_qp_of_[qp.src_qpn.value()] = q;
  dst.qp_of[qp.dst_qpn[0].value()] = q;
  driver_.bind_qp(src_->index(), qp.src_qpn.value(), QpRef{index_, q, true});
  driver_.bind_qp(dst.host->index(), qp.dst_qpn[0].value(), QpRef{index_, q, false});
  return std::nullopt;
}

std::optional<SetupError> Flow::setup_ud() {
  FlowVerbs& se = src_->verbs();
  for (size_t d = 0; d < dst_.size(); ++d) {
    transport::AhAttr ah;
    ah.dgid = dst_[d].host->ip();
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
    const transport::QpCreate c = source_qp(IBV_QPT_UD);
    auto sq = se.create_qp(c);
    if (!sq.ok()) return fail("create_qp (UD source)", sq.err());
    qp.src_qpn = sq.value();
    if (int rc = bring_up(se, qp.src_qpn, qp.start_psn[0])) return fail("modify_qp (UD source)", rc);
    src_qp_of_[qp.src_qpn.value()] = q;
    driver_.bind_qp(src_->index(), qp.src_qpn.value(), QpRef{index_, q, true});
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
      if (int rc = bring_up(dst.host->verbs(), dq.value(), wire::Psn(static_cast<uint32_t>(rng_()))))
        return fail("modify_qp (UD destination)", rc);
      dst.qp_of[dq.value().value()] = q;
      driver_.bind_qp(dst.host->index(), dq.value().value(), QpRef{index_, q, false});
    }
  }
  return std::nullopt;
}

}  // namespace isoroce::workload
