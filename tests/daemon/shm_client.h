// A client of the daemon's shared-memory queues (ctrl/shm_abi.h) that writes
// the rings itself: for the shm tests and isoroce-bench-daemon's shm path.
#pragma once

#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ctrl/shm_abi.h"
#include "tests/daemon/harness.h"

namespace isoroce::test {

inline constexpr uint32_t kShmAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC;

struct Ring {
  void* base = nullptr;
  uint32_t log2_entries = 0, log2_elem = 0;
  uint32_t mask() const { return (1u << log2_entries) - 1; }
  uint8_t* at(uint32_t i) const { return shm::element(base, i & mask(), log2_elem); }
};

inline Ring map_ring(int fd, const json& geo, bool cq) {
  Ring r;
  r.log2_entries = geo["log2_entries"].get<uint32_t>();
  r.log2_elem = geo["log2_elem"].get<uint32_t>();
  r.base = mmap(nullptr, shm::queue_bytes(r.log2_entries, r.log2_elem, cq), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return r;
}

struct ShmEnd {
  std::unique_ptr<Verbs> v;
  uint32_t cq = 0, qpn = 0;
  Ring cq_ring, sq, rq;
  int evfd = -1;
  Buffer* buf = nullptr;
};

inline ShmEnd make_end(const std::string& socket, const std::string& dev, bool events = false, uint32_t depth = 32) {
  ShmEnd e;
  e.v = std::make_unique<Verbs>(socket, dev);
  std::vector<int> fds;
  json r = e.v->client().call({{"op", "create_cq"}, {"cqe", 2 * depth}, {"shm", true}, {"events", events}}, {}, &fds);
  if (!r["ok"].get<bool>() || fds.size() != (events ? 2u : 1u)) return e;
  e.cq = r["cq"].get<uint32_t>();
  e.cq_ring = map_ring(fds[0], r, true);
  if (events) e.evfd = fds[1];
  fds.clear();
  r = e.v->client().call({{"op", "create_qp"}, {"pd", e.v->pd()}, {"send_cq", e.cq}, {"recv_cq", e.cq}, {"type", "rc"},
                          {"max_send_wr", depth}, {"max_recv_wr", depth}, {"max_send_sge", 2}, {"max_recv_sge", 2},
                          {"max_inline_data", 128}, {"shm", true}},
                         {}, &fds);
  if (!r["ok"].get<bool>() || fds.size() != 2u) return e;
  e.qpn = r["qpn"].get<uint32_t>();
  e.sq = map_ring(fds[0], r["sq"], false);
  e.rq = map_ring(fds[1], r["rq"], false);
  e.buf = e.v->reg(1 << 20, kShmAll);
  return e;
}

inline void post_send(Ring& sq, uint64_t wr_id, ibv_wr_opcode op, uint64_t addr, uint32_t len, uint32_t lkey,
               uint64_t remote = 0, uint32_t rkey = 0, uint32_t flags = IBV_SEND_SIGNALED) {
  const uint32_t prod = shm::producer(sq.base).load(std::memory_order_relaxed);
  while (((prod + 1) & sq.mask()) == shm::consumer(sq.base).load(std::memory_order_acquire))
    std::this_thread::yield();  // full: the daemon makes room
  auto* w = reinterpret_cast<shm::SendWqe*>(sq.at(prod));
  std::memset(w, 0, sizeof *w);
  w->wr.wr_id = wr_id;
  w->wr.opcode = op;
  w->wr.send_flags = flags;
  w->wr.wr.rdma.remote_addr = remote;
  w->wr.wr.rdma.rkey = rkey;
  w->dma.num_sge = 1;
  w->dma.length = len;
  *shm::send_sges(w) = {addr, len, lkey};
  shm::producer(sq.base).store((prod + 1) & sq.mask(), std::memory_order_release);
}

inline void post_recv(Ring& rq, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey) {
  const uint32_t prod = shm::producer(rq.base).load(std::memory_order_relaxed);
  auto* w = reinterpret_cast<shm::RecvWqe*>(rq.at(prod));
  std::memset(w, 0, sizeof *w);
  w->wr_id = wr_id;
  w->dma.num_sge = 1;
  w->dma.length = len;
  *shm::recv_sges(w) = {addr, len, lkey};
  shm::producer(rq.base).store((prod + 1) & rq.mask(), std::memory_order_release);
}

inline std::vector<ib_uverbs_wc> poll(Ring& cq, size_t n, int timeout_ms = 5000) {
  std::vector<ib_uverbs_wc> out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < n && std::chrono::steady_clock::now() < until) {
    const uint32_t prod = shm::producer(cq.base).load(std::memory_order_acquire);
    uint32_t cons = shm::consumer(cq.base).load(std::memory_order_relaxed);
    while (cons != prod) {
      ib_uverbs_wc wc;
      std::memcpy(&wc, cq.at(cons), sizeof wc);
      out.push_back(wc);
      cons = (cons + 1) & cq.mask();
    }
    shm::consumer(cq.base).store(cons, std::memory_order_release);
    if (out.size() < n) std::this_thread::yield();
  }
  return out;
}

}  // namespace isoroce::test
