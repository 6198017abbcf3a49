// Time and rate arithmetic for sched/: integer picoseconds and fixed-point costs.
//
// 64 B at 100 Gb/s lasts 5.12 ns, so whole nanoseconds would be 2% off per packet.
// Everything here is integer picoseconds (2^64 ps is 213 days), and a rate is kept as
// its cost per byte in picoseconds with 16 fractional bits, so one packet's duration
// is off by at most half a picosecond and errors never accumulate across packets.
#pragma once

#include <cstdint>
#include <limits>

namespace isoroce::sched {

using Picos = std::uint64_t;  // a time or a duration, picoseconds

inline constexpr Picos kPicosPerNs = 1'000;
inline constexpr Picos kPicosPerSecond = 1'000'000'000'000;
inline constexpr Picos kNever = std::numeric_limits<Picos>::max();

inline constexpr Picos ns_to_picos(std::uint64_t ns) { return ns * kPicosPerNs; }

// Picoseconds per byte with kCostFracBits fractional bits.
using ByteCost = std::uint64_t;
inline constexpr unsigned kCostFracBits = 16;

// The cost of one byte at `bps` bits per second, rounded to nearest. bps >= 1.
// 8e12 * 2^16 / bps fits 64 bits for every bps >= 1.
inline constexpr ByteCost byte_cost(std::uint64_t bps) {
  const unsigned __int128 num = static_cast<unsigned __int128>(8 * kPicosPerSecond) << kCostFracBits;
  return static_cast<ByteCost>((num + bps / 2) / bps);
}

// How long `bytes` last at `cost`, rounded to nearest picosecond.
inline constexpr Picos duration(std::uint32_t bytes, ByteCost cost) {
  const unsigned __int128 p = static_cast<unsigned __int128>(bytes) * cost;
  return static_cast<Picos>((p + (1u << (kCostFracBits - 1))) >> kCostFracBits);
}

static_assert(byte_cost(100'000'000'000) == 80u << kCostFracBits, "80 ps per byte at 100 Gb/s");
static_assert(duration(64, byte_cost(100'000'000'000)) == 5'120, "64 B at 100 Gb/s");
static_assert(duration(64, byte_cost(40'000'000'000)) == 12'800, "64 B at 40 Gb/s");
static_assert(duration(4096, byte_cost(100'000)) == 327'680'000'000, "4 KB at 100 Kb/s");

}  // namespace isoroce::sched
