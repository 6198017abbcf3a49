// A decoded RoCEv2 frame: where each layer starts and every field a user or
// the engine reads, decoded once. Produced by parse_frame() (parse.h) and
// consumed by the engine, the tools and the tests.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "transport/wire/opcode.h"
#include "transport/wire/types.h"

namespace isoroce::wire {

enum class ParseError : uint8_t {
  kOk = 0,
  kTruncated,         // the frame ends before a header or a length it announces
  kNotIp,             // ethertype is neither IPv4 nor IPv6 (after one optional 802.1Q tag)
  kNotUdp,            // IP protocol / next header is not UDP
  kNotRoce,           // UDP destination port is not 4791
  kIpv4Options,       // IHL != 5: RoCEv2 never sends IPv4 options
  kIpv4Fragment,      // MF set or non-zero fragment offset
  kBadIpChecksum,     // IPv4 header checksum does not verify
  kLengthMismatch,    // IP / UDP length fields disagree with each other or the opcode
  kUnknownOpcode,     // BTH opcode not in the table
  kBadTransportVersion,  // BTH TVer != 0 (9.2: receivers drop it)
  kBadPadCount,       // pad > payload, pad on a first/middle/no-payload packet, or payload+pad not a multiple of 4
  kBadIcrc,           // invariant CRC does not match
};

std::string_view parse_error_name(ParseError e);     // "truncated", "bad_icrc", ...
std::string_view parse_error_message(ParseError e);  // one sentence for people

// IPv4 addresses are kept as IPv4-mapped IPv6 (::ffff:a.b.c.d), as RoCEv2 GIDs are.
using IpAddr = std::array<uint8_t, 16>;
using MacAddr = std::array<uint8_t, 6>;

struct RethFields {
  uint64_t va;
  uint32_t rkey;
  uint32_t dma_len;
};
struct AethFields {
  uint8_t syndrome;
  uint32_t msn;
};
struct DethFields {
  uint32_t qkey;
  uint32_t src_qp;
};
struct AtomicFields {
  uint64_t va;
  uint32_t rkey;
  uint64_t swap_add;
  uint64_t compare;
};

// The extension headers after the BTH, each present as the opcode says: one
// description that the parsed packet (RocePacket) and the packet to build
// (FrameSpec) share.
struct ExtensionHeaders {
  std::optional<RethFields> reth;
  std::optional<AethFields> aeth;
  std::optional<DethFields> deth;
  std::optional<uint32_t> imm;   // the field's value; ibv_wc.imm_data is htonl() of it
  std::optional<uint32_t> ieth;  // invalidated rkey
  std::optional<AtomicFields> atomic;
  std::optional<uint64_t> atomic_ack;

  // None of them (a builder reusing one spec per frame).
  void clear_extensions() {
    reth.reset();
    aeth.reset();
    deth.reset();
    imm.reset();
    ieth.reset();
    atomic.reset();
    atomic_ack.reset();
  }
};

struct RocePacket : ExtensionHeaders {
  // Layer offsets into the frame.
  size_t l3_offset = 0;
  size_t l4_offset = 0;
  size_t bth_offset = 0;
  size_t payload_offset = 0;
  size_t frame_end = 0;  // end of the IP datagram (Ethernet padding excluded)

  // Ethernet.
  MacAddr dst_mac{};
  MacAddr src_mac{};
  std::optional<uint16_t> vlan_tci;
  uint16_t ethertype = 0;

  // IP and UDP.
  uint8_t ip_version = 0;  // 0 until an IP header was found
  IpAddr src_ip{};
  IpAddr dst_ip{};
  uint8_t traffic_class = 0;  // IPv4 TOS or IPv6 traffic class (DSCP << 2 | ECN)
  uint8_t hop_limit = 0;      // IPv4 TTL or IPv6 hop limit
  uint32_t flow_label = 0;    // IPv6 only
  bool has_udp = false;  // the UDP header was read
  uint16_t udp_sport = 0;
  uint16_t udp_dport = 0;

  // BTH.
  bool has_bth = false;  // the BTH was read (its opcode may still be unknown)
  uint8_t opcode = 0;
  const OpcodeInfo* op = nullptr;  // set once the opcode is known
  bool solicited = false;
  bool mig_req = false;
  uint8_t pad = 0;
  uint8_t tver = 0;
  uint16_t pkey = 0;
  bool fecn = false;
  bool becn = false;
  Qpn dest_qp;
  bool ack_req = false;
  Psn psn;

  // Extension headers (ExtensionHeaders), present as the opcode says.

  size_t payload_len = 0;  // application bytes, pad excluded
  uint32_t icrc = 0;       // as received
  bool icrc_ok = false;

  bool is_ipv4() const { return ip_version == 4; }
  uint8_t ecn() const { return traffic_class & 0x3; }
  uint8_t dscp() const { return traffic_class >> 2; }
};

inline bool is_ipv4_mapped(const IpAddr& a) {
  for (int i = 0; i < 10; ++i) if (a[i] != 0) return false;
  return a[10] == 0xff && a[11] == 0xff;
}
inline IpAddr ipv4_mapped(uint32_t host_order_v4) {
  IpAddr a{};
  a[10] = a[11] = 0xff;
  a[12] = static_cast<uint8_t>(host_order_v4 >> 24);
  a[13] = static_cast<uint8_t>(host_order_v4 >> 16);
  a[14] = static_cast<uint8_t>(host_order_v4 >> 8);
  a[15] = static_cast<uint8_t>(host_order_v4);
  return a;
}

}  // namespace isoroce::wire
