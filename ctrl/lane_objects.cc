#include "ctrl/lane_objects.h"

#include <cerrno>
#include <limits>

namespace isoroce::ctrl {
namespace {

using transport::Engine;

// Lane 0 makes the object; lanes 1.. make it under the same handle, or it is
// undone everywhere (make(k) and undo(k, handle) for one lane).
template <typename R, typename Make, typename Undo, typename Same>
R mirrored(DeviceEntry& d, Make make, Undo undo, Same same) {
  R r = make(0);
  if (!r.ok()) return r;
  for (size_t k = 1; k < d.lanes(); ++k) {
    R m = make(k);
    if (m.ok() && same(m.value(), r.value())) continue;
    if (m.ok()) undo(k, m.value());
    for (size_t j = k; j-- > 0;) undo(j, r.value());
    return R::error(m.ok() ? EEXIST : m.err());
  }
  return r;
}

// Clients' QPs only: the daemon's own at well-known QPNs (QP1, the
// reference echo's 15) are below every lane's QPNs and always in lane 0.
size_t fewest_qps_lane(DeviceEntry& d) {
  size_t best = 0, least = std::numeric_limits<size_t>::max();
  for (size_t k = 0; k < d.lanes(); ++k) {
    size_t n = 0;
    for (wire::Qpn q : d.lane_engine(k).qp_numbers()) n += q.value() >= 16;
    if (n < least) least = n, best = k;
  }
  return best;
}

}  // namespace

verbs::Result<transport::PdHandle> lanes_alloc_pd(DeviceEntry& d) {
  using R = verbs::Result<transport::PdHandle>;
  transport::PdHandle want = 0;
  return mirrored<R>(
      d,
      [&](size_t k) {
        if (k != 0) d.lane_engine(k).set_next_pd(want);
        R r = d.lane_engine(k).alloc_pd();
        if (k == 0 && r.ok()) want = r.value();
        return r;
      },
      [&](size_t k, transport::PdHandle pd) { d.lane_engine(k).dealloc_pd(pd); },
      [](transport::PdHandle a, transport::PdHandle b) { return a == b; });
}

int lanes_dealloc_pd(DeviceEntry& d, transport::PdHandle pd) {
  for (size_t k = d.lanes(); k-- > 0;) {
    if (int rc = d.lane_engine(k).dealloc_pd(pd); rc != 0) {
      for (size_t j = k + 1; j < d.lanes(); ++j) {  // the lanes that let it go take it back
        d.lane_engine(j).set_next_pd(pd);
        (void)d.lane_engine(j).alloc_pd();
      }
      return rc;
    }
  }
  return 0;
}

verbs::Result<verbs::MrKeys> lanes_reg_mr(DeviceEntry& d, transport::PdHandle pd, void* addr, uint64_t length,
                                          uint64_t iova, uint32_t access) {
  using R = verbs::Result<verbs::MrKeys>;
  verbs::MrKeys want{};
  return mirrored<R>(
      d,
      [&](size_t k) {
        if (k != 0) d.lane_engine(k).set_next_mr_keys(want);
        R r = d.lane_engine(k).reg_mr(pd, addr, length, iova, access);
        if (k == 0 && r.ok()) want = r.value();
        return r;
      },
      [&](size_t k, verbs::MrKeys keys) { d.lane_engine(k).dereg_mr(keys.lkey); },
      [](verbs::MrKeys a, verbs::MrKeys b) { return a.lkey == b.lkey && a.rkey == b.rkey && a.id == b.id; });
}

int lanes_dereg_mr(DeviceEntry& d, uint32_t lkey) {
  if (int rc = d.lane_engine(0).dereg_mr(lkey); rc != 0) return rc;
  for (size_t k = 1; k < d.lanes(); ++k) d.lane_engine(k).dereg_mr(lkey);
  return 0;
}

namespace {

// CQ, SRQ and AH handles share one counter per engine.
template <typename R, typename Make>
R mirrored_handle(DeviceEntry& d, Make make, int (Engine::*destroy)(uint32_t)) {
  uint32_t want = 0;
  R r = mirrored<R>(
      d,
      [&](size_t k) {
        Engine& e = d.lane_engine(k);
        if (k != 0) e.set_next_handle(want);
        R m = make(e);
        if (k != 0) e.set_next_handle(0);
        if (k == 0 && m.ok()) want = m.value();
        return m;
      },
      [&](size_t k, uint32_t h) { (d.lane_engine(k).*destroy)(h); }, [](uint32_t a, uint32_t b) { return a == b; });
  return r;
}

// Destroys h in its lane first (which may refuse: EBUSY), then in the others.
int destroy_everywhere(DeviceEntry& d, uint32_t h, size_t lane, int (Engine::*destroy)(uint32_t)) {
  if (int rc = (d.lane_engine(lane).*destroy)(h); rc != 0) return rc;
  for (size_t k = 0; k < d.lanes(); ++k)
    if (k != lane) (d.lane_engine(k).*destroy)(h);
  return 0;
}

}  // namespace

verbs::Result<transport::CqHandle> lanes_create_cq(DeviceEntry& d, int cqe) {
  auto r = mirrored_handle<verbs::Result<transport::CqHandle>>(
      d, [&](Engine& e) { return e.create_cq(cqe); }, &Engine::destroy_cq);
  if (r.ok() && d.lanes() > 1) d.cq_lanes[r.value()] = {};
  return r;
}

int lanes_destroy_cq(DeviceEntry& d, transport::CqHandle cq) {
  const int rc = destroy_everywhere(d, cq, d.cq_lane(cq), &Engine::destroy_cq);
  if (rc == 0) d.cq_lanes.erase(cq);
  return rc;
}

int lanes_resize_cq(DeviceEntry& d, transport::CqHandle cq, int cqe, uint32_t outside) {
  const size_t lane = d.cq_lane(cq);
  if (int rc = d.lane_engine(lane).resize_cq(cq, cqe, outside); rc != 0) return rc;
  for (size_t k = 0; k < d.lanes(); ++k)
    if (k != lane) d.lane_engine(k).resize_cq(cq, cqe, 0);  // empty there: cannot fail
  return 0;
}

verbs::Result<transport::SrqHandle> lanes_create_srq(DeviceEntry& d, transport::PdHandle pd, const ibv_srq_attr& a) {
  auto r = mirrored_handle<verbs::Result<transport::SrqHandle>>(
      d, [&](Engine& e) { return e.create_srq(pd, a); }, &Engine::destroy_srq);
  if (r.ok() && d.lanes() > 1) d.srq_lanes[r.value()] = {-1, a.max_sge};
  return r;
}

int lanes_modify_srq(DeviceEntry& d, transport::SrqHandle srq, const ibv_srq_attr& a, uint32_t mask) {
  const size_t lane = d.srq_lane(srq);
  if (int rc = d.lane_engine(lane).modify_srq(srq, a, mask); rc != 0) return rc;
  for (size_t k = 0; k < d.lanes(); ++k)
    if (k != lane) d.lane_engine(k).modify_srq(srq, a, mask);
  return 0;
}

int lanes_destroy_srq(DeviceEntry& d, transport::SrqHandle srq) {
  const int rc = destroy_everywhere(d, srq, d.srq_lane(srq), &Engine::destroy_srq);
  if (rc == 0) d.srq_lanes.erase(srq);
  return rc;
}

verbs::Result<transport::AhHandle> lanes_create_ah(DeviceEntry& d, transport::PdHandle pd, const transport::AhAttr& a) {
  return mirrored_handle<verbs::Result<transport::AhHandle>>(
      d, [&](Engine& e) { return e.create_ah(pd, a); }, &Engine::destroy_ah);
}

int lanes_destroy_ah(DeviceEntry& d, transport::AhHandle ah) {
  return destroy_everywhere(d, ah, 0, &Engine::destroy_ah);
}

int place_qp(DeviceEntry& d, const transport::QpCreate& q, std::string* why) {
  if (d.lanes() == 1) return 0;
  int lane = -1;
  auto join = [&](const std::map<uint32_t, QueueLane>& m, uint32_t h) {
    auto it = m.find(h);
    const int l = it == m.end() ? -1 : it->second.lane;
    if (l < 0) return true;
    if (lane >= 0 && lane != l) return false;
    lane = l;
    return true;
  };
  if (!join(d.cq_lanes, q.send_cq) || !join(d.cq_lanes, q.recv_cq) || (q.use_srq && !join(d.srq_lanes, q.srq))) {
    *why = "its send CQ, receive CQ" + std::string(q.use_srq ? " and SRQ" : "") +
           " serve QPs of different lanes of this port (lanes_per_port = " + std::to_string(d.lanes()) +
           ": a CQ or SRQ serves the QPs of one lane; use one CQ for both, or set lanes_per_port = 1; "
           "docs/isoroced.md, \"Lanes\")";
    return -1;
  }
  return lane >= 0 ? lane : static_cast<int>(fewest_qps_lane(d));
}

void bind_queues(DeviceEntry& d, Session& s, const transport::QpCreate& q, size_t lane) {
  if (d.lanes() == 1) return;
  auto bind_cq = [&](uint32_t cq) {
    QueueLane& ql = d.cq_lanes[cq];
    if (ql.lane >= 0) return;
    ql.lane = static_cast<int>(lane);
    if (auto it = s.cq_rings.find(cq); it != s.cq_rings.end()) {
      auto fd = s.cq_eventfds.find(cq);
      d.lane_pump(lane).add_cq(cq, it->second.get(), fd == s.cq_eventfds.end() ? -1 : fd->second);
    }
  };
  bind_cq(q.send_cq);
  bind_cq(q.recv_cq);
  if (q.use_srq) {
    QueueLane& ql = d.srq_lanes[q.srq];
    if (ql.lane < 0) {
      ql.lane = static_cast<int>(lane);
      if (auto it = s.srq_rings.find(q.srq); it != s.srq_rings.end())
        d.lane_pump(lane).add_srq(q.srq, it->second.get(), ql.max_sge, &s.objs);
    }
  }
}

size_t srq_lane_for_post(DeviceEntry& d, Session& s, transport::SrqHandle srq) {
  if (d.lanes() == 1) return 0;
  QueueLane& ql = d.srq_lanes[srq];
  if (ql.lane < 0) {
    ql.lane = static_cast<int>(fewest_qps_lane(d));
    if (auto it = s.srq_rings.find(srq); it != s.srq_rings.end())
      d.lane_pump(static_cast<size_t>(ql.lane)).add_srq(srq, it->second.get(), ql.max_sge, &s.objs);
  }
  return static_cast<size_t>(ql.lane);
}

}  // namespace isoroce::ctrl
