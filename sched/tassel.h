// The tassel policy: per-QP rate limits enforced as Tassel does (Wang et al., "Fast,
// Scalable, and Accurate Rate Limiter for RDMA NICs", SIGCOMM 2024), with WF2Q+ start
// and finish times (Bennett and Zhang, "WF2Q+: Hierarchical Packet Fair Queueing
// Algorithms", SIGCOMM 1996) on a timing wheel.
//
// Per QP i with rate r_i and ready packet of L bytes:
//   S = max(F_prev, V) when the QP becomes active, S = F_prev while it stays backlogged;
//   F = S + L / r_i, with r_i read when the packet becomes eligible.
// A packet is eligible when S <= V; of the eligible packets the smallest F goes next.
// V, system time, advances with real time scaled by 1 / max(1, Phi), Phi being the sum
// of the active QPs' rates over the link rate: with Phi <= 1 every QP gets exactly its
// rate; with Phi > 1 each QP's packets are stretched by Phi (Tassel's advance of
// delta * max(1, Phi) per packet), so QPs share the link in proportion to their rates
// and the link stays full instead of building a queue.
// QPs without a limit are served round robin when no limited QP is eligible; control
// packets go first.
//
// Tenants (set_tenant; issue 19): from the first QP put in a tenant, the scheduler
// shares hierarchically. Rate limits still decide when a QP may send (S <= V, with V
// now real time: Phi no longer stretches it), but the QPs that may send go to a share
// tree (share_tree.h: tenants by weight, then applications by weight, then QPs in
// turn) instead of the finish-time calendar, and unlimited QPs join them there. So a
// tenant's share of an oversubscribed link follows its weight, not its QP count or
// its limits, and no QP exceeds its limit (a QP that waited in the tree restarts its
// clock: S = max(F, V) for its next packet, so it never catches up in a burst).
// Without any tenant nothing changes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sched/eligible_pool.h"
#include "sched/index_list.h"
#include "sched/link.h"
#include "sched/qp_slot.h"
#include "sched/scheduler.h"
#include "sched/share_tree.h"
#include "sched/timeline.h"

namespace isoroce::sched {

class TasselScheduler final : public Scheduler {
 public:
  explicit TasselScheduler(const Config& config);

  std::string_view name() const override { return "tassel"; }
  void activate(Picos now, QpId qp, Packet pkt) override;
  bool enqueue_control(Picos now, QpId qp, std::uint32_t bytes) override;
  void set_rate(Picos now, QpId qp, std::uint64_t bps) override;
  void set_link_bps(Picos now, std::uint64_t bps) override;
  std::uint64_t link_bps() const override { return config_.link_bps; }
  std::uint64_t rate(QpId qp) const override;
  void deactivate(Picos now, QpId qp) override;
  std::size_t dequeue(Picos now, std::span<Grant> out, PacketSource& src) override;
  Picos next_deadline() const override;
  bool active(QpId qp) const override;
  std::size_t active_qps() const override { return active_; }
  // The QP's state, its rate, and its share of the timeline's buckets (64 B per 7);
  // with tenants or applications, the share tree's per-QP state and nodes as well.
  std::size_t bytes_per_qp() const override {
    return sizeof(QpSlot) + sizeof(std::uint64_t) + sizeof(ByteCost) + (sizeof(Bucket) + Bucket::kEntries - 1) / Bucket::kEntries +
           (tree_ ? tree_->bytes() / qps_.size() : 0);
  }
  std::size_t fixed_bytes() const override;

  // Applications (set_class's app and weight; the class is not used) and tenants:
  // the share tree's levels. set_class alone changes nothing until a QP has a tenant.
  void set_class(Picos now, QpId qp, FlowClass cls, std::uint32_t app, std::uint32_t weight) override;
  void set_tenant(Picos now, QpId qp, std::uint32_t tenant, std::uint32_t weight) override;
  // Whether the share tree is in use (a QP was put in a tenant).
  bool sharing() const { return shared_; }

  // For tests and telemetry: system time, the sum of the active limits, where a QP waits.
  Picos system_time() const { return v_; }
  std::uint64_t active_limited_bps() const { return active_bps_; }
  // Phi = active_limited_bps() / link rate, as trace::Event::kEligible carries it (Q16.16).
  std::uint32_t phi_q16() const { return trace::phi_q16(active_bps_, config_.link_bps); }
  Where where(QpId qp) const {
    if (qp >= qps_.size()) return Where::kIdle;
    return qps_[qp].where_ == Where::kTimeline ? timeline_.where(qps_.data(), qp) : qps_[qp].where_;
  }

 private:
  static constexpr unsigned kSigmaFracBits = 32;
  static constexpr std::uint64_t kSigmaOne = std::uint64_t{1} << kSigmaFracBits;

  [[gnu::always_inline]] void sync(Picos t);
  void update_sigma();
  Picos when_system_time_reaches(Picos v) const;
  // kTraced: whether the trace points are checked. dequeue() instantiates its loop
  // without them when no event is traced (the common case), so a packet pays no
  // trace check; the other entry points keep them.
  template <bool kShared, bool kTraced = true>
  [[gnu::always_inline]] void place_limited(QpSlot* qps, Picos now, QpId qp, Picos start);
  template <bool kShared, bool kTraced = true>
  [[gnu::always_inline]] void make_eligible(QpSlot* qps, Picos now, QpId qp);
  // Sets the QP's ready packet size and its duration at the QP's cost.
  void set_bytes(QpId qp, std::uint32_t bytes) {
    qps_[qp].bytes_ = bytes;
    qps_[qp].dur_ = duration(bytes, costs_[qp]);
  }
  [[gnu::cold, gnu::noinline]] void trace_eligible(Picos now, QpId qp, Picos start) const;
  void remove_from_queue(QpId qp);
  // An unlimited QP that may send: round robin, or the share tree.
  void push_unlimited(QpId qp);
  template <bool kShared, bool kTraced>
  [[gnu::always_inline]] void grant(QpSlot* qps, Picos now, QpId qp, Picos at, Grant& out, PacketSource& src);
  template <bool kShared, bool kTraced>
  std::size_t dequeue_as(Picos now, std::span<Grant> out, PacketSource& src);
  ShareTree& tree();
  void start_sharing(Picos now);

  Config config_;
  std::vector<QpSlot> qps_;
  std::vector<std::uint64_t> rates_;  // bits/s of each QP's limit (kUnlimited: 0)
  std::vector<ByteCost> costs_;       // byte_cost of each QP's limit; 0: unlimited
  Timeline timeline_;
  EligiblePool pool_;
  IndexList unlimited_;  // round robin over active QPs without a limit
  LinkModel link_;
  ControlQueue control_;

  Picos t_v_ = 0;                 // real time at which system time was last computed
  Picos v_ = 0;                   // system time at t_v_
  Picos v_off_ = 0;               // v_ - t_v_ (modulo 2^64): V = t + v_off_ while V is real time
  std::uint64_t v_frac_ = 0;      // fraction of a picosecond of system time
  std::uint64_t sigma_ = kSigmaOne;  // dV/dt = min(1, 1/Phi), 32 fractional bits
  bool real_time_ = true;            // sigma_ == kSigmaOne (a flag: no 64-bit constant to load)
  std::uint64_t active_bps_ = 0;  // sum of the rates of active limited QPs
  std::size_t active_ = 0;
  bool shared_ = false;              // a QP has a tenant: eligible QPs go to tree_
  std::unique_ptr<ShareTree> tree_;  // made by the first set_class with an application or set_tenant
};

}  // namespace isoroce::sched
