// The QP state machine of IBTA vol.1 11.2.5 / 10.3.1 (figure 124) and the
// attribute-mask rules of ibv_modify_qp() for each transition and QP type
// (IBTA 11.2.5.2 table 91; Linux ib_modify_qp_is_ok() in
// drivers/infiniband/core/verbs.c applies the same table).
//
// States, types and mask bits are rdma-core's own enum values
// (<infiniband/verbs.h>), so the verbs library maps them 1:1.
#pragma once

#include <cstdint>
#include <infiniband/verbs.h>

namespace isoroce::verbs {

// The RC, UC and UD QP types isoroce implements.
constexpr bool qp_type_supported(ibv_qp_type t) {
  return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD;
}

constexpr bool qp_state_valid(int s) { return s >= IBV_QPS_RESET && s <= IBV_QPS_ERR; }

// Every mask bit rdma-core defines (ib_uverbs_modify_qp() answers EOPNOTSUPP
// for bits outside IB_QP_ATTR_STANDARD_BITS | IB_QP_RATE_LIMIT).
inline constexpr uint32_t kQpAttrMaskKnown = ((IBV_QP_DEST_QPN << 1) - 1) | IBV_QP_RATE_LIMIT;

struct TransitionRule {
  bool valid = false;
  uint32_t required = 0;  // every one of these bits must be in the mask
  uint32_t optional = 0;  // these may be; anything else (but IBV_QP_STATE) may not
};

// The rule for cur -> next on a QP of the given type. Any state may go to
// RESET or ERR with no other attribute (IBTA 10.3.1: "Modify QP to Reset/Error
// from any state"). Note: Linux's table has no RESET -> ERR entry, so rxe
// answers EINVAL there; isoroce follows IBTA and allows it.
TransitionRule transition_rule(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next);

// 0, or EINVAL when the transition is not in the table, a required attribute
// is missing, an attribute is neither required nor optional, or
// IBV_QP_CUR_STATE is given outside RTR/RTS/SQD/SQE. Mask bits rdma-core does
// not define give EOPNOTSUPP.
int check_modify_qp_mask(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint32_t mask);

const char* qp_state_name(ibv_qp_state s);

}  // namespace isoroce::verbs
