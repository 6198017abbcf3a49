// The control socket's operations: the verbs a client performs on the device it
// opened (every handle checked against the client's own), and the admin and
// inspection operations. Every engine call runs on the device's worker.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ctrl/daemon.h"
#include "ctrl/fault_guard.h"
#include "ctrl/log.h"
#include "ctrl/protocol.h"
#include "ctrl/wire_json.h"

namespace isoroce::ctrl {
namespace {

json fail(int err, const std::string& what) {
  return {{"ok", false}, {"errno", err}, {"error", what + ": " + std::strerror(err)}};
}
json ok(json extra = json::object()) {
  extra["ok"] = true;
  return extra;
}

// A required unsigned field, or nullopt.
std::optional<uint64_t> u64(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}
uint64_t u64_or(const json& j, const char* key, uint64_t def) { return u64(j, key).value_or(def); }

// The classes a client or an operator may give (not the policy's own "reference").
bool parse_class(const std::string& text, sched::FlowClass* cls) {
  return sched::parse_flow_class(text, cls) && *cls != sched::FlowClass::kReference;
}

// reg_mr's memory: one sealed memfd (the library's remapped pages), or
// "pieces" mapped back to back: memfds of the library's (sealed) and the
// client's own files (not sealed: guarded, see ctrl/fault_guard.h).
constexpr size_t kMaxPieces = 64;
constexpr uint32_t kWriteAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

struct Piece {
  int fd = -1;
  uint64_t offset = 0, length = 0;  // in the file, page-aligned
  bool file = false;
};

bool seal_shrink(int fd) {
  return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0 || (fcntl(fd, F_GET_SEALS) > 0 && (fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK));
}

// Unmaps; true if a file piece faulted (the client shrank the file) meanwhile.
bool release_mapping(Mapping& m) {
  bool faulted = false;
  for (int g : m.guards) faulted |= fault_guard::remove(g);
  m.guards.clear();
  if (m.base != nullptr) munmap(m.base, m.len);
  m.base = nullptr;
  return faulted;
}

int map_mr_memory(const json& req, const std::vector<int>& fds, uint64_t length, uint64_t offset, uint32_t access,
                  Mapping* out, std::string* err) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  auto round_up = [&](uint64_t v) { return (v + page - 1) & ~(page - 1); };
  std::vector<Piece> pieces;
  uint64_t at = 0;  // the region's first byte in the pieces
  if (!req.contains("pieces")) {
    if (fds.size() != 1) return *err = "send the memory as one memfd (SCM_RIGHTS), or \"pieces\"", EINVAL;
    // The client must not be able to shrink the file under us (SIGBUS): seal it.
    if (!seal_shrink(fds[0])) return *err = "the memory must be a memfd made with MFD_ALLOW_SEALING", EINVAL;
    struct stat st{};
    if (fstat(fds[0], &st) != 0 || length > static_cast<uint64_t>(st.st_size) ||
        offset > static_cast<uint64_t>(st.st_size) - length)
      return *err = "offset + length beyond the memfd", EINVAL;
    const uint64_t start = offset & ~(page - 1);
    pieces.push_back({fds[0], start, round_up(offset - start + length), false});
    at = offset - start;
  } else {
    const json& list = req["pieces"];
    if (!list.is_array() || list.empty() || list.size() > kMaxPieces)
      return *err = "\"pieces\" is a list of 1.." + std::to_string(kMaxPieces) + " {fd, offset, length, kind}", EINVAL;
    for (const json& p : list) {
      const uint64_t none = UINT64_MAX;
      const uint64_t idx = p.is_object() ? u64_or(p, "fd", none) : none;
      const uint64_t off = p.is_object() ? u64_or(p, "offset", none) : none;
      const uint64_t len = p.is_object() ? u64_or(p, "length", 0) : 0;
      const std::string kind = p.is_object() && p.contains("kind") && p["kind"].is_string() ? p["kind"].get<std::string>() : "";
      if (idx >= fds.size() || off == none || len == 0 || off % page || len % page || len > (uint64_t{1} << 46) ||
          (kind != "memfd" && kind != "file"))
        return *err = "a piece is {fd: index of a descriptor sent, offset, length: page multiples, kind: memfd or file}",
               EINVAL;
      pieces.push_back({fds[idx], off, len, kind == "file"});
    }
    at = offset;
  }
  uint64_t total = 0;
  for (const Piece& p : pieces) total += p.length;  // at most 64 * 2^46
  if (length > total || at > total - length) return *err = "offset + length beyond the pieces", EINVAL;
  for (const Piece& p : pieces) {
    struct stat st{};
    if (fstat(p.fd, &st) != 0) return *err = "a piece's descriptor", EBADF;
    if (!p.file && !seal_shrink(p.fd)) return *err = "a memfd piece must be a memfd made with MFD_ALLOW_SEALING", EINVAL;
    if (p.file && !S_ISREG(st.st_mode))
      return *err = "a file piece must be a regular file (a file, /dev/shm object or memfd)", EINVAL;
    const uint64_t end = round_up(static_cast<uint64_t>(st.st_size));
    if (p.offset > end || p.length > end - p.offset)
      return *err = "a piece reaches past the end of its file", p.file ? EFAULT : EINVAL;
  }
  void* base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return *err = std::string("mmap: ") + std::strerror(errno), errno;
  out->base = base;
  out->len = total;
  uint64_t pos = 0;
  for (const Piece& p : pieces) {
    // A client's file is mapped as the MR needs it: a read-only descriptor
    // with write access fails here (EACCES).
    const int prot = !p.file || (access & kWriteAccess) ? PROT_READ | PROT_WRITE : PROT_READ;
    void* where = static_cast<uint8_t*>(base) + pos;
    if (mmap(where, p.length, prot, MAP_SHARED | MAP_FIXED, p.fd, static_cast<off_t>(p.offset)) == MAP_FAILED) {
      const int rc = errno;
      release_mapping(*out);
      return *err = std::string("mmap of a ") + (p.file ? "file" : "memfd") + " piece: " + std::strerror(rc), rc;
    }
    if (p.file) {
      const int g = fault_guard::add(where, p.length);
      if (g < 0) {
        release_mapping(*out);
        return *err = "too many registrations of files at once", ENOMEM;
      }
      out->guards.push_back(g);
    }
    pos += p.length;
  }
  out->addr = static_cast<uint8_t*>(base) + at;
  return 0;
}

// Justitia's application of a client connection (its session id; 0: none known).
uint32_t app_id(uint64_t session) {
  return session == 0 ? sched::kOwnApp : static_cast<uint32_t>(session % 0xffff'fff0u);
}

}  // namespace

json Daemon::handle(Session& s, const json& req, std::vector<int>& fds) {
  const std::string op = req["op"].get<std::string>();
  if (op == "hello") return ok({{"version", kProtocolVersion}, {"pid", getpid()}, {"client", s.id}});
  if (op == "status") return ok({{"status", status_view()}});
  if (op == "devices") return ok({{"devices", devices_view()}});
  if (op == "qps") return ok({{"qps", qps_view()}});
  if (op == "stats") return ok({{"stats", stats_view()}});
  if (op == "sched") return ok({{"sched", sched_view()}});
  if (op == "qp") {
    auto qpn = u64(req, "qpn");
    if (!qpn) return fail(EINVAL, "qp: \"qpn\" missing");
    auto v = qp_view(static_cast<uint32_t>(*qpn));
    if (!v) return fail(ENOENT, "qp: no QP " + std::to_string(*qpn) + " on any device");
    return ok({{"qp", *v}});
  }
  if (op == "set_rate" || op == "set_class" || op == "set_policy" || op == "set_dcqcn" || op == "set_justitia")
    return admin_op(s, op, req);
  if (op == "get_async_events") {
    // This connection's events (ibv_get_async_event), oldest first, taken.
    drain_async_events();
    json list = json::array();
    for (json& e : s.async_events) list.push_back(std::move(e));
    s.async_events.clear();
    return ok({{"events", list}});
  }
  return verbs_op(s, op, req, fds);
}

json Daemon::reconfigure_op(const std::string& op, const json& req) {
  // Settings the engine takes at creation: a new engine for an unused device.
  const std::string name = req.value("device", "");
  DeviceEntry* d = find_device(name);
  if (d == nullptr) return fail(ENODEV, op + ": device '" + name + "'");
  if (d->sessions != 0)
    return fail(EBUSY, op + " " + name + ": " + std::to_string(d->sessions) +
                           " client(s) have it open; change it while it is unused");
  dataplane::DeviceConfig c = d->dev->config();
  if (op == "set_policy") {
    if (!sched::parse_policy(req.value("policy", ""), &c.policy))
      return fail(EINVAL, "set_policy: policy '" + req.value("policy", "") + "' (fifo, tassel, justitia)");
  } else {
    const bool dc = op == "set_dcqcn";
    const json& params = req.contains("params") ? req["params"] : json::array();
    if (!params.is_array() || params.empty())
      return fail(EINVAL, op + ": \"params\" is a list of NAME=VALUE (" +
                              (dc ? "docs/dcqcn.md" : "docs/isoroced.md") + ")");
    for (const json& kv : params) {
      if (!kv.is_string()) return fail(EINVAL, op + ": each parameter is a \"NAME=VALUE\" string");
      const std::string e = dc ? dcqcn::set_param(c.dcqcn, kv.get<std::string>())
                               : set_justitia_param(c.justitia, kv.get<std::string>());
      if (!e.empty()) return fail(EINVAL, op + ": " + e);
    }
    const std::string e = dc ? dcqcn::validate(c.dcqcn) : std::string(sched::validate(c.justitia));
    if (!e.empty()) return fail(EINVAL, op + ": " + e);
  }
  if (c.dcqcn.enabled && c.policy == sched::Policy::kFifo)
    return fail(EINVAL, op + " " + name + ": DCQCN needs a rate-limiting policy (tassel or justitia), not fifo");
  // Reference flows with an end in this engine go first (the engine must have no
  // QPs), and start again afterwards on whichever devices run justitia.
  std::vector<DeviceEntry*> restart = stop_reference_flows(*d);
  if (std::find(restart.begin(), restart.end(), d) == restart.end()) restart.push_back(d);
  std::string error;
  bool busy = false;
  d->worker->call([&](sched::Picos) {
    busy = !d->dev->reconfigure(c, &error);
    if (busy) return;
    // The pump drives the engine that was replaced: a new one for the new engine.
    d->dev->remove_hook(d->pump.get());
    d->pump = std::make_unique<ShmPump>(d->dev->engine());
    d->dev->add_hook(d->pump.get());
  });
  for (DeviceEntry* e : restart) start_reference_flow(*e);
  if (busy) return fail(EBUSY, op + " " + name + ": " + error);
  json state = {{"policy", sched::to_string(c.policy)}, {"dcqcn", c.dcqcn.enabled}};
  if (c.policy == sched::Policy::kJustitia) {
    json params = json::object();
    for (const auto& [k, v] : justitia_param_values(c.justitia)) params[k] = v;
    state["justitia"] = params;
    if (!d->ref_note.empty()) state["reference_flow"] = d->ref_note;
  }
  log(LogLevel::kInfo, "{}: {}", name, state.dump());
  return ok(state);
}

json Daemon::admin_op(Session&, const std::string& op, const json& req) {
  if (op == "set_policy" || op == "set_dcqcn" || op == "set_justitia") return reconfigure_op(op, req);
  auto qpn = u64(req, "qpn");
  if (!qpn) return fail(EINVAL, op + ": \"qpn\" missing");
  if (*qpn == ReferenceEcho::kQpn)
    return fail(EPERM, op + ": QP " + std::to_string(*qpn) + " is every device's reference echo (the daemon's own)");
  DeviceEntry* d = find_qp(static_cast<uint32_t>(*qpn));
  if (d == nullptr) return fail(ENOENT, op + ": no QP " + std::to_string(*qpn) + " on any device");
  if (op == "set_rate") {
    auto bps = u64(req, "bps");
    if (!bps) return fail(EINVAL, "set_rate: \"bps\" missing (0 removes the limit)");
    int rc = 0;
    d->worker->call([&](sched::Picos now) {
      rc = d->dev->engine().set_qp_rate(now, wire::Qpn(static_cast<uint32_t>(*qpn)), *bps);
    });
    if (rc != 0) return fail(rc, "set_rate");
    return ok({{"qpn", *qpn}, {"bps", *bps}});
  }
  const std::string cls = req.value("class", "");
  sched::FlowClass fc;
  if (!parse_class(cls, &fc)) return fail(EINVAL, "set_class: class '" + cls + "' (latency, throughput, bandwidth)");
  uint64_t app = 0;
  {
    std::lock_guard lock(registry_mu_);
    auto it = qp_info_.find({d, static_cast<uint32_t>(*qpn)});
    if (it != qp_info_.end() && it->second.cls == "reference")
      return fail(EPERM, "set_class: QP " + std::to_string(*qpn) + " is the justitia reference flow's");
    if (it != qp_info_.end()) app = it->second.app;
  }
  int rc = 0;
  d->worker->call([&](sched::Picos now) {
    rc = d->dev->engine().set_qp_class(now, wire::Qpn(static_cast<uint32_t>(*qpn)), fc, app_id(app), 1);
  });
  if (rc != 0) return fail(rc, "set_class");
  std::lock_guard lock(registry_mu_);
  qp_info_[{d, static_cast<uint32_t>(*qpn)}].cls = cls;
  return ok({{"qpn", *qpn}, {"class", cls}, {"app", app}});
}

json Daemon::verbs_op(Session& s, const std::string& op, const json& req, std::vector<int>& fds) {
  if (op == "open") {
    if (s.dev != nullptr) return fail(EBUSY, "open: this connection has a device open already");
    DeviceEntry* d = find_device(req.value("device", ""));
    if (d == nullptr) return fail(ENODEV, "open: device '" + req.value("device", "") + "'");
    if (req.value("async_events", false)) {
      // ibv_get_async_event blocks on this (the library's async_fd): blocking,
      // so the flags the application sets on its copy stay its own choice.
      s.async_eventfd = eventfd(0, EFD_CLOEXEC);
      if (s.async_eventfd < 0) return fail(errno, std::string("open: eventfd: ") + std::strerror(errno));
      s.reply_fds.push_back(dup(s.async_eventfd));
    }
    s.dev = d;
    ++d->sessions;
    for (const json& v : devices_view())
      if (v["name"] == d->dev->config().name) return ok({{"device", v}});
    return ok();
  }
  if (s.dev == nullptr) {
    if (op.empty()) return fail(EINVAL, "empty op");
    return fail(op == "alloc_pd" || op.find('_') != std::string::npos ? ENODEV : EOPNOTSUPP,
                "'" + op + "': open a device first, or unknown operation");
  }
  DeviceEntry& d = *s.dev;
  transport::Engine& e = d.dev->engine();
  auto run = [&](auto&& fn) { d.worker->call([&](sched::Picos now) { fn(now); }); };
  auto mine = [](const std::set<uint32_t>& set, const json& j, const char* key) -> std::optional<uint32_t> {
    auto v = j.find(key);
    if (v == j.end() || !v->is_number_unsigned()) return std::nullopt;
    const auto h = v->get<uint64_t>();
    if (h > UINT32_MAX || !set.count(static_cast<uint32_t>(h))) return std::nullopt;
    return static_cast<uint32_t>(h);
  };

  if (op == "alloc_pd") {
    verbs::Result<transport::PdHandle> r = verbs::Result<transport::PdHandle>::error(EIO);
    run([&](sched::Picos) { r = e.alloc_pd(); });
    if (!r.ok()) return fail(r.err(), "alloc_pd");
    s.pds.insert(r.value());
    return ok({{"pd", r.value()}});
  }
  if (op == "dealloc_pd") {
    auto pd = mine(s.pds, req, "pd");
    if (!pd) return fail(EINVAL, "dealloc_pd: not a PD of this client");
    int rc = 0;
    run([&](sched::Picos) { rc = e.dealloc_pd(*pd); });
    if (rc) return fail(rc, "dealloc_pd");
    s.pds.erase(*pd);
    return ok();
  }
  if (op == "reg_mr") {
    auto pd = mine(s.pds, req, "pd");
    auto length = u64(req, "length");
    const uint64_t offset = u64_or(req, "offset", 0);
    const uint64_t iova = u64_or(req, "iova", 0);
    const uint32_t access = static_cast<uint32_t>(u64_or(req, "access", 0));
    if (!pd) return fail(EINVAL, "reg_mr: not a PD of this client");
    if (!length || *length == 0) return fail(EINVAL, "reg_mr: \"length\" must be positive");
    Mapping m;
    std::string err;
    if (int rc = map_mr_memory(req, fds, *length, offset, access, &m, &err)) return fail(rc, "reg_mr: " + err);
    verbs::Result<verbs::MrKeys> r = verbs::Result<verbs::MrKeys>::error(EIO);
    run([&](sched::Picos) { r = e.reg_mr(*pd, m.addr, *length, iova, access); });
    if (!r.ok()) {
      release_mapping(m);
      return fail(r.err(), "reg_mr");
    }
    m.iova = iova;
    m.length = *length;
    s.mrs[r.value().lkey] = std::move(m);
    return ok({{"lkey", r.value().lkey}, {"rkey", r.value().rkey}});
  }
  if (op == "dereg_mr") {
    auto lkey = u64(req, "lkey");
    auto it = lkey ? s.mrs.find(static_cast<uint32_t>(*lkey)) : s.mrs.end();
    if (it == s.mrs.end()) return fail(EINVAL, "dereg_mr: not an MR of this client");
    int rc = 0;
    run([&](sched::Picos) { rc = e.dereg_mr(it->first); });
    if (rc) return fail(rc, "dereg_mr");
    if (release_mapping(it->second))
      log(LogLevel::kWarning, "client {} (pid {}): the file behind MR lkey {} shrank while registered; the daemon's "
          "view of the lost pages was zeros", s.id, s.pid, it->first);
    s.mrs.erase(it);
    return ok();
  }
  if (op == "create_cq") {
    const int cqe = static_cast<int>(std::min<uint64_t>(u64_or(req, "cqe", 0), INT32_MAX));
    verbs::Result<transport::CqHandle> r = verbs::Result<transport::CqHandle>::error(EIO);
    run([&](sched::Picos) { r = e.create_cq(cqe); });
    if (!r.ok()) return fail(r.err(), "create_cq");
    s.cqs.insert(r.value());
    if (!req.value("shm", false)) return ok({{"cq", r.value()}});
    // The CQ ring (ctrl/shm_abi.h) and, for completion events, an eventfd the
    // daemon makes non-blocking (a client's own could block the worker).
    std::string err;
    auto ring = ShmQueue::create(static_cast<uint32_t>(std::max(cqe, 1)), sizeof(ib_uverbs_wc), true, &err);
    int evfd = -1;
    if (ring && req.value("events", false)) {
      evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (evfd < 0) err = std::string("eventfd: ") + std::strerror(errno), ring.reset();
    }
    if (!ring) {
      run([&](sched::Picos) { e.destroy_cq(r.value()); });
      s.cqs.erase(r.value());
      return fail(ENOMEM, "create_cq: " + err);
    }
    run([&](sched::Picos) { d.pump->add_cq(r.value(), ring.get(), evfd); });
    s.reply_fds.push_back(dup(ring->fd()));
    ring->close_fd();
    if (evfd >= 0) {
      s.reply_fds.push_back(dup(evfd));
      s.cq_eventfds[r.value()] = evfd;
    }
    json reply = {{"cq", r.value()}, {"log2_entries", ring->log2_entries()}, {"log2_elem", ring->log2_elem()}};
    s.cq_rings[r.value()] = std::move(ring);
    return ok(reply);
  }
  if (op == "destroy_cq") {
    auto cq = mine(s.cqs, req, "cq");
    if (!cq) return fail(EINVAL, "destroy_cq: not a CQ of this client");
    int rc = 0;
    run([&](sched::Picos) {
      rc = e.destroy_cq(*cq);
      if (rc == 0) d.pump->remove_cq(*cq);
    });
    if (rc) return fail(rc, "destroy_cq");
    s.cqs.erase(*cq);
    s.cq_rings.erase(*cq);
    if (auto it = s.cq_eventfds.find(*cq); it != s.cq_eventfds.end()) {
      close(it->second);
      s.cq_eventfds.erase(it);
    }
    return ok();
  }
  if (op == "resize_cq") {
    // A new ring of the new size, the unconsumed completions moved into it and
    // swapped into the pump on the worker, so the pump never writes between
    // the count, the copy and the swap. The client keeps polling its old ring
    // until the reply (the library holds the CQ's lock meanwhile).
    auto cq = mine(s.cqs, req, "cq");
    if (!cq) return fail(EINVAL, "resize_cq: not a CQ of this client");
    auto cqe = u64(req, "cqe");
    // The device's limits are fixed while the engine lives (no ring for nothing).
    const uint32_t max_cqe = e.config().device.max_cqe;
    if (!cqe || *cqe == 0 || *cqe > max_cqe)
      return fail(EINVAL, "resize_cq: \"cqe\" must be 1.." + std::to_string(max_cqe));
    auto old = s.cq_rings.find(*cq);
    std::unique_ptr<ShmQueue> ring;
    if (old != s.cq_rings.end()) {
      std::string err;
      ring = ShmQueue::create(static_cast<uint32_t>(*cqe), sizeof(ib_uverbs_wc), true, &err);
      if (!ring) return fail(ENOMEM, "resize_cq: " + err);
    }
    int rc = 0;
    uint32_t outstanding = 0;
    run([&](sched::Picos) {
      outstanding = ring ? d.pump->cq_ring_count(*cq) : 0;
      rc = e.resize_cq(*cq, static_cast<int>(*cqe), outstanding);
      if (rc == 0 && ring) rc = d.pump->replace_cq(*cq, ring.get());  // cannot fail: checked above
    });
    if (rc)
      return fail(rc, "resize_cq: cqe " + std::to_string(*cqe) + " is below the completions not polled yet (" +
                          std::to_string(outstanding) + " of them in the ring)");
    if (!ring) return ok({{"cq", *cq}});
    s.reply_fds.push_back(dup(ring->fd()));
    ring->close_fd();
    json reply = {{"cq", *cq}, {"log2_entries", ring->log2_entries()}, {"log2_elem", ring->log2_elem()}};
    old->second = std::move(ring);  // the old ring is unmapped here; the client still has its own mapping
    return ok(reply);
  }
  if (op == "poll_cq") {
    auto cq = mine(s.cqs, req, "cq");
    if (!cq) return fail(EINVAL, "poll_cq: not a CQ of this client");
    std::vector<ibv_wc> wc(std::clamp<uint64_t>(u64_or(req, "max", 16), 1, 1024));
    int n = 0;
    run([&](sched::Picos) { n = e.poll_cq(*cq, wc); });
    if (n < 0) return fail(-n, "poll_cq");
    json list = json::array();
    for (int i = 0; i < n; ++i) list.push_back(wc_to_json(wc[static_cast<size_t>(i)]));
    return ok({{"wc", list}});
  }
  if (op == "create_srq") {
    auto pd = mine(s.pds, req, "pd");
    if (!pd) return fail(EINVAL, "create_srq: not a PD of this client");
    ibv_srq_attr a{};
    a.max_wr = static_cast<uint32_t>(u64_or(req, "max_wr", 0));
    a.max_sge = static_cast<uint32_t>(u64_or(req, "max_sge", 1));
    a.srq_limit = static_cast<uint32_t>(u64_or(req, "srq_limit", 0));
    verbs::Result<transport::SrqHandle> r = verbs::Result<transport::SrqHandle>::error(EIO);
    run([&](sched::Picos) { r = e.create_srq(*pd, a); });
    if (!r.ok()) return fail(r.err(), "create_srq");
    s.srqs.insert(r.value());
    if (!req.value("shm", false)) return ok({{"srq", r.value()}});
    std::string err;
    auto ring = ShmQueue::create(std::max(a.max_wr, 1u), shm::recv_wqe_bytes(a.max_sge), false, &err);
    if (!ring) {
      run([&](sched::Picos) { e.destroy_srq(r.value()); });
      s.srqs.erase(r.value());
      return fail(ENOMEM, "create_srq: " + err);
    }
    run([&](sched::Picos) { d.pump->add_srq(r.value(), ring.get(), a.max_sge); });
    s.reply_fds.push_back(dup(ring->fd()));
    ring->close_fd();
    json reply = {{"srq", r.value()}, {"rq", {{"log2_entries", ring->log2_entries()}, {"log2_elem", ring->log2_elem()}}}};
    s.srq_rings[r.value()] = std::move(ring);
    return ok(reply);
  }
  if (op == "modify_srq") {
    auto srq = mine(s.srqs, req, "srq");
    if (!srq) return fail(EINVAL, "modify_srq: not an SRQ of this client");
    ibv_srq_attr a{};
    uint32_t mask = 0;
    if (auto v = u64(req, "max_wr")) a.max_wr = static_cast<uint32_t>(*v), mask |= IBV_SRQ_MAX_WR;
    if (auto v = u64(req, "srq_limit")) a.srq_limit = static_cast<uint32_t>(*v), mask |= IBV_SRQ_LIMIT;
    int rc = 0;
    run([&](sched::Picos) { rc = e.modify_srq(*srq, a, mask); });
    return rc ? fail(rc, "modify_srq") : ok();
  }
  if (op == "destroy_srq") {
    auto srq = mine(s.srqs, req, "srq");
    if (!srq) return fail(EINVAL, "destroy_srq: not an SRQ of this client");
    int rc = 0;
    run([&](sched::Picos) {
      rc = e.destroy_srq(*srq);
      if (rc == 0) d.pump->remove_srq(*srq);
    });
    if (rc) return fail(rc, "destroy_srq");
    s.srqs.erase(*srq);
    s.srq_rings.erase(*srq);
    return ok();
  }
  if (op == "create_ah") {
    auto pd = mine(s.pds, req, "pd");
    if (!pd) return fail(EINVAL, "create_ah: not a PD of this client");
    transport::AhAttr a;
    std::string err;
    if (!ah_from_json(req, &a, &err)) return fail(EINVAL, "create_ah: " + err);
    if (!resolve_neighbor(d, a.dgid)) return fail(EHOSTUNREACH, "create_ah: no ARP/ND answer from " + req.value("dgid", ""));
    verbs::Result<transport::AhHandle> r = verbs::Result<transport::AhHandle>::error(EIO);
    run([&](sched::Picos) { r = e.create_ah(*pd, a); });
    if (!r.ok()) return fail(r.err(), "create_ah");
    s.ahs.insert(r.value());
    return ok({{"ah", r.value()}});
  }
  if (op == "destroy_ah") {
    auto ah = mine(s.ahs, req, "ah");
    if (!ah) return fail(EINVAL, "destroy_ah: not an AH of this client");
    int rc = 0;
    run([&](sched::Picos) { rc = e.destroy_ah(*ah); });
    if (rc) return fail(rc, "destroy_ah");
    s.ahs.erase(*ah);
    return ok();
  }
  if (op == "create_qp") {
    transport::QpCreate c;
    auto pd = mine(s.pds, req, "pd");
    auto scq = mine(s.cqs, req, "send_cq");
    auto rcq = mine(s.cqs, req, "recv_cq");
    if (!pd || !scq || !rcq) return fail(EINVAL, "create_qp: pd, send_cq and recv_cq must be this client's");
    c.pd = *pd;
    c.send_cq = *scq;
    c.recv_cq = *rcq;
    if (req.contains("srq")) {
      auto srq = mine(s.srqs, req, "srq");
      if (!srq) return fail(EINVAL, "create_qp: not an SRQ of this client");
      c.use_srq = true;
      c.srq = *srq;
    }
    const std::string type = req.value("type", "rc");
    if (type != "rc" && type != "ud") return fail(EOPNOTSUPP, "create_qp: type '" + type + "' (rc, ud)");
    c.init.qp_type = type == "rc" ? IBV_QPT_RC : IBV_QPT_UD;
    c.init.cap.max_send_wr = static_cast<uint32_t>(u64_or(req, "max_send_wr", 16));
    c.init.cap.max_recv_wr = static_cast<uint32_t>(u64_or(req, "max_recv_wr", 16));
    c.init.cap.max_send_sge = static_cast<uint32_t>(u64_or(req, "max_send_sge", 1));
    c.init.cap.max_recv_sge = static_cast<uint32_t>(u64_or(req, "max_recv_sge", 1));
    c.init.cap.max_inline_data = static_cast<uint32_t>(u64_or(req, "max_inline_data", 0));
    c.init.sq_sig_all = req.value("sq_sig_all", false);
    // Class: this field, else the default (bandwidth); set_class changes it later.
    std::string cls = "bandwidth";
    if (req.contains("class")) {
      if (!req["class"].is_string()) return fail(EINVAL, "create_qp: \"class\" is latency, throughput or bandwidth");
      cls = req["class"].get<std::string>();
    }
    sched::FlowClass fc;
    if (!parse_class(cls, &fc)) return fail(EINVAL, "create_qp: class '" + cls + "' (latency, throughput, bandwidth)");
    verbs::Result<wire::Qpn> r = verbs::Result<wire::Qpn>::error(EIO);
    int class_rc = 0;
    run([&](sched::Picos now) {
      r = e.create_qp(c);
      if (r.ok()) class_rc = e.set_qp_class(now, r.value(), fc, app_id(s.id), 1);
    });
    if (!r.ok()) return fail(r.err(), "create_qp");
    if (class_rc != 0) {
      run([&](sched::Picos) { e.destroy_qp(r.value()); });
      return fail(class_rc, "create_qp: set_qp_class");
    }
    const uint32_t qpn = r.value().value();
    s.qps.insert(qpn);
    {
      std::lock_guard lock(registry_mu_);
      QpInfo& info = qp_info_[{&d, qpn}];
      info.client = s.id;
      info.pid = s.pid;
      info.comm = s.comm;
      info.cls = cls;
      info.app = s.id;
    }
    if (!req.value("shm", false)) return ok({{"qpn", qpn}});
    // The QP's rings: SQ, and RQ unless it uses an SRQ.
    const ibv_qp_cap& cap = c.init.cap;
    std::string err;
    auto sq = ShmQueue::create(std::max(cap.max_send_wr, 1u), shm::send_wqe_bytes(cap.max_send_sge, cap.max_inline_data),
                               false, &err);
    std::unique_ptr<ShmQueue> rq;
    if (sq && !c.use_srq) rq = ShmQueue::create(std::max(cap.max_recv_wr, 1u), shm::recv_wqe_bytes(cap.max_recv_sge), false, &err);
    if (!sq || (!c.use_srq && !rq)) {
      run([&](sched::Picos) { e.destroy_qp(r.value()); });
      s.qps.erase(qpn);
      std::lock_guard lock(registry_mu_);
      qp_info_.erase({&d, qpn});
      return fail(ENOMEM, "create_qp: " + err);
    }
    run([&](sched::Picos) {
      d.pump->add_sq(qpn, sq.get(), cap.max_send_sge, cap.max_inline_data);
      if (rq) d.pump->add_rq(qpn, rq.get(), cap.max_recv_sge);
    });
    json reply = {{"qpn", qpn}, {"sq", {{"log2_entries", sq->log2_entries()}, {"log2_elem", sq->log2_elem()}}}};
    s.reply_fds.push_back(dup(sq->fd()));
    sq->close_fd();
    if (rq) {
      reply["rq"] = {{"log2_entries", rq->log2_entries()}, {"log2_elem", rq->log2_elem()}};
      s.reply_fds.push_back(dup(rq->fd()));
      rq->close_fd();
    }
    s.qp_rings[qpn] = {std::move(sq), std::move(rq)};
    return ok(reply);
  }
  auto qp = mine(s.qps, req, "qpn");
  if (op == "modify_qp") {
    if (!qp) return fail(EINVAL, "modify_qp: not a QP of this client");
    ibv_qp_attr a{};
    uint32_t mask = 0;
    std::string err;
    if (!qp_attr_from_json(req.value("attr", json::object()), &a, &mask, &err))
      return fail(EINVAL, "modify_qp: " + err);
    if ((mask & IBV_QP_AV)) {
      wire::IpAddr gid;
      std::memcpy(gid.data(), a.ah_attr.grh.dgid.raw, 16);
      if (!resolve_neighbor(d, gid)) return fail(EHOSTUNREACH, "modify_qp: no ARP/ND answer from the destination GID");
    }
    int rc = 0;
    run([&](sched::Picos) { rc = e.modify_qp(wire::Qpn(*qp), a, mask); });
    return rc ? fail(rc, "modify_qp") : ok();
  }
  if (op == "query_qp") {
    if (!qp) return fail(EINVAL, "query_qp: not a QP of this client");
    json out;
    run([&](sched::Picos) {
      if (const verbs::Qp* q = e.query_qp(wire::Qpn(*qp))) out = qp_attr_to_json(q->attr());
    });
    return ok({{"attr", out}});
  }
  if (op == "destroy_qp") {
    if (!qp) return fail(EINVAL, "destroy_qp: not a QP of this client");
    int rc = 0;
    run([&](sched::Picos) {
      rc = e.destroy_qp(wire::Qpn(*qp));
      if (rc == 0) d.pump->remove_qp(*qp);
    });
    if (rc) return fail(rc, "destroy_qp");
    s.qps.erase(*qp);
    s.qp_rings.erase(*qp);
    std::lock_guard lock(registry_mu_);
    qp_info_.erase({&d, *qp});
    return ok();
  }
  if (op == "post_send" || op == "post_recv" || op == "post_srq_recv") {
    std::optional<uint32_t> srq;
    if (op == "post_srq_recv") {
      srq = mine(s.srqs, req, "srq");
      if (!srq) return fail(EINVAL, "post_srq_recv: not an SRQ of this client");
    } else if (!qp) {
      return fail(EINVAL, op + ": not a QP of this client");
    }
    const json& wr = req.value("wr", json::object());
    std::vector<transport::Sge> sges;
    std::string err;
    if (!sges_from_json(wr, &sges, &err)) return fail(EINVAL, op + ": " + err);
    int rc = 0;
    if (op == "post_send") {
      transport::SendWr w;
      if (!send_wr_from_json(wr, &w, &err)) return fail(EINVAL, "post_send: " + err);
      if (w.ah != 0 && !s.ahs.count(w.ah)) return fail(EINVAL, "post_send: not an AH of this client");
      if (w.send_flags & IBV_SEND_INLINE) {
        // The engine copies inline data from a pointer in this process: the
        // client's addresses must name its own registered memory (lkey, bounds),
        // translated here to the daemon's mapping of it.
        for (transport::Sge& g : sges) {
          auto m = s.mrs.find(g.lkey);
          if (m == s.mrs.end() || g.addr < m->second.iova || g.length > m->second.length ||
              g.addr - m->second.iova > m->second.length - g.length)
            return fail(EINVAL, "post_send: an inline SGE must lie in one of this client's MRs (lkey and bounds)");
          g.addr = reinterpret_cast<uint64_t>(m->second.addr + (g.addr - m->second.iova));
        }
      }
      w.sg_list = sges;
      run([&](sched::Picos now) { rc = e.post_send(now, wire::Qpn(*qp), w); });
    } else {
      transport::RecvWr w;
      w.wr_id = u64_or(wr, "wr_id", 0);
      w.sg_list = sges;
      if (srq) {
        run([&](sched::Picos) { rc = e.post_srq_recv(*srq, w); });
      } else {
        run([&](sched::Picos) { rc = e.post_recv(wire::Qpn(*qp), w); });
      }
    }
    return rc ? fail(rc, op) : ok();
  }
  return fail(EOPNOTSUPP, "unknown operation '" + op + "'");
}

void Daemon::reclaim(Session& s) {
  if (s.dev != nullptr) {
    DeviceEntry& d = *s.dev;
    transport::Engine& e = d.dev->engine();
    // QPs first (they stop touching memory), then what they used.
    d.worker->call([&](sched::Picos) {
      for (uint32_t q : s.qps) d.pump->remove_qp(q);
      for (uint32_t h : s.srqs) d.pump->remove_srq(h);
      for (uint32_t h : s.cqs) d.pump->remove_cq(h);
      for (uint32_t q : s.qps) e.destroy_qp(wire::Qpn(q));
      for (uint32_t h : s.srqs) e.destroy_srq(h);
      for (uint32_t h : s.ahs) e.destroy_ah(h);
      for (uint32_t h : s.cqs) e.destroy_cq(h);
      for (const auto& [lkey, m] : s.mrs) e.dereg_mr(lkey);
      for (uint32_t h : s.pds) e.dealloc_pd(h);
    });
    for (auto& [lkey, m] : s.mrs) release_mapping(m);
    {
      std::lock_guard lock(registry_mu_);
      for (uint32_t q : s.qps) qp_info_.erase({&d, q});
    }
    if (!s.qps.empty() || !s.mrs.empty())
      log(LogLevel::kInfo, "client {} (pid {}, {}) gone: reclaimed {} QP(s), {} MR(s), {} CQ(s), {} PD(s)",
          s.id, s.pid, s.comm, s.qps.size(), s.mrs.size(), s.cqs.size(), s.pds.size());
    --d.sessions;
  }
  for (const auto& [cq, fd] : s.cq_eventfds) close(fd);
  s.cq_eventfds.clear();
  if (s.async_eventfd >= 0) close(s.async_eventfd);
  s.async_eventfd = -1;
  s.qp_rings.clear();
  s.srq_rings.clear();
  s.cq_rings.clear();
  s.qps.clear();
  s.srqs.clear();
  s.ahs.clear();
  s.cqs.clear();
  s.mrs.clear();
  s.pds.clear();
  s.dev = nullptr;
}

}  // namespace isoroce::ctrl
