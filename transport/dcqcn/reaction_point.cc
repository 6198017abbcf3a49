#include "transport/dcqcn/reaction_point.h"

#include <algorithm>
#include <cmath>

namespace isoroce::dcqcn {

const char* to_string(EventKind k) {
  switch (k) {
    case EventKind::kCnp: return "cnp";
    case EventKind::kAlpha: return "alpha";
    case EventKind::kDecrease: return "decrease";
    case EventKind::kFastRecovery: return "fast_recovery";
    case EventKind::kAdditive: return "additive";
    case EventKind::kHyper: return "hyper";
    case EventKind::kByteCounter: return "byte_counter";
  }
  return "?";
}

Picos us_to_picos(double us) { return std::max<Picos>(1, static_cast<Picos>(std::llround(us * 1e6))); }

ReactionPoint::ReactionPoint(const Params* params, uint64_t line_bps)
    : params_(params),
      line_(static_cast<double>(line_bps)),
      min_rate_(std::min(params->min_rate_mbps * 1e6, static_cast<double>(line_bps))),
      alpha_period_(us_to_picos(params->alpha_update_us)),
      check_period_(us_to_picos(params->rate_decrease_period_us)),
      timer_period_(us_to_picos(params->rp_timer_us)),
      rate_(static_cast<double>(line_bps)),
      target_(static_cast<double>(line_bps)) {}

uint64_t ReactionPoint::rate_bps() const { return static_cast<uint64_t>(std::llround(rate_)); }
uint64_t ReactionPoint::target_bps() const { return static_cast<uint64_t>(std::llround(target_)); }

void ReactionPoint::emit(Picos t, EventKind k) const {
  if (trace_) trace_->on_event(Event{t, k, rate_, target_, alpha_});
}

void ReactionPoint::catch_up_alpha(Picos t) {
  if (!active_ || t < t0_) return;
  const uint64_t due = (t - t0_) / alpha_period_;  // updates at t0 + k * period, k = 1..due
  if (due <= alpha_ticks_) return;
  uint64_t n = due - alpha_ticks_;
  const double keep = 1.0 - params_->g;
  // The first update sees the CNP flag; the rest are plain decay.
  alpha_ = keep * alpha_ + (alpha_cnp_ ? params_->g : 0.0);
  alpha_cnp_ = false;
  ++alpha_ticks_;
  emit(t0_ + alpha_ticks_ * alpha_period_, EventKind::kAlpha);
  --n;
  if (n > 0) {
    const double a0 = alpha_;
    if (trace_) {
      for (uint64_t k = 1; k <= n; ++k)
        trace_->on_event(Event{t0_ + (alpha_ticks_ + k) * alpha_period_, EventKind::kAlpha, rate_, target_,
                               a0 * std::pow(keep, static_cast<double>(k))});
    }
    alpha_ = a0 * std::pow(keep, static_cast<double>(n));
    alpha_ticks_ += n;
  }
}

bool ReactionPoint::on_cnp(Picos now) {
  const double before = rate_;
  advance(now);
  ++counters_.cnps;
  if (!active_) {
    active_ = true;
    t0_ = now;
    alpha_ticks_ = 0;
    alpha_ = params_->initial_alpha;
    alpha_cnp_ = false;
    if (params_->rate_on_first_cnp_mbps > 0) rate_ = target_ = std::min(line_, params_->rate_on_first_cnp_mbps * 1e6);
  } else {
    alpha_cnp_ = true;
  }
  if (!cut_pending_) {
    cut_pending_ = true;
    // The first check strictly after now on the t0 + k * period grid.
    next_check_ = t0_ + ((now - t0_) / check_period_ + 1) * check_period_;
  }
  emit(now, EventKind::kCnp);
  return rate_ != before;
}

bool ReactionPoint::advance(Picos now) {
  if (next_deadline() > now) {
    catch_up_alpha(now);
    return false;
  }
  const double before = rate_;
  while (next_deadline() <= now) {
    // The increase timer goes before a cut check due at the same instant.
    if (next_increase_ <= next_check_) {
      const Picos t = next_increase_;
      catch_up_alpha(t);
      next_increase_ += timer_period_;
      increase(t, true);
    } else {
      const Picos t = next_check_;
      catch_up_alpha(t);
      decrease(t);
    }
  }
  catch_up_alpha(now);
  return rate_ != before;
}

void ReactionPoint::decrease(Picos t) {
  cut_pending_ = false;
  next_check_ = sched::kNever;
  if (params_->clamp_target || t_stage_ > 0) target_ = rate_;
  rate_ = std::max(min_rate_, rate_ * (1.0 - alpha_ / 2.0));
  t_stage_ = b_stage_ = 0;
  bytes_ = 0;
  recovering_ = true;
  next_increase_ = t + timer_period_;
  ++counters_.decreases;
  emit(t, EventKind::kDecrease);
}

void ReactionPoint::increase(Picos t, bool from_timer) {
  const uint32_t f = params_->fast_recovery_stages;
  const uint32_t ts = t_stage_;
  const uint32_t bs = params_->byte_counter_bytes ? b_stage_ : t_stage_;
  if (from_timer) ++t_stage_;
  else ++b_stage_;
  EventKind kind;
  if (std::max(ts, bs) < f) {
    kind = EventKind::kFastRecovery;
  } else if (std::min(ts, bs) > f) {
    kind = EventKind::kHyper;
    target_ = std::min(line_, target_ + params_->hai_mbps * 1e6);
  } else {
    kind = EventKind::kAdditive;
    target_ = std::min(line_, target_ + params_->ai_mbps * 1e6);
  }
  rate_ = rate_ / 2 + target_ / 2;
  ++counters_.increases;
  if (!from_timer) {
    ++counters_.byte_counter_events;
    emit(t, EventKind::kByteCounter);
  }
  emit(t, kind);
  maybe_idle();
}

void ReactionPoint::maybe_idle() {
  if (cut_pending_ || target_ < line_ || std::llround(rate_) < std::llround(line_)) return;
  rate_ = target_ = line_;
  recovering_ = false;
  active_ = false;
  next_increase_ = sched::kNever;
  t_stage_ = b_stage_ = 0;
  bytes_ = 0;
}

bool ReactionPoint::on_sent_slow(Picos now, uint64_t bytes) {
  const double before = rate_;
  advance(now);
  if (!recovering_) return rate_ != before;
  bytes_ += bytes;
  if (bytes_ >= params_->byte_counter_bytes) {
    bytes_ -= params_->byte_counter_bytes;
    increase(now, false);
  }
  return rate_ != before;
}

}  // namespace isoroce::dcqcn
