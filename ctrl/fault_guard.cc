#include "ctrl/fault_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <mutex>

namespace isoroce::ctrl::fault_guard {
namespace {

// The handler reads the table without locks: a slot is live while start != 0;
// add() publishes end before start, remove() clears start first.
constexpr int kSlots = 4096;
struct Slot {
  std::atomic<uintptr_t> start{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};
Slot g_slots[kSlots];
std::atomic<uint64_t> g_faults{0};
struct sigaction g_previous {};
std::once_flag g_once;
std::mutex g_mu;  // add/remove (never taken by the handler)

void on_sigbus(int sig, siginfo_t* si, void* uc) {
  const auto a = reinterpret_cast<uintptr_t>(si->si_addr);
  for (Slot& s : g_slots) {
    const uintptr_t start = s.start.load(std::memory_order_acquire);
    if (start == 0 || a < start) continue;
    const uintptr_t end = s.end.load(std::memory_order_acquire);
    if (a >= end) continue;
    // mmap is a system call, safe here. The faulting access runs again on
    // the zero pages.
    void* m = mmap(reinterpret_cast<void*>(start), end - start, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (m != MAP_FAILED) {
      s.faulted.store(true, std::memory_order_relaxed);
      g_faults.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    break;
  }
  // Not ours: what was there before.
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, si, uc);
    return;
  }
  if (!(g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default: a hardware fault happens again on return and kills with a core;
  // a SIGBUS sent by kill() is raised again.
  signal(SIGBUS, SIG_DFL);
  if (si->si_code <= 0) raise(SIGBUS);
}

}  // namespace

void install() {
  std::call_once(g_once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

int add(void* addr, size_t len) {
  const auto start = reinterpret_cast<uintptr_t>(addr);
  if (start == 0 || len == 0) return -1;
  std::lock_guard lock(g_mu);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    if (s.start.load(std::memory_order_relaxed) != 0) continue;
    s.faulted.store(false, std::memory_order_relaxed);
    s.end.store(start + len, std::memory_order_release);
    s.start.store(start, std::memory_order_release);
    return i;
  }
  return -1;
}

bool remove(int slot) {
  if (slot < 0 || slot >= kSlots) return false;
  std::lock_guard lock(g_mu);
  g_slots[slot].start.store(0, std::memory_order_release);
  return g_slots[slot].faulted.load(std::memory_order_relaxed);
}

uint64_t faults() { return g_faults.load(std::memory_order_relaxed); }

}  // namespace isoroce::ctrl::fault_guard
