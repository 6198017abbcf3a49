// The shared-memory pump (ctrl/shm_pump.h) with its rings made by the
// operations, against engines in virtual time: WQEs written into the rings as
// libisoroce-verbs writes them, completions read from the CQ ring.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include "ctrl/shm_abi.h"
#include "tests/ctrl/virtual_fabric.h"

namespace isoroce::ctrl::testing {
namespace {

constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

struct Ring {
  void* base = nullptr;
  size_t bytes = 0;
  uint32_t log2_entries = 0, log2_elem = 0;
  Ring(int fd, const json& geo, bool cq) {
    log2_entries = geo["log2_entries"];
    log2_elem = geo["log2_elem"];
    bytes = shm::queue_bytes(log2_entries, log2_elem, cq);
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  ~Ring() { munmap(base, bytes); }
  uint32_t mask() const { return (1u << log2_entries) - 1; }
  uint8_t* at(uint32_t i) const { return shm::element(base, i & mask(), log2_elem); }
};

// A send WQE as the library writes it: the WQE in the C layout (its first
// sizeof(shm::SendWqe) bytes: C++ pads the uapi's flexible arrays), then its SGEs.
void post(Ring& sq, const rxe_send_wqe& w, const std::vector<rxe_sge>& sges) {
  const uint32_t prod = shm::producer(sq.base).load(std::memory_order_relaxed);
  std::memcpy(sq.at(prod), &w, sizeof(shm::SendWqe));
  std::memcpy(sq.at(prod) + sizeof(shm::SendWqe), sges.data(), sges.size() * sizeof(rxe_sge));
  shm::producer(sq.base).store((prod + 1) & sq.mask(), std::memory_order_release);
}

// A signalled WRITE of len bytes to remote_addr, one SGE, as the library fills it.
rxe_send_wqe write_wqe(uint64_t wr_id, uint32_t rkey, uint64_t remote_addr, uint32_t len) {
  rxe_send_wqe w{};
  w.wr.wr_id = wr_id;
  w.wr.opcode = IBV_WR_RDMA_WRITE;
  w.wr.send_flags = IBV_SEND_SIGNALED;
  w.wr.wr.rdma.remote_addr = remote_addr;
  w.wr.wr.rdma.rkey = rkey;
  w.dma.num_sge = 1;
  w.dma.length = len;
  return w;
}

std::vector<ib_uverbs_wc> drain(Ring& cq) {
  std::vector<ib_uverbs_wc> out;
  const uint32_t prod = shm::producer(cq.base).load(std::memory_order_acquire);
  uint32_t cons = shm::consumer(cq.base).load(std::memory_order_relaxed);
  for (; cons != prod; cons = (cons + 1) & cq.mask()) {
    ib_uverbs_wc wc;
    std::memcpy(&wc, cq.at(cons), sizeof wc);
    out.push_back(wc);
  }
  shm::consumer(cq.base).store(cons, std::memory_order_release);
  return out;
}

struct ShmEnd {
  uint32_t pd = 0, cq = 0, qpn = 0, lkey = 0, rkey = 0;
  std::unique_ptr<Ring> cq_ring, sq, rq;
};

ShmEnd make_end(TestClient& c, const std::string& dev, Memory& mem, const std::string& type = "rc", int cqe = 32,
                int max_send_wr = 16) {
  ShmEnd e;
  EXPECT_TRUE(c.call({{"op", "open"}, {"device", dev}})["ok"]);
  e.pd = c.call({{"op", "alloc_pd"}})["pd"];
  json r = c.call({{"op", "reg_mr"}, {"pd", e.pd}, {"length", mem.len}, {"iova", 0x20000}, {"access", kAll}},
                  {dup(mem.fd)});
  e.lkey = r["lkey"];
  e.rkey = r["rkey"];
  std::vector<int> fds;
  r = c.call({{"op", "create_cq"}, {"cqe", cqe}, {"shm", true}}, {}, &fds);
  EXPECT_EQ(fds.size(), 1u);
  e.cq = r["cq"];
  e.cq_ring = std::make_unique<Ring>(fds[0], r, true);
  fds.clear();
  r = c.call({{"op", "create_qp"}, {"pd", e.pd}, {"send_cq", e.cq}, {"recv_cq", e.cq}, {"type", type},
              {"max_send_sge", 2}, {"max_send_wr", max_send_wr}, {"shm", true}},
             {}, &fds);
  EXPECT_EQ(fds.size(), 2u) << r.dump();
  e.qpn = r["qpn"];
  e.sq = std::make_unique<Ring>(fds[0], r["sq"], false);
  e.rq = std::make_unique<Ring>(fds[1], r["rq"], false);
  return e;
}

void to_rts(TestClient& c, uint32_t qpn, json rtr) {
  for (json attr : {json{{"qp_state", "INIT"}, {"qp_access_flags", kAll}, {"port_num", 1}, {"pkey_index", 0}}, rtr,
                    json{{"qp_state", "RTS"}, {"sq_psn", 0}, {"timeout", 14}, {"retry_cnt", 7}, {"rnr_retry", 7},
                         {"max_rd_atomic", 1}}}) {
    if (attr.contains("qkey")) attr.erase("qp_access_flags");
    json r = c.call({{"op", "modify_qp"}, {"qpn", qpn}, {"attr", attr}});
    ASSERT_TRUE(r["ok"]) << r.dump();
  }
}

json rtr(uint32_t dest, const char* gid) {
  return json{{"qp_state", "RTR"}, {"path_mtu", 1024}, {"dest_qp_num", dest}, {"rq_psn", 0},
              {"max_dest_rd_atomic", 1}, {"min_rnr_timer", 1}, {"ah_attr", {{"dgid", gid}}}};
}

TEST(ShmPump, WriteThroughTheRingsCompletesInTheCqRing) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  Memory ma(1 << 16), mb(1 << 16);
  ShmEnd ea = make_end(a, "isoroce0", ma), eb = make_end(b, "isoroce1", mb);
  to_rts(a, ea.qpn, rtr(eb.qpn, "10.0.0.2"));
  to_rts(b, eb.qpn, rtr(ea.qpn, "10.0.0.1"));
  std::memset(ma.data, 0xc3, 2048);
  rxe_send_wqe w{};
  w.wr.wr_id = 77;
  w.wr.opcode = IBV_WR_RDMA_WRITE;
  w.wr.send_flags = IBV_SEND_SIGNALED;
  w.wr.wr.rdma.remote_addr = 0x20000 + 4096;
  w.wr.wr.rdma.rkey = eb.rkey;
  w.dma.num_sge = 2;
  w.dma.length = 2048;
  post(*ea.sq, w, {{0x20000, 1024, ea.lkey}, {0x20000 + 1024, 1024, ea.lkey}});
  f.run_for(100'000'000);
  const std::vector<ib_uverbs_wc> wc = drain(*ea.cq_ring);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 77u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].qp_num, ea.qpn);
  EXPECT_EQ(mb.data[4096], 0xc3);
  EXPECT_EQ(mb.data[4096 + 2047], 0xc3);
  EXPECT_EQ(mb.data[4096 + 2048], 0);
  EXPECT_EQ(f.device(0).pump->counters().send_wqes, 1u);
  EXPECT_EQ(f.device(0).pump->counters().cqes, 1u);
}

// An idle worker may sleep to its next deadline only while nothing here needs
// polling (ctrl/shm_abi.h, the doorbell): every SQ/RQ belongs to a client that
// rings the doorbell. The virtual driver has no doorbell to give, so "open"
// leaves it off; the test sets the flag as "open" does when it gives one.
TEST(ShmPump, SignalledOnlyWhileEveryRingsClientRingsTheDoorbell) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  Memory ma(1 << 16), mb(1 << 16);
  ShmPump& pump = *f.device(0).pump;
  f.run_for(1'000'000);
  EXPECT_TRUE(pump.signalled()) << "no rings";
  ShmEnd ea = make_end(a, "isoroce0", ma);
  EXPECT_FALSE(a.session().objs.doorbell) << "the virtual driver gives no doorbell";
  f.run_for(1'000'000);
  EXPECT_FALSE(pump.signalled()) << "a's rings are found only by polling";
  a.session().objs.doorbell = true;
  EXPECT_TRUE(pump.signalled());
  ShmEnd eb = make_end(b, "isoroce0", mb);
  f.run_for(1'000'000);
  EXPECT_FALSE(pump.signalled()) << "b's are not";
}

// The pump looks at the CQs only when the engine queued a completion since
// its last look, or the last look left some behind: completions held back by
// a full CQ ring must still arrive once the application makes room, with no
// new completion to wake the pump.
TEST(ShmPump, CompletionsHeldBackByAFullCqRingArriveWhenTheApplicationCatchesUp) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  Memory ma(1 << 16), mb(1 << 16);
  // cqe 8: a ring of 16 slots, which holds 15 completions.
  ShmEnd ea = make_end(a, "isoroce0", ma, "rc", 8), eb = make_end(b, "isoroce1", mb);
  to_rts(a, ea.qpn, rtr(eb.qpn, "10.0.0.2"));
  to_rts(b, eb.qpn, rtr(ea.qpn, "10.0.0.1"));
  const uint32_t ring_slots = ea.cq_ring->mask();
  ASSERT_EQ(ring_slots, 15u);
  for (uint64_t i = 0; i < 16; ++i) {  // max_send_wr is 16
    post(*ea.sq, write_wqe(100 + i, eb.rkey, 0x20000 + 64 * i, 64), {{0x20000, 64, ea.lkey}});
  }
  f.run_for(100'000'000);
  std::vector<ib_uverbs_wc> wc = drain(*ea.cq_ring);
  ASSERT_EQ(wc.size(), 15u);  // the ring was full: the 16th waits in the engine
  f.run_for(100'000'000);     // nothing new happens on the wire
  const std::vector<ib_uverbs_wc> rest = drain(*ea.cq_ring);
  ASSERT_EQ(rest.size(), 1u);
  wc.insert(wc.end(), rest.begin(), rest.end());
  for (uint64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(wc[i].wr_id, 100 + i);
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
  }
  EXPECT_EQ(f.device(0).pump->counters().cqes, 16u);
}

// A CQ ring that one completion fills (a latency test's CQ of one entry)
// must not keep the worker polling: only completions the engine still holds
// for a full ring do. Before the pump asked the engine, a full batch or a
// full ring counted as a backlog whether or not anything waited, and the
// worker slept in short bounded naps through every turn of a ping-pong.
TEST(ShmPump, AFullCqRingKeepsTheWorkerPollingOnlyWhileCompletionsWaitBehindIt) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  Memory ma(1 << 16), mb(1 << 16);
  ShmEnd ea = make_end(a, "isoroce0", ma, "rc", 1), eb = make_end(b, "isoroce1", mb);
  a.session().objs.doorbell = true;  // as "open" sets it where the driver gives a doorbell
  to_rts(a, ea.qpn, rtr(eb.qpn, "10.0.0.2"));
  to_rts(b, eb.qpn, rtr(ea.qpn, "10.0.0.1"));
  ShmPump& pump = *f.device(0).pump;
  const uint32_t holds = ea.cq_ring->mask();
  ASSERT_GE(holds, 1u);
  auto write = [&](uint64_t id) { post(*ea.sq, write_wqe(id, eb.rkey, 0x20000, 8), {{0x20000, 8, ea.lkey}}); };
  for (uint64_t i = 0; i < holds; ++i) write(i);
  f.run_for(100'000'000);
  EXPECT_EQ(shm::producer(ea.cq_ring->base).load() - shm::consumer(ea.cq_ring->base).load(), holds)
      << "the ring is full";
  EXPECT_TRUE(pump.signalled()) << "a full ring with nothing behind it needs no polling";
  write(holds);
  f.run_for(100'000'000);
  EXPECT_FALSE(pump.signalled()) << "a completion waits in the engine for room in the ring";
  std::vector<ib_uverbs_wc> wc = drain(*ea.cq_ring);
  EXPECT_EQ(wc.size(), holds);
  f.run_for(100'000'000);  // nothing signals the room: the worker's polling finds it
  const std::vector<ib_uverbs_wc> rest = drain(*ea.cq_ring);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].wr_id, holds);
  EXPECT_TRUE(pump.signalled());
}

// One publication of more WQEs than a pass takes (64 per queue per pass):
// the pump reads the producer index once per pass and publishes its consumer
// index once per burst, and every WQE completes, in order, its bytes written.
// The WQEs' bytes 64..152 (ud.av, status, state), which libisoroce-verbs
// leaves unwritten, are garbage here: the pump never reads them.
TEST(ShmPump, ABurstLongerThanAPassCompletesEveryWqeInOrder) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  Memory ma(1 << 16), mb(1 << 16);
  constexpr uint32_t kBurst = 200;
  ShmEnd ea = make_end(a, "isoroce0", ma, "rc", 256, 255), eb = make_end(b, "isoroce1", mb);
  to_rts(a, ea.qpn, rtr(eb.qpn, "10.0.0.2"));
  to_rts(b, eb.qpn, rtr(ea.qpn, "10.0.0.1"));
  for (uint32_t i = 0; i < kBurst; ++i) std::memset(ma.data + 64 * i, static_cast<int>(i + 1), 64);
  const uint32_t prod0 = shm::producer(ea.sq->base).load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < kBurst; ++i) {
    uint8_t* el = ea.sq->at(prod0 + i);
    std::memset(el, 0xa5, sizeof(shm::SendWqe));  // what an earlier user of the slot may have left
    auto* w = reinterpret_cast<shm::SendWqe*>(el);
    std::memset(el, 0, 64);
    std::memset(&w->iova, 0, sizeof(shm::SendWqe) - offsetof(shm::SendWqe, iova));
    w->wr.wr_id = 1000 + i;
    w->wr.opcode = IBV_WR_RDMA_WRITE;
    w->wr.send_flags = IBV_SEND_SIGNALED;
    w->wr.wr.rdma.remote_addr = 0x20000 + 64 * i;
    w->wr.wr.rdma.rkey = eb.rkey;
    w->dma.num_sge = 1;
    w->dma.length = 64;
    const rxe_sge sge{0x20000 + 64 * i, 64, ea.lkey};
    std::memcpy(shm::send_sges(w), &sge, sizeof sge);
  }
  shm::producer(ea.sq->base).store((prod0 + kBurst) & ea.sq->mask(), std::memory_order_release);
  std::vector<ib_uverbs_wc> wc;
  for (int i = 0; i < 20 && wc.size() < kBurst; ++i) {
    f.run_for(10'000'000);
    const std::vector<ib_uverbs_wc> more = drain(*ea.cq_ring);
    wc.insert(wc.end(), more.begin(), more.end());
  }
  ASSERT_EQ(wc.size(), kBurst);
  for (uint32_t i = 0; i < kBurst; ++i) {
    EXPECT_EQ(wc[i].wr_id, 1000u + i) << i;
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS) << i;
  }
  EXPECT_EQ(std::memcmp(ma.data, mb.data, 64 * kBurst), 0);
  EXPECT_EQ(shm::consumer(ea.sq->base).load(std::memory_order_acquire), (prod0 + kBurst) & ea.sq->mask());
  EXPECT_EQ(f.device(0).pump->counters().send_wqes, kBurst);
  EXPECT_EQ(f.device(0).pump->counters().bad_wqes, 0u);
}

TEST(ShmPump, GarbageWqeCompletesInErrorAndTheDaemonCarriesOn) {
  VirtualFabric f;
  TestClient a(f, 1);
  Memory ma(1 << 16);
  ShmEnd ea = make_end(a, "isoroce0", ma);
  to_rts(a, ea.qpn, rtr(0x100010, "10.0.0.2"));
  rxe_send_wqe w{};
  w.wr.wr_id = 5;
  w.wr.opcode = 200;  // no such opcode
  w.dma.num_sge = 1000;
  post(*ea.sq, w, {});
  f.run_for(10'000'000);
  const std::vector<ib_uverbs_wc> wc = drain(*ea.cq_ring);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 5u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_QP_OP_ERR);
  EXPECT_EQ(f.device(0).pump->counters().bad_wqes, 1u);
}

// The ring stage (ctrl/shm_abi.h, kStampPostTsc): while the engine records post
// events the pump asks the library for stamps; a WQE published at 3 us and taken
// by the pump at 10 us gives a post record that waited 7 us in the ring. A TSC of
// 1 THz (one tick a picosecond, starting at 0) makes the stamps virtual time.
TEST(ShmPump, RingWaitOfAStampedPostIsInThePostRecord) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  Memory ma(1 << 16), mb(1 << 16);
  ShmEnd ea = make_end(a, "isoroce0", ma), eb = make_end(b, "isoroce1", mb);
  to_rts(a, ea.qpn, rtr(eb.qpn, "10.0.0.2"));
  to_rts(b, eb.qpn, rtr(ea.qpn, "10.0.0.1"));
  struct Posts final : trace::Sink {
    std::vector<trace::Record> rs;
    void record(const trace::Record& r) override { rs.push_back(r); }
  } posts;
  f.device(0).pump->set_tsc(0, 1'000'000'000'000);
  f.run_for(10'000'000);
  EXPECT_EQ(shm::trace_flags(ea.sq->base).load(), 0u);  // tracing off: no stamps asked for
  f.device(0).engine().attach_trace(&posts, trace::bit(trace::Event::kPost), 0);
  f.run_for(0);
  EXPECT_EQ(shm::trace_flags(ea.sq->base).load(), shm::kStampPostTsc);
  const sched::Picos taken = f.now();
  rxe_send_wqe w = write_wqe(5, eb.rkey, 0x20000, 64);
  w.iova = taken - 7'000'000;  // the library's stamp: published 7 us ago
  post(*ea.sq, w, {{0x20000, 64, ea.lkey}});
  f.run_for(100'000'000);
  ASSERT_EQ(posts.rs.size(), 1u);
  EXPECT_EQ(posts.rs[0].time, taken);
  EXPECT_EQ(posts.rs[0].b, 7'000'000u);
  EXPECT_EQ(drain(*ea.cq_ring).size(), 1u);
  // A stamp from before the clock started (or garbage in the future) is no wait.
  w.iova = taken + 1'000'000'000'000;
  post(*ea.sq, w, {{0x20000, 64, ea.lkey}});
  f.run_for(100'000'000);
  ASSERT_EQ(posts.rs.size(), 2u);
  EXPECT_EQ(posts.rs[1].b, 0u);
  f.device(0).engine().attach_trace(nullptr, 0, 0);
  f.run_for(0);
  EXPECT_EQ(shm::trace_flags(ea.sq->base).load(), 0u);
}

}  // namespace
}  // namespace isoroce::ctrl::testing
