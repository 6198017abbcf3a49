#include "sched/bitmap.h"

#include <gtest/gtest.h>

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

// Expect: find_after(i) is the first set bit above i, whatever bits lie at or below
// it (tassel's fine level leaves released slots' bits set until clear_all), and
// clear_all() leaves nothing set.
TEST(Bitmap4096, FindAfterAgreesWithSetAndClearAllEmpties) {
  std::mt19937_64 rng(13);
  for (int round = 0; round < 200; ++round) {
    Bitmap4096 bits;
    std::set<std::uint32_t> ref;
    const int n = 1 + static_cast<int>(rng() % (round % 2 == 0 ? 64 : 2'000));
    for (int k = 0; k < n; ++k) {
      const std::uint32_t i = k % 7 == 0 ? (rng() % 64) * 64 + (rng() % 2 ? 63 : 0) : rng() % Bitmap4096::kBits;
      bits.set(i);
      ref.insert(i);
    }
    // Walk forward as the fine level does, never clearing what it passed.
    std::uint32_t at = *ref.begin();
    std::vector<std::uint32_t> walked{at};
    for (std::uint32_t next = bits.find_after(at); next != Bitmap4096::kNone; next = bits.find_after(at)) {
      ASSERT_GT(next, at);
      walked.push_back(at = next);
    }
    ASSERT_EQ(walked, std::vector<std::uint32_t>(ref.begin(), ref.end())) << "round " << round;
    for (int probe = 0; probe < 200; ++probe) {
      const std::uint32_t i = rng() % Bitmap4096::kBits;
      const auto it = ref.upper_bound(i);
      ASSERT_EQ(bits.find_after(i), it == ref.end() ? Bitmap4096::kNone : *it) << "round " << round;
    }
    bits.clear_all();
    ASSERT_TRUE(bits.empty());
    ASSERT_EQ(bits.find_next(0), Bitmap4096::kNone);
    for (std::uint32_t i : {0u, 63u, 64u, 4095u}) ASSERT_FALSE(bits.test(i));
  }
}

}  // namespace
}  // namespace isoroce::sched
