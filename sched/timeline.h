// Tassel's timeline: when each waiting QP becomes eligible (its WF2Q+ start time S,
// in system virtual time). A three-level hierarchical timing wheel holds the next
// 4.4 seconds (fine level 64 ps x 4096 = 262 ns, middle 262 ns x 4096 = 1.07 ms,
// coarse 1.07 ms x 4096 = 4.4 s, each level aligned on its parent's slot as in the
// Linux timer wheel); a binary heap holds QPs due even later. A QP is inserted once
// per packet and moves down at most twice (cascading), so insertion and release are
// amortized O(1); bitmaps skip empty slots, so no idle slot or QP is ever scanned.
//
// Eligibility has the resolution of a fine slot: a QP is released once system time
// reaches the start of its slot, at most 64 ps early; the next start is computed from
// the exact S, so this never accumulates.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sched/index_list.h"
#include "sched/qp_slot.h"
#include "sched/slot_array.h"
#include "sched/time.h"

namespace isoroce::sched {

class Timeline {
 public:
  static constexpr unsigned kSlotLog2 = 6;  // fine slot: 64 ps
  static constexpr unsigned kLevelLog2 = SlotArray<IndexStack>::kLog2Slots;
  static constexpr unsigned kLevels = 3;
  static constexpr Picos kSlotPicos = Picos{1} << kSlotLog2;
  // Everything starting earlier than now + kWheelSpan lives on the wheel.
  static constexpr Picos kWheelSpan = Picos{1} << (kSlotLog2 + kLevels * kLevelLog2);

  // Keys qps[qp] by its start time qps[qp].time_. False (and nothing stored) if that
  // is in a slot already released: the QP is eligible now.
  bool insert(QpSlot* qps, std::uint32_t qp) {
    const std::uint64_t a0 = qps[qp].time_ >> kSlotLog2;
    if (a0 < next_slot_) return false;
    place(qps, qp, a0);
    return true;
  }

  // Removes qps[qp], which must be on the timeline. Walks its slot's list.
  void remove(QpSlot* qps, std::uint32_t qp);

  // Calls release(qp) for every QP whose slot starts at or before system time `v`.
  // The QP is off the timeline by then; release must not call back into it.
  template <class Release>
  void advance(QpSlot* qps, Picos v, Release&& release) {
    const std::uint64_t target = v >> kSlotLog2;
    if (target + 1 < next_due_ && ((target + 1) >> (2 * kL)) == (next_slot_ >> (2 * kL))) {
      // No occupied slot starts at or before target + 1, and no coarse slot (with the
      // heap behind it) is entered: only the cursor moves.
      if (target >= next_slot_) next_slot_ = target + 1;
      return;
    }
    while (true) {
      const Point next = next_point();
      if (next.slot > target) {
        next_due_ = next.slot;
        if (target >= next_slot_) move_to(qps, target + 1, release);
        return;
      }
      if (next.level == 0) {
        IndexStack l = levels_[0].take(static_cast<std::uint32_t>(next.slot & kMask));
        next_slot_ = next.slot;  // within the current middle slot: no cascade
        drain(qps, l, release);
        move_to(qps, next.slot + 1, release);
      } else {
        move_to(qps, next.slot, release);  // a coarser slot: starts after next_slot_
      }
    }
  }

  // The start of the earliest occupied slot, or earlier (a lower bound on every S);
  // kNever if the timeline is empty.
  Picos next_start() const {
    if (next_due_ == kNoSlot || empty()) return kNever;
    return next_due_ << kSlotLog2;
  }

  bool empty() const;
  std::size_t heap_size() const { return heap_.size(); }

 private:
  struct HeapEntry {
    Picos start;
    std::uint32_t qp;
  };
  struct Later {
    bool operator()(const HeapEntry& a, const HeapEntry& b) const { return a.start > b.start; }
  };
  struct Point {
    std::uint64_t slot;  // fine-slot index
    unsigned level;      // 0: an occupied fine slot; 1, 2: a wheel slot to cascade; 3: heap
  };
  static constexpr std::uint64_t kNoSlot = ~std::uint64_t{0};
  static constexpr std::uint64_t kMask = SlotArray<IndexStack>::kMask;
  static constexpr unsigned kL = kLevelLog2;

  Point next_point() const {
    const std::uint64_t p = next_slot_;
    const std::uint32_t i0 = levels_[0].find_next(static_cast<std::uint32_t>(p & kMask));
    if (i0 != SlotArray<IndexStack>::kNone) return {(p & ~kMask) | i0, 0};
    return next_coarse_point();
  }
  Point next_coarse_point() const;

  // Invariant, with p = next_slot_ and a0/a1/a2 a QP's slot index at each level:
  //   level 0 holds a1 == p >> 12 and a0 >= p
  //   level 1 holds a2 == p >> 24 and a1 >  p >> 12
  //   level 2 holds p >> 24 < a2 < (p >> 24) + 4096
  //   heap    holds a2 >= (p >> 24) + 4096
  // and next_due_ is at most the first fine slot of the earliest occupied slot.
  void place(QpSlot* qps, std::uint32_t qp, std::uint64_t a0) {
    QpSlot& s = qps[qp];
    const std::uint64_t a1 = a0 >> kL;
    const std::uint64_t p = next_slot_;
    if (a1 == p >> kL) {
      s.slot_ = static_cast<std::uint16_t>(a0 & kMask);
      s.where_ = Where::kWheel0;
      levels_[0].push(qps, static_cast<std::uint32_t>(a0 & kMask), qp);
      next_due_ = std::min(next_due_, a0);
      return;
    }
    place_coarse(qps, qp, a0);
  }
  void place_coarse(QpSlot* qps, std::uint32_t qp, std::uint64_t a0);
  void pop_heap_entry(std::uint32_t* qp);

  template <class Release>
  void drain(QpSlot* qps, IndexStack l, Release& release) {
    std::uint32_t i = l.head;
    while (i != kNil) {
      const std::uint32_t n = qps[i].next_;
      if (n != kNil) __builtin_prefetch(&qps[n], 1);
      release(i);
      i = n;
    }
  }

  template <class Release>
  void place_all(QpSlot* qps, IndexStack l, Release& release) {
    std::uint32_t i = l.head;
    while (i != kNil) {
      const std::uint32_t n = qps[i].next_;
      if (n != kNil) __builtin_prefetch(&qps[n], 1);
      const std::uint64_t a0 = qps[i].time_ >> kSlotLog2;
      if (a0 < next_slot_) {
        release(i);
      } else {
        place(qps, i, a0);
      }
      i = n;
    }
  }

  // Moves next_slot_ forward to `slot`. No QP may sit in a slot in between; the wheel
  // slot that `slot` enters at a coarser level is cascaded down.
  template <class Release>
  void move_to(QpSlot* qps, std::uint64_t slot, Release& release) {
    const std::uint64_t old = next_slot_;
    next_slot_ = slot;
    const std::uint64_t c2 = slot >> (2 * kL);
    if (c2 != old >> (2 * kL)) {
      // Levels 0 and 1 are empty here; level 2's slot for c2 holds only a2 == c2.
      place_all(qps, levels_[2].take(static_cast<std::uint32_t>(c2 & kMask)), release);
      while (!heap_.empty() && (heap_.front().start >> (kSlotLog2 + 2 * kL)) - c2 < SlotArray<IndexStack>::kSlots) {
        std::uint32_t qp;
        pop_heap_entry(&qp);
        IndexStack one;
        one.push(qps, qp);
        place_all(qps, one, release);
      }
    } else if ((slot >> kL) != (old >> kL)) {
      place_all(qps, levels_[1].take(static_cast<std::uint32_t>((slot >> kL) & kMask)), release);
    }
  }

  SlotArray<IndexStack> levels_[kLevels];
  std::vector<HeapEntry> heap_;
  std::uint64_t next_slot_ = 0;     // first fine slot not yet released
  std::uint64_t next_due_ = kNoSlot;  // no occupied slot, at any level, starts before this
};

}  // namespace isoroce::sched
