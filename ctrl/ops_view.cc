// Operations that need no device: hello, the views, help, open, and the
// client's asynchronous events.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ctrl/control.h"
#include "ctrl/protocol.h"
#include "ctrl/shm_abi.h"

namespace isoroce::ctrl {
namespace {

json hello(OpContext& c) { return op_ok({{"version", kProtocolVersion}, {"pid", getpid()}, {"client", c.s.id}}); }
json status(OpContext& c) { return op_ok({{"status", c.ctl.status_view()}}); }
json devices(OpContext& c) { return op_ok({{"devices", c.ctl.devices_view()}}); }
json qps(OpContext& c) { return op_ok({{"qps", c.ctl.qps_view(&c.s)}}); }
json stats(OpContext& c) { return op_ok({{"stats", c.ctl.stats_view()}}); }
json sched_op(OpContext& c) { return op_ok({{"sched", c.ctl.sched_view()}}); }
json help(OpContext& c) { return op_ok({{"ops", c.ctl.ops().help()}}); }

json qp(OpContext& c) {
  auto qpn = field_u64(c.req, "qpn");
  if (!qpn || *qpn > 0xffffff) return op_fail(EINVAL, "qp: \"qpn\" missing or not a QPN");
  int err = 0;
  std::string error;
  DeviceEntry* d = c.ctl.find_qp(static_cast<uint32_t>(*qpn), c.req.value("device", ""), &err, &error);
  if (d == nullptr) return op_fail(err, "qp: " + error);
  if (!c.ctl.may_see(c.s, *d, static_cast<uint32_t>(*qpn)))
    return op_fail(EPERM, "qp: QP " + qp_label(*d, static_cast<uint32_t>(*qpn)) + " belongs to another user");
  auto v = c.ctl.qp_view(*d, static_cast<uint32_t>(*qpn));
  if (!v) return op_fail(ENOENT, "qp: no QP " + d->name() + "/" + std::to_string(*qpn));
  return op_ok({{"qp", *v}});
}

json get_async_events(OpContext& c) {
  // This connection's events (ibv_get_async_event), oldest first, taken.
  c.ctl.drain_async_events();
  json list = json::array();
  for (json& e : c.s.async_events) list.push_back(std::move(e));
  c.s.async_events.clear();
  return op_ok({{"events", list}});
}

json open(OpContext& c) {
  Session& s = c.s;
  if (s.dev != nullptr) return op_fail(EBUSY, "open: this connection has a device open already");
  // The flags first: nothing is made for a request that is refused below.
  for (const char* flag : {"async_events", "doorbell", "membarrier"})
    if (auto it = c.req.find(flag); it != c.req.end() && !it->is_boolean())
      return op_fail(EINVAL, std::string("open: \"") + flag + "\" must be true or false");
  DeviceEntry* d = c.ctl.find_device(c.req.value("device", ""));
  if (d == nullptr) return op_fail(ENODEV, "open: device '" + c.req.value("device", "") + "'");
  if (c.req.value("async_events", false)) {
    // ibv_get_async_event blocks on this (the library's async_fd): blocking,
    // so the flags the application sets on its copy stay its own choice.
    s.async_eventfd = eventfd(0, EFD_CLOEXEC);
    if (s.async_eventfd < 0) return op_fail(errno, std::string("open: eventfd: ") + std::strerror(errno));
    s.reply_fds.push_back(dup(s.async_eventfd));
  }
  // The shared-memory ABI (ctrl/shm_abi.h): a library that names another
  // version than ours would misread the rings or the doorbell page.
  if (c.req.contains("shm_abi")) {
    const auto abi = field_u64(c.req, "shm_abi");
    if (!abi || *abi != shm::kShmAbiVersion) {
      const std::string theirs = c.req["shm_abi"].dump();
      return op_fail(EPROTO, "open: libisoroce-verbs speaks shared-memory ABI " + theirs + ", isoroced " +
                                 std::to_string(shm::kShmAbiVersion) +
                                 ": use the library and the daemon of one isoroce release");
    }
  }
  bool doorbell = false;
  if (c.req.value("doorbell", false) && d->driver->doorbell_page_fd() >= 0) {
    // The client's own eventfd (a shared one could be drained by one client to
    // hide another's posts), non-blocking for the library's writes.
    const int page = dup(d->driver->doorbell_page_fd());
    const int bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (page < 0 || bell < 0) {
      const int err = errno;
      if (page >= 0) close(page);
      if (bell >= 0) close(bell);
      return op_fail(err, std::string("open: doorbell: ") + std::strerror(err));
    }
    const int bell_copy = dup(bell);
    if (bell_copy < 0) {
      const int err = errno;
      close(page);
      close(bell);
      return op_fail(err, std::string("open: doorbell: ") + std::strerror(err));
    }
    s.doorbell_eventfd = bell;
    s.objs.doorbell = true;
    // The fence-free post (ctrl/shm_abi.h, kBellMembarrier) is the client's
    // to ask for, and relied on only once the worker counts it.
    const bool want_membarrier = c.req.value("membarrier", false);
    d->run([&](sched::Picos) {
      d->driver->add_doorbell(bell);
      if (want_membarrier) s.membarrier_user = d->driver->add_membarrier_user();
    });
    s.reply_fds.push_back(page);
    s.reply_fds.push_back(bell_copy);
    doorbell = true;
  }
  c.ctl.attach(s, *d);
  return op_ok({{"device", c.ctl.device_view(*d)},
                {"shm_abi", shm::kShmAbiVersion},
                {"doorbell", doorbell},
                {"membarrier", s.membarrier_user}});
}

}  // namespace

void register_view_ops(OpTable& t) {
  t.add({"hello", hello, false, "the protocol version, the daemon's pid and this connection's client id"});
  t.add({"help", help, false, "every operation with whether it needs an opened device and this text"});
  t.add({"status", status, false, "the daemon: pid, version, uptime, clients, workers"});
  t.add({"devices", devices, false, "every device: port, addresses, link, policy, QPs, clients"});
  t.add({"qps", qps, false, "every QP (unprivileged: its own user's) with its owner, class, rate and counters"});
  t.add({"qp", qp, false, "one QP: qpn, device (needed where several devices have the QPN)"});
  t.add({"stats", stats, false, "per-device counters: engine, port, IP stack, shared-memory queues, CM (QP1)"});
  t.add({"sched", sched_op, false, "per-device scheduler: policy, DCQCN, justitia state"});
  t.add({"open", open, false, "open a device for verbs: device, async_events (an eventfd is returned)"});
  t.add({"get_async_events", get_async_events, false, "this connection's asynchronous events, taken"});
}

}  // namespace isoroce::ctrl
