// The daemon's side of the shared-memory queues (ctrl/shm_abi.h): one pump per
// device, a DeviceHook run on the device's worker every pass. It moves work
// requests an application wrote into its SQ/RQ/SRQ rings to the engine, and
// completions from the engine's CQs into the application's CQ rings (waking
// an armed CQ's eventfd). Everything in shared memory is untrusted input.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ctrl/client_handles.h"
#include "ctrl/shm_abi.h"
#include "dataplane/dpdk/device.h"

namespace isoroce::ctrl {

// One queue file, created and mapped by the daemon; geometry kept privately.
class ShmQueue {
 public:
  // A queue of at least min_entries elements of elem_bytes each. nullptr and
  // *error on failure. fd() is passed to the application (then close it).
  static std::unique_ptr<ShmQueue> create(uint32_t min_entries, size_t elem_bytes, bool cq, std::string* error);
  ~ShmQueue();
  ShmQueue(const ShmQueue&) = delete;
  ShmQueue& operator=(const ShmQueue&) = delete;

  int fd() const { return fd_; }
  void close_fd();
  uint32_t log2_entries() const { return log2_entries_; }
  uint32_t log2_elem() const { return log2_elem_; }
  uint32_t mask() const { return mask_; }
  size_t elem_bytes() const { return size_t{1} << log2_elem_; }
  void* base() const { return base_; }
  uint8_t* element(uint32_t i) const { return shm::element(base_, i & mask_, log2_elem_); }
  shm::CqNotify* notify() const { return shm::cq_notify(base_, log2_entries_, log2_elem_); }

 private:
  ShmQueue() = default;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t log2_entries_ = 0, log2_elem_ = 0, mask_ = 0;
};

struct ShmCounters {
  uint64_t send_wqes = 0, recv_wqes = 0, cqes = 0, wakeups = 0;
  uint64_t bad_wqes = 0;  // garbage from the application (completed in error, or dropped on an SRQ)
};

class ShmPump final : public dataplane::DeviceHook {
 public:
  explicit ShmPump(transport::Engine& engine) : engine_(engine) {}

  // Called on the worker (Worker::call). The queues and the owner's handles
  // stay the caller's; every WQE is checked against its owner's handles
  // (ctrl/client_handles.h, as the socket's post_send is).
  void add_sq(uint32_t qpn, ShmQueue* q, uint32_t max_sge, uint32_t max_inline, const ClientObjects* owner);
  void add_rq(uint32_t qpn, ShmQueue* q, uint32_t max_sge, const ClientObjects* owner);
  void add_srq(uint32_t srq, ShmQueue* q, uint32_t max_sge, const ClientObjects* owner);
  void add_cq(uint32_t cq, ShmQueue* q, int eventfd);
  // ibv_resize_cq: from now on this CQ's completions go to `to`. Moves the
  // completions the application has not consumed from the CQ's current ring
  // to the start of `to`, in order, with the notify state (armed,
  // solicited_only): nothing is lost, duplicated or reordered. EINVAL if the
  // CQ has no ring here; ENOSPC if `to` cannot hold them (the caller checks
  // first). The application must not poll the old ring meanwhile.
  int replace_cq(uint32_t cq, ShmQueue* to);
  // Completions in this CQ's ring the application has not consumed (0 if none).
  uint32_t cq_ring_count(uint32_t cq) const;
  // The QP went to RESET: the engine dropped its receives without
  // completions, so they leave the RQ ring now.
  void reset_rq(uint32_t qpn);
  // Forgets every queue of this QP / SRQ / CQ.
  void remove_qp(uint32_t qpn);
  void remove_srq(uint32_t srq);
  void remove_cq(uint32_t cq);
  bool empty() const { return sqs_.empty() && rqs_.empty() && cqs_.empty(); }

  // The TSC as the engine's clock counts it (dataplane::TscClock: start and
  // rate), to turn the library's post stamps into the ring stage of a trace.
  void set_tsc(uint64_t start_tsc, uint64_t hz) {
    tsc_start_ = start_tsc;
    tsc_hz_ = hz;
  }
  uint64_t tsc_start() const { return tsc_start_; }
  uint64_t tsc_hz() const { return tsc_hz_; }

  unsigned poll(sched::Picos now) override;
  // Every SQ, RQ and SRQ belongs to a client that rings the worker's doorbell
  // (ClientObjects::doorbell) and no CQ waits for room: nothing here needs
  // the worker to poll for it.
  bool signalled() const override;
  const ShmCounters& counters() const { return counters_; }

 private:
  struct Work {
    uint32_t id;  // QPN, SRQ or CQ handle
    ShmQueue* q;
    uint32_t max_sge = 0;
    uint32_t max_inline = 0;
    bool srq = false;
    int eventfd = -1;
    const ClientObjects* owner = nullptr;
    // A QP's RQ (not an SRQ): the next element to read. consumer_index trails
    // it: a receive leaves the ring when it completes (pump_cq), as in rxe,
    // so a full ring (the library checks max_recv_wr against it) is ENOMEM.
    uint32_t next = 0;
  };
  unsigned pump_send(sched::Picos now, const Work& w);
  // Sets or clears kStampPostTsc in every SQ when the engine starts or stops
  // recording post events.
  void follow_trace();
  sched::Picos stamp_to_picos(uint64_t tsc) const;
  unsigned pump_recv(sched::Picos now, Work& w);
  // One receive of QP qpn left its RQ (completed, or dropped without a completion).
  void retire_recv(uint32_t qpn);
  unsigned pump_cq(const Work& w);

  transport::Engine& engine_;
  std::vector<Work> sqs_, rqs_, cqs_;
  std::vector<uint8_t> scratch_;
  std::vector<transport::Sge> sges_;
  std::vector<ibv_wc> wcs_;
  ShmCounters counters_;
  uint64_t tsc_start_ = 0, tsc_hz_ = 0;  // 0 Hz: no stamps
  bool stamping_ = false;                // kStampPostTsc set in the SQs
  uint64_t seen_completions_ = 0;        // the engine's completions_queued() at the last look at the CQs
  bool cq_backlog_ = true;               // a CQ may hold completions the last look left behind
};

}  // namespace isoroce::ctrl
