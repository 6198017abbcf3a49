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

// A frame's path and BTH fields at random (IPv6 link-local or IPv4 addresses).
FrameSpec random_path(std::mt19937_64& rng, bool v6) {
  FrameSpec s;
  s.src_ip = v6 ? IpAddr{0xfe, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14} : ipv4_mapped(0x0a000001);
  s.dst_ip = v6 ? IpAddr{0xfe, 0x80, 9, 9, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15} : ipv4_mapped(0x0a000002);
  s.traffic_class = static_cast<uint8_t>(rng());
  s.hop_limit = static_cast<uint8_t>(rng());
  s.flow_label = static_cast<uint32_t>(rng() & 0xfffff);
  s.fecn = rng() & 1;
  s.becn = rng() & 1;
  s.psn = Psn(static_cast<uint32_t>(rng() & 0xffffff));
  s.dest_qp = Qpn(static_cast<uint32_t>(rng() & 0xffffff));
  return s;
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

// One fold stream fed in pieces of every small length and random larger ones, some
// copied and some not, from a random register: the register read at any point is
// the plain CRC of what came so far, copies land exactly, nothing else is written.
TEST_P(CrcPaths, FoldStreamMatchesZlibOverOddPieces) {
  std::mt19937_64 rng(25);
  std::vector<uint8_t> buf(12'000), out(12'200);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 1500; ++i) {
    const size_t n = i < 600 ? static_cast<size_t>(i) : rng() % buf.size();
    const uint32_t start = (i & 1) ? ~0u : static_cast<uint32_t>(rng());
    std::fill(out.begin(), out.end(), 0xa5);
    Crc32Fold f = crc32_fold_init(start);
    std::vector<bool> copied(n, false);
    for (size_t at = 0; at < n;) {
      // Pieces of 0..17 bytes most of the time (every alignment of the 16-byte
      // blocks), sometimes up to 600.
      const size_t want = (rng() % 4 == 0) ? rng() % 600 : rng() % 18;
      const size_t piece = std::min(n - at, want);
      if (rng() & 1) {
        crc32_fold_copy(f, out.data() + 100 + at, buf.data() + at, piece);
        std::fill(copied.begin() + static_cast<long>(at), copied.begin() + static_cast<long>(at + piece), true);
      } else {
        crc32_fold(f, buf.data() + at, piece);
      }
      at += piece;
      if (rng() % 8 == 0) {
        ASSERT_EQ(crc32_fold_register(f), crc32_update_table(start, buf.data(), at)) << "at " << at << " of " << n;
      }
    }
    ASSERT_EQ(crc32_fold_register(f), crc32_update_table(start, buf.data(), n)) << "n " << n;
    if (start == ~0u) {
      ASSERT_EQ(~crc32_fold_register(f), zlib_crc(buf.data(), n));
    }
    for (size_t k = 0; k < out.size(); ++k) {
      const bool in = k >= 100 && k < 100 + n && copied[k - 100];
      ASSERT_EQ(out[k], in ? buf[k - 100] : 0xa5) << "byte " << k << " n " << n;
    }
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
    FrameSpec s = random_path(rng, i % 3 == 0);
    if (i % 5 == 0) s.vlan_tci = 7;
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

// Fills the extension headers the opcode carries.
void set_headers(FrameSpec& s, std::mt19937_64& rng, uint32_t len) {
  const OpcodeInfo& op = opcode_info(s.opcode);
  if (op.has(kHdrReth)) s.reth = RethFields{rng(), static_cast<uint32_t>(rng()), len};
  if (op.has(kHdrAeth)) s.aeth = AethFields{static_cast<uint8_t>(rng() & 0x1f), static_cast<uint32_t>(rng() & 0xffffff)};
  if (op.has(kHdrDeth)) s.deth = DethFields{static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng() & 0xffffff)};
  if (op.has(kHdrImmDt)) s.imm = static_cast<uint32_t>(rng());
  if (op.has(kHdrIeth)) s.ieth = static_cast<uint32_t>(rng());
  if (op.has(kHdrAtomicEth)) s.atomic = AtomicFields{rng(), static_cast<uint32_t>(rng()), rng(), rng()};
  if (op.has(kHdrAtomicAckEth)) s.atomic_ack = rng();
}

// The ICRC of the one-stream fold (headers masked on the stack, then each gather or
// scatter piece, then the pad, reduced once) is byte for byte the plain one: the
// reference (zlib over a masked copy) and the register-per-piece form (icrc_begin,
// crc32_update), for every opcode the table knows, IPv4 and IPv6, with and without
// VLAN, every payload length 0..4099, the payload gathered on build and scattered on
// receive in odd pieces.
TEST(Icrc, OneStreamEqualsThePlainIcrcForEveryOpcodeFamilyAndLength) {
  std::mt19937_64 rng(26);
  std::vector<uint8_t> payload(4200), out(4200);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> with_payload, without;
  for (unsigned o = 0; o < 256; ++o) {
    const OpcodeInfo& op = opcode_info(static_cast<uint8_t>(o));
    if (op.valid()) (op.has_payload() ? with_payload : without).push_back(static_cast<uint8_t>(o));
  }
  ASSERT_GE(with_payload.size(), 20u);
  ASSERT_GE(without.size(), 5u);
  int frames = 0;
  auto check = [&](uint8_t opcode, int family, size_t len) {
    const bool v6 = family & 1;
    FrameSpec s = random_path(rng, v6);
    if (family & 2) s.vlan_tci = static_cast<uint16_t>(rng() & 0xfff);
    s.opcode = opcode;
    set_headers(s, rng, static_cast<uint32_t>(len));
    const size_t off = rng() % 64;
    std::vector<std::span<const uint8_t>> pieces;
    for (size_t at = 0; at < len;) {
      const size_t n = std::min(len - at, static_cast<size_t>(rng() % 3 == 0 ? 1 + rng() % 1500 : 1 + rng() % 33));
      pieces.emplace_back(payload.data() + off + at, n);
      at += n;
    }
    std::vector<uint8_t> f(frame_size(s, len));
    ASSERT_TRUE(build_frame_gather(s, pieces, f).ok()) << int{opcode};
    const size_t l3 = s.vlan_tci ? 18 : 14;
    const size_t icrc_off = f.size() - kIcrcBytes;
    const uint32_t want = reference_icrc(f, l3, icrc_off);
    ASSERT_EQ(icrc_stored(f, icrc_off), want) << "opcode " << int{opcode} << " family " << family << " len " << len;
    ASSERT_EQ(icrc_compute(f, l3, icrc_off), want);
    // Where the payload and pad lie (the parser would reject some of these, e.g. an
    // empty middle packet: not the CRC's business).
    const size_t pad = opcode_info(opcode).has_payload() ? pad_for(len) : 0;
    const size_t payload_offset = icrc_off - pad - len;
    // The register-per-piece form.
    const uint8_t* pl = f.data() + payload_offset;
    const uint32_t head = icrc_begin(f, l3, payload_offset);
    ASSERT_EQ(icrc_finish(crc32_update(head, pl, len + pad)), want);
    // The receive's one stream: scattered in odd pieces, then the pad.
    Crc32Fold crc = icrc_fold_begin(f, l3, payload_offset);
    for (size_t at = 0; at < len;) {
      const size_t n = std::min(len - at, static_cast<size_t>(rng() % 2 ? 1 + rng() % 19 : 1 + rng() % 2000));
      crc32_fold_copy(crc, out.data() + at, pl + at, n);
      at += n;
    }
    crc32_fold(crc, pl + len, pad);
    ASSERT_EQ(icrc_finish(crc32_fold_register(crc)), want);
    ASSERT_EQ(std::memcmp(out.data(), payload.data() + off, len), 0);
    // A flipped bit past the masked fields is caught by the one stream.
    const size_t from = l3 + (v6 ? 40 : 20) + 8 + 12;
    if (icrc_off > from) {
      const size_t bit = from * 8 + rng() % ((icrc_off - from) * 8);
      f[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      ASSERT_NE(icrc_compute(f, l3, icrc_off), want) << "bit " << bit;
    }
    ++frames;
  };
  for (size_t len = 0; len < 4100; ++len) {
    for (int family = 0; family < 4; ++family) {
      check(with_payload[(len + static_cast<size_t>(family)) % with_payload.size()], family, len);
      if (HasFatalFailure()) return;
    }
  }
  for (uint8_t opcode : with_payload) {
    for (int family = 0; family < 4; ++family) {
      for (size_t len : {0, 1, 3, 15, 16, 17, 255, 256, 257, 1024, 4095, 4096}) {
        check(opcode, family, len);
        if (HasFatalFailure()) return;
      }
    }
  }
  for (uint8_t opcode : without) {
    for (int family = 0; family < 4; ++family) {
      check(opcode, family, 0);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(frames, 4100 * 4);
}

// The same on the other paths of the CPU (the table path has no fold accumulator).
TEST_P(CrcPaths, IcrcOneStreamMatchesTheReference) {
  std::mt19937_64 rng(27);
  std::vector<uint8_t> payload(5000);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 600; ++i) {
    FrameSpec s;
    const bool v6 = i & 1;
    s.src_ip = v6 ? IpAddr{0xfe, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14} : ipv4_mapped(0x0a000001);
    s.dst_ip = v6 ? IpAddr{0xfe, 0x80, 9, 9, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15} : ipv4_mapped(0x0a000002);
    if (i & 2) s.vlan_tci = 5;
    s.opcode = (i % 3 == 0) ? op::kRcWriteFirst : (i % 3 == 1) ? op::kUdSendOnlyImm : op::kRcReadResponseOnly;
    const size_t len = i < 300 ? static_cast<size_t>(i) : rng() % 4200;
    set_headers(s, rng, static_cast<uint32_t>(len));
    std::vector<std::span<const uint8_t>> pieces;
    for (size_t at = 0; at < len;) {
      const size_t n = std::min(len - at, static_cast<size_t>(1 + rng() % 40));
      pieces.emplace_back(payload.data() + at, n);
      at += n;
    }
    std::vector<uint8_t> f(frame_size(s, len));
    ASSERT_TRUE(build_frame_gather(s, pieces, f).ok());
    const size_t l3 = s.vlan_tci ? 18 : 14;
    const size_t icrc_off = f.size() - kIcrcBytes;
    ASSERT_EQ(icrc_stored(f, icrc_off), reference_icrc(f, l3, icrc_off)) << "len " << len;
    ASSERT_EQ(icrc_compute(f, l3, icrc_off), icrc_stored(f, icrc_off));
  }
}

}  // namespace
}  // namespace isoroce::wire
