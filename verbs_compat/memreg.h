// Registered memory is shared, not copied (DESIGN.md): the daemon maps the very
// pages the application uses.
// - Private memory (anonymous, heap, stack, static, MAP_PRIVATE file mappings):
//   ibv_reg_mr moves the page-aligned range onto a memfd — copy the bytes in,
//   then mmap the file MAP_SHARED|MAP_FIXED over the same addresses
//   (FreeFlow's trick).
// - Shared mappings (MAP_SHARED of a file, /dev/shm object, memfd, shared
//   anonymous memory) are left alone: remapping them would cut them off from
//   their file. The daemon gets the file itself (opened through
//   /proc/self/map_files, else by its path) and the offset, and maps the same
//   pages of it.
// A range over several mappings is sent as pieces, one per run of pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace isoroce::vc {

// The private pages a registration keeps on the library's memfds. While any
// registration holds a page it stays a MAP_SHARED mapping of the memfd; when
// the last is deregistered it becomes a MAP_PRIVATE mapping of the same
// memfd pages (the same bytes, swapped in one mmap: no write of another
// thread is lost), so fork() copies it again instead of sharing it.
struct MrPages {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
};
// Call once the daemon no longer maps them (after dereg_mr's reply).
void release_mr_pages(MrPages& pages);

// What reg_mr sends for a range: "offset" and "pieces" (docs/control-protocol.md)
// and the descriptors the pieces name.
struct MrMemory {
  nlohmann::json fields = nlohmann::json::object();  // merged into the reg_mr request
  std::vector<int> fds;                             // sent with it
  std::vector<bool> owned;                          // closed by the destructor (files opened for this call)
  MrPages pages;  // move into the Mr when the daemon accepted it; else the destructor releases them
  MrMemory() = default;
  MrMemory(const MrMemory&) = delete;
  MrMemory& operator=(const MrMemory&) = delete;
  ~MrMemory();
};

// 0 and *out, or a positive errno (logged): EFAULT for unmapped memory and for
// write access (IBV_ACCESS_LOCAL_WRITE, REMOTE_WRITE, REMOTE_ATOMIC, MW_BIND)
// to read-only shared memory, as the kernel's ib_umem_get; the open's errno
// when the file behind a shared mapping cannot be opened.
int prepare_mr_memory(void* addr, size_t length, unsigned access, MrMemory* out);

struct Remapped {
  int fd = -1;          // the segment's memfd (the registry keeps it open)
  uint64_t offset = 0;  // of addr in the file
};

// The private-memory path alone, as one memfd: 0 and *out, or a positive
// errno (logged); EINVAL for ranges with shared mappings in them. Ranges
// already on a segment reuse it; the file grows to cover adjacent and
// overlapping registrations. The pages stay on the memfd for good (no
// MrPages): prefer prepare_mr_memory.
int remap_for_mr(void* addr, size_t length, Remapped* out);

}  // namespace isoroce::vc
