// Operator operations: a QP's rate and class, a device's policy, DCQCN and
// justitia parameters (a new engine for an unused device).
#include <algorithm>
#include <cerrno>

#include "ctrl/config.h"
#include "ctrl/control.h"
#include "ctrl/log.h"
#include "sched/policy_registry.h"

namespace isoroce::ctrl {
namespace {

// The classes a client or an operator may give (not the policy's own "reference").
bool parse_class(const std::string& text, sched::FlowClass* cls) {
  return sched::parse_flow_class(text, cls) && *cls != sched::FlowClass::kReference;
}

// The QP named by "qpn" and its device, or a failure reply.
DeviceEntry* target_qp(OpContext& c, uint32_t* qpn, json* failure) {
  auto q = field_u64(c.req, "qpn");
  if (!q) return *failure = op_fail(EINVAL, c.op + ": \"qpn\" missing"), nullptr;
  if (*q == ReferenceEcho::kQpn)
    return *failure = op_fail(EPERM, c.op + ": QP " + std::to_string(*q) +
                                         " is every device's reference echo (the daemon's own)"),
           nullptr;
  int err = 0;
  std::string error;
  DeviceEntry* d = *q > 0xffffff ? nullptr : c.ctl.find_qp(static_cast<uint32_t>(*q), c.req.value("device", ""), &err, &error);
  if (d == nullptr) return *failure = op_fail(err ? err : EINVAL, c.op + ": " + (err ? error : "not a QPN")), nullptr;
  // A client steers its own user's QPs; privileged clients every QP (docs/security.md).
  if (!c.ctl.may_see(c.s, *d, static_cast<uint32_t>(*q)))
    return *failure = op_fail(EPERM, c.op + ": QP " + qp_label(*d, static_cast<uint32_t>(*q)) + " belongs to another user"),
           nullptr;
  *qpn = static_cast<uint32_t>(*q);
  return d;
}

json set_rate(OpContext& c) {
  uint32_t qpn = 0;
  json failure;
  DeviceEntry* d = target_qp(c, &qpn, &failure);
  if (d == nullptr) return failure;
  auto bps = field_u64(c.req, "bps");
  if (!bps) return op_fail(EINVAL, "set_rate: \"bps\" missing (0 removes the limit)");
  int rc = 0;
  d->run([&](sched::Picos now) { rc = d->qp_engine(qpn).set_qp_rate(now, wire::Qpn(qpn), *bps); });
  if (rc != 0) return op_fail(rc, "set_rate");
  return op_ok({{"device", d->name()}, {"qpn", qpn}, {"qp", qp_label(*d, qpn)}, {"bps", *bps}});
}

json set_class(OpContext& c) {
  uint32_t qpn = 0;
  json failure;
  DeviceEntry* d = target_qp(c, &qpn, &failure);
  if (d == nullptr) return failure;
  const std::string cls = c.req.value("class", "");
  sched::FlowClass fc;
  if (!parse_class(cls, &fc)) return op_fail(EINVAL, "set_class: class '" + cls + "' (latency, throughput, bandwidth, auto)");
  const std::optional<QpInfo> info = c.ctl.registry().find(d, qpn);
  if (info && info->cls == "reference")
    return op_fail(EPERM, "set_class: QP " + qp_label(*d, qpn) + " is the justitia reference flow's");
  const uint64_t app = info ? info->app : 0;
  int rc = 0;
  d->run([&](sched::Picos now) { rc = d->qp_engine(qpn).set_qp_class(now, wire::Qpn(qpn), fc, app_id(app), 1); });
  if (rc != 0) return op_fail(rc, "set_class");
  c.ctl.registry().set_class(d, qpn, cls);
  return op_ok({{"device", d->name()}, {"qpn", qpn}, {"qp", qp_label(*d, qpn)}, {"class", cls}, {"app", app}});
}

// A QP's tenant (ctrl/tenants.h): a client moves its own QPs unless a [[tenant]] rule
// places it; the tenant's weight is the operator's (privileged).
json set_tenant(OpContext& c) {
  uint32_t qpn = 0;
  json failure;
  DeviceEntry* d = target_qp(c, &qpn, &failure);
  if (d == nullptr) return failure;
  const json& t = c.req.contains("tenant") ? c.req["tenant"] : json();
  if (!t.is_string() || !valid_tenant_name(t.get<std::string>()))
    return op_fail(EINVAL, "set_tenant: \"tenant\" is 1 to 64 letters, digits, '_', '-' or '.'");
  const std::string tenant = t.get<std::string>();
  std::optional<uint64_t> weight;
  if (c.req.contains("weight")) {
    weight = field_u64(c.req, "weight");
    if (!weight || *weight < 1 || *weight > 1'000'000) return op_fail(EINVAL, "set_tenant: \"weight\" is 1 to 1000000");
  }
  const std::optional<QpInfo> info = c.ctl.registry().find(d, qpn);
  if (info && info->cls == "reference")
    return op_fail(EPERM, "set_tenant: QP " + qp_label(*d, qpn) + " is the justitia reference flow's");
  if (!c.s.privileged) {
    if (weight && *weight != c.ctl.tenants().weight(tenant))
      return op_fail(EPERM, "set_tenant: a tenant's weight is the operator's (a privileged client's)");
    const std::string ruled = info ? c.ctl.tenants().match(info->uid, info->comm) : std::string();
    if (!ruled.empty() && ruled != tenant)
      return op_fail(EPERM, "set_tenant: QP " + qp_label(*d, qpn) + " is tenant '" + ruled + "' by the daemon's [[tenant]] rules");
  }
  if (weight) c.ctl.tenants().set_weight(tenant, static_cast<uint32_t>(*weight));
  const uint32_t id = c.ctl.tenants().id(tenant);
  const uint32_t w = c.ctl.tenants().weight(tenant);
  int rc = 0;
  d->run([&](sched::Picos now) { rc = d->qp_engine(qpn).set_qp_tenant(now, wire::Qpn(qpn), id, w); });
  if (rc != 0) return op_fail(rc, "set_tenant");
  c.ctl.registry().set_tenant(d, qpn, tenant);
  const bool enforced = !note_tenant_ignored(c.ctl, *d, qpn, tenant);
  return op_ok({{"device", d->name()}, {"qpn", qpn}, {"qp", qp_label(*d, qpn)},
                {"tenant", tenant}, {"weight", w}, {"enforced", enforced}});
}

// set_dcqcn / set_justitia: the NAME=VALUE list in "params" applied to *cfg.
std::string apply_params(OpContext& c, dataplane::DeviceConfig* cfg) {
  const bool dc = c.op == "set_dcqcn";
  const json& params = c.req.contains("params") ? c.req["params"] : json::array();
  if (!params.is_array() || params.empty())
    return "\"params\" is a list of NAME=VALUE (" + std::string(dc ? "docs/dcqcn.md" : "docs/isoroced.md") + ")";
  for (const json& kv : params) {
    if (!kv.is_string()) return "each parameter is a \"NAME=VALUE\" string";
    const std::string e = dc ? dcqcn::set_param(cfg->dcqcn, kv.get<std::string>())
                             : set_justitia_param(cfg->justitia, kv.get<std::string>());
    if (!e.empty()) return e;
  }
  return dc ? dcqcn::validate(cfg->dcqcn) : std::string(sched::validate(cfg->justitia));
}

}  // namespace

json apply_engine_settings(Control& ctl, DeviceEntry& dev, const dataplane::DeviceConfig& cfg, const std::string& op) {
  DeviceEntry* d = &dev;
  const std::string& name = d->config().name;
  const sched::PolicyOps* policy = sched::find_policy(cfg.policy);
  if (policy == nullptr) return op_fail(EINVAL, op + " " + name + ": no policy '" + cfg.policy + "'");
  if (cfg.dcqcn.enabled && !policy->has(sched::kCapEnforcesRates))
    return op_fail(EINVAL, op + " " + name + ": DCQCN needs a rate-limiting policy (tassel or justitia), not " + cfg.policy);
  // Reference flows with an end in this engine go first (the engine must have no
  // QPs), and start again afterwards on whichever devices run justitia.
  std::vector<DeviceEntry*> restart = ctl.stop_reference_flows(*d);
  ctl.pause_cm(*d);
  if (std::find(restart.begin(), restart.end(), d) == restart.end()) restart.push_back(d);
  std::string error;
  bool busy = false;
  d->run([&](sched::Picos) {
    busy = !d->driver->reconfigure(cfg, &error);
    if (busy) return;
    // The pump drives the engine that was replaced: a new one for the new engine.
    d->driver->remove_hook(d->pump.get());
    auto pump = std::make_unique<ShmPump>(d->engine());
    pump->set_tsc(d->pump->tsc_start(), d->pump->tsc_hz());
    d->pump = std::move(pump);
    d->driver->add_hook(d->pump.get());
    d->cq_lanes.clear();  // the old engines' objects are gone with them
    d->srq_lanes.clear();
    for (size_t k = 1; k < d->lanes(); ++k) {
      auto& lp = d->lane_pumps[k - 1];
      d->driver->remove_lane_hook(k, lp.get());
      auto fresh = std::make_unique<ShmPump>(d->lane_engine(k));
      fresh->set_tsc(lp->tsc_start(), lp->tsc_hz());
      lp = std::move(fresh);
      d->driver->add_lane_hook(k, lp.get());
    }
  });
  ctl.resume_cm(*d);
  for (DeviceEntry* e : restart) ctl.start_reference_flow(*e);
  if (busy) return op_fail(EBUSY, op + " " + name + ": " + error);
  json state = {{"policy", cfg.policy}, {"dcqcn", cfg.dcqcn.enabled}};
  if (policy->has(sched::kCapReferenceLatency)) {
    json params = json::object();
    for (const auto& [k, v] : justitia_param_values(cfg.justitia)) params[k] = v;
    for (const auto& [k, v] : justitia_param_words(cfg.justitia)) params[k] = v;
    state["justitia"] = params;
    if (!d->ref_note.empty()) state["reference_flow"] = d->ref_note;
  }
  log(LogLevel::kInfo, "{}: {}", name, state.dump());
  return op_ok(state);
}

namespace {

// Settings the engine takes at creation: a new engine for an unused device.
json reconfigure(OpContext& c) {
  const std::string& op = c.op;
  const std::string name = c.req.value("device", "");
  DeviceEntry* d = c.ctl.find_device(name);
  if (d == nullptr) return op_fail(ENODEV, op + ": device '" + name + "'");
  if (d->sessions != 0)
    return op_fail(EBUSY, op + " " + name + ": " + std::to_string(d->sessions) +
                              " client(s) have it open; change it while it is unused");
  dataplane::DeviceConfig cfg = d->config();
  if (op == "set_policy") {
    // Only registered policies: a client names one, it never loads code (docs/security.md).
    cfg.policy = c.req.value("policy", "");
    if (sched::find_policy(cfg.policy) == nullptr)
      return op_fail(EINVAL, "set_policy: policy '" + cfg.policy + "' (" + sched::policy_names() + ")");
  } else if (std::string e = apply_params(c, &cfg); !e.empty()) {
    return op_fail(EINVAL, op + ": " + e);
  }
  return apply_engine_settings(c.ctl, *d, cfg, op);
}

}  // namespace

void register_admin_ops(OpTable& t) {
  t.add({"set_rate", set_rate, false, "limit a QP's transmit rate: qpn, bps (0 removes the limit)"});
  t.add({"set_class", set_class, false, "a QP's justitia class: qpn, class (latency, throughput, bandwidth, auto: none declared)"});
  t.add({"set_tenant", set_tenant, false, "a QP's tenant: qpn, tenant (a name), weight (the tenant's; privileged)"});
  t.add({"set_policy", reconfigure, false, "an unused device's scheduler: device, policy (a registered name: fifo, tassel, justitia, plugins)", true});
  t.add({"set_dcqcn", reconfigure, false, "an unused device's DCQCN parameters: device, params [NAME=VALUE]", true});
  t.add({"set_justitia", reconfigure, false, "an unused device's justitia parameters: device, params [NAME=VALUE]", true});
}

}  // namespace isoroce::ctrl
