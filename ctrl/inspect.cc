// What isoroce-ctl and telemetry show: devices, QPs, counters, schedulers.
// Engine state is read on the device's executor (its worker in isoroced).
#include <unistd.h>

#include <map>

#include "ctrl/config.h"
#include "ctrl/control.h"
#include "ctrl/wire_json.h"
#include "sched/policy_registry.h"
#include "transport/verbs/mtu.h"

namespace isoroce::ctrl {
namespace {

json engine_counters(const transport::EngineCounters& c) {
  return {{"rx_frames", c.rx_frames},         {"rx_dropped", c.rx_dropped},
          {"rx_parse_errors", c.rx_parse_errors}, {"rx_unknown_qp", c.rx_unknown_qp},
          {"rx_bad_state", c.rx_bad_state},   {"rx_duplicates", c.rx_duplicates},
          {"rx_no_resource", c.rx_no_resource}, {"rx_out_of_sequence", c.rx_out_of_sequence},
          {"rx_ud_qkey_mismatch", c.rx_ud_qkey_mismatch}, {"rx_ud_no_receive", c.rx_ud_no_receive},
          // Refusals by reason (docs/security.md, "Peers on the wire").
          {"rx_bad_icrc", c.rx_bad_icrc},     {"rx_not_for_port", c.rx_not_for_port},
          {"rx_wrong_source", c.rx_wrong_source}, {"rx_wrong_transport", c.rx_wrong_transport},
          {"rx_psn_out_of_window", c.rx_psn_out_of_window}, {"rx_bad_opcode_sequence", c.rx_bad_opcode_sequence},
          {"rx_bad_length", c.rx_bad_length}, {"rx_bad_rkey", c.rx_bad_rkey},
          {"rx_invalid_request", c.rx_invalid_request},
          {"tx_frames", c.tx_frames},         {"tx_bytes", c.tx_bytes},
          {"tx_no_buffer", c.tx_no_buffer},   {"tx_loopback", c.tx_loopback},
          {"retransmits", c.retransmits},
          {"timeouts", c.timeouts},           {"naks_sent", c.naks_sent},
          {"naks_received", c.naks_received}, {"rnr_naks_sent", c.rnr_naks_sent},
          {"rnr_naks_received", c.rnr_naks_received}, {"acks_sent", c.acks_sent},
          {"responses_cancelled", c.responses_cancelled},
          {"cq_overruns", c.cq_overruns},     {"ce_received", c.ce_received},
          {"cnps_sent", c.cnps_sent},         {"cnps_suppressed", c.cnps_suppressed},
          {"cnps_received", c.cnps_received}};
}

}  // namespace

json Control::qp_json(DeviceEntry& d, uint32_t qpn) {
  json j;
  d.run([&](sched::Picos) {
    const transport::Engine& e = d.qp_engine(qpn);
    const verbs::Qp* q = e.query_qp(wire::Qpn(qpn));
    const transport::QpCounters* c = e.qp_counters(wire::Qpn(qpn));
    if (q == nullptr || c == nullptr) return;
    j = {{"device", d.name()},
         {"qpn", qpn},
         {"lane", d.qp_lane(qpn)},
         {"type", q->type() == IBV_QPT_RC ? "RC" : q->type() == IBV_QPT_UD ? "UD" : "other"},
         {"state", state_name(q->state())},
         {"dest_qpn", q->dest_qpn().value()},
         {"rate_bps", e.qp_rate(wire::Qpn(qpn))},
         {"tx_packets", c->tx_packets}, {"tx_bytes", c->tx_bytes},
         {"rx_packets", c->rx_packets}, {"rx_bytes", c->rx_bytes},
         {"retransmits", c->retransmits}, {"naks_sent", c->naks_sent},
         {"naks_received", c->naks_received}, {"rnr_naks_sent", c->rnr_naks_sent},
         {"rnr_naks_received", c->rnr_naks_received}, {"errors", c->errors},
         {"rtt_samples", c->rtt_samples}, {"last_rtt_us", static_cast<double>(c->last_rtt) / 1e6}};
    const transport::QpDcqcnState dc = e.qp_dcqcn(wire::Qpn(qpn));
    j["ce_received"] = dc.ce_received;
    j["cnps_sent"] = dc.cnps_sent;
    j["cnps_received"] = dc.cnps_received;
    if (d.config().dcqcn.enabled)
      j["dcqcn"] = {{"limiting", dc.limiting}, {"rate_bps", dc.rate_bps}, {"target_bps", dc.target_bps},
                    {"alpha", dc.alpha}, {"decreases", dc.decreases}, {"increases", dc.increases}};
  });
  if (j.is_null()) return j;
  if (std::optional<QpInfo> info = registry_.find(&d, qpn)) {
    j["class"] = info->cls;
    j["app"] = info->app;
    j["client"] = info->client;
    j["pid"] = info->pid;
    j["comm"] = info->comm;
    if (!info->tenant.empty()) j["tenant"] = info->tenant;
  }
  return j;
}

json Control::device_view(DeviceEntry& d) {
  const dataplane::DeviceConfig& c = d.config();
  size_t qps = 0;
  json j;
  d.run([&](sched::Picos) {
    for (size_t k = 0; k < d.lanes(); ++k) qps += d.lane_engine(k).qp_numbers().size();
    j = d.driver->port_json();
  });
  j["name"] = c.name;
  j["ip"] = d.ip_text;
  j["gid"] = json::array({gid_text(c.ip)});
  j["gid_type"] = "RoCE v2";
  j["link_gbps"] = static_cast<double>(c.link_bps) / 1e9;
  j["active_mtu"] = verbs::mtu_bytes(c.mtu);
  j["policy"] = c.policy;
  j["dcqcn"] = c.dcqcn.enabled;
  j["qps"] = qps;
  j["lanes"] = d.lanes();
  j["clients"] = d.sessions;
  return j;
}

json Control::devices_view() {
  json list = json::array();
  for (auto& d : devices_) list.push_back(device_view(*d));
  return list;
}

json Control::qps_view(const Session* viewer) {
  json list = json::array();
  for (auto& d : devices_) {
    std::vector<wire::Qpn> qpns;
    d->run([&](sched::Picos) {
      for (size_t k = 0; k < d->lanes(); ++k)
        for (wire::Qpn q : d->lane_engine(k).qp_numbers()) qpns.push_back(q);
    });
    for (wire::Qpn q : qpns) {
      if (viewer != nullptr && !may_see(*viewer, *d, q.value())) continue;
      json j = qp_json(*d, q.value());
      if (!j.is_null()) list.push_back(std::move(j));
    }
  }
  return list;
}

std::optional<json> Control::qp_view(DeviceEntry& d, uint32_t qpn) {
  json j = qp_json(d, qpn);
  if (j.is_null()) return std::nullopt;
  return j;
}

// The CM agent's counters (ctrl/cm_agent.h, docs/cm.md): what QP1 carried and
// every kind of MAD the Manager refused.
static json cm_counters(const CmAgentStats& s) {
  const cm::ManagerStats& m = s.manager;
  return {{"running", s.running}, {"received", s.received}, {"sent", s.sent}, {"looped", s.looped},
          {"short_received", s.short_received}, {"recv_errors", s.recv_errors}, {"unresolved", s.unresolved}, {"send_errors", s.send_errors},
          {"events", s.events}, {"events_dropped", s.events_dropped}, {"retransmits", m.retransmits},
          {"malformed", m.malformed}, {"wrong_class", m.wrong_class}, {"unknown_attribute", m.unknown_attribute},
          {"unmatched", m.unmatched}, {"duplicates", m.duplicates}, {"stale", m.stale},
          {"no_listener", m.no_listener}, {"overload", m.overload}, {"timeouts", m.timeouts},
          {"established", m.established}, {"rejected_sent", m.rejected_sent},
          {"rejected_received", m.rejected_received}};
}

json Control::stats_view() {
  json out = json::object();
  for (auto& d : devices_) {
    json j;
    d->run([&](sched::Picos) {
      j = d->driver->port_stats();
      j["engine"] = engine_counters(d->engine().counters());
      const ShmCounters& sc = d->pump->counters();
      j["shm"] = {{"send_wqes", sc.send_wqes}, {"recv_wqes", sc.recv_wqes}, {"cqes", sc.cqes},
                  {"wakeups", sc.wakeups}, {"bad_wqes", sc.bad_wqes}};
      if (d->cm) j["cm"] = cm_counters(d->cm->stats());
      // Lanes: each one's engine, pump and hand-off counters (lane 0's are above too).
      if (d->lanes() > 1) {
        json lanes = d->driver->lanes_json();
        for (size_t k = 0; k < d->lanes() && k < lanes.size(); ++k) {
          lanes[k]["engine"] = engine_counters(d->lane_engine(k).counters());
          const ShmCounters& lc = d->lane_pump(k).counters();
          lanes[k]["shm"] = {{"send_wqes", lc.send_wqes}, {"recv_wqes", lc.recv_wqes}, {"cqes", lc.cqes},
                             {"wakeups", lc.wakeups}, {"bad_wqes", lc.bad_wqes}};
        }
        j["lanes"] = std::move(lanes);
      }
    });
    out[d->name()] = j;
  }
  return out;
}

json Control::sched_view() {
  json out = json::object();
  for (auto& d : devices_) {
    const auto& c = d->config();
    size_t qps = 0, limited = 0;
    std::string fault;  // a plugin's policy that was replaced by fifo
    d->run([&](sched::Picos) {
      fault = d->engine().scheduler().fault();
      for (size_t k = 0; k < d->lanes(); ++k) {
        const transport::Engine& e = d->lane_engine(k);
        for (wire::Qpn q : e.qp_numbers()) {
          ++qps;
          if (e.qp_rate(q) != 0) ++limited;
        }
      }
    });
    json dcqcn = json::object();
    for (const auto& p : dcqcn::param_table()) dcqcn[std::string(p.name)] = dcqcn::get_param(c.dcqcn, p.name);
    out[c.name] = {{"policy", c.policy},
                   {"dcqcn", dcqcn},
                   {"link_gbps", static_cast<double>(c.link_bps) / 1e9},
                   {"lanes", d->lanes()},
                   {"lookahead_us", static_cast<double>(c.lookahead) / 1e6},
                   {"qps", qps},
                   {"rate_limited_qps", limited},
                   {"async_events", d->async_events.load()}};
    if (!fault.empty()) out[c.name]["policy_fault"] = fault;
    if (const sched::PolicyOps* p = sched::find_policy(c.policy); p && p->has(sched::kCapReferenceLatency))
      out[c.name]["justitia"] = justitia_json(*d);
    if (json t = tenants_json(*d); !t.empty()) out[c.name]["tenants"] = std::move(t);
  }
  return out;
}

// Each tenant with QPs on d: its weight, QPs, bytes sent and share of what the
// tenants sent (since the QPs were created).
json Control::tenants_json(DeviceEntry& d) {
  const auto qps = registry_.tenants_of(&d);
  if (qps.empty()) return json::array();
  std::map<std::string, std::pair<uint64_t, uint64_t>> by;  // tenant -> (QPs, tx bytes)
  d.run([&](sched::Picos) {
    for (const auto& [qpn, tenant] : qps) {
      auto& [n, bytes] = by[tenant];
      ++n;
      if (const transport::QpCounters* c = d.qp_engine(qpn).qp_counters(wire::Qpn(qpn))) bytes += c->tx_bytes;
    }
  });
  uint64_t total = 0;
  for (const auto& [t, v] : by) total += v.second;
  // Whether the device's policy applies tenants (fifo and rnic, as a hardware RNIC, do
  // not: the shares are then what per-QP arbitration gives them).
  const bool enforced = tenants_ignored_by(d.config().policy).empty();
  json list = json::array();
  for (const auto& [t, v] : by)
    list.push_back({{"tenant", t}, {"weight", tenants_.weight(t)}, {"qps", v.first}, {"tx_bytes", v.second},
                    {"share", total == 0 ? 0.0 : static_cast<double>(v.second) / static_cast<double>(total)},
                    {"enforced", enforced}});
  return list;
}

json Control::justitia_json(DeviceEntry& d) {
  const dataplane::DeviceConfig& c = d.config();
  sched::JustitiaStats st;
  bool have = false;
  ReferenceStats ref;
  EchoStats echo;
  d.run([&](sched::Picos) {
    if (const sched::JustitiaStats* s = d.engine().scheduler().justitia_stats()) st = *s, have = true;
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
         {"passive_samples", st.passive_samples},
         {"reclassified", st.reclassified},
         {"halvings", st.halvings},
         {"unattainable", st.unattainable}};
  }
  j["latency_target_missed"] = d.latency_target_missed.load();
  json r = {{"peer", d.ref_peer ? d.ref_peer->name() : std::string("-")},
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
  for (const auto& [k, v] : justitia_param_words(c.justitia)) params[k] = v;
  j["params"] = params;
  return j;
}

json Control::status_view() {
  return {{"pid", getpid()}, {"version", kVersion}, {"devices", devices_.size()}};
}

}  // namespace isoroce::ctrl
