#include "transport/verbs/ah.h"

#include <cerrno>

namespace isoroce::verbs {

int check_ah_attr(const Device& dev, const ibv_ah_attr& ah) {
  if (!ah.is_global) return EINVAL;
  if (!port_is_valid(dev, ah.port_num)) return EINVAL;
  if (ah.grh.sgid_index >= dev.gid_tbl_len) return EINVAL;
  if (ah.sl > kMaxSl) return EINVAL;
  if (ah.grh.flow_label > kMaxFlowLabel) return EINVAL;
  return 0;
}

}  // namespace isoroce::verbs
