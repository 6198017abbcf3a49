#include "transport/verbs/cq.h"

#include <cerrno>

namespace isoroce::verbs {

int check_cq_size(const Device& dev, int cqe) {
  if (cqe < 1 || static_cast<uint32_t>(cqe) > dev.max_cqe) return EINVAL;
  return 0;
}

Result<Cq> Cq::create(const Device& dev, int cqe) {
  if (int err = check_cq_size(dev, cqe)) return Result<Cq>::error(err);
  return Cq(static_cast<uint32_t>(cqe));
}

void Cq::pop(uint32_t n) { count_ -= n < count_ ? n : count_; }

int Cq::resize(const Device& dev, int cqe, uint32_t outside) {
  if (int err = check_cq_size(dev, cqe)) return err;
  if (static_cast<uint64_t>(cqe) < uint64_t{count_} + outside) return EINVAL;
  capacity_ = static_cast<uint32_t>(cqe);
  return 0;
}

}  // namespace isoroce::verbs
