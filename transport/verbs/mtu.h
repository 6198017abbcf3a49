// The ibv_mtu enum and bytes, both ways (IBTA 9.7.4.1: 256..4096 bytes; the
// enum is log2(bytes / 128)). One copy for the engine, the daemon's config and
// wire formats, the simulator and the verbs library.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>

namespace isoroce::verbs {

// 256..4096, or 0 for a value that is not an MTU.
constexpr uint32_t mtu_bytes(ibv_mtu mtu) {
  return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

// The MTU of exactly that many bytes, if there is one.
constexpr std::optional<ibv_mtu> mtu_from_bytes(uint64_t bytes) {
  for (int m = IBV_MTU_256; m <= IBV_MTU_4096; ++m) {
    if (bytes == (128u << m)) return static_cast<ibv_mtu>(m);
  }
  return std::nullopt;
}

// The largest MTU that fits in bytes (IBV_MTU_256 below 256): what a link of
// that many payload bytes can carry.
constexpr ibv_mtu mtu_at_most(uint64_t bytes) {
  int m = IBV_MTU_4096;
  while (m > IBV_MTU_256 && (128u << m) > bytes) --m;
  return static_cast<ibv_mtu>(m);
}

}  // namespace isoroce::verbs
