// 4096 bits with a one-word summary: set, clear and find-next-set in O(1).
// Bit i of summary_ is set iff words_[i] is not zero.
#pragma once

#include <bit>
#include <cstdint>

namespace isoroce::sched {

class Bitmap4096 {
 public:
  static constexpr std::uint32_t kLog2Bits = 12;
  static constexpr std::uint32_t kBits = 1u << kLog2Bits;
  static constexpr std::uint32_t kNone = 0xffff'ffff;

  bool empty() const { return summary_ == 0; }
  bool test(std::uint32_t i) const { return (words_[i >> 6] >> (i & 63)) & 1; }

  void set(std::uint32_t i) {
    std::uint64_t& w = words_[i >> 6];
    w = with_bit(w, i);
    summary_ = with_bit(summary_, i >> 6);
  }

  void clear(std::uint32_t i) {
    std::uint64_t& w = words_[i >> 6];
    w = without_bit(w, i);
    if (w == 0) summary_ = without_bit(summary_, i >> 6);
  }

  // clear(i), then the smallest set bit > i (kNone if none): the word just written is
  // searched without loading it again.
  std::uint32_t clear_find_next(std::uint32_t i) {
    const std::uint32_t w = i >> 6;
    const std::uint64_t word = words_[w] & ~(std::uint64_t{1} << (i & 63));
    words_[w] = word;
    if (word == 0) summary_ &= ~(std::uint64_t{1} << w);
    const std::uint64_t here = word & (~std::uint64_t{0} << (i & 63));  // bit i is clear now
    if (here != 0) return (w << 6) | static_cast<std::uint32_t>(std::countr_zero(here));
    const std::uint64_t later = summary_ & (~std::uint64_t{1} << w);
    if (later == 0) return kNone;
    const std::uint32_t w2 = ctz(later);
    return (w2 << 6) | ctz(words_[w2]);
  }

  // For a caller that clears its bits in increasing order (tassel's fine wheel level):
  // clears bit i, where no bit below i is set, and returns the smallest set bit left
  // (kNone if none). Every bit below i being clear, the word's lowest bit and, when
  // the word is used up, the summary's lowest bit are the answer: no mask to shift.
  std::uint32_t clear_lowest(std::uint32_t i) {
    const std::uint32_t w = i >> 6;
    const std::uint64_t word = without_bit(words_[w], i);
    words_[w] = word;
    if (word != 0) return (w << 6) | ctz(word);
    const std::uint64_t summary = without_bit(summary_, w);
    summary_ = summary;
    if (summary == 0) return kNone;
    const std::uint32_t w2 = ctz(summary);
    return (w2 << 6) | ctz(words_[w2]);
  }

  // For tests: bit w of the summary is set iff word w is not zero.
  bool consistent() const {
    for (std::uint32_t w = 0; w < kBits / 64; ++w)
      if (((summary_ >> w) & 1) != (words_[w] != 0)) return false;
    return true;
  }

  // The smallest set bit >= from (from < kBits), or kNone.
  std::uint32_t find_next(std::uint32_t from) const {
    const std::uint32_t w = from >> 6;
    const std::uint64_t here = words_[w] & (~std::uint64_t{0} << (from & 63));
    if (here != 0) return (w << 6) | static_cast<std::uint32_t>(std::countr_zero(here));
    const std::uint64_t later = summary_ & (~std::uint64_t{1} << w);  // words after w (none after 63)
    if (later == 0) return kNone;
    const std::uint32_t w2 = ctz(later);
    return (w2 << 6) | ctz(words_[w2]);
  }

  // The first set bit going from `from` up to kBits - 1 then from 0, or kNone.
  std::uint32_t find_circular(std::uint32_t from) const {
    const std::uint32_t i = find_next(from);
    if (i != kNone || summary_ == 0) return i;
    const std::uint32_t w2 = ctz(summary_);
    return (w2 << 6) | ctz(words_[w2]);
  }

 private:
  // x with bit n % 64 set. On x86-64 one bts: the compiler's shift needs the count in
  // cl, and the moves that puts there cost as much as the shift (the fine wheel level
  // sets two bits per QP it cascades).
  static std::uint64_t with_bit(std::uint64_t x, std::uint32_t n) {
#if defined(__x86_64__)
    asm("btsq %1, %0" : "+r"(x) : "r"(static_cast<std::uint64_t>(n)));
    return x;
#else
    return x | (std::uint64_t{1} << (n & 63));
#endif
  }

  // x with bit n % 64 clear (btr on x86-64, as with_bit).
  static std::uint64_t without_bit(std::uint64_t x, std::uint32_t n) {
#if defined(__x86_64__)
    asm("btrq %1, %0" : "+r"(x) : "r"(static_cast<std::uint64_t>(n)));
    return x;
#else
    return x & ~(std::uint64_t{1} << (n & 63));
#endif
  }

  // countr_zero of a word known not to be zero (no test for zero).
  static std::uint32_t ctz(std::uint64_t x) { return static_cast<std::uint32_t>(__builtin_ctzll(x)); }

  std::uint64_t summary_ = 0;
  std::uint64_t words_[kBits / 64] = {};
};

}  // namespace isoroce::sched
