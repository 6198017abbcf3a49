// The data path: ibv_post_send / ibv_post_recv / ibv_post_srq_recv write
// elements into the shared-memory rings and ibv_poll_cq reads completions out
// of the CQ ring (ctrl/shm_abi.h) — loads and stores, no system call. As in
// rdma-core's providers/rxe/rxe.c: validate, check for room, build the WQE,
// advance the producer; a failure returns a positive errno with *bad_wr at
// the first work request not posted.
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "transport/verbs/wr_check.h"
#include "verbs_compat/internal.h"

namespace isoroce::vc {
namespace {

static_assert(sizeof(ib_uverbs_wc) <= 64);

using verbs::is_atomic;

// The shared checks of a WR against its queue (transport/verbs/wr_check.h, the
// same function the engine runs), plus what only the library can see: the
// QP's state here, the SGE array itself, the AH's context, and one SGE for an
// atomic (the ring carries an atomic's 8 bytes as one SGE).
int validate_send(const Qp& q, const ibv_send_wr& wr, uint64_t* total) {
  const ibv_qp& qp = q.qp;
  if (qp.state == IBV_QPS_RESET || qp.state == IBV_QPS_INIT || qp.state == IBV_QPS_RTR) return EINVAL;
  if (wr.num_sge < 0 || (wr.num_sge > 0 && wr.sg_list == nullptr)) return EINVAL;
  if (static_cast<uint32_t>(wr.num_sge) > q.cap.max_send_sge) return EINVAL;  // before summing sg_list
  uint64_t len = 0;
  for (int i = 0; i < wr.num_sge; ++i) len += wr.sg_list[i].length;
  const verbs::SendQueueLimits limits{.qp_type = qp.qp_type, .max_send_sge = q.cap.max_send_sge,
                                      .max_inline_data = q.cap.max_inline_data, .mtu = q.mtu_bytes};
  const verbs::SendWrShape shape{.opcode = wr.opcode, .send_flags = wr.send_flags,
                                 .num_sge = static_cast<size_t>(wr.num_sge), .length = len,
                                 .remote_addr = wr.wr.atomic.remote_addr};
  if (int rc = verbs::check_send_wr(limits, shape)) return rc;
  if (wr.opcode == IBV_WR_BIND_MW) {
    // The window and the MR are this context's (the engine checks the rest: PD, access, range).
    const ibv_mw* mw = wr.bind_mw.mw;
    const ibv_mr* mr = wr.bind_mw.bind_info.mr;
    if (mw == nullptr || mw->context != qp.context || (wr.bind_mw.bind_info.length && (mr == nullptr || mr->context != qp.context)))
      return EINVAL;
  }
  if (verbs::is_atomic(wr.opcode) && wr.num_sge != 1) return EINVAL;
  if (qp.qp_type == IBV_QPT_UD && (wr.wr.ud.ah == nullptr || wr.wr.ud.ah->context != qp.context)) return EINVAL;
  *total = len;
  return 0;
}

// The lines of a WQE the daemon reads (ShmPump::pump_send): the work
// request's head (every field it takes from wr.wr is in the first 64 bytes),
// and iova through dma (152..208, then the SGEs or inline bytes). The rest
// (ud.av and the tail of the union, status, state: 64..152) is never written,
// so it stays the zeros of the new ring, and a post writes three 64-byte
// lines of the element instead of four: one cross-core miss fewer for the
// application's stores and for the worker's copy of the WQE.
constexpr size_t kWqeHeadBytes = 64;
static_assert(offsetof(rxe_send_wr, wr.mw.access) + sizeof(uint32_t) <= kWqeHeadBytes);
static_assert(offsetof(rxe_send_wr, wr.atomic.rkey) + sizeof(uint32_t) <= kWqeHeadBytes);
static_assert(offsetof(rxe_send_wr, wr.ud.ah_num) + sizeof(uint32_t) <= kWqeHeadBytes);
static_assert(offsetof(rxe_send_wr, wr.rdma.rkey) + sizeof(uint32_t) <= kWqeHeadBytes);
constexpr size_t kWqeTailFrom = offsetof(shm::SendWqe, iova);
static_assert(kWqeTailFrom >= kWqeHeadBytes && kWqeTailFrom < offsetof(shm::SendWqe, dma));

void build_send(const Qp& q, const ibv_send_wr& wr, uint32_t total, uint8_t* el) {
  auto* w = reinterpret_cast<shm::SendWqe*>(el);
  std::memset(el, 0, kWqeHeadBytes);
  std::memset(el + kWqeTailFrom, 0, sizeof *w - kWqeTailFrom);
  w->wr.wr_id = wr.wr_id;
  w->wr.opcode = wr.opcode;
  w->wr.send_flags = wr.send_flags;
  if (wr.opcode == IBV_WR_SEND_WITH_IMM || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) w->wr.ex.imm_data = wr.imm_data;
  if (wr.opcode == IBV_WR_LOCAL_INV || wr.opcode == IBV_WR_SEND_WITH_INV) w->wr.ex.invalidate_rkey = wr.invalidate_rkey;
  if (wr.opcode == IBV_WR_BIND_MW) {
    const ibv_mw_bind_info& b = wr.bind_mw.bind_info;
    w->wr.wr.mw.addr = b.addr;
    w->wr.wr.mw.length = b.length;
    w->wr.wr.mw.mr_lkey = b.length ? b.mr->lkey : 0;
    w->wr.wr.mw.mw_rkey = wr.bind_mw.mw->rkey;
    w->wr.wr.mw.rkey = wr.bind_mw.rkey;
    w->wr.wr.mw.access = b.mw_access_flags;
  } else if (is_atomic(wr.opcode)) {
    w->wr.wr.atomic.remote_addr = wr.wr.atomic.remote_addr;
    w->wr.wr.atomic.compare_add = wr.wr.atomic.compare_add;
    w->wr.wr.atomic.swap = wr.wr.atomic.swap;
    w->wr.wr.atomic.rkey = wr.wr.atomic.rkey;
  } else if (q.qp.qp_type == IBV_QPT_UD) {
    w->wr.wr.ud.remote_qpn = wr.wr.ud.remote_qpn;
    w->wr.wr.ud.remote_qkey = wr.wr.ud.remote_qkey;
    w->wr.wr.ud.ah_num = wr.wr.ud.ah->handle;
  } else {
    w->wr.wr.rdma.remote_addr = wr.wr.rdma.remote_addr;
    w->wr.wr.rdma.rkey = wr.wr.rdma.rkey;
  }
  w->dma.length = total;
  w->dma.resid = total;
  if (wr.send_flags & IBV_SEND_INLINE) {
    uint8_t* p = shm::send_inline(w);  // dma.inline_data, C layout
    for (int i = 0; i < wr.num_sge; ++i) {
      std::memcpy(p, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
      p += wr.sg_list[i].length;
    }
  } else {
    w->dma.num_sge = static_cast<uint32_t>(wr.num_sge);
    rxe_sge* sge = shm::send_sges(w);
    for (int i = 0; i < wr.num_sge; ++i) {
      sge[i].addr = wr.sg_list[i].addr;
      sge[i].length = wr.sg_list[i].length;
      sge[i].lkey = wr.sg_list[i].lkey;
    }
  }
}

void build_recv(const ibv_recv_wr& wr, uint8_t* el) {
  auto* w = reinterpret_cast<shm::RecvWqe*>(el);
  std::memset(w, 0, sizeof *w);
  w->wr_id = wr.wr_id;
  uint32_t total = 0;
  w->dma.num_sge = static_cast<uint32_t>(wr.num_sge);
  rxe_sge* sge = shm::recv_sges(w);
  for (int i = 0; i < wr.num_sge; ++i) {
    sge[i].addr = wr.sg_list[i].addr;
    sge[i].length = wr.sg_list[i].length;
    sge[i].lkey = wr.sg_list[i].lkey;
    total += wr.sg_list[i].length;
  }
  w->dma.length = total;
  w->dma.resid = total;
}

// Posts a chain of receive WRs into a RQ/SRQ ring. The ring holds the
// receives not completed yet (the daemon retires a QP's receive when it
// completes, ctrl/shm_pump.h): max_wr of them is a full queue, ENOMEM as rxe.
int post_recv_ring(const Context& ctx, Ring& ring, uint32_t max_sge, uint32_t max_wr, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  // Own index relaxed; the daemon's acquire (pairs with its release after it consumed).
  uint32_t prod = shm::producer(ring.base).load(std::memory_order_relaxed) & ring.mask;
  uint32_t cons = shm::consumer(ring.base).load(std::memory_order_acquire) & ring.mask;
  const uint32_t start = prod;
  int rc = 0;
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > max_sge || (wr->num_sge && !wr->sg_list)) {
      rc = EINVAL;
      break;
    }
    if (((prod - cons) & ring.mask) >= max_wr) {
      cons = shm::consumer(ring.base).load(std::memory_order_acquire) & ring.mask;
      if (((prod - cons) & ring.mask) >= max_wr) {
        rc = ENOMEM;
        break;
      }
    }
    build_recv(*wr, ring.at(prod));
    prod = (prod + 1) & ring.mask;
  }
  // Pairs with the daemon's acquire load of producer_index before it reads the elements.
  if (prod != start) {
    shm::producer(ring.base).store(prod, std::memory_order_release);
    ring_doorbell(ctx);
  }
  if (rc) *bad_wr = wr;
  return rc;
}

}  // namespace

bool membarrier_registered() {
  // Once per process; the worker's MEMBARRIER_CMD_GLOBAL_EXPEDITED reaches
  // only the threads of registered processes.
  static const bool registered = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  return registered;
}

void ring_doorbell_slow(const Context& c) {
  // Non-blocking: a full counter means the worker has a wakeup pending anyway.
  const uint64_t one = 1;
  (void)!write(c.bell_fd, &one, sizeof one);
}

void stamp_posts_slow(const Ring& sq, uint32_t from, uint32_t to) {
#if defined(__x86_64__)
  const uint64_t tsc = __rdtsc();
  for (uint32_t i = from; i != to; i = (i + 1) & sq.mask) reinterpret_cast<shm::SendWqe*>(sq.at(i))->iova = tsc;
#else
  (void)sq, (void)from, (void)to;  // no TSC the daemon shares: no ring stage
#endif
}

int post_one_send(Qp& q, const ibv_send_wr& wr, uint32_t* prod, uint32_t* cons) {
  Ring& ring = q.sq;
  uint64_t total = 0;
  if (int rc = validate_send(q, wr, &total)) return rc;
  if (((*prod + 1) & ring.mask) == *cons) {
    *cons = shm::consumer(ring.base).load(std::memory_order_acquire) & ring.mask;
    if (((*prod + 1) & ring.mask) == *cons) return ENOMEM;
  }
  build_send(q, wr, static_cast<uint32_t>(total), ring.at(*prod));
  *prod = (*prod + 1) & ring.mask;
  return 0;
}

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  Qp& q = *qp_of(ibqp);
  std::lock_guard lock(q.sq_mu);
  Ring& ring = q.sq;
  // Own index relaxed; the daemon's acquire (pairs with its release after it consumed).
  uint32_t prod = shm::producer(ring.base).load(std::memory_order_relaxed) & ring.mask;
  uint32_t cons = shm::consumer(ring.base).load(std::memory_order_acquire) & ring.mask;
  const uint32_t start = prod;
  int rc = 0;
  for (; wr; wr = wr->next)
    if ((rc = post_one_send(q, *wr, &prod, &cons)) != 0) break;
  // Pairs with the daemon's acquire load of producer_index (ShmPump::pump_send).
  if (prod != start) {
    stamp_posts(ring, start, prod);
    shm::producer(ring.base).store(prod, std::memory_order_release);
    ring_doorbell(*context_of(ibqp->context));
    prefetch_next_wqe(ring, prod);
  }
  if (rc) *bad_wr = wr;
  return rc;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Qp& q = *qp_of(ibqp);
  if (!q.has_rq || ibqp->state == IBV_QPS_RESET) {
    *bad_wr = wr;
    return EINVAL;
  }
  std::lock_guard lock(q.rq_mu);
  return post_recv_ring(*context_of(ibqp->context), q.rq, q.cap.max_recv_sge, std::min(q.cap.max_recv_wr, q.rq.mask), wr, bad_wr);
}

int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Srq& s = *srq_of(ibsrq);
  std::lock_guard lock(s.mu);
  return post_recv_ring(*context_of(ibsrq->context), s.ring, s.attr.max_sge, s.ring.mask, wr, bad_wr);
}

int poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
  Cq& cq = *cq_of(ibcq);
  if (num_entries < 0) return -EINVAL;
  std::unique_lock lock(cq.mu);
  Ring& ring = cq.ring;
  uint32_t cons = shm::consumer(ring.base).load(std::memory_order_relaxed) & ring.mask;
  // Pairs with the daemon's release store after it wrote the completions.
  const uint32_t prod = shm::producer(ring.base).load(std::memory_order_acquire) & ring.mask;
  int n = 0;
  while (n < num_entries && cons != prod) {
    ib_uverbs_wc u;
    std::memcpy(&u, ring.at(cons), sizeof u);
    ibv_wc& w = wc[n++];
    w.wr_id = u.wr_id;
    w.status = static_cast<ibv_wc_status>(u.status);
    w.opcode = static_cast<ibv_wc_opcode>(u.opcode);
    w.vendor_err = u.vendor_err;
    w.byte_len = u.byte_len;
    w.imm_data = u.ex.imm_data;
    w.qp_num = u.qp_num;
    w.src_qp = u.src_qp;
    w.wc_flags = u.wc_flags;
    w.pkey_index = u.pkey_index;
    w.slid = u.slid;
    w.sl = u.sl;
    w.dlid_path_bits = u.dlid_path_bits;
    cons = (cons + 1) & ring.mask;
  }
  if (n) {
    // Pairs with the daemon's acquire load when it checks for room.
    shm::consumer(ring.base).store(cons, std::memory_order_release);
    cq.empty_polls = 0;
    return n;
  }
  const Backoff b = note_empty_poll(cq);
  lock.unlock();
  back_off(b);
  return 0;
}

// Idle is cheap (DESIGN.md): an application spinning on an empty CQ gives
// the CPU away now and then, so it cannot starve the daemon on a small box.
Backoff note_empty_poll(Cq& cq) {
  ++cq.empty_polls;
  if (cq.empty_polls > 200000) return Backoff::kSleep;
  if (cq.empty_polls > 256) return Backoff::kYield;
  return Backoff::kNone;
}

void back_off(Backoff b) {
  if (b == Backoff::kSleep) {
    const timespec ts{0, 20000};
    nanosleep(&ts, nullptr);
  } else if (b == Backoff::kYield) {
    sched_yield();
  }
}

int req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  Cq& cq = *cq_of(ibcq);
  // ibv_resize_cq replaces the ring (and its notify block) under mu.
  std::lock_guard lock(cq.mu);
  cq.notify->solicited_only = solicited_only ? 1 : 0;
  // seq_cst: the arm must be visible before this thread's next look at
  // producer_index (a completion the daemon writes concurrently either sees
  // armed or is found by the application's next poll).
  cq.notify->armed.store(1, std::memory_order_seq_cst);
  return 0;
}

}  // namespace isoroce::vc
