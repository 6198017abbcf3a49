#include "ctrl/trace_session.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "ctrl/control.h"
#include "ctrl/log.h"

namespace isoroce::ctrl {
namespace {

std::string check(const TraceOptions& o) {
  if (!(o.seconds > 0) || o.seconds > kMaxTraceSeconds)
    return "\"seconds\" must be in (0, " + std::to_string(static_cast<int>(kMaxTraceSeconds)) + "]";
  if (o.mask == 0 || (o.mask & ~trace::kAllEvents) != 0) return "\"events\" names no known event";
  if (o.ring_records < 2 || o.ring_records > kMaxTraceRingRecords)
    return "\"ring_records\" must be in [2, " + std::to_string(kMaxTraceRingRecords) + "]";
  if (o.max_records == 0 || o.max_records > kMaxTraceRecords)
    return "\"max_records\" must be in [1, " + std::to_string(kMaxTraceRecords) + "]";
  return {};
}

json event_names(trace::EventMask mask) {
  json names = json::array();
  for (std::size_t i = 0; i < trace::kEventCount; ++i)
    if (mask & (trace::EventMask{1} << i)) names.push_back(std::string(trace::kEventNames[i]));
  return names;
}

}  // namespace

std::unique_ptr<TraceSession> TraceSession::start(Control& ctl, uint64_t owner, const TraceOptions& opt,
                                                  Clock::time_point now, std::string* error, int* err) {
  *err = EINVAL;
  if (std::string e = check(opt); !e.empty()) return *error = e, nullptr;
  std::unique_ptr<TraceSession> t(new TraceSession);
  t->owner_ = owner;
  t->opt_ = opt;
  t->deadline_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.seconds));
  auto& devs = ctl.devices();
  for (std::size_t i = 0; i < devs.size(); ++i) {
    if (!opt.device.empty() && devs[i]->name() != opt.device) continue;
    for (std::size_t k = 0; k < devs[i]->lanes(); ++k) {
      const unsigned worker = devs[i]->driver->lane_worker_index(k);
      auto it = std::find_if(t->rings_.begin(), t->rings_.end(), [&](const Ring& r) { return r.worker == worker; });
      if (it == t->rings_.end())
        it = t->rings_.insert(t->rings_.end(), {worker, std::make_unique<dataplane::TraceRing>(opt.ring_records, opt.qp)});
      t->traced_.push_back({devs[i].get(), k, lane_port(i, k), static_cast<std::size_t>(it - t->rings_.begin())});
    }
  }
  if (t->traced_.empty()) {
    *err = ENODEV;
    return *error = "no device '" + opt.device + "'", nullptr;
  }
  t->fd_ = memfd_create("isoroce-trace", MFD_CLOEXEC);
  if (t->fd_ < 0) {
    *err = errno;
    return *error = std::string("memfd_create: ") + std::strerror(errno), nullptr;
  }
  // Attach last: from here on the workers produce. Each attach is a message to
  // the device's worker, which owns the engine (never touched from here; on a
  // port with lanes the message stops every lane's worker).
  for (Traced& tr : t->traced_) {
    DeviceEntry& d = *tr.dev;
    trace::Sink* sink = t->rings_[tr.ring].ring.get();
    d.run([&](sched::Picos) { d.lane_engine(tr.lane).attach_trace(sink, opt.mask, tr.port); });
  }
  t->active_ = true;
  log(LogLevel::kInfo, "trace started by client {}: {} device(s), {} s, events {}", owner, t->traced_.size(),
      opt.seconds, event_names(opt.mask).dump());
  return t;
}

TraceSession::~TraceSession() {
  finish();
  if (fd_ >= 0) close(fd_);
}

void TraceSession::flush(std::vector<trace::Record>& buf) {
  const uint64_t room = written_ < opt_.max_records ? opt_.max_records - written_ : 0;
  const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(room, buf.size()));
  truncated_ += buf.size() - n;
  const char* p = reinterpret_cast<const char*>(buf.data());
  std::size_t left = n * sizeof(trace::Record);
  while (left > 0) {
    const ssize_t w = write(fd_, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {  // ENOSPC/ENOMEM: what is not written is counted, the session goes on
      ++write_errors_;
      truncated_ += left / sizeof(trace::Record);
      break;
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
  written_ += n - (left / sizeof(trace::Record));
  buf.clear();
}

void TraceSession::drain() {
  std::vector<trace::Record> buf;
  buf.reserve(4096);
  for (Ring& rg : rings_) {
    rg.ring->drain([&](const trace::Record& r) {
      buf.push_back(r);
      if (buf.size() == buf.capacity()) flush(buf);
    });
    flush(buf);
  }
}

void TraceSession::finish() {
  if (!active_) return;
  for (Traced& tr : traced_) {
    DeviceEntry& d = *tr.dev;
    d.run([&](sched::Picos) { d.lane_engine(tr.lane).attach_trace(nullptr, 0, 0); });
  }
  for (Ring& rg : rings_) rg.dropped_at_finish = rg.ring->dropped();
  active_ = false;  // the workers no longer produce: the last drain is complete
  drain();
  const json s = summary();
  log(LogLevel::kInfo, "trace of client {} finished: {} record(s), {} dropped (ring full), {} truncated", owner_,
      written_, s["dropped"].get<uint64_t>(), truncated_);
}

int TraceSession::dup_fd() const { return fd_ < 0 ? -1 : fcntl(fd_, F_DUPFD_CLOEXEC, 0); }

json TraceSession::summary() const {
  json devs = json::array(), rings = json::array();
  for (const Ring& rg : rings_) {
    json ports = json::array();
    for (const Traced& tr : traced_)
      if (rings_[tr.ring].worker == rg.worker) ports.push_back(tr.port);
    rings.push_back({{"worker", rg.worker}, {"ports", ports}, {"ring_records", rg.ring->capacity()},
                     {"recorded", rg.ring->recorded()},
                     {"dropped", active_ ? rg.ring->dropped() : rg.dropped_at_finish}});
  }
  uint64_t dropped = 0;
  for (const json& r : rings) dropped += r["dropped"].get<uint64_t>();
  for (const Traced& tr : traced_)
    devs.push_back({{"port", tr.port}, {"name", tr.dev->name()}, {"lane", tr.lane}, {"lanes", tr.dev->lanes()},
                    {"worker", rings_[tr.ring].worker}});
  return {{"active", active_},     {"devices", devs},         {"rings", rings},  {"records", written_},
          {"dropped", dropped},    {"truncated", truncated_}, {"write_errors", write_errors_},
          {"events", event_names(opt_.mask)}, {"qp", opt_.qp},  {"device", opt_.device}, {"seconds", opt_.seconds},
          {"max_records", opt_.max_records},  {"record_bytes", sizeof(trace::Record)},
          {"time_unit", "ps since the daemon's TSC clock started"}};
}

}  // namespace isoroce::ctrl
