#include "transport/wire/crc32.h"

#include <immintrin.h>

#include <array>
#include <atomic>
#include <cstring>

namespace isoroce::wire {
namespace {

// ---- Constants, from the polynomial alone ----------------------------------------

constexpr uint64_t kPoly = 0x1'04C1'1DB7;  // x^32 + ... + 1
constexpr uint32_t kPolyReflected = 0xEDB8'8320;

// x^n mod P.
constexpr uint64_t xpow_mod(unsigned n) {
  uint64_t r = 1;
  for (unsigned i = 0; i < n; ++i) {
    r <<= 1;
    if (r >> 32) r ^= kPoly;
  }
  return r;
}

constexpr uint64_t reflect32(uint64_t v) {
  uint64_t o = 0;
  for (unsigned i = 0; i < 32; ++i) {
    if ((v >> i) & 1) o |= uint64_t{1} << (31 - i);
  }
  return o;
}

// The multiplier that carries one 64-bit half of a 128-bit block `bits` bits
// forward in the bit-reflected domain (one more shift: the carry-less product of
// two reflected operands lands one bit low).
constexpr uint64_t fold_k(unsigned bits) { return reflect32(xpow_mod(bits)) << 1; }

// Carrying a block d bytes forward: its first (low) half by x^(8d+32), its second
// by x^(8d-32).
template <unsigned kBytes>
struct Fold {
  static constexpr uint64_t lo = fold_k(8 * kBytes + 32);
  static constexpr uint64_t hi = fold_k(8 * kBytes - 32);
};

static_assert(Fold<16>::lo == 0x1'7519'97d0 && Fold<16>::hi == 0x0'ccaa'009e,
              "the 128-bit fold constants of the reflected Ethernet CRC");

// Quotient of polynomial division (carry-less).
constexpr uint64_t poly_div(unsigned __int128 a, uint64_t b) {
  uint64_t q = 0;
  const int bl = 64 - __builtin_clzll(b);
  for (int al = 128; al >= bl; --al) {
    if ((a >> (al - 1)) & 1) {
      q |= uint64_t{1} << (al - bl);
      a ^= static_cast<unsigned __int128>(b) << (al - bl);
    }
  }
  return q;
}

constexpr uint64_t reflect33(uint64_t v) {
  uint64_t o = 0;
  for (unsigned i = 0; i < 33; ++i) {
    if ((v >> i) & 1) o |= uint64_t{1} << (32 - i);
  }
  return o;
}

// Barrett reduction of 64 bits to the 32-bit CRC: mu = x^64 / P and P, reflected.
constexpr uint64_t kMu = reflect33(poly_div(static_cast<unsigned __int128>(1) << 64, kPoly));
constexpr uint64_t kPolyR = reflect33(kPoly);
static_assert(kMu == 0x1'F701'1641 && kPolyR == 0x1'DB71'0641, "Barrett constants of the Ethernet CRC");

// ---- Slicing-by-8 tables ----------------------------------------------------------

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ ((c & 1) ? kPolyReflected : 0);
    t[0][i] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}

constexpr Tables kTables = make_tables();

uint32_t table_update(uint32_t crc, const uint8_t* p, size_t n) {
  const Tables& t = kTables;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
          t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

uint32_t table_copy_update(uint32_t crc, uint8_t* dst, const uint8_t* src, size_t n) {
  if (n != 0) std::memcpy(dst, src, n);
  return table_update(crc, src, n);
}

// ---- SSE4.1 + PCLMULQDQ: four 128-bit lanes, 64 bytes a step ---------------------

#define ISOROCE_SSE_CLMUL __attribute__((target("sse4.1,pclmul")))

ISOROCE_SSE_CLMUL inline __m128i fold128(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

template <unsigned kBytes>
ISOROCE_SSE_CLMUL inline __m128i k128() {
  return _mm_set_epi64x(static_cast<long long>(Fold<kBytes>::hi), static_cast<long long>(Fold<kBytes>::lo));
}

template <bool kCopy>
ISOROCE_SSE_CLMUL inline __m128i load16(uint8_t* dst, const uint8_t* src) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  if constexpr (kCopy) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), v);
  return v;
}

// The CRC register of the 16 bytes in x (from a zero register): 128 bits folded to 96
// (the first half carried 8 bytes on), 96 to 64 (the first 32 bits carried 4 bytes
// on), then Barrett's reduction of the 64 left.
ISOROCE_SSE_CLMUL inline uint32_t reduce128(__m128i x) {
  const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
  const __m128i t = _mm_xor_si128(
      _mm_clmulepi64_si128(x, _mm_set_epi64x(0, static_cast<long long>(Fold<16>::hi)), 0x00), _mm_srli_si128(x, 8));
  const __m128i t2 = _mm_xor_si128(
      _mm_clmulepi64_si128(_mm_and_si128(t, low32), _mm_set_epi64x(0, static_cast<long long>(fold_k(64))), 0x00),
      _mm_srli_si128(t, 4));
  const __m128i barrett = _mm_set_epi64x(static_cast<long long>(kPolyR), static_cast<long long>(kMu));
  const __m128i u = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(t2, low32), barrett, 0x00), low32);
  const __m128i v = _mm_clmulepi64_si128(u, barrett, 0x10);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(t2, v), 1));
}

// ---- Partial blocks ----------------------------------------------------------------

// Byte-shuffle masks: 16 + s gives "lane i from lane i + s", 16 - s "lane i from lane
// i - s", zeros where the source lane is outside 0..15.
alignas(16) constexpr uint8_t kShuffle[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

ISOROCE_SSE_CLMUL inline __m128i bytes_up(__m128i v, size_t s) {  // lane i <- lane i - s
  return _mm_shuffle_epi8(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kShuffle + 16 - s)));
}
ISOROCE_SSE_CLMUL inline __m128i bytes_down(__m128i v, size_t s) {  // lane i <- lane i + s
  return _mm_shuffle_epi8(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kShuffle + 16 + s)));
}

// The stream whose last 16 bytes (everything before folded in) are x, followed by the
// t bytes (0 < t < 16) in the low lanes of tail (the lanes above are ignored): its new
// last 16 bytes are x's last 16 - t and the tail, and x's first t bytes, a block
// with 16 - t leading zeros, are carried 16 bytes onto them. No reduction.
ISOROCE_SSE_CLMUL inline __m128i absorb(__m128i x, __m128i tail, size_t t) {
  const __m128i over = bytes_up(x, 16 - t);
  const __m128i last = _mm_or_si128(bytes_down(x, t), bytes_up(tail, 16 - t));
  return _mm_xor_si128(fold128(over, k128<16>()), last);
}

// The t (0 < t < 16) bytes at src in the low lanes (copied to dst too), without
// reading or writing past them.
template <bool kCopy>
ISOROCE_SSE_CLMUL inline __m128i load_partial(uint8_t* dst, const uint8_t* src, size_t t) {
  alignas(16) uint8_t b[16] = {};
  std::memcpy(b, src, t);
  if constexpr (kCopy) std::memcpy(dst, src, t);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(b));
}

// Whole 16-byte blocks of [src, src + n) folded onto x (four lanes while 64 bytes
// remain); the pointers and n advance past them (n < 16 afterwards).
template <bool kCopy>
ISOROCE_SSE_CLMUL inline __m128i sse_blocks(__m128i x, uint8_t*& dst, const uint8_t*& src, size_t& n) {
  const __m128i k16 = k128<16>();
  if (n >= 64) {
    // x precedes the first block: carried 16 bytes onto it.
    __m128i x0 = _mm_xor_si128(load16<kCopy>(dst, src), fold128(x, k16));
    __m128i x1 = load16<kCopy>(dst + 16, src + 16);
    __m128i x2 = load16<kCopy>(dst + 32, src + 32);
    __m128i x3 = load16<kCopy>(dst + 48, src + 48);
    src += 64;
    dst += kCopy ? 64 : 0;
    n -= 64;
    const __m128i k64 = k128<64>();
    while (n >= 64) {
      x0 = _mm_xor_si128(fold128(x0, k64), load16<kCopy>(dst, src));
      x1 = _mm_xor_si128(fold128(x1, k64), load16<kCopy>(dst + 16, src + 16));
      x2 = _mm_xor_si128(fold128(x2, k64), load16<kCopy>(dst + 32, src + 32));
      x3 = _mm_xor_si128(fold128(x3, k64), load16<kCopy>(dst + 48, src + 48));
      src += 64;
      dst += kCopy ? 64 : 0;
      n -= 64;
    }
    // The four lanes carried 48, 32 and 16 bytes onto the last one, side by side (one
    // fold of latency, not three in a row).
    x = _mm_xor_si128(_mm_xor_si128(fold128(x0, k128<48>()), fold128(x1, k128<32>())),
                      _mm_xor_si128(fold128(x2, k16), x3));
  }
  while (n >= 16) {
    x = _mm_xor_si128(fold128(x, k16), load16<kCopy>(dst, src));
    src += 16;
    dst += kCopy ? 16 : 0;
    n -= 16;
  }
  return x;
}

// x followed by [src, src + n), any n.
template <bool kCopy>
ISOROCE_SSE_CLMUL inline __m128i sse_core(__m128i x, uint8_t* dst, const uint8_t* src, size_t n) {
  x = sse_blocks<kCopy>(x, dst, src, n);
  if (n != 0) x = absorb(x, load_partial<kCopy>(dst, src, n), n);
  return x;
}

// ---- AVX-512 + VPCLMULQDQ: four 512-bit registers, 256 bytes a step ---------------

#define ISOROCE_AVX512_CLMUL __attribute__((target("avx512f,avx512vl,avx512bw,vpclmulqdq,pclmul,sse4.1")))

ISOROCE_AVX512_CLMUL inline __m512i fold512(__m512i x, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                   next, 0x96);  // a ^ b ^ c
}

template <unsigned kBytes>
ISOROCE_AVX512_CLMUL inline __m512i k512() {
  return _mm512_broadcast_i32x4(
      _mm_set_epi64x(static_cast<long long>(Fold<kBytes>::hi), static_cast<long long>(Fold<kBytes>::lo)));
}

template <bool kCopy>
ISOROCE_AVX512_CLMUL inline __m512i load64(uint8_t* dst, const uint8_t* src) {
  const __m512i v = _mm512_loadu_si512(src);
  if constexpr (kCopy) _mm512_storeu_si512(dst, v);
  return v;
}

// x followed by [src, src + n), any n.
template <bool kCopy>
ISOROCE_AVX512_CLMUL inline __m128i avx512_core(__m128i x, uint8_t* dst, const uint8_t* src, size_t n) {
  if (n >= 256) {
    // x precedes the first block: carried 16 bytes onto the first 128-bit lane.
    __m512i z0 = _mm512_xor_si512(load64<kCopy>(dst, src), _mm512_zextsi128_si512(fold128(x, k128<16>())));
    __m512i z1 = load64<kCopy>(dst + 64, src + 64);
    __m512i z2 = load64<kCopy>(dst + 128, src + 128);
    __m512i z3 = load64<kCopy>(dst + 192, src + 192);
    src += 256;
    dst += kCopy ? 256 : 0;
    n -= 256;
    const __m512i k256 = k512<256>();
    while (n >= 256) {
      z0 = fold512(z0, k256, load64<kCopy>(dst, src));
      z1 = fold512(z1, k256, load64<kCopy>(dst + 64, src + 64));
      z2 = fold512(z2, k256, load64<kCopy>(dst + 128, src + 128));
      z3 = fold512(z3, k256, load64<kCopy>(dst + 192, src + 192));
      src += 256;
      dst += kCopy ? 256 : 0;
      n -= 256;
    }
    // The four registers carried 192, 128 and 64 bytes onto the last one, side by side.
    const __m512i k64 = k512<64>();
    const __m512i z13 = fold512(z1, k512<128>(), z3);
    const __m512i z2s = fold512(z2, k64, _mm512_setzero_si512());
    __m512i z = _mm512_xor_si512(fold512(z0, k512<192>(), z13), z2s);
    while (n >= 64) {
      z = fold512(z, k64, load64<kCopy>(dst, src));
      src += 64;
      dst += kCopy ? 64 : 0;
      n -= 64;
    }
    // The four 128-bit lanes of z, carried 48, 32 and 16 bytes onto the last one.
    const __m128i a = _mm512_extracti32x4_epi32(z, 0);
    const __m128i b = _mm512_extracti32x4_epi32(z, 1);
    const __m128i c = _mm512_extracti32x4_epi32(z, 2);
    const __m128i d = _mm512_extracti32x4_epi32(z, 3);
    x = _mm_ternarylogic_epi64(fold128(a, k128<48>()), fold128(b, k128<32>()), fold128(c, k128<16>()), 0x96);
    x = _mm_xor_si128(x, d);
  }
  x = sse_blocks<kCopy>(x, dst, src, n);
  if (n != 0) {
    // A masked load and store touch only the n bytes.
    const auto m = static_cast<__mmask16>((1u << n) - 1);
    const __m128i t = _mm_maskz_loadu_epi8(m, src);
    if constexpr (kCopy) _mm_mask_storeu_epi8(dst, m, t);
    x = absorb(x, t, n);
  }
  return x;
}

// ---- The entry points of each path --------------------------------------------------

// Defined once per path with that path's target, so its core is inlined into them.
#define ISOROCE_CLMUL_ENTRIES(kTarget, kPrefix, kCore)                                                   \
  /* A register and n >= 16 bytes: the first block with the register XORed into its */                 \
  /* first four bytes, then the rest; reduced once at the end. */                                       \
  template <bool kCopy>                                                                                 \
  kTarget uint32_t kPrefix##_update(uint32_t crc, uint8_t* dst, const uint8_t* src, size_t n) {         \
    if (n < 16) return kCopy ? table_copy_update(crc, dst, src, n) : table_update(crc, src, n);         \
    const __m128i x = _mm_xor_si128(load16<kCopy>(dst, src), _mm_cvtsi32_si128(static_cast<int>(crc))); \
    return reduce128(kCore<kCopy>(x, dst + (kCopy ? 16 : 0), src + 16, n - 16));                       \
  }                                                                                                     \
  /* The same for a stream in progress: until 16 bytes came, its register goes */                       \
  /* through the table; from then on the accumulator is folded and never reduced. */                    \
  template <bool kCopy>                                                                                 \
  kTarget void kPrefix##_fold(Crc32Fold& f, uint8_t* dst, const uint8_t* src, size_t n) {               \
    __m128i x;                                                                                          \
    if (!f.started) [[unlikely]] {                                                                      \
      if (n < 16) {                                                                                     \
        f.reg = kCopy ? table_copy_update(f.reg, dst, src, n) : table_update(f.reg, src, n);            \
        return;                                                                                         \
      }                                                                                                 \
      x = _mm_xor_si128(load16<kCopy>(dst, src), _mm_cvtsi32_si128(static_cast<int>(f.reg)));           \
      src += 16;                                                                                        \
      dst += kCopy ? 16 : 0;                                                                            \
      n -= 16;                                                                                          \
      f.started = true;                                                                                 \
    } else {                                                                                            \
      x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f.acc));                                     \
    }                                                                                                   \
    _mm_storeu_si128(reinterpret_cast<__m128i*>(f.acc), kCore<kCopy>(x, dst, src, n));                  \
  }

ISOROCE_CLMUL_ENTRIES(ISOROCE_SSE_CLMUL, sse, sse_core)
ISOROCE_CLMUL_ENTRIES(ISOROCE_AVX512_CLMUL, avx512, avx512_core)
#undef ISOROCE_CLMUL_ENTRIES

ISOROCE_SSE_CLMUL uint32_t clmul_register(const Crc32Fold& f) {
  return f.started ? reduce128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(f.acc))) : f.reg;
}

// ---- Dispatch ---------------------------------------------------------------------

using UpdateFn = uint32_t (*)(uint32_t, uint8_t*, const uint8_t*, size_t);
using FoldFn = void (*)(Crc32Fold&, uint8_t*, const uint8_t*, size_t);
using RegisterFn = uint32_t (*)(const Crc32Fold&);

struct Impl {
  std::string_view name;
  UpdateFn update;
  UpdateFn copy;
  FoldFn fold;
  FoldFn fold_copy;
  RegisterFn reg;
};

uint32_t table_update_fn(uint32_t crc, uint8_t*, const uint8_t* src, size_t n) { return table_update(crc, src, n); }
void table_fold(Crc32Fold& f, uint8_t*, const uint8_t* src, size_t n) { f.reg = table_update(f.reg, src, n); }
void table_fold_copy(Crc32Fold& f, uint8_t* dst, const uint8_t* src, size_t n) {
  f.reg = table_copy_update(f.reg, dst, src, n);
}
uint32_t table_register(const Crc32Fold& f) { return f.reg; }

constexpr Impl kImpls[] = {
    {"avx512-vpclmulqdq", avx512_update<false>, avx512_update<true>, avx512_fold<false>, avx512_fold<true>,
     clmul_register},
    {"sse-pclmulqdq", sse_update<false>, sse_update<true>, sse_fold<false>, sse_fold<true>, clmul_register},
    {"table", table_update_fn, table_copy_update, table_fold, table_fold_copy, table_register},
};

bool supported(const Impl& i) {
  __builtin_cpu_init();
  if (i.name == "avx512-vpclmulqdq") {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("vpclmulqdq") &&
           __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }
  if (i.name == "sse-pclmulqdq") return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return true;
}

const Impl* choose() {
  for (const Impl& i : kImpls) {
    if (supported(i)) return &i;
  }
  return &kImpls[2];
}

// Chosen on first use (constant-initialized, so static constructors elsewhere may
// compute CRCs too).
std::atomic<const Impl*> g_impl{nullptr};

inline const Impl& impl() {
  const Impl* i = g_impl.load(std::memory_order_relaxed);
  if (i == nullptr) [[unlikely]] {
    i = choose();
    g_impl.store(i, std::memory_order_relaxed);
  }
  return *i;
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  // The paths compute destination offsets without storing when not copying: give
  // them the source (never written) rather than a null pointer.
  const auto* p = static_cast<const uint8_t*>(data);
  return impl().update(crc, const_cast<uint8_t*>(p), p, n);
}

uint32_t crc32_copy_update(uint32_t crc, void* dst, const void* src, size_t n) {
  return impl().copy(crc, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
}

uint32_t crc32_update_table(uint32_t crc, const void* data, size_t n) {
  return table_update(crc, static_cast<const uint8_t*>(data), n);
}

void crc32_fold(Crc32Fold& f, const void* data, size_t n) {
  if (n == 0) return;  // e.g. no pad
  const auto* p = static_cast<const uint8_t*>(data);
  impl().fold(f, const_cast<uint8_t*>(p), p, n);
}

void crc32_fold_copy(Crc32Fold& f, void* dst, const void* src, size_t n) {
  impl().fold_copy(f, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
}

uint32_t crc32_fold_register(const Crc32Fold& f) { return impl().reg(f); }

std::string_view crc32_impl() { return impl().name; }

bool crc32_force_impl(std::string_view name) {
  for (const Impl& i : kImpls) {
    if (i.name == name) {
      if (!supported(i)) return false;
      g_impl.store(&i, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

}  // namespace isoroce::wire
