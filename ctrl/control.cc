#include "ctrl/control.h"

#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "ctrl/lane_objects.h"
#include "ctrl/log.h"

namespace isoroce::ctrl {

uint32_t app_id(uint64_t session) {
  return session == 0 ? sched::kOwnApp : static_cast<uint32_t>(session % 0xffff'fff0u);
}

Control::Control() : cm_(std::make_unique<CmIds>(*this)) { register_all_ops(ops_); }
Control::~Control() = default;

json Control::handle(Session& s, const json& req, std::vector<int>& fds) {
  if (!req.is_object() || !req.contains("op") || !req["op"].is_string())
    return {{"ok", false}, {"errno", EPROTO}, {"error", "a request is a JSON object with a string \"op\""}};
  // The id is echoed: only a number or a string (nothing that nests).
  if (auto id = req.find("id"); id != req.end() && !id->is_number() && !id->is_string())
    return {{"ok", false}, {"errno", EINVAL}, {"error", "\"id\" must be a number or a string"}};
  json reply;
  const std::string op = req["op"].get<std::string>();
  try {
    OpContext ctx{*this, s, op, req, fds};
    reply = ops_.dispatch(ctx);
  } catch (const std::exception& e) {
    // A field of the wrong type (nlohmann::json::type_error) and the like:
    // the request is refused, the daemon carries on.
    reply = {{"ok", false}, {"errno", EINVAL}, {"error", std::string("malformed request: ") + e.what()}};
  }
  if (req.contains("id")) reply["id"] = req["id"];
  return reply;
}

DeviceEntry* Control::find_device(const std::string& name) {
  for (auto& d : devices_)
    if (d->name() == name) return d.get();
  return nullptr;
}

DeviceEntry* Control::find_qp(uint32_t qpn, const std::string& device, int* err, std::string* error) {
  std::vector<DeviceEntry*> found;
  for (auto& d : devices_) {
    if (!device.empty() && d->name() != device) continue;
    bool has = false;
    d->run([&](sched::Picos) { has = d->qp_engine(qpn).query_qp(wire::Qpn(qpn)) != nullptr; });
    if (has) found.push_back(d.get());
  }
  if (found.size() == 1) return found[0];
  const std::string name = (device.empty() ? "" : device + "/") + std::to_string(qpn);
  if (!device.empty() && find_device(device) == nullptr) {
    *err = ENODEV;
    *error = "no device '" + device + "'";
  } else if (found.empty()) {
    *err = ENOENT;
    *error = "no QP " + name + (device.empty() ? " on any device" : "");
  } else {
    *err = EINVAL;
    *error = "QP " + name + " is ambiguous: " + std::to_string(found.size()) + " devices have one (";
    for (size_t i = 0; i < found.size(); ++i) *error += (i ? ", " : "") + found[i]->name() + "/" + std::to_string(qpn);
    *error += "); name one as DEVICE/QPN";
  }
  return nullptr;
}

bool Control::resolve_neighbor(DeviceEntry& d, const wire::IpAddr& ip) {
  // The device's own address: the engine loops those frames back (same-device loopback).
  bool self = false;
  d.run([&](sched::Picos) { self = d.engine().config().ip == ip; });
  if (self) return true;
  // Wait up to one second for the answer; solicit on the first try and every 250 ms.
  for (int attempt = 0; attempt < 40; ++attempt) {
    bool known = false;
    d.run([&](sched::Picos) { known = d.driver->neighbor_known(ip, attempt % 10 == 0); });
    if (known) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

std::string Control::over(const char* limit, uint64_t have, uint64_t adding, uint64_t max) {
  if (adding <= max && have <= max - adding) return {};
  return std::string("over this client's limits.") + limit + " (" + std::to_string(max) + ", docs/isoroced.md)";
}

bool Control::may_see(const Session& s, const DeviceEntry& d, uint32_t qpn) const {
  if (s.privileged) return true;
  const std::optional<QpInfo> info = registry_.find(&d, qpn);
  return info && info->uid == s.uid && info->client != 0;
}

void Control::attach(Session& s, DeviceEntry& d) {
  s.dev = &d;
  ++d.sessions;
  attached_.insert(&s);
}

void Control::reclaim(Session& s) {
  bool reclaimed = false;
  // A trace dies with the connection that started it (its memfd is the client's).
  if (trace_ && trace_->owner() == s.id) trace_.reset();
  // rdma_cm ids first: their connections end on the wire (DREQ, REJ).
  cm_->reclaim(s);
  if (s.dev != nullptr) {
    DeviceEntry& d = *s.dev;
    ClientObjects& o = s.objs;
    // QPs first (they stop touching memory), then what they used; in every
    // lane (ctrl/lane_objects.h) before the reply.
    d.run([&](sched::Picos) {
      for (size_t k = 0; k < d.lanes(); ++k) {
        ShmPump& p = d.lane_pump(k);
        for (uint32_t q : o.qps) p.remove_qp(q);
        for (uint32_t h : o.srqs) p.remove_srq(h);
        for (uint32_t h : o.cqs) p.remove_cq(h);
      }
      for (uint32_t q : o.qps) d.qp_engine(q).destroy_qp(wire::Qpn(q));
      for (uint32_t h : o.srqs) lanes_destroy_srq(d, h);
      for (uint32_t h : o.ahs) lanes_destroy_ah(d, h);
      for (uint32_t h : o.cqs) lanes_destroy_cq(d, h);
      for (uint32_t i : o.mws) d.engine().dealloc_mw(i << 8);  // before the MRs they are bound to
      for (const auto& [lkey, m] : o.mrs) lanes_dereg_mr(d, lkey);
      for (uint32_t h : o.pds) lanes_dealloc_pd(d, h);
      if (s.doorbell_eventfd >= 0) d.driver->remove_doorbell(s.doorbell_eventfd);
      if (s.membarrier_user) d.driver->remove_membarrier_user();
    });
    s.membarrier_user = false;
    for (auto& [lkey, m] : o.mrs) release_mapping(m);
    for (uint32_t q : o.qps) registry_.erase(&d, q);
    if (!o.qps.empty() || !o.mrs.empty())
      log(LogLevel::kInfo, "client {} (pid {}, {}) gone: reclaimed {} QP(s), {} MR(s), {} CQ(s), {} PD(s)", s.id, s.pid,
          s.comm, o.qps.size(), o.mrs.size(), o.cqs.size(), o.pds.size());
    --d.sessions;
    // The heap's free pages go back to the system (a client with thousands of
    // objects otherwise leaves the daemon's RSS where it peaked).
    if (!o.qps.empty() || !o.cqs.empty() || !o.mrs.empty()) reclaimed = true;
  }
  attached_.erase(&s);
  for (const auto& [cq, fd] : s.cq_eventfds) close(fd);
  s.cq_eventfds.clear();
  if (s.async_eventfd >= 0) close(s.async_eventfd);
  s.async_eventfd = -1;
  // Out of the worker's wait set above (reclaim runs only for opened devices
  // with a doorbell), so the worker never polls a closed descriptor.
  if (s.doorbell_eventfd >= 0) close(s.doorbell_eventfd);
  s.doorbell_eventfd = -1;
  s.qp_rings.clear();
  s.srq_rings.clear();
  s.cq_rings.clear();
  s.objs = ClientObjects{};
  s.mappings = 0;
  s.mr_bytes = 0;
  s.dev = nullptr;
  if (reclaimed) malloc_trim(0);
}

bool Control::trace_tick(TraceSession::Clock::time_point now) {
  if (!trace_ || !trace_->active()) return false;
  if (trace_->expired(now)) {
    trace_->finish();
    return false;
  }
  trace_->drain();
  return true;
}

void Control::drain_async_events() {
  for (auto& d : devices_) {
    std::vector<transport::AsyncEvent> events;
    sched::JustitiaStats js;
    bool have_js = false;
    d->run([&](sched::Picos) {
      events = d->engine().take_async_events();
      for (size_t k = 1; k < d->lanes(); ++k)
        for (const transport::AsyncEvent& ev : d->lane_engine(k).take_async_events()) events.push_back(ev);
      if (const sched::JustitiaStats* st = d->engine().scheduler().justitia_stats(); st && !events.empty()) {
        js = *st;
        have_js = true;
      }
    });
    const std::string& name = d->name();
    for (const transport::AsyncEvent& ev : events) {
      ++d->async_events;
      const char* type = "";
      Session* owner = nullptr;
      auto by_handle = [&](auto member) {
        for (Session* s : attached_)
          if (s->dev == d.get() && (s->objs.*member).count(ev.id)) return s;
        return static_cast<Session*>(nullptr);
      };
      switch (ev.type) {
        case transport::AsyncEventType::kQpFatal: type = "qp_fatal"; owner = by_handle(&ClientObjects::qps); break;
        case transport::AsyncEventType::kCqError: type = "cq_error"; owner = by_handle(&ClientObjects::cqs); break;
        case transport::AsyncEventType::kSrqLimitReached:
          type = "srq_limit_reached";
          owner = by_handle(&ClientObjects::srqs);
          break;
        case transport::AsyncEventType::kLatencyTargetMissed:
          type = "latency_target_missed";
          owner = by_handle(&ClientObjects::qps);
          ++d->latency_target_missed;
          break;
      }
      const uint64_t client = owner != nullptr ? owner->id : 0;
      if (ev.type == transport::AsyncEventType::kLatencyTargetMissed) {
        log(LogLevel::kWarning,
            "{}: latency-class QP {}/{} (client {}{}) admitted while Current99 {} us > Target99 {} us "
            "(justitia soft admission; SafeUtil {} Gb/s)",
            name, name, ev.id, client, owner ? " pid " + std::to_string(owner->pid) + " " + owner->comm : std::string(),
            have_js ? static_cast<double>(js.current99) / 1e6 : 0.0, have_js ? static_cast<double>(js.target99) / 1e6 : 0.0,
            have_js ? static_cast<double>(js.safe_util_bps) / 1e9 : 0.0);
      } else {
        const bool ref = d->ref && ev.type == transport::AsyncEventType::kQpFatal && ev.id == d->ref->src_qpn();
        log(ref ? LogLevel::kWarning : LogLevel::kInfo, "{}: async event {} on {} (client {}){}", name, type, ev.id,
            client, ref ? ": the reference flow's QP" : "");
      }
      if (owner == nullptr) continue;
      owner->async_events.push_back({{"type", type}, {"device", name}, {"id", ev.id}});
      if (owner->async_events.size() > 1024) owner->async_events.pop_front();
      if (owner->async_eventfd >= 0) {
        const uint64_t one = 1;
        (void)!write(owner->async_eventfd, &one, sizeof one);
      }
    }
  }
}

}  // namespace isoroce::ctrl
