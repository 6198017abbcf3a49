#include "transport/wire/icrc.h"

#include <algorithm>
#include <cstring>

namespace isoroce::wire {
namespace {

constexpr size_t kLrhMaskBytes = 8;
constexpr size_t kIpv6HeaderBytes = 40;
constexpr size_t kUdpHeaderBytes = 8;
constexpr size_t kBthMaskedByte = 4;  // resv8a: FECN, BECN
// The LRH stand-in, the largest IP header, UDP and the BTH up to its masked byte:
// every masked byte lies in the first kPrefixMax bytes.
constexpr size_t kPrefixMax = 128;

// Masks the variant fields of the copy h of an IP datagram's first n bytes (those
// that lie in it).
void mask_fields(uint8_t* h, const uint8_t* ip, size_t n, bool v4, size_t ip_len) {
  auto mask = [&](size_t off, size_t len) {
    for (size_t i = off; i < off + len && i < n; ++i) h[i] = 0xff;
  };
  if (v4) {
    mask(1, 1);   // TOS
    mask(8, 1);   // TTL
    mask(10, 2);  // header checksum
  } else if (n > 0) {
    // Traffic class and flow label share bytes 0..3 with the version nibble.
    const uint8_t version = ip[0] & 0xf0;
    mask(0, 4);
    h[0] = version | 0x0f;
    mask(7, 1);  // hop limit
  }
  mask(ip_len + 6, 2);                                 // UDP checksum
  mask(ip_len + kUdpHeaderBytes + kBthMaskedByte, 1);  // BTH resv8a
}

// Copies the first bytes of the IP datagram (through the BTH's masked byte, rounded
// up to whole 16-byte blocks with the LRH stand-in: 40 bytes of an IPv4 datagram, 56
// of IPv6) behind 8 bytes of ones into buf and masks the variant fields there;
// returns the bytes written to buf (LRH stand-in included). The rest of the datagram
// is folded in place, in the same stream.
size_t masked_prefix(const uint8_t* ip, size_t covered, uint8_t* buf) {
  std::memset(buf, 0xff, kLrhMaskBytes);
  uint8_t* h = buf + kLrhMaskBytes;
  const bool v4 = covered > 0 && (ip[0] >> 4) == 4;
  // The usual frames, with fixed-size copies and stores.
  constexpr size_t kV4 = 40, kV6 = 56;  // IP + UDP + BTH (IPv4), IP + UDP + 8 of the BTH (IPv6)
  if (v4 && ip[0] == 0x45 && covered >= kV4) {
    std::memcpy(h, ip, kV4);
    h[1] = 0xff;                                   // TOS
    h[8] = 0xff;                                   // TTL
    h[10] = h[11] = 0xff;                          // header checksum
    h[20 + 6] = h[20 + 7] = 0xff;                  // UDP checksum
    h[20 + kUdpHeaderBytes + kBthMaskedByte] = 0xff;  // BTH resv8a
    return kLrhMaskBytes + kV4;
  }
  if (!v4 && covered >= kV6) {
    std::memcpy(h, ip, kV6);
    h[0] = static_cast<uint8_t>((ip[0] & 0xf0) | 0x0f);  // traffic class, flow label
    h[1] = h[2] = h[3] = 0xff;
    h[7] = 0xff;                                                  // hop limit
    h[kIpv6HeaderBytes + 6] = h[kIpv6HeaderBytes + 7] = 0xff;     // UDP checksum
    h[kIpv6HeaderBytes + kUdpHeaderBytes + kBthMaskedByte] = 0xff;  // BTH resv8a
    return kLrhMaskBytes + kV6;
  }
  // IPv4 options, or a datagram shorter than its headers (a caller bug, never read
  // past `covered`).
  const size_t ip_len = v4 ? static_cast<size_t>(ip[0] & 0x0f) * 4 : kIpv6HeaderBytes;
  const size_t want = ((kLrhMaskBytes + ip_len + kUdpHeaderBytes + kBthMaskedByte + 1 + 15) & ~size_t{15}) -
                      kLrhMaskBytes;
  const size_t n = std::min({covered, want, kPrefixMax - kLrhMaskBytes});
  std::memcpy(h, ip, n);
  mask_fields(h, ip, n, v4, ip_len);
  return kLrhMaskBytes + n;
}

// One fold stream: the masked prefix from the stack, the rest in place.
Crc32Fold fold_from(const uint8_t* ip, size_t covered) {
  uint8_t buf[kPrefixMax];
  const size_t n = masked_prefix(ip, covered, buf);
  Crc32Fold f = crc32_fold_init(~0u);
  crc32_fold(f, buf, n);
  const size_t done = n - kLrhMaskBytes;
  if (covered > done) crc32_fold(f, ip + done, covered - done);
  return f;
}

}  // namespace

uint32_t icrc_compute(std::span<const uint8_t> frame, size_t l3_offset, size_t icrc_offset) {
  if (icrc_offset < l3_offset || icrc_offset > frame.size()) return 0;  // caller bug; never touch memory
  return icrc_finish(crc32_fold_register(fold_from(frame.data() + l3_offset, icrc_offset - l3_offset)));
}

Crc32Fold icrc_fold_begin(std::span<const uint8_t> frame, size_t l3_offset, size_t end_offset) {
  if (end_offset < l3_offset || end_offset > frame.size()) return crc32_fold_init(0);  // caller bug
  return fold_from(frame.data() + l3_offset, end_offset - l3_offset);
}

uint32_t icrc_begin(std::span<const uint8_t> frame, size_t l3_offset, size_t end_offset) {
  if (end_offset < l3_offset || end_offset > frame.size()) return 0;  // caller bug; never touch memory
  return crc32_fold_register(fold_from(frame.data() + l3_offset, end_offset - l3_offset));
}

void icrc_seal(std::span<uint8_t> frame, size_t l3_offset, size_t icrc_offset) {
  icrc_store(frame.data() + icrc_offset, icrc_compute(frame, l3_offset, icrc_offset));
}

uint32_t icrc_stored(std::span<const uint8_t> frame, size_t icrc_offset) {
  const uint8_t* p = frame.data() + icrc_offset;
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace isoroce::wire
