#include "transport/wire/build.h"

#include <rte_ether.h>

#include <cstring>

#include "transport/wire/bytes.h"
#include "transport/wire/icrc.h"

namespace isoroce::wire {
namespace {

constexpr size_t kEthBytes = 14, kVlanBytes = 4, kIpv4Bytes = 20, kIpv6Bytes = 40, kUdpBytes = 8;
// The largest header-only frame make_header_template() builds (RC ACK: BTH + AETH).
constexpr size_t kMaxHeaderFrame = kEthBytes + kVlanBytes + kIpv6Bytes + kUdpBytes + 16 + kIcrcBytes;

size_t l2_bytes(const FrameSpec& s) { return kEthBytes + (s.vlan_tci ? kVlanBytes : 0); }

using Pieces = std::span<const std::span<const uint8_t>>;

size_t total(Pieces pieces) {
  size_t n = 0;
  for (auto p : pieces) n += p.size();
  return n;
}

size_t l4_and_up(size_t payload, const OpcodeInfo& op) {
  const size_t padded = payload + (op.has_payload() ? pad_for(payload) : 0);
  return kUdpBytes + op.length + padded + kIcrcBytes;
}

// The opcode's extension headers are all there, and a payload only where it may be.
BuildError check_headers(const FrameSpec& s, const OpcodeInfo& op, size_t payload) {
  if ((op.has(kHdrReth) && !s.reth) || (op.has(kHdrAeth) && !s.aeth) ||
      (op.has(kHdrDeth) && !s.deth) || (op.has(kHdrImmDt) && !s.imm) ||
      (op.has(kHdrIeth) && !s.ieth) || (op.has(kHdrAtomicEth) && !s.atomic) ||
      (op.has(kHdrAtomicAckEth) && !s.atomic_ack)) {
    return BuildError::kMissingHeader;
  }
  if (!op.has_payload() && payload != 0) return BuildError::kPayloadNotAllowed;
  return BuildError::kOk;
}

BuildError check(const FrameSpec& s, const OpcodeInfo& op, size_t payload) {
  if (!op.valid()) return BuildError::kUnknownOpcode;
  if (is_ipv4_mapped(s.src_ip) != is_ipv4_mapped(s.dst_ip)) return BuildError::kMixedAddressFamilies;
  if (BuildError e = check_headers(s, op, payload); e != BuildError::kOk) return e;
  const size_t ip_header = is_ipv4_mapped(s.src_ip) ? kIpv4Bytes : 0;  // v6 length excludes header
  if (ip_header + l4_and_up(payload, op) > 0xffff) return BuildError::kTooLarge;
  return BuildError::kOk;
}

uint8_t* write_extensions(const FrameSpec& s, const OpcodeInfo& op, uint8_t* t);

// Writes the BTH and extension headers at t; returns where the payload goes.
uint8_t* write_transport(const FrameSpec& s, const OpcodeInfo& op, size_t payload_len, uint8_t* t) {
  std::memset(t, 0, op.length);
  Bth bth{};
  bth.opcode = s.opcode;
  bth.set_flags(s.solicited, s.mig_req, op.has_payload() ? pad_for(payload_len) : 0, 0);
  bth.set_pkey(s.pkey);
  bth.set_ecn_bits(s.fecn, s.becn);
  bth.set_dqpn(s.dest_qp);
  bth.set_ack_req(s.ack_req);
  bth.set_psn(s.psn);
  std::memcpy(t, &bth, sizeof(bth));
  return write_extensions(s, op, t);
}

// The BTH's per-frame fields over a BTH whose P_Key and destination QP are already
// in place (a template's), then the extension headers.
uint8_t* patch_transport(const FrameSpec& s, const OpcodeInfo& op, size_t payload_len, uint8_t* t) {
  t[0] = s.opcode;
  t[1] = static_cast<uint8_t>((s.solicited ? 0x80 : 0) | (s.mig_req ? 0x40 : 0) |
                              (op.has_payload() ? pad_for(payload_len) : 0) << 4);
  t[4] = static_cast<uint8_t>((s.fecn ? 0x80 : 0) | (s.becn ? 0x40 : 0));
  store_be32(t + 8, (s.ack_req ? 0x80000000u : 0) | (s.psn.value() & 0xffffff));
  if (op.length > sizeof(Bth)) std::memset(t + sizeof(Bth), 0, op.length - sizeof(Bth));
  return write_extensions(s, op, t);
}

// The extension headers behind the BTH at t (zeroed by the caller); returns where
// the payload goes.
uint8_t* write_extensions(const FrameSpec& s, const OpcodeInfo& op, uint8_t* t) {
  if (op.has(kHdrDeth)) {
    store_be32(t + op.deth, s.deth->qkey);
    store_be24(t + op.deth + 5, s.deth->src_qp);
  }
  if (op.has(kHdrReth)) {
    store_be64(t + op.reth, s.reth->va);
    store_be32(t + op.reth + 8, s.reth->rkey);
    store_be32(t + op.reth + 12, s.reth->dma_len);
  }
  if (op.has(kHdrAtomicEth)) {
    uint8_t* h = t + op.atomic_eth;
    store_be64(h, s.atomic->va);
    store_be32(h + 8, s.atomic->rkey);
    store_be64(h + 12, s.atomic->swap_add);
    store_be64(h + 20, s.atomic->compare);
  }
  if (op.has(kHdrAeth)) {
    t[op.aeth] = s.aeth->syndrome;
    store_be24(t + op.aeth + 1, s.aeth->msn);
  }
  if (op.has(kHdrAtomicAckEth)) store_be64(t + op.atomic_ack_eth, *s.atomic_ack);
  if (op.has(kHdrImmDt)) store_be32(t + op.immdt, *s.imm);
  if (op.has(kHdrIeth)) store_be32(t + op.ieth, *s.ieth);
  return t + op.length;
}

// Copies the payload behind the headers, folding each piece into the ICRC as it is
// copied (one read of every payload byte; headers, pieces and pad in one fold
// stream, reduced once), pads, and writes the ICRC.
void write_payload_and_icrc(std::span<uint8_t> out, size_t l3, const OpcodeInfo& op, Pieces payload,
                            size_t payload_len, uint8_t* p) {
  Crc32Fold crc = icrc_fold_begin(out, l3, static_cast<size_t>(p - out.data()));
  for (auto piece : payload) {
    if (!piece.empty()) crc32_fold_copy(crc, p, piece.data(), piece.size());
    p += piece.size();
  }
  if (op.has_payload()) {
    const uint8_t pad = pad_for(payload_len);
    if (pad != 0) {
      std::memset(p, 0, pad);
      crc32_fold(crc, p, pad);
      p += pad;
    }
  }
  icrc_store(p, icrc_finish(crc32_fold_register(crc)));
}

size_t size_of(bool ipv4, bool vlan, uint8_t opcode, size_t payload) {
  const OpcodeInfo& op = opcode_info(opcode);
  if (!op.valid()) return 0;
  return kEthBytes + (vlan ? kVlanBytes : 0) + (ipv4 ? kIpv4Bytes : kIpv6Bytes) +
         l4_and_up(payload, op);
}

size_t size_with(const FrameSpec& s, size_t payload) {
  return size_of(is_ipv4_mapped(s.src_ip), s.vlan_tci.has_value(), s.opcode, payload);
}

BuildResult build(const FrameSpec& s, Pieces payload, std::span<uint8_t> out) {
  const OpcodeInfo& op = opcode_info(s.opcode);
  const size_t payload_len = total(payload);
  if (BuildError e = check(s, op, payload_len); e != BuildError::kOk) return {e, 0};
  const size_t len = size_with(s, payload_len);
  if (out.size() < len) return {BuildError::kBufferTooSmall, len};

  uint8_t* f = out.data();
  std::memcpy(f, s.dst_mac.data(), 6);
  std::memcpy(f + 6, s.src_mac.data(), 6);
  size_t l3 = 12;
  const bool v4 = is_ipv4_mapped(s.src_ip);
  if (s.vlan_tci) {
    store_be16(f + l3, RTE_ETHER_TYPE_VLAN);
    store_be16(f + l3 + 2, *s.vlan_tci);
    l3 += 4;
  }
  store_be16(f + l3, v4 ? RTE_ETHER_TYPE_IPV4 : RTE_ETHER_TYPE_IPV6);
  l3 += 2;

  uint8_t* ip = f + l3;
  const size_t l4_len = l4_and_up(payload_len, op);
  size_t l4;
  if (v4) {
    ip[0] = 0x45;
    ip[1] = s.traffic_class;
    store_be16(ip + 2, static_cast<uint16_t>(kIpv4Bytes + l4_len));
    store_be16(ip + 4, s.ip_id);
    store_be16(ip + 6, s.dont_fragment ? 0x4000 : 0);
    ip[8] = s.hop_limit;
    ip[9] = 17;  // UDP
    std::memcpy(ip + 12, &s.src_ip[12], 4);
    std::memcpy(ip + 16, &s.dst_ip[12], 4);
    ipv4_set_checksum(ip);
    l4 = l3 + kIpv4Bytes;
  } else {
    store_be32(ip, 6u << 28 | static_cast<uint32_t>(s.traffic_class) << 20 | (s.flow_label & 0xfffff));
    store_be16(ip + 4, static_cast<uint16_t>(l4_len));
    ip[6] = 17;  // UDP
    ip[7] = s.hop_limit;
    std::memcpy(ip + 8, s.src_ip.data(), 16);
    std::memcpy(ip + 24, s.dst_ip.data(), 16);
    l4 = l3 + kIpv6Bytes;
  }
  uint8_t* udp = f + l4;
  store_be16(udp, s.udp_sport);
  store_be16(udp + 2, kRoceV2Port);
  store_be16(udp + 4, static_cast<uint16_t>(l4_len));
  store_be16(udp + 6, 0);

  uint8_t* p = write_transport(s, op, payload_len, udp + kUdpBytes);
  write_payload_and_icrc(out, l3, op, payload, payload_len, p);
  return {BuildError::kOk, len};
}

// check() without the address families (a template has one).
BuildError check_templated(const HeaderTemplate& t, const FrameSpec& s, const OpcodeInfo& op,
                           size_t payload) {
  if (!op.valid()) return BuildError::kUnknownOpcode;
  if (BuildError e = check_headers(s, op, payload); e != BuildError::kOk) return e;
  if ((t.ipv4 ? kIpv4Bytes : 0) + l4_and_up(payload, op) > 0xffff) return BuildError::kTooLarge;
  return BuildError::kOk;
}

}  // namespace

BuildError make_header_template(const FrameSpec& s, HeaderTemplate* t) {
  t->len = 0;
  if (is_ipv4_mapped(s.src_ip) != is_ipv4_mapped(s.dst_ip)) return BuildError::kMixedAddressFamilies;
  // build() writes the path fields; the per-frame ones (lengths, TOS, checksum,
  // BTH flags and PSN) are patched by build_frame_templated().
  FrameSpec hs = s;
  hs.opcode = op::kRcAck;  // BTH + AETH: header-only
  hs.aeth = AethFields{};
  hs.traffic_class = 0;
  uint8_t frame[kMaxHeaderFrame];
  const BuildResult r = build(hs, {}, frame);
  if (!r.ok()) return r.error;
  const bool v4 = is_ipv4_mapped(s.src_ip);
  t->ipv4 = v4;
  t->l3 = static_cast<uint8_t>(l2_bytes(s));
  const size_t l4 = t->l3 + (v4 ? kIpv4Bytes : kIpv6Bytes);
  std::memcpy(t->bytes, frame, l4 + kUdpBytes + sizeof(Bth));
  t->flow_label = s.flow_label & 0xfffff;
  if (v4) {
    uint8_t* ip = t->bytes + t->l3;
    store_be16(ip + 2, 0);   // total length: per frame
    store_be16(ip + 10, 0);  // checksum: per frame
    store_be16(ip, 0);       // version/IHL and TOS: per frame
    t->ip_sum = ipv4_header_sum(ip);
  }
  t->len = static_cast<uint8_t>(l4 + kUdpBytes + sizeof(Bth));
  return BuildError::kOk;
}

BuildResult build_frame_templated(const HeaderTemplate& t, const FrameSpec& s, Pieces payload,
                                  std::span<uint8_t> out) {
  const OpcodeInfo& op = opcode_info(s.opcode);
  const size_t payload_len = total(payload);
  if (BuildError e = check_templated(t, s, op, payload_len); e != BuildError::kOk) return {e, 0};
  const size_t l3 = t.l3;
  const size_t l4_len = l4_and_up(payload_len, op);
  const size_t ip_bytes = t.ipv4 ? kIpv4Bytes : kIpv6Bytes;
  const size_t len = l3 + ip_bytes + l4_len;
  if (out.size() < len) return {BuildError::kBufferTooSmall, len};
  uint8_t* f = out.data();
  // One fixed-size copy when the buffer has room (the bytes past the BTH are
  // overwritten below); a short buffer (an ACK sized to the byte) gets t.len.
  if (out.size() >= HeaderTemplate::kMaxBytes) [[likely]] {
    std::memcpy(f, t.bytes, HeaderTemplate::kMaxBytes);
  } else {
    std::memcpy(f, t.bytes, t.len);
  }
  uint8_t* ip = f + l3;
  if (t.ipv4) {
    const uint16_t word0 = static_cast<uint16_t>(0x4500 | s.traffic_class);
    const uint16_t total_len = static_cast<uint16_t>(kIpv4Bytes + l4_len);
    store_be16(ip, word0);
    store_be16(ip + 2, total_len);
    uint32_t sum = t.ip_sum + word0 + total_len;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    store_be16(ip + 10, static_cast<uint16_t>(~sum));
  } else {
    store_be32(ip, 6u << 28 | static_cast<uint32_t>(s.traffic_class) << 20 | t.flow_label);
    store_be16(ip + 4, static_cast<uint16_t>(l4_len));
  }
  uint8_t* udp = ip + ip_bytes;
  store_be16(udp + 4, static_cast<uint16_t>(l4_len));
  uint8_t* p = patch_transport(s, op, payload_len, udp + kUdpBytes);
  write_payload_and_icrc(out, l3, op, payload, payload_len, p);
  return {BuildError::kOk, len};
}

size_t frame_size(const FrameSpec& s) { return size_with(s, s.payload.size()); }

size_t frame_size(const FrameSpec& s, size_t payload_len) { return size_with(s, payload_len); }

size_t frame_size(bool ipv4, bool vlan, uint8_t opcode, size_t payload_len) {
  return size_of(ipv4, vlan, opcode, payload_len);
}

BuildResult build_frame(const FrameSpec& s, std::span<uint8_t> out) {
  const std::span<const uint8_t> one[1] = {s.payload};
  return build(s, one, out);
}

BuildResult build_frame_gather(const FrameSpec& s, std::span<const std::span<const uint8_t>> payload,
                               std::span<uint8_t> out) {
  return build(s, payload, out);
}

std::string_view build_error_message(BuildError e) {
  switch (e) {
    case BuildError::kOk: return "ok";
    case BuildError::kUnknownOpcode: return "opcode is not in the opcode table";
    case BuildError::kMixedAddressFamilies: return "source and destination are not both IPv4 or both IPv6";
    case BuildError::kMissingHeader: return "an extension header required by the opcode is not set";
    case BuildError::kPayloadNotAllowed: return "the opcode carries no payload";
    case BuildError::kTooLarge: return "the IP datagram would exceed 65535 bytes";
    case BuildError::kBufferTooSmall: return "output buffer is smaller than the frame";
  }
  return "unknown error";
}

}  // namespace isoroce::wire
