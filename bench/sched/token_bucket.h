// Baseline: one token bucket per QP, polled round robin (what a simple software rate
// limiter does). Credit is kept in picoseconds of sending time, capped at two packets;
// a QP sends when it has credit for its packet. Each grant scans QPs from where the
// last one stopped; a scan that finds nobody ready costs a full pass over the QPs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "sched/link.h"
#include "sched/scheduler.h"
#include "sched/time.h"

namespace isoroce::sched::bench {

class TokenBucketRr {
 public:
  explicit TokenBucketRr(const Config& config) : config_(config), qps_(config.max_qps), link_(config.link_bps) {}

  void set_rate(QpId qp, std::uint64_t bps) { qps_[qp].cost = byte_cost(bps); }

  void activate(Picos now, QpId qp, Packet pkt) {
    Qp& q = qps_[qp];
    q.bytes = pkt.bytes;
    q.last = now;
    q.credit = duration(pkt.bytes, q.cost);
    active_.push_back(qp);
  }

  std::size_t dequeue(Picos now, std::span<Grant> out, PacketSource& src) {
    const Picos limit = now + config_.lookahead;
    std::size_t n = 0;
    const std::size_t count = active_.size();
    while (n < out.size() && count != 0) {
      const Picos at = link_.start(now);
      if (at > limit) break;
      bool sent = false;
      for (std::size_t polled = 0; polled < count; ++polled) {
        const QpId qp = active_[next_];
        next_ = next_ + 1 == count ? 0 : next_ + 1;
        Qp& q = qps_[qp];
        const Picos need = duration(q.bytes, q.cost);
        q.credit = std::min(q.credit + (at - std::min(at, q.last)), 2 * need);
        q.last = std::max(q.last, at);
        if (q.credit < need) continue;
        q.credit -= need;
        out[n++] = {qp, q.bytes, at, GrantKind::kData};
        link_.occupy(at, q.bytes);
        q.bytes = src.on_grant(qp, q.bytes).bytes;  // the benchmark's QPs never run dry
        sent = true;
        break;
      }
      if (!sent) {
        ++empty_scans_;
        break;
      }
    }
    return n;
  }

  // No cheap way to know when a bucket fills: the caller polls again later.
  Picos link_free_at() const { return link_.free_at(); }
  std::uint64_t empty_scans() const { return empty_scans_; }
  std::size_t bytes_per_qp() const { return sizeof(Qp) + sizeof(QpId); }

 private:
  struct Qp {
    Picos credit = 0;
    Picos last = 0;
    ByteCost cost = 0;
    std::uint32_t bytes = 0;
  };

  Config config_;
  std::vector<Qp> qps_;
  std::vector<QpId> active_;
  std::size_t next_ = 0;
  LinkModel link_;
  std::uint64_t empty_scans_ = 0;
};

}  // namespace isoroce::sched::bench
