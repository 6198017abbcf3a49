// RC completer (IBTA vol.1 9.7.5.2, 9.7.6; rxe_comp.c): cumulative ACKs,
// READ responses and atomic ACKs (which acknowledge everything before them,
// 9.7.5.2.2), NAKs, the retransmission timer and RNR waits, and the error
// completions when retry_cnt or rnr_retry run out.
#include <algorithm>
#include <cstring>

#include "transport/engine/engine_impl.h"
#include "transport/engine/memory.h"

namespace isoroce::transport::detail {
namespace {

using wire::AethKind;
using wire::NakCode;
using wire::OpKind;

ibv_wc_status nak_status(uint8_t code) {
  switch (static_cast<NakCode>(code)) {
    case NakCode::kInvalidRequest: return IBV_WC_REM_INV_REQ_ERR;
    case NakCode::kRemoteAccessError: return IBV_WC_REM_ACCESS_ERR;
    case NakCode::kRemoteOperationalError: return IBV_WC_REM_OP_ERR;
    case NakCode::kInvalidRdRequest: return IBV_WC_REM_INV_RD_REQ_ERR;
    default: return IBV_WC_REM_OP_ERR;
  }
}

}  // namespace

void EngineImpl::arm_ack_timer(Picos now, QpCtx& q) {
  const bool outstanding = q.comp.psn.before(q.req.max_psn);
  if (!outstanding || now < q.comp.rnr_until) {  // an RNR wait re-arms the timer when it ends
    q.comp.ack_deadline = sched::kNever;
    return;
  }
  const Picos t = ack_timeout_picos(q.qp.attr().timeout);
  q.comp.ack_deadline = t == sched::kNever ? sched::kNever : now + t;
  if (q.comp.ack_deadline != sched::kNever) schedule_timer(q, q.comp.ack_deadline);
}

// Completes, in order, the WQEs at the head that are fully acknowledged.
void EngineImpl::complete_done_wqes(Picos now, QpCtx& q) {
  bool any = false;
  while (!q.sq.empty()) {
    SendWqe& w = q.sq.front();
    if (w.state != WqeState::kStarted) break;
    if (w.is_read_or_atomic()) {
      if (!w.completed_ok) break;
      if (q.req.rd_atomic_inflight > 0) --q.req.rd_atomic_inflight;
    } else if (!w.last_psn().before(q.comp.psn)) {
      break;
    }
    complete_send(q, w, IBV_WC_SUCCESS);
    q.sq.pop();
    any = true;
  }
  if (!any) return;
  // A rewind may have pointed the requester at what is now acknowledged.
  if (q.req.wqe < q.sq.head() || q.req.psn.before(q.comp.psn)) rewind_requester(q, q.comp.psn);
  if (q.qp.state() == IBV_QPS_SQD && q.sq.empty()) q.qp.sq_drained();
  kick(now, q);
}

void EngineImpl::retire_acked(Picos now, QpCtx& q, wire::Psn through) {
  // Everything up to `through` arrived, except READ/atomic results still owed.
  wire::Psn next = through + 1;
  if (next.after(q.req.max_psn)) next = q.req.max_psn;
  for (uint64_t i = q.sq.head(); i < q.sq.tail(); ++i) {
    const SendWqe& w = q.sq[i];
    if (w.state != WqeState::kStarted) break;
    if (w.is_read_or_atomic() && !w.completed_ok) {
      const wire::Psn owed = w.first_psn + static_cast<uint32_t>(w.read_done / q.mtu);
      if (owed.before(next)) next = owed;
      break;
    }
  }
  if (next.after(q.comp.psn)) {
    q.comp.psn = next;
    q.comp.retry_left = q.qp.attr().retry_cnt;
    q.comp.rnr_retry_left = q.qp.attr().rnr_retry;
    q.comp.read_retry_pending = false;
    arm_ack_timer(now, q);
  }
  complete_done_wqes(now, q);
}

void EngineImpl::retry(Picos now, QpCtx& q, wire::Psn from) {
  rewind_requester(q, from);
  // The scheduler may hold a stale size for this QP's next packet: re-announce it.
  sched_->deactivate(now, q.slot);
  arm_ack_timer(now, q);
  kick(now, q);
}

// Fails the WQE that owns psn (or the head) with status and moves the QP to
// ERR, which flushes the rest (9.9.3).
void EngineImpl::fail_request(Picos now, QpCtx& q, ibv_wc_status status) {
  if (!q.sq.empty()) {
    complete_send(q, q.sq.front(), status);
    q.sq.pop();
  }
  q.qp.set_error();
  enter_error(now, q);
  events_.push_back({AsyncEventType::kQpFatal, q.qp.qpn().value()});
}

void EngineImpl::on_response(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                             std::span<uint8_t> frame) {
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTS && st != IBV_QPS_SQD) {
    ++counters_.rx_bad_state;
    return;
  }
  const wire::Psn psn = pkt.psn;
  // Only PSNs in [comp_psn - 1, req_max_psn) mean anything now; the rest are
  // stale duplicates (9.7.5.2.1) or bogus.
  if (!psn.before(q.req.max_psn)) {
    ++counters_.rx_psn_out_of_window;  // never sent
    ++counters_.rx_dropped;
    return;
  }
  if (psn.before(q.comp.psn - 1)) {
    ++counters_.rx_duplicates;
    return;
  }
  const wire::OpcodeInfo& op = *pkt.op;
  if (op.kind == OpKind::kAck) {
    const uint8_t syn = pkt.aeth->syndrome;
    switch (wire::aeth_kind(syn)) {
      case AethKind::kAck:
        retire_acked(now, q, psn);
        // An ACK past a READ/atomic whose response never came: the response
        // was lost, ask again (9.7.5.2.2 implied NAK).
        if (!q.sq.empty() && q.sq.front().state == WqeState::kStarted) {
          const SendWqe& w = q.sq.front();
          if (w.is_read_or_atomic() && !w.completed_ok && !psn.before(w.first_psn) &&
              !q.comp.read_retry_pending) {
            q.comp.read_retry_pending = true;
            retry(now, q, q.comp.psn);
          }
        }
        return;
      case AethKind::kRnrNak: {
        ++counters_.rnr_naks_received;
        ++q.stats.rnr_naks_received;
        retire_acked(now, q, psn - 1);
        if (q.qp.state() != IBV_QPS_RTS && q.qp.state() != IBV_QPS_SQD) return;
        if (psn != q.comp.psn) return;  // an older RNR NAK
        if (q.qp.attr().rnr_retry != 7) {  // 7: retry forever (9.7.5.2.8)
          if (q.comp.rnr_retry_left == 0) {
            fail_request(now, q, IBV_WC_RNR_RETRY_EXC_ERR);
            return;
          }
          --q.comp.rnr_retry_left;
        }
        q.comp.rnr_until = now + rnr_timer_picos(syn & 31);
        q.comp.ack_deadline = sched::kNever;
        rewind_requester(q, psn);
        sched_->deactivate(now, q.slot);
        schedule_timer(q, q.comp.rnr_until);
        return;
      }
      case AethKind::kNak: {
        ++counters_.naks_received;
        ++q.stats.naks_received;
        retire_acked(now, q, psn - 1);
        if (q.qp.state() != IBV_QPS_RTS && q.qp.state() != IBV_QPS_SQD) return;
        const uint8_t code = syn & 31;
        if (static_cast<NakCode>(code) == NakCode::kPsnSequenceError) {
          if (psn != q.comp.psn) return;  // not about the oldest outstanding PSN
          if (now < q.comp.rnr_until) return;  // the RNR wait resends from here anyway
          if (q.comp.retry_left == 0) {
            fail_request(now, q, IBV_WC_RETRY_EXC_ERR);
            return;
          }
          --q.comp.retry_left;
          retry(now, q, psn);
          return;
        }
        fail_request(now, q, nak_status(code));
        return;
      }
      default:
        ++counters_.rx_dropped;
        return;
    }
  }

  // READ responses and atomic ACKs: first, everything before them arrived.
  retire_acked(now, q, psn - 1);
  if (q.sq.empty() || q.sq.front().state != WqeState::kStarted) return;
  SendWqe& w = q.sq.front();
  if (op.kind == OpKind::kAtomicAck) {
    if (w.opcode != IBV_WR_ATOMIC_CMP_AND_SWP && w.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) return;
    if (w.first_psn != psn || w.completed_ok) return;
    const uint64_t orig = *pkt.atomic_ack;
    uint8_t bytes[8];
    std::memcpy(bytes, &orig, 8);  // the original value, in host order in local memory
    if (w.local_error == IBV_WC_SUCCESS && !scatter(mrs_, q.pd, w.sges, 0, bytes)) {
      fail_request(now, q, IBV_WC_LOC_PROT_ERR);
      return;
    }
    w.completed_ok = true;
    q.comp.read_retry_pending = false;
    retire_acked(now, q, psn);
    return;
  }
  // READ response.
  if (w.opcode != IBV_WR_RDMA_READ || w.completed_ok) return;
  const wire::Psn expected = w.first_psn + static_cast<uint32_t>(w.read_done / q.mtu);
  if (psn != expected) {
    // A response went missing: re-issue the READ from the first missing byte
    // (9.7.5.2.2), once per gap.
    if (psn.after(expected) && !q.comp.read_retry_pending) {
      q.comp.read_retry_pending = true;
      retry(now, q, expected);
    }
    return;
  }
  const uint64_t left = w.length - w.read_done;
  const bool last = op.is_last();
  // A re-issued READ is answered from its restart point with FIRST/ONLY, so
  // position opcodes are not checked, only the lengths (9.7.5.2.2).
  if ((!last && pkt.payload_len != q.mtu) || (last && pkt.payload_len != left) ||
      pkt.payload_len > left) {
    ++counters_.rx_bad_length;
    ++counters_.rx_dropped;
    return;
  }
  const auto payload = frame.subspan(pkt.payload_offset, pkt.payload_len);
  if (!scatter(mrs_, q.pd, w.sges, w.read_done, payload)) {
    fail_request(now, q, IBV_WC_LOC_PROT_ERR);
    return;
  }
  w.read_done += payload.size();
  q.comp.read_retry_pending = false;
  if (last) {
    w.completed_ok = true;
    retire_acked(now, q, psn);
  } else {
    // Progress inside the READ: the timer restarts (9.7.6.1.3).
    q.comp.psn = psn + 1;
    q.comp.retry_left = q.qp.attr().retry_cnt;
    arm_ack_timer(now, q);
  }
}

void EngineImpl::on_timer(Picos now, QpCtx& q) {
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTS && st != IBV_QPS_SQD) return;
  if (q.comp.rnr_until != 0 && now >= q.comp.rnr_until) {
    q.comp.rnr_until = 0;
    arm_ack_timer(now, q);
    kick(now, q);
  }
  if (q.comp.ack_deadline != sched::kNever && now >= q.comp.ack_deadline) {
    ++counters_.timeouts;
    if (q.comp.retry_left == 0) {
      fail_request(now, q, IBV_WC_RETRY_EXC_ERR);
      return;
    }
    --q.comp.retry_left;
    q.comp.read_retry_pending = false;
    retry(now, q, q.comp.psn);
  }
  // Re-queue the earliest pending deadline.
  Picos next = q.comp.ack_deadline;
  if (q.comp.rnr_until != 0) next = std::min(next, q.comp.rnr_until);
  if (next != sched::kNever) schedule_timer(q, next);
}

}  // namespace isoroce::transport::detail
