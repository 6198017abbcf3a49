// Malformed frames: each gets its precise error and nothing reads past the
// buffer (run under ASan with -DISOROCE_SANITIZE=ON to see the latter).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "transport/wire/build.h"
#include "transport/wire/bytes.h"
#include "transport/wire/parse.h"

namespace isoroce::wire {
namespace {

std::vector<uint8_t> payload_of(size_t n) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i * 7 + 1);
  return p;
}

// A valid RC SEND_ONLY of 13 bytes (pad 3), IPv4 unless v6.
std::vector<uint8_t> good_frame(bool v6 = false, uint8_t opcode = op::kRcSendOnly, size_t len = 13) {
  static const std::vector<uint8_t> payload = payload_of(4096);
  FrameSpec s;
  s.src_ip = v6 ? IpAddr{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1} : ipv4_mapped(0x0a000001);
  s.dst_ip = v6 ? IpAddr{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2} : ipv4_mapped(0x0a000002);
  s.opcode = opcode;
  s.dest_qp = Qpn(0x11);
  s.psn = Psn(100);
  if (opcode_info(opcode).has(kHdrAeth)) s.aeth = AethFields{0, 1};
  if (opcode_info(opcode).has_payload()) s.payload = std::span(payload).first(len);
  std::vector<uint8_t> f(frame_size(s));
  EXPECT_TRUE(build_frame(s, f).ok());
  return f;
}

// Rewrites the IPv4 header checksum after a deliberate header change.
void fix_ipv4_checksum(std::vector<uint8_t>& f) { ipv4_set_checksum(f.data() + 14); }

ParseError parse(std::vector<uint8_t>& f) { return parse_frame(f).error; }

constexpr size_t kIp = 14, kUdp = 34, kBth = 42;

TEST(Malformed, EveryTruncationIsAnErrorNeverOk) {
  for (bool v6 : {false, true}) {
    const auto full = good_frame(v6);
    for (size_t n = 0; n < full.size(); ++n) {
      std::vector<uint8_t> f(full.begin(), full.begin() + static_cast<long>(n));
      const ParseError e = parse(f);
      ASSERT_NE(e, ParseError::kOk) << "prefix of " << n << " bytes accepted";
      ASSERT_EQ(e, ParseError::kTruncated) << "prefix of " << n << " bytes: " << parse_error_name(e);
    }
  }
}

TEST(Malformed, TrailingEthernetPaddingIsIgnored) {
  // Receive a minimum-size Ethernet frame padded past the IP datagram.
  auto f = good_frame(false, op::kRcAck);
  f.resize(std::max<size_t>(f.size(), 60) + 4, 0);
  EXPECT_EQ(parse(f), ParseError::kOk);
}

TEST(Malformed, NotIp) {
  auto f = good_frame();
  f[12] = 0x08;
  f[13] = 0x06;  // ARP
  EXPECT_EQ(parse(f), ParseError::kNotIp);
  f = good_frame();
  f[kIp] = 0x55;  // ethertype IPv4, version 5
  EXPECT_EQ(parse(f), ParseError::kNotIp);
}

TEST(Malformed, NotUdp) {
  auto f = good_frame();
  f[kIp + 9] = 6;  // TCP
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::kNotUdp);
}

TEST(Malformed, NotRocePort) {
  auto f = good_frame();
  f[kUdp + 2] = 0x12;
  f[kUdp + 3] = 0xb6;  // 4790
  EXPECT_EQ(parse(f), ParseError::kNotRoce);
}

TEST(Malformed, AnySourcePortIsAccepted) {
  // The Huawei RNIC's reverse direction uses UDP source port 69, the ConnectX
  // CNP port 0: only the destination port identifies RoCEv2.
  for (uint16_t sport : {0, 69, 4791, 0xc000, 0xffff}) {
    FrameSpec s;
    s.src_ip = ipv4_mapped(0x0a000001);
    s.dst_ip = ipv4_mapped(0x0a000002);
    s.opcode = op::kRcAck;
    s.aeth = AethFields{0, 1};
    s.udp_sport = sport;
    std::vector<uint8_t> f(frame_size(s));
    ASSERT_TRUE(build_frame(s, f).ok());
    const ParseResult r = parse_frame(f);
    EXPECT_EQ(r.error, ParseError::kOk);
    EXPECT_EQ(r.pkt.udp_sport, sport);
  }
}

TEST(Malformed, Ipv4OptionsAndFragments) {
  auto f = good_frame();
  f[kIp] = 0x46;
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::kIpv4Options);
  f = good_frame();
  f[kIp + 6] = 0x20;  // MF
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::kIpv4Fragment);
  f = good_frame();
  f[kIp + 6] = 0x00;
  f[kIp + 7] = 0x08;  // offset 64 bytes
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::kIpv4Fragment);
}

TEST(Malformed, BadIpv4Checksum) {
  auto f = good_frame();
  f[kIp + 11] ^= 0x01;
  EXPECT_EQ(parse(f), ParseError::kBadIpChecksum);
  ParseOptions lax;
  lax.verify_ip_checksum = false;
  EXPECT_EQ(parse_frame(f, lax).error, ParseError::kOk);
}

TEST(Malformed, LengthFieldsDisagree) {
  auto f = good_frame();
  f[kUdp + 5] += 4;  // UDP length longer than the datagram
  EXPECT_EQ(parse(f), ParseError::kLengthMismatch);
  f = good_frame();
  f[kIp + 3] = 20 + 8 + 4;  // IP total length too short for the BTH
  f[kIp + 2] = 0;
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::kLengthMismatch);
  // An ACK (header-only opcode) with 4 bytes of payload.
  f = good_frame(false, op::kRcAck);
  f.insert(f.end() - 4, {1, 2, 3, 4});
  f[kIp + 3] += 4;
  f[kUdp + 5] += 4;
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::kLengthMismatch);
  // IPv6 payload length longer than the frame.
  f = good_frame(true);
  f[kIp + 5] += 8;
  EXPECT_EQ(parse(f), ParseError::kTruncated);
}

TEST(Malformed, UnknownOpcodeAndVersion) {
  for (uint8_t opcode : {0x15, 0x18, 0x1f, 0x40, 0x66, 0x80, 0xff}) {
    auto f = good_frame();
    f[kBth] = opcode;
    EXPECT_EQ(parse(f), ParseError::kUnknownOpcode) << int(opcode);
  }
  auto f = good_frame();
  f[kBth + 1] |= 0x01;  // TVer 1
  EXPECT_EQ(parse(f), ParseError::kBadTransportVersion);
}

TEST(Malformed, BadPadCount) {
  // Pad on a FIRST packet: only the last packet of a message pads.
  auto f = good_frame(false, op::kRcSendFirst, 256);
  f[kBth + 1] |= 0x10;
  EXPECT_EQ(parse(f), ParseError::kBadPadCount);
  // Pad on a header-only packet.
  f = good_frame(false, op::kRcAck);
  f[kBth + 1] |= 0x30;
  EXPECT_EQ(parse(f), ParseError::kBadPadCount);
  // Pad larger than the bytes present.
  f = good_frame(false, op::kRcSendOnly, 0);
  f[kBth + 1] |= 0x20;
  EXPECT_EQ(parse(f), ParseError::kBadPadCount);
  // Payload plus pad not a multiple of 4: drop one pad byte from a padded frame.
  f = good_frame(false, op::kRcSendOnly, 13);
  f.erase(f.end() - 5);
  f[kIp + 3] -= 1;
  f[kUdp + 5] -= 1;
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::kBadPadCount);
  // A legal but different pad count on a last packet is caught by the ICRC.
  f = good_frame(false, op::kRcSendOnly, 16);
  f[kBth + 1] |= 0x10;
  EXPECT_EQ(parse(f), ParseError::kBadIcrc);
}

TEST(Malformed, BadIcrc) {
  auto f = good_frame();
  f[f.size() - 1] ^= 0x80;
  const ParseResult r = parse_frame(f);
  EXPECT_EQ(r.error, ParseError::kBadIcrc);
  EXPECT_FALSE(r.pkt.icrc_ok);
  EXPECT_EQ(r.pkt.opcode, op::kRcSendOnly);  // fields still decoded for tools
}

TEST(Malformed, RandomCorruptionIsRejectedUnlessOutsideTheIcrc) {
  std::mt19937_64 rng(1);
  const auto base = good_frame(false, op::kRcSendOnly, 64);
  // Bytes a corruption may hit and still leave a valid packet: the MAC
  // addresses (not under the ICRC), the UDP checksum and the BTH resv8a byte.
  auto outside_icrc = [](size_t i) { return i < 12 || i == kUdp + 6 || i == kUdp + 7 || i == kBth + 4; };
  size_t accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::vector<uint8_t> f = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) f[rng() % f.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) f.resize(rng() % (f.size() + 1));
    if (!parse_frame(f).ok()) continue;
    ++accepted;
    ASSERT_EQ(f.size(), base.size()) << "a truncated frame was accepted";
    for (size_t b = 0; b < f.size(); ++b) {
      ASSERT_TRUE(f[b] == base[b] || outside_icrc(b)) << "corrupted byte " << b << " accepted";
    }
  }
  RecordProperty("accepted", static_cast<int>(accepted));
}

}  // namespace
}  // namespace isoroce::wire
