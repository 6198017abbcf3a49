// A worker lcore's poll loop over the devices it owns, and the control ring
// through which every other thread reaches them (DESIGN.md: each QP belongs to
// one lcore; control changes arrive as messages on an rte_ring, never through
// locks on the data path).
//
// Loop order (eRPC's event loop, DPDK l2fwd): control ring, then per device rx
// burst, timers, scheduler, tx flush. Adaptive polling: while traffic flows
// the loop busy-polls; after `spin_polls` empty passes or `spin_time` without
// work (whichever comes first; `short_spin` instead while the SpinGovernor
// finds that most idle gaps outlast `spin_time`) it blocks until the engines' next deadline, at
// most a quarter of the time since its last work, within [min_sleep,
// max_sleep], so an idle daemon costs little CPU and a briefly idle one
// wakes fast. It blocks in poll() on what can wake it early: the kernel
// sockets behind its ports (net_af_packet, net_af_xdp: a frame arrived) and an
// eventfd that call() and wake() kick; DPDK's RX interrupts are not used (none
// of af_packet, af_xdp, ring, pcap, memif in DPDK 22.11 has them; tap's are
// not wired yet), an eventfd that call() and wake() kick, and the clients'
// doorbell eventfds (add_doorbell: the verbs library writes its own after a
// post when the shared flag says the worker sleeps, ctrl/shm_abi.h). Before it
// blocks the worker stores the flag, fences, and passes over its devices once
// more, so a post published before the library's fence is seen either by
// that pass or by the library. When every source of work is signalled (every
// port has wait fds and every hook says signalled(): all shared-memory rings
// have doorbells) the bound is max_sleep, so the worker sleeps until the
// engines' next deadline; otherwise work that nothing signals waits for the
// quarter bound.
#pragma once

#include <poll.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataplane/dpdk/clock.h"
#include "dataplane/dpdk/device.h"
#include "dataplane/dpdk/spin_governor.h"

namespace isoroce::dataplane {

struct IdleConfig {
  uint32_t spin_polls = 2000;                  // empty passes before sleeping
  sched::Picos spin_time = 20'000'000;         // or this long without work (20 us); 0: passes only
  // Adaptive spinning (SpinGovernor): spin_time only while most idle gaps are
  // shorter than it, otherwise short_spin.
  bool adaptive_spin = true;
  sched::Picos short_spin = 1'000'000;         // 1 us
  sched::Picos min_sleep = 10'000'000;         // 10 us
  sched::Picos max_sleep = 1'000'000'000;      // 1 ms
  // The worker thread's scheduler slice (Linux >= 6.12 EEVDF, sched_setattr
  // sched_runtime of a SCHED_OTHER thread; 0: the kernel's default). A slice
  // shorter than the default lets the worker's wakeups preempt applications
  // that busy-poll on its core instead of waiting out their slice.
  uint32_t slice_us = 100;
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
  uint64_t wakeups = 0;  // sleeps ended early by a port's socket, a kick or a doorbell
  uint64_t doorbell_wakeups = 0;  // sleeps ended (or not begun) because a client rang its doorbell
  uint64_t signalled_sleeps = 0;  // sleeps bounded by the next deadline (every source signalled)
  uint64_t short_spins = 0;       // idle phases that spun short_spin, not spin_time (SpinGovernor)
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
  // Runs fn on the calling thread while every worker of `workers` (distinct,
  // running) waits inside a command: the engines of a port's lanes, on
  // several workers, change together (docs/design.md, "Lanes"). One such
  // call at a time in the process; the workers are stopped in order.
  static void call_stopped(const std::vector<Worker*>& workers, const TscClock& clock,
                           const std::function<void(sched::Picos now)>& fn);

  // The poll loop; returns after stop().
  void run();
  void stop() {
    stop_.store(true, std::memory_order_release);
    wake();
  }
  // Ends the worker's sleep now, if it sleeps (any thread; cheap when it does not).
  void wake();
  // The kernel sockets the idle worker blocks on (its ports' rx_wait_fds).
  size_t wait_fds() const { return port_fds_; }

  // The doorbell: before run(), where the worker publishes that it sleeps
  // (a word in a page clients map read-only; default: a private word).
  // With membarrier_flag (a word that is nonzero while the clients may rely
  // on it), the worker issues membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)
  // after it stores the flag and before its last look, when it means to
  // sleep longer than 50 us, so clients need no fence of their own
  // (ctrl/shm_abi.h, kBellMembarrier), and only while a client relies on it
  // (add_membarrier_user); if the call fails it clears the word and does not
  // sleep that time.
  void set_asleep_flag(std::atomic<uint32_t>* flag, std::atomic<uint32_t>* membarrier_flag = nullptr) {
    asleep_ = flag;
    membarrier_flag_ = membarrier_flag;
  }
  // A doorbell page this worker shares with others (a port with lanes, whose
  // clients' QPs are on several workers: ctrl/dpdk_driver.h): while it
  // sleeps the worker sets `bit` in `word` (a client rings when any bit is
  // set), and after it drained a client's doorbell it wakes `peers`, the
  // page's other workers (the client's eventfd is in every one's set, and
  // the first to read it must pass the wakeup on). Before run().
  // membarrier_flag: that page's flags word while its clients may rely on
  // this worker's membarrier() (the page's kBellMembarrier: every worker of
  // the page issues it, after setting its bit and before its last look, as
  // for its own page); a failed call clears it with the worker's own.
  void add_shared_asleep(std::atomic<uint32_t>* word, uint32_t bit, std::vector<Worker*> peers,
                         std::atomic<uint32_t>* membarrier_flag = nullptr);
  // A client's doorbell eventfd joins / leaves the set the worker blocks on.
  // On the worker's thread only (inside call()); the worker reads it without
  // blocking whatever flags the client sets on it, and never closes it.
  void add_doorbell(int fd);
  void remove_doorbell(int fd);
  size_t doorbells() const { return doorbells_.load(std::memory_order_relaxed); }
  // The worker can issue membarrier() before it sleeps (set_asleep_flag).
  bool membarrier() const {
    return membarrier_flag_ != nullptr && membarrier_flag_->load(std::memory_order_relaxed) != 0;
  }
  // Clients that post without a fence and rely on that call: it is made only
  // while there is one. On the worker's thread only (inside call()), so the
  // client is counted before it is told it may rely on the call.
  void add_membarrier_user() { membarrier_users_.fetch_add(1, std::memory_order_relaxed); }
  void remove_membarrier_user() { membarrier_users_.fetch_sub(1, std::memory_order_relaxed); }
  uint32_t membarrier_users() const { return membarrier_users_.load(std::memory_order_relaxed); }

  const std::vector<Device*>& devices() const { return devices_; }
  WorkerStats stats() const;

 private:
  struct Command {
    const std::function<void(sched::Picos)>* fn;
    std::atomic<bool> done{false};
  };
  unsigned run_commands();
  void enqueue(Command* cmd);
  void idle_wait(sched::Picos now);
  // A pass from start to end did work: the governor learns the gap before it.
  void found_work(sched::Picos start, sched::Picos end);
  // Every device's port has wait fds and every hook is signalled.
  bool all_signalled() const;
  void drain_doorbells();
  // The asleep flag, and this worker's bit in every shared page.
  void set_asleep(bool on);
  void set_slice();

  unsigned id_;
  std::vector<Device*> devices_;
  const TscClock& clock_;
  IdleConfig idle_;
  rte_ring* ring_ = nullptr;
  std::atomic<bool> stop_{false};
  uint32_t empty_passes_ = 0;
  sched::Picos last_work_ = 0;
  sched::Picos work_end_ = 0;        // when the last pass that did work ended
  bool in_gap_ = false;              // a pass since work_end_ found nothing
  SpinGovernor spin_;
  int wake_fd_ = -1;                 // eventfd: call()/wake() end a sleep
  std::atomic<uint32_t> own_asleep_{0};
  std::atomic<uint32_t>* asleep_ = &own_asleep_;  // 1 while the worker blocks (or is about to)
  std::atomic<uint32_t>* membarrier_flag_ = nullptr;  // nonzero: membarrier after storing *asleep_
  struct SharedAsleep {
    std::atomic<uint32_t>* word;
    uint32_t bit;
    std::atomic<uint32_t>* membarrier_flag;  // null: the page's clients fence
  };
  std::vector<SharedAsleep> shared_asleep_;  // add_shared_asleep
  std::vector<Worker*> bell_peers_;           // woken after a doorbell wakeup
  std::atomic<uint32_t> membarrier_users_{0};         // written on the worker's thread; read by status
  std::vector<pollfd> fds_;          // wake_fd_, then the ports' sockets, then the doorbells
  size_t port_fds_ = 0;
  std::atomic<size_t> doorbells_{0};
  // Written by the worker, read by telemetry (relaxed: counters only).
  std::atomic<uint64_t> passes_{0}, busy_passes_{0}, sleeps_{0}, commands_{0}, busy_ps_{0}, wakeups_{0},
      doorbell_wakeups_{0}, signalled_sleeps_{0}, short_spins_{0};
};

}  // namespace isoroce::dataplane
