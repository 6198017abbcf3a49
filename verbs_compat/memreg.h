// Registered memory is shared, not copied (DESIGN.md): ibv_reg_mr on any
// application memory moves the page-aligned range onto a memfd — copy the
// bytes in, then mmap the file MAP_SHARED|MAP_FIXED over the same addresses
// (FreeFlow's trick) — so the daemon maps the very pages the application uses.
#pragma once

#include <cstddef>
#include <cstdint>

namespace isoroce::vc {

struct Remapped {
  int fd = -1;          // the segment's memfd (the registry keeps it open)
  uint64_t offset = 0;  // of addr in the file
};

// 0 and *out, or a positive errno (logged). Ranges already on a segment reuse
// it; the file grows to cover adjacent and overlapping registrations.
int remap_for_mr(void* addr, size_t length, Remapped* out);

}  // namespace isoroce::vc
