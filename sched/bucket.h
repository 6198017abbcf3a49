// The slots of the timing wheel as chains of cache-line buckets of QP ids, as eRPC's
// timing_wheel.h keeps them: a 64-byte bucket holds seven entries (QP id and the low
// bits of its start slot) and the index of the next bucket of the same slot. A slot's
// chain is its head bucket (the only one that may be partly filled) followed by full
// buckets, so a push writes one line, and moving a whole slot down a level (a cascade)
// or releasing it reads its entries seven to a line without touching any QP's state:
// at a million QPs that state is out of cache, and a list threaded through it made
// every cascade a chain of dependent misses.
//
// Buckets come from one array sized for the worst case (every QP on the timeline at
// once, every slot's head bucket nearly empty) but only touched as they are first
// used; freed buckets go on a LIFO free list, so the buckets in use stay few and warm.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "sched/bitmap.h"
#include "sched/index_list.h"

namespace isoroce::sched {

struct WheelEntry {
  std::uint32_t qp;
  std::uint32_t low;  // low 32 bits of the QP's fine-slot index (start time >> 6)
};

struct alignas(64) Bucket {
  static constexpr std::uint32_t kEntries = 7;
  std::uint32_t next;  // next bucket of the same slot; kNil ends the chain
  // (Entries used: BucketSlots::counts_ keeps the head bucket's; the others are full.)
  std::uint32_t unused;
  WheelEntry entries[kEntries];
};

static_assert(sizeof(Bucket) == 64 && alignof(Bucket) == 64, "one bucket per cache line");
static_assert(std::is_trivially_default_constructible_v<Bucket>, "allocating buckets must not touch them");

class BucketPool {
 public:
  // Enough buckets for `entries` entries spread over at most `slots` non-empty slots,
  // plus the one a cascade frees only after placing its entries.
  BucketPool(std::size_t entries, std::size_t slots)
      : capacity_((entries + (Bucket::kEntries - 1) * std::min(entries, slots)) / Bucket::kEntries + 2),
        buckets_(new Bucket[capacity_]) {}

  std::size_t capacity() const { return capacity_; }
  // Buckets ever touched (the high-water mark).
  std::size_t touched() const { return used_; }

  Bucket& operator[](std::uint32_t b) { return buckets_[b]; }
  const Bucket& operator[](std::uint32_t b) const { return buckets_[b]; }

  std::uint32_t alloc() {
    if (free_ != kNil) {
      const std::uint32_t b = free_;
      free_ = buckets_[b].next;
      return b;
    }
    assert(used_ < capacity_ && "more entries than the timeline was sized for");
    return used_++;
  }

  void release(std::uint32_t b) {
    buckets_[b].next = free_;
    free_ = b;
  }

 private:
  std::size_t capacity_;
  std::unique_ptr<Bucket[]> buckets_;
  std::uint32_t used_ = 0;
  std::uint32_t free_ = kNil;
};

// One level of the wheel: 4096 slots, each a chain of buckets, and a bitmap of the
// non-empty ones.
class BucketSlots {
 public:
  static constexpr std::uint32_t kLog2Slots = Bitmap4096::kLog2Bits;
  static constexpr std::uint32_t kSlots = Bitmap4096::kBits;
  static constexpr std::uint32_t kMask = kSlots - 1;
  static constexpr std::uint32_t kNone = Bitmap4096::kNone;

  BucketSlots() {
    for (std::uint32_t& h : heads_) h = kNil;
    for (std::uint8_t& c : counts_) c = 0;
  }

  bool empty() const { return bits_.empty(); }
  bool occupied(std::uint32_t slot) const { return bits_.test(slot); }
  std::uint32_t find_next(std::uint32_t from) const { return bits_.find_next(from); }
  std::uint32_t find_circular(std::uint32_t from) const { return bits_.find_circular(from); }

  // Only stores to the bucket: its fill count is read from counts_, so a push never
  // waits for the bucket's line.
  void push(BucketPool& pool, std::uint32_t slot, WheelEntry e) {
    const std::uint32_t h = heads_[slot];
    const std::uint32_t c = counts_[slot];
    if (c - 1 < Bucket::kEntries - 1) {  // a head bucket with room (1 <= c < kEntries)
      pool[h].entries[c] = e;
      counts_[slot] = static_cast<std::uint8_t>(c + 1);
      return;
    }
    if (h == kNil) bits_.set(slot);
    const std::uint32_t n = pool.alloc();
    Bucket& b = pool[n];
    b.next = h;
    b.entries[0] = e;
    heads_[slot] = n;
    counts_[slot] = 1;
  }

  // Asks for `slot`'s head bucket (the first line a cascade of it reads).
  void prefetch(const BucketPool& pool, std::uint32_t slot) const {
    const std::uint32_t h = heads_[slot];
    if (h != kNil) __builtin_prefetch(&pool[h]);
  }

  // A slot's chain: its head bucket holds head_count entries, every later one kEntries.
  struct Chain {
    std::uint32_t head;  // kNil: empty
    std::uint32_t head_count;
  };

  // Empties `slot` and returns its chain; the caller releases each bucket to the pool
  // once it has read it.
  Chain take(std::uint32_t slot) {
    const Chain c{heads_[slot], counts_[slot]};
    heads_[slot] = kNil;
    counts_[slot] = 0;
    bits_.clear(slot);
    return c;
  }

  // Removes `qp`'s entry from `slot`, filling the hole with the head's last entry.
  // Walks the chain: only control operations do it. False if not there.
  bool remove(BucketPool& pool, std::uint32_t slot, std::uint32_t qp) {
    const std::uint32_t h = heads_[slot];
    for (std::uint32_t b = h, n = counts_[slot]; b != kNil; b = pool[b].next, n = Bucket::kEntries) {
      Bucket& bk = pool[b];
      for (std::uint32_t k = 0; k < n; ++k) {
        if (bk.entries[k].qp != qp) continue;
        Bucket& head = pool[h];
        const std::uint32_t c = counts_[slot] - 1u;
        bk.entries[k] = head.entries[c];
        counts_[slot] = static_cast<std::uint8_t>(c);
        if (c == 0) {
          heads_[slot] = head.next;
          pool.release(h);
          if (heads_[slot] == kNil) {
            bits_.clear(slot);
          } else {
            counts_[slot] = Bucket::kEntries;  // the next bucket of a chain is full
          }
        }
        return true;
      }
    }
    return false;
  }

 private:
  std::uint32_t heads_[kSlots];
  std::uint8_t counts_[kSlots];  // entries in each slot's head bucket (0: empty slot)
  Bitmap4096 bits_;
};

}  // namespace isoroce::sched
