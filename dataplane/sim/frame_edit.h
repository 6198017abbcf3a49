// What the fabric reads and changes in a frame, without a full parse: where the
// IP header is, the ECN field (a switch sets CE), one flipped bit (a corrupting
// link), and the few BTH fields the simulator attributes traffic to flows by.
// None of these verify anything: the receiving engine does that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace isoroce::sim {

struct L3View {
  size_t l3_offset = 0;   // IP header
  uint8_t ip_version = 0; // 4 or 6
  size_t l4_offset = 0;   // UDP header (IPv4: from IHL)
};

// The IP header of an Ethernet frame (one optional 802.1Q tag), if the frame
// is long enough to hold it.
std::optional<L3View> find_l3(std::span<const uint8_t> frame);

// ECN codepoints (RFC 3168).
inline constexpr uint8_t kEcnNotEct = 0, kEcnEct1 = 1, kEcnEct0 = 2, kEcnCe = 3;

// The ECN field, or kEcnNotEct when the frame has no IP header.
uint8_t ecn_of(std::span<const uint8_t> frame);

// Sets CE in the IPv4 TOS or the IPv6 traffic class. The IPv4 header checksum
// is updated incrementally (RFC 1624), as switches do: a correct checksum stays
// correct and a wrong one stays wrong. The ICRC masks these bits, so it stays
// valid. False if the frame has no IP header.
bool set_ce(std::span<uint8_t> frame);

// Flips bit `bit` of the frame (bit 0 is the most significant bit of byte 0).
void flip_bit(std::span<uint8_t> frame, size_t bit);

// The bits a corrupting link may flip: from the IP header to the end, which the
// IPv4 header checksum and the ICRC cover (the Ethernet header is the FCS's, and
// a frame with a bad FCS never reaches anyone). Empty range if no IP header.
struct BitRange {
  size_t first = 0;
  size_t count = 0;
};
BitRange corruptible_bits(std::span<const uint8_t> frame);

// BTH fields the simulator uses to attribute frames to flows.
struct BthView {
  uint8_t opcode = 0;
  uint32_t dest_qp = 0;
  uint32_t psn = 0;
  std::optional<uint8_t> aeth_syndrome;  // opcode 0x11 (RC ACKNOWLEDGE) only
  uint32_t read_dma_len = 0;             // opcode 0x0c (RC RDMA READ request) only
  uint16_t dst_mac_tail = 0;
};
std::optional<BthView> peek_bth(std::span<const uint8_t> frame);

}  // namespace isoroce::sim
