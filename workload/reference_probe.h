// Justitia's reference flow (the justitia policy's probe): an RC QP pair from a
// source engine to a peer engine that posts a 10-byte RDMA WRITE every period
// and hands each latency, post to completion, to the source engine
// (Engine::add_reference_latency), which keeps Current99 and adjusts SafeUtil.
// Both QPs are of class kReference and application kReferenceApp: served like
// latency-class QPs, never counted as a latency flow.
//
// The one probe of the project: the simulator (dataplane/sim/reference_flow.h)
// and isoroced (ctrl/reference_flow.h) drive this class, so the probe the
// simulator shows is the probe the daemon runs. Sans-I/O: the driver gives the
// time and the memory, and either hands completions in (on_completion, the
// simulator polls every CQ itself) or lets the probe poll its CQ (poll, a poll
// loop's pass). The schedule, decided once (docs/design.md, "Justitia's
// reference flow"):
//   - probes are due on a grid: start, start + period, start + 2 period, ...;
//   - one probe is outstanding at a time; a probe due while the last is out is
//     posted when that one completes (late), and the next one is due at the
//     first grid point after it: never a burst of catch-up probes;
//   - a post the engine refuses (queue full, QP not in RTS) is counted as an
//     error and tried again at the next grid point;
//   - a probe that completes in error ends the flow (its QP is in ERR).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "transport/engine/engine.h"

namespace isoroce::workload {

using sched::Picos;

// One end of the probe: an engine, a PD in it and registered memory of at
// least kProbeBytes (the driver's: the simulator's deterministic iovas, the
// daemon's own buffers).
struct ProbeEnd {
  transport::Engine* engine = nullptr;
  transport::PdHandle pd = 0;
  wire::IpAddr ip{};  // the end's GID
  uint8_t* mem = nullptr;
  uint64_t iova = 0;
  uint32_t lkey = 0, rkey = 0;
  uint32_t psn = 0;   // the first PSN this end sends with
};

struct ProbeStats {
  bool running = false;      // connected and probing
  bool failed = false;       // a probe completed in error (the QP is dead)
  uint64_t posted = 0;
  uint64_t completed = 0;    // latencies fed to the engine
  uint64_t errors = 0;       // refused posts and error completions
  Picos last = 0, min = 0, max = 0;  // post-to-completion latency
  uint32_t src_qpn = 0, dst_qpn = 0;
};

// What one call did, for the driver.
struct ProbeStep {
  bool posted = false;           // a probe went to the engine (service it)
  std::optional<Picos> latency;  // a probe completed with this latency
  unsigned work = 0;             // completions seen and posts made (poll)
};

// A post or a completion, for whoever watches the schedule.
struct ProbeMark {
  enum Kind : uint8_t { kPost, kRefused, kComplete, kError };
  Picos time = 0;
  Kind kind = kPost;
  uint64_t seq = 0;  // the probe's number (wr_id)
  bool operator==(const ProbeMark&) const = default;
};

class ReferenceProbe {
 public:
  static constexpr uint32_t kProbeBytes = 10;

  explicit ReferenceProbe(Picos period);

  // Setup, each on its end's engine (the daemon: on that engine's worker), in
  // this order; "" or what failed. The ends' memory must outlive the probe.
  std::string create_src(const ProbeEnd& src);  // CQ, QP
  std::string create_dst(const ProbeEnd& dst);  // CQ, QP
  std::string connect_dst();                    // dst QP to RTS towards src, class kReference
  std::string connect_src(Picos now);           // src QP to RTS, class kReference; first probe due at now
  // Teardown of whatever setup made (QPs and CQs; the memory is the driver's).
  void destroy_src();
  void destroy_dst();

  transport::CqHandle src_cq() const { return src_cq_; }
  const ProbeStats& stats() const { return stats_; }
  Picos period() const { return period_; }

  // Driven by events: at any time (a timer at the grid points), and with every
  // completion of src_cq().
  ProbeStep on_time(Picos now);
  ProbeStep on_completion(Picos now, const ibv_wc& wc);
  // Driven by a poll loop: polls src_cq() when a probe is out, then on_time.
  ProbeStep poll(Picos now);
  // When the next probe is due (kNever while one is out: its completion
  // arrives as received work, or when the flow is not running).
  Picos next_deadline() const;

  // Every post and completion, as it happens.
  void set_trace(std::function<void(const ProbeMark&)> trace) { trace_ = std::move(trace); }

 private:
  bool post(Picos now);
  void mark(Picos now, ProbeMark::Kind kind, uint64_t seq) {
    if (trace_) trace_(ProbeMark{now, kind, seq});
  }

  Picos period_;
  ProbeEnd src_, dst_;
  transport::CqHandle src_cq_ = 0, dst_cq_ = 0;
  bool has_src_cq_ = false, has_dst_cq_ = false, has_src_qp_ = false, has_dst_qp_ = false;
  bool outstanding_ = false;
  Picos posted_at_ = 0;
  Picos next_due_ = 0;
  uint64_t seq_ = 0;
  ProbeStats stats_;
  std::function<void(const ProbeMark&)> trace_;
};

}  // namespace isoroce::workload
