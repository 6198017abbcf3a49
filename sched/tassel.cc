#include "sched/tassel.h"

#include <algorithm>

namespace isoroce::sched {

using u128 = unsigned __int128;

TasselScheduler::TasselScheduler(const Config& config)
    : config_(config),
      qps_(config.max_qps),
      rates_(config.max_qps, kUnlimited),
      costs_(config.max_qps, 0),
      timeline_(config.max_qps),
      link_(config.link_bps, config.catch_up),
      control_(config.control_capacity) {}

std::size_t TasselScheduler::fixed_bytes() const {
  // Buckets reserved beyond the per-QP share counted by bytes_per_qp(): the partly
  // filled head bucket each non-empty middle or coarse slot may have (8192 at most).
  const std::size_t per_qp = qps_.size() * (bytes_per_qp() - sizeof(QpSlot) - sizeof(std::uint64_t) - sizeof(ByteCost));
  const std::size_t buckets = timeline_.bucket_bytes_reserved();
  return sizeof(*this) + control_.capacity() * sizeof(ControlQueue::Entry) + timeline_.heap_size() * 16 +
         (buckets > per_qp ? buckets - per_qp : 0);
}

inline void TasselScheduler::sync(Picos t) {
  if (t <= t_v_) [[unlikely]] return;
  if (real_time_) [[likely]] {  // the link is not oversubscribed: V is real time
    t_v_ = t;
    v_ = t + v_off_;  // (v_ += t - t_v_, with the difference kept)
    return;
  }
  const Picos dt = t - t_v_;
  t_v_ = t;
  const u128 x = static_cast<u128>(dt) * sigma_ + v_frac_;
  v_ += static_cast<Picos>(x >> kSigmaFracBits);
  v_frac_ = static_cast<std::uint64_t>(x) & (kSigmaOne - 1);
  v_off_ = v_ - t_v_;
}

void TasselScheduler::update_sigma() {
  if (active_bps_ <= config_.link_bps || shared_) {  // sharing: the tree shares, V is real time
    sigma_ = kSigmaOne;
    v_frac_ = 0;
  } else {
    sigma_ = static_cast<std::uint64_t>((static_cast<u128>(config_.link_bps) << kSigmaFracBits) /
                                        active_bps_);
  }
  real_time_ = sigma_ == kSigmaOne;
}

// The first real time at which sync() brings system time to `v`.
Picos TasselScheduler::when_system_time_reaches(Picos v) const {
  if (v <= v_) return t_v_;
  if (sigma_ == kSigmaOne) {  // V runs with real time (and v_frac_ is 0): no division
    const Picos dt = v - v_;
    return dt >= kNever - t_v_ ? kNever : t_v_ + dt;
  }
  const u128 need = (static_cast<u128>(v - v_) << kSigmaFracBits) - v_frac_;
  const u128 dt = (need + sigma_ - 1) / sigma_;
  const u128 t = t_v_ + dt;
  return t >= kNever ? kNever : static_cast<Picos>(t);
}

// S -> F: the packet is eligible; its finish time uses the rate in force now.
template <bool kShared, bool kTraced>
inline void TasselScheduler::make_eligible(QpSlot* qps, Picos now, QpId qp) {
  QpSlot& s = qps[qp];
  const Picos start = s.time_;
  s.time_ += s.dur_;  // duration(bytes_, the QP's cost now)
  if constexpr (kTraced) {
    if (trace_.on(trace::Event::kEligible)) [[unlikely]] trace_eligible(now, qp, start);
  }
  if constexpr (kShared) {
    tree_->push(qps, qp);
  } else {
    pool_.push(qps, qp);
  }
}

template <bool kShared, bool kTraced>
inline void TasselScheduler::place_limited(QpSlot* qps, Picos now, QpId qp, Picos start) {
  qps[qp].time_ = start;
  if (!timeline_.insert(qps, qp)) make_eligible<kShared, kTraced>(qps, now, qp);
}

void TasselScheduler::push_unlimited(QpId qp) {
  if (shared_) {
    tree_->push(qps_.data(), qp);
  } else {
    qps_[qp].where_ = Where::kUnlimited;
    unlimited_.push_back(qps_.data(), qp);
  }
}

ShareTree& TasselScheduler::tree() {
  if (!tree_) tree_ = std::make_unique<ShareTree>(config_.max_qps);
  return *tree_;
}

// The first tenant: from now on V is real time and the QPs that may send wait in the
// share tree. Those eligible or unlimited now move there (the calendar's in F order).
void TasselScheduler::start_sharing(Picos now) {
  sync(now);
  tree();
  shared_ = true;
  update_sigma();
  for (QpId qp = pool_.pop(qps_.data()); qp != kNil; qp = pool_.pop(qps_.data())) tree_->push(qps_.data(), qp);
  for (QpId qp = unlimited_.pop_front(qps_.data()); qp != kNil; qp = unlimited_.pop_front(qps_.data()))
    tree_->push(qps_.data(), qp);
}

void TasselScheduler::set_class(Picos /*now*/, QpId qp, FlowClass /*cls*/, std::uint32_t app, std::uint32_t weight) {
  if (qp >= qps_.size()) return;
  if (!tree_ && app == kOwnApp && weight <= 1) return;  // the default: nothing to record
  const bool queued = qps_[qp].where_ == Where::kShared;
  if (queued) tree_->remove(qps_.data(), qp);
  tree().set_app(qp, app, weight);
  if (queued) tree_->push(qps_.data(), qp);
}

void TasselScheduler::set_tenant(Picos now, QpId qp, std::uint32_t tenant, std::uint32_t weight) {
  if (qp >= qps_.size()) return;
  if (!shared_ && tenant == kNoTenant && !tree_) return;  // the default: nothing to record
  const bool queued = qps_[qp].where_ == Where::kShared;
  if (queued) tree_->remove(qps_.data(), qp);
  tree().set_tenant(qp, tenant, weight);
  if (queued) tree_->push(qps_.data(), qp);
  if (!shared_ && tenant != kNoTenant) start_sharing(now);
}

void TasselScheduler::trace_eligible(Picos now, QpId qp, Picos start) const {
  const QpSlot& s = qps_[qp];
  trace_.emit(now, trace::Event::kEligible, qp, phi_q16(), s.bytes_, 0, start, s.time_);
}

void TasselScheduler::activate(Picos now, QpId qp, Packet pkt) {
  if (qp >= qps_.size() || pkt.bytes == 0 || qps_[qp].where_ != Where::kIdle) return;
  sync(now);
  trace_activate(now, qp, pkt.bytes);
  QpSlot& s = qps_[qp];
  set_bytes(qp, pkt.bytes);
  ++active_;
  if (!s.limited_) {
    push_unlimited(qp);
    return;
  }
  active_bps_ += rates_[qp];
  update_sigma();
  const Picos start = std::max(s.time_, v_);  // S = max(F of the last packet, V)
  if (shared_) {
    place_limited<true>(qps_.data(), now, qp, start);
  } else {
    place_limited<false>(qps_.data(), now, qp, start);
  }
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
    case Where::kShared:
      tree_->remove(qps_.data(), qp);
      break;
    case Where::kIdle:
      break;
    default:
      timeline_.remove(qps_.data(), qp);
      break;
  }
}

void TasselScheduler::set_link_bps(Picos now, std::uint64_t bps) {
  if (bps == 0 || bps == config_.link_bps) return;
  sync(now);  // system time so far ran at the old rate's sigma
  config_.link_bps = bps;
  link_.set_bps(bps);
  update_sigma();
}

void TasselScheduler::set_rate(Picos now, QpId qp, std::uint64_t bps) {
  if (qp >= qps_.size()) return;
  sync(now);
  trace_rate(now, qp, bps);
  QpSlot& s = qps_[qp];
  const bool was_limited = s.limited_;
  const bool is_active = s.where_ != Where::kIdle;
  if (is_active && was_limited) active_bps_ -= rates_[qp];
  rates_[qp] = bps;
  const ByteCost old_cost = costs_[qp];
  const ByteCost cost = bps == kUnlimited ? 0 : byte_cost(bps);
  costs_[qp] = cost;
  s.limited_ = cost != 0;
  s.dur_ = duration(s.bytes_, cost);
  // A faster limit shortens the wait still ahead of the QP: its next start was
  // the finish of its last packet at the old rate (congestion control raising a
  // QP from a very low rate must not wait out a packet time of that rate).
  if (was_limited && cost != 0 && cost < old_cost && s.time_ > v_ &&
      (s.where_ == Where::kIdle || s.where_ == Where::kTimeline)) {
    const Picos left = static_cast<Picos>(static_cast<unsigned __int128>(s.time_ - v_) * cost / old_cost);
    if (s.where_ == Where::kIdle) {
      s.time_ = v_ + left;
    } else {
      remove_from_queue(qp);
      active_bps_ += bps;
      update_sigma();
      if (shared_) {
        place_limited<true>(qps_.data(), now, qp, v_ + left);
      } else {
        place_limited<false>(qps_.data(), now, qp, v_ + left);
      }
      return;
    }
  }
  if (!is_active) return;
  if (bps != kUnlimited) active_bps_ += bps;
  update_sigma();
  if (was_limited && bps == kUnlimited) {
    // (In the share tree it may send already; elsewhere it now may.)
    if (s.where_ != Where::kShared) {
      remove_from_queue(qp);
      push_unlimited(qp);
    }
  } else if (!was_limited && bps != kUnlimited) {
    remove_from_queue(qp);
    if (shared_) {
      place_limited<true>(qps_.data(), now, qp, std::max(s.time_, v_));
    } else {
      place_limited<false>(qps_.data(), now, qp, std::max(s.time_, v_));
    }
  }
}

std::uint64_t TasselScheduler::rate(QpId qp) const {
  return qp < qps_.size() ? rates_[qp] : kUnlimited;
}

void TasselScheduler::deactivate(Picos now, QpId qp) {
  if (qp >= qps_.size() || qps_[qp].where_ == Where::kIdle) return;
  sync(now);
  QpSlot& s = qps_[qp];
  if (s.limited_) {
    active_bps_ -= rates_[qp];
    update_sigma();
  }
  // The dropped packet is not charged: back from its F to its S.
  if ((s.where_ == Where::kPool || (s.where_ == Where::kShared && s.limited_))) s.time_ -= std::min(s.time_, s.dur_);
  remove_from_queue(qp);
  --active_;
  if (link_.catches_up()) link_.set_due(next_deadline());  // nothing of its own is due any more
}

bool TasselScheduler::active(QpId qp) const {
  return qp < qps_.size() && qps_[qp].where_ != Where::kIdle;
}

template <bool kShared, bool kTraced>
inline void TasselScheduler::grant(QpSlot* qps, Picos now, QpId qp, Picos at, Grant& out, PacketSource& src) {
  QpSlot& s = qps[qp];
  out.qp = qp;
  out.bytes = s.bytes_;
  out.departure = at;
  out.kind = GrantKind::kData;
  if constexpr (kTraced) trace_grant(now, out);
  link_.occupy(at, s.bytes_);
  if constexpr (kShared) s.where_ = Where::kIdle;  // (the calendar's and the ring's pops leave it)
  const Packet next = src.on_grant(qp, s.bytes_);
  if (next.bytes == 0) {
    s.where_ = Where::kIdle;
    --active_;
    if (s.limited_) {
      active_bps_ -= rates_[qp];
      update_sigma();
    }
    return;
  }
  if (next.bytes != s.bytes_) [[unlikely]] {  // (packets of one size follow one another)
    s.bytes_ = next.bytes;
    s.dur_ = duration(next.bytes, costs_[qp]);
  }
  if (!s.limited_) {
    if constexpr (kShared) {
      tree_->push(qps, qp);
    } else {
      s.where_ = Where::kUnlimited;
      unlimited_.push_back(qps, qp);
    }
  } else if constexpr (kShared) {
    // Still backlogged, but it may have waited in the tree past its F: its next
    // packet starts no earlier than now (V), so no wait turns into a burst.
    place_limited<true, kTraced>(qps, at, qp, std::max(s.time_, v_));
  } else if (!timeline_.insert(qps, qp)) {  // still backlogged: S = F of the packet just granted
    make_eligible<false, kTraced>(qps, at, qp);
  }
}

std::size_t TasselScheduler::dequeue(Picos now, std::span<Grant> out, PacketSource& src) {
  std::size_t n;
  if (trace_.mask() == 0) [[likely]] {
    n = shared_ ? dequeue_as<true, false>(now, out, src) : dequeue_as<false, false>(now, out, src);
  } else {
    n = shared_ ? dequeue_as<true, true>(now, out, src) : dequeue_as<false, true>(now, out, src);
  }
  if (link_.catches_up()) link_.set_due(next_deadline());
  return n;
}

// (A tracer attached from inside src.on_grant sees this call's later events only if
// tracing was already on when it began.)
template <bool kShared, bool kTraced>
std::size_t TasselScheduler::dequeue_as(Picos now, std::span<Grant> out, PacketSource& src) {
  const Picos limit = now > kNever - config_.lookahead ? kNever : now + config_.lookahead;
  const Picos from = link_.from(now);
  Grant* next = out.data();
  // In a register across the loop (on_grant is opaque: a member would be reloaded).
  QpSlot* const qps = qps_.data();
  Grant* const end = next + out.size();
  // Made once: a release's trace record carries the departure being filled.
  Picos traced_at = 0;
  auto release = [this, qps, &traced_at](std::uint32_t qp) { make_eligible<kShared, kTraced>(qps, traced_at, qp); };
  // Control packets go first. Nothing adds to their queue during a dequeue (on_grant
  // may not call back), so once it is empty the loop below no longer looks at it.
  while (!control_.empty()) [[unlikely]] {
    if (next == end) return static_cast<std::size_t>(next - out.data());
    const Picos at = link_.start(from);
    if (at > limit) return static_cast<std::size_t>(next - out.data());  // the link is busy
    sync(at);
    if constexpr (kTraced) traced_at = at;
    timeline_.advance(qps, v_, release);
    const ControlQueue::Entry c = control_.pop();
    *next = {c.qp, c.bytes, at, GrantKind::kControl};
    if constexpr (kTraced) trace_grant(now, *next);
    ++next;
    link_.occupy(at, c.bytes);
  }
  while (next != end) {
    const Picos at = link_.start(from);
    if (at > limit) break;  // the link is busy
    sync(at);
    if constexpr (kTraced) traced_at = at;
    timeline_.advance(qps, v_, release);
    if constexpr (kShared) {
      const QpId qp = tree_->pop(qps);
      if (qp != kNil) {
        const std::uint32_t bytes = qps[qp].bytes_;
        grant<true, kTraced>(qps, now, qp, at, *next++, src);
        tree_->charge(qp, bytes);
        continue;
      }
    } else {
      QpId qp = pool_.pop_leaving_where(qps);  // grant() sets where_
      if (qp == kNil) qp = unlimited_.pop_front(qps);
      if (qp != kNil) {
        grant<false, kTraced>(qps, now, qp, at, *next++, src);
        continue;
      }
    }
    // Nothing eligible: the link idles until the next QP is.
    const Picos start = timeline_.next_start();
    if (start == kNever) break;
    const Picos ready = when_system_time_reaches(start);
    if (ready > limit) break;
    link_.idle_until(ready);
  }
  return static_cast<std::size_t>(next - out.data());
}

Picos TasselScheduler::next_deadline() const {
  if (!control_.empty() || !pool_.empty() || !unlimited_.empty() || (shared_ && !tree_->empty()))
    return link_.free_at();
  const Picos start = timeline_.next_start();
  if (start == kNever) return kNever;
  return std::max(link_.free_at(), when_system_time_reaches(start));
}

}  // namespace isoroce::sched
