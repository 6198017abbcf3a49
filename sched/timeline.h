// Tassel's timeline: when each waiting QP becomes eligible (its WF2Q+ start time S,
// in system virtual time). A three-level hierarchical timing wheel holds the next
// 4.4 seconds (fine level 64 ps x 4096 = 262 ns, middle 262 ns x 4096 = 1.07 ms,
// coarse 1.07 ms x 4096 = 4.4 s, each level aligned on its parent's slot as in the
// Linux timer wheel); a binary heap holds QPs due even later. A QP is inserted once
// per packet and moves down at most twice (cascading), so insertion and release are
// amortized O(1); bitmaps skip empty slots, so no idle slot or QP is ever scanned.
//
// Middle and coarse slots are chains of cache-line buckets of QP ids (bucket.h), each
// id with the low bits of its start slot, so a cascade reads seven QPs per cache line
// and touches no QP's state until the QP reaches the fine level: at a million QPs
// that state is in memory, and lists threaded through it made every cascade a chain
// of dependent misses. Fine slots are lists threaded through the QPs (index_list.h):
// their QPs are released within 262 ns, and putting one there is the write that
// brings its state into cache for the release. Which level holds a QP follows from
// its start and the cursor (level_of), so moving down writes nothing else to it.
//
// Eligibility has the resolution of a fine slot: a QP is released once system time
// reaches the start of its slot, at most 64 ps early; the next start is computed from
// the exact S, so this never accumulates.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <vector>

#include "sched/bucket.h"
#include "sched/index_list.h"
#include "sched/qp_slot.h"
#include "sched/slot_array.h"
#include "sched/time.h"

namespace isoroce::sched {

class Timeline {
 public:
  static constexpr unsigned kSlotLog2 = 6;  // fine slot: 64 ps
  static constexpr unsigned kLevelLog2 = BucketSlots::kLog2Slots;
  static constexpr unsigned kLevels = 3;
  static constexpr Picos kSlotPicos = Picos{1} << kSlotLog2;
  // Everything starting earlier than now + kWheelSpan lives on the wheel.
  static constexpr Picos kWheelSpan = Picos{1} << (kSlotLog2 + kLevels * kLevelLog2);

  // Room for QPs 0 .. max_qps - 1, all on the timeline at once.
  explicit Timeline(std::uint32_t max_qps)
      : pool_(max_qps, (kLevels - 1) * BucketSlots::kSlots), prefetch_qps_(max_qps > kCachedQps) {}

  // Up to this many QPs (1 MiB of QpSlot) the per-QP state stays in cache, and a cascade
  // does not prefetch it.
  static constexpr std::uint32_t kCachedQps = (1u << 20) / sizeof(QpSlot);

  // Keys qps[qp] by its start time qps[qp].time_. False (and nothing stored) if that
  // is in a slot already released: the QP is eligible now.
  bool insert(QpSlot* qps, std::uint32_t qp) {
    const std::uint64_t a0 = qps[qp].time_ >> kSlotLog2;
    if (a0 < next_slot_) return false;
    qps[qp].where_ = Where::kTimeline;
    place(qps, qp, a0);
    return true;
  }

  // Removes qps[qp], which must be on the timeline. Walks its slot's chain.
  void remove(QpSlot* qps, std::uint32_t qp);

  // Where on the timeline qps[qp] waits: kWheel0, kWheel1, kWheel2 or kHeap.
  Where where(const QpSlot* qps, std::uint32_t qp) const {
    return static_cast<Where>(static_cast<unsigned>(Where::kWheel0) + level_of(qps[qp].time_ >> kSlotLog2));
  }

  // Calls release(qp) for every QP whose slot starts at or before system time `v`.
  // The QP is off the timeline by then; release must not call back into it.
  template <class Release>
  void advance(QpSlot* qps, Picos v, Release&& release) {
    const std::uint64_t target = v >> kSlotLog2;
    if (target + 1 < next_due_ && same_coarse(target + 1, next_slot_)) {
      // No occupied slot starts at or before target + 1, and no coarse slot (with the
      // heap behind it) is entered: only the cursor moves. (Entering another middle
      // slot, the fine level is empty: its slots were all released, and releasing a
      // slot clears its bit.)
      if (target >= next_slot_) {
        assert(same_middle(target + 1, next_slot_) || level0_.empty());
        next_slot_ = target + 1;
      }
      return;
    }
    release_through(qps, target, release);
  }

  // The start of the earliest occupied slot, or earlier (a lower bound on every S);
  // kNever if the timeline is empty.
  Picos next_start() const {
    if (next_due_ == kNoSlot || empty()) return kNever;
    return next_due_ << kSlotLog2;
  }

  bool empty() const;
  // For tests: the fine level's invariant that releasing relies on: a fine slot's bit
  // is set iff its list is not empty (the bitmap's summary matching its words), and
  // no slot below next_slot_ is occupied.
  bool fine_level_consistent() const;
  std::size_t heap_size() const { return heap_.size(); }
  // Memory of the buckets: reserved (the worst case) and touched so far.
  std::size_t bucket_bytes_reserved() const { return pool_.capacity() * sizeof(Bucket); }
  std::size_t bucket_bytes_touched() const { return pool_.touched() * sizeof(Bucket); }

 private:
  struct HeapEntry {
    std::uint64_t a0;  // fine-slot index of the start
    std::uint32_t qp;
  };
  struct Later {
    bool operator()(const HeapEntry& a, const HeapEntry& b) const { return a.a0 > b.a0; }
  };
  struct Point {
    std::uint64_t slot;  // fine-slot index
    unsigned level;      // 0: an occupied fine slot; 1, 2: a wheel slot to cascade; 3: heap
  };
  static constexpr std::uint64_t kNoSlot = ~std::uint64_t{0};
  static constexpr std::uint64_t kMask = BucketSlots::kMask;
  static constexpr unsigned kL = kLevelLog2;

  // advance() past its fast path: releases every slot up to `target`.
  template <class Release>
  void release_through(QpSlot* qps, std::uint64_t target, Release& release) {
    // next_due_ bounds every occupied slot from below: if it is an occupied fine slot
    // of the current middle slot, it is the earliest one, and no search is needed.
    // (Were it emptied by remove(), releasing it releases nothing and finds the next
    // occupied slot after it, which is what a search from next_slot_ would find.)
    std::uint64_t slot = next_due_;
    bool fine = slot <= target && same_middle(slot, next_slot_);
    while (true) {
      if (!fine) {
        const Point next = next_point();
        if (next.slot > target) {
          next_due_ = next.slot;
          if (target >= next_slot_) move_to(qps, target + 1, release);
          return;
        }
        if (next.level != 0) {
          move_to(qps, next.slot, release);  // a coarser slot: starts after next_slot_
          continue;
        }
        slot = next.slot;
      }
      fine = false;
      // Occupied fine slots of the current middle slot, up to target.
      // (next_slot_ stays where it was until the loop ends: releasing only pushes to
      // the calendar, and move_to below needs only its middle slot, which is slot's.)
      while (true) {
        // (Releasing only pushes to the calendar: the next fine slot can be found first.
        // Slots are released in increasing order and each one's bit is cleared, so
        // no bit below the slot is set: the next one is the lowest set bit left.)
        std::uint32_t i0;
        drain(qps, level0_.take_lowest(static_cast<std::uint32_t>(slot & kMask), i0), release);
        if (i0 == Bitmap4096::kNone) break;
        const std::uint64_t later = (slot & ~kMask) | i0;
        if (later > target) {
          // The earliest occupied slot, in this middle slot: no cascade on the way.
          next_due_ = later;
          next_slot_ = target + 1;
          return;
        }
        slot = later;
      }
      move_to(qps, slot + 1, release);
    }
  }

  Point next_point() const {
    const std::uint64_t p = next_slot_;
    const std::uint32_t i0 = level0_.find_next(static_cast<std::uint32_t>(p & kMask));
    if (i0 != Bitmap4096::kNone) return {(p & ~kMask) | i0, 0};
    return next_coarse_point();
  }
  Point next_coarse_point() const;

  // Invariant, with p = next_slot_ and a0/a1/a2 a QP's slot index at each level:
  //   level 0 holds a1 == p >> 12 and a0 >= p
  //   level 1 holds a2 == p >> 24 and a1 >  p >> 12
  //   level 2 holds p >> 24 < a2 < (p >> 24) + 4096
  //   heap    holds a2 >= (p >> 24) + 4096
  // so a QP's place follows from its start and p alone (level_of), and next_due_ is
  // at most the first fine slot of the earliest occupied slot.
  // Whether fine slots a and b lie in the same middle (same coarse) slot.
  static bool same_middle(std::uint64_t a, std::uint64_t b) { return (a ^ b) < (std::uint64_t{1} << kL); }
  static bool same_coarse(std::uint64_t a, std::uint64_t b) { return (a ^ b) < (std::uint64_t{1} << (2 * kL)); }

  unsigned level_of(std::uint64_t a0) const {
    const std::uint64_t p = next_slot_;
    if (same_middle(a0, p)) return 0;
    if (same_coarse(a0, p)) return 1;
    if ((a0 >> (2 * kL)) - (p >> (2 * kL)) < BucketSlots::kSlots) return 2;
    return 3;
  }

  void place(QpSlot* qps, std::uint32_t qp, std::uint64_t a0) {
    const std::uint64_t a1 = a0 >> kL;
    const std::uint64_t p = next_slot_;
    if (same_middle(a0, p)) {
      level0_.push(qps, static_cast<std::uint32_t>(a0 & kMask), qp);
      next_due_ = std::min(next_due_, a0);
      return;
    }
    if (same_coarse(a0, p)) {
      middle_.push(pool_, static_cast<std::uint32_t>(a1 & kMask), {qp, static_cast<std::uint32_t>(a0)});
      if ((a1 << kL) < next_due_) [[unlikely]] next_due_ = a1 << kL;  // (usually a fine slot is due first)
      return;
    }
    place_far(qp, a0);
  }
  void place_far(std::uint32_t qp, std::uint64_t a0);
  HeapEntry pop_heap_entry();

  template <class Release>
  void drain(QpSlot* qps, IndexStack l, Release& release) {
    for (std::uint32_t i = l.head; i != kNil;) {
      const std::uint32_t n = qps[i].next_;
      release(i);
      i = n;
    }
  }

  // Places the entries of a chain taken from a coarser level, whose slot starts at
  // fine slot `base`; `low_mask` selects the bits of each entry's start below it.
  template <class Release>
  void place_all(QpSlot* qps, BucketSlots::Chain chain, std::uint64_t base, std::uint64_t low_mask, Release& release) {
    for (std::uint32_t b = chain.head, count = chain.head_count; b != kNil; count = Bucket::kEntries) {
      const Bucket& bucket = pool_[b];
      const std::uint32_t next = bucket.next;
      if (next != kNil) __builtin_prefetch(&pool_[next]);
      for (std::uint32_t k = 0; k < count; ++k) {
        const WheelEntry e = bucket.entries[k];
        const std::uint64_t a0 = base | (e.low & low_mask);
        if (a0 < next_slot_) {
          release(e.qp);
        } else {
          place(qps, e.qp, a0);
        }
      }
      pool_.release(b);
      b = next;
    }
  }

  // place_all for a middle slot that next_slot_ has just entered: every entry is due
  // in it, so each goes to its fine slot (or is released), no level to choose.
  // The fine level is empty when it begins (move_to's precondition), so the earliest
  // slot it fills is found once at the end rather than kept per entry.
  template <class Release>
  void place_all_fine(QpSlot* qps, BucketSlots::Chain chain, std::uint64_t base, Release& release) {
    // Entered at its first fine slot (a cascade found by next_point, the common case):
    // no entry can be due already, and none is compared with next_slot_.
    if (next_slot_ == base) {
      place_chain_fine<false>(qps, chain, base, release);
    } else {
      place_chain_fine<true>(qps, chain, base, release);
    }
    const std::uint32_t first = level0_.find_next(0);
    if (first != Bitmap4096::kNone) next_due_ = std::min(next_due_, base | first);
  }

  template <bool kMayBeDue, class Release>
  void place_chain_fine(QpSlot* qps, BucketSlots::Chain chain, std::uint64_t base, Release& release) {
    for (std::uint32_t b = chain.head, count = chain.head_count; b != kNil; count = Bucket::kEntries) {
      const Bucket& bucket = pool_[b];
      const std::uint32_t next = bucket.next;
      if (next != kNil) __builtin_prefetch(&pool_[next]);
      // Each entry's push below writes its QP's line: ask for all of them first,
      // so the bucket's misses overlap instead of following one another (when the
      // QPs' state is too large to stay in cache).
      if (prefetch_qps_) {
        for (std::uint32_t k = 0; k < count; ++k) __builtin_prefetch(&qps[bucket.entries[k].qp], 1);
      }
      auto place = [&](const WheelEntry e) {
        if constexpr (kMayBeDue) {
          if ((base | (e.low & kMask)) < next_slot_) {
            release(e.qp);
            return;
          }
        }
        level0_.push_set(qps, e.low & kMask, e.qp);
      };
      if (count == Bucket::kEntries) {
        // Every bucket after the head is full: seven entries, a loop the compiler
        // unrolls (no count to test per entry).
        for (std::uint32_t k = 0; k < Bucket::kEntries; ++k) place(bucket.entries[k]);
      } else {
        for (std::uint32_t k = 0; k < count; ++k) place(bucket.entries[k]);
      }
      pool_.release(b);
      b = next;
    }
  }

  // Moves next_slot_ forward to `slot`. No QP may sit in a slot in between; the wheel
  // slot that `slot` enters at a coarser level is cascaded down.
  template <class Release>
  void move_to(QpSlot* qps, std::uint64_t slot, Release& release) {
    const std::uint64_t old = next_slot_;
    next_slot_ = slot;
    const std::uint64_t c2 = slot >> (2 * kL);
    // Another middle slot: the fine level is empty (its slots all released, their
    // bits cleared).
    assert(same_middle(slot, old) || level0_.empty());
    if (c2 != old >> (2 * kL)) {
      // Levels 0 and 1 are empty here; level 2's slot for c2 holds only a2 == c2.
      place_all(qps, coarse_.take(static_cast<std::uint32_t>(c2 & kMask)), c2 << (2 * kL),
                (std::uint64_t{1} << (2 * kL)) - 1, release);
      while (!heap_.empty() && (heap_.front().a0 >> (2 * kL)) - c2 < BucketSlots::kSlots) {
        const HeapEntry e = pop_heap_entry();
        if (e.a0 < next_slot_) {
          release(e.qp);
        } else {
          place(qps, e.qp, e.a0);
        }
      }
    } else if ((slot >> kL) != (old >> kL)) {
      const std::uint64_t c1 = slot >> kL;
      // The next middle slot's cascade begins with a miss on its head bucket: ask
      // for it now, a middle slot (262 ns of system time) ahead.
      middle_.prefetch(pool_, static_cast<std::uint32_t>((c1 + 1) & kMask));
      place_all_fine(qps, middle_.take(static_cast<std::uint32_t>(c1 & kMask)), c1 << kL, release);
    }
  }

  BucketPool pool_;
  // Fine: lists threaded through the QPs. No bit below next_slot_ is set (slots are
  // released in order, each clearing its bit: fine_level_consistent() checks it).
  SlotArray<IndexStack> level0_;
  BucketSlots middle_;            // chains of buckets of QP ids
  BucketSlots coarse_;
  std::vector<HeapEntry> heap_;
  std::uint64_t next_slot_ = 0;     // first fine slot not yet released
  std::uint64_t next_due_ = kNoSlot;  // no occupied slot, at any level, starts before this
  bool prefetch_qps_;                 // more QPs than kCachedQps
};

}  // namespace isoroce::sched
