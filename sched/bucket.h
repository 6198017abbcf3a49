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
  // (Entries used: the slot's word in BucketSlots keeps the head bucket's; the others
  // are full. BucketSlots reads entry k of bucket b as entry 8 * b + k counted from
  // bucket 0's first: the layout below must stay 8 + 7 * 8 bytes.)
  std::uint32_t unused;
  WheelEntry entries[kEntries];
};

static_assert(sizeof(Bucket) == 64 && alignof(Bucket) == 64, "one bucket per cache line");
static_assert(sizeof(WheelEntry) == 8 && offsetof(Bucket, entries) == sizeof(WheelEntry),
              "a bucket is 8 cells of 8 bytes: its link, then its entries");
static_assert(std::is_trivially_default_constructible_v<Bucket>, "allocating buckets must not touch them");

class BucketPool {
 public:
  // Enough buckets for `entries` entries spread over at most `slots` non-empty slots,
  // plus the one a cascade frees only after placing its entries.
  BucketPool(std::size_t entries, std::size_t slots)
      : capacity_((entries + (Bucket::kEntries - 1) * std::min(entries, slots)) / Bucket::kEntries + 2),
        buckets_(new Bucket[capacity_]) {
    // (BucketSlots packs a bucket index in 29 bits: 2^29 buckets hold 3.7 billion entries.)
    assert(capacity_ < (std::size_t{1} << 29));
  }

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
//
// A slot is one 32-bit word: its head bucket's index times 8 plus the entries used in
// that bucket (1 to 7; the word is 0 for an empty slot). Since a bucket is 8 cells of
// 8 bytes (the link, then seven entries), that word is also the index of the head's
// next free entry, counted in entries from the first bucket's first entry: a push with room is one load of the word, a test of its low 3 bits, one
// store of the entry where the word points and the word plus one.
class BucketSlots {
 public:
  static constexpr std::uint32_t kLog2Slots = Bitmap4096::kLog2Bits;
  static constexpr std::uint32_t kSlots = Bitmap4096::kBits;
  static constexpr std::uint32_t kMask = kSlots - 1;
  static constexpr std::uint32_t kNone = Bitmap4096::kNone;

  BucketSlots() {
    for (std::uint32_t& h : heads_) h = 0;
  }

  bool empty() const { return bits_.empty(); }
  bool occupied(std::uint32_t slot) const { return bits_.test(slot); }
  std::uint32_t find_next(std::uint32_t from) const { return bits_.find_next(from); }
  std::uint32_t find_circular(std::uint32_t from) const { return bits_.find_circular(from); }

  // Only stores to the bucket: its fill count is read from the slot's word, so a push
  // never waits for the bucket's line.
  void push(BucketPool& pool, std::uint32_t slot, WheelEntry e) {
    const std::uint32_t w = heads_[slot];
    const std::uint32_t w1 = w + 1;
    // A head bucket with room: 1 <= count < kEntries, i.e. count + 1 is neither 1 nor 8,
    // so (count + 1) & 6 is not 0; w + 1 is also the word to store.
    static_assert(Bucket::kEntries == 7, "the test below knows the bucket's size");
    if ((w1 & 6) != 0) {
      entry_after(pool, w) = e;
      heads_[slot] = w1;
      return;
    }
    push_new_bucket(pool, slot, w, e);
  }

  // Asks for `slot`'s head bucket (the first line a cascade of it reads).
  void prefetch(const BucketPool& pool, std::uint32_t slot) const {
    const std::uint32_t w = heads_[slot];
    if (w != 0) __builtin_prefetch(&pool[w >> 3]);
  }

  // A slot's chain: its head bucket holds head_count entries, every later one kEntries.
  struct Chain {
    std::uint32_t head;  // kNil: empty
    std::uint32_t head_count;
  };

  // Empties `slot` and returns its chain; the caller releases each bucket to the pool
  // once it has read it.
  Chain take(std::uint32_t slot) {
    const std::uint32_t w = heads_[slot];
    heads_[slot] = 0;
    bits_.clear(slot);
    return w == 0 ? Chain{kNil, 0} : Chain{w >> 3, w & 7};
  }

  // Removes `qp`'s entry from `slot`, filling the hole with the head's last entry.
  // Walks the chain: only control operations do it. False if not there.
  bool remove(BucketPool& pool, std::uint32_t slot, std::uint32_t qp) {
    const std::uint32_t w = heads_[slot];
    if (w == 0) return false;
    const std::uint32_t h = w >> 3;
    for (std::uint32_t b = h, n = w & 7; b != kNil; b = pool[b].next, n = Bucket::kEntries) {
      Bucket& bk = pool[b];
      for (std::uint32_t k = 0; k < n; ++k) {
        if (bk.entries[k].qp != qp) continue;
        Bucket& head = pool[h];
        const std::uint32_t c = (w & 7) - 1u;
        bk.entries[k] = head.entries[c];
        if (c != 0) {
          heads_[slot] = w - 1;
        } else {
          const std::uint32_t next = head.next;
          pool.release(h);
          if (next == kNil) {
            heads_[slot] = 0;
            bits_.clear(slot);
          } else {
            heads_[slot] = (next << 3) | Bucket::kEntries;  // the next bucket of a chain is full
          }
        }
        return true;
      }
    }
    return false;
  }

 private:
  // The entry after the last used one of the head bucket that word `w` names:
  // bucket w >> 3, entry w & 7, at 8 * w bytes from the first bucket's first entry.
  static WheelEntry& entry_after(BucketPool& pool, std::uint32_t w) {
    return (&pool[0].entries[0])[w];
  }

  void push_new_bucket(BucketPool& pool, std::uint32_t slot, std::uint32_t w, WheelEntry e) {
    std::uint32_t next = kNil;
    if (w == 0) {
      bits_.set(slot);
    } else {
      next = w >> 3;  // a full head bucket
    }
    const std::uint32_t n = pool.alloc();
    Bucket& b = pool[n];
    b.next = next;
    b.entries[0] = e;
    heads_[slot] = (n << 3) | 1;
  }

  std::uint32_t heads_[kSlots];  // (head bucket << 3) | entries in it; 0: empty slot
  Bitmap4096 bits_;
};

}  // namespace isoroce::sched
