// Memory windows through the library and the daemon: ibv_alloc_mw, a type 2
// window bound by IBV_WR_BIND_MW and used by the peer, SEND_WITH_INV and
// LOCAL_INV ending it, a type 1 window bound by ibv_bind_mw, and a bind the
// engine refuses (isoroced --loopback, isoroce0 <-> isoroce1).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

#include "tests/verbs_compat/verbs_fixture.h"

namespace isoroce::test {
namespace {

constexpr int kMwAccess = kAllAccess | IBV_ACCESS_MW_BIND;

class MemoryWindows : public VerbsTest {
 protected:
  static ibv_wc_status post_wait(VerbsDev& d, ibv_send_wr& w) {
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(d.qp, &w, &bad) != 0) return IBV_WC_GENERAL_ERR;
    auto wc = wait(d.cq, 1);
    return wc.size() == 1 ? wc[0].status : IBV_WC_RESP_TIMEOUT_ERR;
  }
};

TEST_F(MemoryWindows, Type2BoundByAWorkRequestAndInvalidatedByThePeer) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  ibv_device_attr attr;
  ASSERT_EQ(ibv_query_device(b.ctx, &attr), 0);
  EXPECT_TRUE(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  EXPECT_GT(attr.max_mw, 0);
  static uint8_t src[8192], dst[8192];
  ibv_mr* smr = ibv_reg_mr(a.pd, src, sizeof src, kAllAccess);
  ibv_mr* dmr = ibv_reg_mr(b.pd, dst, sizeof dst, kMwAccess);
  ASSERT_TRUE(smr && dmr);
  a.mrs.push_back(smr);
  b.mrs.push_back(dmr);
  ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr) << errno;
  // Bind [dst+1024, dst+5120) for remote write.
  ibv_send_wr w{};
  w.wr_id = 9;
  w.opcode = IBV_WR_BIND_MW;
  w.send_flags = IBV_SEND_SIGNALED;
  w.bind_mw.mw = mw;
  w.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  w.bind_mw.bind_info.mr = dmr;
  w.bind_mw.bind_info.addr = reinterpret_cast<uintptr_t>(dst) + 1024;
  w.bind_mw.bind_info.length = 4096;
  w.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_EQ(post_wait(b, w), IBV_WC_SUCCESS);
  const uint32_t key = w.bind_mw.rkey;
  for (size_t i = 0; i < sizeof src; ++i) src[i] = static_cast<uint8_t>(i * 13);
  const uint64_t win = reinterpret_cast<uintptr_t>(dst) + 1024;
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src, 4096, smr->lkey, win, key), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(src, dst + 1024, 4096), 0);
  // The peer's SEND_WITH_INV ends the window; the receive says which key.
  ibv_sge rs{reinterpret_cast<uintptr_t>(dst), 64, dmr->lkey};
  ibv_recv_wr rw{};
  rw.wr_id = 5;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(b.qp, &rw, &rbad), 0);
  ibv_sge ss{reinterpret_cast<uintptr_t>(src), 16, smr->lkey};
  ibv_send_wr sw{};
  sw.opcode = IBV_WR_SEND_WITH_INV;
  sw.send_flags = IBV_SEND_SIGNALED;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.invalidate_rkey = key;
  EXPECT_EQ(post_wait(a, sw), IBV_WC_SUCCESS);
  auto rc = wait(b.cq, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(rc[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(rc[0].invalidated_rkey, key);
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src, 64, smr->lkey, win, key), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(MemoryWindows, Type1BoundByIbvBindMwAndLocalInvalidateOfType2) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  static uint8_t buf[8192], loc[64];
  ibv_mr* mr = ibv_reg_mr(b.pd, buf, sizeof buf, kMwAccess);
  ibv_mr* lmr = ibv_reg_mr(a.pd, loc, sizeof loc, kAllAccess);
  ASSERT_TRUE(mr && lmr);
  b.mrs.push_back(mr);
  a.mrs.push_back(lmr);
  std::memset(buf, 0x5a, sizeof buf);
  ibv_mw* mw1 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw1, nullptr);
  const uint32_t before = mw1->rkey;
  ibv_mw_bind bind{};
  bind.wr_id = 3;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info.mr = mr;
  bind.bind_info.addr = reinterpret_cast<uintptr_t>(buf);
  bind.bind_info.length = 4096;
  bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(ibv_bind_mw(b.qp, mw1, &bind), 0);
  auto wc = wait(b.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  EXPECT_NE(mw1->rkey, before);
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_READ, loc, 64, lmr->lkey, reinterpret_cast<uintptr_t>(buf), mw1->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(loc[0], 0x5a);
  // A type 2 window, then LOCAL_INV by its owner.
  ibv_mw* mw2 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw2, nullptr);
  ibv_send_wr w{};
  w.opcode = IBV_WR_BIND_MW;
  w.send_flags = IBV_SEND_SIGNALED;
  w.bind_mw.mw = mw2;
  w.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
  w.bind_mw.bind_info = bind.bind_info;
  ASSERT_EQ(post_wait(b, w), IBV_WC_SUCCESS);
  ibv_send_wr inv{};
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = w.bind_mw.rkey;
  ASSERT_EQ(post_wait(b, inv), IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_dereg_mr(mr), EINVAL) << "a type 1 window is still bound to it";
  EXPECT_EQ(ibv_dealloc_mw(mw1), 0);
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
}

TEST_F(MemoryWindows, ABindTheEngineRefusesFailsTheWorkRequest) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  static uint8_t buf[4096];
  ibv_mr* mr = ibv_reg_mr(b.pd, buf, sizeof buf, kAllAccess);  // no MW_BIND
  ASSERT_NE(mr, nullptr);
  b.mrs.push_back(mr);
  ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ibv_send_wr w{};
  w.opcode = IBV_WR_BIND_MW;
  w.send_flags = IBV_SEND_SIGNALED;
  w.bind_mw.mw = mw;
  w.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  w.bind_mw.bind_info.mr = mr;
  w.bind_mw.bind_info.addr = reinterpret_cast<uintptr_t>(buf);
  w.bind_mw.bind_info.length = 64;
  w.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
  EXPECT_EQ(post_wait(b, w), IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

}  // namespace
}  // namespace isoroce::test
