#include "ctrl/cm_ids.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ctrl/cm_agent.h"
#include "ctrl/control.h"
#include "ctrl/log.h"
#include "transport/cm/rdma_cm_header.h"

namespace isoroce::ctrl {

namespace {

// librdmacm's event numbers (enum rdma_cm_event_type).
enum : int {
  kAddrResolved = 0,
  kAddrError = 1,
  kRouteResolved = 2,
  kRouteError = 3,
  kConnectRequest = 4,
  kConnectResponse = 5,
  kConnectError = 6,
  kUnreachable = 7,
  kRejected = 8,
  kEstablished = 9,
  kDisconnected = 10,
  kTimewaitExit = 15,
};

std::string hex(const std::vector<uint8_t>& v, size_t from = 0) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t k = from; k < v.size(); ++k) {
    s += d[v[k] >> 4];
    s += d[v[k] & 15];
  }
  return s;
}

// What an event tells the client of the peer's REQ/REP (rdma_init_qp_attr's inputs).
// As rdma_cm reports them, from this side: the peer's initiator depth is the
// responder resources it wants of us, and the other way round. The path MTU
// only from a REQ (a REP has none).
json peer_json(const cm::PeerParams& p, bool req) {
  json j = {{"qp_num", p.qpn},
          {"psn", p.starting_psn},
          {"responder_resources", p.initiator_depth},
          {"initiator_depth", p.responder_resources},
          {"retry_count", p.retry_count},
          {"rnr_retry_count", p.rnr_retry_count},
          {"flow_control", p.end_to_end_flow_control ? 1 : 0},
          {"srq", p.srq ? 1 : 0},
          {"ack_timeout", p.local_ack_timeout}};
  if (req) j["mtu"] = p.path_mtu;
  return j;
}

}  // namespace

std::string ip_text(const wire::IpAddr& ip) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (wire::is_ipv4_mapped(ip)) inet_ntop(AF_INET, ip.data() + 12, buf, sizeof buf);
  else inet_ntop(AF_INET6, ip.data(), buf, sizeof buf);
  return buf;
}

std::optional<wire::IpAddr> parse_ip(const std::string& text, bool* ipv6) {
  wire::IpAddr ip{};
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    ip[10] = ip[11] = 0xff;
    std::memcpy(ip.data() + 12, &v4, 4);
    *ipv6 = false;
    return ip;
  }
  if (inet_pton(AF_INET6, text.c_str(), ip.data()) == 1) {
    *ipv6 = true;
    return ip;
  }
  return std::nullopt;
}

CmIds::~CmIds() = default;

CmIdRec* CmIds::create(Session& s, bool udp, std::string* error) {
  const uint32_t max = ctl_.limits().max_cm_ids;
  if (std::string e = Control::over("max_cm_ids", s.cm_ids.size(), 1, max); !e.empty()) {
    *error = e;
    return nullptr;
  }
  auto r = std::make_unique<CmIdRec>();
  while (next_handle_ == 0 || ids_.count(next_handle_)) ++next_handle_;
  r->handle = next_handle_++;
  r->s = &s;
  r->udp = udp;
  CmIdRec* raw = r.get();
  ids_[raw->handle] = std::move(r);
  s.cm_ids.insert(raw->handle);
  return raw;
}

CmIdRec* CmIds::owned(const Session& s, uint32_t handle) {
  CmIdRec* r = find(handle);
  return r != nullptr && r->s == &s ? r : nullptr;
}

CmIdRec* CmIds::find(uint32_t handle) {
  auto it = ids_.find(handle);
  return it == ids_.end() ? nullptr : it->second.get();
}

void CmIds::destroy(CmIdRec& r) {
  for (auto& [d, id] : r.listens) {
    if (d->cm) d->run([&](sched::Picos now) { d->cm->destroy(id, now); });
    unmap_cm(d, id);
  }
  if (r.cid != 0 && r.dev != nullptr) {
    DeviceEntry* d = r.dev;
    if (d->cm) d->run([&](sched::Picos now) { d->cm->destroy(r.cid, now); });
    unmap_cm(d, r.cid);
  }
  if (r.s) {
    r.s->cm_ids.erase(r.handle);
    // Its events not taken yet go (the client skips the counts they leave).
    auto& q = r.s->cm_events;
    for (auto it = q.begin(); it != q.end();)
      it = it->value("cm_id", 0u) == r.handle ? q.erase(it) : it + 1;
  }
  ids_.erase(r.handle);
}

void CmIds::reclaim(Session& s) {
  const std::set<uint32_t> mine = s.cm_ids;
  for (uint32_t h : mine)
    if (CmIdRec* r = find(h)) destroy(*r);
  if (!mine.empty())
    log(LogLevel::kInfo, "client {} (pid {}, {}) gone: destroyed {} rdma_cm id(s)", s.id, s.pid, s.comm, mine.size());
  s.cm_events.clear();
  if (s.cm_eventfd >= 0) close(s.cm_eventfd);
  s.cm_eventfd = -1;
}

void CmIds::migrate(CmIdRec& r, Session& to) {
  if (Session* from = r.s) {
    from->cm_ids.erase(r.handle);
    // Its events not taken yet move with it, in order (as the kernel's
    // ucma_migrate_id moves them to the new file): the new channel's eventfd
    // counts them; the old one's counts they leave are skipped by its
    // reader (cm_get_event EAGAIN). A listener's CONNECT_REQUESTs are its own.
    auto& q = from->cm_events;
    for (auto it = q.begin(); it != q.end();) {
      const bool mine = it->contains("listen_id") ? it->value("listen_id", 0u) == r.handle
                                                  : it->value("cm_id", 0u) == r.handle;
      if (!mine) {
        ++it;
        continue;
      }
      // A CONNECT_REQUEST's new id goes along (the client makes it on the new channel).
      if (it->contains("listen_id"))
        if (CmIdRec* n = find(it->value("cm_id", 0u)); n != nullptr && n->s == from) {
          from->cm_ids.erase(n->handle);
          n->s = &to;
          to.cm_ids.insert(n->handle);
        }
      to.cm_events.push_back(std::move(*it));
      it = q.erase(it);
      if (to.cm_eventfd >= 0) {
        const uint64_t one = 1;
        (void)!write(to.cm_eventfd, &one, sizeof one);
      }
    }
  }
  r.s = &to;
  to.cm_ids.insert(r.handle);
}

uint16_t CmIds::ephemeral_port(bool udp) {
  for (int attempt = 0; attempt < 30000; ++attempt) {
    port_seed_ = port_seed_ * 1103515245u + 12345u;
    const uint16_t p = static_cast<uint16_t>(32768 + (port_seed_ >> 8) % (60999 - 32768));
    CmIdRec probe;
    probe.udp = udp;
    if (port_free(probe, p)) return p;
  }
  return 0;
}

bool CmIds::port_free(const CmIdRec& r, uint16_t port) const {
  for (const auto& [h, o] : ids_) {
    if (o.get() == &r || o->udp != r.udp || !o->bound || o->accepted || o->local_port != port) continue;
    // A port is one id's, unless both are on different specific addresses or
    // both set REUSEADDR and the other does not listen.
    if (!o->wildcard && !r.wildcard && o->local_ip != r.local_ip) continue;
    if (r.reuseaddr && o->reuseaddr && o->listens.empty()) continue;
    return false;
  }
  return true;
}

CmAgent* CmIds::agent(DeviceEntry& d, std::string* error) {
  if (!d.cm) ctl_.start_cm(d);  // normally made at start (Control::start_cm)
  if (!d.cm) {
    *error = d.name() + ": no CM agent (QP1) on this device; the daemon's log says why";
    return nullptr;
  }
  // A new agent (set_policy's new engine may make one) has a new event fd.
  if (watched_.insert({&d, d.cm->event_fd()}).second) ctl_.watch_cm_fd(d.cm->event_fd());
  return d.cm.get();
}

json CmIds::addressing(const CmIdRec& r) const {
  json j = json::object();
  if (r.bound || r.addr_resolved) j["local"] = {{"addr", ip_text(r.local_ip)}, {"port", r.local_port}};
  if (r.addr_resolved || r.peer_port != 0) {
    j["peer"] = {{"addr", ip_text(r.peer_ip)}, {"port", r.peer_port}};
    j["dgid"] = ip_text(r.peer_ip).find(':') == std::string::npos ? "::ffff:" + ip_text(r.peer_ip) : ip_text(r.peer_ip);
  }
  if (r.dev) j["device"] = r.dev->name();
  // IPv4 locals go back as IPv4 (the client's sockaddr family follows the text).
  return j;
}

void CmIds::queue(CmIdRec& r, int event, int status, json extra) {
  Session* s = r.s;
  if (s == nullptr) return;
  json ev = addressing(r);
  for (auto& [k, v] : extra.items()) ev[k] = v;
  ev["event"] = event;
  ev["status"] = status;
  ev["cm_id"] = r.handle;
  if (s->cm_events.size() >= kMaxCmEvents) {
    log(LogLevel::kWarning, "client {} (pid {}): {} rdma_cm events not taken, dropping the oldest", s->id, s->pid,
        s->cm_events.size());
    s->cm_events.pop_front();
  }
  s->cm_events.push_back(std::move(ev));
  ++r.events_reported;
  if (s->cm_eventfd >= 0) {
    const uint64_t one = 1;
    (void)!write(s->cm_eventfd, &one, sizeof one);
  }
}

void CmIds::resolve_later(CmIdRec& r) {
  const auto now = std::chrono::steady_clock::now();
  resolving_.push_back({r.handle, r.dev, r.peer_ip, now, now + std::chrono::milliseconds(250)});
}

bool CmIds::resolving(uint32_t handle) const {
  for (const Resolving& x : resolving_)
    if (x.handle == handle) return true;
  return false;
}

void CmIds::poll_resolutions() {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = resolving_.begin(); it != resolving_.end();) {
    CmIdRec* r = find(it->handle);
    if (r == nullptr || r->dev != it->dev || r->addr_resolved) {  // destroyed meanwhile
      it = resolving_.erase(it);
      continue;
    }
    const bool solicit = now >= it->next_solicit;
    if (solicit) it->next_solicit = now + std::chrono::milliseconds(250);
    bool known = false;
    DeviceEntry* d = it->dev;
    const wire::IpAddr ip = it->ip;
    d->run([&](sched::Picos) { known = d->driver->neighbor_known(ip, solicit); });
    if (known) {
      r->addr_resolved = true;
      queue(*r, kAddrResolved, 0);
    } else if (now - it->since >= std::chrono::seconds(1)) {
      queue(*r, kAddrError, -EHOSTUNREACH);
    } else {
      ++it;
      continue;
    }
    it = resolving_.erase(it);
  }
}

void CmIds::drain() {
  for (auto& d : ctl_.devices()) {
    if (!d->cm) continue;
    for (const cm::Event& e : d->cm->take_events()) on_event(*d, e);
  }
}

void CmIds::on_event(DeviceEntry& d, const cm::Event& e) {
  auto handle_of = [&](cm::Id id) -> CmIdRec* {
    auto it = by_cm_.find({&d, id});
    return it == by_cm_.end() ? nullptr : find(it->second);
  };
  if (e.type == cm::EventType::kReqReceived || e.type == cm::EventType::kSidrReqReceived) {
    CmIdRec* l = handle_of(e.listen_id);
    const bool sidr = e.type == cm::EventType::kSidrReqReceived;
    std::string err;
    std::string why;
    std::optional<cm::RdmaCmHeader> h = cm::parse_rdma_cm_header(e.private_data, &why);
    CmIdRec* n = (l && l->s && h) ? create(*l->s, l->udp, &err) : nullptr;
    if (n == nullptr) {
      // Nobody to take it (listener gone, client at its limit, no rdma_cm header): refuse.
      d.run([&](sched::Picos now) {
        if (sidr) {
          cm::SidrReplyParams p;
          p.status = cm::SidrStatus::kRejected;
          d.cm->sidr_reply(e.id, p, now);
        } else {
          cm::RejectParams p;
          p.reason = l && h ? cm::RejReason::kNoResources : cm::RejReason::kInvalidServiceId;
          d.cm->reject(e.id, p, now);
        }
      });
      if (!h) log(LogLevel::kInfo, "{}: REQ without a usable rdma_cm header refused: {}", d.name(), why);
      else if (l) log(LogLevel::kInfo, "{}: REQ refused: {}", d.name(), err);
      return;
    }
    n->dev = &d;
    n->accepted = true;
    n->cid = e.id;
    n->ipv6 = h->src.ipv6;
    n->bound = true;
    n->wildcard = false;
    n->local_ip = h->dst.to_gid();
    n->local_port = l->local_port;
    n->peer_ip = h->src.to_gid();
    n->peer_port = h->src_port;
    n->addr_resolved = n->route_resolved = true;
    n->tos = l->tos;
    map_cm(&d, e.id, n->handle);
    json extra = peer_json(e.peer, true);
    extra["listen_id"] = l->handle;
    extra["private_data"] = hex(e.private_data, cm::kRdmaCmHeaderBytes);
    if (sidr) extra["qkey"] = cm::kRdmaUdpQkey;
    // The event belongs to the listener's queue but names the new id.
    queue(*n, kConnectRequest, 0, extra);
    return;
  }
  CmIdRec* r = handle_of(e.id);
  if (r == nullptr) return;  // destroyed meanwhile
  switch (e.type) {
    case cm::EventType::kRepReceived: {
      json extra = peer_json(e.peer, false);
      extra["private_data"] = hex(e.private_data);
      queue(*r, kConnectResponse, 0, extra);
      break;
    }
    case cm::EventType::kEstablished:
      r->established = true;
      queue(*r, kEstablished, 0, {{"private_data", hex(e.private_data)}});
      break;
    case cm::EventType::kRejected: {
      json extra = {{"private_data", hex(e.private_data)}, {"reason", static_cast<int>(e.reason)}};
      queue(*r, kRejected, static_cast<int>(e.reason), extra);
      break;
    }
    case cm::EventType::kUnreachable:
      queue(*r, kUnreachable, -ETIMEDOUT);
      break;
    case cm::EventType::kMraReceived:
      break;  // informational: the Manager extends its timers
    case cm::EventType::kTimewaitExit:
      // As Linux: a connection's id that is still there when its timewait
      // ends (after DISCONNECTED) gets TIMEWAIT_EXIT; the QP may be reused.
      if (r->established || r->disconnected_reported) queue(*r, kTimewaitExit, 0);
      break;
    case cm::EventType::kDreqReceived:
      if (!r->disconnected_reported) {
        r->disconnected_reported = true;
        queue(*r, kDisconnected, 0, {{"private_data", hex(e.private_data)}});
      }
      break;
    case cm::EventType::kDisconnected:
      if (!r->disconnected_reported) {
        r->disconnected_reported = true;
        queue(*r, kDisconnected, e.timed_out ? -ETIMEDOUT : 0);
      }
      break;
    case cm::EventType::kSidrRepReceived:
      if (e.sidr_status == cm::SidrStatus::kValid) {
        queue(*r, kEstablished, 0,
              {{"qp_num", e.sidr_qpn}, {"qkey", e.sidr_qkey}, {"private_data", hex(e.private_data)}});
      } else {
        queue(*r, kUnreachable, static_cast<int>(e.sidr_status), {{"private_data", hex(e.private_data)}});
      }
      break;
    default:
      break;
  }
}

json CmIds::view() const {
  json a = json::array();
  for (const auto& [h, r] : ids_) {
    json j = addressing(*r);
    j["cm_id"] = h;
    j["client"] = r->s ? r->s->id : 0;
    j["ps"] = r->udp ? "udp" : "tcp";
    j["listening"] = !r->listens.empty();
    j["established"] = r->established;
    a.push_back(j);
  }
  return a;
}

}  // namespace isoroce::ctrl
