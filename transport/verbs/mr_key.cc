#include "transport/verbs/mr_key.h"

namespace isoroce::verbs {
namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint16_t round_fn(uint16_t half, uint32_t key) {
  uint32_t x = (half ^ key) * 0x45d9f3bu;
  x ^= x >> 16;
  x *= 0x45d9f3bu;
  x ^= x >> 16;
  return static_cast<uint16_t>(x ^ (key >> 16));
}

}  // namespace

MrKeyGen::MrKeyGen(uint64_t seed) {
  for (uint32_t& k : round_key_) k = static_cast<uint32_t>(splitmix64(seed));
}

// A 4-round Feistel network on two 16-bit halves: a permutation of 2^32
// whatever the round function.
uint32_t MrKeyGen::permute(uint32_t x) const {
  uint16_t l = static_cast<uint16_t>(x >> 16), r = static_cast<uint16_t>(x);
  for (uint32_t k : round_key_) {
    uint16_t t = r;
    r = l ^ round_fn(r, k);
    l = t;
  }
  return (static_cast<uint32_t>(l) << 16) | r;
}

uint32_t MrKeyGen::next() {
  uint32_t key;
  do key = permute(counter_++);
  while (key == 0);
  return key;
}

}  // namespace isoroce::verbs
