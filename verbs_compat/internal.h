// libisoroce-verbs internals: the objects behind the ibv_* handles the library
// hands out. Each embeds the public libibverbs struct, so the pointer an
// application holds converts back with container_of arithmetic (as rdma-core
// providers do with verbs_context / verbs_cq).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ctrl/client.h"
#include "ctrl/shm_abi.h"
#include "verbs_compat/memreg.h"

namespace isoroce::vc {

using nlohmann::json;

// One line on stderr, "isoroce-verbs: ...". Failures always; debug lines only
// with ISOROCE_VERBS_DEBUG set.
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

template <typename Outer, typename Inner>
Outer* outer_of(Inner* inner, Inner Outer::*member) {
  const auto off = reinterpret_cast<size_t>(&(static_cast<Outer*>(nullptr)->*member));
  return reinterpret_cast<Outer*>(reinterpret_cast<char*>(inner) - off);
}

// A device as the daemon describes it ("devices"), shown like rxe.
struct Device {
  ibv_device dev{};
  int index = 0;
  std::string name;
  uint8_t gid[16] = {};
  uint64_t guid_be = 0;  // from the MAC (EUI-64), network order
  ibv_mtu active_mtu = IBV_MTU_1024;
  double link_gbps = 0;
  bool link_up = true;
};
Device* device_of(ibv_device* d);

struct Context {
  verbs_context vctx{};  // the application holds &vctx.context
  std::unique_ptr<ctrl::Client> client;
  std::mutex mu;  // one request at a time on the connection
  Device* dev = nullptr;
  json info;  // "open" reply's device

  // The application's objects by daemon handle / QPN (async events name them).
  std::mutex objects_mu;
  std::map<uint32_t, struct Qp*> qps;
  std::map<uint32_t, struct Cq*> cqs;
  std::map<uint32_t, struct Srq*> srqs;
  std::mutex async_mu;
  std::deque<json> async_pending;  // taken from the daemon, not yet handed out
  // The worker's doorbell (ctrl/shm_abi.h): its page, mapped read-only, and
  // this context's eventfd; nullptr / -1 when the daemon gave none (or
  // ISOROCE_VERBS_DOORBELL=0).
  const shm::DoorbellPage* bell = nullptr;
  int bell_fd = -1;
  // The page offers kBellMembarrier and this process registered for
  // MEMBARRIER_CMD_GLOBAL_EXPEDITED (with ISOROCE_VERBS_MEMBARRIER=1): a
  // post needs no fence while the page keeps the flag (ring_doorbell).
  bool bell_membarrier = false;

  // A request; a failed reply is logged (op and error) unless quiet.
  json call(const json& req, std::span<const int> fds = {}, std::vector<int>* received = nullptr, bool quiet = false);
};
Context* context_of(ibv_context* c);
// errno from a failed reply (EIO if it has none).
int reply_errno(const json& r);

// A mapped queue file (ctrl/shm_abi.h).
struct Ring {
  void* base = nullptr;
  size_t bytes = 0;
  uint32_t log2_entries = 0, log2_elem = 0, mask = 0;
  uint8_t* at(uint32_t i) const { return shm::element(base, i & mask, log2_elem); }
  size_t elem_bytes() const { return size_t{1} << log2_elem; }
};
// The ring stage of a trace (ctrl/shm_abi.h, kStampPostTsc): while the daemon asks
// for it, the WQEs [from, to) of the SQ get the TSC of their publication in their
// iova. Off, one relaxed load and a predicted branch per post call.
void stamp_posts_slow(const Ring& sq, uint32_t from, uint32_t to);
inline void stamp_posts(const Ring& sq, uint32_t from, uint32_t to) {
  if (!(shm::trace_flags(sq.base).load(std::memory_order_relaxed) & shm::kStampPostTsc)) [[likely]]
    return;
  stamp_posts_slow(sq, from, to);
}
// After a post is published (producer_index stored): wakes the worker if it
// sleeps. The fence pairs with the worker's between its flag and its last
// look at the rings (Worker::idle_wait); awake, no system call. With
// bell_membarrier the worker's membarrier() is that fence for both sides
// (ctrl/shm_abi.h): only the compiler must keep the store before the load.
void ring_doorbell_slow(const Context& c);
inline void ring_doorbell(const Context& c) {
  if (c.bell == nullptr) return;
  if (c.bell_membarrier && (c.bell->flags.load(std::memory_order_relaxed) & shm::kBellMembarrier)) [[likely]]
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
  if (c.bell->asleep.load(std::memory_order_relaxed)) [[unlikely]]
    ring_doorbell_slow(c);
}
// This process is registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED (the first
// call registers it; false if the kernel refuses).
bool membarrier_registered();
// After a publish: asks for the lines of the next free SQ slot in the
// exclusive state (prefetchw: the head, iova..dma, the SGEs), so the next
// post's stores find them here instead of waiting, in the store buffer, for
// the worker's copies to be invalidated. The worker reads that slot only
// after the next publish.
inline void prefetch_next_wqe(const Ring& sq, uint32_t next) {
#if defined(__x86_64__)
  const uint8_t* el = sq.at(next);
  asm volatile("prefetchw %0" ::"m"(el[0]));
  asm volatile("prefetchw %0" ::"m"(el[128]));
  asm volatile("prefetchw %0" ::"m"(el[192]));
#else
  (void)sq, (void)next;
#endif
}
// Maps fd (and closes it) with the geometry in geo; false on failure.
bool map_ring(int fd, const json& geo, bool cq, Ring* r);
void unmap_ring(Ring* r);

struct Pd {
  ibv_pd pd{};
};
struct Mr {
  ibv_mr mr{};
  MrPages pages;  // released after dereg_mr (memreg.h)
  uint64_t iova = 0;    // as registered (ibv_reg_mr_iova); ibv_rereg_mr keeps it unless the translation changes
  uint32_t access = 0;  // as sent to the daemon
};
struct Ah {
  ibv_ah ah{};
};

// ibv_cq is the head of ibv_cq_ex (as in rdma-core's verbs_cq): one object
// serves ibv_poll_cq and the extended polling API (cq_ex.cc) on one ring.
struct Cq {
  union {
    ibv_cq_ex cq_ex{};
    ibv_cq cq;
  };
  // ibv_resize_cq replaces ring and notify under mu: touch them only holding mu.
  Ring ring;
  shm::CqNotify* notify = nullptr;
  int evfd = -1;  // the daemon's eventfd, with a completion channel
  std::mutex mu;  // ibv_poll_cq may be called from several threads; held from start_poll to end_poll
  uint32_t empty_polls = 0;
  uint32_t async_delivered = 0;  // IBV_EVENT_CQ_ERR handed out (destroy waits for their acks)
  // Extended polling (between start_poll and end_poll): a copy of the current
  // completion and the index after it.
  ib_uverbs_wc ex_wc{};
  uint32_t ex_next = 0;
};
static_assert(offsetof(ibv_cq_ex, async_events_completed) == offsetof(ibv_cq, async_events_completed),
              "ibv_cq_ex_to_cq is a cast: ibv_cq must be the head of ibv_cq_ex");

// A completion channel: its fd is an epoll fd over its CQs' eventfds.
struct Channel {
  ibv_comp_channel ch{};
  std::mutex mu;
  std::vector<Cq*> cqs;
  uint64_t recovered = 0;  // wakeups found by the safety net (see ibv_get_cq_event)
};

struct Srq {
  ibv_srq srq{};
  Ring ring;
  ibv_srq_attr attr{};
  std::mutex mu;
  uint32_t async_delivered = 0;
};

// A batch of the extended post-send API (qp_ex.cc), between wr_start and
// wr_complete/wr_abort: the work request being built is staged here and goes
// into the ring through the same code as ibv_post_send when the next one
// starts or the batch completes.
struct SendBatch {
  uint32_t start = 0, prod = 0, cons = 0;  // producer at wr_start, next free slot, last consumer seen
  int err = 0;                             // first error of the batch: wr_complete returns it, posts nothing
  bool pending = false;                    // wr holds a started work request not in the ring yet
  ibv_send_wr wr{};
  std::vector<ibv_sge> sges;               // max_send_sge entries
  std::vector<uint8_t> inline_data;        // max_inline_data bytes, copied when set
  ibv_sge inline_sge{};
};

// ibv_qp is the head of ibv_qp_ex (rdma-core's verbs_qp).
struct Qp {
  union {
    ibv_qp_ex qp_ex{};
    ibv_qp qp;
  };
  bool ex = false;  // made by ibv_create_qp_ex: ibv_qp_to_qp_ex gives qp_ex
  SendBatch batch;
  Ring sq, rq;
  bool has_rq = false;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  uint32_t mtu_bytes = 1024;  // UD payload limit (the port's active MTU)
  std::mutex sq_mu, rq_mu;  // sq_mu: held from wr_start to wr_complete/wr_abort
  uint32_t async_delivered = 0;
};
static_assert(offsetof(ibv_qp_ex, qp_base) == 0);

inline Pd* pd_of(ibv_pd* p) { return outer_of(p, &Pd::pd); }
inline Cq* cq_of(ibv_cq* c) { return outer_of(c, &Cq::cq); }
inline Qp* qp_of(ibv_qp* q) { return outer_of(q, &Qp::qp); }
inline Srq* srq_of(ibv_srq* s) { return outer_of(s, &Srq::srq); }

// Async events (async.cc): objects are tracked from creation; untrack waits
// until the events delivered for the object are acknowledged.
void track(Context& c, Qp* q);
void track(Context& c, Cq* cq);
void track(Context& c, Srq* s);
void untrack(Context& c, Qp* q);
void untrack(Context& c, Cq* cq);
void untrack(Context& c, Srq* s);

// The data path (datapath.cc): the ibv_context_ops entries.
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
// One send WR into the SQ ring at *prod, as post_send does it (validate, check
// room, build the WQE) without publishing: 0 and *prod advanced, or EINVAL /
// ENOMEM. *cons is the consumer index last seen (refreshed when full). The
// caller holds q.sq_mu.
int post_one_send(Qp& q, const ibv_send_wr& wr, uint32_t* prod, uint32_t* cons);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);
// An empty poll (cq.mu held): counts it and says how long to back off.
enum class Backoff { kNone, kYield, kSleep };
Backoff note_empty_poll(Cq& cq);
void back_off(Backoff b);
int req_notify_cq(ibv_cq* cq, int solicited_only);

// Created by ibv_create_cq and create_cq_ex (verbs.cc): the CQ with its ring
// mapped (and on its channel), or nullptr with errno set.
Cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector);
// Created by ibv_create_qp and create_qp_ex (verbs.cc); init->cap is updated.
Qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* init);

// The verbs_context entries of the extended verbs.
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);  // cq_ex.cc
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);     // qp_ex.cc

// Device limits reported by ibv_query_device (device.cc).
void fill_device_attr(const Device& d, ibv_device_attr* a);
// Every verbs_context (and memory window) operation the library does not
// implement: a function that logs and fails (unsupported.cc).
void fill_unsupported_ops(verbs_context& v);
// ibv_alloc_mw, ibv_dealloc_mw, ibv_bind_mw (mw.cc).
void fill_mw_ops(ibv_context& c);
inline constexpr uint32_t kMaxQpWr = 16383;
inline constexpr uint32_t kMaxSge = 32;
inline constexpr uint32_t kMaxInline = 320;
inline constexpr uint32_t kMaxCqe = 32767;
inline constexpr uint32_t kMaxSrqSge = 27;

}  // namespace isoroce::vc
