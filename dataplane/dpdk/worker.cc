#include "dataplane/dpdk/worker.h"

#include <rte_errno.h>
#include <rte_pause.h>

#include <algorithm>
#include <ctime>

namespace isoroce::dataplane {
namespace {
constexpr unsigned kRingSize = 256;
constexpr unsigned kCommandBurst = 16;
constexpr sched::Picos kPreempted = 200'000'000;  // a busy pass this long was descheduled
}  // namespace

Worker::Worker(unsigned id, std::vector<Device*> devices, const TscClock& clock, IdleConfig idle)
    : id_(id), devices_(std::move(devices)), clock_(clock), idle_(idle) {}

Worker::~Worker() {
  if (ring_ != nullptr) rte_ring_free(ring_);
}

bool Worker::init(std::string* error) {
  // Many producers (the control thread, telemetry), one consumer (this loop).
  ring_ = rte_ring_create(("isoroce_ctl" + std::to_string(id_)).c_str(), kRingSize, SOCKET_ID_ANY,
                          RING_F_SC_DEQ);
  if (ring_ == nullptr) {
    *error = std::string("control ring: ") + rte_strerror(rte_errno);
    return false;
  }
  return true;
}

void Worker::call(const std::function<void(sched::Picos)>& fn) {
  Command cmd;
  cmd.fn = &fn;
  // The ring is small and commands are quick: wait for room rather than fail.
  while (rte_ring_mp_enqueue(ring_, &cmd) != 0) {
    timespec ts{0, 10'000};
    nanosleep(&ts, nullptr);
  }
  // Pairs with the release store in run_commands().
  while (!cmd.done.load(std::memory_order_acquire)) cmd.done.wait(false, std::memory_order_acquire);
}

unsigned Worker::run_commands() {
  void* cmds[kCommandBurst];
  const unsigned n = rte_ring_sc_dequeue_burst(ring_, cmds, kCommandBurst, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    auto* cmd = static_cast<Command*>(cmds[i]);
    (*cmd->fn)(clock_.now());
    // The caller may destroy cmd as soon as it sees done: touch nothing after.
    cmd->done.store(true, std::memory_order_release);
    cmd->done.notify_one();
  }
  if (n) commands_.fetch_add(n, std::memory_order_relaxed);
  return n;
}

void Worker::run() {
  while (!stop_.load(std::memory_order_acquire)) {
    unsigned work = run_commands();
    const sched::Picos now = clock_.now();
    for (Device* d : devices_) work += d->poll(now);
    passes_.fetch_add(1, std::memory_order_relaxed);
    if (work != 0) {
      busy_passes_.fetch_add(1, std::memory_order_relaxed);
      const sched::Picos took = clock_.now() - now;
      if (took < kPreempted) busy_ps_.fetch_add(took, std::memory_order_relaxed);
      empty_passes_ = 0;
      sleep_bound_ = idle_.min_sleep;
      continue;
    }
    if (++empty_passes_ < idle_.spin_polls) {
      rte_pause();
      continue;
    }
    idle_wait(now);
  }
  // Last commands (the caller of stop() may be waiting in call()).
  run_commands();
}

void Worker::idle_wait(sched::Picos now) {
  sched::Picos deadline = sched::kNever;
  for (const Device* d : devices_) deadline = std::min(deadline, d->next_deadline());
  if (deadline <= now) return;  // a timer or a paced packet is due: keep polling
  const sched::Picos sleep = std::min(deadline - now, sleep_bound_);
  sleep_bound_ = std::min(idle_.max_sleep, std::max(idle_.min_sleep, sleep_bound_ * 2));
  if (sleep < 2'000'000) return;  // under 2 us a sleep costs more than it saves
  timespec ts{0, static_cast<long>(sleep / 1000)};
  nanosleep(&ts, nullptr);
  sleeps_.fetch_add(1, std::memory_order_relaxed);
}

WorkerStats Worker::stats() const {
  return {passes_.load(std::memory_order_relaxed), busy_passes_.load(std::memory_order_relaxed),
          sleeps_.load(std::memory_order_relaxed), commands_.load(std::memory_order_relaxed),
          busy_ps_.load(std::memory_order_relaxed) / 1000};
}

}  // namespace isoroce::dataplane
