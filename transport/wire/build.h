// Building RoCEv2 frames: Ethernet (optional 802.1Q), IPv4 or IPv6, UDP to
// port 4791, BTH, the extension headers the opcode requires, payload, pad to
// a 4-byte boundary, ICRC. The IPv4 header checksum is filled in; the UDP
// checksum is left 0 as RoCEv2 senders do (A17.3.2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "transport/wire/packet.h"

namespace isoroce::wire {

struct FrameSpec : ExtensionHeaders {
  // Ethernet.
  MacAddr dst_mac{};
  MacAddr src_mac{};
  std::optional<uint16_t> vlan_tci;

  // IP. An IPv4-mapped source and destination make an IPv4 frame; any other
  // pair makes an IPv6 frame. Both must be of one family.
  IpAddr src_ip{};
  IpAddr dst_ip{};
  uint8_t traffic_class = 0;  // DSCP << 2 | ECN
  uint8_t hop_limit = 64;
  uint32_t flow_label = 0;  // IPv6 only
  uint16_t ip_id = 0;       // IPv4 only
  bool dont_fragment = true;

  uint16_t udp_sport = 0xc000;

  // BTH. pad is derived from the payload length.
  uint8_t opcode = 0;
  bool solicited = false;
  bool mig_req = false;
  uint16_t pkey = 0xffff;
  bool fecn = false;
  bool becn = false;
  Qpn dest_qp;
  bool ack_req = false;
  Psn psn;

  // Extension headers (ExtensionHeaders): each one the opcode carries must be set.

  std::span<const uint8_t> payload;
};

enum class BuildError : uint8_t {
  kOk = 0,
  kUnknownOpcode,
  kMixedAddressFamilies,
  kMissingHeader,       // an extension header the opcode carries is not set
  kPayloadNotAllowed,   // payload on a header-only opcode
  kTooLarge,            // the IP datagram would exceed 65535 bytes
  kBufferTooSmall,
};

std::string_view build_error_message(BuildError e);

struct BuildResult {
  BuildError error = BuildError::kOk;
  size_t len = 0;
  bool ok() const { return error == BuildError::kOk; }
};

// Bytes build_frame() writes for this spec (0 if the opcode is unknown).
size_t frame_size(const FrameSpec& spec);

// The same with a payload of payload_len bytes in place of spec.payload.
size_t frame_size(const FrameSpec& spec, size_t payload_len);

// The size from what determines it alone (0 for an unknown opcode): the engine
// sizes the next packet of a QP without filling a FrameSpec.
size_t frame_size(bool ipv4, bool vlan, uint8_t opcode, size_t payload_len);

// Writes the whole frame into out, ICRC included.
BuildResult build_frame(const FrameSpec& spec, std::span<uint8_t> out);

// The same with the payload gathered from pieces in order (spec.payload is
// ignored): the engine builds straight from the SGEs of a work request.
BuildResult build_frame_gather(const FrameSpec& spec,
                               std::span<const std::span<const uint8_t>> payload,
                               std::span<uint8_t> out);

// A frame's headers for one path, built once and copied into every frame of that
// path: Ethernet (and 802.1Q), the IP header, the UDP header and the BTH's P_Key and
// destination QP, from a FrameSpec's dst_mac, src_mac, vlan_tci, src_ip, dst_ip,
// hop_limit, flow_label, ip_id, dont_fragment, udp_sport, pkey and dest_qp. A frame
// built from it is byte for byte the frame build_frame() makes from a spec with those
// fields; the rest of the spec (traffic class, opcode, BTH flags, PSN, extension
// headers, payload) is the frame's own. The IPv4 header checksum is kept as the sum
// of the words that do not change, so a frame adds its first word (TOS) and total
// length and folds, instead of summing the 20 bytes it has just stored.
struct HeaderTemplate {
  static constexpr size_t kMaxBytes = 14 + 4 + 40 + 8 + 12;  // Ethernet, VLAN, IPv6, UDP, BTH
  uint8_t bytes[kMaxBytes] = {};
  uint8_t l3 = 0;    // offset of the IP header
  uint8_t len = 0;   // bytes up to the end of the BTH; 0: not built
  bool ipv4 = false;
  uint32_t ip_sum = 0;  // IPv4: one's-complement sum of the unchanging header words
  uint32_t flow_label = 0;
  bool valid() const { return len != 0; }
};

// Fills t from spec's path fields. kMixedAddressFamilies if the addresses are not of
// one family (t is left not built).
BuildError make_header_template(const FrameSpec& spec, HeaderTemplate* t);

// build_frame_gather() with the path fields taken from t instead of spec.
BuildResult build_frame_templated(const HeaderTemplate& t, const FrameSpec& spec,
                                  std::span<const std::span<const uint8_t>> payload,
                                  std::span<uint8_t> out);

// Pad bytes that round a payload up to 4 bytes (9.2.3).
inline constexpr uint8_t pad_for(size_t payload_len) {
  return static_cast<uint8_t>((4 - (payload_len & 3)) & 3);
}

}  // namespace isoroce::wire
