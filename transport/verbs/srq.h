// Shared receive queues: sizes (ibv_create_srq), ibv_modify_srq() with
// IBV_SRQ_MAX_WR / IBV_SRQ_LIMIT, and the limit event: when the number of
// posted receives falls below an armed srq_limit, IBV_EVENT_SRQ_LIMIT_REACHED
// fires once and the limit disarms (ibv_modify_srq(3), rxe_srq.c).
#pragma once

#include <cstdint>
#include <infiniband/verbs.h>

#include "transport/verbs/device.h"
#include "transport/verbs/result.h"

namespace isoroce::verbs {

// 0 or EINVAL: max_wr 1..max_srq_wr, max_sge 1..max_srq_sge, srq_limit no
// larger than max_wr (rxe_srq_chk_init()).
int check_srq_init(const Device& dev, const ibv_srq_attr& attr);

class Srq {
 public:
  static Result<Srq> create(const Device& dev, const ibv_srq_attr& attr);

  // ibv_modify_srq(): EINVAL for unknown mask bits, a max_wr outside the
  // device limit or below what is posted or below the armed limit, or a
  // limit above max_wr (rxe_srq_chk_attr()).
  int modify(const Device& dev, const ibv_srq_attr& attr, uint32_t mask);

  // ibv_post_srq_recv(): ENOMEM when full, EINVAL with too many SGEs.
  int post(uint32_t num_sge);
  // The responder consumed one receive; true when that fires the limit event.
  bool take();

  const ibv_srq_attr& attr() const { return attr_; }  // ibv_query_srq()
  uint32_t count() const { return count_; }
  bool armed() const { return attr_.srq_limit != 0; }

 private:
  explicit Srq(const ibv_srq_attr& attr) : attr_(attr) {}
  ibv_srq_attr attr_;
  uint32_t count_ = 0;
};

}  // namespace isoroce::verbs
