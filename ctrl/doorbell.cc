#include "ctrl/doorbell.h"

#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace isoroce::ctrl {

std::unique_ptr<DoorbellPage> DoorbellPage::create(uint32_t worker, std::string* error) {
  std::unique_ptr<DoorbellPage> p(new DoorbellPage);
  auto fail = [&](const char* what) {
    *error = std::string("doorbell page: ") + what + ": " + std::strerror(errno);
    return nullptr;
  };
  p->fd_ = memfd_create("isoroce-doorbell", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (p->fd_ < 0) return fail("memfd_create");
  if (ftruncate(p->fd_, shm::kDoorbellPageBytes) != 0) return fail("ftruncate");
  void* base = mmap(nullptr, shm::kDoorbellPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd_, 0);
  if (base == MAP_FAILED) return fail("mmap");
  p->page_ = new (base) shm::DoorbellPage{};
  p->page_->abi = shm::kShmAbiVersion;
  p->page_->worker = worker;
  // The asymmetric fence (shm_abi.h): only where the kernel has it and lets us
  // call it (a seccomp filter may not).
  const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0)
    p->page_->flags.store(shm::kBellMembarrier, std::memory_order_relaxed);
  // Our writable mapping stays; nobody can make another, write the file or
  // resize it (F_SEAL_FUTURE_WRITE, Linux 5.1).
  if (fcntl(p->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0)
    return fail("F_ADD_SEALS");
  // And the clients' descriptor is a read-only open file: mmap(PROT_WRITE,
  // MAP_SHARED) and mprotect to writable fail on it whatever the seals do.
  const std::string self = "/proc/self/fd/" + std::to_string(p->fd_);
  p->ro_fd_ = open(self.c_str(), O_RDONLY | O_CLOEXEC);
  if (p->ro_fd_ < 0) return fail("reopen read-only");
  return p;
}

DoorbellPage::~DoorbellPage() {
  if (page_ != nullptr) munmap(page_, shm::kDoorbellPageBytes);
  if (ro_fd_ >= 0) close(ro_fd_);
  if (fd_ >= 0) close(fd_);
}

}  // namespace isoroce::ctrl
