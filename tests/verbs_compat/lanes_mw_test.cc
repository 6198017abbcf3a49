// Memory windows on a port with lanes (docs/isoroced.md, "Lanes";
// transport/engine/windows.h), through the verbs library against a real
// `isoroced --loopback --lanes-per-port 2` on two workers. The target is one
// context on isoroce1 with one PD and a QP in each lane (lane = QPN's parity:
// each port's first QPN is even); a peer QP on isoroce0 is connected to each.
// Type 1 windows bound in one lane are used through the other lane's QP, type
// 2 windows through their own QP; LOCAL_INV and SEND_WITH_INV end a window in
// every lane; a bound MR cannot be deregistered; the windows of a SIGKILLed
// client leave every lane; rebinding in one lane while the other reads
// through a window is safe.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "tests/verbs_compat/verbs_fixture.h"

namespace isoroce::test {
namespace {

constexpr int kMwAccess = kAllAccess | IBV_ACCESS_MW_BIND;
constexpr size_t kBuf = 1 << 17;

void fill(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

class LanesMemoryWindows : public VerbsTest {
 protected:
  static void SetUpTestSuite() {
    start({"--loopback", "--lanes-per-port", "2", "--lcores", "0@0,1@1,2@0"});
    setenv("ISOROCE_SOCKET", daemon_->socket().c_str(), 1);
  }

  // The target (isoroce1): t.qp in one lane and qp2 in the other, one PD; by
  // lane in qp[]/cq[]. Peers a[k] (isoroce0) connected to qp[k].
  struct Port {
    VerbsDev t;
    ibv_cq* cq2 = nullptr;
    ibv_qp* qp2 = nullptr;
    ibv_qp* qp[2] = {};
    ibv_cq* cq[2] = {};
    VerbsDev a[2];
    std::vector<uint8_t> tbuf = std::vector<uint8_t>(kBuf), abuf[2] = {std::vector<uint8_t>(kBuf),
                                                                        std::vector<uint8_t>(kBuf)};
    ibv_mr* tmr = nullptr;
    ibv_mr* amr[2] = {};
    ~Port() {
      if (tmr) ibv_dereg_mr(tmr);
      if (qp2) ibv_destroy_qp(qp2);
      if (cq2) ibv_destroy_cq(cq2);
    }
    uint64_t at(size_t off) const { return reinterpret_cast<uintptr_t>(tbuf.data()) + off; }
  };

  static void setup(Port& p) {
    ASSERT_NO_FATAL_FAILURE(make(p.t, "isoroce1"));
    p.cq2 = ibv_create_cq(p.t.ctx, 64, nullptr, nullptr, 0);
    ASSERT_NE(p.cq2, nullptr);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = p.cq2;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    p.qp2 = ibv_create_qp(p.t.pd, &ia);
    ASSERT_NE(p.qp2, nullptr);
    const unsigned l1 = p.t.qp->qp_num % 2, l2 = p.qp2->qp_num % 2;
    ASSERT_NE(l1, l2) << "the second QP went to the lane of the first (fewest QPs: the other)";
    p.qp[l1] = p.t.qp, p.cq[l1] = p.t.cq;
    p.qp[l2] = p.qp2, p.cq[l2] = p.cq2;
    p.tmr = ibv_reg_mr(p.t.pd, p.tbuf.data(), kBuf, kMwAccess);
    ASSERT_NE(p.tmr, nullptr);
    for (int k = 0; k < 2; ++k) {
      ASSERT_NO_FATAL_FAILURE(make(p.a[k], "isoroce0"));
      p.amr[k] = ibv_reg_mr(p.a[k].pd, p.abuf[k].data(), kBuf, kAllAccess);
      ASSERT_NE(p.amr[k], nullptr);
      p.a[k].mrs.push_back(p.amr[k]);
      ASSERT_NO_FATAL_FAILURE(connect_qp(p.a[k].qp, kGid1, p.qp[k]->qp_num));
      ASSERT_NO_FATAL_FAILURE(connect_qp(p.qp[k], kGid0, p.a[k].qp->qp_num));
    }
  }
  static ibv_wc_status post_wait(ibv_qp* qp, ibv_cq* cq, ibv_send_wr& w) {
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp, &w, &bad) != 0) return IBV_WC_GENERAL_ERR;
    auto wc = wait(cq, 1);
    return wc.size() == 1 ? wc[0].status : IBV_WC_RESP_TIMEOUT_ERR;
  }
  // ibv_bind_mw (type 1) on the target's QP of lane k; its completion status.
  static ibv_wc_status bind1(Port& p, int k, ibv_mw* mw, size_t off, size_t len, int access) {
    ibv_mw_bind b{};
    b.wr_id = 3;
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info.mr = p.tmr;
    b.bind_info.addr = p.at(off);
    b.bind_info.length = len;
    b.bind_info.mw_access_flags = access;
    if (ibv_bind_mw(p.qp[k], mw, &b) != 0) return IBV_WC_GENERAL_ERR;
    auto wc = wait(p.cq[k], 1);
    return wc.size() == 1 ? wc[0].status : IBV_WC_RESP_TIMEOUT_ERR;
  }
  // IBV_WR_BIND_MW (type 2) on the target's QP of lane k with the next key; that key
  // (also in mw->rkey, which names the window in its next bind, as rxe wants).
  static uint32_t bind2(Port& p, int k, ibv_mw* mw, size_t off, size_t len, int access, ibv_wc_status* st) {
    ibv_send_wr w{};
    w.opcode = IBV_WR_BIND_MW;
    w.send_flags = IBV_SEND_SIGNALED;
    w.bind_mw.mw = mw;
    w.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    w.bind_mw.bind_info.mr = p.tmr;
    w.bind_mw.bind_info.addr = p.at(off);
    w.bind_mw.bind_info.length = len;
    w.bind_mw.bind_info.mw_access_flags = access;
    *st = post_wait(p.qp[k], p.cq[k], w);
    if (*st == IBV_WC_SUCCESS) mw->rkey = w.bind_mw.rkey;  // the consumer keeps a type 2 window's key
    return w.bind_mw.rkey;
  }
  static ibv_wc_status local_inv(Port& p, int k, uint32_t rkey) {
    ibv_send_wr w{};
    w.opcode = IBV_WR_LOCAL_INV;
    w.send_flags = IBV_SEND_SIGNALED;
    w.invalidate_rkey = rkey;
    return post_wait(p.qp[k], p.cq[k], w);
  }
  // An RDMA operation of peer k (through the target's QP of lane k).
  static ibv_wc_status peer(Port& p, int k, ibv_wr_opcode op, size_t local_off, uint32_t len, size_t remote_off,
                            uint32_t rkey) {
    return rdma(p.a[k].qp, p.a[k].cq, op, p.abuf[k].data() + local_off, len, p.amr[k]->lkey, p.at(remote_off), rkey);
  }
  static json lanes(Verbs& v) { return v.call({{"op", "stats"}})["stats"]["isoroce1"]["lanes"]; }
};

TEST_F(LanesMemoryWindows, Type1BoundInOneLaneIsUsedThroughAQpOfTheOther) {
  Port p;
  ASSERT_NO_FATAL_FAILURE(setup(p));
  ibv_mw* mw = ibv_alloc_mw(p.t.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr) << errno;
  // Bound by lane 0's QP; WRITE (20 packets) and READ by the peer of lane 1's QP.
  ASSERT_EQ(bind1(p, 0, mw, 4096, 32768, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ), IBV_WC_SUCCESS);
  fill(p.abuf[1].data(), 20000, 1);
  EXPECT_EQ(peer(p, 1, IBV_WR_RDMA_WRITE, 0, 20000, 4096, mw->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(p.abuf[1].data(), p.tbuf.data() + 4096, 20000), 0) << "WRITE through lane 1";
  fill(p.tbuf.data() + 30000, 6000, 2);
  EXPECT_EQ(peer(p, 1, IBV_WR_RDMA_READ, 50000, 6000, 30000, mw->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(p.abuf[1].data() + 50000, p.tbuf.data() + 30000, 6000), 0) << "READ through lane 1";
  // Bound again by lane 1's QP (a new key, another range): used through lane 0's.
  const uint32_t old_key = mw->rkey;
  ASSERT_EQ(bind1(p, 1, mw, 65536, 16384, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
  ASSERT_NE(mw->rkey, old_key);
  fill(p.abuf[0].data(), 9000, 3);
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_WRITE, 0, 9000, 65536 + 100, mw->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(p.abuf[0].data(), p.tbuf.data() + 65536 + 100, 9000), 0) << "WRITE through lane 0";
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_READ, 20000, 4000, 65536 + 200, mw->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(p.abuf[0].data() + 20000, p.tbuf.data() + 65536 + 200, 4000), 0) << "READ through lane 0";
  // The MR stays while a window is bound to it.
  EXPECT_EQ(ibv_dereg_mr(p.tmr), EINVAL);
  // The key before the re-bind is dead in every lane.
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_READ, 0, 64, 4096, old_key), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(peer(p, 1, IBV_WR_RDMA_READ, 0, 64, 4096, old_key), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(LanesMemoryWindows, Type2BoundInLane0EndedByLocalInvalidateInLane1) {
  Port p;
  ASSERT_NO_FATAL_FAILURE(setup(p));
  ibv_mw* mw = ibv_alloc_mw(p.t.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr) << errno;
  ibv_wc_status st;
  const uint32_t key = bind2(p, 0, mw, 0, 16384, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, &st);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  fill(p.abuf[0].data(), 12000, 4);
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_WRITE, 0, 12000, 1000, key), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(p.abuf[0].data(), p.tbuf.data() + 1000, 12000), 0);
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_READ, 40000, 3000, 2000, key), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(p.abuf[0].data() + 40000, p.tbuf.data() + 2000, 3000), 0);
  EXPECT_EQ(ibv_dereg_mr(p.tmr), EINVAL);
  // LOCAL_INV by the QP of the other lane (same PD): in force at its completion.
  EXPECT_EQ(local_inv(p, 1, key), IBV_WC_SUCCESS);
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_WRITE, 0, 64, 0, key), IBV_WC_REM_ACCESS_ERR);
  // Free, it holds the MR no more.
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  EXPECT_EQ(ibv_dereg_mr(p.tmr), 0);
  p.tmr = nullptr;
}

TEST_F(LanesMemoryWindows, Type2BoundInLane1EndedBySendWithInvalidateIsFreeInLane0AndItsQpsOnly) {
  Port p;
  ASSERT_NO_FATAL_FAILURE(setup(p));
  ibv_mw* mw = ibv_alloc_mw(p.t.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr) << errno;
  ibv_wc_status st;
  const uint32_t key = bind2(p, 1, mw, 8192, 8192, IBV_ACCESS_REMOTE_WRITE, &st);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  fill(p.abuf[1].data(), 8192, 5);
  EXPECT_EQ(peer(p, 1, IBV_WR_RDMA_WRITE, 0, 8192, 8192, key), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(p.abuf[1].data(), p.tbuf.data() + 8192, 8192), 0);
  // The peer's SEND_WITH_INV ends it (arriving on lane 1's QP, which bound it).
  ibv_sge rs{reinterpret_cast<uintptr_t>(p.tbuf.data()) + 100000, 64, p.tmr->lkey};
  ibv_recv_wr rw{};
  rw.wr_id = 5, rw.sg_list = &rs, rw.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(p.qp[1], &rw, &rbad), 0);
  ibv_sge ss{reinterpret_cast<uintptr_t>(p.abuf[1].data()), 16, p.amr[1]->lkey};
  ibv_send_wr sw{};
  sw.opcode = IBV_WR_SEND_WITH_INV, sw.send_flags = IBV_SEND_SIGNALED, sw.sg_list = &ss, sw.num_sge = 1;
  sw.invalidate_rkey = key;
  EXPECT_EQ(post_wait(p.a[1].qp, p.a[1].cq, sw), IBV_WC_SUCCESS);
  auto rc = wait(p.cq[1], 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(rc[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(rc[0].invalidated_rkey, key);
  // Free in lane 0 too: lane 0's QP binds it again (only a free type 2 window
  // is bound, o10-37.2.30) and its peer reads through it.
  const uint32_t key2 = bind2(p, 0, mw, 0, 4096, IBV_ACCESS_REMOTE_READ, &st);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  fill(p.tbuf.data(), 4096, 6);
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_READ, 0, 4096, 0, key2), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(p.abuf[0].data(), p.tbuf.data(), 4096), 0);
  // A Remote Access Error ends the QPs of the pair: one per pair, last.
  EXPECT_EQ(peer(p, 1, IBV_WR_RDMA_READ, 0, 64, 0, key2), IBV_WC_REM_ACCESS_ERR)
      << "10.6.7.2.2: a type 2 window is its binding QP's, in every lane";
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_WRITE, 0, 64, 8192, key), IBV_WC_REM_ACCESS_ERR) << "the invalidated key";
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

// One thread rebinds a type 1 window on lane 0's QP again and again while
// another reads through a second window from lane 1's peer: every READ
// succeeds with the right bytes and the daemon lives (one table, one lock).
TEST_F(LanesMemoryWindows, RebindsInOneLaneWhileTheOtherReadsThroughAWindow) {
  Port p;
  ASSERT_NO_FATAL_FAILURE(setup(p));
  ibv_mw* busy = ibv_alloc_mw(p.t.pd, IBV_MW_TYPE_1);
  ibv_mw* steady = ibv_alloc_mw(p.t.pd, IBV_MW_TYPE_1);
  ASSERT_TRUE(busy && steady);
  ASSERT_EQ(bind1(p, 0, steady, 0, 65536, IBV_ACCESS_REMOTE_READ), IBV_WC_SUCCESS);
  fill(p.tbuf.data(), 65536, 7);
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, bad{0};
  std::thread reader([&] {
    for (int i = 0; i < 300 && !stop; ++i) {
      const size_t off = (i * 4099) % 60000;
      if (peer(p, 1, IBV_WR_RDMA_READ, 0, 4096, off, steady->rkey) != IBV_WC_SUCCESS ||
          std::memcmp(p.abuf[1].data(), p.tbuf.data() + off, 4096) != 0)
        ++bad;
      ++reads;
    }
  });
  int binds = 0;
  for (int i = 0; i < 300 && reads < 300; ++i) {
    if (bind1(p, 0, busy, (i % 8) * 8192, 8192, IBV_ACCESS_REMOTE_READ) != IBV_WC_SUCCESS) break;
    ++binds;
  }
  stop = binds < 300 && reads < 300;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(binds, 50) << "the binds stopped";
  EXPECT_EQ(peer(p, 0, IBV_WR_RDMA_READ, 0, 64, (binds - 1) % 8 * 8192, busy->rkey), IBV_WC_SUCCESS)
      << "the last bind, through lane 0";
  EXPECT_EQ(ibv_dealloc_mw(busy), 0);
  EXPECT_EQ(ibv_dealloc_mw(steady), 0);
}

TEST_F(LanesMemoryWindows, AKilledClientsWindowsAreGoneFromEveryLane) {
  Verbs v(daemon_->socket(), "isoroce1");
  ASSERT_TRUE(v.ok());
  auto counts = [&] {
    const json l = lanes(v);
    return std::vector<uint64_t>{l[0]["mws"].get<uint64_t>(), l[1]["mws"].get<uint64_t>(),
                                 l[0]["mrs"].get<uint64_t>(), l[1]["mrs"].get<uint64_t>()};
  };
  const auto before = counts();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    // Two windows bound to one MR (type 1 by ibv_bind_mw, type 2 by a work
    // request) on a QP connected to itself, and one window unbound.
    Port p;
    setup(p);
    bool ok = !::testing::Test::HasFatalFailure();
    ibv_mw* w1 = ok ? ibv_alloc_mw(p.t.pd, IBV_MW_TYPE_1) : nullptr;
    ibv_mw* w2 = ok ? ibv_alloc_mw(p.t.pd, IBV_MW_TYPE_2) : nullptr;
    ibv_mw* w3 = ok ? ibv_alloc_mw(p.t.pd, IBV_MW_TYPE_2) : nullptr;
    ok = w1 && w2 && w3 && bind1(p, 0, w1, 0, 4096, IBV_ACCESS_REMOTE_READ) == IBV_WC_SUCCESS;
    ibv_wc_status st = IBV_WC_GENERAL_ERR;
    if (ok) bind2(p, 1, w2, 4096, 4096, IBV_ACCESS_REMOTE_WRITE, &st);
    ok = ok && st == IBV_WC_SUCCESS && ibv_dereg_mr(p.tmr) == EINVAL;
    const char ch = ok ? 'y' : 'n';
    (void)!write(ready[1], &ch, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);  // a child that dies early ends the read below
  struct Reaper {   // the child goes whatever happens below
    pid_t pid;
    int fd;
    ~Reaper() {
      if (pid > 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
      close(fd);
    }
  } reaper{child, ready[0]};
  char ch = 0;
  ASSERT_EQ(read(ready[0], &ch, 1), 1);
  ASSERT_EQ(ch, 'y');
  const auto during = counts();
  EXPECT_EQ(during[0], before[0] + 3) << "a window is in every lane";
  EXPECT_EQ(during[1], before[1] + 3);
  EXPECT_EQ(during[2], before[2] + 1) << "the MR, in every lane";
  EXPECT_EQ(during[3], before[3] + 1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  reaper.pid = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (counts() != before && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(counts(), before) << "windows (and the MR they were bound to) of a SIGKILLed client left a lane";
}

}  // namespace
}  // namespace isoroce::test
