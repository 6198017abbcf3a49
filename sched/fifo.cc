#include "sched/fifo.h"

#include <algorithm>

namespace isoroce::sched {

FifoScheduler::FifoScheduler(const Config& config)
    : config_(config), qps_(config.max_qps), link_(config.link_bps, config.catch_up), control_(config.control_capacity) {
  if (config.max_msgs_per_sec != 0)
    msg_cost_ = std::max<Picos>(1, (kPicosPerSecond + config.max_msgs_per_sec / 2) / config.max_msgs_per_sec);
}

std::size_t FifoScheduler::fixed_bytes() const {
  return sizeof(*this) + control_.capacity() * sizeof(ControlQueue::Entry);
}

void FifoScheduler::activate(Picos now, QpId qp, Packet pkt) {
  if (qp >= qps_.size() || pkt.bytes == 0 || qps_[qp].bytes_ != 0) return;
  trace_activate(now, qp, pkt.bytes);
  qps_[qp].bytes_ = pkt.bytes;
  qps_[qp].ends_message_ = pkt.ends_message;
  ring_.push_back(qps_.data(), qp);
  ++active_;
}

bool FifoScheduler::enqueue_control(Picos, QpId qp, std::uint32_t bytes) {
  if (qp >= qps_.size() || bytes == 0) return false;
  return control_.push(qp, bytes);
}

void FifoScheduler::set_link_bps(Picos, std::uint64_t bps) {
  if (bps == 0) return;
  config_.link_bps = bps;
  link_.set_bps(bps);
}

void FifoScheduler::set_rate(Picos now, QpId qp, std::uint64_t bps) {
  if (qp >= qps_.size()) return;
  qps_[qp].rate_bps_ = bps;
  trace_rate(now, qp, bps);
}

std::uint64_t FifoScheduler::rate(QpId qp) const {
  return qp < qps_.size() ? qps_[qp].rate_bps_ : kUnlimited;
}

void FifoScheduler::deactivate(Picos, QpId qp) {
  if (qp >= qps_.size() || qps_[qp].bytes_ == 0) return;
  ring_.remove(qps_.data(), qp);
  qps_[qp].bytes_ = 0;
  --active_;
  if (link_.catches_up()) link_.set_due(next_deadline());  // nothing of its own is due any more
}

bool FifoScheduler::active(QpId qp) const { return qp < qps_.size() && qps_[qp].bytes_ != 0; }

std::size_t FifoScheduler::dequeue(Picos now, std::span<Grant> out, PacketSource& src) {
  const Picos limit = now > kNever - config_.lookahead ? kNever : now + config_.lookahead;
  const Picos from = link_.from(now);
  std::size_t n = 0;
  while (n < out.size()) {
    const Picos at = link_.start(from);
    if (at > limit) break;  // the link is busy
    if (!control_.empty()) {
      const ControlQueue::Entry c = control_.pop();
      out[n] = {c.qp, c.bytes, at, GrantKind::kControl};
      trace_grant(now, out[n++]);
      link_.occupy(at, c.bytes);
      continue;
    }
    const QpId qp = ring_.head;
    if (qp == kNil) break;
    Slot& s = qps_[qp];
    if (msg_cost_ != 0 && s.starts_message_) {  // the message processor takes it first
      if (proc_free_ > at) {
        link_.idle_until(proc_free_);
        continue;
      }
      proc_free_ = at + msg_cost_;
    }
    out[n] = {qp, s.bytes_, at, GrantKind::kData};
    trace_grant(now, out[n++]);
    link_.occupy(at, s.bytes_);
    const bool message_done = s.ends_message_;
    const Packet next = src.on_grant(qp, s.bytes_);
    s.bytes_ = next.bytes;
    s.ends_message_ = next.ends_message;
    s.starts_message_ = message_done;
    if (next.bytes == 0) {
      ring_.pop_front(qps_.data());
      --active_;
    } else if (message_done && ring_.tail != qp) {
      // The next message waits for the other QPs' turn (the ring's only QP, also its
      // tail, is its own next turn: the pop and push would leave the ring as it is).
      ring_.pop_front(qps_.data());
      ring_.push_back(qps_.data(), qp);
    }
  }
  if (link_.catches_up()) link_.set_due(next_deadline());
  return n;
}

Picos FifoScheduler::next_deadline() const {
  if (control_.empty() && ring_.empty()) return kNever;
  return link_.free_at();
}

}  // namespace isoroce::sched
