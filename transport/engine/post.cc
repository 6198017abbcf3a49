// Posting work requests (ibv_post_send, ibv_post_recv, ibv_post_srq_recv):
// the checks (verbs::check_send_wr() plus what needs the engine's tables: the
// QP's state, the AH and its PD), the WQE the requester and responder work
// from, and WRs a driver could not decode (post_malformed_*).
#include <algorithm>
#include <cerrno>

#include "transport/engine/engine_impl.h"
#include "transport/engine/memory.h"

namespace isoroce::transport::detail {

namespace {

// Fills r from wr, which its caller checked (verbs::check_recv_wr) before taking
// the slot.
void fill_recv(const RecvWr& wr, RecvWqe& r) {
  r.wr_id = wr.wr_id;
  r.local_error = IBV_WC_SUCCESS;
  if (wr.sg_list.size() == 1 && r.sges.size() == 1) [[likely]] {
    // One SGE into a slot whose last receive had one: written in place (the
    // vector's assign and the sum loop give the same).
    r.sges[0] = wr.sg_list[0];
    r.length = wr.sg_list[0].length;
    return;
  }
  r.sges.assign(wr.sg_list.begin(), wr.sg_list.end());
  r.length = 0;
  for (const Sge& s : wr.sg_list) r.length += s.length;
}

}  // namespace

int EngineImpl::post_srq_recv(SrqHandle srq, const RecvWr& wr) {
  auto it = srqs_.find(srq);
  if (it == srqs_.end()) return EINVAL;
  SrqCtx& s = *it->second;
  if (int err = s.srq.post(static_cast<uint32_t>(wr.sg_list.size())); err != 0) return err;
  if (int err = verbs::check_recv_wr(s.srq.attr().max_sge, wr.sg_list.size()); err != 0) return err;
  fill_recv(wr, s.queue.push());  // in place: the slot's SGE vector is reused
  return 0;
}

// ---- posting ---------------------------------------------------------------

int EngineImpl::check_ud_ah(const QpCtx& q, const SendWr& wr) const {
  // The AH must exist and belong to the QP's PD (rxe_av.c rxe_get_av(); rxe
  // fails such a WR when it is sent, with LOC_QP_OP_ERR; refusing it at
  // post, as the verbs library's synchronous checks do, tells the
  // application at once and never lets a WR of one PD use another's AH).
  auto it = ahs_.find(wr.ah);
  if (it == ahs_.end() || it->second.pd != q.pd) return EINVAL;
  return 0;
}

// Inline (only post_send uses it): a call of its own was 33 instructions a post.
inline int EngineImpl::check_send_wr(const QpCtx& q, const SendWr& wr, uint64_t length) const {
  const verbs::SendWrShape shape{wr.opcode, wr.send_flags, wr.sg_list.size(), length, wr.remote_addr};
  const verbs::SendQueueLimits limits{q.qp.type(), q.qp.cap().max_send_sge,
                                      q.qp.cap().max_inline_data, q.mtu};
  if (int err = verbs::check_send_wr(limits, shape)) return err;
  if (q.qp.type() == IBV_QPT_UD) [[unlikely]] return check_ud_ah(q, wr);
  return 0;
}

int EngineImpl::post_send(Picos now, wire::Qpn qpn, const SendWr& wr) {
  QpCtx* qp = find_qp(qpn);
  if (qp == nullptr) return EINVAL;
  QpCtx& q = *qp;
  const ibv_qp_state st = q.qp.state();
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) return EINVAL;
  // The message length, summed once for the checks and the WQE.
  uint64_t length = 0;
  if (wr.sg_list.size() == 1) [[likely]] {
    length = wr.sg_list[0].length;  // the loop's answer without its vector set-up
  } else {
    for (const Sge& s : wr.sg_list) length += s.length;
  }
  if (int err = check_send_wr(q, wr, length); err != 0) return err;
  if (q.sq.full()) return ENOMEM;

  SendWqe& w = q.sq.push();
  // What the slot's previous WR left (its vectors are reused): its L_Key check, if it
  // passed and no MR was deregistered since, holds for an identical SGE (below).
  const bool prev_checked = w.mr_deregs == mrs_.deregs() && w.sges.size() == 1;
  const bool prev_writes = w.is_read_or_atomic();
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.send_flags = wr.send_flags;
  w.imm_data = wr.imm_data;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  // The fields only some opcodes read (the atomics' operands, a bind, the key to
  // invalidate) are copied for those only: nothing reads them for another opcode.
  if (verbs::is_atomic(wr.opcode)) [[unlikely]] {
    w.compare_add = wr.compare_add;
    w.swap = wr.swap;
  } else if (wr.opcode == IBV_WR_BIND_MW) [[unlikely]] {
    w.bind = wr.bind;
  } else if (wr.opcode == IBV_WR_LOCAL_INV || wr.opcode == IBV_WR_SEND_WITH_INV) [[unlikely]] {
    w.invalidate_rkey = wr.invalidate_rkey;
  }
  w.signaled = q.qp.sq_sig_all() || (wr.send_flags & IBV_SEND_SIGNALED);
  w.is_inline = (wr.send_flags & IBV_SEND_INLINE) != 0;
  w.length = length;
  w.local_error = IBV_WC_SUCCESS;
  w.mr_deregs = UINT64_MAX;
  if (w.is_inline) [[unlikely]] {
    // Inline data is read now; the buffers need not be registered (ibv_post_send(3)).
    w.sges.clear();
    w.inline_data.clear();
    w.inline_data.reserve(w.length);
    for (const Sge& s : wr.sg_list) {
      const auto* p = reinterpret_cast<const uint8_t*>(s.addr);
      w.inline_data.insert(w.inline_data.end(), p, p + s.length);
    }
  } else {
    // The slot's vectors keep their capacity from WR to WR: resized, then
    // written (inline_data is read only for an inline WR, so it is left as is).
    const size_t n = wr.sg_list.size();
    const bool writes = w.is_read_or_atomic();
    if (n == 1 && prev_checked && prev_writes == writes && w.sges[0].addr == wr.sg_list[0].addr &&
        w.sges[0].length == wr.sg_list[0].length && w.sges[0].lkey == wr.sg_list[0].lkey) [[likely]] {
      // The same SGE as the slot's previous WR, whose check (of the same QP's PD, for
      // the same access) passed with no MR deregistered since: the check would pass
      // again with the same answer (a registered MR's key, PD, access and range never
      // change; a new registration changes no other MR), so sges and sge_bias stand.
      w.mr_deregs = mrs_.deregs();
    } else {
      w.sges.resize(n);
      w.sge_bias.resize(n);
      std::copy(wr.sg_list.begin(), wr.sg_list.end(), w.sges.begin());
      // L_Key checks happen now, once per WR; a failure completes the WR with
      // IBV_WC_LOC_PROT_ERR when the requester reaches it (the post succeeds).
      // The packets use what the check found (sge_bias) unless an MR was
      // deregistered since: then each packet checks its SGEs again.
      const uint32_t needed = writes ? IBV_ACCESS_LOCAL_WRITE : 0;
      if (check_sges(mrs_, q.pd, w.sges, needed, w.sge_bias.data()) == verbs::MrCheck::kOk) [[likely]] {
        w.mr_deregs = mrs_.deregs();
      } else {
        w.local_error = IBV_WC_LOC_PROT_ERR;
      }
    }
  }
  if (q.qp.type() == IBV_QPT_UD) address_ud(q, wr, w);
  // kick() looks for local operations and failed WRs only while one may be queued.
  if (w.local_error != IBV_WC_SUCCESS || w.is_local_op()) [[unlikely]] q.sq_unusual = true;
  w.state = WqeState::kQueued;
  w.npkts = 0;
  w.read_done = 0;
  w.completed_ok = false;
  w.msg_id = q.posted++;
  if (now > trace_now_) trace_now_ = now;
  if (trace_.on(trace::Event::kPost)) [[unlikely]] {
    trace(now, trace::Event::kPost, q, w.msg_id, static_cast<uint32_t>(w.length), w.opcode,
          wr.app_post != 0 && wr.app_post < now ? now - wr.app_post : 0);
  }

  if (st == IBV_QPS_ERR) {
    flush(q);
    return 0;
  }
  kick(now, q);
  return 0;
}

int EngineImpl::post_recv(wire::Qpn qpn, const RecvWr& wr) {
  QpCtx* qp = find_qp(qpn);
  if (qp == nullptr) return EINVAL;
  QpCtx& q = *qp;
  if (q.use_srq) return EINVAL;  // receives go to the SRQ
  if (q.qp.state() == IBV_QPS_RESET) return EINVAL;
  if (q.rq.full()) return ENOMEM;
  if (int err = verbs::check_recv_wr(q.qp.cap().max_recv_sge, wr.sg_list.size()); err != 0) return err;
  // Filled in place: the slot keeps its SGE vector's capacity from message to
  // message (a fresh vector per receive was a malloc and a free per SEND).
  fill_recv(wr, q.rq.push());
  if (q.qp.state() == IBV_QPS_ERR) flush(q);
  return 0;
}

int EngineImpl::post_malformed_send(Picos now, wire::Qpn qpn, uint64_t wr_id) {
  QpCtx* qp = find_qp(qpn);
  if (qp == nullptr) return EINVAL;
  QpCtx& q = *qp;
  const ibv_qp_state st = q.qp.state();
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) return EINVAL;
  if (q.sq.full()) return ENOMEM;
  SendWqe& w = q.sq.push();
  w = SendWqe{};
  w.wr_id = wr_id;
  w.signaled = true;
  w.local_error = IBV_WC_LOC_QP_OP_ERR;
  q.sq_unusual = true;
  if (st == IBV_QPS_ERR) {
    flush(q);
    return 0;
  }
  kick(now, q);
  return 0;
}

int EngineImpl::post_malformed_recv(Picos now, wire::Qpn qpn, uint64_t wr_id) {
  QpCtx* qp = find_qp(qpn);
  if (qp == nullptr) return EINVAL;
  QpCtx& q = *qp;
  if (q.use_srq || q.qp.state() == IBV_QPS_RESET) return EINVAL;
  if (q.rq.full()) return ENOMEM;
  RecvWqe& r = q.rq.push();
  r = RecvWqe{};
  r.wr_id = wr_id;
  r.local_error = IBV_WC_LOC_QP_OP_ERR;
  if (q.qp.state() != IBV_QPS_ERR) {
    q.qp.set_error();
    events_.push_back({AsyncEventType::kQpFatal, q.qp.qpn().value()});
  }
  enter_error(now, q);
  return 0;
}

}  // namespace isoroce::transport::detail
