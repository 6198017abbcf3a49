// The posting path's shortcuts (issue 20, the engine's sixth pass) keep what the
// long way did:
//  - kick() looks for a local operation or a failed WR at the requester's cursor
//    or the head only while QpCtx::sq_unusual says one may be queued; a WR that
//    failed its L_Key check at post, or lost its MR mid-message, still completes
//    in error at the moment it did when every kick looked (at the post itself
//    when it is next, or in the same call that retires the WRs before it), also
//    while the QP is active in the scheduler for other packets;
//  - a send queue slot's vectors are reused from WR to WR without being cleared:
//    every WR, inline or gathered, sends its own bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

// Posts on side i a WR whose L_Key names no region (the post succeeds).
int post_bad_lkey(RcPair& p, int i, uint64_t wr_id) {
  Sge sge{p.s[i].iova, 16, p.s[i].keys.lkey + 1};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = p.s[1 - i].iova;
  wr.rkey = p.s[1 - i].keys.rkey;
  return p.net[i].post_send(p.net.now(), p.s[i].qpn, wr);
}

size_t read_responses_sent(const Pair& net, int from) {
  size_t n = 0;
  for (const auto& pkt : net.sent(from)) n += pkt.op->kind == wire::OpKind::kReadResponse;
  return n;
}

// The QP is active in the scheduler with READ responses still to send when a WR
// with a bad L_Key is posted on it with nothing else queued: the WR completes in
// error at the post (before any transmit), as when every kick looked for it.
TEST(EnginePostPath, FailedWrPostedWhileTheQpSendsResponsesCompletesAtThePost) {
  RcPair p;
  p.fill(0, 0, 64 * 1024, 3);
  ASSERT_EQ(p.post(1, IBV_WR_RDMA_READ, 0, 64 * 1024, 0, 1), 0);
  // The request reaches side 0 after 1 us; 64 responses of 1 KB take ~5 us more.
  p.net.run_until(2'000'000);
  const size_t before = read_responses_sent(p.net, 0);
  ASSERT_GT(before, 0u);
  ASSERT_LT(before, 64u) << "side 0 must still be active with responses";
  ASSERT_EQ(post_bad_lkey(p, 0, 7), 0);
  auto sc = p.poll(0, false);  // nothing ran since the post
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 7u);
  EXPECT_EQ(sc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(p.net[0].query_qp(p.s[0].qpn)->state(), IBV_QPS_ERR);
  EXPECT_EQ(read_responses_sent(p.net, 0), before);
}

// A WR with a bad L_Key behind good ones on an active QP: the good ones complete,
// and the failed one completes in error in the same engine call that retires the
// last of them (no later post or timer needed), and the QP goes to ERR.
TEST(EnginePostPath, FailedWrBehindActiveTrafficCompletesWithTheWrBeforeIt) {
  RcPair p;
  p.fill(0, 0, 32 * 1024, 5);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, i * 8192, 8192, i * 8192, i), 0);
  ASSERT_EQ(post_bad_lkey(p, 0, 3), 0);
  std::vector<ibv_wc> seen;
  size_t step_of_last_ok = 0, step_of_error = 0;
  for (size_t step = 1; step <= 20'000 && seen.size() < 4; ++step) {
    p.net.run_until(p.net.now() + 100'000);  // 100 ns
    for (const ibv_wc& wc : p.poll(0, false)) {
      seen.push_back(wc);
      if (wc.wr_id == 2) step_of_last_ok = step;
      if (wc.wr_id == 3) step_of_error = step;
    }
  }
  ASSERT_EQ(seen.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(seen[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(seen[i].status, IBV_WC_SUCCESS);
  }
  EXPECT_EQ(seen[3].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(step_of_error, step_of_last_ok);
  EXPECT_EQ(p.net[0].query_qp(p.s[0].qpn)->state(), IBV_QPS_ERR);
  EXPECT_TRUE(p.same(0, 0, 1, 0, 3 * 8192));
}

// A local operation marks the send queue, completes, and the queue empties (the
// mark is dropped); clean WRITEs run; then a WRITE loses its source MR mid-message:
// it still completes with LOC_PROT_ERR once it is the oldest (the loss marks the
// queue again), and not every packet of it is sent.
TEST(EnginePostPath, WrThatLosesItsMrMidMessageAfterTheQueueEmptiedStillFails) {
  RcOptions o;
  o.access |= IBV_ACCESS_MW_BIND;
  RcPair q(o);
  auto mw = q.net[0].alloc_mw(q.s[0].pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(mw.ok());
  SendWr bind;
  bind.wr_id = 1;
  bind.opcode = IBV_WR_BIND_MW;
  const uint32_t key = (mw.value() & 0xffffff00u) | ((mw.value() + 1) & 0xff);
  bind.bind = verbs::MwBind{mw.value(), key, q.s[0].keys.lkey, q.s[0].iova, 4096, IBV_ACCESS_REMOTE_WRITE};
  ASSERT_EQ(q.net[0].post_send(q.net.now(), q.s[0].qpn, bind), 0);
  ASSERT_TRUE(q.net.run());
  {
    auto sc = q.poll(0, false);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
  }
  for (int i = 0; i < 4; ++i) ASSERT_EQ(q.post(0, IBV_WR_RDMA_WRITE, 0, 512, 0, 10 + i), 0);
  ASSERT_TRUE(q.net.run());
  ASSERT_EQ(q.poll(0, false).size(), 4u);
  // A second region, the source of an 8-packet WRITE, deregistered after the
  // first packets left.
  std::vector<uint8_t> src(8 * 1024, 0x77);
  const uint64_t iova = 0x30000000 + (reinterpret_cast<uint64_t>(src.data()) & 0xfff);
  auto mr = q.net[0].reg_mr(q.s[0].pd, src.data(), src.size(), iova, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(mr.ok());
  Sge sge{iova, 8 * 1024, mr.value().lkey};
  ASSERT_EQ(post_write_to_peer(q, sge, 20), 0);
  const size_t sent0 = q.net.sent(0).size();
  for (int i = 0; i < 10'000 && q.net.sent(0).size() < sent0 + 2; ++i) q.net.run_until(q.net.now() + 10'000);
  const size_t sent_at_dereg = q.net.sent(0).size() - sent0;
  ASSERT_GE(sent_at_dereg, 1u);
  ASSERT_LT(sent_at_dereg, 8u);
  ASSERT_EQ(q.net[0].dereg_mr(mr.value().lkey), 0);
  ASSERT_TRUE(q.net.run());
  ASSERT_NO_FATAL_FAILURE(expect_lone_protection_error(q, 20u));
  size_t writes = 0;
  for (size_t i = sent0; i < q.net.sent(0).size(); ++i) writes += q.net.sent(0)[i].payload_len > 0;
  EXPECT_LT(writes, 8u);
}

// A small send queue whose slots are reused by inline and gathered WRs of
// different lengths and SGE counts, alternating: every message carries its own
// bytes (a slot's stale SGEs, SGE translations or inline bytes never leak).
TEST(EnginePostPath, ReusedSlotsCarryEachWrsOwnBytesInlineOrGathered) {
  RcOptions o;
  o.max_send_wr = 4;
  RcPair p(o);
  p.fill(0, 0, 256 * 1024, 11);
  uint64_t remote = 0;
  for (int round = 0; round < 24; ++round) {
    const bool inl = round % 3 == 1;
    const int nsge = inl ? 1 + round % 2 : 1 + round % 4;
    const uint32_t piece = inl ? 40 + round : 300 + 97 * round;
    const uint64_t local = static_cast<uint64_t>(round) * 5000;
    std::vector<Sge> sges;
    for (int k = 0; k < nsge; ++k) {
      // Pieces from scattered places of the buffer, in reverse order.
      // (An inline SGE names the bytes by their address in the process, not by iova.)
      const uint64_t off = local + static_cast<uint64_t>(nsge - 1 - k) * 1200;
      const uint64_t addr = inl ? reinterpret_cast<uint64_t>(p.s[0].buf.data() + off) : p.s[0].iova + off;
      sges.push_back({addr, piece, p.s[0].keys.lkey});
    }
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(round);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = inl ? IBV_SEND_INLINE : 0;
    wr.sg_list = sges;
    wr.remote_addr = p.s[1].iova + remote;
    wr.rkey = p.s[1].keys.rkey;
    ASSERT_EQ(p.net[0].post_send(p.net.now(), p.s[0].qpn, wr), 0) << round;
    ASSERT_TRUE(p.net.run());
    auto sc = p.poll(0, false);
    ASSERT_EQ(sc.size(), 1u) << round;
    EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS) << round;
    for (int k = 0; k < nsge; ++k) {
      EXPECT_TRUE(p.same(0, local + static_cast<uint64_t>(nsge - 1 - k) * 1200, 1, remote + k * piece, piece))
          << "round " << round << " piece " << k;
    }
    remote += static_cast<uint64_t>(nsge) * piece;
  }
}

}  // namespace
}  // namespace isoroce::transport::testing
