// How long an idle worker busy-polls before it sleeps (adaptive spinning).
//
// A spin pays when the next work arrives within it: the worker then skips a
// sleep and a wakeup (a ping-pong on a core of its own, traffic in bursts).
// It costs whoever else could run on the worker's CPU: two daemons' workers
// and the applications they serve on a 2-core machine take the CPU from each
// other for the whole spin, while the work they wait for is the other
// threads' (docs/performance.md, "Two daemons: spin only while it pays").
// The governor keeps the last eight idle gaps (from the end of a pass that
// did work to the next pass that found work, whatever happened in between)
// and spins the full `max_spin` only while most of them would have been
// caught by it; otherwise `short_spin`, and the worker sleeps on its sockets
// and doorbells almost at once. Hysteresis: to full spinning when 7 of the
// last 8 gaps were at most `max_spin`, to short spinning when 4 or fewer
// were. While short, the worker sleeps after 1 us, so a gap includes its
// wakeup, which on a virtual machine alone can outlast the spin (counting
// such gaps kept a fast ping-pong short for good); so while short only every
// `kProbeEvery`-th idle phase, spun in full as a probe, is counted (counting
// the gaps that were short anyway would bias the history toward full).
// Pure logic over the picoseconds the worker hands it.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "sched/time.h"

namespace isoroce::dataplane {

class SpinGovernor {
 public:
  // max_spin 0: spinning is bounded by passes only (the governor stays out).
  SpinGovernor(sched::Picos max_spin, sched::Picos short_spin, bool adaptive)
      : max_spin_(max_spin), short_spin_(std::min(short_spin, max_spin)), adaptive_(adaptive && max_spin != 0) {}

  // An idle phase begins (the first empty pass after work): while short,
  // every kProbeEvery-th phase spins in full to measure its gap exactly.
  void begin_gap() { probing_ = adaptive_ && !full_ && ++short_phases_ % kProbeEvery == 0; }

  // The worker found work after an idle gap (time since the end of its last
  // work; it may have slept in between).
  void on_gap(sched::Picos gap) {
    if (!adaptive_) return;
    const bool exact = full_ || probing_;
    probing_ = false;
    if (!exact) return;  // slept after a short spin: the wakeup is in the gap
    history_ = static_cast<uint8_t>((history_ << 1) | (gap <= max_spin_ ? 1 : 0));
    const int caught = std::popcount(history_);
    if (full_ && caught <= kToShort) {
      full_ = false;
      ++to_short_;
    } else if (!full_ && caught >= kToFull) {
      full_ = true;
    }
  }

  // How long to spin after the last work now.
  sched::Picos spin() const { return full_ || probing_ ? max_spin_ : short_spin_; }
  bool full() const { return full_; }
  // Times the governor went from full to short spinning.
  uint64_t to_short() const { return to_short_; }

  static constexpr int kToShort = 4;  // at most this many of 8 caught: short spins
  static constexpr int kToFull = 7;   // at least this many of 8 caught: full spins
  static constexpr uint32_t kProbeEvery = 4;  // while short, every 4th idle phase spins in full

 private:
  sched::Picos max_spin_, short_spin_;
  bool adaptive_;
  uint8_t history_ = 0xff;  // bit i: the gap i+1 back was at most max_spin
  bool full_ = true;
  bool probing_ = false;
  uint32_t short_phases_ = 0;
  uint64_t to_short_ = 0;
};

}  // namespace isoroce::dataplane
