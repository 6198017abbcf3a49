// A flow at run time: posting with `depth` outstanding per QP, every byte and
// atomic result checked at completion, latency, wire counters, the report
// (workload/flow.h; setup is flow_setup.cc).
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "transport/wire/opcode.h"
#include "workload/flow.h"
#include "workload/pattern.h"

namespace isoroce::workload {

namespace {

// RC request opcodes (IBTA 9.2.1 table 36): SEND*, RDMA WRITE*, RDMA READ
// request, the atomics, SEND with invalidate.
bool is_rc_request(uint8_t op) {
  const wire::OpcodeInfo& info = wire::opcode_info(op);
  if (!info.valid() || info.transport != wire::Transport::kRc) return false;
  switch (info.kind) {
    case wire::OpKind::kSend:
    case wire::OpKind::kWrite:
    case wire::OpKind::kReadRequest:
    case wire::OpKind::kCompareSwap:
    case wire::OpKind::kFetchAdd: return true;
    default: return false;
  }
}

// Frames that carry the flow's data from the responder: READ responses.
bool is_read_response(uint8_t op) { return wire::opcode_info(op).kind == wire::OpKind::kReadResponse; }

// AETH syndrome kinds (IBTA 9.7.5.1.1 table 44): bits 6..5.
constexpr uint8_t kAethRnrNak = 1, kAethNak = 3;

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

static_assert(static_cast<int>(FlowClass::kLatency) == static_cast<int>(sched::FlowClass::kLatency) &&
              static_cast<int>(FlowClass::kThroughput) == static_cast<int>(sched::FlowClass::kThroughput) &&
              static_cast<int>(FlowClass::kBandwidth) == static_cast<int>(sched::FlowClass::kBandwidth));

static sched::FlowClass sched_class(FlowClass c) {
  return c == FlowClass::kAuto ? sched::FlowClass::kAuto : static_cast<sched::FlowClass>(c);
}

// The flow's class and application, given to the engines when the application
// starts (so justitia's soft admission sees Current99 at that moment). The
// responder's QPs too: READ responses and atomic ACKs leave through its scheduler.
void Flow::classify(Picos now) {
  const uint32_t app = place_.app;
  const sched::FlowClass cls = sched_class(cfg_.cls);
  for (auto& qp : qps_) {
    int rc = src_->verbs().set_qp_class(now, qp.src_qpn, cls, app, cfg_.weight);
    if (rc == 0 && cfg_.transport == Transport::kRc)
      rc = dst_[0].host->verbs().set_qp_class(now, qp.dst_qpn[0], cls, app, cfg_.weight);
    if (rc != 0) {
      error_statuses_[std::string("set_qp_class: ") + std::strerror(rc)]++;
      ++errors_;
    }
    if (cfg_.tenant.empty()) continue;
    rc = src_->verbs().set_qp_tenant(now, qp.src_qpn, cfg_.tenant, cfg_.tenant_weight);
    if (rc == 0 && cfg_.transport == Transport::kRc)
      rc = dst_[0].host->verbs().set_qp_tenant(now, qp.dst_qpn[0], cfg_.tenant, cfg_.tenant_weight);
    if (rc != 0) {
      error_statuses_[std::string("set_qp_tenant: ") + std::strerror(rc)]++;
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
    else driver_.schedule_receives(now + cfg_.post_recv_delay, *this);
  }
  for (uint32_t q = 0; q < cfg_.qps; ++q) reserve_more(now, q);
  maybe_finish(now);
}

void Flow::start_receives(Picos now) {
  for (uint32_t d = 0; d < dst_.size(); ++d) {
    for (uint32_t q = 0; q < cfg_.qps; ++q)
      for (uint32_t r = 0; r < recv_depth_; ++r) post_recv_slot(d, q, uint64_t{q} * recv_depth_ + r);
    dst_[d].host->request_service(now);
  }
}

void Flow::post_recv_slot(uint32_t d, uint32_t q, uint64_t slot) {
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

// The work request of message o on QP q: the verb's fields, and the bytes the
// message carries or the remote application prepared for it.
void Flow::fill_wr(uint32_t q, Outstanding& o, transport::SendWr& wr) {
  Qp& qp = qps_[q];
  const uint64_t off = local_off(q, o.seq);
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
  fill_wr(q, o, wr);
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
  else on_receive_completion(static_cast<uint32_t>(side), wc);
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
  driver_.flow_finished(*this);
}

// The bytes or the atomic result of message o, completed on QP q.
void Flow::check_requester(uint32_t q, const Outstanding& o) {
  const Qp& qp = qps_[q];
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
  check_requester(q, o);
  ++messages_;
  ++qp.completed;
  lat_.push_back(now - o.posted_at);
  reserve_more(now, q);
  maybe_finish(now);
}

// A UD datagram received at destination d on the QP of qp: its length, GRH,
// source QP, which message it is, its bytes and immediate data.
void Flow::check_ud_receive(uint32_t d, const Qp& qp, const uint8_t* buf, const ibv_wc& wc) {
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
}

// An RC receive on QP q: the next message due, its opcode, length, immediate
// data and bytes (in the receive buffer, or the WRITE's target).
void Flow::check_rc_receive(uint32_t q, const uint8_t* buf, const ibv_wc& wc) {
  Qp& qp = qps_[q];
  const Dst& dst = dst_[0];  // RC: one destination
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

void Flow::on_receive_completion(uint32_t d, const ibv_wc& wc) {
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
  if (cfg_.transport == Transport::kUd) check_ud_receive(d, qp, buf, wc);
  else check_rc_receive(q, buf, wc);
  post_recv_slot(d, q, slot);  // the receiving application goes on
}

void Flow::on_wire(const QpRef& ref, const WireSeen& seen) {
  Qp& qp = qps_[ref.qp];
  // Toward the responder: requests (or UD sends); from it: READ responses.
  if (!ref.requester || is_read_response(seen.opcode))
    wire_bytes_ += seen.frame_len + 24;  // preamble, FCS, inter-frame gap: what the link carries
  if (!ref.requester) {
    // A request going to the responder: a retransmission if its PSN is not
    // new. A READ request covers one PSN per response packet.
    if (cfg_.transport != Transport::kRc || !is_rc_request(seen.opcode)) return;
    const wire::Psn psn(seen.psn);
    uint32_t covers = 1;
    if (seen.opcode == wire::op::kRcReadRequest && seen.read_dma_len > 0)
      covers = (seen.read_dma_len + mtu_ - 1) / mtu_;
    if (qp.psn_seen && psn.before(qp.next_psn)) ++retransmits_;
    const wire::Psn next = psn + covers;
    if (!qp.psn_seen || next.after(qp.next_psn)) qp.next_psn = next;
    qp.psn_seen = true;
    return;
  }
  if (seen.opcode == wire::op::kRcAck && seen.aeth_syndrome) {
    const uint8_t kind = *seen.aeth_syndrome >> 5;
    if (kind == kAethRnrNak) ++rnr_naks_;
    else if (kind == kAethNak) ++naks_;
  }
}

// Atomics: the counters must hold exactly what the completed operations did
// (only decidable when none failed, as a failed one may or may not have run).
void Flow::check_atomic_counters(FlowReport& r) const {
  if (cfg_.transport != Transport::kRc || !is_atomic(cfg_.verb) || errors_ != 0 || outstanding_total() != 0) return;
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
  r.lat = summarize(lat_);
  r.retransmits = retransmits_;
  r.naks = naks_;
  r.rnr_naks = rnr_naks_;
  r.errors = errors_;
  r.error_statuses = error_statuses_;
  r.integrity_checked = checked_;
  r.integrity_failures = failures_;
  r.first_failure = first_failure_;
  check_atomic_counters(r);
  r.integrity_ok = r.integrity_failures == 0;
  r.delivered = delivered_;
  r.ud_duplicates = ud_dups_;
  r.finished = finished_;
  r.start_us = static_cast<double>(t0) / 1e6;
  r.end_us = static_cast<double>(t1) / 1e6;
  return r;
}

}  // namespace isoroce::workload
