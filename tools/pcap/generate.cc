#include "tools/pcap/generate.h"

#include <random>

namespace isoroce::tools {
namespace {

using namespace isoroce::wire;

wire::IpAddr v6(uint8_t last) {
  wire::IpAddr a{0xfd, 0x00, 0x15, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last};
  return a;
}

// Payload sizes for one opcode: packets that may pad get one size for each
// pad count 0..3; first and middle packets carry whole words (an MTU's worth
// or less); header-only opcodes carry nothing.
std::vector<size_t> payload_sizes(const OpcodeInfo& op, std::mt19937_64& rng) {
  if (!op.has_payload()) return {0};
  if (!op.is_last()) return {256, 1024, 4096};
  std::uniform_int_distribution<size_t> words(0, 64);
  std::vector<size_t> sizes;
  for (size_t pad = 0; pad < 4; ++pad) sizes.push_back(words(rng) * 4 + (4 - pad) % 4);
  sizes.push_back(0);
  return sizes;
}

}  // namespace

std::vector<GeneratedFrame> generate_frames(bool ipv6, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> u24(1, kMask24);
  std::vector<GeneratedFrame> out;
  for (unsigned code = 0; code < 256; ++code) {
    const OpcodeInfo& op = opcode_info(static_cast<uint8_t>(code));
    if (!op.valid()) continue;
    for (size_t size : payload_sizes(op, rng)) {
      GeneratedFrame g;
      FrameSpec& s = g.spec;
      s.dst_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
      s.src_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
      if (out.size() % 7 == 3) s.vlan_tci = static_cast<uint16_t>(100 + out.size());
      if (ipv6) {
        s.src_ip = v6(1);
        s.dst_ip = v6(2);
        s.flow_label = static_cast<uint32_t>(rng() & 0xfffff);
      } else {
        s.src_ip = ipv4_mapped(0x0a000001);
        s.dst_ip = ipv4_mapped(0x0a000002);
        s.ip_id = static_cast<uint16_t>(out.size());
      }
      s.traffic_class = static_cast<uint8_t>((26 << 2) | (out.size() % 3 == 0 ? 2 : 0));
      s.opcode = static_cast<uint8_t>(code);
      const Qpn local(u24(rng)), remote(u24(rng));
      s.dest_qp = remote;
      s.udp_sport = udp_sport_for_qps(local, remote);
      s.psn = Psn(u24(rng));
      s.ack_req = op.is_last() && op.kind != OpKind::kAck && op.kind != OpKind::kCnp;
      s.solicited = op.kind == OpKind::kSend && op.is_last() && (rng() & 1);
      s.pkey = 0xffff;
      s.becn = op.kind == OpKind::kCnp;
      if (op.has(kHdrReth)) s.reth = RethFields{rng(), static_cast<uint32_t>(rng()), static_cast<uint32_t>(size + 4096 * (rng() & 3))};
      if (op.has(kHdrAeth)) s.aeth = AethFields{static_cast<uint8_t>(rng() & 0x1f), u24(rng)};
      if (op.has(kHdrDeth)) s.deth = DethFields{static_cast<uint32_t>(rng()), u24(rng)};
      if (op.has(kHdrImmDt)) s.imm = static_cast<uint32_t>(rng());
      if (op.has(kHdrIeth)) s.ieth = static_cast<uint32_t>(rng());
      if (op.has(kHdrAtomicEth)) s.atomic = AtomicFields{rng() & ~7ull, static_cast<uint32_t>(rng()), rng(), rng()};
      if (op.has(kHdrAtomicAckEth)) s.atomic_ack = rng();
      g.payload.resize(size);
      for (auto& b : g.payload) b = static_cast<uint8_t>(rng());
      s.payload = g.payload;
      g.bytes.resize(frame_size(s));
      build_frame(s, g.bytes);
      s.payload = {};
      out.push_back(std::move(g));
    }
  }
  return out;
}

}  // namespace isoroce::tools
