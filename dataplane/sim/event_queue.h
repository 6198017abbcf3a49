// The simulator's event queue: a binary heap ordered by (time, sequence
// number). The sequence number is the order of insertion, so events at the same
// picosecond run in the order they were scheduled and a run never depends on
// how the heap happens to break ties.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sched/time.h"

namespace isoroce::sim {

using sched::Picos;
using sched::kNever;

// What an event is about. The fabric owns the kinds below kFirstUser.
enum class EventKind : uint16_t {
  kLinkArrival = 1,  // a = link id, b = frame id: the frame's last bit reaches the far end
  kPortTxDone = 2,   // a = switch port: its frame in service has left
  kPfcPause = 3,     // a = port, b = 1 pause / 0 resume: reaches the host's NIC
  kFirstUser = 16,
  kHostService = 16,  // a = host, b = generation
  kAppPost = 17,      // a = host: the host's next pending post is due
  kFlowStart = 18,    // a = flow
  kStop = 19,         // the scenario's duration is over
  kFlowRecvStart = 20,  // a = flow: its destination posts its first receives
  kRefProbe = 30,       // a = reference flow (justitia): its next probe is due
  kSample = 31,         // Simulator::set_sampler's next sample is due
};

struct Event {
  Picos time = 0;
  uint64_t seq = 0;
  EventKind kind = EventKind::kStop;
  uint32_t a = 0;
  uint64_t b = 0;
};

class EventQueue {
 public:
  void push(Picos time, EventKind kind, uint32_t a = 0, uint64_t b = 0) {
    heap_.push_back(Event{time, next_seq_++, kind, a, b});
    sift_up(heap_.size() - 1);
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // The earliest event; the queue must not be empty.
  const Event& top() const { return heap_.front(); }
  Picos next_time() const { return heap_.empty() ? kNever : heap_.front().time; }

  Event pop() {
    Event e = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    return e;
  }

  uint64_t scheduled() const { return next_seq_; }

 private:
  static bool before(const Event& x, const Event& y) {
    return x.time != y.time ? x.time < y.time : x.seq < y.seq;
  }
  void sift_up(size_t i) {
    Event e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void sift_down(size_t i) {
    const size_t n = heap_.size();
    Event e = heap_[i];
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], e)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace isoroce::sim
