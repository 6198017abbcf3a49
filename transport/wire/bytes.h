// Big-endian loads and stores on unaligned bytes: every multi-byte field of
// the RoCEv2 headers is big-endian and most are not naturally aligned.
#pragma once

#include <cstdint>

namespace isoroce::wire {

inline constexpr uint16_t load_be16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
inline constexpr uint32_t load_be24(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 16 | static_cast<uint32_t>(p[1]) << 8 | p[2];
}
inline constexpr uint32_t load_be32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 24 | load_be24(p + 1);
}
inline constexpr uint64_t load_be64(const uint8_t* p) {
  return static_cast<uint64_t>(load_be32(p)) << 32 | load_be32(p + 4);
}
inline constexpr void store_be16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline constexpr void store_be24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
inline constexpr void store_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  store_be24(p + 1, v);
}
inline constexpr void store_be64(uint8_t* p, uint64_t v) {
  store_be32(p, static_cast<uint32_t>(v >> 32));
  store_be32(p + 4, static_cast<uint32_t>(v));
}

// One's-complement sum of the 20-byte IPv4 header (RFC 791, RFC 1071): a
// header verifies when the sum is 0xffff; a sender zeroes the checksum field
// and stores the complement of the sum.
inline constexpr uint16_t ipv4_header_sum(const uint8_t* h) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += load_be16(h + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

// Recomputes and stores the checksum of the IPv4 header at h.
inline constexpr void ipv4_set_checksum(uint8_t* h) {
  store_be16(h + 10, 0);
  store_be16(h + 10, static_cast<uint16_t>(~ipv4_header_sum(h)));
}

}  // namespace isoroce::wire
