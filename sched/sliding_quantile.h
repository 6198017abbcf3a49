// An exact quantile over a sliding window of the last N samples (Justitia's
// Current99 over the reference flow's last 10,000 latencies).
//
// The window is kept twice: in arrival order (a ring, to know which sample leaves)
// and sorted (to read any quantile at once). An update is one binary search and one
// move of at most N entries: 80 KB of memmove at N = 10,000, done once per probe
// (every 0.5 ms by default), so no approximation is needed. Memory is allocated once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sched/time.h"

namespace isoroce::sched {

class SlidingQuantile {
 public:
  explicit SlidingQuantile(std::uint32_t window) : ring_(std::max(window, 1u)) { sorted_.reserve(ring_.size()); }

  void add(Picos sample) {
    if (sorted_.size() == ring_.size()) {
      const Picos old = ring_[next_];
      sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), old));
    }
    ring_[next_] = sample;
    next_ = next_ + 1 == ring_.size() ? 0 : next_ + 1;
    sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), sample), sample);
  }

  // Nearest rank: the smallest sample with at least q of the window at or below it;
  // 0 when empty. q in (0, 1].
  Picos quantile(double q) const {
    if (sorted_.empty()) return 0;
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted_.size())));
    rank = std::clamp<std::size_t>(rank, 1, sorted_.size());
    return sorted_[rank - 1];
  }

  void clear() {
    sorted_.clear();
    next_ = 0;
  }

  std::size_t size() const { return sorted_.size(); }
  std::size_t window() const { return ring_.size(); }

 private:
  std::vector<Picos> ring_;
  std::vector<Picos> sorted_;
  std::size_t next_ = 0;
};

}  // namespace isoroce::sched
