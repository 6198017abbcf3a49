#include "transport/verbs/wr_check.h"

#include <cerrno>

namespace isoroce::verbs {

int check_recv_wr(uint32_t max_recv_sge, size_t num_sge) {
  return num_sge > max_recv_sge ? EINVAL : 0;
}

}  // namespace isoroce::verbs
