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
// time from the polynomial (crc32.cc); the last 16 bytes and the tail under 16 go
// through slicing-by-8 tables. The fastest path the CPU offers is chosen once at
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

// The table-only path, for tests and the benchmark's baseline.
uint32_t crc32_update_table(uint32_t crc, const void* data, size_t n);

// "avx512-vpclmulqdq", "sse-pclmulqdq" or "table".
std::string_view crc32_impl();

// Forces a path for tests and benchmarks ("avx512-vpclmulqdq", "sse-pclmulqdq",
// "table"); false if the CPU lacks it. Not thread safe: call before any CRC runs.
bool crc32_force_impl(std::string_view name);

}  // namespace isoroce::wire
