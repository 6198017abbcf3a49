// The rnic policy: a hardware RNIC's transmit arbitration, parameterised
// (sched/rnic_params.h). The Justitia paper's NICs interleave QPs far more finely than
// whole messages (a 16 B WRITE beside a 1 MB WRITE is 1.85x to 3.82x slower, not
// 100x), so this is the baseline isolation results should be compared against:
//
// - Round robin over the active QPs, `batch_packets` packets per turn (the WQE fetch
//   batch); a turn may span the end of one message and the start of the next.
// - A QP that starts a message keeps its turn until `message_burst_bytes` of that
//   message are granted (kWholeMessage: to its end), then the batch rule applies.
// - A transmit pipeline of `pipeline_packets`: arbitration runs that many data
//   packets ahead of the link, so a QP that becomes ready joins the round robin only
//   after that many more data packets of the QPs already in it (at once when there
//   are none), plus a uniform 0 .. `pipeline_jitter_packets` drawn per activation
//   (seeded: deterministic). Its first packet therefore waits for the pipeline, then
//   for the rest of the current turn.
// - The message processor (Config::max_msgs_per_sec or the params' own) as in fifo.
// - Control packets go first; rate limits are recorded and ignored, as in fifo.
//
// With batch 1, pipeline 0 and whole-message bursts it grants exactly what fifo does.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/index_list.h"
#include "sched/link.h"
#include "sched/rnic_params.h"
#include "sched/scheduler.h"

namespace isoroce::sched {

class RnicScheduler final : public Scheduler {
 public:
  explicit RnicScheduler(const Config& config);

  std::string_view name() const override { return "rnic"; }
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

  const RnicParams& params() const { return params_; }

 private:
  struct Slot {
    std::uint32_t next_ = kNil;
    std::uint32_t prev_ = kNil;
    std::uint32_t bytes_ = 0;  // ready packet; 0: idle
    bool ends_message_ = true;
    bool starts_message_ = true;  // the ready packet starts a message
    bool pending_ = false;        // in the pipeline's shadow (pending_), not yet in ring_
    std::uint64_t ticket_ = 0;    // pending: joins ring_ once data_grants_ reaches it
    std::uint64_t rate_bps_ = 0;
  };
  static_assert(sizeof(Slot) == 32);

  void admit_pending();
  void end_turn(QpId qp, bool idle);

  Config config_;
  RnicParams params_;
  std::vector<Slot> qps_;
  IndexList ring_;     // QPs the arbiter sees; the head has the turn
  IndexList pending_;  // QPs that became ready, by ticket
  LinkModel link_;
  ControlQueue control_;
  std::size_t active_ = 0;
  std::uint64_t data_grants_ = 0;   // data packets granted since the start
  std::uint32_t turn_packets_ = 0;  // packets the head QP has sent in this turn
  std::uint64_t burst_left_ = 0;    // bytes of the head's message burst still due
  std::uint64_t rng_ = 0;           // splitmix64 state (pipeline jitter)
  Picos msg_cost_ = 0;              // 1 / max messages per second; 0: no limit
  Picos proc_free_ = 0;             // the message processor is busy until then
};

}  // namespace isoroce::sched
