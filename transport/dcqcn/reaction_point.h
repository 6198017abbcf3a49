// The DCQCN reaction point of one QP (the sender's half), sans-I/O: it is told
// when CNPs arrive and when bytes leave, and it is called at its own deadline;
// it never reads a clock. The caller (transport/engine) applies rate_bps() as
// the QP's limit in the port scheduler after any call that returns true.
//
// The rules are the NVIDIA/Mellanox variant as the HPCC ns-3 model describes
// it (alibaba-edu/High-Precision-Congestion-Control, rdma-hw.cc, the *Mlx
// functions), plus the byte counter of the DCQCN paper (Zhu et al., SIGCOMM'15):
//
//   first CNP (t0)  alpha = initial_alpha; rate = target = rate_on_first_cnp
//                   (or unchanged); from here on alpha is updated at
//                   t0 + k * alpha_update and the cut is checked at
//                   t0 + k * rate_decrease_period.
//   alpha update    alpha = (1 - g) alpha + g if a CNP arrived since the last
//                   update (the first CNP does not count), else (1 - g) alpha.
//   cut (check with a CNP since the last check)
//                   target = rate if clamp_target or the timer has raised the
//                   rate since the last cut; rate = max(min_rate, rate (1 - alpha/2));
//                   the timer restarts (rp_timer), both stage counters and the
//                   byte counter go to 0.
//   increase event  every rp_timer after a cut (timer stage T) and every
//                   byte_counter_bytes sent (byte stage B; without a byte
//                   counter B is T). With F = fast_recovery_stages and the
//                   stages before the event:
//                     max(T, B) <  F   fast recovery: rate = (rate + target) / 2
//                     min(T, B) >  F   hyper: target += hai, rate = (rate + target) / 2
//                     otherwise        additive: target += ai, rate = (rate + target) / 2
//                   target never exceeds the line rate.
//
// Events due at the same instant run in this order: alpha updates, the rate
// increase timer, the cut check; a CNP (or bytes sent) at time t comes after
// everything due at t. Alpha is computed lazily (no timer per microsecond).
// When the rate is back at the line rate (rounded to bits/s) with the target
// there too and no CNP pending, the QP leaves the limiter: no timers, and its
// next CNP is a first CNP again (alpha = initial_alpha).
#pragma once

#include <cstdint>

#include "sched/time.h"
#include "transport/dcqcn/params.h"

namespace isoroce::dcqcn {

using sched::Picos;

enum class EventKind : uint8_t { kCnp, kAlpha, kDecrease, kFastRecovery, kAdditive, kHyper, kByteCounter };
const char* to_string(EventKind k);

// What happened, for tools and tests (isoroce-dcqcn prints these).
struct Event {
  Picos t = 0;
  EventKind kind = EventKind::kCnp;
  double rate_bps = 0;
  double target_bps = 0;
  double alpha = 0;
};

class EventSink {
 public:
  virtual void on_event(const Event& e) = 0;

 protected:
  ~EventSink() = default;
};

struct RpCounters {
  uint64_t cnps = 0;
  uint64_t decreases = 0;
  uint64_t increases = 0;  // fast recovery, additive and hyper events
  uint64_t byte_counter_events = 0;
};

class ReactionPoint {
 public:
  ReactionPoint() = default;  // unconfigured: configured() is false
  // params must outlive the reaction point; line_bps > 0.
  ReactionPoint(const Params* params, uint64_t line_bps);

  bool configured() const { return params_ != nullptr; }
  void set_trace(EventSink* sink) { trace_ = sink; }

  // A CNP for this QP arrived at now. True if the rate changed.
  bool on_cnp(Picos now);
  // Runs the timers due by now. True if the rate changed.
  bool advance(Picos now);
  // The QP sent `bytes` (frame bytes) at now. True if the rate changed. Only
  // counts between a cut and full recovery, with a byte counter; timers due
  // by now run first then.
  bool on_sent(Picos now, uint64_t bytes) {
    if (!recovering_ || params_->byte_counter_bytes == 0) [[likely]] return false;
    return on_sent_slow(now, bytes);
  }
  // When advance() has something to do next (sched::kNever: nothing).
  Picos next_deadline() const { return next_check_ < next_increase_ ? next_check_ : next_increase_; }

  // The current rate in bits/s (the line rate when not limiting).
  uint64_t rate_bps() const;
  uint64_t target_bps() const;
  double rate() const { return rate_; }
  double target() const { return target_; }
  double alpha() const { return alpha_; }  // as of the last event
  // Between a first CNP and full recovery.
  bool limiting() const { return active_; }
  bool recovering() const { return recovering_; }
  const RpCounters& counters() const { return counters_; }

 private:
  bool on_sent_slow(Picos now, uint64_t bytes);
  void catch_up_alpha(Picos t);
  void decrease(Picos t);
  void increase(Picos t, bool from_timer);
  void emit(Picos t, EventKind k) const;
  void maybe_idle();

  const Params* params_ = nullptr;
  EventSink* trace_ = nullptr;
  double line_ = 0;
  double min_rate_ = 0;
  Picos alpha_period_ = 0, check_period_ = 0, timer_period_ = 0;

  bool active_ = false;       // a first CNP was seen and the QP has not fully recovered
  bool recovering_ = false;   // a cut happened; increase events run
  double rate_ = 0;
  double target_ = 0;
  double alpha_ = 0;
  Picos t0_ = 0;              // first CNP: alpha ticks and cut checks are aligned to it
  uint64_t alpha_ticks_ = 0;  // alpha updates applied since t0
  bool alpha_cnp_ = false;    // a CNP since the last alpha update
  bool cut_pending_ = false;  // a CNP since the last cut check
  Picos next_check_ = sched::kNever;
  Picos next_increase_ = sched::kNever;
  uint32_t t_stage_ = 0, b_stage_ = 0;
  uint64_t bytes_ = 0;
  RpCounters counters_;
};

// Picoseconds of a parameter in microseconds (at least 1 ps).
Picos us_to_picos(double us);

}  // namespace isoroce::dcqcn
