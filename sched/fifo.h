// The fifo policy: what a hardware RNIC does, the baseline of the Justitia paper
// (Zhang et al., "Isolating Performance in RDMA Networks", NSDI 2022). Work-conserving;
// active QPs are served round robin one whole message (WQE) at a time, so a 1 MB
// message leaves whole before the next QP's message starts. Rate limits are recorded
// and ignored. Control packets go first.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/index_list.h"
#include "sched/link.h"
#include "sched/scheduler.h"

namespace isoroce::sched {

class FifoScheduler final : public Scheduler {
 public:
  explicit FifoScheduler(const Config& config);

  std::string_view name() const override { return "fifo"; }
  void activate(Picos now, QpId qp, Packet pkt) override;
  bool enqueue_control(Picos now, QpId qp, std::uint32_t bytes) override;
  void set_rate(Picos now, QpId qp, std::uint64_t bps) override;
  void set_link_bps(Picos now, std::uint64_t bps) override;
  std::uint64_t link_bps() const override { return config_.link_bps; }
  std::uint64_t rate(QpId qp) const override;
  void deactivate(Picos now, QpId qp) override;
  std::size_t dequeue(Picos now, std::span<Grant> out, PacketSource& src) override;
  Picos next_deadline() const override;
  bool active(QpId qp) const override;
  std::size_t active_qps() const override { return active_; }
  std::size_t bytes_per_qp() const override { return sizeof(Slot); }
  std::size_t fixed_bytes() const override;

 private:
  struct Slot {
    std::uint32_t next_ = kNil;
    std::uint32_t prev_ = kNil;
    std::uint32_t bytes_ = 0;  // ready packet; 0: idle
    bool ends_message_ = true;
    bool starts_message_ = true;  // the ready packet starts a message (Config::max_msgs_per_sec)
    std::uint64_t rate_bps_ = 0;
  };
  static_assert(sizeof(Slot) == 24);

  Config config_;
  std::vector<Slot> qps_;
  IndexList ring_;  // active QPs; the head is the one sending its message
  LinkModel link_;
  ControlQueue control_;
  std::size_t active_ = 0;
  Picos msg_cost_ = 0;    // 1 / Config::max_msgs_per_sec; 0: no message processor limit
  Picos proc_free_ = 0;   // the message processor is busy until then
};

}  // namespace isoroce::sched
