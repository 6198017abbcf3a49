// The shared-memory data path (ctrl/shm_abi.h) against the real daemon, from
// a client that writes the rings itself: WRITE and SEND through the SQ/RQ
// rings, completions from the CQ ring, eventfd wakeups, and garbage in every
// ring field never hurting the daemon or another client.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "ctrl/shm_abi.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/shm_client.h"

namespace isoroce::test {
namespace {

class Shm : public DaemonSuite {
 protected:
  static void SetUpTestSuite() { start({"--loopback", "--policy", "tassel"}); }
  void connect(ShmEnd& a, ShmEnd& b) {
    ASSERT_TRUE(a.v->connect_rc(a.qpn, "10.0.0.2", b.qpn, 10, 20)["ok"].get<bool>());
    ASSERT_TRUE(b.v->connect_rc(b.qpn, "10.0.0.1", a.qpn, 20, 10)["ok"].get<bool>());
  }
};

TEST_F(Shm, WriteAndSendThroughTheRingsWithoutSystemCalls) {
  ShmEnd a = make_end(daemon_->socket(), "isoroce0");
  ShmEnd b = make_end(daemon_->socket(), "isoroce1");
  ASSERT_TRUE(a.qpn && b.qpn && a.buf && b.buf);
  connect(a, b);
  std::mt19937 rng(1);
  for (uint32_t i = 0; i < 70000; ++i) a.buf->data[i] = static_cast<uint8_t>(rng());
  // Receive: post (ring), poll (ring) — no request on the socket.
  post_recv(b.rq, 500, b.buf->iova() + 100000, 8192, b.buf->lkey);
  for (uint32_t k = 0; k < 20; ++k)
    post_send(a.sq, k, IBV_WR_RDMA_WRITE, a.buf->iova() + k * 3000, 3000, a.buf->lkey, b.buf->iova() + k * 3000, b.buf->rkey);
  post_send(a.sq, 99, IBV_WR_SEND, a.buf->iova(), 5000, a.buf->lkey);
  auto wc = poll(a.cq_ring, 21);
  ASSERT_EQ(wc.size(), 21u);
  for (uint32_t k = 0; k < 20; ++k) {
    EXPECT_EQ(wc[k].wr_id, k);
    EXPECT_EQ(wc[k].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[k].opcode, IBV_WC_RDMA_WRITE);
  }
  EXPECT_EQ(std::memcmp(a.buf->data, b.buf->data, 60000), 0);
  auto rwc = poll(b.cq_ring, 1);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 500u);
  EXPECT_EQ(rwc[0].byte_len, 5000u);
  EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(std::memcmp(a.buf->data, b.buf->data + 100000, 5000), 0);
}

TEST_F(Shm, ArmedCqWakesItsEventfd) {
  ShmEnd a = make_end(daemon_->socket(), "isoroce0", true);
  ShmEnd b = make_end(daemon_->socket(), "isoroce1", true);
  connect(a, b);
  ASSERT_GE(a.evfd, 0);
  shm::CqNotify* nt = shm::cq_notify(a.cq_ring.base, a.cq_ring.log2_entries, a.cq_ring.log2_elem);
  nt->solicited_only = 0;
  nt->armed.store(1, std::memory_order_release);
  post_send(a.sq, 7, IBV_WR_RDMA_WRITE, a.buf->iova(), 64, a.buf->lkey, b.buf->iova(), b.buf->rkey);
  pollfd p{a.evfd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "no wakeup";
  uint64_t v = 0;
  ASSERT_EQ(read(a.evfd, &v, 8), 8);
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(nt->armed.load(), 0u) << "the daemon disarms the CQ when it wakes it";
  EXPECT_EQ(poll(a.cq_ring, 1).size(), 1u);
  // Not armed: no wakeup.
  post_send(a.sq, 8, IBV_WR_RDMA_WRITE, a.buf->iova(), 64, a.buf->lkey, b.buf->iova(), b.buf->rkey);
  EXPECT_EQ(poll(a.cq_ring, 1).size(), 1u);
  EXPECT_EQ(::poll(&p, 1, 50), 0);
  close(a.evfd);
  close(b.evfd);
}

// A WQE the daemon cannot decode is not lost: it completes with
// IBV_WC_LOC_QP_OP_ERR and the QP goes to ERR (later WRs flush, a QP-fatal
// async event is queued), as an RNIC answers a malformed WQE — the
// application is told instead of waiting forever.
TEST_F(Shm, MalformedWqesCompleteInErrorAndTheQpGoesToErr) {
  ShmEnd a = make_end(daemon_->socket(), "isoroce0");
  ShmEnd b = make_end(daemon_->socket(), "isoroce1");
  connect(a, b);
  // A good WRITE first: it completes normally, ahead of the bad one.
  post_send(a.sq, 1, IBV_WR_RDMA_WRITE, a.buf->iova(), 64, a.buf->lkey, b.buf->iova(), b.buf->rkey);
  post_send(a.sq, 2, static_cast<ibv_wr_opcode>(77), a.buf->iova(), 64, a.buf->lkey, b.buf->iova(), b.buf->rkey,
            0 /* unsignaled: errors complete anyway */);
  post_send(a.sq, 3, IBV_WR_RDMA_WRITE, a.buf->iova(), 64, a.buf->lkey, b.buf->iova(), b.buf->rkey);
  auto wc = poll(a.cq_ring, 3);
  ASSERT_EQ(wc.size(), 3u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].status, IBV_WC_LOC_QP_OP_ERR);
  EXPECT_EQ(wc[2].wr_id, 3u);
  EXPECT_EQ(wc[2].status, IBV_WC_WR_FLUSH_ERR);
  json q = a.v->call({{"op", "query_qp"}, {"qpn", a.qpn}});
  EXPECT_EQ(q["attr"]["qp_state"], "ERR") << q.dump();
  json ev = a.v->call({{"op", "get_async_events"}});
  ASSERT_FALSE(ev["events"].empty()) << ev.dump();
  EXPECT_EQ(ev["events"][0]["type"], "qp_fatal");
  EXPECT_EQ(ev["events"][0]["id"], a.qpn);

  // A receive WQE with more SGEs than the QP allows, behind a good one.
  post_recv(b.rq, 10, b.buf->iova(), 4096, b.buf->lkey);
  const uint32_t prod = shm::producer(b.rq.base).load(std::memory_order_relaxed);
  auto* w = reinterpret_cast<shm::RecvWqe*>(b.rq.at(prod));
  std::memset(w, 0, sizeof *w);
  w->wr_id = 11;
  w->dma.num_sge = 1000;
  shm::producer(b.rq.base).store((prod + 1) & b.rq.mask(), std::memory_order_release);
  auto rwc = poll(b.cq_ring, 2);
  ASSERT_EQ(rwc.size(), 2u);
  EXPECT_EQ(rwc[0].wr_id, 10u);
  EXPECT_EQ(rwc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(rwc[1].wr_id, 11u);
  EXPECT_EQ(rwc[1].status, IBV_WC_LOC_QP_OP_ERR);
  EXPECT_EQ(rwc[1].opcode, IBV_WC_RECV);
  EXPECT_EQ(b.v->call({{"op", "query_qp"}, {"qpn", b.qpn}})["attr"]["qp_state"], "ERR");
}

// A malicious client scribbles over its rings: indices out of range, random
// opcodes, SGE counts and lengths, lkeys of nobody. The daemon drops what is
// wrong and keeps serving everyone else.
TEST_F(Shm, GarbageInTheRingsHurtsNobodyElse) {
  ShmEnd bad = make_end(daemon_->socket(), "isoroce0");
  ShmEnd peer = make_end(daemon_->socket(), "isoroce1");
  connect(bad, peer);
  std::mt19937_64 rng(99);
  for (int round = 0; round < 200; ++round) {
    for (Ring* r : {&bad.sq, &bad.rq}) {
      const uint32_t n = 1u << r->log2_entries;
      const size_t elem = size_t{1} << r->log2_elem;
      for (uint32_t i = 0; i < n; ++i)
        for (size_t k = 0; k < elem; k += 8) {
          uint64_t x = rng();
          if (rng() % 4 == 0) x &= 0xff;  // small values hit the checks' edges
          std::memcpy(r->at(i) + k, &x, 8);
        }
      shm::producer(r->base).store(static_cast<uint32_t>(rng()), std::memory_order_release);
      shm::header(r->base)->index_mask = static_cast<uint32_t>(rng());
      shm::header(r->base)->log2_elem_size = static_cast<uint32_t>(rng());
    }
    shm::producer(bad.cq_ring.base).store(static_cast<uint32_t>(rng()));
    shm::consumer(bad.cq_ring.base).store(static_cast<uint32_t>(rng()));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Everyone else is fine: a new pair moves data.
  ShmEnd a = make_end(daemon_->socket(), "isoroce0");
  ShmEnd b = make_end(daemon_->socket(), "isoroce1");
  connect(a, b);
  for (int i = 0; i < 4096; ++i) a.buf->data[i] = static_cast<uint8_t>(i * 7);
  post_send(a.sq, 1, IBV_WR_RDMA_WRITE, a.buf->iova(), 4096, a.buf->lkey, b.buf->iova(), b.buf->rkey);
  auto wc = poll(a.cq_ring, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(a.buf->data, b.buf->data, 4096), 0);
  // The daemon counted what it refused.
  json st = Verbs(daemon_->socket(), "isoroce0").call({{"op", "stats"}});
  EXPECT_GT(st["stats"]["isoroce0"]["shm"]["bad_wqes"].get<uint64_t>(), 0u) << st.dump();
  // And the bad client's connection still closes cleanly.
  bad.v.reset();
  Verbs probe(daemon_->socket(), "isoroce0");
  EXPECT_TRUE(probe.call({{"op", "status"}})["ok"].get<bool>());
}

}  // namespace
}  // namespace isoroce::test
