// The rings are the kernel's rxe uapi layouts as C lays them out
// (ctrl/rxe_layout.h): the C++ structs the library and the daemon use agree
// with offsets a C compiler computed, and queue elements written by C code
// with <rdma/rdma_user_rxe.h> itself (tests/daemon/rxe_wqe_c.c) carry their
// SGEs and inline data to the daemon intact.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ctrl/rxe_layout.h"
#include "ctrl/shm_abi.h"
#include "tests/daemon/rxe_wqe_c.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/shm_client.h"

namespace isoroce::test {
namespace {

TEST(ShmLayout, CxxStructsHaveTheOffsetsCComputes) {
  const unsigned cxx[] = {
      sizeof(shm::DmaInfo),
      offsetof(shm::DmaInfo, length),
      offsetof(shm::DmaInfo, resid),
      offsetof(shm::DmaInfo, cur_sge),
      offsetof(shm::DmaInfo, num_sge),
      offsetof(shm::DmaInfo, sge_offset),
      sizeof(shm::DmaInfo),  // dma.sge
      sizeof(shm::DmaInfo),  // dma.inline_data
      sizeof(rxe_send_wr),
      offsetof(shm::SendWqe, status),
      offsetof(shm::SendWqe, iova),
      offsetof(shm::SendWqe, mask),
      offsetof(shm::SendWqe, ssn),
      offsetof(shm::SendWqe, has_rd_atomic),
      offsetof(shm::SendWqe, dma),
      sizeof(shm::SendWqe),
      offsetof(shm::RecvWqe, dma),
      sizeof(shm::RecvWqe),
      sizeof(rxe_sge),
  };
  ASSERT_EQ(isoroce_rxe_layout_c_count, std::size(cxx));
  for (size_t i = 0; i < std::size(cxx); ++i) EXPECT_EQ(cxx[i], isoroce_rxe_layout_c[i]) << "entry " << i;
  EXPECT_EQ(sizeof(shm::SendWqe), 208u) << "rxe_send_wqe in C, as the kernel and rdma-core have it";
  EXPECT_EQ(sizeof(shm::RecvWqe), 40u);
  EXPECT_EQ(isoroce_c_send_wqe_bytes(), sizeof(shm::SendWqe));
  EXPECT_EQ(isoroce_c_recv_wqe_bytes(), sizeof(shm::RecvWqe));
  // What the library sizes its elements by: the C header plus the SGEs.
  EXPECT_EQ(shm::send_wqe_bytes(2, 0), 208u + 2 * 16);
  EXPECT_EQ(shm::recv_wqe_bytes(3), 40u + 3 * 16);
}

class ShmCLayout : public DaemonSuite {
 protected:
  static void SetUpTestSuite() { start({"--loopback"}); }
  static void publish(Ring& r) {
    const uint32_t prod = shm::producer(r.base).load(std::memory_order_relaxed);
    shm::producer(r.base).store((prod + 1) & r.mask(), std::memory_order_release);
  }
  static uint8_t* next(Ring& r) { return r.at(shm::producer(r.base).load(std::memory_order_relaxed)); }
};

// Regression (issue 16, item 7): the daemon read SGEs and inline data 8 bytes
// after where C code puts them (the C++ sizeof(rxe_send_wqe), 216).
TEST_F(ShmCLayout, WqesWrittenByCCodeReachTheWire) {
  ShmEnd a = make_end(daemon_->socket(), "isoroce0");
  ShmEnd b = make_end(daemon_->socket(), "isoroce1");
  ASSERT_TRUE(a.qpn && b.qpn && a.buf && b.buf);
  ASSERT_TRUE(a.v->connect_rc(a.qpn, "10.0.0.2", b.qpn, 10, 20)["ok"].get<bool>());
  ASSERT_TRUE(b.v->connect_rc(b.qpn, "10.0.0.1", a.qpn, 20, 10)["ok"].get<bool>());
  std::mt19937 rng(7);
  for (uint32_t i = 0; i < 16384; ++i) a.buf->data[i] = static_cast<uint8_t>(rng());

  isoroce_c_recv_wqe(next(b.rq), 70, b.buf->iova() + 200000, 4096, b.buf->lkey);
  publish(b.rq);
  isoroce_c_recv_wqe(next(b.rq), 71, b.buf->iova() + 300000, 4096, b.buf->lkey);
  publish(b.rq);
  isoroce_c_send_wqe(next(a.sq), 1, IBV_WR_RDMA_WRITE, b.buf->iova() + 4096, b.buf->rkey, a.buf->iova(), 8192,
                     a.buf->lkey);
  publish(a.sq);
  isoroce_c_send_wqe(next(a.sq), 2, IBV_WR_SEND, 0, 0, a.buf->iova() + 100, 3000, a.buf->lkey);
  publish(a.sq);
  const char text[] = "inline bytes where C puts dma.inline_data";
  isoroce_c_send_inline_wqe(next(a.sq), 3, text, sizeof text);
  publish(a.sq);

  auto wc = poll(a.cq_ring, 3);
  ASSERT_EQ(wc.size(), 3u);
  for (uint32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(wc[k].wr_id, k + 1);
    EXPECT_EQ(wc[k].status, IBV_WC_SUCCESS) << "wr " << k + 1;
  }
  EXPECT_EQ(std::memcmp(a.buf->data, b.buf->data + 4096, 8192), 0) << "WRITE from dma.sge[0]";
  auto rwc = poll(b.cq_ring, 2);
  ASSERT_EQ(rwc.size(), 2u);
  EXPECT_EQ(rwc[0].wr_id, 70u);
  EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rwc[0].byte_len, 3000u);
  EXPECT_EQ(std::memcmp(a.buf->data + 100, b.buf->data + 200000, 3000), 0) << "SEND into the C recv WQE's SGE";
  EXPECT_EQ(rwc[1].wr_id, 71u);
  EXPECT_EQ(rwc[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rwc[1].byte_len, sizeof text);
  EXPECT_EQ(std::memcmp(text, b.buf->data + 300000, sizeof text), 0) << "inline data from dma.inline_data";
}

}  // namespace
}  // namespace isoroce::test
