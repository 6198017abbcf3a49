#include "transport/verbs/srq.h"

#include <cerrno>

namespace isoroce::verbs {

int check_srq_init(const Device& dev, const ibv_srq_attr& a) {
  if (a.max_wr < 1 || a.max_wr > dev.max_srq_wr) return EINVAL;
  if (a.max_sge < 1 || a.max_sge > dev.max_srq_sge) return EINVAL;
  if (a.srq_limit > a.max_wr) return EINVAL;
  return 0;
}

Result<Srq> Srq::create(const Device& dev, const ibv_srq_attr& attr) {
  if (int err = check_srq_init(dev, attr)) return Result<Srq>::error(err);
  return Srq(attr);
}

int Srq::modify(const Device& dev, const ibv_srq_attr& a, uint32_t mask) {
  if (mask & ~uint32_t(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  uint32_t max_wr = attr_.max_wr;
  if (mask & IBV_SRQ_MAX_WR) {
    if (a.max_wr < 1 || a.max_wr > dev.max_srq_wr || a.max_wr < count_) return EINVAL;
    if (!(mask & IBV_SRQ_LIMIT) && a.max_wr < attr_.srq_limit) return EINVAL;
    max_wr = a.max_wr;
  }
  if ((mask & IBV_SRQ_LIMIT) && a.srq_limit > max_wr) return EINVAL;
  attr_.max_wr = max_wr;
  if (mask & IBV_SRQ_LIMIT) attr_.srq_limit = a.srq_limit;
  return 0;
}

int Srq::post(uint32_t num_sge) {
  if (num_sge > attr_.max_sge) return EINVAL;
  if (count_ >= attr_.max_wr) return ENOMEM;
  ++count_;
  return 0;
}

bool Srq::take() {
  if (count_ == 0) return false;
  --count_;
  if (armed() && count_ < attr_.srq_limit) {
    attr_.srq_limit = 0;  // fires once, then disarmed until set again
    return true;
  }
  return false;
}

}  // namespace isoroce::verbs
