#include "sched/timeline.h"

namespace isoroce::sched {

// Levels 1, 2 and the heap (level 0 is inline in place()).
void Timeline::place_coarse(QpSlot* qps, std::uint32_t qp, std::uint64_t a0) {
  QpSlot& s = qps[qp];
  const std::uint64_t a1 = a0 >> kL;
  const std::uint64_t a2 = a1 >> kL;
  const std::uint64_t p = next_slot_;
  unsigned level;
  std::uint64_t index;
  std::uint64_t point;
  if (a2 == p >> (2 * kL)) {
    level = 1;
    index = a1 & kMask;
    point = a1 << kL;
  } else if (a2 - (p >> (2 * kL)) < SlotArray<IndexStack>::kSlots) {
    level = 2;
    index = a2 & kMask;
    point = a2 << (2 * kL);
  } else {
    heap_.push_back({s.time_, qp});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    s.where_ = Where::kHeap;
    next_due_ = std::min(next_due_, a2 << (2 * kL));
    return;
  }
  s.slot_ = static_cast<std::uint16_t>(index);
  s.where_ = static_cast<Where>(static_cast<unsigned>(Where::kWheel0) + level);
  levels_[level].push(qps, static_cast<std::uint32_t>(index), qp);
  next_due_ = std::min(next_due_, point);
}

void Timeline::pop_heap_entry(std::uint32_t* qp) {
  *qp = heap_.front().qp;
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  heap_.pop_back();
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
      // Rare (a QP due seconds ahead being reset): O(heap) is fine.
      auto it = std::find_if(heap_.begin(), heap_.end(), [qp](const HeapEntry& e) { return e.qp == qp; });
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
  // next_due_ stays a lower bound.
}

Timeline::Point Timeline::next_coarse_point() const {
  const std::uint64_t p = next_slot_;
  const std::uint64_t c1 = p >> kL;
  const std::uint32_t from1 = static_cast<std::uint32_t>(c1 & kMask) + 1;
  if (from1 < SlotArray<IndexStack>::kSlots) {
    const std::uint32_t i1 = levels_[1].find_next(from1);
    if (i1 != SlotArray<IndexStack>::kNone) return {((c1 & ~kMask) | i1) << kL, 1};
  }
  const std::uint64_t c2 = p >> (2 * kL);
  const std::uint32_t i2 = levels_[2].find_circular(static_cast<std::uint32_t>((c2 + 1) & kMask));
  if (i2 != SlotArray<IndexStack>::kNone) {
    const std::uint64_t d = (i2 - c2) & kMask;  // 1 .. 4095
    return {(c2 + d) << (2 * kL), 2};
  }
  if (!heap_.empty()) return {(heap_.front().start >> (kSlotLog2 + 2 * kL)) << (2 * kL), 3};
  return {kNoSlot, 0};
}

bool Timeline::empty() const {
  return levels_[0].empty() && levels_[1].empty() && levels_[2].empty() && heap_.empty();
}

}  // namespace isoroce::sched
