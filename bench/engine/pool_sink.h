// The benchmarks' transmit sink (isoroce-bench-engine, -mw, -dcqcn): built
// frames land in a fixed pool of kBurst buffers of kFrameBuf bytes; the driver
// hands them to the peer right after transmit() returns, so the pool is reused
// every step with no allocation per packet.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/engine/engine.h"

namespace isoroce::transport::bench {

inline constexpr size_t kBurst = 32;       // frames per transmit() call = pool size
inline constexpr size_t kFrameBuf = 4352;  // 4096 B payload + every header, rounded up

class PoolSink final : public TxSink {
 public:
  PoolSink() : bufs_(kBurst * kFrameBuf) {}

  std::span<uint8_t> tx_buffer(size_t len) override {
    if (count_ == kBurst || len > kFrameBuf) return {};
    return {bufs_.data() + count_ * kFrameBuf, kFrameBuf};
  }
  void tx_commit(Picos departure, size_t len) override { frames_[count_++] = {departure, len}; }

  size_t count() const { return count_; }
  std::span<uint8_t> frame(size_t i) { return {bufs_.data() + i * kFrameBuf, frames_[i].len}; }
  Picos departure(size_t i) const { return frames_[i].departure; }
  void clear() { count_ = 0; }

 private:
  struct Frame {
    Picos departure;
    size_t len;
  };
  std::vector<uint8_t> bufs_;
  std::array<Frame, kBurst> frames_{};
  size_t count_ = 0;
};

}  // namespace isoroce::transport::bench
