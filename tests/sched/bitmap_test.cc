#include "sched/bitmap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace isoroce::sched {
namespace {

// Expect: find_next and find_circular agree with a std::set under random set/clear.
TEST(Bitmap4096, AgreesWithSetUnderRandomOps) {
  std::mt19937_64 rng(7);
  Bitmap4096 bits;
  std::set<std::uint32_t> ref;
  for (int step = 0; step < 200'000; ++step) {
    const std::uint32_t i = rng() % Bitmap4096::kBits;
    if (rng() % 3 == 0) {
      bits.clear(i);
      ref.erase(i);
    } else if (rng() % 8 == 0) {
      bits.set(i);
      ref.insert(i);
    }
    const std::uint32_t from = rng() % Bitmap4096::kBits;
    auto it = ref.lower_bound(from);
    const std::uint32_t want_next = it == ref.end() ? Bitmap4096::kNone : *it;
    ASSERT_EQ(bits.find_next(from), want_next) << "step " << step;
    const std::uint32_t want_circ =
        it != ref.end() ? *it : (ref.empty() ? Bitmap4096::kNone : *ref.begin());
    ASSERT_EQ(bits.find_circular(from), want_circ) << "step " << step;
    ASSERT_EQ(bits.empty(), ref.empty());
  }
}

TEST(Bitmap4096, EdgesOfWords) {
  Bitmap4096 bits;
  EXPECT_EQ(bits.find_next(0), Bitmap4096::kNone);
  EXPECT_EQ(bits.find_circular(4095), Bitmap4096::kNone);
  bits.set(4095);
  EXPECT_EQ(bits.find_next(0), 4095u);
  EXPECT_EQ(bits.find_next(4095), 4095u);
  bits.set(0);
  EXPECT_EQ(bits.find_circular(4095), 4095u);
  bits.clear(4095);
  EXPECT_EQ(bits.find_next(1), Bitmap4096::kNone);
  EXPECT_EQ(bits.find_circular(1), 0u);
  bits.set(64);
  EXPECT_EQ(bits.find_next(1), 64u);
  EXPECT_EQ(bits.find_next(63), 64u);
}

// Expect: clear_find_next(i) clears i and returns the next set bit after it, as a
// std::set does (upper_bound), including at the last bit of a word and of the map.
TEST(Bitmap4096, ClearFindNextAgreesWithSet) {
  std::mt19937_64 rng(11);
  Bitmap4096 bits;
  std::set<std::uint32_t> ref;
  for (int step = 0; step < 200'000; ++step) {
    const std::uint32_t i = step % 5 == 0 ? (rng() % 64) * 64 + 63 : rng() % Bitmap4096::kBits;
    if (rng() % 2 == 0) {
      bits.set(i);
      ref.insert(i);
      continue;
    }
    ref.erase(i);
    const auto it = ref.upper_bound(i);
    ASSERT_EQ(bits.clear_find_next(i), it == ref.end() ? Bitmap4096::kNone : *it) << "step " << step;
    ASSERT_EQ(bits.empty(), ref.empty());
  }
}

// Receive: bits set at random, then walked from the lowest with clear_lowest, as the
// fine wheel level releases its slots, with more bits set above the walk on the way
// (QPs placed ahead of the cursor), at word edges too. Expect: each call clears the
// bit it is given and returns the lowest bit left (a std::set's begin), the summary
// matches the words after every step, and the walk ends with nothing set.
TEST(Bitmap4096, ClearLowestWalksTheBitsInOrder) {
  std::mt19937_64 rng(13);
  for (int round = 0; round < 300; ++round) {
    Bitmap4096 bits;
    std::set<std::uint32_t> ref;
    auto set = [&](std::uint32_t i) {
      bits.set(i);
      ref.insert(i);
    };
    const int n = 1 + static_cast<int>(rng() % (round % 2 == 0 ? 64 : 2'000));
    for (int k = 0; k < n; ++k)
      set(k % 7 == 0 ? (rng() % 64) * 64 + (rng() % 2 ? 63 : 0) : rng() % Bitmap4096::kBits);
    std::uint32_t at = *ref.begin();
    while (true) {
      ref.erase(at);
      // Now and then a bit above the walk (possibly in the word just emptied).
      if (rng() % 3 == 0 && at + 1 < Bitmap4096::kBits)
        set(at + 1 + static_cast<std::uint32_t>(rng() % std::min<std::uint32_t>(Bitmap4096::kBits - at - 1, 200)));
      const std::uint32_t next = bits.clear_lowest(at);
      ASSERT_EQ(next, ref.empty() ? Bitmap4096::kNone : *ref.begin()) << "round " << round << " at " << at;
      ASSERT_TRUE(bits.consistent()) << "round " << round << " at " << at;
      ASSERT_FALSE(bits.test(at));
      if (next == Bitmap4096::kNone) break;
      ASSERT_GT(next, at);
      at = next;
    }
    ASSERT_TRUE(bits.empty());
    ASSERT_EQ(bits.find_next(0), Bitmap4096::kNone);
  }
}

}  // namespace
}  // namespace isoroce::sched
