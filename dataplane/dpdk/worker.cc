#include "dataplane/dpdk/worker.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <rte_errno.h>
#include <rte_pause.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>

namespace isoroce::dataplane {
namespace {
constexpr unsigned kRingSize = 256;
constexpr unsigned kCommandBurst = 16;
constexpr sched::Picos kPreempted = 200'000'000;  // a busy pass this long was descheduled
constexpr sched::Picos kShortSleep = 50'000'000;  // no membarrier before a sleep this short (50 us)
}  // namespace

Worker::Worker(unsigned id, std::vector<Device*> devices, const TscClock& clock, IdleConfig idle)
    : id_(id),
      devices_(std::move(devices)),
      clock_(clock),
      idle_(idle),
      spin_(idle.spin_time, idle.short_spin, idle.adaptive_spin) {}

Worker::~Worker() {
  if (ring_ != nullptr) rte_ring_free(ring_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool Worker::init(std::string* error) {
  // Many producers (the control thread, telemetry), one consumer (this loop).
  ring_ = rte_ring_create(("isoroce_ctl" + std::to_string(id_)).c_str(), kRingSize, SOCKET_ID_ANY,
                          RING_F_SC_DEQ);
  if (ring_ == nullptr) {
    *error = std::string("control ring: ") + rte_strerror(rte_errno);
    return false;
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    *error = std::string("worker eventfd: ") + std::strerror(errno);
    return false;
  }
  fds_.push_back({wake_fd_, POLLIN, 0});
  for (Device* d : devices_)
    for (int fd : d->rx_wait_fds()) fds_.push_back({fd, POLLIN, 0});
  port_fds_ = fds_.size() - 1;
  return true;
}

void Worker::add_doorbell(int fd) {
  fds_.push_back({fd, POLLIN, 0});
  doorbells_.store(fds_.size() - 1 - port_fds_, std::memory_order_relaxed);
}

void Worker::remove_doorbell(int fd) {
  for (size_t i = 1 + port_fds_; i < fds_.size(); ++i)
    if (fds_[i].fd == fd) {
      fds_.erase(fds_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  doorbells_.store(fds_.size() - 1 - port_fds_, std::memory_order_relaxed);
}

bool Worker::all_signalled() const {
  for (const Device* d : devices_)
    if (!d->rx_signalled() || !d->signalled()) return false;
  return true;
}

void Worker::drain_doorbells() {
  // RWF_NOWAIT: the client shares the file description and may have cleared
  // O_NONBLOCK on it (or read the count away since poll saw it): a plain
  // read() could then block the worker.
  uint64_t n;
  iovec v{&n, sizeof n};
  for (size_t i = 1 + port_fds_; i < fds_.size(); ++i)
    if (fds_[i].revents & POLLIN) (void)!preadv2(fds_[i].fd, &v, 1, -1, RWF_NOWAIT);
}

void Worker::add_shared_asleep(std::atomic<uint32_t>* word, uint32_t bit, std::vector<Worker*> peers,
                               std::atomic<uint32_t>* membarrier_flag) {
  shared_asleep_.push_back({word, bit, membarrier_flag});
  for (Worker* p : peers)
    if (p != this && std::find(bell_peers_.begin(), bell_peers_.end(), p) == bell_peers_.end()) bell_peers_.push_back(p);
}

void Worker::set_asleep(bool on) {
  asleep_->store(on ? 1 : 0, std::memory_order_relaxed);
  // Ordered before the last look at the rings by the fence in idle_wait().
  for (const SharedAsleep& s : shared_asleep_) {
    if (on) s.word->fetch_or(s.bit, std::memory_order_relaxed);
    else s.word->fetch_and(~s.bit, std::memory_order_relaxed);
  }
}

void Worker::wake() {
  // Pairs with the fence in idle_wait(): either the worker sees what the
  // caller queued before it sleeps, or the caller sees it asleep and kicks.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (wake_fd_ >= 0 && asleep_->load(std::memory_order_relaxed)) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }
}

void Worker::set_slice() {
  if (idle_.slice_us == 0) return;
  // struct sched_attr (linux/sched/types.h), spelled out: the kernel takes its
  // size from the first field.
  struct {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
  } attr{};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, 0);
  attr.sched_nice = errno == 0 ? nice : 0;
  attr.sched_runtime = uint64_t{idle_.slice_us} * 1000;
  // Older kernels ignore sched_runtime for SCHED_NORMAL; a refusal changes nothing.
  (void)syscall(SYS_sched_setattr, 0, &attr, 0);
}

void Worker::enqueue(Command* cmd) {
  // The ring is small and commands are quick: wait for room rather than fail.
  while (rte_ring_mp_enqueue(ring_, cmd) != 0) {
    timespec ts{0, 10'000};
    nanosleep(&ts, nullptr);
  }
  wake();
}

void Worker::call_stopped(const std::vector<Worker*>& workers, const TscClock& clock,
                          const std::function<void(sched::Picos)>& fn) {
  // One at a time: two callers stopping the same workers in different
  // orders would each hold one and wait for the other's.
  static std::mutex one_at_a_time;
  std::lock_guard lock(one_at_a_time);
  std::atomic<unsigned> parked{0};
  std::atomic<bool> go{false};
  const std::function<void(sched::Picos)> wait_here = [&](sched::Picos) {
    parked.fetch_add(1, std::memory_order_acq_rel);
    parked.notify_all();
    while (!go.load(std::memory_order_acquire)) go.wait(false, std::memory_order_acquire);
  };
  std::vector<Command> cmds(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) {
    cmds[i].fn = &wait_here;
    workers[i]->enqueue(&cmds[i]);
    // Pairs with the worker's fetch_add: what it did before is visible here.
    for (unsigned n; (n = parked.load(std::memory_order_acquire)) < i + 1;) parked.wait(n, std::memory_order_acquire);
  }
  fn(clock.now());
  go.store(true, std::memory_order_release);
  go.notify_all();
  for (Command& c : cmds)
    while (!c.done.load(std::memory_order_acquire)) c.done.wait(false, std::memory_order_acquire);
}

void Worker::call(const std::function<void(sched::Picos)>& fn) {
  Command cmd;
  cmd.fn = &fn;
  enqueue(&cmd);
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
  set_slice();
  while (!stop_.load(std::memory_order_acquire)) {
    unsigned work = run_commands();
    const sched::Picos now = clock_.now();
    for (Device* d : devices_) work += d->poll(now);
    passes_.fetch_add(1, std::memory_order_relaxed);
    if (work != 0) {
      const sched::Picos end = clock_.now();
      busy_passes_.fetch_add(1, std::memory_order_relaxed);
      const sched::Picos took = end - now;
      if (took < kPreempted) busy_ps_.fetch_add(took, std::memory_order_relaxed);
      found_work(now, end);
      continue;
    }
    if (!in_gap_) {
      in_gap_ = true;
      spin_.begin_gap();
      if (!spin_.full()) short_spins_.fetch_add(1, std::memory_order_relaxed);
    }
    const sched::Picos spin = spin_.spin();
    const bool spun_long = spin != 0 && now - work_end_ >= spin;
    if (++empty_passes_ < idle_.spin_polls && !spun_long) {
      rte_pause();
      continue;
    }
    idle_wait(now);
  }
  // Last commands (the caller of stop() may be waiting in call()).
  run_commands();
}

void Worker::found_work(sched::Picos start, sched::Picos end) {
  // The gap since the last work ended, spun or slept through: would the
  // full spin have caught this work?
  if (in_gap_) spin_.on_gap(start > work_end_ ? start - work_end_ : 0);
  in_gap_ = false;
  empty_passes_ = 0;
  last_work_ = start;
  work_end_ = end;
}

void Worker::idle_wait(sched::Picos now) {
  sched::Picos deadline = sched::kNever;
  for (const Device* d : devices_) deadline = std::min(deadline, d->next_deadline());
  if (deadline <= now) return;  // a timer or a paced packet is due: keep polling
  // The bound follows the time since the last work (a quarter of it): a post
  // nothing signals waits at most a quarter of the quiet time before it, so
  // a ping-pong whose turns take t waits about t/4 more, and a long-idle
  // worker wakes a few times per max_sleep. The old rule, doubling per sleep,
  // let a post after a quiet spell wait as long as the spell.
  // With every source signalled (ports' sockets, doorbells on every ring)
  // nothing can arrive unseen: sleep until the next deadline, at most max_sleep.
  const bool signalled = all_signalled();
  const sched::Picos bound =
      signalled ? idle_.max_sleep : std::clamp((now - last_work_) / 4, idle_.min_sleep, idle_.max_sleep);
  const sched::Picos sleep = std::min(deadline - now, bound);
  if (sleep < 2'000'000) return;  // under 2 us a sleep costs more than it saves
  set_asleep(true);
  // Pairs with wake() and with the library's fence after it publishes a post:
  // from here on either we see the post (below) or the poster sees us asleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // The clients' half of the fence (ctrl/shm_abi.h, kBellMembarrier): every
  // CPU running a registered client passes a full barrier now, so a post
  // published without a fence before it is seen by the look below. It costs
  // an IPI to each CPU that runs a client (about 50 us on this project's
  // paravirtualised 2-core VM), so a shorter sleep goes without it: a post
  // that races that sleep waits at most the sleep (kShortSleep).
  // Only while a client relies on it (add_membarrier_user): otherwise the
  // call is a system call per sleep for nobody.
  if (sleep > kShortSleep && membarrier_users_.load(std::memory_order_relaxed) != 0 && membarrier() &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0) [[unlikely]] {
    // Clients fence again once they see the word clear; until then keep polling.
    membarrier_flag_->store(0, std::memory_order_relaxed);
    for (const SharedAsleep& sa : shared_asleep_)
      if (sa.membarrier_flag != nullptr) sa.membarrier_flag->store(0, std::memory_order_relaxed);
    set_asleep(false);
    return;
  }
  if (rte_ring_count(ring_) != 0 || stop_.load(std::memory_order_acquire)) {
    set_asleep(false);
    return;
  }
  // Frames another lane's worker queued for ours before it saw the flag.
  for (const Device* d : devices_)
    if (d->input_pending()) {
      set_asleep(false);
      return;
    }
  if (doorbells_.load(std::memory_order_relaxed) != 0) {
    // The last look at the rings, after the flag is visible.
    unsigned work = 0;
    for (Device* d : devices_) work += d->poll(now);
    if (work != 0) {
      set_asleep(false);
      busy_passes_.fetch_add(1, std::memory_order_relaxed);
      found_work(now, clock_.now());
      return;
    }
  }
  const timespec ts{static_cast<time_t>(sleep / 1'000'000'000'000), static_cast<long>(sleep / 1000 % 1'000'000'000)};
  const int ready = ppoll(fds_.data(), fds_.size(), &ts, nullptr);
  set_asleep(false);
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  if (signalled) signalled_sleeps_.fetch_add(1, std::memory_order_relaxed);
  if (ready > 0) {
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    if (fds_[0].revents & POLLIN) {
      uint64_t n;
      (void)!read(wake_fd_, &n, sizeof n);
    }
    bool rung = false;
    for (size_t i = 1 + port_fds_; i < fds_.size(); ++i) rung |= (fds_[i].revents & POLLIN) != 0;
    if (rung) {
      doorbell_wakeups_.fetch_add(1, std::memory_order_relaxed);
      drain_doorbells();
      // A shared page's client rang for some worker of the page: perhaps
      // not this one, whose read may have taken the wakeup from it.
      for (Worker* p : bell_peers_) p->wake();
    }
  }
}

WorkerStats Worker::stats() const {
  return {passes_.load(std::memory_order_relaxed), busy_passes_.load(std::memory_order_relaxed),
          sleeps_.load(std::memory_order_relaxed), commands_.load(std::memory_order_relaxed),
          busy_ps_.load(std::memory_order_relaxed) / 1000,
          wakeups_.load(std::memory_order_relaxed),
          doorbell_wakeups_.load(std::memory_order_relaxed),
          signalled_sleeps_.load(std::memory_order_relaxed),
          short_spins_.load(std::memory_order_relaxed)};
}

}  // namespace isoroce::dataplane
