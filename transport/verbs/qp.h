// A queue pair as the control path sees it: type, capacities, state and the
// attributes ibv_modify_qp() sets, validated as libibverbs users expect.
// The RC/UD engines read the attributes from here; they never change the
// state except through set_error() / set_send_queue_error() / sq_drained().
#pragma once

#include <cstdint>
#include <infiniband/verbs.h>

#include "transport/verbs/device.h"
#include "transport/verbs/result.h"
#include "transport/wire/types.h"

namespace isoroce::verbs {

struct QpInitAttr {
  ibv_qp_type qp_type = IBV_QPT_RC;
  ibv_qp_cap cap{};
  bool has_srq = false;  // receive capacities are ignored with an SRQ
  bool sq_sig_all = false;
};

// 0, EOPNOTSUPP for a QP type isoroce does not implement (rxe_qp_chk_init()),
// EINVAL for capacities above the device limits (rxe_qp_chk_cap(); a QP needs
// at least one send WR like rxe).
int check_qp_init_attr(const Device& dev, const QpInitAttr& init);

class Qp {
 public:
  static Result<Qp> create(const Device& dev, wire::Qpn qpn, const QpInitAttr& init);

  // ibv_modify_qp(): 0 or the errno the application sees. On failure nothing
  // changes. IBV_QP_CUR_STATE must name the state the QP is in (isoroce
  // answers EINVAL where Linux would trust the caller).
  int modify(const Device& dev, const ibv_qp_attr& attr, uint32_t mask);

  ibv_qp_type type() const { return type_; }
  ibv_qp_state state() const { return attr_.qp_state; }
  // What ibv_query_qp() returns (qp_state, cap and every attribute set so far).
  const ibv_qp_attr& attr() const { return attr_; }
  const ibv_qp_cap& cap() const { return attr_.cap; }
  bool sq_sig_all() const { return sq_sig_all_; }
  bool has_srq() const { return has_srq_; }

  wire::Qpn qpn() const { return qpn_; }
  wire::Qpn dest_qpn() const { return wire::Qpn(attr_.dest_qp_num); }
  wire::Psn sq_psn() const { return wire::Psn(attr_.sq_psn); }
  wire::Psn rq_psn() const { return wire::Psn(attr_.rq_psn); }

  // SQD: the send queue drains before SQD -> RTS/SQD are allowed (IBTA
  // 10.3.1 "Send Queue Drain"; rxe_qp_chk_attr() refuses them while
  // sq_draining). The engine calls sq_drained() when no request is in flight.
  bool sq_draining() const { return attr_.sq_draining != 0; }
  void sq_drained() { attr_.sq_draining = 0; }

  // Engine-driven transitions (IBTA 10.3.1): a fatal error takes any QP to
  // ERR; a send error takes UC/UD to SQE and RC to ERR.
  void set_error() { attr_.qp_state = IBV_QPS_ERR; }
  void set_send_queue_error() {
    attr_.qp_state = type_ == IBV_QPT_RC ? IBV_QPS_ERR : IBV_QPS_SQE;
  }

 private:
  Qp(wire::Qpn qpn, const QpInitAttr& init);
  void reset_attributes();

  wire::Qpn qpn_;
  ibv_qp_type type_;
  bool has_srq_;
  bool sq_sig_all_;
  ibv_qp_attr attr_{};
};

}  // namespace isoroce::verbs
