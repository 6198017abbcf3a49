// What isoroce-ctl and telemetry show: devices, QPs, counters, schedulers.
// Engine state is read on the device's worker (Worker::call).
#include <rte_ethdev.h>

#include "ctrl/daemon.h"
#include "ctrl/wire_json.h"

namespace isoroce::ctrl {
namespace {

std::string mac_text(const wire::MacAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

json engine_counters(const transport::EngineCounters& c) {
  return {{"rx_frames", c.rx_frames},         {"rx_dropped", c.rx_dropped},
          {"rx_parse_errors", c.rx_parse_errors}, {"rx_unknown_qp", c.rx_unknown_qp},
          {"rx_bad_state", c.rx_bad_state},   {"rx_duplicates", c.rx_duplicates},
          {"rx_no_resource", c.rx_no_resource}, {"rx_out_of_sequence", c.rx_out_of_sequence},
          {"rx_ud_qkey_mismatch", c.rx_ud_qkey_mismatch}, {"rx_ud_no_receive", c.rx_ud_no_receive},
          {"tx_frames", c.tx_frames},         {"tx_bytes", c.tx_bytes},
          {"tx_no_buffer", c.tx_no_buffer},   {"retransmits", c.retransmits},
          {"timeouts", c.timeouts},           {"naks_sent", c.naks_sent},
          {"naks_received", c.naks_received}, {"rnr_naks_sent", c.rnr_naks_sent},
          {"rnr_naks_received", c.rnr_naks_received}, {"acks_sent", c.acks_sent},
          {"cq_overruns", c.cq_overruns},     {"ce_received", c.ce_received},
          {"cnps_sent", c.cnps_sent},         {"cnps_suppressed", c.cnps_suppressed},
          {"cnps_received", c.cnps_received}};
}

}  // namespace

DeviceEntry* Daemon::find_qp(uint32_t qpn) {
  for (auto& d : devices_) {
    bool found = false;
    d->worker->call([&](sched::Picos) { found = d->dev->engine().query_qp(wire::Qpn(qpn)) != nullptr; });
    if (found) return d.get();
  }
  return nullptr;
}

json Daemon::qp_json(DeviceEntry& d, uint32_t qpn, sched::Picos) {
  json j;
  d.worker->call([&](sched::Picos) {
    const transport::Engine& e = d.dev->engine();
    const verbs::Qp* q = e.query_qp(wire::Qpn(qpn));
    const transport::QpCounters* c = e.qp_counters(wire::Qpn(qpn));
    if (q == nullptr || c == nullptr) return;
    j = {{"device", d.dev->config().name},
         {"qpn", qpn},
         {"type", q->type() == IBV_QPT_RC ? "RC" : q->type() == IBV_QPT_UD ? "UD" : "other"},
         {"state", state_name(q->state())},
         {"dest_qpn", q->dest_qpn().value()},
         {"rate_bps", e.qp_rate(wire::Qpn(qpn))},
         {"tx_packets", c->tx_packets}, {"tx_bytes", c->tx_bytes},
         {"rx_packets", c->rx_packets}, {"rx_bytes", c->rx_bytes},
         {"retransmits", c->retransmits}, {"naks_sent", c->naks_sent},
         {"naks_received", c->naks_received}, {"rnr_naks_sent", c->rnr_naks_sent},
         {"rnr_naks_received", c->rnr_naks_received}, {"errors", c->errors}};
    const transport::QpDcqcnState dc = e.qp_dcqcn(wire::Qpn(qpn));
    j["ce_received"] = dc.ce_received;
    j["cnps_sent"] = dc.cnps_sent;
    j["cnps_received"] = dc.cnps_received;
    if (d.dev->config().dcqcn.enabled)
      j["dcqcn"] = {{"limiting", dc.limiting}, {"rate_bps", dc.rate_bps}, {"target_bps", dc.target_bps},
                    {"alpha", dc.alpha}, {"decreases", dc.decreases}, {"increases", dc.increases}};
  });
  if (j.is_null()) return j;
  std::lock_guard lock(registry_mu_);
  auto it = qp_info_.find({&d, qpn});
  if (it != qp_info_.end()) {
    j["class"] = it->second.cls;
    j["app"] = it->second.app;
    j["client"] = it->second.client;
    j["pid"] = it->second.pid;
    j["comm"] = it->second.comm;
  }
  return j;
}

json Daemon::devices_view() {
  json list = json::array();
  for (size_t i = 0; i < devices_.size(); ++i) {
    DeviceEntry& d = *devices_[i];
    const dataplane::DeviceConfig& c = d.dev->config();
    size_t qps = 0;
    size_t neighbors = 0;
    d.worker->call([&](sched::Picos) {
      qps = d.dev->engine().qp_numbers().size();
      neighbors = d.dev->net().neighbors().size();
    });
    rte_eth_link link{};
    rte_eth_link_get_nowait(d.dev->port().port_id(), &link);
    list.push_back({{"name", c.name},
                    {"port", d.dev->port().port_id()},
                    {"devargs", c.devargs},
                    {"driver", d.dev->port().driver()},
                    {"mac", mac_text(d.dev->port().mac())},
                    {"ip", config_.ports[i].ip_text},
                    {"gid", json::array({gid_text(c.ip)})},
                    {"gid_type", "RoCE v2"},
                    {"link_gbps", static_cast<double>(c.link_bps) / 1e9},
                    {"link_up", link.link_status == RTE_ETH_LINK_UP},
                    {"active_mtu", 128 << c.mtu},
                    {"policy", sched::to_string(c.policy)},
                    {"dcqcn", c.dcqcn.enabled},
                    {"qps", qps},
                    {"neighbors", neighbors},
                    {"clients", d.sessions}});
  }
  return list;
}

json Daemon::qps_view() {
  json list = json::array();
  for (auto& d : devices_) {
    std::vector<wire::Qpn> qpns;
    d->worker->call([&](sched::Picos) { qpns = d->dev->engine().qp_numbers(); });
    for (wire::Qpn q : qpns) {
      json j = qp_json(*d, q.value(), 0);
      if (!j.is_null()) list.push_back(std::move(j));
    }
  }
  return list;
}

std::optional<json> Daemon::qp_view(uint32_t qpn) {
  DeviceEntry* d = find_qp(qpn);
  if (d == nullptr) return std::nullopt;
  json j = qp_json(*d, qpn, 0);
  if (j.is_null()) return std::nullopt;
  return j;
}

json Daemon::stats_view() {
  json out = json::object();
  for (auto& d : devices_) {
    json j;
    d->worker->call([&](sched::Picos) {
      const auto& p = d->dev->port().counters();
      const auto& n = d->dev->net().counters();
      j = {{"engine", engine_counters(d->dev->engine().counters())},
           {"port", {{"rx_packets", p.rx_packets}, {"rx_bytes", p.rx_bytes}, {"tx_packets", p.tx_packets},
                     {"tx_bytes", p.tx_bytes}, {"tx_dropped", p.tx_dropped}, {"no_mbuf", p.no_mbuf}}},
           {"net", {{"arp_requests_answered", n.arp_requests_answered},
                    {"arp_replies_received", n.arp_replies_received},
                    {"nd_solicits_answered", n.nd_solicits_answered},
                    {"nd_adverts_received", n.nd_adverts_received},
                    {"echo_answered", n.echo_answered}, {"solicits_sent", n.solicits_sent},
                    {"solicits_refused", n.solicits_refused}, {"resolutions_expired", n.resolutions_expired},
                    {"neighbors_refused", n.neighbors_refused}, {"pending", d->dev->net().pending()},
                    {"neighbors", d->dev->net().neighbors().size()}, {"dropped", n.dropped}}}};
      const ShmCounters& sc = d->pump->counters();
      j["shm"] = {{"send_wqes", sc.send_wqes}, {"recv_wqes", sc.recv_wqes}, {"cqes", sc.cqes},
                  {"wakeups", sc.wakeups}, {"bad_wqes", sc.bad_wqes}};
    });
    out[d->dev->config().name] = j;
  }
  return out;
}

json Daemon::sched_view() {
  json out = json::object();
  for (auto& d : devices_) {
    const auto& c = d->dev->config();
    size_t qps = 0, limited = 0;
    d->worker->call([&](sched::Picos) {
      const transport::Engine& e = d->dev->engine();
      for (wire::Qpn q : e.qp_numbers()) {
        ++qps;
        if (e.qp_rate(q) != 0) ++limited;
      }
    });
    json dcqcn = json::object();
    for (const auto& p : dcqcn::param_table()) dcqcn[std::string(p.name)] = dcqcn::get_param(c.dcqcn, p.name);
    out[c.name] = {{"policy", sched::to_string(c.policy)},
                   {"dcqcn", dcqcn},
                   {"link_gbps", static_cast<double>(c.link_bps) / 1e9},
                   {"lookahead_us", static_cast<double>(c.lookahead) / 1e6},
                   {"qps", qps},
                   {"rate_limited_qps", limited},
                   {"async_events", d->async_events.load()}};
    if (c.policy == sched::Policy::kJustitia) out[c.name]["justitia"] = justitia_json(*d);
  }
  return out;
}

json Daemon::justitia_json(DeviceEntry& d) {
  const dataplane::DeviceConfig& c = d.dev->config();
  sched::JustitiaStats st;
  bool have = false;
  ReferenceStats ref;
  EchoStats echo;
  d.worker->call([&](sched::Picos) {
    if (const sched::JustitiaStats* s = d.dev->engine().scheduler().justitia_stats()) st = *s, have = true;
    if (d.ref) ref = d.ref->stats();
    if (d.echo) echo = d.echo->stats();
  });
  auto us = [](sched::Picos p) { return static_cast<double>(p) / 1e6; };
  json j = json::object();
  if (have) {
    j = {{"safe_util_bps", st.safe_util_bps},
         {"min_safe_util_bps", st.min_safe_util_bps},
         {"max_rate_bps", st.max_rate_bps},
         {"tau_us", us(st.tau)},
         {"current99_us", us(st.current99)},
         {"target99_us", us(st.target99)},
         {"token_bytes", st.token_bytes},
         {"token_ops", st.token_ops},
         {"tokens", st.tokens},
         {"tokens_issued", st.tokens_issued},
         {"latency_flows", st.latency_flows},
         {"throughput_flows", st.throughput_flows},
         {"bandwidth_flows", st.bandwidth_flows},
         {"samples", st.samples},
         {"halvings", st.halvings},
         {"unattainable", st.unattainable}};
  }
  j["latency_target_missed"] = d.latency_target_missed.load();
  json r = {{"peer", d.ref_peer ? d.ref_peer->dev->config().name : std::string("-")},
            {"running", ref.running},
            {"failed", ref.failed},
            {"probes", ref.completed},
            {"posted", ref.posted},
            {"errors", ref.errors},
            {"last_us", us(ref.last)},
            {"min_us", us(ref.min)},
            {"max_us", us(ref.max)},
            {"qpn", ref.src_qpn}};
  if (echo.probing) {
    // A peer in another daemon (ctrl/reference_echo.h): UD probes, echoed.
    r = {{"peer", d.ref_peer_ip ? gid_text(*d.ref_peer_ip) : std::string("-")},
         {"running", echo.peer_known},
         {"failed", false},
         {"probes", echo.completed},
         {"posted", echo.posted},
         {"lost", echo.lost},
         {"errors", echo.errors},
         {"last_us", us(echo.last)},
         {"min_us", us(echo.min)},
         {"max_us", us(echo.max)},
         {"qpn", ReferenceEcho::kQpn}};
  }
  if (!d.ref_note.empty()) r["note"] = d.ref_note;
  r["echoed"] = echo.echoed;  // probes of other daemons this device answered
  r["unanswered"] = echo.unanswered;  // probes from senders not (yet) resolved
  j["reference"] = r;
  json params = json::object();
  for (const auto& [k, v] : justitia_param_values(c.justitia)) params[k] = v;
  j["params"] = params;
  return j;
}

json Daemon::status_view() {
  json workers = json::array();
  for (size_t i = 0; i < workers_.size(); ++i) {
    const dataplane::WorkerStats st = workers_[i]->stats();
    json devs = json::array();
    for (const auto* d : workers_[i]->devices()) devs.push_back(d->config().name);
    workers.push_back({{"lcore", worker_lcores_[i]}, {"devices", devs}, {"passes", st.passes},
                       {"busy_passes", st.busy_passes}, {"sleeps", st.sleeps}, {"commands", st.commands}});
  }
  return {{"pid", getpid()},
          {"version", kVersion},
          {"socket", config_.socket},
          {"file_prefix", config_.file_prefix},
          {"uptime_s", static_cast<double>(clock_->now() - started_at_) / 1e12},
          {"devices", devices_.size()},
          {"clients", client_count_.load()},
          {"workers", workers}};
}

}  // namespace isoroce::ctrl
