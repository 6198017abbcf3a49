// Build-then-parse round trips for every opcode, IPv4 and IPv6, with and
// without a VLAN tag, every pad count; and single-bit errors under the ICRC.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "transport/wire/build.h"
#include "transport/wire/bytes.h"
#include "transport/wire/icrc.h"
#include "transport/wire/parse.h"
#include "tools/pcap/generate.h"

namespace isoroce::wire {
namespace {

struct Case {
  bool ipv6;
  bool vlan;
};

void expect_same_fields(const FrameSpec& s, const std::vector<uint8_t>& payload, const RocePacket& p) {
  const OpcodeInfo& op = opcode_info(s.opcode);
  EXPECT_EQ(p.opcode, s.opcode);
  EXPECT_EQ(p.op, &op);
  EXPECT_EQ(p.ip_version, is_ipv4_mapped(s.src_ip) ? 4 : 6);
  EXPECT_EQ(p.src_ip, s.src_ip);
  EXPECT_EQ(p.dst_ip, s.dst_ip);
  EXPECT_EQ(p.src_mac, s.src_mac);
  EXPECT_EQ(p.dst_mac, s.dst_mac);
  EXPECT_EQ(p.vlan_tci, s.vlan_tci);
  EXPECT_EQ(p.traffic_class, s.traffic_class);
  EXPECT_EQ(p.hop_limit, s.hop_limit);
  if (p.ip_version == 6) {
    EXPECT_EQ(p.flow_label, s.flow_label);
  }
  EXPECT_EQ(p.udp_sport, s.udp_sport);
  EXPECT_EQ(p.udp_dport, kRoceV2Port);
  EXPECT_EQ(p.solicited, s.solicited);
  EXPECT_EQ(p.pkey, s.pkey);
  EXPECT_EQ(p.becn, s.becn);
  EXPECT_EQ(p.fecn, s.fecn);
  EXPECT_EQ(p.dest_qp, s.dest_qp);
  EXPECT_EQ(p.ack_req, s.ack_req);
  EXPECT_EQ(p.psn, s.psn);
  EXPECT_EQ(p.pad, op.has_payload() ? pad_for(payload.size()) : 0);
  EXPECT_EQ(p.payload_len, payload.size());
  EXPECT_EQ(p.reth.has_value(), s.reth.has_value());
  if (p.reth) {
    EXPECT_EQ(p.reth->va, s.reth->va);
    EXPECT_EQ(p.reth->rkey, s.reth->rkey);
    EXPECT_EQ(p.reth->dma_len, s.reth->dma_len);
  }
  EXPECT_EQ(p.aeth.has_value(), s.aeth.has_value());
  if (p.aeth) {
    EXPECT_EQ(p.aeth->syndrome, s.aeth->syndrome);
    EXPECT_EQ(p.aeth->msn, s.aeth->msn);
  }
  EXPECT_EQ(p.deth.has_value(), s.deth.has_value());
  if (p.deth) {
    EXPECT_EQ(p.deth->qkey, s.deth->qkey);
    EXPECT_EQ(p.deth->src_qp, s.deth->src_qp);
  }
  EXPECT_EQ(p.imm, s.imm);
  EXPECT_EQ(p.ieth, s.ieth);
  EXPECT_EQ(p.atomic_ack, s.atomic_ack);
  EXPECT_EQ(p.atomic.has_value(), s.atomic.has_value());
  if (p.atomic) {
    EXPECT_EQ(p.atomic->va, s.atomic->va);
    EXPECT_EQ(p.atomic->rkey, s.atomic->rkey);
    EXPECT_EQ(p.atomic->swap_add, s.atomic->swap_add);
    EXPECT_EQ(p.atomic->compare, s.atomic->compare);
  }
  EXPECT_TRUE(p.icrc_ok);
}

class RoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(RoundTrip, EveryOpcodeEveryPadCount) {
  std::set<uint8_t> opcodes_seen;
  std::set<uint8_t> pads_seen;
  for (auto& g : tools::generate_frames(GetParam().ipv6, 42)) {
    FrameSpec s = g.spec;
    s.payload = g.payload;
    if (GetParam().vlan) s.vlan_tci = 0x2005;
    else s.vlan_tci.reset();
    std::vector<uint8_t> frame(frame_size(s));
    const BuildResult b = build_frame(s, frame);
    ASSERT_TRUE(b.ok()) << build_error_message(b.error);
    ASSERT_EQ(b.len, frame.size());
    EXPECT_EQ(frame_size(!GetParam().ipv6, GetParam().vlan, s.opcode, g.payload.size()), b.len);
    const ParseResult r = parse_frame(frame);
    ASSERT_TRUE(r.ok()) << opcode_info(s.opcode).name << ": " << parse_error_name(r.error);
    expect_same_fields(s, g.payload, r.pkt);
    EXPECT_TRUE(std::equal(g.payload.begin(), g.payload.end(), frame.begin() + r.pkt.payload_offset));
    opcodes_seen.insert(s.opcode);
    pads_seen.insert(r.pkt.pad);
  }
  size_t known = 0;
  for (const auto& op : kOpcodes) known += op.valid();
  EXPECT_EQ(opcodes_seen.size(), known);
  EXPECT_EQ(pads_seen, (std::set<uint8_t>{0, 1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Wire, RoundTrip,
                         ::testing::Values(Case{false, false}, Case{false, true}, Case{true, false},
                                           Case{true, true}),
                         [](const auto& info) {
                           return std::string(info.param.ipv6 ? "IPv6" : "IPv4") +
                                  (info.param.vlan ? "Vlan" : "");
                         });

// Bits the network may change and the ICRC therefore masks.
bool is_variant(const RocePacket& p, size_t i, int bit) {
  const size_t l3 = p.l3_offset;
  if (i == p.l4_offset + 6 || i == p.l4_offset + 7 || i == p.bth_offset + 4) return true;
  if (p.ip_version == 4) return i == l3 + 1 || i == l3 + 8 || i == l3 + 10 || i == l3 + 11;
  // IPv6: traffic class (low nibble of byte 0, high of byte 1), flow label, hop limit.
  return (i == l3 && bit < 4) || i == l3 + 1 || i == l3 + 2 || i == l3 + 3 || i == l3 + 7;
}

TEST(Icrc, EverySingleBitErrorIsDetected) {
  size_t frames = 0, flips = 0;
  for (bool v6 : {false, true}) {
    for (auto& g : tools::generate_frames(v6, 5)) {
      if (g.bytes.size() > 400) continue;  // every opcode has short frames
      std::vector<uint8_t> f = g.bytes;
      const ParseResult r = parse_frame(f);
      ASSERT_TRUE(r.ok());
      const size_t icrc_off = r.pkt.frame_end - kIcrcBytes;
      const uint32_t good = icrc_stored(f, icrc_off);
      ++frames;
      for (size_t i = r.pkt.l3_offset; i < icrc_off; ++i) {
        for (int bit = 0; bit < 8; ++bit) {
          f[i] ^= static_cast<uint8_t>(1 << bit);
          const uint32_t crc = icrc_compute(f, r.pkt.l3_offset, icrc_off);
          if (is_variant(r.pkt, i, bit)) {
            ASSERT_EQ(crc, good) << "masked byte " << i << " changed the ICRC";
          } else {
            ASSERT_NE(crc, good) << "flip of byte " << i << " bit " << bit << " undetected";
            ASSERT_FALSE(parse_frame(f).ok());
          }
          f[i] ^= static_cast<uint8_t>(1 << bit);
          ++flips;
        }
      }
      ASSERT_EQ(f, g.bytes) << "ICRC computation must leave the frame unchanged";
    }
  }
  RecordProperty("frames", static_cast<int>(frames));
  RecordProperty("bit_flips", static_cast<int>(flips));
  EXPECT_GT(frames, 100u);
}

TEST(Icrc, VariantFieldsMayChangeInFlight) {
  // Receive a frame whose TOS/ECN, TTL and BECN were rewritten by switches:
  // Expect: still a valid packet.
  auto g = tools::generate_frames(false, 9).front();
  std::vector<uint8_t> f = g.bytes;
  ParseResult r = parse_frame(f);
  ASSERT_TRUE(r.ok());
  const size_t l3 = r.pkt.l3_offset;
  f[l3 + 1] |= 0x3;  // CE
  f[l3 + 8] -= 3;    // three hops
  f[r.pkt.bth_offset + 4] |= 0x40;  // BECN
  ipv4_set_checksum(f.data() + l3);  // as a router does
  r = parse_frame(f);
  ASSERT_TRUE(r.ok()) << parse_error_name(r.error);
  EXPECT_EQ(r.pkt.ecn(), 3);
  EXPECT_TRUE(r.pkt.becn);
}

TEST(Build, RejectsImpossibleSpecs) {
  std::vector<uint8_t> out(9000);
  FrameSpec s;
  s.src_ip = ipv4_mapped(0x0a000001);
  s.dst_ip = ipv4_mapped(0x0a000002);
  s.opcode = 0x15;  // reserved
  EXPECT_EQ(build_frame(s, out).error, BuildError::kUnknownOpcode);
  s.opcode = op::kRcWriteOnly;  // needs a RETH
  EXPECT_EQ(build_frame(s, out).error, BuildError::kMissingHeader);
  s.reth = RethFields{0x1000, 7, 0};
  s.dst_ip[10] = 0;  // no longer IPv4-mapped
  EXPECT_EQ(build_frame(s, out).error, BuildError::kMixedAddressFamilies);
  s.dst_ip = ipv4_mapped(0x0a000002);
  const std::vector<uint8_t> payload(100);
  s.payload = payload;
  EXPECT_EQ(build_frame(s, std::span<uint8_t>(out).first(60)).error, BuildError::kBufferTooSmall);
  EXPECT_TRUE(build_frame(s, out).ok());
  s.opcode = op::kRcAck;
  s.aeth = AethFields{0, 1};
  EXPECT_EQ(build_frame(s, out).error, BuildError::kPayloadNotAllowed);
  const std::vector<uint8_t> huge(70000);
  s.opcode = op::kRcSendOnly;
  s.payload = huge;
  EXPECT_EQ(build_frame(s, out).error, BuildError::kTooLarge);
}

}  // namespace
}  // namespace isoroce::wire
