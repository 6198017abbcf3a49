#include "transport/wire/parse.h"

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include <cstring>

#include "transport/wire/bytes.h"
#include "transport/wire/icrc.h"

namespace isoroce::wire {
namespace {

constexpr size_t kEthBytes = sizeof(rte_ether_hdr);
constexpr size_t kVlanBytes = sizeof(rte_vlan_hdr);
constexpr size_t kIpv4Bytes = sizeof(rte_ipv4_hdr);
constexpr size_t kIpv6Bytes = sizeof(rte_ipv6_hdr);
constexpr size_t kUdpBytes = sizeof(rte_udp_hdr);
static_assert(kEthBytes == 14 && kVlanBytes == 4 && kIpv4Bytes == 20 && kIpv6Bytes == 40);

ParseError parse_l3(std::span<uint8_t> f, size_t l3, const ParseOptions& opts, RocePacket& p);
ParseError parse_transport(std::span<uint8_t> f, size_t bth, size_t end, const ParseOptions& opts,
                           RocePacket& p);

ParseError parse_ipv4(std::span<uint8_t> f, size_t l3, const ParseOptions& opts, RocePacket& p) {
  if (f.size() < l3 + kIpv4Bytes) return ParseError::kTruncated;
  const uint8_t* h = f.data() + l3;
  p.ip_version = 4;
  p.traffic_class = h[1];
  p.hop_limit = h[8];
  std::memset(p.src_ip.data(), 0, 10);
  p.src_ip[10] = p.src_ip[11] = 0xff;
  p.dst_ip = p.src_ip;
  std::memcpy(&p.src_ip[12], h + 12, 4);
  std::memcpy(&p.dst_ip[12], h + 16, 4);
  if ((h[0] & 0x0f) != 5) return ParseError::kIpv4Options;
  const uint16_t frag = load_be16(h + 6);
  if ((frag & 0x2000) || (frag & 0x1fff)) return ParseError::kIpv4Fragment;
  if (h[9] != IPPROTO_UDP) return ParseError::kNotUdp;
  const size_t total = load_be16(h + 2);
  if (total < kIpv4Bytes + kUdpBytes) return ParseError::kLengthMismatch;
  if (f.size() < l3 + total) return ParseError::kTruncated;
  if (opts.verify_ip_checksum && ipv4_header_sum(h) != 0xffff) return ParseError::kBadIpChecksum;
  p.l4_offset = l3 + kIpv4Bytes;
  p.frame_end = l3 + total;
  return ParseError::kOk;
}

ParseError parse_ipv6(std::span<uint8_t> f, size_t l3, RocePacket& p) {
  if (f.size() < l3 + kIpv6Bytes) return ParseError::kTruncated;
  const uint8_t* h = f.data() + l3;
  const uint32_t vtc_flow = load_be32(h);
  p.ip_version = 6;
  p.traffic_class = static_cast<uint8_t>(vtc_flow >> 20);
  p.flow_label = vtc_flow & 0xfffff;
  p.hop_limit = h[7];
  std::memcpy(p.src_ip.data(), h + 8, 16);
  std::memcpy(p.dst_ip.data(), h + 24, 16);
  // RoCEv2 puts UDP right after the fixed header; extension headers are not used.
  if (h[6] != IPPROTO_UDP) return ParseError::kNotUdp;
  const size_t payload = load_be16(h + 4);
  if (payload < kUdpBytes) return ParseError::kLengthMismatch;
  if (f.size() < l3 + kIpv6Bytes + payload) return ParseError::kTruncated;
  p.l4_offset = l3 + kIpv6Bytes;
  p.frame_end = l3 + kIpv6Bytes + payload;
  return ParseError::kOk;
}

ParseError parse_l3(std::span<uint8_t> f, size_t l3, const ParseOptions& opts, RocePacket& p) {
  p.l3_offset = l3;
  if (f.size() < l3 + 1) return ParseError::kTruncated;
  const uint8_t version = f[l3] >> 4;
  ParseError e;
  if (version == 4) {
    e = parse_ipv4(f, l3, opts, p);
  } else if (version == 6) {
    e = parse_ipv6(f, l3, p);
  } else {
    return ParseError::kNotIp;
  }
  if (e != ParseError::kOk) return e;

  const uint8_t* u = f.data() + p.l4_offset;
  p.udp_sport = load_be16(u);
  p.udp_dport = load_be16(u + 2);
  p.has_udp = true;
  if (p.udp_dport != kRoceV2Port) return ParseError::kNotRoce;
  if (load_be16(u + 4) != p.frame_end - p.l4_offset) return ParseError::kLengthMismatch;
  return parse_transport(f, p.l4_offset + kUdpBytes, p.frame_end, opts, p);
}

ParseError parse_transport(std::span<uint8_t> f, size_t bth_off, size_t end,
                           const ParseOptions& opts, RocePacket& p) {
  p.bth_offset = bth_off;
  if (end < bth_off + sizeof(Bth)) return ParseError::kTruncated;
  Bth bth;
  std::memcpy(&bth, f.data() + bth_off, sizeof(bth));
  p.has_bth = true;
  p.opcode = bth.opcode;
  p.solicited = bth.solicited();
  p.mig_req = bth.mig_req();
  p.pad = bth.pad();
  p.tver = bth.tver();
  p.pkey = bth.p_key();
  p.fecn = bth.fecn();
  p.becn = bth.becn();
  p.dest_qp = bth.dqpn();
  p.ack_req = bth.a();
  p.psn = bth.psn_value();

  const OpcodeInfo& op = opcode_info(bth.opcode);
  if (!op.valid()) return ParseError::kUnknownOpcode;
  p.op = &op;
  if (p.tver != 0) return ParseError::kBadTransportVersion;
  if (end < bth_off + op.length + kIcrcBytes) return ParseError::kLengthMismatch;

  const uint8_t* t = f.data() + bth_off;
  if (op.has(kHdrReth)) {
    const uint8_t* h = t + op.reth;
    p.reth = RethFields{load_be64(h), load_be32(h + 8), load_be32(h + 12)};
  }
  if (op.has(kHdrAeth)) {
    const uint8_t* h = t + op.aeth;
    p.aeth = AethFields{h[0], load_be24(h + 1)};
  }
  if (op.has(kHdrDeth)) {
    const uint8_t* h = t + op.deth;
    p.deth = DethFields{load_be32(h), load_be24(h + 5)};
  }
  if (op.has(kHdrImmDt)) p.imm = load_be32(t + op.immdt);
  if (op.has(kHdrIeth)) p.ieth = load_be32(t + op.ieth);
  if (op.has(kHdrAtomicEth)) {
    const uint8_t* h = t + op.atomic_eth;
    p.atomic = AtomicFields{load_be64(h), load_be32(h + 8), load_be64(h + 12), load_be64(h + 20)};
  }
  if (op.has(kHdrAtomicAckEth)) p.atomic_ack = load_be64(t + op.atomic_ack_eth);

  const size_t icrc_off = end - kIcrcBytes;
  p.payload_offset = bth_off + op.length;
  const size_t padded = icrc_off - p.payload_offset;
  p.icrc = icrc_stored(f, icrc_off);

  // Pad rules (9.2.3, 9.7.4): payload plus pad is a whole number of 4-byte
  // words; only the last packet of a message pads; header-only opcodes carry
  // neither payload nor pad.
  if (!op.has_payload()) {
    if (padded != 0) return ParseError::kLengthMismatch;
    if (p.pad != 0) return ParseError::kBadPadCount;
  } else {
    if (p.pad > padded || padded % 4 != 0) return ParseError::kBadPadCount;
    if (p.pad != 0 && !op.is_last()) return ParseError::kBadPadCount;
  }
  p.payload_len = padded - p.pad;

  if (opts.verify_icrc) {
    p.icrc_ok = icrc_compute(f, p.l3_offset, icrc_off) == p.icrc;
    if (!p.icrc_ok) return ParseError::kBadIcrc;
  }
  return ParseError::kOk;
}

}  // namespace

ParseResult parse_ip(std::span<uint8_t> frame, size_t l3_offset, const ParseOptions& opts) {
  ParseResult r;
  r.error = parse_l3(frame, l3_offset, opts, r.pkt);
  return r;
}

ParseResult parse_frame(std::span<uint8_t> frame, const ParseOptions& opts) {
  ParseResult r;
  RocePacket& p = r.pkt;
  if (frame.size() < kEthBytes) {
    r.error = ParseError::kTruncated;
    return r;
  }
  std::memcpy(p.dst_mac.data(), frame.data(), 6);
  std::memcpy(p.src_mac.data(), frame.data() + 6, 6);
  size_t l3 = kEthBytes;
  p.ethertype = load_be16(frame.data() + 12);
  if (p.ethertype == RTE_ETHER_TYPE_VLAN) {
    if (frame.size() < kEthBytes + kVlanBytes) {
      r.error = ParseError::kTruncated;
      return r;
    }
    p.vlan_tci = load_be16(frame.data() + 14);
    p.ethertype = load_be16(frame.data() + 16);
    l3 += kVlanBytes;
  }
  const uint8_t want_version = p.ethertype == RTE_ETHER_TYPE_IPV4   ? 4
                               : p.ethertype == RTE_ETHER_TYPE_IPV6 ? 6
                                                                    : 0;
  if (want_version == 0 || (frame.size() > l3 && (frame[l3] >> 4) != want_version)) {
    r.error = ParseError::kNotIp;
    return r;
  }
  r.error = parse_l3(frame, l3, opts, p);
  return r;
}

std::string_view parse_error_name(ParseError e) {
  switch (e) {
    case ParseError::kOk: return "ok";
    case ParseError::kTruncated: return "truncated";
    case ParseError::kNotIp: return "not_ip";
    case ParseError::kNotUdp: return "not_udp";
    case ParseError::kNotRoce: return "not_roce";
    case ParseError::kIpv4Options: return "ipv4_options";
    case ParseError::kIpv4Fragment: return "ipv4_fragment";
    case ParseError::kBadIpChecksum: return "bad_ip_checksum";
    case ParseError::kLengthMismatch: return "length_mismatch";
    case ParseError::kUnknownOpcode: return "unknown_opcode";
    case ParseError::kBadTransportVersion: return "bad_transport_version";
    case ParseError::kBadPadCount: return "bad_pad_count";
    case ParseError::kBadIcrc: return "bad_icrc";
  }
  return "unknown_error";
}

std::string_view parse_error_message(ParseError e) {
  switch (e) {
    case ParseError::kOk: return "valid RoCEv2 packet";
    case ParseError::kTruncated: return "frame ends before a header or announced length";
    case ParseError::kNotIp: return "ethertype is not IPv4 or IPv6";
    case ParseError::kNotUdp: return "IP payload is not UDP";
    case ParseError::kNotRoce: return "UDP destination port is not 4791 (RoCEv2)";
    case ParseError::kIpv4Options: return "IPv4 header has options (IHL != 5)";
    case ParseError::kIpv4Fragment: return "IPv4 fragment (RoCEv2 is never fragmented)";
    case ParseError::kBadIpChecksum: return "IPv4 header checksum does not verify";
    case ParseError::kLengthMismatch: return "IP/UDP length fields disagree with the frame or the opcode's headers";
    case ParseError::kUnknownOpcode: return "BTH opcode is not a known RC/UC/UD/CNP opcode";
    case ParseError::kBadTransportVersion: return "BTH transport header version is not 0";
    case ParseError::kBadPadCount: return "BTH pad count does not fit the payload and opcode";
    case ParseError::kBadIcrc: return "invariant CRC does not match";
  }
  return "unknown error";
}

}  // namespace isoroce::wire
