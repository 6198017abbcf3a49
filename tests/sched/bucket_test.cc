// The wheel's bucket chains (sched/bucket.h): a slot's head bucket alone is partly
// filled and its fill count is kept only beside the head (no count in the buckets), so
// a chain read as take() returns it (head_count entries, then kEntries per bucket)
// must hold exactly the entries pushed and not removed.
#include "sched/bucket.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace isoroce::sched {
namespace {

// Receive: random pushes to a few slots (chains of up to ~12 buckets) and removals
// anywhere in a chain (each fills its hole from the head bucket), then every slot
// taken. Expect: each chain read with take()'s head count holds the slot's entries
// (with their low bits), no more and no fewer; buckets come back to the pool.
TEST(TimelineBuckets, ChainsHoldExactlyTheEntriesPushedAndNotRemoved) {
  constexpr std::uint32_t kQps = 4'096;
  constexpr std::uint32_t kUsedSlots = 6;
  std::mt19937_64 rng(5);
  for (int round = 0; round < 20; ++round) {
    BucketPool pool(kQps, kUsedSlots);
    auto slots = std::make_unique<BucketSlots>();
    std::map<std::uint32_t, std::map<std::uint32_t, std::uint32_t>> ref;  // slot -> qp -> low
    std::vector<std::int64_t> slot_of(kQps, -1);
    for (int step = 0; step < 3'000; ++step) {
      const std::uint32_t qp = static_cast<std::uint32_t>(rng() % 600);
      if (slot_of[qp] < 0) {
        const std::uint32_t slot = static_cast<std::uint32_t>(100 + rng() % kUsedSlots);
        const std::uint32_t low = static_cast<std::uint32_t>(rng());
        slots->push(pool, slot, {qp, low});
        ref[slot][qp] = low;
        slot_of[qp] = slot;
      } else if (rng() % 3 == 0) {
        const auto slot = static_cast<std::uint32_t>(slot_of[qp]);
        ASSERT_TRUE(slots->remove(pool, slot, qp));
        ref[slot].erase(qp);
        slot_of[qp] = -1;
      }
    }
    for (std::uint32_t slot = 100; slot < 100 + kUsedSlots; ++slot) {
      ASSERT_EQ(slots->occupied(slot), !ref[slot].empty());
      const BucketSlots::Chain c = slots->take(slot);
      std::map<std::uint32_t, std::uint32_t> got;
      std::uint32_t n = c.head_count;
      for (std::uint32_t b = c.head; b != kNil; n = Bucket::kEntries) {
        ASSERT_GE(n, 1u);
        ASSERT_LE(n, Bucket::kEntries);
        for (std::uint32_t k = 0; k < n; ++k) {
          ASSERT_TRUE(got.emplace(pool[b].entries[k].qp, pool[b].entries[k].low).second) << "twice";
        }
        const std::uint32_t next = pool[b].next;
        pool.release(b);
        b = next;
      }
      EXPECT_EQ(got, ref[slot]) << "slot " << slot << ", round " << round;
      EXPECT_FALSE(slots->occupied(slot));
    }
  }
}

}  // namespace
}  // namespace isoroce::sched
