// Frame buffers of the simulated fabric: byte vectors recycled through a free
// list, named by a 32-bit id that events carry. A frame is owned by exactly one
// place at a time (a link in flight, a switch queue, the host building it).
//
// docs/design.md makes rte_mbuf the one packet buffer type; the simulator keeps plain
// bytes instead because the engine's TxSink/receive interface is span-based and
// this way the simulator, its tests and isoroce-sim need no EAL (see README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace isoroce::sim {

using FrameId = uint32_t;

class FramePool {
 public:
  // A frame of len bytes (contents unspecified).
  FrameId alloc(size_t len) {
    FrameId id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = static_cast<FrameId>(frames_.size());
      frames_.emplace_back();
    }
    frames_[id].resize(len);
    ++in_use_;
    return id;
  }
  FrameId clone(FrameId src) {
    const FrameId id = alloc(0);
    frames_[id] = frames_[src];
    return id;
  }
  void release(FrameId id) {
    free_.push_back(id);
    --in_use_;
  }
  std::vector<uint8_t>& bytes(FrameId id) { return frames_[id]; }
  std::span<uint8_t> span(FrameId id) { return frames_[id]; }
  size_t size(FrameId id) const { return frames_[id].size(); }
  // Frames allocated and not released: in flight in the fabric.
  size_t in_use() const { return in_use_; }

 private:
  std::vector<std::vector<uint8_t>> frames_;
  std::vector<FrameId> free_;
  size_t in_use_ = 0;
};

}  // namespace isoroce::sim
