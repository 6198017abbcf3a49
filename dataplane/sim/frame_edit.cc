#include "dataplane/sim/frame_edit.h"

#include "transport/wire/bytes.h"

namespace isoroce::sim {

using wire::load_be16;
using wire::load_be24;

namespace {
constexpr uint16_t kEtherVlan = 0x8100;
constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;
constexpr size_t kUdpLen = 8;
constexpr size_t kBthLen = 12;
constexpr uint16_t kRoceV2Port = 4791;

// One's-complement 16-bit add (RFC 1071).
uint16_t ones_add(uint16_t a, uint16_t b) {
  uint32_t s = static_cast<uint32_t>(a) + b;
  return static_cast<uint16_t>((s & 0xffff) + (s >> 16));
}
}  // namespace

std::optional<L3View> find_l3(std::span<const uint8_t> f) {
  if (f.size() < 14) return std::nullopt;
  size_t off = 12;
  uint16_t type = load_be16(&f[off]);
  if (type == kEtherVlan) {
    if (f.size() < 18) return std::nullopt;
    off += 4;
    type = load_be16(&f[off]);
  }
  off += 2;
  L3View v;
  v.l3_offset = off;
  if (type == kEtherIpv4) {
    if (f.size() < off + 20 || (f[off] >> 4) != 4) return std::nullopt;
    v.ip_version = 4;
    v.l4_offset = off + static_cast<size_t>(f[off] & 0xf) * 4;
  } else if (type == kEtherIpv6) {
    if (f.size() < off + 40 || (f[off] >> 4) != 6) return std::nullopt;
    v.ip_version = 6;
    v.l4_offset = off + 40;
  } else {
    return std::nullopt;
  }
  return v;
}

uint8_t ecn_of(std::span<const uint8_t> f) {
  const auto v = find_l3(f);
  if (!v) return kEcnNotEct;
  if (v->ip_version == 4) return f[v->l3_offset + 1] & 0x3;
  return (f[v->l3_offset + 1] >> 4) & 0x3;
}

bool set_ce(std::span<uint8_t> f) {
  const auto v = find_l3(f);
  if (!v) return false;
  uint8_t* h = &f[v->l3_offset];
  if (v->ip_version == 6) {
    h[1] |= 0x30;  // traffic class bits 1:0 are bits 5:4 of the second byte
    return true;
  }
  // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for the 16-bit word m that holds
  // version/IHL and TOS.
  const uint16_t old_word = load_be16(h);
  h[1] |= 0x3;
  const uint16_t new_word = load_be16(h);
  const uint16_t hc = load_be16(h + 10);
  const uint16_t sum = ones_add(ones_add(static_cast<uint16_t>(~hc), static_cast<uint16_t>(~old_word)),
                                new_word);
  wire::store_be16(h + 10, static_cast<uint16_t>(~sum));
  return true;
}

void flip_bit(std::span<uint8_t> f, size_t bit) {
  f[bit / 8] ^= static_cast<uint8_t>(0x80u >> (bit % 8));
}

BitRange corruptible_bits(std::span<const uint8_t> f) {
  const auto v = find_l3(f);
  if (!v) return {};
  return BitRange{v->l3_offset * 8, (f.size() - v->l3_offset) * 8};
}

std::optional<BthView> peek_bth(std::span<const uint8_t> f) {
  const auto v = find_l3(f);
  if (!v) return std::nullopt;
  if (v->ip_version == 4 && f[v->l3_offset + 9] != 17) return std::nullopt;
  if (v->ip_version == 6 && f[v->l3_offset + 6] != 17) return std::nullopt;
  const size_t udp = v->l4_offset;
  if (f.size() < udp + kUdpLen + kBthLen) return std::nullopt;
  if (load_be16(&f[udp + 2]) != kRoceV2Port) return std::nullopt;
  const size_t bth = udp + kUdpLen;
  BthView b;
  b.opcode = f[bth];
  b.dest_qp = load_be24(&f[bth + 5]);
  b.psn = load_be24(&f[bth + 9]);
  if (b.opcode == 0x11 && f.size() >= bth + kBthLen + 4) b.aeth_syndrome = f[bth + kBthLen];
  if (b.opcode == 0x0c && f.size() >= bth + kBthLen + 16) b.read_dma_len = wire::load_be32(&f[bth + kBthLen + 12]);
  b.dst_mac_tail = load_be16(&f[4]);
  return b;
}

}  // namespace isoroce::sim
