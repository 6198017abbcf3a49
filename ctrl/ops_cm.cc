// rdma_cm operations (docs/control-protocol.md, "Connection management";
// docs/rdma_cm.md): libisoroce-rdmacm's event channel is one connection, its
// ids are the daemon's CmIdRecs (ctrl/cm_ids.h), their connections IB CM
// MADs on QP1 of a device (ctrl/cm_agent.h). None needs "open": an id picks
// its device by address.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "ctrl/cm_agent.h"
#include "ctrl/control.h"
#include "transport/cm/rdma_cm_header.h"

namespace isoroce::ctrl {
namespace {

// librdmacm's event numbers (enum rdma_cm_event_type) this file queues.
constexpr int kAddrResolved = 0, kAddrError = 1, kRouteResolved = 2, kRejected = 8, kDisconnected = 10;

std::vector<uint8_t> unhex(const json& req, const char* key, std::string* error) {
  std::vector<uint8_t> out;
  auto it = req.find(key);
  if (it == req.end()) return out;
  if (!it->is_string()) {
    *error = std::string("\"") + key + "\" must be a hex string";
    return out;
  }
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() % 2 != 0 || s.size() > 512) {
    *error = std::string("\"") + key + "\" must be an even number of hex digits, at most 256 bytes";
    return out;
  }
  auto v = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = static_cast<char>(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t k = 0; k < s.size(); k += 2) {
    const int hi = v(s[k]), lo = v(s[k + 1]);
    if (hi < 0 || lo < 0) {
      *error = std::string("\"") + key + "\" has a character that is not a hex digit";
      return {};
    }
    out.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return out;
}

// The id the request names, if the session owns it (the one check).
CmIdRec* id_of(OpContext& c) {
  const std::optional<uint64_t> h = field_u64(c.req, "cm_id");
  if (!h || *h > UINT32_MAX) return nullptr;
  return c.ctl.cm_ids().owned(c.s, static_cast<uint32_t>(*h));
}
json not_owned(OpContext& c) { return op_fail(EINVAL, c.op + ": not an rdma_cm id of this client"); }

// {"addr": "...", "port": N} -> ip, port.
bool addr_of(const json& j, wire::IpAddr* ip, uint16_t* port, bool* ipv6, std::string* error) {
  if (!j.is_object() || !j.contains("addr") || !j["addr"].is_string()) {
    *error = "an address is {\"addr\": \"IP\", \"port\": N}";
    return false;
  }
  std::optional<wire::IpAddr> a = parse_ip(j["addr"].get<std::string>(), ipv6);
  const uint64_t p = field_u64_or(j, "port", 0);
  if (!a || p > 65535) {
    *error = "bad address " + j.dump();
    return false;
  }
  *ip = *a;
  *port = static_cast<uint16_t>(p);
  return true;
}

bool is_any(const wire::IpAddr& ip) {
  static const wire::IpAddr v4_any = [] {
    wire::IpAddr a{};
    a[10] = a[11] = 0xff;
    return a;
  }();
  return ip == wire::IpAddr{} || ip == v4_any;
}

bool same_subnet(const wire::IpAddr& a, const wire::IpAddr& b, unsigned prefix_bits) {
  for (unsigned bit = 0; bit < prefix_bits && bit < 128; ++bit) {
    const uint8_t m = static_cast<uint8_t>(0x80 >> (bit % 8));
    if ((a[bit / 8] & m) != (b[bit / 8] & m)) return false;
  }
  return true;
}

// The device whose address is ip.
DeviceEntry* device_with(Control& ctl, const wire::IpAddr& ip) {
  for (auto& d : ctl.devices())
    if (d->config().ip == ip) return d.get();
  return nullptr;
}

// The device to reach dst from: the device that is dst (same-device
// loopback), else the first whose subnet holds dst, else the first.
DeviceEntry* route_to(Control& ctl, const wire::IpAddr& dst) {
  if (DeviceEntry* d = device_with(ctl, dst)) return d;
  for (auto& d : ctl.devices()) {
    const bool v4 = wire::is_ipv4_mapped(d->config().ip);
    if (v4 != wire::is_ipv4_mapped(dst)) continue;
    if (same_subnet(d->config().ip, dst, d->config().prefix_len + (v4 ? 96u : 0u))) return d.get();
  }
  for (auto& d : ctl.devices())
    if (wire::is_ipv4_mapped(d->config().ip) == wire::is_ipv4_mapped(dst)) return d.get();
  return nullptr;
}

uint16_t ps_num(const CmIdRec& r) { return r.udp ? cm::kPsUdp : cm::kPsTcp; }

json reply_with(CmIds& ids, const CmIdRec& r, json extra = json::object()) {
  json j = ids.addressing(r);
  for (auto& [k, v] : extra.items()) j[k] = v;
  return op_ok(j);
}

json cm_channel(OpContext& c) {
  Session& s = c.s;
  if (s.cm_eventfd >= 0) return op_fail(EBUSY, "cm_channel: this connection is an event channel already");
  // Blocking and shared with the client: its O_NONBLOCK is the application's
  // choice; the daemon only ever adds to it.
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return op_fail(errno, "cm_channel: eventfd");
  s.cm_eventfd = fd;
  std::random_device rd;
  s.cm_token = (static_cast<uint64_t>(rd()) << 32 | rd()) | 1;
  s.reply_fds.push_back(dup(fd));
  return op_ok({{"token", s.cm_token}});
}

json need_channel(OpContext& c) { return op_fail(EINVAL, c.op + ": call cm_channel first"); }

json cm_create_id(OpContext& c) {
  if (c.s.cm_eventfd < 0) return need_channel(c);
  const std::string ps = c.req.value("ps", std::string("tcp"));
  if (ps != "tcp" && ps != "udp") return op_fail(EINVAL, "cm_create_id: ps is \"tcp\" or \"udp\"");
  std::string err;
  CmIdRec* r = c.ctl.cm_ids().create(c.s, ps == "udp", &err);
  if (r == nullptr) return op_fail(ENOMEM, "cm_create_id: " + err);
  return op_ok({{"cm_id", r->handle}});
}

json cm_destroy_id(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  const uint64_t reported = r->events_reported;
  c.ctl.cm_ids().destroy(*r);
  return op_ok({{"events_reported", reported}});
}

json cm_bind(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (r->bound) return op_fail(EINVAL, "cm_bind: the id is bound already");
  wire::IpAddr ip{};
  uint16_t port = 0;
  bool v6 = false;
  std::string err;
  if (!addr_of(c.req.value("addr", json()), &ip, &port, &v6, &err)) return op_fail(EINVAL, "cm_bind: " + err);
  CmIds& ids = c.ctl.cm_ids();
  DeviceEntry* d = nullptr;
  if (!is_any(ip)) {
    d = device_with(c.ctl, ip);
    if (d == nullptr) return op_fail(EADDRNOTAVAIL, "cm_bind: no isoroce device has address " + ip_text(ip));
  }
  r->ipv6 = v6;
  r->wildcard = d == nullptr;
  r->local_ip = ip;
  if (port == 0) port = ids.ephemeral_port(r->udp);
  if (port == 0 || !ids.port_free(*r, port))
    return op_fail(EADDRINUSE, "cm_bind: port " + std::to_string(port) + " is in use");
  r->local_port = port;
  r->bound = true;
  r->dev = d;
  return reply_with(ids, *r);
}

json cm_resolve_addr(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (r->cid != 0 || !r->listens.empty()) return op_fail(EINVAL, "cm_resolve_addr: the id is in use");
  CmIds& ids = c.ctl.cm_ids();
  if (ids.resolving(r->handle)) return op_fail(EINVAL, "cm_resolve_addr: a resolution is under way");
  wire::IpAddr dst{}, src{};
  uint16_t dport = 0, sport = 0;
  bool v6 = false, sv6 = false;
  std::string err;
  if (!addr_of(c.req.value("dst", json()), &dst, &dport, &v6, &err)) return op_fail(EINVAL, "cm_resolve_addr: " + err);
  if (c.req.contains("src") && !c.req["src"].is_null()) {
    if (!addr_of(c.req["src"], &src, &sport, &sv6, &err)) return op_fail(EINVAL, "cm_resolve_addr: " + err);
    if (r->bound && !(is_any(src) && sport == 0) && (src != r->local_ip || (sport && sport != r->local_port)))
      return op_fail(EINVAL, "cm_resolve_addr: the id is bound to another address");
  }
  DeviceEntry* d = nullptr;
  if (!is_any(src)) d = device_with(c.ctl, src);
  else if (r->bound && !r->wildcard) d = r->dev;
  if (!is_any(src) && d == nullptr)
    return op_fail(EADDRNOTAVAIL, "cm_resolve_addr: no isoroce device has address " + ip_text(src));
  if (d == nullptr) d = route_to(c.ctl, dst);
  if (d == nullptr) return op_fail(ENODEV, "cm_resolve_addr: no isoroce device reaches " + ip_text(dst));
  if (wire::is_ipv4_mapped(d->config().ip) != wire::is_ipv4_mapped(dst))
    return op_fail(EAFNOSUPPORT, "cm_resolve_addr: " + d->name() + " has no address of " + ip_text(dst) + "'s family");
  if (!r->bound) {
    r->local_port = sport ? sport : ids.ephemeral_port(r->udp);
    if (r->local_port == 0 || !ids.port_free(*r, r->local_port))
      return op_fail(EADDRINUSE, "cm_resolve_addr: port in use");
    r->bound = true;
  }
  r->wildcard = false;
  r->local_ip = d->config().ip;
  r->dev = d;
  r->ipv6 = v6;
  r->peer_ip = dst;
  r->peer_port = dport;
  std::string aerr;
  if (ids.agent(*d, &aerr) == nullptr) return op_fail(EIO, "cm_resolve_addr: " + aerr);
  // Neighbour resolution (ARP/ND) without blocking the control thread: a
  // known neighbour (or the device's own address) is ADDR_RESOLVED at once;
  // otherwise it is solicited and the daemon's loop queues ADDR_RESOLVED, or
  // ADDR_ERROR after a second (CmIds::poll_resolutions).
  bool known = false;
  d->run([&](sched::Picos) { known = d->engine().config().ip == dst || d->driver->neighbor_known(dst, true); });
  if (known) {
    r->addr_resolved = true;
    ids.queue(*r, kAddrResolved, 0);
  } else {
    ids.resolve_later(*r);
  }
  return reply_with(ids, *r);
}

json cm_resolve_route(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (!r->addr_resolved) return op_fail(EINVAL, "cm_resolve_route: resolve the address first");
  // RoCE: the route is the neighbour just resolved (no SA path query).
  r->route_resolved = true;
  c.ctl.cm_ids().queue(*r, kRouteResolved, 0);
  return op_ok();
}

json cm_listen(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (!r->listens.empty()) return op_ok();  // backlog change
  if (r->cid != 0) return op_fail(EINVAL, "cm_listen: the id is connected");
  CmIds& ids = c.ctl.cm_ids();
  if (!r->bound) {
    r->local_port = ids.ephemeral_port(r->udp);
    r->bound = true;
  }
  std::vector<DeviceEntry*> devs;
  if (!r->wildcard && r->dev) {
    devs.push_back(r->dev);
  } else {
    for (auto& d : c.ctl.devices())
      if (!r->afonly || wire::is_ipv4_mapped(d->config().ip) == !r->ipv6) devs.push_back(d.get());
  }
  const uint64_t sid = cm::rdma_cm_service_id(ps_num(*r), r->local_port);
  for (DeviceEntry* d : devs) {
    std::string aerr;
    CmAgent* a = ids.agent(*d, &aerr);
    int rc = 0;
    cm::Id id = 0;
    if (a == nullptr) rc = EIO;
    else d->run([&](sched::Picos) { rc = a->listen(c.s.id, sid, &id); });
    if (rc != 0) {
      for (auto& [ld, lid] : r->listens) {
        ld->run([&](sched::Picos now) { ld->cm->destroy(lid, now); });
        ids.unmap_cm(ld, lid);
      }
      r->listens.clear();
      return op_fail(rc == EBUSY ? EADDRINUSE : rc,
                     "cm_listen: " + (a ? d->name() + " port " + std::to_string(r->local_port) : aerr));
    }
    r->listens.emplace_back(d, id);
    ids.map_cm(d, id, r->handle);
  }
  return reply_with(ids, *r);
}

// A REQ's rdma_cm header (addresses of both ends) and the application's data.
std::vector<uint8_t> req_private_data(const CmIdRec& r, const std::vector<uint8_t>& app, size_t max) {
  cm::RdmaCmHeader h;
  h.src_port = r.local_port;
  h.src = cm::RdmaCmAddr::from_gid(r.local_ip);
  h.dst = cm::RdmaCmAddr::from_gid(r.peer_ip);
  return cm::build_rdma_cm_private_data(h, app, max);
}

json cm_connect(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (!r->route_resolved || r->dev == nullptr) return op_fail(EINVAL, "cm_connect: resolve the route first");
  if (r->cid != 0) return op_fail(EISCONN, "cm_connect: the id is connected already");
  std::string err;
  const std::vector<uint8_t> app = unhex(c.req, "private_data", &err);
  if (!err.empty()) return op_fail(EINVAL, "cm_connect: " + err);
  DeviceEntry& d = *r->dev;
  CmAgent* a = d.cm.get();
  if (a == nullptr) return op_fail(EIO, "cm_connect: no CM agent on " + d.name());
  const uint64_t sid = cm::rdma_cm_service_id(ps_num(*r), r->peer_port);
  int rc = 0;
  cm::Id id = 0;
  if (r->udp) {
    cm::SidrParams p;
    p.peer_gid = r->peer_ip;
    p.service_id = sid;
    p.private_data = req_private_data(*r, app, cm::kSidrReqPrivateData);
    if (p.private_data.empty()) return op_fail(EINVAL, "cm_connect: private data too long for a SIDR_REQ");
    d.run([&](sched::Picos now) { rc = a->sidr_resolve(c.s.id, p, now, &id); });
  } else {
    cm::ConnectParams p;
    p.peer_gid = r->peer_ip;
    p.service_id = sid;
    p.qpn = static_cast<uint32_t>(field_u64_or(c.req, "qp_num", 0)) & 0xffffff;
    p.starting_psn = static_cast<uint32_t>(field_u64_or(c.req, "psn", 0)) & 0xffffff;
    p.responder_resources = static_cast<uint8_t>(std::min<uint64_t>(field_u64_or(c.req, "responder_resources", 0), 255));
    p.initiator_depth = static_cast<uint8_t>(std::min<uint64_t>(field_u64_or(c.req, "initiator_depth", 0), 255));
    p.retry_count = static_cast<uint8_t>(field_u64_or(c.req, "retry_count", 7) & 7);
    p.rnr_retry_count = static_cast<uint8_t>(field_u64_or(c.req, "rnr_retry_count", 7) & 7);
    p.srq = field_u64_or(c.req, "srq", 0) != 0;
    p.end_to_end_flow_control = field_u64_or(c.req, "flow_control", 1) != 0;
    p.path_mtu = static_cast<uint8_t>(d.config().mtu);
    p.local_ack_timeout = r->ack_timeout;
    p.traffic_class = r->tos;
    p.private_data = req_private_data(*r, app, cm::kReqPrivateData);
    if (p.private_data.empty()) return op_fail(EINVAL, "cm_connect: private data over 56 bytes");
    if (p.qpn == 0) return op_fail(EINVAL, "cm_connect: no qp_num");
    d.run([&](sched::Picos now) { rc = a->connect(c.s.id, p, now, &id); });
  }
  if (rc != 0) return op_fail(rc, "cm_connect");
  r->cid = id;
  c.ctl.cm_ids().map_cm(&d, id, r->handle);
  return op_ok();
}

json cm_accept(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (r->cid == 0 || r->dev == nullptr || !r->dev->cm) return op_fail(EINVAL, "cm_accept: no connection request");
  std::string err;
  const std::vector<uint8_t> app = unhex(c.req, "private_data", &err);
  if (!err.empty()) return op_fail(EINVAL, "cm_accept: " + err);
  DeviceEntry& d = *r->dev;
  int rc = 0;
  if (r->udp) {
    cm::SidrReplyParams p;
    p.status = cm::SidrStatus::kValid;
    p.qpn = static_cast<uint32_t>(field_u64_or(c.req, "qp_num", 0)) & 0xffffff;
    p.qkey = static_cast<uint32_t>(field_u64_or(c.req, "qkey", cm::kRdmaUdpQkey));
    p.private_data = app;
    if (app.size() > cm::kSidrRepPrivateData) return op_fail(EINVAL, "cm_accept: private data over 136 bytes");
    d.run([&](sched::Picos now) { rc = d.cm->sidr_reply(r->cid, p, now); });
    if (rc == 0) {
      c.ctl.cm_ids().unmap_cm(&d, r->cid);
      r->cid = 0;  // a SIDR exchange ends with its reply
    }
  } else {
    cm::AcceptParams p;
    p.qpn = static_cast<uint32_t>(field_u64_or(c.req, "qp_num", 0)) & 0xffffff;
    p.starting_psn = static_cast<uint32_t>(field_u64_or(c.req, "psn", 0)) & 0xffffff;
    p.responder_resources = static_cast<uint8_t>(std::min<uint64_t>(field_u64_or(c.req, "responder_resources", 0), 255));
    p.initiator_depth = static_cast<uint8_t>(std::min<uint64_t>(field_u64_or(c.req, "initiator_depth", 0), 255));
    p.rnr_retry_count = static_cast<uint8_t>(field_u64_or(c.req, "rnr_retry_count", 7) & 7);
    p.srq = field_u64_or(c.req, "srq", 0) != 0;
    p.end_to_end_flow_control = field_u64_or(c.req, "flow_control", 1) != 0;
    p.private_data = app;
    if (app.size() > cm::kRepPrivateData) return op_fail(EINVAL, "cm_accept: private data over 196 bytes");
    if (p.qpn == 0) return op_fail(EINVAL, "cm_accept: no qp_num");
    d.run([&](sched::Picos now) { rc = d.cm->accept(r->cid, p, now); });
  }
  return rc == 0 ? op_ok() : op_fail(rc, "cm_accept");
}

json cm_reject(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (r->cid == 0 || r->dev == nullptr || !r->dev->cm) return op_fail(EINVAL, "cm_reject: nothing to reject");
  std::string err;
  const std::vector<uint8_t> app = unhex(c.req, "private_data", &err);
  if (!err.empty()) return op_fail(EINVAL, "cm_reject: " + err);
  DeviceEntry& d = *r->dev;
  int rc = 0;
  if (r->udp) {
    cm::SidrReplyParams p;
    p.status = cm::SidrStatus::kRejected;
    p.private_data = app;
    if (app.size() > cm::kSidrRepPrivateData) return op_fail(EINVAL, "cm_reject: private data over 136 bytes");
    d.run([&](sched::Picos now) { rc = d.cm->sidr_reply(r->cid, p, now); });
    if (rc == 0) {
      c.ctl.cm_ids().unmap_cm(&d, r->cid);
      r->cid = 0;
    }
  } else {
    cm::RejectParams p;
    p.reason = cm::RejReason::kConsumerReject;
    p.private_data = app;
    if (app.size() > cm::kRejPrivateData) return op_fail(EINVAL, "cm_reject: private data over 148 bytes");
    d.run([&](sched::Picos now) { rc = d.cm->reject(r->cid, p, now); });
  }
  return rc == 0 ? op_ok() : op_fail(rc, "cm_reject");
}

json cm_establish(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (r->cid == 0 || r->dev == nullptr || !r->dev->cm) return op_fail(EINVAL, "cm_establish: no connection");
  int rc = 0;
  DeviceEntry& d = *r->dev;
  d.run([&](sched::Picos now) { rc = d.cm->establish(r->cid, {}, now); });
  if (rc == 0) r->established = true;
  return rc == 0 ? op_ok() : op_fail(rc, "cm_establish");
}

json cm_notify(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  // IBV_EVENT_COMM_EST (4): the QP saw the peer's first packet before the RTU.
  if (field_u64_or(c.req, "event", 0) != 4) return op_fail(EINVAL, "cm_notify: only IBV_EVENT_COMM_EST");
  if (r->cid == 0 || r->dev == nullptr || !r->dev->cm) return op_fail(EINVAL, "cm_notify: no connection");
  int rc = 0;
  DeviceEntry& d = *r->dev;
  d.run([&](sched::Picos now) { rc = d.cm->notify_established(r->cid, now); });
  return rc == 0 ? op_ok() : op_fail(rc, "cm_notify");
}

json cm_disconnect(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (r->cid == 0 || r->dev == nullptr || !r->dev->cm) return op_fail(EINVAL, "cm_disconnect: not connected");
  int rc = 0;
  DeviceEntry& d = *r->dev;
  d.run([&](sched::Picos now) { rc = d.cm->disconnect(r->cid, {}, now); });
  if (rc == EPROTO && r->disconnected_reported) {
    // Already closed by the peer: librdmacm's second rdma_disconnect is harmless.
    return op_ok();
  }
  // A handshake under way (our REQ unanswered, a REQ not answered yet, a
  // REP not confirmed): 0 and nothing on the wire, as Linux; its outcome
  // (CONNECT_RESPONSE, REJECTED, UNREACHABLE) is the next event (docs/rdma_cm.md).
  return rc == 0 ? op_ok() : op_fail(rc, "cm_disconnect");
}

json cm_get_event(OpContext& c) {
  Session& s = c.s;
  c.ctl.drain_cm_events();
  if (c.ctl.cm_ids().resolving()) c.ctl.cm_ids().poll_resolutions();
  if (s.cm_events.empty()) return op_fail(EAGAIN, "cm_get_event: no event");
  json ev = std::move(s.cm_events.front());
  s.cm_events.pop_front();
  return op_ok({{"event", std::move(ev)}});
}

json cm_set_option(OpContext& c) {
  CmIdRec* r = id_of(c);
  if (r == nullptr) return not_owned(c);
  if (c.req.contains("tos")) r->tos = static_cast<uint8_t>(field_u64_or(c.req, "tos", 0));
  if (c.req.contains("ack_timeout")) r->ack_timeout = static_cast<uint8_t>(std::min<uint64_t>(field_u64_or(c.req, "ack_timeout", 14), 31));
  if (c.req.contains("reuseaddr")) r->reuseaddr = c.req.value("reuseaddr", false);
  if (c.req.contains("afonly")) r->afonly = c.req.value("afonly", false);
  return op_ok();
}

json cm_migrate_id(OpContext& c) {
  if (c.s.cm_eventfd < 0) return need_channel(c);
  const std::optional<uint64_t> h = field_u64(c.req, "cm_id");
  const uint64_t token = field_u64_or(c.req, "token", 0);
  CmIdRec* r = h && *h <= UINT32_MAX ? c.ctl.cm_ids().find(static_cast<uint32_t>(*h)) : nullptr;
  // The id's present owner's token proves the request comes from it.
  if (r == nullptr || r->s == nullptr || token == 0 || r->s->cm_token != token)
    return op_fail(EINVAL, "cm_migrate_id: not an rdma_cm id of the channel named by the token");
  if (r->s->uid != c.s.uid) return op_fail(EPERM, "cm_migrate_id: another user's id");
  if (r->s != &c.s) {
    std::string e = Control::over("max_cm_ids", c.s.cm_ids.size(), 1, c.ctl.limits().max_cm_ids);
    if (!e.empty()) return op_fail(ENOMEM, "cm_migrate_id: " + e);
    c.ctl.cm_ids().migrate(*r, c.s);
  }
  return op_ok();
}

json cm_ids_view(OpContext& c) { return op_ok({{"cm_ids", c.ctl.cm_ids().view()}}); }

}  // namespace

void register_cm_ops(OpTable& t) {
  t.add({"cm_channel", cm_channel, false,
         "make this connection an rdma_cm event channel: its eventfd (EFD_SEMAPHORE) counts the events queued"});
  t.add({"cm_create_id", cm_create_id, false, "a new rdma_cm id: ps (\"tcp\" RC or \"udp\" UD/SIDR)"});
  t.add({"cm_destroy_id", cm_destroy_id, false, "cm_id: end it (DREQ, REJ or nothing, as its state needs)"});
  t.add({"cm_bind", cm_bind, false, "cm_id, addr {addr, port}: bind (any address, port 0: an ephemeral one)"});
  t.add({"cm_resolve_addr", cm_resolve_addr, false,
         "cm_id, dst {addr, port}, src?: pick the device, resolve the neighbour; event ADDR_RESOLVED/ADDR_ERROR"});
  t.add({"cm_resolve_route", cm_resolve_route, false, "cm_id: event ROUTE_RESOLVED"});
  t.add({"cm_listen", cm_listen, false, "cm_id: listen on its port (every device for a wildcard address)"});
  t.add({"cm_connect", cm_connect, false,
         "cm_id, qp_num, psn, responder_resources, initiator_depth, retry_count, rnr_retry_count, srq, "
         "private_data (hex): REQ (SIDR_REQ for udp)"});
  t.add({"cm_accept", cm_accept, false, "cm_id, qp_num, psn, ... , private_data: REP (SIDR_REP for udp)"});
  t.add({"cm_reject", cm_reject, false, "cm_id, private_data: REJ (consumer reject; SIDR_REP rejected for udp)"});
  t.add({"cm_establish", cm_establish, false, "cm_id: RTU (the active side, after CONNECT_RESPONSE)"});
  t.add({"cm_notify", cm_notify, false, "cm_id, event 4 (IBV_EVENT_COMM_EST): established before the RTU"});
  t.add({"cm_disconnect", cm_disconnect, false, "cm_id: DREQ, or DREP after the peer's DREQ"});
  t.add({"cm_get_event", cm_get_event, false, "the oldest event of this channel (EAGAIN if none)"});
  t.add({"cm_set_option", cm_set_option, false, "cm_id, tos?, ack_timeout?, reuseaddr?, afonly?"});
  t.add({"cm_migrate_id", cm_migrate_id, false, "cm_id, token (of its channel): move it to this channel"});
  t.add({"cm_ids", cm_ids_view, false, "every rdma_cm id of the daemon (privileged)", true});
}

}  // namespace isoroce::ctrl
