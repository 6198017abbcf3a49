#include "transport/verbs/qp_state.h"

#include <cerrno>

namespace isoroce::verbs {
namespace {

// Shorter spellings of the mask bits for the table below.
constexpr uint32_t kCur = IBV_QP_CUR_STATE;
constexpr uint32_t kSqdNotify = IBV_QP_EN_SQD_ASYNC_NOTIFY;
constexpr uint32_t kAccess = IBV_QP_ACCESS_FLAGS;
constexpr uint32_t kPkey = IBV_QP_PKEY_INDEX;
constexpr uint32_t kPort = IBV_QP_PORT;
constexpr uint32_t kQkey = IBV_QP_QKEY;
constexpr uint32_t kAv = IBV_QP_AV;
constexpr uint32_t kMtu = IBV_QP_PATH_MTU;
constexpr uint32_t kTimeout = IBV_QP_TIMEOUT;
constexpr uint32_t kRetry = IBV_QP_RETRY_CNT;
constexpr uint32_t kRnrRetry = IBV_QP_RNR_RETRY;
constexpr uint32_t kRqPsn = IBV_QP_RQ_PSN;
constexpr uint32_t kRdAtomic = IBV_QP_MAX_QP_RD_ATOMIC;
constexpr uint32_t kAltPath = IBV_QP_ALT_PATH;
constexpr uint32_t kMinRnr = IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t kSqPsn = IBV_QP_SQ_PSN;
constexpr uint32_t kDestRdAtomic = IBV_QP_MAX_DEST_RD_ATOMIC;
constexpr uint32_t kMig = IBV_QP_PATH_MIG_STATE;
constexpr uint32_t kDestQpn = IBV_QP_DEST_QPN;

struct PerType {
  uint32_t required;
  uint32_t optional;
};

// One row per legal transition other than "-> RESET" and "-> ERR" (handled in
// transition_rule()). Columns: RC, UC, UD. Source: IBTA vol.1 table 91
// (11.2.5.2 "Modify Queue Pair", required and optional attributes per
// transition and service type).
struct Row {
  ibv_qp_state from;
  ibv_qp_state to;
  PerType rc;
  PerType uc;
  PerType ud;
};

constexpr Row kRows[] = {
    // RESET -> INIT: where the QP lives and what remote peers may do.
    {IBV_QPS_RESET, IBV_QPS_INIT,
     {kPkey | kPort | kAccess, 0},
     {kPkey | kPort | kAccess, 0},
     {kPkey | kPort | kQkey, 0}},
    // INIT -> INIT: the same attributes, all optional.
    {IBV_QPS_INIT, IBV_QPS_INIT,
     {0, kPkey | kPort | kAccess},
     {0, kPkey | kPort | kAccess},
     {0, kPkey | kPort | kQkey}},
    // INIT -> RTR: the path and the receive side.
    {IBV_QPS_INIT, IBV_QPS_RTR,
     {kAv | kMtu | kDestQpn | kRqPsn | kDestRdAtomic | kMinRnr, kAltPath | kAccess | kPkey},
     {kAv | kMtu | kDestQpn | kRqPsn, kAltPath | kAccess | kPkey},
     {0, kPkey | kQkey}},
    // RTR -> RTS: the send side.
    {IBV_QPS_RTR, IBV_QPS_RTS,
     {kTimeout | kRetry | kRnrRetry | kSqPsn | kRdAtomic, kCur | kAltPath | kAccess | kMinRnr | kMig},
     {kSqPsn, kCur | kAltPath | kAccess | kMig},
     {kSqPsn, kCur | kQkey}},
    // RTS -> RTS.
    {IBV_QPS_RTS, IBV_QPS_RTS,
     {0, kCur | kAccess | kAltPath | kMig | kMinRnr},
     {0, kCur | kAccess | kAltPath | kMig},
     {0, kCur | kQkey}},
    // RTS -> SQD: drain the send queue.
    {IBV_QPS_RTS, IBV_QPS_SQD,
     {0, kSqdNotify},
     {0, kSqdNotify},
     {0, kSqdNotify}},
    // SQD -> RTS: resume.
    {IBV_QPS_SQD, IBV_QPS_RTS,
     {0, kCur | kAltPath | kAccess | kMinRnr | kMig},
     {0, kCur | kAltPath | kAccess | kMig},
     {0, kCur | kQkey}},
    // SQD -> SQD: the only place the path and send parameters may change
    // once the QP has been connected (IBTA 11.2.5.2, "SQD to SQD").
    {IBV_QPS_SQD, IBV_QPS_SQD,
     {0, kPort | kAv | kTimeout | kRetry | kRnrRetry | kRdAtomic | kDestRdAtomic | kAltPath |
             kAccess | kPkey | kMinRnr | kMig},
     {0, kAv | kAltPath | kAccess | kPkey | kMig},
     {0, kPkey | kQkey}},
    // SQE -> RTS: recover from a send queue error. RC has no SQE state
    // (an RC send error takes the QP to ERR, IBTA 10.3.1), so no RC entry.
    {IBV_QPS_SQE, IBV_QPS_RTS,
     {0, 0},
     {0, kCur | kAccess},
     {0, kCur | kQkey}},
};

}  // namespace

TransitionRule transition_rule(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next) {
  if (!qp_type_supported(type) || !qp_state_valid(cur) || !qp_state_valid(next)) return {};
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return {true, 0, 0};
  for (const Row& row : kRows) {
    if (row.from != cur || row.to != next) continue;
    if (type == IBV_QPT_RC && row.from == IBV_QPS_SQE) return {};
    const PerType& p = type == IBV_QPT_RC ? row.rc : type == IBV_QPT_UC ? row.uc : row.ud;
    return {true, p.required, p.optional};
  }
  return {};
}

int check_modify_qp_mask(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint32_t mask) {
  if (mask & ~kQpAttrMaskKnown) return EOPNOTSUPP;
  // IBV_QP_CUR_STATE only makes sense where IBTA lets the consumer state it
  // (ib_modify_qp_is_ok(): RTR, RTS, SQD, SQE).
  if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS &&
      cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
    return EINVAL;
  TransitionRule rule = transition_rule(type, cur, next);
  if (!rule.valid) return EINVAL;
  if ((mask & rule.required) != rule.required) return EINVAL;
  if (mask & ~(rule.required | rule.optional | IBV_QP_STATE)) return EINVAL;
  return 0;
}

const char* qp_state_name(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "UNKNOWN";
  }
}

}  // namespace isoroce::verbs
