// Frames built from a per-path HeaderTemplate are byte for byte the frames
// build_frame() makes from the whole spec: every opcode (RC, UC, UD, CNP, XRC),
// IPv4 and IPv6, with and without a VLAN tag, every pad count, gathered payloads,
// per-frame traffic classes and BTH flags, and the same errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "transport/wire/build.h"

namespace isoroce::wire {
namespace {

FrameSpec path_spec(bool ipv6, bool vlan, std::mt19937& rng) {
  FrameSpec s;
  for (auto& b : s.dst_mac) b = static_cast<uint8_t>(rng());
  for (auto& b : s.src_mac) b = static_cast<uint8_t>(rng());
  if (vlan) s.vlan_tci = static_cast<uint16_t>(rng());
  if (ipv6) {
    for (auto& b : s.src_ip) b = static_cast<uint8_t>(rng());
    for (auto& b : s.dst_ip) b = static_cast<uint8_t>(rng());
    s.src_ip[0] = 0xfe;  // never IPv4-mapped
    s.dst_ip[0] = 0x20;
  } else {
    s.src_ip = ipv4_mapped(static_cast<uint32_t>(rng()));
    s.dst_ip = ipv4_mapped(static_cast<uint32_t>(rng()));
  }
  s.hop_limit = static_cast<uint8_t>(rng());
  s.flow_label = static_cast<uint32_t>(rng()) & 0xfffff;
  s.ip_id = static_cast<uint16_t>(rng());
  s.dont_fragment = rng() & 1;
  s.udp_sport = static_cast<uint16_t>(rng());
  s.pkey = static_cast<uint16_t>(rng());
  s.dest_qp = Qpn(static_cast<uint32_t>(rng()));
  return s;
}

void frame_fields(FrameSpec& s, uint8_t opcode, std::mt19937& rng) {
  s.opcode = opcode;
  s.traffic_class = static_cast<uint8_t>(rng());
  s.solicited = rng() & 1;
  s.mig_req = rng() & 1;
  s.fecn = rng() & 1;
  s.becn = rng() & 1;
  s.ack_req = rng() & 1;
  s.psn = Psn(static_cast<uint32_t>(rng()));
  const OpcodeInfo& op = opcode_info(opcode);
  s.clear_extensions();
  if (op.has(kHdrReth)) s.reth = RethFields{rng() * 0x100000001ull, static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng())};
  if (op.has(kHdrAeth)) s.aeth = AethFields{static_cast<uint8_t>(rng()), static_cast<uint32_t>(rng()) & 0xffffff};
  if (op.has(kHdrDeth)) s.deth = DethFields{static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()) & 0xffffff};
  if (op.has(kHdrImmDt)) s.imm = static_cast<uint32_t>(rng());
  if (op.has(kHdrIeth)) s.ieth = static_cast<uint32_t>(rng());
  if (op.has(kHdrAtomicEth)) {
    s.atomic = AtomicFields{rng() * 3ull, static_cast<uint32_t>(rng()), rng() * 5ull, rng() * 7ull};
  }
  if (op.has(kHdrAtomicAckEth)) s.atomic_ack = rng() * 11ull;
}

TEST(WireTemplate, EveryOpcodeFamilyVlanAndPadIsByteIdentical) {
  std::mt19937 rng(20);
  std::vector<uint8_t> payload(4096 + 3);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  int frames = 0;
  for (bool ipv6 : {false, true}) {
    for (bool vlan : {false, true}) {
      FrameSpec s = path_spec(ipv6, vlan, rng);
      HeaderTemplate t;
      ASSERT_EQ(make_header_template(s, &t), BuildError::kOk);
      ASSERT_TRUE(t.valid());
      for (int code = 0; code < 256; ++code) {
        const OpcodeInfo& op = opcode_info(static_cast<uint8_t>(code));
        if (!op.valid()) continue;
        const std::vector<size_t> sizes = op.has_payload() ? std::vector<size_t>{0, 1, 2, 3, 4, 61, 1024, 4099}
                                                           : std::vector<size_t>{0};
        for (size_t n : sizes) {
          frame_fields(s, static_cast<uint8_t>(code), rng);
          // The payload in three pieces, the way the engine gathers SGEs.
          const size_t a = n / 3, b = n / 2;
          const std::span<const uint8_t> all(payload.data(), n);
          const std::span<const uint8_t> pieces[3] = {all.subspan(0, a), all.subspan(a, b - a), all.subspan(b)};
          std::vector<uint8_t> want(frame_size(s, n) + 64, 0xaa), got(want.size(), 0x55);
          const BuildResult rw = build_frame_gather(s, pieces, want);
          // Given exactly the frame's bytes, it writes nothing past them.
          const BuildResult rg =
              build_frame_templated(t, s, pieces, std::span<uint8_t>(got.data(), frame_size(s, n)));
          ASSERT_TRUE(rw.ok()) << build_error_message(rw.error);
          ASSERT_TRUE(rg.ok()) << build_error_message(rg.error);
          ASSERT_EQ(rw.len, rg.len);
          ASSERT_TRUE(std::equal(want.begin(), want.begin() + rw.len, got.begin()))
              << "opcode 0x" << std::hex << code << std::dec << " ipv6 " << ipv6 << " vlan " << vlan
              << " payload " << n;
          ASSERT_TRUE(std::all_of(got.begin() + rg.len, got.end(), [](uint8_t x) { return x == 0x55; }));
          ++frames;
        }
      }
    }
  }
  EXPECT_GT(frames, 400);
}

TEST(WireTemplate, ItsPathFieldsComeFromTheTemplateNotTheSpec) {
  std::mt19937 rng(21);
  const FrameSpec path = path_spec(false, false, rng);
  HeaderTemplate t;
  ASSERT_EQ(make_header_template(path, &t), BuildError::kOk);
  // A spec with other path fields: the template's win.
  FrameSpec other = path_spec(false, true, rng);
  FrameSpec want = path;
  frame_fields(want, op::kRcSendOnly, rng);
  static_cast<ExtensionHeaders&>(other) = want;
  other.opcode = want.opcode;
  other.traffic_class = want.traffic_class;
  other.solicited = want.solicited;
  other.mig_req = want.mig_req;
  other.fecn = want.fecn;
  other.becn = want.becn;
  other.ack_req = want.ack_req;
  other.psn = want.psn;
  const uint8_t data[5] = {1, 2, 3, 4, 5};
  const std::span<const uint8_t> one[1] = {data};
  std::vector<uint8_t> a(256), b(256);
  const BuildResult ra = build_frame_gather(want, one, a);
  const BuildResult rb = build_frame_templated(t, other, one, b);
  ASSERT_TRUE(ra.ok());
  ASSERT_TRUE(rb.ok());
  ASSERT_EQ(ra.len, rb.len);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + ra.len, b.begin()));
}

TEST(WireTemplate, RefusesWhatBuildFrameRefuses) {
  std::mt19937 rng(22);
  FrameSpec s = path_spec(false, false, rng);
  HeaderTemplate t;
  FrameSpec mixed = s;
  mixed.dst_ip[0] = 0xfe;
  EXPECT_EQ(make_header_template(mixed, &t), BuildError::kMixedAddressFamilies);
  EXPECT_FALSE(t.valid());
  ASSERT_EQ(make_header_template(s, &t), BuildError::kOk);
  std::vector<uint8_t> out(128);
  const uint8_t data[4] = {};
  const std::span<const uint8_t> one[1] = {data};
  s.opcode = op::kRcWriteOnly;  // no RETH set
  EXPECT_EQ(build_frame_templated(t, s, one, out).error, BuildError::kMissingHeader);
  frame_fields(s, op::kRcAck, rng);
  EXPECT_EQ(build_frame_templated(t, s, one, out).error, BuildError::kPayloadNotAllowed);
  EXPECT_EQ(build_frame_templated(t, s, {}, std::span<uint8_t>(out.data(), 20)).error,
            BuildError::kBufferTooSmall);
  s.opcode = 0xff;
  EXPECT_EQ(build_frame_templated(t, s, {}, out).error, BuildError::kUnknownOpcode);
}

}  // namespace
}  // namespace isoroce::wire
