#include "transport/verbs/pd_table.h"

#include <cerrno>

namespace isoroce::verbs {

Result<PdHandle> PdTable::alloc(const Device& dev) {
  if (uses_.size() >= dev.max_pd) return Result<PdHandle>::error(ENOMEM);
  while (next_ == 0 || uses_.count(next_)) ++next_;
  PdHandle pd = next_++;
  uses_[pd] = 0;
  return pd;
}

int PdTable::dealloc(PdHandle pd) {
  auto it = uses_.find(pd);
  if (it == uses_.end()) return EINVAL;
  if (it->second != 0) return EBUSY;
  uses_.erase(it);
  return 0;
}

}  // namespace isoroce::verbs
