// A worker's doorbell page (ctrl/shm_abi.h, DoorbellPage): a sealed memfd the
// daemon maps writable and hands to clients read-only, so the library can see
// whether the worker sleeps before it rings the client's eventfd.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ctrl/shm_abi.h"

namespace isoroce::ctrl {

class DoorbellPage {
 public:
  // nullptr and *error on failure.
  static std::unique_ptr<DoorbellPage> create(uint32_t worker, std::string* error);
  ~DoorbellPage();
  DoorbellPage(const DoorbellPage&) = delete;
  DoorbellPage& operator=(const DoorbellPage&) = delete;

  // The flag the worker stores while it blocks.
  std::atomic<uint32_t>* asleep() { return &page_->asleep; }
  // kBellMembarrier when the kernel has membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)
  // (set by create(), probed with one call), else 0: the word the worker clears
  // if the call ever fails.
  std::atomic<uint32_t>* flags() { return &page_->flags; }
  bool membarrier() const { return page_->flags.load(std::memory_order_relaxed) & shm::kBellMembarrier; }
  // A descriptor for clients (dup it): opened read-only, the file sealed
  // against writable mappings, writes, growing and shrinking.
  int client_fd() const { return ro_fd_; }

 private:
  DoorbellPage() = default;
  int fd_ = -1, ro_fd_ = -1;
  shm::DoorbellPage* page_ = nullptr;
};

}  // namespace isoroce::ctrl
