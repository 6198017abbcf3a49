// The daemon's own QPs: every device's reference echo (UD QPN 15) and, with
// policy justitia, the reference flow (ctrl/reference_flow.h,
// ctrl/reference_echo.h), started, stopped and recorded in the QP registry.
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/wire_json.h"
#include "sched/policy_registry.h"

namespace isoroce::ctrl {

void Daemon::start_echo(DeviceEntry& d) {
  auto echo = std::make_unique<ReferenceEcho>(*d.driver->dpdk());
  std::string error;
  d.run([&](sched::Picos now) { error = echo->create(now); });
  if (error.empty()) {
    d.echo = std::move(echo);
    registry_.set(&d, ReferenceEcho::kQpn, QpInfo::daemons_own());
  } else {
    d.run([&](sched::Picos) { echo->destroy(); });
    log(LogLevel::kError, "{}: the reference echo (UD QPN {}) failed: {}", d.name(), ReferenceEcho::kQpn, error);
  }
}

void Daemon::start_reference_flow(DeviceEntry& d) {
  const dataplane::DeviceConfig& c = d.config();
  d.ref_note.clear();
  // Every device's echo (with a ref_peer, also the probes), unless reference_echo is
  // off: then the daemon is a peer that answers no probe, as rxe or an RNIC.
  if (!d.echo && config_.reference_echo) start_echo(d);
  const sched::PolicyOps* policy = sched::find_policy(c.policy);
  if (policy == nullptr || !policy->has(sched::kCapReferenceLatency) || d.ref) return;
  const char* fallback = c.justitia.signal == sched::LatencySignal::kProbe
                             ? "SafeUtil stays at MaxRate"
                             : "Current99 from the latency-class QPs' round trips only";
  if (c.justitia.signal == sched::LatencySignal::kPassive) {
    d.ref_note = "signal passive: Current99 from the latency-class QPs' round trips, no reference flow";
    log(LogLevel::kInfo, "{}: policy justitia: {}, Target99 {} us", c.name, d.ref_note,
        static_cast<double>(c.justitia.target99) / 1e6);
    return;
  }
  if (d.ref_peer_ip) {
    if (!d.echo) {
      d.ref_note = std::string("no reference flow: ") +
                   (config_.reference_echo ? "the reference echo QP could not be made; "
                                           : "reference_echo is off (--no-reference-echo); ") +
                   fallback;
      return;
    }
    const wire::IpAddr peer = *d.ref_peer_ip;
    d.run([&](sched::Picos now) { d.echo->start_probing(now, peer, c.justitia.ref_period); });
    log(LogLevel::kInfo, "{}: policy justitia: reference flow to {} (UD QPN {} both ends, echoed), a {} B SEND every {} us, "
        "Target99 {} us", c.name, gid_text(peer), ReferenceEcho::kQpn, ReferenceEcho::kProbeBytes,
        static_cast<double>(c.justitia.ref_period) / 1e6, static_cast<double>(c.justitia.target99) / 1e6);
    return;
  }
  DeviceEntry* peer = nullptr;
  if (config_.loopback) {
    for (auto& o : devices_)
      if (o.get() != &d) peer = o.get();
  }
  if (peer == nullptr) {
    d.ref_note = std::string("no reference flow: set ref_peer (--ref-peer ADDR) to a port of another isoroced, or use "
                             "--loopback, or signal = passive; ") + fallback;
    log(LogLevel::kWarning, "{}: policy justitia: {}", c.name, d.ref_note);
    return;
  }
  auto flow = std::make_unique<ReferenceFlow>(*d.driver->dpdk(), *peer->driver->dpdk(), c.justitia.ref_period);
  std::string error;
  d.run([&](sched::Picos) { error = flow->create_src(); });
  if (error.empty()) peer->run([&](sched::Picos) { error = flow->create_dst(); });
  if (error.empty() && (!resolve_neighbor(d, peer->config().ip) || !resolve_neighbor(*peer, c.ip)))
    error = "no ARP/ND answer between " + c.name + " and " + peer->name();
  if (error.empty()) peer->run([&](sched::Picos) { error = flow->connect_dst(); });
  if (error.empty()) d.run([&](sched::Picos now) { error = flow->connect_src(now); });
  if (!error.empty()) {
    d.run([&](sched::Picos) { flow->destroy_src(); });
    peer->run([&](sched::Picos) { flow->destroy_dst(); });
    d.ref_note = "reference flow to " + peer->name() + " failed: " + error + "; " + fallback;
    log(LogLevel::kError, "{}: policy justitia: {}", c.name, d.ref_note);
    return;
  }
  const ReferenceStats st = flow->stats();
  registry_.set(&d, st.src_qpn, QpInfo::daemons_own());
  registry_.set(peer, st.dst_qpn, QpInfo::daemons_own());
  d.ref = std::move(flow);
  d.ref_peer = peer;
  log(LogLevel::kInfo, "{}: policy justitia: reference flow to {} (QP {}/{} -> {}/{}), a {} B WRITE every {} us, Target99 {} us",
      c.name, peer->name(), c.name, st.src_qpn, peer->name(), st.dst_qpn, ReferenceFlow::kProbeBytes,
      static_cast<double>(c.justitia.ref_period) / 1e6, static_cast<double>(c.justitia.target99) / 1e6);
}

void Daemon::stop_reference_flow(DeviceEntry& d) {
  if (d.echo) {
    d.run([&](sched::Picos) { d.echo->destroy(); });
    d.echo.reset();
    registry_.erase(&d, ReferenceEcho::kQpn);
  }
  if (!d.ref) return;
  DeviceEntry* peer = d.ref_peer;
  ReferenceStats st;
  d.run([&](sched::Picos) {
    st = d.ref->stats();
    d.ref->destroy_src();
  });
  peer->run([&](sched::Picos) { d.ref->destroy_dst(); });
  registry_.erase(&d, st.src_qpn);
  registry_.erase(peer, st.dst_qpn);
  d.ref.reset();
  d.ref_peer = nullptr;
  log(LogLevel::kDebug, "{}: reference flow stopped ({} probes)", d.name(), st.completed);
}

std::vector<DeviceEntry*> Daemon::stop_reference_flows(DeviceEntry& d) {
  std::vector<DeviceEntry*> stopped;
  for (auto& o : devices_) {
    if (o.get() == &d || (o->ref && o->ref_peer == &d)) {
      stop_reference_flow(*o);
      stopped.push_back(o.get());
    }
  }
  return stopped;
}

}  // namespace isoroce::ctrl
