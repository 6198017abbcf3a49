// The eligible QPs (S <= system time), ordered by WF2Q+ finish time F: a calendar of
// 4096 buckets of 8.192 ns over F, FIFO inside a bucket, with a bitmap to find the
// first occupied bucket in O(1). The calendar spans 33.5 us from its smallest F: a
// later F goes to the last bucket (slow QPs, whose packets last longer than that,
// are served after every faster one, in arrival order among themselves); an F below
// the smallest moves the calendar back if everything held still fits, else goes to
// the first bucket. So "smallest F first" holds
// to 8 ns, which orders 100 Gb/s packets of 100 bytes and up.
//
// The first bucket (the one at first_) is a FIFO of its own, outside the array and
// the bitmap: with many QPs whose packets last longer than the span, most finish
// times land in it (83% of the pushes at 16K QPs: clamped to it, equal to it, or into
// an empty pool), and its pushes and pops then touch neither. Its slot in the array stays empty; when the calendar moves on, the next
// occupied bucket's list becomes the FIFO, and when it moves back, the FIFO goes back
// to its slot. The order is the single-array calendar's, QP for QP
// (EligiblePool.FirstBucketFifoMatchesSingleArrayCalendar). No count is kept: the
// pool is empty when the FIFO and the bitmap are.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "sched/index_list.h"
#include "sched/qp_slot.h"
#include "sched/slot_array.h"
#include "sched/time.h"

namespace isoroce::sched {

class EligiblePool {
  using Buckets = SlotArray<IndexQueue>;

 public:
  static constexpr unsigned kBucketLog2 = 13;  // 8.192 ns
  static constexpr Picos kSpan = Picos{Buckets::kSlots} << kBucketLog2;

  bool empty() const { return front_.empty() && buckets_.empty(); }
  // QPs held (walks every bucket: for tests).
  std::size_t size(const QpSlot* qps) const {
    std::size_t n = count(qps, front_);
    for (std::uint32_t b = buckets_.find_next(0); b != Buckets::kNone;
         b = b + 1 < Buckets::kSlots ? buckets_.find_next(b + 1) : Buckets::kNone)
      n += count(qps, buckets_.at(b));
    return n;
  }

  // Adds qps[qp], keyed by its finish time qps[qp].time_.
  void push(QpSlot* qps, std::uint32_t qp) {
    std::uint64_t key = qps[qp].time_ >> kBucketLog2;
    if (front_.empty() && buckets_.empty()) {
      first_ = last_ = key;
      lo_ = low_bound(key);
    } else if (key < lo_) {
      // Below every key that could move the calendar back: the first bucket (the
      // usual case at 16K QPs; one test instead of the three below).
    } else if (key <= first_) {
      // The first bucket, unless the calendar moves back to key: then the old first
      // bucket goes back into the array and key's bucket is the (empty) first one.
      if (key < first_ && last_ - key <= Buckets::kMask) [[unlikely]] {
        buckets_.put(static_cast<std::uint32_t>(first_ & Buckets::kMask), front_.take());
        first_ = key;  // every key held still fits the window from here
      }
    } else {
      if (key - first_ > Buckets::kMask) key = first_ + Buckets::kMask;
      if (key > last_) {
        last_ = key;
        lo_ = low_bound(key);
      }
      const std::uint32_t slot = static_cast<std::uint32_t>(key & Buckets::kMask);
      qps[qp].slot_ = static_cast<std::uint16_t>(slot);
      qps[qp].where_ = Where::kPool;
      buckets_.push(qps, slot, qp);
      return;
    }
    qps[qp].slot_ = static_cast<std::uint16_t>(first_ & Buckets::kMask);
    qps[qp].where_ = Where::kPool;
    front_.push(qps, qp);
  }

  // Removes and returns a QP of the smallest finish time; kNil if empty.
  std::uint32_t pop(QpSlot* qps) {
    const std::uint32_t qp = pop_leaving_where(qps);
    if (qp != kNil) qps[qp].where_ = Where::kIdle;
    return qp;
  }

  // pop() for a caller that sets the QP's where_ itself (tassel's grant).
  std::uint32_t pop_leaving_where(QpSlot* qps) {
    if (front_.empty()) [[unlikely]] {
      if (buckets_.empty()) return kNil;
      // The first bucket is used up: the next occupied one becomes the first.
      const std::uint32_t here = static_cast<std::uint32_t>(first_ & Buckets::kMask);
      const std::uint32_t slot = buckets_.find_circular(here);
      first_ += (slot - here) & Buckets::kMask;
      front_ = buckets_.take(slot);
    }
    return front_.pop(qps);
  }

  // Removes qps[qp], which must be in the pool. Walks its bucket.
  void remove(QpSlot* qps, std::uint32_t qp) {
    const std::uint32_t slot = qps[qp].slot_;
    if (slot == (first_ & Buckets::kMask)) {
      front_.remove(qps, qp);
    } else {
      buckets_.remove(qps, slot, qp);
    }
    qps[qp].where_ = Where::kIdle;
  }

  // For tests: whether the array's slot of the first bucket is empty (its QPs are in
  // front_, the invariant push, pop and remove rely on).
  bool first_slot_empty() const { return !buckets_.occupied(static_cast<std::uint32_t>(first_ & Buckets::kMask)); }

 private:
  Buckets buckets_;   // every bucket but the first: its slot here stays empty
  IndexQueue front_;  // the bucket of first_ (FIFO): most pushes and pops at 16K QPs
  std::uint64_t first_ = 0;  // bucket of the smallest key; all keys in [first_, first_ + 4095]
  std::uint64_t last_ = 0;   // at least the largest key held
  // low_bound(last_): a key below it goes to the first bucket without moving the
  // calendar back (last_ - key > kMask); lo_ <= first_, as last_ <= first_ + kMask.
  std::uint64_t lo_ = 0;

  static std::uint64_t low_bound(std::uint64_t last) { return last > Buckets::kMask ? last - Buckets::kMask : 0; }

  static std::size_t count(const QpSlot* qps, IndexQueue l) {
    std::size_t n = 0;
    for (std::uint32_t i = l.head; i != kNil; i = qps[i].next_) ++n;
    return n;
  }
};

}  // namespace isoroce::sched
