// The single-core memcpy ceiling for bench/verbs/run.sh: what one core copies
// per second with the access pattern of perftest's bandwidth tests (one
// message-sized buffer reused, so cache-resident) and streaming through 256 MB
// (DRAM). A software RNIC moves every payload byte at least once on the CPU,
// so this is the bound its bandwidth is compared with.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

// Copies one message-sized buffer into another, over and over (perftest reuses
// its buffers).
void BM_MemcpyResident(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(n, 0x5a), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_MemcpyResident)->Arg(64)->Arg(65536);

// Message-sized copies walking through 256 MB, so every byte comes from DRAM.
void BM_MemcpyStreaming(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  constexpr size_t kSpan = size_t{256} << 20;
  std::vector<uint8_t> src(kSpan, 0x5a), dst(kSpan);
  size_t off = 0;
  for (auto _ : state) {
    std::memcpy(dst.data() + off, src.data() + off, n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
    off += n;
    if (off + n > kSpan) off = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_MemcpyStreaming)->Arg(65536);

}  // namespace

BENCHMARK_MAIN();
