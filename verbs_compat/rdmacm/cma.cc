// The rdma_* API over isoroced's CM operations (docs/control-protocol.md,
// "Connection management"), with librdmacm's semantics: synchronous ids
// (created without a channel) wait for their events; a QP made with
// rdma_create_qp moves to INIT at once, to RTR/RTS when the connection is
// accepted or answered; rdma_disconnect moves it to ERR.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <random>

#include "verbs_compat/rdmacm/internal.h"

namespace isoroce::rcm {

namespace {

uint32_t random_psn() {
  static std::mutex mu;
  static std::mt19937 gen{std::random_device{}()};
  std::lock_guard lock(mu);
  return gen() & 0xffffff;
}

const char* ps_name(rdma_port_space ps) {
  switch (ps) {
    case RDMA_PS_TCP: return "tcp";
    case RDMA_PS_UDP: return "udp";
    case RDMA_PS_IB: return "ib";
    case RDMA_PS_IPOIB: return "ipoib";
  }
  return "?";
}

// The id a daemon reply failed for: -1 and errno.
int failed(const json& r) { return fail(reply_errno(r)); }

Id* make_id(Channel* ch, void* context, rdma_port_space ps, ibv_qp_type qpt, uint32_t handle) {
  auto* i = new Id;
  i->id.channel = &ch->ch;
  i->id.context = context;
  i->id.ps = ps;
  i->id.qp_type = qpt;
  i->handle = handle;
  i->psn = random_psn();
  insert_id(i);
  return i;
}

// Fills an event's conn/ud parameters and private data from the daemon's JSON.
void fill_params(Event& e, Id& i, const json& j) {
  const std::vector<uint8_t> pd = unhex(j.value("private_data", std::string()));
  const size_t n = std::min(pd.size(), sizeof e.private_data);
  if (n) std::memcpy(e.private_data, pd.data(), n);
  if (i.id.qp_type == IBV_QPT_UD) {
    rdma_ud_param& u = e.ev.param.ud;
    u.private_data = n ? e.private_data : nullptr;
    u.private_data_len = static_cast<uint8_t>(n);
    u.qp_num = j.value("qp_num", 0u);
    u.qkey = j.value("qkey", 0u);
    u.ah_attr.is_global = 1;
    u.ah_attr.port_num = 1;
    u.ah_attr.grh.dgid = i.id.route.addr.addr.ibaddr.dgid;
    u.ah_attr.grh.sgid_index = 0;
    u.ah_attr.grh.hop_limit = 64;
    u.ah_attr.grh.traffic_class = i.tos;
  } else {
    rdma_conn_param& c = e.ev.param.conn;
    c.private_data = n ? e.private_data : nullptr;
    c.private_data_len = static_cast<uint8_t>(n);
    c.responder_resources = static_cast<uint8_t>(j.value("responder_resources", 0));
    c.initiator_depth = static_cast<uint8_t>(j.value("initiator_depth", 0));
    c.flow_control = static_cast<uint8_t>(j.value("flow_control", 0));
    c.retry_count = static_cast<uint8_t>(j.value("retry_count", 0));
    c.rnr_retry_count = static_cast<uint8_t>(j.value("rnr_retry_count", 0));
    c.srq = static_cast<uint8_t>(j.value("srq", 0));
    c.qp_num = j.value("qp_num", 0u);
  }
}

// What the peer's REQ/REP said, kept for rdma_init_qp_attr.
void learn_remote(Id& i, const json& j) {
  if (!j.contains("qp_num")) return;
  i.remote_qpn = j.value("qp_num", 0u);
  i.remote_psn = j.value("psn", 0u);
  i.remote_qkey = j.value("qkey", 0u);
  if (j.contains("mtu")) i.mtu = std::min(i.mtu, static_cast<ibv_mtu>(std::clamp(j.value("mtu", 3), 1, 5)));
  if (j.contains("ack_timeout")) i.ack_timeout = static_cast<uint8_t>(j.value("ack_timeout", 14));
  if (j.contains("retry_count")) i.retry_count = static_cast<uint8_t>(j.value("retry_count", 7));
  if (j.contains("rnr_retry_count")) i.rnr_retry_count = static_cast<uint8_t>(j.value("rnr_retry_count", 7));
  i.have_remote = true;
}

void count_reported(Id& i) {
  std::lock_guard lock(i.mu);
  ++i.events_reported;
}

}  // namespace

int complete(Id& i) {
  if (!i.sync) return 0;
  if (i.id.event) {
    rdma_ack_cm_event(i.id.event);
    i.id.event = nullptr;
  }
  if (rdma_get_cm_event(i.id.channel, &i.id.event) != 0) return -1;
  rdma_cm_event* e = i.id.event;
  if (e->status) {
    if (e->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(e->status < 0 ? -e->status : e->status);
  }
  return 0;
}

int do_establish(Id& i) {
  int ret = modify_qp_rtr(i, RDMA_MAX_RESP_RES);
  if (ret == 0) ret = modify_qp_rts(i, RDMA_MAX_INIT_DEPTH);
  if (ret == 0) {
    json r = chan(i)->call({{"op", "cm_establish"}, {"cm_id", i.handle}});
    if (!r.value("ok", false)) ret = failed(r);
  }
  if (ret != 0) modify_qp_err(i);
  return ret;
}

}  // namespace isoroce::rcm

using namespace isoroce::rcm;

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
  if (!init_devices()) return nullptr;
  Channel* c = new_channel();
  return c ? &c->ch : nullptr;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel) delete_channel(channel_of(channel));
}

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
  if (id == nullptr) return fail(EINVAL);
  if (!init_devices()) return -1;
  ibv_qp_type qpt;
  if (ps == RDMA_PS_TCP || ps == RDMA_PS_IB) qpt = IBV_QPT_RC;
  else if (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) qpt = IBV_QPT_UD;
  else return fail(EINVAL);
  if (ps == RDMA_PS_IPOIB || ps == RDMA_PS_IB) {
    log("rdma_create_id: port space %s is not supported (RDMA_PS_TCP and RDMA_PS_UDP are)", ps_name(ps));
    return fail(EOPNOTSUPP);
  }
  Channel* ch = channel ? channel_of(channel) : new_channel();
  if (ch == nullptr) return -1;
  json r = ch->call({{"op", "cm_create_id"}, {"ps", ps_name(ps)}});
  if (!r.value("ok", false)) {
    if (!channel) delete_channel(ch);
    log("rdma_create_id: %s", r.value("error", std::string()).c_str());
    return failed(r);
  }
  Id* i = make_id(ch, context, ps, qpt, r.value("cm_id", 0u));
  i->sync = channel == nullptr;
  *id = &i->id;
  return 0;
}

int rdma_destroy_id(rdma_cm_id* id) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  json r = chan(*i)->call({{"op", "cm_destroy_id"}, {"cm_id", i->handle}});
  const uint64_t reported = r.value("events_reported", uint64_t{0});
  erase_id(i);
  if (id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  {
    // Events already handed out must be acknowledged first (librdmacm waits too).
    std::unique_lock lock(i->mu);
    (void)reported;
    i->cv.wait(lock, [&] { return i->events_completed >= i->events_reported; });
  }
  if (i->sync) delete_channel(chan(*i));
  std::free(id->route.path_rec);
  delete i;
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (id == nullptr || addr_len(addr) == 0) {
    debug("rdma_bind_addr: no id or an address of family %d (EINVAL)", addr ? addr->sa_family : -1);
    return fail(EINVAL);
  }
  Id* i = id_of(id);
  json r = chan(*i)->call({{"op", "cm_bind"}, {"cm_id", i->handle}, {"addr", addr_json(addr)}});
  if (!r.value("ok", false)) return failed(r);
  apply_addressing(*i, r);
  return 0;
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  if (id == nullptr || addr_len(dst_addr) == 0 || (src_addr && addr_len(src_addr) == 0)) return fail(EINVAL);
  Id* i = id_of(id);
  json req = {{"op", "cm_resolve_addr"}, {"cm_id", i->handle}, {"dst", addr_json(dst_addr)},
              {"timeout_ms", timeout_ms}};
  if (src_addr) {
    req["src"] = addr_json(src_addr);
  } else if (const char* env = std::getenv("ISOROCE_CM_SOURCE"); env && *env) {
    // The source address for programs that cannot name one (perftest -R):
    // picks the device as a bound source address would.
    req["src"] = {{"addr", env}, {"port", 0}};
  }
  json r = chan(*i)->call(req);
  if (!r.value("ok", false)) return failed(r);
  std::memcpy(&id->route.addr.dst_storage, dst_addr, addr_len(dst_addr));
  return complete(*i);
}

int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  json r = chan(*i)->call({{"op", "cm_resolve_route"}, {"cm_id", i->handle}, {"timeout_ms", timeout_ms}});
  if (!r.value("ok", false)) return failed(r);
  return complete(*i);
}

int rdma_listen(rdma_cm_id* id, int backlog) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  json r = chan(*i)->call({{"op", "cm_listen"}, {"cm_id", i->handle}, {"backlog", backlog}});
  if (!r.value("ok", false)) return failed(r);
  apply_addressing(*i, r);
  return 0;
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (listen == nullptr || id == nullptr) return fail(EINVAL);
  Id* l = id_of(listen);
  if (!l->sync) return fail(EINVAL);
  if (listen->event) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(listen->channel, &event) != 0) return -1;
  int ret = 0;
  if (event->status) {
    ret = fail(event->status < 0 ? -event->status : event->status);
  } else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    ret = fail(EINVAL);
  } else if (l->qp_init_attr) {
    ibv_qp_init_attr attr = *l->qp_init_attr;
    ret = rdma_create_qp(event->id, listen->pd, &attr);
  }
  if (ret != 0) {
    listen->event = event;
    return ret;
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (id->ps == RDMA_PS_TCP && !id->qp && !conn_param) return fail(EINVAL);
  i->initiator_depth = conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH
                           ? conn_param->initiator_depth : 128;
  i->responder_resources = conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES
                               ? conn_param->responder_resources : 128;
  uint32_t qpn = conn_param ? conn_param->qp_num : 0;
  uint8_t srq = conn_param ? conn_param->srq : 0;
  if (id->qp) {
    qpn = id->qp->qp_num;
    srq = id->qp->srq != nullptr;
  }
  std::vector<uint8_t> pdata = i->connect_data;
  i->connect_data.clear();
  if (conn_param && conn_param->private_data && conn_param->private_data_len)
    pdata.insert(pdata.end(), static_cast<const uint8_t*>(conn_param->private_data),
                 static_cast<const uint8_t*>(conn_param->private_data) + conn_param->private_data_len);
  if (conn_param) {
    i->retry_count = conn_param->retry_count;
    i->rnr_retry_count = conn_param->rnr_retry_count;
  }
  json req = {{"op", "cm_connect"},
              {"cm_id", i->handle},
              {"qp_num", qpn},
              {"psn", i->psn},
              {"srq", srq},
              {"responder_resources", i->responder_resources},
              {"initiator_depth", i->initiator_depth},
              {"flow_control", conn_param ? conn_param->flow_control : 1},
              {"retry_count", conn_param ? conn_param->retry_count : 7},
              {"rnr_retry_count", conn_param ? conn_param->rnr_retry_count : 7},
              {"private_data", hex(pdata.data(), pdata.size())}};
  json r = chan(*i)->call(req);
  if (!r.value("ok", false)) return failed(r);
  return complete(*i);
}

int rdma_establish(rdma_cm_id* id) {
  if (id == nullptr || id->qp) return fail(EINVAL);
  return do_establish(*id_of(id));
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (id->ps == RDMA_PS_TCP && !id->qp && !conn_param) return fail(EINVAL);
  const uint32_t qpn = id->qp ? id->qp->qp_num : conn_param->qp_num;
  const uint8_t srq = id->qp ? id->qp->srq != nullptr : conn_param->srq;
  if (!conn_param || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH)
    i->initiator_depth = std::min<uint8_t>(i->initiator_depth, 128);
  else
    i->initiator_depth = conn_param->initiator_depth;
  if (!conn_param || conn_param->responder_resources == RDMA_MAX_RESP_RES)
    i->responder_resources = std::min<uint8_t>(i->responder_resources, 128);
  else
    i->responder_resources = conn_param->responder_resources;
  if (id->qp_type != IBV_QPT_UD) {
    if (modify_qp_rtr(*i, i->responder_resources) != 0) return -1;
    if (modify_qp_rts(*i, i->initiator_depth) != 0) return -1;
  }
  json req = {{"op", "cm_accept"},
              {"cm_id", i->handle},
              {"qp_num", qpn},
              {"psn", i->psn},
              {"srq", srq},
              {"qkey", RDMA_UDP_QKEY},
              {"responder_resources", i->responder_resources},
              {"initiator_depth", i->initiator_depth},
              {"flow_control", conn_param ? conn_param->flow_control : 1},
              {"rnr_retry_count", conn_param ? conn_param->rnr_retry_count : 7}};
  if (conn_param && conn_param->private_data && conn_param->private_data_len)
    req["private_data"] = hex(conn_param->private_data, conn_param->private_data_len);
  json r = chan(*i)->call(req);
  if (!r.value("ok", false)) {
    modify_qp_err(*i);
    return failed(r);
  }
  if (id->qp_type == IBV_QPT_UD) {
    if (i->sync && id->event) {
      rdma_ack_cm_event(id->event);
      id->event = nullptr;
    }
    return 0;
  }
  return complete(*i);
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  json req = {{"op", "cm_reject"}, {"cm_id", i->handle}};
  if (private_data && private_data_len) req["private_data"] = hex(private_data, private_data_len);
  json r = chan(*i)->call(req);
  return r.value("ok", false) ? 0 : failed(r);
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return rdma_reject(id, private_data, private_data_len);
}

int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  json r = chan(*i)->call({{"op", "cm_notify"}, {"cm_id", i->handle}, {"event", static_cast<int>(event)}});
  return r.value("ok", false) ? 0 : failed(r);
}

int rdma_disconnect(rdma_cm_id* id) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (id->verbs == nullptr) return fail(EINVAL);
  if (modify_qp_err(*i) != 0) return -1;
  json r = chan(*i)->call({{"op", "cm_disconnect"}, {"cm_id", i->handle}});
  if (!r.value("ok", false)) return failed(r);
  return complete(*i);
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (channel == nullptr || event == nullptr) return fail(EINVAL);
  Channel* ch = channel_of(channel);
  if (!enter_wait(ch)) return -1;
  struct Leave {
    Channel* c;
    ~Leave() { leave_wait(c); }
  } leave{ch};
  for (;;) {
    uint64_t one = 0;
    // One count per queued event (EFD_SEMAPHORE); blocks unless the
    // application made the fd non-blocking (then EAGAIN, as librdmacm).
    const ssize_t n = read(ch->ch.fd, &one, sizeof one);
    {
      // Destroyed while this thread waited: it stays blocked, as a reader
      // blocked in the kernel's rdma_cm fd does (it never sees the fd closed).
      std::unique_lock lock(ch->wait_mu);
      if (ch->destroyed) {
        lock.unlock();
        park_forever(ch);
      }
    }
    if (n != sizeof one) {
      if (n < 0 && errno == EINTR) continue;
      return n < 0 ? -1 : fail(EIO);
    }
    json r = ch->call({{"op", "cm_get_event"}}, true);
    if (!r.value("ok", false)) {
      if (reply_errno(r) == EAGAIN) continue;  // counted but gone (its id destroyed)
      std::unique_lock lock(ch->wait_mu);
      if (ch->destroyed) {
        lock.unlock();
        park_forever(ch);
      }
      return failed(r);
    }
    const json& j = r["event"];
    auto* e = new Event;
    e->ev.event = static_cast<rdma_cm_event_type>(j.value("event", 0));
    e->ev.status = j.value("status", 0);
    Id* i = nullptr;
    if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      Id* l = find_id(j.value("listen_id", 0u));
      if (l == nullptr) {
        ch->call({{"op", "cm_destroy_id"}, {"cm_id", j.value("cm_id", 0u)}}, true);
        delete e;
        continue;
      }
      i = make_id(ch, l->id.context, l->id.ps, l->id.qp_type, j.value("cm_id", 0u));
      apply_addressing(*i, j);
      learn_remote(*i, j);
      i->initiator_depth = static_cast<uint8_t>(j.value("initiator_depth", 0));
      i->responder_resources = static_cast<uint8_t>(j.value("responder_resources", 0));
      if (l->sync && rdma_migrate_id(&i->id, nullptr) != 0) {
        rdma_destroy_id(&i->id);
        delete e;
        continue;
      }
      e->ev.listen_id = &l->id;
      e->owner = l;
      fill_params(*e, *i, j);
      count_reported(*l);
    } else {
      i = find_id(j.value("cm_id", 0u));
      if (i == nullptr) {
        delete e;
        continue;
      }
      e->owner = i;
      apply_addressing(*i, j);
      switch (e->ev.event) {
        case RDMA_CM_EVENT_ROUTE_RESOLVED:
          if (i->id.route.path_rec == nullptr) {
            auto* p = static_cast<ibv_sa_path_rec*>(std::calloc(1, sizeof(ibv_sa_path_rec)));
            p->sgid = i->id.route.addr.addr.ibaddr.sgid;
            p->dgid = i->id.route.addr.addr.ibaddr.dgid;
            p->pkey = htons(0xffff);
            p->hop_limit = 64;
            p->traffic_class = i->tos;
            p->mtu_selector = 2;
            p->mtu = i->mtu;
            p->rate_selector = 2;
            p->packet_life_time_selector = 2;
            p->numb_path = 1;
            i->id.route.path_rec = p;
            i->id.route.num_paths = 1;
          }
          break;
        case RDMA_CM_EVENT_CONNECT_RESPONSE:
          learn_remote(*i, j);
          fill_params(*e, *i, j);
          if (i->id.qp != nullptr) {
            e->ev.status = do_establish(*i) == 0 ? 0 : -errno;
            if (e->ev.status == 0) {
              e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
            } else {
              e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
              i->connect_error = true;
            }
          }
          break;
        case RDMA_CM_EVENT_ESTABLISHED:
          if (i->id.qp_type == IBV_QPT_UD) learn_remote(*i, j);
          fill_params(*e, *i, j);
          break;
        case RDMA_CM_EVENT_REJECTED:
        case RDMA_CM_EVENT_DISCONNECTED:
          if (i->connect_error) {
            delete e;
            continue;
          }
          fill_params(*e, *i, j);
          if (e->ev.event == RDMA_CM_EVENT_REJECTED) modify_qp_err(*i);
          break;
        default:
          fill_params(*e, *i, j);
          break;
      }
      count_reported(*i);
    }
    e->ev.id = &i->id;
    *event = &e->ev;
    debug("event %s on id %u (status %d)", rdma_event_str(e->ev.event), i->handle, e->ev.status);
    return 0;
  }
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return fail(EINVAL);
  Event* e = reinterpret_cast<Event*>(event);
  if (Id* o = e->owner) {
    std::lock_guard lock(o->mu);
    ++o->events_completed;
    o->cv.notify_all();
  }
  delete e;
  return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
  static const char* const kNames[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",      "RDMA_CM_EVENT_ROUTE_RESOLVED",
      "RDMA_CM_EVENT_ROUTE_ERROR",      "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",     "RDMA_CM_EVENT_REJECTED",
      "RDMA_CM_EVENT_ESTABLISHED",      "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
      "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  const auto k = static_cast<size_t>(event);
  return k < std::size(kNames) ? kNames[k] : "UNKNOWN EVENT";
}

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  if (id == nullptr || optval == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (level == RDMA_OPTION_ID) {
    json req = {{"op", "cm_set_option"}, {"cm_id", i->handle}};
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        i->tos = *static_cast<uint8_t*>(optval);
        req["tos"] = i->tos;
        break;
      case RDMA_OPTION_ID_REUSEADDR:
        if (optlen != sizeof(int)) return fail(EINVAL);
        req["reuseaddr"] = *static_cast<int*>(optval) != 0;
        break;
      case RDMA_OPTION_ID_AFONLY:
        if (optlen != sizeof(int)) return fail(EINVAL);
        req["afonly"] = *static_cast<int*>(optval) != 0;
        break;
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        i->ack_timeout = *static_cast<uint8_t*>(optval);
        req["ack_timeout"] = i->ack_timeout;
        break;
      default:
        return fail(ENOSYS);
    }
    json r = chan(*i)->call(req);
    return r.value("ok", false) ? 0 : failed(r);
  }
  if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
    log("rdma_set_option: RDMA_OPTION_IB_PATH is not supported (RoCE: the daemon resolves the route)");
    return fail(EOPNOTSUPP);
  }
  return fail(ENOSYS);
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (i->sync && channel == nullptr) return fail(EINVAL);
  const bool sync = channel == nullptr;
  Channel* to = sync ? new_channel() : channel_of(channel);
  if (to == nullptr) return -1;
  Channel* from = chan(*i);
  json r = to->call({{"op", "cm_migrate_id"}, {"cm_id", i->handle}, {"token", from->token}});
  if (!r.value("ok", false)) {
    if (sync) delete_channel(to);
    return failed(r);
  }
  if (i->sync) {
    if (id->event) {
      rdma_ack_cm_event(id->event);
      id->event = nullptr;
    }
    delete_channel(from);
  }
  std::unique_lock lock(i->mu);
  i->sync = sync;
  id->channel = &to->ch;
  return 0;
}

__be16 rdma_get_src_port(rdma_cm_id* id) {
  const sockaddr* sa = &id->route.addr.src_addr;
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  return 0;
}

__be16 rdma_get_dst_port(rdma_cm_id* id) {
  const sockaddr* sa = &id->route.addr.dst_addr;
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  return 0;
}

ibv_context** rdma_get_devices(int* num_devices) {
  std::vector<Dev*> devs = all_devs();
  auto** list = static_cast<ibv_context**>(std::calloc(devs.size() + 1, sizeof(ibv_context*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t k = 0; k < devs.size(); ++k) list[k] = devs[k]->verbs;
  if (num_devices) *num_devices = static_cast<int>(devs.size());
  return list;
}

void rdma_free_devices(ibv_context** list) { std::free(list); }

}  // extern "C"
