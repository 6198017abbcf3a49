// What every policy shares: the link model (busy until the last granted packet has
// left) and the queue of control packets that bypass rate limits.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sched/time.h"

namespace isoroce::sched {

class LinkModel {
 public:
  explicit LinkModel(std::uint64_t bps, Picos catch_up = 0) : cost_(byte_cost(bps)), catch_up_(catch_up) {}

  // When the last granted packet has left.
  Picos free_at() const { return free_; }
  // When a packet granted from `from` (a dequeue's from(now)) can start.
  Picos start(Picos from) const { return std::max(free_, from); }

  // Catch-up after a late dequeue (Config::catch_up): the earliest start a dequeue
  // called at `now` may give. The last dequeue ended saying a packet was due at
  // due_ (set_due, its next_deadline()); a caller that comes after that, because
  // its thread slept past it, starts what was due then, at most catch_up in the
  // past, as a NIC sends the frames a host queued on time. So a link paced while
  // its worker wakes late loses no time. Nothing due (kNever), not late, or no
  // catch-up: now.
  Picos from(Picos now) const { return due_ >= now ? now : std::max(due_, now - std::min(now, catch_up_)); }
  void set_due(Picos t) { due_ = t; }
  bool catches_up() const { return catch_up_ != 0; }
  // A packet of `bytes` starts at `at`. (The last size's duration is kept: packets
  // of one size follow one another.)
  void occupy(Picos at, std::uint32_t bytes) {
    if (bytes != last_bytes_) [[unlikely]] {
      last_bytes_ = bytes;
      last_duration_ = duration(bytes, cost_);
    }
    free_ = at + last_duration_;
  }
  // Nothing can start before `t`.
  void idle_until(Picos t) { free_ = std::max(free_, t); }
  Picos duration_of(std::uint32_t bytes) const { return duration(bytes, cost_); }
  // The link's rate from the next packet on (bps > 0; the packet on the link
  // keeps the departure it has).
  void set_bps(std::uint64_t bps) {
    cost_ = byte_cost(bps);
    last_bytes_ = 0;
    last_duration_ = 0;
  }

 private:
  Picos free_ = 0;
  ByteCost cost_;
  Picos catch_up_ = 0;
  Picos due_ = kNever;
  std::uint32_t last_bytes_ = 0;  // duration(0, cost_) is 0
  Picos last_duration_ = 0;
};

class ControlQueue {
 public:
  struct Entry {
    std::uint32_t qp;
    std::uint32_t bytes;
  };

  // Capacity rounded up to a power of two.
  explicit ControlQueue(std::uint32_t capacity) : ring_(std::bit_ceil(std::max(capacity, 1u))) {}

  bool empty() const { return head_ == tail_; }
  std::size_t size() const { return tail_ - head_; }
  std::size_t capacity() const { return ring_.size(); }

  bool push(std::uint32_t qp, std::uint32_t bytes) {
    if (size() == ring_.size()) return false;
    ring_[tail_++ & (ring_.size() - 1)] = {qp, bytes};
    return true;
  }

  Entry pop() { return ring_[head_++ & (ring_.size() - 1)]; }

 private:
  std::vector<Entry> ring_;
  std::uint64_t head_ = 0;
  std::uint64_t tail_ = 0;
};

}  // namespace isoroce::sched
