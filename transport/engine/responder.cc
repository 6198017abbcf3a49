// RC responder (IBTA vol.1 9.7.5; rxe_resp.c): one request packet goes
// through named steps (on_request: PSN, opcode sequence, length, R_Key,
// resources, execute, acknowledge; every NAK a step of its own), duplicates,
// receive WQEs (RQ or SRQ), RDMA WRITE, READ and atomic execution from
// responder resources, and the ACK/NAK it answers with. A request is checked
// completely before anything is written, so a NAKed packet (RNR, error) leaves
// memory and state as they were and its retransmission is processed from
// scratch.
#include <algorithm>
#include <arpa/inet.h>

#include <cstring>

#include "transport/engine/engine_impl.h"
#include "transport/engine/memory.h"
#include "transport/wire/icrc.h"

namespace isoroce::transport::detail {
namespace {

using wire::AethKind;
using wire::NakCode;
using wire::OpKind;

uint8_t nak(NakCode code) { return wire::make_syndrome(AethKind::kNak, static_cast<uint8_t>(code)); }
// ACK syndrome with the credit field "invalid" (31): no end-to-end credits (9.7.7.2).
constexpr uint8_t kAckSyndrome = 0x1f;

}  // namespace

uint8_t* EngineImpl::write_target(const QpCtx& q) const {
  if (q.resp.write_mr_deregs == mrs_.deregs()) [[likely]] return mr_ptr(*q.resp.write_mr, q.resp.write_va);
  const verbs::Mr* mr = rkey_mr(q.resp.write_rkey);
  if (mr == nullptr || mr->id != q.resp.write_mr_id) return nullptr;
  return mr_ptr(*mr, q.resp.write_va);
}

bool EngineImpl::take_recv_wqe(QpCtx& q, RecvWqe* out) {
  if (out == &q.resp.cur_recv) q.resp.recv_checked_deregs = UINT64_MAX;  // another receive: not checked
  if (q.use_srq) {
    auto it = srqs_.find(q.srq);
    if (it == srqs_.end() || it->second->queue.empty()) return false;
    SrqCtx& s = *it->second;
    std::swap(*out, s.queue.front());  // the slot keeps a vector to reuse (post_srq_recv)
    s.queue.pop();
    if (s.srq.take()) events_.push_back({AsyncEventType::kSrqLimitReached, q.srq});
    return true;
  }
  if (q.rq.empty()) return false;
  std::swap(*out, q.rq.front());  // the slot keeps a vector to reuse (post_recv)
  q.rq.pop();
  return true;
}

void EngineImpl::pop_recv_wqe(QpCtx& q) {
  // take_recv_wqe() without the swap: the slot keeps its receive (and its vector for
  // the next post), the queue's accounting is the same.
  if (q.use_srq) {
    auto it = srqs_.find(q.srq);
    if (it == srqs_.end() || it->second->queue.empty()) return;
    SrqCtx& s = *it->second;
    s.queue.pop();
    if (s.srq.take()) events_.push_back({AsyncEventType::kSrqLimitReached, q.srq});
    return;
  }
  if (!q.rq.empty()) q.rq.pop();
}

const RecvWqe* EngineImpl::peek_recv_wqe(const QpCtx& q) const {
  if (q.use_srq) {
    auto it = srqs_.find(q.srq);
    return it == srqs_.end() || it->second->queue.empty() ? nullptr : &it->second->queue.front();
  }
  return q.rq.empty() ? nullptr : &q.rq.front();
}

void EngineImpl::queue_ack(Picos now, QpCtx& q) {
  q.resp.ack_pending = true;
  if (q.resp.ctrl_queued) return;
  if (!q.resp.queue.empty()) return;  // sent after the responses (never overtake them)
  if (sched_->enqueue_control(now, q.slot, ack_frame_bytes())) q.resp.ctrl_queued = true;
}

void EngineImpl::queue_nak(Picos now, QpCtx& q, uint8_t syndrome, wire::Psn psn, bool then_error) {
  q.resp.nak_syndrome = syndrome;
  q.resp.nak_psn = psn;
  if (then_error) q.resp.failed = true;
  if (q.resp.ctrl_queued) return;
  if (sched_->enqueue_control(now, q.slot, ack_frame_bytes())) q.resp.ctrl_queued = true;
}

// ---- one request packet, step by step ---------------------------------------
//
// on_request() runs the steps below in the order of IBTA 9.7.5.1 and rxe_resp.c
// (check PSN, opcode sequence, length, R_Key, resources, execute, acknowledge).
// Each step checks one rule and names the next; each NAK is a step of its own.
// A request is checked completely before anything is written or consumed, so a
// NAKed packet (RNR, error) leaves memory and state as they were, and a request
// with two faults gets the NAK of the rule checked first.

bool EngineImpl::resp_continues(QpCtx& q, RespPacket& r) {
  // Exactly the checks resp_check_state .. resp_check_resource make of a middle or
  // last packet of a SEND or of a WRITE without immediate, each in its passing form:
  // the QP takes requests, the PSN is the expected one, the message in progress is
  // of this kind, the payload is one MTU (middle) or at most one (last), a WRITE's
  // stays within what its RETH announced (and a last one ends it), and the WRITE's
  // registration is still the one its FIRST named (write_target, as
  // resp_check_rkey: a region deregistered or re-registered since fails here and
  // goes the step way to its NAK). A SEND's middle and last packets need no R_Key
  // and no new receive. False with nothing changed when any of them would not pass.
  const wire::OpcodeInfo& op = *r.pkt.op;
  using InMsg = ResponderState::InMsg;
  const InMsg want = op.kind == OpKind::kWrite ? InMsg::kWrite : op.kind == OpKind::kSend ? InMsg::kSend : InMsg::kNone;
  if (want == InMsg::kNone || op.is_first() || q.resp.in_msg != want) return false;
  const ibv_qp_state st = q.qp.state();
  if ((st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) || q.resp.failed) return false;
  if (r.pkt.psn != q.resp.psn) return false;
  const uint64_t len = r.pkt.payload_len;
  const bool last = op.is_last();
  if (last ? len > q.mtu : len != q.mtu) return false;
  if (want == InMsg::kWrite) {
    if (r.pkt.imm) return false;  // consumes a receive: resp_check_resource
    if (len > q.resp.write_left || (last && len != q.resp.write_left)) return false;
    if (len != 0 && (r.write_dst = write_target(q)) == nullptr) return false;
  }
  q.resp.nak_seq_sent = false;  // resp_check_psn's effect on an in-order packet
  return true;
}

bool EngineImpl::rx_write_continues(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                                    std::span<uint8_t> frame) {
  // The checks of resp_continues for a WRITE (receive() made sure of its opcode: a
  // WRITE's middle or last packet without immediate), each in its passing form.
  const wire::OpcodeInfo& op = *pkt.op;
  if (q.resp.in_msg != ResponderState::InMsg::kWrite || pkt.psn != q.resp.psn || q.resp.failed) return false;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return false;
  const uint64_t len = pkt.payload_len;
  const bool last = op.is_last();
  if (last ? len != q.resp.write_left || len > q.mtu : len != q.mtu || len > q.resp.write_left) return false;
  uint8_t* dst = nullptr;
  if (len != 0 && (dst = write_target(q)) == nullptr) return false;
  q.resp.nak_seq_sent = false;  // resp_check_psn's effect on an in-order packet
  // resp_execute_write: copy and check in one pass, before any state changes.
  const uint8_t* payload = frame.data() + pkt.payload_offset;
  wire::Crc32Fold crc = wire::icrc_fold_begin(frame, pkt.l3_offset, pkt.payload_offset);
  wire::crc32_fold_copy(crc, dst, payload, len);
  wire::crc32_fold(crc, payload + len, pkt.pad);
  if (wire::icrc_finish(wire::crc32_fold_register(crc)) != pkt.icrc) [[unlikely]] {
    drop_bad_icrc(now, q, pkt, frame.size());
    return true;
  }
  q.resp.write_va += len;
  q.resp.write_left -= len;
  if (last) {
    q.resp.in_msg = ResponderState::InMsg::kNone;
    ++q.resp.msn;
  }
  // resp_acknowledge.
  q.resp.psn += 1;
  if (pkt.ack_req) queue_ack(now, q);
  return true;
}

bool EngineImpl::rx_send_continues(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                                   std::span<uint8_t> frame) {
  // resp_continues' checks for a SEND's middle packet (receive() made sure of the
  // opcode), each in its passing form.
  if (q.resp.in_msg != ResponderState::InMsg::kSend || pkt.psn != q.resp.psn || q.resp.failed) return false;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return false;
  const uint64_t len = pkt.payload_len;
  if (len != q.mtu) return false;
  // resp_execute_send: into the receive in progress, its ICRC checked on the way.
  const RecvWqe& w = q.resp.cur_recv;
  const uint64_t off = q.resp.recv_offset;
  if (off + len > w.length) return false;  // the steps' LOC_LEN_ERR
  const std::span<const uint8_t> payload(frame.data() + pkt.payload_offset, len);
  wire::Crc32Fold crc = wire::icrc_fold_begin(frame, pkt.l3_offset, pkt.payload_offset);
  // The receive's SGEs checked whole once per receive (again after a dereg): a
  // piece of an SGE that passed lies in the same MR, so the walk's check of each
  // piece would pass and find the same translation. Otherwise (not all of an SGE
  // in its MR) each piece is checked as before.
  const uint64_t deregs = mrs_.deregs();
  if (q.resp.recv_checked_deregs != deregs) [[unlikely]] {
    q.resp.recv_bias.resize(w.sges.size());
    q.resp.recv_checked_ok =
        check_sges(mrs_, q.pd, w.sges, IBV_ACCESS_LOCAL_WRITE, q.resp.recv_bias.data()) == verbs::MrCheck::kOk;
    q.resp.recv_checked_deregs = deregs;
  }
  bool copied;
  if (q.resp.recv_checked_ok && w.sges.size() == 1) [[likely]] {
    // One SGE: the bytes are one piece of it (off + len <= its length, above).
    wire::crc32_fold_copy(crc, reinterpret_cast<uint8_t*>(w.sges[0].addr + off + q.resp.recv_bias[0]),
                          payload.data(), len);
    copied = true;
  } else {
    copied = scatter_crc(mrs_, q.pd, w.sges, CheckedSges{q.resp.recv_bias.data(), q.resp.recv_checked_ok}, off,
                         payload, &crc);
  }
  if (!copied) return false;  // an SGE gone: the steps' way
  q.resp.nak_seq_sent = false;  // resp_check_psn's effect on an in-order packet
  wire::crc32_fold(crc, payload.data() + len, pkt.pad);
  if (wire::icrc_finish(wire::crc32_fold_register(crc)) != pkt.icrc) [[unlikely]] {
    drop_bad_icrc(now, q, pkt, frame.size());
    return true;
  }
  q.resp.recv_offset += len;
  // resp_acknowledge.
  q.resp.psn += 1;
  if (pkt.ack_req) queue_ack(now, q);
  return true;
}

bool EngineImpl::rx_write_first(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                                std::span<uint8_t> frame) {
  // on_request made sure of the opcode (a WRITE's FIRST or ONLY without immediate,
  // so a RETH) and of the ICRC (checked by receive()).
  const wire::OpcodeInfo& op = *pkt.op;
  // resp_check_state, resp_check_psn (in order), resp_check_op_seq (no message in
  // progress).
  if (pkt.psn != q.resp.psn || q.resp.in_msg != ResponderState::InMsg::kNone || q.resp.failed) return false;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return false;
  // resp_check_length: a FIRST carries one MTU, an ONLY at most one, within what the
  // RETH announces (an ONLY exactly that), never more than a message may hold.
  const wire::RethFields& reth = *pkt.reth;
  const uint64_t len = pkt.payload_len;
  const bool last = op.is_last();
  if (last ? len > q.mtu || len != reth.dma_len : len != q.mtu || len > reth.dma_len) return false;
  if (reth.dma_len > kMaxMsgSize) return false;
  // resp_check_rkey: the QP allows remote writes and the R_Key grants [va, va + dma_len).
  if (!(q.qp.attr().qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) return false;
  const verbs::Mr* mr = nullptr;
  if (check_rkey(q, reth.rkey, reth.va, reth.dma_len, IBV_ACCESS_REMOTE_WRITE, &mr) != verbs::MrCheck::kOk) {
    return false;
  }
  // resp_check_resource: a WRITE without immediate needs none. Every check passed.
  q.resp.nak_seq_sent = false;  // resp_check_psn's effect on an in-order packet
  // resp_execute_write for a first packet: the MR the key names (an MR's key: the one
  // check_rkey found; a window's: its MR).
  const verbs::Mr* first_mr = mr != nullptr ? mr : rkey_mr(reth.rkey);
  q.resp.write_rkey = reth.rkey;
  q.resp.write_mr_id = first_mr != nullptr ? first_mr->id : 0;
  q.resp.write_mr = mr;
  q.resp.write_mr_deregs = mr != nullptr ? mrs_.deregs() : UINT64_MAX;
  q.resp.write_total = reth.dma_len;
  if (len != 0) std::memcpy(mr_ptr(*first_mr, reth.va), frame.data() + pkt.payload_offset, len);
  q.resp.write_va = reth.va + len;
  q.resp.write_left = reth.dma_len - len;
  if (last) {
    ++q.resp.msn;
  } else {
    q.resp.in_msg = ResponderState::InMsg::kWrite;
  }
  // resp_acknowledge.
  q.resp.psn += 1;
  if (pkt.ack_req) queue_ack(now, q);
  return true;
}

bool EngineImpl::rx_send_first(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                               std::span<uint8_t> frame) {
  // receive() made sure of the opcode (SEND FIRST, ONLY or ONLY with immediate) and
  // left the ICRC to the copy. resp_check_state, resp_check_psn (in order),
  // resp_check_op_seq (no message in progress).
  if (pkt.psn != q.resp.psn || q.resp.in_msg != ResponderState::InMsg::kNone || q.resp.failed) return false;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return false;
  // resp_check_length: a FIRST carries one MTU, an ONLY at most one.
  const uint64_t len = pkt.payload_len;
  const bool last = pkt.op->is_last();
  if (last ? len > q.mtu : len != q.mtu) return false;
  // resp_check_resource: a receive is queued (else the steps' RNR NAK).
  const RecvWqe* w = peek_recv_wqe(q);
  if (w == nullptr || len > w->length) return false;  // too small: the steps' LOC_LEN_ERR
  // resp_execute_send: into the receive's buffer, the ICRC checked on the way, before
  // the receive is taken.
  const std::span<const uint8_t> payload(frame.data() + pkt.payload_offset, len);
  wire::Crc32Fold crc = wire::icrc_fold_begin(frame, pkt.l3_offset, pkt.payload_offset);
  if (!scatter_crc(mrs_, q.pd, w->sges, 0, payload, &crc)) return false;  // an SGE gone: the steps' way
  q.resp.nak_seq_sent = false;  // resp_check_psn's effect on an in-order packet
  wire::crc32_fold(crc, payload.data() + len, pkt.pad);
  if (wire::icrc_finish(wire::crc32_fold_register(crc)) != pkt.icrc) [[unlikely]] {
    drop_bad_icrc(now, q, pkt, frame.size());
    return true;
  }
  if (!last) {
    take_recv_wqe(q, &q.resp.cur_recv);  // peeked above: there is one
    q.resp.have_recv = true;
    q.resp.recv_offset = len;
    q.resp.in_msg = ResponderState::InMsg::kSend;
  } else {
    // An ONLY completes its receive at once, which needs only its wr_id: the receive
    // (peeked above) leaves its queue in place instead of being swapped into cur_recv,
    // which is read only while a message is in progress (have_recv).
    const uint64_t wr_id = w->wr_id;
    pop_recv_wqe(q);
    ++q.resp.msn;
    // complete()'s work, the entry written in place (no ibv_wc built and copied).
    if (ibv_wc* wc = cq_slot(q.recv_cq)) [[likely]] {
      *wc = ibv_wc{};
      wc->wr_id = wr_id;
      wc->status = IBV_WC_SUCCESS;
      wc->opcode = IBV_WC_RECV;
      wc->byte_len = static_cast<uint32_t>(len);
      wc->qp_num = q.qp.qpn().value();
      wc->src_qp = q.qp.dest_qpn().value();
      if (pkt.imm) {
        wc->wc_flags = IBV_WC_WITH_IMM;
        wc->imm_data = htonl(*pkt.imm);  // ibv_wc carries it in network order
      }
      if (trace_.on(trace::Event::kCompletion)) [[unlikely]] {
        trace_.emit(trace_now_, trace::Event::kCompletion, wc->qp_num, 0, wc->byte_len, q.cls, wc->status,
                    wc->opcode);
      }
    }
  }
  // resp_acknowledge.
  q.resp.psn += 1;
  if (pkt.ack_req) queue_ack(now, q);
  return true;
}

bool EngineImpl::rx_read_request(Picos now, QpCtx& q, const wire::RocePacket& pkt) {
  // receive() made sure of the opcode (a READ request, so a RETH) and of the ICRC.
  // resp_check_state, resp_check_psn (in order), resp_check_op_seq (no message in
  // progress; a READ is an opcode RC executes).
  if (pkt.psn != q.resp.psn || q.resp.in_msg != ResponderState::InMsg::kNone || q.resp.failed) return false;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return false;
  // resp_check_length: no payload to check (the opcode carries none); the RETH asks
  // for no more than a message may hold.
  const wire::RethFields& reth = *pkt.reth;
  if (reth.dma_len > kMaxMsgSize) return false;
  // resp_check_rkey: the QP allows remote reads and the R_Key grants [va, va + dma_len).
  if (!(q.qp.attr().qp_access_flags & IBV_ACCESS_REMOTE_READ)) return false;
  const verbs::Mr* mr = nullptr;
  if (check_rkey(q, reth.rkey, reth.va, reth.dma_len, IBV_ACCESS_REMOTE_READ, &mr) != verbs::MrCheck::kOk) {
    return false;
  }
  // resp_check_resource: a responder resource (alloc_resource changes nothing when it
  // finds none: the steps then find none either and drop the request).
  RespResource* res = alloc_resource(q);
  if (res == nullptr) return false;
  // Every check passed.
  q.resp.nak_seq_sent = false;  // resp_check_psn's effect on an in-order packet
  // resp_execute_read.
  res->kind = RespResource::Kind::kRead;
  res->first_psn = pkt.psn;
  res->npkts = packets_for(reth.dma_len, q.mtu);
  res->va = reth.va;
  res->rkey = reth.rkey;
  res->length = reth.dma_len;
  res->mr = mr;
  res->mr_deregs = mr != nullptr ? mrs_.deregs() : UINT64_MAX;
  q.resp.psn += res->npkts;
  ++q.resp.msn;
  queue_resource(now, q, static_cast<uint32_t>(res - q.resp.resources.data()));
  return true;
}

void EngineImpl::on_request(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                            std::span<uint8_t> frame, bool icrc_pending) {
  RespPacket r{pkt, frame.subspan(pkt.payload_offset, pkt.payload_len), frame, icrc_pending, {}};
  RespStep step;
  if (icrc_pending && resp_continues(q, r)) {
    // A middle or last packet of the SEND or WRITE in progress, in order (most
    // packets of a long message): its checks in one function, its execution (the
    // copy that checks the ICRC) and its acknowledgement without the loop.
    step = pkt.op->kind == OpKind::kWrite ? resp_execute_write(now, q, r) : resp_execute_send(now, q, r);
    if (step == RespStep::kAcknowledge) {
      resp_acknowledge(now, q, r);
      return;
    }
  } else {
    // The checks in their order without the loop's dispatch while each passes to the
    // next (an in-order request): the same steps the loop below would run first, since
    // it does nothing before a check step but call it. Whatever a check names
    // otherwise (a NAK, a duplicate, done) and everything from kExecute on goes
    // through the loop.
    step = resp_check_state(q);
    if (step == RespStep::kCheckPsn) step = resp_check_psn(q, r);
    if (step == RespStep::kCheckOpSeq) step = resp_check_op_seq(q, r);
    if (step == RespStep::kCheckLength) step = resp_check_length(q, r);
    if (step == RespStep::kCheckRkey) step = resp_check_rkey(q, r);
    if (step == RespStep::kCheckResource) step = resp_check_resource(q, r);
  }
  while (true) {
    // A frame whose ICRC is still unchecked goes no further than the checks (which
    // change nothing but their diagnostic counters) before it is checked, unless it
    // is a WRITE about to be executed: that checks it while copying.
    if (r.icrc_pending && step > RespStep::kCheckResource &&
        !(step == RespStep::kExecute && (pkt.op->kind == OpKind::kWrite || pkt.op->kind == OpKind::kSend))) {
      r.icrc_pending = false;
      if (wire::icrc_compute(frame, pkt.l3_offset, frame.size() - wire::kIcrcBytes) != pkt.icrc) {
        drop_bad_icrc(now, q, pkt, frame.size());
        return;
      }
    }
    if (step == RespStep::kDone) break;
    switch (step) {
      case RespStep::kCheckState: step = resp_check_state(q); break;
      case RespStep::kCheckPsn: step = resp_check_psn(q, r); break;
      case RespStep::kCheckOpSeq: step = resp_check_op_seq(q, r); break;
      case RespStep::kCheckLength: step = resp_check_length(q, r); break;
      case RespStep::kCheckRkey: step = resp_check_rkey(q, r); break;
      case RespStep::kCheckResource: step = resp_check_resource(q, r); break;
      case RespStep::kExecute: step = resp_execute(now, q, r); break;
      case RespStep::kAcknowledge: step = resp_acknowledge(now, q, r); break;
      case RespStep::kDuplicate: on_duplicate(now, q, pkt); step = RespStep::kDone; break;
      case RespStep::kNakSequence: step = resp_nak_sequence(now, q); break;
      case RespStep::kNakRnr: rnr_nak(now, q, pkt.psn); step = RespStep::kDone; break;
      case RespStep::kNakInvalidRequest:
        fatal_nak(now, q, NakCode::kInvalidRequest, pkt.psn);
        step = RespStep::kDone;
        break;
      case RespStep::kNakRemoteAccess:
        fatal_nak(now, q, NakCode::kRemoteAccessError, pkt.psn);
        step = RespStep::kDone;
        break;
      case RespStep::kNakRemoteOperational:
        fatal_nak(now, q, NakCode::kRemoteOperationalError, pkt.psn);
        step = RespStep::kDone;
        break;
      case RespStep::kDone: break;
    }
  }
}

RespStep EngineImpl::resp_check_state(const QpCtx& q) {
  // 10.3.1: RTR, RTS and SQD receive; after a fatal NAK nothing is taken.
  const ibv_qp_state st = q.qp.state();
  if ((st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) || q.resp.failed) {
    ++counters_.rx_bad_state;
    return RespStep::kDone;
  }
  return RespStep::kCheckPsn;
}

RespStep EngineImpl::resp_check_psn(QpCtx& q, const RespPacket& r) {
  const int32_t diff = psn_diff(r.pkt.psn, q.resp.psn);
  if (diff > 0) {
    // 9.7.5.1.2: a packet from the future means loss; NAK once per gap.
    ++counters_.rx_out_of_sequence;
    return q.resp.nak_seq_sent ? RespStep::kDone : RespStep::kNakSequence;
  }
  if (diff < 0) return RespStep::kDuplicate;  // 9.7.5.1.1
  q.resp.nak_seq_sent = false;
  return RespStep::kCheckOpSeq;
}

RespStep EngineImpl::resp_nak_sequence(Picos now, QpCtx& q) {
  q.resp.nak_seq_sent = true;
  ++counters_.naks_sent;
  ++q.stats.naks_sent;
  queue_nak(now, q, nak(NakCode::kPsnSequenceError), q.resp.psn, false);
  return RespStep::kDone;
}

RespStep EngineImpl::resp_check_op_seq(const QpCtx& q, const RespPacket& r) {
  // 9.7.5.1.3: a message continues with its own kind, and a new one starts
  // only after the last ended.
  const wire::OpcodeInfo& op = *r.pkt.op;
  const bool continuing = op.is_middle() || (op.is_last() && !op.is_first());
  using InMsg = ResponderState::InMsg;
  const InMsg want = op.kind == OpKind::kSend    ? InMsg::kSend
                     : op.kind == OpKind::kWrite ? InMsg::kWrite
                                                 : InMsg::kNone;
  if (continuing ? q.resp.in_msg != want : q.resp.in_msg != InMsg::kNone) {
    ++counters_.rx_bad_opcode_sequence;
    return RespStep::kNakInvalidRequest;
  }
  switch (op.kind) {  // what an RC responder executes
    case OpKind::kSend:
    case OpKind::kWrite:
    case OpKind::kReadRequest:
    case OpKind::kCompareSwap:
    case OpKind::kFetchAdd:
      return RespStep::kCheckLength;
    default:
      ++counters_.rx_invalid_request;
      return RespStep::kNakInvalidRequest;
  }
}

RespStep EngineImpl::resp_check_length(const QpCtx& q, const RespPacket& r) {
  // 9.7.5.1.4: first and middle packets carry exactly one MTU, others at most
  // one; a RETH never asks for more than a message may hold; a WRITE carries
  // exactly the bytes its RETH announced.
  const wire::OpcodeInfo& op = *r.pkt.op;
  bool bad = false;
  if (op.has_payload()) {
    const bool full = op.is_middle() || (op.is_first() && !op.is_last());
    bad = full ? r.pkt.payload_len != q.mtu : r.pkt.payload_len > q.mtu;
  }
  if (r.pkt.reth && r.pkt.reth->dma_len > kMaxMsgSize) bad = true;
  if (!bad && op.kind == OpKind::kWrite) {
    const uint64_t left = op.is_first() ? r.pkt.reth->dma_len : q.resp.write_left;
    bad = r.payload.size() > left || (op.is_last() && r.payload.size() != left);
  }
  if (bad) {
    ++counters_.rx_bad_length;
    return RespStep::kNakInvalidRequest;
  }
  return RespStep::kCheckRkey;
}

RespStep EngineImpl::resp_check_rkey(const QpCtx& q, RespPacket& r) {
  // 9.7.5.1.5 / 10.6.3: the R_Key names an MR of the QP's PD that grants the
  // access, the bytes lie inside it, and the QP allows remote access of that
  // kind. A WRITE in progress must still write the registration its FIRST
  // named: after dereg_mr() the rest is a Remote Access Error (9.9.3, class C).
  const wire::OpcodeInfo& op = *r.pkt.op;
  const uint32_t access = q.qp.attr().qp_access_flags;
  verbs::MrCheck c = verbs::MrCheck::kOk;
  switch (op.kind) {
    case OpKind::kWrite:
      if (op.is_first()) {
        const wire::RethFields& reth = *r.pkt.reth;
        c = (access & IBV_ACCESS_REMOTE_WRITE)
                ? check_rkey(q, reth.rkey, reth.va, reth.dma_len, IBV_ACCESS_REMOTE_WRITE, &r.write_mr)
                : verbs::MrCheck::kAccessViolation;
      } else if (!r.payload.empty() && (r.write_dst = write_target(q)) == nullptr) {
        c = verbs::MrCheck::kInvalidKey;
      }
      break;
    case OpKind::kReadRequest: {
      const wire::RethFields& reth = *r.pkt.reth;
      c = (access & IBV_ACCESS_REMOTE_READ)
              ? check_rkey(q, reth.rkey, reth.va, reth.dma_len, IBV_ACCESS_REMOTE_READ, &r.read_mr)
              : verbs::MrCheck::kAccessViolation;
      break;
    }
    case OpKind::kCompareSwap:
    case OpKind::kFetchAdd:
      c = (access & IBV_ACCESS_REMOTE_ATOMIC)
              ? check_rkey(q, r.pkt.atomic->rkey, r.pkt.atomic->va, verbs::kAtomicSize, IBV_ACCESS_REMOTE_ATOMIC)
              : verbs::MrCheck::kAccessViolation;
      if (c == verbs::MrCheck::kOk && (r.pkt.atomic->va & (verbs::kAtomicSize - 1))) c = verbs::MrCheck::kMisaligned;
      break;
    default:
      break;
  }
  if (c == verbs::MrCheck::kOk) return RespStep::kCheckResource;
  if (c == verbs::MrCheck::kMisaligned) {  // 9.4.5, as rxe: Invalid Request
    ++counters_.rx_invalid_request;
    return RespStep::kNakInvalidRequest;
  }
  ++counters_.rx_bad_rkey;
  return RespStep::kNakRemoteAccess;
}

RespStep EngineImpl::resp_check_resource(QpCtx& q, RespPacket& r) {
  const wire::OpcodeInfo& op = *r.pkt.op;
  switch (op.kind) {
    case OpKind::kSend:
      // 9.7.5.2.8: a message needs a receive WQE; none is an RNR NAK.
      if (!op.is_first()) return RespStep::kExecute;
      // A SEND whose ICRC is checked while it is copied takes its receive only
      // once the check passed (resp_execute_send); here it only needs one.
      if (r.icrc_pending) return peek_recv_wqe(q) != nullptr ? RespStep::kExecute : RespStep::kNakRnr;
      if (!take_recv_wqe(q, &q.resp.cur_recv)) return RespStep::kNakRnr;
      q.resp.have_recv = true;
      q.resp.recv_offset = 0;
      return RespStep::kExecute;
    case OpKind::kWrite:  // WRITE with immediate consumes a receive
      if (r.pkt.imm && !take_recv_wqe(q, &r.recv)) return RespStep::kNakRnr;
      return RespStep::kExecute;
    default:
      // 9.7.5.1.5: a READ or atomic needs a responder resource. Every one
      // still sending (replays included): drop the request without state
      // change; the requester sends it again.
      r.res = alloc_resource(q);
      if (r.res == nullptr) {
        ++counters_.rx_no_resource;
        return RespStep::kDone;
      }
      return RespStep::kExecute;
  }
}

RespStep EngineImpl::resp_execute(Picos now, QpCtx& q, RespPacket& r) {
  switch (r.pkt.op->kind) {
    case OpKind::kSend: return resp_execute_send(now, q, r);
    case OpKind::kWrite: return resp_execute_write(now, q, r);
    case OpKind::kReadRequest: return resp_execute_read(now, q, r);
    default: return resp_execute_atomic(now, q, r);
  }
}

RespStep EngineImpl::resp_execute_send(Picos now, QpCtx& q, RespPacket& r) {
  const wire::OpcodeInfo& op = *r.pkt.op;
  bool copied = false;
  if (r.icrc_pending) {
    // Copy into the receive buffer and check the ICRC in one pass, before any state
    // changes (the receive is taken only after): a frame failing its check is
    // dropped as if never received. Its bytes may have reached the buffer of a
    // receive that has not completed, whose contents are undefined until it does
    // (the retransmission writes them again). A receive that cannot take them
    // (too small, an SGE gone) is checked the plain way and fails as before.
    r.icrc_pending = false;
    const RecvWqe* w = op.is_first() ? peek_recv_wqe(q) : &q.resp.cur_recv;
    const uint64_t off = op.is_first() ? 0 : q.resp.recv_offset;
    wire::Crc32Fold crc = wire::icrc_fold_begin(r.frame, r.pkt.l3_offset, r.pkt.payload_offset);
    if (w != nullptr && off + r.payload.size() <= w->length) {
      copied = scatter_crc(mrs_, q.pd, w->sges, off, r.payload, &crc);
    }
    if (copied) wire::crc32_fold(crc, r.payload.data() + r.payload.size(), r.pkt.pad);
    const uint32_t icrc = copied ? wire::icrc_finish(wire::crc32_fold_register(crc))
                                 : wire::icrc_compute(r.frame, r.pkt.l3_offset, r.frame.size() - wire::kIcrcBytes);
    if (icrc != r.pkt.icrc) {
      drop_bad_icrc(now, q, r.pkt, r.frame.size());
      return RespStep::kDone;
    }
    if (op.is_first()) {
      if (!take_recv_wqe(q, &q.resp.cur_recv)) return RespStep::kNakRnr;  // peeked above: never
      q.resp.have_recv = true;
      q.resp.recv_offset = 0;
    }
  }
  if (q.resp.recv_offset + r.payload.size() > q.resp.cur_recv.length) {
    fail_recv(q, IBV_WC_LOC_LEN_ERR);
    return RespStep::kNakInvalidRequest;
  }
  if (!copied && !scatter(mrs_, q.pd, q.resp.cur_recv.sges, q.resp.recv_offset, r.payload)) {
    fail_recv(q, IBV_WC_LOC_PROT_ERR);
    return RespStep::kNakRemoteOperational;
  }
  q.resp.recv_offset += r.payload.size();
  if (!op.is_last()) {
    q.resp.in_msg = ResponderState::InMsg::kSend;
    return RespStep::kAcknowledge;
  }
  ibv_wc wc{};
  wc.wr_id = q.resp.cur_recv.wr_id;
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = IBV_WC_RECV;
  wc.byte_len = static_cast<uint32_t>(q.resp.recv_offset);
  wc.qp_num = q.qp.qpn().value();
  wc.src_qp = q.qp.dest_qpn().value();
  if (r.pkt.imm) {
    wc.wc_flags |= IBV_WC_WITH_IMM;
    wc.imm_data = htonl(*r.pkt.imm);  // ibv_wc carries it in network order
  }
  if (r.pkt.ieth) {
    // Send with Invalidate (9.4.1.1, 10.6.7.2.4): the R_Key names a valid type
    // 2 window of this QP's PD bound by this QP; otherwise the receive
    // completes with IBV_WC_REM_INV_REQ_ERR and the QP fails (rxe: class J).
    if (invalidate_window(q.pd, q.qp.qpn().value(), *r.pkt.ieth) != 0) {
      fail_recv(q, IBV_WC_REM_INV_REQ_ERR);
      return RespStep::kNakInvalidRequest;
    }
    wc.wc_flags |= IBV_WC_WITH_INV;
    wc.invalidated_rkey = *r.pkt.ieth;
  }
  q.resp.have_recv = false;
  q.resp.in_msg = ResponderState::InMsg::kNone;
  ++q.resp.msn;
  complete(q.recv_cq, wc);
  return RespStep::kAcknowledge;
}

RespStep EngineImpl::resp_execute_write(Picos now, QpCtx& q, RespPacket& r) {
  const wire::OpcodeInfo& op = *r.pkt.op;
  const bool copied = r.icrc_pending;
  // Where the payload goes: the RETH's MR (one lookup; resp_check_rkey checked it)
  // or, inside a message, the target resp_check_rkey found.
  const verbs::Mr* first_mr =
      !op.is_first() ? nullptr : r.write_mr != nullptr ? r.write_mr : rkey_mr(r.pkt.reth->rkey);
  uint8_t* dst = !op.is_first() ? r.write_dst : first_mr != nullptr ? mr_ptr(*first_mr, r.pkt.reth->va) : nullptr;
  if (r.icrc_pending) {
    // Copy and check in one pass, before any state changes: a frame failing its ICRC
    // is dropped as if never received. Its bytes may have reached the MR, but only
    // where this WRITE's R_Key, checked above, lets the peer write, and a WRITE's
    // target holds no defined value before it completes (the retransmission
    // overwrites them).
    r.icrc_pending = false;
    wire::Crc32Fold crc = wire::icrc_fold_begin(r.frame, r.pkt.l3_offset, r.pkt.payload_offset);
    wire::crc32_fold_copy(crc, dst, r.payload.data(), r.payload.size());
    wire::crc32_fold(crc, r.payload.data() + r.payload.size(), r.pkt.pad);
    if (wire::icrc_finish(wire::crc32_fold_register(crc)) != r.pkt.icrc) {
      drop_bad_icrc(now, q, r.pkt, r.frame.size());
      return RespStep::kDone;
    }
  }
  if (op.is_first()) {
    q.resp.write_rkey = r.pkt.reth->rkey;
    q.resp.write_mr_id = first_mr != nullptr ? first_mr->id : 0;
    // r.write_mr: the MR resp_check_rkey found for an MR's key (a window's leaves it null).
    q.resp.write_mr = r.write_mr;
    q.resp.write_mr_deregs = r.write_mr != nullptr ? mrs_.deregs() : UINT64_MAX;
    q.resp.write_va = r.pkt.reth->va;
    q.resp.write_left = r.pkt.reth->dma_len;
    q.resp.write_total = r.pkt.reth->dma_len;
  }
  if (!copied && !r.payload.empty()) std::memcpy(dst, r.payload.data(), r.payload.size());
  q.resp.write_va += r.payload.size();
  q.resp.write_left -= r.payload.size();
  if (!op.is_last()) {
    q.resp.in_msg = ResponderState::InMsg::kWrite;
    return RespStep::kAcknowledge;
  }
  q.resp.in_msg = ResponderState::InMsg::kNone;
  ++q.resp.msn;
  if (r.pkt.imm) {
    ibv_wc wc{};
    wc.wr_id = r.recv.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.byte_len = static_cast<uint32_t>(q.resp.write_total);
    wc.qp_num = q.qp.qpn().value();
    wc.src_qp = q.qp.dest_qpn().value();
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = htonl(*r.pkt.imm);  // ibv_wc carries it in network order
    complete(q.recv_cq, wc);
  }
  return RespStep::kAcknowledge;
}

RespStep EngineImpl::resp_execute_read(Picos now, QpCtx& q, RespPacket& r) {
  // 9.7.5.1.5 / 9.4.4: the resource sends the response packets; they
  // acknowledge the request.
  const wire::RethFields& reth = *r.pkt.reth;
  r.res->kind = RespResource::Kind::kRead;
  r.res->first_psn = r.pkt.psn;
  r.res->npkts = packets_for(reth.dma_len, q.mtu);
  r.res->va = reth.va;
  r.res->rkey = reth.rkey;
  r.res->length = reth.dma_len;
  // The check of the whole READ just made (resp_check_rkey, an MR's key): its
  // responses need none while no MR is deregistered (build_response).
  r.res->mr = r.read_mr;
  r.res->mr_deregs = r.read_mr != nullptr ? mrs_.deregs() : UINT64_MAX;
  q.resp.psn += r.res->npkts;
  ++q.resp.msn;
  queue_resource(now, q, static_cast<uint32_t>(r.res - q.resp.resources.data()));
  return RespStep::kDone;
}

RespStep EngineImpl::resp_execute_atomic(Picos now, QpCtx& q, RespPacket& r) {
  // 9.4.5: the 8 bytes are read, modified and written as one operation; the
  // original value is kept in the resource for duplicates (9.7.5.1.1).
  const wire::AtomicFields& a = *r.pkt.atomic;
  uint8_t* p = mr_ptr(*rkey_mr(a.rkey), a.va);
  uint64_t orig;
  std::memcpy(&orig, p, 8);
  uint64_t next = orig;
  if (r.pkt.op->kind == OpKind::kFetchAdd) next = orig + a.swap_add;
  else if (orig == a.compare) next = a.swap_add;
  std::memcpy(p, &next, 8);
  r.res->kind = RespResource::Kind::kAtomic;
  r.res->first_psn = r.pkt.psn;
  r.res->npkts = 1;
  r.res->atomic_orig = orig;
  q.resp.psn += 1;
  ++q.resp.msn;
  queue_resource(now, q, static_cast<uint32_t>(r.res - q.resp.resources.data()));
  return RespStep::kDone;
}

RespStep EngineImpl::resp_acknowledge(Picos now, QpCtx& q, const RespPacket& r) {
  // 9.7.5.2.1: ACKs are coalesced; AckReq asks for one now.
  q.resp.psn += 1;
  if (r.pkt.ack_req) queue_ack(now, q);
  return RespStep::kDone;
}

void EngineImpl::on_duplicate(Picos now, QpCtx& q, const wire::RocePacket& pkt) {
  // 9.7.5.1.1: duplicates are acknowledged again; READs are executed again and
  // atomics answered from the saved result, never executed twice.
  ++counters_.rx_duplicates;
  const OpKind kind = pkt.op->kind;
  if (kind == OpKind::kReadRequest) {
    for (uint32_t i = 0; i < q.resp.resources.size(); ++i) {
      RespResource& r = q.resp.resources[i];
      if (r.kind != RespResource::Kind::kRead) continue;
      const int32_t k = psn_diff(pkt.psn, r.first_psn);
      if (k < 0 || static_cast<uint32_t>(k) >= r.npkts) continue;
      const wire::RethFields& reth = *pkt.reth;
      if (check_rkey(q, reth.rkey, reth.va, reth.dma_len, IBV_ACCESS_REMOTE_READ) !=
          verbs::MrCheck::kOk) {
        return;
      }
      // The requester discards every response after its gap and will ask for
      // the later READs and atomics again: their queued responses only delay it.
      drop_queued_after(q, pkt.psn, i);
      // Answer from the PSN asked for. A READ still being answered restarts in
      // place.
      r.first_psn = pkt.psn;
      r.npkts = packets_for(reth.dma_len, q.mtu);
      r.va = reth.va;
      r.rkey = reth.rkey;
      r.length = reth.dma_len;
      r.mr_deregs = UINT64_MAX;  // another range, maybe another key: checked again
      if (r.queued) {
        r.sent = 0;
        return;
      }
      queue_resource(now, q, i);
      return;
    }
    return;  // not among the resources any more: nothing to answer with
  }
  if (kind == OpKind::kCompareSwap || kind == OpKind::kFetchAdd) {
    for (uint32_t i = 0; i < q.resp.resources.size(); ++i) {
      RespResource& r = q.resp.resources[i];
      if (r.kind == RespResource::Kind::kAtomic && r.first_psn == pkt.psn) {
        if (!r.queued) queue_resource(now, q, i);
        return;
      }
    }
    return;
  }
  queue_ack(now, q);
}

void EngineImpl::drop_queued_after(QpCtx& q, wire::Psn psn, uint32_t keep) {
  // The resources stay as they are (an atomic keeps its saved result for the
  // duplicate that will come); only their place in the send queue goes.
  std::queue<uint32_t> kept;
  for (; !q.resp.queue.empty(); q.resp.queue.pop()) {
    const uint32_t i = q.resp.queue.front();
    RespResource& r = q.resp.resources[i];
    if (i != keep && psn_diff(r.first_psn, psn) > 0) {
      r.queued = false;
      r.sent = r.npkts;
      ++counters_.responses_cancelled;
      continue;
    }
    kept.push(i);
  }
  q.resp.queue = std::move(kept);
}

RespResource* EngineImpl::alloc_resource(QpCtx& q) {
  // The oldest resource not being answered right now. Replays of duplicates
  // can keep some busy after the requester moved on, so there are twice as
  // many resources as max_dest_rd_atomic (engine.cc).
  const uint32_t n = static_cast<uint32_t>(q.resp.resources.size());
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = (q.resp.res_next + k) % n;
    RespResource& r = q.resp.resources[i];
    if (r.queued) continue;
    q.resp.res_next = (i + 1) % n;
    r = RespResource{};
    return &r;
  }
  return nullptr;
}

void EngineImpl::queue_resource(Picos now, QpCtx& q, uint32_t index) {
  RespResource& r = q.resp.resources[index];
  r.sent = 0;
  r.queued = true;
  q.resp.queue.push(index);
  kick(now, q);
}

void EngineImpl::rnr_nak(Picos now, QpCtx& q, wire::Psn psn) {
  // 9.7.5.2.8: no receive WQE. The packets behind this one are out of sequence
  // until it is sent again, and the RNR NAK stands for the NAK of that gap.
  ++counters_.rnr_naks_sent;
  ++q.stats.rnr_naks_sent;
  q.resp.nak_seq_sent = true;
  queue_nak(now, q, wire::make_syndrome(AethKind::kRnrNak, q.qp.attr().min_rnr_timer & 31), psn,
            false);
}

void EngineImpl::fatal_nak(Picos now, QpCtx& q, wire::NakCode code, wire::Psn psn) {
  // Class B/C/D errors (9.9.2-9.9.3): NAK, then the responder's QP goes to ERR.
  ++counters_.naks_sent;
  ++q.stats.naks_sent;
  queue_nak(now, q, nak(code), psn, true);
}

void EngineImpl::fail_recv(QpCtx& q, ibv_wc_status status) {
  ibv_wc wc{};
  wc.wr_id = q.resp.cur_recv.wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_RECV;
  wc.qp_num = q.qp.qpn().value();
  q.resp.have_recv = false;
  complete(q.recv_cq, wc);
}

void EngineImpl::peek_response(QpCtx& q, TxDesc& d) {
  d = TxDesc{};
  if (q.resp.queue.empty()) return;
  const uint32_t index = q.resp.queue.front();
  const RespResource& r = q.resp.resources[index];
  d.kind = TxKind::kResponse;
  d.qp_slot = q.slot;
  d.resource = index;
  d.psn = r.first_psn + r.sent;
  if (r.kind == RespResource::Kind::kAtomic) {
    d.opcode = wire::op::kRcAtomicAck;
  } else {
    const bool first = r.sent == 0, last = r.sent + 1 == r.npkts;
    d.opcode = first && last ? wire::op::kRcReadResponseOnly
               : first       ? wire::op::kRcReadResponseFirst
               : last        ? wire::op::kRcReadResponseLast
                             : wire::op::kRcReadResponseMiddle;
    d.offset = static_cast<uint64_t>(r.sent) * q.mtu;
    d.length = static_cast<uint32_t>(std::min<uint64_t>(q.mtu, r.length - d.offset));
  }
  d.frame_len = frame_len(d.opcode, d.length);
  return;
}

void EngineImpl::next_response(const QpCtx& q, const TxDesc& d, TxDesc& n) const {
  const RespResource& r = q.resp.resources[d.resource];
  // take_response() moved r.sent one past d's packet: n is packet r.sent, never the
  // first (d was before it), the last when it is the resource's npkts-th.
  n.kind = TxKind::kResponse;
  n.qp_slot = d.qp_slot;
  n.resource = d.resource;
  n.wqe = 0;
  n.psn = d.psn + 1;
  n.offset = d.offset + q.mtu;
  n.length = static_cast<uint32_t>(std::min<uint64_t>(q.mtu, r.length - n.offset));
  n.opcode = r.sent + 1 == r.npkts ? wire::op::kRcReadResponseLast : wire::op::kRcReadResponseMiddle;
  n.ack_req = false;
  n.retransmit = false;
  n.frame_len = n.opcode == d.opcode && n.length == d.length ? d.frame_len : frame_len(n.opcode, n.length);
}

void EngineImpl::take_response(QpCtx& q, const TxDesc& d) {
  RespResource& r = q.resp.resources[d.resource];
  if (++r.sent < r.npkts) return;
  r.queued = false;
  q.resp.queue.pop();
  if (q.resp.queue.empty() && q.resp.ack_pending && !q.resp.ctrl_queued) after_grant_.push_back(q.slot);
}

size_t EngineImpl::build_response(QpCtx& q, const TxDesc& d, std::span<uint8_t> out) {
  RespResource& r = q.resp.resources[d.resource];
  wire::FrameSpec& spec = rc_spec(q, d.opcode, d.psn, true);
  const wire::OpcodeInfo& op = wire::opcode_info(d.opcode);
  if (op.has(wire::kHdrAeth)) spec.aeth = wire::AethFields{kAckSyndrome, q.resp.msn};
  if (op.has(wire::kHdrAtomicAckEth)) spec.atomic_ack = r.atomic_orig;
  std::span<const uint8_t> piece;  // the payload: one piece of one MR, or none
  if (d.length > 0) {
    // Checked again for every packet: the region may have been deregistered
    // since the request. Then the rest of the READ is a Remote Access Error
    // (9.7.5.2, 9.9.3; rxe read_reply() answers a lost MR the same way).
    const verbs::Mr* mr = r.mr;  // an MR's key: the MR the check found (a window's: looked up after)
    if (r.mr_deregs != mrs_.deregs()) {
      mr = nullptr;
      if (check_rkey(q, r.rkey, r.va + d.offset, d.length, IBV_ACCESS_REMOTE_READ, &mr) !=
          verbs::MrCheck::kOk) [[unlikely]] {
        if (!q.resp.failed) fatal_nak(tx_now_, q, NakCode::kRemoteAccessError, d.psn);
        return 0;
      }
      // The whole READ in that MR (as its request's check found): the packets after
      // this one, if any, need no check while no MR is deregistered.
      const verbs::Mr* whole = nullptr;
      if (mr != nullptr && d.offset + d.length < r.length &&
          check_rkey(q, r.rkey, r.va, r.length, IBV_ACCESS_REMOTE_READ, &whole) == verbs::MrCheck::kOk &&
          whole == mr) {
        r.mr = mr;
        r.mr_deregs = mrs_.deregs();
      }
    }
    piece = std::span<const uint8_t>(mr_ptr(mr != nullptr ? *mr : *rkey_mr(r.rkey), r.va + d.offset), d.length);
  }
  const wire::BuildResult res =
      build_rc(q, spec, std::span(&piece, d.length > 0 ? 1 : 0), out);
  return res.ok() ? res.len : 0;
}

uint32_t EngineImpl::ack_frame_bytes() const {
  return frame_len(wire::op::kRcAck, 0) + kEthWireOverhead;
}

size_t EngineImpl::build_control(Picos now, QpCtx& q, std::span<uint8_t> out) {
  q.resp.ctrl_queued = false;
  wire::FrameSpec& spec = rc_spec(q, wire::op::kRcAck, q.resp.psn, false);
  if (q.resp.nak_syndrome) {
    spec.psn = q.resp.nak_psn;
    spec.aeth = wire::AethFields{*q.resp.nak_syndrome, q.resp.msn};
    q.resp.nak_syndrome.reset();
    q.resp.ack_pending = false;
    q.resp.acked_psn = q.resp.nak_psn - 1;
    const wire::BuildResult r = build_rc(q, spec, {}, out);
    if (q.resp.failed) {
      q.qp.set_error();
      enter_error(now, q);
      events_.push_back({AsyncEventType::kQpFatal, q.qp.qpn().value()});
    }
    return r.ok() ? r.len : 0;
  }
  if (!q.resp.ack_pending) return 0;
  // Never acknowledge past a READ/atomic whose response has not left yet.
  wire::Psn psn = q.resp.psn - 1;
  if (!q.resp.queue.empty()) {
    const RespResource& r = q.resp.resources[q.resp.queue.front()];
    psn = r.first_psn + r.sent - 1;
  }
  q.resp.ack_pending = !q.resp.queue.empty();
  if (!psn.after(q.resp.acked_psn) && q.resp.acked_psn != psn) {
    // Nothing new to report, but a duplicate asked again: repeat the last ACK.
    psn = q.resp.acked_psn;
  }
  spec.psn = psn;
  spec.aeth = wire::AethFields{kAckSyndrome, q.resp.msn};
  q.resp.acked_psn = psn;
  ++counters_.acks_sent;
  const wire::BuildResult r = build_rc(q, spec, {}, out);
  return r.ok() ? r.len : 0;
}

}  // namespace isoroce::transport::detail
