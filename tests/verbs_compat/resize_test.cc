// ibv_resize_cq through the library and the daemon: completions the
// application has not polled survive a grow or a shrink, in order, none lost
// or repeated; a shrink below them is EINVAL; the engine's own bound follows
// the new size; an armed CQ stays armed; resizing while the peer keeps
// sending loses nothing.
#include <poll.h>

#include <atomic>
#include <thread>

#include "tests/verbs_compat/verbs_fixture.h"

namespace isoroce::test {
namespace {

class ResizeCq : public VerbsTest {
 protected:
  // b posts n receives (wr_id = index), a sends n inline SEND_WITH_IMM
  // (imm = first + index) and waits for its n send completions, so b's CQ
  // then holds n unpolled receive completions. one_by_one: each send waits for
  // the previous one's completion, so the daemon's pump has moved every
  // earlier completion from the engine's CQ into the ring before the next
  // arrives (in a burst the engine's CQ alone must hold them).
  static void deliver(VerbsDev& a, VerbsDev& b, uint32_t n, uint32_t first = 0, bool one_by_one = false) {
    static uint8_t rbuf[64];
    ibv_mr* rmr = ibv_reg_mr(b.pd, rbuf, sizeof rbuf, kAllAccess);
    ASSERT_NE(rmr, nullptr);
    b.mrs.push_back(rmr);
    for (uint32_t i = 0; i < n; ++i) {
      ibv_sge s{reinterpret_cast<uintptr_t>(rbuf), sizeof rbuf, rmr->lkey};
      ibv_recv_wr r{};
      r.wr_id = first + i, r.sg_list = &s, r.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_recv(b.qp, &r, &bad), 0) << i;
    }
    uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    size_t done = 0;
    for (uint32_t i = 0; i < n; ++i) {
      ibv_sge s{reinterpret_cast<uintptr_t>(payload), sizeof payload, 0};
      ibv_send_wr w{};
      w.wr_id = first + i, w.sg_list = &s, w.num_sge = 1, w.opcode = IBV_WR_SEND_WITH_IMM;
      w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, w.imm_data = htonl(first + i);
      ibv_send_wr* bad = nullptr;
      int rc;
      while ((rc = ibv_post_send(a.qp, &w, &bad)) == ENOMEM) done += wait(a.cq, 1, 1000).size();  // SQ full
      ASSERT_EQ(rc, 0) << i;
      if (one_by_one) ASSERT_EQ(done += wait(a.cq, 1).size(), i + 1);
    }
    done += wait(a.cq, n - done, 10000).size();
    ASSERT_EQ(done, n) << "the sends completed, so b's responder has completed the receives";
  }
  // Polls n completions from b and checks they are first, first + 1, ...
  static void expect_in_order(ibv_cq* cq, uint32_t n, uint32_t first, int max_batch = 16) {
    auto wc = wait(cq, n, 10000, max_batch);
    ASSERT_EQ(wc.size(), n);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[i].status);
      ASSERT_EQ(wc[i].opcode, IBV_WC_RECV);
      ASSERT_EQ(ntohl(wc[i].imm_data), first + i) << "completion " << i;
      ASSERT_EQ(wc[i].wr_id, first + i);
    }
  }
  static void expect_empty(ibv_cq* cq) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0) << "a completion appeared twice (wr_id " << wc.wr_id << ")";
  }
};

TEST_F(ResizeCq, GrowAndShrinkWithCompletionsOutstandingKeepThemInOrder) {
  VerbsDev a, b;
  // b's CQ: cqe 8 -> a ring of 16 (15 usable) in front of an engine CQ of 8;
  // of 20 completions delivered one by one, 15 wait in the ring, 5 in the engine.
  ASSERT_NO_FATAL_FAILURE(pair(a, b, {.cqe = 256, .send_wr = 64}, {.cqe = 8, .recv_wr = 64}));
  EXPECT_EQ(b.cq->cqe, 15);
  ASSERT_NO_FATAL_FAILURE(deliver(a, b, 20, 0, true));
  // Expect: 19 < 20 outstanding (ring and engine together): EINVAL, nothing changes.
  EXPECT_EQ(ibv_resize_cq(b.cq, 19), EINVAL);
  EXPECT_EQ(b.cq->cqe, 15);
  EXPECT_EQ(ibv_resize_cq(b.cq, 0), EINVAL);
  EXPECT_EQ(ibv_resize_cq(b.cq, 1 << 20), EINVAL);
  // Exactly the outstanding count fits; ibv_cq.cqe is the ring's new size.
  ASSERT_EQ(ibv_resize_cq(b.cq, 20), 0);
  EXPECT_EQ(b.cq->cqe, 31);
  ASSERT_NO_FATAL_FAILURE(expect_in_order(b.cq, 5, 0, 5));
  // Grow with 15 outstanding.
  ASSERT_EQ(ibv_resize_cq(b.cq, 100), 0);
  EXPECT_EQ(b.cq->cqe, 127);
  ASSERT_NO_FATAL_FAILURE(expect_in_order(b.cq, 5, 5, 5));
  // Shrink with 10 outstanding: to 10 yes, then below it no.
  ASSERT_EQ(ibv_resize_cq(b.cq, 10), 0);
  EXPECT_EQ(b.cq->cqe, 15);
  EXPECT_EQ(ibv_resize_cq(b.cq, 9), EINVAL);
  ASSERT_NO_FATAL_FAILURE(expect_in_order(b.cq, 10, 10));
  expect_empty(b.cq);
  // The CQ works on after all that, and holds its new cqe even in one burst.
  ASSERT_NO_FATAL_FAILURE(deliver(a, b, 10, 20));
  ASSERT_NO_FATAL_FAILURE(expect_in_order(b.cq, 10, 20));
  expect_empty(b.cq);
}

TEST_F(ResizeCq, TheEnginesBoundFollowsTheNewSize) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b, {.cqe = 512, .send_wr = 200}, {.cqe = 8, .recv_wr = 200}));
  // cqe 64: a ring of 128 (127 usable) and an engine CQ of 64. 150 unpolled
  // completions fit only if the engine's CQ grew from 8 too (127 + 8 < 150).
  ASSERT_EQ(ibv_resize_cq(b.cq, 64), 0);
  EXPECT_EQ(b.cq->cqe, 127);
  ASSERT_NO_FATAL_FAILURE(deliver(a, b, 150));
  ASSERT_NO_FATAL_FAILURE(expect_in_order(b.cq, 150, 0));
  expect_empty(b.cq);
}

TEST_F(ResizeCq, AnArmedCqStaysArmedAcrossAResize) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b, {.cqe = 64}, {.cqe = 8, .channel = true}));
  ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);
  ASSERT_EQ(ibv_resize_cq(b.cq, 200), 0);
  ASSERT_NO_FATAL_FAILURE(deliver(a, b, 1));
  pollfd p{b.ch->fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "the arm moved to the new ring: the completion woke the channel";
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, b.cq);
  ibv_ack_cq_events(ev_cq, 1);
  ASSERT_NO_FATAL_FAILURE(expect_in_order(b.cq, 1, 0));
  // Not armed now: the next completion does not wake it, even after a resize.
  ASSERT_EQ(ibv_resize_cq(b.cq, 16), 0);
  ASSERT_NO_FATAL_FAILURE(deliver(a, b, 1, 1));
  EXPECT_EQ(::poll(&p, 1, 100), 0);
  ASSERT_NO_FATAL_FAILURE(expect_in_order(b.cq, 1, 1));
}

TEST_F(ResizeCq, ResizingWhileThePeerKeepsSendingLosesNothing) {
  constexpr uint32_t kMessages = 4000, kRecvDepth = 64;
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b, {.cqe = 256, .send_wr = 128}, {.cqe = 70, .recv_wr = kRecvDepth}));
  static uint8_t rbuf[64];
  ibv_mr* rmr = ibv_reg_mr(b.pd, rbuf, sizeof rbuf, kAllAccess);
  ASSERT_NE(rmr, nullptr);
  b.mrs.push_back(rmr);
  auto post_recv = [&](uint64_t id) {
    ibv_sge s{reinterpret_cast<uintptr_t>(rbuf), sizeof rbuf, rmr->lkey};
    ibv_recv_wr r{};
    r.wr_id = id, r.sg_list = &s, r.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(b.qp, &r, &bad);
  };
  for (uint32_t i = 0; i < kRecvDepth; ++i) ASSERT_EQ(post_recv(i), 0);
  // The peer sends all the time, up to 100 in flight.
  std::atomic<bool> sender_failed{false};
  std::thread sender([&] {
    uint32_t sent = 0, completed = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (completed < kMessages && std::chrono::steady_clock::now() < until) {
      while (sent < kMessages && sent - completed < 100) {
        uint32_t v = sent;
        ibv_sge s{reinterpret_cast<uintptr_t>(&v), sizeof v, 0};
        ibv_send_wr w{};
        w.wr_id = sent, w.sg_list = &s, w.num_sge = 1, w.opcode = IBV_WR_SEND_WITH_IMM;
        w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, w.imm_data = htonl(sent);
        ibv_send_wr* bad = nullptr;
        const int rc = ibv_post_send(a.qp, &w, &bad);
        if (rc == ENOMEM) break;
        if (rc != 0) return sender_failed.store(true);
        ++sent;
      }
      ibv_wc wc[32];
      const int k = ibv_poll_cq(a.cq, 32, wc);
      for (int i = 0; i < k; ++i)
        if (wc[i].status != IBV_WC_SUCCESS) return sender_failed.store(true);
      completed += static_cast<uint32_t>(std::max(k, 0));
    }
    if (completed < kMessages) sender_failed.store(true);
  });
  // b polls, reposts, and resizes its CQ every few completions, between sizes
  // from just above its receive depth (never below what can be outstanding)
  // to large, often with completions waiting.
  static constexpr int kSizes[] = {64, 500, 80, 2000, 65, 300, 100, 1000};
  uint32_t next = 0, resizes = 0, since = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (next < kMessages && std::chrono::steady_clock::now() < until && !sender_failed) {
    ibv_wc wc[16];
    const int k = ibv_poll_cq(b.cq, 16, wc);
    ASSERT_GE(k, 0);
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[i].status);
      ASSERT_EQ(ntohl(wc[i].imm_data), next) << "lost, repeated or reordered after " << resizes << " resizes";
      ++next;
      ASSERT_EQ(post_recv(next), 0);
    }
    since += static_cast<uint32_t>(k);
    if (since >= 29) {
      since = 0;
      ASSERT_EQ(ibv_resize_cq(b.cq, kSizes[resizes % std::size(kSizes)]), 0) << "resize " << resizes;
      ++resizes;
    }
  }
  sender.join();
  EXPECT_FALSE(sender_failed);
  EXPECT_EQ(next, kMessages);
  EXPECT_GE(resizes, 100u);
  expect_empty(b.cq);
}

}  // namespace
}  // namespace isoroce::test
