// What isoroce-sim records of a run for --trace, --pcap and --timeseries: the trace
// records of every host (sched/trace.h), the samples (sim::Simulator::set_sampler),
// and, as the run goes, the scheduling decision behind each frame a host sends
// (the pcapng comment). docs/profiling.md describes the files.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "dataplane/sim/simulator.h"
#include "sched/trace.h"
#include "tools/trace/chrome_trace.h"

namespace isoroce::tools {

// The events SimTrace needs to explain a frame in a comment.
inline constexpr trace::EventMask kDecisionEvents =
    trace::bit(trace::Event::kActivate) | trace::bit(trace::Event::kGrant) | trace::bit(trace::Event::kRate) |
    trace::bit(trace::Event::kTokenGrant) | trace::bit(trace::Event::kTokenIssue) |
    trace::bit(trace::Event::kFrameTx) | trace::bit(trace::Event::kEligible);

class SimTrace final : public trace::Sink {
 public:
  // Keeps the records of `keep` (for --trace); follows decisions if `decisions`.
  SimTrace(const sim::Scenario& scenario, trace::EventMask keep, bool decisions);

  void record(const trace::Record& r) override;
  void add_sample(const sim::SimSample& s) { samples_.push_back(s); }

  // Why the frame `host` sends now (its last frame_tx) was released: policy, time in
  // the scheduler since the packet was ready, rate limit, tokens banked.
  const std::string& tx_comment(uint32_t host) const { return hosts_[host].comment; }

  // What the Chrome trace writer (tools/trace/chrome_trace.h) adds to the records:
  // hosts and flows by name, the seed, and from the samples each QP's throughput
  // per period and the switch queue toward each host.
  TraceMeta chrome_meta() const;

  const std::vector<trace::Record>& records() const { return records_; }
  const std::vector<sim::SimSample>& samples() const { return samples_; }
  const sim::Scenario& scenario() const { return scenario_; }

 private:
  struct QpState {
    sched::Picos ready = 0;   // when its ready packet became ready
    uint64_t rate_bps = 0;    // the scheduler's limit (0: none)
    bool eligible_seen = false;  // tassel: S, F and Phi of its last eligible packet
    sched::Picos start = 0, finish = 0;
    uint32_t phi_q16 = 0;
  };
  struct PendingGrant {
    uint32_t qp = 0;
    sched::Picos waited = 0;
    bool control = false;
    QpState at_grant;  // the QP's state when it was granted
  };
  struct HostState {
    std::deque<PendingGrant> grants;  // granted, frame not built yet
    int64_t tokens = -1;              // banked (justitia), -1: none seen
    std::string comment;
  };
  void follow(const trace::Record& r);

  sim::Scenario scenario_;
  trace::EventMask keep_;
  bool decisions_;
  std::vector<trace::Record> records_;
  std::vector<sim::SimSample> samples_;
  std::vector<HostState> hosts_;
  std::map<uint64_t, QpState> qps_;  // host << 32 | QPN
};

}  // namespace isoroce::tools
