// Memory access flags of ibv_reg_mr() (enum ibv_access_flags) and the rules
// Linux applies to them in ib_check_mr_access() (include/rdma/ib_verbs.h).
#pragma once

#include <cerrno>
#include <cstdint>
#include <infiniband/verbs.h>

namespace isoroce::verbs {

// The bits rdma-core defines up to FLUSH_PERSISTENT (bits 8 and 9 in newer
// headers), plus the optional range that providers may ignore
// (IBV_ACCESS_OPTIONAL_RANGE, e.g. RELAXED_ORDERING).
inline constexpr uint32_t kAccessFlushGlobal = 1u << 8;
inline constexpr uint32_t kAccessFlushPersistent = 1u << 9;
inline constexpr uint32_t kAccessKnown =
    ((kAccessFlushPersistent << 1) - 1) | IBV_ACCESS_OPTIONAL_RANGE;
inline constexpr uint32_t kAccessRemote =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// 0, EINVAL when REMOTE_WRITE or REMOTE_ATOMIC comes without LOCAL_WRITE
// (ib_check_mr_access(); IBTA vol.1 10.6.3: remote write access needs local write)
// or an unknown bit is set, EOPNOTSUPP for what this device cannot do
// (ON_DEMAND paging, FLUSH).
constexpr int check_mr_access(uint32_t access) {
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  if (access & ~kAccessKnown) return EINVAL;
  if (access & (IBV_ACCESS_ON_DEMAND | kAccessFlushGlobal | kAccessFlushPersistent))
    return EOPNOTSUPP;
  return 0;
}

}  // namespace isoroce::verbs
