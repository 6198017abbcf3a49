#include "transport/verbs/qp.h"

#include <cerrno>

#include "transport/verbs/qp_attr_check.h"
#include "transport/verbs/qp_state.h"

namespace isoroce::verbs {

int check_qp_init_attr(const Device& dev, const QpInitAttr& init) {
  if (!qp_type_supported(init.qp_type)) return EOPNOTSUPP;
  const ibv_qp_cap& c = init.cap;
  if (c.max_send_wr < 1 || c.max_send_wr > dev.max_qp_wr) return EINVAL;
  if (c.max_send_sge > dev.max_sge) return EINVAL;
  if (c.max_inline_data > dev.max_inline_data) return EINVAL;
  if (!init.has_srq) {
    if (c.max_recv_wr > dev.max_qp_wr) return EINVAL;
    if (c.max_recv_sge > dev.max_sge) return EINVAL;
  }
  return 0;
}

Result<Qp> Qp::create(const Device& dev, wire::Qpn qpn, const QpInitAttr& init) {
  if (int err = check_qp_init_attr(dev, init)) return Result<Qp>::error(err);
  return Qp(qpn, init);
}

Qp::Qp(wire::Qpn qpn, const QpInitAttr& init)
    : qpn_(qpn), type_(init.qp_type), has_srq_(init.has_srq), sq_sig_all_(init.sq_sig_all) {
  attr_.cap = init.cap;
  if (has_srq_) {
    attr_.cap.max_recv_wr = 0;
    attr_.cap.max_recv_sge = 0;
  }
  reset_attributes();
}

// RESET forgets everything the consumer set since creation (IBTA 10.3.1:
// a QP in Reset has no attributes but those given at creation).
void Qp::reset_attributes() {
  ibv_qp_cap cap = attr_.cap;
  attr_ = ibv_qp_attr{};
  attr_.cap = cap;
  attr_.qp_state = IBV_QPS_RESET;
  attr_.cur_qp_state = IBV_QPS_RESET;
  attr_.path_mtu = IBV_MTU_1024;
  attr_.port_num = 1;
}

int Qp::modify(const Device& dev, const ibv_qp_attr& a, uint32_t mask) {
  if (mask & ~kQpAttrMaskKnown) return EOPNOTSUPP;
  if (int err = check_qp_attr_values(dev, a, mask)) return err;
  ibv_qp_state cur = attr_.qp_state;
  if ((mask & IBV_QP_CUR_STATE) && a.cur_qp_state != cur) return EINVAL;
  ibv_qp_state next = (mask & IBV_QP_STATE) ? a.qp_state : cur;
  if (int err = check_modify_qp_mask(type_, cur, next, mask)) return err;
  if (cur == IBV_QPS_SQD && sq_draining() && (next == IBV_QPS_SQD || next == IBV_QPS_RTS))
    return EINVAL;

  if (next == IBV_QPS_RESET) {
    reset_attributes();
    return 0;
  }
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) attr_.en_sqd_async_notify = a.en_sqd_async_notify;
  if (mask & IBV_QP_ACCESS_FLAGS) attr_.qp_access_flags = a.qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) attr_.pkey_index = a.pkey_index;
  if (mask & IBV_QP_PORT) attr_.port_num = a.port_num;
  if (mask & IBV_QP_QKEY) attr_.qkey = a.qkey;
  if (mask & IBV_QP_AV) attr_.ah_attr = a.ah_attr;
  if (mask & IBV_QP_PATH_MTU) attr_.path_mtu = a.path_mtu;
  if (mask & IBV_QP_TIMEOUT) attr_.timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) attr_.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) attr_.rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_RQ_PSN) attr_.rq_psn = a.rq_psn;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) attr_.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_ALT_PATH) {
    attr_.alt_ah_attr = a.alt_ah_attr;
    attr_.alt_port_num = a.alt_port_num;
    attr_.alt_pkey_index = a.alt_pkey_index;
    attr_.alt_timeout = a.alt_timeout;
  }
  if (mask & IBV_QP_MIN_RNR_TIMER) attr_.min_rnr_timer = a.min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) attr_.sq_psn = a.sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_PATH_MIG_STATE) attr_.path_mig_state = a.path_mig_state;
  if (mask & IBV_QP_DEST_QPN) attr_.dest_qp_num = a.dest_qp_num;

  if (cur == IBV_QPS_RTS && next == IBV_QPS_SQD) attr_.sq_draining = 1;
  if (next != IBV_QPS_SQD) attr_.sq_draining = 0;
  attr_.qp_state = next;
  attr_.cur_qp_state = next;
  return 0;
}

}  // namespace isoroce::verbs
