#include "transport/verbs/qp_attr_check.h"

#include <cerrno>

#include "transport/verbs/ah.h"

namespace isoroce::verbs {

int check_qp_attr_values(const Device& dev, const ibv_qp_attr& a, uint32_t mask) {
  // IBV_QP_STATE / IBV_QP_CUR_STATE: enum ibv_qp_state RESET..ERR
  // (ib_uverbs_modify_qp() rejects anything above IB_QPS_ERR).
  if ((mask & IBV_QP_STATE) && !(a.qp_state >= IBV_QPS_RESET && a.qp_state <= IBV_QPS_ERR))
    return EINVAL;
  if ((mask & IBV_QP_CUR_STATE) &&
      !(a.cur_qp_state >= IBV_QPS_RESET && a.cur_qp_state <= IBV_QPS_ERR))
    return EINVAL;
  // A port of this device (rdma_is_port_valid()).
  if ((mask & IBV_QP_PORT) && !port_is_valid(dev, a.port_num)) return EINVAL;
  // Index into the port's P_Key table (IBTA 10.9.2).
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index >= dev.pkey_tbl_len) return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) && (a.qp_access_flags & ~kQpAccessKnown)) return EINVAL;
  if ((mask & IBV_QP_AV) && check_ah_attr(dev, a.ah_attr) != 0) return EINVAL;
  if (mask & IBV_QP_ALT_PATH) {
    if (check_ah_attr(dev, a.alt_ah_attr) != 0) return EINVAL;
    if (!port_is_valid(dev, a.alt_port_num)) return EINVAL;
    if (a.alt_pkey_index >= dev.pkey_tbl_len) return EINVAL;
    if (a.alt_timeout > kMaxAckTimeout) return EINVAL;
  }
  // enum ibv_mtu 256..4096, and no larger than the port allows (rxe_qp_chk_attr()).
  if (mask & IBV_QP_PATH_MTU) {
    int mtu = a.path_mtu;
    if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096 || mtu > dev.max_mtu) return EINVAL;
  }
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > kMaxAckTimeout) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > kMaxRetryCnt) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > kMaxRnrRetry) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > kMaxMinRnrTimer) return EINVAL;
  // Initiator depth and responder resources (IBTA 11.2.5.2; ibv_device_attr
  // max_qp_init_rd_atom and max_qp_rd_atom).
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > dev.max_qp_init_rd_atom) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > dev.max_qp_rd_atom)
    return EINVAL;
  // 24-bit BTH fields (IBTA 9.2: DestQP and PSN are 24 bits).
  if ((mask & IBV_QP_DEST_QPN) && a.dest_qp_num > kMax24) return EINVAL;
  if ((mask & IBV_QP_RQ_PSN) && a.rq_psn > kMax24) return EINVAL;
  if ((mask & IBV_QP_SQ_PSN) && a.sq_psn > kMax24) return EINVAL;
  if (mask & IBV_QP_PATH_MIG_STATE) {
    int m = a.path_mig_state;
    if (m < IBV_MIG_MIGRATED || m > IBV_MIG_ARMED) return EINVAL;
  }
  return 0;
}

}  // namespace isoroce::verbs
