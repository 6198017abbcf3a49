#include "dataplane/sim/simulator.h"

#include <algorithm>
#include <chrono>

#include "workload/app_id.h"

#include "dataplane/sim/reference_flow.h"
#include "dataplane/sim/sim_internal.h"
#include "sched/policy_registry.h"

namespace isoroce::sim {

using detail::Flow;
using detail::Host;
using detail::World;

workload::FlowPlace flow_place(const Scenario& s, uint32_t flow, std::span<workload::FlowHost* const> hosts) {
  const FlowConfig& f = s.flows[flow];
  auto host = [&](const std::string& name) -> workload::FlowHost* {
    for (size_t i = 0; i < s.hosts.size(); ++i)
      if (s.hosts[i].name == name) return hosts[i];
    return nullptr;
  };
  workload::FlowPlace p;
  p.src = host(f.src);
  for (const auto& d : f.dst) p.dst.push_back(host(d));
  p.seed = component_seed(s.seed, component::kFlow + flow);
  p.mtu = effective_mtu(s, f);
  p.app = workload::flow_app_id(s.flows, flow);
  return p;
}

Simulator::Simulator(std::unique_ptr<World> world) : world_(std::move(world)) {}
Simulator::~Simulator() = default;

std::unique_ptr<Simulator> Simulator::create(const Scenario& scenario, ScenarioError* error) {
  if (auto e = validate(scenario)) {
    *error = *e;
    return nullptr;
  }
  auto w = std::make_unique<World>(scenario);
  const FabricConfig fc = fabric_config(scenario);
  if (auto why = validate(fc); !why.empty()) {
    *error = ScenarioError{"", std::string(why)};
    return nullptr;
  }
  w->fabric = std::make_unique<Fabric>(w->events, fc);
  for (size_t i = 0; i < scenario.hosts.size(); ++i) {
    w->hosts.push_back(std::make_unique<Host>(*w, static_cast<uint32_t>(i), scenario.hosts[i]));
    w->flow_hosts.push_back(w->hosts.back().get());
    if (auto e = w->hosts.back()->init()) {
      *error = *e;
      return nullptr;
    }
  }
  // ARP is the driver's job: every host knows every other host's MAC.
  for (size_t i = 0; i < w->hosts.size(); ++i)
    for (size_t j = 0; j < w->hosts.size(); ++j)
      if (i != j) w->hosts[i]->engine().set_neighbor(scenario.hosts[j].ip, host_mac(j));
  // justitia hosts run their reference flow to ref_peer (default: the first other host).
  for (size_t i = 0; i < w->hosts.size(); ++i) {
    const HostConfig& h = scenario.hosts[i];
    const sched::PolicyOps* policy = sched::find_policy(h.policy);
    if (policy == nullptr || !policy->has(sched::kCapReferenceLatency)) continue;
    // signal = passive: the transport's round trips only, no probe.
    if (h.justitia.signal == sched::LatencySignal::kPassive) continue;
    size_t peer = w->hosts.size();
    for (size_t j = 0; j < w->hosts.size() && peer == w->hosts.size(); ++j)
      if (j != i && (h.ref_peer.empty() ? wire::is_ipv4_mapped(scenario.hosts[j].ip) == wire::is_ipv4_mapped(h.ip)
                                        : scenario.hosts[j].name == h.ref_peer))
        peer = j;
    if (peer == w->hosts.size()) continue;  // a lone host: no probe, Current99 stays 0
    auto ref = std::make_unique<detail::ReferenceFlow>(*w, static_cast<uint32_t>(w->refs.size()), w->hosts[i].get(),
                                                       w->hosts[peer].get());
    if (auto e = ref->setup()) {
      *error = *e;
      return nullptr;
    }
    w->hosts[i]->set_reference(ref.get());
    w->refs.push_back(std::move(ref));
  }
  for (size_t f = 0; f < scenario.flows.size(); ++f) {
    const auto index = static_cast<uint32_t>(f);
    w->flows.push_back(std::make_unique<Flow>(*w, index, scenario.flows[f], flow_place(scenario, index, w->flow_hosts)));
    if (auto e = w->flows.back()->setup()) {
      *error = *e;
      return nullptr;
    }
  }
  // Tenants under a policy that does not apply them (fifo, rnic: a hardware RNIC has
  // none; plugins): recorded and ignored, said once per host and tenant, as the
  // daemon logs it (docs/isolation.md, "Tenants").
  for (size_t i = 0; i < w->hosts.size(); ++i) {
    const HostConfig& h = scenario.hosts[i];
    const sched::PolicyOps* policy = sched::find_policy(h.policy);
    if (policy != nullptr && policy->has(sched::kCapTenants)) continue;
    std::vector<std::string> said;
    for (const auto& f : scenario.flows) {
      if (f.tenant.empty() || (f.src != h.name && std::find(f.dst.begin(), f.dst.end(), h.name) == f.dst.end()))
        continue;
      if (std::find(said.begin(), said.end(), f.tenant) != said.end()) continue;
      said.push_back(f.tenant);
      w->hosts[i]->note("host " + h.name + ": tenant '" + f.tenant + "' (flow " + f.name + "): policy " + h.policy +
                        (h.policy == "fifo" || h.policy == "rnic"
                             ? " models a hardware RNIC, which arbitrates per QP and has no tenants"
                             : " does not apply tenants") +
                        ": recorded, not enforced");
    }
  }
  w->unfinished = w->flows.size();
  return std::unique_ptr<Simulator>(new Simulator(std::move(w)));
}

void Simulator::set_tap(FrameTap tap) { world_->tap = std::move(tap); }

void Simulator::set_probe_tap(ProbeTap tap) {
  for (auto& ref : world_->refs) {
    const uint32_t host = ref->host();
    ref->probe().set_trace([tap, host](const workload::ProbeMark& m) { tap(host, m); });
  }
}

void Simulator::set_trace(trace::Sink* sink, trace::EventMask mask) {
  for (auto& h : world_->hosts) h->engine().attach_trace(sink, mask, static_cast<uint16_t>(h->index()));
  world_->fabric->set_trace(sink, mask);
}

void Simulator::set_sampler(Picos period, Sampler sampler) {
  world_->sample_period = period;
  world_->sampler = std::move(sampler);
}

namespace {

SimSample take_sample(const World& w, Picos now) {
  SimSample s;
  s.time = now;
  for (const auto& h : w.hosts) {
    HostSample hs;
    hs.queue_bytes = w.fabric->queued_bytes(h->index());
    if (const sched::JustitiaStats* js = h->engine().scheduler().justitia_stats()) {
      hs.justitia = true;
      hs.safe_util_bps = js->safe_util_bps;
      hs.tokens = js->tokens;
      hs.current99 = js->current99;
    }
    s.hosts.push_back(hs);
    std::vector<wire::Qpn> qpns = h->engine().qp_numbers();
    std::sort(qpns.begin(), qpns.end(), [](wire::Qpn a, wire::Qpn b) { return a.value() < b.value(); });
    for (const wire::Qpn qpn : qpns) {
      QpSample q;
      q.host = h->index();
      q.qpn = qpn.value();
      if (const workload::QpRef* ref = w.find_qp(h->index(), qpn.value())) {
        q.flow = static_cast<int32_t>(ref->flow);
        q.requester = ref->requester;
      }
      q.rate_bps = h->engine().qp_rate(qpn);
      if (const transport::QpCounters* c = h->engine().qp_counters(qpn)) {
        q.tx_bytes = c->tx_bytes;
        q.rx_bytes = c->rx_bytes;
      }
      s.qps.push_back(q);
    }
  }
  return s;
}

}  // namespace

SimReport Simulator::run() {
  World& w = *world_;
  SimReport report;
  report.seed = w.scenario.seed;
  if (w.ran) return report;
  w.ran = true;
  const auto wall0 = std::chrono::steady_clock::now();

  w.events.push(w.scenario.duration, EventKind::kStop);
  for (size_t f = 0; f < w.flows.size(); ++f)
    w.events.push(w.scenario.flows[f].start, EventKind::kFlowStart, static_cast<uint32_t>(f));
  for (size_t r = 0; r < w.refs.size(); ++r) w.events.push(0, EventKind::kRefProbe, static_cast<uint32_t>(r));
  if (w.sampler && w.sample_period > 0) w.events.push(0, EventKind::kSample);

  uint64_t events = 0;
  Picos now = 0;
  while (!w.events.empty()) {
    const Event ev = w.events.pop();
    now = ev.time;
    if (ev.kind == EventKind::kSample) {  // an observer: not counted, changes nothing
      w.sampler(take_sample(w, now));
      w.events.push(now + w.sample_period, EventKind::kSample);
      if (w.unfinished == 0 && w.fabric->in_flight() == 0 && w.events.next_time() > now) break;
      continue;
    }
    ++events;
    if (ev.kind == EventKind::kStop) break;
    switch (ev.kind) {
      case EventKind::kLinkArrival:
      case EventKind::kPortTxDone:
      case EventKind::kPfcPause:
        w.fabric->handle(ev);
        break;
      case EventKind::kHostService:
        w.hosts[ev.a]->on_service_event(now, ev.b);
        break;
      case EventKind::kAppPost:
        w.hosts[ev.a]->on_app_post_event(now);
        break;
      case EventKind::kFlowStart:
        w.flows[ev.a]->start(now);
        break;
      case EventKind::kFlowRecvStart:
        w.flows[ev.a]->start_receives(now);
        break;
      case EventKind::kRefProbe:
        w.refs[ev.a]->on_probe_event(now);
        break;
      default:
        break;
    }
    // Done: every flow finished, nothing left on the wire, and nothing else
    // due at this instant (the hosts' service after the last arrivals).
    if (w.unfinished == 0 && w.fabric->in_flight() == 0 && w.events.next_time() > now) break;
  }

  if (w.sampler && w.sample_period > 0) w.sampler(take_sample(w, now));
  for (const auto& f : w.flows) report.flows.push_back(f->report(now));
  for (const auto& h : w.hosts) {
    h->collect_events();
    report.hosts.push_back(h->report());
  }
  w.fabric->finish(now);
  report.fabric = w.fabric->stats();
  report.events = events;
  report.virtual_us = static_cast<double>(now) / 1e6;
  report.all_finished = w.unfinished == 0;
  report.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  return report;
}

}  // namespace isoroce::sim
