// A fixed-capacity FIFO addressed by absolute, ever-increasing indices, so a
// work queue entry keeps its number while entries before it complete. Capacity
// is rounded up to a power of two; slots are reused, so vectors inside entries
// keep their allocations (no allocation per post in steady state).
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace isoroce::transport::detail {

template <typename T>
class Ring {
 public:
  Ring() = default;
  explicit Ring(uint32_t capacity) : limit_(capacity) {
    slots_.resize(std::bit_ceil(capacity == 0 ? 1u : capacity));
    mask_ = slots_.size() - 1;
  }

  uint32_t capacity() const { return limit_; }
  uint64_t head() const { return head_; }
  uint64_t tail() const { return tail_; }
  uint64_t size() const { return tail_ - head_; }
  bool empty() const { return head_ == tail_; }
  bool full() const { return size() >= limit_; }

  T& operator[](uint64_t index) { return slots_[index & mask_]; }
  const T& operator[](uint64_t index) const { return slots_[index & mask_]; }
  T& front() { return (*this)[head_]; }
  const T& front() const { return (*this)[head_]; }

  // The slot at tail (reset by the caller), made part of the queue.
  T& push() { return (*this)[tail_++]; }
  void pop() { ++head_; }
  void clear() { head_ = tail_; }
  // Grows the limit (ibv_resize_cq / ibv_modify_srq); entries keep their indices.
  void set_capacity(uint32_t capacity) {
    if (capacity > slots_.size()) {
      std::vector<T> grown(std::bit_ceil(capacity));
      const uint64_t new_mask = grown.size() - 1;
      for (uint64_t i = head_; i != tail_; ++i) grown[i & new_mask] = std::move((*this)[i]);
      slots_ = std::move(grown);
      mask_ = new_mask;
    }
    limit_ = capacity;
  }

 private:
  std::vector<T> slots_;
  uint64_t mask_ = 0;
  uint32_t limit_ = 0;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace isoroce::transport::detail
