// The Qp object: ibv_modify_qp() walks through the states, value range checks
// (IBTA field widths, device limits), SQD draining and what RESET forgets.
#include <gtest/gtest.h>

#include <cerrno>

#include "transport/verbs/qp.h"

namespace isoroce::verbs {
namespace {

ibv_qp_attr good_attr() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;
  a.path_mtu = IBV_MTU_1024;
  a.path_mig_state = IBV_MIG_MIGRATED;
  a.qkey = 0x11111111;
  a.rq_psn = 0x123456;
  a.sq_psn = 0xabcdef;
  a.dest_qp_num = 0x000102;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.grh.hop_limit = 64;
  a.alt_ah_attr = a.ah_attr;
  a.alt_port_num = 1;
  a.pkey_index = 0;
  a.max_rd_atomic = 16;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 12;
  a.port_num = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  return a;
}

class QpTest : public ::testing::Test {
 protected:
  Qp make(ibv_qp_type type) {
    QpInitAttr init;
    init.qp_type = type;
    init.cap = {16, 16, 2, 2, 64};
    auto r = Qp::create(dev_, wire::Qpn(0x42), init);
    EXPECT_TRUE(r.ok());
    return r.value();
  }
  int to(Qp& qp, ibv_qp_state s, uint32_t mask, ibv_qp_attr a = good_attr()) {
    a.qp_state = s;
    return qp.modify(dev_, a, IBV_QP_STATE | mask);
  }
  // RESET -> INIT -> RTR -> RTS with the required attributes of the type.
  void connect(Qp& qp) {
    bool ud = qp.type() == IBV_QPT_UD, rc = qp.type() == IBV_QPT_RC;
    uint32_t base = IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    ASSERT_EQ(to(qp, IBV_QPS_INIT, base | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)), 0);
    uint32_t rtr = ud ? 0 : IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (rc) rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    ASSERT_EQ(to(qp, IBV_QPS_RTR, rtr), 0);
    uint32_t rts = IBV_QP_SQ_PSN;
    if (rc) rts |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    ASSERT_EQ(to(qp, IBV_QPS_RTS, rts), 0);
    ASSERT_EQ(qp.state(), IBV_QPS_RTS);
  }
  Device dev_;
};

TEST_F(QpTest, RcWalksToRtsAndKeepsWhatWasSet) {
  Qp qp = make(IBV_QPT_RC);
  EXPECT_EQ(qp.state(), IBV_QPS_RESET);
  connect(qp);
  EXPECT_EQ(qp.sq_psn(), wire::Psn(0xabcdef));
  EXPECT_EQ(qp.rq_psn(), wire::Psn(0x123456));
  EXPECT_EQ(qp.dest_qpn(), wire::Qpn(0x102));
  EXPECT_EQ(qp.attr().path_mtu, IBV_MTU_1024);
  EXPECT_EQ(qp.attr().timeout, 14);
  EXPECT_EQ(qp.attr().max_rd_atomic, 16);
  EXPECT_EQ(qp.attr().qp_access_flags,
            unsigned(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
}

TEST_F(QpTest, UdAndUcWalkToRts) {
  Qp ud = make(IBV_QPT_UD);
  connect(ud);
  EXPECT_EQ(ud.attr().qkey, 0x11111111u);
  Qp uc = make(IBV_QPT_UC);
  connect(uc);
}

TEST_F(QpTest, FailedModifyChangesNothing) {
  Qp qp = make(IBV_QPT_RC);
  ASSERT_EQ(to(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  ibv_qp_attr a = good_attr();
  a.path_mtu = static_cast<ibv_mtu>(6);
  a.rq_psn = 7;
  EXPECT_EQ(to(qp, IBV_QPS_RTR,
               IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, a),
            EINVAL);
  EXPECT_EQ(qp.state(), IBV_QPS_INIT);
  EXPECT_EQ(qp.attr().rq_psn, 0u);
}

TEST_F(QpTest, SkippingAStateIsEinval) {
  Qp qp = make(IBV_QPT_RC);
  EXPECT_EQ(to(qp, IBV_QPS_RTR, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            EINVAL);
  EXPECT_EQ(to(qp, IBV_QPS_SQE, 0), EINVAL);
  EXPECT_EQ(qp.state(), IBV_QPS_RESET);
}

TEST_F(QpTest, AnyStateToErrAndResetAndResetForgets) {
  for (ibv_qp_state target : {IBV_QPS_ERR, IBV_QPS_RESET}) {
    Qp qp = make(IBV_QPT_RC);
    EXPECT_EQ(to(qp, target, 0), 0) << "from RESET";
    EXPECT_EQ(qp.state(), target);
    qp = make(IBV_QPT_RC);
    connect(qp);
    EXPECT_EQ(to(qp, target, 0), 0);
    EXPECT_EQ(qp.state(), target);
  }
  Qp qp = make(IBV_QPT_RC);
  connect(qp);
  ASSERT_EQ(to(qp, IBV_QPS_RESET, 0), 0);
  EXPECT_EQ(qp.attr().sq_psn, 0u);
  EXPECT_EQ(qp.attr().dest_qp_num, 0u);
  EXPECT_EQ(qp.cap().max_send_wr, 16u);
  // From ERR only RESET or ERR.
  ASSERT_EQ(to(qp, IBV_QPS_ERR, 0), 0);
  EXPECT_EQ(to(qp, IBV_QPS_RTS, 0), EINVAL);
  EXPECT_EQ(to(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), EINVAL);
}

TEST_F(QpTest, ModifyWithoutStateStaysAndFollowsTheSameStateRule) {
  Qp qp = make(IBV_QPT_RC);
  connect(qp);
  ibv_qp_attr a = good_attr();
  a.min_rnr_timer = 3;
  EXPECT_EQ(qp.modify(dev_, a, IBV_QP_MIN_RNR_TIMER), 0);  // RTS -> RTS
  EXPECT_EQ(qp.attr().min_rnr_timer, 3);
  EXPECT_EQ(qp.modify(dev_, a, IBV_QP_SQ_PSN), EINVAL);    // not changeable in RTS
  EXPECT_EQ(qp.state(), IBV_QPS_RTS);
}

TEST_F(QpTest, CurStateMustMatch) {
  Qp qp = make(IBV_QPT_RC);
  connect(qp);
  ibv_qp_attr a = good_attr();
  a.cur_qp_state = IBV_QPS_RTS;
  EXPECT_EQ(qp.modify(dev_, a, IBV_QP_CUR_STATE), 0);
  a.cur_qp_state = IBV_QPS_SQD;
  EXPECT_EQ(qp.modify(dev_, a, IBV_QP_CUR_STATE), EINVAL);
  a.cur_qp_state = static_cast<ibv_qp_state>(7);
  EXPECT_EQ(qp.modify(dev_, a, IBV_QP_CUR_STATE), EINVAL);
}

TEST_F(QpTest, SqdDrainsBeforeResumeOrChange) {
  Qp qp = make(IBV_QPT_RC);
  connect(qp);
  ASSERT_EQ(to(qp, IBV_QPS_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
  EXPECT_TRUE(qp.sq_draining());
  ibv_qp_attr a = good_attr();
  a.timeout = 20;
  EXPECT_EQ(to(qp, IBV_QPS_SQD, IBV_QP_TIMEOUT, a), EINVAL);
  EXPECT_EQ(to(qp, IBV_QPS_RTS, 0), EINVAL);
  qp.sq_drained();
  EXPECT_EQ(to(qp, IBV_QPS_SQD, IBV_QP_TIMEOUT, a), 0);
  EXPECT_EQ(qp.attr().timeout, 20);
  EXPECT_EQ(to(qp, IBV_QPS_RTS, 0), 0);
}

TEST_F(QpTest, SendQueueErrorIsSqeForUdAndErrForRc) {
  Qp ud = make(IBV_QPT_UD);
  connect(ud);
  ud.set_send_queue_error();
  EXPECT_EQ(ud.state(), IBV_QPS_SQE);
  EXPECT_EQ(to(ud, IBV_QPS_RTS, 0), 0);
  Qp rc = make(IBV_QPT_RC);
  connect(rc);
  rc.set_send_queue_error();
  EXPECT_EQ(rc.state(), IBV_QPS_ERR);
}

// One attribute at a time: the boundary value passes, one past it fails.
TEST_F(QpTest, ValueRanges) {
  struct Case {
    const char* what;
    uint32_t mask;
    void (*set)(ibv_qp_attr&, bool bad);
  };
  const Case cases[] = {
      {"timeout", IBV_QP_TIMEOUT, [](ibv_qp_attr& a, bool bad) { a.timeout = bad ? 32 : 31; }},
      {"retry_cnt", IBV_QP_RETRY_CNT, [](ibv_qp_attr& a, bool bad) { a.retry_cnt = bad ? 8 : 7; }},
      {"rnr_retry", IBV_QP_RNR_RETRY, [](ibv_qp_attr& a, bool bad) { a.rnr_retry = bad ? 8 : 7; }},
      {"min_rnr_timer", IBV_QP_MIN_RNR_TIMER,
       [](ibv_qp_attr& a, bool bad) { a.min_rnr_timer = bad ? 32 : 31; }},
      {"max_rd_atomic", IBV_QP_MAX_QP_RD_ATOMIC,
       [](ibv_qp_attr& a, bool bad) { a.max_rd_atomic = bad ? 129 : 128; }},
      {"max_dest_rd_atomic", IBV_QP_MAX_DEST_RD_ATOMIC,
       [](ibv_qp_attr& a, bool bad) { a.max_dest_rd_atomic = bad ? 129 : 128; }},
      {"path_mtu high", IBV_QP_PATH_MTU,
       [](ibv_qp_attr& a, bool bad) { a.path_mtu = bad ? static_cast<ibv_mtu>(6) : IBV_MTU_4096; }},
      {"path_mtu low", IBV_QP_PATH_MTU,
       [](ibv_qp_attr& a, bool bad) { a.path_mtu = bad ? static_cast<ibv_mtu>(0) : IBV_MTU_256; }},
      {"dest_qp_num", IBV_QP_DEST_QPN,
       [](ibv_qp_attr& a, bool bad) { a.dest_qp_num = bad ? 0x1000000 : 0xffffff; }},
      {"rq_psn", IBV_QP_RQ_PSN, [](ibv_qp_attr& a, bool bad) { a.rq_psn = bad ? 0x1000000 : 0xffffff; }},
      {"sq_psn", IBV_QP_SQ_PSN, [](ibv_qp_attr& a, bool bad) { a.sq_psn = bad ? 0x1000000 : 0xffffff; }},
      {"pkey_index", IBV_QP_PKEY_INDEX,
       [](ibv_qp_attr& a, bool bad) { a.pkey_index = bad ? 64 : 63; }},
      {"port_num", IBV_QP_PORT, [](ibv_qp_attr& a, bool bad) { a.port_num = bad ? 2 : 1; }},
      {"port_num 0", IBV_QP_PORT, [](ibv_qp_attr& a, bool bad) { a.port_num = bad ? 0 : 1; }},
      {"access", IBV_QP_ACCESS_FLAGS,
       [](ibv_qp_attr& a, bool bad) {
         a.qp_access_flags = IBV_ACCESS_REMOTE_ATOMIC | (bad ? IBV_ACCESS_MW_BIND : 0);
       }},
      {"av needs grh", IBV_QP_AV, [](ibv_qp_attr& a, bool bad) { a.ah_attr.is_global = !bad; }},
      {"av port", IBV_QP_AV, [](ibv_qp_attr& a, bool bad) { a.ah_attr.port_num = bad ? 2 : 1; }},
      {"av sgid_index", IBV_QP_AV,
       [](ibv_qp_attr& a, bool bad) { a.ah_attr.grh.sgid_index = bad ? 255 : 0; }},
      {"av flow_label", IBV_QP_AV,
       [](ibv_qp_attr& a, bool bad) { a.ah_attr.grh.flow_label = bad ? 0x100000 : 0xfffff; }},
      {"av sl", IBV_QP_AV, [](ibv_qp_attr& a, bool bad) { a.ah_attr.sl = bad ? 16 : 15; }},
      {"alt timeout", IBV_QP_ALT_PATH,
       [](ibv_qp_attr& a, bool bad) { a.alt_timeout = bad ? 32 : 31; }},
      {"alt port", IBV_QP_ALT_PATH, [](ibv_qp_attr& a, bool bad) { a.alt_port_num = bad ? 0 : 1; }},
      {"mig state", IBV_QP_PATH_MIG_STATE,
       [](ibv_qp_attr& a, bool bad) {
         a.path_mig_state = static_cast<ibv_mig_state>(bad ? 3 : IBV_MIG_ARMED);
       }},
  };
  Device small = dev_;
  small.gid_tbl_len = 16;
  const uint32_t rc_rtr = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  const uint32_t rc_rts = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    for (bool bad : {false, true}) {
      Qp qp = make(IBV_QPT_RC);
      ibv_qp_attr a = good_attr();
      c.set(a, bad);
      uint32_t mask = IBV_QP_STATE | c.mask;
      if (c.mask & (IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU)) {
        // Set in INIT -> RTR.
        ASSERT_EQ(to(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
        a.qp_state = IBV_QPS_RTR;
        mask |= rc_rtr;
      } else if (c.mask & IBV_QP_SQ_PSN) {
        // Set in RTR -> RTS.
        ASSERT_EQ(to(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
        ASSERT_EQ(to(qp, IBV_QPS_RTR, rc_rtr), 0);
        a.qp_state = IBV_QPS_RTS;
        mask |= rc_rts;
      } else {
        // SQD -> SQD on RC takes every other attribute.
        connect(qp);
        ASSERT_EQ(to(qp, IBV_QPS_SQD, 0), 0);
        qp.sq_drained();
        a.qp_state = IBV_QPS_SQD;
      }
      ibv_qp_state before = qp.state();
      EXPECT_EQ(qp.modify(small, a, mask), bad ? EINVAL : 0) << "bad=" << bad;
      EXPECT_EQ(qp.state(), bad ? before : a.qp_state);
    }
  }
}

TEST_F(QpTest, PathMtuAbovePortMaxIsEinval) {
  Device d = dev_;
  d.max_mtu = IBV_MTU_1024;
  Qp qp = make(IBV_QPT_UC);
  ASSERT_EQ(to(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  ibv_qp_attr a = good_attr();
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_2048;
  const uint32_t rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  EXPECT_EQ(qp.modify(d, a, rtr), EINVAL);
  a.path_mtu = IBV_MTU_1024;
  EXPECT_EQ(qp.modify(d, a, rtr), 0);
}

TEST(QpCreate, CapsAndTypes) {
  Device dev;
  QpInitAttr init;
  init.cap = {16, 16, 32, 32, 320};
  EXPECT_EQ(check_qp_init_attr(dev, init), 0);
  init.cap.max_send_sge = 33;
  EXPECT_EQ(check_qp_init_attr(dev, init), EINVAL);
  init.cap = {dev.max_qp_wr + 1, 1, 1, 1, 0};
  EXPECT_EQ(check_qp_init_attr(dev, init), EINVAL);
  init.cap = {0, 1, 1, 1, 0};
  EXPECT_EQ(check_qp_init_attr(dev, init), EINVAL);
  init.cap = {1, 1, 1, 1, 321};
  EXPECT_EQ(check_qp_init_attr(dev, init), EINVAL);
  init.cap = {1, dev.max_qp_wr + 1, 1, 99, 0};
  EXPECT_EQ(check_qp_init_attr(dev, init), EINVAL);
  init.has_srq = true;  // receive caps do not matter with an SRQ
  EXPECT_EQ(check_qp_init_attr(dev, init), 0);
  init.qp_type = IBV_QPT_RAW_PACKET;
  EXPECT_EQ(check_qp_init_attr(dev, init), EOPNOTSUPP);
  EXPECT_EQ(Qp::create(dev, wire::Qpn(1), init).err(), EOPNOTSUPP);
}

}  // namespace
}  // namespace isoroce::verbs
