// RESET -> INIT -> RTR -> RTS of an RC QP towards its peer, with the attribute
// masks IBTA table 91 asks for, as an application does it. Works on anything
// with modify_qp(wire::Qpn, const ibv_qp_attr&, uint32_t mask) returning 0 or
// an errno: transport::Engine, a workload::FlowVerbs (the simulator's engine,
// isoroce-ctl's control socket). An application helper: it lives beside the
// applications (workload/), not in the engine.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>

#include "transport/wire/packet.h"
#include "transport/wire/types.h"

namespace isoroce::workload {

struct RcPath {
  wire::IpAddr peer_ip{};   // the peer's GID
  uint32_t peer_qpn = 0;
  uint32_t sq_psn = 0;      // ours
  uint32_t rq_psn = 0;      // the peer's first PSN
  ibv_mtu mtu = IBV_MTU_1024;
  uint32_t access = IBV_ACCESS_REMOTE_WRITE;
  uint8_t max_rd_atomic = 1;       // initiator depth and responder resources
  uint8_t min_rnr_timer = 1;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
};

// 0, or the errno of the first modify_qp that fails.
template <typename Verbs>
int connect_rc(Verbs& v, wire::Qpn self, const RcPath& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = p.access;
  if (int rc = v.modify_qp(self, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return rc;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = p.mtu;
  a.dest_qp_num = p.peer_qpn;
  a.rq_psn = p.rq_psn;
  a.max_dest_rd_atomic = p.max_rd_atomic;
  a.min_rnr_timer = p.min_rnr_timer;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  std::memcpy(a.ah_attr.grh.dgid.raw, p.peer_ip.data(), 16);
  if (int rc = v.modify_qp(self, a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return rc;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = p.sq_psn;
  a.timeout = p.timeout;
  a.retry_cnt = p.retry_cnt;
  a.rnr_retry = p.rnr_retry;
  a.max_rd_atomic = p.max_rd_atomic;
  return v.modify_qp(self, a,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
}

}  // namespace isoroce::workload
