// Address handles and queue pairs (a QP's SQ and RQ rings when the request
// says "shm"), and the QP registry entry of each.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ctrl/control.h"
#include "ctrl/lane_objects.h"
#include "ctrl/log.h"
#include "ctrl/wire_json.h"

namespace isoroce::ctrl {

std::string qp_label(const DeviceEntry& d, uint32_t qpn) { return d.config().name + "/" + std::to_string(qpn); }

bool note_tenant_ignored(Control& ctl, DeviceEntry& d, uint32_t qpn, const std::string& tenant) {
  const std::string why = tenants_ignored_by(d.config().policy);
  if (why.empty()) return false;
  if (ctl.tenants().first_ignored(d.config().name, tenant))
    log(LogLevel::kWarning, "QP {} in tenant '{}': {}", qp_label(d, qpn), tenant, why);
  return true;
}
namespace {

json ring_json(const ShmQueue& q) { return {{"log2_entries", q.log2_entries()}, {"log2_elem", q.log2_elem()}}; }

json create_ah(OpContext& c) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  auto pd = own_handle(s.objs.pds, c.req, "pd");
  if (!pd) return op_fail(EINVAL, "create_ah: not a PD of this client");
  if (auto e = Control::over("max_ahs", s.objs.ahs.size(), 1, c.ctl.limits().max_ahs); !e.empty())
    return op_fail(ENOMEM, "create_ah: " + e);
  transport::AhAttr a;
  std::string err;
  if (!ah_from_json(c.req, &a, &err)) return op_fail(EINVAL, "create_ah: " + err);
  if (!c.ctl.resolve_neighbor(d, a.dgid))
    return op_fail(EHOSTUNREACH, "create_ah: no ARP/ND answer from " + c.req.value("dgid", ""));
  verbs::Result<transport::AhHandle> r = verbs::Result<transport::AhHandle>::error(EIO);
  d.run([&](sched::Picos) {
    r = lanes_create_ah(d, *pd, a);
    if (r.ok()) s.objs.ahs.insert(r.value());
  });
  if (!r.ok()) return op_fail(r.err(), "create_ah");
  return op_ok({{"ah", r.value()}});
}

json destroy_ah(OpContext& c) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  auto ah = own_handle(s.objs.ahs, c.req, "ah");
  if (!ah) return op_fail(EINVAL, "destroy_ah: not an AH of this client");
  int rc = 0;
  d.run([&](sched::Picos) {
    rc = lanes_destroy_ah(d, *ah);
    if (rc == 0) s.objs.ahs.erase(*ah);
  });
  if (rc) return op_fail(rc, "destroy_ah");
  return op_ok();
}

// create_qp's request as the engine takes it, or a failure reply.
bool qp_create_from(OpContext& c, transport::QpCreate* q, std::string* cls, json* failure) {
  const ClientObjects& o = c.s.objs;
  auto pd = own_handle(o.pds, c.req, "pd");
  auto scq = own_handle(o.cqs, c.req, "send_cq");
  auto rcq = own_handle(o.cqs, c.req, "recv_cq");
  if (!pd || !scq || !rcq) return *failure = op_fail(EINVAL, "create_qp: pd, send_cq and recv_cq must be this client's"), false;
  q->pd = *pd;
  q->send_cq = *scq;
  q->recv_cq = *rcq;
  if (c.req.contains("srq")) {
    auto srq = own_handle(o.srqs, c.req, "srq");
    if (!srq) return *failure = op_fail(EINVAL, "create_qp: not an SRQ of this client"), false;
    q->use_srq = true;
    q->srq = *srq;
  }
  const std::string type = c.req.value("type", "rc");
  if (type != "rc" && type != "ud") return *failure = op_fail(EOPNOTSUPP, "create_qp: type '" + type + "' (rc, ud)"), false;
  q->init.qp_type = type == "rc" ? IBV_QPT_RC : IBV_QPT_UD;
  q->init.cap.max_send_wr = static_cast<uint32_t>(field_u64_or(c.req, "max_send_wr", 16));
  q->init.cap.max_recv_wr = static_cast<uint32_t>(field_u64_or(c.req, "max_recv_wr", 16));
  q->init.cap.max_send_sge = static_cast<uint32_t>(field_u64_or(c.req, "max_send_sge", 1));
  q->init.cap.max_recv_sge = static_cast<uint32_t>(field_u64_or(c.req, "max_recv_sge", 1));
  q->init.cap.max_inline_data = static_cast<uint32_t>(field_u64_or(c.req, "max_inline_data", 0));
  q->init.sq_sig_all = c.req.value("sq_sig_all", false);
  // Class: this field, else none declared ("": justitia's classify decides, bandwidth
  // under classify = declared); set_class changes it later.
  cls->clear();
  if (c.req.contains("class")) {
    if (!c.req["class"].is_string())
      return *failure = op_fail(EINVAL, "create_qp: \"class\" is latency, throughput or bandwidth"), false;
    *cls = c.req["class"].get<std::string>();
  }
  return true;
}

// Destroys a QP create_qp made when its rings cannot be.
void undo_qp(OpContext& c, uint32_t qpn) {
  DeviceEntry& d = c.dev();
  d.run([&](sched::Picos) {
    d.qp_engine(qpn).destroy_qp(wire::Qpn(qpn));
    c.s.objs.qps.erase(qpn);
  });
  c.ctl.registry().erase(&d, qpn);
}

// The QP's rings: SQ, and RQ unless it uses an SRQ; added to the pump.
json add_qp_rings(OpContext& c, uint32_t qpn, const transport::QpCreate& q) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  const ibv_qp_cap& cap = q.init.cap;
  std::string err;
  auto sq = ShmQueue::create(std::max(cap.max_send_wr, 1u), shm::send_wqe_bytes(cap.max_send_sge, cap.max_inline_data),
                             false, &err);
  std::unique_ptr<ShmQueue> rq;
  if (sq && !q.use_srq)
    rq = ShmQueue::create(std::max(cap.max_recv_wr, 1u), shm::recv_wqe_bytes(cap.max_recv_sge), false, &err);
  if (!sq || (!q.use_srq && !rq)) {
    undo_qp(c, qpn);
    return op_fail(ENOMEM, "create_qp: " + err);
  }
  d.run([&](sched::Picos) {
    ShmPump& pump = d.qp_pump(qpn);
    pump.add_sq(qpn, sq.get(), cap.max_send_sge, cap.max_inline_data, &s.objs);
    if (rq) pump.add_rq(qpn, rq.get(), cap.max_recv_sge, &s.objs);
  });
  json reply = {{"qpn", qpn}, {"sq", ring_json(*sq)}};
  s.reply_fds.push_back(dup(sq->fd()));
  sq->close_fd();
  if (rq) {
    reply["rq"] = ring_json(*rq);
    s.reply_fds.push_back(dup(rq->fd()));
    rq->close_fd();
  }
  s.mappings += rq ? 2 : 1;
  s.qp_rings[qpn] = {std::move(sq), std::move(rq)};
  return op_ok(reply);
}

json create_qp(OpContext& c) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  transport::QpCreate q;
  std::string cls;
  json failure;
  if (!qp_create_from(c, &q, &cls, &failure)) return failure;
  const ClientLimits& lim = c.ctl.limits();
  if (q.init.cap.max_send_wr > lim.max_wr || q.init.cap.max_recv_wr > lim.max_wr)
    return op_fail(EINVAL, "create_qp: max_send_wr and max_recv_wr must be at most limits.max_wr (" +
                               std::to_string(lim.max_wr) + ")");
  std::string e = Control::over("max_qps", s.objs.qps.size(), 1, lim.max_qps);
  if (e.empty() && c.req.value("shm", false))
    e = Control::over("max_mappings", s.mappings, q.use_srq ? 1 : 2, lim.max_mappings);
  if (!e.empty()) return op_fail(ENOMEM, "create_qp: " + e);
  sched::FlowClass fc = sched::FlowClass::kAuto;
  if (!cls.empty() && (!sched::parse_flow_class(cls, &fc) || fc == sched::FlowClass::kReference))
    return op_fail(EINVAL, "create_qp: class '" + cls + "' (latency, throughput, bandwidth, auto)");
  // No class declared: the QP is classified from what it sends if the device says so.
  if (cls.empty()) cls = d.config().justitia.classify == sched::Classify::kDeclared ? "bandwidth" : "auto";
  // Its tenant: a [[tenant]] rule matching the client, else what the client declares.
  std::string tenant = c.ctl.tenants().match(s.uid, s.comm);
  if (tenant.empty() && c.req.contains("tenant")) {
    if (!c.req["tenant"].is_string() || !valid_tenant_name(c.req["tenant"].get<std::string>()))
      return op_fail(EINVAL, "create_qp: \"tenant\" is 1 to 64 letters, digits, '_', '-' or '.'");
    tenant = c.req["tenant"].get<std::string>();
  }
  const uint32_t tenant_id = tenant.empty() ? sched::kNoTenant : c.ctl.tenants().id(tenant);
  const uint32_t tenant_weight = tenant.empty() ? 1 : c.ctl.tenants().weight(tenant);
  verbs::Result<wire::Qpn> r = verbs::Result<wire::Qpn>::error(EIO);
  int class_rc = 0;
  std::string lane_error;
  d.run([&](sched::Picos now) {
    // Lanes: the lane of its CQs/SRQ, else the one with the fewest QPs.
    const int lane = place_qp(d, q, &lane_error);
    if (lane < 0) return;
    transport::Engine& e = d.lane_engine(static_cast<size_t>(lane));
    r = e.create_qp(q);
    if (!r.ok()) return;
    class_rc = e.set_qp_class(now, r.value(), fc, app_id(s.id), 1);
    if (class_rc == 0 && tenant_id != sched::kNoTenant)
      class_rc = e.set_qp_tenant(now, r.value(), tenant_id, tenant_weight);
    if (class_rc != 0) {
      e.destroy_qp(r.value());
      return;
    }
    s.objs.qps.insert(r.value().value());
    bind_queues(d, s, q, static_cast<size_t>(lane));
  });
  if (!lane_error.empty()) return op_fail(EINVAL, "create_qp: " + lane_error);
  if (!r.ok()) return op_fail(r.err(), "create_qp");
  if (class_rc != 0) return op_fail(class_rc, "create_qp: set_qp_class");
  const uint32_t qpn = r.value().value();
  QpInfo info;
  info.client = s.id;
  info.pid = s.pid;
  info.uid = s.uid;
  info.comm = s.comm;
  info.cls = cls;
  info.app = s.id;
  info.tenant = tenant;
  c.ctl.registry().set(&d, qpn, std::move(info));
  if (!tenant.empty()) note_tenant_ignored(c.ctl, d, qpn, tenant);
  if (!c.req.value("shm", false)) return op_ok({{"qpn", qpn}});
  return add_qp_rings(c, qpn, q);
}

json modify_qp(OpContext& c) {
  DeviceEntry& d = c.dev();
  auto qp = own_handle(c.s.objs.qps, c.req, "qpn");
  if (!qp) return op_fail(EINVAL, "modify_qp: not a QP of this client");
  ibv_qp_attr a{};
  uint32_t mask = 0;
  std::string err;
  if (!qp_attr_from_json(c.req.value("attr", json::object()), &a, &mask, &err))
    return op_fail(EINVAL, "modify_qp: " + err);
  if ((mask & IBV_QP_AV)) {
    wire::IpAddr gid;
    std::memcpy(gid.data(), a.ah_attr.grh.dgid.raw, 16);
    if (!c.ctl.resolve_neighbor(d, gid))
      return op_fail(EHOSTUNREACH, "modify_qp: no ARP/ND answer from the destination GID");
  }
  int rc = 0;
  d.run([&](sched::Picos) {
    rc = d.qp_engine(*qp).modify_qp(wire::Qpn(*qp), a, mask);
    if (rc == 0 && (mask & IBV_QP_STATE) && a.qp_state == IBV_QPS_RESET && d.pump) d.qp_pump(*qp).reset_rq(*qp);
  });
  return rc ? op_fail(rc, "modify_qp") : op_ok();
}

json query_qp(OpContext& c) {
  DeviceEntry& d = c.dev();
  auto qp = own_handle(c.s.objs.qps, c.req, "qpn");
  if (!qp) return op_fail(EINVAL, "query_qp: not a QP of this client");
  json out;
  d.run([&](sched::Picos) {
    if (const verbs::Qp* q = d.qp_engine(*qp).query_qp(wire::Qpn(*qp))) out = qp_attr_to_json(q->attr());
  });
  return op_ok({{"attr", out}});
}

json destroy_qp(OpContext& c) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  auto qp = own_handle(s.objs.qps, c.req, "qpn");
  if (!qp) return op_fail(EINVAL, "destroy_qp: not a QP of this client");
  int rc = 0;
  d.run([&](sched::Picos) {
    rc = d.qp_engine(*qp).destroy_qp(wire::Qpn(*qp));
    if (rc != 0) return;
    d.qp_pump(*qp).remove_qp(*qp);
    s.objs.qps.erase(*qp);
  });
  if (rc) return op_fail(rc, "destroy_qp");
  if (auto it = s.qp_rings.find(*qp); it != s.qp_rings.end()) {
    s.mappings -= it->second.second ? 2 : 1;
    s.qp_rings.erase(it);
  }
  c.ctl.registry().erase(&d, *qp);
  return op_ok();
}

}  // namespace

void register_qp_ops(OpTable& t) {
  t.add({"create_ah", create_ah, true, "pd, dgid, traffic_class, hop_limit, flow_label, sl"});
  t.add({"destroy_ah", destroy_ah, true, "ah"});
  t.add({"create_qp", create_qp, true,
         "pd, send_cq, recv_cq, srq, type (rc, ud), max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, "
         "max_inline_data, sq_sig_all, class, tenant, shm (rings)"});
  t.add({"modify_qp", modify_qp, true, "qpn, attr (the attributes present set the mask)"});
  t.add({"query_qp", query_qp, true, "qpn: its attributes"});
  t.add({"destroy_qp", destroy_qp, true, "qpn"});
}

}  // namespace isoroce::ctrl
