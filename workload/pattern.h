// Seeded payload patterns: message m of a flow is 8 bytes of m (big-endian,
// so a receiver that does not know which message it got can tell, e.g. UD),
// then a pseudo-random stream seeded by (flow key, m). Every message differs, so
// a stale or misplaced buffer never passes for the right one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "workload/mix.h"

namespace isoroce::workload {

namespace pattern_detail {
// Word i of message m's stream (after the 8-byte id).
inline uint64_t word(uint64_t state, uint64_t i) { return mix64(state + i * 0x9e3779b97f4a7c15ull); }
inline uint64_t state_of(uint64_t flow_key, uint64_t msg) { return mix64(flow_key ^ mix64(msg)); }
inline void id_bytes(uint64_t msg, uint8_t out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(msg >> (56 - 8 * i));
}
}  // namespace pattern_detail

inline void fill_pattern(uint8_t* p, size_t n, uint64_t flow_key, uint64_t msg) {
  uint8_t id[8];
  pattern_detail::id_bytes(msg, id);
  const size_t head = n < 8 ? n : 8;
  std::memcpy(p, id, head);
  const uint64_t st = pattern_detail::state_of(flow_key, msg);
  size_t off = head;
  for (uint64_t i = 0; off < n; ++i) {
    const uint64_t w = pattern_detail::word(st, i);
    const size_t k = n - off < 8 ? n - off : 8;
    std::memcpy(p + off, &w, k);
    off += k;
  }
}

// True if p holds exactly message msg's pattern.
inline bool check_pattern(const uint8_t* p, size_t n, uint64_t flow_key, uint64_t msg) {
  uint8_t id[8];
  pattern_detail::id_bytes(msg, id);
  const size_t head = n < 8 ? n : 8;
  if (std::memcmp(p, id, head) != 0) return false;
  const uint64_t st = pattern_detail::state_of(flow_key, msg);
  size_t off = head;
  for (uint64_t i = 0; off < n; ++i) {
    const uint64_t w = pattern_detail::word(st, i);
    const size_t k = n - off < 8 ? n - off : 8;
    if (std::memcmp(p + off, &w, k) != 0) return false;
    off += k;
  }
  return true;
}

// The message id a buffer of at least 8 bytes starts with.
inline uint64_t pattern_id(const uint8_t* p) {
  uint64_t m = 0;
  for (int i = 0; i < 8; ++i) m = m << 8 | p[i];
  return m;
}

}  // namespace isoroce::workload
