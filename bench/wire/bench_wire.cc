// Codec cost: ICRC throughput against zlib's crc32 (the same CRC-32, table
// driven) over the same bytes, and ns per frame to build and to parse.
//
//   build/bin/isoroce-bench-wire              (bench/wire/run.sh prints ratios)
#include <benchmark/benchmark.h>
#include <zlib.h>

#include <vector>

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

void BM_Build(benchmark::State& state) {
  static std::vector<uint8_t> payload(9000, 0x5a);
  FrameSpec s;
  s.src_ip = ipv4_mapped(0x0a000001);
  s.dst_ip = ipv4_mapped(0x0a000002);
  s.opcode = op::kRcWriteOnly;
  const size_t overhead = 20 + 8 + 12 + 16 + 4;
  const size_t len = static_cast<size_t>(state.range(0)) - overhead;
  s.reth = RethFields{0x10000, 0x1234, static_cast<uint32_t>(len)};
  s.payload = std::span(payload).first(len);
  std::vector<uint8_t> out(frame_size(s));
  uint32_t psn = 0;
  for (auto _ : state) {
    s.psn = Psn(psn++);
    benchmark::DoNotOptimize(build_frame(s, out));
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
BENCHMARK(BM_Build)->SIZES;
BENCHMARK(BM_Parse)->SIZES;

}  // namespace

BENCHMARK_MAIN();
