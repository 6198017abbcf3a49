// Completion queues and shared receive queues, with their shared-memory rings
// (ctrl/shm_abi.h) when the request says "shm".
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ctrl/control.h"
#include "ctrl/lane_objects.h"
#include "ctrl/wire_json.h"

namespace isoroce::ctrl {
namespace {

json ring_json(const ShmQueue& q) { return {{"log2_entries", q.log2_entries()}, {"log2_elem", q.log2_elem()}}; }

// The ring's descriptor goes with the reply; the daemon keeps only its mapping.
void hand_over(Session& s, ShmQueue& q) {
  s.reply_fds.push_back(dup(q.fd()));
  q.close_fd();
}

json create_cq(OpContext& c) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  const int cqe = static_cast<int>(std::min<uint64_t>(field_u64_or(c.req, "cqe", 0), INT32_MAX));
  const ClientLimits& lim = c.ctl.limits();
  if (static_cast<uint64_t>(cqe) > lim.max_cqe)
    return op_fail(EINVAL, "create_cq: cqe " + std::to_string(cqe) + " is over limits.max_cqe (" +
                               std::to_string(lim.max_cqe) + ")");
  std::string e = Control::over("max_cqs", s.objs.cqs.size(), 1, lim.max_cqs);
  if (e.empty() && c.req.value("shm", false)) e = Control::over("max_mappings", s.mappings, 1, lim.max_mappings);
  if (!e.empty()) return op_fail(ENOMEM, "create_cq: " + e);
  verbs::Result<transport::CqHandle> r = verbs::Result<transport::CqHandle>::error(EIO);
  d.run([&](sched::Picos) {
    r = lanes_create_cq(d, cqe);
    if (r.ok()) s.objs.cqs.insert(r.value());
  });
  if (!r.ok()) return op_fail(r.err(), "create_cq");
  if (!c.req.value("shm", false)) return op_ok({{"cq", r.value()}});
  // The CQ ring and, for completion events, an eventfd the daemon makes
  // non-blocking (a client's own could block the worker).
  std::string err;
  auto ring = ShmQueue::create(static_cast<uint32_t>(std::max(cqe, 1)), sizeof(ib_uverbs_wc), true, &err);
  int evfd = -1;
  if (ring && c.req.value("events", false)) {
    evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (evfd < 0) err = std::string("eventfd: ") + std::strerror(errno), ring.reset();
  }
  if (!ring) {
    d.run([&](sched::Picos) {
      lanes_destroy_cq(d, r.value());
      s.objs.cqs.erase(r.value());
    });
    return op_fail(ENOMEM, "create_cq: " + err);
  }
  // With lanes the ring joins a pump when the CQ's first QP gives it a lane.
  if (d.lanes() == 1) d.run([&](sched::Picos) { d.pump->add_cq(r.value(), ring.get(), evfd); });
  hand_over(s, *ring);
  if (evfd >= 0) {
    s.reply_fds.push_back(dup(evfd));
    s.cq_eventfds[r.value()] = evfd;
  }
  json reply = ring_json(*ring);
  reply["cq"] = r.value();
  s.cq_rings[r.value()] = std::move(ring);
  ++s.mappings;
  return op_ok(reply);
}

json destroy_cq(OpContext& c) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  auto cq = own_handle(s.objs.cqs, c.req, "cq");
  if (!cq) return op_fail(EINVAL, "destroy_cq: not a CQ of this client");
  int rc = 0;
  d.run([&](sched::Picos) {
    const size_t lane = d.cq_lane(*cq);
    rc = lanes_destroy_cq(d, *cq);
    if (rc != 0) return;
    d.lane_pump(lane).remove_cq(*cq);
    s.objs.cqs.erase(*cq);
  });
  if (rc) return op_fail(rc, "destroy_cq");
  s.mappings -= s.cq_rings.erase(*cq);
  if (auto it = s.cq_eventfds.find(*cq); it != s.cq_eventfds.end()) {
    close(it->second);
    s.cq_eventfds.erase(it);
  }
  return op_ok();
}

json resize_cq(OpContext& c) {
  // A new ring of the new size, the unconsumed completions moved into it and
  // swapped into the pump on the worker, so the pump never writes between
  // the count, the copy and the swap. The client keeps polling its old ring
  // until the reply (the library holds the CQ's lock meanwhile).
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  auto cq = own_handle(s.objs.cqs, c.req, "cq");
  if (!cq) return op_fail(EINVAL, "resize_cq: not a CQ of this client");
  auto cqe = field_u64(c.req, "cqe");
  // The device's limits are fixed while the engine lives (no ring for nothing).
  const uint32_t max_cqe = d.engine().config().device.max_cqe;
  if (!cqe || *cqe == 0 || *cqe > max_cqe)
    return op_fail(EINVAL, "resize_cq: \"cqe\" must be 1.." + std::to_string(max_cqe));
  if (*cqe > c.ctl.limits().max_cqe)
    return op_fail(EINVAL, "resize_cq: cqe " + std::to_string(*cqe) + " is over limits.max_cqe (" +
                               std::to_string(c.ctl.limits().max_cqe) + ")");
  auto old = s.cq_rings.find(*cq);
  std::unique_ptr<ShmQueue> ring;
  if (old != s.cq_rings.end()) {
    std::string err;
    ring = ShmQueue::create(static_cast<uint32_t>(*cqe), sizeof(ib_uverbs_wc), true, &err);
    if (!ring) return op_fail(ENOMEM, "resize_cq: " + err);
  }
  int rc = 0;
  uint32_t outstanding = 0;
  d.run([&](sched::Picos) {
    ShmPump& pump = d.lane_pump(d.cq_lane(*cq));
    outstanding = ring ? pump.cq_ring_count(*cq) : 0;
    rc = lanes_resize_cq(d, *cq, static_cast<int>(*cqe), outstanding);
    // Cannot fail (checked above); a CQ of a port with lanes that has no QP
    // yet is in no pump: its new ring is simply the one to add later.
    if (rc == 0 && ring && (d.lanes() == 1 || d.cq_lanes[*cq].lane >= 0)) rc = pump.replace_cq(*cq, ring.get());
  });
  if (rc)
    return op_fail(rc, "resize_cq: cqe " + std::to_string(*cqe) + " is below the completions not polled yet (" +
                           std::to_string(outstanding) + " of them in the ring)");
  if (!ring) return op_ok({{"cq", *cq}});
  hand_over(s, *ring);
  json reply = ring_json(*ring);
  reply["cq"] = *cq;
  old->second = std::move(ring);  // the old ring is unmapped here; the client still has its own mapping
  return op_ok(reply);
}

json poll_cq(OpContext& c) {
  DeviceEntry& d = c.dev();
  auto cq = own_handle(c.s.objs.cqs, c.req, "cq");
  if (!cq) return op_fail(EINVAL, "poll_cq: not a CQ of this client");
  std::vector<ibv_wc> wc(std::clamp<uint64_t>(field_u64_or(c.req, "max", 16), 1, 1024));
  int n = 0;
  d.run([&](sched::Picos) { n = d.lane_engine(d.cq_lane(*cq)).poll_cq(*cq, wc); });
  if (n < 0) return op_fail(-n, "poll_cq");
  json list = json::array();
  for (int i = 0; i < n; ++i) list.push_back(wc_to_json(wc[static_cast<size_t>(i)]));
  return op_ok({{"wc", list}});
}

json create_srq(OpContext& c) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  auto pd = own_handle(s.objs.pds, c.req, "pd");
  if (!pd) return op_fail(EINVAL, "create_srq: not a PD of this client");
  const ClientLimits& lim = c.ctl.limits();
  if (field_u64_or(c.req, "max_wr", 0) > lim.max_wr)
    return op_fail(EINVAL, "create_srq: max_wr is over limits.max_wr (" + std::to_string(lim.max_wr) + ")");
  std::string e = Control::over("max_srqs", s.objs.srqs.size(), 1, lim.max_srqs);
  if (e.empty() && c.req.value("shm", false)) e = Control::over("max_mappings", s.mappings, 1, lim.max_mappings);
  if (!e.empty()) return op_fail(ENOMEM, "create_srq: " + e);
  ibv_srq_attr a{};
  a.max_wr = static_cast<uint32_t>(field_u64_or(c.req, "max_wr", 0));
  a.max_sge = static_cast<uint32_t>(field_u64_or(c.req, "max_sge", 1));
  a.srq_limit = static_cast<uint32_t>(field_u64_or(c.req, "srq_limit", 0));
  verbs::Result<transport::SrqHandle> r = verbs::Result<transport::SrqHandle>::error(EIO);
  d.run([&](sched::Picos) {
    r = lanes_create_srq(d, *pd, a);
    if (r.ok()) s.objs.srqs.insert(r.value());
  });
  if (!r.ok()) return op_fail(r.err(), "create_srq");
  if (!c.req.value("shm", false)) return op_ok({{"srq", r.value()}});
  std::string err;
  auto ring = ShmQueue::create(std::max(a.max_wr, 1u), shm::recv_wqe_bytes(a.max_sge), false, &err);
  if (!ring) {
    d.run([&](sched::Picos) {
      lanes_destroy_srq(d, r.value());
      s.objs.srqs.erase(r.value());
    });
    return op_fail(ENOMEM, "create_srq: " + err);
  }
  if (d.lanes() == 1) d.run([&](sched::Picos) { d.pump->add_srq(r.value(), ring.get(), a.max_sge, &s.objs); });
  hand_over(s, *ring);
  json reply = {{"srq", r.value()}, {"rq", ring_json(*ring)}};
  s.srq_rings[r.value()] = std::move(ring);
  ++s.mappings;
  return op_ok(reply);
}

json modify_srq(OpContext& c) {
  DeviceEntry& d = c.dev();
  auto srq = own_handle(c.s.objs.srqs, c.req, "srq");
  if (!srq) return op_fail(EINVAL, "modify_srq: not an SRQ of this client");
  ibv_srq_attr a{};
  uint32_t mask = 0;
  if (auto v = field_u64(c.req, "max_wr")) a.max_wr = static_cast<uint32_t>(*v), mask |= IBV_SRQ_MAX_WR;
  if ((mask & IBV_SRQ_MAX_WR) && a.max_wr > c.ctl.limits().max_wr)
    return op_fail(EINVAL, "modify_srq: max_wr is over limits.max_wr (" + std::to_string(c.ctl.limits().max_wr) + ")");
  if (auto v = field_u64(c.req, "srq_limit")) a.srq_limit = static_cast<uint32_t>(*v), mask |= IBV_SRQ_LIMIT;
  int rc = 0;
  d.run([&](sched::Picos) { rc = lanes_modify_srq(d, *srq, a, mask); });
  return rc ? op_fail(rc, "modify_srq") : op_ok();
}

json destroy_srq(OpContext& c) {
  DeviceEntry& d = c.dev();
  Session& s = c.s;
  auto srq = own_handle(s.objs.srqs, c.req, "srq");
  if (!srq) return op_fail(EINVAL, "destroy_srq: not an SRQ of this client");
  int rc = 0;
  d.run([&](sched::Picos) {
    const size_t lane = d.srq_lane(*srq);
    rc = lanes_destroy_srq(d, *srq);
    if (rc != 0) return;
    d.lane_pump(lane).remove_srq(*srq);
    s.objs.srqs.erase(*srq);
  });
  if (rc) return op_fail(rc, "destroy_srq");
  s.mappings -= s.srq_rings.erase(*srq);
  return op_ok();
}

}  // namespace

void register_queue_ops(OpTable& t) {
  t.add({"create_cq", create_cq, true, "cqe, shm (a ring), events (an eventfd)"});
  t.add({"destroy_cq", destroy_cq, true, "cq"});
  t.add({"resize_cq", resize_cq, true, "cq, cqe (a new ring if it has one)"});
  t.add({"poll_cq", poll_cq, true, "cq, max: completions as JSON"});
  t.add({"create_srq", create_srq, true, "pd, max_wr, max_sge, srq_limit, shm"});
  t.add({"modify_srq", modify_srq, true, "srq, max_wr, srq_limit"});
  t.add({"destroy_srq", destroy_srq, true, "srq"});
}

}  // namespace isoroce::ctrl
