// Protection domains and memory regions (reg_mr maps the client's memory:
// ctrl/mr_map.h).
#include <cerrno>

#include "ctrl/control.h"
#include "ctrl/lane_objects.h"
#include "ctrl/log.h"

namespace isoroce::ctrl {
namespace {

json alloc_pd(OpContext& c) {
  DeviceEntry& d = c.dev();
  if (auto e = Control::over("max_pds", c.s.objs.pds.size(), 1, c.ctl.limits().max_pds); !e.empty())
    return op_fail(ENOMEM, "alloc_pd: " + e);
  verbs::Result<transport::PdHandle> r = verbs::Result<transport::PdHandle>::error(EIO);
  d.run([&](sched::Picos) {
    r = lanes_alloc_pd(d);
    if (r.ok()) c.s.objs.pds.insert(r.value());
  });
  if (!r.ok()) return op_fail(r.err(), "alloc_pd");
  return op_ok({{"pd", r.value()}});
}

json dealloc_pd(OpContext& c) {
  DeviceEntry& d = c.dev();
  auto pd = own_handle(c.s.objs.pds, c.req, "pd");
  if (!pd) return op_fail(EINVAL, "dealloc_pd: not a PD of this client");
  int rc = 0;
  d.run([&](sched::Picos) {
    rc = lanes_dealloc_pd(d, *pd);
    if (rc == 0) c.s.objs.pds.erase(*pd);
  });
  if (rc) return op_fail(rc, "dealloc_pd");
  return op_ok();
}

json reg_mr(OpContext& c) {
  DeviceEntry& d = c.dev();
  ClientObjects& o = c.s.objs;
  auto pd = own_handle(o.pds, c.req, "pd");
  auto length = field_u64(c.req, "length");
  const uint64_t offset = field_u64_or(c.req, "offset", 0);
  const uint64_t iova = field_u64_or(c.req, "iova", 0);
  const uint32_t access = static_cast<uint32_t>(field_u64_or(c.req, "access", 0));
  if (!pd) return op_fail(EINVAL, "reg_mr: not a PD of this client");
  if (!length || *length == 0) return op_fail(EINVAL, "reg_mr: \"length\" must be positive");
  const ClientLimits& lim = c.ctl.limits();
  std::string e = Control::over("max_mrs", o.mrs.size(), 1, lim.max_mrs);
  if (e.empty()) e = Control::over("max_mr_bytes", c.s.mr_bytes, *length, lim.max_mr_bytes);
  if (!e.empty()) return op_fail(ENOMEM, "reg_mr: " + e);
  Mapping m;
  std::string err;
  if (int rc = map_mr_memory(c.req, c.fds, *length, offset, access, &m, &err)) return op_fail(rc, "reg_mr: " + err);
  if (e = Control::over("max_mappings", c.s.mappings, m.maps, lim.max_mappings); !e.empty()) {
    release_mapping(m);
    return op_fail(ENOMEM, "reg_mr: " + e);
  }
  m.iova = iova;
  m.length = *length;
  verbs::Result<verbs::MrKeys> r = verbs::Result<verbs::MrKeys>::error(EIO);
  d.run([&](sched::Picos) {
    r = lanes_reg_mr(d, *pd, m.addr, *length, iova, access);
    if (r.ok()) o.mrs[r.value().lkey] = std::move(m);
  });
  if (!r.ok()) {
    release_mapping(m);
    return op_fail(r.err(), "reg_mr");
  }
  c.s.mappings += m.maps;
  c.s.mr_bytes += *length;
  return op_ok({{"lkey", r.value().lkey}, {"rkey", r.value().rkey}});
}

json dereg_mr(OpContext& c) {
  DeviceEntry& d = c.dev();
  ClientObjects& o = c.s.objs;
  auto lkey = field_u64(c.req, "lkey");
  auto it = lkey ? o.mrs.find(static_cast<uint32_t>(*lkey)) : o.mrs.end();
  if (it == o.mrs.end()) return op_fail(EINVAL, "dereg_mr: not an MR of this client");
  const uint32_t key = it->first;
  int rc = 0;
  Mapping m;
  d.run([&](sched::Picos) {
    rc = lanes_dereg_mr(d, key);
    if (rc != 0) return;
    m = std::move(it->second);
    o.mrs.erase(it);
  });
  if (rc) return op_fail(rc, "dereg_mr");
  c.s.mappings -= m.maps;
  c.s.mr_bytes -= m.length;
  if (release_mapping(m))
    log(LogLevel::kWarning, "client {} (pid {}): the file behind MR lkey {} shrank while registered; the daemon's "
        "view of the lost pages was zeros", c.s.id, c.s.pid, key);
  return op_ok();
}

json alloc_mw(OpContext& c) {
  DeviceEntry& d = c.dev();
  auto pd = own_handle(c.s.objs.pds, c.req, "pd");
  if (!pd) return op_fail(EINVAL, "alloc_mw: not a PD of this client");
  if (auto e = Control::over("max_mrs", c.s.objs.mws.size(), 1, c.ctl.limits().max_mrs); !e.empty())
    return op_fail(ENOMEM, "alloc_mw: " + e);
  const int type = static_cast<int>(field_u64_or(c.req, "type", IBV_MW_TYPE_2));
  verbs::Result<uint32_t> r = verbs::Result<uint32_t>::error(EIO);
  // With lanes, lane 0's engine holds the port's one table of windows, which
  // every lane's engine uses (transport/engine/windows.h).
  d.run([&](sched::Picos) {
    r = d.engine().alloc_mw(*pd, type);
    if (r.ok()) c.s.objs.mws.insert(r.value() >> 8);
  });
  if (!r.ok()) return op_fail(r.err(), "alloc_mw");
  return op_ok({{"rkey", r.value()}});
}

json dealloc_mw(OpContext& c) {
  DeviceEntry& d = c.dev();
  auto rkey = field_u64(c.req, "rkey");
  if (!rkey || *rkey > 0xffffffffu || !c.s.objs.mws.count(static_cast<uint32_t>(*rkey) >> 8))
    return op_fail(EINVAL, "dealloc_mw: not a memory window of this client");
  int rc = 0;
  d.run([&](sched::Picos) {
    rc = d.engine().dealloc_mw(static_cast<uint32_t>(*rkey));
    if (rc == 0) c.s.objs.mws.erase(static_cast<uint32_t>(*rkey) >> 8);
  });
  if (rc) return op_fail(rc, "dealloc_mw");
  return op_ok();
}

}  // namespace

void register_memory_ops(OpTable& t) {
  t.add({"alloc_mw", alloc_mw, true, "a memory window: pd, type (1 or 2); gives its rkey"});
  t.add({"dealloc_mw", dealloc_mw, true, "rkey (any key of the window)"});
  t.add({"alloc_pd", alloc_pd, true, "a protection domain"});
  t.add({"dealloc_pd", dealloc_pd, true, "pd"});
  t.add({"reg_mr", reg_mr, true,
         "register memory: pd, length, offset, iova, access, one memfd or \"pieces\" (descriptors as SCM_RIGHTS)"});
  t.add({"dereg_mr", dereg_mr, true, "lkey"});
}

}  // namespace isoroce::ctrl
