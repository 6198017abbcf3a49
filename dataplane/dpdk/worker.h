// A worker lcore's poll loop over the devices it owns, and the control ring
// through which every other thread reaches them (DESIGN.md: each QP belongs to
// one lcore; control changes arrive as messages on an rte_ring, never through
// locks on the data path).
//
// Loop order (eRPC's event loop, DPDK l2fwd): control ring, then per device rx
// burst, timers, scheduler, tx flush. A loop that finds nothing to do backs
// off: it spins `spin_polls` passes, then sleeps until the engines' next
// deadline, at most a bound that starts at `min_sleep` and doubles with each
// idle sleep up to `max_sleep`, so an idle daemon costs little CPU and a
// briefly idle one wakes fast.
#pragma once

#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataplane/dpdk/clock.h"
#include "dataplane/dpdk/device.h"

namespace isoroce::dataplane {

struct IdleConfig {
  uint32_t spin_polls = 2000;                  // empty passes before sleeping
  sched::Picos min_sleep = 10'000'000;         // 10 us
  sched::Picos max_sleep = 1'000'000'000;      // 1 ms
};

struct WorkerStats {
  uint64_t passes = 0;
  uint64_t busy_passes = 0;
  uint64_t sleeps = 0;
  uint64_t commands = 0;
  // Time spent in passes that did work, in nanoseconds (a pass longer than
  // 200 us is left out: the thread was preempted, not working). busy_ns per
  // message is what a message costs the worker, whatever else shares its CPU.
  uint64_t busy_ns = 0;
};

class Worker {
 public:
  Worker(unsigned id, std::vector<Device*> devices, const TscClock& clock, IdleConfig idle);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // false and *error if the control ring cannot be made.
  bool init(std::string* error);

  // Runs fn on the worker's thread with the current time and waits for it.
  // From any thread except the worker's own; the loop must be running.
  void call(const std::function<void(sched::Picos now)>& fn);

  // The poll loop; returns after stop().
  void run();
  void stop() { stop_.store(true, std::memory_order_release); }

  const std::vector<Device*>& devices() const { return devices_; }
  WorkerStats stats() const;

 private:
  struct Command {
    const std::function<void(sched::Picos)>* fn;
    std::atomic<bool> done{false};
  };
  unsigned run_commands();
  void idle_wait(sched::Picos now);

  unsigned id_;
  std::vector<Device*> devices_;
  const TscClock& clock_;
  IdleConfig idle_;
  rte_ring* ring_ = nullptr;
  std::atomic<bool> stop_{false};
  uint32_t empty_passes_ = 0;
  sched::Picos sleep_bound_ = 0;
  // Written by the worker, read by telemetry (relaxed: counters only).
  std::atomic<uint64_t> passes_{0}, busy_passes_{0}, sleeps_{0}, commands_{0}, busy_ps_{0};
};

}  // namespace isoroce::dataplane
