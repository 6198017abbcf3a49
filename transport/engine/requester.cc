// RC requester (IBTA vol.1 9.7.1-9.7.4; rxe_req.c): walks the send queue and
// turns each work request into request packets with consecutive PSNs. A
// message of n bytes uses max(1, ceil(n / MTU)) PSNs; a READ request is one
// packet that reserves one PSN per response packet (9.7.4.1.3). Go-back-N
// (rewind_requester) restarts at any PSN, inside a message too.
#include <algorithm>
#include <bit>

#include "transport/engine/engine_impl.h"
#include "transport/engine/memory.h"

namespace isoroce::transport::detail {
namespace {

uint8_t send_opcode(bool first, bool last, bool imm, bool inv) {
  if (first && last) return inv ? wire::op::kRcSendOnlyInv : imm ? wire::op::kRcSendOnlyImm : wire::op::kRcSendOnly;
  if (first) return wire::op::kRcSendFirst;
  if (!last) return wire::op::kRcSendMiddle;
  return inv ? wire::op::kRcSendLastInv : imm ? wire::op::kRcSendLastImm : wire::op::kRcSendLast;
}

uint8_t write_opcode(bool first, bool last, bool imm) {
  if (first && last) return imm ? wire::op::kRcWriteOnlyImm : wire::op::kRcWriteOnly;
  if (first) return wire::op::kRcWriteFirst;
  if (!last) return wire::op::kRcWriteMiddle;
  return imm ? wire::op::kRcWriteLastImm : wire::op::kRcWriteLast;
}

}  // namespace

void EngineImpl::peek_request(Picos now, QpCtx& q, TxDesc& d) {
  d.kind = TxKind::kNone;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTS && st != IBV_QPS_SQD) return;
  if (now < q.comp.rnr_until) return;
  if (q.req.wqe == q.sq.tail()) return;
  if (psn_diff(q.req.psn, q.comp.psn) >= kMaxOutstanding) return;
  SendWqe& w = q.sq[q.req.wqe];
  if (w.local_error != IBV_WC_SUCCESS) return;  // datapath completes it in error outside the scheduler
  if (w.is_local_op()) return;                   // run by run_local_ops(), no packet
  const uint32_t mtu = q.mtu;
  if (!w.is_read_or_atomic()) [[likely]] {
    // A packet of a WRITE or SEND: the default case of the switch below, every field
    // written once instead of the descriptor cleared first. A first packet waits as
    // below (SQD, IBV_SEND_FENCE); the initiator depth concerns READs and atomics
    // only.
    if (q.req.pkt == 0) {
      if (st == IBV_QPS_SQD && w.state == WqeState::kQueued) return;
      if ((w.send_flags & IBV_SEND_FENCE) && q.req.rd_atomic_inflight > 0) return;
    }
    const bool imm = w.opcode == IBV_WR_SEND_WITH_IMM || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    const bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    const bool inv = w.opcode == IBV_WR_SEND_WITH_INV;
    d.kind = TxKind::kRequest;
    d.qp_slot = q.slot;
    d.psn = q.req.psn;
    d.wqe = static_cast<uint32_t>(q.req.wqe);
    if (q.req.pkt == 0 && w.length <= mtu) [[likely]] {
      // A one-packet message (packets_for() is 1): its ONLY packet, the whole
      // message at offset 0, a last packet, so it asks for an ACK.
      d.opcode = write ? write_opcode(true, true, imm) : send_opcode(true, true, imm, inv);
      d.offset = 0;
      d.length = static_cast<uint32_t>(w.length);
      d.ack_req = true;
    } else {
      const uint32_t n = packets_for(w.length, mtu);
      const bool first = q.req.pkt == 0, last = q.req.pkt + 1 == n;
      d.opcode = write ? write_opcode(first, last, imm) : send_opcode(first, last, imm, inv);
      d.offset = static_cast<uint64_t>(q.req.pkt) * mtu;
      d.length = static_cast<uint32_t>(std::min<uint64_t>(mtu, w.length - std::min(w.length, d.offset)));
      d.ack_req = last || ack_due(q.req.pkt, config_.ack_req_every);
    }
    d.retransmit = q.req.psn.before(q.req.max_psn);
    d.resource = 0;
    d.frame_len = frame_len(d.opcode, d.length);
    return;
  }
  d = TxDesc{};
  if (q.req.pkt == 0) {
    // SQD: WRs not yet started wait (IBTA 10.3.1, send queue drain).
    if (st == IBV_QPS_SQD && w.state == WqeState::kQueued) return;
    // IBV_SEND_FENCE: wait for every earlier READ and atomic (IBTA 10.8.3.3).
    if ((w.send_flags & IBV_SEND_FENCE) && q.req.rd_atomic_inflight > 0) return;
    // The initiator depth: max_rd_atomic READ/atomic requests outstanding (11.2.5.2).
    if (w.is_read_or_atomic() &&
        q.req.rd_atomic_inflight >= std::max<uint32_t>(1, q.qp.attr().max_rd_atomic)) {
      return;
    }
  }
  d.kind = TxKind::kRequest;
  d.qp_slot = q.slot;
  d.wqe = static_cast<uint32_t>(q.req.wqe);
  d.psn = q.req.psn;
  d.retransmit = q.req.psn.before(q.req.max_psn);
  switch (w.opcode) {
    case IBV_WR_RDMA_READ: {
      d.opcode = wire::op::kRcReadRequest;
      d.offset = static_cast<uint64_t>(q.req.pkt) * mtu;  // > 0 when re-issued mid-read
      d.length = 0;
      d.ack_req = false;
      break;
    }
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      d.opcode = wire::op::kRcCompareSwap;
      break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      d.opcode = wire::op::kRcFetchAdd;
      break;
    default: {
      const uint32_t n = packets_for(w.length, mtu);
      const bool first = q.req.pkt == 0, last = q.req.pkt + 1 == n;
      const bool imm = w.opcode == IBV_WR_SEND_WITH_IMM || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
      const bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
      const bool inv = w.opcode == IBV_WR_SEND_WITH_INV;
      d.opcode = write ? write_opcode(first, last, imm) : send_opcode(first, last, imm, inv);
      d.offset = static_cast<uint64_t>(q.req.pkt) * mtu;
      d.length = static_cast<uint32_t>(std::min<uint64_t>(mtu, w.length - std::min(w.length, d.offset)));
      d.ack_req = last || ack_due(q.req.pkt, config_.ack_req_every);
      break;
    }
  }
  if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    d.length = 0;
    d.ack_req = false;
  }
  d.frame_len = frame_len(d.opcode, d.length);
  return;
}

void EngineImpl::next_request(const QpCtx& q, const TxDesc& d, TxDesc& n) const {
  if (psn_diff(q.req.psn, q.comp.psn) >= kMaxOutstanding) [[unlikely]] {
    n.kind = TxKind::kNone;
    return;
  }
  const SendWqe& w = q.sq[d.wqe];
  const uint32_t mtu = q.mtu;
  const bool last = q.req.pkt + 1 == w.npkts;
  const bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  n.kind = TxKind::kRequest;
  n.qp_slot = d.qp_slot;
  if (!last) [[likely]] {
    n.opcode = write ? wire::op::kRcWriteMiddle : wire::op::kRcSendMiddle;
  } else {
    const bool imm = w.opcode == IBV_WR_SEND_WITH_IMM || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    n.opcode = write ? write_opcode(false, true, imm) : send_opcode(false, true, imm, w.opcode == IBV_WR_SEND_WITH_INV);
  }
  n.psn = q.req.psn;
  n.wqe = d.wqe;
  n.offset = static_cast<uint64_t>(q.req.pkt) * mtu;
  n.length = static_cast<uint32_t>(std::min<uint64_t>(mtu, w.length - std::min(w.length, n.offset)));
  n.ack_req = last || ack_due(q.req.pkt, config_.ack_req_every);
  n.retransmit = q.req.psn.before(q.req.max_psn);
  n.resource = 0;
  // A middle packet after a packet of the same opcode and length: the same frame.
  n.frame_len = n.opcode == d.opcode && n.length == d.length ? d.frame_len : frame_len(n.opcode, n.length);
}

const TxDesc* EngineImpl::next_after_middle(QpCtx& q, const TxDesc& d) {
  TxDesc& n = q.tx_next;
  next_request(q, d, n);
  if (n.kind == TxKind::kNone) {
    after_grant_.push_back(q.slot);
    return nullptr;
  }
  return &n;
}

size_t EngineImpl::build_request_other(QpCtx& q, const TxDesc& d, std::span<uint8_t> out) {
  SendWqe& w = q.sq[d.wqe];
  wire::FrameSpec& spec = rc_spec(q, d.opcode, d.psn, true);
  spec.ack_req = d.ack_req;
  spec.solicited = (w.send_flags & IBV_SEND_SOLICITED) && wire::opcode_info(d.opcode).is_last();
  const wire::OpcodeInfo& op = wire::opcode_info(d.opcode);
  if (op.has(wire::kHdrReth)) {
    spec.reth = wire::RethFields{w.remote_addr + d.offset, w.rkey,
                                 static_cast<uint32_t>(w.length - d.offset)};
  }
  if (op.has(wire::kHdrImmDt)) spec.imm = wire::load_be32(reinterpret_cast<const uint8_t*>(&w.imm_data));
  if (op.has(wire::kHdrIeth)) spec.ieth = w.invalidate_rkey;
  if (op.has(wire::kHdrAtomicEth)) {
    const bool cas = w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
    spec.atomic = wire::AtomicFields{w.remote_addr, w.rkey, cas ? w.swap : w.compare_add,
                                     cas ? w.compare_add : 0};
  }
  // The payload: one piece (inline data, or one SGE) without the scratch vector, or
  // the pieces gather() finds.
  std::span<const uint8_t> piece;
  std::span<const std::span<const uint8_t>> pieces;
  if (d.length > 0) {
    if (w.is_inline) {
      piece = std::span<const uint8_t>(w.inline_data.data() + d.offset, d.length);
      pieces = std::span(&piece, 1);
    } else if (w.sges.size() == 1 && w.mr_deregs == mrs_.deregs()) [[likely]] {
      // gather() of one SGE checked at post (no MR deregistered since): the message
      // is that SGE, so the packet's bytes are one piece of it.
      piece = std::span<const uint8_t>(
          reinterpret_cast<const uint8_t*>(w.sges[0].addr + d.offset + w.sge_bias[0]), d.length);
      pieces = std::span(&piece, 1);
    } else {
      payload_scratch_.clear();
      if (!gather(mrs_, q.pd, w.sges, checked_sges(w), d.offset, d.length, payload_scratch_)) {
        lose_local_mr(q, d);
        return 0;
      }
      pieces = payload_scratch_;
    }
  }
  const wire::BuildResult r = build_rc(q, spec, pieces, out);
  return r.ok() ? r.len : 0;
}

void EngineImpl::run_local_ops(Picos now, QpCtx& q) {
  // BIND_MW and LOCAL_INV act when the requester reaches them, in order with
  // the requests before them (IBV_SEND_FENCE: after every earlier READ and
  // atomic completed, 10.8.3.3), and complete in order like the WRs around
  // them: they take no PSN (npkts 0, so last_psn() is the PSN before theirs
  // and complete_done_wqes() retires them once everything before is
  // acknowledged). A failure completes the WR with IBV_WC_MW_BIND_ERR
  // (bind) or IBV_WC_LOC_QP_OP_ERR (invalidate) when it is the oldest and
  // moves the QP to ERR, as rxe. One run again after a rewind is skipped.
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTS && st != IBV_QPS_SQD) return;
  bool ran = false;
  while (q.req.pkt == 0 && q.req.wqe < q.sq.tail()) {
    SendWqe& w = q.sq[q.req.wqe];
    if (!w.is_local_op() || w.local_error != IBV_WC_SUCCESS) break;
    if (w.state == WqeState::kStarted) {
      ++q.req.wqe;
      continue;
    }
    if (st == IBV_QPS_SQD) break;
    if ((w.send_flags & IBV_SEND_FENCE) && q.req.rd_atomic_inflight > 0) break;
    const int rc = w.opcode == IBV_WR_BIND_MW ? bind_window(q, w.bind) : invalidate_window(q.pd, 0, w.invalidate_rkey);
    if (rc != 0) {
      w.local_error = w.opcode == IBV_WR_BIND_MW ? IBV_WC_MW_BIND_ERR : IBV_WC_LOC_QP_OP_ERR;
      q.sq_unusual = true;  // set already at its post (a local operation); kept explicit
      break;
    }
    w.state = WqeState::kStarted;
    w.first_psn = q.req.psn;
    w.npkts = 0;
    ++q.req.wqe;
    ran = true;
  }
  if (ran) complete_done_wqes(now, q);
}

void EngineImpl::lose_local_mr(QpCtx& q, const TxDesc& d) {
  // An SGE's MR was deregistered after the post (the L_Key check made at post
  // holds only while no MR is deregistered; after a dereg every packet checks
  // its SGEs again, so nothing is read from it): the WR completes
  // with IBV_WC_LOC_PROT_ERR and the QP moves to ERR, as rxe's requester
  // does when its copy fails (kick() completes it once it is the oldest).
  // The requester stops at this packet; later grants of the same transmit
  // find nothing to send.
  SendWqe& w = q.sq[d.wqe];
  if (w.local_error != IBV_WC_SUCCESS) return;
  w.local_error = IBV_WC_LOC_PROT_ERR;
  q.sq_unusual = true;
  q.req.wqe = d.wqe;
  q.req.pkt = static_cast<uint32_t>(psn_diff(d.psn, w.first_psn));
  q.req.psn = d.psn;
  after_grant_.push_back(q.slot);
}

void EngineImpl::rewind_requester(QpCtx& q, wire::Psn psn) {
  // Find the WQE that holds psn among the started ones, from the oldest (a
  // restart may also move forward past a retransmission pass in progress).
  uint64_t i = q.sq.head();
  for (; i < q.sq.tail(); ++i) {
    SendWqe& w = q.sq[i];
    if (w.state != WqeState::kStarted) break;
    if (!psn.after(w.last_psn())) break;
  }
  q.req.wqe = i;
  q.req.pkt = 0;
  // Karn: a PSN about to be sent again is not timed.
  q.req.ready_fresh = false;
  if (q.comp.timed && !q.comp.timed_psn.before(psn)) q.comp.timed = false;
  if (i < q.sq.tail() && q.sq[i].state == WqeState::kStarted) {
    const SendWqe& w = q.sq[i];
    const int32_t k = psn_diff(psn, w.first_psn);
    if (k > 0) q.req.pkt = static_cast<uint32_t>(k);
    q.req.psn = w.first_psn + q.req.pkt;
  } else {
    q.req.psn = psn;
  }
  // READ/atomic requests still outstanding before the restart point.
  q.req.rd_atomic_inflight = 0;
  for (uint64_t j = q.sq.head(); j < q.req.wqe; ++j) {
    if (q.sq[j].is_read_or_atomic()) ++q.req.rd_atomic_inflight;
  }
}

}  // namespace isoroce::transport::detail
