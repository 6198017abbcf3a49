// verbs::check_send_wr / check_recv_wr: the WR checks everyone shares, and
// verbs::mtu_* conversions.
#include <gtest/gtest.h>

#include "transport/verbs/mtu.h"
#include "transport/verbs/wr_check.h"

namespace isoroce::verbs {
namespace {

SendQueueLimits rc() { return {IBV_QPT_RC, 4, 64, 1024}; }
SendQueueLimits ud() { return {IBV_QPT_UD, 4, 64, 1024}; }

TEST(WrCheck, OpcodesByQpType) {
  for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
                           IBV_WR_RDMA_READ}) {
    EXPECT_EQ(check_send_wr(rc(), {op, 0, 1, 100, 0}), 0) << op;
  }
  EXPECT_EQ(check_send_wr(ud(), {IBV_WR_SEND, 0, 1, 100, 0}), 0);
  EXPECT_EQ(check_send_wr(ud(), {IBV_WR_SEND_WITH_IMM, 0, 1, 100, 0}), 0);
  for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_FETCH_AND_ADD}) {
    EXPECT_EQ(check_send_wr(ud(), {op, 0, 1, 8, 0}), EINVAL) << op;
  }
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_TSO, 0, 1, 8, 0}), EINVAL);
  // Memory windows (10.6.7): RC only; BIND_MW and LOCAL_INV carry no data.
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_SEND_WITH_INV, 0, 1, 8, 0}), 0);
  EXPECT_EQ(check_send_wr(ud(), {IBV_WR_SEND_WITH_INV, 0, 1, 8, 0}), EINVAL);
  for (ibv_wr_opcode op : {IBV_WR_LOCAL_INV, IBV_WR_BIND_MW}) {
    EXPECT_EQ(check_send_wr(rc(), {op, 0, 0, 0, 0}), 0) << op;
    EXPECT_EQ(check_send_wr(rc(), {op, 0, 1, 8, 0}), EINVAL) << op;
    EXPECT_EQ(check_send_wr(rc(), {op, IBV_SEND_INLINE, 0, 0, 0}), EINVAL) << op;
    EXPECT_EQ(check_send_wr(ud(), {op, 0, 0, 0, 0}), EINVAL) << op;
  }
}

TEST(WrCheck, SgesInlineAtomicsAndSizes) {
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_SEND, 0, 4, 100, 0}), 0);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_SEND, 0, 5, 100, 0}), EINVAL);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_SEND, IBV_SEND_INLINE, 1, 64, 0}), 0);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_SEND, IBV_SEND_INLINE, 1, 65, 0}), EINVAL);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_RDMA_READ, IBV_SEND_INLINE, 1, 8, 0}), EINVAL);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_ATOMIC_CMP_AND_SWP, IBV_SEND_INLINE, 1, 8, 0}), EINVAL);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_ATOMIC_CMP_AND_SWP, 0, 1, 8, 0x1000}), 0);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 2, 8, 0x1000}), 0);  // 4 + 4 bytes
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 1, 4, 0x1000}), EINVAL);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 1, 8, 0x1004}), EINVAL);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_RDMA_WRITE, 0, 1, kMaxMsgSize, 0}), 0);
  EXPECT_EQ(check_send_wr(rc(), {IBV_WR_RDMA_WRITE, 0, 2, kMaxMsgSize + 1, 0}), EINVAL);
  EXPECT_EQ(check_send_wr(ud(), {IBV_WR_SEND, 0, 1, 1024, 0}), 0);
  EXPECT_EQ(check_send_wr(ud(), {IBV_WR_SEND, 0, 1, 1025, 0}), EINVAL);
  EXPECT_EQ(check_recv_wr(4, 4), 0);
  EXPECT_EQ(check_recv_wr(4, 5), EINVAL);
}

TEST(Mtu, BothWays) {
  EXPECT_EQ(mtu_bytes(IBV_MTU_256), 256u);
  EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096u);
  EXPECT_EQ(mtu_bytes(static_cast<ibv_mtu>(0)), 0u);
  EXPECT_EQ(mtu_bytes(static_cast<ibv_mtu>(6)), 0u);
  EXPECT_EQ(mtu_from_bytes(2048), IBV_MTU_2048);
  EXPECT_EQ(mtu_from_bytes(1500), std::nullopt);
  EXPECT_EQ(mtu_at_most(1500), IBV_MTU_1024);
  EXPECT_EQ(mtu_at_most(9000), IBV_MTU_4096);
  EXPECT_EQ(mtu_at_most(100), IBV_MTU_256);
}

}  // namespace
}  // namespace isoroce::verbs
