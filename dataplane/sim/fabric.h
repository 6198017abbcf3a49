// The simulated fabric: every endpoint (host NIC) has a full-duplex link to one
// output-queued switch. A frame an endpoint sends crosses its uplink (rate of
// the endpoint's port, propagation delay, faults), is stored whole in the switch
// (store and forward), waits in the output queue of the destination's port
// (tail drop at the buffer limit, RED-style ECN marking on enqueue), is
// serialized at that port's rate onto the downlink (delay, faults again) and is
// handed to the destination endpoint.
//
// Times are picoseconds; a frame of L bytes occupies a link for
// sched::duration(L + frame_overhead, cost): the same bytes (preamble, FCS and
// inter-frame gap on top of the frame) and the same rounding as the engine's
// scheduler, so a host that sends at its line rate never builds a queue in a
// switch port of the same rate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "dataplane/sim/event_queue.h"
#include "sched/trace.h"
#include "dataplane/sim/frame_pool.h"
#include "dataplane/sim/rng.h"
#include "sched/time.h"
#include "transport/wire/packet.h"

namespace isoroce::sim {

// One fault with a probability per frame and a burst length: once it hits,
// the next burst - 1 frames get it too.
struct FaultRate {
  double p = 0.0;
  uint32_t burst = 1;
};

// Faults of one link direction, drawn per frame in this order: loss (the frame
// is gone), corruption (one random bit from the IP header on is flipped),
// duplication (a copy arrives right behind it), reorder (the frame is held back
// by a uniform random extra delay in [1 ps, reorder_delay], so frames behind it
// can overtake).
struct FaultConfig {
  FaultRate loss, corrupt, duplicate, reorder;
  Picos reorder_delay = 5'000'000;  // 5 us
  bool any() const { return loss.p > 0 || corrupt.p > 0 || duplicate.p > 0 || reorder.p > 0; }
};

// RED-style marking on enqueue: probability 0 below kmin bytes queued, rising
// linearly to pmax at kmax, 1 above kmax. Only ECT(0)/ECT(1) frames are marked.
struct EcnConfig {
  bool enabled = false;
  uint64_t kmin_bytes = 0;
  uint64_t kmax_bytes = 0;
  double pmax = 0.0;
  // Mark when the frame leaves the queue (by the bytes behind it), as the HPCC
  // ns-3 switch does, instead of on enqueue: the mark then reaches the
  // receiver without the queueing delay.
  bool on_dequeue = false;
  double probability(uint64_t queued_bytes) const;
};

// Priority flow control (802.1Qbb, one priority), per switch ingress port:
// when the bytes that came in on a port and still sit in the switch exceed
// xoff, the switch pauses that port's upstream link (the host's NIC stops
// starting frames one link delay later); below xon it resumes it.
struct PfcConfig {
  bool enabled = false;
  uint64_t xoff_bytes = 0;
  uint64_t xon_bytes = 0;
};

// Time-weighted distribution of a queue's length (bytes), in buckets of
// `bucket` bytes, allocated on first use.
struct QueueHistogram {
  uint64_t bucket = 1024;
  size_t buckets = 4097;
  std::vector<Picos> time;  // time[i]: picoseconds spent with length in [i * bucket, (i + 1) * bucket), length > 0
  Picos last_change = 0;
  uint64_t last_len = 0;
  uint64_t max_len = 0;
  void record(Picos now, uint64_t new_len);
  // The length (bytes) the queue stayed at or below for fraction q of [0, end):
  // 0 if it was empty that long, else the upper edge of a bucket (at most max_len).
  double percentile(double q, Picos end) const;
};

struct PortConfig {
  uint64_t rate_bps = 100'000'000'000;
  wire::MacAddr mac{};
};

struct FabricConfig {
  std::vector<PortConfig> ports;  // port i is endpoint i's
  Picos link_delay = 1'000'000;   // propagation, each link direction
  uint64_t buffer_bytes = 4 << 20;  // per switch output port (frame bytes)
  // Bytes a frame occupies on the wire beyond its own: preamble + SFD (8), FCS
  // (4), inter-frame gap (12), as the engine counts (kEthWireOverhead).
  uint32_t frame_overhead = 24;
  EcnConfig ecn;
  FaultConfig faults;  // on every link, both directions
  uint64_t seed = 1;
  PfcConfig pfc;
};

// Empty if the config is usable, else what is wrong with it.
std::string_view validate(const FabricConfig& config);

// trace::Event::kDrop's `a` for frames the fabric drops (the engine's own reasons,
// transport::DropReason, are below 16).
enum class FabricDrop : uint8_t {
  kTailDrop = 16,  // the switch's output queue was full
  kLinkLoss = 17,  // a link lost it (faults.loss)
};

class Endpoint {
 public:
  // A frame reached the endpoint at `now`. The fabric releases it on return.
  virtual void on_frame(Picos now, std::span<uint8_t> frame) = 0;

 protected:
  ~Endpoint() = default;
};

struct LinkStats {
  uint64_t frames = 0;  // offered to the link
  uint64_t bytes = 0;
  uint64_t lost = 0;
  uint64_t corrupted = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  uint64_t late_departures = 0;  // the sender asked for a start while the link was busy
};

struct PortStats {
  uint64_t enqueued = 0;
  uint64_t tx_frames = 0;
  uint64_t tx_bytes = 0;
  uint64_t drops = 0;       // tail drops at the buffer limit
  uint64_t ecn_marked = 0;
  uint64_t max_queue_bytes = 0;
  // Queue length over the run (time-weighted), filled by Fabric::finish().
  double queue_p50_bytes = 0, queue_p99_bytes = 0;
  // PFC: pause frames this port's ingress sent upstream, and how long its
  // upstream link (the host's uplink) was paused.
  uint64_t pauses = 0;
  Picos pause_time = 0;
};

struct FabricStats {
  std::vector<LinkStats> uplinks;    // endpoint i -> switch
  std::vector<LinkStats> downlinks;  // switch -> endpoint i
  std::vector<PortStats> ports;      // switch output port i (towards endpoint i)
  uint64_t unknown_destination = 0;  // frames to a MAC no port has
};

class Fabric {
 public:
  // The config must pass validate().
  Fabric(EventQueue& events, const FabricConfig& config);
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  void attach(uint32_t port, Endpoint* endpoint) { endpoints_[port] = endpoint; }
  FramePool& pool() { return pool_; }

  // Endpoint `port` starts sending `frame` on its uplink at `departure` (at or
  // after now; a start while the link is still busy is moved to when it is
  // free and counted). The fabric owns the frame from here.
  // Records every frame the fabric drops as trace::Event::kDrop (port: the host
  // it was for, qp: its BTH destination QP, a: FabricDrop) into sink if kDrop is in mask.
  void set_trace(trace::Sink* sink, trace::EventMask mask) { trace_.attach(sink, mask & trace::bit(trace::Event::kDrop), 0); }
  void send(Picos now, uint32_t port, Picos departure, FrameId frame);

  // Handles a fabric event (kind below EventKind::kFirstUser).
  void handle(const Event& ev);
  // Closes the time-weighted statistics at `now` (queue percentiles, pause time).
  void finish(Picos now);

  // Frames anywhere in the fabric (links, switch queues) or held by a sender.
  size_t in_flight() const { return pool_.in_use(); }
  size_t num_ports() const { return ports_.size(); }
  // The switch port a destination MAC leads to, or -1.
  int port_of(const wire::MacAddr& mac) const;
  // Bytes queued at switch port i, the frame being serialized included.
  uint64_t queued_bytes(uint32_t port) const { return ports_[port].queued_bytes; }
  const FabricStats& stats() const { return stats_; }
  // Time a frame of `len` bytes (overhead included) lasts on port i's links.
  Picos serialization(uint32_t port, size_t len) const;

 private:
  void trace_drop(Picos now, uint32_t host, FrameId frame, FabricDrop why);
  trace::Tracer trace_;
  struct Link {
    sched::ByteCost cost = 0;
    Picos delay = 0;
    Picos busy_until = 0;
    Rng rng;
    uint32_t loss_left = 0, corrupt_left = 0, dup_left = 0, reorder_left = 0;
    LinkStats* stats = nullptr;
    // PFC (uplinks only): frames held while paused, in order.
    bool paused = false;
    Picos paused_since = 0;
    std::deque<std::pair<Picos, FrameId>> held;  // (requested departure, frame)
  };
  struct SwitchPort {
    std::deque<FrameId> queue;
    uint64_t queued_bytes = 0;
    bool busy = false;
    size_t in_service_len = 0;
    Rng rng;
    // PFC: the ingress port of each queued frame (parallel to queue) and of
    // the frame in service; bytes in the switch that came in on this port.
    std::deque<uint32_t> ingress;
    uint32_t in_service_ingress = 0;
    uint64_t ingress_bytes = 0;
    bool pause_sent = false;
    QueueHistogram hist;
  };

  // Serializes the frame on link `id` from `start` (or when the link frees);
  // schedules its arrival (or loses it). Returns the end of serialization.
  Picos transmit(uint32_t link_id, Picos start, FrameId frame);
  bool draw(Link& l, const FaultRate& f, uint32_t& left);
  void enqueue(Picos now, uint32_t port, FrameId frame, uint32_t ingress);
  void start_port(Picos now, uint32_t port);
  void queue_changed(Picos now, uint32_t port);
  void ingress_changed(Picos now, uint32_t ingress);
  void set_paused(Picos now, uint32_t port, bool paused);

  static uint32_t uplink_id(uint32_t port) { return 2 * port; }
  static uint32_t downlink_id(uint32_t port) { return 2 * port + 1; }

  EventQueue& events_;
  FabricConfig config_;
  FramePool pool_;
  std::vector<Link> links_;
  std::vector<SwitchPort> ports_;
  std::vector<Endpoint*> endpoints_;
  FabricStats stats_;
};

}  // namespace isoroce::sim
