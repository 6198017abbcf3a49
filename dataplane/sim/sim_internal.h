// Inside the simulator: the world every part shares, and the hosts (engine
// drivers) the flows (workload/flow.h) and the reference probes run on. Only
// simulator.cc, host.cc and reference_flow.cc include this.
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
#include "dataplane/sim/frame_edit.h"
#include "dataplane/sim/report.h"
#include "dataplane/sim/rng.h"
#include "dataplane/sim/scenario.h"
#include "dataplane/sim/simulator.h"
#include "transport/engine/engine.h"
#include "workload/flow.h"
#include "workload/flow_host.h"

namespace isoroce::sim::detail {

class Host;
class ReferenceFlow;
using workload::Flow;
using workload::FlowHost;
using workload::FlowVerbs;
using workload::QpRef;
using workload::Region;

struct World final : workload::FlowDriver {
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
  Sampler sampler;
  Picos sample_period = 0;
  bool ran = false;

  void schedule_receives(Picos at, Flow& flow) override {
    events.push(at, EventKind::kFlowRecvStart, flow.index());
  }
  void bind_qp(uint32_t host, uint32_t qpn, const QpRef& ref) override { qps[qp_key(host, qpn)] = ref; }
  void flow_finished(Flow&) override { --unfinished; }

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
  const HostConfig& config() const { return cfg_; }
  const wire::IpAddr& ip() const override { return cfg_.ip; }
  FlowVerbs& verbs() override { return *verbs_; }

  // Memory registered with this host's engine, zeroed.
  std::optional<workload::SetupError> alloc_region(uint64_t len, uint32_t access, Region* out) override;
  // Completions of `cq` go to flow->on_completion(side).
  void bind_cq(transport::CqHandle cq, Flow* flow, int side) override;
  void bind_cq(transport::CqHandle cq, ReferenceFlow* ref);
  void set_reference(ReferenceFlow* ref) { ref_ = ref; }
  // A line for the report's log (SimReport host log).
  void note(std::string line) { log_.push_back(std::move(line)); }
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
  std::unique_ptr<workload::EngineVerbs> verbs_;
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

}  // namespace isoroce::sim::detail

// Complete here so every user of World can destroy its reference flows.
#include "dataplane/sim/reference_flow.h"  // NOLINT(build/include_order)
