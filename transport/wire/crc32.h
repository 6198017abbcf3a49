// CRC-32 with the Ethernet polynomial (0x04C11DB7, bit-reflected; zlib's crc32 and
// the RoCEv2 ICRC), as a running register with no pre- or post-inversion, so a CRC
// can be fed piece by piece: crc32(data) == ~crc32_update(~0u, data).
//
// crc32_copy_update() copies the bytes and folds them into the CRC in the same pass:
// each 64 (SSE/PCLMULQDQ) or 256 (AVX-512/VPCLMULQDQ) bytes are loaded once, stored
// to the destination and folded from the same registers, so a frame's payload is
// read once on send (into the frame) and once on receive (into the memory region).
//
// Folding (Gopal et al., "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction", Intel 2009): 128-bit blocks are carried forward by a
// multiple of their distance, with constants x^(8d±32) mod P computed at compile
// time from the polynomial (crc32.cc); a tail under 16 bytes joins the last block
// by a byte shuffle and one more fold, and only the end of a stream is reduced to 32
// bits (Barrett). Under 16 bytes in all, slicing-by-8 tables. The fastest path the CPU offers is chosen once at
// start-up (crc32_impl() names it); every path gives the same result (tests check it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace isoroce::wire {

// The CRC register after `n` more bytes.
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);

// The same, also copying the bytes to dst (dst and src must not overlap).
uint32_t crc32_copy_update(uint32_t crc, void* dst, const void* src, size_t n);

// A CRC in progress over a stream fed piece by piece (a frame's masked headers, its
// payload as it is copied, its pad): every piece is folded into one 128-bit
// accumulator, pieces of any length, and the stream is reduced to the 32-bit
// register once, at the end. Cheaper than crc32_update() per piece, which reduces
// after each. A stream is only valid with the path that started it (crc32_force_impl()
// in between is a bug).
struct Crc32Fold {
  uint64_t acc[2] = {0, 0};  // the stream's last 16 bytes, with all before folded in
  uint32_t reg = 0;          // the register, until 16 bytes have come
  bool started = false;      // acc holds the stream
};

// A stream starting from the register `crc` (~0u for a fresh CRC).
inline Crc32Fold crc32_fold_init(uint32_t crc) {
  Crc32Fold f;
  f.reg = crc;
  return f;
}

// Feeds n more bytes.
void crc32_fold(Crc32Fold& f, const void* data, size_t n);

// The same, also copying them to dst (dst and src must not overlap).
void crc32_fold_copy(Crc32Fold& f, void* dst, const void* src, size_t n);

// The register after everything fed so far (f may be fed more afterwards).
uint32_t crc32_fold_register(const Crc32Fold& f);

// The table-only path, for tests and the benchmark's baseline.
uint32_t crc32_update_table(uint32_t crc, const void* data, size_t n);

// "avx512-vpclmulqdq", "sse-pclmulqdq" or "table".
std::string_view crc32_impl();

// Forces a path for tests and benchmarks ("avx512-vpclmulqdq", "sse-pclmulqdq",
// "table"); false if the CPU lacks it. Not thread safe: call before any CRC runs.
bool crc32_force_impl(std::string_view name);

}  // namespace isoroce::wire
