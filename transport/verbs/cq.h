// Completion queues as the engine accounts for them: capacity and occupancy,
// so a completion that finds the CQ full is detected (a CQ overrun, which
// IBTA vol.1 ch.11 lists as an affiliated asynchronous error,
// IBV_EVENT_CQ_ERR) instead of overwriting an entry the consumer has not read.
// The entries themselves live in the shared-memory ring.
#pragma once

#include <cstdint>

#include "transport/verbs/device.h"
#include "transport/verbs/result.h"

namespace isoroce::verbs {

// ibv_create_cq()/ibv_resize_cq(): 1..max_cqe, else EINVAL (rxe_cq_chk_attr()).
int check_cq_size(const Device& dev, int cqe);

class Cq {
 public:
  static Result<Cq> create(const Device& dev, int cqe);

  // One completion in; false (and overflowed() from then on) when full.
  bool push() {  // inline: once per completion
    if (count_ >= capacity_) [[unlikely]] {
      overflowed_ = true;
      return false;
    }
    ++count_;
    return true;
  }
  // The consumer polled n entries (n larger than count() is clamped).
  void pop(uint32_t n);
  // ibv_resize_cq(): EINVAL below the entries already queued (rxe_cq_chk_attr()),
  // here and `outside` (polled from the engine, not yet consumed by the application).
  int resize(const Device& dev, int cqe, uint32_t outside = 0);

  uint32_t capacity() const { return capacity_; }
  uint32_t count() const { return count_; }
  bool overflowed() const { return overflowed_; }

 private:
  explicit Cq(uint32_t capacity) : capacity_(capacity) {}
  uint32_t capacity_;
  uint32_t count_ = 0;
  bool overflowed_ = false;
};

}  // namespace isoroce::verbs
