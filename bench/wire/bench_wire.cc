// Codec cost: ICRC throughput against zlib's crc32 (the same CRC-32, table
// driven) and DPDK's rte_net_crc (what the ICRC used before crc32.h) over the same
// bytes; copy-and-CRC in one pass against memcpy then CRC; and ns per frame to
// build and to parse.
//
//   build/bin/isoroce-bench-wire              (bench/wire/run.sh prints ratios)
#include <benchmark/benchmark.h>
#include <rte_net_crc.h>
#include <zlib.h>

#include <cstring>
#include <vector>

#include "transport/wire/crc32.h"

#include "transport/wire/build.h"
#include "transport/wire/icrc.h"
#include "transport/wire/parse.h"

namespace {

using namespace isoroce::wire;

// A RoCEv2 RDMA WRITE ONLY frame whose whole IP datagram is `ip_bytes` long.
std::vector<uint8_t> frame_with_ip_bytes(size_t ip_bytes) {
  static std::vector<uint8_t> payload(9000, 0x5a);
  const size_t overhead = 20 + 8 + 12 + 16 + 4;
  FrameSpec s;
  s.src_ip = ipv4_mapped(0x0a000001);
  s.dst_ip = ipv4_mapped(0x0a000002);
  s.opcode = op::kRcWriteOnly;
  s.reth = RethFields{0x10000, 0x1234, static_cast<uint32_t>(ip_bytes - overhead)};
  s.payload = std::span(payload).first(ip_bytes > overhead ? ip_bytes - overhead : 0);
  std::vector<uint8_t> f(frame_size(s));
  build_frame(s, f);
  return f;
}

void BM_Icrc(benchmark::State& state) {
  auto f = frame_with_ip_bytes(static_cast<size_t>(state.range(0)));
  const size_t icrc_off = f.size() - kIcrcBytes;
  for (auto _ : state) {
    benchmark::DoNotOptimize(icrc_compute(f, 14, icrc_off));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (icrc_off - 14 + 8)));
}

// Baseline: zlib's crc32 over the same number of bytes (no masking).
void BM_ZlibCrc32(benchmark::State& state) {
  auto f = frame_with_ip_bytes(static_cast<size_t>(state.range(0)));
  const size_t len = f.size() - kIcrcBytes - 14 + 8;
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32(0, f.data() + 6, static_cast<uInt>(len)));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * len));
}

// rte_vect.h of DPDK 22.11 declares these experimental symbols without C linkage.
extern "C" {
uint16_t rte_vect_get_max_simd_bitwidth(void);
int rte_vect_set_max_simd_bitwidth(uint16_t bitwidth);
}

// Baseline: DPDK's rte_net_crc (its fastest path on this CPU) over the same bytes.
void BM_RteNetCrc(benchmark::State& state) {
  static const bool chosen = [] {
    if (rte_vect_get_max_simd_bitwidth() == 0) rte_vect_set_max_simd_bitwidth(512);
    rte_net_crc_set_alg(RTE_NET_CRC_AVX512);  // falls back to SSE4.2/PCLMULQDQ, then scalar
    return true;
  }();
  (void)chosen;
  auto f = frame_with_ip_bytes(static_cast<size_t>(state.range(0)));
  const size_t len = f.size() - kIcrcBytes - 14 + 8;
  for (auto _ : state) {
    benchmark::DoNotOptimize(rte_net_crc_calc(f.data() + 6, static_cast<uint32_t>(len), RTE_NET_CRC32_ETH));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * len));
}

// A payload copied and its CRC computed: in one pass (crc32_copy_update) and as a
// memcpy then a CRC over the copy. bytes/s: payload bytes.
void BM_CopyCrcFused(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(n, 0x5a), dst(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32_copy_update(~0u, dst.data(), src.data(), n));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetLabel(std::string(crc32_impl()));
}

void BM_CopyThenCrc(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(n, 0x5a), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(crc32_update(~0u, dst.data(), n));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(n, 0x5a), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

// An IPv4 RC WRITE ONLY of `ip_bytes` bytes from IP header to ICRC; its payload
// (0x5a bytes of a static buffer) in *payload.
FrameSpec write_only_spec(size_t ip_bytes, std::span<const uint8_t>* payload) {
  static std::vector<uint8_t> bytes(9000, 0x5a);
  FrameSpec s;
  s.src_ip = ipv4_mapped(0x0a000001);
  s.dst_ip = ipv4_mapped(0x0a000002);
  s.opcode = op::kRcWriteOnly;
  const size_t len = ip_bytes - (20 + 8 + 12 + 16 + 4);  // IPv4, UDP, BTH, RETH, ICRC
  s.reth = RethFields{0x10000, 0x1234, static_cast<uint32_t>(len)};
  *payload = std::span<const uint8_t>(bytes).first(len);
  return s;
}

void BM_Build(benchmark::State& state) {
  std::span<const uint8_t> payload;
  FrameSpec s = write_only_spec(static_cast<size_t>(state.range(0)), &payload);
  s.payload = payload;
  std::vector<uint8_t> out(frame_size(s));
  uint32_t psn = 0;
  for (auto _ : state) {
    s.psn = Psn(psn++);
    benchmark::DoNotOptimize(build_frame(s, out));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// BM_Build's frames from a HeaderTemplate of their path (what the engine does):
// the same bytes (tests: WireTemplate.*).
void BM_BuildTemplated(benchmark::State& state) {
  std::span<const uint8_t> payload;
  FrameSpec s = write_only_spec(static_cast<size_t>(state.range(0)), &payload);
  const size_t len = payload.size();
  const std::span<const uint8_t> one[1] = {payload};
  HeaderTemplate t;
  if (make_header_template(s, &t) != BuildError::kOk) state.SkipWithError("template");
  std::vector<uint8_t> out(frame_size(s, len));
  uint32_t psn = 0;
  for (auto _ : state) {
    s.psn = Psn(psn++);
    benchmark::DoNotOptimize(build_frame_templated(t, s, one, out));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

void BM_Parse(benchmark::State& state) {
  auto f = frame_with_ip_bytes(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto r = parse_frame(f);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// 64 B, 1 KB and 4 KB IP datagrams (64 B is the smallest that holds the headers).
#define SIZES Arg(64)->Arg(1024)->Arg(4096)
BENCHMARK(BM_Icrc)->SIZES;
BENCHMARK(BM_ZlibCrc32)->SIZES;
BENCHMARK(BM_RteNetCrc)->SIZES;
BENCHMARK(BM_CopyCrcFused)->SIZES;
BENCHMARK(BM_CopyThenCrc)->SIZES;
BENCHMARK(BM_Memcpy)->SIZES;
BENCHMARK(BM_Build)->SIZES;
BENCHMARK(BM_BuildTemplated)->SIZES;
BENCHMARK(BM_Parse)->SIZES;

}  // namespace

BENCHMARK_MAIN();
