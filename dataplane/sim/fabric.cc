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
  transmit(uplink_id(port), std::max(now, departure), frame);
}

void Fabric::enqueue(Picos now, uint32_t port, FrameId frame) {
  SwitchPort& p = ports_[port];
  PortStats& s = stats_.ports[port];
  const size_t len = pool_.size(frame);
  if (p.queued_bytes + len > config_.buffer_bytes) {
    ++s.drops;
    pool_.release(frame);
    return;
  }
  if (config_.ecn.enabled) {
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
  p.queued_bytes += len;
  ++s.enqueued;
  s.max_queue_bytes = std::max(s.max_queue_bytes, p.queued_bytes);
  if (!p.busy) start_port(now, port);
}

void Fabric::start_port(Picos now, uint32_t port) {
  SwitchPort& p = ports_[port];
  const FrameId frame = p.queue.front();
  p.queue.pop_front();
  p.busy = true;
  p.in_service_len = pool_.size(frame);
  PortStats& s = stats_.ports[port];
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
        enqueue(ev.time, static_cast<uint32_t>(out), frame);
      } else {
        if (Endpoint* ep = endpoints_[port]) ep->on_frame(ev.time, pool_.span(frame));
        pool_.release(frame);
      }
      return;
    }
    case EventKind::kPortTxDone: {
      SwitchPort& p = ports_[ev.a];
      p.queued_bytes -= p.in_service_len;
      p.in_service_len = 0;
      p.busy = false;
      if (!p.queue.empty()) start_port(ev.time, ev.a);
      return;
    }
    default:
      return;
  }
}

}  // namespace isoroce::sim
