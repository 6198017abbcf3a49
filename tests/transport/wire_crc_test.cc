// The folding CRC-32 (transport/wire/crc32.h) against zlib's crc32 on every path the
// CPU offers, the copy-and-CRC routine against a plain copy, and the ICRC of frames
// built with the fused copy against an ICRC computed here from a masked copy of the
// frame with zlib (an independent implementation of annex A17.3.3). Random sizes,
// offsets and piece boundaries, seeded.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "transport/wire/build.h"
#include "transport/wire/crc32.h"
#include "transport/wire/icrc.h"
#include "transport/wire/parse.h"

namespace isoroce::wire {
namespace {

uint32_t zlib_crc(const uint8_t* p, size_t n) {
  return static_cast<uint32_t>(crc32(0, p, static_cast<uInt>(n)));
}

// Restores the automatic choice after a test forced a path.
class CrcPaths : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!crc32_force_impl(GetParam())) GTEST_SKIP() << "this CPU lacks " << GetParam();
  }
  void TearDown() override { crc32_force_impl(saved_); }

 private:
  std::string saved_{crc32_impl()};
};

TEST_P(CrcPaths, MatchesZlibOverRandomSizesAndOffsets) {
  std::mt19937_64 rng(20);
  std::vector<uint8_t> buf(70'000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 3000; ++i) {
    const size_t off = rng() % 64;
    const size_t n = i < 2000 ? rng() % 1100 : rng() % 66'000;
    ASSERT_EQ(~crc32_update(~0u, buf.data() + off, n), zlib_crc(buf.data() + off, n)) << "n " << n << " off " << off;
  }
}

TEST_P(CrcPaths, CopyCopiesExactlyAndMatches) {
  std::mt19937_64 rng(21);
  std::vector<uint8_t> src(20'000), dst(20'200);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 2000; ++i) {
    const size_t soff = rng() % 64, doff = rng() % 64;
    const size_t n = rng() % (i < 1000 ? 700 : 19'000);
    std::fill(dst.begin(), dst.end(), 0xa5);
    const uint32_t crc = ~crc32_copy_update(~0u, dst.data() + 64 + doff, src.data() + soff, n);
    ASSERT_EQ(crc, zlib_crc(src.data() + soff, n)) << "n " << n;
    ASSERT_EQ(std::memcmp(dst.data() + 64 + doff, src.data() + soff, n), 0) << "n " << n;
    // Nothing outside [dst, dst + n) is written.
    for (size_t k = 0; k < 64 + doff; ++k) ASSERT_EQ(dst[k], 0xa5) << "before, n " << n;
    for (size_t k = 64 + doff + n; k < dst.size(); ++k) ASSERT_EQ(dst[k], 0xa5) << "after, n " << n;
  }
}

TEST_P(CrcPaths, PiecesGiveTheSameCrcAsTheWhole) {
  std::mt19937_64 rng(22);
  std::vector<uint8_t> buf(9000), out(9000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 500; ++i) {
    const size_t n = rng() % buf.size();
    uint32_t reg = ~0u;
    for (size_t at = 0; at < n;) {
      const size_t piece = std::min(n - at, static_cast<size_t>(rng() % 700));
      reg = (rng() & 1) ? crc32_update(reg, buf.data() + at, piece)
                        : crc32_copy_update(reg, out.data() + at, buf.data() + at, piece);
      at += piece;
    }
    ASSERT_EQ(~reg, zlib_crc(buf.data(), n)) << "n " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, CrcPaths, ::testing::Values("avx512-vpclmulqdq", "sse-pclmulqdq", "table"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(Crc32, TableAgreesWithTheChosenPath) {
  std::vector<uint8_t> buf(5000);
  std::mt19937_64 rng(23);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  EXPECT_EQ(crc32_update_table(0x1234'5678u, buf.data(), buf.size()), crc32_update(0x1234'5678u, buf.data(), buf.size()))
      << crc32_impl();
}

// The ICRC of A17.3.3 from a masked copy, with zlib.
uint32_t reference_icrc(const std::vector<uint8_t>& frame, size_t l3, size_t icrc_off) {
  std::vector<uint8_t> m(8, 0xff);
  m.insert(m.end(), frame.begin() + static_cast<long>(l3), frame.begin() + static_cast<long>(icrc_off));
  uint8_t* ip = m.data() + 8;
  size_t ip_len;
  if ((ip[0] >> 4) == 4) {
    ip_len = static_cast<size_t>(ip[0] & 0xf) * 4;
    ip[1] = 0xff;
    ip[8] = 0xff;
    ip[10] = ip[11] = 0xff;
  } else {
    ip_len = 40;
    ip[0] |= 0x0f;
    ip[1] = ip[2] = ip[3] = 0xff;
    ip[7] = 0xff;
  }
  ip[ip_len + 6] = ip[ip_len + 7] = 0xff;  // UDP checksum
  ip[ip_len + 8 + 4] = 0xff;               // BTH resv8a
  return zlib_crc(m.data(), m.size());
}

// Frames built with the payload gathered from random pieces (the fused copy-and-CRC
// path of build.cc) carry the reference ICRC, parse clean, and fail on a flipped bit.
TEST(Icrc, FusedBuildMatchesTheReferenceOverRandomFrames) {
  std::mt19937_64 rng(24);
  std::vector<uint8_t> payload(9000);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 400; ++i) {
    FrameSpec s;
    const bool v6 = i % 3 == 0;
    s.src_ip = v6 ? IpAddr{0xfe, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14} : ipv4_mapped(0x0a000001);
    s.dst_ip = v6 ? IpAddr{0xfe, 0x80, 9, 9, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15} : ipv4_mapped(0x0a000002);
    if (i % 5 == 0) s.vlan_tci = 7;
    s.traffic_class = static_cast<uint8_t>(rng());
    s.hop_limit = static_cast<uint8_t>(rng());
    s.flow_label = static_cast<uint32_t>(rng() & 0xfffff);
    s.fecn = rng() & 1;
    s.becn = rng() & 1;
    s.psn = Psn(static_cast<uint32_t>(rng() & 0xffffff));
    s.dest_qp = Qpn(static_cast<uint32_t>(rng() & 0xffffff));
    const size_t len = rng() % 4200;
    const size_t off = rng() % 64;
    s.opcode = op::kRcWriteOnly;
    s.reth = RethFields{rng(), static_cast<uint32_t>(rng()), static_cast<uint32_t>(len)};
    std::vector<std::span<const uint8_t>> pieces;
    for (size_t at = 0; at < len;) {
      const size_t n = std::min(len - at, static_cast<size_t>(1 + rng() % 1500));
      pieces.emplace_back(payload.data() + off + at, n);
      at += n;
    }
    std::vector<uint8_t> f(frame_size(s, len));
    ASSERT_TRUE(build_frame_gather(s, pieces, f).ok());
    const size_t l3 = s.vlan_tci ? 18 : 14;
    const size_t icrc_off = f.size() - kIcrcBytes;
    ASSERT_EQ(icrc_stored(f, icrc_off), reference_icrc(f, l3, icrc_off)) << "frame " << i << " len " << len;
    ASSERT_EQ(icrc_compute(f, l3, icrc_off), icrc_stored(f, icrc_off));
    const ParseResult r = parse_frame(f);
    ASSERT_TRUE(r.ok()) << parse_error_message(r.error);
    ASSERT_EQ(std::memcmp(f.data() + r.pkt.payload_offset, payload.data() + off, len), 0);
    // The receive side's form: header CRC, then the payload copied out, then the pad.
    std::vector<uint8_t> out(len + 1);
    uint32_t reg = icrc_begin(f, l3, r.pkt.payload_offset);
    reg = crc32_copy_update(reg, out.data(), f.data() + r.pkt.payload_offset, len);
    reg = crc32_update(reg, f.data() + r.pkt.payload_offset + len, r.pkt.pad);
    ASSERT_EQ(icrc_finish(reg), r.pkt.icrc);
    ASSERT_EQ(std::memcmp(out.data(), payload.data() + off, len), 0);
    // One flipped bit anywhere the ICRC covers (masked fields aside) is caught.
    const size_t from = r.pkt.bth_offset + 12;  // past every masked field
    const size_t bit = from * 8 + rng() % ((icrc_off - from) * 8);
    f[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(icrc_compute(f, l3, icrc_off), icrc_stored(f, icrc_off)) << "bit " << bit;
  }
}

}  // namespace
}  // namespace isoroce::wire
