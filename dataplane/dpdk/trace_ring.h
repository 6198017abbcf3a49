// A worker's trace sink for live tracing (docs/profiling.md, "On the daemon"):
// a bounded single-producer single-consumer ring of trace::Records. The
// device's worker lcore is the only producer (its engine and scheduler emit
// into it), the control thread the only consumer (it drains the ring while a
// trace session is active).
//
// The data path never allocates, locks or waits here: the buffer is made
// before the ring is attached (on the control thread), and a record that finds
// the ring full is counted in dropped() and forgotten. Layout after
// rdma-core's rxe_queue.h and folly's ProducerConsumerQueue: power-of-two
// capacity with a mask, free-running indices on separate cache lines; each
// side loads its own index relaxed and the peer's with acquire, and publishes
// with release.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "sched/trace.h"

namespace isoroce::dataplane {

class TraceRing final : public trace::Sink {
 public:
  // capacity is rounded up to a power of two (at least 2). qp_filter != 0
  // keeps only the records of that QPN (the worker drops the others before
  // they take a slot).
  explicit TraceRing(std::size_t capacity, uint32_t qp_filter = 0)
      : mask_(std::bit_ceil(capacity < 2 ? std::size_t{2} : capacity) - 1),
        slots_(std::make_unique<trace::Record[]>(mask_ + 1)),
        qp_filter_(qp_filter) {}
  TraceRing(const TraceRing&) = delete;
  TraceRing& operator=(const TraceRing&) = delete;

  std::size_t capacity() const { return mask_ + 1; }

  // Producer (the worker): one record, or one more dropped if the ring is full.
  void record(const trace::Record& r) override {
    if (qp_filter_ != 0 && r.qp != qp_filter_) return;
    const uint64_t head = head_.load(std::memory_order_relaxed);        // our own index
    const uint64_t tail = tail_.load(std::memory_order_acquire);        // pairs with drain()'s release
    if (head - tail > mask_) [[unlikely]] {
      // Only the producer writes dropped_; relaxed: a counter read by the consumer.
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    slots_[head & mask_] = r;
    head_.store(head + 1, std::memory_order_release);  // publishes the slot; pairs with drain()'s acquire
  }

  // Consumer (the control thread): calls fn(const Record&) for every record
  // published so far, oldest first, then frees their slots. Returns how many.
  template <typename Fn>
  std::size_t drain(Fn&& fn) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);  // our own index
    const uint64_t head = head_.load(std::memory_order_acquire);  // pairs with record()'s release
    for (uint64_t i = tail; i != head; ++i) fn(slots_[i & mask_]);
    tail_.store(head, std::memory_order_release);  // slots free; pairs with record()'s acquire
    return static_cast<std::size_t>(head - tail);
  }

  // Records refused because the ring was full (any thread; exact once the producer is detached).
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Records accepted so far (any thread).
  uint64_t recorded() const { return head_.load(std::memory_order_acquire); }

 private:
  const std::size_t mask_;
  std::unique_ptr<trace::Record[]> slots_;
  const uint32_t qp_filter_;
  alignas(64) std::atomic<uint64_t> head_{0};     // next slot the producer writes
  std::atomic<uint64_t> dropped_{0};               // the producer's too: same line as head_
  alignas(64) std::atomic<uint64_t> tail_{0};     // next slot the consumer reads
  char pad_[64 - sizeof(std::atomic<uint64_t>)] = {};
};

}  // namespace isoroce::dataplane
