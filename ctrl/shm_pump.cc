#include "ctrl/shm_pump.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace isoroce::ctrl {
namespace {
constexpr uint32_t kMaxBatch = 64;  // WQEs or CQEs moved per queue per pass
constexpr uint32_t kMaxEntries = 1u << 16;
}  // namespace

std::unique_ptr<ShmQueue> ShmQueue::create(uint32_t min_entries, size_t elem_bytes, bool cq, std::string* error) {
  std::unique_ptr<ShmQueue> q(new ShmQueue());
  if (min_entries == 0 || min_entries >= kMaxEntries) {
    *error = "queue of " + std::to_string(min_entries) + " entries (1.." + std::to_string(kMaxEntries - 1) + ")";
    return nullptr;
  }
  // Room for min_entries: a ring of 2^k holds 2^k - 1.
  uint32_t log2 = 0;
  while ((1u << log2) < min_entries + 1) ++log2;
  q->log2_entries_ = log2;
  q->log2_elem_ = shm::log2_ceil(elem_bytes);
  q->mask_ = (1u << log2) - 1;
  q->bytes_ = shm::queue_bytes(log2, q->log2_elem_, cq);
  q->fd_ = memfd_create("isoroce-queue", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (q->fd_ < 0 || ftruncate(q->fd_, static_cast<off_t>(q->bytes_)) != 0 ||
      fcntl(q->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *error = std::string("queue memfd: ") + std::strerror(errno);
    return nullptr;
  }
  q->base_ = mmap(nullptr, q->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, q->fd_, 0);
  if (q->base_ == MAP_FAILED) {
    q->base_ = nullptr;
    *error = std::string("queue mmap: ") + std::strerror(errno);
    return nullptr;
  }
  shm::header(q->base_)->log2_elem_size = q->log2_elem_;
  shm::header(q->base_)->index_mask = q->mask_;
  return q;
}

ShmQueue::~ShmQueue() {
  if (base_ != nullptr) munmap(base_, bytes_);
  close_fd();
}

void ShmQueue::close_fd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void ShmPump::add_sq(uint32_t qpn, ShmQueue* q, uint32_t max_sge, uint32_t max_inline, const ClientObjects* owner) {
  sqs_.push_back({qpn, q, max_sge, max_inline, false, -1, owner});
  shm::trace_flags(q->base()).store(stamping_ ? shm::kStampPostTsc : 0, std::memory_order_relaxed);
}
void ShmPump::add_rq(uint32_t qpn, ShmQueue* q, uint32_t max_sge, const ClientObjects* owner) {
  rqs_.push_back({qpn, q, max_sge, 0, false, -1, owner});
}
void ShmPump::add_srq(uint32_t srq, ShmQueue* q, uint32_t max_sge, const ClientObjects* owner) {
  rqs_.push_back({srq, q, max_sge, 0, true, -1, owner});
}
void ShmPump::add_cq(uint32_t cq, ShmQueue* q, int eventfd) {
  cqs_.push_back({cq, q, 0, 0, false, eventfd});
  cq_backlog_ = true;  // look at it on the next pass whatever the engine queued before
}

namespace {
// Unconsumed completions in a CQ ring: the consumer index is the
// application's (masked, untrusted), the producer index ours.
uint32_t ring_count(const ShmQueue& q) {
  const uint32_t cons = shm::consumer(q.base()).load(std::memory_order_acquire) & q.mask();
  const uint32_t prod = shm::producer(q.base()).load(std::memory_order_relaxed) & q.mask();
  return (prod - cons) & q.mask();
}
}  // namespace

uint32_t ShmPump::cq_ring_count(uint32_t cq) const {
  for (const Work& w : cqs_)
    if (w.id == cq) return ring_count(*w.q);
  return 0;
}

int ShmPump::replace_cq(uint32_t cq, ShmQueue* to) {
  auto it = std::find_if(cqs_.begin(), cqs_.end(), [&](const Work& w) { return w.id == cq; });
  if (it == cqs_.end()) return EINVAL;
  ShmQueue& from = *it->q;
  const uint32_t n = ring_count(from);
  if (n > to->mask() || to->elem_bytes() < sizeof(ib_uverbs_wc)) return ENOSPC;
  uint32_t cons = shm::consumer(from.base()).load(std::memory_order_acquire) & from.mask();
  for (uint32_t i = 0; i < n; ++i, cons = (cons + 1) & from.mask())
    std::memcpy(to->element(i), from.element(cons), sizeof(ib_uverbs_wc));
  shm::consumer(to->base()).store(0, std::memory_order_relaxed);
  // Pairs with the library's acquire load of producer_index once it maps `to`.
  shm::producer(to->base()).store(n, std::memory_order_release);
  // The arm moves too: taken from the old ring so it cannot fire twice.
  shm::CqNotify* old_nt = from.notify();
  shm::CqNotify* new_nt = to->notify();
  new_nt->solicited_only = old_nt->solicited_only;
  new_nt->armed.store(old_nt->armed.exchange(0, std::memory_order_acq_rel), std::memory_order_release);
  it->q = to;
  cq_backlog_ = true;
  return 0;
}

void ShmPump::retire_recv(uint32_t qpn) {
  for (Work& w : rqs_) {
    if (w.srq || w.id != qpn) continue;
    ShmQueue& q = *w.q;
    const uint32_t c = shm::consumer(q.base()).load(std::memory_order_relaxed) & q.mask();
    // Never past what was read (a completion the RQ did not give cannot free a slot).
    if (c != w.next) shm::consumer(q.base()).store((c + 1) & q.mask(), std::memory_order_release);
    return;
  }
}

void ShmPump::reset_rq(uint32_t qpn) {
  for (Work& w : rqs_)
    if (!w.srq && w.id == qpn) shm::consumer(w.q->base()).store(w.next, std::memory_order_release);
}

void ShmPump::remove_qp(uint32_t qpn) {
  std::erase_if(sqs_, [&](const Work& w) { return w.id == qpn; });
  std::erase_if(rqs_, [&](const Work& w) { return !w.srq && w.id == qpn; });
}
void ShmPump::remove_srq(uint32_t srq) {
  std::erase_if(rqs_, [&](const Work& w) { return w.srq && w.id == srq; });
}
void ShmPump::remove_cq(uint32_t cq) {
  std::erase_if(cqs_, [&](const Work& w) { return w.id == cq; });
}

bool ShmPump::signalled() const {
  if (cq_backlog_) return false;
  for (const auto* v : {&sqs_, &rqs_})
    for (const Work& w : *v)
      if (w.owner == nullptr || !w.owner->doorbell) return false;
  return true;
}

void ShmPump::follow_trace() {
  const bool want = tsc_hz_ != 0 && (engine_.trace_mask() & trace::bit(trace::Event::kPost)) != 0;
  if (want == stamping_) return;
  stamping_ = want;
  for (const Work& w : sqs_)
    shm::trace_flags(w.q->base()).store(want ? shm::kStampPostTsc : 0, std::memory_order_relaxed);
}

// A stamp is the application's: anything before the clock started, or garbage, is 0.
sched::Picos ShmPump::stamp_to_picos(uint64_t tsc) const {
  if (tsc <= tsc_start_) return 0;
  const unsigned __int128 ps = static_cast<unsigned __int128>(tsc - tsc_start_) * 1'000'000'000'000u / tsc_hz_;
  return ps >= sched::kNever ? 0 : static_cast<sched::Picos>(ps);
}

unsigned ShmPump::poll(sched::Picos now) {
  follow_trace();
  unsigned n = 0;
  for (const Work& w : sqs_) n += pump_send(now, w);
  for (Work& w : rqs_) n += pump_recv(now, w);
  // Most passes complete nothing (an application signals one WR in many): the
  // CQs are looked at only when the engine queued a completion since the last
  // look, or a CQ ring was too full, or a batch too short, to take them all.
  const uint64_t queued = engine_.completions_queued();
  if (queued != seen_completions_ || cq_backlog_) {
    seen_completions_ = queued;
    cq_backlog_ = false;
    for (const Work& w : cqs_) n += pump_cq(w);
  }
  return n;
}

unsigned ShmPump::pump_send(sched::Picos now, const Work& w) {
  ShmQueue& q = *w.q;
  // Pairs with the library's release store after it wrote the element.
  const uint32_t prod = shm::producer(q.base()).load(std::memory_order_acquire) & q.mask();
  uint32_t cons = shm::consumer(q.base()).load(std::memory_order_relaxed) & q.mask();
  unsigned moved = 0;
  if (cons == prod) return 0;
  const size_t tail_bytes = q.elem_bytes() - sizeof(shm::SendWqe);
  if (scratch_.size() < tail_bytes) scratch_.resize(tail_bytes);
  // Per burst, not per WQE: the QP is the owner's (its other handles, AH and
  // memory window, are checked per WQE: they come from the ring).
  const bool own_qp = w.owner->qps.count(w.id) != 0;
  while (cons != prod && moved < kMaxBatch) {
    // Copy out first: the application may change the element while we look.
    // Only what the WQE uses is copied (its 208 bytes, then its SGEs or its
    // inline bytes), each byte once, before it is checked.
    const uint8_t* el = q.element(cons);
    shm::SendWqe wqe;  // the C layout of rxe_send_wqe (shm_abi.h)
    std::memcpy(&wqe, el, sizeof wqe);
    const uint8_t* tail = el + sizeof wqe;  // shared memory: read each field once
    transport::SendWr wr;
    wr.wr_id = wqe.wr.wr_id;
    wr.opcode = static_cast<ibv_wr_opcode>(wqe.wr.opcode);
    wr.send_flags = wqe.wr.send_flags;
    wr.imm_data = wqe.wr.ex.imm_data;
    bool ok = wqe.wr.opcode <= IBV_WR_SEND_WITH_INV;  // through LOCAL_INV, BIND_MW, SEND_WITH_INV
    if (wr.opcode == IBV_WR_BIND_MW) {
      const auto& m = wqe.wr.wr.mw;
      wr.bind = verbs::MwBind{m.mw_rkey, m.rkey, m.mr_lkey, m.addr, m.length, m.access};
    }
    if (wr.opcode == IBV_WR_LOCAL_INV || wr.opcode == IBV_WR_SEND_WITH_INV) wr.invalidate_rkey = wqe.wr.ex.invalidate_rkey;
    if (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.remote_addr = wqe.wr.wr.atomic.remote_addr;
      wr.rkey = wqe.wr.wr.atomic.rkey;
      wr.compare_add = wqe.wr.wr.atomic.compare_add;
      wr.swap = wqe.wr.wr.atomic.swap;
    } else {
      wr.remote_addr = wqe.wr.wr.rdma.remote_addr;
      wr.rkey = wqe.wr.wr.rdma.rkey;
    }
    wr.ah = wqe.wr.wr.ud.ah_num;
    wr.remote_qpn = wqe.wr.wr.ud.remote_qpn;
    wr.remote_qkey = wqe.wr.wr.ud.remote_qkey;
    if (stamping_) [[unlikely]] wr.app_post = stamp_to_picos(wqe.iova);
    sges_.clear();
    if (wr.send_flags & IBV_SEND_INLINE) {
      // The bytes are in the element: the engine copies them during post_send.
      const uint32_t len = wqe.dma.length;
      ok = ok && len <= w.max_inline && len <= tail_bytes;
      if (ok && len) {
        std::memcpy(scratch_.data(), tail, len);
        sges_.push_back({reinterpret_cast<uint64_t>(scratch_.data()), len, 0});
      }
    } else {
      const uint32_t nsge = wqe.dma.num_sge;
      ok = ok && nsge <= w.max_sge && nsge * sizeof(rxe_sge) <= tail_bytes;
      for (uint32_t i = 0; ok && i < nsge; ++i) {
        rxe_sge s;
        std::memcpy(&s, tail + i * sizeof(rxe_sge), sizeof s);
        sges_.push_back({s.addr, s.length, s.lkey});
      }
    }
    // The owner's handles, as for the socket's post_send (another client's AH is refused).
    const char* why = "";
    ok = ok && own_qp && check_send_wr_handles(*w.owner, wr, sges_, InlineSource::kDaemon, &why) == 0;
    int rc = ok ? engine_.post_send(now, wire::Qpn(w.id), wr) : EINVAL;
    // Garbage (the library validates what it posts): the WR completes with
    // IBV_WC_LOC_QP_OP_ERR and the QP goes to ERR, so the application learns
    // of it instead of waiting for a completion that never comes.
    if (rc == EINVAL) rc = engine_.post_malformed_send(now, wire::Qpn(w.id), wqe.wr.wr_id) == ENOMEM ? ENOMEM : EINVAL;
    if (rc == ENOMEM) break;  // the engine's send queue is full: try again next pass
    if (rc != 0) ++counters_.bad_wqes;
    else ++counters_.send_wqes;
    cons = (cons + 1) & q.mask();
    ++moved;
  }
  // Pairs with the library's acquire load when it checks for room.
  if (moved) shm::consumer(q.base()).store(cons, std::memory_order_release);
  return moved;
}

unsigned ShmPump::pump_recv(sched::Picos now, Work& w) {
  ShmQueue& q = *w.q;
  const uint32_t prod = shm::producer(q.base()).load(std::memory_order_acquire) & q.mask();
  uint32_t cons = w.srq ? shm::consumer(q.base()).load(std::memory_order_relaxed) & q.mask() : w.next;
  uint32_t dropped = 0;  // RQ: WQEs gone without a completion
  unsigned moved = 0;
  const size_t tail_bytes = q.elem_bytes() - sizeof(shm::RecvWqe);
  while (cons != prod && moved < kMaxBatch) {
    // As pump_send: the WQE, then each SGE, copied out once before checking.
    const uint8_t* el = q.element(cons);
    shm::RecvWqe wqe;  // the C layout of rxe_recv_wqe
    std::memcpy(&wqe, el, sizeof wqe);
    const uint8_t* tail = el + sizeof wqe;
    const uint32_t nsge = wqe.dma.num_sge;
    bool ok = nsge <= w.max_sge && nsge * sizeof(rxe_sge) <= tail_bytes;
    sges_.clear();
    for (uint32_t i = 0; ok && i < nsge; ++i) {
      rxe_sge s;
      std::memcpy(&s, tail + i * sizeof(rxe_sge), sizeof s);
      sges_.push_back({s.addr, s.length, s.lkey});
    }
    const char* why = "";
    ok = ok && check_recv_wr(*w.owner, w.id, w.srq ? std::optional<uint32_t>(w.id) : std::nullopt, &why) == 0;
    transport::RecvWr wr;
    wr.wr_id = wqe.wr_id;
    wr.sg_list = sges_;
    int rc = EINVAL;
    if (ok) rc = w.srq ? engine_.post_srq_recv(w.id, wr) : engine_.post_recv(wire::Qpn(w.id), wr);
    // As for sends; an SRQ has no error state, so garbage there is dropped (counted).
    if (rc == EINVAL && !w.srq) {
      const int m = engine_.post_malformed_recv(now, wire::Qpn(w.id), wqe.wr_id);
      if (m == ENOMEM) break;
      if (m != 0) ++dropped;  // refused outright: no completion will retire it
      ++counters_.bad_wqes;
    } else if (rc == ENOMEM) {
      break;
    } else if (rc != 0) {
      ++counters_.bad_wqes;
    } else {
      ++counters_.recv_wqes;
    }
    cons = (cons + 1) & q.mask();
    ++moved;
  }
  if (!moved) return 0;
  if (w.srq) {
    shm::consumer(q.base()).store(cons, std::memory_order_release);
  } else {
    w.next = cons;
    for (uint32_t i = 0; i < dropped; ++i) retire_recv(w.id);
  }
  return moved;
}

unsigned ShmPump::pump_cq(const Work& w) {
  ShmQueue& q = *w.q;
  const uint32_t cons = shm::consumer(q.base()).load(std::memory_order_acquire) & q.mask();
  uint32_t prod = shm::producer(q.base()).load(std::memory_order_relaxed) & q.mask();
  const uint32_t room = (cons - prod - 1) & q.mask();
  if (room == 0) {  // the application is behind: completions wait in the engine's CQ, if any
    if (engine_.cq_queued(w.id) != 0) cq_backlog_ = true;
    return 0;
  }
  wcs_.resize(std::min(room, kMaxBatch));
  const int n = engine_.poll_cq(w.id, wcs_);
  if (n <= 0) return 0;
  // A full batch may have left more behind (a small ring fills with one).
  if (static_cast<size_t>(n) == wcs_.size() && engine_.cq_queued(w.id) != 0) cq_backlog_ = true;
  bool solicited_or_error = false;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs_[static_cast<size_t>(i)];
    ib_uverbs_wc u{};
    u.wr_id = wc.wr_id;
    u.status = wc.status;
    u.opcode = wc.opcode;
    u.vendor_err = wc.vendor_err;
    u.byte_len = wc.byte_len;
    u.ex.imm_data = wc.imm_data;
    u.qp_num = wc.qp_num;
    u.src_qp = wc.src_qp;
    u.wc_flags = wc.wc_flags;
    u.pkey_index = wc.pkey_index;
    u.slid = wc.slid;
    u.sl = wc.sl;
    u.dlid_path_bits = wc.dlid_path_bits;
    u.port_num = 1;
    std::memcpy(q.element(prod), &u, sizeof u);
    prod = (prod + 1) & q.mask();
    if (wc.opcode & IBV_WC_RECV) retire_recv(wc.qp_num);  // RQ receives (an SRQ's are retired when taken)
    solicited_or_error |= wc.status != IBV_WC_SUCCESS || (wc.wc_flags & IBV_WC_WITH_IMM);
  }
  // Pairs with the library's acquire load of producer_index in ibv_poll_cq.
  shm::producer(q.base()).store(prod, std::memory_order_release);
  counters_.cqes += static_cast<uint64_t>(n);
  shm::CqNotify* nt = q.notify();
  // Store-load ordering: the library arms, then re-polls; we publish, then
  // read armed. Without a full fence the load may pass the store on x86 and
  // a wakeup be lost (found by the verbs library's -e pingpong tests).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (w.eventfd >= 0 && nt->armed.load(std::memory_order_acquire) &&
      (!nt->solicited_only || solicited_or_error) && nt->armed.exchange(0, std::memory_order_acq_rel)) {
    const uint64_t one = 1;
    (void)!write(w.eventfd, &one, sizeof one);
    ++counters_.wakeups;
  }
  return static_cast<unsigned>(n);
}

}  // namespace isoroce::ctrl
