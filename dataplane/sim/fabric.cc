#include "dataplane/sim/fabric.h"

#include <algorithm>

#include "dataplane/sim/frame_edit.h"

namespace isoroce::sim {

double EcnConfig::probability(uint64_t q) const {
  if (!enabled || q < kmin_bytes) return 0.0;
  if (q > kmax_bytes) return 1.0;
  if (kmax_bytes == kmin_bytes) return pmax;
  return pmax * static_cast<double>(q - kmin_bytes) / static_cast<double>(kmax_bytes - kmin_bytes);
}

void QueueHistogram::record(Picos now, uint64_t new_len) {
  if (now > last_change && last_len > 0) {
    if (time.empty()) time.assign(buckets, 0);
    time[std::min<size_t>(last_len / bucket, buckets - 1)] += now - last_change;
  }
  last_change = std::max(last_change, now);
  last_len = new_len;
  max_len = std::max(max_len, new_len);
}

double QueueHistogram::percentile(double q, Picos end) const {
  if (end == 0) return 0;
  Picos busy = 0;
  for (Picos t : time) busy += t;
  const double want = q * static_cast<double>(end);
  double cum = static_cast<double>(end - std::min(end, busy));  // time at length 0
  if (cum >= want) return 0;
  for (size_t i = 0; i < time.size(); ++i) {
    cum += static_cast<double>(time[i]);
    if (cum >= want) return static_cast<double>(std::min<uint64_t>((i + 1) * bucket, max_len));
  }
  return static_cast<double>(max_len);
}

std::string_view validate(const FabricConfig& c) {
  if (c.ports.empty()) return "the fabric needs at least one port";
  for (const auto& p : c.ports)
    if (p.rate_bps == 0) return "a port rate is 0";
  for (size_t i = 0; i < c.ports.size(); ++i)
    for (size_t j = i + 1; j < c.ports.size(); ++j)
      if (c.ports[i].mac == c.ports[j].mac) return "two ports have one MAC address";
  if (c.buffer_bytes == 0) return "the switch buffer is 0 bytes";
  if (c.ecn.enabled) {
    if (c.ecn.kmin_bytes > c.ecn.kmax_bytes) return "ECN kmin is above kmax";
    if (!(c.ecn.pmax >= 0.0 && c.ecn.pmax <= 1.0)) return "ECN pmax is not in [0, 1]";
  }
  for (const FaultRate* f : {&c.faults.loss, &c.faults.corrupt, &c.faults.duplicate, &c.faults.reorder}) {
    if (!(f->p >= 0.0 && f->p <= 1.0)) return "a fault probability is not in [0, 1]";
    if (f->burst == 0) return "a fault burst is 0";
  }
  if (c.faults.reorder.p > 0 && c.faults.reorder_delay == 0) return "reorder delay is 0";
  if (c.pfc.enabled && (c.pfc.xoff_bytes == 0 || c.pfc.xon_bytes > c.pfc.xoff_bytes))
    return "PFC needs 0 < xon <= xoff";
  return {};
}

Fabric::Fabric(EventQueue& events, const FabricConfig& config) : events_(events), config_(config) {
  const size_t n = config_.ports.size();
  stats_.uplinks.resize(n);
  stats_.downlinks.resize(n);
  stats_.ports.resize(n);
  endpoints_.assign(n, nullptr);
  links_.resize(2 * n);
  ports_.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t id : {uplink_id(i), downlink_id(i)}) {
      Link& l = links_[id];
      l.cost = sched::byte_cost(config_.ports[i].rate_bps);
      l.delay = config_.link_delay;
      l.rng = Rng(component_seed(config_.seed, component::kLink + id));
      l.stats = id == uplink_id(i) ? &stats_.uplinks[i] : &stats_.downlinks[i];
    }
    ports_[i].rng = Rng(component_seed(config_.seed, component::kSwitchPort + i));
    ports_[i].hist.bucket = std::max<uint64_t>(1024, (config_.buffer_bytes + 4095) / 4096);
    ports_[i].hist.buckets = static_cast<size_t>(config_.buffer_bytes / ports_[i].hist.bucket + 2);
  }
}

int Fabric::port_of(const wire::MacAddr& mac) const {
  for (size_t i = 0; i < config_.ports.size(); ++i)
    if (config_.ports[i].mac == mac) return static_cast<int>(i);
  return -1;
}

Picos Fabric::serialization(uint32_t port, size_t len) const {
  return sched::duration(static_cast<uint32_t>(len + config_.frame_overhead), links_[uplink_id(port)].cost);
}

bool Fabric::draw(Link& l, const FaultRate& f, uint32_t& left) {
  if (left > 0) {
    --left;
    return true;
  }
  if (!l.rng.chance(f.p)) return false;
  left = f.burst - 1;
  return true;
}

Picos Fabric::transmit(uint32_t link_id, Picos start, FrameId frame) {
  Link& l = links_[link_id];
  const size_t len = pool_.size(frame);
  if (start < l.busy_until) {
    start = l.busy_until;
    ++l.stats->late_departures;
  }
  const Picos end = start + sched::duration(static_cast<uint32_t>(len + config_.frame_overhead), l.cost);
  l.busy_until = end;
  ++l.stats->frames;
  l.stats->bytes += len;

  const FaultConfig& f = config_.faults;
  if (f.any()) {
    if (draw(l, f.loss, l.loss_left)) {
      ++l.stats->lost;
      if (trace_.mask() != 0) trace_drop(start, link_id / 2, frame, FabricDrop::kLinkLoss);
      pool_.release(frame);
      return end;
    }
    if (draw(l, f.corrupt, l.corrupt_left)) {
      const BitRange r = corruptible_bits(pool_.span(frame));
      if (r.count > 0) {
        flip_bit(pool_.span(frame), r.first + l.rng.below(r.count));
        ++l.stats->corrupted;
      }
    }
    Picos arrival = end + l.delay;
    if (draw(l, f.duplicate, l.dup_left)) {
      ++l.stats->duplicated;
      events_.push(arrival, EventKind::kLinkArrival, link_id, pool_.clone(frame));
    }
    if (draw(l, f.reorder, l.reorder_left)) {
      ++l.stats->reordered;
      arrival += l.rng.between(1, f.reorder_delay);
    }
    // The duplicate, if any, was queued first: it arrives first and the
    // original right behind it (or later, when held back).
    events_.push(arrival, EventKind::kLinkArrival, link_id, frame);
    return end;
  }
  events_.push(end + l.delay, EventKind::kLinkArrival, link_id, frame);
  return end;
}

void Fabric::send(Picos now, uint32_t port, Picos departure, FrameId frame) {
  Link& l = links_[uplink_id(port)];
  if (l.paused || !l.held.empty()) [[unlikely]] {
    // PFC: the NIC holds the frame until its link may send again.
    l.held.emplace_back(std::max(now, departure), frame);
    return;
  }
  transmit(uplink_id(port), std::max(now, departure), frame);
}

void Fabric::set_paused(Picos now, uint32_t port, bool paused) {
  Link& l = links_[uplink_id(port)];
  if (paused == l.paused) return;
  l.paused = paused;
  if (paused) {
    l.paused_since = now;
    return;
  }
  stats_.ports[port].pause_time += now - l.paused_since;
  if (!l.held.empty()) events_.push(now, EventKind::kPfcPause, port, 2);  // drain
}

void Fabric::queue_changed(Picos now, uint32_t port) {
  SwitchPort& p = ports_[port];
  p.hist.record(now, p.queued_bytes);
}

void Fabric::ingress_changed(Picos now, uint32_t ingress) {
  if (!config_.pfc.enabled) return;
  SwitchPort& in = ports_[ingress];
  if (!in.pause_sent && in.ingress_bytes > config_.pfc.xoff_bytes) {
    in.pause_sent = true;
    ++stats_.ports[ingress].pauses;
    events_.push(now + config_.link_delay, EventKind::kPfcPause, ingress, 1);
  } else if (in.pause_sent && in.ingress_bytes <= config_.pfc.xon_bytes) {
    in.pause_sent = false;
    events_.push(now + config_.link_delay, EventKind::kPfcPause, ingress, 0);
  }
}

void Fabric::finish(Picos now) {
  for (uint32_t i = 0; i < ports_.size(); ++i) {
    SwitchPort& p = ports_[i];
    p.hist.record(now, p.queued_bytes);
    stats_.ports[i].queue_p50_bytes = p.hist.percentile(0.50, now);
    stats_.ports[i].queue_p99_bytes = p.hist.percentile(0.99, now);
    Link& l = links_[uplink_id(i)];
    if (l.paused) {
      stats_.ports[i].pause_time += now - l.paused_since;
      l.paused_since = now;
    }
  }
}

void Fabric::trace_drop(Picos now, uint32_t host, FrameId frame, FabricDrop why) {
  const auto bth = peek_bth(pool_.span(frame));
  trace::Record r;
  r.time = now;
  r.event = trace::Event::kDrop;
  r.qp = bth ? bth->dest_qp : trace::kNoQp;
  r.psn = bth ? bth->psn : 0;
  r.bytes = static_cast<uint32_t>(pool_.size(frame));
  // On the track of the QP it was for: the destination host's.
  r.port = static_cast<uint16_t>(bth && bth->dst_mac_tail != 0 ? bth->dst_mac_tail - 1u : host);
  r.a = static_cast<uint64_t>(why);
  trace_.sink()->record(r);
}

void Fabric::enqueue(Picos now, uint32_t port, FrameId frame, uint32_t ingress) {
  SwitchPort& p = ports_[port];
  PortStats& s = stats_.ports[port];
  const size_t len = pool_.size(frame);
  if (p.queued_bytes + len > config_.buffer_bytes) {
    ++s.drops;
    if (trace_.mask() != 0) trace_drop(now, port, frame, FabricDrop::kTailDrop);
    pool_.release(frame);
    return;
  }
  if (config_.ecn.enabled && !config_.ecn.on_dequeue) {
    auto bytes = pool_.span(frame);
    const uint8_t ecn = ecn_of(bytes);
    if (ecn == kEcnEct0 || ecn == kEcnEct1) {
      const double prob = config_.ecn.probability(p.queued_bytes);
      if (p.rng.chance(prob)) {
        set_ce(bytes);
        ++s.ecn_marked;
      }
    }
  }
  p.queue.push_back(frame);
  p.ingress.push_back(ingress);
  p.queued_bytes += len;
  ++s.enqueued;
  s.max_queue_bytes = std::max(s.max_queue_bytes, p.queued_bytes);
  queue_changed(now, port);
  ports_[ingress].ingress_bytes += len;
  ingress_changed(now, ingress);
  if (!p.busy) start_port(now, port);
}

void Fabric::start_port(Picos now, uint32_t port) {
  SwitchPort& p = ports_[port];
  const FrameId frame = p.queue.front();
  p.queue.pop_front();
  p.in_service_ingress = p.ingress.front();
  p.ingress.pop_front();
  p.busy = true;
  p.in_service_len = pool_.size(frame);
  PortStats& s = stats_.ports[port];
  if (config_.ecn.enabled && config_.ecn.on_dequeue) {
    auto bytes = pool_.span(frame);
    const uint8_t ecn = ecn_of(bytes);
    if ((ecn == kEcnEct0 || ecn == kEcnEct1) && p.rng.chance(config_.ecn.probability(p.queued_bytes - p.in_service_len))) {
      set_ce(bytes);
      ++s.ecn_marked;
    }
  }
  ++s.tx_frames;
  s.tx_bytes += p.in_service_len;
  const Picos end = transmit(downlink_id(port), now, frame);
  events_.push(end, EventKind::kPortTxDone, port);
}

void Fabric::handle(const Event& ev) {
  switch (ev.kind) {
    case EventKind::kLinkArrival: {
      const uint32_t link = ev.a;
      const auto frame = static_cast<FrameId>(ev.b);
      const uint32_t port = link / 2;
      if (link == uplink_id(port)) {
        // At the switch: forward by destination MAC.
        const auto& bytes = pool_.bytes(frame);
        wire::MacAddr dst{};
        if (bytes.size() >= 6) std::copy_n(bytes.begin(), 6, dst.begin());
        const int out = port_of(dst);
        if (out < 0) {
          ++stats_.unknown_destination;
          pool_.release(frame);
          return;
        }
        enqueue(ev.time, static_cast<uint32_t>(out), frame, port);
      } else {
        if (Endpoint* ep = endpoints_[port]) ep->on_frame(ev.time, pool_.span(frame));
        pool_.release(frame);
      }
      return;
    }
    case EventKind::kPortTxDone: {
      SwitchPort& p = ports_[ev.a];
      p.queued_bytes -= p.in_service_len;
      ports_[p.in_service_ingress].ingress_bytes -= p.in_service_len;
      p.in_service_len = 0;
      p.busy = false;
      queue_changed(ev.time, ev.a);
      ingress_changed(ev.time, p.in_service_ingress);
      if (!p.queue.empty()) start_port(ev.time, ev.a);
      return;
    }
    case EventKind::kPfcPause: {
      if (ev.b != 2) {
        set_paused(ev.time, ev.a, ev.b == 1);
        return;
      }
      // Drain: the link is free; send the next held frame, then come back.
      Link& l = links_[uplink_id(ev.a)];
      if (l.paused || l.held.empty()) return;
      const auto [dep, frame] = l.held.front();
      l.held.pop_front();
      const Picos end = transmit(uplink_id(ev.a), std::max(ev.time, dep), frame);
      if (!l.held.empty()) events_.push(end, EventKind::kPfcPause, ev.a, 2);
      return;
    }
    default:
      return;
  }
}

}  // namespace isoroce::sim
