// Baseline: the same WF2Q+ rate limiter (start/finish times, system time scaled by
// 1/max(1, Phi), the same link model) on two std::priority_queue binary heaps: QPs
// waiting for eligibility by start time, eligible QPs by finish time. O(log n) per
// packet per heap.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <vector>

#include "sched/link.h"
#include "sched/scheduler.h"
#include "sched/time.h"

namespace isoroce::sched::bench {

class HeapWf2q {
 public:
  explicit HeapWf2q(const Config& config) : config_(config), qps_(config.max_qps), link_(config.link_bps) {}

  void set_rate(QpId qp, std::uint64_t bps) {
    qps_[qp].rate = bps;
    qps_[qp].cost = byte_cost(bps);
  }

  void activate(Picos now, QpId qp, Packet pkt) {
    sync(now);
    Qp& q = qps_[qp];
    q.bytes = pkt.bytes;
    active_bps_ += q.rate;
    update_sigma();
    push(qp, std::max(q.finish, v_));
  }

  std::size_t dequeue(Picos now, std::span<Grant> out, PacketSource& src) {
    const Picos limit = now + config_.lookahead;
    std::size_t n = 0;
    while (n < out.size()) {
      const Picos at = link_.start(now);
      if (at > limit) break;
      sync(at);
      while (!waiting_.empty() && waiting_.top().key <= v_) {
        const QpId qp = waiting_.top().qp;
        waiting_.pop();
        to_eligible(qp);
      }
      if (eligible_.empty()) {
        if (waiting_.empty()) break;
        const Picos ready = when(waiting_.top().key);
        if (ready > limit) break;
        link_.idle_until(ready);
        continue;
      }
      const QpId qp = eligible_.top().qp;
      eligible_.pop();
      Qp& q = qps_[qp];
      out[n++] = {qp, q.bytes, at, GrantKind::kData};
      link_.occupy(at, q.bytes);
      const Packet next = src.on_grant(qp, q.bytes);
      if (next.bytes == 0) {
        active_bps_ -= q.rate;
        update_sigma();
        continue;
      }
      q.bytes = next.bytes;
      push(qp, q.finish);
    }
    return n;
  }

  Picos next_deadline() const {
    if (!eligible_.empty()) return link_.free_at();
    if (waiting_.empty()) return kNever;
    return std::max(link_.free_at(), when(waiting_.top().key));
  }

  std::size_t bytes_per_qp() const { return sizeof(Qp) + 2 * sizeof(Entry); }

 private:
  struct Qp {
    Picos start = 0;
    Picos finish = 0;
    ByteCost cost = 0;
    std::uint64_t rate = 0;
    std::uint32_t bytes = 0;
  };
  struct Entry {
    Picos key;
    QpId qp;
    bool operator>(const Entry& o) const { return key > o.key; }
  };
  using MinHeap = std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>>;
  static constexpr std::uint64_t kOne = std::uint64_t{1} << 32;

  void push(QpId qp, Picos start) {
    qps_[qp].start = start;
    if (start <= v_) {
      to_eligible(qp);
    } else {
      waiting_.push({start, qp});
    }
  }
  void to_eligible(QpId qp) {
    Qp& q = qps_[qp];
    q.finish = q.start + duration(q.bytes, q.cost);
    eligible_.push({q.finish, qp});
  }
  void sync(Picos t) {
    if (t <= t_v_) return;
    const unsigned __int128 x = static_cast<unsigned __int128>(t - t_v_) * sigma_ + v_frac_;
    v_ += static_cast<Picos>(x >> 32);
    v_frac_ = static_cast<std::uint64_t>(x) & (kOne - 1);
    t_v_ = t;
  }
  void update_sigma() {
    sigma_ = active_bps_ <= config_.link_bps
                 ? kOne
                 : static_cast<std::uint64_t>((static_cast<unsigned __int128>(config_.link_bps) << 32) / active_bps_);
  }
  Picos when(Picos v) const {
    if (v <= v_) return t_v_;
    const unsigned __int128 need = (static_cast<unsigned __int128>(v - v_) << 32) - v_frac_;
    return t_v_ + static_cast<Picos>((need + sigma_ - 1) / sigma_);
  }

  Config config_;
  std::vector<Qp> qps_;
  LinkModel link_;
  MinHeap waiting_;
  MinHeap eligible_;
  Picos t_v_ = 0, v_ = 0;
  std::uint64_t v_frac_ = 0, sigma_ = kOne, active_bps_ = 0;
};

}  // namespace isoroce::sched::bench
