// Live tracing (ctrl/trace_session.h, `isoroce-ctl trace`): trace_start hands
// the client a memfd that the daemon fills with trace::Records while the trace
// runs; trace_stop ends it (or collects one that reached its deadline) and
// reports what was recorded, dropped and truncated; trace_status looks.
// Privileged: a trace shows every client's QPs and costs the workers time.
#include <cerrno>

#include "ctrl/control.h"

namespace isoroce::ctrl {
namespace {

// The request's options; "" or what is wrong with them.
std::string parse_options(const json& req, TraceOptions* o) {
  if (auto it = req.find("seconds"); it != req.end()) {
    if (!it->is_number()) return "\"seconds\" is a number";
    o->seconds = it->get<double>();
  }
  if (auto it = req.find("events"); it != req.end()) {
    if (!it->is_string()) return "\"events\" is a comma-separated string of event names";
    std::string error;
    if (!trace::parse_events(it->get<std::string>(), &o->mask, &error)) return error;
  }
  if (auto q = field_u64(req, "qp")) {
    if (*q > 0xffffff) return "\"qp\" is a 24-bit QPN";
    o->qp = static_cast<uint32_t>(*q);
  }
  if (auto it = req.find("device"); it != req.end()) {
    if (!it->is_string()) return "\"device\" is a device name";
    o->device = it->get<std::string>();
  }
  o->ring_records = field_u64_or(req, "ring_records", o->ring_records);
  o->max_records = field_u64_or(req, "max_records", o->max_records);
  return {};
}

json trace_start(OpContext& c) {
  std::unique_ptr<TraceSession>& cur = c.ctl.trace();
  if (cur && cur->active())
    return op_fail(EBUSY, "trace_start: a trace is running (client " + std::to_string(cur->owner()) +
                              "; one at a time)");
  TraceOptions opt;
  if (std::string e = parse_options(c.req, &opt); !e.empty()) return op_fail(EINVAL, "trace_start: " + e);
  std::string error;
  int err = 0;
  // A QP without a device: the device that has it (QPNs repeat across devices: a bare
  // QPN two devices have is refused, as by every op that names a QP). A QPN no device
  // has yet is traced on every device, for a QP about to be created.
  if (opt.qp != 0 && opt.device.empty()) {
    if (DeviceEntry* d = c.ctl.find_qp(opt.qp, "", &err, &error)) opt.device = d->name();
    else if (err == EINVAL) return op_fail(EINVAL, "trace_start: " + error);
    err = 0;
    error.clear();
  }
  // A finished trace nobody collected gives way (its owner keeps its memfd).
  cur.reset();
  cur = TraceSession::start(c.ctl, c.s.id, opt, TraceSession::Clock::now(), &error, &err);
  if (!cur) return op_fail(err, "trace_start: " + error);
  const int fd = cur->dup_fd();
  if (fd < 0) {
    cur.reset();
    return op_fail(errno, "trace_start: dup");
  }
  c.s.reply_fds.push_back(fd);
  return op_ok(cur->summary());
}

json trace_stop(OpContext& c) {
  std::unique_ptr<TraceSession>& cur = c.ctl.trace();
  if (!cur) return op_fail(ENOENT, "trace_stop: no trace");
  if (cur->owner() != c.s.id)
    return op_fail(EPERM, "trace_stop: the trace belongs to client " + std::to_string(cur->owner()));
  cur->finish();
  json r = cur->summary();
  cur.reset();
  return op_ok(r);
}

json trace_status(OpContext& c) {
  std::unique_ptr<TraceSession>& cur = c.ctl.trace();
  if (!cur) return op_ok({{"active", false}});
  json r = cur->summary();
  r["owner"] = cur->owner();
  return op_ok(r);
}

}  // namespace

void register_trace_ops(OpTable& t) {
  t.add({"trace_start", trace_start, false,
         "start the live trace (one at a time): seconds, events (names, comma-separated), qp, device, "
         "ring_records, max_records; a memfd of trace records is returned",
         true});
  t.add({"trace_stop", trace_stop, false, "end this client's trace: records, dropped (ring full), truncated", true});
  t.add({"trace_status", trace_status, false, "the live trace, if any: records so far, dropped, owner", true});
}

}  // namespace isoroce::ctrl
