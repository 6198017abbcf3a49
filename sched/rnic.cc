#include "sched/rnic.h"

#include <algorithm>

namespace isoroce::sched {

RnicScheduler::RnicScheduler(const Config& config)
    : config_(config),
      params_(config.rnic),
      qps_(config.max_qps),
      link_(config.link_bps, config.catch_up),
      control_(config.control_capacity),
      rng_(config.rnic.seed) {
  const std::uint64_t mps = params_.max_msgs_per_sec != 0 ? params_.max_msgs_per_sec : config.max_msgs_per_sec;
  if (mps != 0) msg_cost_ = std::max<Picos>(1, (kPicosPerSecond + mps / 2) / mps);
}

std::size_t RnicScheduler::fixed_bytes() const {
  return sizeof(*this) + control_.capacity() * sizeof(ControlQueue::Entry);
}

void RnicScheduler::activate(Picos, QpId qp, Packet pkt) {
  if (qp >= qps_.size() || pkt.bytes == 0 || qps_[qp].bytes_ != 0) return;
  Slot& s = qps_[qp];
  s.bytes_ = pkt.bytes;
  s.ends_message_ = pkt.ends_message;
  ++active_;
  if ((params_.pipeline_packets == 0 && params_.pipeline_jitter_packets == 0) || ring_.empty()) {
    ring_.push_back(qps_.data(), qp);
    return;
  }
  s.pending_ = true;
  s.ticket_ = data_grants_ + params_.pipeline_packets;
  if (params_.pipeline_jitter_packets != 0) {  // splitmix64 (Steele et al., 2014)
    std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    s.ticket_ += z % (std::uint64_t{params_.pipeline_jitter_packets} + 1);
  }
  pending_.push_back(qps_.data(), qp);
}

bool RnicScheduler::enqueue_control(Picos, QpId qp, std::uint32_t bytes) {
  if (qp >= qps_.size() || bytes == 0) return false;
  return control_.push(qp, bytes);
}

void RnicScheduler::set_link_bps(Picos, std::uint64_t bps) {
  if (bps == 0) return;
  config_.link_bps = bps;
  link_.set_bps(bps);
}

void RnicScheduler::set_rate(Picos, QpId qp, std::uint64_t bps) {
  if (qp < qps_.size()) qps_[qp].rate_bps_ = bps;
}

std::uint64_t RnicScheduler::rate(QpId qp) const { return qp < qps_.size() ? qps_[qp].rate_bps_ : kUnlimited; }

void RnicScheduler::deactivate(Picos, QpId qp) {
  if (qp >= qps_.size() || qps_[qp].bytes_ == 0) return;
  Slot& s = qps_[qp];
  if (s.pending_) {
    pending_.remove(qps_.data(), qp);
    s.pending_ = false;
  } else {
    if (ring_.head == qp) {  // its turn ends with it
      turn_packets_ = 0;
      burst_left_ = 0;
    }
    ring_.remove(qps_.data(), qp);
  }
  s.bytes_ = 0;
  --active_;
  if (link_.catches_up()) link_.set_due(next_deadline());  // nothing of its own is due any more
}

bool RnicScheduler::active(QpId qp) const { return qp < qps_.size() && qps_[qp].bytes_ != 0; }

// Pending QPs whose ticket has come join the ring; with nobody left in the ring, the
// pipeline holds nothing of anyone else, so every pending QP joins (in order).
void RnicScheduler::admit_pending() {
  while (!pending_.empty() && (ring_.empty() || qps_[pending_.head].ticket_ <= data_grants_)) {
    const QpId qp = pending_.pop_front(qps_.data());
    qps_[qp].pending_ = false;
    ring_.push_back(qps_.data(), qp);
  }
}

// The head QP's turn is over: it goes to the back of the ring, or leaves it (idle).
void RnicScheduler::end_turn(QpId qp, bool idle) {
  ring_.pop_front(qps_.data());
  if (!idle) ring_.push_back(qps_.data(), qp);
  turn_packets_ = 0;
  burst_left_ = 0;
}

std::size_t RnicScheduler::dequeue(Picos now, std::span<Grant> out, PacketSource& src) {
  const Picos limit = now > kNever - config_.lookahead ? kNever : now + config_.lookahead;
  const Picos from = link_.from(now);
  std::size_t n = 0;
  while (n < out.size()) {
    const Picos at = link_.start(from);
    if (at > limit) break;  // the link is busy
    if (!control_.empty()) {
      const ControlQueue::Entry c = control_.pop();
      out[n++] = {c.qp, c.bytes, at, GrantKind::kControl};
      link_.occupy(at, c.bytes);
      continue;
    }
    admit_pending();
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
    out[n++] = {qp, s.bytes_, at, GrantKind::kData};
    link_.occupy(at, s.bytes_);
    ++data_grants_;
    ++turn_packets_;
    admit_pending();  // a QP seen now is served before the head's next turn
    if (s.starts_message_) burst_left_ = params_.message_burst_bytes;
    burst_left_ -= std::min<std::uint64_t>(burst_left_, s.bytes_);
    if (s.ends_message_) burst_left_ = 0;
    const bool message_done = s.ends_message_;
    const Packet next = src.on_grant(qp, s.bytes_);
    s.bytes_ = next.bytes;
    s.ends_message_ = next.ends_message;
    s.starts_message_ = message_done;
    if (next.bytes == 0) {
      --active_;
      end_turn(qp, true);
    } else if (turn_packets_ >= params_.batch_packets && burst_left_ == 0) {
      end_turn(qp, false);
    }
  }
  if (link_.catches_up()) link_.set_due(next_deadline());
  return n;
}

Picos RnicScheduler::next_deadline() const {
  if (control_.empty() && ring_.empty() && pending_.empty()) return kNever;
  return link_.free_at();
}

}  // namespace isoroce::sched
