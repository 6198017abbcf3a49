#include "transport/wire/icrc.h"

#include <rte_log.h>
#include <rte_net_crc.h>

// rte_vect.h of DPDK 22.11 declares these experimental symbols without C
// linkage for C++ callers; declare them as the library exports them.
extern "C" {
uint16_t rte_vect_get_max_simd_bitwidth(void);
int rte_vect_set_max_simd_bitwidth(uint16_t bitwidth);
}

#include <array>
#include <cstring>
#include <vector>

#include "transport/wire/headers.h"

namespace isoroce::wire {
namespace {

constexpr size_t kLrhMaskBytes = 8;

// rte_net_crc picks its SIMD path lazily from the EAL's SIMD limit, which is
// 0 (scalar only) until rte_eal_init runs, and logs each path it rejects.
// Tools and tests use the codec without an EAL, so choose the fastest path the
// CPU offers here, quietly, once, before the first CRC. With an EAL already up
// its --force-max-simd-bitwidth is respected.
const bool kCrcAlgChosen = [] {
  const int logtype = rte_log_register("lib.net");
  const int old_level = logtype >= 0 ? rte_log_get_level(logtype) : -1;
  if (logtype >= 0) rte_log_set_level(logtype, RTE_LOG_WARNING);
  if (rte_vect_get_max_simd_bitwidth() == 0) rte_vect_set_max_simd_bitwidth(512);
  rte_net_crc_set_alg(RTE_NET_CRC_AVX512);  // falls back to SSE4.2/PCLMULQDQ, then scalar
  if (old_level >= 0) rte_log_set_level(logtype, static_cast<uint32_t>(old_level));
  return true;
}();
constexpr size_t kIpv6HeaderBytes = 40;

// The bytes that are overwritten with ones while the CRC runs, and their
// saved values. Offsets are relative to the start of the masked LRH.
class MaskedBytes {
 public:
  explicit MaskedBytes(size_t limit) : limit_(limit) {}

  // Offsets at or past the covered length are left alone, so a header with a
  // nonsense length can never make this write outside the frame.
  void mask(uint8_t* base, size_t off, size_t len) {
    for (size_t i = 0; i < len && off + i < limit_; ++i) {
      saved_[n_] = {static_cast<uint16_t>(off + i), base[off + i]};
      base[off + i] = 0xff;
      ++n_;
    }
  }
  // Newest first, so a byte masked twice gets its original value back.
  void restore(uint8_t* base) const {
    for (size_t i = n_; i-- > 0;) base[saved_[i].off] = saved_[i].value;
  }

 private:
  struct Saved {
    uint16_t off;
    uint8_t value;
  };
  // LRH 8 + IPv6 first 4 + hop limit 1 + UDP checksum 2 + BTH resv8a 1.
  std::array<Saved, 16> saved_{};
  size_t n_ = 0;
  size_t limit_;
};

// base points at the 8 bytes in front of the IP header; len covers them too.
uint32_t crc_with_masks(uint8_t* base, size_t len) {
  uint8_t* ip = base + kLrhMaskBytes;
  const bool v4 = (ip[0] >> 4) == 4;
  const size_t ip_len = v4 ? static_cast<size_t>(ip[0] & 0x0f) * 4 : kIpv6HeaderBytes;
  const size_t udp = kLrhMaskBytes + ip_len;
  const size_t bth = udp + 8;

  MaskedBytes m(len);
  m.mask(base, 0, kLrhMaskBytes);
  if (v4) {
    m.mask(base, kLrhMaskBytes + 1, 1);   // TOS
    m.mask(base, kLrhMaskBytes + 8, 1);   // TTL
    m.mask(base, kLrhMaskBytes + 10, 2);  // header checksum
  } else {
    // Traffic class and flow label share bytes 0..3 with the version nibble.
    const uint8_t version = ip[0] & 0xf0;
    m.mask(base, kLrhMaskBytes, 4);
    if (len > kLrhMaskBytes) ip[0] = version | 0x0f;
    m.mask(base, kLrhMaskBytes + 7, 1);  // hop limit
  }
  m.mask(base, udp + 6, 2);  // UDP checksum
  m.mask(base, bth + 4, 1);  // BTH resv8a: FECN, BECN
  const uint32_t crc = rte_net_crc_calc(base, static_cast<uint32_t>(len), RTE_NET_CRC32_ETH);
  m.restore(base);
  return crc;
}

}  // namespace

uint32_t icrc_compute(std::span<uint8_t> frame, size_t l3_offset, size_t icrc_offset) {
  if (icrc_offset < l3_offset || icrc_offset > frame.size()) return 0;  // caller bug; never touch memory
  const size_t covered = icrc_offset - l3_offset;
  if (l3_offset >= kLrhMaskBytes) {
    return crc_with_masks(frame.data() + l3_offset - kLrhMaskBytes, covered + kLrhMaskBytes);
  }
  // No room in front of the IP header (a raw-IP capture): work on a copy.
  std::vector<uint8_t> copy(kLrhMaskBytes + covered);
  std::memcpy(copy.data() + kLrhMaskBytes, frame.data() + l3_offset, covered);
  return crc_with_masks(copy.data(), copy.size());
}

void icrc_seal(std::span<uint8_t> frame, size_t l3_offset, size_t icrc_offset) {
  const uint32_t crc = icrc_compute(frame, l3_offset, icrc_offset);
  uint8_t* p = frame.data() + icrc_offset;
  p[0] = static_cast<uint8_t>(crc);
  p[1] = static_cast<uint8_t>(crc >> 8);
  p[2] = static_cast<uint8_t>(crc >> 16);
  p[3] = static_cast<uint8_t>(crc >> 24);
}

uint32_t icrc_stored(std::span<const uint8_t> frame, size_t icrc_offset) {
  const uint8_t* p = frame.data() + icrc_offset;
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace isoroce::wire
