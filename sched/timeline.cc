#include "sched/timeline.h"

#include <algorithm>

namespace isoroce::sched {
namespace {

constexpr unsigned kL = Timeline::kLevelLog2;
constexpr std::uint64_t kMask = SlotArray::kMask;

constexpr std::uint64_t fine_slot(Picos t) { return t >> Timeline::kSlotLog2; }

}  // namespace

// Invariant, with p = next_slot_ and a0/a1/a2 a QP's slot index at each level:
//   level 0 holds a1 == p >> 12 and a0 >= p
//   level 1 holds a2 == p >> 24 and a1 >  p >> 12
//   level 2 holds p >> 24 < a2 < (p >> 24) + 4096
//   heap    holds a2 >= (p >> 24) + 4096
void Timeline::place(QpSlot* qps, std::uint32_t qp, std::uint64_t a0) {
  QpSlot& s = qps[qp];
  const std::uint64_t a1 = a0 >> kL;
  const std::uint64_t a2 = a1 >> kL;
  const std::uint64_t p = next_slot_;
  unsigned level;
  std::uint64_t index;
  if (a1 == p >> kL) {
    level = 0;
    index = a0 & kMask;
  } else if (a2 == p >> (2 * kL)) {
    level = 1;
    index = a1 & kMask;
  } else if (a2 - (p >> (2 * kL)) < SlotArray::kSlots) {
    level = 2;
    index = a2 & kMask;
  } else {
    heap_.push_back({s.start_, qp});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    s.where_ = Where::kHeap;
    return;
  }
  s.slot_ = static_cast<std::uint16_t>(index);
  s.where_ = static_cast<Where>(static_cast<unsigned>(Where::kWheel0) + level);
  levels_[level].push_back(qps, static_cast<std::uint32_t>(index), qp);
}

bool Timeline::insert(QpSlot* qps, std::uint32_t qp) {
  const std::uint64_t a0 = fine_slot(qps[qp].start_);
  if (a0 < next_slot_) return false;
  place(qps, qp, a0);
  return true;
}

void Timeline::place_or_release(QpSlot* qps, std::uint32_t qp, IndexList& due) {
  const std::uint64_t a0 = fine_slot(qps[qp].start_);
  if (a0 < next_slot_) {
    due.push_back(qps, qp);
  } else {
    place(qps, qp, a0);
  }
}

void Timeline::remove(QpSlot* qps, std::uint32_t qp) {
  QpSlot& s = qps[qp];
  switch (s.where_) {
    case Where::kWheel0:
    case Where::kWheel1:
    case Where::kWheel2: {
      const unsigned level = static_cast<unsigned>(s.where_) - static_cast<unsigned>(Where::kWheel0);
      levels_[level].remove(qps, s.slot_, qp);
      break;
    }
    case Where::kHeap: {
      // Rare (a QP due more than seconds ahead being reset): O(heap) is fine.
      auto it = std::find_if(heap_.begin(), heap_.end(),
                             [qp](const HeapEntry& e) { return e.qp == qp; });
      if (it != heap_.end()) {
        *it = heap_.back();
        heap_.pop_back();
        std::make_heap(heap_.begin(), heap_.end(), Later{});
      }
      break;
    }
    default:
      return;
  }
  s.where_ = Where::kIdle;
}

Timeline::Point Timeline::next_point() const {
  const std::uint64_t p = next_slot_;
  const std::uint32_t i0 = levels_[0].find_next(static_cast<std::uint32_t>(p & kMask));
  if (i0 != SlotArray::kNone) return {(p & ~kMask) | i0, 0};
  const std::uint64_t c1 = p >> kL;
  const std::uint32_t from1 = static_cast<std::uint32_t>(c1 & kMask) + 1;
  if (from1 < SlotArray::kSlots) {
    const std::uint32_t i1 = levels_[1].find_next(from1);
    if (i1 != SlotArray::kNone) return {((c1 & ~kMask) | i1) << kL, 1};
  }
  const std::uint64_t c2 = p >> (2 * kL);
  const std::uint32_t i2 = levels_[2].find_circular(static_cast<std::uint32_t>((c2 + 1) & kMask));
  if (i2 != SlotArray::kNone) {
    const std::uint64_t d = (i2 - c2) & kMask;  // 1 .. 4095
    return {(c2 + d) << (2 * kL), 2};
  }
  if (!heap_.empty()) return {(fine_slot(heap_.front().start) >> (2 * kL)) << (2 * kL), 3};
  return {kNoSlot, 0};
}

// Moves next_slot_ forward to `slot`. No QP may sit in a slot in between; the wheel
// slot that `slot` enters at a coarser level is cascaded down.
void Timeline::move_to(QpSlot* qps, std::uint64_t slot, IndexList& due) {
  const std::uint64_t old = next_slot_;
  next_slot_ = slot;
  const std::uint64_t c2 = slot >> (2 * kL);
  if (c2 != old >> (2 * kL)) {
    // Levels 0 and 1 are empty here; level 2's slot for c2 holds only a2 == c2.
    IndexList l = levels_[2].take(static_cast<std::uint32_t>(c2 & kMask));
    while (l.head != kNil) place_or_release(qps, l.pop_front(qps), due);
    while (!heap_.empty() && (fine_slot(heap_.front().start) >> (2 * kL)) - c2 < SlotArray::kSlots) {
      const std::uint32_t qp = heap_.front().qp;
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      heap_.pop_back();
      place_or_release(qps, qp, due);
    }
  } else if ((slot >> kL) != (old >> kL)) {
    IndexList l = levels_[1].take(static_cast<std::uint32_t>((slot >> kL) & kMask));
    while (l.head != kNil) place_or_release(qps, l.pop_front(qps), due);
  }
}

void Timeline::advance(QpSlot* qps, Picos v, IndexList& due) {
  const std::uint64_t target = fine_slot(v);
  while (next_slot_ <= target) {
    const Point next = next_point();
    if (next.slot > target) {
      move_to(qps, target + 1, due);
      return;
    }
    if (next.level == 0) {
      IndexList l = levels_[0].take(static_cast<std::uint32_t>(next.slot & kMask));
      due.append(qps, l);
      move_to(qps, next.slot + 1, due);
    } else {
      // A coarser slot: by the invariant it starts after next_slot_.
      move_to(qps, next.slot, due);
    }
  }
}

Picos Timeline::next_start() const {
  const Point next = next_point();
  if (next.slot == kNoSlot) return kNever;
  return next.slot << kSlotLog2;
}

bool Timeline::empty() const {
  return levels_[0].empty() && levels_[1].empty() && levels_[2].empty() && heap_.empty();
}

}  // namespace isoroce::sched
