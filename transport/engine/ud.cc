// UD (IBTA vol.1 9.8; rxe): one datagram per work request, no ACKs. The send
// completes once the datagram is on the wire; the receiver checks the Q_Key,
// takes a receive WQE (RQ or SRQ) or drops the datagram, and writes the
// 40-byte GRH in front of the payload (for IPv4, the IPv4 header in its last
// 20 bytes, as RoCEv2 devices do) with IBV_WC_GRH set.
#include <algorithm>
#include <arpa/inet.h>

#include <cstring>

#include "transport/engine/engine_impl.h"
#include "transport/engine/memory.h"

namespace isoroce::transport::detail {

inline constexpr uint32_t kGrhBytes = 40;

void EngineImpl::address_ud(const QpCtx& q, const SendWr& wr, SendWqe& w) const {
  w.ud_peer = ahs_.at(wr.ah).peer;  // copied: destroy_ah() may follow the post
  w.ud_qpn = wr.remote_qpn & 0xffffff;
  // 10.2.5: a Q_Key with the high bit set means "use the QP's own".
  w.ud_qkey = (wr.remote_qkey & 0x80000000u) ? q.qp.attr().qkey : wr.remote_qkey;
}

void EngineImpl::peek_ud(QpCtx& q, TxDesc& d) {
  d = TxDesc{};
  if (q.qp.state() != IBV_QPS_RTS) return;
  if (q.req.wqe == q.sq.tail()) return;
  const SendWqe& w = q.sq[q.req.wqe];
  if (w.local_error != IBV_WC_SUCCESS) return;
  d.kind = TxKind::kUdSend;
  d.qp_slot = q.slot;
  d.wqe = static_cast<uint32_t>(q.req.wqe);
  d.psn = q.req.psn;
  d.opcode = w.opcode == IBV_WR_SEND_WITH_IMM ? wire::op::kUdSendOnlyImm : wire::op::kUdSendOnly;
  d.length = static_cast<uint32_t>(w.length);
  d.frame_len = frame_len(d.opcode, d.length);
  return;
}

size_t EngineImpl::build_ud(QpCtx& q, const TxDesc& d, std::span<uint8_t> out) {
  const SendWqe& w = q.sq[d.wqe];
  // The template of the last destination, rebuilt when this one differs (another
  // AH, or the same AH to another QP).
  if (!q.ud_tmpl.valid() || w.ud_qpn != q.ud_tmpl_qpn || !same_peer(w.ud_peer, q.ud_tmpl_peer)) {
    make_template(q, w.ud_peer, w.ud_qpn, wire::udp_sport_for_qps(q.qp.qpn(), wire::Qpn(w.ud_qpn)),
                  &q.ud_tmpl);
    q.ud_tmpl_peer = w.ud_peer;
    q.ud_tmpl_qpn = w.ud_qpn;
  }
  const bool tmpl = q.ud_tmpl.valid();
  wire::FrameSpec& spec = tmpl ? frame_fields(w.ud_peer, d.opcode, d.psn, true)
                               : frame_spec(q, w.ud_peer, d.opcode, d.psn, w.ud_qpn, true);
  spec.udp_sport = wire::udp_sport_for_qps(q.qp.qpn(), wire::Qpn(w.ud_qpn));
  spec.deth = wire::DethFields{w.ud_qkey, q.qp.qpn().value()};
  spec.solicited = (w.send_flags & IBV_SEND_SOLICITED) != 0;
  if (d.opcode == wire::op::kUdSendOnlyImm) {
    spec.imm = wire::load_be32(reinterpret_cast<const uint8_t*>(&w.imm_data));
  }
  payload_scratch_.clear();
  if (d.length > 0) {
    if (w.is_inline) {
      payload_scratch_.emplace_back(w.inline_data.data(), d.length);
    } else if (!gather(mrs_, q.pd, w.sges, checked_sges(w), 0, d.length, payload_scratch_)) {
      return 0;
    }
  }
  const wire::BuildResult r = tmpl ? wire::build_frame_templated(q.ud_tmpl, spec, payload_scratch_, out)
                                   : wire::build_frame_gather(spec, payload_scratch_, out);
  return r.ok() ? r.len : 0;
}

size_t EngineImpl::send_ud(QpCtx& q, const TxDesc& d, std::span<uint8_t> out) {
  // Sends granted in the same transmit after one that failed are flushed.
  if (q.ud_send_failed) {
    complete_send(q, q.sq.front(), IBV_WC_WR_FLUSH_ERR);
    q.sq.pop();
    return 0;
  }
  const size_t len = build_ud(q, d, out);
  // The datagram completes once it is on the wire. A WR whose MR was
  // deregistered after the post (gather checks every SGE again) completes
  // with IBV_WC_LOC_PROT_ERR and the send queue goes to SQE (10.3.1) once
  // this transmit is over (kick(): the later descriptors index this queue).
  const bool lost_mr = len == 0 && !q.sq[d.wqe].is_inline && q.sq[d.wqe].length > 0 &&
                       check_sges(mrs_, q.pd, q.sq[d.wqe].sges, 0) != verbs::MrCheck::kOk;
  complete_send(q, q.sq[d.wqe], lost_mr ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS);
  q.sq.pop();
  if (lost_mr) [[unlikely]] {
    q.ud_send_failed = true;
    after_grant_.push_back(q.slot);
  }
  return len;
}

void EngineImpl::ud_send_queue_error(Picos now, QpCtx& q) {
  // UD: SQE, receives keep working (10.3.1); the sends left are flushed.
  q.ud_send_failed = false;
  q.qp.set_send_queue_error();
  sched_->deactivate(now, q.slot);
  while (!q.sq.empty()) {
    complete_send(q, q.sq.front(), IBV_WC_WR_FLUSH_ERR);
    q.sq.pop();
  }
  q.req.wqe = q.sq.head();
  events_.push_back({AsyncEventType::kQpFatal, q.qp.qpn().value()});
}

void EngineImpl::on_ud(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame) {
  (void)now;
  const ibv_qp_state st = q.qp.state();
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE) {
    ++counters_.rx_bad_state;
    return;
  }
  if (pkt.deth->qkey != q.qp.attr().qkey) {  // 10.2.5: a wrong Q_Key is dropped silently
    ++counters_.rx_ud_qkey_mismatch;
    return;
  }
  count_rx(q, frame.size());
  if (pkt.payload_len > q.mtu) {
    ++counters_.rx_bad_length;
    ++counters_.rx_dropped;
    return;
  }
  RecvWqe r;
  if (!take_recv_wqe(q, &r)) {  // UD has no RNR: the datagram is lost
    ++counters_.rx_ud_no_receive;
    return;
  }
  ibv_wc wc{};
  wc.wr_id = r.wr_id;
  wc.opcode = IBV_WC_RECV;
  wc.qp_num = q.qp.qpn().value();
  wc.src_qp = pkt.deth->src_qp;
  wc.wc_flags = IBV_WC_GRH;
  wc.pkey_index = 0;
  if (pkt.imm) {
    wc.wc_flags |= IBV_WC_WITH_IMM;
    wc.imm_data = htonl(*pkt.imm);  // ibv_wc carries it in network order
  }
  if (kGrhBytes + pkt.payload_len > r.length) {
    wc.status = IBV_WC_LOC_LEN_ERR;
    complete(q.recv_cq, wc);
    return;
  }
  uint8_t grh[kGrhBytes] = {};
  const size_t ip_len = pkt.is_ipv4() ? 20 : 40;
  std::memcpy(grh + kGrhBytes - ip_len, frame.data() + pkt.l3_offset, ip_len);
  const auto payload = frame.subspan(pkt.payload_offset, pkt.payload_len);
  if (!scatter(mrs_, q.pd, r.sges, 0, grh) || !scatter(mrs_, q.pd, r.sges, kGrhBytes, payload)) {
    wc.status = IBV_WC_LOC_PROT_ERR;
    complete(q.recv_cq, wc);
    return;
  }
  wc.status = IBV_WC_SUCCESS;
  wc.byte_len = static_cast<uint32_t>(kGrhBytes + pkt.payload_len);
  complete(q.recv_cq, wc);
}

}  // namespace isoroce::transport::detail
