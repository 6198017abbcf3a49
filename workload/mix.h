// splitmix64's finalizer: spreads a 64-bit value over 64 bits. The payload
// patterns (pattern.h) and the simulator's seeds (dataplane/sim/rng.h) use it.
#pragma once

#include <cstdint>

namespace isoroce::workload {

inline constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace isoroce::workload
