// Tassel's timeline: when each waiting QP becomes eligible (its WF2Q+ start time S,
// in system virtual time). A three-level hierarchical timing wheel holds the next
// 8.8 seconds (fine level 64 ps x 4096 = 262 ns, middle 262 ns x 4096 = 1.07 ms,
// coarse 1.07 ms x 4096 = 4.4 s, each level aligned on its parent's slot as in the
// Linux timer wheel); a binary heap holds QPs due even later. A QP is inserted once
// per packet and moves down at most twice (cascading), so insertion and release are
// amortized O(1); bitmaps skip empty slots, so no idle slot or QP is ever scanned.
//
// Eligibility has the resolution of a fine slot: a QP is released once system time
// reaches the start of its slot, at most 64 ps early; the next start is computed from
// the exact S, so this never accumulates.
#pragma once

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
  static constexpr unsigned kLevelLog2 = SlotArray::kLog2Slots;
  static constexpr unsigned kLevels = 3;
  static constexpr Picos kSlotPicos = Picos{1} << kSlotLog2;
  // Everything starting earlier than now + kWheelSpan lives on the wheel.
  static constexpr Picos kWheelSpan = Picos{1} << (kSlotLog2 + kLevels * kLevelLog2);

  // Keys qps[qp] by qps[qp].start_. False (and nothing stored) if the start is in a
  // slot already released: the QP is eligible now.
  bool insert(QpSlot* qps, std::uint32_t qp);

  // Removes qps[qp], which must be on the timeline.
  void remove(QpSlot* qps, std::uint32_t qp);

  // Releases, onto `due`, every QP whose slot starts at or before system time `v`.
  // Their where_ is left for the caller to set.
  void advance(QpSlot* qps, Picos v, IndexList& due);

  // The start of the earliest occupied slot (a lower bound on the earliest S), or
  // kNever if the timeline is empty.
  Picos next_start() const;

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

  Point next_point() const;
  void move_to(QpSlot* qps, std::uint64_t slot, IndexList& due);
  void place_or_release(QpSlot* qps, std::uint32_t qp, IndexList& due);
  void place(QpSlot* qps, std::uint32_t qp, std::uint64_t a0);

  SlotArray levels_[kLevels];
  std::vector<HeapEntry> heap_;
  std::uint64_t next_slot_ = 0;  // first fine slot not yet released
};

}  // namespace isoroce::sched
