// How one port's lanes (dataplane/dpdk/lanes.h) share its link: each lane's
// scheduler models a link of the rate this file gives it, and that rate
// follows the lanes' backlog (docs/design.md, "Lanes"), so a QP alone on a
// port of N lanes gets the whole link, not 1/N of it.
//
// - split_link() is the rule, a pure function of the lanes' demands (a lane's
//   backlogged QPs: its scheduler's active_qps()): busy lanes share the link in
//   proportion to their demand (each backlogged QP of the port gets the same
//   share, as with one scheduler), the rates of the busy lanes add up to the
//   link and never more, an idle lane gets nothing.
// - LaneShare holds the demands the lanes publish (one atomic each, relaxed:
//   a stale demand only delays the split by one period).
// - LaneRate is one lane's side, run on its worker at every pass: it samples
//   the backlog (the most seen in a period counts), and at most once per
//   period (and at once when the lane turns busy) publishes it and computes
//   its own rate: split_link() of every lane's demand with its own counted as
//   at least 1 (an idle lane keeps the rate it would get with one backlogged
//   QP, so its first packets need no wait for a new split).
// A lane applies a new split up to one period after another lane's demand
// changed, so for that long the lanes' rates may add up to more than the
// link (one period, 10 µs, plus the scheduler's lookahead).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "sched/time.h"

namespace isoroce::dataplane {

// out[k]: lane k's rate out of link_bps for the demands (demand[k] 0: idle,
// out[k] 0). Busy lanes get link_bps * demand[k] / sum of demands, rounded
// down, and the rounding's remainder to the busiest lane (lowest index on a
// tie): busy lanes' rates add up to exactly link_bps. out.size() == demand.size().
void split_link(uint64_t link_bps, std::span<const uint32_t> demand, std::span<uint64_t> out);

// Lane `lane`'s rate for the demands, its own counted as at least 1.
uint64_t lane_rate(uint64_t link_bps, std::span<const uint32_t> demand, unsigned lane);

class LaneShare {
 public:
  static constexpr unsigned kMaxLanes = 16;  // PortLanes::kMaxLanes
  explicit LaneShare(unsigned lanes);

  unsigned count() const { return n_; }
  // Lane k's demand (its worker only); read by every lane and by telemetry.
  void publish(unsigned k, uint32_t demand) { slot(k).demand.store(demand, std::memory_order_relaxed); }
  uint32_t demand(unsigned k) const { return slot(k).demand.load(std::memory_order_relaxed); }
  // The rate lane k's scheduler has (its worker stores it; telemetry reads it).
  void set_rate(unsigned k, uint64_t bps) { slot(k).rate.store(bps, std::memory_order_relaxed); }
  uint64_t rate(unsigned k) const { return slot(k).rate.load(std::memory_order_relaxed); }
  // Lane k's rate out of link_bps for the demands published now.
  uint64_t rate_for(unsigned k, uint64_t link_bps) const;

 private:
  struct alignas(64) Slot {  // one cache line per lane: each is written by its own worker
    std::atomic<uint32_t> demand{0};
    std::atomic<uint64_t> rate{0};
  };
  Slot& slot(unsigned k) { return slots_[k]; }
  const Slot& slot(unsigned k) const { return slots_[k]; }
  unsigned n_;
  std::unique_ptr<Slot[]> slots_;
};

class LaneRate {
 public:
  static constexpr sched::Picos kPeriod = 10'000'000;  // 10 µs

  LaneRate(LaneShare& share, unsigned lane, uint64_t link_bps) : share_(share), lane_(lane), link_bps_(link_bps) {}

  // One pass at `now` with `backlog` QPs backlogged in the lane's scheduler:
  // the rate its scheduler must take from now on, or 0 if it keeps its own.
  uint64_t tick(sched::Picos now, uint32_t backlog) {
    if (backlog > peak_) peak_ = backlog;
    const bool turned_busy = backlog != 0 && published_ == 0;
    if (now < next_ && !turned_busy) [[likely]] return 0;
    return update(now, backlog);
  }
  // The lane's engine was replaced (it models the configured link again):
  // the next tick sets its rate.
  void reset() {
    applied_ = 0;
    next_ = 0;
  }
  uint64_t link_bps() const { return link_bps_; }
  void set_link_bps(uint64_t bps) {
    link_bps_ = bps;
    reset();
  }

 private:
  uint64_t update(sched::Picos now, uint32_t backlog);

  LaneShare& share_;
  unsigned lane_;
  uint64_t link_bps_;
  uint32_t peak_ = 0;       // the most backlogged QPs seen since the last update
  uint32_t published_ = 0;  // the demand last published
  uint64_t applied_ = 0;    // the rate last given to the scheduler (0: none yet)
  sched::Picos next_ = 0;   // the next update is due then
};

}  // namespace isoroce::dataplane
