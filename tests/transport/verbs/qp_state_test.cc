// QP state machine and ibv_modify_qp() attribute rules (IBTA vol.1 11.2.5.2
// table 91). The expected table below is written out from the spec, separately
// from transport/verbs/qp_state.cc, so a wrong entry there fails here.
#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "transport/verbs/qp.h"
#include "transport/verbs/qp_state.h"

namespace isoroce::verbs {
namespace {

constexpr uint32_t kAllBits[] = {
    IBV_QP_CUR_STATE,      IBV_QP_EN_SQD_ASYNC_NOTIFY, IBV_QP_ACCESS_FLAGS, IBV_QP_PKEY_INDEX,
    IBV_QP_PORT,           IBV_QP_QKEY,                IBV_QP_AV,           IBV_QP_PATH_MTU,
    IBV_QP_TIMEOUT,        IBV_QP_RETRY_CNT,           IBV_QP_RNR_RETRY,    IBV_QP_RQ_PSN,
    IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_ALT_PATH,          IBV_QP_MIN_RNR_TIMER, IBV_QP_SQ_PSN,
    IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_PATH_MIG_STATE,  IBV_QP_CAP,          IBV_QP_DEST_QPN,
    IBV_QP_RATE_LIMIT,
};

struct Expect {
  ibv_qp_type type;
  ibv_qp_state from, to;
  uint32_t required, optional;
};

std::vector<Expect> expected_table() {
  std::vector<Expect> t;
  const ibv_qp_state all[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                              IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR};
  for (ibv_qp_type ty : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
    for (ibv_qp_state s : all) {
      // Every state may go to RESET or ERR (IBTA 10.3.1), SQE included for RC
      // (the kernel table's rows do not depend on the type; RC never gets there).
      t.push_back({ty, s, IBV_QPS_RESET, 0, 0});
      t.push_back({ty, s, IBV_QPS_ERR, 0, 0});
    }
  }
  const uint32_t conn_init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  const uint32_t ud_init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
  t.push_back({IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, conn_init, 0});
  t.push_back({IBV_QPT_UC, IBV_QPS_RESET, IBV_QPS_INIT, conn_init, 0});
  t.push_back({IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, ud_init, 0});
  t.push_back({IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_INIT, 0, conn_init});
  t.push_back({IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_INIT, 0, conn_init});
  t.push_back({IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_INIT, 0, ud_init});
  const uint32_t uc_rtr = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  const uint32_t conn_rtr_opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
  t.push_back({IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR,
               uc_rtr | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, conn_rtr_opt});
  t.push_back({IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, uc_rtr, conn_rtr_opt});
  t.push_back({IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY});
  const uint32_t uc_rts_opt =
      IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
  const uint32_t ud_rts_opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
  t.push_back({IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS,
               IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                   IBV_QP_MAX_QP_RD_ATOMIC,
               uc_rts_opt | IBV_QP_MIN_RNR_TIMER});
  t.push_back({IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, uc_rts_opt});
  t.push_back({IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, ud_rts_opt});
  for (ibv_qp_state from : {IBV_QPS_RTS, IBV_QPS_SQD}) {
    t.push_back({IBV_QPT_RC, from, IBV_QPS_RTS, 0, uc_rts_opt | IBV_QP_MIN_RNR_TIMER});
    t.push_back({IBV_QPT_UC, from, IBV_QPS_RTS, 0, uc_rts_opt});
    t.push_back({IBV_QPT_UD, from, IBV_QPS_RTS, 0, ud_rts_opt});
  }
  for (ibv_qp_type ty : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD})
    t.push_back({ty, IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY});
  t.push_back({IBV_QPT_RC, IBV_QPS_SQD, IBV_QPS_SQD, 0,
               IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                   IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
                   IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER |
                   IBV_QP_PATH_MIG_STATE});
  t.push_back({IBV_QPT_UC, IBV_QPS_SQD, IBV_QPS_SQD, 0,
               IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                   IBV_QP_PATH_MIG_STATE});
  t.push_back({IBV_QPT_UD, IBV_QPS_SQD, IBV_QPS_SQD, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY});
  t.push_back({IBV_QPT_UC, IBV_QPS_SQE, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS});
  t.push_back({IBV_QPT_UD, IBV_QPS_SQE, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY});
  return t;
}

const Expect* find(const std::vector<Expect>& t, ibv_qp_type ty, ibv_qp_state a, ibv_qp_state b) {
  for (const Expect& e : t)
    if (e.type == ty && e.from == a && e.to == b) return &e;
  return nullptr;
}

std::string name(const Expect& e) {
  const char* ty = e.type == IBV_QPT_RC ? "RC" : e.type == IBV_QPT_UC ? "UC" : "UD";
  return std::string(ty) + " " + qp_state_name(e.from) + "->" + qp_state_name(e.to);
}

TEST(QpStateTable, EveryLegalTransitionWithItsRequiredMaskSucceeds) {
  auto table = expected_table();
  // 7 states x {RESET, ERR} + 8 more for RC, + 9 (SQE->RTS) for UC and UD.
  ASSERT_EQ(table.size(), 3u * 14 + 8 + 9 + 9);
  for (const Expect& e : table) {
    SCOPED_TRACE(name(e));
    EXPECT_EQ(check_modify_qp_mask(e.type, e.from, e.to, IBV_QP_STATE | e.required), 0);
    EXPECT_EQ(check_modify_qp_mask(e.type, e.from, e.to,
                                   IBV_QP_STATE | e.required | e.optional), 0);
    auto rule = transition_rule(e.type, e.from, e.to);
    EXPECT_TRUE(rule.valid);
    EXPECT_EQ(rule.required, e.required);
    EXPECT_EQ(rule.optional, e.optional);
  }
}

TEST(QpStateTable, EachMissingRequiredAttributeIsEinval) {
  for (const Expect& e : expected_table()) {
    for (uint32_t bit : kAllBits) {
      if (!(e.required & bit)) continue;
      SCOPED_TRACE(name(e) + " without bit " + std::to_string(bit));
      EXPECT_EQ(check_modify_qp_mask(e.type, e.from, e.to, IBV_QP_STATE | (e.required & ~bit)),
                EINVAL);
    }
  }
}

TEST(QpStateTable, EachOptionalAttributeAloneIsAccepted) {
  for (const Expect& e : expected_table()) {
    for (uint32_t bit : kAllBits) {
      if (!(e.optional & bit)) continue;
      SCOPED_TRACE(name(e) + " with optional bit " + std::to_string(bit));
      EXPECT_EQ(check_modify_qp_mask(e.type, e.from, e.to, IBV_QP_STATE | e.required | bit), 0);
    }
  }
}

TEST(QpStateTable, EachForbiddenAttributeIsEinval) {
  int checked = 0;
  for (const Expect& e : expected_table()) {
    for (uint32_t bit : kAllBits) {
      if ((e.required | e.optional) & bit) continue;
      SCOPED_TRACE(name(e) + " with forbidden bit " + std::to_string(bit));
      EXPECT_EQ(check_modify_qp_mask(e.type, e.from, e.to, IBV_QP_STATE | e.required | bit),
                EINVAL);
      ++checked;
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(QpStateTable, IllegalTransitionsAreEinvalWhateverTheMask) {
  auto table = expected_table();
  const ibv_qp_state all[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                              IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR};
  int illegal = 0;
  for (ibv_qp_type ty : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
    for (ibv_qp_state a : all) {
      for (ibv_qp_state b : all) {
        if (find(table, ty, a, b)) continue;
        SCOPED_TRACE(std::to_string(ty) + " " + qp_state_name(a) + "->" + qp_state_name(b));
        EXPECT_FALSE(transition_rule(ty, a, b).valid);
        // Try the required masks of every legal transition into b.
        for (const Expect& e : table) {
          if (e.to == b) {
            EXPECT_EQ(check_modify_qp_mask(ty, a, b, IBV_QP_STATE | e.required), EINVAL);
          }
        }
        EXPECT_EQ(check_modify_qp_mask(ty, a, b, IBV_QP_STATE), EINVAL);
        ++illegal;
      }
    }
  }
  // Examples that must be among them: skipping states and going backwards.
  EXPECT_FALSE(find(table, IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RTR));
  EXPECT_FALSE(find(table, IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTS));
  EXPECT_FALSE(find(table, IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTR));
  EXPECT_FALSE(find(table, IBV_QPT_UD, IBV_QPS_ERR, IBV_QPS_INIT));
  EXPECT_EQ(illegal, 3 * 49 - 68);
}

TEST(QpStateTable, CurStateOnlyFromRtrRtsSqdSqe) {
  // INIT -> INIT accepts no CUR_STATE even though it is a legal transition.
  EXPECT_EQ(check_modify_qp_mask(IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_INIT, IBV_QP_CUR_STATE), EINVAL);
  EXPECT_EQ(check_modify_qp_mask(IBV_QPT_UD, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_CUR_STATE), 0);
  // -> ERR takes nothing but the state, CUR_STATE included.
  EXPECT_EQ(check_modify_qp_mask(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_ERR,
                                 IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL);
}

TEST(QpStateTable, UnknownMaskBitsAreEopnotsupp) {
  EXPECT_EQ(check_modify_qp_mask(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RESET, 1u << 21),
            EOPNOTSUPP);
  EXPECT_EQ(check_modify_qp_mask(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RESET, 1u << 31),
            EOPNOTSUPP);
  // RATE_LIMIT is known to rdma-core but only raw packet QPs take it.
  EXPECT_EQ(check_modify_qp_mask(IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS,
                                 IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RATE_LIMIT),
            EINVAL);
}

TEST(QpStateTable, UnsupportedTypeHasNoTransitions) {
  EXPECT_FALSE(transition_rule(IBV_QPT_RAW_PACKET, IBV_QPS_RESET, IBV_QPS_INIT).valid);
  EXPECT_EQ(check_modify_qp_mask(IBV_QPT_XRC_SEND, IBV_QPS_RESET, IBV_QPS_RESET, IBV_QP_STATE),
            EINVAL);
}

}  // namespace
}  // namespace isoroce::verbs
