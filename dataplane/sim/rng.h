// Seeded randomness for the simulator. Every component (link, switch port,
// flow, engine) owns one Rng seeded from the scenario seed and its component
// index, so the same seed gives the same run on every machine. std::mt19937_64
// is specified bit for bit by the standard; the std:: distributions are not
// (libstdc++ and libc++ differ), so the few distributions we need are here.
#pragma once

#include <cstdint>
#include <random>

#include "workload/mix.h"

namespace isoroce::sim {

using workload::mix64;  // splitmix64 finalizer: spreads (seed, component) over 64 bits

inline constexpr uint64_t component_seed(uint64_t seed, uint64_t component) {
  return mix64(mix64(seed) ^ mix64(component + 0x5151'0000'0000ull));
}

// Component indices: one range per kind of component.
namespace component {
inline constexpr uint64_t kLink = 0;             // + link id
inline constexpr uint64_t kSwitchPort = 1 << 20; // + port
inline constexpr uint64_t kEngine = 2 << 20;     // + host index
inline constexpr uint64_t kFlow = 3 << 20;       // + flow index
}  // namespace component

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) : gen_(seed) {}

  uint64_t next() { return gen_(); }

  // Uniform in [0, n), n >= 1, without modulo bias (Lemire's method).
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Uniform in [lo, hi], lo <= hi.
  uint64_t between(uint64_t lo, uint64_t hi) {
    if (hi - lo == ~0ull) return next();
    return lo + below(hi - lo + 1);
  }

  // Uniform in [0, 1) with 53 random bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // True with probability p. p <= 0 and p >= 1 draw nothing, so a fault
  // that is off never shifts the stream of one that is on.
  bool chance(double p) {
    if (p <= 0.0) return false;
    if (p >= 1.0) return true;
    return unit() < p;
  }

 private:
  std::mt19937_64 gen_;
};

}  // namespace isoroce::sim
