#include "transport/verbs/wr_check.h"

#include <cerrno>

namespace isoroce::verbs {

int check_send_wr(const SendQueueLimits& q, const SendWrShape& wr) {
  const bool ud = q.qp_type == IBV_QPT_UD;
  switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
      break;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_SEND_WITH_INV:
      if (ud) return EINVAL;
      break;
    case IBV_WR_BIND_MW:
    case IBV_WR_LOCAL_INV:
      // Local operations (10.6.7, 10.7.2.3): RC only, no data.
      if (ud || wr.num_sge != 0 || (wr.send_flags & IBV_SEND_INLINE)) return EINVAL;
      return 0;
    default:
      return EINVAL;
  }
  if (wr.num_sge > q.max_send_sge) return EINVAL;
  if (wr.length > kMaxMsgSize) return EINVAL;
  const bool atomic = is_atomic(wr.opcode);
  if (wr.send_flags & IBV_SEND_INLINE) {
    if (atomic || wr.opcode == IBV_WR_RDMA_READ) return EINVAL;
    if (wr.length > q.max_inline_data) return EINVAL;
  }
  if (atomic && (wr.length != 8 || (wr.remote_addr & 7))) return EINVAL;
  if (ud && wr.length > q.mtu) return EINVAL;
  return 0;
}

int check_recv_wr(uint32_t max_recv_sge, size_t num_sge) {
  return num_sge > max_recv_sge ? EINVAL : 0;
}

}  // namespace isoroce::verbs
