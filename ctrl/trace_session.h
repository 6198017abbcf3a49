// A live trace of the daemon's devices (docs/profiling.md, "On the daemon";
// `isoroce-ctl trace`). One at a time, started by a privileged client, bounded
// in time and size.
//
// Each worker that runs a traced device gets one dataplane::TraceRing, attached
// to each of its traced devices' engines (every lane's, on a port with lanes:
// each lane's engine to the ring of the worker that runs it) by a message to the worker
// (Executor::call: the worker is the ring's only producer, and nothing else
// touches the engine). One ring per worker, not per device, keeps the records
// of one worker's devices in the order the worker made them: records of one
// poll pass share its time, and a frame one device sends and another receives
// in the same pass must stay in that order. The control thread
// drains the rings (drain(), every few milliseconds while the session runs)
// into a memfd that the client received when the session started, as raw
// 40-byte trace::Records; the client turns them into a trace file (sorted by
// time: the rings are drained one after another). A record's port is the
// device's index, plus 256 x the lane on lane k >= 1 of a port with lanes
// (lane_port()), so each lane is its own track. A ring that
// is full drops the record and counts it; the memfd takes at most
// max_records, the rest is counted as truncated. Neither ever blocks a worker.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/dpdk/trace_ring.h"
#include "sched/trace.h"

namespace isoroce::ctrl {

class Control;
struct DeviceEntry;

struct TraceOptions {
  double seconds = 1;                            // (0, kMaxTraceSeconds]
  trace::EventMask mask = trace::kAllEvents;
  uint32_t qp = 0;                               // 0: every QP
  std::string device;                            // "": every device
  std::size_t ring_records = 65536;              // per worker (rounded up to a power of two)
  uint64_t max_records = 4u << 20;               // in the memfd; beyond: truncated
};

// The port field of lane `lane`'s records of device `index`: index alone for lane 0.
inline constexpr uint16_t lane_port(std::size_t index, std::size_t lane) {
  return static_cast<uint16_t>(index + (lane << 8));
}

inline constexpr double kMaxTraceSeconds = 600;
inline constexpr std::size_t kMaxTraceRingRecords = std::size_t{1} << 22;  // 160 MiB per worker
inline constexpr uint64_t kMaxTraceRecords = uint64_t{1} << 24;          // 640 MiB in the memfd

class TraceSession {
 public:
  using Clock = std::chrono::steady_clock;

  // Makes the memfd and the rings, attaches them on each device's worker.
  // nullptr and *error (with *err an errno) on a bad option or no memfd.
  static std::unique_ptr<TraceSession> start(Control& ctl, uint64_t owner, const TraceOptions& opt,
                                             Clock::time_point now, std::string* error, int* err);
  ~TraceSession();
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;

  // Control thread: moves what the rings hold into the memfd.
  void drain();
  // Detaches every ring (on its worker), drains what is left. Idempotent.
  void finish();
  bool active() const { return active_; }
  bool expired(Clock::time_point now) const { return now >= deadline_; }
  uint64_t owner() const { return owner_; }
  // A duplicate of the memfd (the caller sends and closes it), or -1.
  int dup_fd() const;
  // {active, devices: [{port, name, lane, lanes, worker}] (one per lane), rings: [{worker, ports,
  //  ring_records, recorded, dropped}], records, dropped, truncated, events,
  //  qp, seconds, record_bytes, time_unit}
  nlohmann::json summary() const;

 private:
  struct Ring {
    unsigned worker;
    std::unique_ptr<dataplane::TraceRing> ring;
    uint64_t dropped_at_finish = 0;
  };
  struct Traced {
    DeviceEntry* dev;
    std::size_t lane;
    uint16_t port;  // lane_port()
    std::size_t ring;  // index in rings_
  };
  TraceSession() = default;
  void flush(std::vector<trace::Record>& buf);

  uint64_t owner_ = 0;
  TraceOptions opt_;
  Clock::time_point deadline_;
  int fd_ = -1;
  bool active_ = false;
  std::vector<Ring> rings_;
  std::vector<Traced> traced_;
  uint64_t written_ = 0;    // records in the memfd
  uint64_t truncated_ = 0;  // drained but over max_records
  uint64_t write_errors_ = 0;
};

}  // namespace isoroce::ctrl
