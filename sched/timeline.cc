#include "sched/timeline.h"

namespace isoroce::sched {

// Level 2 and the heap (levels 0 and 1 are inline in place()).
void Timeline::place_far(std::uint32_t qp, std::uint64_t a0) {
  const std::uint64_t a2 = a0 >> (2 * kL);
  const std::uint64_t c2 = next_slot_ >> (2 * kL);
  if (a2 - c2 < BucketSlots::kSlots) {
    coarse_.push(pool_, static_cast<std::uint32_t>(a2 & kMask), {qp, static_cast<std::uint32_t>(a0)});
  } else {
    heap_.push_back({a0, qp});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  next_due_ = std::min(next_due_, a2 << (2 * kL));
}

Timeline::HeapEntry Timeline::pop_heap_entry() {
  const HeapEntry e = heap_.front();
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  heap_.pop_back();
  return e;
}

void Timeline::remove(QpSlot* qps, std::uint32_t qp) {
  QpSlot& s = qps[qp];
  if (s.where_ != Where::kTimeline) return;
  const std::uint64_t a0 = s.time_ >> kSlotLog2;
  const unsigned level = level_of(a0);
  if (level == 0) {
    level0_.remove(qps, static_cast<std::uint32_t>(a0 & kMask), qp);
  } else if (level == 1) {
    middle_.remove(pool_, static_cast<std::uint32_t>((a0 >> kL) & kMask), qp);
  } else if (level == 2) {
    coarse_.remove(pool_, static_cast<std::uint32_t>((a0 >> (2 * kL)) & kMask), qp);
  } else {
    // Rare (a QP due seconds ahead being reset): O(heap) is fine.
    auto it = std::find_if(heap_.begin(), heap_.end(), [qp](const HeapEntry& e) { return e.qp == qp; });
    if (it != heap_.end()) {
      *it = heap_.back();
      heap_.pop_back();
      std::make_heap(heap_.begin(), heap_.end(), Later{});
    }
  }
  s.where_ = Where::kIdle;
  // next_due_ stays a lower bound.
}

Timeline::Point Timeline::next_coarse_point() const {
  const std::uint64_t p = next_slot_;
  const std::uint64_t c1 = p >> kL;
  const std::uint32_t from1 = static_cast<std::uint32_t>(c1 & kMask) + 1;
  if (from1 < BucketSlots::kSlots) {
    const std::uint32_t i1 = middle_.find_next(from1);
    if (i1 != BucketSlots::kNone) return {((c1 & ~kMask) | i1) << kL, 1};
  }
  const std::uint64_t c2 = p >> (2 * kL);
  const std::uint32_t i2 = coarse_.find_circular(static_cast<std::uint32_t>((c2 + 1) & kMask));
  if (i2 != BucketSlots::kNone) {
    const std::uint64_t d = (i2 - c2) & kMask;  // 1 .. 4095
    return {(c2 + d) << (2 * kL), 2};
  }
  if (!heap_.empty()) return {(heap_.front().a0 >> (2 * kL)) << (2 * kL), 3};
  return {kNoSlot, 0};
}

bool Timeline::fine_level_consistent() const {
  if (!level0_.consistent()) return false;
  const std::uint32_t cursor = static_cast<std::uint32_t>(next_slot_ & kMask);
  for (std::uint32_t i = 0; i < cursor; ++i)
    if (level0_.occupied(i)) return false;
  return true;
}

bool Timeline::empty() const {
  return level0_.none_from(static_cast<std::uint32_t>(next_slot_ & kMask)) && middle_.empty() && coarse_.empty() &&
         heap_.empty();
}

}  // namespace isoroce::sched
