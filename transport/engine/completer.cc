// RC completer (IBTA vol.1 9.7.5.2, 9.7.6; rxe_comp.c): one response packet
// goes through named steps (on_response: state, PSN, then ACK, RNR NAK, NAK,
// atomic ACK or READ response); cumulative ACKs, READ responses and atomic
// ACKs acknowledge everything before them (9.7.5.2.2); the retransmission
// timer and its table (9.7.6.1.3), RNR waits and the RNR timer table
// (9.7.5.2.8), and the error completions when retry_cnt or rnr_retry run out.
#include <algorithm>
#include <cstring>

#include "transport/engine/engine_impl.h"
#include "transport/wire/icrc.h"
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

// ---- timers ----------------------------------------------------------------

Picos rnr_timer_picos(uint8_t code) {
  // 9.7.5.2.8, table 45: the RNR NAK timer field, in 10 us units (code 0 is
  // 655.36 ms).
  static constexpr uint32_t k10us[32] = {
      65536, 1,   2,   3,   4,   6,   8,   12,  16,  24,   32,   48,   64,   96,   128,  192,
      256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return static_cast<Picos>(k10us[code & 31]) * 10'000'000ull;  // 10 us units
}

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
      const wire::Psn owed = w.first_psn + packet_index(w.read_done, q.mtu);
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
  trace(now, trace::Event::kRetransmit, q, from.value(), 0, q.comp.retry_left);
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

// ---- one response packet, step by step --------------------------------------
//
// on_response() runs the steps of rxe_comp.c in the order of IBTA 9.7.5.2:
// check the state, check the PSN, then one step per kind of response (ACK,
// RNR NAK, NAK, atomic ACK, READ response), each of which retires what the
// response acknowledges and completes what is done.

bool EngineImpl::read_response_copy_and_check(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                                              std::span<uint8_t> frame, bool* copied) {
  // The READ response the oldest WR expects next (responses arrive in order, so
  // this is the common case) is copied into the WR's buffer while its ICRC is
  // checked, before any state changes; a frame failing its check is dropped as if
  // never received. Its bytes may have reached the buffer of a READ that has not
  // completed, whose contents are undefined until it does (the re-issued READ
  // writes them again). Anything else is checked the plain way first.
  *copied = false;
  const wire::Psn psn = pkt.psn;
  wire::Crc32Fold crc;
  // What comp_check_state() and comp_check_psn() accept, without their counters
  // (on_response runs them afterwards).
  const ibv_qp_state st = q.qp.state();
  if ((st == IBV_QPS_RTS || st == IBV_QPS_SQD) && psn.before(q.req.max_psn) && !psn.before(q.comp.psn - 1) &&
      !q.sq.empty()) {
    const SendWqe& w = q.sq.front();
    const uint64_t left = w.length - std::min(w.length, w.read_done);
    const bool last = pkt.op->is_last();
    if (w.state == WqeState::kStarted && w.opcode == IBV_WR_RDMA_READ && !w.completed_ok &&
        psn == w.first_psn + packet_index(w.read_done, q.mtu) &&
        (last ? pkt.payload_len == left : pkt.payload_len == q.mtu && pkt.payload_len <= left)) {
      crc = wire::icrc_fold_begin(frame, pkt.l3_offset, pkt.payload_offset);
      if (w.sges.size() == 1 && w.mr_deregs == mrs_.deregs()) [[likely]] {
        // scatter_crc() into one SGE checked at post (no MR deregistered since): the
        // READ's buffer is that SGE, the response's bytes one piece of it (the
        // length test above keeps them inside it).
        wire::crc32_fold_copy(crc, reinterpret_cast<uint8_t*>(w.sges[0].addr + w.read_done + w.sge_bias[0]),
                              frame.data() + pkt.payload_offset, pkt.payload_len);
        *copied = true;
      } else {
        *copied = scatter_crc(mrs_, q.pd, w.sges, checked_sges(w), w.read_done,
                              frame.subspan(pkt.payload_offset, pkt.payload_len), &crc);
      }
    }
  }
  if (*copied) wire::crc32_fold(crc, frame.data() + pkt.payload_offset + pkt.payload_len, pkt.pad);
  const uint32_t icrc = *copied ? wire::icrc_finish(wire::crc32_fold_register(crc))
                                : wire::icrc_compute(frame, pkt.l3_offset, frame.size() - wire::kIcrcBytes);
  if (icrc != pkt.icrc) {
    drop_bad_icrc(now, q, pkt, frame.size());
    return false;
  }
  return true;
}

void EngineImpl::on_response(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                             std::span<uint8_t> frame, bool icrc_pending) {
  bool copied = false;
  if (icrc_pending && !read_response_copy_and_check(now, q, pkt, frame, &copied)) return;
  if (copied && pkt.psn == q.comp.psn) {
    // A READ response copied into the oldest WR (a READ) at the PSN that WR expects,
    // which is also the oldest unacknowledged one (always so while that READ is the
    // oldest WR; tested because what follows relies on it): the steps would pass the
    // state and PSN checks (read_response_copy_and_check made them, and its length
    // checks are comp_read_response's), and comp_read_response's retire_acked(psn - 1)
    // would change nothing (the READ owes this very PSN and is the head, so no PSN
    // is retired and no WR completes). What is left of them: the progress, then
    // either the timer restarted (9.7.6.1.3) or, for the last response, the READ
    // done and everything through its PSN retired.
    if (q.comp.timed) rtt_sample(now, q, pkt);
    SendWqe& w = q.sq.front();
    w.read_done += pkt.payload_len;
    q.comp.read_retry_pending = false;
    if (pkt.op->is_last()) {
      w.completed_ok = true;
      // retire_acked(psn)'s answer without its walk: everything through psn is
      // acknowledged, and the oldest PSN still owed is psn + 1. (psn is before
      // max_psn, so psn + 1 is no further than max_psn; the READ is done; every later
      // WR starts after the READ's last PSN, psn, so a READ or atomic among them owes
      // psn + 1 at the earliest.) Then, as there, the retry counts are restored, the
      // timer rearmed and the completed WRs completed.
      q.comp.psn = pkt.psn + 1;
      q.comp.retry_left = q.qp.attr().retry_cnt;
      q.comp.rnr_retry_left = q.qp.attr().rnr_retry;
      arm_ack_timer(now, q);
      complete_done_wqes(now, q);
      return;
    }
    q.comp.psn = pkt.psn + 1;
    q.comp.retry_left = q.qp.attr().retry_cnt;
    // arm_ack_timer()'s passing form: the READ owes later PSNs (this one is not its
    // last), so something is outstanding; the deadline restarts from now, and a timer
    // is queued only if none is queued earlier (schedule_timer's own test).
    if (now >= q.comp.rnr_until) [[likely]] {
      const Picos t = ack_timeout_picos(q.qp.attr().timeout);
      q.comp.ack_deadline = t == sched::kNever ? sched::kNever : now + t;
      if (q.comp.ack_deadline < q.timer_at) schedule_timer(q, q.comp.ack_deadline);
    } else {
      arm_ack_timer(now, q);
    }
    return;
  }
  CompStep step = CompStep::kCheckState;
  while (step != CompStep::kDone) {
    switch (step) {
      case CompStep::kCheckState: step = comp_check_state(q); break;
      case CompStep::kCheckPsn:
        step = comp_check_psn(q, pkt);
        if (step != CompStep::kDone && q.comp.timed) rtt_sample(now, q, pkt);
        break;
      case CompStep::kAck:
        trace(now, trace::Event::kAck, q, pkt.psn.value(), 0, pkt.aeth ? pkt.aeth->syndrome : 0);
        step = comp_ack(now, q, pkt.psn);
        break;
      case CompStep::kRnrNak:
        trace(now, trace::Event::kNak, q, pkt.psn.value(), 0, pkt.aeth->syndrome);
        step = comp_rnr_nak(now, q, pkt.psn, pkt.aeth->syndrome);
        break;
      case CompStep::kNak:
        trace(now, trace::Event::kNak, q, pkt.psn.value(), 0, pkt.aeth->syndrome);
        step = comp_nak(now, q, pkt.psn, pkt.aeth->syndrome);
        break;
      case CompStep::kAtomicAck: step = comp_atomic_ack(now, q, pkt); break;
      case CompStep::kReadResponse: step = comp_read_response(now, q, pkt, frame, copied); break;
      case CompStep::kDone: break;
    }
  }
}

CompStep EngineImpl::comp_check_state(const QpCtx& q) {
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTS && st != IBV_QPS_SQD) {
    ++counters_.rx_bad_state;
    return CompStep::kDone;
  }
  return CompStep::kCheckPsn;
}

CompStep EngineImpl::comp_check_psn(const QpCtx& q, const wire::RocePacket& pkt) {
  // Only PSNs in [comp_psn - 1, req_max_psn) mean anything now; the rest are
  // stale duplicates (9.7.5.2.1) or bogus.
  const wire::Psn psn = pkt.psn;
  if (!psn.before(q.req.max_psn)) {
    ++counters_.rx_psn_out_of_window;  // never sent
    ++counters_.rx_dropped;
    return CompStep::kDone;
  }
  if (psn.before(q.comp.psn - 1)) {
    ++counters_.rx_duplicates;
    return CompStep::kDone;
  }
  switch (pkt.op->kind) {
    case OpKind::kAtomicAck: return CompStep::kAtomicAck;
    case OpKind::kReadResponse: return CompStep::kReadResponse;
    default: break;
  }
  switch (wire::aeth_kind(pkt.aeth->syndrome)) {  // 9.7.5.2: the AETH syndrome
    case AethKind::kAck: return CompStep::kAck;
    case AethKind::kRnrNak: return CompStep::kRnrNak;
    case AethKind::kNak: return CompStep::kNak;
    default:
      ++counters_.rx_dropped;
      return CompStep::kDone;
  }
}

CompStep EngineImpl::comp_ack(Picos now, QpCtx& q, wire::Psn psn) {
  retire_acked(now, q, psn);
  // An ACK past a READ/atomic whose response never came: the response was
  // lost, ask again (9.7.5.2.2 implied NAK).
  if (!q.sq.empty() && q.sq.front().state == WqeState::kStarted) {
    const SendWqe& w = q.sq.front();
    if (w.is_read_or_atomic() && !w.completed_ok && !psn.before(w.first_psn) &&
        !q.comp.read_retry_pending) {
      q.comp.read_retry_pending = true;
      retry(now, q, q.comp.psn);
    }
  }
  return CompStep::kDone;
}

CompStep EngineImpl::comp_rnr_nak(Picos now, QpCtx& q, wire::Psn psn, uint8_t syndrome) {
  // 9.7.5.2.8: the responder had no receive WQE. Wait the time the NAK
  // carries (table 45), then send again from its PSN.
  ++counters_.rnr_naks_received;
  ++q.stats.rnr_naks_received;
  retire_acked(now, q, psn - 1);
  if (q.qp.state() != IBV_QPS_RTS && q.qp.state() != IBV_QPS_SQD) return CompStep::kDone;
  if (psn != q.comp.psn) return CompStep::kDone;  // an older RNR NAK
  if (q.qp.attr().rnr_retry != 7) {               // 7: retry forever
    if (q.comp.rnr_retry_left == 0) {
      fail_request(now, q, IBV_WC_RNR_RETRY_EXC_ERR);
      return CompStep::kDone;
    }
    --q.comp.rnr_retry_left;
  }
  q.comp.rnr_until = now + rnr_timer_picos(syndrome & 31);
  q.comp.ack_deadline = sched::kNever;
  rewind_requester(q, psn);
  sched_->deactivate(now, q.slot);
  schedule_timer(q, q.comp.rnr_until);
  return CompStep::kDone;
}

CompStep EngineImpl::comp_nak(Picos now, QpCtx& q, wire::Psn psn, uint8_t syndrome) {
  ++counters_.naks_received;
  ++q.stats.naks_received;
  retire_acked(now, q, psn - 1);
  if (q.qp.state() != IBV_QPS_RTS && q.qp.state() != IBV_QPS_SQD) return CompStep::kDone;
  const uint8_t code = syndrome & 31;
  if (static_cast<NakCode>(code) != NakCode::kPsnSequenceError) {
    // 9.9.3: the responder failed the request (class B/C/D): complete it in
    // error, the QP goes to ERR.
    fail_request(now, q, nak_status(code));
    return CompStep::kDone;
  }
  // PSN sequence error (9.7.5.2): go back to the NAKed PSN.
  if (psn != q.comp.psn) return CompStep::kDone;  // not about the oldest outstanding PSN
  if (now < q.comp.rnr_until) return CompStep::kDone;  // the RNR wait resends from here anyway
  if (q.comp.retry_left == 0) {
    fail_request(now, q, IBV_WC_RETRY_EXC_ERR);
    return CompStep::kDone;
  }
  --q.comp.retry_left;
  retry(now, q, psn);
  return CompStep::kDone;
}

CompStep EngineImpl::comp_atomic_ack(Picos now, QpCtx& q, const wire::RocePacket& pkt) {
  // An atomic ACK acknowledges everything before it (9.7.5.2.2).
  const wire::Psn psn = pkt.psn;
  retire_acked(now, q, psn - 1);
  if (q.sq.empty() || q.sq.front().state != WqeState::kStarted) return CompStep::kDone;
  SendWqe& w = q.sq.front();
  if (w.opcode != IBV_WR_ATOMIC_CMP_AND_SWP && w.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) return CompStep::kDone;
  if (w.first_psn != psn || w.completed_ok) return CompStep::kDone;
  const uint64_t orig = *pkt.atomic_ack;
  uint8_t bytes[8];
  std::memcpy(bytes, &orig, 8);  // the original value, in host order in local memory
  if (w.local_error == IBV_WC_SUCCESS && !scatter(mrs_, q.pd, w.sges, checked_sges(w), 0, bytes)) {
    fail_request(now, q, IBV_WC_LOC_PROT_ERR);
    return CompStep::kDone;
  }
  w.completed_ok = true;
  q.comp.read_retry_pending = false;
  retire_acked(now, q, psn);
  return CompStep::kDone;
}

CompStep EngineImpl::comp_read_response(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                                        std::span<uint8_t> frame, bool copied) {
  // A READ response acknowledges everything before it (9.7.5.2.2).
  const wire::Psn psn = pkt.psn;
  retire_acked(now, q, psn - 1);
  if (q.sq.empty() || q.sq.front().state != WqeState::kStarted) return CompStep::kDone;
  SendWqe& w = q.sq.front();
  if (w.opcode != IBV_WR_RDMA_READ || w.completed_ok) return CompStep::kDone;
  const wire::Psn expected = w.first_psn + packet_index(w.read_done, q.mtu);
  if (psn != expected) {
    // A response went missing: re-issue the READ from the first missing byte
    // (9.7.5.2.2), once per gap.
    if (psn.after(expected) && !q.comp.read_retry_pending) {
      q.comp.read_retry_pending = true;
      retry(now, q, expected);
    }
    return CompStep::kDone;
  }
  const uint64_t left = w.length - w.read_done;
  const bool last = pkt.op->is_last();
  // A re-issued READ is answered from its restart point with FIRST/ONLY, so
  // position opcodes are not checked, only the lengths (9.7.5.2.2).
  if ((!last && pkt.payload_len != q.mtu) || (last && pkt.payload_len != left) ||
      pkt.payload_len > left) {
    ++counters_.rx_bad_length;
    ++counters_.rx_dropped;
    return CompStep::kDone;
  }
  const auto payload = frame.subspan(pkt.payload_offset, pkt.payload_len);
  // copied: read_response_copy_and_check() already put these bytes at this offset of
  // this WR (nothing since changed which WR is the oldest or its progress).
  if (!copied && !scatter(mrs_, q.pd, w.sges, checked_sges(w), w.read_done, payload)) {
    fail_request(now, q, IBV_WC_LOC_PROT_ERR);
    return CompStep::kDone;
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
  return CompStep::kDone;
}

// ---- passive round trips (docs/sched.md, "Latency signal") -----------------
//
// One request per QP is timed at a time: a single-packet message (WRITE or SEND
// ONLY, a READ request, an atomic) that kick() found ready on an idle QP, so that
// it waited behind no packet of its own, only behind other QPs, as the reference
// probe's message does; never a retransmission. Its round trip runs from when it
// became ready to the first response that covers it: an ACK at or after its PSN, a
// NAK or RNR NAK after it, the READ response or atomic ACK of its PSN.

void EngineImpl::time_request(QpCtx& q, const TxDesc& d) {
  if (q.comp.timed || !q.req.ready_fresh || d.psn != q.req.ready_psn || d.retransmit) return;
  q.req.ready_fresh = false;
  const wire::OpcodeInfo& op = wire::opcode_info(d.opcode);
  const bool single = op.is_last() || op.kind == OpKind::kReadRequest ||
                      op.kind == OpKind::kCompareSwap || op.kind == OpKind::kFetchAdd;
  if (!single || d.offset != 0) return;
  q.comp.timed = true;
  q.comp.timed_psn = d.psn;
  q.comp.timed_start = q.req.ready_at;
}

void EngineImpl::rtt_sample(Picos now, QpCtx& q, const wire::RocePacket& pkt) {
  const wire::Psn psn = pkt.psn;
  bool covers = !psn.before(q.comp.timed_psn);  // ACK, READ response, atomic ACK
  if (pkt.op->kind == OpKind::kAck && wire::aeth_kind(pkt.aeth->syndrome) != AethKind::kAck)
    covers = q.comp.timed_psn.before(psn);  // a NAK acknowledges what is before its PSN
  if (!covers) return;
  q.comp.timed = false;
  const Picos rtt = now - std::min(now, q.comp.timed_start);
  ++q.stats.rtt_samples;
  q.stats.last_rtt = rtt;
  sched_->on_latency_sample(now, q.slot, rtt);
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
