// The receive queue holds max_recv_wr receives until they complete, as
// rxe's does: one more is ENOMEM (issue 14.2), a completion makes room, and
// RESET empties it. The two QPs are on one device (same-device loopback).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "tests/verbs_compat/verbs_fixture.h"

namespace isoroce::test {
namespace {

class RecvQueue : public VerbsTest {};

int post_recvs(ibv_qp* qp, ibv_mr* mr, uint8_t* buf, int n, ibv_recv_wr** bad) {
  std::vector<ibv_sge> sges(static_cast<size_t>(n));
  std::vector<ibv_recv_wr> wrs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    sges[i] = {reinterpret_cast<uintptr_t>(buf + 64 * i), 64, mr->lkey};
    wrs[i].wr_id = static_cast<uint64_t>(i);
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  const int rc = ibv_post_recv(qp, wrs.data(), bad);
  if (rc && *bad) *bad = reinterpret_cast<ibv_recv_wr*>(static_cast<uintptr_t>(*bad - wrs.data()));
  return rc;
}

TEST_F(RecvQueue, AFullReceiveQueueIsEnomemUntilAReceiveCompletes) {
  DevOptions o;
  o.recv_wr = 5;  // a ring of 8 would hold 7: the queue still holds 5
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(make(a, "isoroce0"));
  ASSERT_NO_FATAL_FAILURE(make(b, "isoroce0", o));
  ASSERT_NO_FATAL_FAILURE(connect(a, kGid0, b.qp->qp_num));
  ASSERT_NO_FATAL_FAILURE(connect(b, kGid0, a.qp->qp_num));
  static uint8_t buf[4096];
  ibv_mr* mr = ibv_reg_mr(b.pd, buf, sizeof buf, kAllAccess);
  ASSERT_NE(mr, nullptr);
  b.mrs.push_back(mr);
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(post_recvs(b.qp, mr, buf, 7, &bad), ENOMEM);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bad), 5u) << "the sixth is refused";
  // Give the daemon time to take them: they stay in the queue until they complete.
  ibv_wc none[1];
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ibv_poll_cq(b.cq, 1, none), 0);
  usleep(50000);
  EXPECT_EQ(post_recvs(b.qp, mr, buf, 1, &bad), ENOMEM);

  // One SEND from a completes one receive: one slot.
  static uint8_t src[64];
  ibv_mr* smr = ibv_reg_mr(a.pd, src, sizeof src, kAllAccess);
  ASSERT_NE(smr, nullptr);
  a.mrs.push_back(smr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(src), 16, smr->lkey};
  ibv_send_wr w{};
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* sbad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &sbad), 0);
  ASSERT_EQ(wait(a.cq, 1).size(), 1u);
  auto rc = wait(b.cq, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(post_recvs(b.qp, mr, buf, 1, &bad), 0);
  EXPECT_EQ(post_recvs(b.qp, mr, buf, 1, &bad), ENOMEM);

  // RESET drops the receives: the queue is empty again.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(b.qp, &attr, IBV_QP_STATE), 0);
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qp_access_flags = kAllAccess;
  ASSERT_EQ(ibv_modify_qp(b.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  EXPECT_EQ(post_recvs(b.qp, mr, buf, 5, &bad), 0);
  EXPECT_EQ(post_recvs(b.qp, mr, buf, 1, &bad), ENOMEM);
}

}  // namespace
}  // namespace isoroce::test
