// Protection domains: handles and use counts, so a PD still holding an MR,
// QP or AH cannot be freed (ibv_dealloc_pd() answers EBUSY, as
// ib_dealloc_pd_user() refuses a PD whose usecnt is not zero).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "transport/verbs/device.h"
#include "transport/verbs/result.h"

namespace isoroce::verbs {

using PdHandle = uint32_t;

class PdTable {
 public:
  // ENOMEM beyond Device::max_pd.
  Result<PdHandle> alloc(const Device& dev);
  // 0, EINVAL for an unknown PD, EBUSY while something uses it.
  int dealloc(PdHandle pd);
  bool exists(PdHandle pd) const { return uses_.count(pd) != 0; }
  // Taken by each object created in the PD, released when it is destroyed.
  void get(PdHandle pd) { ++uses_.at(pd); }
  void put(PdHandle pd) { --uses_.at(pd); }
  uint32_t uses(PdHandle pd) const { return exists(pd) ? uses_.at(pd) : 0; }
  size_t size() const { return uses_.size(); }
  // The next alloc() gives pd if it is free (Engine::set_next_pd).
  void set_next(PdHandle pd) { next_ = pd; }

 private:
  std::unordered_map<PdHandle, uint32_t> uses_;
  PdHandle next_ = 1;
};

}  // namespace isoroce::verbs
