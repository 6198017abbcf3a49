// Inside the simulator: the world every part shares, the hosts (engine
// drivers) and the flows (applications). Only simulator.cc, host.cc and
// flow.cc include this.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "dataplane/sim/event_queue.h"
#include "dataplane/sim/fabric.h"
#include "dataplane/sim/flow_host.h"
#include "dataplane/sim/frame_edit.h"
#include "dataplane/sim/report.h"
#include "dataplane/sim/rng.h"
#include "dataplane/sim/scenario.h"
#include "dataplane/sim/simulator.h"
#include "transport/engine/engine.h"

namespace isoroce::sim::detail {

class Host;
class Flow;
class ReferenceFlow;

// Registered memory a host allocated for an application (the simulator with
// malloc, live hosts as a memfd mapping: the deleter is the allocator's).
struct Region {
  std::shared_ptr<uint8_t> mem;
  uint64_t len = 0;
  uint64_t iova = 0;
  uint32_t lkey = 0, rkey = 0;
  uint8_t* at(uint64_t off) const { return mem.get() + off; }
  uint64_t va(uint64_t off) const { return iova + off; }
};

// Which flow and QP a (host, QPN) belongs to.
struct QpRef {
  uint32_t flow = 0;
  uint32_t qp = 0;
  bool requester = false;
};

struct World {
  explicit World(const Scenario& s) : scenario(s) {}
  Scenario scenario;
  EventQueue events;
  std::unique_ptr<Fabric> fabric;
  std::vector<std::unique_ptr<Host>> hosts;
  std::vector<FlowHost*> flow_hosts;  // the same hosts as the flows see them (by index)
  std::vector<std::unique_ptr<Flow>> flows;
  std::vector<std::unique_ptr<ReferenceFlow>> refs;  // justitia hosts' probes
  std::unordered_map<uint64_t, QpRef> qps;
  uint64_t next_region = 1;
  size_t unfinished = 0;  // flows not finished
  FrameTap tap;
  bool ran = false;

  static uint64_t qp_key(uint32_t host, uint32_t qpn) { return uint64_t{host} << 32 | qpn; }
  const QpRef* find_qp(uint32_t host, uint32_t qpn) const {
    auto it = qps.find(qp_key(host, qpn));
    return it == qps.end() ? nullptr : &it->second;
  }
};

class Host final : public Endpoint, public transport::TxSink, public FlowHost {
 public:
  Host(World& w, uint32_t index, const HostConfig& cfg);
  std::optional<ScenarioError> init();

  transport::Engine& engine() { return *engine_; }
  uint32_t index() const override { return index_; }
  transport::PdHandle pd() const override { return pd_; }
  const HostConfig& config() const override { return cfg_; }
  FlowVerbs& verbs() override { return *verbs_; }

  // Memory registered with this host's engine, zeroed.
  std::optional<ScenarioError> alloc_region(uint64_t len, uint32_t access, Region* out) override;
  // Completions of `cq` go to flow->on_completion(side).
  void bind_cq(transport::CqHandle cq, Flow* flow, int side) override;
  void bind_cq(transport::CqHandle cq, ReferenceFlow* ref);
  void set_reference(ReferenceFlow* ref) { ref_ = ref; }
  // Async events of the engine (soft admission warnings) since the last call.
  void collect_events() override;

  void on_frame(Picos now, std::span<uint8_t> frame) override;
  // Service the engine at t (the earliest request wins).
  void request_service(Picos t) override;
  void on_service_event(Picos now, uint64_t gen);
  // The application decided at `now` to post on flow's QP q: the post happens
  // after the host's per-message cost, one message after another.
  void app_post(Picos now, Flow* flow, uint32_t q) override;
  void on_app_post_event(Picos now);

  HostReport report() const;

  std::span<uint8_t> tx_buffer(size_t len) override;
  void tx_commit(Picos departure, size_t len) override;

 private:
  struct Binding {
    transport::CqHandle cq;
    Flow* flow;
    int side;
    ReferenceFlow* ref = nullptr;
  };
  struct PendingPost {
    Flow* flow;
    uint32_t q;
  };
  void service(Picos now);
  size_t poll_cqs(Picos now);
  size_t transmit(Picos now);
  void sniff(std::span<const uint8_t> frame);

  World& w_;
  uint32_t index_;
  HostConfig cfg_;
  std::unique_ptr<transport::Engine> engine_;
  std::unique_ptr<EngineVerbs> verbs_;
  transport::PdHandle pd_ = 0;
  std::vector<Binding> cqs_;
  std::deque<PendingPost> posts_;
  Picos cpu_free_ = 0;
  Picos wake_at_ = kNever;
  uint64_t wake_gen_ = 0;
  Picos now_ = 0;
  FrameId tx_frame_ = 0;
  bool tx_pending_ = false;
  uint64_t stalls_ = 0;
  bool in_service_ = false;
  ReferenceFlow* ref_ = nullptr;
  uint64_t admission_warnings_ = 0;
  std::vector<std::string> log_;
};

class Flow {
 public:
  Flow(World& w, uint32_t index, const FlowConfig& cfg);
  // At time 0: CQs, memory, QPs to RTS.
  std::optional<ScenarioError> setup();
  void start(Picos now);            // kFlowStart
  void start_receives(Picos now);   // kFlowRecvStart, or from start()
  void post(Picos now, uint32_t q); // the host's CPU posts the next reserved message of q
  void on_completion(Picos now, int side, const ibv_wc& wc);
  void on_tx_frame(const QpRef& ref, const BthView& bth);
  // Link bytes of the flow's data frames (requests, UD sends, READ responses).
  void count_wire(const QpRef& ref, const BthView& bth, size_t frame_len);
  FlowReport report(Picos run_end) const;
  bool finished() const { return finished_; }

 private:
  struct Outstanding {
    uint64_t msg;
    uint64_t seq;  // this QP's message number
    uint32_t dst;
    Picos posted_at;
  };
  struct Qp {
    wire::Qpn src_qpn;
    std::vector<wire::Qpn> dst_qpn;  // per destination
    std::vector<wire::Psn> start_psn;
    uint64_t seq = 0;  // messages reserved on this QP
    uint64_t completed = 0;
    std::deque<Outstanding> outstanding;  // reserved, in order; the last `unposted` not posted yet
    uint32_t unposted = 0;
    std::deque<std::pair<uint64_t, uint64_t>> awaiting_recv;  // (msg, seq) RC receives due, in order
    bool psn_seen = false;
    wire::Psn next_psn;  // after the last new request on the wire
    uint64_t cas_base = 0;
  };
  struct Dst {
    FlowHost* host = nullptr;
    transport::CqHandle cq = 0;
    Region target;  // RC WRITE/READ slots, atomic counters
    Region recv;    // receive buffers
    bool has_srq = false;
    transport::SrqHandle srq = 0;
    std::unordered_map<uint32_t, uint32_t> qp_of;  // QPN -> q
  };

  std::optional<ScenarioError> setup_rc(uint32_t q);
  uint32_t app_id() const;  // justitia: flows with the same `app` share one
  void classify(Picos now);
  std::optional<ScenarioError> setup_ud();
  std::optional<ScenarioError> fail(const std::string& what, int err) const;
  void reserve_more(Picos now, uint32_t q);
  void post_recv_slot(Picos now, uint32_t d, uint32_t q, uint64_t slot);
  void on_requester_completion(Picos now, const ibv_wc& wc);
  void on_receive_completion(Picos now, uint32_t d, const ibv_wc& wc);
  void count_error(int status);
  void integrity_failure(const std::string& what);
  void stop();
  void maybe_finish(Picos now);
  uint64_t local_off(uint32_t q, uint64_t seq) const { return (q * cfg_.depth + seq % cfg_.depth) * slot_; }
  uint64_t recv_slot_bytes() const { return cfg_.transport == Transport::kUd ? ud_slot_ : slot_; }
  bool more_to_send() const { return !stopped_ && (!cfg_.count || reserved_ < *cfg_.count); }
  uint64_t outstanding_total() const;

  World& w_;
  uint32_t index_;
  FlowConfig cfg_;
  Rng rng_;
  uint64_t key_ = 0;  // payload pattern key
  FlowHost* src_ = nullptr;
  transport::CqHandle src_cq_ = 0;
  Region local_;
  std::unordered_map<uint32_t, uint32_t> src_qp_of_;
  std::vector<transport::AhHandle> ah_;  // UD: per destination
  std::vector<Dst> dst_;
  std::vector<Qp> qps_;
  uint64_t slot_ = 0, ud_slot_ = 0;
  uint32_t recv_depth_ = 0;
  uint32_t mtu_ = 4096;
  uint64_t reserved_ = 0;  // messages reserved (ids handed out)
  bool started_ = false;
  bool stopped_ = false;
  bool finished_ = false;
  Picos finish_time_ = 0;
  uint64_t fa_init_ = 0;
  std::vector<bool> fa_seen_;
  std::vector<uint16_t> ud_dst_of_;    // UD: destination of message m
  std::vector<uint8_t> ud_received_;   // UD: times message m was received

  // Report.
  uint64_t messages_ = 0;
  std::vector<Picos> lat_;
  uint64_t retransmits_ = 0, naks_ = 0, rnr_naks_ = 0, errors_ = 0;
  std::map<std::string, uint64_t> error_statuses_;
  uint64_t checked_ = 0, failures_ = 0;
  std::string first_failure_;
  uint64_t delivered_ = 0, ud_dups_ = 0;
  uint64_t wire_bytes_ = 0;
};

}  // namespace isoroce::sim::detail

// Complete here so every user of World can destroy its reference flows.
#include "dataplane/sim/reference_flow.h"  // NOLINT(build/include_order)
