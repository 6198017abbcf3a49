// The data plane's clock: the TSC as picoseconds since the clock was made, the
// "now" the engine and the scheduler take (sched/time.h).
#pragma once

#include <rte_cycles.h>

#include <cstdint>

#include "sched/time.h"

namespace isoroce::dataplane {

class TscClock {
 public:
  TscClock() : start_(rte_get_tsc_cycles()), hz_(rte_get_tsc_hz()) {}

  sched::Picos now() const { return to_picos(rte_get_tsc_cycles() - start_); }
  uint64_t start_tsc() const { return start_; }
  uint64_t hz() const { return hz_; }
  sched::Picos to_picos(uint64_t cycles) const {
    return static_cast<sched::Picos>(static_cast<unsigned __int128>(cycles) * 1'000'000'000'000u / hz_);
  }

 private:
  uint64_t start_;
  uint64_t hz_;
};

}  // namespace isoroce::dataplane
