#include "dataplane/dpdk/lane_share.h"

#include <algorithm>
#include <array>

namespace isoroce::dataplane {

void split_link(uint64_t link_bps, std::span<const uint32_t> demand, std::span<uint64_t> out) {
  uint64_t total = 0;
  size_t busiest = 0;
  for (size_t k = 0; k < demand.size(); ++k) {
    total += demand[k];
    if (demand[k] > demand[busiest]) busiest = k;
  }
  uint64_t given = 0;
  for (size_t k = 0; k < demand.size(); ++k) {
    out[k] = total == 0 ? 0
                        : static_cast<uint64_t>(static_cast<unsigned __int128>(link_bps) * demand[k] / total);
    given += out[k];
  }
  if (total != 0) out[busiest] += link_bps - given;
}

uint64_t lane_rate(uint64_t link_bps, std::span<const uint32_t> demand, unsigned lane) {
  std::array<uint32_t, LaneShare::kMaxLanes> d{};
  std::array<uint64_t, LaneShare::kMaxLanes> r{};
  const size_t n = std::min(demand.size(), d.size());
  if (lane >= n) return 0;
  std::copy_n(demand.begin(), n, d.begin());
  d[lane] = std::max(d[lane], 1u);
  split_link(link_bps, std::span(d.data(), n), std::span(r.data(), n));
  return r[lane];
}

LaneShare::LaneShare(unsigned lanes)
    : n_(std::min(lanes, kMaxLanes)), slots_(std::make_unique<Slot[]>(std::max(1u, n_))) {}

uint64_t LaneShare::rate_for(unsigned k, uint64_t link_bps) const {
  std::array<uint32_t, kMaxLanes> d{};
  for (unsigned i = 0; i < n_; ++i) d[i] = demand(i);
  return lane_rate(link_bps, std::span(d.data(), n_), k);
}

uint64_t LaneRate::update(sched::Picos now, uint32_t backlog) {
  published_ = peak_;
  share_.publish(lane_, peak_);
  peak_ = backlog;
  next_ = now + kPeriod;
  const uint64_t r = share_.rate_for(lane_, link_bps_);
  if (r == applied_) return 0;
  applied_ = r;
  share_.set_rate(lane_, r);
  return r;
}

}  // namespace isoroce::dataplane
