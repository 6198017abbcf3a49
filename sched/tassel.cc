#include "sched/tassel.h"

#include <algorithm>

namespace isoroce::sched {

using u128 = unsigned __int128;

TasselScheduler::TasselScheduler(const Config& config)
    : config_(config),
      qps_(config.max_qps),
      rates_(config.max_qps, kUnlimited),
      timeline_(config.max_qps),
      link_(config.link_bps),
      control_(config.control_capacity) {}

std::size_t TasselScheduler::fixed_bytes() const {
  // Buckets reserved beyond the per-QP share counted by bytes_per_qp(): the partly
  // filled head bucket each non-empty middle or coarse slot may have (8192 at most).
  const std::size_t per_qp = qps_.size() * (bytes_per_qp() - sizeof(QpSlot) - sizeof(std::uint64_t));
  const std::size_t buckets = timeline_.bucket_bytes_reserved();
  return sizeof(*this) + control_.capacity() * sizeof(ControlQueue::Entry) + timeline_.heap_size() * 16 +
         (buckets > per_qp ? buckets - per_qp : 0);
}

void TasselScheduler::sync(Picos t) {
  if (t <= t_v_) return;
  const Picos dt = t - t_v_;
  t_v_ = t;
  if (sigma_ == kSigmaOne) {
    v_ += dt;
    return;
  }
  const u128 x = static_cast<u128>(dt) * sigma_ + v_frac_;
  v_ += static_cast<Picos>(x >> kSigmaFracBits);
  v_frac_ = static_cast<std::uint64_t>(x) & (kSigmaOne - 1);
}

void TasselScheduler::update_sigma() {
  if (active_bps_ <= config_.link_bps) {
    sigma_ = kSigmaOne;
    v_frac_ = 0;
  } else {
    sigma_ = static_cast<std::uint64_t>((static_cast<u128>(config_.link_bps) << kSigmaFracBits) /
                                        active_bps_);
  }
}

// The first real time at which sync() brings system time to `v`.
Picos TasselScheduler::when_system_time_reaches(Picos v) const {
  if (v <= v_) return t_v_;
  const u128 need = (static_cast<u128>(v - v_) << kSigmaFracBits) - v_frac_;
  const u128 dt = (need + sigma_ - 1) / sigma_;
  const u128 t = t_v_ + dt;
  return t >= kNever ? kNever : static_cast<Picos>(t);
}

// S -> F: the packet is eligible; its finish time uses the rate in force now.
inline void TasselScheduler::make_eligible(Picos now, QpId qp) {
  QpSlot& s = qps_[qp];
  const Picos start = s.time_;
  s.time_ += duration(s.bytes_, s.cost_);
  if (trace_.on(trace::Event::kEligible)) [[unlikely]] trace_eligible(now, qp, start);
  pool_.push(qps_.data(), qp);
}

inline void TasselScheduler::place_limited(Picos now, QpId qp, Picos start) {
  qps_[qp].time_ = start;
  if (!timeline_.insert(qps_.data(), qp)) make_eligible(now, qp);
}

void TasselScheduler::trace_eligible(Picos now, QpId qp, Picos start) const {
  const QpSlot& s = qps_[qp];
  trace_.emit(now, trace::Event::kEligible, qp, phi_q16(), s.bytes_, 0, start, s.time_);
}

void TasselScheduler::release_due(Picos now) {
  timeline_.advance(qps_.data(), v_, [this, now](std::uint32_t qp) { make_eligible(now, qp); });
}

void TasselScheduler::activate(Picos now, QpId qp, Packet pkt) {
  if (qp >= qps_.size() || pkt.bytes == 0 || qps_[qp].where_ != Where::kIdle) return;
  sync(now);
  trace_activate(now, qp, pkt.bytes);
  QpSlot& s = qps_[qp];
  s.bytes_ = pkt.bytes;
  ++active_;
  if (s.cost_ == 0) {
    s.where_ = Where::kUnlimited;
    unlimited_.push_back(qps_.data(), qp);
    return;
  }
  active_bps_ += rates_[qp];
  update_sigma();
  place_limited(now, qp, std::max(s.time_, v_));  // S = max(F of the last packet, V)
}

bool TasselScheduler::enqueue_control(Picos now, QpId qp, std::uint32_t bytes) {
  if (qp >= qps_.size() || bytes == 0) return false;
  sync(now);
  return control_.push(qp, bytes);
}

void TasselScheduler::remove_from_queue(QpId qp) {
  QpSlot& s = qps_[qp];
  switch (s.where_) {
    case Where::kPool:
      pool_.remove(qps_.data(), qp);
      break;
    case Where::kUnlimited:
      unlimited_.remove(qps_.data(), qp);
      s.where_ = Where::kIdle;
      break;
    case Where::kIdle:
      break;
    default:
      timeline_.remove(qps_.data(), qp);
      break;
  }
}

void TasselScheduler::set_rate(Picos now, QpId qp, std::uint64_t bps) {
  if (qp >= qps_.size()) return;
  sync(now);
  trace_rate(now, qp, bps);
  QpSlot& s = qps_[qp];
  const bool was_limited = s.cost_ != 0;
  const bool is_active = s.where_ != Where::kIdle;
  if (is_active && was_limited) active_bps_ -= rates_[qp];
  rates_[qp] = bps;
  const ByteCost old_cost = s.cost_;
  s.cost_ = bps == kUnlimited ? 0 : byte_cost(bps);
  // A faster limit shortens the wait still ahead of the QP: its next start was
  // the finish of its last packet at the old rate (congestion control raising a
  // QP from a very low rate must not wait out a packet time of that rate).
  if (was_limited && s.cost_ != 0 && s.cost_ < old_cost && s.time_ > v_ &&
      (s.where_ == Where::kIdle || s.where_ == Where::kTimeline)) {
    const Picos left = static_cast<Picos>(static_cast<unsigned __int128>(s.time_ - v_) * s.cost_ / old_cost);
    if (s.where_ == Where::kIdle) {
      s.time_ = v_ + left;
    } else {
      remove_from_queue(qp);
      active_bps_ += bps;
      update_sigma();
      place_limited(now, qp, v_ + left);
      return;
    }
  }
  if (!is_active) return;
  if (bps != kUnlimited) active_bps_ += bps;
  update_sigma();
  if (was_limited && bps == kUnlimited) {
    remove_from_queue(qp);
    s.where_ = Where::kUnlimited;
    unlimited_.push_back(qps_.data(), qp);
  } else if (!was_limited && bps != kUnlimited) {
    remove_from_queue(qp);
    place_limited(now, qp, std::max(s.time_, v_));
  }
}

std::uint64_t TasselScheduler::rate(QpId qp) const {
  return qp < qps_.size() ? rates_[qp] : kUnlimited;
}

void TasselScheduler::deactivate(Picos now, QpId qp) {
  if (qp >= qps_.size() || qps_[qp].where_ == Where::kIdle) return;
  sync(now);
  QpSlot& s = qps_[qp];
  if (s.cost_ != 0) {
    active_bps_ -= rates_[qp];
    update_sigma();
  }
  // The dropped packet is not charged: back from its F to its S.
  if (s.where_ == Where::kPool) s.time_ -= std::min(s.time_, duration(s.bytes_, s.cost_));
  remove_from_queue(qp);
  --active_;
}

bool TasselScheduler::active(QpId qp) const {
  return qp < qps_.size() && qps_[qp].where_ != Where::kIdle;
}

inline void TasselScheduler::grant(Picos now, QpId qp, Picos at, Grant& out, PacketSource& src) {
  QpSlot& s = qps_[qp];
  out = {qp, s.bytes_, at, GrantKind::kData};
  trace_grant(now, out);
  link_.occupy(at, s.bytes_);
  s.where_ = Where::kIdle;
  const Packet next = src.on_grant(qp, s.bytes_);
  if (next.bytes == 0) {
    --active_;
    if (s.cost_ != 0) {
      active_bps_ -= rates_[qp];
      update_sigma();
    }
    return;
  }
  s.bytes_ = next.bytes;
  if (s.cost_ == 0) {
    s.where_ = Where::kUnlimited;
    unlimited_.push_back(qps_.data(), qp);
  } else {
    place_limited(at, qp, s.time_);  // still backlogged: S = F of the packet just granted
  }
}

std::size_t TasselScheduler::dequeue(Picos now, std::span<Grant> out, PacketSource& src) {
  const Picos limit = now > kNever - config_.lookahead ? kNever : now + config_.lookahead;
  std::size_t n = 0;
  while (n < out.size()) {
    const Picos at = link_.start(now);
    if (at > limit) break;  // the link is busy
    sync(at);
    release_due(at);
    if (!control_.empty()) {
      const ControlQueue::Entry c = control_.pop();
      out[n] = {c.qp, c.bytes, at, GrantKind::kControl};
      trace_grant(now, out[n++]);
      link_.occupy(at, c.bytes);
      continue;
    }
    QpId qp = pool_.pop(qps_.data());
    if (qp == kNil) qp = unlimited_.pop_front(qps_.data());
    if (qp != kNil) {
      grant(now, qp, at, out[n++], src);
      continue;
    }
    // Nothing eligible: the link idles until the next QP is.
    const Picos start = timeline_.next_start();
    if (start == kNever) break;
    const Picos ready = when_system_time_reaches(start);
    if (ready > limit) break;
    link_.idle_until(ready);
  }
  return n;
}

Picos TasselScheduler::next_deadline() const {
  if (!control_.empty() || !pool_.empty() || !unlimited_.empty()) return link_.free_at();
  const Picos start = timeline_.next_start();
  if (start == kNever) return kNever;
  return std::max(link_.free_at(), when_system_time_reaches(start));
}

}  // namespace isoroce::sched
