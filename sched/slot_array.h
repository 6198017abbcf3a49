// 4096 intrusive lists of QP indices (the fine slots of the timing wheel, or the buckets
// of the calendar), heads packed into cache lines, with a bitmap of the non-empty ones.
#pragma once

#include <cstdint>

#include "sched/bitmap.h"
#include "sched/index_list.h"

namespace isoroce::sched {

template <class List>
class SlotArray {
 public:
  static constexpr std::uint32_t kLog2Slots = Bitmap4096::kLog2Bits;
  static constexpr std::uint32_t kSlots = Bitmap4096::kBits;
  static constexpr std::uint32_t kMask = kSlots - 1;
  static constexpr std::uint32_t kNone = Bitmap4096::kNone;

  bool empty() const { return bits_.empty(); }
  bool occupied(std::uint32_t slot) const { return bits_.test(slot); }
  // The list of `slot` (for walking it: tests).
  const List& at(std::uint32_t slot) const { return lists_[slot]; }
  std::uint32_t find_next(std::uint32_t from) const { return bits_.find_next(from); }
  std::uint32_t find_circular(std::uint32_t from) const { return bits_.find_circular(from); }

  template <class Node>
  void push(Node* nodes, std::uint32_t slot, std::uint32_t i) {
    List& l = list(slot);
    if (l.empty()) bits_.set(slot);
    l.push(nodes, i);
  }

  // push() setting the slot's bit without first looking whether its list was empty.
  template <class Node>
  void push_set(Node* nodes, std::uint32_t slot, std::uint32_t i) {
    bits_.set(slot);
    list(slot).push(nodes, i);
  }

  template <class Node>
  std::uint32_t pop(Node* nodes, std::uint32_t slot) {
    List& l = list(slot);
    const std::uint32_t i = l.pop(nodes);
    if (l.empty()) bits_.clear(slot);
    return i;
  }

  template <class Node>
  void remove(Node* nodes, std::uint32_t slot, std::uint32_t i) {
    List& l = list(slot);
    l.remove(nodes, i);
    if (l.empty()) bits_.clear(slot);
  }

  // Empties `slot`'s list and returns it, and clears its bit; `next` is the next
  // occupied slot after it (kNone if none). For a caller that empties its slots in
  // increasing order, so that no slot below `slot` is occupied (the fine wheel level).
  List take_lowest(std::uint32_t slot, std::uint32_t& next) {
    next = bits_.clear_lowest(slot);
    return list(slot).take();
  }

  // For tests: the bitmap's summary matches its words, and a slot's bit is set iff
  // its list is not empty.
  bool consistent() const {
    if (!bits_.consistent()) return false;
    for (std::uint32_t i = 0; i < kSlots; ++i)
      if (bits_.test(i) == lists_[i].empty()) return false;
    return true;
  }

  // Whether no slot from `from` on is occupied.
  bool none_from(std::uint32_t from) const { return bits_.find_next(from) == kNone; }

  // Makes `l` the list of `slot`, which must be empty.
  void put(std::uint32_t slot, List l) {
    if (l.empty()) return;
    bits_.set(slot);
    list(slot) = l;
  }

  // Empties `slot` and returns its list.
  List take(std::uint32_t slot) {
    bits_.clear(slot);
    return list(slot).take();
  }

 private:
  static_assert(64 % sizeof(List) == 0, "list heads pack cache lines");

  List& list(std::uint32_t slot) { return lists_[slot]; }

  alignas(64) List lists_[kSlots];
  Bitmap4096 bits_;
};

}  // namespace isoroce::sched
